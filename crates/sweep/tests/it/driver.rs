//! The driver against a fake runner whose throughput saturates at concurrency 4: grid,
//! knee, SLO search, resume, and the rendered outputs (snapshots).

use std::path::Path;

use servelab_metrics::Summary;

use crate::common;
use common::summary;
use servelab_load::{parse_concurrency_list, Level};
use servelab_metrics::SloSpec;
use servelab_plan::{Plan, RunError, Runner};
use servelab_sweep::render::{csv, markdown_table, parse_columns, DEFAULT_COLUMNS};
use servelab_sweep::run::write_outputs;
use servelab_sweep::{grid, run_sweep, KneeRule, PromptPolicy, Role, SweepPlan};

#[derive(Default)]
struct Fake {
    runs: Vec<(String, Level, Role)>,
    settles: usize,
    /// Interrupt the run with this index (0-based).
    interrupt_at: Option<usize>,
}

impl Runner for Fake {
    async fn run(&mut self, plan: &Plan) -> Result<Summary, RunError> {
        if self.interrupt_at == Some(self.runs.len()) {
            return Err(RunError::Interrupted);
        }
        let level = plan.load.level().expect("one axis");
        let role = plan.tag("sweep.role").and_then(Role::parse).expect("role tag");
        let scenario = plan.tag("sweep.scenario").expect("scenario tag").to_string();
        self.runs.push((scenario, level, role));
        let Level::Concurrency(c) = level else { panic!("concurrency only") };
        Ok(summary(c, plan.workload.num_prompts))
    }
    async fn settle(&mut self) {
        self.settles += 1;
    }
}

fn plan(dir: &Path, slo: Option<&str>) -> SweepPlan {
    SweepPlan {
        base: common::base_plan(),
        dataset_path: None,
        scenarios: vec![grid::parse_scenario("100:20").unwrap()],
        loads: parse_concurrency_list("1,2,4,8,16").unwrap(),
        prompts: PromptPolicy::default(),
        fresh_prompts: true,
        knee: KneeRule::default(),
        slo: slo.map(|s| SloSpec::parse("--slo", s).unwrap()),
        slo_resolution: 0.1,
        slo_max_probes: 6,
        output_dir: dir.to_path_buf(),
        resume: false,
        columns: parse_columns(DEFAULT_COLUMNS).unwrap(),
    }
}

#[tokio::test]
async fn grid_knee_and_files() {
    let dir = tempfile::tempdir().unwrap();
    let mut fake = Fake::default();
    let r = run_sweep(&plan(dir.path(), None), &mut fake).await.unwrap();
    assert_eq!(fake.runs.len(), 5);
    assert_eq!(fake.settles, 4);
    let s = &r.scenarios[0];
    let loads: Vec<f64> = s.points.iter().map(|p| p.load.value()).collect();
    assert_eq!(loads, [1.0, 2.0, 4.0, 8.0, 16.0]);
    assert_eq!(s.points.iter().map(|p| p.num_prompts).collect::<Vec<_>>(), [10, 10, 20, 40, 80]);
    let knee = s.knee.as_ref().unwrap();
    assert_eq!(knee.load, 4.0);
    assert!(dir.path().join("points/100x20/concurrency-8.json").is_file());
    let cols = parse_columns(DEFAULT_COLUMNS).unwrap();
    let written = write_outputs(dir.path(), &r, &cols).unwrap();
    if let Ok(keep) = std::env::var("SWEEP_KEEP") {
        write_outputs(Path::new(&keep), &r, &cols).unwrap();
    }
    for f in ["summary.md", "100x20.csv", "sweep.json", "charts/100x20-ttft.png"] {
        assert!(written.contains(&dir.path().join(f)), "{f} missing from {written:?}");
    }
    let back: servelab_sweep::SweepResult =
        serde_json::from_slice(&std::fs::read(dir.path().join("sweep.json")).unwrap()).unwrap();
    assert_eq!(back, r);
}

