//! Reasoning models: the two phases of a response, thinking and answering, measured apart.
//!
//! The client labels every output chunk reasoning or answer (`servelab_client::reasoning`:
//! the `reasoning_content` / `reasoning` fields, or `<think>…</think>` in the content, where
//! one chunk may hold the end of one phase and the start of the other). From those labels,
//! per request, all times from the intended send and every count per token:
//!
//! * **TTFT-reasoning** (`ttfr`): the first chunk carrying reasoning.
//! * **TTFA** (`ttfa`, time to first answer token): the first chunk carrying answer text.
//! * **reasoning tokens** `R` and **answer tokens** `A`: the sums of the chunks' token counts
//!   by phase (the chunk holding both phases split as the client recorded it), so a chunk of
//!   several tokens counts them all.
//! * **reasoning TPOT**: `(t_last_reasoning − t_first_reasoning) / (R − 1)`, for `R ≥ 2`;
//!   **answer TPOT**: `(t_last_answer − ttfa_time) / (A − 1)`, for `A ≥ 2` — each phase's own
//!   TPOT, as vLLM defines TPOT for a whole response.
//!
//! A request has these figures only when it had reasoning; a run has a [`ReasoningSummary`]
//! only when some completed request had.

use serde::{Deserialize, Serialize};
use servelab_records::{ChunkKind, RequestRecord};

use crate::stats::{ms, Distribution};

/// One request's reasoning and answer phases (see the module doc for the definitions).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct PhaseRow {
    /// First reasoning chunk minus intended send, ms.
    pub ttfr_ms: Option<f64>,
    /// First answer chunk minus intended send, ms; `None` when no answer came.
    pub ttfa_ms: Option<f64>,
    /// Reasoning tokens; `None` when a chunk's count is unknown.
    pub reasoning_tokens: Option<u64>,
    /// Answer tokens; `None` when a chunk's count is unknown.
    pub answer_tokens: Option<u64>,
    /// `(last − first reasoning chunk) / (R − 1)`, ms, for `R ≥ 2`.
    pub reasoning_tpot_ms: Option<f64>,
    /// `(last − first answer chunk) / (A − 1)`, ms, for `A ≥ 2`.
    pub answer_tpot_ms: Option<f64>,
}

/// One phase's first and last chunk times and token count, as it is accumulated.
#[derive(Default)]
struct Phase {
    first: Option<u64>,
    last: Option<u64>,
    tokens: Option<u64>,
}

impl Phase {
    fn new() -> Phase {
        Phase { first: None, last: None, tokens: Some(0) }
    }

    /// A chunk of this phase at `t` with `tokens` of it (`None`: unknown); `text`: it
    /// carried text of this phase (a usage-only chunk marks no arrival).
    fn add(&mut self, t: u64, text: bool, tokens: Option<u64>) {
        if text {
            self.first.get_or_insert(t);
            self.last = Some(t);
        }
        self.tokens = match (self.tokens, tokens) {
            (Some(a), Some(b)) => Some(a.saturating_add(b)),
            _ => None,
        };
    }

    fn tpot_ms(&self) -> Option<f64> {
        let (first, last, n) = (self.first?, self.last?, self.tokens?);
        (n >= 2).then(|| ms(last.saturating_sub(first)) / (n - 1) as f64)
    }
}

/// The phases of one response; `None` when it carried no reasoning.
pub fn phases(r: &RequestRecord) -> Option<PhaseRow> {
    let think = r.stream.think.unwrap_or_default();
    let (mut reasoning, mut answer) = (Phase::new(), Phase::new());
    for (i, c) in r.chunks.iter().enumerate() {
        let tokens = c.tokens.map(u64::from);
        let text = !c.text.is_empty();
        match c.kind {
            ChunkKind::Reasoning => reasoning.add(c.t_ns, text, tokens),
            ChunkKind::Content if think.mixed_chunk == Some(i as u32) => {
                // The chunk ending the reasoning and beginning the answer: both phases.
                let head = think.reasoning_tokens.map(u64::from);
                let rest = match (tokens, head) {
                    (Some(k), Some(h)) => Some(k.saturating_sub(h)),
                    _ => None,
                };
                reasoning.add(c.t_ns, think.reasoning_bytes > 0, head);
                answer.add(c.t_ns, text, rest);
            }
            ChunkKind::Content => answer.add(c.t_ns, text, tokens),
        }
    }
    reasoning.first?;
    let since = |t: Option<u64>| t.map(|t| ms(t.saturating_sub(r.intended_ns)));
    Some(PhaseRow {
        ttfr_ms: since(reasoning.first),
        ttfa_ms: since(answer.first),
        reasoning_tokens: reasoning.tokens,
        answer_tokens: answer.tokens,
        reasoning_tpot_ms: reasoning.tpot_ms(),
        answer_tpot_ms: answer.tpot_ms(),
    })
}

