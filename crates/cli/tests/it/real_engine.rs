//! Cross-checks against a real engine: llama.cpp's `llama-server` (see
//! `scripts/test-real-engine.sh`, which starts one and sets `SERVELAB_REAL_ENGINE_URL`).
//!
//! Without that variable every engine test returns at once, printing
//! "skipped: set SERVELAB_REAL_ENGINE_URL", so the default suite never needs the engine. One
//! test always runs: a hand-written llama.cpp-shaped stream served on 127.0.0.1:0, proving
//! that the engine's `timings` reach the records and the summary.
//!
//! What is checked against the engine, and why the tolerances are what they are, is written
//! up with a real run's figures in `docs/real-engine.md`.

// Printing the measured figures next to the engine's is the point of these tests.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use servelab_bench::BenchOutcome;
use servelab_records::{FailureKind, Outcome, RequestRecord, ServerTimings};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::common;

const ENV: &str = "SERVELAB_REAL_ENGINE_URL";
const TOKENIZER: &str =
    concat!(env!("CARGO_MANIFEST_DIR"), "/../../testdata/smollm2-tokenizer.json");
/// Slots the script starts llama-server with (`-np`); override with SERVELAB_REAL_ENGINE_SLOTS.
const DEFAULT_SLOTS: usize = 4;

/// The engine's base URL, or `None` (after saying so) when the opt-in variable is unset or
/// points anywhere but this machine's loopback.
fn engine_url() -> Option<String> {
    let Ok(url) = std::env::var(ENV) else {
        println!("skipped: set {ENV}");
        return None;
    };
    let url = url.trim_end_matches('/').to_string();
    if !url.starts_with("http://127.0.0.1:") {
        println!("skipped: {ENV} must be http://127.0.0.1:PORT, got {url}");
        return None;
    }
    Some(url)
}

