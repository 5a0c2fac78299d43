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

/// Splits a byte stream into SSE event payloads (the joined `data:` lines of each event), as
/// the WHATWG event-stream grammar reads it: lines end at CRLF, LF or a lone CR, a blank line
/// ends an event, a leading UTF-8 byte-order mark is skipped, comments and other fields are
/// ignored.
#[derive(Debug)]
pub struct SseParser {
    /// The current event's data so far (`data_len` bytes), then the line being read.
    buf: Vec<u8>,
    /// How many leading bytes of `buf` are the event's data.
    data_len: usize,
    /// The current event has a `data` field (its data may be empty).
    has_data: bool,
    /// Bytes of the current event in completed lines, terminators included.
    event_len: usize,
    /// The last byte read was a CR: an LF right after it belongs to the same line end.
    after_cr: bool,
    /// Leading bytes matched against the byte-order mark; `None` once past the stream start.
    bom: Option<usize>,
    /// The stream began with a byte-order mark.
    saw_bom: bool,
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

const BOM: &[u8; 3] = b"\xEF\xBB\xBF";

impl SseParser {
    /// A parser that accepts events of at most [`MAX_EVENT_BYTES`].
    pub fn new() -> Self {
        Self::default()
    }

    /// A parser that accepts events of at most `limit` bytes (at least 4).
    pub fn with_limit(limit: usize) -> Self {
        Self {
            buf: Vec::new(),
            data_len: 0,
            has_data: false,
            event_len: 0,
            after_cr: false,
            bom: Some(0),
            saw_bom: false,
            limit: limit.max(4),
        }
    }

    /// Feed bytes from one network read; append each completed event's data to `out`.
    /// Events with no `data` field (comments such as `: ping`, bare `event:` lines) are skipped.
    /// An event longer than the limit is an error; events completed before it are in `out`.
    pub fn push(&mut self, mut bytes: &[u8], out: &mut Vec<SseData>) -> Result<(), EventTooLarge> {
        if let Some(matched) = self.bom {
            // The mark may arrive split over reads; bytes that turn out not to be it are
            // stream bytes after all.
            let mut m = matched;
            while m < BOM.len() && bytes.first() == Some(&BOM[m]) {
                m += 1;
                bytes = &bytes[1..];
            }
            if m == BOM.len() {
                self.bom = None;
                self.saw_bom = true;
            } else if bytes.is_empty() {
                self.bom = Some(m);
                return Ok(());
            } else {
                self.bom = None;
                self.scan(&BOM[..m], out)?;
            }
        }
        self.scan(bytes, out)
    }

    fn scan(&mut self, mut bytes: &[u8], out: &mut Vec<SseData>) -> Result<(), EventTooLarge> {
        while !bytes.is_empty() {
            if std::mem::take(&mut self.after_cr) && bytes[0] == b'\n' {
                self.event_len += 1;
                bytes = &bytes[1..];
                continue;
            }
            let Some(i) = bytes.iter().position(|&b| b == b'\n' || b == b'\r') else {
                let line = self.buf.len() - self.data_len;
                if self.event_len + line + bytes.len() > self.limit {
                    return Err(self.overflow());
                }
                self.append(bytes);
                return Ok(());
            };
            // The line is the partial one held plus this read's bytes up to the terminator.
            self.event_len += self.buf.len() - self.data_len + i + 1;
            if self.event_len > self.limit {
                return Err(self.overflow());
            }
            if self.buf.len() == self.data_len {
                // Common case: the whole line is in this read; no copy into the buffer.
                self.line(&bytes[..i], out);
            } else {
                self.append(&bytes[..i]);
                let line = self.buf.split_off(self.data_len);
                self.line(&line, out);
            }
            if bytes[i] == b'\r' {
                self.after_cr = true;
            }
            bytes = &bytes[i + 1..];
        }
        Ok(())
    }

    /// One complete line (without its terminator).
    fn line(&mut self, line: &[u8], out: &mut Vec<SseData>) {
        if line.is_empty() {
            self.dispatch(out);
            return;
        }
        let (field, value) = match line.iter().position(|&b| b == b':') {
            Some(0) => return, // a comment
            Some(c) => {
                let v = &line[c + 1..];
                (&line[..c], v.strip_prefix(b" ").unwrap_or(v))
            }
            None => (line, &b""[..]),
        };
        if field != b"data" {
            return; // event, id, retry and unknown fields do not change the data
        }
        if self.has_data {
            self.append(b"\n");
        }
        self.append(value);
        self.data_len = self.buf.len();
        self.has_data = true;
    }

