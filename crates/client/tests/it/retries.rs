//! A request is sent again only for the keep-alive race, and every re-send is counted: the
//! simulator's truth log (what the server really received) must show each request id once,
//! plus once per counted retry.

use crate::common;

use std::collections::HashMap;

use common::*;
use servelab_client::RunConfig;
use servelab_load::Arrivals;
use servelab_records::{FailureKind, RequestRecord};
use servelab_sim::{start, Fault, SimConfig, SimHandle, TruthRecord};

/// How many times the server received each request id, and the outcomes it gave them.
fn sends(truth: &[TruthRecord]) -> HashMap<String, Vec<String>> {
    let mut m: HashMap<String, Vec<String>> = HashMap::new();
    for t in truth {
        m.entry(t.request_id.clone().unwrap_or_default()).or_default().push(t.outcome.clone());
    }
    m
}

/// Every record's id reached the server exactly `1 + retries` times.
fn assert_accounted(records: &[RequestRecord], truth: &[TruthRecord]) {
    let sends = sends(truth);
    for r in records {
        let id = servelab_client::runner::request_id(r);
        let seen = sends.get(&id).map_or(0, Vec::len);
        assert_eq!(seen, 1 + r.retries as usize, "{id}: server saw {seen}, record {r:?}");
    }
    let expected: usize = records.iter().map(|r| 1 + r.retries as usize).sum();
    assert_eq!(truth.len(), expected, "the server saw requests the records do not account for");
}

async fn sim_with(fault: Fault, p: f64) -> SimHandle {
    start(SimConfig::fixed(2.0, 0.5).with_fault_rate(fault, p).with_seed(3)).await.unwrap()
}

async fn reset_before(cfg: impl FnOnce(RunConfig) -> RunConfig) {
    let sim = sim_with(Fault::ResetBefore, 0.2).await;
    let (records, _, progress) = run_all(cfg(config(target(&sim.base_url()).await, 100))).await;
    let truth = sim.truth();
    sim.shutdown().await;
    assert_eq!(records.len(), 100);
    assert_accounted(&records, &truth);
    // A reset is the server refusing this request: never re-sent, always reported.
    assert!(records.iter().all(|r| r.retries == 0));
    assert_eq!(progress.retries.load(std::sync::atomic::Ordering::Relaxed), 0);
    let resets = truth.iter().filter(|t| t.outcome == "reset-before").count();
    let failed_reset =
        records.iter().filter(|r| matches!(failure(r), Some((FailureKind::Reset, _)))).count();
    assert!(resets > 5, "the fault rate gave only {resets} resets");
    assert_eq!(failed_reset, resets);
    assert_eq!(records.iter().filter(|r| r.is_success()).count(), 100 - resets);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resets_are_failures_in_closed_loop() {
    reset_before(|c| RunConfig { max_concurrency: Some(20), preconnect: 20, ..c }).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resets_are_failures_in_open_loop() {
    reset_before(|c| RunConfig {
        arrivals: Arrivals::Constant { rate: 500.0 },
        preconnect: 20,
        ..c
    })
    .await;
}

/// A clean close of a reused connection without an answer is retried once, counted, and the
/// retry's own outcome stands.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unanswered_closes_of_reused_connections_are_retried_once_and_counted() {
    let sim = sim_with(Fault::CloseBefore, 0.3).await;
    let cfg = RunConfig {
        max_concurrency: Some(8),
        preconnect: 8,
        ..config(target(&sim.base_url()).await, 100)
    };
    let (records, _, progress) = run_all(cfg).await;
    let truth = sim.truth();
    sim.shutdown().await;
    assert_accounted(&records, &truth);
    let retried = records.iter().filter(|r| r.retries > 0).count();
    assert!(retried > 5, "only {retried} retries");
    assert_eq!(progress.retries.load(std::sync::atomic::Ordering::Relaxed), retried as u64);
    assert!(records.iter().all(|r| r.retries <= 1));
    let sends = sends(&truth);
    for r in &records {
        let outcomes = &sends[&servelab_client::runner::request_id(r)];
        if r.retries == 1 {
            // The first send was the close; the record holds the second send's outcome.
            assert_eq!(outcomes[0], "close-before");
            assert_eq!(r.is_success(), outcomes[1] == "ok", "{r:?} {outcomes:?}");
        } else {
            assert_eq!(r.is_success(), outcomes[0] == "ok", "{r:?} {outcomes:?}");
        }
    }
}

/// The same close on a fresh connection (here: the retry's) is a failure, not a second retry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_close_on_a_fresh_connection_fails_as_reset() {
    let sim = start(SimConfig::fixed(1.0, 0.5)).await.unwrap();
    let mut t = target(&sim.base_url()).await;
    t.add_header("x-servelab-fault: close-before").unwrap();
    let (records, _, _) = run_all(RunConfig { max_concurrency: Some(2), ..config(t, 6) }).await;
    let truth = sim.truth();
    sim.shutdown().await;
    assert_accounted(&records, &truth);
    for r in &records {
        let (kind, _) = failure(r).expect("every request fails");
        assert_eq!(kind, FailureKind::Reset, "{r:?}");
    }
    // The pre-opened connection was reused (a retry); connections opened afterwards are fresh.
    assert!(records.iter().any(|r| r.retries == 1));
    assert!(records.iter().all(|r| r.retries <= 1));
}

/// Every request reset on its pooled connection: failures, each sent exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reset_of_a_reused_connection_is_not_retried() {
    let sim = start(SimConfig::fixed(1.0, 0.5)).await.unwrap();
    let mut t = target(&sim.base_url()).await;
    t.add_header("x-servelab-fault: reset-before").unwrap();
    let (records, _, _) =
        run_all(RunConfig { max_concurrency: Some(4), preconnect: 4, ..config(t, 8) }).await;
    let truth = sim.truth();
    sim.shutdown().await;
    assert_eq!(truth.len(), 8);
    assert_accounted(&records, &truth);
    assert!(records
        .iter()
        .all(|r| r.retries == 0 && matches!(failure(r), Some((FailureKind::Reset, _)))));
}

/// A connection the server closed after its answer (FIN, no `Connection: close`) and that sat
/// idle is seen to be closed before reuse: no retry needed, nothing sent twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_closed_while_idle_are_not_reused() {
    let sim = start(SimConfig::fixed(1.0, 0.5)).await.unwrap();
    let mut t = target(&sim.base_url()).await;
    t.add_header("x-servelab-fault: close-after").unwrap();
    let cfg = RunConfig {
        arrivals: Arrivals::Constant { rate: 20.0 },
        max_concurrency: Some(1),
        ..config(t, 10)
    };
    let (records, _, _) = run_all(cfg).await;
    let truth = sim.truth();
    sim.shutdown().await;
    assert!(records.iter().all(|r| r.is_success() && r.retries == 0), "{records:?}");
    assert_accounted(&records, &truth);
}
