//! End-to-end: `servelab sweep` against the simulator started in-process on 127.0.0.1:0
//! with 4 sequence slots, so throughput stops rising past concurrency 4 and TTFT explodes.
//!
//! Each request is 20 ms TTFT + 19 × 5 ms ITL ≈ 115 ms; every sweep here takes a few
//! seconds. Timed assertions leave room for a loaded 2-core machine: the knee and the SLO
//! limit come from a 4-slot engine, where queueing adds a whole request time (~115 ms) to
//! TTFT past concurrency 4, far above scheduling noise.

use std::path::Path;
use std::time::Duration;

use clap::Parser;
use servelab::args::{Cli, Command};
use servelab::{ExitStatus, Failure};
use servelab_outputs::fmt::round2 as num;
use servelab_sim::{SimConfig, SimHandle};
use servelab_sweep::{PointResult, SweepResult};
use tokio::sync::watch;

async fn sim() -> SimHandle {
    let cfg = SimConfig::fixed(20.0, 5.0).with_max_num_seqs(4).with_port(0);
    servelab_sim::start(cfg).await.expect("sim starts")
}

async fn sweep(url: &str, dir: &Path, extra: &[&str]) -> Result<ExitStatus, Failure> {
    let dir = dir.to_str().expect("utf-8 temp dir");
    let mut args = vec![
        "servelab",
        "sweep",
        "--base-url",
        url,
        "--no-progress",
        "--no-store",
        "--scenario",
        "64:20",
        "--settle-secs",
        "0",
    ];
    if !extra.contains(&"--resume") {
        args.extend(["--output-dir", dir]);
    }
    args.extend_from_slice(extra);
    let cli = Cli::try_parse_from(args).expect("valid args");
    let Command::Sweep(a) = cli.command else { unreachable!("sweep subcommand") };
    let (_tx, rx) = watch::channel(false);
    tokio::time::timeout(Duration::from_secs(60), servelab::sweep(&a, rx))
        .await
        .expect("sweep finished within 60 s")
}

fn read_sweep(dir: &Path) -> SweepResult {
    serde_json::from_slice(&std::fs::read(dir.join("sweep.json")).expect("sweep.json"))
        .expect("sweep.json parses")
}

fn read_point(dir: &Path, c: usize) -> PointResult {
    let p = dir.join(format!("points/64x20/concurrency-{c}.json"));
    serde_json::from_slice(&std::fs::read(&p).expect("point file")).expect("point parses")
}

/// The rows of the first Markdown table in `text`, as cells.
fn table_rows(text: &str) -> Vec<Vec<String>> {
    text.lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .skip(2)
        .map(|l| l.trim_matches('|').split('|').map(|c| c.trim().to_string()).collect())
        .collect()
}

