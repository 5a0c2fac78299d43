//! The stored types. Plain data; [`crate::Store`] reads and writes them.

use serde::{Deserialize, Serialize};
use servelab_metrics::{Metric, MetricKey, Stat, Summary};
use servelab_records::RunInfo;
pub use servelab_records::RunKind;

/// A run's id in the store.
pub type RunId = i64;

/// Where a run is in its life. `Running` after the process is gone means it crashed or was
/// killed: the run is incomplete.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RunStatus {
    /// Begun and not finished (or its process died).
    Running,
    /// Finished normally; imported runs are complete.
    Complete,
    /// Stopped early by the user (Ctrl-C); what was measured is kept.
    Interrupted,
}

impl RunStatus {
    /// The name stored in the `status` column: `running`, `complete` or `interrupted`.
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Running => "running",
            RunStatus::Complete => "complete",
            RunStatus::Interrupted => "interrupted",
        }
    }

    /// The status a stored name stands for; `None` for any other text.
    pub fn parse(s: &str) -> Option<RunStatus> {
        match s {
            "running" => Some(RunStatus::Running),
            "complete" => Some(RunStatus::Complete),
            "interrupted" => Some(RunStatus::Interrupted),
            _ => None,
        }
    }
}

/// A run's setup as the store files it: how it was driven ([`RunInfo`]: target, model,
/// dataset, load, seed, tool version) plus where it ran and what engine it measured. (The
/// measuring loop's own settings are the client's `RunConfig`.)
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct RunSetup {
    /// How the run was driven, as recorded in its results.
    pub info: RunInfo,
    /// Host name of the machine that ran the client.
    pub host: String,
    /// Engine label (the `engine` tag, e.g. `vllm-0.11`), if given.
    pub engine: Option<String>,
    /// Engine flags (the `engine_flags` tag), if given.
    pub engine_flags: Option<String>,
}

impl RunSetup {
    /// The configuration of a run driven by `info`, with engine details taken from the tags
    /// `engine` and `engine_flags` when present.
    pub fn new(info: RunInfo, tags: &[(String, String)]) -> RunSetup {
        let tag = |k: &str| tags.iter().find(|(key, _)| key == k).map(|(_, v)| v.clone());
        RunSetup {
            info,
            host: host_name(),
            engine: tag("engine"),
            engine_flags: tag("engine_flags"),
        }
    }
}

/// This machine's host name, or `""` when it cannot be read.
pub(crate) fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// A run about to start.
#[derive(Debug, Clone, PartialEq)]
pub struct NewRun {
    /// The user's name for the run (`--label`), by which commands can refer to it.
    pub label: Option<String>,
    /// What produced it: a bench, a sweep point, a lab trial, ...
    pub kind: RunKind,
    /// Its full configuration.
    pub config: RunSetup,
    /// `key=value` tags to file it under (`--tag`).
    pub tags: Vec<(String, String)>,
}

/// The metrics every run has a column for, so lists and comparisons need no JSON parsing and
/// imported runs (which have no per-request data) compare with native ones. `None` means the
/// source did not have it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
pub struct Headline {
    /// Completed requests per second.
    pub request_throughput: Option<f64>,
    /// Output tokens per second.
    pub output_throughput: Option<f64>,
    /// Prompt and output tokens per second.
    pub total_token_throughput: Option<f64>,
    /// Mean time to first token, ms.
    pub ttft_mean_ms: Option<f64>,
    /// 99th percentile time to first token, ms.
    pub ttft_p99_ms: Option<f64>,
    /// Mean time per output token (after the first), ms.
    pub tpot_mean_ms: Option<f64>,
    /// 99th percentile time per output token, ms.
    pub tpot_p99_ms: Option<f64>,
    /// Mean inter-token latency, ms.
    pub itl_mean_ms: Option<f64>,
    /// 99th percentile inter-token latency, ms.
    pub itl_p99_ms: Option<f64>,
    /// Mean end-to-end request latency, ms.
    pub e2el_mean_ms: Option<f64>,
    /// 99th percentile end-to-end request latency, ms.
    pub e2el_p99_ms: Option<f64>,
    /// Requests that completed successfully.
    pub completed: Option<u64>,
    /// Requests that failed.
    pub failed: Option<u64>,
    /// Length of the measured phase, seconds.
    pub duration_s: Option<f64>,
}

impl Headline {
    /// The headline numbers of a servelab summary.
    pub fn from_summary(s: &Summary) -> Headline {
        let v = |metric: Metric, stat: Stat| MetricKey::stat(metric, stat).value(s);
        let p99 = Stat::P(99.0);
        Headline {
            request_throughput: Some(s.request_throughput),
            output_throughput: Some(s.output_throughput),
            total_token_throughput: Some(s.total_token_throughput),
            ttft_mean_ms: v(Metric::Ttft, Stat::Mean),
            ttft_p99_ms: v(Metric::Ttft, p99),
            tpot_mean_ms: v(Metric::Tpot, Stat::Mean),
            tpot_p99_ms: v(Metric::Tpot, p99),
            itl_mean_ms: v(Metric::Itl, Stat::Mean),
            itl_p99_ms: v(Metric::Itl, p99),
            e2el_mean_ms: v(Metric::E2el, Stat::Mean),
            e2el_p99_ms: v(Metric::E2el, p99),
            completed: Some(s.completed),
            failed: Some(s.failed),
            duration_s: Some(s.duration_s),
        }
    }

