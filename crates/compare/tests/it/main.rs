//! The crate's integration tests, one binary (one link of the workspace) for all of them.

mod deploy;
mod identity;
mod reasoning;
mod report;
mod rules;
mod seeds;
