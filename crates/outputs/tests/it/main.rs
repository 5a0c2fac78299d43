//! The crate's integration tests, one binary (one link of the workspace) for all of them.

mod pareto;
mod render;
mod standard;
