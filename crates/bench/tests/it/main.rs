//! The crate's integration tests, one binary (one link of the workspace) for all of them.

#[path = "../common/mod.rs"]
mod common;
#[path = "../../../../testdata/dcgm.rs"]
mod dcgm;
mod gpu;
mod shards;
