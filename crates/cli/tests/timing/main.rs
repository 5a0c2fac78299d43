//! The integration tests that assert measured wall-clock time. Each takes
//! `serial::one_at_a_time()` first, so it runs alone: `cargo test` runs test binaries one
//! after another, and nextest puts this binary in its `timing` test group
//! (.config/nextest.toml). No other test competes with them for the cores. (Decisions drawn
//! from measured time with wide margins are the `decisions` binary's.)

mod bench_sim;
// Each binary uses part of the shared helpers.
#[allow(dead_code)]
#[path = "../common/mod.rs"]
mod common;
mod engine_metrics;
mod predict_cli;
mod reasoning;
mod scale_local;
#[path = "../../../../testdata/serial.rs"]
mod serial;
mod workloads;
