//! Trace replays: which of the trace's rows were sent, and how far the sends fell behind the
//! trace's own instants.
//!
//! The generic overload warning looks at the schedule lag (sent − intended). In a replay with
//! `--max-concurrency`, a request due while every slot is busy is intended for when one frees,
//! so its lateness against the trace is client queue time and that warning stays silent. The
//! trace is what the user asked to reproduce, so a replay also measures sent − scheduled (the
//! trace instant) and says so when the server saw a slower load than the trace's.

use serde::{Deserialize, Serialize};

use crate::stats::Distribution;
use crate::warning::Warning;
use crate::Summary;

pub use crate::warning::{BEHIND_MEDIAN_WARN_MS, BEHIND_P99_WARN_MS};

/// What happened to a trace's rows (the workload's `TraceStats`, and how many were kept).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct TraceRows {
    /// Data rows in the file.
    pub rows: u64,
    /// Rows left out by the model / log type filter (BurstGPT).
    pub filtered: u64,
    /// Rows outside the replay window.
    pub outside_window: u64,
    /// Rows with 0 input or 0 output tokens, skipped.
    pub zero_length: u64,
    /// Rows past the request cap.
    pub over_cap: u64,
    /// Rows replayed (one request each).
    pub replayed: u64,
}

/// A trace replay's rows and how far behind the trace its requests were sent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReplaySummary {
    /// What happened to the trace's rows.
    pub rows: TraceRows,
    /// Sent minus the trace instant, every measured request (client queue plus schedule lag).
    pub behind_ms: Distribution,
}

/// The replay part of a summary: the rows, and sent − scheduled of every measured request
/// (for a replay, `scheduled` is the trace instant).
pub fn summarize(summary: &Summary, rows: TraceRows) -> ReplaySummary {
    let behind: Vec<f64> = summary.requests.iter().map(behind_ms).collect();
    ReplaySummary {
        rows,
        behind_ms: Distribution::from_unsorted(behind, &with_p99(&summary.percentiles)),
    }
}

/// How far behind its trace instant a request was sent, ms (never negative).
pub fn behind_ms(r: &crate::RequestRow) -> f64 {
    (r.sent_ms - r.scheduled_ms).max(0.0)
}

/// `percentiles` with 99 added: the warning and the text section read the p99, whatever
/// percentiles the run asked for.
pub fn with_p99(percentiles: &[f64]) -> Vec<f64> {
    let mut pcts = percentiles.to_vec();
    if !pcts.contains(&99.0) {
        pcts.push(99.0);
        pcts.sort_by(f64::total_cmp);
    }
    pcts
}

/// The warning of a replay whose sends fell behind the trace (median or p99 of sent − trace
/// instant above [`BEHIND_MEDIAN_WARN_MS`] / [`BEHIND_P99_WARN_MS`]), naming how much of it
/// was waiting for a concurrency slot and how much the client's own lateness.
pub fn behind_warning(r: &ReplaySummary, s: &Summary) -> Option<Warning> {
    let d = &r.behind_ms;
    let p99 = d.percentile(99.0).unwrap_or(d.max);
    if d.is_empty() || (d.median <= BEHIND_MEDIAN_WARN_MS && p99 <= BEHIND_P99_WARN_MS) {
        return None;
    }
    Some(Warning::ReplayBehind {
        median_ms: d.median,
        p99_ms: p99,
        queue_ms: s.client_queue_ms.median,
        lag_ms: s.schedule_lag_ms.median,
    })
}

/// Attaches a replay's rows and lateness to `summary`, with the warning when it fell behind.
pub fn attach(summary: &mut Summary, rows: TraceRows) {
    let r = summarize(summary, rows);
    set(summary, r);
}

