//! `--gpu-metrics` and `--gpu-hourly-cost` as a user runs them: a bench and a sweep beside a
//! fake DCGM exporter (`testdata/dcgm.rs`), their runs in the store, `compare` and `report`
//! of them; NVML where the machine has no NVIDIA driver; bad values.

use std::path::Path;
use std::process::{Command, Output};

use crate::dcgm::FakeDcgm;

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

const RUN: [&str; 10] = [
    "--random-input-len",
    "32",
    "--random-output-len",
    "8",
    "--ignore-eos",
    "--no-progress",
    "--gpu-metrics-interval",
    "0.1",
    "--gpu-hourly-cost",
    "2.5",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_sweep_compare_and_report_carry_gpu_energy_and_cost() {
    let dcgm = FakeDcgm::start(true).await;
    let dir = tempfile::tempdir().unwrap();
    let (db, url) = (dir.path().join("s.db"), dcgm.url.clone());
    let result = dir.path().join("r.json");
    let sweep_dir = dir.path().join("sweep");
    let (d, u, r, sd) = (db.clone(), url.clone(), result.clone(), sweep_dir.clone());
    let (bench, sweep, cmp, report) = tokio::task::spawn_blocking(move || {
        let mut args = vec!["bench", "--num-prompts", "40", "--request-rate", "40"];
        args.extend(RUN);
        let folder = r.parent().unwrap().to_str().unwrap();
        args.extend(["--gpu-metrics", &u, "--gpus", "2", "--label", "a", "--save-result"]);
        args.extend(["--result-dir", folder, "--result-filename", "r.json"]);
        let bench = ok(&servelab(&d, &args));
        let mut args = vec!["sweep", "--scenario", "32:8", "--concurrency", "1,2"];
        args.extend(RUN);
        args.extend(["--min-prompts", "12", "--max-prompts", "12", "--settle-secs", "0"]);
        args.extend(["--gpu-metrics", &u, "--label", "b", "--output-dir", sd.to_str().unwrap()]);
        args.extend([
            "--columns",
            "load,output_throughput,joules_per_output_token,usd_per_million_output_tokens",
        ]);
        ok(&servelab(&d, &args));
        let cmp = ok(&servelab(&d, &["compare", "1", "2"]));
        let html = d.with_extension("html");
        ok(&servelab(&d, &["report", "1", "2", "-o", html.to_str().unwrap()]));
        (
            bench,
            (
                std::fs::read_to_string(sd.join("summary.md")).unwrap(),
                std::fs::read_to_string(sd.join("32x8.csv")).unwrap(),
            ),
            cmp,
            std::fs::read_to_string(html).unwrap(),
        )
    })
    .await
    .unwrap();

    // The bench's summary, and its result file's servelab.gpu.
    assert!(bench.contains("GPU Energy and Cost (measured window)"), "{bench}");
    assert!(bench.contains(&format!("GPU telemetry:                           {url}")), "{bench}");
    assert!(bench.contains("Energy from:                             energy counter\n"), "{bench}");
    assert!(bench.contains("GPU hourly cost (USD):                   2.50 x 2 GPUs"), "{bench}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&result).unwrap()).unwrap();
    let g = &v["servelab"]["gpu"];
    assert_eq!((g["gpus_seen"].as_u64(), g["gpus_declared"].as_u64()), (Some(2), Some(2)));
    assert_eq!(g["energy_method"], "counter");
    let (tokens, window) =
        (v["total_output_tokens"].as_f64().unwrap(), g["window_s"].as_f64().unwrap());
    assert_eq!(tokens, 320.0);
    let usd = 2.5 * 2.0 * window * 1e6 / (3600.0 * tokens);
    assert_eq!(g["usd_per_million_output_tokens"].as_f64(), Some(usd));
    let j = g["joules_per_output_token"].as_f64().unwrap();
    assert_eq!(j, g["energy_j"].as_f64().unwrap() / tokens);

    // The sweep's table has the columns asked for, a value at each level; its CSV has every
    // GPU figure of each point.
    let (sweep, csv) = sweep;
    let mut csv_lines = csv.lines();
    let head: Vec<&str> = csv_lines.next().unwrap().split(',').collect();
    let col = head.iter().position(|h| *h == "joules_per_output_token").expect("a J/token column");
    let usd = head.iter().position(|h| *h == "usd_per_million_output_tokens").unwrap();
    for row in csv_lines {
        let cells: Vec<&str> = row.split(',').collect();
        assert!(cells[col].parse::<f64>().unwrap() > 0.0, "{csv}");
        assert!(cells[usd].parse::<f64>().unwrap() > 0.0, "{csv}");
    }
    assert!(sweep.contains("Energy per Output Token (J/tok)"), "{sweep}");
    assert!(sweep.contains("Cost per 1M Output Tokens ($)"), "{sweep}");
    let lines: Vec<&str> = sweep.lines().collect();
    let header = lines.iter().position(|l| l.contains("Energy per Output Token")).unwrap();
    let rows = &lines[header + 2..header + 4];
    assert!(rows.iter().all(|l| l.starts_with('|') && !l.contains(" - ")), "{sweep}");

    // compare and report read them from the store.
    for row in [
        "Energy per output token (J/tok)",
        "Cost per million output tokens ($/Mtok)",
        "GPU power mean (W)",
        "GPU power peak (W)",
    ] {
        assert!(cmp.contains(row), "{row}: {cmp}");
        assert!(report.contains(row), "{row} not in the report");
    }
}

#[test]
fn nvml_without_nvidias_driver_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.db");
    let out =
        servelab(&db, &["bench", "--num-prompts", "2", "--no-progress", "--gpu-metrics", "nvml"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if out.status.code() == Some(0) {
        // A machine with NVIDIA's driver: its GPUs are read.
        assert!(String::from_utf8_lossy(&out.stdout)
            .contains("GPU telemetry:                           nvml"));
        return;
    }
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--gpu-metrics nvml: NVIDIA's management library cannot be used here ("),
        "{stderr}"
    );
    assert!(stderr.contains("--gpu-metrics http://HOST:9400/metrics"), "{stderr}");
}

#[test]
fn bad_gpu_values_name_their_flag() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.db");
    for (args, says) in [
        (
            vec!["--gpu-metrics", "gpu-node:9400"],
            "--gpu-metrics 'gpu-node:9400': give a DCGM exporter's URL",
        ),
        (
            vec!["--gpu-hourly-cost=-1"],
            "--gpu-hourly-cost: must be a price in USD, 0 or more (got -1)",
        ),
        (
            vec!["--gpu-metrics-interval", "0"],
            "--gpu-metrics-interval: must be more than 0 seconds",
        ),
    ] {
        let mut all = vec!["bench", "--num-prompts", "2", "--no-progress"];
        all.extend(args);
        let out = servelab(&db, &all);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains(says), "{stderr}");
    }
}

