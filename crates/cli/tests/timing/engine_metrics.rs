//! End-to-end: the engine's `/metrics`, scraped by `servelab bench` during a run against the
//! simulator (which exports vLLM's names), agrees with what the client measured; an engine
//! that restarts mid-run is reported, and no request is lost.

use std::time::Duration;

use servelab_bench::BenchOutcome;
use servelab_records::{FailureKind, Outcome};
use servelab_sim::{SimConfig, SimHandle};

use crate::common;

async fn bench(url: &str, extra: &[&str]) -> BenchOutcome {
    let s = common::bench_settings(url, &[&["--ignore-eos"], extra].concat());
    common::run_bench(&s, Duration::from_secs(60)).await
}

async fn sim(cfg: SimConfig) -> SimHandle {
    servelab_sim::start(cfg).await.expect("sim starts")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn engine_counts_agree_with_the_client_and_warmups_are_not_counted() {
    let _serial = crate::serial::one_at_a_time();
    // 4 slots, 8 clients: 4 run and 4 wait in the engine's queue.
    let sim = sim(SimConfig::fixed(40.0, 5.0).with_port(0).with_max_num_seqs(4)).await;
    let out = bench(
        &sim.base_url(),
        &[
            "--num-prompts",
            "24",
            "--num-warmups",
            "4",
            "--random-input-len",
            "64",
            "--random-output-len",
            "30",
            "--max-concurrency",
            "8",
            "--server-metrics-interval",
            "0.05",
        ],
    )
    .await;
    let s = &out.summary;
    assert_eq!((s.completed, s.failed), (24, 0));
    let e = s.engine.as_ref().expect("the simulator exports /metrics");
    assert_eq!(e.engine, "vllm");
    assert_eq!(e.failed_scrapes, 0);
    assert!(e.restarts_s.is_empty() && e.unreachable_s.is_empty());
    // Exactly the measured requests' tokens: the 4 warm-ups ran before the baseline scrape.
    assert_eq!(e.generation_tokens, Some(s.total_output_tokens as f64));
    assert_eq!(e.generation_tokens, Some(24.0 * 30.0));
    assert_eq!(e.prompt_tokens, Some(s.total_input_tokens as f64));
    assert_eq!(e.requests_finished, Some(24.0));
    // The capacity: never more than 4 running; the queue was seen.
    assert_eq!(e.peak_requests_running, Some(4.0));
    assert!(e.peak_requests_waiting.unwrap_or(0.0) >= 1.0, "{e:?}");
    // The engine's own TTFT excludes nothing the client sees, so it is at most the client's.
    let server_ttft = e.server_mean_ttft_ms.expect("TTFT histogram");
    assert!(server_ttft >= 40.0 && server_ttft <= s.ttft_ms.mean + 1.0, "{server_ttft}");
    // A scrape before the origin, several during, one after.
    assert!(e.series.first().unwrap().t_s <= 0.0);
    assert!(e.series.last().unwrap().t_s * 1e3 >= s.duration_s * 1e3 - 1.0);
    assert!(e.series.len() >= 5, "{}", e.series.len());
    assert!(!s.warnings.iter().any(|w| w.contains("engine")), "{:?}", s.warnings);
    // The text report says it.
    let text = servelab_outputs::render_text(s);
    assert!(text.contains("Engine /metrics (vllm"), "{text}");
    assert!(text.contains(&format!("{:<40} {:<10}", "Engine generated tokens:", "720")), "{text}");
    sim.shutdown().await;
}

/// The engine goes away ~0.8 s into a 3 s run and comes back on the same port 0.6 s later, as
/// a crashed and restarted (or redeployed) server does. Every scheduled request must be in
/// the result, succeeded or failed with a class; the restart and the outage must be said.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_engine_restart_mid_run_is_reported_and_nothing_is_lost() {
    let _serial = crate::serial::one_at_a_time();
    let cfg = || SimConfig::fixed(20.0, 5.0);
    let first = sim(cfg().with_port(0)).await;
    let addr = first.addr();
    let url = first.base_url();
    let restart = tokio::spawn(async move {
        // About 0.8 s into the run: once a dozen requests have ended (arrivals 50 ms apart,
        // each ~115 ms long), counted from the run's first request rather than from now, as
        // the bench's own setup can take longer than that on two busy cores.
        while first.truth_len() < 12 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        first.shutdown().await;
        tokio::time::sleep(Duration::from_millis(600)).await;
        sim(cfg().with_port(addr.port())).await
    });
    let out = bench(
        &url,
        &[
            "--num-prompts",
            "60",
            "--request-rate",
            "20",
            "--burstiness",
            "inf",
            "--random-input-len",
            "16",
            "--random-output-len",
            "20",
            "--server-metrics-interval",
            "0.1",
        ],
    )
    .await;
    let second = restart.await.expect("restart task");
    let s = &out.summary;
    // Nothing lost: every one of the 60 is a record, a success or a classified failure.
    assert_eq!(out.records.iter().filter(|r| !r.warmup).count(), 60);
    assert_eq!(s.completed + s.failed, 60);
    assert!(s.failed >= 1, "the outage must fail some requests");
    assert!(s.completed >= 30, "{} completed", s.completed);
    for r in &out.records {
        if let Outcome::Failure { kind, .. } = &r.outcome {
            assert!(
                matches!(kind, FailureKind::Connect | FailureKind::Reset | FailureKind::Incomplete),
                "{kind:?}"
            );
        }
    }
    let e = s.engine.as_ref().expect("engine metrics");
    assert_eq!(e.restarts_s.len(), 1, "{e:?}");
    assert!(!e.unreachable_s.is_empty(), "{e:?}");
    // Times are from the run origin, which the bench takes after its own setup, so only the
    // outage's length is known here: 0.6 s down, seen by scrapes 0.1 s apart. The restart is
    // seen at the first good scrape after the outage, which ends it.
    let [from, to] = e.unreachable_s[0];
    assert!(from > 0.0 && to > from && to < s.duration_s, "{from}..{to}");
    assert!(to - from > 0.4 && to - from < 1.5, "{from}..{to}");
    assert_eq!(e.restarts_s[0], to, "{e:?}");
    assert!(s.warnings.iter().any(|w| w.contains("restarted")), "{:?}", s.warnings);
    assert!(s.warnings.iter().any(|w| w.contains("did not answer")), "{:?}", s.warnings);
    second.shutdown().await;
}
