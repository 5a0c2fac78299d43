//! The integration tests that assert measured wall-clock time. A replay takes
//! `serial::one_at_a_time()` first, so it runs alone; the clock readings take
//! `serial::beside_each_other()`, so they run beside each other (each mostly waits for its
//! server's second boundaries) and never beside a replay. `cargo test` runs test binaries one
//! after another, and nextest puts this binary in its `timing` test group
//! (.config/nextest.toml). No other binary's test competes with them for the cores.

mod clock;
#[path = "../common/mod.rs"]
mod common;
mod replay;
#[path = "../../../../testdata/serial.rs"]
mod serial;
