//! Comparisons, rankings and the written-summary rules on small hand-made runs.

use servelab_compare::deploy::{scenario_views, ScenarioView};
use servelab_compare::narrative::{
    rule_best_balance, rule_best_latency, rule_best_throughput, rule_rejected,
    rule_worst_degradation,
};
use servelab_compare::render::{delta_cell, render_plain};
use servelab_compare::{
    compare, group, rankings, CompareOptions, DeltaVerdict, RunData, Samples, Subject,
};
use servelab_metrics::{Metric, MetricKey, Stat};
use servelab_records::LoadSpec;
use servelab_store::Headline;

fn run(
    name: &str,
    conc: u64,
    out_tps: f64,
    ttft: f64,
    ttft_p99: f64,
    completed: u64,
    failed: u64,
) -> RunData {
    RunData {
        name: name.into(),
        id: None,
        status: "complete".into(),
        load: LoadSpec { max_concurrency: Some(conc), ..LoadSpec::default() },
        headline: Headline {
            output_throughput: Some(out_tps),
            ttft_mean_ms: Some(ttft),
            ttft_p99_ms: Some(ttft_p99),
            tpot_mean_ms: Some(10.0),
            completed: Some(completed),
            failed: Some(failed),
            ..Headline::default()
        },
        samples: None,
        config: None,
        tags: Vec::new(),
        summary: None,
        records: Vec::new(),
    }
}

fn with_ttft(mut r: RunData, ttfts: &[f64]) -> RunData {
    r.samples =
        Some(Samples { ttft: ttfts.iter().map(|t| vec![*t]).collect(), ..Samples::default() });
    r
}

fn opts() -> CompareOptions {
    CompareOptions::default()
}

#[test]
fn deltas_are_against_the_baseline_and_noise_comes_from_requests() {
    let a = with_ttft(run("a", 4, 100.0, 50.0, 60.0, 100, 0), &[49.0, 50.0, 51.0, 50.0]);
    let b = with_ttft(run("b", 4, 120.0, 40.0, 45.0, 100, 0), &[39.0, 40.0, 41.0, 40.0]);
    let c = compare(&[Subject::single(a), Subject::single(b)], &opts());
    let row = |m: MetricKey| c.rows.iter().find(|r| r.metric == m).unwrap();
    let thr = row(MetricKey::of(Metric::OutputThroughput));
    let d = thr.deltas[1].unwrap();
    assert_eq!((d.abs, d.pct), (20.0, Some(20.0)));
    assert_eq!(d.verdict, DeltaVerdict::Unknown, "single runs: no noise for throughput");
    assert_eq!(thr.best, Some(1));
    let ttft = row(MetricKey::stat(Metric::Ttft, Stat::Mean)).deltas[1].unwrap();
    assert_eq!(ttft.abs, -10.0);
    assert_eq!(ttft.verdict, DeltaVerdict::Better);
    let band = ttft.interval.unwrap();
    assert_eq!(
        delta_cell(Some(&ttft)),
        format!("-10.00 (-20.0%) better [{:+.2}, {:+.2}]", band.lo, band.hi)
    );
    assert_eq!(row(MetricKey::stat(Metric::Ttft, Stat::Mean)).best, Some(1));
    assert!(
        row(MetricKey::stat(Metric::Itl, Stat::Mean)).deltas[1].is_none(),
        "missing on both sides"
    );
}

#[test]
fn repeated_runs_give_run_to_run_noise_for_throughput() {
    let a = Subject {
        name: "a".into(),
        runs: vec![run("a", 4, 100.0, 50.0, 60.0, 10, 0), run("a", 4, 102.0, 50.0, 60.0, 10, 0)],
    };
    let b = Subject {
        name: "b".into(),
        runs: vec![run("b", 4, 101.0, 50.0, 60.0, 10, 0), run("b", 4, 99.0, 50.0, 60.0, 10, 0)],
    };
    let c = compare(&[a, b], &opts());
    let thr = c.rows.iter().find(|r| r.metric == MetricKey::of(Metric::OutputThroughput)).unwrap();
    assert_eq!(thr.values, vec![Some(101.0), Some(100.0)]);
    let d = thr.deltas[1].unwrap();
    assert_eq!(d.verdict, DeltaVerdict::WithinNoise);
    assert_eq!(d.noise, servelab_compare::Noise::FewRepeats { baseline: 2, this: 2 });
}

