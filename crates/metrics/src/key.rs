//! One vocabulary for "which number of a run": a [`MetricKey`] is a [`Metric`] and, for the
//! latency distributions, a [`Stat`]. It knows its value in a [`Summary`], its labels, which
//! direction is better, and how users spell it (`ttft_p99`, `output_throughput`,
//! `total_tokens_per_s`). Comparisons, sweep tables and SLOs, lab objectives and the store's
//! headline all read runs through it.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use servelab_records::PublishedColumn;

use crate::stats::Distribution;
use crate::Summary;

/// A quantity a run reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Metric {
    /// Completed requests per second.
    RequestThroughput,
    /// Prompt tokens of completed requests per second.
    InputThroughput,
    /// Output tokens per second.
    OutputThroughput,
    /// Prompt and output tokens per second.
    TotalTokenThroughput,
    /// Requests meeting every goodput objective, per second.
    RequestGoodput,
    /// Most output tokens in one throughput window, per second.
    PeakOutputThroughput,
    /// Most requests in flight at once.
    PeakConcurrency,
    /// Requests that succeeded.
    Completed,
    /// Requests that failed.
    Failed,
    /// Completed / (completed + failed), in percent.
    SuccessRate,
    /// Time to first token (ms).
    Ttft,
    /// Time per output token after the first (ms).
    Tpot,
    /// Per-token inter-token latency (ms).
    Itl,
    /// End-to-end latency (ms).
    E2el,
    /// Reasoning models: time to the first reasoning token (ms).
    Ttfr,
    /// Reasoning models: time to the first answer token (ms).
    Ttfa,
    /// Reasoning models: TPOT of the reasoning phase (ms).
    ReasoningTpot,
    /// Reasoning models: TPOT of the answer phase (ms).
    AnswerTpot,
    /// Reasoning models: mean reasoning tokens per request with reasoning.
    ReasoningTokens,
    /// Reasoning models: mean answer tokens per request with reasoning.
    AnswerTokens,
    /// Output tokens per second per GPU: output throughput / the run's GPU count
    /// (`RunInfo::gpus`); none when the count is unknown.
    OutputThroughputPerGpu,
    /// Interactivity: output tokens per second per user, 1000 / mean TPOT (ms).
    Interactivity,
    /// Load: sends per second over the load span (requests, or sessions of a multi-turn run).
    DeliveredRate,
    /// Load: time-weighted mean in flight over the load span.
    DeliveredConcurrency,
    /// Steady state: completed requests per second over the steady window.
    SteadyRequestThroughput,
    /// Steady state: output tokens per second over the steady window.
    SteadyOutputThroughput,
    /// Steady state: TTFT of the requests wholly within the steady window (ms).
    SteadyTtft,
    /// Steady state: TPOT (ms).
    SteadyTpot,
    /// Steady state: per-token ITL (ms).
    SteadyItl,
    /// Steady state: end-to-end latency (ms).
    SteadyE2el,
    /// GPU telemetry: energy of every GPU over the measured window per output token (J).
    JoulesPerOutputToken,
    /// GPU cost: USD per million output tokens (`--gpu-hourly-cost`).
    UsdPerMillionOutputTokens,
    /// GPU telemetry: the GPUs' average power over the window, mean per GPU (W).
    GpuMeanWatts,
    /// GPU telemetry: the highest power any GPU drew in the window (W).
    GpuPeakWatts,
}

/// A statistic of a latency distribution.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Stat {
    /// The arithmetic mean.
    Mean,
    /// The 50th percentile.
    Median,
    /// A percentile in (0, 100].
    P(f64),
}

/// A metric and, for a latency, the statistic of it; a latency without a statistic is the
/// per-request value (what a goodput objective bounds).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MetricKey {
    /// The quantity.
    pub metric: Metric,
    /// For latencies: which statistic of the distribution.
    pub stat: Option<Stat>,
}