    /// The value of `key` if the headline has a column for it (success rate in percent);
    /// `None` for keys it does not keep and values the source did not have.
    pub fn get(&self, key: &MetricKey) -> Option<f64> {
        let mean = key.stat == Some(Stat::Mean);
        let p99 = key.stat == Some(Stat::P(99.0));
        match key.metric {
            Metric::RequestThroughput => self.request_throughput,
            Metric::OutputThroughput => self.output_throughput,
            Metric::TotalTokenThroughput => self.total_token_throughput,
            Metric::Ttft if mean => self.ttft_mean_ms,
            Metric::Ttft if p99 => self.ttft_p99_ms,
            Metric::Tpot if mean => self.tpot_mean_ms,
            Metric::Tpot if p99 => self.tpot_p99_ms,
            Metric::Itl if mean => self.itl_mean_ms,
            Metric::Itl if p99 => self.itl_p99_ms,
            Metric::E2el if mean => self.e2el_mean_ms,
            Metric::E2el if p99 => self.e2el_p99_ms,
            Metric::Completed => self.completed.map(|c| c as f64),
            Metric::Failed => self.failed.map(|f| f as f64),
            Metric::SuccessRate => self.success_rate().map(|s| s * 100.0),
            _ => None,
        }
    }

    /// Completed / (completed + failed), when both are known and not both zero.
    pub fn success_rate(&self) -> Option<f64> {
        let (c, f) = (self.completed?, self.failed?);
        (c + f > 0).then(|| c as f64 / (c + f) as f64)
    }
}

/// One run as listed: everything but the big JSON blobs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunRow {
    /// The run's id in this store.
    pub id: RunId,
    /// The user's name for the run, if given.
    pub label: Option<String>,
    /// What produced it.
    pub kind: RunKind,
    /// Where it is in its life.
    pub status: RunStatus,
    /// When it started, RFC 3339 text.
    pub started_at: String,
    /// When it finished, RFC 3339 UTC; `None` while running (or after a crash).
    pub finished_at: Option<String>,
    /// The model that served it.
    pub model: String,
    /// `servelab`, or the tool an imported run came from (`vllm`, `sglang`, `guidellm`).
    pub source: String,
    /// Its `key=value` tags.
    pub tags: Vec<(String, String)>,
    /// Its headline metrics.
    pub headline: Headline,
    /// What an imported run's file did not have (headline names, `records`, `summary`).
    pub missing: Vec<String>,
}

/// One run with its configuration and summary.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StoredRun {
    /// The run as listed.
    pub row: RunRow,
    /// How it was driven and where.
    pub config: RunSetup,
    /// The full summary, for runs servelab measured and finished.
    pub summary: Option<Summary>,
    /// The original file of an imported run.
    pub raw: Option<serde_json::Value>,
}

/// Which runs to list. Every given criterion must hold.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Filter {
    /// Every `key=value` must be a tag of the run.
    pub tags: Vec<(String, String)>,
    /// The run's model is exactly this.
    pub model: Option<String>,
    /// The run's label is exactly this.
    pub label: Option<String>,
    /// Runs started at or after this date (`YYYY-MM-DD` or RFC 3339 prefix, compared as text).
    pub since: Option<String>,
}

/// Parse `KEY=VALUE`; the key must be non-empty.
pub fn parse_tag(s: &str) -> Option<(String, String)> {
    let (k, v) = s.split_once('=')?;
    let k = k.trim();
    (!k.is_empty()).then(|| (k.to_string(), v.trim().to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use servelab_metrics::Distribution;

    #[test]
    fn tags_parse_and_reject_empty_keys() {
        assert_eq!(parse_tag("gpu=h100"), Some(("gpu".into(), "h100".into())));
        assert_eq!(parse_tag("flags=a=b"), Some(("flags".into(), "a=b".into())));
        assert_eq!(parse_tag("=x"), None);
        assert_eq!(parse_tag("novalue"), None);
    }

    #[test]
    fn success_rate_needs_both_counts() {
        let h = Headline { completed: Some(99), failed: Some(1), ..Headline::default() };
        assert_eq!(h.success_rate(), Some(0.99));
        assert_eq!(Headline::default().success_rate(), None);
        let z = Headline { completed: Some(0), failed: Some(0), ..Headline::default() };
        assert_eq!(z.success_rate(), None);
    }

    #[test]
    fn p99_found_only_when_computed() {
        let d = Distribution {
            count: 3,
            percentiles: vec![(50.0, 1.0), (99.0, 7.0)],
            ..Default::default()
        };
        assert_eq!(Stat::P(99.0).of(&d), Some(7.0));
        let d = Distribution { count: 3, percentiles: vec![(50.0, 1.0)], ..Default::default() };
        assert_eq!(Stat::P(99.0).of(&d), None);
    }

    #[test]
    fn headline_values_by_key() {
        let h = Headline {
            ttft_p99_ms: Some(9.0),
            completed: Some(3),
            failed: Some(1),
            ..Headline::default()
        };
        assert_eq!(h.get(&MetricKey::stat(Metric::Ttft, Stat::P(99.0))), Some(9.0));
        assert_eq!(h.get(&MetricKey::stat(Metric::Ttft, Stat::Median)), None);
        assert_eq!(h.get(&MetricKey::of(Metric::SuccessRate)), Some(75.0));
        assert_eq!(h.get(&MetricKey::of(Metric::Failed)), Some(1.0));
    }
}
