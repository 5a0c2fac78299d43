//! The sharded runs' seeded plan against the simulator, and what the simulator saw, shared by
//! the logic tests (`it`) and the ones that assert measured time (`timing`).
#![allow(dead_code)]

use std::collections::BTreeSet;

use servelab_metrics::MetricsConfig;
use servelab_plan::{
    Api, DatasetSpec, Limits, LoadSpec, OutputSpec, Plan, RecordSpec, RequestSpec, ShardSpec,
    Target, WorkloadSpec,
};
use servelab_records::RequestRecord;

/// The seeded workload's prompts.
pub const PROMPTS: usize = 120;

/// `--metric-percentiles 50,99.9 --goodput ttft:1000`: the merged run must be summarized as
/// the single run given these flags is, not with the defaults.
pub fn flags() -> MetricsConfig {
    MetricsConfig {
        percentiles: vec![50.0, 99.9],
        goodput: Some(servelab_metrics::Slo { ttft_ms: Some(1000.0), ..Default::default() }),
        ..MetricsConfig::default()
    }
}

pub fn plan(url: &str) -> Plan {
    Plan {
        target: Target::Url(url.to_string()),
        request: RequestSpec { ignore_eos: true, ..RequestSpec::new(Api::Completions) },
        workload: WorkloadSpec {
            tokenizer: Some("cl100k_base".into()),
            dataset: DatasetSpec::Random {
                input_len: 32,
                output_len: 8,
                range: servelab_plan::LengthRange::EXACT,
                prefix_len: 0,
            },
            num_prompts: PROMPTS,
            seed: 11,
            num_warmups: 0,
        },
        // Poisson arrivals at 60/s: about two seconds of irregular instants.
        load: LoadSpec { request_rate: Some(60.0), ..LoadSpec::default() },
        ramp: None,
        limits: Limits { server_metrics_interval: None, ..Limits::default() },
        metrics: flags(),
        output: OutputSpec::default(),
        record: RecordSpec::default(),
        shard: ShardSpec::default(),
    }
}

/// Measured request ids the simulator saw, from its truth log since `mark`.
pub fn seen(sim: &servelab_sim::SimHandle, mark: usize) -> BTreeSet<u64> {
    sim.truth_since(mark)
        .iter()
        .filter(|t| t.outcome == "ok")
        .filter_map(|t| servelab_client::runner::measured_index(t.request_id.as_deref()?))
        .collect()
}

pub fn instants(records: &[RequestRecord]) -> Vec<(u64, u64)> {
    let mut v: Vec<(u64, u64)> =
        records.iter().filter(|r| !r.warmup).map(|r| (r.index, r.scheduled_ns)).collect();
    v.sort_unstable();
    v
}
