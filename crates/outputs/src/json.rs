//! The `--save-result` JSON: vLLM's keys for every field both tools have, servelab's own
//! fields under `"servelab"`. Shape: `docs/schema/servelab-result-v1.schema.json`.

use serde_json::{json, Map, Value};
use servelab_metrics::{Distribution, RequestRow, Summary};
use servelab_records::RequestRecord;

use crate::fmt::pct_word;

/// Version of the `"servelab"` object; bump on any incompatible change.
pub const SCHEMA_VERSION: u64 = 1;

/// vLLM writes its date as `%Y%m%d-%H%M%S`; ours comes as RFC 3339. Anything that is not
/// `YYYY-MM-DDTHH:MM:SS...` is passed through unchanged.
pub fn vllm_date(rfc3339: &str) -> String {
    let digits: String = rfc3339.chars().take(19).filter(|c| c.is_ascii_digit()).collect();
    let shaped = rfc3339.len() >= 19
        && rfc3339.is_char_boundary(19)
        && digits.len() == 14
        && matches!(rfc3339.as_bytes().get(10), Some(b'T' | b't' | b' '));
    if shaped {
        format!("{}-{}", &digits[..8], &digits[8..])
    } else {
        rfc3339.to_string()
    }
}

/// Inserts `mean_X_ms`, `median_X_ms`, `std_X_ms` and `pN_X_ms` as vLLM does.
fn put_latency(m: &mut Map<String, Value>, name: &str, d: &Distribution) {
    m.insert(format!("mean_{name}_ms"), json!(d.mean));
    m.insert(format!("median_{name}_ms"), json!(d.median));
    m.insert(format!("std_{name}_ms"), json!(d.std));
    for (p, v) in &d.percentiles {
        m.insert(format!("p{}_{name}_ms", pct_word(*p)), json!(v));
    }
}

/// Delivered against configured load and the steady state, as `servelab_metrics::load`
/// serializes it, with the steady distributions in servelab's own shape.
fn load_value(l: &servelab_metrics::LoadSummary) -> Value {
    let mut v = serde_json::to_value(l).unwrap_or(Value::Null);
    if let (Some(f), Some(steady)) =
        (l.steady_figures(), v.get_mut("steady").and_then(Value::as_object_mut))
    {
        for (k, d) in f.distributions() {
            steady.remove(&format!("{k}_ms"));
            steady.insert(k.into(), distribution(d));
        }
    }
    v
}

/// A distribution in servelab's own shape.
fn distribution(d: &Distribution) -> Value {
    let pcts: Vec<Value> = d.percentiles.iter().map(|(p, v)| json!({"p": p, "value": v})).collect();
    json!({
        "count": d.count, "mean": d.mean, "median": d.median, "std": d.std,
        "min": d.min, "max": d.max, "percentiles": pcts,
    })
}

fn secs(ms: Option<f64>) -> f64 {
    ms.unwrap_or(0.0) / 1e3
}

/// vLLM's per-request arrays (seconds; 0 / empty for failed requests, as vLLM fills them).
fn put_detailed(m: &mut Map<String, Value>, rows: &[RequestRow]) {
    let ok = |r: &RequestRow| r.is_success();
    m.insert("input_lens".into(), rows.iter().map(|r| r.prompt_tokens.unwrap_or(0)).collect());
    m.insert(
        "output_lens".into(),
        rows.iter().map(|r| if ok(r) { r.output_tokens.unwrap_or(0) } else { 0 }).collect(),
    );
    m.insert(
        "ttfts".into(),
        rows.iter().map(|r| if ok(r) { secs(r.ttft_ms) } else { 0.0 }).collect(),
    );
    m.insert(
        "itls".into(),
        rows.iter()
            .map(|r| {
                let gaps =
                    if ok(r) { r.itl_chunk_ms.iter().map(|g| g / 1e3).collect() } else { vec![] };
                Value::from(gaps)
            })
            .collect(),
    );
    m.insert("start_times".into(), rows.iter().map(|r| r.sent_ms / 1e3).collect());
    m.insert("errors".into(), rows.iter().map(|r| r.error.clone().unwrap_or_default()).collect());
}

