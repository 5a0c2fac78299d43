//! End-to-end tests of `summarize` on hand-made records with exact expected values.

use servelab_records::{ChunkKind, FailureKind, Outcome, RequestRecord, RunInfo, Usage};

use crate::request::tests::{chunk, content, record};
use crate::*;

const MS: u64 = 1_000_000;

fn failed(
    index: u64,
    intended_ms: u64,
    end_ms: u64,
    kind: FailureKind,
    msg: &str,
) -> RequestRecord {
    let mut r = record(index, intended_ms, end_ms, vec![]);
    r.outcome = Outcome::Failure { kind, message: msg.into() };
    r.status = None;
    r
}

/// Three completed requests, one warm-up, two failures.
fn records() -> Vec<RequestRecord> {
    let mut warm = record(0, 0, 5_000, vec![content(4_000, 50)]);
    warm.warmup = true;
    // a: intended 0, first chunk 100 ms (1 token), then 2 tokens at 300, 1 at 400; ends 400.
    let a = record(1, 0, 400, vec![content(100, 1), content(300, 2), content(400, 1)]);
    // b: intended 200 (scheduled 150: 50 ms client queue), usage says 3 tokens.
    let mut b = record(2, 200, 1_500, vec![content(500, 1), content(1_500, 2)]);
    b.scheduled_ns = 150 * MS;
    b.usage = Some(Usage { prompt_tokens: 12, completion_tokens: 3, reasoning_tokens: None });
    // c: reasoning first; intended 1000, ends 2000.
    let c = record(
        3,
        1_000,
        2_000,
        vec![chunk(1_200, ChunkKind::Reasoning, "th", Some(1)), content(1_600, 1)],
    );
    let f1 = failed(4, 1_100, 1_900, FailureKind::Timeout, "no progress in 0.8 s");
    let f2 = failed(5, 1_200, 1_300, FailureKind::Timeout, "no progress in 0.8 s");
    vec![warm, a, b, c, f1, f2]
}

#[test]
fn summary_of_hand_made_records_has_exact_values() {
    let cfg = MetricsConfig {
        percentiles: vec![50.0, 99.0],
        goodput: Some(Slo { ttft_ms: Some(250.0), ..Slo::default() }),
        window_ns: DEFAULT_WINDOW_NS,
    };
    let s = summarize(&records(), &RunInfo::default(), &cfg);
    assert_eq!((s.completed, s.failed), (3, 2));
    // First intended send 0 ms (warm-up excluded), last end 2000 ms.
    assert_eq!(s.duration_s, 2.0);
    assert_eq!(s.total_input_tokens, 10 + 12 + 10);
    assert_eq!(s.total_output_tokens, 4 + 3 + 2);
    assert_eq!(s.retokenized_output_tokens, Some(9));
    assert_eq!(s.request_throughput, 1.5);
    assert_eq!(s.output_throughput, 4.5);
    assert_eq!(s.total_token_throughput, 20.5);
    // TTFTs: 100, 300, 200 → only a (100) and c (200) are ≤ 250 ms.
    assert_eq!(s.request_goodput, Some(1.0));
    assert_eq!(s.ttft_ms.count, 3);
    assert_eq!(s.ttft_ms.mean, 200.0);
    assert_eq!(s.ttft_ms.median, 200.0);
    // TPOT: a (400−100)/3 = 100; b (1300−300)/2 = 500; c (1000−200)/1 = 800.
    assert_eq!(s.tpot_ms.count, 3);
    assert_eq!(s.tpot_ms.min, 100.0);
    assert_eq!(s.tpot_ms.max, 800.0);
    // Per-token ITL: a: 100,100 (2 tokens after 200 ms), 100; b: 500,500; c: 400.
    assert_eq!(s.itl_ms.count, 6);
    assert_eq!(s.itl_ms.mean, 1_700.0 / 6.0);
    // Per-chunk ITL: a: 200, 100; b: 1000; c: 400.
    assert_eq!(s.itl_chunk_ms.count, 4);
    assert_eq!(s.itl_chunk_ms.mean, 425.0);
    // np.percentile([400, 1000, 1300], [50, 99]) == [1000.0, 1294.0]
    assert_eq!(s.e2el_ms.percentiles, vec![(50.0, 1_000.0), (99.0, 1_294.0)]);
    let ttfc = s.ttfc_ms.as_ref().expect("reasoning seen");
    assert_eq!((ttfc.count, ttfc.mean), (1, 600.0));
    // Schedule lag is 1 ms for all 5 measured requests; queue 50 ms for b only.
    assert_eq!(s.schedule_lag_ms.count, 5);
    assert_eq!(s.schedule_lag_ms.mean, 1.0);
    assert_eq!(s.client_queue_ms.max, 50.0);
    // Windows from 0: tokens at 100, 300 (2), 400, 500 → 5 in [0,1s); 1200, 1500 (2), 1600 → 4.
    assert_eq!(s.output_tokens_per_window, vec![5, 4]);
    assert_eq!(s.peak_output_throughput, 5.0);
    // In flight [sent, end): a [1,400) b [201,1500) c [1001,2000) f1 [1101,1900) f2 [1201,1300).
    assert_eq!(s.peak_concurrency, 4);
    let busy = 399.0 + 1_299.0 + 999.0 + 799.0 + 99.0;
    assert_eq!(s.mean_concurrency, busy * 1e6 / 2e9);
    assert_eq!(s.failures.len(), 1);
    assert_eq!(s.failures[0].kind, FailureKind::Timeout);
    assert_eq!(s.failures[0].count, 2);
    assert_eq!(s.failures[0].messages, vec!["no progress in 0.8 s".to_string()]);
    assert_eq!(s.requests.iter().map(|r| r.index).collect::<Vec<_>>(), vec![1, 2, 3, 4, 5]);
    // b: usage 3 vs chunk counts 3 agree, so no warning.
    assert!(s.warnings.is_empty(), "{:?}", s.warnings);
}

