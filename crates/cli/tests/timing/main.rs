//! The integration tests that assert measured wall-clock time, or decisions drawn from it.
//! Each takes `serial::one_at_a_time()` first, so it runs alone, or, for a decision with a
//! wide margin (a lab's or a sharded sweep's steps), `serial::beside_decisions()`, so it runs
//! only beside other such tests: `cargo test` runs test binaries one after another, and
//! nextest puts this binary in its `timing` test group (.config/nextest.toml). No other
//! test competes with them for the cores.

mod bench_sim;
#[path = "../common/mod.rs"]
mod common;
mod engine_metrics;
mod lab_sim;
mod predict_cli;
mod reasoning;
mod scale_local;
#[path = "../../../../testdata/serial.rs"]
mod serial;
mod sweep_shards;
mod workloads;
