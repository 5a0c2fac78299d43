//! A run's identity for comparison is its workload and load, not only its label: runs of
//! different identities are never averaged as repeats.

use servelab_compare::render::{render_plain, render_points};
use servelab_compare::{compare, group, pair, subjects_of, CompareOptions, RunData, SCENARIO_TAG};
use servelab_metrics::{Metric, MetricKey};
use servelab_records::{LoadSpec, RunInfo};
use servelab_store::{Headline, RunSetup};

/// A run at `load` over `prompts` prompts of `dataset`, measuring `rps` requests per second.
fn run(name: &str, dataset: &str, prompts: u64, load: LoadSpec, rps: f64) -> RunData {
    let info =
        RunInfo { dataset: dataset.into(), num_prompts: prompts, load, ..RunInfo::default() };
    let headline = Headline {
        request_throughput: Some(rps),
        completed: Some(prompts),
        failed: Some(0),
        ..Headline::default()
    };
    let mut d = RunData::from_headline(name, &info, headline);
    d.config = Some(RunSetup { info, ..RunSetup::default() });
    d
}

fn inf() -> LoadSpec {
    LoadSpec::default()
}

fn conc(c: u64) -> LoadSpec {
    LoadSpec { max_concurrency: Some(c), ..LoadSpec::default() }
}

fn rps(s: &servelab_compare::Subject) -> Option<f64> {
    s.value(|h| h.request_throughput)
}

/// The seed-000 case: one label, rate inf, 1, 10 and 100 prompts.
fn three_prompt_counts() -> Vec<RunData> {
    vec![
        run("m", "random(512:128)", 1, inf(), 2.43),
        run("m", "random(512:128)", 10, inf(), 23.98),
        run("m", "random(512:128)", 100, inf(), 120.92),
    ]
}

#[test]
fn a_label_over_three_prompt_counts_is_three_subjects_not_one_mean() {
    let subjects = subjects_of("m", three_prompt_counts());
    let names: Vec<&str> = subjects.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["m [1 prompt]", "m [10 prompts]", "m [100 prompts]"]);
    let values: Vec<Option<f64>> = subjects.iter().map(rps).collect();
    assert_eq!(values, [Some(2.43), Some(23.98), Some(120.92)]);
}

#[test]
fn repeats_of_one_identity_still_average() {
    let runs = vec![
        run("m", "random(512:128)", 10, inf(), 20.0),
        run("m", "random(512:128)", 10, inf(), 30.0),
    ];
    let subjects = subjects_of("m", runs);
    assert_eq!(subjects.len(), 1);
    assert_eq!(subjects[0].name, "m");
    assert_eq!(rps(&subjects[0]), Some(25.0));
}

#[test]
fn report_series_split_by_workload_at_one_load() {
    let series = group(three_prompt_counts());
    let names: Vec<&str> = series.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["m [1 prompt]", "m [10 prompts]", "m [100 prompts]"]);
    assert!(series.iter().all(|s| s.points.len() == 1 && s.points[0].runs.len() == 1));
    assert_eq!(rps(&series[2].points[0]), Some(120.92));
}

#[test]
fn a_sweep_scaling_prompts_with_load_stays_one_series() {
    let series = group(vec![
        run("s", "random(512:128)", 10, conc(1), 5.0),
        run("s", "random(512:128)", 40, conc(4), 15.0),
    ]);
    assert_eq!(series.len(), 1);
    assert_eq!(series[0].name, "s");
    assert_eq!(series[0].points.len(), 2);
}

#[test]
fn compare_names_what_differs_from_the_baseline() {
    let a = subjects_of("a", vec![run("a", "random(512:128)", 10, conc(4), 10.0)]);
    let b = subjects_of("b", vec![run("b", "random(1024:64)", 100, conc(4), 12.0)]);
    let p = pair(vec![a, b]).unwrap();
    assert_eq!(p.points.len(), 1);
    assert_eq!(p.points[0].heading, None);
    let c = compare(&p.points[0].subjects, &CompareOptions::default());
    assert_eq!(
        c.differences,
        ["b: dataset: random(1024:64) vs random(512:128); prompts: 100 prompts vs 10 prompts"]
    );
    let text = render_plain(&c);
    assert!(text.contains("NOT THE SAME WORKLOAD AND LOAD"), "{text}");
    assert!(text.contains("  b: dataset: random(1024:64) vs random(512:128)"), "{text}");

    // The same workload and load: nothing to warn about.
    let a = subjects_of("a", vec![run("a", "random(512:128)", 10, conc(4), 10.0)]);
    let b = subjects_of("b", vec![run("b", "random(512:128)", 10, conc(4), 12.0)]);
    let c = compare(&pair(vec![a, b]).unwrap().points[0].subjects, &CompareOptions::default());
    assert!(c.differences.is_empty());
    assert!(!render_plain(&c).contains("NOT THE SAME"));
}

fn sweep_point(label: &str, scenario: &str, c: u64, rps: f64) -> RunData {
    let mut r = run(&format!("{label} [{scenario}]"), "random(500:100)", 10 * c, conc(c), rps);
    r.tags.push((SCENARIO_TAG.into(), scenario.into()));
    r
}

