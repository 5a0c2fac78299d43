//! Reasoning models in a comparison: the time to the first answer token and each phase's
//! figures follow the headline rows when a run had reasoning, read from the stored summaries.

use servelab_compare::{compare, CompareOptions, DeltaVerdict, RunData, Subject};
use servelab_metrics::{summarize, Metric, MetricKey, MetricsConfig, Stat, HEADLINE};
use servelab_records::{Chunk, ChunkKind, LoadSpec, RequestRecord, RunInfo};

/// 10 requests one at a time: the first token `ttft` ms after the intended send, then one
/// token every `itl` ms, 16 in all, of which the first `reasoning` are reasoning.
fn run(name: &str, ttft: u64, itl: u64, reasoning: u64) -> RunData {
    let ms = 1_000_000u64;
    let recs: Vec<RequestRecord> = (0..10u64)
        .map(|i| {
            let start = i * 1000 * ms;
            let first = start + ttft * ms;
            RequestRecord {
                sent_ns: start,
                prompt_tokens: Some(32),
                max_tokens: Some(16),
                chunks: (0..16u64)
                    .map(|k| Chunk {
                        t_ns: first + k * itl * ms,
                        kind: if k < reasoning { ChunkKind::Reasoning } else { ChunkKind::Content },
                        text: "t".into(),
                        tokens: Some(1),
                    })
                    .collect(),
                end_ns: Some(first + 15 * itl * ms),
                status: Some(200),
                ..RequestRecord::due(i, start, start)
            }
        })
        .collect();
    let info = RunInfo {
        load: LoadSpec { max_concurrency: Some(1), ..LoadSpec::default() },
        ..RunInfo::default()
    };
    let s = summarize(&recs, &info, &MetricsConfig::default());
    RunData::from_summary(name, s, recs)
}

#[test]
fn reasoning_rows_follow_the_headline_only_when_a_run_had_reasoning() {
    // a: TTFA 40 + 4 × 10 = 80 ms; b: 30 + 6 × 5 = 60 ms.
    let c = compare(
        &[Subject::single(run("a", 40, 10, 4)), Subject::single(run("b", 30, 5, 6))],
        &CompareOptions::default(),
    );
    // The headline, interactivity (no run states its GPUs: no per-GPU row), seven reasoning.
    assert_eq!(c.rows.len(), HEADLINE.len() + 1 + 7);
    let row = |m: MetricKey| c.rows.iter().find(|r| r.metric == m).unwrap();
    let ttfa = row(MetricKey::stat(Metric::Ttfa, Stat::Mean));
    assert_eq!(ttfa.values, [Some(80.0), Some(60.0)]);
    let d = ttfa.deltas[1].unwrap();
    assert_eq!(d.abs, -20.0);
    // Every request's TTFA is the same in each run: the noise band is the difference itself.
    assert_eq!(d.verdict, DeltaVerdict::Better);
    assert_eq!(ttfa.best, Some(1));
    let ttfr = row(MetricKey::stat(Metric::Ttfr, Stat::Mean));
    assert_eq!(ttfr.values, [Some(40.0), Some(30.0)]);
    let tpot = row(MetricKey::stat(Metric::AnswerTpot, Stat::Mean));
    assert_eq!(tpot.values, [Some(10.0), Some(5.0)]);
    let tokens = row(MetricKey::of(Metric::ReasoningTokens));
    assert_eq!(tokens.values, [Some(4.0), Some(6.0)]);
    assert_eq!(row(MetricKey::of(Metric::AnswerTokens)).values, [Some(12.0), Some(10.0)]);
    // Without reasoning, the headline alone.
    let c = compare(
        &[Subject::single(run("a", 40, 10, 0)), Subject::single(run("b", 30, 5, 0))],
        &CompareOptions::default(),
    );
    assert_eq!(c.rows.len(), HEADLINE.len() + 1);
}

#[test]
fn the_report_shows_the_reasoning_figures_of_runs_that_had_reasoning() {
    use servelab_compare::report::{build, markdown, summary_table};
    let opts = CompareOptions::default();
    let r = build("R", vec![run("a", 40, 10, 4), run("b", 30, 5, 6)], &opts);
    let md = markdown(&r);
    assert!(md.contains("TTFA mean (ms)"), "{md}");
    assert!(md.contains("Answer TPOT mean (ms)"), "{md}");
    let table = summary_table(&r).to_plain();
    assert!(table.contains("TTFA mean (ms)"), "{table}");
    let r = build("R", vec![run("a", 40, 10, 0), run("b", 30, 5, 0)], &opts);
    assert!(!markdown(&r).contains("TTFA"));
}
