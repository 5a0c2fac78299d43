//! The target's own account next to the measurement, and the plain-words overload warnings.
//!
//! When the target keeps a truth log (the built-in simulator does), every request's token
//! events are known twice: when the server meant to send them, when it did, and when servelab
//! saw them. Their differences split an error into the server's lateness and the client's
//! overhead, so a run can show that its numbers are true, or say which side was overloaded.

use serde::{Deserialize, Serialize};
use servelab_records::RequestRecord;

use crate::request;
use crate::stats::Distribution;
use crate::warning::Warning;
use crate::Summary;

/// One token-carrying event of a request, as the server logged it: offsets in nanoseconds
/// from the moment the server had the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TruthEvent {
    /// Tokens the event carried.
    pub tokens: u32,
    /// When the server meant to send it.
    pub intended_ns: u64,
    /// When it did.
    pub actual_ns: u64,
}

/// The server's account of one measured request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerTruth {
    /// The request's index in the run (the record's `index`).
    pub index: u64,
    /// Its token events in order.
    pub events: Vec<TruthEvent>,
}

/// The server's account next to servelab's, for the requests both saw complete. Times are
/// medians in milliseconds unless named otherwise.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TruthCheck {
    /// Completed measured requests found in the server's log.
    pub requests: u64,
    /// Time to the first token the server was set to take (from receipt).
    pub set_ttft_ms: f64,
    /// Time to the first token it took (from receipt).
    pub server_ttft_ms: f64,
    /// servelab's TTFT of the same requests (from the intended send).
    pub measured_ttft_ms: f64,
    /// Per request, servelab's TTFT minus the server's: the client's side (scheduling,
    /// connection, loopback, reading). Median.
    pub ttft_overhead_ms: f64,
    /// The same, 99th percentile.
    pub ttft_overhead_p99_ms: f64,
    /// Per-token gap the server was set to keep.
    pub set_itl_ms: f64,
    /// Per-token gap it kept.
    pub server_itl_ms: f64,
    /// servelab's per-token ITL of the same requests.
    pub measured_itl_ms: f64,
    /// How late the server sent its events (actual minus intended), median.
    pub server_late_ms: f64,
    /// The same, 99th percentile.
    pub server_late_p99_ms: f64,
}

impl TruthCheck {
    /// servelab's per-token ITL minus the server's.
    pub fn itl_error_ms(&self) -> f64 {
        self.measured_itl_ms - self.server_itl_ms
    }
}

/// The truth check's bound for the per-token ITL: within this, the measurement is exact at
/// the resolution a user reads.
pub const ITL_EXACT_MS: f64 = 0.5;
pub use crate::warning::{LAG_MEDIAN_WARN_MS, LAG_P99_WARN_MS, READ_LAG_MEDIAN_WARN_MS};
/// 99th-percentile server lateness above this: the target was overloaded.
pub const SERVER_LATE_P99_WARN_MS: f64 = 5.0;

const NS_PER_MS: f64 = 1e6;

