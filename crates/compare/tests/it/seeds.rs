//! The seeds' report shapes rebuilt from simulator runs, in-process (each simulator set up
//! differently stands for a different model or deployment):
//! - seed-000: models × 1, 10 and 100 prompts at rate inf → one verdict per model with the
//!   figures of its runs, and the variant comparison of one model's two variants;
//! - seed-002: two deployments, each a sweep of two scenarios → one table per scenario, the
//!   deployments side by side, never a scenario mixed into another's table, comparison or
//!   ranking; the HTML report with its overlaid charts, checked in headless Chromium.

// Tests print what they skipped.
#![allow(clippy::print_stderr)]

use servelab_bench::Conductor;
use servelab_compare::deploy::{deployment_table, scenario_views};
use servelab_compare::report::{build, html, markdown};
use servelab_compare::verdict::{label_model, model_size, params_in, verdicts};
use servelab_compare::{CompareOptions, RunData, Sources};
use servelab_load::{Axis, Level};
use servelab_metrics::MetricsConfig;
use servelab_outputs::browser;
use servelab_outputs::fmt::grouped;
use servelab_plan::{
    Api, DatasetSpec, Limits, OutputSpec, Plan, RecordSpec, RequestSpec, Target, WorkloadSpec,
};
use servelab_records::{LoadSpec, RunInfo};
use servelab_sim::SimConfig;
use servelab_store::{Headline, RunSetup};
use servelab_sweep::{KneeRule, PointResult, Role, ScenarioResult, SweepResult};
use tokio::sync::watch;

/// One run of `prompts` random prompts (`input`:`output` tokens, EOS ignored) against `url`,
/// `conc` at a time (`None`: all at once, rate inf), as comparison data named `name`.
async fn bench(
    url: &str,
    name: &str,
    (input, output): (u64, u64),
    prompts: usize,
    conc: Option<u64>,
) -> RunData {
    let mut request = RequestSpec::new(Api::Completions);
    request.ignore_eos = true;
    let plan = Plan {
        target: Target::Url(url.into()),
        request,
        workload: WorkloadSpec {
            tokenizer: Some("cl100k_base".into()),
            dataset: DatasetSpec::Random {
                input_len: input,
                output_len: output,
                range: servelab_plan::LengthRange::EXACT,
                prefix_len: 0,
            },
            num_prompts: prompts,
            seed: 0,
            num_warmups: 0,
        },
        load: LoadSpec { max_concurrency: conc, ..LoadSpec::default() },
        ramp: None,
        shard: servelab_plan::ShardSpec::default(),
        limits: Limits { server_metrics_interval: None, ..Limits::default() },
        metrics: MetricsConfig::default(),
        output: OutputSpec::default(),
        record: RecordSpec::default(),
    };
    let (_tx, rx) = watch::channel(false);
    let out = Conductor::new(rx).bench(&plan).await.expect("the run completes");
    assert_eq!(out.summary.failed, 0, "{name}: every request succeeds");
    RunData::from_summary(name, out.summary, out.records)
}

/// A simulated model: fixed TTFT once it has a slot, fixed inter-token latency, `slots`
/// sequences decoding at once (the rest queue, so TTFT grows with concurrency).
async fn sim(ttft: f64, itl: f64, slots: usize) -> servelab_sim::SimHandle {
    servelab_sim::start(SimConfig::fixed(ttft, itl).with_max_num_seqs(slots).with_port(0))
        .await
        .expect("the simulator starts")
}