fn png_size(bytes: &[u8]) -> (u32, u32) {
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "PNG magic");
    assert_eq!(&bytes[12..16], b"IHDR");
    let be = |b: &[u8]| u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
    (be(&bytes[16..20]), be(&bytes[20..24]))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grid_table_knee_slo_and_charts() {
    let sim = sim().await;
    let dir = tempfile::tempdir().unwrap();
    let status = sweep(
        &sim.base_url(),
        dir.path(),
        &[
            "--concurrency",
            "1,2,4,8",
            "--slo",
            "ttft_p99:70",
            "--slo-max-probes",
            "3",
            "--gpus",
            "2",
        ],
    )
    .await
    .expect("sweep succeeds");
    assert_eq!(status, ExitStatus::Success);
    let r = read_sweep(dir.path());
    let s = &r.scenarios[0];
    assert_eq!(s.dataset, "random(64:20)");
    assert!(s.points.iter().all(|p| p.summary.requests.is_empty()));

    // One table row per grid point, equal to the stored per-point results.
    let md = std::fs::read_to_string(dir.path().join("summary.md")).unwrap();
    let rows = table_rows(&md);
    assert_eq!(rows.len(), 4, "{md}");
    for (row, c) in rows.iter().zip([1, 2, 4, 8]) {
        let p = read_point(dir.path(), c);
        let m = &p.summary;
        assert_eq!(p.summary.completed as usize, p.num_prompts);
        // Per-request rows live in the point files; sweep.json leaves them out.
        assert_eq!(p.summary.requests.len(), p.num_prompts);
        let p99 = |d: &servelab_metrics::Distribution| num(d.percentile(99.0).unwrap());
        let expect = vec![
            c.to_string(),
            num(m.request_throughput),
            num(m.output_throughput),
            num(m.e2el_ms.mean),
            p99(&m.e2el_ms),
            num(m.ttft_ms.mean),
            p99(&m.ttft_ms),
            num(m.tpot_ms.mean),
            p99(&m.tpot_ms),
        ];
        assert_eq!(row, &expect, "concurrency {c}");
    }

    // Issue 27: throughput per GPU vs interactivity, from the points' own figures and the
    // stated GPUs: output tok/s / 2 and 1000 / mean TPOT, at every level.
    let (_, pareto) = md.split_once("Throughput per GPU vs interactivity").expect("{md}");
    let rows = table_rows(pareto);
    assert_eq!(rows.len(), 4, "{pareto}");
    for (row, c) in rows.iter().zip([1, 2, 4, 8]) {
        let m = read_point(dir.path(), c).summary;
        assert_eq!(m.info.gpus, Some(2));
        let f = |v: f64| format!("{v:.2}");
        let expect = [
            c.to_string(),
            "2".into(),
            f(m.output_throughput),
            f(m.output_throughput / 2.0),
            f(1000.0 / m.tpot_ms.mean),
        ];
        assert_eq!(row[..5], expect, "concurrency {c}");
    }

    // The knee is where the capacity puts it.
    let knee = s.knee.as_ref().expect("a knee");
    assert_eq!(knee.load, 4.0, "{knee:?}");
    assert!(knee.reason.is_some());
    assert!(
        md.contains("Saturation: throughput stops rising past concurrency 4 (the knee)"),
        "{md}"
    );

    // SLO: P99 TTFT 70 ms holds up to 4 slots (20 ms) and breaks with any queueing (~135 ms).
    let slo = s.slo.as_ref().expect("an SLO outcome");
    let best = slo.best.expect("some level meets the SLO");
    assert!((best - 4.0).abs() <= 1.0, "best {best}, {}", slo.verdict);
    assert!(s.probes.iter().any(|p| p.role == servelab_sweep::Role::Confirm));

    // CSV: header + grid + probes.
    let csv = std::fs::read_to_string(dir.path().join("64x20.csv")).unwrap();
    assert_eq!(csv.lines().count(), 1 + 4 + s.probes.len());

    // Charts: valid PNG of the documented size, and SVG with the expected series.
    for name in ["throughput", "ttft", "tpot", "tradeoff", "pareto"] {
        let png = std::fs::read(dir.path().join(format!("charts/64x20-{name}.png"))).unwrap();
        assert_eq!(png_size(&png), servelab_outputs::chart::SIZE, "{name}");
        let svg =
            std::fs::read_to_string(dir.path().join(format!("charts/64x20-{name}.svg"))).unwrap();
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"), "{name}");
    }
    let ttft = std::fs::read_to_string(dir.path().join("charts/64x20-ttft.svg")).unwrap();
    for label in ["Mean TTFT", "P99 TTFT", "knee: concurrency 4", "TTFT (ms)"] {
        assert!(ttft.contains(label), "ttft chart lacks '{label}'");
    }
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_runs_only_missing_points() {
    let sim = sim().await;
    let dir = tempfile::tempdir().unwrap();
    let grid = ["--concurrency", "1,2,4"];
    sweep(&sim.base_url(), dir.path(), &grid).await.expect("first sweep");
    let served = sim.truth().len();
    let before = read_sweep(dir.path());

    // Everything is stored: resuming sends no request and reports the same points.
    let resume = ["--concurrency", "1,2,4", "--resume", dir.path().to_str().unwrap()];
    sweep(&sim.base_url(), dir.path(), &resume).await.expect("resumed sweep");
    assert_eq!(sim.truth().len(), served, "a resumed complete sweep ran a bench");
    assert_eq!(read_sweep(dir.path()).scenarios[0].points, before.scenarios[0].points);

    // A missing point is run again, and only it.
    let lost = read_point(dir.path(), 2);
    std::fs::remove_file(dir.path().join("points/64x20/concurrency-2.json")).unwrap();
    sweep(&sim.base_url(), dir.path(), &resume).await.expect("resumed sweep");
    assert_eq!(sim.truth().len(), served + lost.num_prompts);
    assert_eq!(read_sweep(dir.path()).scenarios[0].points.len(), 3);
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unmet_slo_exits_1_and_bad_input_exits_2() {
    let sim = sim().await;
    let dir = tempfile::tempdir().unwrap();
    let status =
        sweep(&sim.base_url(), dir.path(), &["--concurrency", "1,2", "--slo", "ttft_p99:1"])
            .await
            .expect("sweep runs");
    assert_eq!(status, ExitStatus::ThresholdFailed);
    assert!(read_sweep(dir.path()).slo_unmet());

    let e = sweep(&sim.base_url(), dir.path(), &["--scenario", "3000"]).await.unwrap_err();
    assert_eq!(e.status(), ExitStatus::Error);
    assert!(e.to_string().contains("is not ISL:OSL"), "{e}");
    let e = sweep(&sim.base_url(), dir.path(), &["--suite", "classic"]).await.unwrap_err();
    assert!(e.to_string().contains("needs --dataset-path"), "{e}");
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_stops_keeps_partial_results_and_resume_finishes() {
    let sim = sim().await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_str().unwrap().to_string();
    let url = sim.base_url();
    // 40 prompts one at a time: ~4.6 s, interrupted after 0.4 s.
    let grid = ["--concurrency", "1,2", "--min-prompts", "40", "--max-prompts", "40"];
    let parse = |extra: &[&str]| {
        let mut args = vec!["servelab", "sweep", "--base-url", &url, "--no-progress"];
        args.extend(["--no-store", "--scenario", "64:20", "--settle-secs", "0"]);
        args.extend_from_slice(&grid);
        args.extend_from_slice(extra);
        let Command::Sweep(a) = Cli::try_parse_from(args).expect("valid args").command else {
            unreachable!("sweep subcommand")
        };
        *a
    };
    let (tx, rx) = watch::channel(false);
    let args = parse(&["--output-dir", &path]);
    let run = tokio::spawn(async move { servelab::sweep(&args, rx).await });
    // Interrupted while its first point runs (an interrupt during the readiness wait would
    // end the sweep before any point began): once the simulator finished a request.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while sim.truth_len() == 0 {
        assert!(std::time::Instant::now() < deadline, "the sweep never started");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    tx.send(true).unwrap();
    let e = tokio::time::timeout(Duration::from_secs(30), run).await.unwrap().unwrap().unwrap_err();
    assert!(e.to_string().contains(&format!("--resume {path}")), "{e}");
    let partial = read_point(dir.path(), 1);
    assert!(!partial.complete);
    assert!(partial.summary.info.interrupted);

    let (_tx, rx) = watch::channel(false);
    let args = parse(&["--resume", &path]);
    let resumed = servelab::sweep(&args, rx);
    let status = tokio::time::timeout(Duration::from_secs(60), resumed).await.unwrap().unwrap();
    assert_eq!(status, ExitStatus::Success);
    let done = read_point(dir.path(), 1);
    assert!(done.complete);
    assert_eq!(done.summary.completed, 40);
    assert_eq!(read_sweep(dir.path()).scenarios[0].points.len(), 2);
    sim.shutdown().await;
}

/// Issue 25 item 7: a scripted suite whose cases send their prompts all at once is no load
/// curve ("Saturation: no points measured" was wrong), and every case's block is kept.
#[tokio::test]
async fn an_all_at_once_suite_keeps_each_cases_block_and_has_no_curve() {
    let sim = sim().await;
    let dir = tempfile::tempdir().unwrap();
    let suite = dir.path().join("suite.yaml");
    std::fs::write(
        &suite,
        "scenarios:\n  - name: burst\n    dataset: { kind: random, input_len: 16, output_len: 4 }\n    request_rate: [inf]\n    num_prompts: [6]\n",
    )
    .unwrap();
    let out = dir.path().join("out");
    let args = [
        "servelab",
        "sweep",
        "--base-url",
        &sim.base_url(),
        "--no-progress",
        "--no-store",
        "--settle-secs",
        "0",
        "--suite",
        suite.to_str().unwrap(),
        "--output-dir",
        out.to_str().unwrap(),
        "--format",
        "sglang",
    ];
    let cli = Cli::try_parse_from(args).expect("valid args");
    let Command::Sweep(a) = cli.command else { unreachable!("sweep subcommand") };
    let (_tx, rx) = watch::channel(false);
    let status = tokio::time::timeout(Duration::from_secs(60), servelab::sweep(&a, rx))
        .await
        .expect("sweep finished within 60 s");
    assert!(matches!(status, Ok(ExitStatus::Success)), "{status:?}");
    let md = std::fs::read_to_string(out.join("summary.md")).unwrap();
    assert!(!md.contains("no points measured"), "{md}");
    assert!(
        md.contains("Saturation: not applicable; every level sends all its prompts at once"),
        "{md}"
    );
    let blocks = std::fs::read_to_string(out.join("blocks.txt")).unwrap();
    assert!(blocks.starts_with("== burst · inf · 6 prompts ==\n"), "{blocks}");
    assert_eq!(blocks.matches("Serving Benchmark Result").count(), 1, "{blocks}");
    assert!(blocks.contains("Successful requests:                     6"), "{blocks}");
}

/// Issue 25 item 7: `--backend vllm` is an alias of the completions API; the SGLang-layout
/// blocks of a sweep print the backend as typed, not `openai`.
#[test]
fn the_backend_as_typed_reaches_the_sglang_blocks() {
    let args = ["servelab", "sweep", "--backend", "vllm", "--format", "sglang"];
    let cli = Cli::parse_args(args.map(std::ffi::OsString::from)).expect("valid args");
    let Command::Sweep(a) = cli.command else { unreachable!("sweep subcommand") };
    assert_eq!(a.backend_given.as_deref(), Some("vllm"));
    let cli = Cli::parse_args(["servelab", "sweep"].map(std::ffi::OsString::from)).unwrap();
    let Command::Sweep(a) = cli.command else { unreachable!("sweep subcommand") };
    assert_eq!(a.backend_given, None, "the default is not 'typed'");
}
