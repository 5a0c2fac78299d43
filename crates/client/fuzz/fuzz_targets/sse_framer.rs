//! The SSE framer on arbitrary bytes: never panics, never holds more than its limit, and
//! frames the same events however the bytes are split into reads.
#![no_main]

use libfuzzer_sys::fuzz_target;
use servelab_client::sse::SseParser;

fuzz_target!(|data: &[u8]| {
    // The first byte picks the read size and the limit; the rest is the stream.
    let Some((&knob, stream)) = data.split_first() else { return };
    let read = usize::from(knob % 17) + 1;
    let limit = 4 + usize::from(knob) * 8;

    let mut whole = Vec::new();
    SseParser::with_limit(usize::MAX).push(stream, &mut whole).unwrap();

    let mut p = SseParser::with_limit(limit);
    let mut split = Vec::new();
    let mut overflowed = false;
    for piece in stream.chunks(read) {
        let r = p.push(piece, &mut split);
        assert!(p.pending().len() <= limit && p.capacity() <= limit);
        if r.is_err() {
            overflowed = true;
            break;
        }
    }
    if overflowed {
        assert!(whole.starts_with(&split));
    } else {
        assert_eq!(split, whole);
    }
});
