//! servelab-metrics: pure functions from per-request records to a run [`Summary`].
//!
//! The pipeline is `records → Collector (mergeable) → Summary`. Every definition (TTFT,
//! TPOT, per-token ITL, throughput windows, concurrency, goodput) is written down in
//! `docs/metrics.md`, with how `vllm bench serve`, SGLang, GuideLLM and AIPerf define it.
//!
//! ```
//! use servelab_metrics::{summarize, MetricsConfig};
//! use servelab_records::RunInfo;
//! let s = summarize(&[], &RunInfo::default(), &MetricsConfig::default());
//! assert_eq!(s.completed, 0);
//! assert_eq!(s.ttft_ms.count, 0);
//! ```

#![warn(missing_docs)]
#![cfg_attr(not(test), warn(unused_crate_dependencies))]

pub mod bootstrap;
mod collect;
pub mod conduct;
pub mod digest;
pub mod engine;
pub mod fold;
pub mod gpu;
mod key;
pub mod knee;
pub mod load;
pub mod merge;
pub mod pareto;
pub mod reasoning;
pub mod replay;
pub mod request;
mod server;
pub mod sessions;
pub mod sketch;
mod slo;
pub mod stats;
mod summary;
pub mod timeline;
pub mod truth;
pub mod warning;

use serde::{Deserialize, Serialize};
use servelab_records::{RequestRecord, RunInfo};

pub use collect::{Collector, MAX_MESSAGES, MAX_MESSAGE_CHARS};
pub use engine::EngineMetrics;
pub use gpu::GpuSummary;
pub use key::{
    pct_word, Metric, MetricKey, Stat, DEPLOYMENT_KEYS, GPU_KEYS, HEADLINE, LOAD_KEYS,
    REASONING_KEYS,
};
pub use load::LoadSummary;
pub use reasoning::{PhaseRow, ReasoningSummary};
pub use replay::{ReplaySummary, TraceRows};
pub use request::RequestRow;
pub use servelab_records::ReasoningParser;
pub use server::ServerSplit;
pub use sessions::{SessionSummary, TurnStats};
pub use slo::{Slo, SloCheck, SloSpec, SloTerm};
pub use stats::Distribution;
pub use summary::{FailureGroup, Summary};
pub use truth::TruthCheck;
pub use warning::{Warning, Warnings};

/// One second, the default throughput window.
pub const DEFAULT_WINDOW_NS: u64 = 1_000_000_000;

/// What to compute.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MetricsConfig {
    /// Percentiles for every distribution, in print order.
    pub percentiles: Vec<f64>,
    /// Goodput objectives; `None` reports no goodput.
    pub goodput: Option<Slo>,
    /// Throughput window width, nanoseconds.
    pub window_ns: u64,
}

impl Default for MetricsConfig {
    fn default() -> Self {
        MetricsConfig {
            percentiles: vec![50.0, 90.0, 95.0, 99.0],
            goodput: None,
            window_ns: DEFAULT_WINDOW_NS,
        }
    }
}

/// A [`MetricsConfig`] value that cannot give meaningful numbers.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ConfigError {
    /// A percentile outside [0, 100].
    #[error("percentile {0} is outside [0, 100]: give percentiles such as 50,90,99 or 99.9")]
    Percentile(f64),
    /// A goodput objective that is negative, NaN or infinite.
    #[error("goodput SLO {name}:{value} must be a finite number of milliseconds >= 0")]
    Slo {
        /// The metric it bounds: `ttft`, `tpot`, `e2el`, `ttfa`, ...
        name: &'static str,
        /// The rejected bound, ms.
        value: f64,
    },
    /// A zero-width throughput window.
    #[error("throughput window must be longer than 0 ns (the default is 1 s)")]
    Window,
}

impl MetricsConfig {
    /// Checks the configuration; the CLI calls this before a run so a typo fails early.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if let Some(p) = self.percentiles.iter().find(|p| !(0.0..=100.0).contains(*p)) {
            return Err(ConfigError::Percentile(*p));
        }
        if let Some(slo) = &self.goodput {
            for (name, v) in slo.terms() {
                if let Some(value) = v.filter(|v| !(v.is_finite() && *v >= 0.0)) {
                    return Err(ConfigError::Slo { name, value });
                }
            }
        }
        if self.window_ns == 0 {
            return Err(ConfigError::Window);
        }
        Ok(())
    }
}

/// `50,90,99.9` → percentiles in (0, 100], in the order given. The error names the bad item.
pub fn parse_percentiles(s: &str) -> Result<Vec<f64>, String> {
    s.split(',')
        .map(|p| {
            p.trim()
                .parse::<f64>()
                .ok()
                .filter(|v| *v > 0.0 && *v <= 100.0)
                .ok_or_else(|| format!("'{p}' is not a percentile in (0, 100]"))
        })
        .collect()
}

/// Summarizes a run: warm-ups excluded, failures counted by kind.
pub fn summarize(records: &[RequestRecord], info: &RunInfo, cfg: &MetricsConfig) -> Summary {
    Collector::from_records(records).finish(info, cfg)
}

#[cfg(test)]
mod tests;
