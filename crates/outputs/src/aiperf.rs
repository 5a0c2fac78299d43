//! AIPerf's result files: the summary `profile_export_aiperf.json` and the per-request
//! `profile_export.jsonl`, so a servelab run opens in what reads AIPerf's artifacts.
//!
//! Read from ai-dynamo/aiperf at db4f639 (2025-10-10): `aiperf/common/models/export_models.py`
//! (`JsonExportData`, `JsonMetricResult`), `record_models.py` (`MetricRecordInfo`,
//! `MetricRecordMetadata`), the metric definitions in `aiperf/metrics/types/` and
//! `docs/tutorials/working-with-profile-exports.md`. AIPerf's display units: latencies `ms`,
//! durations `sec`, rates `requests/sec` and `tokens/sec`, timestamps `*_ns` in Unix
//! nanoseconds. Its `inter_token_latency` is per request `(latency − TTFT) / (OSL − 1)`:
//! servelab's TPOT; its `inter_chunk_latency` is the gaps between chunks: servelab's per-chunk
//! ITL. The mapping: docs/store.md, "Standard result files".

use serde_json::{json, Map, Value};
use servelab_metrics::pareto::interactivity;
use servelab_metrics::{Distribution, RequestRow, Summary};

use crate::standard::{rfc3339_secs, unix_secs, StatKeys};

/// The percentiles AIPerf's `JsonMetricResult` has a key for.
const NAMES: [(f64, &str); 9] = [
    (1.0, "p1"),
    (5.0, "p5"),
    (10.0, "p10"),
    (25.0, "p25"),
    (50.0, "p50"),
    (75.0, "p75"),
    (90.0, "p90"),
    (95.0, "p95"),
    (99.0, "p99"),
];

const KEYS: StatKeys = StatKeys { mean: "avg", std: "std", unit: "unit", names: &NAMES };

fn stats(d: &Distribution, unit: &str) -> Option<Value> {
    KEYS.with_unit(d, unit)
}

/// A run-level figure: AIPerf writes it as a result with only `avg`.
fn scalar(v: impl Into<Value>, unit: &str) -> Value {
    json!({"unit": unit, "avg": v.into()})
}

/// The run as AIPerf's summary JSON value (`profile_export_aiperf.json`).
pub fn aiperf_summary_value(s: &Summary) -> Value {
    let i = &s.info;
    let mut m = Map::new();
    let mut put = |k: &str, v: Option<Value>| {
        if let Some(v) = v {
            m.insert(k.into(), v);
        }
    };
    put("request_throughput", Some(scalar(s.request_throughput, "requests/sec")));
    put("request_latency", stats(&s.e2el_ms, "ms"));
    put("request_count", Some(scalar(s.completed, "requests")));
    // AIPerf has this metric only when a request failed.
    put("error_request_count", (s.failed > 0).then(|| scalar(s.failed, "requests")));
    put("time_to_first_token", stats(&s.ttft_ms, "ms"));
    put("inter_token_latency", stats(&s.tpot_ms, "ms"));
    put("inter_chunk_latency", stats(&s.itl_chunk_ms, "ms"));
    put("output_token_throughput", Some(scalar(s.output_throughput, "tokens/sec")));
    put("total_osl", Some(scalar(s.total_output_tokens, "tokens")));
    put("total_isl", Some(scalar(s.total_input_tokens, "tokens")));
    put("benchmark_duration", Some(scalar(s.duration_s, "sec")));
    // Over the completed requests that had reasoning, as AIPerf's reasoning metrics are.
    if let Some(r) = &s.reasoning {
        put("reasoning_token_count", stats(&r.reasoning_tokens, "tokens"));
        put("total_reasoning_tokens", Some(scalar(r.total_reasoning_tokens, "tokens")));
    }
    let mut loadgen = Map::new();
    loadgen.insert("request_count".into(), i.num_prompts.into());
    loadgen.insert("warmup_request_count".into(), i.num_warmups.into());
    if let Some(c) = i.load.max_concurrency {
        loadgen.insert("concurrency".into(), c.into());
    }
    if let Some(r) = i.load.request_rate.filter(|r| r.is_finite()) {
        loadgen.insert("request_rate".into(), r.into());
    }
    put(
        "input_config",
        Some(json!({
            "endpoint": {"model_names": [i.model], "url": i.base_url, "streaming": true},
            "loadgen": loadgen,
        })),
    );
    put("was_cancelled", Some(i.interrupted.into()));
    let errors: Vec<Value> = s
        .failures
        .iter()
        .map(|g| {
            json!({
                "error_details": {
                    "code": null,
                    "type": g.kind.as_str(),
                    "message": g.messages.first().cloned().unwrap_or_default(),
                },
                "count": g.count,
            })
        })
        .collect();
    put("error_summary", Some(errors.into()));
    if let Some(t) = unix_secs(&i.started_at) {
        put("start_time", Some(i.started_at.clone().into()));
        put("end_time", Some(rfc3339_secs(t + s.duration_s).into()));
    }
    // JsonExportData allows extra keys: servelab's account of the run, for a round trip.
    put("servelab", Some(json!({"run": i})));
    Value::Object(m)
}