impl Metric {
    /// The spelling in keys: `ttft`, `output_throughput`.
    pub fn name(self) -> &'static str {
        match self {
            Metric::RequestThroughput => "request_throughput",
            Metric::InputThroughput => "input_throughput",
            Metric::OutputThroughput => "output_throughput",
            Metric::TotalTokenThroughput => "total_token_throughput",
            Metric::RequestGoodput => "request_goodput",
            Metric::PeakOutputThroughput => "peak_output_throughput",
            Metric::PeakConcurrency => "peak_concurrency",
            Metric::Completed => "completed",
            Metric::Failed => "failed",
            Metric::SuccessRate => "success_rate",
            Metric::Ttft => "ttft",
            Metric::Tpot => "tpot",
            Metric::Itl => "itl",
            Metric::E2el => "e2el",
            Metric::Ttfr => "ttfr",
            Metric::Ttfa => "ttfa",
            Metric::ReasoningTpot => "reasoning_tpot",
            Metric::AnswerTpot => "answer_tpot",
            Metric::ReasoningTokens => "reasoning_tokens",
            Metric::AnswerTokens => "answer_tokens",
            Metric::OutputThroughputPerGpu => "output_throughput_per_gpu",
            Metric::Interactivity => "interactivity",
            Metric::DeliveredRate => "delivered_rate",
            Metric::DeliveredConcurrency => "delivered_concurrency",
            Metric::SteadyRequestThroughput => "steady_request_throughput",
            Metric::SteadyOutputThroughput => "steady_output_throughput",
            Metric::SteadyTtft => "steady_ttft",
            Metric::SteadyTpot => "steady_tpot",
            Metric::SteadyItl => "steady_itl",
            Metric::SteadyE2el => "steady_e2el",
            Metric::JoulesPerOutputToken => "joules_per_output_token",
            Metric::UsdPerMillionOutputTokens => "usd_per_million_output_tokens",
            Metric::GpuMeanWatts => "gpu_mean_watts",
            Metric::GpuPeakWatts => "gpu_peak_watts",
        }
    }

    /// True for the latency distributions (which take a [`Stat`]).
    pub fn is_latency(self) -> bool {
        matches!(
            self,
            Metric::Ttft
                | Metric::Tpot
                | Metric::Itl
                | Metric::E2el
                | Metric::Ttfr
                | Metric::Ttfa
                | Metric::ReasoningTpot
                | Metric::AnswerTpot
                | Metric::SteadyTtft
                | Metric::SteadyTpot
                | Metric::SteadyItl
                | Metric::SteadyE2el
        )
    }

    /// True for the GPU telemetry's and cost's figures (`crate::gpu`), which a run has only
    /// with `--gpu-metrics` or `--gpu-hourly-cost`.
    pub fn is_gpu(self) -> bool {
        matches!(
            self,
            Metric::JoulesPerOutputToken
                | Metric::UsdPerMillionOutputTokens
                | Metric::GpuMeanWatts
                | Metric::GpuPeakWatts
        )
    }

    /// False for a count no direction fits: how many reasoning or answer tokens a model
    /// wrote, how many watts a GPU drew (fewer is not better when the work differs); the
    /// delivered rate and in-flight count, judged against their setting, not each other.
    pub fn has_direction(self) -> bool {
        !matches!(
            self,
            Metric::ReasoningTokens
                | Metric::AnswerTokens
                | Metric::GpuMeanWatts
                | Metric::GpuPeakWatts
                | Metric::DeliveredRate
                | Metric::DeliveredConcurrency
        )
    }

    /// True for the load's figures (`crate::load`), which a run has only when it was
    /// summarized from its records (the steady ones only when it reached a steady state).
    pub fn is_load(self) -> bool {
        matches!(
            self,
            Metric::DeliveredRate
                | Metric::DeliveredConcurrency
                | Metric::SteadyRequestThroughput
                | Metric::SteadyOutputThroughput
                | Metric::SteadyTtft
                | Metric::SteadyTpot
                | Metric::SteadyItl
                | Metric::SteadyE2el
        )
    }

    /// True for the reasoning models' figures, which a run has only when it had reasoning.
    pub fn is_reasoning(self) -> bool {
        matches!(
            self,
            Metric::Ttfr
                | Metric::Ttfa
                | Metric::ReasoningTpot
                | Metric::AnswerTpot
                | Metric::ReasoningTokens
                | Metric::AnswerTokens
        )
    }

    /// The distribution of a latency metric in a summary.
    pub fn distribution(self, s: &Summary) -> Option<&Distribution> {
        match self {
            Metric::Ttft => Some(&s.ttft_ms),
            Metric::Tpot => Some(&s.tpot_ms),
            Metric::Itl => Some(&s.itl_ms),
            Metric::E2el => Some(&s.e2el_ms),
            Metric::Ttfr => s.reasoning.as_ref().map(|r| &r.ttfr_ms),
            Metric::Ttfa => s.reasoning.as_ref().map(|r| &r.ttfa_ms),
            Metric::ReasoningTpot => s.reasoning.as_ref().map(|r| &r.reasoning_tpot_ms),
            Metric::AnswerTpot => s.reasoning.as_ref().map(|r| &r.answer_tpot_ms),
            Metric::SteadyTtft => s.load.as_ref()?.steady_figures().map(|f| &f.ttft_ms),
            Metric::SteadyTpot => s.load.as_ref()?.steady_figures().map(|f| &f.tpot_ms),
            Metric::SteadyItl => s.load.as_ref()?.steady_figures().map(|f| &f.itl_ms),
            Metric::SteadyE2el => s.load.as_ref()?.steady_figures().map(|f| &f.e2el_ms),
            _ => None,
        }
    }

    /// The latency's name in published tables: `TTFT`, `E2E Latency`.
    fn title(self) -> &'static str {
        match self {
            Metric::Ttft => "TTFT",
            Metric::Tpot => "TPOT",
            Metric::Itl => "ITL",
            Metric::Ttfr => "TTFT-Reasoning",
            Metric::Ttfa => "TTFA",
            Metric::ReasoningTpot => "Reasoning TPOT",
            Metric::AnswerTpot => "Answer TPOT",
            Metric::ReasoningTokens => "Reasoning Tokens",
            Metric::AnswerTokens => "Answer Tokens",
            Metric::SteadyTtft => "Steady TTFT",
            Metric::SteadyTpot => "Steady TPOT",
            Metric::SteadyItl => "Steady ITL",
            Metric::SteadyE2el => "Steady E2E Latency",
            _ => "E2E Latency",
        }
    }

    fn from_name(s: &str) -> Option<Metric> {
        Some(match s {
            "request_throughput" | "requests_per_s" => Metric::RequestThroughput,
            "input_throughput" => Metric::InputThroughput,
            "output_throughput" | "output_tokens_per_s" => Metric::OutputThroughput,
            "total_token_throughput" | "total_throughput" | "total_tokens_per_s" => {
                Metric::TotalTokenThroughput
            }
            "request_goodput" | "goodput" => Metric::RequestGoodput,
            "peak_output_throughput" => Metric::PeakOutputThroughput,
            "peak_concurrency" => Metric::PeakConcurrency,
            "completed" => Metric::Completed,
            "failed" => Metric::Failed,
            "success_rate" => Metric::SuccessRate,
            "ttft" => Metric::Ttft,
            "tpot" => Metric::Tpot,
            "itl" => Metric::Itl,
            "e2el" | "e2e" => Metric::E2el,
            "ttfr" => Metric::Ttfr,
            "ttfa" => Metric::Ttfa,
            "reasoning_tpot" => Metric::ReasoningTpot,
            "answer_tpot" => Metric::AnswerTpot,
            "reasoning_tokens" => Metric::ReasoningTokens,
            "answer_tokens" => Metric::AnswerTokens,
            "output_throughput_per_gpu" | "tokens_per_gpu" => Metric::OutputThroughputPerGpu,
            "interactivity" | "output_throughput_per_user" | "tokens_per_user" => {
                Metric::Interactivity
            }
            "delivered_rate" => Metric::DeliveredRate,
            "delivered_concurrency" => Metric::DeliveredConcurrency,
            "steady_request_throughput" => Metric::SteadyRequestThroughput,
            "steady_output_throughput" => Metric::SteadyOutputThroughput,
            "steady_ttft" => Metric::SteadyTtft,
            "steady_tpot" => Metric::SteadyTpot,
            "steady_itl" => Metric::SteadyItl,
            "steady_e2el" => Metric::SteadyE2el,
            "joules_per_output_token" | "energy_per_token" => Metric::JoulesPerOutputToken,
            "usd_per_million_output_tokens" | "cost_per_million_tokens" => {
                Metric::UsdPerMillionOutputTokens
            }
            "gpu_mean_watts" => Metric::GpuMeanWatts,
            "gpu_peak_watts" => Metric::GpuPeakWatts,
            _ => return None,
        })
    }
}

