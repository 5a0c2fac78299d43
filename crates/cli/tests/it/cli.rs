//! The `servelab` binary as a user runs it: exit codes, messages, files.

use std::process::Command;

fn servelab(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_servelab")).args(args).output().expect("binary runs")
}

#[test]
fn bench_with_no_target_runs_the_simulator_and_saves_a_valid_result() {
    let dir = tempfile::tempdir().unwrap();
    let out = servelab(&[
        "bench",
        "--num-prompts",
        "20",
        "--random-input-len",
        "64",
        "--random-output-len",
        "16",
        "--ignore-eos",
        "--save-result",
        "--save-detailed",
        "--result-dir",
        dir.path().to_str().unwrap(),
        "--result-filename",
        "r.json",
        "--no-store",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "stderr: {stderr}");
    assert!(stderr.contains("benchmarking the built-in simulator"), "{stderr}");
    // Workload flags leave the zero-setup engine model; the banner must say so (issue 25).
    assert!(
        stderr.contains("fixed timing, not an engine model: TTFT 50 ms, ITL 10 ms"),
        "{stderr}"
    );
    assert!(stdout.starts_with("============ Serving Benchmark Result ============\n"), "{stdout}");
    assert!(stdout.contains("Successful requests:                     20        \n"), "{stdout}");
    assert!(stdout.contains("Total generated tokens:                  320       \n"), "{stdout}");

    let result: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("r.json")).unwrap()).unwrap();
    let schema_path =
        concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/schema/servelab-result-v1.schema.json");
    let schema: serde_json::Value =
        serde_json::from_slice(&std::fs::read(schema_path).unwrap()).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let errors: Vec<String> = validator.iter_errors(&result).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "real output violates the schema: {errors:?}");
    assert_eq!(result["completed"], 20);
    assert_eq!(result["total_output_tokens"], 320);

    let lines = std::fs::read_to_string(dir.path().join("r.records.jsonl")).unwrap();
    assert_eq!(lines.lines().count(), 20, "one record per request, written as they finish");
}

