//! The crate's integration tests, one binary (one link of the workspace) for all of them.

mod gpu;
mod load;
mod pareto;
mod render;
mod standard;
