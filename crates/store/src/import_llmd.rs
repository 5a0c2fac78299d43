//! llm-d-benchmark's Benchmark Report v0.2 (JSON or YAML) as one imported run: what
//! inference-perf's results become in llm-d, and what `runs export --format llmd-report`
//! writes. Schema read from llm-d/llm-d-benchmark at 8bc9f1d
//! (`llmdbenchmark/analysis/benchmark_report/schema_v0_2.py`).
//!
//! Each statistic states its units: `s` and `s/token` are multiplied by 1,000, `ms` and
//! `ms/token` kept; any other unit on a latency is not imported (the figure stays missing).

use serde_json::Value;
use servelab_records::{LoadSpec, RunInfo};

use crate::import_common::{f, finish, first_str, s, u, ImportedRun, SourceTool};
use crate::model::Headline;

/// A parsed file is a Benchmark Report v0.2 (or a v0.2.x) when it says so and has results.
pub(crate) fn is_report(v: &Value) -> bool {
    let version = v.get("version").and_then(Value::as_str).unwrap_or("");
    (version == "0.2" || version.starts_with("0.2."))
        && v.get("results").is_some_and(Value::is_object)
        && v.get("run").is_some_and(Value::is_object)
}

/// A YAML report (as llm-d-benchmark writes them) as a JSON value; `None` when the text is
/// not YAML or not a report.
pub(crate) fn from_yaml(text: &str) -> Option<Value> {
    let v: Value = serde_yaml_ng::from_str(text).ok()?;
    is_report(&v).then_some(v)
}

/// `PT1H2M3.5S` (ISO 8601, as reports state a run's duration) in seconds.
pub(crate) fn iso_duration_s(d: &str) -> Option<f64> {
    let rest = d.strip_prefix("PT")?;
    let (mut total, mut num) = (0.0, String::new());
    for c in rest.chars() {
        match c {
            '0'..='9' | '.' => num.push(c),
            'H' | 'M' | 'S' => {
                let x: f64 = num.parse().ok()?;
                total += x * match c {
                    'H' => 3600.0,
                    'M' => 60.0,
                    _ => 1.0,
                };
                num.clear();
            }
            _ => return None,
        }
    }
    num.is_empty().then_some(total)
}

/// Milliseconds per unit of a latency statistic.
fn ms_per(units: &str) -> Option<f64> {
    match units {
        "ms" | "ms/token" => Some(1.0),
        "s" | "s/token" => Some(1e3),
        _ => None,
    }
}

/// `(mean, p99)` of a latency statistic, in ms.
fn latency(lat: Option<&Value>, name: &str) -> (Option<f64>, Option<f64>) {
    let Some(st) = lat.and_then(|l| l.get(name)) else { return (None, None) };
    let Some(k) = st.get("units").and_then(Value::as_str).and_then(ms_per) else {
        return (None, None);
    };
    (f(st, "mean").map(|x| x * k), f(st, "p99").map(|x| x * k))
}

/// The model the report's stack served: an inference engine's, a generic component's
/// `model.name`, else the load generator's own configuration (inference-perf's
/// `server.model_name`).
fn model(v: &Value) -> Option<String> {
    let stack = v.get("scenario")?.get("stack").and_then(Value::as_array);
    stack
        .into_iter()
        .flatten()
        .find_map(|c| first_str(c, &[&["standardized", "model", "name"]]))
        .or_else(|| {
            first_str(
                v,
                &[
                    &["scenario", "load", "native", "config", "server", "model_name"],
                    &["scenario", "load", "native", "config", "model"],
                ],
            )
        })
}

/// One report as one run.
pub(crate) fn import(v: Value, label: Option<String>) -> ImportedRun {
    let agg = v.pointer("/results/request_performance/aggregate");
    let lat = agg.and_then(|a| a.get("latency"));
    let thr = agg.and_then(|a| a.get("throughput"));
    let req = agg.and_then(|a| a.get("requests"));
    let mean = |name: &str| thr.and_then(|t| t.get(name)).and_then(|st| f(st, "mean"));
    let (ttft_mean_ms, ttft_p99_ms) = latency(lat, "time_to_first_token");
    let (tpot_mean_ms, tpot_p99_ms) = latency(lat, "time_per_output_token");
    let (itl_mean_ms, itl_p99_ms) = latency(lat, "inter_token_latency");
    let (e2el_mean_ms, e2el_p99_ms) = latency(lat, "request_latency");
    // `total` counts every request sent; `failures` (errors) and `incomplete` did not finish.
    let total = req.and_then(|r| u(r, "total"));
    let failed = req.and_then(|r| {
        let (fl, inc) = (u(r, "failures"), u(r, "incomplete"));
        (fl.is_some() || inc.is_some()).then(|| fl.unwrap_or(0).saturating_add(inc.unwrap_or(0)))
    });
    let completed = total.map(|t| t.saturating_sub(failed.unwrap_or(0)));
    let time = v.pointer("/run/time");
    let duration =
        time.and_then(|t| s(t, "duration")).and_then(|d| iso_duration_s(&d)).or_else(|| {
            let start = time.and_then(|t| s(t, "start"))?;
            let end = time.and_then(|t| s(t, "end"))?;
            Some(
                servelab_outputs::standard::unix_secs(&end)?
                    - servelab_outputs::standard::unix_secs(&start)?,
            )
        });
    let headline = Headline {
        request_throughput: mean("request_rate"),
        output_throughput: mean("output_token_rate"),
        total_token_throughput: mean("total_token_rate")
            .or_else(|| Some(mean("input_token_rate")? + mean("output_token_rate")?)),
        ttft_mean_ms,
        ttft_p99_ms,
        tpot_mean_ms,
        tpot_p99_ms,
        itl_mean_ms,
        itl_p99_ms,
        e2el_mean_ms,
        e2el_p99_ms,
        completed,
        failed,
        duration_s: duration,
    };
    let load = v.pointer("/scenario/load/standardized");
    let tool = load.and_then(|l| s(l, "tool"));
    let own = v.pointer("/scenario/load/native/config/servelab/run");
    let info = match own.and_then(|r| serde_json::from_value::<RunInfo>(r.clone()).ok()) {
        Some(info) if tool.as_deref() == Some("servelab") => info,
        _ => RunInfo {
            backend: tool.clone().unwrap_or_default(),
            model: model(&v).unwrap_or_default(),
            load: LoadSpec {
                request_rate: load.and_then(|l| f(l, "rate_qps")).filter(|r| r.is_finite()),
                max_concurrency: load
                    .and_then(|l| l.get("concurrency"))
                    .and_then(Value::as_u64)
                    .filter(|c| *c >= 1),
                ..LoadSpec::default()
            },
            started_at: time.and_then(|t| s(t, "start")).unwrap_or_default(),
            ..RunInfo::default()
        },
    };
    let mut run = finish(SourceTool::LlmdReport, label, info, headline, v);
    if let Some(t) = tool {
        run.tags.push(("tool".into(), t));
    }
    run
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iso_durations() {
        assert_eq!(iso_duration_s("PT49.5S"), Some(49.5));
        assert_eq!(iso_duration_s("PT1H2M3S"), Some(3723.0));
        assert_eq!(iso_duration_s("P1D"), None);
        assert_eq!(iso_duration_s("PT5"), None);
    }
}
