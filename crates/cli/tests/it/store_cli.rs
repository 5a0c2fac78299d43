//! `servelab bench | runs | compare | report` as a user runs them, on a store in a tempdir.

use std::path::Path;
use std::process::{Command, Output};

fn servelab(db: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_servelab"))
        .args(args)
        .env("SERVELAB_DB", db)
        .output()
        .expect("binary runs")
}

fn ok(out: &Output) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "stderr: {stderr}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn bench(db: &Path, label: &str, conc: &str) -> Output {
    servelab(
        db,
        &[
            "bench",
            "--num-prompts",
            "16",
            "--random-input-len",
            "32",
            "--random-output-len",
            "8",
            "--ignore-eos",
            "--no-progress",
            "--max-concurrency",
            conc,
            "--label",
            label,
            "--tag",
            "suite=cli",
        ],
    )
}

fn fixture(name: &str) -> String {
    format!("{}/../store/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn bench_records_then_runs_compare_and_report_read_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("store/servelab.db");
    let a = bench(&db, "narrow", "2");
    ok(&a);
    assert!(String::from_utf8_lossy(&a.stderr).contains("Recorded as run #1"));
    ok(&bench(&db, "wide", "8"));

    let list = ok(&servelab(&db, &["runs", "list", "--tag", "suite=cli"]));
    assert!(list.contains("narrow") && list.contains("wide"), "{list}");
    assert_eq!(list.matches("complete").count(), 2, "{list}");
    let only = ok(&servelab(&db, &["runs", "list", "--label", "wide", "--format", "json"]));
    let rows: serde_json::Value = serde_json::from_str(&only).unwrap();
    assert_eq!(rows.as_array().unwrap().len(), 1);
    assert_eq!(rows[0]["headline"]["completed"], 16);

    let show = ok(&servelab(&db, &["runs", "show", "1"]));
    assert!(show.contains("run #1  narrow  complete"), "{show}");
    assert!(show.contains("Serving Benchmark Result"), "{show}");

    let out = dir.path().join("r1.json");
    ok(&servelab(&db, &["runs", "export", "narrow", "-o", out.to_str().unwrap()]));
    let exported: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(exported["completed"], 16);
    assert_eq!(exported["max_concurrency"], 2);
    assert!(exported["servelab"]["distributions"]["ttft"].is_object());

    let cmp = ok(&servelab(&db, &["compare", "narrow", "wide"]));
    assert!(cmp.contains("narrow (baseline)"), "{cmp}");
    assert!(cmp.contains("TTFT p99 (ms)"), "{cmp}");
    assert!(cmp.contains("per-request samples (1000 resamples, seed 0)"), "{cmp}");
    let json = ok(&servelab(&db, &["compare", "1", "2", "--format", "json"]));
    let c: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(c["subjects"].as_array().unwrap().len(), 2);
    // The exported file compares too (as headline numbers).
    let md =
        ok(&servelab(&db, &["compare", out.to_str().unwrap(), "wide", "--format", "markdown"]));
    assert!(md.starts_with("| Metric"), "{md}");

    let html = dir.path().join("rep/report.html");
    ok(&servelab(
        &db,
        &["report", "narrow", "wide", "-o", html.to_str().unwrap(), "--title", "cli test"],
    ));
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("<title>cli test</title>"));
    // Three deployment charts (narrow and wide on each) and their Pareto chart (throughput
    // per GPU vs interactivity), then the four report charts.
    assert_eq!(page.matches("<svg ").count(), 8);
    assert!(!page.contains("<script"), "no scripts");
    assert!(!page.contains("http://") || !page.contains("src=\"http"), "nothing fetched");
    let md = std::fs::read_to_string(dir.path().join("rep/report.md")).unwrap();
    assert!(md.contains("## Summary") && md.contains("Best throughput: wide"), "{md}");

    ok(&servelab(&db, &["runs", "delete", "narrow"]));
    let list = ok(&servelab(&db, &["runs", "list"]));
    assert!(!list.contains("narrow"), "{list}");
}

