//! The crate's integration tests, one binary (one link of the workspace) for all of them.

mod deploy;
mod gpu;
mod identity;
mod load;
mod pareto;
mod reasoning;
mod report;
mod rules;
mod seeds;
