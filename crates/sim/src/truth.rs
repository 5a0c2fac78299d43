//! The ground truth: one record per finished request, kept in memory and optionally appended
//! as JSON lines by a background writer thread (the stream path only sends on a channel).

use std::io::Write;
use std::path::Path;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use serde::{Deserialize, Serialize};

/// What the server really did for one request.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct TruthRecord {
    /// Value of the request's `x-request-id` header, if sent.
    pub request_id: Option<String>,
    /// Order of arrival at the server.
    pub seq: u64,
    /// "completions" | "chat".
    pub endpoint: String,
    /// Tokens in the prompt, as the server counted them.
    pub prompt_tokens: u64,
    /// Output tokens sent (fewer than planned when the stream was cut short).
    pub completion_tokens: u64,
    /// Time waiting for a `--max-num-seqs` slot, in ns (0 when it did not wait).
    pub queue_ns: u64,
    /// Every SSE event that carried tokens (one chunk for a non-streaming response).
    pub chunks: Vec<TruthChunk>,
    /// "ok" | the fault kind applied | "bad-request" | "aborted" (client or shutdown).
    pub outcome: String,
    /// The images of a chat request, in message order (empty for text-only requests and for
    /// requests rejected before parsing).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<ImageSeen>,
    /// With `--truth-text`: the prompt as the server rendered it (a chat request's template
    /// text: `<|role|>\ncontent\n` per message, then `<|assistant|>\n`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
    /// With `--truth-text`: the answer text the server sent (reasoning excluded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply: Option<String>,
    /// Of `completion_tokens`, the first this-many were reasoning (`--reasoning-tokens`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub reasoning_tokens: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// One image a chat request carried as a `data:` URL, as the server decoded it.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImageSeen {
    /// Pixel width from the image header.
    pub width: u32,
    /// Pixel height from the image header.
    pub height: u32,
    /// Size of the decoded image file in bytes.
    pub bytes: u64,
    /// Prompt tokens counted for it (see `api::image_tokens`).
    pub tokens: u64,
}

/// One token-carrying event: offsets in ns from the moment the request (headers + body) was
/// received; `actual_ns` is when the body frame was handed to hyper.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub struct TruthChunk {
    /// Tokens the event carried.
    pub tokens: u32,
    /// When the timing model (or the engine model's step) said the event was due.
    pub intended_ns: u64,
    /// When the event was actually handed to hyper (`actual_ns - intended_ns` is the sim's
    /// own lateness).
    pub actual_ns: u64,
}

enum Msg {
    Record(TruthRecord),
    Flush(mpsc::SyncSender<()>),
}

/// The most truth records kept in memory. A simulator serving a soak test of millions of
/// requests must not keep them all (the file, when asked for, has every one); a bench against
/// the built-in simulator reads the account of its own run, which keeps whole at most
/// `--keep-records` (100,000 by default) requests plus warm-ups.
pub(crate) const MAX_TRUTH_IN_MEMORY: usize = 250_000;

/// The latest records in memory plus the optional file writer.
pub(crate) struct TruthSink {
    memory: Mutex<Kept>,
    tx: Mutex<Option<mpsc::Sender<Msg>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

/// The latest records, after `dropped` older ones.
#[derive(Default)]
struct Kept {
    dropped: usize,
    records: std::collections::VecDeque<TruthRecord>,
}

impl std::fmt::Debug for TruthSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TruthSink").finish_non_exhaustive()
    }
}

impl TruthSink {
    /// A sink; with `path`, records are also appended there (file created or truncated).
    pub(crate) fn new(path: Option<&Path>) -> std::io::Result<Arc<Self>> {
        let (tx, thread) = match path {
            None => (None, None),
            Some(p) => {
                let file = std::fs::File::create(p)?;
                let (tx, rx) = mpsc::channel();
                let t = std::thread::Builder::new()
                    .name("servelab-sim-truth".into())
                    .spawn(move || write_loop(file, rx))?;
                (Some(tx), Some(t))
            }
        };
        Ok(Arc::new(Self {
            memory: Mutex::new(Kept::default()),
            tx: Mutex::new(tx),
            thread: Mutex::new(thread),
        }))
    }

