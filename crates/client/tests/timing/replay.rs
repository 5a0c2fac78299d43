//! A replay sends request `i` at its given instant (a trace's timestamps): the records carry
//! the trace's instants as their schedule, and the simulator received every request. The
//! median schedule lag (sent − scheduled) is printed; it is bounded loosely because a shared
//! 2-core machine can deschedule the client for milliseconds.

use crate::common;

use std::sync::Arc;

use common::*;
use servelab_client::RunConfig;
use servelab_sim::{start, SimConfig};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replay_sends_each_request_at_its_trace_instant() {
    let _serial = crate::serial::one_at_a_time();
    let sim = start(SimConfig::fixed(2.0, 0.5).with_port(0)).await.unwrap();
    // 24 irregular instants over ~0.9 s, with two pairs at the same instant.
    let offsets: Vec<u64> = (0..24u64).map(|i| (i * i * 1_600_000) + (i % 3) * 7_000_000).collect();
    let mut sorted = offsets.clone();
    sorted.sort_unstable();
    let at: Arc<[u64]> = sorted.clone().into();
    let cfg = RunConfig { send_at: Some(at), ..config(target(&sim.base_url()).await, 24) };
    let (records, _, _) = run_all(cfg).await;
    assert_eq!(records.len(), 24);
    let mut lags: Vec<u64> = Vec::new();
    for (r, want) in records.iter().zip(&sorted) {
        assert_eq!(r.scheduled_ns, *want, "request {} follows the trace", r.index);
        assert!(r.sent_ns >= r.scheduled_ns, "never early: {r:?}");
        lags.push(r.sent_ns - r.scheduled_ns);
    }
    lags.sort_unstable();
    let median_ms = lags[lags.len() / 2] as f64 / 1e6;
    eprintln!("replay schedule lag: median {median_ms:.3} ms, max {:.3} ms", lags[23] as f64 / 1e6);
    assert!(median_ms < 20.0, "median lag {median_ms} ms");
    let truth = sim.truth();
    assert_eq!(truth.iter().filter(|t| t.outcome == "ok").count(), 24);
    sim.shutdown().await;
}

/// A shard sends part of a global schedule: its requests keep their global indices (records
/// and `x-request-id`), and with a start instant the schedule counts from that wall-clock
/// moment, not from when the loop began.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shard_keeps_global_indices_and_counts_from_the_start_instant() {
    let _serial = crate::serial::one_at_a_time();
    let sim = start(SimConfig::fixed(2.0, 0.5).with_port(0)).await.unwrap();
    let ids: Arc<[u64]> = vec![1, 5, 9].into();
    let at: Arc<[u64]> = vec![0, 20_000_000, 40_000_000].into();
    let begin = std::time::SystemTime::now();
    let start_at = begin + std::time::Duration::from_millis(300);
    let cfg = RunConfig {
        send_at: Some(at),
        ids: Some(ids),
        start_at: Some(start_at),
        ..config(target(&sim.base_url()).await, 3)
    };
    let (records, end, _) = run_all(cfg).await;
    let got: Vec<(u64, u64)> = records.iter().map(|r| (r.index, r.scheduled_ns)).collect();
    assert_eq!(got, vec![(1, 0), (5, 20_000_000), (9, 40_000_000)]);
    // The origin is the start instant: 300 ms after `begin`, give or take scheduling.
    let origin_wall = std::time::SystemTime::now() - end.origin.elapsed();
    let after = origin_wall.duration_since(begin).expect("origin after begin");
    assert!((after.as_millis() as i64 - 300).abs() < 50, "origin {after:?} after begin");
    let mut seen: Vec<String> = sim.truth().iter().filter_map(|t| t.request_id.clone()).collect();
    seen.sort();
    assert_eq!(seen, vec!["servelab-1", "servelab-5", "servelab-9"]);
    sim.shutdown().await;
}

/// Request `i` of an on-demand source: a prompt of `i % 7 + 1` words, written when asked.
#[derive(Debug)]
struct Words(usize);

impl servelab_client::RequestWriter for Words {
    fn len(&self) -> usize {
        self.0
    }
    fn request(&self, i: usize) -> servelab_client::PlannedRequest {
        let prompt = vec!["hello"; i % 7 + 1].join(" ");
        let body = format!(
            r#"{{"model":"servelab-sim","prompt":"{prompt}","max_tokens":2,"stream":true,"stream_options":{{"include_usage":true}}}}"#
        );
        servelab_client::PlannedRequest {
            body: body.into(),
            prompt_tokens: Some((i % 7 + 1) as u64),
            max_tokens: Some(2),
        }
    }
}

/// Bodies written on demand (more than the look-ahead window holds): every request reaches
/// the server with its own prompt, at its instant.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_on_demand_replay_sends_every_request_with_its_own_body() {
    let _serial = crate::serial::one_at_a_time();
    let sim = start(SimConfig::fixed(2.0, 0.5).with_port(0)).await.unwrap();
    let n = 700;
    let at: Arc<[u64]> = (0..n as u64).map(|i| i * 400_000).collect::<Vec<_>>().into();
    let cfg = RunConfig {
        source: servelab_client::RequestSource::OnDemand(Arc::new(Words(n))),
        send_at: Some(at.clone()),
        ..config(target(&sim.base_url()).await, 0)
    };
    let (records, _, _) = run_all(cfg).await;
    assert_eq!(records.len(), n);
    let mut lags: Vec<u64> = Vec::new();
    for (i, r) in records.iter().enumerate() {
        assert_eq!((r.index, r.scheduled_ns), (i as u64, at[i]));
        assert_eq!(r.prompt_tokens, Some((i % 7 + 1) as u64));
        assert!(r.is_success(), "{r:?}");
        lags.push(r.sent_ns - r.scheduled_ns);
    }
    lags.sort_unstable();
    let median_ms = lags[n / 2] as f64 / 1e6;
    eprintln!("on-demand replay schedule lag: median {median_ms:.3} ms");
    assert!(median_ms < 20.0, "median lag {median_ms} ms");
    // The server counted each prompt as written for its index ("hello" repeated).
    let truth = sim.truth();
    assert_eq!(truth.len(), n);
    for t in &truth {
        let id = t.request_id.as_deref().and_then(servelab_client::runner::measured_index);
        let i = id.expect("a measured request id") as usize;
        assert_eq!(t.prompt_tokens, (i % 7 + 1) as u64, "request {i}");
    }
    sim.shutdown().await;
}