fn figure(runs: &[RunData], name: &str, prompts: u64, f: fn(&RunData) -> Option<f64>) -> String {
    let r = runs
        .iter()
        .find(|r| r.name == name && r.identity().num_prompts == Some(prompts))
        .expect("the run");
    grouped(f(r), 2)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seed000_models_at_1_10_100_prompts_get_one_verdict_each_with_their_figures() {
    // (name, model tag, TTFT ms, ITL ms, slots). Margins are wide (2x in throughput, 8x in
    // first token) so that a loaded machine, whose client reads 100 streams late, does not
    // reorder the models.
    let models = [
        ("fast-8b", None, 40.0, 10.0, 128),
        ("snappy-32b", None, 5.0, 30.0, 128),
        ("big-70b-fp8", Some("big-70b"), 60.0, 25.0, 4),
        ("big-70b-awq", Some("big-70b"), 50.0, 18.0, 8),
    ];
    let mut runs = Vec::new();
    for (name, tag, ttft, itl, slots) in models {
        let h = sim(ttft, itl, slots).await;
        for n in [1, 10, 100] {
            let mut r = bench(&h.base_url(), name, (64, 8), n, None).await;
            if let Some(m) = tag {
                r.tags.push(("model".into(), m.into()));
            }
            runs.push(r);
        }
        h.shutdown().await;
    }
    let o = CompareOptions::default();
    let v = verdicts(&scenario_views(&runs), &o);
    assert_eq!(v.len(), 1, "one workload: random(64:8)");
    let s = &v[0];
    let rules: Vec<(&str, &str)> = s.models.iter().map(|m| (m.model.as_str(), m.rule)).collect();
    assert_eq!(
        rules,
        [("fast-8b", "V1"), ("snappy-32b", "V3"), ("big-70b-fp8", "V2"), ("big-70b-awq", "V4")],
        "{:#?}",
        s.models
    );
    let total = |r: &RunData| r.headline.total_token_throughput;
    let ttft = |r: &RunData| r.headline.ttft_mean_ms;
    let tpot = |r: &RunData| r.headline.tpot_mean_ms;
    let text = |i: usize| s.models[i].text.clone();
    // Each sentence carries the figures of the runs it judges.
    assert!(
        text(0)
            .contains(&format!("{} tok/s at 100 concurrent", figure(&runs, "fast-8b", 100, total))),
        "{}",
        text(0)
    );
    assert!(
        text(0).contains(&format!("single-request TTFT {} ms", figure(&runs, "fast-8b", 1, ttft))),
        "{}",
        text(0)
    );
    assert!(
        text(1)
            .contains(&format!("single-request TTFT {} ms", figure(&runs, "snappy-32b", 1, ttft))),
        "{}",
        text(1)
    );
    assert!(s.models[2].headline.contains("latency-bound: TTFT explodes"), "{:?}", s.models[2]);
    assert!(
        text(2).contains(&format!(
            "Mean TTFT reaches {} ms at 100 concurrent",
            figure(&runs, "big-70b-fp8", 100, ttft)
        )) && text(2).contains(&format!(
            "from {} ms at 1 concurrent",
            figure(&runs, "big-70b-fp8", 1, ttft)
        )),
        "{}",
        text(2)
    );
    assert_eq!(s.variants.len(), 1);
    let w = &s.variants[0];
    assert!(w.headline.starts_with("big-70b-awq improves significantly over big-70b-fp8"), "{w:?}");
    assert!(
        w.text.contains(&format!(
            "mean TPOT {} → {} ms",
            figure(&runs, "big-70b-fp8", 1, tpot),
            figure(&runs, "big-70b-awq", 1, tpot)
        )),
        "{}",
        w.text
    );

    // The report: comparisons are made per prompt count, never across them.
    let r = build("Four models", runs, &o);
    let points: Vec<&str> = r.comparisons.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(points, ["1 prompt", "10 prompts", "100 prompts"]);
    assert!(r.comparisons.iter().all(|(_, c)| c.subjects.len() == 4 && c.differences.is_empty()));
    let md = markdown(&r);
    assert!(md.contains("## Summary of results"), "{md}");
    assert!(md.contains("**fast-8b is the throughput champion.**"), "{md}");
}

/// Two scenarios, concurrency 1, 2 and 4, against one simulated deployment, as the sweep
/// result `servelab sweep --label NAME --tag layout=LAYOUT` writes.
async fn sweep(name: &str, layout: &str, h: &servelab_sim::SimHandle) -> SweepResult {
    let mut scenarios = Vec::new();
    for (sc, io) in [("64x8", (64, 8)), ("256x16", (256, 16))] {
        let mut points = Vec::new();
        for c in [1usize, 2, 4] {
            let run = bench(&h.base_url(), name, io, 2 * c, Some(c as u64)).await;
            let summary = run.summary.expect("a measured run");
            points.push(PointResult {
                scenario: sc.into(),
                load: Level::Concurrency(c),
                role: Role::Grid,
                num_prompts: 2 * c,
                seed: 0,
                complete: true,
                summary,
            });
        }
        scenarios.push(ScenarioResult {
            name: sc.into(),
            axis: Axis::Concurrency,
            dataset: format!("random({}:{})", io.0, io.1),
            points,
            probes: Vec::new(),
            knee: None,
            slo: None,
        });
    }
    SweepResult {
        label: Some(name.into()),
        tags: vec![("gpu".into(), "sim".into()), ("layout".into(), layout.into())],
        scenarios,
        knee_rule: KneeRule::default(),
        warnings: Default::default(),
        interrupted: false,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seed002_two_sweeps_of_two_scenarios_compare_per_scenario() {
    let dir = tempfile::tempdir().unwrap();
    let mut files = Vec::new();
    for (name, layout, ttft, itl, slots) in
        [("tp4", "TP4", 30.0, 8.0, 2), ("3p1d", "3P1D", 20.0, 6.0, 4)]
    {
        let h = sim(ttft, itl, slots).await;
        let s = sweep(name, layout, &h).await;
        h.shutdown().await;
        let f = dir.path().join(format!("{name}.json"));
        std::fs::write(&f, serde_json::to_string(&s).unwrap()).unwrap();
        files.push(f);
    }
    // Read back as `servelab report tp4.json 3p1d.json` reads them.
    let mut sources = Sources::new(Some(dir.path().join("no.db")));
    let mut runs = Vec::new();
    for f in &files {
        runs.extend(sources.runs(f.to_str().unwrap()).unwrap());
    }
    let o = CompareOptions::default();
    let views = scenario_views(&runs);
    let names: Vec<String> = views.iter().map(|v| v.workload.name()).collect();
    assert_eq!(names, ["64x8 (random(64:8))", "256x16 (random(256:16))"]);
    for v in &views {
        let deps: Vec<&str> = v.entries.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(deps, ["tp4", "3p1d"]);
        let scenario = v.workload.scenario.clone().unwrap();
        for s in v.entries.iter().flat_map(|e| e.cells.iter().flatten()) {
            assert!(s.runs.iter().all(|r| r.identity().scenario.as_deref() == Some(&scenario)));
        }
        let t = deployment_table(v, &o);
        let rows: Vec<&str> = t.rows.iter().map(|r| r[0].as_str()).collect();
        assert_eq!(rows, ["1", "2", "4"]);
        // Every cell measured; the second deployment's carry their change against the first.
        assert!(t.rows.iter().all(|r| r.iter().all(|c| c != "-")), "{t:?}");
        assert!(t.rows.iter().all(|r| r[2].contains('%')), "{t:?}");
    }
    let r = build("tp4 vs 3p1d", runs, &o);
    assert_eq!(r.comparisons.len(), 6, "two scenarios × three concurrencies");
    for (p, c) in &r.comparisons {
        assert!(c.differences.is_empty(), "{p}: a scenario was another's baseline");
        let sc = if p.contains("64x8") { "[64x8]" } else { "[256x16]" };
        assert!(c.subjects.iter().all(|s| s.name.ends_with(sc)), "{p}: {:?}", c.subjects);
    }
    for lr in &r.rankings {
        let sc = if lr.point.contains("64x8") { "[64x8]" } else { "[256x16]" };
        assert!(lr.entries.iter().all(|e| e.name.ends_with(sc)), "{lr:?}");
    }
    let page = html(&r);
    let (deploy, _) = page.split_once("id=\"charts\"").expect("the report charts follow");
    assert_eq!(
        deploy.matches("<figure class=\"chart\"><svg ").count(),
        8,
        "4 charts (3 metrics, the Pareto chart) × 2 scenarios"
    );
    chromium_check(&page, 8);
}

/// The page in headless Chromium (no network): the deployment charts are in the DOM, with a
/// line per deployment, and the console logged no error. Skipped, with a message, when
/// Chromium is absent, unless SERVELAB_REQUIRE_BROWSER=1 (CI with Chromium) makes it a failure.
fn chromium_check(page: &str, deployment_charts: usize) {
    let Some(chromium) = browser::chromium("chromium check") else { return };
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("report.html");
    std::fs::write(&file, page).unwrap();
    let (dom, log) = browser::dump_dom(chromium, &file, &dir.path().join("profile"));
    let (deploy, _) = dom.split_once("id=\"charts\"").expect("the page rendered");
    assert_eq!(deploy.matches("class=\"chart\"").count(), deployment_charts, "charts in the DOM");
    assert!(deploy.matches("<polyline").count() >= 2 * deployment_charts, "a line per deployment");
    assert!(!log.contains("CONSOLE"), "no console message, no script error: {log}");
    assert!(!log.contains("Uncaught"), "{log}");
}

/// A hand-made run at rate inf: `prompts` at once, (total tok/s, mean TTFT, mean TPOT).
fn at_inf(name: &str, prompts: u64, [total, ttft, tpot]: [f64; 3]) -> RunData {
    let info = RunInfo {
        dataset: "random(512:128)".into(),
        num_prompts: prompts,
        model: "served".into(),
        ..RunInfo::default()
    };
    let headline = Headline {
        output_throughput: Some(total / 2.0),
        total_token_throughput: Some(total),
        ttft_mean_ms: Some(ttft),
        tpot_mean_ms: Some(tpot),
        completed: Some(prompts),
        failed: Some(0),
        ..Headline::default()
    };
    let mut d = RunData::from_headline(name, &info, headline);
    d.config = Some(RunSetup { info, ..RunSetup::default() });
    d
}

#[test]
fn model_sizes_and_variants_are_read_from_names() {
    let cases = [
        ("snappy-32b", Some(32.0)),
        ("meta-llama/Llama-3.1-70B-Instruct", Some(70.0)),
        ("Qwen3-235B-A22B", Some(235.0)),
        ("mixtral-8x7b", Some(56.0)),
        ("qwen2.5-1.5b-awq", Some(1.5)),
        ("engine-a", None),
        ("h100-80gb", None),
        ("b200-tp8", None),
    ];
    for (name, size) in cases {
        assert_eq!(params_in(name), size, "{name}");
    }
    assert_eq!(label_model("big-70b-awq"), "big-70b");
    assert_eq!(label_model("Qwen3-32B-FP8"), "qwen3-32b");
    assert_eq!(label_model("llama-8b-Q4_K_M"), "llama-8b");
    assert_eq!(label_model("llama-8b q8_0"), "llama-8b");
    assert_eq!(label_model("engine-a"), "engine-a");
    // The params= tag wins over the label; else the served model's name counts.
    let mut tagged = at_inf("fast", 1, [1.0, 1.0, 1.0]);
    tagged.tags.push(("params".into(), "14B".into()));
    let mut served = at_inf("slow", 1, [1.0, 1.0, 1.0]);
    if let Some(c) = served.config.as_mut() {
        c.info.model = "Qwen/Qwen3-32B".into();
    }
    let v = scenario_views(&[tagged, served]);
    let sizes: Vec<Option<f64>> = v[0].entries.iter().map(model_size).collect();
    assert_eq!(sizes, [Some(14.0), Some(32.0)]);
}

/// Seed-000 with a large model that balances well without being the best balance overall:
/// V3 goes to a mid-size model with the fastest first token, V2 to the large model that
/// degrades hardest, and the remaining large model is the best balance for a large model.
#[test]
fn the_best_balance_for_a_large_model() {
    let table: [(&str, [[f64; 3]; 2]); 4] = [
        ("small-8b", [[100.0, 20.0, 10.0], [900.0, 30.0, 11.0]]),
        ("mid-14b", [[80.0, 10.0, 12.0], [700.0, 25.0, 13.0]]),
        ("big-70b", [[50.0, 40.0, 20.0], [400.0, 120.0, 25.0]]),
        ("huge-235B-A22B", [[40.0, 60.0, 30.0], [300.0, 200.0, 35.0]]),
    ];
    let mut runs = Vec::new();
    for (name, figs) in table {
        for (n, f) in [1, 10].into_iter().zip(figs) {
            runs.push(at_inf(name, n, f));
        }
    }
    let o = CompareOptions::default();
    let v = verdicts(&scenario_views(&runs), &o);
    let rules: Vec<(&str, &str)> = v[0].models.iter().map(|m| (m.model.as_str(), m.rule)).collect();
    assert_eq!(
        rules,
        [("small-8b", "V1"), ("mid-14b", "V3"), ("big-70b", "V3L"), ("huge-235B-A22B", "V2")]
    );
    let m = &v[0].models[2];
    assert_eq!(m.headline, "big-70b offers the best balance for a large model.");
    assert_eq!(
        m.text,
        "Single-request TTFT 40.00 ms (rank 3 of 4); 400.00 tok/s at 10 concurrent (rank 3 of 4) \
         with mean TPOT 25.00 ms (rank 3 of 4); 70B parameters, the best rank sum of the 2 \
         models of 30B or more."
    );
    assert_eq!(v[0].models[1].headline, "mid-14b offers the best balance.", "14B is not large");
}

/// AWQ and FP8 of one model told apart by their labels alone (no `model=` tag).
#[test]
fn variants_are_found_from_labels() {
    let mut runs = Vec::new();
    for (name, figs) in [
        ("qwen3-32b-fp8", [[100.0, 50.0, 20.0], [800.0, 90.0, 22.0]]),
        ("qwen3-32b-awq", [[120.0, 40.0, 15.0], [900.0, 80.0, 16.0]]),
        ("other-8b", [[200.0, 20.0, 8.0], [1500.0, 30.0, 9.0]]),
    ] {
        for (n, f) in [1, 10].into_iter().zip(figs) {
            runs.push(at_inf(name, n, f));
        }
    }
    let v = verdicts(&scenario_views(&runs), &CompareOptions::default());
    assert_eq!(v[0].variants.len(), 1, "{:?}", v[0].variants);
    let w = &v[0].variants[0];
    assert_eq!(
        w.headline,
        "qwen3-32b-awq improves significantly over qwen3-32b-fp8 at every level (one model by \
         label: qwen3-32b)."
    );
    assert!(
        w.text.starts_with("At 1 concurrent: mean TPOT 20.00 → 15.00 ms (-25.0%), mean TTFT 50.00 → 40.00 ms (-20.0%)"),
        "{}",
        w.text
    );
}