/// Issue 25: two repeats a side, B 2.5 % slower on every run. The bootstrap over two runs
/// called it "worse"; the interval must show and say "within noise".
#[test]
fn two_repeats_at_2_5_percent_are_within_noise_and_the_band_is_shown() {
    let a = Subject {
        name: "a".into(),
        runs: vec![run("a", 4, 100.0, 50.0, 60.0, 10, 0), run("a", 4, 101.0, 50.0, 60.0, 10, 0)],
    };
    let b = Subject {
        name: "b".into(),
        runs: vec![run("b", 4, 97.5, 50.0, 60.0, 10, 0), run("b", 4, 98.6, 50.0, 60.0, 10, 0)],
    };
    let c = compare(&[a, b], &opts());
    let thr = c.rows.iter().find(|r| r.metric == MetricKey::of(Metric::OutputThroughput)).unwrap();
    let d = thr.deltas[1].unwrap();
    assert_eq!(d.verdict, DeltaVerdict::WithinNoise, "{d:?}");
    let i = d.interval.unwrap();
    assert_eq!(
        delta_cell(Some(&d)),
        format!("-2.45 (-2.4%) within noise [{:+.2}, {:+.2}]", i.lo, i.hi)
    );
    let text = render_plain(&c);
    assert!(text.contains("within noise ["), "{text}");
    assert!(text.contains("Welch t interval over repeated runs"), "{text}");
}

#[test]
fn a_rejected_run_is_never_the_winner() {
    let a = run("a", 4, 100.0, 50.0, 60.0, 100, 0);
    let b = run("b", 4, 500.0, 10.0, 12.0, 90, 10);
    let c = compare(&[Subject::single(a), Subject::single(b)], &opts());
    assert!(c.subjects[1].rejected);
    assert!(c.rows.iter().all(|r| r.best != Some(1)));
    let text = render_plain(&c);
    assert!(text.contains("b: load c=4, success rate 90.0% - REJECTED"), "{text}");
    let lenient = CompareOptions { min_success_rate: 0.8, ..opts() };
    let c = compare(
        &[
            Subject::single(run("a", 4, 100.0, 50.0, 60.0, 100, 0)),
            Subject::single(run("b", 4, 500.0, 10.0, 12.0, 90, 10)),
        ],
        &lenient,
    );
    assert!(!c.subjects[1].rejected);
}

fn sweep() -> Vec<servelab_compare::Series> {
    group(vec![
        run("fast", 1, 100.0, 20.0, 25.0, 50, 0),
        run("fast", 8, 400.0, 60.0, 200.0, 50, 0),
        run("big", 1, 90.0, 30.0, 35.0, 50, 0),
        run("big", 8, 600.0, 50.0, 70.0, 50, 0),
        run("flaky", 1, 900.0, 5.0, 6.0, 40, 10),
    ])
}

#[test]
fn rankings_per_level_exclude_rejected_points() {
    let s = sweep();
    assert_eq!(s.len(), 3);
    assert_eq!(s[0].points.len(), 2);
    let r = rankings(&s, &opts());
    let at1 = r
        .iter()
        .find(|l| {
            l.load.max_concurrency == Some(1) && l.metric == MetricKey::of(Metric::OutputThroughput)
        })
        .unwrap();
    let names: Vec<&str> = at1.entries.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, vec!["fast", "big"], "flaky is rejected");
    let at8 = r
        .iter()
        .find(|l| {
            l.load.max_concurrency == Some(8)
                && l.metric == MetricKey::stat(Metric::Ttft, Stat::P(99.0))
        })
        .unwrap();
    assert_eq!(at8.entries[0].name, "big");
}

/// The sweep as the rules read it: one scenario view, a deployment per name, a level per
/// concurrency.
fn view() -> ScenarioView {
    let runs = vec![
        run("fast", 1, 100.0, 20.0, 25.0, 50, 0),
        run("fast", 8, 400.0, 60.0, 200.0, 50, 0),
        run("big", 1, 90.0, 30.0, 35.0, 50, 0),
        run("big", 8, 600.0, 50.0, 70.0, 50, 0),
        run("flaky", 1, 900.0, 5.0, 6.0, 40, 10),
    ];
    scenario_views(&runs).remove(0)
}

