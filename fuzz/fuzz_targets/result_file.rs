//! A result file of vLLM, SGLang, GuideLLM or servelab: the importer never panics.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = servelab_store::parse_result_text(&String::from_utf8_lossy(data), "fuzz.json");
});
