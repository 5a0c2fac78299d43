//! The workload tests' simulator, bench run and truth log, shared by the logic tests (`it`)
//! and the replay tests that assert measured send lateness (`timing`).
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::time::Duration;

use servelab_bench::BenchOutcome;
use servelab_client::runner::request_id;
use servelab_records::RequestRecord;
use servelab_sim::{SimConfig, SimHandle, TruthRecord};

/// The simulator on 127.0.0.1:0, logging prompt and reply texts.
pub async fn sim(cfg: SimConfig) -> SimHandle {
    servelab_sim::start(cfg.with_port(0).with_truth_text()).await.expect("sim starts")
}

/// `servelab bench` against `sim` with `args`, to its end.
pub async fn bench(sim: &SimHandle, args: &[&str]) -> BenchOutcome {
    let settings = super::bench_settings(&sim.base_url(), args);
    super::run_bench(&settings, Duration::from_secs(90)).await
}

/// The truth record of each measured record, by the `x-request-id` servelab sent.
pub fn truth_of<'a>(
    sim: &SimHandle,
    records: &'a [RequestRecord],
) -> Vec<(&'a RequestRecord, TruthRecord)> {
    let mut by_id: BTreeMap<String, TruthRecord> =
        sim.truth().into_iter().filter_map(|t| Some((t.request_id.clone()?, t))).collect();
    records
        .iter()
        .filter(|r| !r.warmup)
        .map(|r| (r, by_id.remove(&request_id(r)).expect("the server saw every request")))
        .collect()
}

/// A file under the repository's testdata/.
pub fn testdata(name: &str) -> String {
    format!("{}/../../testdata/{name}", env!("CARGO_MANIFEST_DIR"))
}