/// servelab's own fields.
fn servelab(s: &Summary) -> Value {
    let dists: Map<String, Value> =
        s.distributions().into_iter().map(|(k, d)| (k.to_string(), distribution(d))).collect();
    let mut v = json!({
        "schema_version": SCHEMA_VERSION,
        "servelab_version": s.info.servelab_version,
        "run": s.info,
        "percentiles": s.percentiles,
        "slo": s.slo,
        "window_s": s.window_ns as f64 / 1e9,
        "duration_s": s.duration_s,
        "retokenized_output_tokens": s.retokenized_output_tokens,
        "input_throughput": s.input_throughput,
        "peak_output_throughput": s.peak_output_throughput,
        "output_tokens_per_window": s.output_tokens_per_window,
        "peak_concurrency": s.peak_concurrency,
        "mean_concurrency": s.mean_concurrency,
        "distributions": dists,
        "failures": s.failures,
        "warnings": s.warnings,
    });
    // Only servers that report their own timings (llama.cpp) add this object.
    if let (Some(sv), Some(m)) = (&s.server, v.as_object_mut()) {
        m.insert(
            "server".into(),
            json!({
                "requests": sv.requests,
                "server_prompt": distribution(&sv.server_prompt_ms),
                "ttft_outside_prompt": distribution(&sv.ttft_outside_prompt_ms),
                "server_tpot": distribution(&sv.server_tpot_ms),
            }),
        );
    }
    // Only servers with a Prometheus /metrics of a known engine add this object.
    if let (Some(e), Some(m)) = (&s.engine, v.as_object_mut()) {
        m.insert("engine".into(), json!(e));
    }
    // Only runs with --gpu-metrics or --gpu-hourly-cost add this object.
    if let (Some(g), Some(m)) = (&s.gpu, v.as_object_mut()) {
        m.insert("gpu".into(), json!(g));
    }
    // Only the in-process simulator's own log adds this object.
    if let (Some(t), Some(m)) = (&s.truth, v.as_object_mut()) {
        m.insert("truth".into(), json!(t));
    }
    // Only multi-turn runs add this object.
    if let (Some(ss), Some(m)) = (&s.sessions, v.as_object_mut()) {
        let turns: Vec<Value> = ss
            .by_turn
            .iter()
            .map(|t| {
                json!({
                    "turn": t.turn,
                    "requests": t.requests,
                    "failed": t.failed,
                    "mean_prompt_tokens": t.mean_prompt_tokens,
                    "ttft": distribution(&t.ttft_ms),
                })
            })
            .collect();
        m.insert(
            "sessions".into(),
            json!({
                "sessions": ss.sessions,
                "completed": ss.completed,
                "cut": ss.cut,
                "turns": ss.turns,
                "mean_turns": ss.mean_turns,
                "session_latency": distribution(&ss.session_latency_ms),
                "by_turn": turns,
            }),
        );
    }
    // Only runs with reasoning add this object.
    if let (Some(r), Some(m)) = (&s.reasoning, v.as_object_mut()) {
        let mut o = json!({
            "requests": r.requests,
            "total_reasoning_tokens": r.total_reasoning_tokens,
            "total_answer_tokens": r.total_answer_tokens,
        });
        if let Some(o) = o.as_object_mut() {
            for (k, d) in r.distributions() {
                o.insert(k.into(), distribution(d));
            }
        }
        m.insert("reasoning".into(), o);
    }
    // Runs summarized from their records add this object (docs/metrics.md, "Delivered load").
    if let (Some(l), Some(m)) = (&s.load, v.as_object_mut()) {
        m.insert("load".into(), load_value(l));
    }
    // Only trace replays add this object.
    if let (Some(r), Some(m)) = (&s.replay, v.as_object_mut()) {
        m.insert("replay".into(), json!({"rows": r.rows, "behind": distribution(&r.behind_ms)}));
    }
    if let (true, Some(m)) = (s.retries > 0, v.as_object_mut()) {
        m.insert("retries".into(), json!(s.retries));
    }
    v
}

