//! Server-vs-client split: what the engine's own timings (llama.cpp's `timings`) say next to
//! what the client measured.
//!
//! llama.cpp starts its prompt clock when a slot begins processing the request and stops it
//! when the first token is sampled, so its `prompt_ms` lies inside the client's TTFT. The rest,
//! `TTFT − prompt_ms`, is everything the engine's prompt clock does not see: the network,
//! HTTP parsing and tokenizing, waiting for a free slot, detokenizing and sending the token,
//! and the client's own reading. Its generation clock runs from the first token to the last,
//! so `predicted_ms / (predicted_n − 1)` is the engine's time per output token with the
//! client's TPOT definition (llama.cpp's `predicted_per_token_ms` divides by `predicted_n`).

use serde::{Deserialize, Serialize};
use servelab_records::RequestRecord;

use crate::stats::Distribution;

/// What one completed request's server timings give.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct ServerSample {
    pub index: u64,
    /// Engine prompt-processing time, ms.
    pub prompt_ms: Option<f64>,
    /// Client TTFT minus engine prompt time, ms (negative only if the two clocks disagree).
    pub outside_ms: Option<f64>,
    /// Engine generation time per output token after the first, ms.
    pub tpot_ms: Option<f64>,
}

/// The sample of a record with server timings; `ttft_ms` is the client's TTFT of it.
pub(crate) fn sample(r: &RequestRecord, ttft_ms: Option<f64>) -> Option<ServerSample> {
    let t = r.server?;
    let tpot_ms = match (t.generation_ms, t.generated_tokens) {
        (Some(g), Some(n)) if n >= 2 => Some(g / (n - 1) as f64),
        _ => None,
    };
    Some(ServerSample {
        index: r.index,
        prompt_ms: t.prompt_ms,
        outside_ms: ttft_ms.zip(t.prompt_ms).map(|(ttft, p)| ttft - p),
        tpot_ms,
    })
}

/// The split over a run's completed requests that carried server timings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServerSplit {
    /// Completed requests that carried server timings.
    pub requests: u64,
    /// Engine prompt-processing time (llama.cpp `prompt_ms`), ms.
    pub server_prompt_ms: Distribution,
    /// Client TTFT minus engine prompt time: network + server queue + client, ms.
    pub ttft_outside_prompt_ms: Distribution,
    /// Engine time per output token after the first (`predicted_ms / (predicted_n − 1)`), ms.
    pub server_tpot_ms: Distribution,
}

/// Reduces the samples (any order) to the split; `None` when no request carried timings.
pub(crate) fn split(mut samples: Vec<ServerSample>, pct: &[f64]) -> Option<ServerSplit> {
    if samples.is_empty() {
        return None;
    }
    samples.sort_by_key(|s| s.index);
    let dist = |f: fn(&ServerSample) -> Option<f64>| {
        Distribution::from_unsorted(samples.iter().filter_map(f).collect(), pct)
    };
    Some(ServerSplit {
        requests: samples.len() as u64,
        server_prompt_ms: dist(|s| s.prompt_ms),
        ttft_outside_prompt_ms: dist(|s| s.outside_ms),
        server_tpot_ms: dist(|s| s.tpot_ms),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::tests::{content, record};
    use servelab_records::ServerTimings;

    fn timed(index: u64, prompt_ms: f64, n: u64, gen_ms: f64) -> RequestRecord {
        let mut r = record(index, 0, 100, vec![content(40, 1)]);
        r.server = Some(ServerTimings {
            prompt_tokens: Some(10),
            prompt_ms: Some(prompt_ms),
            generated_tokens: Some(n),
            generation_ms: Some(gen_ms),
        });
        r
    }

    #[test]
    fn sample_subtracts_engine_prompt_time_and_divides_generation_by_n_minus_1() {
        let s = sample(&timed(3, 12.5, 5, 40.0), Some(40.0)).unwrap();
        assert_eq!(
            s,
            ServerSample {
                index: 3,
                prompt_ms: Some(12.5),
                outside_ms: Some(27.5),
                tpot_ms: Some(10.0)
            }
        );
        let one_token = sample(&timed(0, 1.0, 1, 0.0), None).unwrap();
        assert_eq!((one_token.outside_ms, one_token.tpot_ms), (None, None));
        assert_eq!(sample(&record(0, 0, 1, vec![]), Some(1.0)), None);
    }

    #[test]
    fn split_is_none_without_samples_and_orders_by_index() {
        assert_eq!(split(vec![], &[50.0]), None);
        let b = sample(&timed(1, 30.0, 3, 20.0), Some(40.0)).unwrap();
        let a = sample(&timed(0, 10.0, 3, 10.0), Some(40.0)).unwrap();
        let s = split(vec![b, a], &[50.0]).unwrap();
        assert_eq!(s.requests, 2);
        assert_eq!(s.server_prompt_ms.mean, 20.0);
        assert_eq!(s.ttft_outside_prompt_ms.mean, 20.0);
        assert_eq!(s.ttft_outside_prompt_ms.count, 2);
        assert_eq!(s.server_tpot_ms.mean, 7.5);
    }

    #[test]
    fn summary_carries_the_split_only_for_completed_requests_with_timings() {
        use servelab_records::{FailureKind, Outcome, RunInfo};
        let cfg = crate::MetricsConfig::default();
        let plain =
            crate::summarize(&[record(0, 0, 100, vec![content(40, 1)])], &RunInfo::default(), &cfg);
        assert_eq!(plain.server, None);
        let mut failed = timed(2, 5.0, 3, 10.0);
        failed.outcome = Outcome::Failure { kind: FailureKind::Reset, message: "x".into() };
        let recs = [timed(0, 10.0, 3, 10.0), record(1, 0, 100, vec![content(40, 1)]), failed];
        let s = crate::summarize(&recs, &RunInfo::default(), &cfg).server.unwrap();
        assert_eq!(s.requests, 1);
        // TTFT 40 ms (chunk at 40, intended at 0) minus 10 ms of engine prompt time.
        assert_eq!(s.ttft_outside_prompt_ms.median, 30.0);
        assert_eq!(s.server_tpot_ms.median, 5.0);
    }
}
