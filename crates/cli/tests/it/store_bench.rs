//! Recording benches in the results store, driven as library calls against the simulator.

use std::path::Path;
use std::time::{Duration, Instant};

use clap::Parser;
use servelab::args::{BenchArgs, Cli, Command};
use servelab_client::StopReason;
use servelab_sim::SimConfig;
use servelab_store::{Filter, RunStatus, Store};
use tokio::sync::watch;

fn settings(url: &str, db: &Path, extra: &[&str]) -> BenchArgs {
    let mut args = vec!["servelab", "bench", "--base-url", url, "--no-progress", "--ignore-eos"];
    let db = db.to_str().unwrap().to_string();
    args.extend_from_slice(&["--db", &db]);
    args.extend_from_slice(extra);
    let cli = Cli::try_parse_from(args).expect("valid args");
    let Command::Bench(a) = cli.command else { unreachable!("bench subcommand") };
    *a
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bench_is_running_in_the_store_while_it_runs_then_complete() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.db");
    let sim = servelab_sim::start(SimConfig::fixed(20.0, 20.0).with_port(0)).await.unwrap();
    let s = settings(
        &sim.base_url(),
        &db,
        &[
            "--num-prompts",
            "12",
            "--random-input-len",
            "16",
            "--random-output-len",
            "20",
            "--max-concurrency",
            "2",
            "--label",
            "live",
            "--tag",
            "gpu=none",
        ],
    );
    let (_tx, rx) = watch::channel(false);
    let run = tokio::spawn(async move { servelab::bench(&s, rx).await });

    // 12 requests × ~0.4 s at concurrency 2 ≈ 2.4 s: poll until the run shows as running
    // with some records already stored.
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut seen_running_with_records = false;
    while Instant::now() < deadline && !run.is_finished() {
        if let Ok(store) = Store::open(&db) {
            if let Some(r) = store.list(&Filter::default()).unwrap().first() {
                if r.status == RunStatus::Running && store.record_count(r.id).unwrap() > 0 {
                    seen_running_with_records = true;
                    break;
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let out = tokio::time::timeout(Duration::from_secs(30), run).await.unwrap().unwrap().unwrap();
    assert!(seen_running_with_records, "records are appended while the bench runs");
    let store = Store::open(&db).unwrap();
    let rows = store.list(&Filter::default()).unwrap();
    assert_eq!(rows.len(), 1);
    let r = &rows[0];
    assert_eq!(r.status, RunStatus::Complete);
    assert_eq!(r.label.as_deref(), Some("live"));
    assert_eq!(r.tags, vec![("gpu".to_string(), "none".to_string())]);
    assert_eq!(r.headline.completed, Some(12));
    let stored = store.run(r.id).unwrap();
    assert_eq!(stored.summary.as_ref(), Some(&out.summary), "the exact summary is stored");
    assert_eq!(store.records(r.id).unwrap(), out.records, "final records, with token counts");
    assert!(!stored.config.host.is_empty());
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_bench_is_stored_as_interrupted() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.db");
    let sim = servelab_sim::start(SimConfig::fixed(10.0, 20.0).with_port(0)).await.unwrap();
    let s = settings(
        &sim.base_url(),
        &db,
        &[
            "--num-prompts",
            "20",
            "--random-input-len",
            "16",
            "--random-output-len",
            "100",
            "--max-concurrency",
            "2",
            "--drain-timeout",
            "0.2",
        ],
    );
    let (tx, rx) = watch::channel(false);
    let run = tokio::spawn(async move { servelab::bench(&s, rx).await });
    // Interrupted once it runs (an interrupt during the readiness wait ends the bench before
    // anything is stored): the store lists it as running before the first request is sent.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while Store::open(&db)
        .ok()
        .and_then(|s| s.list(&Filter::default()).ok())
        .is_none_or(|l| l.is_empty())
    {
        assert!(tokio::time::Instant::now() < deadline, "the bench never started");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    tx.send(true).unwrap();
    let out = tokio::time::timeout(Duration::from_secs(10), run).await.unwrap().unwrap().unwrap();
    assert_eq!(out.stop, StopReason::Interrupted);
    let store = Store::open(&db).unwrap();
    let r = &store.list(&Filter::default()).unwrap()[0];
    assert_eq!(r.status, RunStatus::Interrupted);
    assert_eq!(store.record_count(r.id).unwrap(), out.records.len() as u64);
    sim.shutdown().await;
}

/// A store named with --db that cannot be opened is the user's error, found before anything
/// is sent (it used to warn, run, and leave the run unrecorded with exit 0).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_explicit_store_that_cannot_open_stops_the_bench_before_it_sends() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("not-a-dir");
    std::fs::write(&file, "x").unwrap();
    let sim = servelab_sim::start(SimConfig::fixed(5.0, 1.0).with_port(0)).await.unwrap();
    let s = settings(
        &sim.base_url(),
        &file.join("s.db"),
        &["--num-prompts", "5", "--random-input-len", "8", "--random-output-len", "4"],
    );
    let (_tx, rx) = watch::channel(false);
    let err = tokio::time::timeout(Duration::from_secs(30), servelab::bench(&s, rx))
        .await
        .unwrap()
        .unwrap_err();
    assert!(err.to_string().contains("--db"), "{err}");
    assert_eq!(sim.truth_len(), 0, "nothing was sent");
    sim.shutdown().await;
}

/// Reasoning models: the stored run keeps each phase's figures, so `compare` and `report` show
/// them; the counts are the simulator's (5 reasoning tokens of 12, think tags in the content).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reasoning_run_is_stored_with_its_phases() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.db");
    let cfg = SimConfig::fixed(5.0, 2.0)
        .with_reasoning_tokens(5)
        .with_reasoning_format(servelab_sim::ReasoningFormat::ThinkTags)
        .with_port(0);
    let sim = servelab_sim::start(cfg).await.unwrap();
    let s = settings(
        &sim.base_url(),
        &db,
        &[
            "--backend",
            "openai-chat",
            "--continuous-usage",
            "on",
            "--num-prompts",
            "6",
            "--random-input-len",
            "16",
            "--random-output-len",
            "12",
            "--label",
            "thinks",
        ],
    );
    let (_tx, rx) = watch::channel(false);
    let out = servelab::bench(&s, rx).await.unwrap();
    let r = out.summary.reasoning.as_ref().expect("the run reasoned");
    assert_eq!((r.requests, r.total_reasoning_tokens, r.total_answer_tokens), (6, 30, 42));
    let store = Store::open(&db).unwrap();
    let id = store.list(&Filter::default()).unwrap()[0].id;
    let stored = store.run(id).unwrap().summary.expect("a summary");
    assert_eq!(stored.reasoning, out.summary.reasoning);
    sim.shutdown().await;
}