impl Stat {
    /// The spelling in keys: `mean`, `median`, `p99`, `p99.9`.
    pub fn name(self) -> String {
        match self {
            Stat::Mean => "mean".into(),
            Stat::Median => "median".into(),
            Stat::P(p) => format!("p{}", pct_word(p)),
        }
    }

    /// The statistic in published headers: `Mean`, `Median`, `P99`.
    pub fn title(self) -> String {
        match self {
            Stat::Mean => "Mean".into(),
            Stat::Median => "Median".into(),
            Stat::P(p) => format!("P{}", pct_word(p)),
        }
    }

    /// The statistic of a distribution; `None` for an empty sample or a percentile it was
    /// not computed with.
    pub fn of(self, d: &Distribution) -> Option<f64> {
        if d.count == 0 {
            return None;
        }
        match self {
            Stat::Mean => Some(d.mean),
            Stat::Median => Some(d.median),
            Stat::P(p) => d.percentile(p),
        }
    }

    fn parse(s: &str) -> Option<Stat> {
        match s {
            "mean" => Some(Stat::Mean),
            "median" | "p50" => Some(Stat::Median),
            _ => {
                let p: f64 = s.strip_prefix('p')?.parse().ok()?;
                (p > 0.0 && p <= 100.0).then_some(Stat::P(p))
            }
        }
    }
}

