//! The bench tests' simulator, runs and fault runs, shared by the logic tests (`it`) and the
//! ones that assert measured time (`timing`).
#![allow(dead_code)]

use std::time::Duration;

use servelab::args::BenchArgs;
use servelab_bench::BenchOutcome;
use servelab_records::{FailureKind, Outcome, RequestRecord};
use servelab_sim::{SimConfig, SimHandle};

pub fn settings(url: &str, extra: &[&str]) -> BenchArgs {
    super::bench_settings(url, &[&["--ignore-eos"], extra].concat())
}

pub async fn bench(sim: &SimHandle, extra: &[&str]) -> BenchOutcome {
    super::run_bench(&settings(&sim.base_url(), extra), Duration::from_secs(60)).await
}

pub async fn sim(cfg: SimConfig) -> SimHandle {
    servelab_sim::start(cfg.with_port(0)).await.expect("sim starts")
}

pub fn measured(out: &BenchOutcome) -> Vec<&RequestRecord> {
    out.records.iter().filter(|r| !r.warmup).collect()
}

pub async fn fault_run(kind: &str, extra: &[&str]) -> BenchOutcome {
    let sim = sim(SimConfig::fixed(5.0, 2.0)).await;
    let header = format!("x-servelab-fault:{kind}");
    let mut args = vec![
        "--num-prompts",
        "3",
        "--random-input-len",
        "16",
        "--random-output-len",
        "12",
        "--header",
        &header,
    ];
    args.extend_from_slice(extra);
    let out = bench(&sim, &args).await;
    sim.shutdown().await;
    out
}

pub fn failure_kinds(out: &BenchOutcome) -> Vec<Option<FailureKind>> {
    measured(out)
        .iter()
        .map(|r| match &r.outcome {
            Outcome::Success => None,
            Outcome::Failure { kind, .. } => Some(*kind),
        })
        .collect()
}