#[test]
fn each_rule_says_what_the_numbers_say() {
    let v = view();
    let o = opts();
    assert_eq!(
        rule_rejected(&v, &o)[0].text,
        "flaky at 1 concurrent is excluded: success rate 80.0% is below 99.0%."
    );
    assert_eq!(
        rule_best_throughput(&v, &o).unwrap().text,
        "Best throughput: big with 600.0 output tok/s at 8 concurrent."
    );
    assert_eq!(
        rule_best_latency(&v, &o).unwrap().text,
        "Best single-request latency: fast, mean TTFT 20.0 ms, mean TPOT 10.00 ms at 1 concurrent, its lightest level."
    );
    // fast: c=1 ranks (1 + 1), c=8 ranks (2 + 2) → 3.0; big: (2 + 2), (1 + 1) → 3.0; tie
    // goes to the higher peak throughput.
    assert_eq!(
        rule_best_balance(&v, &o).unwrap().text,
        "Best balance: big (mean rank 3.0 in output throughput plus p99 TTFT, over 2 levels)."
    );
    assert_eq!(
        rule_worst_degradation(&v, &o).unwrap().text,
        "Worst degradation under load: fast, p99 TTFT grows 8.0x from 25.0 ms at 1 concurrent to 200.0 ms at 8 concurrent."
    );
}

#[test]
fn rules_that_lack_inputs_say_nothing() {
    let one = scenario_views(&[run("solo", 4, 100.0, 20.0, 25.0, 10, 0)]).remove(0);
    let o = opts();
    assert!(rule_best_balance(&one, &o).is_none(), "needs two deployments");
    assert!(rule_worst_degradation(&one, &o).is_none(), "needs two levels");
    assert!(rule_rejected(&one, &o).is_empty());
    assert!(rule_best_throughput(&one, &o).is_some());
    let all_bad = scenario_views(&[run("bad", 4, 100.0, 20.0, 25.0, 1, 1)]).remove(0);
    assert!(rule_best_throughput(&all_bad, &o).is_none());
}

#[test]
fn a_name_over_two_datasets_is_two_series_even_at_two_loads() {
    let mut a = run("m", 1, 100.0, 20.0, 25.0, 10, 0);
    let mut b = run("m", 8, 400.0, 60.0, 200.0, 10, 0);
    for (r, ds) in [(&mut a, "random(8:8)"), (&mut b, "random(16:16)")] {
        let info = servelab_records::RunInfo {
            dataset: ds.into(),
            num_prompts: 10,
            load: r.load,
            ..Default::default()
        };
        r.config = Some(servelab_store::RunSetup { info, ..Default::default() });
    }
    let names: Vec<String> =
        group(vec![a.clone(), b.clone()]).into_iter().map(|s| s.name).collect();
    assert_eq!(names, ["m [random(8:8)]", "m [random(16:16)]"]);
    // One dataset whose prompts scale with the load (a sweep) stays one series.
    let mut c = b.clone();
    if let Some(cfg) = c.config.as_mut() {
        cfg.info.dataset = "random(8:8)".into();
        cfg.info.num_prompts = 80;
    }
    let s = group(vec![a, c]);
    assert_eq!((s.len(), s[0].name.as_str(), s[0].points.len()), (1, "m", 2));
}

/// A prediction beside a measurement: the difference is the prediction's error ("off"), never
/// "better" or "worse", and a note says which side is the prediction.
#[test]
fn a_prediction_beside_a_measurement_is_off_not_better_or_worse() {
    let p = with_ttft(run("h20 (predicted)", 4, 100.0, 50.0, 60.0, 100, 0), &[49.0, 50.0, 51.0]);
    let m = with_ttft(run("h20", 4, 120.0, 40.0, 45.0, 100, 0), &[39.0, 40.0, 41.0]);
    let c = compare(&[Subject::single(p), Subject::single(m)], &opts());
    assert!(c.subjects[0].predicted && !c.subjects[1].predicted);
    let text = render_plain(&c);
    assert!(text.contains("+20.00 (+20.0%) off"), "{text}");
    let table = text.split("\n\n").next().unwrap();
    assert!(!table.contains("better") && !table.contains("worse"), "{text}");
    assert!(!table.contains(" *"), "no best value marked: {text}");
    assert!(
        text.contains(
            "h20 (predicted) is a prediction and h20 a measurement: their differences are the \
             prediction's error (\"off\"), not one being better or worse"
        ),
        "{text}"
    );
    // Two measurements keep their verdicts.
    let a = with_ttft(run("a", 4, 100.0, 50.0, 60.0, 100, 0), &[49.0, 50.0, 51.0]);
    let b = with_ttft(run("b", 4, 120.0, 40.0, 45.0, 100, 0), &[39.0, 40.0, 41.0]);
    let c = compare(&[Subject::single(a), Subject::single(b)], &opts());
    assert!(render_plain(&c).contains("better"));
}
