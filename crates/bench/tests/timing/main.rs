//! The integration tests that assert measured wall-clock time. Each takes
//! `serial::one_at_a_time()` first, so they run one at a time and alone: `cargo test` runs
//! test binaries one after another, and nextest puts this binary in its `timing` test group
//! (.config/nextest.toml). No other test competes with them for the cores.

#[path = "../common/mod.rs"]
mod common;
mod load;
#[path = "../../../../testdata/serial.rs"]
mod serial;
mod shards;
