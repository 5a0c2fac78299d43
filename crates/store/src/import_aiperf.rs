//! AIPerf's result files as imported runs: the summary `profile_export_aiperf.json` (one run)
//! and the per-request `profile_export.jsonl` (one run of all its profiling records). Read
//! from ai-dynamo/aiperf at db4f639 (`export_models.py`, `record_models.py`,
//! `aiperf/metrics/types/`).
//!
//! Every AIPerf figure states its unit (`ns`, `us`, `ms`, `sec`); latencies become ms. Its
//! `inter_token_latency` is `(latency − TTFT) / (OSL − 1)` per request: servelab's TPOT. Its
//! `inter_chunk_latency` is the gaps between chunks, not servelab's per-token ITL, so ITL is
//! left missing.

use serde_json::Value;
use servelab_metrics::Distribution;
use servelab_records::{LoadSpec, RunInfo};

use crate::import_common::{f, finish, first_str, s, u, ImportedRun, SourceTool};
use crate::model::Headline;

/// Metrics every AIPerf summary has; an object with one of them as `{"unit": ..}` is one.
const SUMMARY_KEYS: [&str; 4] =
    ["request_throughput", "request_count", "time_to_first_token", "benchmark_duration"];

/// The parsed object is AIPerf's summary JSON.
pub(crate) fn is_summary(v: &Value) -> bool {
    SUMMARY_KEYS.iter().any(|k| v.get(*k).and_then(|m| m.get("unit")).is_some_and(Value::is_string))
}

/// The parsed line is one of AIPerf's per-request records.
pub(crate) fn is_record(v: &Value) -> bool {
    v.get("metadata").and_then(|m| m.get("request_start_ns")).is_some()
        && v.get("metrics").is_some()
}

/// Milliseconds per unit of an AIPerf time.
fn ms_per(unit: &str) -> Option<f64> {
    match unit {
        "ns" => Some(1e-6),
        "us" => Some(1e-3),
        "ms" => Some(1.0),
        "sec" | "s" => Some(1e3),
        _ => None,
    }
}

/// `stat` (`avg`, `p99`) of metric `name` of a summary, in ms when `time` (else as written).
fn summary_stat(v: &Value, name: &str, stat: &str, time: bool) -> Option<f64> {
    let m = v.get(name)?;
    let x = f(m, stat)?;
    if !time {
        return Some(x);
    }
    Some(x * ms_per(m.get("unit")?.as_str()?)?)
}

/// The summary JSON as one run.
pub(crate) fn summary(v: Value, label: Option<String>) -> ImportedRun {
    let avg = |name: &str| summary_stat(&v, name, "avg", false);
    let ms = |name: &str, stat: &str| summary_stat(&v, name, stat, true);
    let duration = ms("benchmark_duration", "avg").map(|x| x / 1e3);
    // AIPerf writes `error_request_count` only when a request failed; `error_summary` counts
    // each kind of error, and is empty when none did.
    let failed = avg("error_request_count").map(|x| x as u64).or_else(|| {
        let errors = v.get("error_summary")?.as_array()?;
        Some(errors.iter().filter_map(|e| u(e, "count")).sum())
    });
    let total = v.get("total_token_throughput").and_then(|m| f(m, "avg")).or_else(|| {
        let d = duration.filter(|d| *d > 0.0)?;
        Some((avg("total_isl")? + avg("total_osl")?) / d)
    });
    let headline = Headline {
        request_throughput: avg("request_throughput"),
        output_throughput: avg("output_token_throughput"),
        total_token_throughput: total,
        ttft_mean_ms: ms("time_to_first_token", "avg"),
        ttft_p99_ms: ms("time_to_first_token", "p99"),
        tpot_mean_ms: ms("inter_token_latency", "avg"),
        tpot_p99_ms: ms("inter_token_latency", "p99"),
        itl_mean_ms: None,
        itl_p99_ms: None,
        e2el_mean_ms: ms("request_latency", "avg"),
        e2el_p99_ms: ms("request_latency", "p99"),
        completed: avg("request_count").map(|x| x as u64),
        failed,
        duration_s: duration,
    };
    let own = v.get("servelab").and_then(|o| o.get("run"));
    let info = match own.and_then(|r| serde_json::from_value::<RunInfo>(r.clone()).ok()) {
        Some(info) => info,
        None => {
            let cfg = v.get("input_config");
            let loadgen = cfg.and_then(|c| c.get("loadgen"));
            RunInfo {
                backend: "aiperf".into(),
                model: cfg
                    .and_then(|c| c.pointer("/endpoint/model_names/0"))
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
                base_url: cfg
                    .and_then(|c| first_str(c, &[&["endpoint", "url"]]))
                    .unwrap_or_default(),
                num_prompts: loadgen.and_then(|l| u(l, "request_count")).unwrap_or(0),
                load: LoadSpec {
                    request_rate: loadgen
                        .and_then(|l| f(l, "request_rate"))
                        .filter(|r| r.is_finite()),
                    max_concurrency: loadgen.and_then(|l| u(l, "concurrency")),
                    ..LoadSpec::default()
                },
                started_at: s(&v, "start_time").unwrap_or_default(),
                ..RunInfo::default()
            }
        }
    };
    finish(SourceTool::Aiperf, label, info, headline, v)
}