#[test]
fn imports_mark_what_is_missing_and_compare_with_each_other() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.db");
    let imp = servelab(
        &db,
        &[
            "runs",
            "import",
            &fixture("vllm.json"),
            &fixture("sglang.jsonl"),
            &fixture("guidellm.json"),
            "--tag",
            "lab=x",
        ],
    );
    ok(&imp);
    let err = String::from_utf8_lossy(&imp.stderr);
    assert_eq!(err.matches("Imported").count(), 5, "{err}");
    assert!(err.contains("(sglang) as run #2; missing: failed"), "{err}");
    let list = ok(&servelab(&db, &["runs", "list", "--tag", "lab=x", "--model", "Qwen/Qwen3-8B"]));
    assert_eq!(list.lines().count(), 3, "header, rule, one run: {list}");
    let show = ok(&servelab(&db, &["runs", "show", "2"]));
    assert!(show.contains("not in the imported file: failed, records"), "{show}");
    let cmp = ok(&servelab(&db, &["compare", "1", "4"]));
    assert!(cmp.contains("no noise estimate"), "{cmp}");
    let bad = servelab(&db, &["runs", "import", &fixture("v1.sql")]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("v1.sql: line 1"));
}

/// SGLang writes its default rate as a bare `Infinity` (Python's json), which JSON has not:
/// the import reads it as rate inf, and the run is shown and compared at load `inf`.
#[test]
fn an_sglang_file_at_rate_infinity_imports() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.db");
    let text = std::fs::read_to_string(fixture("sglang-inf.jsonl")).unwrap();
    assert!(text.contains("\"request_rate\": Infinity,"), "the fixture is SGLang's own shape");
    let imp = servelab(&db, &["runs", "import", &fixture("sglang-inf.jsonl"), "--label", "sg"]);
    ok(&imp);
    let err = String::from_utf8_lossy(&imp.stderr);
    assert!(err.contains("(sglang) as run #1"), "{err}");
    let show = ok(&servelab(&db, &["runs", "show", "sg"]));
    // No rate is rate inf (all at once), as `--request-rate inf` is stored.
    assert!(show.contains("\"request_rate\": null,"), "{show}");
    assert!(show.contains("3020.00"), "mean TTFT kept: {show}");
}