/// A percentile's name as vLLM writes it: `99` for integral values, else `99.9`.
pub fn pct_word(p: f64) -> String {
    if p.fract() == 0.0 && p.abs() < 1e15 {
        format!("{}", p as i64)
    } else {
        format!("{p}")
    }
}

impl MetricKey {
    /// A run-level quantity (no statistic).
    pub const fn of(metric: Metric) -> MetricKey {
        MetricKey { metric, stat: None }
    }

    /// A statistic of a latency.
    pub const fn stat(metric: Metric, stat: Stat) -> MetricKey {
        MetricKey { metric, stat: Some(stat) }
    }

    /// The key of a column of the published sweep table; `None` for `Concurrency`, which is
    /// the row's load rather than a figure of the run.
    pub const fn published(c: PublishedColumn) -> Option<MetricKey> {
        use PublishedColumn as C;
        let p99 = Stat::P(99.0);
        Some(match c {
            C::Concurrency => return None,
            C::RequestThroughput => MetricKey::of(Metric::RequestThroughput),
            C::OutputThroughput => MetricKey::of(Metric::OutputThroughput),
            C::MeanE2e => MetricKey::stat(Metric::E2el, Stat::Mean),
            C::P99E2e => MetricKey::stat(Metric::E2el, p99),
            C::MeanTtft => MetricKey::stat(Metric::Ttft, Stat::Mean),
            C::P99Ttft => MetricKey::stat(Metric::Ttft, p99),
            C::MeanTpot => MetricKey::stat(Metric::Tpot, Stat::Mean),
            C::P99Tpot => MetricKey::stat(Metric::Tpot, p99),
        })
    }

    /// `ttft_p99`, `e2el_mean`, `output_throughput`, or a bare latency name (`ttft`) for the
    /// per-request value. Also takes `e2e`, `p50` for the median, and the lab's
    /// `total_tokens_per_s`, `output_tokens_per_s`, `requests_per_s`.
    pub fn parse(s: &str) -> Option<MetricKey> {
        let s = s.trim();
        if let Some(metric) = Metric::from_name(s) {
            return Some(MetricKey::of(metric));
        }
        let (m, st) = s.rsplit_once('_')?;
        let metric = Metric::from_name(m).filter(|m| m.is_latency())?;
        Some(MetricKey::stat(metric, Stat::parse(st)?))
    }

    /// The canonical spelling: `ttft_p99`, `output_throughput`.
    pub fn key(&self) -> String {
        match self.stat {
            Some(st) => format!("{}_{}", self.metric.name(), st.name()),
            None => self.metric.name().to_string(),
        }
    }

    /// True for a latency statistic or a run-level quantity: something one run has one
    /// value of (a bare latency is per request).
    pub fn is_run_level(&self) -> bool {
        self.metric.is_latency() == self.stat.is_some()
    }

    /// The value in a summary; `None` when the run has no such number (an empty latency
    /// sample, a percentile not computed, goodput without objectives, a per-request key).
    pub fn value(&self, s: &Summary) -> Option<f64> {
        if let Some(d) = self.metric.distribution(s) {
            return self.stat?.of(d);
        }
        if self.metric.is_latency() {
            // A reasoning latency of a run without reasoning, a steady one without a steady
            // state.
            return None;
        }
        let total = s.completed + s.failed;
        Some(match self.metric {
            Metric::RequestThroughput => s.request_throughput,
            Metric::InputThroughput => s.input_throughput,
            Metric::OutputThroughput => s.output_throughput,
            Metric::TotalTokenThroughput => s.total_token_throughput,
            Metric::RequestGoodput => s.request_goodput?,
            Metric::PeakOutputThroughput => s.peak_output_throughput,
            Metric::PeakConcurrency => s.peak_concurrency as f64,
            Metric::Completed => s.completed as f64,
            Metric::Failed => s.failed as f64,
            Metric::SuccessRate if total > 0 => s.completed as f64 / total as f64 * 100.0,
            Metric::ReasoningTokens => s.reasoning.as_ref()?.reasoning_tokens.mean,
            Metric::AnswerTokens => s.reasoning.as_ref()?.answer_tokens.mean,
            Metric::OutputThroughputPerGpu => {
                crate::pareto::per_gpu(s.output_throughput, s.info.gpus)?
            }
            Metric::Interactivity if s.tpot_ms.count > 0 => {
                crate::pareto::interactivity(s.tpot_ms.mean)?
            }
            Metric::DeliveredRate => s.load.as_ref()?.delivered_rate?,
            Metric::DeliveredConcurrency => s.load.as_ref()?.delivered_concurrency,
            Metric::SteadyRequestThroughput => {
                s.load.as_ref()?.steady_figures()?.request_throughput
            }
            Metric::SteadyOutputThroughput => s.load.as_ref()?.steady_figures()?.output_throughput,
            Metric::JoulesPerOutputToken => s.gpu.as_ref()?.joules_per_output_token?,
            Metric::UsdPerMillionOutputTokens => s.gpu.as_ref()?.usd_per_million_output_tokens?,
            Metric::GpuMeanWatts => s.gpu.as_ref()?.mean_w_per_gpu?,
            Metric::GpuPeakWatts => s.gpu.as_ref()?.peak_w?,
            _ => return None,
        })
    }

