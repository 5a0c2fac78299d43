//! End-to-end: `servelab bench` against the simulator started in-process on 127.0.0.1:0.
//!
//! Measured values are checked against the timing the simulator was told to produce and
//! against its truth log (when it actually sent each chunk).
//!
//! Tolerances: on loopback a chunk reaches the client tens of microseconds after the server
//! sends it, but this suite runs on a shared 2-core CI machine while other tests run, where a
//! thread can be descheduled for several milliseconds. Lower bounds are tight (a measurement
//! can never be *faster* than the truth), upper bounds allow `SLACK_MS` of scheduling noise.

use std::collections::HashMap;
use std::time::Duration;

use servelab_client::runner::request_id;
use servelab_client::StopReason;
use servelab_records::{FailureKind, Outcome};
use servelab_sim::{SimConfig, SimHandle, TruthRecord};

use crate::common;
use crate::common::bench_sim::{bench, failure_kinds, fault_run, measured, sim};

/// Scheduling noise allowed on a loaded 2-core machine, per measurement.
const SLACK_MS: f64 = 15.0;

fn truth_by_id(sim: &SimHandle) -> HashMap<String, TruthRecord> {
    sim.truth().into_iter().filter_map(|t| Some((t.request_id.clone()?, t))).collect()
}

fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fixed_timing_matches_the_truth_log() {
    let _serial = crate::serial::one_at_a_time();
    let sim = sim(SimConfig::fixed(50.0, 10.0)).await;
    let out = bench(
        &sim,
        &[
            "--num-prompts",
            "16",
            "--random-input-len",
            "64",
            "--random-output-len",
            "20",
            "--max-concurrency",
            "4",
        ],
    )
    .await;
    let truth = truth_by_id(&sim);
    assert_eq!(out.summary.completed, 16);
    assert_eq!(out.summary.total_output_tokens, 16 * 20);
    for r in measured(&out) {
        let t = &truth[&request_id(r)];
        // Client TTFT starts at the intended send, the truth at the server's receipt: the client
        // can only see the first chunk after the server sent it.
        let client_ttft = ms(r.first_token_ns().unwrap() - r.intended_ns);
        let server_first = ms(t.chunks[0].actual_ns);
        assert!(client_ttft >= server_first, "{client_ttft} < {server_first}");
        assert!(
            client_ttft - server_first < SLACK_MS,
            "client {client_ttft} vs server {server_first}"
        );
        // Every later chunk: client gap vs server gap.
        let client_last = ms(r.chunks.last().unwrap().t_ns - r.chunks[0].t_ns);
        let server_last = ms(t.chunks.last().unwrap().actual_ns - t.chunks[0].actual_ns);
        assert!((client_last - server_last).abs() < SLACK_MS, "{client_last} vs {server_last}");
    }
    let s = &out.summary;
    assert!(s.ttft_ms.mean >= 50.0 && s.ttft_ms.mean < 50.0 + SLACK_MS, "ttft {}", s.ttft_ms.mean);
    assert!((s.tpot_ms.mean - 10.0).abs() < 1.0, "tpot {}", s.tpot_ms.mean);
    assert!((s.itl_ms.median - 10.0).abs() < 1.0, "itl {}", s.itl_ms.median);
    assert_eq!(s.peak_concurrency, 4);
    // Linux gives kernel receive times: each request records how late the client handled
    // its bytes after they arrived, the tool's own overhead.
    if cfg!(target_os = "linux") {
        assert!(measured(&out).iter().all(|r| r.read_lag_ns.is_some()));
        let lag = s.read_lag_ms.as_ref().expect("read lag reported");
        assert_eq!(lag.count, 16);
        assert!(lag.median < SLACK_MS, "{}", lag.median);
        let text = servelab_outputs::render_text(s);
        assert!(text.contains("Client Read Lag (handled - arrived, max)"), "{text}");
    }
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_token_chunks_keep_per_token_itl_and_peak_counts_tokens() {
    let _serial = crate::serial::one_at_a_time();
    let sim = sim(SimConfig::fixed(20.0, 10.0).with_tokens_per_chunk(4, 4)).await;
    let out = bench(
        &sim,
        &[
            "--num-prompts",
            "8",
            "--random-input-len",
            "32",
            "--random-output-len",
            "121",
            "--max-concurrency",
            "8",
        ],
    )
    .await;
    let s = &out.summary;
    assert_eq!(s.completed, 8);
    // 121 tokens = 1 + 30 chunks of 4: chunks arrive every 40 ms carrying 4 tokens each.
    for r in measured(&out) {
        assert_eq!(
            r.chunks.len(),
            31,
            "{:?}",
            r.chunks.iter().map(|c| c.tokens).collect::<Vec<_>>()
        );
        assert!(r.chunks[1..].iter().all(|c| c.tokens == Some(4)));
    }
    // Per-token ITL is 10 ms: neither 0 (peers' artefact) nor 40 (the chunk gap).
    assert!((s.itl_ms.median - 10.0).abs() < 1.0, "itl {}", s.itl_ms.median);
    assert!((s.itl_chunk_ms.median - 40.0).abs() < 4.0, "chunk itl {}", s.itl_chunk_ms.median);
    assert!((s.tpot_ms.mean - 10.0).abs() < 1.5, "tpot {}", s.tpot_ms.mean);
    // 8 streams × 100 tok/s = 800 tok/s in a full window; counting chunks would give ~200.
    assert!(
        s.peak_output_throughput > 600.0 && s.peak_output_throughput <= 900.0,
        "peak {}",
        s.peak_output_throughput
    );
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn constant_rate_follows_the_schedule() {
    let _serial = crate::serial::one_at_a_time();
    let sim = sim(SimConfig::fixed(5.0, 1.0)).await;
    let out = bench(
        &sim,
        &[
            "--num-prompts",
            "10",
            "--random-input-len",
            "16",
            "--random-output-len",
            "4",
            "--request-rate",
            "20",
            "--burstiness",
            "inf",
        ],
    )
    .await;
    let recs = measured(&out);
    let mut lags = Vec::new();
    for (i, r) in recs.iter().enumerate() {
        assert_eq!(r.scheduled_ns, i as u64 * 50_000_000);
        assert_eq!(r.intended_ns, r.scheduled_ns, "no concurrency cap, no queue");
        lags.push(ms(r.sent_ns - r.intended_ns));
    }
    // Typically ~0.1 ms; a descheduled thread on a loaded CI box can make one send late, so
    // the median carries the claim and the maximum only rules out a broken pacer.
    lags.sort_by(f64::total_cmp);
    assert!(lags[lags.len() / 2] < SLACK_MS && lags[lags.len() - 1] < 100.0, "lags {lags:?}");
    assert!(
        out.summary.duration_s > 0.45 && out.summary.duration_s < 0.7,
        "{}",
        out.summary.duration_s
    );
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn duration_mode_stops_issuing_and_drains() {
    let _serial = crate::serial::one_at_a_time();
    let sim = sim(SimConfig::fixed(5.0, 5.0)).await;
    let out = bench(
        &sim,
        &[
            "--num-prompts",
            "3",
            "--random-input-len",
            "16",
            "--random-output-len",
            "20",
            "--request-rate",
            "20",
            "--burstiness",
            "inf",
            "--duration",
            "0.5",
        ],
    )
    .await;
    assert_eq!(out.stop, StopReason::Duration);
    let recs = measured(&out);
    assert_eq!(recs.len(), 10, "arrivals at 0, 50, ..., 450 ms");
    assert!(recs.iter().all(|r| r.is_success()), "in-flight requests drain");
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_backend_with_reasoning_reports_time_to_first_content() {
    let _serial = crate::serial::one_at_a_time();
    let sim = sim(SimConfig::fixed(20.0, 5.0).with_reasoning_tokens(10)).await;
    let out = bench(
        &sim,
        &[
            "--backend",
            "openai-chat",
            "--num-prompts",
            "4",
            "--random-input-len",
            "16",
            "--random-output-len",
            "30",
        ],
    )
    .await;
    let s = &out.summary;
    assert_eq!(s.completed, 4);
    assert_eq!(s.total_output_tokens, 4 * 30);
    let ttfc = s.ttfc_ms.as_ref().expect("reasoning run reports TTFC");
    // Content starts 10 tokens (50 ms) after the first reasoning token.
    assert!(
        (ttfc.mean - s.ttft_ms.mean - 50.0).abs() < 5.0,
        "ttfc {} ttft {}",
        ttfc.mean,
        s.ttft_ms.mean
    );
    sim.shutdown().await;
}

/// The sim's `stall=S` pauses a stream for S seconds halfway (after 6 of 12 tokens), as an
/// engine stopping mid-stream with its connections left open does. `--stall-timeout` ends
/// such a request long before the request timeout, keeping what it received; a pause
/// shorter than the stall timeout is only slow.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_silent_past_the_stall_timeout_fails_and_keeps_its_chunks() {
    let _serial = crate::serial::one_at_a_time();
    let out = fault_run("stall=5", &["--stall-timeout", "0.4"]).await;
    assert_eq!(failure_kinds(&out), vec![Some(FailureKind::Timeout); 3]);
    for r in measured(&out) {
        let Outcome::Failure { message, .. } = &r.outcome else { unreachable!() };
        assert!(message.contains("stalled: no data for 0.4 s after 6 chunks"), "{message}");
        assert_eq!(r.chunks.len(), 6);
        // Ended 0.4 s after the last chunk (timer and scheduling slack allowed), not at 5 s.
        let silent_ms = (r.end_ns.unwrap() - r.chunks[5].t_ns) as f64 / 1e6;
        assert!((400.0..1000.0).contains(&silent_ms), "{silent_ms} ms");
    }
    let out = fault_run("stall=0.3", &["--stall-timeout", "2"]).await;
    assert_eq!(failure_kinds(&out), vec![None; 3]);
    assert!(out.summary.e2el_ms.mean > 300.0, "{}", out.summary.e2el_ms.mean);
}

/// Against the in-process simulator, the summary carries the simulator's own log: what it
/// was set to do (TTFT 50 ms, ITL 10 ms), what it did, and what servelab measured.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_built_in_simulator_puts_its_truth_next_to_the_measurement() {
    let _serial = crate::serial::one_at_a_time();
    use servelab::args::{Cli, Command};
    let argv = [
        "servelab",
        "bench",
        "--no-progress",
        "--no-store",
        "--num-prompts",
        "12",
        "--max-concurrency",
        "4",
        "--random-input-len",
        "32",
        "--random-output-len",
        "12",
        "--ignore-eos",
    ];
    let Command::Bench(a) = Cli::parse_args(argv.iter().map(Into::into)).unwrap().command else {
        unreachable!("bench")
    };
    let out = common::run_bench(&a, Duration::from_secs(60)).await;
    let t = out.summary.truth.expect("the simulator's log is attached");
    assert_eq!(t.requests, 12);
    assert_eq!(t.set_ttft_ms, 50.0);
    assert_eq!(t.set_itl_ms, 10.0);
    // The server is never early, servelab never before the server.
    assert!(t.server_ttft_ms >= 50.0 && t.server_ttft_ms < 50.0 + SLACK_MS, "{t:?}");
    assert!(t.measured_ttft_ms >= t.server_ttft_ms, "{t:?}");
    assert!(t.ttft_overhead_ms >= 0.0 && t.ttft_overhead_ms < SLACK_MS, "{t:?}");
    assert!(t.itl_error_ms().abs() < SLACK_MS, "{t:?}");
}

/// The zero-setup run as a newcomer types it: the built-in simulator serves the default
/// engine file, its log is attached, servelab's per-token ITL is within the truth check's
/// 0.5 ms of it, and the figures it was set to produce are the engine model's (what
/// `predict` says of the same plan), not the fixed TTFT 50 ms / ITL 10 ms of plain sim mode.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_zero_setup_run_shows_the_engine_models_figures_exactly() {
    let _serial = crate::serial::one_at_a_time();
    use servelab::args::{Cli, Command};
    let argv = ["servelab", "bench", "--no-progress", "--no-store"];
    let Command::Bench(a) = Cli::parse_args(argv.iter().map(Into::into)).unwrap().command else {
        unreachable!("bench")
    };
    assert!(a.zero_setup);
    let plan = servelab::resolve::bench_plan(&a, None).unwrap();
    let engine = std::path::Path::new(servelab::resolve::ZERO_SETUP_ENGINE);
    let predicted =
        servelab_predict::Predictor::from_file(engine).unwrap().predict(&plan).unwrap().summary;
    // About 11 s in the test profile on a 2-core machine.
    let out = common::run_bench(&a, Duration::from_secs(300)).await;
    let s = &out.summary;
    assert_eq!(s.completed as usize, servelab::resolve::ZERO_SETUP_PROMPTS, "{:?}", s.warnings);
    let t = s.truth.as_ref().expect("the simulator's log is attached");
    assert_eq!(t.requests as usize, servelab::resolve::ZERO_SETUP_PROMPTS);
    assert!(t.itl_error_ms().abs() < servelab_metrics::truth::ITL_EXACT_MS, "{t:?}");
    assert!(t.server_late_ms >= 0.0, "never early: {t:?}");
    // Qwen3-8B on an H100 at 32 sequences decodes a token in ~9.5 ms, close to the fixed
    // mode's 10 ms: the model's figure is pinned within 3 % (the 200 requests' arrivals
    // differ a little between the wall-clock run and the virtual one), which 10 ms is not.
    let (set, model) = (t.set_itl_ms, predicted.itl_ms.median);
    assert!((set - model).abs() / model < 0.03, "set ITL {set} ms, engine model {model} ms");
    assert!((set - 10.0).abs() > 0.2, "fixed timing's 10 ms ITL: {t:?}");
}