/// The reasoning figures of a run: over its completed requests that had reasoning.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReasoningSummary {
    /// Completed requests that had reasoning.
    pub requests: u64,
    /// Reasoning tokens of those requests, summed (known counts only).
    pub total_reasoning_tokens: u64,
    /// Answer tokens of those requests, summed (known counts only).
    pub total_answer_tokens: u64,
    /// Time to the first reasoning token, ms.
    pub ttfr_ms: Distribution,
    /// Time to the first answer token, ms (requests that got an answer).
    pub ttfa_ms: Distribution,
    /// Reasoning tokens per request.
    pub reasoning_tokens: Distribution,
    /// Answer tokens per request.
    pub answer_tokens: Distribution,
    /// TPOT of the reasoning phase, ms.
    pub reasoning_tpot_ms: Distribution,
    /// TPOT of the answer phase, ms.
    pub answer_tpot_ms: Distribution,
}

impl ReasoningSummary {
    /// The named distributions in report order, with their keys.
    pub fn distributions(&self) -> [(&'static str, &Distribution); 6] {
        [
            ("ttfr", &self.ttfr_ms),
            ("ttfa", &self.ttfa_ms),
            ("reasoning_tpot", &self.reasoning_tpot_ms),
            ("answer_tpot", &self.answer_tpot_ms),
            ("reasoning_tokens", &self.reasoning_tokens),
            ("answer_tokens", &self.answer_tokens),
        ]
    }
}

/// The run's reasoning figures from the phases of its completed requests that had reasoning;
/// `None` when there are none.
pub fn summarize<'a>(
    phases: impl IntoIterator<Item = &'a PhaseRow>,
    percentiles: &[f64],
) -> Option<ReasoningSummary> {
    let phases: Vec<&PhaseRow> = phases.into_iter().collect();
    if phases.is_empty() {
        return None;
    }
    let dist = |f: &dyn Fn(&PhaseRow) -> Option<f64>| {
        Distribution::from_unsorted(phases.iter().filter_map(|p| f(p)).collect(), percentiles)
    };
    let total = |f: &dyn Fn(&PhaseRow) -> Option<u64>| {
        phases.iter().filter_map(|p| f(p)).fold(0u64, u64::saturating_add)
    };
    Some(ReasoningSummary {
        requests: phases.len() as u64,
        total_reasoning_tokens: total(&|p| p.reasoning_tokens),
        total_answer_tokens: total(&|p| p.answer_tokens),
        ttfr_ms: dist(&|p| p.ttfr_ms),
        ttfa_ms: dist(&|p| p.ttfa_ms),
        reasoning_tokens: dist(&|p| p.reasoning_tokens.map(|n| n as f64)),
        answer_tokens: dist(&|p| p.answer_tokens.map(|n| n as f64)),
        reasoning_tpot_ms: dist(&|p| p.reasoning_tpot_ms),
        answer_tpot_ms: dist(&|p| p.answer_tpot_ms),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use servelab_records::{Chunk, Outcome, ThinkTags};

    fn chunk(t_ms: u64, kind: ChunkKind, text: &str, tokens: Option<u32>) -> Chunk {
        Chunk { t_ns: t_ms * 1_000_000, kind, text: text.into(), tokens }
    }

    /// A successful record intended at `intended_ms`.
    fn record(_index: u64, intended_ms: u64, end_ms: u64, chunks: Vec<Chunk>) -> RequestRecord {
        RequestRecord {
            index: 0,
            warmup: false,
            scheduled_ns: intended_ms * 1_000_000,
            intended_ns: intended_ms * 1_000_000,
            sent_ns: intended_ms * 1_000_000,
            prompt_tokens: None,
            max_tokens: None,
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
    fn field_reasoning_gives_each_phase_its_times_counts_and_tpot() {
        // Intended at 100 ms: reasoning chunks at 150 (1 token), 160 (2), 180 (1); answer at
        // 200 (1), 230 (3).
        let mut r = record(
            0,
            100,
            230,
            vec![
                chunk(150, ChunkKind::Reasoning, "a", Some(1)),
                chunk(160, ChunkKind::Reasoning, "bc", Some(2)),
                chunk(180, ChunkKind::Reasoning, "d", Some(1)),
                chunk(200, ChunkKind::Content, "x", Some(1)),
                chunk(230, ChunkKind::Content, "yzw", Some(3)),
            ],
        );
        let p = phases(&r).unwrap();
        assert_eq!(p.ttfr_ms, Some(50.0));
        assert_eq!(p.ttfa_ms, Some(100.0));
        assert_eq!((p.reasoning_tokens, p.answer_tokens), (Some(4), Some(4)));
        // (180 − 150) / (4 − 1) and (230 − 200) / (4 − 1).
        assert_eq!(p.reasoning_tpot_ms, Some(10.0));
        assert_eq!(p.answer_tpot_ms, Some(10.0));
        // No reasoning, no phases; an unknown count makes that phase's count unknown.
        r.chunks[2].tokens = None;
        assert_eq!(phases(&r).unwrap().reasoning_tokens, None);
        assert_eq!(phases(&r).unwrap().answer_tokens, Some(4));
        r.chunks.retain(|c| c.kind == ChunkKind::Content);
        assert_eq!(phases(&r), None);
    }

    #[test]
    fn the_chunk_holding_both_phases_counts_in_each() {
        // "<think>ab" (3 tokens) at 20 ms, "c</think>d" (3: 2 of reasoning) at 30, "e" at 45.
        let mut r = record(
            0,
            0,
            45,
            vec![
                chunk(20, ChunkKind::Reasoning, "<think>ab", Some(3)),
                chunk(30, ChunkKind::Content, "c</think>d", Some(3)),
                chunk(45, ChunkKind::Content, "e", Some(1)),
            ],
        );
        r.stream.think =
            Some(ThinkTags { mixed_chunk: Some(1), reasoning_bytes: 9, reasoning_tokens: Some(2) });
        let p = phases(&r).unwrap();
        assert_eq!((p.ttfr_ms, p.ttfa_ms), (Some(20.0), Some(30.0)));
        assert_eq!((p.reasoning_tokens, p.answer_tokens), (Some(5), Some(2)));
        // (30 − 20) / 4 and (45 − 30) / 1.
        assert_eq!((p.reasoning_tpot_ms, p.answer_tpot_ms), (Some(2.5), Some(15.0)));
    }

    #[test]
    fn a_run_summary_covers_the_requests_with_reasoning() {
        let mk = |ttfr: f64, ttfa: f64, n: u64| PhaseRow {
            ttfr_ms: Some(ttfr),
            ttfa_ms: Some(ttfa),
            reasoning_tokens: Some(n),
            answer_tokens: Some(2 * n),
            reasoning_tpot_ms: Some(1.0),
            answer_tpot_ms: None,
        };
        let rows = [mk(10.0, 50.0, 4), mk(30.0, 70.0, 8)];
        let s = summarize(&rows, &[50.0, 99.0]).unwrap();
        assert_eq!(s.requests, 2);
        assert_eq!((s.total_reasoning_tokens, s.total_answer_tokens), (12, 24));
        assert_eq!((s.ttfr_ms.mean, s.ttfa_ms.mean), (20.0, 60.0));
        assert_eq!((s.reasoning_tokens.mean, s.answer_tokens.max), (6.0, 16.0));
        assert_eq!(s.answer_tpot_ms.count, 0);
        assert_eq!(summarize(&[], &[50.0]), None);
    }
}
