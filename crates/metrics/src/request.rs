//! What one record says about one request: latencies, token counts and gap samples.
//!
//! Pure functions of a single [`RequestRecord`]; the collector calls them once per record.
//! All arithmetic is done on integer nanoseconds and converted to milliseconds last, so a
//! latency is exact to the nanosecond the client measured.

use serde::{Deserialize, Serialize};
use servelab_records::{Chunk, ChunkKind, Nanos, Outcome, RequestRecord, SessionTurn};

pub use crate::stats::ms;

/// One request, as the summary and the per-request outputs (CSV, JSONL) show it.
///
/// Times are milliseconds since the run origin; latencies are milliseconds. A field is `None`
/// when the record does not have what it needs (no first token, no end, unknown counts).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RequestRow {
    /// Position in the arrival schedule (0-based).
    pub index: u64,
    /// When the schedule said the request arrives.
    pub scheduled_ms: f64,
    /// When it was due to be sent (arrival, or a freed concurrency slot if later).
    pub intended_ms: f64,
    /// When its bytes were handed to the connection.
    pub sent_ms: f64,
    /// When the first output text arrived.
    pub first_token_ms: Option<f64>,
    /// When the response ended.
    pub end_ms: Option<f64>,
    /// First output text (reasoning or content) minus intended send.
    pub ttft_ms: Option<f64>,
    /// First answer content minus intended send; only when the response had reasoning text.
    pub ttfc_ms: Option<f64>,
    /// `(e2el − ttft) / (output_tokens − 1)`, only for ≥ 2 output tokens.
    pub tpot_ms: Option<f64>,
    /// End minus intended send.
    pub e2el_ms: Option<f64>,
    /// Sent minus intended: the tool's own lateness.
    pub schedule_lag_ms: f64,
    /// Intended minus scheduled: waiting for a max-concurrency slot.
    pub client_queue_ms: f64,
    /// The longest the client took to handle bytes after they arrived (kernel receive
    /// time), when the platform gives receive times: the tool's own overhead on the response.
    pub read_lag_ms: Option<f64>,
    /// Server-reported prompt tokens, else the client's count.
    pub prompt_tokens: Option<u64>,
    /// Server-reported completion tokens, else the sum of chunk counts.
    pub output_tokens: Option<u64>,
    /// Sum of per-chunk token counts, when every chunk's count is known.
    pub retokenized_tokens: Option<u64>,
    /// Output-carrying chunks (non-empty text).
    pub chunks: u64,
    /// Gap between consecutive output chunks (one per chunk after the first), milliseconds.
    pub itl_chunk_ms: Vec<f64>,
    /// HTTP status, if headers arrived.
    pub status: Option<u16>,
    /// `"success"` or the failure kind (`"timeout"`, `"http_status"`, ...).
    pub outcome: String,
    /// The failure message, for failed requests.
    pub error: Option<String>,
    /// Multi-turn runs: the session (in start order) and the turn (0-based) this request was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<SessionTurn>,
    /// Reasoning models: the reasoning and answer phases, when the response had reasoning.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<crate::reasoning::PhaseRow>,
}

impl RequestRow {
    /// True when the request succeeded.
    pub fn is_success(&self) -> bool {
        self.outcome == "success"
    }
}

/// Chunks that carried output text, in order: the only ones that mark a token's arrival.
fn text_chunks(r: &RequestRecord) -> impl Iterator<Item = &Chunk> {
    r.chunks.iter().filter(|c| !c.text.is_empty())
}

/// Prompt tokens: the server's `usage.prompt_tokens`, else the client's count.
pub fn prompt_tokens(r: &RequestRecord) -> Option<u64> {
    r.usage.map(|u| u.prompt_tokens).or(r.prompt_tokens)
}

/// Sum of chunk token counts, when every chunk's count is known.
pub fn retokenized_tokens(r: &RequestRecord) -> Option<u64> {
    r.chunks.iter().try_fold(0u64, |acc, c| c.tokens.map(|t| acc.saturating_add(u64::from(t))))
}

/// True when any chunk carried reasoning text.
pub fn has_reasoning(r: &RequestRecord) -> bool {
    r.chunks.iter().any(|c| c.kind == ChunkKind::Reasoning && !c.text.is_empty())
}