    /// True when a higher value is better (throughputs, success); latencies and failures are
    /// better lower.
    pub fn higher_is_better(&self) -> bool {
        !(self.metric.is_latency() || self.metric == Metric::Failed || self.metric.is_gpu())
    }

    /// True when `a` is better than `b`.
    pub fn better(&self, a: f64, b: f64) -> bool {
        if self.higher_is_better() {
            a > b
        } else {
            a < b
        }
    }

    /// The percentile a summary must carry for this key, if any.
    pub fn percentile(&self) -> Option<f64> {
        match self.stat {
            Some(Stat::P(p)) => Some(p),
            _ => None,
        }
    }

    /// The unit of the value: `ms`, `tok/s`, `req/s`, `%`, or empty for counts.
    pub fn unit(&self) -> &'static str {
        match self.metric {
            m if m.is_latency() => "ms",
            Metric::RequestThroughput
            | Metric::RequestGoodput
            | Metric::DeliveredRate
            | Metric::SteadyRequestThroughput => "req/s",
            Metric::InputThroughput
            | Metric::SteadyOutputThroughput
            | Metric::OutputThroughput
            | Metric::TotalTokenThroughput
            | Metric::PeakOutputThroughput => "tok/s",
            Metric::SuccessRate => "%",
            Metric::DeliveredConcurrency => "req",
            Metric::JoulesPerOutputToken => "J/tok",
            Metric::UsdPerMillionOutputTokens => "$/Mtok",
            Metric::GpuMeanWatts | Metric::GpuPeakWatts => "W",
            Metric::ReasoningTokens | Metric::AnswerTokens => "tok",
            Metric::OutputThroughputPerGpu => "tok/s/GPU",
            Metric::Interactivity => "tok/s/user",
            _ => "",
        }
    }

    /// servelab's label, used in comparisons, reports and the lab: `TTFT p99 (ms)`,
    /// `Output throughput (tok/s)`.
    pub fn label(&self) -> String {
        let name = match self.metric {
            Metric::RequestThroughput => "Request throughput",
            Metric::InputThroughput => "Input throughput",
            Metric::OutputThroughput => "Output throughput",
            Metric::TotalTokenThroughput => "Total throughput",
            Metric::RequestGoodput => "Request goodput",
            Metric::PeakOutputThroughput => "Peak output throughput",
            Metric::PeakConcurrency => "Peak concurrency",
            Metric::Completed => "Completed",
            Metric::Failed => "Failed",
            Metric::SuccessRate => "Success rate",
            Metric::Ttft => "TTFT",
            Metric::Tpot => "TPOT",
            Metric::Itl => "ITL",
            Metric::E2el => "E2E latency",
            Metric::Ttfr => "TTFT-reasoning",
            Metric::Ttfa => "TTFA",
            Metric::ReasoningTpot => "Reasoning TPOT",
            Metric::AnswerTpot => "Answer TPOT",
            Metric::ReasoningTokens => "Reasoning tokens mean",
            Metric::AnswerTokens => "Answer tokens mean",
            Metric::OutputThroughputPerGpu => "Output throughput per GPU",
            Metric::Interactivity => "Interactivity",
            Metric::DeliveredRate => "Delivered rate",
            Metric::DeliveredConcurrency => "Delivered concurrency",
            Metric::SteadyRequestThroughput => "Steady request throughput",
            Metric::SteadyOutputThroughput => "Steady output throughput",
            Metric::SteadyTtft => "Steady TTFT",
            Metric::SteadyTpot => "Steady TPOT",
            Metric::SteadyItl => "Steady ITL",
            Metric::SteadyE2el => "Steady E2E latency",
            Metric::JoulesPerOutputToken => "Energy per output token",
            Metric::UsdPerMillionOutputTokens => "Cost per million output tokens",
            Metric::GpuMeanWatts => "GPU power mean",
            Metric::GpuPeakWatts => "GPU power peak",
        };
        let stat = self.stat.map(|s| format!(" {}", s.name())).unwrap_or_default();
        match self.unit() {
            "" => format!("{name}{stat}"),
            u => format!("{name}{stat} ({u})"),
        }
    }

    /// The header of published sweep tables (`vllm bench serve` style): `P99 TTFT (ms)`,
    /// `Output Token Throughput (tok/s)`.
    pub fn header(&self) -> String {
        if let (true, Some(st)) = (self.metric.is_latency(), self.stat) {
            return format!("{} {} (ms)", st.title(), self.metric.title());
        }
        match self.metric {
            Metric::RequestThroughput => "Request Throughput (req/s)".into(),
            Metric::InputThroughput => "Input Token Throughput (tok/s)".into(),
            Metric::OutputThroughput => "Output Token Throughput (tok/s)".into(),
            Metric::TotalTokenThroughput => "Total Token Throughput (tok/s)".into(),
            Metric::RequestGoodput => "Request Goodput (req/s)".into(),
            Metric::PeakOutputThroughput => "Peak Output Token Throughput (tok/s)".into(),
            Metric::PeakConcurrency => "Peak Concurrency".into(),
            Metric::Completed => "Completed".into(),
            Metric::Failed => "Failed".into(),
            Metric::SuccessRate => "Success Rate (%)".into(),
            Metric::ReasoningTokens => "Mean Reasoning Tokens".into(),
            Metric::AnswerTokens => "Mean Answer Tokens".into(),
            Metric::OutputThroughputPerGpu => "Output Token Throughput per GPU (tok/s/GPU)".into(),
            Metric::Interactivity => "Interactivity (tok/s/user)".into(),
            Metric::DeliveredRate => "Delivered Rate (req/s)".into(),
            Metric::DeliveredConcurrency => "Delivered Concurrency".into(),
            Metric::SteadyRequestThroughput => "Steady Request Throughput (req/s)".into(),
            Metric::SteadyOutputThroughput => "Steady Output Token Throughput (tok/s)".into(),
            Metric::JoulesPerOutputToken => "Energy per Output Token (J/tok)".into(),
            Metric::UsdPerMillionOutputTokens => "Cost per 1M Output Tokens ($)".into(),
            Metric::GpuMeanWatts => "Mean GPU Power (W/GPU)".into(),
            Metric::GpuPeakWatts => "Peak GPU Power (W)".into(),
            m => m.title().into(),
        }
    }
}

