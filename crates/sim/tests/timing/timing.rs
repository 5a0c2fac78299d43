//! Timing truth: send precision at 1 and 200 concurrent streams, multi-token chunks, the FIFO
//! queue past --max-num-seqs, and (engine-model mode) a dropped stream freeing its slot. (The
//! per-token prefill model and the prefix cache are the `it` binary's `models`.)
//!
//! Tolerances: the sim's timer thread wakes within ~0.1 ms of a deadline on an idle machine,
//! so "actual − intended" is normally tens of µs. These tests run on a shared, noisy 2-core
//! box (other crates' builds and tests run beside them) next to the client that reads the
//! streams, in the unoptimized test profile. So we assert:
//! * never early (actual ≥ intended): the timer must not fire before a deadline;
//! * intended times exactly on the absolute schedule (deterministic, no tolerance);
//! * median < 1 ms and p99 < 10 ms, each on top of the machine's own scheduling noise during
//!   the same run, measured by a canary thread that sleeps 1 ms at a time (its median / p99
//!   oversleep). On a quiet box the canary adds ~0.1 ms, so this is the brief's "median < 1 ms,
//!   p99 < 10 ms"; when other jobs starve every thread for tens of ms (we saw 100 ms stalls with
//!   the box 2× overcommitted) the canary sees it too and the test does not blame the sim.
//!   The 1 ms median is what the precise timer buys: tokio's 1 ms wheel alone would put the
//!   median around 0.5–1 ms late on top of the noise; a timer that misses wakeups or a
//!   per-event cost regression shows up as tens to hundreds of ms beyond the noise.
//! * Each precision test gets a second attempt (`ATTEMPTS`): interference is transient.
//!
//! The 200-stream case runs at ITL 40 ms (5k events/s) and spreads the stream starts over one
//! ITL, as arrivals spread in a real run, so that the test measures the timer, not CPU
//! saturation of a debug build: with all 200 starts at once every token of every stream falls
//! due at the same instant, and the median then measures how long the unoptimized build takes
//! to write 100 chunks (we saw 1.1–2.1 ms), not how late the timer woke.
//! scripts/sim-precision.sh measures that worst case (all at once) in the release build at up
//! to 5,000 streams.

// Tests and benchmarks print the figures they measure.
#![allow(clippy::print_stderr, clippy::print_stdout)]

use crate::common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use servelab_sim::{start, SimConfig, TruthRecord};

/// Timing tests run one at a time: in parallel they would mostly measure each other.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn lateness_us(truth: &[TruthRecord]) -> Vec<i64> {
    let mut v: Vec<i64> = truth
        .iter()
        .flat_map(|t| t.chunks.iter())
        .map(|c| (c.actual_ns as i64 - c.intended_ns as i64) / 1000)
        .collect();
    v.sort_unstable();
    v
}

fn pct(v: &[i64], p: f64) -> i64 {
    v[((v.len() - 1) as f64 * p).round() as usize]
}

/// A canary thread that sleeps 1 ms at a time and records how late it wakes: the machine's own
/// scheduling noise during a run, which no timer can beat. Stop it by dropping the flag.
fn canary() -> (Arc<AtomicBool>, std::thread::JoinHandle<Vec<i64>>) {
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    let h = std::thread::spawn(move || {
        let mut late = Vec::new();
        while !s.load(Ordering::Relaxed) {
            let due = Instant::now() + Duration::from_millis(1);
            std::thread::sleep(Duration::from_millis(1));
            late.push((Instant::now() - due).as_micros() as i64);
        }
        late.sort_unstable();
        late
    });
    (stop, h)
}

