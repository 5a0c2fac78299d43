//! Multi-turn figures: TTFT by turn index (where a prefix cache shows: turn `k` resends the
//! history of turns `0..k`) and per-session latency. Pure functions of the request rows.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::request::RequestRow;
use crate::sketch::{DdSketch, SketchError};
use crate::stats::Distribution;

/// How a multi-turn run's sessions went.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionSummary {
    /// Sessions started (with at least one turn sent).
    pub sessions: u64,
    /// Sessions whose every sent turn succeeded.
    pub completed: u64,
    /// Sessions cut short by a failed turn (later turns were not sent: their history never
    /// happened).
    pub cut: u64,
    /// Turns sent.
    pub turns: u64,
    /// Mean turns sent per session.
    pub mean_turns: f64,
    /// Per completed session: from its first turn's intended send to its last reply's end,
    /// think times included, ms.
    pub session_latency_ms: Distribution,
    /// Per turn index, over the sessions that reached it.
    pub by_turn: Vec<TurnStats>,
}

/// The requests of one turn index.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnStats {
    /// The turn index (0-based).
    pub turn: u32,
    /// Requests sent at this turn index.
    pub requests: u64,
    /// Of those, the ones that failed.
    pub failed: u64,
    /// Mean prompt tokens (the history grows with the turn), over requests with a count.
    pub mean_prompt_tokens: Option<f64>,
    /// TTFT of the successful requests, ms.
    pub ttft_ms: Distribution,
}

/// Per session: first intended send, last end (ms), whether every sent turn succeeded, and
/// turns sent.
type Sessions = BTreeMap<u64, (f64, f64, bool, u64)>;

/// `rows` grouped by session and by turn index; `None` when no row belongs to a session.
fn group(rows: &[RequestRow]) -> Option<(Sessions, BTreeMap<u32, Vec<&RequestRow>>)> {
    let mut sessions: Sessions = BTreeMap::new();
    let mut turns: BTreeMap<u32, Vec<&RequestRow>> = BTreeMap::new();
    for r in rows {
        let Some(st) = r.session else { continue };
        let e = sessions.entry(st.session).or_insert((f64::INFINITY, 0.0, true, 0));
        e.0 = e.0.min(r.intended_ms);
        e.1 = e.1.max(r.end_ms.unwrap_or(r.intended_ms));
        e.2 &= r.is_success();
        e.3 += 1;
        turns.entry(st.turn).or_default().push(r);
    }
    (!sessions.is_empty()).then_some((sessions, turns))
}

/// Prompt tokens of the requests with a count: their sum and how many.
fn prompt_tokens(rs: &[&RequestRow]) -> (u64, u64) {
    let counted: Vec<u64> = rs.iter().filter_map(|r| r.prompt_tokens).collect();
    (counted.iter().sum(), counted.len() as u64)
}

fn mean_of(sum: u64, n: u64) -> Option<f64> {
    (n > 0).then(|| sum as f64 / n as f64)
}

/// The session figures of `rows` (measured requests), `None` when no row belongs to a
/// session.
pub fn summarize(rows: &[RequestRow], percentiles: &[f64]) -> Option<SessionSummary> {
    let (sessions, turns) = group(rows)?;
    let completed: Vec<f64> = sessions.values().filter(|s| s.2).map(|s| s.1 - s.0).collect();
    let sent: u64 = sessions.values().map(|s| s.3).sum();
    let by_turn = turns
        .into_iter()
        .map(|(turn, rs)| {
            let (sum, n) = prompt_tokens(&rs);
            TurnStats {
                turn,
                requests: rs.len() as u64,
                failed: rs.iter().filter(|r| !r.is_success()).count() as u64,
                mean_prompt_tokens: mean_of(sum, n),
                ttft_ms: Distribution::from_unsorted(
                    rs.iter().filter(|r| r.is_success()).filter_map(|r| r.ttft_ms).collect(),
                    percentiles,
                ),
            }
        })
        .collect();
    let n = sessions.len() as u64;
    Some(SessionSummary {
        sessions: n,
        completed: completed.len() as u64,
        cut: n - completed.len() as u64,
        turns: sent,
        mean_turns: sent as f64 / n as f64,
        session_latency_ms: Distribution::from_unsorted(completed, percentiles),
        by_turn,
    })
}