/// Gaps between consecutive text chunks, in nanoseconds (vLLM's per-chunk "ITL").
pub fn chunk_gaps_ns(r: &RequestRecord) -> Vec<u64> {
    let mut prev: Option<Nanos> = None;
    let mut out = Vec::new();
    for c in text_chunks(r) {
        if let Some(p) = prev {
            out.push(c.t_ns.saturating_sub(p));
        }
        prev = Some(c.t_ns);
    }
    out
}

/// Per-token inter-token latencies in milliseconds.
///
/// A text chunk carrying `k` tokens that arrived `g` after the previous token-carrying chunk
/// contributes `k` samples of `g / k`. The first chunk's extra tokens have no observed gap and
/// contribute nothing. A chunk whose count is unknown counts as one token; a text chunk with a
/// count of 0 contributes nothing and its gap carries into the next chunk's.
pub fn itl_per_token_ms(r: &RequestRecord) -> Vec<f64> {
    let mut prev: Option<Nanos> = None;
    let mut out = Vec::new();
    for c in text_chunks(r) {
        let k = c.tokens.unwrap_or(1);
        if k == 0 {
            continue;
        }
        if let Some(p) = prev {
            let g = ms(c.t_ns.saturating_sub(p)) / f64::from(k);
            out.extend(std::iter::repeat_n(g, k as usize));
        }
        prev = Some(c.t_ns);
    }
    out
}

/// Output tokens per arrival time, for throughput windows: each text chunk's count (1 when
/// unknown). Second element: whether any count was unknown.
pub fn token_events(r: &RequestRecord) -> (Vec<(Nanos, u64)>, bool) {
    let mut unknown = false;
    let events = r
        .chunks
        .iter()
        .filter_map(|c| match c.tokens {
            Some(0) => None,
            Some(k) => Some((c.t_ns, u64::from(k))),
            None if c.text.is_empty() => None,
            None => {
                unknown = true;
                Some((c.t_ns, 1))
            }
        })
        .collect();
    (events, unknown)
}

