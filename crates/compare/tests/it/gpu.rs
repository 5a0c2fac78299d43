//! GPU energy and cost in a comparison: joules per output token, $ per million output tokens
//! and the GPUs' watts follow the headline rows when a run had them, read from the stored
//! summaries; fewer joules and dollars are better, watts have no best value.

use servelab_compare::{compare, CompareOptions, DeltaVerdict, RunData, Subject};
use servelab_metrics::{summarize, Metric, MetricKey, MetricsConfig, GPU_KEYS};
use servelab_records::{Chunk, ChunkKind, GpuReading, GpuScrape, LoadSpec, RequestRecord, RunInfo};

/// 10 requests one at a time, 16 tokens each (TTFT 40 ms, ITL 10 ms), on two GPUs drawing
/// `watts` each, read 1 s before and 30 s after the run; `hourly` USD per GPU hour.
fn run(name: &str, watts: Option<f64>, hourly: Option<f64>) -> RunData {
    let ms = 1_000_000u64;
    let recs: Vec<RequestRecord> = (0..10u64)
        .map(|i| {
            let start = i * 1000 * ms;
            let first = start + 40 * ms;
            RequestRecord {
                sent_ns: start,
                prompt_tokens: Some(32),
                max_tokens: Some(16),
                chunks: (0..16u64)
                    .map(|k| Chunk {
                        t_ns: first + k * 10 * ms,
                        kind: ChunkKind::Content,
                        text: "t".into(),
                        tokens: Some(1),
                    })
                    .collect(),
                end_ns: Some(first + 150 * ms),
                status: Some(200),
                ..RequestRecord::due(i, start, start)
            }
        })
        .collect();
    let info = RunInfo {
        load: LoadSpec { max_concurrency: Some(1), ..LoadSpec::default() },
        ..RunInfo::default()
    };
    let mut s = summarize(&recs, &info, &MetricsConfig::default());
    let scrapes: Vec<GpuScrape> = match watts {
        Some(w) => [-1000.0, 30_000.0]
            .iter()
            .map(|&t_ms| GpuScrape {
                t_ms,
                gpus: (0..2)
                    .map(|g| GpuReading {
                        gpu: g.to_string(),
                        power_w: Some(w),
                        ..GpuReading::default()
                    })
                    .collect(),
                error: None,
            })
            .collect(),
        None => Vec::new(),
    };
    let source = watts.map(|_| "http://dcgm:9400/metrics");
    servelab_metrics::gpu::attach(&mut s, &scrapes, source, hourly);
    RunData::from_summary(name, s, recs)
}