#[test]
fn sweeps_compare_point_by_point() {
    let a = subjects_of(
        "A",
        vec![
            sweep_point("A", "chat", 1, 4.0),
            sweep_point("A", "chat", 4, 10.0),
            sweep_point("A", "long", 1, 1.0),
        ],
    );
    let b =
        subjects_of("B", vec![sweep_point("B", "chat", 4, 12.0), sweep_point("B", "chat", 1, 5.0)]);
    let p = pair(vec![a, b]).unwrap();
    let headings: Vec<Option<String>> = p.points.iter().map(|q| q.heading.clone()).collect();
    assert_eq!(
        headings,
        [
            Some("scenario chat, random(500:100), 10 prompts, c=1".to_string()),
            Some("scenario chat, random(500:100), 40 prompts, c=4".to_string()),
        ]
    );
    assert_eq!(
        p.unmatched,
        ["A [scenario long, 10 prompts, c=1] (scenario long, random(500:100), 10 prompts, c=1)"]
    );
    let key = MetricKey { metric: Metric::RequestThroughput, stat: None };
    let points: Vec<_> = p
        .points
        .iter()
        .map(|q| (q.heading.clone(), compare(&q.subjects, &CompareOptions::default())))
        .collect();
    let row = |i: usize| points[i].1.rows.iter().find(|r| r.metric == key).unwrap().clone();
    assert_eq!(row(0).values, [Some(4.0), Some(5.0)]);
    assert_eq!(row(1).values, [Some(10.0), Some(12.0)]);
    assert_eq!(row(1).deltas[1].unwrap().abs, 2.0);
    assert!(points.iter().all(|(_, c)| c.differences.is_empty()));
    let text = render_points(&points, &p.unmatched, false);
    assert!(text.contains("== scenario chat, random(500:100), 40 prompts, c=4 =="), "{text}");
    assert!(text.contains("not compared"), "{text}");
}

#[test]
fn sweeps_without_a_common_point_are_refused() {
    let a =
        subjects_of("A", vec![sweep_point("A", "chat", 1, 4.0), sweep_point("A", "chat", 2, 6.0)]);
    let b =
        subjects_of("B", vec![sweep_point("B", "long", 1, 1.0), sweep_point("B", "long", 2, 2.0)]);
    let e = pair(vec![a, b]).unwrap_err();
    assert!(e.starts_with("no workload and load is common to every operand"), "{e}");
    assert!(e.contains("pass run ids"), "{e}");
}

/// Issue 25 item 8: a predicted sweep (10 prompts per level) against a measured one (200
/// per level) by label: compared point by point, the prompt counts named as a caveat.
#[test]
fn sweeps_with_other_prompt_counts_compare_with_a_caveat() {
    let predicted: Vec<RunData> =
        [1, 2, 4].map(|c| sweep_point("pred", "chat", c, c as f64)).into();
    let measured: Vec<RunData> = [1, 2, 4]
        .map(|c| {
            let mut r = run("meas [chat]", "random(500:100)", 200, conc(c), c as f64 * 1.1);
            r.tags.push((SCENARIO_TAG.into(), "chat".into()));
            r
        })
        .into();
    let p = pair(vec![subjects_of("pred", predicted), subjects_of("meas", measured)]).unwrap();
    assert_eq!(p.points.len(), 3);
    assert!(p.unmatched.is_empty(), "{:?}", p.unmatched);
    let c = compare(&p.points[2].subjects, &CompareOptions::default());
    assert_eq!(c.differences, ["meas [c=4]: prompts: 200 prompts vs 40 prompts"]);
    assert!(render_plain(&c).contains("NOT THE SAME WORKLOAD AND LOAD"));
}

/// At rate inf the prompt count is the load: 10 and 100 prompts are never paired.
#[test]
fn all_at_once_runs_of_other_prompt_counts_stay_apart_and_the_error_is_short() {
    let mk = |name: &str, n: u64| {
        (0..20).map(|k| run(name, &format!("random({k}:8)"), n, inf(), 1.0)).collect::<Vec<_>>()
    };
    let e = pair(vec![subjects_of("a", mk("a", 10)), subjects_of("b", mk("b", 100))]).unwrap_err();
    assert!(e.len() < 400, "{} bytes: {e}", e.len());
    assert!(e.contains("and 37 more"), "{e}");
}

/// Issue 25 item 3: `compare burst ramped` called both "load inf". A ramp is its own load.
#[test]
fn a_ramped_run_is_not_all_at_once() {
    let burst = run("burst", "random(500:100)", 100, inf(), 10.0);
    let mut ramped = run("ramped", "random(500:100)", 100, inf(), 4.0);
    if let Some(c) = ramped.config.as_mut() {
        c.info.ramp = Some(
            servelab_records::Ramp::new(servelab_records::RampStrategy::Linear, 1.0, 10.0).unwrap(),
        );
    }
    assert_eq!(ramped.identity().load, "ramp linear 1→10 req/s");
    let p =
        pair(vec![subjects_of("burst", vec![burst]), subjects_of("ramped", vec![ramped])]).unwrap();
    let c = compare(&p.points[0].subjects, &CompareOptions::default());
    assert_eq!(c.differences, ["ramped: load: ramp linear 1→10 req/s vs inf"]);
    let text = render_plain(&c);
    assert!(text.contains("ramped: load ramp linear 1→10 req/s, success rate"), "{text}");
    assert!(text.contains("burst: load inf,"), "{text}");
    assert!(text.contains("NOT THE SAME WORKLOAD AND LOAD"), "{text}");
}
