//! Incremental Server-Sent Events framing.
//!
//! Network reads split events anywhere, including inside a multi-byte UTF-8 character, so the
//! parser works on bytes and only hands out the `data` payload of *complete* events. Text is
//! decoded once per event, never per network read.

/// The largest SSE event accepted, in bytes, counted up to and including the blank line that
/// ends it: 16 MiB. A real event is a few hundred bytes (a token or two of JSON); a server
/// that sends more without an event boundary (one endless line, a large non-SSE body) fails
/// the request instead of growing the buffer without end. The parser never holds more than
/// this many bytes (nor reserves more).
pub const MAX_EVENT_BYTES: usize = 16 << 20;

/// Splits a byte stream into SSE event payloads (the joined `data:` lines of each event).
#[derive(Debug)]
pub struct SseParser {
    buf: Vec<u8>,
    /// Where to resume searching for an event boundary, so a long event is not rescanned.
    scan_from: usize,
    /// The largest event accepted ([`MAX_EVENT_BYTES`] unless set).
    limit: usize,
}

impl Default for SseParser {
    fn default() -> Self {
        Self::with_limit(MAX_EVENT_BYTES)
    }
}

/// One complete event's data.
#[derive(Debug, PartialEq, Eq)]
pub enum SseData {
    /// The payload, UTF-8 checked.
    Text(String),
    /// The payload was not valid UTF-8.
    InvalidUtf8,
}

/// An event grew past the parser's limit; the parser dropped what it held.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("an SSE event exceeded the {} limit on one event", human_bytes(*.limit))]
pub struct EventTooLarge {
    /// The parser's limit on one event, in bytes.
    pub limit: usize,
}

/// `16 MiB`, `64 KiB`, `100 bytes`.
pub(crate) fn human_bytes(n: usize) -> String {
    if n >= 1 << 20 && n % (1 << 20) == 0 {
        format!("{} MiB", n >> 20)
    } else if n >= 1 << 10 && n % (1 << 10) == 0 {
        format!("{} KiB", n >> 10)
    } else {
        format!("{n} bytes")
    }
}

impl SseParser {
    /// A parser that accepts events of at most [`MAX_EVENT_BYTES`].
    pub fn new() -> Self {
        Self::default()
    }

    /// A parser that accepts events of at most `limit` bytes (at least 4).
    pub fn with_limit(limit: usize) -> Self {
        Self { buf: Vec::new(), scan_from: 0, limit: limit.max(4) }
    }

    /// Feed bytes from one network read; append each completed event's data to `out`.
    /// Events with no `data` field (comments such as `: ping`, bare `event:` lines) are skipped.
    /// An event longer than the limit is an error; events completed before it are in `out`.
    pub fn push(&mut self, mut bytes: &[u8], out: &mut Vec<SseData>) -> Result<(), EventTooLarge> {
        while !bytes.is_empty() {
            if self.buf.is_empty() {
                // Common case: the read starts at an event boundary. Scan it in place and keep
                // only an incomplete tail, instead of copying every byte through the buffer.
                let mut start = 0;
                while let Some((end, next)) = find_boundary(bytes, start) {
                    if next - start > self.limit {
                        return Err(self.overflow());
                    }
                    if let Some(data) = event_data(&bytes[start..end]) {
                        out.push(data);
                    }
                    start = next;
                }
                let tail = &bytes[start..];
                if tail.len() > self.limit {
                    return Err(self.overflow());
                }
                self.append(tail);
                self.scan_from = self.buf.len().saturating_sub(3);
                return Ok(());
            }
            // An event is pending: add no more than it may still grow by, so the buffer stays
            // within the limit; whatever completes it is scanned, the rest goes round again.
            let room = self.limit - self.buf.len();
            if room == 0 {
                return Err(self.overflow());
            }
            let (now, later) = bytes.split_at(bytes.len().min(room));
            bytes = later;
            self.append(now);
            let mut start = 0;
            while let Some((end, next)) = find_boundary(&self.buf, start.max(self.scan_from)) {
                if let Some(data) = event_data(&self.buf[start..end]) {
                    out.push(data);
                }
                start = next;
                self.scan_from = next;
            }
            if start > 0 {
                self.buf.drain(..start);
            }
            // A boundary may straddle reads ("\r\n" then "\r\n"): rescan the last 3 bytes.
            self.scan_from = self.buf.len().saturating_sub(3);
        }
        Ok(())
    }