    /// End the current event: hand out its data, if it had any.
    fn dispatch(&mut self, out: &mut Vec<SseData>) {
        if self.has_data {
            let mut data = std::mem::take(&mut self.buf);
            data.truncate(self.data_len);
            out.push(match String::from_utf8(data) {
                Ok(s) => SseData::Text(s),
                Err(_) => SseData::InvalidUtf8,
            });
        }
        self.buf.clear();
        self.data_len = 0;
        self.has_data = false;
        self.event_len = 0;
    }

    /// The body ended: an event whose lines all ended but that lacked its closing blank line
    /// is handed out (a server that closes right after `data: [DONE]\n` meant it). A
    /// half-sent line stays pending: see [`SseParser::in_event`].
    pub fn finish(&mut self, out: &mut Vec<SseData>) {
        if self.has_data && self.buf.len() == self.data_len {
            self.dispatch(out);
        }
    }

    /// True when the bytes so far end inside an event: a partial line, or data lines not yet
    /// closed by a blank line.
    pub fn in_event(&self) -> bool {
        self.has_data || self.buf.len() > self.data_len
    }

    /// The stream began with a UTF-8 byte-order mark (skipped).
    pub fn saw_bom(&self) -> bool {
        self.saw_bom
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
        self.data_len = 0;
        self.has_data = false;
        self.event_len = 0;
        EventTooLarge { limit: self.limit }
    }

    /// Bytes held that do not yet form a complete event: the event's data so far and the
    /// line being read.
    pub fn pending(&self) -> &[u8] {
        &self.buf
    }

    /// Bytes the parser holds memory for (at most the limit).
    pub fn capacity(&self) -> usize {
        self.buf.capacity()
    }
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
    fn cr_only_line_ends_split_lines_and_events_at_every_cut() {
        let stream = b"id: 1\rdata: a\rdata: b\r\rdata: [DONE]\r\r";
        for cut in 0..stream.len() {
            let out = feed(&[&stream[..cut], &stream[cut..]]);
            assert_eq!(out, vec![text("a\nb"), text("[DONE]")], "cut {cut}");
        }
        // CRLF split between reads is one line end, not a line end and a blank line.
        assert_eq!(feed(&[b"data: a\r", b"\ndata: b\r\n\r\n"]), vec![text("a\nb")]);
    }

    #[test]
    fn a_leading_byte_order_mark_is_skipped_even_when_split() {
        let stream = b"\xEF\xBB\xBFdata: first\n\ndata: second\n\n";
        for cut in 0..6 {
            let mut p = SseParser::new();
            let mut out = Vec::new();
            p.push(&stream[..cut], &mut out).unwrap();
            p.push(&stream[cut..], &mut out).unwrap();
            assert_eq!(out, vec![text("first"), text("second")], "cut {cut}");
            assert!(p.saw_bom());
        }
        // Only at the start; bytes that begin like a mark but are not one are kept.
        let mut p = SseParser::new();
        let mut out = Vec::new();
        p.push(b"\xEF", &mut out).unwrap();
        p.push(b"data: x\n\n", &mut out).unwrap();
        assert!(!p.saw_bom());
        assert_eq!(out, vec![], "the stray byte made the field name \\xEFdata");
        assert_eq!(feed(&[b"data: a\n\n\xEF\xBB\xBFdata: b\n\n"]), vec![text("a")]);
    }

    #[test]
    fn a_field_without_colon_and_finish_at_the_end_of_the_body() {
        assert_eq!(feed(&[b"data\n\n"]), vec![text("")]);
        let mut p = SseParser::new();
        let mut out = Vec::new();
        p.push(b"data: [DONE]\n", &mut out).unwrap();
        assert!(out.is_empty() && p.in_event());
        p.finish(&mut out);
        assert_eq!(out, vec![text("[DONE]")]);
        assert!(!p.in_event());
        // A half-sent line is not an event.
        let mut p = SseParser::new();
        p.push(b"data: {\"a\"", &mut out).unwrap();
        p.finish(&mut out);
        assert_eq!(out.len(), 1);
        assert!(p.in_event());
        // Comments alone leave nothing pending.
        let mut p = SseParser::new();
        p.push(b": ping\n\n: ping\n", &mut out).unwrap();
        assert!(!p.in_event());
    }

    #[test]
    fn human_bytes_names_whole_units() {
        assert_eq!(human_bytes(16 << 20), "16 MiB");
        assert_eq!(human_bytes(64 << 10), "64 KiB");
        assert_eq!(human_bytes(1500), "1500 bytes");
    }
}