impl fmt::Display for MetricKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.key())
    }
}

impl std::str::FromStr for MetricKey {
    type Err = String;

    fn from_str(s: &str) -> Result<MetricKey, String> {
        MetricKey::parse(s).ok_or_else(|| {
            format!(
                "unknown metric '{s}': use request_throughput, output_throughput, \
                 total_token_throughput, peak_concurrency, completed, failed, success_rate, or a \
                 latency (ttft, tpot, itl, e2el) with _mean, _median or _pNN, e.g. ttft_p99; \
                 the load's delivered_rate, delivered_concurrency, steady_output_throughput, \
                 steady_request_throughput, or a steady latency, e.g. steady_ttft_p99"
            )
        })
    }
}

impl Serialize for MetricKey {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.key())
    }
}

impl<'de> Deserialize<'de> for MetricKey {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<MetricKey, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// The metrics a comparison, a report and the store's headline show, in report order.
pub const HEADLINE: [MetricKey; 12] = [
    MetricKey::of(Metric::RequestThroughput),
    MetricKey::of(Metric::OutputThroughput),
    MetricKey::of(Metric::TotalTokenThroughput),
    MetricKey::stat(Metric::Ttft, Stat::Mean),
    MetricKey::stat(Metric::Ttft, Stat::P(99.0)),
    MetricKey::stat(Metric::Tpot, Stat::Mean),
    MetricKey::stat(Metric::Tpot, Stat::P(99.0)),
    MetricKey::stat(Metric::Itl, Stat::Mean),
    MetricKey::stat(Metric::Itl, Stat::P(99.0)),
    MetricKey::stat(Metric::E2el, Stat::Mean),
    MetricKey::stat(Metric::E2el, Stat::P(99.0)),
    MetricKey::of(Metric::SuccessRate),
];

/// The deployment figures a comparison shows after [`HEADLINE`]: output tokens/s per GPU
/// (when the runs state their GPU count) and per user (see [`crate::pareto`]).
pub const DEPLOYMENT_KEYS: [MetricKey; 2] =
    [MetricKey::of(Metric::OutputThroughputPerGpu), MetricKey::of(Metric::Interactivity)];

/// The load's figures a comparison shows after [`HEADLINE`] when a run has them: what was
/// delivered, then the steady state's (see `docs/metrics.md`, "Delivered load").
pub const LOAD_KEYS: [MetricKey; 8] = [
    MetricKey::of(Metric::DeliveredRate),
    MetricKey::of(Metric::DeliveredConcurrency),
    MetricKey::of(Metric::SteadyOutputThroughput),
    MetricKey::stat(Metric::SteadyTtft, Stat::Mean),
    MetricKey::stat(Metric::SteadyTtft, Stat::P(99.0)),
    MetricKey::stat(Metric::SteadyTpot, Stat::Mean),
    MetricKey::stat(Metric::SteadyTpot, Stat::P(99.0)),
    MetricKey::stat(Metric::SteadyE2el, Stat::P(99.0)),
];

/// The GPU telemetry's and cost's figures a comparison shows after [`HEADLINE`] when a run
/// has them (`--gpu-metrics`, `--gpu-hourly-cost`; see `docs/metrics.md`, "GPU energy and
/// cost"). Lower is better for each; watts get no best value.
pub const GPU_KEYS: [MetricKey; 4] = [
    MetricKey::of(Metric::JoulesPerOutputToken),
    MetricKey::of(Metric::UsdPerMillionOutputTokens),
    MetricKey::of(Metric::GpuMeanWatts),
    MetricKey::of(Metric::GpuPeakWatts),
];

/// The reasoning models' figures a comparison shows after [`HEADLINE`] when a run had
/// reasoning: time to the first answer token first, as users judge reasoning models by it.
pub const REASONING_KEYS: [MetricKey; 7] = [
    MetricKey::stat(Metric::Ttfa, Stat::Mean),
    MetricKey::stat(Metric::Ttfa, Stat::P(99.0)),
    MetricKey::stat(Metric::Ttfr, Stat::Mean),
    MetricKey::stat(Metric::ReasoningTpot, Stat::Mean),
    MetricKey::stat(Metric::AnswerTpot, Stat::Mean),
    MetricKey::of(Metric::ReasoningTokens),
    MetricKey::of(Metric::AnswerTokens),
];

#[cfg(test)]
mod tests {
    use super::*;
    use servelab_records::PUBLISHED_COLUMNS;