/// A shard's session figures in mergeable form: a multi-turn run is split by session, so
/// every session is whole in one shard and the counts add; the latencies are sketched.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionDigest {
    /// Sessions started.
    pub sessions: u64,
    /// Sessions whose every sent turn succeeded.
    pub completed: u64,
    /// Turns sent.
    pub turns: u64,
    /// Latency of each completed session, ms.
    pub session_latency_ms: DdSketch,
    /// Per turn index.
    pub by_turn: Vec<TurnDigest>,
}

/// One turn index of a [`SessionDigest`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnDigest {
    /// The turn index.
    pub turn: u32,
    /// Requests sent at it.
    pub requests: u64,
    /// Of those, the ones that failed.
    pub failed: u64,
    /// Sum of the prompt tokens of the requests with a count, and how many had one.
    pub prompt_tokens: (u64, u64),
    /// TTFT of the successful requests, ms.
    pub ttft_ms: DdSketch,
}

impl SessionDigest {
    /// The digest of `rows`, sketched at accuracy `alpha`; `None` when no row belongs to a
    /// session.
    pub fn of(rows: &[RequestRow], alpha: f64) -> Result<Option<SessionDigest>, SketchError> {
        let Some((sessions, turns)) = group(rows) else { return Ok(None) };
        let mut latency = DdSketch::new(alpha)?;
        sessions.values().filter(|s| s.2).for_each(|s| latency.add(s.1 - s.0));
        let by_turn = turns
            .into_iter()
            .map(|(turn, rs)| {
                let mut ttft = DdSketch::new(alpha)?;
                rs.iter().filter(|r| r.is_success()).filter_map(|r| r.ttft_ms).for_each(|v| {
                    ttft.add(v);
                });
                Ok(TurnDigest {
                    turn,
                    requests: rs.len() as u64,
                    failed: rs.iter().filter(|r| !r.is_success()).count() as u64,
                    prompt_tokens: prompt_tokens(&rs),
                    ttft_ms: ttft,
                })
            })
            .collect::<Result<Vec<_>, SketchError>>()?;
        Ok(Some(SessionDigest {
            sessions: sessions.len() as u64,
            completed: sessions.values().filter(|s| s.2).count() as u64,
            turns: sessions.values().map(|s| s.3).sum(),
            session_latency_ms: latency,
            by_turn,
        }))
    }

    /// Add another shard's sessions (sketches of the same accuracy).
    pub fn merge(&mut self, other: &SessionDigest) -> Result<(), SketchError> {
        self.sessions += other.sessions;
        self.completed += other.completed;
        self.turns += other.turns;
        self.session_latency_ms.merge(&other.session_latency_ms)?;
        for t in &other.by_turn {
            match self.by_turn.iter_mut().find(|m| m.turn == t.turn) {
                Some(m) => {
                    m.requests += t.requests;
                    m.failed += t.failed;
                    m.prompt_tokens.0 += t.prompt_tokens.0;
                    m.prompt_tokens.1 += t.prompt_tokens.1;
                    m.ttft_ms.merge(&t.ttft_ms)?;
                }
                None => self.by_turn.push(t.clone()),
            }
        }
        self.by_turn.sort_by_key(|t| t.turn);
        Ok(())
    }

