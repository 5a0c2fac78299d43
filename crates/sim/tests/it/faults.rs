//! Every fault kind, observed from the client side, and recorded in the truth.

use crate::common;

use std::time::{Duration, Instant};

use common::*;
use servelab_sim::{start, Fault, SimConfig, SimHandle};

const STREAM: &str = r#"{"prompt":"hello","max_tokens":10,"ignore_eos":true,"stream":true,
    "stream_options":{"include_usage":true}}"#;

async fn sim() -> SimHandle {
    start(SimConfig::fixed(5.0, 2.0)).await.unwrap()
}

async fn with_fault(sim: &SimHandle, fault: &str, body: &str) -> Result<Seen, String> {
    send(sim.addr(), "POST", "/v1/completions", &[("x-servelab-fault", fault)], body).await
}

fn outcome(sim: &SimHandle) -> String {
    sim.truth().last().map(|t| t.outcome.clone()).unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_faults() {
    let sim = sim().await;
    let r = with_fault(&sim, "rate-limit", STREAM).await.unwrap();
    assert_eq!(r.status, 429);
    assert_eq!(r.headers["retry-after"], "1");
    assert_eq!(r.json()["error"]["code"], 429);
    assert_eq!(outcome(&sim), "rate-limit");
    let r = with_fault(&sim, "server-error", STREAM).await.unwrap();
    assert_eq!((r.status, r.json()["error"]["type"].as_str()), (500, Some("InternalServerError")));
    assert_eq!(outcome(&sim), "server-error");
    let r = with_fault(&sim, "unavailable", STREAM).await.unwrap();
    assert_eq!(r.status, 503);
    assert_eq!(outcome(&sim), "unavailable");
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resets() {
    let sim = sim().await;
    let err = with_fault(&sim, "reset-before", STREAM).await.unwrap_err();
    // ECONNRESET: a real TCP RST, not a clean close.
    assert!(err.contains("reset by peer"), "{err}");
    assert_eq!(outcome(&sim), "reset-before");

    // close-before: the request is read, then a clean close (FIN) without a response byte.
    let err = with_fault(&sim, "close-before", STREAM).await.unwrap_err();
    assert!(!err.contains("reset by peer"), "{err}");
    assert!(err.contains("closed before message completed"), "{err}");
    assert_eq!(outcome(&sim), "close-before");

    let r = with_fault(&sim, "reset-mid=4", STREAM).await.unwrap();
    assert_eq!(r.status, 200);
    let err = r.body_error.clone().expect("the body must fail");
    // ECONNRESET: a real TCP RST, not a clean close.
    assert!(err.contains("reset by peer"), "{err}");
    let tokens = r.events().iter().filter(|e| e.contains("\"text\"")).count();
    assert_eq!(tokens, 4, "{:?}", r.events());
    assert!(!r.text().contains("[DONE]"));
    let t = sim.truth();
    let t = t.last().unwrap();
    assert_eq!((t.outcome.as_str(), t.completion_tokens), ("reset-mid", 4));
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stall_pauses_then_continues() {
    let sim = sim().await;
    let t0 = Instant::now();
    let r = with_fault(&sim, "stall=0.3", STREAM).await.unwrap();
    assert!(t0.elapsed() >= Duration::from_millis(300));
    let gaps: Vec<Duration> = r.frames.windows(2).map(|w| w[1].0 - w[0].0).collect();
    assert!(gaps.iter().any(|g| *g >= Duration::from_millis(250)), "{gaps:?}");
    assert!(r.text().ends_with("data: [DONE]\n\n"));
    let t = sim.truth();
    let t = t.last().unwrap();
    assert_eq!((t.outcome.as_str(), t.completion_tokens), ("stall", 10));
    // The stall is part of the plan: intended times include it.
    let jump = t.chunks.windows(2).map(|w| w[1].intended_ns - w[0].intended_ns).max().unwrap();
    assert!(jump >= 300_000_000, "{jump}");
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_stream_error_no_done_no_usage() {
    let sim = sim().await;
    let r = with_fault(&sim, "malformed", STREAM).await.unwrap();
    let bad = r
        .events()
        .iter()
        .filter(|e| *e != "[DONE]" && serde_json::from_str::<serde_json::Value>(e).is_err())
        .count();
    assert_eq!(bad, 1, "{:?}", r.events());
    assert!(r.text().ends_with("data: [DONE]\n\n"));
    assert_eq!(outcome(&sim), "malformed");

    let r = with_fault(&sim, "stream-error", STREAM).await.unwrap();
    let ev = r.events();
    assert_eq!(ev.last().map(String::as_str), Some("[DONE]"));
    let err = parse(&ev[ev.len() - 2]);
    assert_eq!(err["error"]["code"], 500);
    assert_eq!(outcome(&sim), "stream-error");

    let r = with_fault(&sim, "no-done", STREAM).await.unwrap();
    assert!(!r.text().contains("[DONE]"));
    assert!(!r.text().contains("\"finish_reason\":\""), "cut short: {}", r.text());
    assert!(r.text().contains("\"usage\""));
    assert_eq!(outcome(&sim), "no-done");

    let r = with_fault(&sim, "no-usage", STREAM).await.unwrap();
    assert!(!r.text().contains("\"usage\""));
    assert!(r.text().ends_with("data: [DONE]\n\n"));
    assert_eq!(outcome(&sim), "no-usage");
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn split_utf8_arrives_in_two_frames() {
    let sim = sim().await;
    let r = with_fault(&sim, "split-utf8", STREAM).await.unwrap();
    let split = r.frames.windows(2).find(|w| std::str::from_utf8(&w[0].1).is_err());
    // The halves are separate HTTP chunks (written ~1 ms apart by construction; the client
    // may still read them back to back, so their arrival gap is not asserted).
    let w = split.expect("one frame ends inside a UTF-8 character");
    let mut joined = w[0].1.to_vec();
    joined.extend_from_slice(&w[1].1);
    assert!(String::from_utf8(joined).unwrap().contains('é'));
    assert!(r.text().ends_with("data: [DONE]\n\n"));
    assert_eq!(outcome(&sim), "split-utf8");
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seeded_fault_rates() {
    let cfg = SimConfig::fixed(1.0, 0.5).with_fault_rate(Fault::RateLimit, 0.5).with_seed(42);
    let sim = start(cfg).await.unwrap();
    let mut statuses = Vec::new();
    for _ in 0..40 {
        statuses.push(
            post(sim.addr(), "/v1/completions", r#"{"prompt":"x","max_tokens":1}"#).await.status,
        );
    }
    let limited = statuses.iter().filter(|s| **s == 429).count();
    assert!((8..=32).contains(&limited), "{limited} of 40");
    assert!(statuses.iter().all(|s| *s == 200 || *s == 429));
    sim.shutdown().await;
    // Same seed → same choices.
    let cfg = SimConfig::fixed(1.0, 0.5).with_fault_rate(Fault::RateLimit, 0.5).with_seed(42);
    let sim = start(cfg).await.unwrap();
    let mut again = Vec::new();
    for _ in 0..40 {
        again.push(
            post(sim.addr(), "/v1/completions", r#"{"prompt":"x","max_tokens":1}"#).await.status,
        );
    }
    assert_eq!(statuses, again);
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_aborts_open_streams_and_flushes_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("truth.jsonl");
    let sim = start(SimConfig::fixed(1.0, 50.0).with_truth_log(&log)).await.unwrap();
    let addr = sim.addr();
    let body = r#"{"prompt":"x","max_tokens":1000,"ignore_eos":true,"stream":true}"#;
    let client =
        tokio::spawn(async move { send(addr, "POST", "/v1/completions", &[], body).await });
    tokio::time::sleep(Duration::from_millis(200)).await;
    sim.shutdown().await;
    let seen = client.await.unwrap();
    assert!(seen.map(|s| s.body_error.is_some()).unwrap_or(true));
    let text = std::fs::read_to_string(&log).unwrap();
    let recs: Vec<servelab_sim::TruthRecord> =
        text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(recs.len(), 1);
    assert_eq!(recs[0].outcome, "aborted");
    assert!(!recs[0].chunks.is_empty());
}