    #[test]
    fn published_columns_are_metric_keys_with_the_same_headers() {
        for c in &PUBLISHED_COLUMNS[1..] {
            let k = MetricKey::published(*c).unwrap();
            assert_eq!(k.header(), c.header(), "{c:?}");
        }
        assert_eq!(MetricKey::published(PublishedColumn::Concurrency), None);
    }

    #[test]
    fn parses_every_spelling() {
        let k = |s: &str| MetricKey::parse(s).map(|k| k.key());
        assert_eq!(k("ttft_p99").as_deref(), Some("ttft_p99"));
        assert_eq!(k("e2e_p50").as_deref(), Some("e2el_median"));
        assert_eq!(k("tpot_p99.9").as_deref(), Some("tpot_p99.9"));
        assert_eq!(k("total_tokens_per_s").as_deref(), Some("total_token_throughput"));
        assert_eq!(k("total_throughput").as_deref(), Some("total_token_throughput"));
        assert_eq!(k("requests_per_s").as_deref(), Some("request_throughput"));
        assert_eq!(k("ttft").as_deref(), Some("ttft"));
        assert_eq!(k("ttft_p0"), None);
        assert_eq!(k("ttft_p101"), None);
        assert_eq!(k("output_throughput_p99"), None);
        assert_eq!(k("foo_p99"), None);
        assert_eq!(k("reasoning_tpot_p99").as_deref(), Some("reasoning_tpot_p99"));
        assert_eq!(k("ttfa").as_deref(), Some("ttfa"));
        assert_eq!(k("ttfa_mean").as_deref(), Some("ttfa_mean"));
        assert_eq!(k("answer_tokens").as_deref(), Some("answer_tokens"));
        assert_eq!(k("answer_tokens_p99"), None);
        assert_eq!(k("steady_ttft_p99").as_deref(), Some("steady_ttft_p99"));
        assert_eq!(k("steady_e2e_p50"), None);
        assert_eq!(k("steady_e2el_p50").as_deref(), Some("steady_e2el_median"));
        assert_eq!(k("delivered_rate").as_deref(), Some("delivered_rate"));
        assert_eq!(k("delivered_rate_p99"), None);
        assert!("ttft_p999".parse::<MetricKey>().unwrap_err().contains("unknown metric"));
    }

