//! The nine published sweep columns of one virtual-time run, as `vllm bench serve` defines
//! them: duration from the first intended send to the last token; TPOT per request `(e2e −
//! ttft) / (output − 1)` over requests with more than one token; means and percentiles with
//! numpy's definitions ([`servelab_records::stats`], the same functions the metrics crate
//! uses). The row is the one published-table row, [`PointSummary`]. Full metrics belong to
//! servelab's metrics crate; these serve calibration.

use servelab_records::stats::{mean, percentile};
pub use servelab_records::PointSummary;

use crate::driver::RunResult;

fn sorted(mut v: Vec<f64>) -> Vec<f64> {
    v.sort_by(f64::total_cmp);
    v
}

/// Summarises a run as one sweep row.
pub fn summarize(r: &RunResult, concurrency: u32) -> PointSummary {
    let done: Vec<_> = r.requests.iter().filter(|q| q.end_ns.is_some()).collect();
    let start = r.requests.iter().map(|q| q.intended_ns).min().unwrap_or(0);
    let end = done.iter().filter_map(|q| q.end_ns).max().unwrap_or(start);
    let dur_s = (end.saturating_sub(start)) as f64 / 1e9;
    let ms = |ns: u64| ns as f64 / 1e6;
    let mut e2e = Vec::with_capacity(done.len());
    let mut ttft = Vec::with_capacity(done.len());
    let mut tpot = Vec::with_capacity(done.len());
    let mut tokens = 0u64;
    for q in &done {
        let (Some(e), Some(f)) = (q.end_ns, q.first_token_ns) else { continue };
        let e2e_ms = ms(e - q.intended_ns);
        let ttft_ms = ms(f - q.intended_ns);
        e2e.push(e2e_ms);
        ttft.push(ttft_ms);
        let n = q.token_ns.len();
        tokens += n as u64;
        if n > 1 {
            tpot.push((e2e_ms - ttft_ms) / (n - 1) as f64);
        }
    }
    let per_s = |x: f64| if dur_s > 0.0 { x / dur_s } else { 0.0 };
    // Means in request order, as numpy's pairwise sum (and the metrics crate) take them.
    let (mean_e2e_ms, mean_ttft_ms, mean_tpot_ms) = (mean(&e2e), mean(&ttft), mean(&tpot));
    let (e2e, ttft, tpot) = (sorted(e2e), sorted(ttft), sorted(tpot));
    PointSummary {
        concurrency,
        request_throughput: per_s(done.len() as f64),
        output_throughput: per_s(tokens as f64),
        mean_e2e_ms,
        p99_e2e_ms: percentile(&e2e, 99.0),
        mean_ttft_ms,
        p99_ttft_ms: percentile(&ttft, 99.0),
        mean_tpot_ms,
        p99_tpot_ms: percentile(&tpot, 99.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::VirtualRecord;

    #[test]
    fn summary_of_two_requests() {
        // A: sent 0, tokens at 100, 110, 120 ms → e2e 120, ttft 100, tpot 10.
        // B: sent 0, tokens at 200, 240 ms → e2e 240, ttft 200, tpot 40. Duration 0.24 s.
        let rec = |t: &[u64]| VirtualRecord {
            token_ns: t.iter().map(|ms| ms * 1_000_000).collect(),
            first_token_ns: Some(t[0] * 1_000_000),
            end_ns: Some(t[t.len() - 1] * 1_000_000),
            ..Default::default()
        };
        let r = RunResult {
            requests: vec![rec(&[100, 110, 120]), rec(&[200, 240])],
            ..Default::default()
        };
        let s = summarize(&r, 2);
        assert_eq!(s.request_throughput, 2.0 / 0.24);
        assert_eq!(s.output_throughput, 5.0 / 0.24);
        assert_eq!((s.mean_e2e_ms, s.mean_ttft_ms, s.mean_tpot_ms), (180.0, 150.0, 25.0));
        assert_eq!(s.p99_tpot_ms, 10.0 + 30.0 * 0.99);
    }
}