    /// Append to the buffer, growing it by doubling but never past the limit (a plain
    /// `extend` could reserve up to twice the limit).
    fn append(&mut self, bytes: &[u8]) {
        let need = self.buf.len() + bytes.len();
        if need > self.buf.capacity() {
            let target = (self.buf.capacity() * 2).max(need).min(self.limit).max(need);
            self.buf.reserve_exact(target - self.buf.len());
        }
        self.buf.extend_from_slice(bytes);
    }

    fn overflow(&mut self) -> EventTooLarge {
        self.buf = Vec::new();
        self.scan_from = 0;
        EventTooLarge { limit: self.limit }
    }

    /// Bytes received that do not yet form a complete event.
    pub fn pending(&self) -> &[u8] {
        &self.buf
    }

    /// Bytes the parser holds memory for (at most the limit).
    pub fn capacity(&self) -> usize {
        self.buf.capacity()
    }
}

/// The first event boundary (a blank line) at or after `from`: returns (end of event, start of next).
fn find_boundary(buf: &[u8], from: usize) -> Option<(usize, usize)> {
    let mut i = from;
    while i < buf.len() {
        if buf[i] == b'\n' {
            if buf.get(i + 1) == Some(&b'\n') {
                return Some((i, i + 2));
            }
            if buf.get(i + 1) == Some(&b'\r') && buf.get(i + 2) == Some(&b'\n') {
                return Some((i, i + 3));
            }
        } else if buf[i] == b'\r' && buf.get(i + 1) == Some(&b'\r') {
            return Some((i, i + 2));
        }
        i += 1;
    }
    None
}