/// Runs `n` streams, their starts spread evenly over `ramp`; returns the truth and the
/// canary's sorted lateness (µs) over the run.
async fn run_streams(
    n: usize,
    tokens: u64,
    ttft_ms: f64,
    itl_ms: f64,
    ramp: Duration,
) -> (Vec<TruthRecord>, Vec<i64>) {
    let (stop, canary) = canary();
    let sim = start(SimConfig::fixed(ttft_ms, itl_ms)).await.unwrap();
    let addr = sim.addr();
    let body =
        format!(r#"{{"prompt":"hello","max_tokens":{tokens},"ignore_eos":true,"stream":true}}"#);
    let body = Arc::new(body);
    let mut tasks = Vec::new();
    let t0 = tokio::time::Instant::now();
    for i in 0..n {
        let body = body.clone();
        let start_at = t0 + ramp.mul_f64(i as f64 / n as f64);
        tasks.push(tokio::spawn(async move {
            tokio::time::sleep_until(start_at).await;
            let id = format!("servelab-{i}");
            send(addr, "POST", "/v1/completions", &[("x-request-id", &id)], &body).await
        }));
    }
    for t in tasks {
        let seen = t.await.unwrap().unwrap();
        assert_eq!(seen.status, 200);
        assert!(seen.text().ends_with("data: [DONE]\n\n"));
    }
    let truth = sim.truth();
    sim.shutdown().await;
    stop.store(true, Ordering::Relaxed);
    let noise = canary.join().unwrap();
    assert_eq!(truth.len(), n);
    assert!(truth.iter().all(|t| t.chunks.len() as u64 == tokens && t.outcome == "ok"));
    (truth, noise)
}

/// Median and p99 lateness of `truth` within the tolerances (see the module docs), after
/// checking the properties that must hold on every run.
fn within_tolerance(label: &str, truth: &[TruthRecord], noise: &[i64]) -> bool {
    let late = lateness_us(truth);
    let (median, p99, max) = (pct(&late, 0.5), pct(&late, 0.99), late[late.len() - 1]);
    let (n_med, n_p99) = (pct(noise, 0.5), pct(noise, 0.99));
    eprintln!(
        "{label}: median {median} µs, p99 {p99} µs, max {max} µs over {} chunks; \
         machine noise (canary) median {n_med} µs, p99 {n_p99} µs",
        late.len()
    );
    assert!(late[0] >= 0, "{label}: a chunk was sent early ({} µs)", late[0]);
    median < 1_000 + n_med && p99 < 10_000 + n_p99
}

/// Precision is measured up to twice: noise from other processes on a shared box is
/// transient and independent between runs, while a real regression fails both runs.
const ATTEMPTS: usize = 2;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn precision_one_stream() {
    let _serial = crate::serial::one_at_a_time();
    let _serial = SERIAL.lock().await;
    for attempt in 1..=ATTEMPTS {
        let (truth, noise) = run_streams(1, 100, 20.0, 5.0, Duration::ZERO).await;
        // Intended times are absolute: token i at TTFT + i × ITL after the slot.
        let t = &truth[0];
        for (i, c) in t.chunks.iter().enumerate() {
            assert_eq!(c.intended_ns - t.queue_ns, 20_000_000 + i as u64 * 5_000_000);
        }
        if within_tolerance(&format!("1 stream, attempt {attempt}"), &truth, &noise) {
            return;
        }
    }
    panic!("1 stream: too late beyond the machine noise on every attempt");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn precision_200_streams() {
    let _serial = crate::serial::one_at_a_time();
    let _serial = SERIAL.lock().await;
    for attempt in 1..=ATTEMPTS {
        let (truth, noise) = run_streams(200, 40, 50.0, 40.0, Duration::from_millis(40)).await;
        let mut ids: Vec<String> = truth.iter().filter_map(|t| t.request_id.clone()).collect();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), 200);
        if within_tolerance(&format!("200 streams, attempt {attempt}"), &truth, &noise) {
            return;
        }
    }
    panic!("200 streams: too late beyond the machine noise on every attempt");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn k_tokens_per_chunk_every_k_itl() {
    let _serial = crate::serial::one_at_a_time();
    let _serial = SERIAL.lock().await;
    let sim = start(SimConfig::fixed(10.0, 5.0).with_tokens_per_chunk(4, 4)).await.unwrap();
    let body = r#"{"prompt":"x","max_tokens":20,"ignore_eos":true,"stream":true,
        "stream_options":{"include_usage":true}}"#;
    let seen = post(sim.addr(), "/v1/completions", body).await;
    let tok = servelab_workload::Tokenizer::from_spec("cl100k_base").unwrap();
    // The prefill token comes alone, then decode steps of 4: 1 + 4 × 4 + 3 = 20.
    let sizes = [1u32, 4, 4, 4, 4, 3];
    let events = seen.events();
    assert_eq!(events.len(), sizes.len() + 2);
    for (e, &k) in events.iter().zip(&sizes) {
        assert_eq!(tok.count(parse(e)["choices"][0]["text"].as_str().unwrap()), k as usize);
    }
    let t = &sim.truth()[0];
    assert_eq!(t.chunks.iter().map(|c| c.tokens).collect::<Vec<_>>(), sizes);
    // An event is due when its last token is: TTFT + (index of that token) × ITL.
    let mut cumulative = 0u64;
    for (c, &k) in t.chunks.iter().zip(&sizes) {
        cumulative += u64::from(k);
        assert_eq!(c.intended_ns - t.queue_ns, 10_000_000 + (cumulative - 1) * 5_000_000);
    }
    // Client side: the frames carrying tokens arrive about 4 × ITL = 20 ms apart.
    let token_frames: Vec<_> =
        seen.frames.iter().filter(|(_, b)| b.starts_with(b"data: {")).collect();
    let mut gaps: Vec<Duration> = token_frames.windows(2).map(|w| w[1].0 - w[0].0).collect();
    gaps.sort();
    let median = gaps[gaps.len() / 2];
    assert!(median > Duration::from_millis(15) && median < Duration::from_millis(25), "{gaps:?}");
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_past_max_num_seqs() {
    let _serial = crate::serial::one_at_a_time();
    let _serial = SERIAL.lock().await;
    // Each request runs 50 + 9 × 10 = 140 ms once it has a slot.
    let sim = start(SimConfig::fixed(50.0, 10.0).with_max_num_seqs(2)).await.unwrap();
    let addr = sim.addr();
    let body = r#"{"prompt":"x","max_tokens":10,"ignore_eos":true,"stream":true}"#;
    let mut tasks = Vec::new();
    for i in 0..4 {
        tasks.push(tokio::spawn(async move {
            let id = format!("servelab-{i}");
            send(addr, "POST", "/v1/completions", &[("x-request-id", &id)], body).await
        }));
        // Space arrivals so the FIFO order is the request order: 5 ms was once too little
        // for a debug build's handler to take its slot before the next request's did.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // 80 ms after the first arrival, 60 ms before the first slot frees.
    tokio::time::sleep(Duration::from_millis(20)).await;
    let m = send(addr, "GET", "/metrics", &[], "").await.unwrap().text();
    assert!(
        m.contains("vllm:num_requests_running{model_name=\"servelab-sim\",engine=\"0\"} 2.0"),
        "{m}"
    );
    assert!(
        m.contains("vllm:num_requests_waiting{model_name=\"servelab-sim\",engine=\"0\"} 2.0"),
        "{m}"
    );
    for t in tasks {
        assert_eq!(t.await.unwrap().unwrap().status, 200);
    }
    let mut truth = sim.truth();
    truth.sort_by_key(|t| t.seq);
    let q: Vec<f64> = truth.iter().map(|t| t.queue_ns as f64 / 1e6).collect();
    // The first two start at once; the last two wait for the slots the first two free at
    // 140 and 160 ms, having arrived at 40 and 60 ms: 100 ms each. 30 ms slack for a noisy
    // CI box.
    assert!(q[0] < 5.0 && q[1] < 5.0, "{q:?}");
    assert!((q[2] - 100.0).abs() < 30.0 && (q[3] - 100.0).abs() < 30.0, "{q:?}");
    // TTFT measured from arrival grows by the wait: 100 + 50 ms.
    assert!(truth[3].chunks[0].actual_ns > 130_000_000);
    sim.shutdown().await;
}

/// In engine-model mode a client that goes away mid-stream frees its sequence slot, as on
/// vLLM: with one slot, the request queued behind a 5,000-token stream starts once that
/// stream's connection is dropped (not ~35 s later, when its tokens would have run out),
/// and `/metrics` shows the slot taken and then free.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn engine_mode_a_dropped_stream_frees_its_slot() {
    let _serial = crate::serial::one_at_a_time();
    use http_body_util::BodyExt;
    let _serial = SERIAL.lock().await;
    let cfg = servelab_engine::EngineFile::parse(
        "model: qwen3-8b\ngpu: h100\nscheduler: {max_num_seqs: 1}\n",
    )
    .unwrap()
    .build(None)
    .unwrap();
    let sim = start(SimConfig::default().with_engine(cfg)).await.unwrap();
    let addr = sim.addr();
    let gauges = || async move {
        let m = send(addr, "GET", "/metrics", &[], "").await.unwrap().text();
        let value = |name: &str| -> f64 {
            m.lines()
                .find(|l| l.starts_with(name))
                .and_then(|l| l.rsplit(' ').next())
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("{name} in {m}"))
        };
        (value("vllm:num_requests_running"), value("vllm:num_requests_waiting"))
    };

    // The long stream, read a few chunks in, over a connection this test can drop.
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (mut tx, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tcp)).await.unwrap();
    let conn = tokio::spawn(conn);
    let long = r#"{"prompt":"x","max_tokens":5000,"ignore_eos":true,"stream":true}"#;
    let req = http::Request::post("/v1/completions")
        .header("host", addr.to_string())
        .header("content-type", "application/json")
        .header("x-request-id", "long")
        .body(http_body_util::Full::new(bytes::Bytes::from(long)))
        .unwrap();
    let mut body =
        tokio::time::timeout(STEP, tx.send_request(req)).await.unwrap().unwrap().into_body();
    for _ in 0..3 {
        let f = tokio::time::timeout(STEP, body.frame()).await.unwrap();
        assert!(f.is_some_and(|f| f.is_ok()), "the long stream sends");
    }
    let short = tokio::spawn(async move {
        let body = r#"{"prompt":"x","max_tokens":5,"ignore_eos":true,"stream":true}"#;
        send(addr, "POST", "/v1/completions", &[("x-request-id", "short")], body).await
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(gauges().await, (1.0, 1.0), "the short request waits for the one slot");

    drop((body, tx));
    conn.abort();
    let dropped = Instant::now();
    let seen = tokio::time::timeout(STEP, short).await.unwrap().unwrap().unwrap();
    assert_eq!(seen.status, 200);
    // The server notices at its next token (a decode step, ~7 ms), then schedules the short
    // one: 3 s leaves room for a stalled CI machine and is a tenth of the long stream's rest.
    let first = seen.frames[0].0.saturating_duration_since(dropped);
    assert!(first < Duration::from_secs(3), "the short request started {first:?} after the drop");
    assert_eq!(gauges().await, (0.0, 0.0), "the slot is free again");
    let truth = sim.truth();
    let long = truth.iter().find(|t| t.request_id.as_deref() == Some("long")).unwrap();
    assert!(long.completion_tokens < 5000, "{}", long.completion_tokens);
    assert_eq!(long.outcome, "aborted");
    sim.shutdown().await;
}