    #[test]
    fn labels_headers_and_directions() {
        let p99 = MetricKey::stat(Metric::Ttft, Stat::P(99.0));
        assert_eq!(p99.label(), "TTFT p99 (ms)");
        assert_eq!(p99.header(), "P99 TTFT (ms)");
        let e2e = MetricKey::stat(Metric::E2el, Stat::Mean);
        assert_eq!(e2e.label(), "E2E latency mean (ms)");
        assert_eq!(e2e.header(), "Mean E2E Latency (ms)");
        let out = MetricKey::of(Metric::OutputThroughput);
        assert_eq!(out.label(), "Output throughput (tok/s)");
        assert_eq!(out.header(), "Output Token Throughput (tok/s)");
        assert_eq!(MetricKey::of(Metric::SuccessRate).label(), "Success rate (%)");
        assert_eq!(MetricKey::of(Metric::Completed).label(), "Completed");
        let steady = MetricKey::stat(Metric::SteadyTtft, Stat::P(99.0));
        assert_eq!(steady.label(), "Steady TTFT p99 (ms)");
        assert_eq!(steady.header(), "P99 Steady TTFT (ms)");
        let rate = MetricKey::of(Metric::DeliveredRate);
        assert_eq!(rate.label(), "Delivered rate (req/s)");
        assert_eq!(rate.header(), "Delivered Rate (req/s)");
        assert!(out.higher_is_better() && out.better(2.0, 1.0));
        assert!(!p99.higher_is_better() && p99.better(1.0, 2.0));
        assert!(!MetricKey::of(Metric::Failed).higher_is_better());
        let j = MetricKey::parse("joules_per_output_token").unwrap();
        assert_eq!(j.label(), "Energy per output token (J/tok)");
        assert_eq!(j.header(), "Energy per Output Token (J/tok)");
        assert!(!j.higher_is_better() && j.is_run_level());
        let usd = MetricKey::parse("cost_per_million_tokens").unwrap();
        assert_eq!(usd.key(), "usd_per_million_output_tokens");
        assert_eq!(usd.label(), "Cost per million output tokens ($/Mtok)");
        assert_eq!(MetricKey::of(Metric::GpuPeakWatts).label(), "GPU power peak (W)");
        assert_eq!(p99.percentile(), Some(99.0));
        assert!(p99.is_run_level() && !MetricKey::of(Metric::Ttft).is_run_level());
    }

    /// Issue 27: tokens/s per GPU and per user, read from a summary.
    #[test]
    fn per_gpu_and_per_user_keys() {
        let k = |s: &str| MetricKey::parse(s).unwrap();
        assert_eq!(k("tokens_per_gpu").key(), "output_throughput_per_gpu");
        assert_eq!(k("output_throughput_per_user").key(), "interactivity");
        assert_eq!(MetricKey::parse("interactivity_p99"), None);
        let gpu = MetricKey::of(Metric::OutputThroughputPerGpu);
        let user = MetricKey::of(Metric::Interactivity);
        assert_eq!(gpu.label(), "Output throughput per GPU (tok/s/GPU)");
        assert_eq!(user.header(), "Interactivity (tok/s/user)");
        assert!(gpu.higher_is_better() && user.higher_is_better());
        let info = servelab_records::RunInfo::default();
        let mut s = crate::summarize(&[], &info, &crate::MetricsConfig::default());
        s.output_throughput = 1000.0;
        s.tpot_ms = Distribution { count: 3, mean: 8.0, ..Distribution::default() };
        assert_eq!(gpu.value(&s), None, "no GPU count");
        assert_eq!(user.value(&s), Some(125.0));
        s.info.gpus = Some(4);
        assert_eq!(gpu.value(&s), Some(250.0));
        s.tpot_ms.count = 0;
        assert_eq!(user.value(&s), None, "no TPOT sample");
    }

    #[test]
    fn serializes_as_its_key() {
        let k = MetricKey::stat(Metric::Ttft, Stat::Median);
        assert_eq!(serde_json::to_string(&k).unwrap(), "\"ttft_median\"");
        assert_eq!(serde_json::from_str::<MetricKey>("\"ttft_p50\"").unwrap(), k);
        assert_eq!(
            HEADLINE.iter().map(|k| k.key()).collect::<Vec<_>>().join(","),
            "request_throughput,output_throughput,total_token_throughput,ttft_mean,ttft_p99,\
             tpot_mean,tpot_p99,itl_mean,itl_p99,e2el_mean,e2el_p99,success_rate"
        );
    }
}