/// Compares the server's account with the records of completed measured requests. `None`
/// when no request appears in both.
pub fn check(records: &[RequestRecord], truth: &[ServerTruth]) -> Option<TruthCheck> {
    let by_index: std::collections::HashMap<u64, &ServerTruth> =
        truth.iter().filter(|t| !t.events.is_empty()).map(|t| (t.index, t)).collect();
    let ms = |ns: u64| ns as f64 / NS_PER_MS;
    let (mut set_ttft, mut server_ttft, mut measured_ttft, mut overhead) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut set_itl, mut server_itl, mut measured_itl, mut late) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for r in records.iter().filter(|r| !r.warmup && r.is_success()) {
        let Some(t) = by_index.get(&r.index) else { continue };
        let Some(ttft) = request::row(r).ttft_ms else { continue };
        let first = t.events[0];
        set_ttft.push(ms(first.intended_ns));
        server_ttft.push(ms(first.actual_ns));
        measured_ttft.push(ttft);
        overhead.push(ttft - ms(first.actual_ns));
        for w in t.events.windows(2) {
            let k = f64::from(w[1].tokens.max(1));
            for _ in 0..w[1].tokens.max(1) {
                set_itl.push(ms(w[1].intended_ns.saturating_sub(w[0].intended_ns)) / k);
                server_itl.push(ms(w[1].actual_ns.saturating_sub(w[0].actual_ns)) / k);
            }
        }
        late.extend(t.events.iter().map(|e| ms(e.actual_ns) - ms(e.intended_ns)));
        measured_itl.extend(request::itl_per_token_ms(r));
    }
    if measured_ttft.is_empty() {
        return None;
    }
    // An empty sample (one-token outputs have no gaps) gives the placeholder 0 of an empty
    // distribution.
    let dist = |v: Vec<f64>| Distribution::from_unsorted(v, &[99.0]);
    let med = |v: Vec<f64>| dist(v).median;
    let (overhead, late) = (dist(overhead), dist(late));
    let p99 = |d: &Distribution| d.percentile(99.0).unwrap_or(0.0);
    Some(TruthCheck {
        requests: measured_ttft.len() as u64,
        set_ttft_ms: med(set_ttft),
        server_ttft_ms: med(server_ttft),
        measured_ttft_ms: med(measured_ttft),
        ttft_overhead_ms: overhead.median,
        ttft_overhead_p99_ms: p99(&overhead),
        set_itl_ms: med(set_itl),
        server_itl_ms: med(server_itl),
        measured_itl_ms: med(measured_itl),
        server_late_ms: late.median,
        server_late_p99_ms: p99(&late),
    })
}

/// Attaches the server's account to a summary, with a warning when the server ran late.
pub fn attach(summary: &mut Summary, records: &[RequestRecord], truth: &[ServerTruth]) {
    summary.truth = check(records, truth);
    if let Some(t) = &summary.truth {
        if t.server_late_p99_ms > SERVER_LATE_P99_WARN_MS {
            let (median_ms, p99_ms) = (t.server_late_ms, t.server_late_p99_ms);
            summary.warnings.push(Warning::TargetOverloaded { median_ms, p99_ms });
        }
    }
}

