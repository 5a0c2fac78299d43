//! The metrics a comparison shows, each with its direction and where its samples come from.

use serde::Serialize;
use servelab_store::Headline;

/// A headline metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    RequestThroughput,
    OutputThroughput,
    TotalTokenThroughput,
    TtftMean,
    TtftP99,
    TpotMean,
    TpotP99,
    ItlMean,
    ItlP99,
    E2elMean,
    E2elP99,
    SuccessRate,
}

/// Which per-request sample a latency metric is computed from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sample {
    Ttft,
    Tpot,
    Itl,
    E2el,
}

/// The statistic of a latency metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stat {
    Mean,
    P99,
}

impl Metric {
    /// Report order.
    pub const ALL: [Metric; 12] = [
        Metric::RequestThroughput,
        Metric::OutputThroughput,
        Metric::TotalTokenThroughput,
        Metric::TtftMean,
        Metric::TtftP99,
        Metric::TpotMean,
        Metric::TpotP99,
        Metric::ItlMean,
        Metric::ItlP99,
        Metric::E2elMean,
        Metric::E2elP99,
        Metric::SuccessRate,
    ];

    pub fn label(self) -> &'static str {
        match self {
            Metric::RequestThroughput => "Request throughput (req/s)",
            Metric::OutputThroughput => "Output throughput (tok/s)",
            Metric::TotalTokenThroughput => "Total throughput (tok/s)",
            Metric::TtftMean => "TTFT mean (ms)",
            Metric::TtftP99 => "TTFT p99 (ms)",
            Metric::TpotMean => "TPOT mean (ms)",
            Metric::TpotP99 => "TPOT p99 (ms)",
            Metric::ItlMean => "ITL mean (ms)",
            Metric::ItlP99 => "ITL p99 (ms)",
            Metric::E2elMean => "E2E latency mean (ms)",
            Metric::E2elP99 => "E2E latency p99 (ms)",
            Metric::SuccessRate => "Success rate (%)",
        }
    }

    /// True for throughputs and success rate; latencies are better lower.
    pub fn higher_is_better(self) -> bool {
        matches!(
            self,
            Metric::RequestThroughput
                | Metric::OutputThroughput
                | Metric::TotalTokenThroughput
                | Metric::SuccessRate
        )
    }

    /// The metric's value in a run's headline (success rate in percent).
    pub fn headline(self, h: &Headline) -> Option<f64> {
        match self {
            Metric::RequestThroughput => h.request_throughput,
            Metric::OutputThroughput => h.output_throughput,
            Metric::TotalTokenThroughput => h.total_token_throughput,
            Metric::TtftMean => h.ttft_mean_ms,
            Metric::TtftP99 => h.ttft_p99_ms,
            Metric::TpotMean => h.tpot_mean_ms,
            Metric::TpotP99 => h.tpot_p99_ms,
            Metric::ItlMean => h.itl_mean_ms,
            Metric::ItlP99 => h.itl_p99_ms,
            Metric::E2elMean => h.e2el_mean_ms,
            Metric::E2elP99 => h.e2el_p99_ms,
            Metric::SuccessRate => h.success_rate().map(|s| s * 100.0),
        }
    }

    /// For latency metrics, the per-request sample and statistic to bootstrap; `None` for
    /// run-level metrics (throughputs, success rate), whose noise needs repeated runs.
    pub fn sample(self) -> Option<(Sample, Stat)> {
        match self {
            Metric::TtftMean => Some((Sample::Ttft, Stat::Mean)),
            Metric::TtftP99 => Some((Sample::Ttft, Stat::P99)),
            Metric::TpotMean => Some((Sample::Tpot, Stat::Mean)),
            Metric::TpotP99 => Some((Sample::Tpot, Stat::P99)),
            Metric::ItlMean => Some((Sample::Itl, Stat::Mean)),
            Metric::ItlP99 => Some((Sample::Itl, Stat::P99)),
            Metric::E2elMean => Some((Sample::E2el, Stat::Mean)),
            Metric::E2elP99 => Some((Sample::E2el, Stat::P99)),
            _ => None,
        }
    }

    /// True when `a` is better than `b` for this metric.
    pub fn better(self, a: f64, b: f64) -> bool {
        if self.higher_is_better() {
            a > b
        } else {
            a < b
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn success_rate_is_in_percent_and_directions_are_right() {
        let h = Headline { completed: Some(3), failed: Some(1), ..Headline::default() };
        assert_eq!(Metric::SuccessRate.headline(&h), Some(75.0));
        assert!(Metric::OutputThroughput.better(2.0, 1.0));
        assert!(Metric::TtftP99.better(1.0, 2.0));
        assert_eq!(Metric::ALL.iter().filter(|m| m.sample().is_some()).count(), 8);
    }
}