fn slots() -> usize {
    std::env::var("SERVELAB_REAL_ENGINE_SLOTS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(DEFAULT_SLOTS)
}

/// A run exactly as a user would start it. llama-server closes the connection after every
/// streamed response while advertising keep-alive; servelab notices (see
/// `keep_alive_reuse_loses_no_request`), so no workaround is passed.
async fn bench(url: &str, extra: &[&str]) -> BenchOutcome {
    let model = ["--model", "smollm2", "--tokenizer", TOKENIZER];
    let s = common::bench_settings(url, &[&model[..], extra].concat());
    common::run_bench(&s, Duration::from_secs(300)).await
}

fn measured(out: &BenchOutcome) -> Vec<&RequestRecord> {
    out.records.iter().filter(|r| !r.warmup).collect()
}

fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

/// Client TTFT and TPOT of one record, ms (TPOT as servelab defines it).
fn ttft_tpot(r: &RequestRecord) -> (f64, Option<f64>) {
    let ttft = ms(r.first_token_ns().expect("first token").saturating_sub(r.intended_ns));
    let e2e = ms(r.end_ns.expect("end").saturating_sub(r.intended_ns));
    let n = r.output_tokens().unwrap_or(0);
    (ttft, (n >= 2).then(|| (e2e - ttft) / (n - 1) as f64))
}

/// One blocking GET on loopback, bounded in time; the body.
fn get(url: &str, path: &str) -> String {
    let authority = url.trim_start_matches("http://");
    let mut s = TcpStream::connect(authority).expect("engine reachable");
    s.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout set");
    let req = format!("GET {path} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).expect("request written");
    let mut out = String::new();
    s.read_to_string(&mut out).expect("response read");
    out.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default()
}

/// A Prometheus counter's value from a `/metrics` text.
fn counter(metrics: &str, name: &str) -> f64 {
    metrics
        .lines()
        .filter(|l| !l.starts_with('#'))
        .find_map(|l| l.strip_prefix(name)?.trim().parse().ok())
        .unwrap_or_else(|| panic!("{name} not in /metrics (start llama-server with --metrics)"))
}

fn tokens_predicted(url: &str) -> f64 {
    counter(&get(url, "/metrics"), "llamacpp:tokens_predicted_total")
}

fn timings(r: &RequestRecord) -> ServerTimings {
    r.server.unwrap_or_else(|| panic!("request {} carried no `timings`", r.index))
}

/// Relative TPOT tolerance. Client TPOT = (E2E − TTFT)/(n−1) spans the same n−1 decode steps
/// as the engine's `predicted_ms`; the two differ only by the delivery delay of the last token
/// minus that of the first (loopback: tens of µs) plus scheduling noise of this 2-core machine
/// (the engine's 2 threads and the client share it: a few ms, spread over n−1 ≥ 63 gaps).
const TPOT_REL_TOL: f64 = 0.05;
/// Absolute floor of the per-request TPOT tolerance, ms (one descheduling spread over n−1).
const TPOT_ABS_TOL_MS: f64 = 0.5;

/// The token, prompt and timing cross-checks of one streaming run; returns the output total.
/// Each run uses its own seed so no run's prompts sit in the engine's prompt cache from an
/// earlier one (only the chat template's fixed prefix is shared, by design).
async fn cross_check(url: &str, backend: &str, seed: &str) -> u64 {
    let before = tokens_predicted(url);
    let c = slots().to_string();
    let out = bench(
        url,
        &[
            "--backend",
            backend,
            "--seed",
            seed,
            "--num-prompts",
            "16",
            "--random-input-len",
            "128",
            "--random-output-len",
            "64",
            "--ignore-eos",
            "--max-concurrency",
            &c,
        ],
    )
    .await;
    let after = tokens_predicted(url);
    let recs = measured(&out);
    let s = &out.summary;
    assert_eq!(s.failed, 0, "{backend}: failures {:?}", s.failures);
    assert_eq!(recs.len(), 16);

    // Output tokens: servelab's total = engine usage = engine timings = /metrics increase.
    let usage_total: u64 = recs.iter().map(|r| r.usage.expect("usage").completion_tokens).sum();
    let timings_total: u64 = recs.iter().map(|r| timings(r).generated_tokens.unwrap_or(0)).sum();
    let metrics_delta = after - before;
    println!(
        "{backend}: output tokens servelab {} usage {usage_total} timings.predicted_n \
         {timings_total} /metrics tokens_predicted_total +{metrics_delta}",
        s.total_output_tokens
    );
    assert_eq!(s.total_output_tokens, usage_total);
    assert_eq!(timings_total, usage_total);
    // The run's own scrapes start after the preflight's probes (a few tokens each, which the
    // outside before/after below includes) and the warm-ups: they count the measured requests.
    let engine = s.engine.as_ref().and_then(|e| e.generation_tokens);
    assert_eq!(engine, Some(usage_total as f64), "{backend}: the run's /metrics increase");
    assert!(metrics_delta >= usage_total as f64, "{backend}: +{metrics_delta} < {usage_total}");
    let short = recs.iter().filter(|r| r.usage.is_some_and(|u| u.completion_tokens != 64));
    println!("{backend}: requests not at 64 output tokens: {}", short.count());

    // Prompt tokens: the engine computes prompt_n of usage.prompt_tokens, the rest (cache_n)
    // comes from its prompt cache; servelab's own count is of the text it sent.
    let mut cached = 0;
    for r in &recs {
        let usage = r.usage.expect("usage").prompt_tokens;
        let computed = timings(r).prompt_tokens.expect("prompt_n");
        assert!(computed <= usage, "{backend} #{}: prompt_n {computed} > usage {usage}", r.index);
        cached += usage - computed;
    }
    let client: u64 = recs.iter().filter_map(|r| r.prompt_tokens).sum();
    let usage: u64 = recs.iter().map(|r| r.usage.expect("usage").prompt_tokens).sum();
    println!(
        "{backend}: prompt tokens servelab {client} usage {usage} (computed {} + from cache \
         {cached})",
        usage - cached
    );

    // TTFT can never be below the engine's own prompt time; TPOT agrees with the engine's.
    let mut worst_rel: f64 = 0.0;
    let (mut client_sum, mut server_sum) = (0.0, 0.0);
    for r in &recs {
        let t = timings(r);
        let (ttft, tpot) = ttft_tpot(r);
        let prompt_ms = t.prompt_ms.expect("prompt_ms");
        assert!(ttft >= prompt_ms, "{backend} #{}: TTFT {ttft} < prompt_ms {prompt_ms}", r.index);
        let n = t.generated_tokens.expect("predicted_n");
        let server = t.generation_ms.expect("predicted_ms") / (n - 1) as f64;
        let client = tpot.expect("tpot");
        let diff = (client - server).abs();
        assert!(
            diff <= TPOT_ABS_TOL_MS.max(TPOT_REL_TOL * server),
            "{backend} #{}: TPOT client {client:.3} ms vs engine {server:.3} ms",
            r.index
        );
        worst_rel = worst_rel.max(diff / server);
        client_sum += client;
        server_sum += server;
    }
    // The engine's /metrics as the bench itself scraped it (before, every second, after):
    // the same totals, counted from the engine's side.
    let e = s.engine.as_ref().expect("bench scraped llamacpp:* from /metrics");
    println!(
        "{backend}: bench's /metrics scrapes ({}): generated {:?}, prompt {:?} (cached {:?}), \
         peak running {:?} of {} slots, peak deferred {:?}",
        e.scrapes,
        e.generation_tokens,
        e.prompt_tokens,
        e.cached_prompt_tokens,
        e.peak_requests_running,
        slots(),
        e.peak_requests_waiting
    );
    assert_eq!(e.engine, "llamacpp");
    assert_eq!(e.failed_scrapes, 0);
    assert!(e.restarts_s.is_empty());
    assert_eq!(e.generation_tokens, Some(usage_total as f64));
    assert_eq!(e.prompt_tokens, Some(usage as f64));
    assert_eq!(e.cached_prompt_tokens.unwrap_or(0.0), cached as f64);
    assert!(e.peak_requests_running.is_some_and(|p| p <= slots() as f64), "{e:?}");
    assert!(!s.warnings.iter().any(|w| w.contains("engine")), "{:?}", s.warnings);

    let split = s.server.as_ref().expect("server split in summary");
    println!(
        "{backend}: mean TTFT {:.2} ms = engine prompt {:.2} ms + outside {:.2} ms; mean TPOT \
         client {:.3} ms engine {:.3} ms (worst request {:.2}% apart)",
        s.ttft_ms.mean,
        split.server_prompt_ms.mean,
        split.ttft_outside_prompt_ms.mean,
        client_sum / recs.len() as f64,
        server_sum / recs.len() as f64,
        worst_rel * 100.0
    );
    s.total_output_tokens
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn completions_stream_agrees_with_the_engine() {
    let Some(url) = engine_url() else { return };
    cross_check(&url, "openai", "101").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_stream_agrees_with_the_engine() {
    let Some(url) = engine_url() else { return };
    cross_check(&url, "openai-chat", "102").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_beyond_the_context_is_a_classified_failure() {
    let Some(url) = engine_url() else { return };
    // The script's -c 8192 over 4 slots gives each slot 2048 tokens of context.
    let out = bench(
        &url,
        &["--num-prompts", "1", "--random-input-len", "4000", "--random-output-len", "8"],
    )
    .await;
    let recs = measured(&out);
    assert_eq!(recs.len(), 1);
    match &recs[0].outcome {
        Outcome::Failure { kind, message } => {
            println!("context overflow: {kind} status {:?}: {message}", recs[0].status);
            assert_eq!(*kind, FailureKind::HttpStatus, "{message}");
            assert!(message.contains("context"), "the message names the cause: {message}");
        }
        Outcome::Success => panic!("a 4000-token prompt fit a 2048-token slot"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn more_concurrency_than_slots_queues_without_loss() {
    let Some(url) = engine_url() else { return };
    let run = |c: usize| {
        let url = url.clone();
        async move {
            let seed = (200 + c).to_string();
            let c = c.to_string();
            let args = [
                "--seed",
                &seed,
                "--num-prompts",
                "16",
                "--random-input-len",
                "64",
                "--random-output-len",
                "32",
                "--ignore-eos",
                "--max-concurrency",
                &c,
            ];
            bench(&url, &args).await
        }
    };
    let n = slots();
    let at_slots = run(n).await;
    let over = run(2 * n).await;
    for out in [&at_slots, &over] {
        assert_eq!(out.summary.completed, 16, "failures {:?}", out.summary.failures);
    }
    let outside =
        |o: &BenchOutcome| o.summary.server.as_ref().map(|s| s.ttft_outside_prompt_ms.mean);
    println!(
        "queueing: -np {n}: TTFT mean {:.1} ms p99 {:.1} ms (outside engine prompt {:.1} ms) at \
         concurrency {n}; {:.1} ms p99 {:.1} ms ({:.1} ms) at {}",
        at_slots.summary.ttft_ms.mean,
        at_slots.summary.ttft_ms.percentile(99.0).unwrap_or(0.0),
        outside(&at_slots).unwrap_or(f64::NAN),
        over.summary.ttft_ms.mean,
        over.summary.ttft_ms.percentile(99.0).unwrap_or(0.0),
        outside(&over).unwrap_or(f64::NAN),
        2 * n
    );
    // Half the requests wait a whole request (32 tokens) for a slot: TTFT grows far beyond
    // noise, and the growth is outside the engine's prompt clock (queue, not compute).
    assert!(over.summary.ttft_ms.mean > 1.5 * at_slots.summary.ttft_ms.mean);
    assert!(outside(&over).unwrap_or(0.0) > 1.5 * outside(&at_slots).unwrap_or(f64::MAX));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keep_alive_reuse_loses_no_request() {
    let Some(url) = engine_url() else { return };
    let c = slots().to_string();
    let args = [
        "--seed",
        "301",
        "--num-prompts",
        "16",
        "--random-input-len",
        "64",
        "--random-output-len",
        "32",
        "--ignore-eos",
        "--max-concurrency",
        &c,
    ];
    let out = bench(&url, &args).await;
    let s = &out.summary;
    println!("keep-alive: {} completed, {} failed {:?}", s.completed, s.failed, s.failures);
    assert_eq!(s.failed, 0, "requests on reused connections were lost: {:?}", s.failures);
}

/// The engine restarts mid-run: stopped (SIGTERM) 3 s into a 12 s open-loop run and started
/// again on the same port, as a redeploy or a supervisor restarting a crashed engine does.
/// Every scheduled request must be in the result, succeeded or failed with a class, and the
/// restart and the outage must be said. Needs the control script too (the test script sets
/// SERVELAB_REAL_ENGINE_CTL and SERVELAB_REAL_ENGINE_START_ARGS).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_engine_restart_mid_run_is_reported_and_nothing_is_lost() {
    let Some(url) = engine_url() else { return };
    let Ok(ctl) = std::env::var("SERVELAB_REAL_ENGINE_CTL") else {
        println!("skipped: set SERVELAB_REAL_ENGINE_CTL");
        return;
    };
    let start_args = std::env::var("SERVELAB_REAL_ENGINE_START_ARGS").unwrap_or_default();
    let authority = url.trim_start_matches("http://").to_string();
    let restart = tokio::task::spawn_blocking(move || {
        use std::process::{Command as Process, Stdio};
        std::thread::sleep(Duration::from_secs(3));
        let stopped = Process::new(&ctl).arg("stop").status().expect("run the control script");
        assert!(stopped.success(), "{ctl} stop: {stopped}");
        let down = std::time::Instant::now();
        while TcpStream::connect(&authority).is_ok() {
            assert!(down.elapsed() < Duration::from_secs(20), "engine still up 20 s after stop");
            std::thread::sleep(Duration::from_millis(20));
        }
        let started = Process::new(&ctl)
            .arg("start")
            .args(start_args.split_whitespace())
            .stdout(Stdio::null())
            .status()
            .expect("run the control script");
        assert!(started.success(), "{ctl} start: {started}");
        down.elapsed()
    });
    let args = [
        "--seed",
        "401",
        "--num-prompts",
        "48",
        "--request-rate",
        "4",
        "--burstiness",
        "inf",
        "--random-input-len",
        "32",
        "--random-output-len",
        "16",
        "--ignore-eos",
        "--server-metrics-interval",
        "0.25",
        // llama-server on SIGTERM stops generating but keeps its open requests, streaming or
        // not yet answered, silent until it exits (tens of seconds later): the stall timeout
        // ends the streams, the request timeout the ones still waiting for a first token.
        "--stall-timeout",
        "5",
        "--request-timeout",
        "20",
    ];
    let out = bench(&url, &args).await;
    let outage = restart.await.expect("restart task");
    let s = &out.summary;
    let recs = measured(&out);
    println!(
        "restart: engine down {:.2} s; {} completed, {} failed {:?}",
        outage.as_secs_f64(),
        s.completed,
        s.failed,
        s.failures.iter().map(|f| (f.kind, f.count)).collect::<Vec<_>>()
    );
    assert_eq!(recs.len(), 48, "every scheduled request is a record");
    assert_eq!(s.completed + s.failed, 48);
    assert!(s.failed >= 1, "requests sent while the engine was down must fail");
    assert!(s.completed >= 24, "{} completed", s.completed);
    for r in &recs {
        if let Outcome::Failure { kind, message } = &r.outcome {
            // Refused while down, cut or silent while in flight, or 503 while the new one
            // loads.
            let expected = matches!(
                kind,
                FailureKind::Connect
                    | FailureKind::Reset
                    | FailureKind::Incomplete
                    | FailureKind::Timeout
            ) || (*kind == FailureKind::HttpStatus && r.status == Some(503));
            assert!(expected, "#{}: {kind} {message}", r.index);
        }
    }
    let e = s.engine.as_ref().expect("engine metrics");
    println!(
        "restart: /metrics unreachable {:?}, restart seen at {:?} s; warnings: {:?}",
        e.unreachable_s, e.restarts_s, s.warnings
    );
    // llama-server exports no process start instant: a restart shows as a counter that fell,
    // or, when the new process had already passed the old one's totals by the next good
    // scrape, as a gap across which nothing is summed. Never as an undercount.
    assert_eq!(e.restarts_s.len() + e.unknown_gaps_s.len(), 1, "{e:?}");
    assert!(!e.unreachable_s.is_empty(), "{e:?}");
    assert!(
        s.warnings.iter().any(|w| w.contains("restarted") || w.contains("answered again")),
        "{:?}",
        s.warnings
    );
    assert!(s.warnings.iter().any(|w| w.contains("did not answer")), "{:?}", s.warnings);
    let usage: u64 = recs.iter().filter_map(|r| r.usage.map(|u| u.completion_tokens)).sum();
    if let Some(g) = e.generation_tokens {
        assert!(g >= usage as f64, "the engine's {g} generated tokens under the requests' {usage}");
    }
}

/// A llama-server-shaped completions stream: three text events, then the final event with
/// `finish_reason`, empty text, and the request's `usage` and `timings` on it, `[DONE]`.
fn llama_completions_stream() -> String {
    let head = r#""created":1763730000,"model":"smollm2","system_fingerprint":"b1-x","object":"text_completion","id":"chatcmpl-x""#;
    let text = |t: &str| {
        format!(
            r#"{{"choices":[{{"text":"{t}","index":0,"logprobs":null,"finish_reason":null}}],{head}}}"#
        )
    };
    let events = [
        text("Hello"),
        text(" big"),
        text(" world"),
        format!(
            r#"{{"choices":[{{"text":"","index":0,"logprobs":null,"finish_reason":"length"}}],{head},"usage":{{"completion_tokens":3,"prompt_tokens":16,"total_tokens":19,"prompt_tokens_details":{{"cached_tokens":0}}}},{LLAMA_TIMINGS}}}"#
        ),
        "[DONE]".to_string(),
    ];
    events.iter().map(|e| format!("data: {e}\n\n")).collect()
}

const LLAMA_TIMINGS: &str = r#""timings":{"cache_n":2,"prompt_n":18,"prompt_ms":0.25,"prompt_per_token_ms":0.01,"prompt_per_second":72000.0,"predicted_n":3,"predicted_ms":2.5,"predicted_per_token_ms":0.83,"predicted_per_second":1200.0}"#;

/// A llama-server-shaped chat stream: role event, two content events, the final event with
/// `finish_reason` and `timings`, the usage event (also with `timings`), `[DONE]`.
fn llama_stream() -> String {
    let timings = LLAMA_TIMINGS;
    let head = r#""created":1763730000,"id":"chatcmpl-x","model":"smollm2","system_fingerprint":"b1-x","object":"chat.completion.chunk""#;
    let events = [
        format!(
            r#"{{"choices":[{{"finish_reason":null,"index":0,"delta":{{"role":"assistant","content":null}}}}],{head}}}"#
        ),
        format!(
            r#"{{"choices":[{{"finish_reason":null,"index":0,"delta":{{"content":"Hello"}}}}],{head}}}"#
        ),
        format!(
            r#"{{"choices":[{{"finish_reason":null,"index":0,"delta":{{"content":" big world"}}}}],{head}}}"#
        ),
        format!(
            r#"{{"choices":[{{"finish_reason":"length","index":0,"delta":{{}}}}],{head},{timings}}}"#
        ),
        format!(
            r#"{{"choices":[],{head},"usage":{{"completion_tokens":3,"prompt_tokens":20,"total_tokens":23}},{timings}}}"#
        ),
        "[DONE]".to_string(),
    ];
    events.iter().map(|e| format!("data: {e}\n\n")).collect()
}

/// Serves `llama_completions_stream` to POST /v1/completions, `llama_stream` to other POSTs
/// and 200 to every GET, keep-alive, on 127.0.0.1:0.
async fn fixture_server() -> (String, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    let task = tokio::spawn(async move {
        while let Ok((conn, _)) = listener.accept().await {
            tokio::spawn(serve(conn));
        }
    });
    (url, task)
}

async fn serve(mut conn: tokio::net::TcpStream) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        // Read one request: headers, then Content-Length bytes of body.
        let head_end = loop {
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            match conn.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        };
        let head = String::from_utf8_lossy(&buf[..head_end]).to_lowercase();
        let len: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0);
        while buf.len() < head_end + len {
            match conn.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        buf.drain(..head_end + len);
        let (ctype, body) = if head.starts_with("post /v1/completions") {
            ("text/event-stream", llama_completions_stream())
        } else if head.starts_with("post") {
            ("text/event-stream", llama_stream())
        } else {
            ("application/json", r#"{"status":"ok"}"#.to_string())
        };
        let resp = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        if conn.write_all(resp.as_bytes()).await.is_err() {
            return;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn llama_shaped_stream_fills_server_timings() {
    let (url, server) = fixture_server().await;
    let out = bench(
        &url,
        &[
            "--backend",
            "openai-chat",
            "--num-prompts",
            "3",
            "--random-input-len",
            "16",
            "--random-output-len",
            "3",
        ],
    )
    .await;
    server.abort();
    let recs = measured(&out);
    assert_eq!(recs.len(), 3);
    for r in &recs {
        assert!(r.is_success(), "{:?}", r.outcome);
        assert_eq!(
            r.server,
            Some(ServerTimings {
                prompt_tokens: Some(18),
                prompt_ms: Some(0.25),
                generated_tokens: Some(3),
                generation_ms: Some(2.5),
            })
        );
    }
    let split = out.summary.server.as_ref().expect("split");
    assert_eq!(split.requests, 3);
    assert_eq!(split.server_prompt_ms.mean, 0.25);
    assert_eq!(split.server_tpot_ms.mean, 1.25);
    assert_eq!(split.ttft_outside_prompt_ms.count, 3);
    assert_eq!(out.summary.total_output_tokens, 9);
}

/// llama.cpp's completions put the request's usage on the final text event, after text
/// events without usage: that is a total, not the last event's share of tokens. Counting it
/// as per-chunk usage doubled the token count and put n near-zero gaps into per-token ITL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn usage_on_a_final_completions_event_is_a_total_not_a_chunk_count() {
    let (url, server) = fixture_server().await;
    let out = bench(
        &url,
        &["--num-prompts", "3", "--random-input-len", "16", "--random-output-len", "3"],
    )
    .await;
    server.abort();
    let recs = measured(&out);
    assert_eq!(recs.len(), 3);
    for r in &recs {
        assert!(r.is_success(), "{:?}", r.outcome);
        let texts: Vec<(&str, Option<u32>)> =
            r.chunks.iter().map(|c| (c.text.as_str(), c.tokens)).collect();
        // Counted by retokenizing after the run: one token each, nothing on the final event.
        assert_eq!(texts, vec![("Hello", Some(1)), (" big", Some(1)), (" world", Some(1))]);
        assert_eq!(r.server.and_then(|t| t.generated_tokens), Some(3));
    }
    let s = &out.summary;
    assert_eq!(s.total_output_tokens, 9);
    assert_eq!(s.retokenized_output_tokens, Some(9));
    // Two gaps per request, none of them the near-zero gap to the usage event.
    assert_eq!(s.itl_ms.count, 6);
    assert!(!s.warnings.iter().any(|w| w.contains("disagree")), "{:?}", s.warnings);
}
