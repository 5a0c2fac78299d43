//! Helpers shared by the client's integration tests: a run through the public API
//! (`servelab_client::run` with a `RunConfig`, as the CLI builds one) and its records.
#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use servelab_client::{run, PlannedRequest, Progress, RunConfig, RunEnd, Target};
use servelab_load::Arrivals;
use servelab_records::{FailureKind, Outcome, RequestRecord};
use tokio::sync::{mpsc, watch};

/// A streaming completion request body.
pub const STREAM: &str = r#"{"model":"servelab-sim","prompt":"hello","max_tokens":5,"ignore_eos":true,"stream":true,"stream_options":{"include_usage":true}}"#;

/// Every test run is bounded by this, whatever the server does.
pub const RUN_BOUND: Duration = Duration::from_secs(60);

/// A run of `n` identical streaming requests, all arriving at once, one connection opened
/// beforehand, tight timeouts.
pub fn config(target: Target, n: usize) -> RunConfig {
    let planned = PlannedRequest {
        body: Bytes::from_static(STREAM.as_bytes()),
        prompt_tokens: None,
        max_tokens: Some(5),
    };
    RunConfig {
        target,
        requests: vec![planned; n],
        warmups: Vec::new(),
        arrivals: Arrivals::Burst,
        seed: 7,
        max_concurrency: None,
        duration: None,
        request_timeout: Duration::from_secs(10),
        stall_timeout: None,
        drain_timeout: Duration::from_secs(1),
        preconnect: 1,
        baseline: None,
    }
}

/// Run `cfg` to its end (bounded by [`RUN_BOUND`]); the records by index, the loop's end and
/// its live counters.
pub async fn run_all(cfg: RunConfig) -> (Vec<RequestRecord>, RunEnd, Arc<Progress>) {
    let progress = Arc::new(Progress::default());
    let (tx, mut rx) = mpsc::unbounded_channel();
    let (_stop, interrupt) = watch::channel(false);
    let end = tokio::time::timeout(RUN_BOUND, run(cfg, progress.clone(), tx, interrupt))
        .await
        .expect("the run ends within its bound")
        .expect("the run starts");
    let mut records = Vec::new();
    while let Ok(r) = rx.try_recv() {
        records.push(r);
    }
    records.sort_by_key(|r| r.index);
    (records, end, progress)
}

pub async fn target(base_url: &str) -> Target {
    Target::resolve(base_url, "/v1/completions").await.expect("target")
}

/// The failure kind and message, or `None` for a success.
pub fn failure(r: &RequestRecord) -> Option<(FailureKind, &str)> {
    match &r.outcome {
        Outcome::Success => None,
        Outcome::Failure { kind, message } => Some((*kind, message.as_str())),
    }
}
