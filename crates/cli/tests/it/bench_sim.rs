//! End-to-end: `servelab bench` against the simulator started in-process on 127.0.0.1:0,
//! checked for what it counts, classifies, sends and keeps (not for measured time: that is
//! the timing binary's `bench_sim`).

use std::time::Duration;

use servelab_client::StopReason;
use servelab_records::FailureKind;
use servelab_sim::SimConfig;
use tokio::sync::watch;

use crate::common::bench_sim::{bench, failure_kinds, fault_run, measured, settings, sim};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_concurrency_is_a_closed_loop_measured_from_freed_slots() {
    let sim = sim(SimConfig::fixed(10.0, 2.0)).await;
    let out = bench(
        &sim,
        &[
            "--num-prompts",
            "9",
            "--random-input-len",
            "16",
            "--random-output-len",
            "10",
            "--max-concurrency",
            "3",
            "--num-warmups",
            "2",
        ],
    )
    .await;
    assert_eq!(out.summary.completed, 9, "warm-ups are not counted");
    assert_eq!(out.records.iter().filter(|r| r.warmup).count(), 2);
    assert_eq!(out.summary.peak_concurrency, 3);
    let recs = measured(&out);
    let ends: Vec<u64> = recs.iter().filter_map(|r| r.end_ns).collect();
    for r in &recs[3..] {
        // Each later request is due exactly when an earlier one ended.
        assert!(ends.contains(&r.intended_ns), "intended {} not an end time", r.intended_ns);
        assert!(r.intended_ns > r.scheduled_ns);
    }
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_fault_kind_is_classified() {
    let cases: [(&str, &[&str], Option<FailureKind>); 9] = [
        ("rate-limit", &[], Some(FailureKind::HttpStatus)),
        ("server-error", &[], Some(FailureKind::HttpStatus)),
        ("unavailable", &[], Some(FailureKind::HttpStatus)),
        ("reset-before", &[], Some(FailureKind::Reset)),
        ("reset-mid", &[], Some(FailureKind::Reset)),
        ("stall=3", &["--request-timeout", "0.5"], Some(FailureKind::Timeout)),
        ("malformed", &[], Some(FailureKind::Malformed)),
        ("stream-error", &[], Some(FailureKind::StreamError)),
        ("no-done", &[], Some(FailureKind::Incomplete)),
    ];
    for (kind, extra, expected) in cases {
        let out = fault_run(kind, extra).await;
        assert_eq!(failure_kinds(&out), vec![expected; 3], "fault {kind}");
        assert_eq!(out.summary.failed, 3, "fault {kind}");
        let group = out.summary.failures.first().expect("failure listed");
        assert!(!group.messages.is_empty(), "fault {kind} keeps a message");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn survivable_faults_still_measure_exactly() {
    // No usage chunk: output tokens come from retokenizing, which matches exactly.
    let out = fault_run("no-usage", &[]).await;
    assert_eq!(failure_kinds(&out), vec![None; 3]);
    assert!(measured(&out).iter().all(|r| r.usage.is_none()));
    assert_eq!(out.summary.total_output_tokens, 3 * 12);
    // A UTF-8 character split across two network writes arrives whole.
    let out = fault_run("split-utf8", &[]).await;
    assert_eq!(failure_kinds(&out), vec![None; 3]);
    assert!(measured(&out).iter().all(|r| r.output_text().chars().any(|c| c.len_utf8() > 1)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interrupt_keeps_a_partial_result() {
    let sim = sim(SimConfig::fixed(10.0, 20.0)).await;
    let s = settings(
        &sim.base_url(),
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
    // Interrupt once two requests are streaming (not after a fixed pause: on a loaded machine
    // the start can take longer than any pause chosen here).
    let target = servelab_client::Target::resolve(&sim.base_url(), "/metrics").await.unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let body = match servelab_client::http::get(&target, "/metrics").await {
            Ok((200, b)) => String::from_utf8_lossy(&b).into_owned(),
            _ => String::new(),
        };
        let running = body
            .lines()
            .find(|l| l.starts_with("vllm:num_requests_running"))
            .and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok());
        if running == Some(2.0) {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "two requests never ran: {body}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    tx.send(true).unwrap();
    let out = tokio::time::timeout(Duration::from_secs(10), run).await.unwrap().unwrap().unwrap();
    assert_eq!(out.stop, StopReason::Interrupted);
    let kinds = failure_kinds(&out);
    assert_eq!(kinds.len(), 2, "two in flight, none issued after the interrupt");
    assert!(kinds.iter().all(|k| *k == Some(FailureKind::Cancelled)));
    assert!(measured(&out).iter().all(|r| !r.chunks.is_empty()), "partial chunks kept");
    assert!(out.summary.warnings.iter().any(|w| w.contains("interrupted")));
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_server_is_a_clear_runtime_error() {
    let s = settings("http://127.0.0.1:9", &["--ready-timeout", "0.3", "--num-prompts", "1"]);
    let (_tx, rx) = watch::channel(false);
    let err = servelab::bench(&s, rx).await.unwrap_err().to_string();
    assert!(err.contains("http://127.0.0.1:9 did not become ready"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kept_alive_connection_closed_by_the_server_loses_no_request() {
    // The sim closes each connection after its response without `Connection: close`, as
    // llama-server does; with one slot every later request reuses a connection the server
    // has just closed.
    let sim = sim(SimConfig::fixed(2.0, 1.0)).await;
    let out = bench(
        &sim,
        &[
            "--num-prompts",
            "12",
            "--random-input-len",
            "16",
            "--random-output-len",
            "6",
            "--max-concurrency",
            "1",
            "--header",
            "x-servelab-fault:close-after",
        ],
    )
    .await;
    assert_eq!(failure_kinds(&out), vec![None; 12]);
    assert_eq!(out.summary.total_output_tokens, 12 * 6);
    sim.shutdown().await;
}

/// `servelab bench` with no flags is the zero-setup run; any workload, load or target flag
/// but `--sim-engine` brings vLLM's defaults back; output flags do not count.
#[test]
fn zero_setup_is_bench_without_target_workload_or_load_flags() {
    use servelab::args::{Cli, Command};
    let parse = |argv: &[&str]| {
        let Command::Bench(a) = Cli::parse_args(argv.iter().map(Into::into)).unwrap().command
        else {
            unreachable!("bench")
        };
        a
    };
    assert!(parse(&["servelab", "bench"]).zero_setup);
    assert!(parse(&["servelab", "bench", "--no-progress", "--no-store"]).zero_setup);
    for flags in [
        &["--num-prompts", "1000"][..],
        &["--request-rate", "inf"],
        &["--max-concurrency", "4"],
        &["--random-input-len", "1024"],
        &["--base-url", "http://127.0.0.1:1"],
    ] {
        let argv = [&["servelab", "bench"][..], flags].concat();
        assert!(!parse(&argv).zero_setup, "{flags:?}");
    }
    let a = parse(&["servelab", "bench"]);
    let plan = servelab::resolve::bench_plan(&a, None).unwrap();
    assert_eq!(plan.workload.num_prompts, servelab::resolve::ZERO_SETUP_PROMPTS);
    assert_eq!(plan.load.max_concurrency, Some(servelab::resolve::ZERO_SETUP_CONCURRENCY));
    let servelab_plan::Target::Simulator(sim) = &plan.target else { unreachable!("simulator") };
    let engine = sim.engine.clone().unwrap();
    assert_eq!(engine, std::path::Path::new(servelab::resolve::ZERO_SETUP_ENGINE));
    servelab_engine::load_engine_file(&engine).expect("the zero-setup engine is built in");
    // Picking the simulator's deployment keeps the run sized for this machine.
    let other = parse(&["servelab", "bench", "--sim-engine", "qwen3-32b-h20-tp4"]);
    assert!(other.zero_setup);
    let plan = servelab::resolve::bench_plan(&other, None).unwrap();
    assert_eq!(plan.workload.num_prompts, servelab::resolve::ZERO_SETUP_PROMPTS);
    assert_eq!(plan.load.max_concurrency, Some(servelab::resolve::ZERO_SETUP_CONCURRENCY));
    let servelab_plan::Target::Simulator(sim) = &plan.target else { unreachable!("simulator") };
    assert_eq!(sim.engine.as_deref(), Some(std::path::Path::new("qwen3-32b-h20-tp4")));
    let explicit = parse(&["servelab", "bench", "--num-prompts", "1000"]);
    let plan = servelab::resolve::bench_plan(&explicit, None).unwrap();
    assert_eq!((plan.workload.num_prompts, plan.load.max_concurrency), (1000, None));
}

/// Warm-ups draw prompts of their own: resending the run's first prompts would leave them in
/// the server's prefix cache and those measured requests' TTFT short.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn warm_ups_send_prompts_of_their_own() {
    let sim = sim(SimConfig { truth_text: true, ..SimConfig::fixed(5.0, 1.0) }).await;
    let out = bench(
        &sim,
        &["--num-prompts", "6", "--random-input-len", "64", "--random-output-len", "2"],
    )
    .await;
    let _ = bench(
        &sim,
        &[
            "--num-prompts",
            "6",
            "--random-input-len",
            "64",
            "--random-output-len",
            "2",
            "--num-warmups",
            "3",
        ],
    )
    .await;
    assert_eq!(out.summary.completed, 6);
    let prompts: Vec<String> = sim.truth().into_iter().filter_map(|t| t.prompt).collect();
    assert_eq!(prompts.len(), 6 + 3 + 6);
    // The second run: 3 warm-ups, then the same 6 measured prompts as the first run's.
    let (first, second) = prompts.split_at(6);
    let (warm, measured) = second.split_at(3);
    let mut again = measured.to_vec();
    let mut before = first.to_vec();
    again.sort();
    before.sort();
    assert_eq!(again, before, "the measured prompts do not depend on the warm-ups");
    for w in warm {
        assert!(!first.contains(w), "a warm-up resent a measured prompt");
    }
    sim.shutdown().await;
}