#[test]
fn usage_errors_exit_2_and_name_the_flag() {
    let out = servelab(&["bench", "--request-rate", "fast"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--request-rate: expected a positive number or 'inf' (got 'fast')"),
        "{stderr}"
    );

    let out = servelab(&["bench", "--dataset-name", "sharegpt"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--dataset-path"));

    let out = servelab(&["bench", "--no-such-flag"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn missing_dataset_file_is_named() {
    let out =
        servelab(&["bench", "--dataset-name", "jsonl", "--dataset-path", "/nonexistent/d.jsonl"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("/nonexistent/d.jsonl"), "{stderr}");
}

#[test]
fn help_exits_0() {
    let out = servelab(&["bench", "--help"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).contains("--max-concurrency"));
}

/// A `--duration` with every arrival at once and no cap would never end (issue 28): refused,
/// naming the flag and the two ways out.
#[test]
fn an_endless_duration_is_refused() {
    let out = servelab(&["bench", "--duration", "1", "--no-store"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--duration 1: with no --request-rate"), "{stderr}");
    assert!(stderr.contains("--max-concurrency (closed loop)"), "{stderr}");
}

/// A cap far above the run's size costs nothing: `u64::MAX` for 5 prompts used to spawn
/// workers until memory ran out.
#[test]
fn a_huge_concurrency_cap_runs_as_the_prompts_allow() {
    let out = servelab(&[
        "bench",
        "--num-prompts",
        "5",
        "--random-input-len",
        "8",
        "--random-output-len",
        "4",
        "--max-concurrency",
        "18446744073709551615",
        "--no-store",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("Successful requests:                     5 "), "{stdout}");
}

/// SIGTERM during the readiness wait ends the run at once (it waited out `--ready-timeout`).
#[test]
fn sigterm_ends_the_readiness_wait() {
    use std::io::Read;
    // A server that accepts and never answers.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for mut s in listener.incoming().flatten().take(64) {
            let mut buf = [0u8; 1024];
            let _ = s.read(&mut buf);
            held.push(s);
        }
    });
    let mut child = Command::new(env!("CARGO_BIN_EXE_servelab"))
        .args(["bench", "--base-url", &url, "--ready-timeout", "120", "--no-store"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let killed = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    assert!(killed.success());
    let started = std::time::Instant::now();
    // Bounded: before the fix the wait ran its full 120 s.
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if started.elapsed() > std::time::Duration::from_secs(30) {
            let _ = child.kill();
            panic!("bench ignored SIGTERM during the readiness wait");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let mut stderr = String::new();
    child.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
    assert_eq!(status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("interrupted"), "{stderr}");
}

/// A run longer than the records kept whole folds them as they come: the summary's counts and
/// token totals stay exact, it says it was folded, and every record still reaches the
/// `--save-detailed` file.
#[test]
fn a_run_past_keep_records_is_folded_with_exact_counts() {
    let dir = tempfile::tempdir().unwrap();
    let out = servelab(&[
        "bench",
        "--num-prompts",
        "300",
        "--random-input-len",
        "16",
        "--random-output-len",
        "5",
        "--ignore-eos",
        "--max-concurrency",
        "32",
        "--keep-records",
        "64",
        "--save-result",
        "--save-detailed",
        "--result-dir",
        dir.path().to_str().unwrap(),
        "--result-filename",
        "r.json",
        "--no-store",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stdout.contains("Successful requests:                     300 "), "{stdout}");
    assert!(stdout.contains("Total generated tokens:                  1500 "), "{stdout}");
    assert!(stdout.contains("Total input tokens:                      4800 "), "{stdout}");
    let result: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("r.json")).unwrap()).unwrap();
    let warnings = result["servelab"]["warnings"].to_string();
    assert!(warnings.contains("300 measured requests, more than the 64 kept whole"), "{warnings}");
    let lines = std::fs::read_to_string(dir.path().join("r.records.jsonl")).unwrap();
    assert_eq!(lines.lines().count(), 300);
    // The simulator's defaults: TTFT 50 ms, 10 ms between tokens.
    let ttft = result["mean_ttft_ms"].as_f64().unwrap();
    assert!((45.0..200.0).contains(&ttft), "{ttft}");
}

/// Counts of `u64::MAX` are refused with the flag named, not a panic ("capacity overflow").
#[test]
fn absurd_counts_are_usage_errors() {
    let out = servelab(&["bench", "--num-prompts", "18446744073709551615", "--no-store"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--num-prompts 18446744073709551615: at most"), "{stderr}");
    let out = servelab(&["compare", "1", "2", "--resamples", "18446744073709551615"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--resamples"), "{stderr}");
    assert!(stderr.contains("at most 1000000 resamples"), "{stderr}");
}

/// A file size limit (`ulimit -f`) used to kill the run by SIGXFSZ with nothing printed: the
/// summary comes first, then the files that could not be written, and the exit is 2.
#[test]
fn a_failed_file_write_keeps_the_summary() {
    let dir = tempfile::tempdir().unwrap();
    let script = format!(
        "ulimit -f 2; exec {} bench --num-prompts 40 --random-input-len 64 --random-output-len 8 \
         --save-result --save-detailed --result-dir {} --result-filename r.json --no-store",
        env!("CARGO_BIN_EXE_servelab"),
        dir.path().display()
    );
    let out = Command::new("bash").args(["-c", &script]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stdout.contains("Successful requests:                     40 "), "{stdout}");
    assert!(stderr.contains("not every file was written"), "{stderr}");
    assert!(stderr.contains("r.records.jsonl"), "{stderr}");
}

/// A store named with --db that cannot be opened is a usage error before the run (it was a
/// warning and exit 0, the run unrecorded).
#[test]
fn an_explicit_store_that_cannot_open_is_a_usage_error() {
    let out = servelab(&["bench", "--db", "/proc/no-such-dir/runs.db", "--num-prompts", "2"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--db /proc/no-such-dir/runs.db: cannot create"), "{stderr}");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("Successful requests"));
}