/// The run as AIPerf's summary JSON file (`--format aiperf`).
pub fn render_aiperf_summary(s: &Summary) -> String {
    let mut out = serde_json::to_string_pretty(&aiperf_summary_value(s)).unwrap_or_default();
    out.push('\n');
    out
}

/// A run-relative instant (ms) as Unix nanoseconds from the run's start (`start_ns`).
fn ns(start_ns: i64, ms: f64) -> i64 {
    start_ns + (ms * 1e6).round() as i64
}

fn metric(v: impl Into<Value>, unit: &str) -> Value {
    json!({"value": v.into(), "unit": unit})
}

/// One request as an AIPerf `MetricRecordInfo`.
fn record(r: &RequestRow, start_ns: i64) -> Value {
    let mut m = Map::new();
    let mut put = |k: &str, v: Option<Value>| {
        if let Some(v) = v {
            m.insert(k.into(), v);
        }
    };
    let error = if r.is_success() {
        put("input_sequence_length", r.prompt_tokens.map(|t| metric(t, "tokens")));
        put("time_to_first_token", r.ttft_ms.map(|t| metric(t, "ms")));
        put("request_latency", r.e2el_ms.map(|t| metric(t, "ms")));
        put("output_sequence_length", r.output_tokens.map(|t| metric(t, "tokens")));
        // AIPerf's output tokens leave the reasoning out; its sequence length counts both.
        if let Some(p) = &r.reasoning {
            put("reasoning_token_count", p.reasoning_tokens.map(|t| metric(t, "tokens")));
            put("output_token_count", p.answer_tokens.map(|t| metric(t, "tokens")));
        }
        put(
            "inter_chunk_latency",
            (!r.itl_chunk_ms.is_empty()).then(|| metric(r.itl_chunk_ms.clone(), "ms")),
        );
        put("inter_token_latency", r.tpot_ms.map(|t| metric(t, "ms")));
        put(
            "output_token_throughput_per_user",
            r.tpot_ms.and_then(interactivity).map(|v| metric(v, "tokens/sec/user")),
        );
        Value::Null
    } else {
        put("error_isl", r.prompt_tokens.map(|t| metric(t, "tokens")));
        json!({
            "code": r.status,
            "type": r.outcome,
            "message": r.error.clone().unwrap_or_default(),
        })
    };
    let (session, turn) = r.session.map_or((r.index, 0), |s| (s.session, s.turn));
    json!({
        "metadata": {
            "session_num": session,
            "x_request_id": null,
            "x_correlation_id": null,
            "conversation_id": null,
            "turn_index": turn,
            "request_start_ns": ns(start_ns, r.intended_ms),
            "request_ack_ns": null,
            "request_end_ns": ns(start_ns, r.end_ms.unwrap_or(r.intended_ms)),
            "worker_id": "servelab",
            "record_processor_id": "servelab",
            "benchmark_phase": "profiling",
            "was_cancelled": false,
            "cancellation_time_ns": null,
        },
        "metrics": m,
        "error": error,
    })
}

/// Every measured request as one AIPerf record a line (`profile_export.jsonl`,
/// `--format aiperf-jsonl`). Request start is the intended send, from which servelab
/// measures; Unix times count from the run's `started_at`.
pub fn render_aiperf_records(s: &Summary) -> String {
    let start_ns = unix_secs(&s.info.started_at).map_or(0, |t| (t * 1e9).round() as i64);
    let mut out = String::new();
    for r in &s.requests {
        out.push_str(&record(r, start_ns).to_string());
        out.push('\n');
    }
    out
}