    /// The session figures: counts and means exact, percentiles within the sketches' `α`.
    pub fn summary(&self, percentiles: &[f64]) -> SessionSummary {
        SessionSummary {
            sessions: self.sessions,
            completed: self.completed,
            cut: self.sessions - self.completed,
            turns: self.turns,
            mean_turns: if self.sessions == 0 {
                0.0
            } else {
                self.turns as f64 / self.sessions as f64
            },
            session_latency_ms: self.session_latency_ms.distribution(percentiles),
            by_turn: self
                .by_turn
                .iter()
                .map(|t| TurnStats {
                    turn: t.turn,
                    requests: t.requests,
                    failed: t.failed,
                    mean_prompt_tokens: mean_of(t.prompt_tokens.0, t.prompt_tokens.1),
                    ttft_ms: t.ttft_ms.distribution(percentiles),
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use servelab_records::SessionTurn;

    fn row(session: u64, turn: u32, intended: f64, ttft: f64, end: f64, ok: bool) -> RequestRow {
        RequestRow {
            index: 0,
            scheduled_ms: intended,
            intended_ms: intended,
            sent_ms: intended,
            first_token_ms: Some(intended + ttft),
            end_ms: Some(end),
            ttft_ms: ok.then_some(ttft),
            ttfc_ms: None,
            reasoning: None,
            tpot_ms: None,
            e2el_ms: Some(end - intended),
            schedule_lag_ms: 0.0,
            client_queue_ms: 0.0,
            read_lag_ms: None,
            prompt_tokens: Some(100 * (u64::from(turn) + 1)),
            output_tokens: Some(10),
            retokenized_tokens: None,
            chunks: 10,
            itl_chunk_ms: Vec::new(),
            status: Some(200),
            outcome: if ok { "success" } else { "timeout" }.into(),
            error: None,
            session: Some(SessionTurn { session, turn }),
        }
    }

    /// Three sessions: two of two turns, one cut short.
    fn rows() -> [RequestRow; 5] {
        [
            // Session 0: two turns, 1 s think time between them.
            row(0, 0, 0.0, 50.0, 200.0, true),
            row(0, 1, 1200.0, 20.0, 1300.0, true),
            // Session 1: two turns.
            row(1, 0, 10.0, 70.0, 300.0, true),
            row(1, 1, 400.0, 30.0, 500.0, true),
            // Session 2: its first turn failed, so it has no second.
            row(2, 0, 20.0, 0.0, 90.0, false),
        ]
    }

    #[test]
    fn per_turn_ttft_and_session_latency() {
        let s = summarize(&rows(), &[50.0]).unwrap();
        assert_eq!((s.sessions, s.completed, s.cut, s.turns), (3, 2, 1, 5));
        assert!((s.mean_turns - 5.0 / 3.0).abs() < 1e-12);
        assert_eq!(s.session_latency_ms.count, 2);
        assert_eq!(s.session_latency_ms.mean, (1300.0 + 490.0) / 2.0);
        assert_eq!(s.by_turn.len(), 2);
        let t0 = &s.by_turn[0];
        assert_eq!((t0.turn, t0.requests, t0.failed), (0, 3, 1));
        assert_eq!(t0.ttft_ms.mean, 60.0);
        assert_eq!(t0.mean_prompt_tokens, Some(100.0));
        let t1 = &s.by_turn[1];
        assert_eq!((t1.turn, t1.requests, t1.ttft_ms.mean), (1, 2, 25.0));
        assert_eq!(t1.mean_prompt_tokens, Some(200.0));
    }

    #[test]
    fn session_digests_merge_to_the_figures_of_all_sessions() {
        let rows = rows();
        let exact = summarize(&rows, &[50.0, 100.0]).unwrap();
        // Split by session, as shards split a multi-turn run.
        let (a, b): (Vec<RequestRow>, Vec<RequestRow>) =
            rows.iter().cloned().partition(|r| r.session.unwrap().session % 2 == 0);
        let mut d = SessionDigest::of(&a, 0.005).unwrap().unwrap();
        d.merge(&SessionDigest::of(&b, 0.005).unwrap().unwrap()).unwrap();
        let got = d.summary(&[50.0, 100.0]);
        assert_eq!((got.sessions, got.completed, got.cut, got.turns), (3, 2, 1, 5));
        assert_eq!(got.mean_turns, exact.mean_turns);
        let (g, e) = (&got.session_latency_ms, &exact.session_latency_ms);
        assert_eq!((g.count, g.mean, g.min, g.max), (e.count, e.mean, e.min, e.max));
        assert_eq!(got.by_turn.len(), 2);
        for (g, e) in got.by_turn.iter().zip(&exact.by_turn) {
            assert_eq!((g.turn, g.requests, g.failed), (e.turn, e.requests, e.failed));
            assert_eq!(g.mean_prompt_tokens, e.mean_prompt_tokens);
            assert_eq!((g.ttft_ms.count, g.ttft_ms.max), (e.ttft_ms.count, e.ttft_ms.max));
            assert!((g.ttft_ms.mean - e.ttft_ms.mean).abs() < 1e-12);
        }
        assert_eq!(SessionDigest::of(&[], 0.005), Ok(None));
    }

    #[test]
    fn single_requests_have_no_session_figures() {
        let mut r = row(0, 0, 0.0, 1.0, 2.0, true);
        r.session = None;
        assert_eq!(summarize(&[r], &[50.0]), None);
    }
}
