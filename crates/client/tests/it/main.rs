//! The crate's integration tests, one binary (one link of the workspace) for all of them.

mod clock;
#[path = "../common/mod.rs"]
mod common;
mod headers;
mod hostile;
mod properties;
mod readiness;
mod retries;