#[tokio::test]
async fn renderers_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let r = run_sweep(&plan(dir.path(), Some("ttft_p99:100")), &mut Fake::default()).await.unwrap();
    let s = &r.scenarios[0];
    let cols = parse_columns(DEFAULT_COLUMNS).unwrap();
    insta::assert_snapshot!("table", markdown_table(&s.points, s.axis, &cols));
    let all: Vec<_> = s.points.iter().chain(&s.probes).cloned().collect();
    insta::assert_snapshot!("csv", csv(&all));
    insta::assert_snapshot!("summary", servelab_sweep::render::summary_markdown(&r, &cols));
    // A labelled, tagged sweep is titled by what was swept.
    let mut plan = plan(dir.path(), None);
    plan.base.record.label = Some("Qwen3-32B <3P1D>".into());
    plan.base.record.tags = vec![("gpu".into(), "H20".into()), ("engine".into(), "dynamo".into())];
    let r = run_sweep(&plan, &mut Fake::default()).await.unwrap();
    let md = servelab_sweep::render::summary_markdown(&r, &cols);
    assert!(md.starts_with("# Qwen3-32B &lt;3P1D&gt;\n\ngpu: H20 · engine: dynamo\n\n"), "{md}");
}

#[tokio::test]
async fn slo_search_bisects_to_one_step_and_confirms() {
    let dir = tempfile::tempdir().unwrap();
    let mut fake = Fake::default();
    let r = run_sweep(&plan(dir.path(), Some("ttft_p99:100")), &mut fake).await.unwrap();
    let o = r.scenarios[0].slo.as_ref().unwrap();
    assert_eq!(o.best, Some(4.0));
    assert_eq!(o.confirmed, Some(true));
    let extra: Vec<(Level, Role)> = fake.runs[5..].iter().map(|(_, l, r)| (*l, *r)).collect();
    assert_eq!(
        extra,
        [
            (Level::Concurrency(6), Role::Probe),
            (Level::Concurrency(5), Role::Probe),
            (Level::Concurrency(4), Role::Confirm)
        ]
    );
    assert!(!r.slo_unmet());
    assert_eq!(
        o.verdict,
        "the highest concurrency that meets ttft_p99 <= 100 ms is 4 (5 misses it: ttft_p99 \
         220.00 ms > 100 ms) and a confirming run met it too."
    );
}

#[tokio::test]
async fn unmet_slo_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let r = run_sweep(&plan(dir.path(), Some("ttft_p99:5")), &mut Fake::default()).await.unwrap();
    let o = r.scenarios[0].slo.as_ref().unwrap();
    assert_eq!(o.best, None);
    assert!(r.slo_unmet());
    assert!(
        o.verdict.starts_with("no measured concurrency meets ttft_p99 <= 5 ms"),
        "{}",
        o.verdict
    );
}

#[tokio::test]
async fn resume_skips_complete_points_and_reruns_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    // First attempt: interrupted at the fourth run.
    let mut first = Fake { interrupt_at: Some(3), ..Fake::default() };
    let r = run_sweep(&plan(dir.path(), None), &mut first).await.unwrap();
    assert!(r.interrupted);
    assert_eq!(first.runs.len(), 3);
    // A damaged file is not complete: it is run again.
    std::fs::write(dir.path().join("points/100x20/concurrency-2.json"), b"{\"trunc").unwrap();
    let mut again = Fake::default();
    let r =
        run_sweep(&SweepPlan { resume: true, ..plan(dir.path(), None) }, &mut again).await.unwrap();
    assert!(!r.interrupted);
    let ran: Vec<Level> = again.runs.iter().map(|(_, l, _)| *l).collect();
    assert_eq!(ran, [Level::Concurrency(2), Level::Concurrency(8), Level::Concurrency(16)]);
    assert_eq!(r.scenarios[0].points.len(), 5);
    // Everything stored: a third run runs nothing.
    let mut third = Fake::default();
    run_sweep(&SweepPlan { resume: true, ..plan(dir.path(), None) }, &mut third).await.unwrap();
    assert!(third.runs.is_empty());
}