/// Issue 27: GPU telemetry is the GPUs' hosts', not the shards'. Two shards of one run read the
/// same exporter (the same two GPUs): the merged run counts each GPU once over the merged
/// window (about 720 W × the window, not twice that), from the records and from the digests,
/// and prices the merged window.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shards_reading_one_exporter_count_its_gpus_once() {
    use servelab_store::{Filter, Store};
    let dcgm = FakeDcgm::start(true).await;
    let sim =
        servelab_sim::start(servelab_sim::SimConfig::fixed(10.0, 2.0).with_port(0)).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (results, db) = (dir.path().join("r"), dir.path().join("s.db"));
    let (r, d) = (results.to_str().unwrap().to_string(), db.to_str().unwrap().to_string());
    let (base, gpu_url) = (sim.base_url(), dcgm.url.clone());
    let (merged, light) = tokio::task::spawn_blocking(move || {
        let scale = ["scale", "local", "--shards", "2", "--name", "gpu", "--results", &r];
        let mut args: Vec<&str> = scale.to_vec();
        args.extend(["--db", &d, "--start-in", "3", "--", "--clock-reference", "none"]);
        args.extend(["--base-url", &base, "--num-prompts", "40", "--request-rate", "40"]);
        args.extend(["--random-input-len", "16", "--random-output-len", "4", "--ignore-eos"]);
        args.extend(["--tokenizer", "cl100k_base", "--gpu-metrics", &gpu_url]);
        args.extend(["--gpu-metrics-interval", "0.1", "--gpu-hourly-cost", "2", "--gpus", "2"]);
        let merged = ok(&servelab(Path::new(&d), &args));
        let light = ["runs", "merge-digests", &r, "--label", "light", "--db", &d];
        (merged, ok(&servelab(Path::new(&d), &light)))
    })
    .await
    .unwrap();
    sim.shutdown().await;
    for text in [&merged, &light] {
        assert!(text.contains("GPU Energy and Cost (measured window)"), "{text}");
        assert!(
            text.contains(
                "GPU telemetry: 2 GPUs were read by more than one shard and are counted once"
            ),
            "{text}"
        );
    }
    // Each shard kept its GPUs' readings for the merge.
    let shard: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(results.join("run-shard-0-of-2.json")).unwrap(),
    )
    .unwrap();
    let readings = &shard["servelab"]["gpu"]["per_gpu"][0]["energy_readings"];
    assert!(readings.as_array().is_some_and(|r| r.len() >= 5), "{readings}");

    let store = Store::open_existing(&db).unwrap();
    let summary = |label: &str| {
        let rows = store.list(&Filter { label: Some(label.into()), ..Filter::default() }).unwrap();
        assert_eq!(rows.len(), 1, "{label}");
        store.run(rows[0].id).unwrap().summary.unwrap()
    };
    let (exact, light) = (summary("gpu"), summary("light"));
    let watts: f64 = crate::dcgm::ENERGY_RATE_W.iter().sum();
    for s in [&exact, &light] {
        let g = s.gpu.as_ref().unwrap();
        let ids: Vec<&str> = g.per_gpu.iter().map(|p| p.id.as_str()).collect();
        assert_eq!(ids, crate::dcgm::IDS, "each GPU once");
        assert_eq!((g.gpus_seen, g.cost_gpus), (2, Some(2)));
        assert_eq!(g.window_s, exact.duration_s);
        // The counters rise at 410 + 310 W: one run's energy over the window, read every
        // 0.1 s (twice that if each shard's reading were counted).
        let (e, want) = (g.energy_j.unwrap(), watts * g.window_s);
        assert!((e - want).abs() < 0.1 * want, "{e} J vs {want} J");
        assert_eq!(s.total_output_tokens, 160);
        let usd = 2.0 * 2.0 * g.window_s * 1e6 / (3600.0 * 160.0);
        assert_eq!(g.usd_per_million_output_tokens, Some(usd));
        assert!(g.per_gpu.iter().all(|p| p.energy_readings.is_empty()));
    }
    let (a, b) = (exact.gpu.unwrap().energy_j.unwrap(), light.gpu.unwrap().energy_j.unwrap());
    assert!((a - b).abs() <= 1e-9 * a, "records {a} J, digests {b} J");
}
