//! One SSE event's data as the OpenAI parser and the llama.cpp timings reader see it:
//! never panics, and a usage it accepts is within bounds.
#![no_main]

use libfuzzer_sys::fuzz_target;
use servelab_client::openai::{parse_event, MAX_TOKENS};
use servelab_client::server_timings::from_event;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(ev) = parse_event(text) {
        if let Some(u) = ev.usage {
            assert!(u.prompt_tokens <= MAX_TOKENS && u.completion_tokens <= MAX_TOKENS);
        }
    }
    if let Some(t) = from_event(text) {
        for ms in [t.prompt_ms, t.generation_ms].into_iter().flatten() {
            assert!(ms.is_finite() && ms >= 0.0);
        }
    }
});