/// Builds the row for one record.
pub fn row(r: &RequestRecord) -> RequestRow {
    let first = r.first_token_ns();
    let ttft_ns = first.map(|t| t.saturating_sub(r.intended_ns));
    let e2el_ns = r.end_ns.map(|t| t.saturating_sub(r.intended_ns));
    let output_tokens = r.output_tokens();
    let tpot_ms = match (ttft_ns, e2el_ns, output_tokens) {
        (Some(ttft), Some(e2el), Some(n)) if n >= 2 => {
            Some(ms(e2el.saturating_sub(ttft)) / (n - 1) as f64)
        }
        _ => None,
    };
    let ttfc_ms = if has_reasoning(r) {
        r.first_content_ns().map(|t| ms(t.saturating_sub(r.intended_ns)))
    } else {
        None
    };
    let (outcome, error) = match &r.outcome {
        Outcome::Success => ("success".to_string(), None),
        Outcome::Failure { kind, message } => (kind.as_str().to_string(), Some(message.clone())),
    };
    RequestRow {
        index: r.index,
        scheduled_ms: ms(r.scheduled_ns),
        intended_ms: ms(r.intended_ns),
        sent_ms: ms(r.sent_ns),
        first_token_ms: first.map(ms),
        end_ms: r.end_ns.map(ms),
        ttft_ms: ttft_ns.map(ms),
        ttfc_ms,
        tpot_ms,
        e2el_ms: e2el_ns.map(ms),
        schedule_lag_ms: ms(r.sent_ns.saturating_sub(r.intended_ns)),
        client_queue_ms: ms(r.intended_ns.saturating_sub(r.scheduled_ns)),
        read_lag_ms: r.read_lag_ns.map(ms),
        prompt_tokens: prompt_tokens(r),
        output_tokens,
        retokenized_tokens: retokenized_tokens(r),
        chunks: text_chunks(r).count() as u64,
        itl_chunk_ms: chunk_gaps_ns(r).into_iter().map(ms).collect(),
        status: r.status,
        outcome,
        error,
        session: r.session,
        reasoning: crate::reasoning::phases(r),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use servelab_records::{FailureKind, Usage};

    pub(crate) fn chunk(t_ms: u64, kind: ChunkKind, text: &str, tokens: Option<u32>) -> Chunk {
        Chunk { t_ns: t_ms * 1_000_000, kind, text: text.into(), tokens }
    }

    pub(crate) fn content(t_ms: u64, tokens: u32) -> Chunk {
        chunk(t_ms, ChunkKind::Content, "x", Some(tokens))
    }

    /// A successful record intended at `intended_ms`, sent 1 ms later, ending at `end_ms`.
    pub(crate) fn record(
        index: u64,
        intended_ms: u64,
        end_ms: u64,
        chunks: Vec<Chunk>,
    ) -> RequestRecord {
        RequestRecord {
            index,
            warmup: false,
            scheduled_ns: intended_ms * 1_000_000,
            intended_ns: intended_ms * 1_000_000,
            sent_ns: (intended_ms + 1) * 1_000_000,
            prompt_tokens: Some(10),
            max_tokens: Some(16),
            usage: None,
            chunks,
            end_ns: Some(end_ms * 1_000_000),
            status: Some(200),
            outcome: Outcome::Success,
            server: None,
            read_lag_ns: None,
            retries: 0,
            session: None,
            stream: Default::default(),
        }
    }

    #[test]
    fn multi_token_chunks_spread_their_gap_over_their_tokens() {
        // First chunk at 100 ms with 2 tokens, then 3 tokens 30 ms later, then 1 token 10 ms later.
        let r = record(0, 0, 150, vec![content(100, 2), content(130, 3), content(140, 1)]);
        assert_eq!(itl_per_token_ms(&r), vec![10.0, 10.0, 10.0, 10.0]);
        assert_eq!(chunk_gaps_ns(&r), vec![30_000_000, 10_000_000]);
        let row = row(&r);
        assert_eq!(row.ttft_ms, Some(100.0));
        assert_eq!(row.e2el_ms, Some(150.0));
        assert_eq!(row.output_tokens, Some(6));
        assert_eq!(row.retokenized_tokens, Some(6));
        // (150 − 100) / (6 − 1)
        assert_eq!(row.tpot_ms, Some(10.0));
        assert_eq!(row.itl_chunk_ms, vec![30.0, 10.0]);
        assert_eq!(row.schedule_lag_ms, 1.0);
        assert_eq!(row.chunks, 3);
        assert_eq!(row.ttfc_ms, None);
    }

    #[test]
    fn empty_and_zero_token_chunks_do_not_break_gaps() {
        let r = record(
            0,
            0,
            100,
            vec![
                chunk(5, ChunkKind::Content, "", None), // role-only event
                content(20, 1),
                chunk(30, ChunkKind::Content, "x", Some(0)), // a fragment retokenized to 0
                content(40, 2),
                chunk(50, ChunkKind::Content, "", Some(0)), // usage-only event
            ],
        );
        assert_eq!(itl_per_token_ms(&r), vec![10.0, 10.0]);
        assert_eq!(chunk_gaps_ns(&r), vec![10_000_000, 10_000_000]);
        let (events, unknown) = token_events(&r);
        assert_eq!(events, vec![(20_000_000, 1), (40_000_000, 2)]);
        assert!(!unknown);
    }

    #[test]
    fn usage_wins_and_tpot_needs_two_tokens() {
        let mut r = record(0, 0, 100, vec![content(40, 1)]);
        assert_eq!(row(&r).tpot_ms, None);
        r.usage = Some(Usage { prompt_tokens: 7, completion_tokens: 4, reasoning_tokens: None });
        let row = row(&r);
        assert_eq!(row.prompt_tokens, Some(7));
        assert_eq!(row.output_tokens, Some(4));
        assert_eq!(row.retokenized_tokens, Some(1));
        assert_eq!(row.tpot_ms, Some(20.0));
    }

    #[test]
    fn reasoning_gives_ttfc_and_failures_keep_their_message() {
        let mut r = record(
            3,
            10,
            100,
            vec![chunk(30, ChunkKind::Reasoning, "hm", Some(1)), content(60, 1)],
        );
        r.outcome = Outcome::Failure { kind: FailureKind::Reset, message: "eof".into() };
        let row = row(&r);
        assert_eq!(row.ttft_ms, Some(20.0));
        assert_eq!(row.ttfc_ms, Some(50.0));
        assert_eq!(row.outcome, "reset");
        assert_eq!(row.error.as_deref(), Some("eof"));
        assert!(!row.is_success());
    }
}