/// Plain-words warnings when the client itself was late, from a summary's schedule and read
/// lag. Every run gets them: a late client inflates every latency it reports.
pub fn overload_warnings(s: &Summary) -> Vec<Warning> {
    let mut out = Vec::new();
    let lag = &s.schedule_lag_ms;
    let lag_p99 = lag.percentile(99.0).unwrap_or(lag.max);
    if !lag.is_empty() && (lag.median > LAG_MEDIAN_WARN_MS || lag_p99 > LAG_P99_WARN_MS) {
        out.push(Warning::SentLate { median_ms: lag.median, p99_ms: lag_p99 });
    }
    if let Some(read) = &s.read_lag_ms {
        if !read.is_empty() && read.median > READ_LAG_MEDIAN_WARN_MS {
            out.push(Warning::ReadLate { median_ms: read.median });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use servelab_records::{Chunk, ChunkKind, Outcome};

    fn rec(index: u64, sent_ms: u64, chunk_ms: &[u64]) -> RequestRecord {
        RequestRecord {
            index,
            warmup: false,
            scheduled_ns: 0,
            intended_ns: sent_ms * 1_000_000,
            sent_ns: sent_ms * 1_000_000,
            prompt_tokens: Some(8),
            max_tokens: Some(chunk_ms.len() as u64),
            usage: None,
            chunks: chunk_ms
                .iter()
                .map(|t| Chunk {
                    t_ns: t * 1_000_000,
                    kind: ChunkKind::Content,
                    text: "x".into(),
                    tokens: Some(1),
                })
                .collect(),
            end_ns: chunk_ms.last().map(|t| t * 1_000_000),
            status: Some(200),
            outcome: Outcome::Success,
            server: None,
            read_lag_ns: None,
            retries: 0,
            session: None,
            stream: Default::default(),
        }
    }

    fn ev(tokens: u32, intended_ms: f64, actual_ms: f64) -> TruthEvent {
        TruthEvent {
            tokens,
            intended_ns: (intended_ms * 1e6) as u64,
            actual_ns: (actual_ms * 1e6) as u64,
        }
    }

    #[test]
    fn splits_the_error_into_server_lateness_and_client_overhead() {
        // Set: TTFT 50, ITL 10. Server: first token 1 ms late, then on time.
        // Client: sees each event 0.5 ms after the server sent it (+ 0 lag at send).
        let records = vec![rec(0, 0, &[51, 61, 71]), rec(1, 100, &[151, 161, 171])];
        let events = vec![ev(1, 50.0, 50.5), ev(1, 60.0, 60.5), ev(1, 70.0, 70.5)];
        let truth = vec![
            ServerTruth { index: 0, events: events.clone() },
            ServerTruth { index: 1, events },
        ];
        let t = check(&records, &truth).unwrap();
        assert_eq!(t.requests, 2);
        assert_eq!(t.set_ttft_ms, 50.0);
        assert_eq!(t.server_ttft_ms, 50.5);
        assert_eq!(t.measured_ttft_ms, 51.0);
        assert_eq!(t.ttft_overhead_ms, 0.5);
        assert_eq!(t.set_itl_ms, 10.0);
        assert_eq!(t.server_itl_ms, 10.0);
        assert_eq!(t.measured_itl_ms, 10.0);
        assert_eq!(t.itl_error_ms(), 0.0);
        assert_eq!(t.server_late_ms, 0.5);
    }

    #[test]
    fn a_multi_token_event_counts_its_gap_per_token() {
        let records = vec![rec(0, 0, &[50, 70])];
        let truth =
            vec![ServerTruth { index: 0, events: vec![ev(1, 50.0, 50.0), ev(4, 90.0, 90.0)] }];
        let t = check(&records, &truth).unwrap();
        // One event of 4 tokens after 40 ms: four per-token gaps of 10 ms.
        assert_eq!(t.server_itl_ms, 10.0);
        assert_eq!(t.set_itl_ms, 10.0);
    }

    #[test]
    fn unmatched_warmup_and_failed_requests_are_left_out() {
        let mut warm = rec(0, 0, &[50]);
        warm.warmup = true;
        let mut failed = rec(1, 0, &[50]);
        failed.outcome = Outcome::Failure {
            kind: servelab_records::FailureKind::HttpStatus,
            message: "500".into(),
        };
        let truth = vec![
            ServerTruth { index: 0, events: vec![ev(1, 50.0, 50.0)] },
            ServerTruth { index: 1, events: vec![ev(1, 50.0, 50.0)] },
        ];
        assert_eq!(check(&[warm, failed, rec(7, 0, &[50])], &truth), None);
    }

    #[test]
    fn late_server_and_late_client_are_named() {
        let records = vec![rec(0, 0, &[60, 70])];
        let truth =
            vec![ServerTruth { index: 0, events: vec![ev(1, 50.0, 60.0), ev(1, 60.0, 70.0)] }];
        let mut s = crate::summarize(
            &records,
            &servelab_records::RunInfo::default(),
            &crate::MetricsConfig::default(),
        );
        attach(&mut s, &records, &truth);
        assert!(s.warnings.iter().any(|w| w.starts_with("the target was overloaded")), "{s:?}");
        assert!(overload_warnings(&s).is_empty());
        s.schedule_lag_ms = crate::Distribution::from_unsorted(vec![0.1, 0.2, 30.0], &[99.0]);
        let w = overload_warnings(&s);
        assert_eq!(w.len(), 1);
        assert!(w[0].starts_with("servelab sent late: schedule lag 0.20 ms at the median"));
    }
}
