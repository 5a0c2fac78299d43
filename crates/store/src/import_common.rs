//! What every importer shares: the tool a file came from, one imported run, and reading
//! figures out of a parsed file.

use serde_json::Value;
use servelab_records::RunInfo;

use crate::model::{Headline, RunSetup};

/// The tool a file came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceTool {
    /// A `vllm bench serve --save-result` JSON file.
    Vllm,
    /// SGLang `bench_serving` JSON lines, one run per line.
    Sglang,
    /// A GuideLLM JSON report, one run per benchmark in it.
    Guidellm,
    /// A servelab `--save-result` file (vLLM's keys plus a `servelab` object).
    Servelab,
    /// An llm-d-benchmark Benchmark Report (v0.2), whatever load generator it names.
    LlmdReport,
    /// AIPerf's summary JSON or per-request JSON lines.
    Aiperf,
}

impl SourceTool {
    /// The name stored as the run's source: `vllm`, `sglang`, `guidellm`, `servelab-file`,
    /// `llm-d-report` or `aiperf`.
    pub fn as_str(self) -> &'static str {
        match self {
            SourceTool::Vllm => "vllm",
            SourceTool::Sglang => "sglang",
            SourceTool::Guidellm => "guidellm",
            SourceTool::Servelab => "servelab-file",
            SourceTool::LlmdReport => "llm-d-report",
            SourceTool::Aiperf => "aiperf",
        }
    }
}

/// One run read from a file.
#[derive(Debug, Clone, PartialEq)]
pub struct ImportedRun {
    /// The tool that wrote the file.
    pub source: SourceTool,
    /// The run's label: the file's own, else the file name without its extension.
    pub label: Option<String>,
    /// The configuration, as far as the file tells it.
    pub config: RunSetup,
    /// Tags to file the run under: `source=TOOL`.
    pub tags: Vec<(String, String)>,
    /// The headline metrics the file has.
    pub headline: Headline,
    /// Headline metrics the file did not have, then `records` (imports carry no
    /// per-request records).
    pub missing: Vec<String>,
    /// The part of the file this run came from, kept verbatim.
    pub raw: Value,
}

pub(crate) fn f(v: &Value, key: &str) -> Option<f64> {
    v.get(key).and_then(Value::as_f64)
}

pub(crate) fn u(v: &Value, key: &str) -> Option<u64> {
    v.get(key).and_then(|x| x.as_u64().or_else(|| x.as_f64().map(|f| f.max(0.0) as u64)))
}

pub(crate) fn s(v: &Value, key: &str) -> Option<String> {
    v.get(key).and_then(Value::as_str).map(str::to_string)
}

/// The names of headline metrics that are `None`, then `records`.
pub fn missing(h: &Headline) -> Vec<String> {
    let named = [
        ("request_throughput", h.request_throughput.is_none()),
        ("output_throughput", h.output_throughput.is_none()),
        ("total_token_throughput", h.total_token_throughput.is_none()),
        ("ttft_mean_ms", h.ttft_mean_ms.is_none()),
        ("ttft_p99_ms", h.ttft_p99_ms.is_none()),
        ("tpot_mean_ms", h.tpot_mean_ms.is_none()),
        ("tpot_p99_ms", h.tpot_p99_ms.is_none()),
        ("itl_mean_ms", h.itl_mean_ms.is_none()),
        ("itl_p99_ms", h.itl_p99_ms.is_none()),
        ("e2el_mean_ms", h.e2el_mean_ms.is_none()),
        ("e2el_p99_ms", h.e2el_p99_ms.is_none()),
        ("completed", h.completed.is_none()),
        ("failed", h.failed.is_none()),
        ("duration_s", h.duration_s.is_none()),
    ];
    let mut out: Vec<String> =
        named.iter().filter(|(_, m)| *m).map(|(n, _)| n.to_string()).collect();
    out.push("records".into());
    out
}

pub(crate) fn finish(
    source: SourceTool,
    label: Option<String>,
    info: RunInfo,
    headline: Headline,
    raw: Value,
) -> ImportedRun {
    // The host that ran an imported benchmark is not in its file; this machine's name would
    // be a false fact.
    let config = RunSetup { info, host: String::new(), engine: None, engine_flags: None };
    let tags = vec![("source".to_string(), source.as_str().to_string())];
    ImportedRun { source, label, config, tags, missing: missing(&headline), headline, raw }
}

/// The first string found at any of these paths.
pub(crate) fn first_str(v: &Value, paths: &[&[&str]]) -> Option<String> {
    paths.iter().find_map(|p| {
        let mut cur = v;
        for k in *p {
            cur = cur.get(*k)?;
        }
        cur.as_str().map(str::to_string)
    })
}

pub(crate) fn first_f64(v: &Value, paths: &[&[&str]]) -> Option<f64> {
    paths.iter().find_map(|p| {
        let mut cur = v;
        for k in *p {
            cur = cur.get(*k)?;
        }
        cur.as_f64()
    })
}
