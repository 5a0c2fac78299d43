//! The delivered load and the steady state in a comparison and a report: the rows follow the
//! headline when a run reached a steady state, read from the stored summaries, with noise
//! bands over the steady requests; the report has one Load row per run.

use servelab_compare::report::{build, load_table};
use servelab_compare::{compare, CompareOptions, RunData, Subject};
use servelab_metrics::{summarize, Metric, MetricKey, MetricsConfig, Stat, HEADLINE, LOAD_KEYS};
use servelab_records::{Chunk, ChunkKind, LoadSpec, RequestRecord, RunInfo};

const MS: u64 = 1_000_000;

/// Two slots of `per_slot` requests each, `len` ms long, each sent 1 ms after its slot freed,
/// with a token 20 and 60 ms after its send and one at its end.
fn run(name: &str, per_slot: u64, len: u64) -> RunData {
    let recs: Vec<RequestRecord> = (0..2 * per_slot)
        .map(|i| {
            let intended = (len + 1) * (i / 2);
            let sent = intended + 1;
            let token = |t: u64| Chunk {
                t_ns: (sent + t) * MS,
                kind: ChunkKind::Content,
                text: "x".into(),
                tokens: Some(1),
            };
            RequestRecord {
                sent_ns: sent * MS,
                prompt_tokens: Some(16),
                max_tokens: Some(3),
                chunks: vec![token(20), token(60), token(len)],
                end_ns: Some((sent + len) * MS),
                status: Some(200),
                ..RequestRecord::due(i, 0, intended * MS)
            }
        })
        .collect();
    let info = RunInfo {
        load: LoadSpec { max_concurrency: Some(2), ..LoadSpec::default() },
        ..RunInfo::default()
    };
    RunData::from_summary(name, summarize(&recs, &info, &MetricsConfig::default()), recs)
}

#[test]
fn steady_rows_follow_the_headline_when_a_run_reached_a_steady_state() {
    // a: 100 ms requests, window [1, 1112]; b: 150 ms, window [1, 1662]; 22 sends in each.
    let c = compare(
        &[Subject::single(run("a", 12, 100)), Subject::single(run("b", 12, 150))],
        &CompareOptions::default(),
    );
    let keys: Vec<MetricKey> = c.rows.iter().map(|r| r.metric).collect();
    assert!(LOAD_KEYS.iter().all(|k| keys.contains(k)), "{keys:?}");
    let row = |m: MetricKey| c.rows.iter().find(|r| r.metric == m).unwrap();
    let rate = row(MetricKey::of(Metric::DeliveredRate));
    assert_eq!(rate.values, [Some(22.0 / 1.111), Some(22.0 / 1.661)]);
    // Judged against its setting, not against the other run: no best value.
    assert_eq!(rate.best, None);
    let out = row(MetricKey::of(Metric::SteadyOutputThroughput));
    assert_eq!(out.values, [Some(66.0 / 1.111), Some(66.0 / 1.661)]);
    // TPOT (E2E − TTFT) / 2 = (101 − 21) / 2 and (151 − 21) / 2, over the 22 steady requests.
    let tpot = row(MetricKey::stat(Metric::SteadyTpot, Stat::Mean));
    assert_eq!(tpot.values, [Some(40.0), Some(65.0)]);
    assert_eq!(row(MetricKey::stat(Metric::SteadyTtft, Stat::P(99.0))).values, [Some(21.0); 2]);

    // Runs too short for a steady state: no load rows.
    let short = compare(
        &[Subject::single(run("a", 3, 100)), Subject::single(run("b", 3, 150))],
        &CompareOptions::default(),
    );
    assert!(HEADLINE.iter().all(|k| short.rows.iter().any(|r| r.metric == *k)));
    assert!(!short.rows.iter().any(|r| LOAD_KEYS.contains(&r.metric)));
}

#[test]
fn the_report_has_one_load_row_per_run() {
    let r = build("load", vec![run("a", 12, 100), run("b", 3, 150)], &CompareOptions::default());
    let t = load_table(&r);
    let cells: Vec<Vec<String>> = t.rows.iter().map(|r| r.to_vec()).collect();
    assert_eq!(cells.len(), 2);
    assert_eq!(
        cells[0][1..],
        [
            "c=2",
            "19.80",
            "1.98",
            "1.00",
            "-",
            "1.00 to 1112.00 ms (92% of the run)",
            "59.41",
            "21.00",
            "21.00"
        ]
    );
    // The short run: delivered over its sends, no steady figures.
    assert_eq!(cells[1][6..], ["not reached (see the warnings)", "-", "-", "21.00"]);
}
