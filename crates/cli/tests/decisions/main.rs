//! The integration tests whose assertions are decisions drawn from measured wall-clock time
//! with wide margins: a lab's greedy steps (gains of 68–430 % against a 10 % bar, a 4× slower
//! option rejected), interleaved launches judged against their spread, and the steps of
//! sharded runs, which both shards take from the same merged figures. They run beside each
//! other (they mostly wait on simulated engines, a few percent of a core each) and never
//! beside another binary's tests: `cargo test` runs test binaries one after another, and
//! nextest puts this binary in its `timing` test group (.config/nextest.toml). A test that
//! asserts measured time itself goes in `timing`.

// Each binary uses part of the shared helpers.
#[allow(dead_code)]
#[path = "../common/mod.rs"]
mod common;
mod lab;
mod sweep_shards;