#[test]
fn disagreeing_counts_warn_and_empty_runs_give_zeros_not_nan() {
    let mut r = record(0, 0, 100, vec![content(50, 1), content(100, 1)]);
    r.usage = Some(Usage { prompt_tokens: 1, completion_tokens: 5, reasoning_tokens: None });
    let s = summarize(&[r], &RunInfo::default(), &MetricsConfig::default());
    assert_eq!(s.total_output_tokens, 5);
    assert_eq!(s.retokenized_output_tokens, Some(2));
    assert!(
        s.warnings[0].contains("server usage says 5, chunk counts sum to 2"),
        "{:?}",
        s.warnings
    );

    let s = summarize(&[], &RunInfo::default(), &MetricsConfig::default());
    assert_eq!(s.duration_s, 0.0);
    assert_eq!(s.request_throughput, 0.0);
    assert!(s.ttft_ms.is_empty());
    assert!(s.ttft_ms.mean == 0.0 && s.ttft_ms.percentiles.iter().all(|(_, v)| *v == 0.0));
    assert_eq!(s.ttfc_ms, None);
    assert_eq!(s.request_goodput, None);
}

#[test]
fn only_failures_warns() {
    let s = summarize(
        &[failed(0, 0, 10, FailureKind::Connect, "refused")],
        &RunInfo::default(),
        &MetricsConfig::default(),
    );
    assert_eq!((s.completed, s.failed), (0, 1));
    assert!(s.warnings.iter().any(|w| w.contains("all requests failed")));
}

#[test]
fn merging_is_associative_and_equals_collecting_at_once() {
    let mut recs = records();
    recs.push(failed(6, 1_300, 1_400, FailureKind::Timeout, "other"));
    recs.push(failed(7, 1_300, 1_400, FailureKind::Timeout, "third"));
    recs.push(failed(8, 1_300, 1_400, FailureKind::Timeout, "fourth is dropped"));
    let all = Collector::from_records(&recs);
    for split in [(1, 3), (2, 5), (0, 7), (4, 9)] {
        let a = Collector::from_records(&recs[..split.0]);
        let b = Collector::from_records(&recs[split.0..split.1]);
        let c = Collector::from_records(&recs[split.1..]);
        let left = a.clone().merge(b.clone()).merge(c.clone());
        let right = a.merge(b.merge(c));
        assert_eq!(left, right);
        assert_eq!(left, all);
    }
    let s = all.finish(&RunInfo::default(), &MetricsConfig::default());
    assert_eq!(s.failures[0].count, 5);
    assert_eq!(s.failures[0].messages.len(), MAX_MESSAGES);
}

#[test]
fn merged_workers_give_the_same_summary_in_any_order() {
    let recs = records();
    let cfg = MetricsConfig::default();
    let info = RunInfo::default();
    let forward = Collector::from_records(&recs[..3]).merge(Collector::from_records(&recs[3..]));
    let backward = Collector::from_records(&recs[3..]).merge(Collector::from_records(&recs[..3]));
    assert_eq!(forward.finish(&info, &cfg), backward.finish(&info, &cfg));
}

#[test]
fn summary_round_trips_through_json() {
    let s = summarize(&records(), &RunInfo::default(), &MetricsConfig::default());
    let json = serde_json::to_string(&s).expect("serializes");
    let back: Summary = serde_json::from_str(&json).expect("deserializes");
    assert_eq!(back, s);
}

#[test]
fn config_validation_names_the_bad_value() {
    assert_eq!(MetricsConfig::default().validate(), Ok(()));
    let cfg = MetricsConfig { percentiles: vec![50.0, 150.0], ..MetricsConfig::default() };
    assert_eq!(cfg.validate(), Err(ConfigError::Percentile(150.0)));
    assert!(cfg.validate().unwrap_err().to_string().contains("150"));
    let slo = Slo { tpot_ms: Some(-1.0), ..Slo::default() };
    let cfg = MetricsConfig { goodput: Some(slo), ..MetricsConfig::default() };
    assert_eq!(cfg.validate(), Err(ConfigError::Slo { name: "tpot", value: -1.0 }));
    let cfg = MetricsConfig { window_ns: 0, ..MetricsConfig::default() };
    assert_eq!(cfg.validate(), Err(ConfigError::Window));
}

#[test]
fn percentile_lists() {
    assert_eq!(crate::parse_percentiles("50, 99.9").unwrap(), vec![50.0, 99.9]);
    assert!(crate::parse_percentiles("0").is_err());
    assert!(crate::parse_percentiles("101").is_err());
}