    /// Keep one finished request's record (and queue it for the file, if any).
    pub(crate) fn push(&self, rec: TruthRecord) {
        if let Some(tx) = self.tx.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
            let _ = tx.send(Msg::Record(rec.clone()));
        }
        let mut kept = self.memory.lock().unwrap_or_else(|e| e.into_inner());
        if kept.records.len() >= MAX_TRUTH_IN_MEMORY {
            kept.records.pop_front();
            kept.dropped += 1;
        }
        kept.records.push_back(rec);
    }

    /// Every record kept (the latest [`MAX_TRUTH_IN_MEMORY`]).
    pub(crate) fn snapshot(&self) -> Vec<TruthRecord> {
        self.memory.lock().unwrap_or_else(|e| e.into_inner()).records.iter().cloned().collect()
    }

    /// Records finished so far (kept or not).
    pub(crate) fn len(&self) -> usize {
        let kept = self.memory.lock().unwrap_or_else(|e| e.into_inner());
        kept.dropped + kept.records.len()
    }

    /// The records from the `start`-th on (those of one run of several against one server),
    /// as far as they are still kept.
    pub(crate) fn since(&self, start: usize) -> Vec<TruthRecord> {
        let kept = self.memory.lock().unwrap_or_else(|e| e.into_inner());
        let from = start.saturating_sub(kept.dropped);
        kept.records.iter().skip(from).cloned().collect()
    }

    /// Wait until every record pushed so far is written to the file.
    pub(crate) fn flush(&self) {
        let tx = self.tx.lock().unwrap_or_else(|e| e.into_inner()).clone();
        if let Some(tx) = tx {
            let (ack_tx, ack_rx) = mpsc::sync_channel(1);
            if tx.send(Msg::Flush(ack_tx)).is_ok() {
                let _ = ack_rx.recv();
            }
        }
    }

    /// Flush and stop the writer thread.
    pub(crate) fn close(&self) {
        self.flush();
        self.tx.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(t) = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take() {
            let _ = t.join();
        }
    }
}

/// Buffered writes; flushed whenever the channel runs dry, so the file lags by at most the
/// records in flight.
fn write_loop(file: std::fs::File, rx: mpsc::Receiver<Msg>) {
    let mut out = std::io::BufWriter::with_capacity(1 << 16, file);
    while let Ok(mut msg) = rx.recv() {
        loop {
            match msg {
                Msg::Record(r) => {
                    if serde_json::to_writer(&mut out, &r).is_ok() {
                        let _ = out.write_all(b"\n");
                    }
                }
                Msg::Flush(ack) => {
                    let _ = out.flush();
                    let _ = ack.send(());
                }
            }
            match rx.try_recv() {
                Ok(m) => msg = m,
                Err(_) => break,
            }
        }
        let _ = out.flush();
    }
    let _ = out.flush();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(seq: u64) -> TruthRecord {
        TruthRecord {
            request_id: Some(format!("servelab-{seq}")),
            seq,
            endpoint: "chat".into(),
            prompt_tokens: 3,
            completion_tokens: 2,
            queue_ns: 0,
            chunks: vec![TruthChunk { tokens: 2, intended_ns: 10, actual_ns: 12 }],
            outcome: "ok".into(),
            images: Vec::new(),
            prompt: None,
            reply: None,
            reasoning_tokens: 0,
        }
    }

    #[test]
    fn writes_json_lines_and_keeps_memory() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("truth.jsonl");
        let sink = TruthSink::new(Some(&path)).unwrap();
        sink.push(rec(0));
        sink.push(rec(1));
        sink.close();
        let text = std::fs::read_to_string(&path).unwrap();
        let back: Vec<TruthRecord> =
            text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(back, vec![rec(0), rec(1)]);
        assert_eq!(sink.snapshot().len(), 2);
    }

    #[test]
    fn memory_keeps_the_latest_records_and_counts_all() {
        let sink = TruthSink::new(None).unwrap();
        let n = MAX_TRUTH_IN_MEMORY + 3;
        for i in 0..n {
            sink.push(rec(i as u64));
        }
        assert_eq!(sink.len(), n);
        assert_eq!(sink.snapshot().len(), MAX_TRUTH_IN_MEMORY);
        assert_eq!(sink.since(n - 2), vec![rec(n as u64 - 2), rec(n as u64 - 1)]);
        // A mark before the oldest kept gives what is kept.
        assert_eq!(sink.since(0).len(), MAX_TRUTH_IN_MEMORY);
        assert_eq!(sink.since(0)[0], rec(3));
    }
}
