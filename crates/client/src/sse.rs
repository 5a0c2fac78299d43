//! Incremental Server-Sent Events framing.
//!
//! Network reads split events anywhere, including inside a multi-byte UTF-8 character, so the
//! parser works on bytes and only hands out the `data` payload of *complete* events. Text is
//! decoded once per event, never per network read.

/// Splits a byte stream into SSE event payloads (the joined `data:` lines of each event).
#[derive(Debug, Default)]
pub struct SseParser {
    buf: Vec<u8>,
    /// Where to resume searching for an event boundary, so a long event is not rescanned.
    scan_from: usize,
}

/// One complete event's data.
#[derive(Debug, PartialEq, Eq)]
pub enum SseData {
    /// The payload, UTF-8 checked.
    Text(String),
    /// The payload was not valid UTF-8.
    InvalidUtf8,
}

impl SseParser {
    pub fn new() -> Self {
        Self::default()
    }

    /// Feed bytes from one network read; append each completed event's data to `out`.
    /// Events with no `data` field (comments such as `: ping`, bare `event:` lines) are skipped.
    pub fn push(&mut self, bytes: &[u8], out: &mut Vec<SseData>) {
        if self.buf.is_empty() {
            // Common case: the read starts at an event boundary. Scan it in place and keep
            // only an incomplete tail, instead of copying every byte through the buffer.
            let mut start = 0;
            while let Some((end, next)) = find_boundary(bytes, start) {
                if let Some(data) = event_data(&bytes[start..end]) {
                    out.push(data);
                }
                start = next;
            }
            self.buf.extend_from_slice(&bytes[start..]);
            self.scan_from = self.buf.len().saturating_sub(3);
            return;
        }
        self.buf.extend_from_slice(bytes);
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

    /// Bytes received that do not yet form a complete event.
    pub fn pending(&self) -> &[u8] {
        &self.buf
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
            p.push(part, &mut out);
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
        p.push(b"data: \xff\xfe\n\ndata: par", &mut out);
        assert_eq!(out, vec![SseData::InvalidUtf8]);
        assert_eq!(p.pending(), b"data: par");
    }
}