/// A suite's cases with their own prompt counts: each point sends its case's count, and the
/// scenario (with its cases) round-trips through sweep.json.
#[tokio::test]
async fn suite_cases_send_their_own_prompt_counts() {
    let dir = tempfile::tempdir().unwrap();
    let mut p = plan(dir.path(), None);
    p.scenarios = servelab_sweep::suite::parse_suite(
        "scenarios:\n  - name: cases\n    dataset: {kind: random, input_len: 100, output_len: 20}\n    \
         concurrency: [4, 1]\n    num_prompts: [37, 3]\n",
    )
    .unwrap();
    let mut fake = Fake::default();
    let r = run_sweep(&p, &mut fake).await.unwrap();
    let sent: Vec<(f64, usize)> =
        r.scenarios[0].points.iter().map(|p| (p.load.value(), p.num_prompts)).collect();
    assert_eq!(sent, [(1.0, 3), (4.0, 37)]);
    assert_eq!(r.scenarios[0].points[1].summary.completed, 37);
    write_outputs(dir.path(), &r, &parse_columns(DEFAULT_COLUMNS).unwrap()).unwrap();
    let back: servelab_sweep::SweepResult =
        serde_json::from_slice(&std::fs::read(dir.path().join("sweep.json")).unwrap()).unwrap();
    assert_eq!(back, r);
}

/// Issue 25: a point's warnings (here a client that read late) follow its block in blocks.txt
/// and `--format sglang`, and are listed in the summary with the point they belong to, so a
/// case's figures are never posted without them.
#[tokio::test]
async fn a_points_warnings_go_with_its_block_and_into_the_summary() {
    let dir = tempfile::tempdir().unwrap();
    let mut p = plan(dir.path(), None);
    p.loads = parse_concurrency_list("1,4").unwrap();
    let mut r = run_sweep(&p, &mut Fake::default()).await.unwrap();
    r.scenarios[0].points[1].summary.warnings.push("servelab read late: 25 ms");
    let blocks = servelab_sweep::render::point_blocks(&r, None);
    let (first, second) = blocks.split_once("== 100x20 · 4 ·").unwrap();
    assert!(!first.contains("Warnings:"), "{first}");
    assert!(second.contains("==================================================\nWarnings:\n- servelab read late: 25 ms\n"), "{second}");
    let sglang = servelab_sweep::render::point_blocks(&r, Some(Some("vllm")));
    assert!(sglang.ends_with("Warnings:\n- servelab read late: 25 ms\n\n"), "{sglang}");
    let md = servelab_sweep::render::summary_markdown(&r, &parse_columns(DEFAULT_COLUMNS).unwrap());
    assert!(
        md.contains("## Warnings\n\n- 100x20 at concurrency 4: servelab read late: 25 ms\n"),
        "{md}"
    );
}

/// Issue 25: a scenario read from a file is warned about repeating prompts across its levels
/// only when it has more than one (a scripted suite's ShareGPT case sends its prompts once).
#[test]
fn a_file_scenario_of_one_level_repeats_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut p = plan(dir.path(), None);
    p.dataset_path = Some("sharegpt.json".into());
    let suite = |levels: &str| {
        servelab_sweep::suite::parse_suite(&format!(
            "scenarios:\n  - name: chat\n    dataset: {{kind: sharegpt}}\n    request_rate: [{levels}]\n"
        ))
        .unwrap()
    };
    p.scenarios = suite("inf");
    assert!(p.check().unwrap().is_empty());
    p.scenarios = suite("1, 2");
    let w = p.check().unwrap();
    assert_eq!(w.len(), 1);
    assert!(
        w[0].to_string().starts_with("scenario 'chat' draws its prompts from a file"),
        "{}",
        w[0]
    );
}
