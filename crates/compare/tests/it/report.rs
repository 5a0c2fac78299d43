//! The report: a Markdown snapshot, and the HTML rendered by headless Chromium when present.

// Tests and benchmarks print the figures they measure.
#![allow(clippy::print_stderr, clippy::print_stdout)]

use servelab_compare::report::{build, html, markdown};
use servelab_compare::{CompareOptions, RunData};
use servelab_metrics::{summarize, MetricsConfig};
use servelab_outputs::browser;
use servelab_records::{Chunk, ChunkKind, LoadSpec, Outcome, RequestRecord, RunInfo, Usage};

/// `n` requests, `conc` at a time, TTFT `ttft + (i % 5)` ms, then `tokens` tokens `itl` apart.
fn records(n: u64, conc: u64, ttft: u64, itl: u64, tokens: u64) -> Vec<RequestRecord> {
    let ms = 1_000_000u64;
    let dur = ttft + 4 + itl * (tokens - 1);
    (0..n)
        .map(|i| {
            let start = (i / conc) * (dur + 1) * ms;
            let first = start + (ttft + i % 5) * ms;
            RequestRecord {
                index: i,
                warmup: false,
                scheduled_ns: 0,
                intended_ns: start,
                sent_ns: start,
                prompt_tokens: Some(32),
                max_tokens: Some(tokens),
                usage: Some(Usage {
                    prompt_tokens: 32,
                    completion_tokens: tokens,
                    reasoning_tokens: None,
                }),
                chunks: (0..tokens)
                    .map(|k| Chunk {
                        t_ns: first + k * itl * ms,
                        kind: ChunkKind::Content,
                        text: "t".into(),
                        tokens: Some(1),
                    })
                    .collect(),
                end_ns: Some(first + (tokens - 1) * itl * ms),
                status: Some(200),
                outcome: Outcome::Success,
                server: None,
                read_lag_ns: None,
                retries: 0,
                session: None,
                stream: Default::default(),
            }
        })
        .collect()
}

fn run(name: &str, conc: u64, ttft: u64, itl: u64) -> RunData {
    let info = RunInfo {
        backend: "openai".into(),
        base_url: "http://127.0.0.1:8000".into(),
        endpoint: "/v1/completions".into(),
        model: "sim".into(),
        dataset: "random(32:16)".into(),
        num_prompts: 40,
        load: LoadSpec { burstiness: 1.0, max_concurrency: Some(conc), ..LoadSpec::default() },
        started_at: "2026-11-21T10:00:00Z".into(),
        servelab_version: "0.1.0".into(),
        ..RunInfo::default()
    };
    let recs = records(40, conc, ttft, itl, 16);
    let s = summarize(&recs, &info, &MetricsConfig::default());
    RunData::from_summary(name, s, recs)
}

fn sample_report() -> servelab_compare::report::Report {
    let runs = vec![
        run("engine-a", 1, 40, 10),
        run("engine-a", 4, 70, 14),
        run("engine-b", 1, 30, 12),
        run("engine-b", 4, 50, 12),
    ];
    build("Engine A vs B", runs, &CompareOptions::default())
}

/// Issue 28 item 10: escape bytes from an imported model name or a label reached the
/// report files raw; a 1e308 figure printed as 309 digits.
#[test]
fn no_raw_control_bytes_and_no_309_digit_figures_in_the_report() {
    let mut a = run("evil\u{1b}[2J-label", 1, 40, 10);
    if let Some(s) = a.summary.as_mut() {
        s.info.model = "m\u{1b}]0;title\u{7}".into();
    }
    a.headline.output_throughput = Some(1e308);
    let r = build("T\u{1b}[31m", vec![a, run("b", 1, 30, 12)], &CompareOptions::default());
    for (what, text) in [("markdown", markdown(&r)), ("html", html(&r))] {
        let raw = text.chars().find(|c| c.is_control() && *c != '\n' && *c != '\t');
        assert_eq!(raw, None, "{what}");
        assert!(text.contains("\\u{1b}"), "{what}: the escape is shown, not dropped");
        assert!(!text.contains(&"0".repeat(100)), "{what}: a 1e308 spelled out");
    }
}

/// Issue 25 item 6: the report embeds every run's summary block (no `runs show` per run).
#[test]
fn the_report_embeds_each_runs_summary_block() {
    let r = sample_report();
    let md = markdown(&r);
    let runs = md.split_once("\n## Runs\n").expect("a Runs section").1;
    assert_eq!(runs.matches("Serving Benchmark Result").count(), 4, "{runs}");
    assert!(runs.contains("### engine-b @ c=4"), "{runs}");
    assert_eq!(html(&r).matches("Serving Benchmark Result").count(), 4);
}

