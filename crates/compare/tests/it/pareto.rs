//! Issue 27: output tokens/s per GPU and per user in a comparison, and a report's Pareto
//! front across deployments, from runs that state their GPU count (`--gpus`), with exact
//! values.

use servelab_compare::deploy::{scenario_views, view_frontier};
use servelab_compare::{compare, CompareOptions, RunData, Subject, SCENARIO_TAG};
use servelab_metrics::pareto::Basis;
use servelab_metrics::{Metric, MetricKey};
use servelab_records::{LoadSpec, RunInfo};
use servelab_store::{Headline, RunSetup};

/// A sweep point of deployment `name` on `gpus` GPUs at concurrency `c`: output tok/s and
/// mean TPOT (ms).
fn point(name: &str, gpus: Option<u32>, c: u64, out: f64, tpot: f64) -> RunData {
    let info = RunInfo {
        dataset: "random(1000:1000)".into(),
        num_prompts: 10 * c,
        load: LoadSpec { max_concurrency: Some(c), ..LoadSpec::default() },
        gpus,
        ..RunInfo::default()
    };
    let headline = Headline {
        output_throughput: Some(out),
        tpot_mean_ms: Some(tpot),
        completed: Some(10 * c),
        failed: Some(0),
        ..Headline::default()
    };
    let mut d = RunData::from_headline(&format!("{name} [1000x1000]"), &info, headline);
    d.config = Some(RunSetup { info, ..Default::default() });
    d.tags.push((SCENARIO_TAG.into(), "1000x1000".into()));
    d
}

#[test]
fn compare_has_per_gpu_and_per_user_rows() {
    let a = point("tp4", Some(4), 8, 1000.0, 10.0);
    let b = point("tp8", Some(8), 8, 1200.0, 8.0);
    let c = compare(&[Subject::single(a), Subject::single(b)], &CompareOptions::default());
    let row = |m: Metric| c.rows.iter().find(|r| r.metric == MetricKey::of(m)).unwrap();
    // 1000 / 4 = 250 and 1200 / 8 = 150 tok/s per GPU: TP4 is best per GPU.
    let gpu = row(Metric::OutputThroughputPerGpu);
    assert_eq!((gpu.values.clone(), gpu.best), (vec![Some(250.0), Some(150.0)], Some(0)));
    assert_eq!(gpu.deltas[1].unwrap().abs, -100.0);
    // 1000 / 10 = 100 and 1000 / 8 = 125 tok/s per user: TP8 is best per user.
    let user = row(Metric::Interactivity);
    assert_eq!((user.values.clone(), user.best), (vec![Some(100.0), Some(125.0)], Some(1)));
    // Without a GPU count on any run, no per-GPU row; per user stays.
    let a = point("tp4", None, 8, 1000.0, 10.0);
    let c = compare(&[Subject::single(a.clone()), Subject::single(a)], &CompareOptions::default());
    assert!(c.rows.iter().all(|r| r.metric != MetricKey::of(Metric::OutputThroughputPerGpu)));
    assert!(c.rows.iter().any(|r| r.metric == MetricKey::of(Metric::Interactivity)));
}

#[test]
fn a_report_view_marks_the_front_across_deployments() {
    let runs = vec![
        point("tp4", Some(4), 1, 100.0, 10.0),
        point("tp4", Some(4), 16, 1200.0, 20.0),
        point("tp8", Some(8), 1, 120.0, 8.0),
        point("tp8", Some(8), 16, 1600.0, 12.5),
    ];
    let v = scenario_views(&runs);
    let f = view_frontier(&v[0], &CompareOptions::default());
    assert_eq!(f.basis, Basis::PerGpu);
    let got: Vec<(String, String, f64, f64, bool)> = f
        .points
        .iter()
        .map(|p| {
            let name = f.deployments[p.deployment].clone();
            (name, p.label.clone(), p.per_gpu.unwrap(), p.interactivity, p.on_front)
        })
        .collect();
    // tp4: 25 tok/s/GPU at 100 tok/s/user, 300 at 50; tp8: 15 at 125, 200 at 80. Each
    // point trades per-GPU throughput for interactivity against the others: all are on it.
    assert_eq!(
        got,
        [
            ("tp4".into(), "1".into(), 25.0, 100.0, true),
            ("tp4".into(), "16".into(), 300.0, 50.0, true),
            ("tp8".into(), "1".into(), 15.0, 125.0, true),
            ("tp8".into(), "16".into(), 200.0, 80.0, true),
        ]
    );
    // A third deployment worse than tp8 at both of its points is faded whole.
    let mut more = runs;
    more.push(point("slow", Some(8), 1, 100.0, 9.0));
    more.push(point("slow", Some(8), 16, 1500.0, 13.0));
    let v = scenario_views(&more);
    let f = view_frontier(&v[0], &CompareOptions::default());
    let slow: Vec<bool> =
        f.points.iter().filter(|p| p.deployment == 2).map(|p| p.on_front).collect();
    assert_eq!(slow, [false, false]);
    assert!(f.notes().is_empty());
}

/// A champion by total throughput that won with more GPUs says who leads per GPU: tp8 has
/// the most tokens at 16 concurrent (1,600 against 1,200 tok/s) but 200 per GPU against tp4's
/// 300.
#[test]
fn a_champion_on_more_gpus_names_the_leader_per_gpu() {
    let with_total = |name: &str, gpus: u32, c: u64, out: f64, tpot: f64| {
        let mut d = point(name, Some(gpus), c, out, tpot);
        d.headline.total_token_throughput = Some(2.0 * out);
        d
    };
    let runs = vec![
        with_total("tp4", 4, 1, 100.0, 10.0),
        with_total("tp4", 4, 16, 1200.0, 20.0),
        with_total("tp8", 8, 1, 120.0, 8.0),
        with_total("tp8", 8, 16, 1600.0, 12.5),
    ];
    let o = CompareOptions::default();
    let v = servelab_compare::verdict::verdicts(&scenario_views(&runs), &o);
    let champion = v[0].models.iter().find(|m| m.rule == "V1").unwrap();
    assert_eq!(champion.headline, "tp8 is the throughput champion in total; tp4 per GPU.");
    assert!(
        champion
            .text
            .contains("but 200.00 output tok/s per GPU (rank 2 of 2), where tp4 leads with 300.00"),
        "{}",
        champion.text
    );
    // The same runs with one GPU count each: the champion is the leader per GPU too.
    let same: Vec<RunData> = runs
        .iter()
        .map(|r| {
            let mut r = r.clone();
            r.headline.total_token_throughput = r.headline.output_throughput.map(|x| 2.0 * x);
            if let Some(c) = r.config.as_mut() {
                c.info.gpus = Some(8);
            }
            r
        })
        .collect();
    let v = servelab_compare::verdict::verdicts(&scenario_views(&same), &o);
    let champion = v[0].models.iter().find(|m| m.rule == "V1").unwrap();
    assert_eq!(champion.headline, "tp8 is the throughput champion.");
}
