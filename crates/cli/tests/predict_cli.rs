//! `servelab predict` and `servelab predict calibrate` as a user runs them: the sweep's files,
//! runs stored as predicted, a prediction compared with a measurement, a fit written back.

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

fn engine() -> String {
    format!("{}/../../examples/engines/qwen3-8b-h100-tp1.yaml", env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn predict_writes_what_sweep_writes_and_files_runs_as_predicted() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("servelab.db");
    let out = dir.path().join("pred");
    let engine = engine();
    let args = [
        "predict",
        "--engine",
        &engine,
        "--concurrency",
        "1,2",
        "--scenario",
        "32:8",
        "--scenario",
        "256:16",
        "--min-prompts",
        "12",
        "--max-prompts",
        "12",
        "--label",
        "pred",
        "--output-dir",
        out.to_str().unwrap(),
    ];
    let table = ok(&servelab(&db, &args));
    for col in ["Concurrency", "Output Token Throughput (tok/s)", "P99 TPOT (ms)"] {
        assert!(table.contains(col), "{table}");
    }
    for f in ["summary.md", "sweep.json", "32x8.csv", "256x16.csv", "charts/32x8-throughput.svg"] {
        assert!(out.join(f).is_file(), "{f} missing");
    }
    let list = ok(&servelab(&db, &["runs", "list", "--label", "pred"]));
    assert_eq!(list.matches("servelab predicted").count(), 4, "{list}");
    let show = ok(&servelab(&db, &["runs", "show", "1"]));
    assert!(show.contains("complete (servelab predicted)"), "{show}");
    assert!(show.contains("predicted by the engine model"), "{show}");

    // A measured run at the same load beside the prediction: compare says which is which.
    let bench = [
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
        "1",
        "--label",
        "measured",
    ];
    ok(&servelab(&db, &bench));
    let cmp = ok(&servelab(&db, &["compare", "1", "measured"]));
    assert!(cmp.contains("(predicted)"), "{cmp}");
    assert!(cmp.contains("measured"), "{cmp}");

    // The prediction's own sweep.json is a table calibrate reads; the fitted file predicts.
    let fitted = dir.path().join("fitted.yaml");
    let sweep_json = out.join("sweep.json");
    let report = ok(&servelab(
        &db,
        &[
            "predict",
            "calibrate",
            "--engine",
            &engine,
            sweep_json.to_str().unwrap(),
            "--params",
            "eta_gemm",
            "--max-evals",
            "3",
            "--output",
            fitted.to_str().unwrap(),
        ],
    ));
    assert!(report.contains("| eta_gemm |"), "{report}");
    assert!(report.contains("| 256:16 | 2 |"), "{report}");
    let text = std::fs::read_to_string(&fitted).unwrap();
    assert!(text.starts_with("# ") && text.contains("calibration:"), "{text}");
    let again_dir = dir.path().join("again");
    let again = [
        "predict",
        "--engine",
        fitted.to_str().unwrap(),
        "--concurrency",
        "2",
        "--scenario",
        "32:8",
        "--min-prompts",
        "4",
        "--no-store",
        "--output-dir",
        again_dir.to_str().unwrap(),
    ];
    ok(&servelab(&db, &again));
}

#[test]
fn predict_errors_name_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("servelab.db");
    let out = servelab(&db, &["predict", "--concurrency", "1"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--engine"));
    let bad = dir.path().join("bad.yaml");
    std::fs::write(&bad, "gpu: h100\nmodel: nope\n").unwrap();
    let out = servelab(&db, &["predict", "--engine", bad.to_str().unwrap(), "--no-store"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--engine") && err.contains("bad.yaml"), "{err}");
    let engine = engine();
    let table = dir.path().join("t.md");
    std::fs::write(&table, "no tables here\n").unwrap();
    let out =
        servelab(&db, &["predict", "calibrate", "--engine", &engine, table.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("t.md"));
}

/// The simulator serving an engine file in wall-clock time reports what the engine model
/// predicts for the same plan: mean TPOT and output throughput within 10 %.
#[test]
fn bench_against_sim_engine_matches_the_prediction() {
    use clap::Parser;
    use servelab::args::{Cli, Command as Cmd};

    let engine =
        format!("{}/../../examples/engines/qwen3-32b-h20-tp4.yaml", env!("CARGO_MANIFEST_DIR"));
    let argv = [
        "servelab",
        "bench",
        "--sim-engine",
        &engine,
        "--num-prompts",
        "16",
        "--random-input-len",
        "512",
        "--random-output-len",
        "48",
        "--ignore-eos",
        "--max-concurrency",
        "8",
        "--no-progress",
        "--no-store",
    ];
    let Cmd::Bench(a) = Cli::try_parse_from(argv).unwrap().command else { unreachable!() };
    let plan = servelab::resolve::bench_plan(&a, None).unwrap();
    let predicted = servelab_predict::Predictor::from_file(Path::new(&engine))
        .unwrap()
        .predict(&plan)
        .unwrap()
        .summary;
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (_tx, rx) = tokio::sync::watch::channel(false);
    let measured = rt.block_on(servelab::bench(&a, rx)).unwrap().summary;
    assert_eq!(measured.completed, 16, "{:?}", measured.warnings);
    let within = |what: &str, m: f64, p: f64| {
        let err = (m - p).abs() / p;
        assert!(err < 0.10, "{what}: measured {m:.3}, predicted {p:.3} ({:.1} % off)", err * 100.0);
    };
    within("mean TPOT (ms)", measured.tpot_ms.mean, predicted.tpot_ms.mean);
    within("output throughput", measured.output_throughput, predicted.output_throughput);
    // The engine's /metrics were scraped during the run, as a vLLM server's.
    let e = measured.engine.expect("engine metrics from the simulator's /metrics");
    assert!(e.peak_requests_running.unwrap_or(0.0) >= 1.0, "{e:?}");
    assert!(e.peak_kv_cache_usage.unwrap_or(0.0) > 0.0, "{e:?}");
}

/// Calibrate reads measured sweeps from the store by label, and refuses predictions.
#[test]
fn calibrate_reads_stored_sweeps_and_refuses_predictions() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("servelab.db");
    let (m_dir, p_dir) = (dir.path().join("m"), dir.path().join("p"));
    let sweep = [
        "sweep",
        "--concurrency",
        "1,2",
        "--scenario",
        "32:8",
        "--min-prompts",
        "4",
        "--max-prompts",
        "4",
        "--ignore-eos",
        "--no-progress",
        "--settle-secs",
        "0",
        "--label",
        "measured-sweep",
        "--output-dir",
        m_dir.to_str().unwrap(),
    ];
    ok(&servelab(&db, &sweep));
    let engine = engine();
    let fitted = dir.path().join("fitted.yaml");
    let calibrate = |source: &str| {
        servelab(
            &db,
            &[
                "predict",
                "calibrate",
                "--engine",
                &engine,
                source,
                "--params",
                "eta_gemm",
                "--max-evals",
                "3",
                "--output",
                fitted.to_str().unwrap(),
            ],
        )
    };
    let report = ok(&calibrate("measured-sweep"));
    assert!(report.contains("| 32:8 | 1 |") && report.contains("| 32:8 | 2 |"), "{report}");
    assert!(fitted.exists());

    let predict = [
        "predict",
        "--engine",
        &engine,
        "--concurrency",
        "1",
        "--scenario",
        "32:8",
        "--min-prompts",
        "4",
        "--label",
        "guess",
        "--output-dir",
        p_dir.to_str().unwrap(),
    ];
    ok(&servelab(&db, &predict));
    let out = calibrate("guess");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("is a prediction"));
    let out = calibrate("no-such-label");
    assert_eq!(out.status.code(), Some(2));
}
