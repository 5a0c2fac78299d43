//! llm-d-benchmark's Benchmark Report, schema v0.2 (the shape inference-perf's results are
//! converted to, and what llm-d's dashboards read): one run as one report.
//!
//! Read from llm-d/llm-d-benchmark at 8bc9f1d (2026-08-21):
//! `llmdbenchmark/analysis/benchmark_report/schema_v0_2.py` and its JSON schema. Units are
//! the report's own: latencies `ms`, per-token latencies `ms/token`, rates `tokens/s` and
//! `queries/s`, lengths `count`; servelab writes milliseconds, so nothing is converted. The
//! field-by-field mapping and what has no counterpart: docs/store.md, "Standard result files".

use serde_json::{json, Map, Value};
use servelab_metrics::{Distribution, Summary};

use crate::standard::{rfc3339_secs, short_id, unix_secs, StatKeys};

/// The report schema version written.
pub const LLMD_REPORT_VERSION: &str = "0.2";

/// The percentiles a v0.2 `Statistics` object has a key for.
const NAMES: [(f64, &str); 11] = [
    (0.1, "p0p1"),
    (1.0, "p1"),
    (5.0, "p5"),
    (10.0, "p10"),
    (25.0, "p25"),
    (50.0, "p50"),
    (75.0, "p75"),
    (90.0, "p90"),
    (95.0, "p95"),
    (99.0, "p99"),
    (99.9, "p99p9"),
];

const KEYS: StatKeys = StatKeys { mean: "mean", std: "stddev", unit: "units", names: &NAMES };

fn stats(d: &Distribution, units: &str) -> Option<Value> {
    KEYS.with_unit(d, units)
}

/// A run-level rate: the report's `Statistics` with only its mean.
fn rate(v: f64, units: &str) -> Value {
    json!({"units": units, "mean": v})
}

/// Puts `(key, value)` pairs whose value exists.
fn object(pairs: Vec<(&str, Option<Value>)>) -> Value {
    Value::Object(pairs.into_iter().filter_map(|(k, v)| Some((k.to_string(), v?))).collect())
}

/// How the prompts were made, in the report's words.
fn source(dataset: &str) -> &'static str {
    match dataset {
        "" => "unknown",
        d if d.starts_with("random") => "random",
        _ => "sampled",
    }
}

/// The run as a Benchmark Report v0.2 value.
pub fn llmd_report_value(s: &Summary) -> Value {
    let i = &s.info;
    let start = unix_secs(&i.started_at);
    let time = object(vec![
        ("start", start.map(|_| i.started_at.clone().into())),
        ("end", start.map(|t| rfc3339_secs(t + s.duration_s).into())),
        ("duration", Some(format!("PT{}S", s.duration_s).into())),
    ]);
    let uid = short_id(&[&i.started_at, &i.model, &i.base_url, &i.seed.to_string()]);
    let mean_input =
        if s.completed > 0 { s.total_input_tokens as f64 / s.completed as f64 } else { 0.0 };
    let mut standardized = Map::new();
    standardized.insert("tool".into(), "servelab".into());
    standardized.insert("tool_version".into(), i.servelab_version.clone().into());
    standardized.insert("source".into(), source(&i.dataset).into());
    // servelab knows the prompts' mean length here, not their distribution's shape.
    standardized
        .insert("input_seq_len".into(), json!({"distribution": "other", "value": mean_input}));
    if let Some(r) = i.load.request_rate.filter(|r| *r > 0.0 && r.is_finite()) {
        standardized.insert("rate_qps".into(), r.into());
    }
    if let Some(c) = i.load.max_concurrency.filter(|c| *c >= 1) {
        standardized.insert("concurrency".into(), c.into());
    }
    let load = json!({
        "metadata": {"schema_version": "0.0.1", "description": i.dataset},
        "standardized": standardized,
        // servelab's own account of the run, so an import gets it back whole.
        "native": {"config": {"servelab": {"run": i}}},
    });
    let target = json!({
        "metadata": {
            "schema_version": "0.0.1",
            "label": "target",
            "cfg_id": short_id(&[&i.base_url, &i.model]),
            "description": format!("the server servelab measured ({})", i.endpoint),
        },
        "standardized": {
            "kind": "generic",
            "tool": i.backend,
            "tool_version": "",
            "model": {"name": i.model},
            "url": i.base_url,
        },
        "native": {},
    });
    let latency = object(vec![
        ("time_to_first_token", stats(&s.ttft_ms, "ms")),
        ("time_per_output_token", stats(&s.tpot_ms, "ms/token")),
        ("inter_token_latency", stats(&s.itl_ms, "ms/token")),
        ("request_latency", stats(&s.e2el_ms, "ms")),
    ]);
    json!({
        "version": LLMD_REPORT_VERSION,
        "run": {
            "uid": uid,
            "time": time,
            "description": format!("servelab {} against {}", i.dataset, i.base_url),
            "keywords": ["servelab"],
        },
        "scenario": {"stack": [target], "load": load},
        "results": {"request_performance": {"aggregate": {
            "requests": {"total": s.completed + s.failed, "failures": s.failed},
            "latency": latency,
            "throughput": {
                "input_token_rate": rate(s.input_throughput, "tokens/s"),
                "output_token_rate": rate(s.output_throughput, "tokens/s"),
                "total_token_rate": rate(s.total_token_throughput, "tokens/s"),
                "request_rate": rate(s.request_throughput, "queries/s"),
            },
        }}},
    })
}

/// The run as a Benchmark Report v0.2 JSON file (`--format llmd-report`).
pub fn render_llmd_report(s: &Summary) -> String {
    let mut out = serde_json::to_string_pretty(&llmd_report_value(s)).unwrap_or_default();
    out.push('\n');
    out
}