/// The result object. With `detailed`, vLLM's `--save-detailed` per-request arrays are added
/// (`input_lens`, `output_lens`, `ttfts`, `itls`, `start_times`, `errors`).
pub fn result_value(s: &Summary, detailed: bool) -> Value {
    let i = &s.info;
    let mut m = Map::new();
    m.insert("date".into(), json!(vllm_date(&i.started_at)));
    m.insert("endpoint_type".into(), json!(i.backend));
    m.insert("backend".into(), json!(i.backend));
    m.insert("label".into(), Value::Null);
    m.insert("model_id".into(), json!(i.model));
    m.insert("tokenizer_id".into(), json!(i.tokenizer.clone().unwrap_or_else(|| i.model.clone())));
    m.insert("num_prompts".into(), json!(i.num_prompts));
    m.insert("request_rate".into(), i.load.request_rate.map_or(json!("inf"), |r| json!(r)));
    m.insert("burstiness".into(), json!(i.load.burstiness));
    m.insert("max_concurrency".into(), json!(i.load.max_concurrency));
    // vLLM's keys for a ramped rate; `request_rate` stays "inf" there as in vLLM's files.
    if let Some(r) = &i.ramp {
        m.insert("ramp_up_strategy".into(), json!(r.strategy));
        m.insert("ramp_up_start_rps".into(), json!(r.start_rps));
        m.insert("ramp_up_end_rps".into(), json!(r.end_rps));
    }
    m.insert("duration".into(), json!(s.duration_s));
    m.insert("completed".into(), json!(s.completed));
    m.insert("failed".into(), json!(s.failed));
    m.insert("total_input_tokens".into(), json!(s.total_input_tokens));
    m.insert("total_output_tokens".into(), json!(s.total_output_tokens));
    m.insert("request_throughput".into(), json!(s.request_throughput));
    m.insert("request_goodput".into(), json!(s.request_goodput));
    m.insert("output_throughput".into(), json!(s.output_throughput));
    m.insert("total_token_throughput".into(), json!(s.total_token_throughput));
    m.insert("max_output_tokens_per_s".into(), json!(s.peak_output_throughput));
    m.insert("max_concurrent_requests".into(), json!(s.peak_concurrency));
    m.insert(
        "latencies".into(),
        s.requests.iter().map(|r| if r.is_success() { secs(r.e2el_ms) } else { 0.0 }).collect(),
    );
    m.insert("queue_times".into(), s.requests.iter().map(|r| r.client_queue_ms / 1e3).collect());
    if detailed {
        put_detailed(&mut m, &s.requests);
    }
    put_latency(&mut m, "ttft", &s.ttft_ms);
    put_latency(&mut m, "tpot", &s.tpot_ms);
    put_latency(&mut m, "itl", &s.itl_ms);
    put_latency(&mut m, "e2el", &s.e2el_ms);
    m.insert("servelab".into(), servelab(s));
    Value::Object(m)
}

/// The result as one JSON line (vLLM's `--append-result` appends such lines).
pub fn render_json(s: &Summary, detailed: bool) -> String {
    let mut out = result_value(s, detailed).to_string();
    out.push('\n');
    out
}

/// [`render_json`], and with `detailed` also vLLM's `generated_texts` (each measured
/// request's reasoning and content text, in index order, like the other arrays).
pub fn render(s: &Summary, records: &[RequestRecord], detailed: bool) -> String {
    let mut v = result_value(s, detailed);
    if detailed {
        let mut measured: Vec<&RequestRecord> = records.iter().filter(|r| !r.warmup).collect();
        measured.sort_by_key(|r| r.index);
        let texts: Vec<Value> = measured.iter().map(|r| Value::from(r.output_text())).collect();
        if let Some(m) = v.as_object_mut() {
            m.insert("generated_texts".into(), Value::from(texts));
        }
    }
    let mut out = v.to_string();
    out.push('\n');
    out
}

/// One JSON object per measured request, one per line (`--save-detailed`).
pub fn render_jsonl_records(s: &Summary) -> String {
    let mut out = String::new();
    for r in &s.requests {
        out.push_str(&serde_json::to_string(r).unwrap_or_default());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_take_vllm_shape() {
        assert_eq!(vllm_date("2026-11-21T11:49:12Z"), "20261121-114912");
        assert_eq!(vllm_date("2026-11-21T11:49:12.123+00:00"), "20261121-114912");
        assert_eq!(vllm_date("yesterday"), "yesterday");
        assert_eq!(vllm_date(""), "");
    }
}