#[test]
fn usage_errors_name_the_flag_or_run() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.db");
    let out = servelab(&db, &["runs", "list", "--since", "yesterday"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--since: expected a date YYYY-MM-DD"));
    let out = servelab(&db, &["compare", "nope", "nada"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no run 'nope'"));
    // Reading commands never create a store.
    assert!(!db.exists());
    let out = servelab(&db, &["runs", "list"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(!db.exists());
    let json = dir.path().join("empty.json");
    std::fs::write(&json, "{}").unwrap();
    let out = servelab(&db, &["runs", "import", json.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("has none of a result's figures"));
    let out = servelab(&db, &["bench", "--tag", "novalue", "--num-prompts", "1"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--tag: expected KEY=VALUE (got 'novalue')")
    );
}

#[test]
fn two_benches_at_once_both_land_in_one_store() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.db");
    let spawn = |label: &str| {
        Command::new(env!("CARGO_BIN_EXE_servelab"))
            .args([
                "bench",
                "--num-prompts",
                "30",
                "--random-input-len",
                "16",
                "--random-output-len",
                "8",
                "--ignore-eos",
                "--no-progress",
                "--max-concurrency",
                "4",
                "--label",
                label,
            ])
            .env("SERVELAB_DB", &db)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (a, b) = (spawn("p1"), spawn("p2"));
    for child in [a, b] {
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
        assert!(!String::from_utf8_lossy(&out.stderr).contains("warning: results store"));
    }
    let json = ok(&servelab(&db, &["runs", "list", "--format", "json"]));
    let rows: serde_json::Value = serde_json::from_str(&json).unwrap();
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 2);
    assert!(rows.iter().all(|r| r["status"] == "complete" && r["headline"]["completed"] == 30));
}

#[test]
fn a_run_that_never_finished_is_shown_incomplete_and_summarized_from_its_records() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.db");
    ok(&bench(&db, "done", "4"));
    {
        // What a killed bench leaves: the run begun and its records, no summary.
        let mut store = servelab_store::Store::open(&db).unwrap();
        let done = store.run(1).unwrap();
        let run = servelab_store::NewRun {
            label: Some("killed".into()),
            kind: servelab_store::RunKind::Bench,
            config: done.config.clone(),
            tags: Vec::new(),
        };
        let id = store.begin_run(&run).unwrap();
        let records = store.records(1).unwrap();
        store.append_records(id, &records[..10]).unwrap();
    }
    let list = ok(&servelab(&db, &["runs", "list"]));
    assert!(
        list.contains("incomplete") && list.contains("still running, or the bench stopped"),
        "{list}"
    );
    let show = ok(&servelab(&db, &["runs", "show", "killed"]));
    assert!(
        show.contains("never finished: this summary is recomputed from the 10 records"),
        "{show}"
    );
    let json = ok(&servelab(&db, &["runs", "export", "killed"]));
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["completed"], 10);
    let cmp = ok(&servelab(&db, &["compare", "done", "killed"]));
    assert!(cmp.contains("killed"), "{cmp}");
}

fn bench_prompts(db: &Path, label: &str, prompts: &str) {
    ok(&servelab(
        db,
        &[
            "bench",
            "--num-prompts",
            prompts,
            "--random-input-len",
            "16",
            "--random-output-len",
            "4",
            "--ignore-eos",
            "--no-progress",
            "--label",
            label,
        ],
    ));
}

fn sweep(db: &Path, dir: &Path, label: &str) {
    ok(&servelab(
        db,
        &[
            "sweep",
            "--no-progress",
            "--scenario",
            "32:4",
            "--concurrency",
            "1,2",
            "--settle-secs",
            "0",
            "--ignore-eos",
            "--label",
            label,
            "--output-dir",
            dir.to_str().unwrap(),
        ],
    ));
}

#[test]
fn runs_of_different_workloads_are_never_repeats_and_sweeps_compare_point_by_point() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.db");
    // One label at rate inf over 1 and 4 prompts: two subjects, not one mean.
    bench_prompts(&db, "m", "1");
    bench_prompts(&db, "m", "4");
    bench_prompts(&db, "n", "4");
    let cmp = ok(&servelab(&db, &["compare", "m", "n"]));
    assert!(cmp.contains("== random(16:4), 4 prompts, inf =="), "{cmp}");
    assert!(cmp.contains("m [1 prompt] (random(16:4), 1 prompt, inf)"), "{cmp}");
    assert!(cmp.contains("not compared"), "{cmp}");
    // Different workloads side by side: said, not silently diffed.
    let cmp = ok(&servelab(&db, &["compare", "1", "n"]));
    assert!(cmp.contains("NOT THE SAME WORKLOAD AND LOAD"), "{cmp}");
    assert!(cmp.contains("n: prompts: 4 prompts vs 1 prompt"), "{cmp}");

    // Two sweeps, by label and by sweep.json: one comparison per scenario and level.
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    sweep(&db, &a, "A");
    sweep(&db, &b, "B");
    let files = [a.join("sweep.json"), b.join("sweep.json")].map(|p| p.display().to_string());
    for args in [vec!["compare", "A", "B"], vec!["compare", &files[0], &files[1]]] {
        let cmp = ok(&servelab(&db, &args));
        assert_eq!(cmp.matches("== scenario 32x4").count(), 2, "{cmp}");
        assert!(cmp.contains("c=1 ==") && cmp.contains("c=2 =="), "{cmp}");
        assert!(!cmp.contains("not compared"), "{cmp}");
        let tps = cmp.lines().find(|l| l.starts_with("Request throughput")).unwrap();
        assert!(!tps.contains(" - "), "{cmp}");
    }
    // Deployments side by side, one table per scenario, by label and by sweep.json.
    for args in [
        vec!["compare", "A", "B", "--by-scenario"],
        vec!["compare", &files[0], &files[1], "--by-scenario"],
    ] {
        let cmp = ok(&servelab(&db, &args));
        assert!(cmp.starts_with("== 32x4 (random(32:4)) =="), "{cmp}");
        assert!(cmp.contains("Concurrency  A: Output Token Throughput (tok/s)  B: "), "{cmp}");
        let rows: Vec<&str> =
            cmp.lines().filter(|l| l.trim_start().starts_with(['1', '2'])).collect();
        assert_eq!(rows.len(), 2, "{cmp}");
        assert!(rows.iter().all(|r| r.contains('%')), "B against A: {cmp}");
    }
    // The report of two sweeps: one deployment table per scenario, its overlaid charts as
    // SVG files next to it.
    let html = dir.path().join("rep/ab.html");
    let args = ["report", "A", "B", "-o", html.to_str().unwrap(), "--title", "A vs B"];
    ok(&servelab(&db, &args));
    let md = std::fs::read_to_string(dir.path().join("rep/ab.md")).unwrap();
    assert!(md.contains("## Deployments by scenario\n\n### 32x4 (random(32:4))"), "{md}");
    assert!(md.contains("| Concurrency | A: Output Token Throughput (tok/s) | B: "), "{md}");
    assert!(md.contains("![A vs B: 32x4: TTFT mean (ms)](ab-charts/32x4-ttft_mean.svg)"), "{md}");
    let svg = std::fs::read_to_string(dir.path().join("rep/ab-charts/32x4-ttft_mean.svg")).unwrap();
    assert!(svg.contains("<svg") && svg.contains("polyline"), "an SVG with lines");
    assert!(svg.contains("A vs B: 32x4: TTFT mean (ms)"), "the chart titled after --title");
    // --per-deployment: each deployment's table with the published columns.
    let args = ["report", "A", "B", "-o", html.to_str().unwrap(), "--per-deployment"];
    ok(&servelab(&db, &args));
    let md = std::fs::read_to_string(dir.path().join("rep/ab.md")).unwrap();
    assert_eq!(md.matches("| Concurrency | Request Throughput (req/s) |").count(), 2, "{md}");
    let cmp = ok(&servelab(&db, &["compare", "A", "B", "--by-scenario", "--per-deployment"]));
    assert!(cmp.contains("-- A: 32x4 (random(32:4)) --"), "{cmp}");
    assert!(cmp.contains("P99 E2E Latency (ms)"), "{cmp}");
    // A sweep against a single run of another workload: nothing in common, exit 2.
    let out = servelab(&db, &["compare", "A", "m"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no workload and load is common"), "{err}");
}

/// The per-run CSV (`crates/outputs`' `render_csv_summary`): `bench --format csv` prints it
/// for the run just made, and `runs export --format csv` writes the same columns for a
/// stored run, so runs can be collected into one spreadsheet.
#[test]
fn bench_and_runs_export_write_the_per_run_csv() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.db");
    let out = servelab(
        &db,
        &[
            "bench",
            "--num-prompts",
            "12",
            "--random-input-len",
            "32",
            "--random-output-len",
            "8",
            "--ignore-eos",
            "--no-progress",
            "--max-concurrency",
            "4",
            "--label",
            "csv-run",
            "--format",
            "csv",
        ],
    );
    let printed = ok(&out);
    let lines: Vec<&str> = printed.lines().collect();
    assert_eq!(lines.len(), 2, "a header and one row: {printed}");
    let header: Vec<&str> = lines[0].split(',').collect();
    let row: Vec<&str> = lines[1].split(',').collect();
    assert_eq!(header.len(), row.len(), "{printed}");
    let col = |cells: &[&str], name: &str| {
        let i = header.iter().position(|h| *h == name).unwrap_or_else(|| panic!("no {name}"));
        cells[i].to_string()
    };
    assert_eq!(header[..3], ["started_at", "backend", "model"]);
    assert_eq!(col(&row, "num_prompts"), "12");
    assert_eq!(col(&row, "max_concurrency"), "4");
    assert_eq!(col(&row, "request_rate"), "inf");
    assert_eq!(col(&row, "completed"), "12");
    assert_eq!(col(&row, "failed"), "0");
    assert_eq!(col(&row, "total_output_tokens"), "96");
    assert!(col(&row, "output_throughput").parse::<f64>().unwrap() > 0.0);
    assert!(header.contains(&"p99_ttft_ms"), "{printed}");

    // The stored run exports the same columns, and the same figures.
    let file = dir.path().join("run.csv");
    ok(&servelab(
        &db,
        &["runs", "export", "csv-run", "--format", "csv", "-o", file.to_str().unwrap()],
    ));
    let exported = std::fs::read_to_string(&file).unwrap();
    let lines: Vec<&str> = exported.lines().collect();
    assert_eq!(lines.len(), 2, "{exported}");
    assert_eq!(lines[0].split(',').collect::<Vec<_>>(), header);
    let again: Vec<&str> = lines[1].split(',').collect();
    for name in [
        "started_at",
        "model",
        "dataset",
        "num_prompts",
        "completed",
        "total_input_tokens",
        "total_output_tokens",
        "max_concurrency",
    ] {
        assert_eq!(col(&again, name), col(&row, name), "{name}");
    }
}

/// Issue 27 item 4: a run exported as llm-d's Benchmark Report and AIPerf's two files comes
/// back through `runs import` with its provenance, and `compare` reads it beside the run.
#[test]
fn standard_files_export_and_import_back() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("servelab.db");
    ok(&bench(&db, "native", "2"));
    let art = dir.path().join("artifacts");
    std::fs::create_dir_all(&art).unwrap();
    let files = [
        ("llmd-report", "benchmark_report.json"),
        ("aiperf", "profile_export_aiperf.json"),
        ("aiperf-jsonl", "profile_export.jsonl"),
    ];
    for (format, name) in files {
        let path = art.join(name);
        ok(&servelab(
            &db,
            &["runs", "export", "native", "--format", format, "-o", path.to_str().unwrap()],
        ));
    }
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(art.join("benchmark_report.json")).unwrap()).unwrap();
    assert_eq!(report["version"], "0.2");
    assert_eq!(report["results"]["request_performance"]["aggregate"]["requests"]["total"], 16);
    for (label, (_, name)) in ["llmd", "aiperf", "records"].iter().zip(files) {
        let path = art.join(name);
        let out = servelab(&db, &["runs", "import", path.to_str().unwrap(), "--label", label]);
        let note = String::from_utf8_lossy(&out.stderr).into_owned();
        ok(&out);
        let source = if *label == "llmd" { "(llm-d-report)" } else { "(aiperf)" };
        assert!(note.contains(source), "{note}");
    }
    let rows: serde_json::Value =
        serde_json::from_str(&ok(&servelab(&db, &["runs", "list", "--format", "json"]))).unwrap();
    let sources: Vec<&str> =
        rows.as_array().unwrap().iter().map(|r| r["source"].as_str().unwrap()).collect();
    assert_eq!(sources, ["aiperf", "aiperf", "llm-d-report", "servelab"]);
    for r in rows.as_array().unwrap() {
        assert_eq!(r["headline"]["completed"], 16, "{r}");
    }
    let cmp = ok(&servelab(&db, &["compare", "native", "llmd", "aiperf", "records"]));
    assert!(cmp.contains("native (baseline)") && cmp.contains("records"), "{cmp}");
    // The records took the run's setup from the summary beside them: the same workload.
    assert!(!cmp.contains("NOT THE SAME WORKLOAD"), "{cmp}");
}
