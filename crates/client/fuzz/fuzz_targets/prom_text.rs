//! A `/metrics` body: the Prometheus text parser and the engine-series reduction never
//! panic, and every kept value is finite.
#![no_main]

use libfuzzer_sys::fuzz_target;
use servelab_client::prom::{engine_series, parse};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let _ = parse(&text);
    assert!(engine_series(&text).values().all(|v| v.is_finite()));
});