/// Sets `summary`'s replay figures `r`, with the warning when it fell behind.
pub fn set(summary: &mut Summary, r: ReplaySummary) {
    // A trace's rate moves: no steady level, so no steady-state warning either.
    if let Some(l) = &mut summary.load {
        summary.warnings.retain(|w| !matches!(w, Warning::NoSteadyState { .. }));
        l.mark_trace();
    }
    if let Some(w) = behind_warning(&r, summary) {
        summary.warnings.push(w);
    }
    summary.replay = Some(r);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{summarize as summarize_run, MetricsConfig};
    use servelab_records::{RequestRecord, RunInfo};

    /// A request due at `scheduled_ms`, intended (a slot freed) at `intended_ms`, sent at
    /// `sent_ms`, answered 5 ms later.
    fn rec(index: u64, scheduled_ms: u64, intended_ms: u64, sent_ms: u64) -> RequestRecord {
        let chunks = vec![crate::request::tests::content(sent_ms + 5, 1)];
        let mut r = crate::request::tests::record(index, intended_ms, sent_ms + 5, chunks);
        r.scheduled_ns = scheduled_ms * 1_000_000;
        r.sent_ns = sent_ms * 1_000_000;
        r.prompt_tokens = Some(8);
        r.max_tokens = Some(1);
        r
    }

    fn run(records: &[RequestRecord]) -> Summary {
        // Without a p99 of its own: the replay's figures add it.
        let cfg = MetricsConfig { percentiles: vec![50.0, 90.0], ..MetricsConfig::default() };
        summarize_run(records, &RunInfo::default(), &cfg)
    }

    const ROWS: TraceRows = TraceRows {
        rows: 10,
        filtered: 1,
        outside_window: 2,
        zero_length: 1,
        over_cap: 3,
        replayed: 3,
    };

    #[test]
    fn a_replay_on_time_is_summarized_without_a_warning() {
        // Sent 0, 1 and 2 ms after their instants.
        let mut s = run(&[rec(0, 0, 0, 0), rec(1, 100, 100, 101), rec(2, 200, 200, 202)]);
        let before = s.warnings.clone();
        attach(&mut s, ROWS);
        let r = s.replay.as_ref().unwrap();
        assert_eq!(r.rows, ROWS);
        assert_eq!(r.behind_ms.count, 3);
        assert_eq!(r.behind_ms.median, 1.0);
        assert_eq!(r.behind_ms.max, 2.0);
        // The p99 is there though the run asked for 50 and 90 only (between 1 and 2 ms).
        let p99 = r.behind_ms.percentile(99.0).unwrap();
        assert!((p99 - 1.98).abs() < 1e-9, "{p99}");
        assert_eq!(s.warnings, before);
    }

    #[test]
    fn a_replay_queued_behind_its_concurrency_cap_says_so() {
        // A cap of one: each request waits for the previous one; sent on time once intended,
        // so the generic schedule-lag warning stays silent.
        let records = [rec(0, 0, 0, 0), rec(1, 0, 20, 20), rec(2, 0, 40, 40), rec(3, 0, 60, 60)];
        let mut s = run(&records);
        assert!(!s.warnings.iter().any(|w| w.starts_with("servelab sent late")), "{s:?}");
        attach(&mut s, TraceRows { replayed: 4, ..ROWS });
        let r = s.replay.as_ref().unwrap();
        // Behind by 0, 20, 40 and 60 ms: the median is the midpoint of 20 and 40.
        assert_eq!(r.behind_ms.median, 30.0);
        assert_eq!(r.behind_ms.max, 60.0);
        let w = s.warnings.last().unwrap();
        assert_eq!(
            w,
            &format!(
                "the replay fell behind the trace: requests were sent 30.00 ms after their trace \
                 instants at the median and {:.2} ms at p99 (warn above 10 / 100 ms; client \
                 queue 30.00 ms and schedule lag 0.00 ms at the median), most of it waiting for \
                 a free --max-concurrency slot: raise --max-concurrency, or replay slower \
                 (--trace-speedup below 1). The server saw a slower, smoother load than the \
                 trace's",
                r.behind_ms.percentile(99.0).unwrap()
            )
        );
    }

    #[test]
    fn a_late_client_is_named_as_the_cause() {
        // No queue: each request sent 12 ms after its instant (median above 10 ms).
        let mut s = run(&[rec(0, 0, 0, 12), rec(1, 50, 50, 62), rec(2, 90, 90, 102)]);
        attach(&mut s, ROWS);
        assert_eq!(s.replay.as_ref().unwrap().behind_ms.median, 12.0);
        let w = s.warnings.last().unwrap();
        assert!(w.contains("most of it the client's own lateness"), "{w}");
        // A p99 above 100 ms warns alone, with the median on time: 2 of 100 requests 301 ms
        // behind.
        let mut late_tail: Vec<RequestRecord> = (0..98).map(|i| rec(i, i, i, i)).collect();
        late_tail.extend([rec(98, 98, 98, 399), rec(99, 99, 99, 400)]);
        let s = run(&late_tail);
        let r = summarize(&s, ROWS);
        assert_eq!(r.behind_ms.median, 0.0);
        assert_eq!(r.behind_ms.percentile(99.0), Some(301.0));
        let w = behind_warning(&r, &s).unwrap();
        assert!(
            w.contains("0.00 ms after their trace instants at the median and 301.00 ms"),
            "{w}"
        );
    }
}