/// Joined `data:` field values of one event (per the SSE spec: one optional space after the
/// colon is dropped; multiple data lines join with '\n').
fn event_data(event: &[u8]) -> Option<SseData> {
    let mut data: Option<Vec<u8>> = None;
    for line in event.split(|&b| b == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let Some(rest) = line.strip_prefix(b"data:") else { continue };
        let value = rest.strip_prefix(b" ").unwrap_or(rest);
        match &mut data {
            None => data = Some(value.to_vec()),
            Some(d) => {
                d.push(b'\n');
                d.extend_from_slice(value);
            }
        }
    }
    data.map(|d| match String::from_utf8(d) {
        Ok(s) => SseData::Text(s),
        Err(_) => SseData::InvalidUtf8,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(parts: &[&[u8]]) -> Vec<SseData> {
        let mut p = SseParser::new();
        let mut out = Vec::new();
        for part in parts {
            p.push(part, &mut out).unwrap();
        }
        out
    }

    fn text(s: &str) -> SseData {
        SseData::Text(s.into())
    }

    #[test]
    fn splits_events_and_strips_data_prefix() {
        let out = feed(&[b"data: {\"a\":1}\n\ndata: [DONE]\n\n"]);
        assert_eq!(out, vec![text("{\"a\":1}"), text("[DONE]")]);
    }

    #[test]
    fn events_split_across_reads_at_every_byte() {
        let stream = "data: {\"t\":\"h\u{e9}llo \u{1F600}\"}\r\n\r\ndata: x\n\n".as_bytes();
        for cut in 0..stream.len() {
            let out = feed(&[&stream[..cut], &stream[cut..]]);
            assert_eq!(out, vec![text("{\"t\":\"h\u{e9}llo \u{1F600}\"}"), text("x")], "cut {cut}");
        }
    }

    #[test]
    fn byte_by_byte_and_whole_give_the_same_events() {
        let stream = b"data: a\n\n: c\n\ndata: b\r\n\r\ndata: x\ndata: y\n\ndata: [DONE]\n\n";
        let whole = feed(&[stream]);
        let pieces: Vec<&[u8]> = stream.chunks(1).collect();
        assert_eq!(feed(&pieces), whole);
        let threes: Vec<&[u8]> = stream.chunks(3).collect();
        assert_eq!(feed(&threes), whole);
        assert_eq!(whole, vec![text("a"), text("b"), text("x\ny"), text("[DONE]")]);
    }

    #[test]
    fn comments_and_fields_without_data_are_skipped_and_multiline_data_joins() {
        let out = feed(&[b": ping\n\nevent: x\nid: 3\n\ndata:a\ndata: b\n\n"]);
        assert_eq!(out, vec![text("a\nb")]);
    }

    #[test]
    fn incomplete_tail_is_pending_and_invalid_utf8_is_flagged() {
        let mut p = SseParser::new();
        let mut out = Vec::new();
        p.push(b"data: \xff\xfe\n\ndata: par", &mut out).unwrap();
        assert_eq!(out, vec![SseData::InvalidUtf8]);
        assert_eq!(p.pending(), b"data: par");
    }

    #[test]
    fn an_event_up_to_the_limit_passes_and_one_byte_more_fails() {
        // "data: " + 92 bytes + "\n\n" = 100 bytes.
        let ev = format!("data: {}\n\n", "x".repeat(92)).into_bytes();
        assert_eq!(ev.len(), 100);
        let mut out = Vec::new();
        assert_eq!(SseParser::with_limit(100).push(&ev, &mut out), Ok(()));
        assert_eq!(out, vec![text(&"x".repeat(92))]);
        let too_big = format!("data: {}\n\n", "x".repeat(93)).into_bytes();
        let mut p = SseParser::with_limit(100);
        assert_eq!(p.push(&too_big, &mut out), Err(EventTooLarge { limit: 100 }));
        // Fed a byte at a time, the same: the limit does not depend on how reads split.
        for (bytes, ok) in [(&ev, true), (&too_big, false)] {
            let mut p = SseParser::with_limit(100);
            let mut out = Vec::new();
            let r: Result<(), EventTooLarge> =
                bytes.iter().try_for_each(|b| p.push(&[*b], &mut out));
            assert_eq!(r.is_ok(), ok);
            assert!(p.capacity() <= 100, "{}", p.capacity());
        }
    }

    #[test]
    fn an_endless_line_fails_at_the_limit_and_the_buffer_stays_within_it() {
        let mut p = SseParser::with_limit(1000);
        let mut out = Vec::new();
        let piece = [b'a'; 64];
        let mut fed = 0;
        let err = loop {
            match p.push(&piece, &mut out) {
                Ok(()) => fed += piece.len(),
                Err(e) => break e,
            }
            assert!(p.pending().len() <= 1000 && p.capacity() <= 1000, "{}", p.capacity());
        };
        assert_eq!(err, EventTooLarge { limit: 1000 });
        assert_eq!(fed, 960);
        assert!(p.pending().is_empty() && p.capacity() == 0, "the buffer is released");
        assert_eq!(err.to_string(), "an SSE event exceeded the 1000 bytes limit on one event");
        assert_eq!(
            EventTooLarge { limit: MAX_EVENT_BYTES }.to_string(),
            "an SSE event exceeded the 16 MiB limit on one event"
        );
    }

    #[test]
    fn a_large_read_of_many_small_events_is_not_limited_by_its_size() {
        let stream = "data: {\"t\":1}\n\n".repeat(100);
        let mut p = SseParser::with_limit(64);
        let mut out = Vec::new();
        // Once from an event boundary, once from inside a pending event.
        p.push(stream.as_bytes(), &mut out).unwrap();
        p.push(b"data: {", &mut out).unwrap();
        p.push(format!("}}\n\n{stream}").as_bytes(), &mut out).unwrap();
        assert_eq!(out.len(), 201);
        assert!(p.pending().is_empty());
    }

    #[test]
    fn human_bytes_names_whole_units() {
        assert_eq!(human_bytes(16 << 20), "16 MiB");
        assert_eq!(human_bytes(64 << 10), "64 KiB");
        assert_eq!(human_bytes(1500), "1500 bytes");
    }
}
