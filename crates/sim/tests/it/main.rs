//! The crate's integration tests, one binary (one link of the workspace) for all of them.

mod api;
#[path = "../common/mod.rs"]
mod common;
mod faults;
mod models;
mod quirks;