/// The summary AIPerf writes beside its records (same folder).
pub(crate) const SUMMARY_FILE: &str = "profile_export_aiperf.json";

/// A run of records takes how it was driven (model, target, load) from the summary AIPerf
/// wrote beside them, when there is one: the records themselves do not say.
pub(crate) fn with_sibling_summary(run: &mut ImportedRun, records: &std::path::Path) {
    let sibling = records.with_file_name(SUMMARY_FILE);
    if run.source != SourceTool::Aiperf || !run.raw.is_array() || sibling == records {
        return;
    }
    let Some(v) = std::fs::read_to_string(&sibling)
        .ok()
        .and_then(|t| serde_json::from_str::<Value>(&t).ok())
        .filter(is_summary)
    else {
        return;
    };
    let from = summary(v, None).config.info;
    let i = &mut run.config.info;
    let started_at = std::mem::take(&mut i.started_at);
    *i = RunInfo {
        started_at: if from.started_at.is_empty() { started_at } else { from.started_at.clone() },
        ..from
    };
}

/// A per-request metric's value in ms (a time) or as written.
fn record_value(r: &Value, name: &str, time: bool) -> Option<f64> {
    let m = r.get("metrics")?.get(name)?;
    let x = f(m, "value")?;
    if !time {
        return Some(x);
    }
    Some(x * ms_per(m.get("unit")?.as_str()?)?)
}

/// The percentiles servelab summarizes by default (`--metric-percentiles`' default).
const PERCENTILES: [f64; 4] = [50.0, 90.0, 95.0, 99.0];

fn mean_p99(xs: Vec<f64>) -> (Option<f64>, Option<f64>) {
    if xs.is_empty() {
        return (None, None);
    }
    let d = Distribution::from_unsorted(xs, &PERCENTILES);
    (Some(d.mean), d.percentile(99.0))
}

/// Every profiling record of a `profile_export.jsonl` as one run, figured by AIPerf's own
/// definitions: duration from the first request start to the last request end, request
/// and token rates over it, latency statistics over the successful requests.
pub(crate) fn records(lines: Vec<Value>, label: Option<String>) -> ImportedRun {
    let profiling: Vec<&Value> = lines
        .iter()
        .filter(|r| {
            r.pointer("/metadata/benchmark_phase").and_then(Value::as_str) != Some("warmup")
        })
        .collect();
    let ok: Vec<&Value> =
        profiling.iter().copied().filter(|r| r.get("error").is_none_or(Value::is_null)).collect();
    let start =
        profiling.iter().filter_map(|r| r.pointer("/metadata/request_start_ns")?.as_i64()).min();
    let end =
        profiling.iter().filter_map(|r| r.pointer("/metadata/request_end_ns")?.as_i64()).max();
    let duration = start.zip(end).map(|(a, b)| (b - a) as f64 / 1e9).filter(|d| *d > 0.0);
    let sum = |name: &str| -> f64 { ok.iter().filter_map(|r| record_value(r, name, false)).sum() };
    let per_s = |x: f64| duration.map(|d| x / d);
    let times = |name: &str| -> Vec<f64> {
        ok.iter().filter_map(|r| record_value(r, name, true)).collect()
    };
    let (ttft_mean_ms, ttft_p99_ms) = mean_p99(times("time_to_first_token"));
    let (tpot_mean_ms, tpot_p99_ms) = mean_p99(times("inter_token_latency"));
    let (e2el_mean_ms, e2el_p99_ms) = mean_p99(times("request_latency"));
    let (isl, osl) = (sum("input_sequence_length"), sum("output_sequence_length"));
    let headline = Headline {
        request_throughput: per_s(ok.len() as f64),
        output_throughput: per_s(osl),
        total_token_throughput: per_s(isl + osl),
        ttft_mean_ms,
        ttft_p99_ms,
        tpot_mean_ms,
        tpot_p99_ms,
        itl_mean_ms: None,
        itl_p99_ms: None,
        e2el_mean_ms,
        e2el_p99_ms,
        completed: Some(ok.len() as u64),
        failed: Some((profiling.len() - ok.len()) as u64),
        duration_s: duration,
    };
    let info = RunInfo {
        backend: "aiperf".into(),
        num_prompts: profiling.len() as u64,
        started_at: start
            .map(|ns| servelab_outputs::standard::rfc3339_secs(ns as f64 / 1e9))
            .unwrap_or_default(),
        ..RunInfo::default()
    };
    finish(SourceTool::Aiperf, label, info, headline, Value::Array(lines))
}