#[test]
fn gpu_rows_follow_the_headline_only_when_a_run_had_them() {
    // The window: 9 s to the last request's start, 190 ms to its end; 160 output tokens.
    let window = 9.19;
    let c = compare(
        &[
            Subject::single(run("a", Some(400.0), Some(2.0))),
            Subject::single(run("b", Some(300.0), Some(3.0))),
        ],
        &CompareOptions::default(),
    );
    let without = compare(
        &[Subject::single(run("a", None, None)), Subject::single(run("b", None, None))],
        &CompareOptions::default(),
    );
    assert_eq!(c.rows.len(), without.rows.len() + GPU_KEYS.len());
    let keys: Vec<String> =
        c.rows.iter().filter(|r| r.metric.metric.is_gpu()).map(|r| r.metric.key()).collect();
    assert_eq!(
        keys,
        [
            "joules_per_output_token",
            "usd_per_million_output_tokens",
            "gpu_mean_watts",
            "gpu_peak_watts"
        ]
    );
    let row = |m: Metric| c.rows.iter().find(|r| r.metric == MetricKey::of(m)).unwrap();
    let j = row(Metric::JoulesPerOutputToken);
    let (ja, jb) = (j.values[0].unwrap(), j.values[1].unwrap());
    assert!((ja - 2.0 * 400.0 * window / 160.0).abs() < 1e-9, "{ja}");
    assert!((jb - 2.0 * 300.0 * window / 160.0).abs() < 1e-9, "{jb}");
    assert_eq!(j.best, Some(1));
    let usd = row(Metric::UsdPerMillionOutputTokens);
    let want = |h: f64| h * 2.0 * window * 1e6 / (3600.0 * 160.0);
    assert!((usd.values[0].unwrap() - want(2.0)).abs() < 1e-9);
    assert!((usd.values[1].unwrap() - want(3.0)).abs() < 1e-9);
    assert_eq!(usd.best, Some(0));
    let watts = row(Metric::GpuMeanWatts);
    assert!((watts.values[0].unwrap() - 400.0).abs() < 1e-9);
    assert_eq!(watts.best, None);
    assert_eq!(row(Metric::GpuPeakWatts).values, [Some(400.0), Some(300.0)]);
    // One run each: no noise band, so no verdict.
    assert_eq!(j.deltas[1].map(|d| d.verdict), Some(DeltaVerdict::Unknown));
    // A run without them shows none (`-`) beside one with them; runs without any, no rows.
    let c = compare(
        &[Subject::single(run("a", None, None)), Subject::single(run("b", Some(300.0), None))],
        &CompareOptions::default(),
    );
    let j = c.rows.iter().find(|r| r.metric.metric == Metric::JoulesPerOutputToken).unwrap();
    assert_eq!(j.values[0], None);
    assert!(!without.rows.iter().any(|r| r.metric.metric.is_gpu()));
}

#[test]
fn the_report_shows_the_gpu_figures_of_runs_that_had_them() {
    use servelab_compare::report::{build, gpu_table, markdown, summary_table};
    let opts = CompareOptions::default();
    let r = build("R", vec![run("a", Some(400.0), Some(2.0)), run("b", Some(300.0), None)], &opts);
    let table = summary_table(&r).to_plain();
    assert!(table.contains("Energy per output token (J/tok)"), "{table}");
    assert!(table.contains("Cost per million output tokens ($/Mtok)"), "{table}");
    let md = markdown(&r);
    assert!(md.contains("GPU power peak (W)"));
    // Its own table: each run's GPUs, energy and price (b has no price).
    let gpus = gpu_table(&r).to_plain();
    let lines: Vec<&str> = gpus.lines().collect();
    assert_eq!(lines.len(), 4, "{gpus}");
    // 2 GPUs × 400 W × 9.19 s = 7352 J over 160 tokens; 2 $/h × 2 × 9.19 s / 160 tokens.
    let cells = |l: &str| -> Vec<String> {
        l.split("  ").map(str::trim).filter(|c| !c.is_empty()).map(String::from).collect()
    };
    assert_eq!(
        cells(lines[2]),
        [
            "a @ c=1",
            "2",
            "7352",
            "power integrated over time",
            "45.950",
            "400.0",
            "400.0",
            "-",
            "2.00",
            "63.819"
        ]
    );
    assert_eq!(cells(lines[3])[8..], ["-", "-"]);
    assert!(md.contains("## GPU energy and cost (measured window)"), "{md}");
    // The GPUs' power over each run, on the runs' time axis (the readings 1 s before and 30 s
    // after the first send, both GPUs together).
    let charts = servelab_compare::report::charts(&r);
    let power = charts.iter().find(|c| c.name == "gpu-power").expect("a GPU power chart");
    let series: Vec<(&str, &[(f64, f64)])> =
        power.series.iter().map(|l| (l.label.as_str(), l.points.as_slice())).collect();
    assert_eq!(
        series,
        [
            ("a @ c=1", &[(-1.0, 800.0), (30.0, 800.0)][..]),
            ("b @ c=1", &[(-1.0, 600.0), (30.0, 600.0)][..])
        ]
    );
    let r = build("R", vec![run("a", None, None), run("b", None, None)], &opts);
    assert!(!markdown(&r).contains("J/tok"));
    assert!(!servelab_compare::report::charts(&r).iter().any(|c| c.name == "gpu-power"));
}