/// Issue 25: a run's warnings follow its embedded block (a client that read late makes every
/// figure of the block late), in Markdown and HTML.
#[test]
fn an_embedded_block_keeps_its_runs_warnings() {
    let mut a = run("engine-a", 1, 40, 10);
    if let Some(s) = a.summary.as_mut() {
        s.warnings.push("servelab read late: 4.22 ms");
    }
    let r = build("T", vec![a, run("engine-b", 1, 30, 12)], &CompareOptions::default());
    let md = markdown(&r);
    let runs = md.split_once("\n## Runs\n").expect("a Runs section").1;
    let (a, b) = runs.split_once("### engine-b").unwrap();
    assert!(a.contains("Warnings:\n- servelab read late: 4.22 ms\n"), "{a}");
    assert!(!b.contains("Warnings:"), "{b}");
    assert!(html(&r).contains("- servelab read late: 4.22 ms"));
}

#[test]
fn markdown_report_snapshot() {
    insta::assert_snapshot!(markdown(&sample_report()));
}

#[test]
fn html_is_self_contained_with_its_charts() {
    let page = html(&sample_report());
    assert!(page.starts_with("<!DOCTYPE html>"));
    // Four deployment charts (output throughput, TTFT, TPOT: both engines on each; the
    // Pareto chart), four report charts, then each engine's five sweep charts, all drawn by
    // the one chart backend as inline SVG figures.
    let (deploy, rest) = page.split_once("id=\"charts\"").expect("a charts section");
    assert_eq!(deploy.matches("<figure class=\"chart\"><svg ").count(), 4);
    assert!(deploy.contains("engine-b is the throughput champion."), "verdicts present");
    let (own, curves) = rest.split_once("id=\"curves\"").expect("a curves section");
    assert_eq!(own.matches("<figure class=\"chart\"><svg ").count(), 4);
    assert_eq!(curves.matches("<figure class=\"chart\"><svg ").count(), 10);
    assert!(!page.contains("<?xml"), "inline SVG carries no XML prolog");
    assert!(!page.contains("<script"));
    assert!(!page.contains("<link"));
    assert!(!page.contains("src="), "nothing loaded from anywhere");
    assert!(!page.contains("Best throughput:"), "no second summary beside the verdicts");
}

/// Renders the report in headless Chromium (no network) and checks that the charts are in
/// the DOM, then takes a screenshot. Skipped, with a message, when Chromium is absent, unless
/// SERVELAB_REQUIRE_BROWSER=1 (CI with Chromium) makes it a failure.
#[test]
fn html_renders_in_headless_chromium() {
    let Some(chromium) = browser::chromium("html_renders_in_headless_chromium") else { return };
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("report.html");
    std::fs::write(&file, html(&sample_report())).unwrap();
    let profile = dir.path().join("profile");
    let base = |extra: &[&str]| browser::run(chromium, &file, &profile, extra);
    let dom = base(&["--dump-dom", "--virtual-time-budget=2000"]);
    let dom = String::from_utf8_lossy(&dom.stdout);
    // Four deployment charts (the last the Pareto chart), four report charts, then each
    // engine's five sweep charts (two concurrency points each).
    assert_eq!(dom.matches("<svg").count(), 18, "eighteen charts in the DOM");
    let (deploy, rest) = dom.split_once("id=\"charts\"").expect("a charts section");
    assert_eq!(deploy.matches("class=\"chart\"").count(), 4, "four deployment charts");
    // Issue 27: the Pareto chart as the browser has it. Per deployment (no run states its
    // GPUs), engine-a at 1 (100 tok/s/user) and engine-b at 4 (83.33, more throughput) on the
    // front; engine-a at 4 and engine-b at 1 faded; the front a staircase; labels by load.
    let pareto = deploy.rsplit("<figure class=\"chart\">").next().unwrap();
    let pareto = pareto.split("</figure>").next().unwrap();
    assert!(pareto.contains("Output tokens/s per deployment (per GPU unknown: pass --gpus)"));
    assert!(pareto.contains("Pareto front (points off it faded)"));
    assert_eq!(pareto.matches("<circle").count(), 4 + 2, "4 points, 2 in the legend");
    assert_eq!(pareto.matches("opacity=\"0.3\"").count(), 2, "two dominated points faded");
    assert!(pareto.contains("<polyline"), "the front's staircase");
    assert!(deploy.contains("Output tok/s per GPU") && deploy.contains("Output tok/s per user"));
    let (own, curves) = rest.split_once("id=\"curves\"").expect("a curves section");
    assert_eq!(own.matches("class=\"chart\"").count(), 4, "four report charts");
    assert_eq!(curves.matches("class=\"chart\"").count(), 10, "two sweeps of five charts");
    assert!(dom.matches("<polyline").count() >= 24, "two lines per chart");
    assert!(dom.contains("throughput champion"));
    let shot = dir.path().join("shot.png");
    let out = base(&["--window-size=1200,2000", &format!("--screenshot={}", shot.display())]);
    assert!(shot.exists(), "screenshot written: {}", String::from_utf8_lossy(&out.stderr));
    assert!(std::fs::metadata(&shot).unwrap().len() > 10_000, "a real picture, not a blank page");
    if let Ok(keep) = std::env::var("SERVELAB_KEEP_SCREENSHOT") {
        std::fs::copy(&shot, keep).unwrap();
    }
}
