//! Delivered against configured load, measured against the simulator (fixed timing: TTFT
//! 20 ms, 2 ms per token, 8 tokens: about 34 ms a request) on 127.0.0.1:0. Tolerances hold
//! on a loaded 2-core machine: the client's lateness is in the figures, by design.

use servelab_bench::{BenchOutcome, Conductor};
use servelab_metrics::load::Steady;
use servelab_plan::LoadSpec;
use servelab_sim::{start, SimConfig};
use tokio::sync::watch;

use crate::common::plan;

async fn run(load: LoadSpec) -> BenchOutcome {
    let sim = start(SimConfig::fixed(20.0, 2.0).with_port(0)).await.unwrap();
    let (_stop, interrupt) = watch::channel(false);
    let mut p = plan(&sim.base_url());
    p.load = load;
    let out = Conductor::new(interrupt).bench(&p).await.unwrap();
    sim.shutdown().await;
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_loop_delivers_its_cap_in_a_steady_window() {
    let _serial = crate::serial::one_at_a_time();
    let out = run(LoadSpec { max_concurrency: Some(4), ..LoadSpec::default() }).await;
    let l = out.summary.load.clone().expect("a run from records states its load");
    assert_eq!(l.target_in_flight, Some(4.0));
    let Steady::Reached(f) = &l.steady else { panic!("no steady state: {:?}", l.steady) };
    // 120 requests, 4 slots: all but the first 4 and those ending after the last send.
    assert!(f.requests >= 100, "{} steady requests", f.requests);
    // Four slots busy but for the client's turnaround between a slot freeing and its send.
    assert!((3.6..=4.0).contains(&l.delivered_concurrency), "{}", l.delivered_concurrency);
    let rate = l.delivered_rate.unwrap();
    // Little's law over the window: the rate times the time a request holds its slot.
    let hold_s = f.e2el_ms.mean / 1e3;
    assert!((rate * hold_s / l.delivered_concurrency - 1.0).abs() < 0.1, "{rate} × {hold_s}");
    // TTFT from the intended send: the simulator's 20 ms plus the wire and the client.
    assert!((20.0..40.0).contains(&f.ttft_ms.mean), "{}", f.ttft_ms.mean);
    assert!(!out.summary.warnings.iter().any(|w| w.starts_with("no steady state")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_loop_delivers_its_schedule() {
    let _serial = crate::serial::one_at_a_time();
    // Poisson arrivals at 60/s: in flight about 60 × 34 ms ≈ 2.
    let out = run(LoadSpec { request_rate: Some(60.0), ..LoadSpec::default() }).await;
    let l = out.summary.load.clone().unwrap();
    assert!(l.steady_figures().is_some(), "no steady state: {:?}", l.steady);
    // What the schedule asked for over the same window: its arrivals in [from, to).
    let ms = |ns: u64| ns as f64 / 1e6;
    let asked = out
        .records
        .iter()
        .filter(|r| !r.warmup && (l.from_ms..l.to_ms).contains(&ms(r.scheduled_ns)))
        .count() as f64
        / ((l.to_ms - l.from_ms) / 1e3);
    let rate = l.delivered_rate.unwrap();
    assert!((rate / asked - 1.0).abs() < 0.1, "delivered {rate}/s, scheduled {asked}/s");
    assert!(l.slot_wait.is_none());
    assert!(l.in_flight_growth.abs() < 2.0, "{}", l.in_flight_growth);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cap_holds_a_rate_back_and_says_so() {
    let _serial = crate::serial::one_at_a_time();
    // 200/s asked, but 2 slots of about 34 ms serve at most about 59/s.
    let load =
        LoadSpec { request_rate: Some(200.0), max_concurrency: Some(2), ..LoadSpec::default() };
    let l = run(load).await.summary.load.unwrap();
    assert_eq!(l.configured_rate, Some(200.0));
    assert!(l.delivered_rate.unwrap() < 100.0, "{:?}", l.delivered_rate);
    let wait = l.slot_wait.unwrap();
    // Arrivals come for 0.6 s and the slots take about 2 s to serve them: late ones wait
    // over a second.
    assert!(wait.p99_ms > 500.0, "{wait:?}");
    assert!(l.slot_queue.unwrap() > 10.0, "{:?}", l.slot_queue);
    assert!(l.delivered_concurrency > 1.8, "{}", l.delivered_concurrency);
}
