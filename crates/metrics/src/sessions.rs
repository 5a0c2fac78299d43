//! Multi-turn figures: TTFT by turn index (where a prefix cache shows: turn `k` resends the
//! history of turns `0..k`) and per-session latency. Pure functions of the request rows.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::request::RequestRow;
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

/// The session figures of `rows` (measured requests), `None` when no row belongs to a
/// session.
pub fn summarize(rows: &[RequestRow], percentiles: &[f64]) -> Option<SessionSummary> {
    // Session → (first intended, last end, all turns ok, turns).
    let mut sessions: BTreeMap<u64, (f64, f64, bool, u64)> = BTreeMap::new();
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
    if sessions.is_empty() {
        return None;
    }
    let completed: Vec<f64> = sessions.values().filter(|s| s.2).map(|s| s.1 - s.0).collect();
    let sent: u64 = sessions.values().map(|s| s.3).sum();
    let by_turn = turns
        .into_iter()
        .map(|(turn, rs)| {
            let counted: Vec<u64> = rs.iter().filter_map(|r| r.prompt_tokens).collect();
            TurnStats {
                turn,
                requests: rs.len() as u64,
                failed: rs.iter().filter(|r| !r.is_success()).count() as u64,
                mean_prompt_tokens: (!counted.is_empty())
                    .then(|| counted.iter().sum::<u64>() as f64 / counted.len() as f64),
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

    #[test]
    fn per_turn_ttft_and_session_latency() {
        let rows = [
            // Session 0: two turns, 1 s think time between them.
            row(0, 0, 0.0, 50.0, 200.0, true),
            row(0, 1, 1200.0, 20.0, 1300.0, true),
            // Session 1: two turns.
            row(1, 0, 10.0, 70.0, 300.0, true),
            row(1, 1, 400.0, 30.0, 500.0, true),
            // Session 2: its first turn failed, so it has no second.
            row(2, 0, 20.0, 0.0, 90.0, false),
        ];
        let s = summarize(&rows, &[50.0]).unwrap();
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
    fn single_requests_have_no_session_figures() {
        let mut r = row(0, 0, 0.0, 1.0, 2.0, true);
        r.session = None;
        assert_eq!(summarize(&[r], &[50.0]), None);
    }
}
