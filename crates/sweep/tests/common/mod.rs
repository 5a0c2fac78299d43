//! A fake engine's summaries, shared by the driver and chart tests.

use servelab_metrics::{Distribution, MetricsConfig, Summary};
use servelab_plan::{
    Api, DatasetSpec, Limits, OutputSpec, Plan, RecordSpec, RequestSpec, SimTarget, Target,
    WorkloadSpec,
};
use servelab_records::{LoadSpec, RunInfo};

fn dist(mean: f64, p99: f64) -> Distribution {
    Distribution {
        count: 10,
        mean,
        median: mean,
        std: 0.0,
        min: mean / 2.0,
        max: p99,
        percentiles: vec![(50.0, mean), (99.0, p99)],
    }
}

/// An engine with 4 slots: 100 tok/s per slot, TTFT 20 ms until the slots are full, then
/// requests queue for a whole request time (200 ms).
pub fn summary(c: usize, n: usize) -> Summary {
    let busy = c.min(4) as f64;
    let queued = c > 4;
    let ttft = if queued { 20.0 + 200.0 * (c as f64 - 4.0) / c as f64 } else { 20.0 };
    let ttft_p99 = if queued { 220.0 } else { 21.0 };
    let out = 100.0 * busy;
    Summary {
        info: RunInfo {
            backend: "openai".into(),
            base_url: "http://127.0.0.1:1".into(),
            endpoint: "/v1/completions".into(),
            model: "fake".into(),
            tokenizer: None,
            dataset: "random(100:20)".into(),
            num_prompts: n as u64,
            load: LoadSpec {
                request_rate: None,
                burstiness: 1.0,
                max_concurrency: Some(c as u64),
                duration_s: None,
            },
            ramp: None,
            num_warmups: 0,
            seed: 0,
            simulated: true,
            started_at: "2026-01-01T00:00:00Z".into(),
            servelab_version: "0".into(),
            interrupted: false,
            shard: None,
            gpus: None,
        },
        percentiles: vec![50.0, 99.0],
        slo: None,
        window_ns: 1_000_000_000,
        completed: n as u64,
        failed: 0,
        duration_s: n as f64 * 20.0 / out,
        total_input_tokens: 100 * n as u64,
        total_output_tokens: 20 * n as u64,
        retokenized_output_tokens: None,
        request_throughput: out / 20.0,
        request_goodput: None,
        input_throughput: out * 5.0,
        output_throughput: out,
        total_token_throughput: out * 6.0,
        peak_output_throughput: out,
        output_tokens_per_window: vec![],
        peak_concurrency: c as u64,
        mean_concurrency: busy,
        ttft_ms: dist(ttft, ttft_p99),
        tpot_ms: dist(10.0, 10.5),
        itl_ms: dist(10.0, 10.5),
        itl_chunk_ms: dist(10.0, 10.5),
        e2el_ms: dist(ttft + 190.0, ttft_p99 + 195.0),
        ttfc_ms: None,
        schedule_lag_ms: dist(0.1, 0.2),
        client_queue_ms: dist(0.0, 0.0),
        read_lag_ms: None,
        server: None,
        engine: None,
        failures: vec![],
        retries: 0,
        truth: None,
        sessions: None,
        replay: None,
        reasoning: None,
        load: None,
        gpu: None,
        warnings: Default::default(),
        requests: vec![],
    }
}

/// The base plan of the fake sweeps: its target is never reached.
#[allow(dead_code)]
pub fn base_plan() -> Plan {
    Plan {
        target: Target::Simulator(SimTarget::default()),
        request: RequestSpec::new(Api::Completions),
        workload: WorkloadSpec {
            tokenizer: None,
            dataset: DatasetSpec::Random {
                input_len: 100,
                output_len: 20,
                range: servelab_plan::LengthRange::EXACT,
                prefix_len: 0,
            },
            num_prompts: 10,
            seed: 0,
            num_warmups: 0,
        },
        load: LoadSpec::default(),
        ramp: None,
        limits: Limits::default(),
        metrics: MetricsConfig::default(),
        output: OutputSpec::default(),
        record: RecordSpec::default(),
        shard: servelab_plan::ShardSpec::default(),
    }
}
