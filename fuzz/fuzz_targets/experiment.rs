//! A lab experiment file: the parser never panics.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = servelab_lab::config::parse(&String::from_utf8_lossy(data));
});
