//! The result of a run: immutable data that every renderer only formats.

use serde::{Deserialize, Serialize};
use servelab_records::{FailureKind, RunInfo};

use crate::engine::EngineMetrics;
use crate::request::RequestRow;
use crate::server::ServerSplit;
use crate::stats::Distribution;
use crate::truth::TruthCheck;
use crate::Slo;

/// Failed requests of one kind.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FailureGroup {
    /// The failure class.
    pub kind: FailureKind,
    /// Measured requests that failed this way.
    pub count: u64,
    /// The first few distinct messages, in arrival order (each cut to a few hundred chars).
    pub messages: Vec<String>,
}

/// Everything a run measured. Latency distributions are in milliseconds, durations in
/// seconds, throughputs per second of [`Summary::duration_s`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// How the run was driven.
    pub info: RunInfo,
    /// Percentiles every distribution reports, in order (e.g. `[50, 90, 95, 99]`).
    pub percentiles: Vec<f64>,
    /// The goodput objectives, if any were given.
    pub slo: Option<Slo>,
    /// Width of the throughput windows, nanoseconds.
    pub window_ns: u64,

    /// Measured requests that succeeded (warm-ups excluded).
    pub completed: u64,
    /// Measured requests that failed (warm-ups excluded).
    pub failed: u64,
    /// First intended send to last response end, seconds.
    pub duration_s: f64,

    /// Prompt tokens of completed requests (server usage, else client count).
    pub total_input_tokens: u64,
    /// Output tokens of completed requests (server usage, else sum of chunk counts).
    pub total_output_tokens: u64,
    /// Sum of per-chunk token counts of completed requests, when all are known.
    pub retokenized_output_tokens: Option<u64>,

    /// Completed requests per second.
    pub request_throughput: f64,
    /// Completed requests meeting every SLO, per second; `None` without SLOs.
    pub request_goodput: Option<f64>,
    /// Prompt tokens of completed requests per second.
    pub input_throughput: f64,
    /// Output tokens of completed requests per second.
    pub output_throughput: f64,
    /// Prompt plus output tokens of completed requests per second.
    pub total_token_throughput: f64,
    /// Most output tokens in one window, divided by the window length (tokens/s).
    pub peak_output_throughput: f64,
    /// Output tokens per window from the first intended send (for charts).
    pub output_tokens_per_window: Vec<u64>,
    /// Most requests in flight at once (exact sweep line over `[sent, end)`).
    pub peak_concurrency: u64,
    /// Time-weighted mean of requests in flight over the duration.
    pub mean_concurrency: f64,

    /// Time to first token (reasoning or content), from the intended send.
    pub ttft_ms: Distribution,
    /// Time per output token after the first, per request with at least 2 output tokens.
    pub tpot_ms: Distribution,
    /// Per-token inter-token latency: a chunk of k tokens after a gap g gives k samples g/k.
    pub itl_ms: Distribution,
    /// Per-chunk gaps, as vLLM and SGLang report ITL.
    pub itl_chunk_ms: Distribution,
    /// End-to-end latency: intended send to response end.
    pub e2el_ms: Distribution,
    /// Time to first answer content, only when some response carried reasoning text.
    pub ttfc_ms: Option<Distribution>,
    /// Sent minus intended send, every measured request.
    pub schedule_lag_ms: Distribution,
    /// Intended send minus scheduled arrival, every measured request.
    pub client_queue_ms: Distribution,
    /// Per request, the longest the client took to handle arrived bytes; only where the
    /// platform gives kernel receive times.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_lag_ms: Option<Distribution>,
    /// Engine timings next to the client's, when the server reported them (llama.cpp).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<ServerSplit>,
    /// What the engine's `/metrics` said over the run, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<EngineMetrics>,

    /// Requests re-sent once because the server closed an idle kept-alive connection
    /// unanswered (never a reset or a failure of the request itself).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub retries: u64,
    /// The built-in simulator's own account next to the measurement, when it was the target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub truth: Option<TruthCheck>,
    /// Multi-turn runs: TTFT by turn and per-session latency; absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sessions: Option<crate::sessions::SessionSummary>,
    /// Trace replays: the trace's rows and how far behind its instants the sends were.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay: Option<crate::replay::ReplaySummary>,
    /// Reasoning models: each phase's times, counts and TPOT, when some completed request had
    /// reasoning; absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<crate::reasoning::ReasoningSummary>,
    /// Delivered against configured load, and the steady-state figures (`crate::load`);
    /// absent for runs summarized from digests (folded or merged from shards' digests) and
    /// runs that sent nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load: Option<crate::load::LoadSummary>,

    /// GPU energy and cost (`--gpu-metrics`, `--gpu-hourly-cost`, `crate::gpu`); absent
    /// otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<crate::gpu::GpuSummary>,

    /// Failed requests by kind, in [`FailureKind::ALL`] order.
    pub failures: Vec<FailureGroup>,
    /// Things the reader must know to trust the numbers.
    pub warnings: crate::warning::Warnings,
    /// Every measured request, by index.
    pub requests: Vec<RequestRow>,
}

impl Summary {
    /// The settings this summary was computed with: summarizing the same records with them
    /// gives the same percentiles, goodput and windows.
    pub fn metrics_config(&self) -> crate::MetricsConfig {
        crate::MetricsConfig {
            percentiles: self.percentiles.clone(),
            goodput: self.slo,
            window_ns: self.window_ns,
        }
    }

    /// The named latency distributions in report order, with their labels, for renderers
    /// that list them all.
    pub fn distributions(&self) -> Vec<(&'static str, &Distribution)> {
        let mut v = vec![
            ("ttft", &self.ttft_ms),
            ("tpot", &self.tpot_ms),
            ("itl", &self.itl_ms),
            ("e2el", &self.e2el_ms),
            ("itl_chunk", &self.itl_chunk_ms),
        ];
        if let Some(d) = &self.ttfc_ms {
            v.push(("ttfc", d));
        }
        v.push(("schedule_lag", &self.schedule_lag_ms));
        v.push(("client_queue", &self.client_queue_ms));
        if let Some(d) = &self.read_lag_ms {
            v.push(("read_lag", d));
        }
        v
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}
