//! Importers: result files of other tools (and servelab's own `--save-result` JSON) become
//! stored runs with headline metrics. What a file does not have stays `None` and is named in
//! [`ImportedRun::missing`]; nothing is estimated.
//!
//! | source | shape read |
//! |---|---|
//! | `vllm bench serve --save-result` | one JSON object: `completed`, `request_throughput`, `mean_ttft_ms`, `p99_ttft_ms`, ... (JSON lines from `--append-result` too) |
//! | SGLang `bench_serving --output-file` | JSON lines: `completed`, `mean_ttft_ms`, `mean_e2e_latency_ms`, `p99_itl_ms`, ... |
//! | GuideLLM JSON report | `{"benchmarks": [{"metrics": {"time_to_first_token_ms": {"successful": {...}}, ...}}]}`, one run per benchmark |
//! | llm-d Benchmark Report v0.2 (JSON or YAML; inference-perf's results in llm-d) | `{"version": "0.2", "run": {...}, "results": {"request_performance": {"aggregate": ...}}}` (`import_llmd`) |
//! | AIPerf `profile_export_aiperf.json` | `{"request_throughput": {"unit": "requests/sec", "avg": ...}, "time_to_first_token": {"unit": "ms", ...}}` (`import_aiperf`) |
//! | AIPerf `profile_export.jsonl` | one `{"metadata": {"request_start_ns": ...}, "metrics": {...}, "error": ...}` per request, one run of them all |

use std::path::Path;

use serde_json::Value;
use servelab_records::{LoadSpec, Ramp, RampStrategy, RunInfo};

use crate::import_common::{f, finish, first_f64, first_str, s, u};
pub use crate::import_common::{ImportedRun, SourceTool};
use crate::model::Headline;

/// A result file that could not be imported.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file, as given.
        path: String,
        /// The file system's error.
        source: std::io::Error,
    },
    /// The text is not a result file of a known tool.
    #[error("{path}: {message}; expected a vllm bench serve --save-result JSON, SGLang bench_serving JSONL, a GuideLLM JSON report, an llm-d Benchmark Report v0.2 or AIPerf's profile_export_aiperf.json / profile_export.jsonl")]
    Format {
        /// The file (or name) the text came from.
        path: String,
        /// What is wrong with it, and where.
        message: String,
    },
    /// A result file whose figures cannot be (a negative or non-whole count, a negative
    /// latency).
    #[error("{path}: {message}; nothing was imported")]
    Figure {
        /// The file (or name) the text came from.
        path: String,
        /// The key, its value and why it cannot be.
        message: String,
    },
}

/// Read every run in the file at `path`.
pub fn import_file(path: &Path) -> Result<Vec<ImportedRun>, ImportError> {
    let name = path.display().to_string();
    let text = std::fs::read_to_string(path)
        .map_err(|source| ImportError::Read { path: name.clone(), source })?;
    let mut runs = parse_result_text(&text, &name)?;
    for r in &mut runs {
        crate::import_aiperf::with_sibling_summary(r, path);
    }
    Ok(runs)
}

/// Read every run in a file's text; `name` is used in errors and as the default label. A
/// run without a single figure (`{}`, an unrelated JSON object) is refused, not stored empty.
pub fn parse_result_text(text: &str, name: &str) -> Result<Vec<ImportedRun>, ImportError> {
    let runs = parse_runs(text, name)?;
    for (i, r) in runs.iter().enumerate() {
        if let Err(message) = check_figures(r) {
            let which = if runs.len() == 1 { String::new() } else { format!("run {}: ", i + 1) };
            return Err(ImportError::Figure {
                path: name.to_string(),
                message: format!("{which}{message}"),
            });
        }
    }
    if let Some(i) = runs.iter().position(|r| r.headline == Headline::default()) {
        let which = if runs.len() == 1 { String::new() } else { format!("run {} ", i + 1) };
        return Err(ImportError::Format {
            path: name.to_string(),
            message: format!(
                "{which}has none of a result's figures (throughputs, latencies, request counts)"
            ),
        });
    }
    Ok(runs)
}

/// The largest count a file may state: JSON numbers above 2^53 are no longer whole, and no
/// benchmark sends that many requests.
const MAX_COUNT: f64 = 9_007_199_254_740_992.0;

/// Keys that hold counts, at a run object's top level or in GuideLLM's `request_totals`.
const COUNT_KEYS: [&str; 10] = [
    "completed",
    "failed",
    "num_prompts",
    "total_input_tokens",
    "total_output_tokens",
    "max_concurrency",
    "successful",
    "errored",
    "incomplete",
    "total",
];

/// A run whose file states what cannot be (`"failed": -1`, `"completed": 1e308`, a
/// negative latency) is refused with the key and value, rather than stored clamped.
fn check_figures(r: &ImportedRun) -> Result<(), String> {
    let objects = [
        Some(&r.raw),
        r.raw.get("request_totals"),
        r.raw.get("metrics").and_then(|m| m.get("request_totals")),
    ];
    for o in objects.into_iter().flatten() {
        for key in COUNT_KEYS {
            let Some(x) = o.get(key).filter(|x| x.is_number()) else { continue };
            let ok = x.as_u64().is_some_and(|n| n as f64 <= MAX_COUNT)
                || x.as_f64().is_some_and(|v| v >= 0.0 && v.fract() == 0.0 && v <= MAX_COUNT);
            if !ok {
                return Err(format!(
                    "\"{key}\" is {x}: a count must be a whole number from 0 to 2^53"
                ));
            }
        }
    }
    let h = &r.headline;
    let figures = [
        ("request_throughput", h.request_throughput),
        ("output_throughput", h.output_throughput),
        ("total_token_throughput", h.total_token_throughput),
        ("ttft_mean_ms", h.ttft_mean_ms),
        ("ttft_p99_ms", h.ttft_p99_ms),
        ("tpot_mean_ms", h.tpot_mean_ms),
        ("tpot_p99_ms", h.tpot_p99_ms),
        ("itl_mean_ms", h.itl_mean_ms),
        ("itl_p99_ms", h.itl_p99_ms),
        ("e2el_mean_ms", h.e2el_mean_ms),
        ("e2el_p99_ms", h.e2el_p99_ms),
        ("duration_s", h.duration_s),
    ];
    if let Some((key, v)) =
        figures.iter().find_map(|(k, v)| Some((k, (*v)?)).filter(|(_, v)| *v < 0.0))
    {
        return Err(format!("{key} is {v}: a throughput, latency or duration cannot be negative"));
    }
    Ok(())
}

/// Python's `json` writes `Infinity`, `-Infinity` and `NaN` (SGLang's `"request_rate":
/// Infinity`, its default), which JSON does not have. Outside strings they become `"inf"`,
/// `"-inf"` (read as "no rate": all at once) and `null` (missing).
fn python_json(text: &str) -> std::borrow::Cow<'_, str> {
    if !(text.contains("Infinity") || text.contains("NaN")) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let (mut in_string, mut escaped) = (false, false);
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        if in_string {
            in_string = escaped || c != '"';
            escaped = !escaped && c == '\\';
        } else if c == '"' {
            in_string = true;
        } else {
            let swap = [("-Infinity", "\"-inf\""), ("Infinity", "\"inf\""), ("NaN", "null")]
                .into_iter()
                .find(|(token, _)| rest.starts_with(token));
            if let Some((token, json)) = swap {
                out.push_str(json);
                rest = &rest[token.len()..];
                continue;
            }
        }
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    std::borrow::Cow::Owned(out)
}

fn parse_runs(text: &str, name: &str) -> Result<Vec<ImportedRun>, ImportError> {
    let text = &*python_json(text);
    let bad = |message: String| ImportError::Format { path: name.to_string(), message };
    let label = Path::new(name).file_stem().map(|s| s.to_string_lossy().into_owned());
    if let Ok(Value::Object(_)) = serde_json::from_str::<Value>(text) {
        let v: Value = serde_json::from_str(text).map_err(|e| bad(e.to_string()))?;
        if crate::import_llmd::is_report(&v) {
            return Ok(vec![crate::import_llmd::import(v, label)]);
        }
        if crate::import_aiperf::is_summary(&v) {
            return Ok(vec![crate::import_aiperf::summary(v, label)]);
        }
        if crate::import_aiperf::is_record(&v) {
            return Ok(vec![crate::import_aiperf::records(vec![v], label)]);
        }
        if let Some(benchmarks) = v.get("benchmarks").and_then(Value::as_array) {
            let runs: Vec<ImportedRun> =
                benchmarks.iter().map(|b| guidellm(&v, b, label.clone())).collect();
            if runs.is_empty() {
                return Err(bad("the GuideLLM report has no benchmarks".into()));
            }
            return Ok(runs);
        }
        return Ok(vec![one_object(v, label)]);
    }
    if let Some(v) = crate::import_llmd::from_yaml(text) {
        return Ok(vec![crate::import_llmd::import(v, label)]);
    }
    let mut runs = Vec::new();
    let mut aiperf = Vec::new();
    for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        match serde_json::from_str::<Value>(line) {
            Ok(v @ Value::Object(_)) if crate::import_aiperf::is_record(&v) => aiperf.push(v),
            Ok(v @ Value::Object(_)) => runs.push(one_object(v, label.clone())),
            Ok(_) => return Err(bad(format!("line {} is not a JSON object", i + 1))),
            Err(e) => return Err(bad(format!("line {}: {e}", i + 1))),
        }
    }
    if !aiperf.is_empty() {
        if !runs.is_empty() {
            return Err(bad("AIPerf records mixed with other result lines".into()));
        }
        return Ok(vec![crate::import_aiperf::records(aiperf, label)]);
    }
    if runs.is_empty() {
        return Err(bad("the file is empty".into()));
    }
    Ok(runs)
}

/// A flat vLLM/servelab or SGLang result object.
fn one_object(v: Value, label: Option<String>) -> ImportedRun {
    let is_sglang = v.get("mean_e2e_latency_ms").is_some() && v.get("mean_e2el_ms").is_none();
    if is_sglang {
        sglang(v, label)
    } else {
        vllm(v, label)
    }
}

/// `"inf"` or a number.
fn rate(v: &Value, key: &str) -> Option<f64> {
    f(v, key).filter(|r| r.is_finite())
}

/// vLLM's `YYYYmmdd-HHMMSS` as RFC 3339; anything else unchanged.
pub fn rfc3339_from_vllm(date: &str) -> String {
    let b = date.as_bytes();
    let digits =
        |r: std::ops::Range<usize>| b.get(r).is_some_and(|d| d.iter().all(u8::is_ascii_digit));
    if b.len() == 15 && digits(0..8) && b[8] == b'-' && digits(9..15) {
        format!(
            "{}-{}-{}T{}:{}:{}Z",
            &date[0..4],
            &date[4..6],
            &date[6..8],
            &date[9..11],
            &date[11..13],
            &date[13..15]
        )
    } else {
        date.to_string()
    }
}

/// vLLM's `ramp_up_strategy`, `ramp_up_start_rps`, `ramp_up_end_rps` (written when the run
/// ramped its rate; `request_rate` is then "inf").
fn ramp(v: &Value) -> Option<Ramp> {
    let strategy = match s(v, "ramp_up_strategy")?.as_str() {
        "linear" => RampStrategy::Linear,
        "exponential" => RampStrategy::Exponential,
        _ => return None,
    };
    Ramp::new(strategy, f(v, "ramp_up_start_rps")?, f(v, "ramp_up_end_rps")?).ok()
}

fn vllm(v: Value, label: Option<String>) -> ImportedRun {
    let source = if v.get("servelab").is_some() { SourceTool::Servelab } else { SourceTool::Vllm };
    let run = v.get("servelab").and_then(|s| s.get("run"));
    let info = match run.and_then(|r| serde_json::from_value::<RunInfo>(r.clone()).ok()) {
        Some(info) => info,
        None => RunInfo {
            backend: s(&v, "backend").unwrap_or_default(),
            model: s(&v, "model_id").unwrap_or_default(),
            tokenizer: s(&v, "tokenizer_id"),
            num_prompts: u(&v, "num_prompts").unwrap_or(0),
            load: LoadSpec {
                request_rate: rate(&v, "request_rate"),
                burstiness: f(&v, "burstiness").unwrap_or(1.0),
                max_concurrency: u(&v, "max_concurrency"),
                ..LoadSpec::default()
            },
            ramp: ramp(&v),
            started_at: s(&v, "date").map(|d| rfc3339_from_vllm(&d)).unwrap_or_default(),
            servelab_version: String::new(),
            ..RunInfo::default()
        },
    };
    let completed = u(&v, "completed");
    // Older vLLM files have no `failed`; `num_prompts − completed` is what failed then.
    let failed = u(&v, "failed").or_else(|| Some(u(&v, "num_prompts")?.saturating_sub(completed?)));
    let headline = Headline {
        request_throughput: f(&v, "request_throughput"),
        output_throughput: f(&v, "output_throughput"),
        total_token_throughput: f(&v, "total_token_throughput"),
        ttft_mean_ms: f(&v, "mean_ttft_ms"),
        ttft_p99_ms: f(&v, "p99_ttft_ms"),
        tpot_mean_ms: f(&v, "mean_tpot_ms"),
        tpot_p99_ms: f(&v, "p99_tpot_ms"),
        itl_mean_ms: f(&v, "mean_itl_ms"),
        itl_p99_ms: f(&v, "p99_itl_ms"),
        e2el_mean_ms: f(&v, "mean_e2el_ms"),
        e2el_p99_ms: f(&v, "p99_e2el_ms"),
        completed,
        failed,
        duration_s: f(&v, "duration"),
    };
    let label = s(&v, "label").or(label);
    finish(source, label, info, headline, v)
}

/// SGLang's dataset as servelab labels it: its random dataset with the lengths and range its
/// file states (`random(1024:1024, ratio 0.8 sglang)`: its convention, [L × R, L], R 0 when
/// absent, as its default), else the file's `dataset_name`.
fn sglang_dataset(v: &Value) -> String {
    let name = s(v, "dataset_name").unwrap_or_default();
    let (Some(input_len), Some(output_len)) = (u(v, "random_input_len"), u(v, "random_output_len"))
    else {
        return name;
    };
    let range = servelab_plan::LengthRange::Below(f(v, "random_range_ratio").unwrap_or(0.0));
    if name != "random" || input_len == 0 || output_len == 0 || range.check().is_err() {
        return name;
    }
    servelab_plan::DatasetSpec::Random { input_len, output_len, range, prefix_len: 0 }.label()
}

fn sglang(v: Value, label: Option<String>) -> ImportedRun {
    let info = RunInfo {
        backend: s(&v, "backend").unwrap_or_default(),
        model: s(&v, "model_id").or_else(|| s(&v, "model")).unwrap_or_default(),
        dataset: sglang_dataset(&v),
        load: LoadSpec {
            request_rate: rate(&v, "request_rate"),
            max_concurrency: u(&v, "max_concurrency"),
            ..LoadSpec::default()
        },
        ..RunInfo::default()
    };
    let total = f(&v, "total_throughput")
        .or_else(|| Some(f(&v, "input_throughput")? + f(&v, "output_throughput")?));
    let headline = Headline {
        request_throughput: f(&v, "request_throughput"),
        output_throughput: f(&v, "output_throughput"),
        total_token_throughput: total,
        ttft_mean_ms: f(&v, "mean_ttft_ms"),
        ttft_p99_ms: f(&v, "p99_ttft_ms"),
        tpot_mean_ms: f(&v, "mean_tpot_ms"),
        tpot_p99_ms: f(&v, "p99_tpot_ms"),
        itl_mean_ms: f(&v, "mean_itl_ms"),
        itl_p99_ms: f(&v, "p99_itl_ms"),
        e2el_mean_ms: f(&v, "mean_e2e_latency_ms"),
        e2el_p99_ms: f(&v, "p99_e2e_latency_ms"),
        completed: u(&v, "completed"),
        // bench_serving counts only successes; failures are not in its output.
        failed: None,
        duration_s: f(&v, "duration"),
    };
    finish(SourceTool::Sglang, label, info, headline, v)
}

/// `metrics.<name>.successful` of a GuideLLM benchmark.
fn successful<'a>(b: &'a Value, name: &str) -> Option<&'a Value> {
    b.get("metrics")?.get(name)?.get("successful")
}

/// A distribution's p99: `percentiles.p99` (GuideLLM ≥ 0.3) or a flat `p99`.
fn dist_p99(d: &Value) -> Option<f64> {
    d.get("percentiles").and_then(|p| f(p, "p99")).or_else(|| f(d, "p99"))
}

fn guidellm(report: &Value, b: &Value, label: Option<String>) -> ImportedRun {
    let mean = |name: &str| successful(b, name).and_then(|d| f(d, "mean"));
    let p99 = |name: &str| successful(b, name).and_then(dist_p99);
    // GuideLLM 0.3 keeps the counts at the benchmark's level; other versions in `metrics`.
    let totals = b.get("request_totals").or_else(|| b.get("metrics")?.get("request_totals"));
    let completed = totals.and_then(|t| u(t, "successful"));
    // Saturating: the counts are the file's, and a file can say anything.
    let failed =
        totals.and_then(|t| Some(u(t, "errored")?.saturating_add(u(t, "incomplete").unwrap_or(0))));
    let start = first_f64(b, &[&["start_time"]]);
    let end = first_f64(b, &[&["end_time"]]);
    let duration = first_f64(b, &[&["duration"]]).or_else(|| Some(end? - start?));
    // Request latency is in seconds in GuideLLM reports.
    let secs_to_ms = |x: Option<f64>| x.map(|s| s * 1e3);
    let headline = Headline {
        request_throughput: mean("requests_per_second"),
        output_throughput: mean("output_tokens_per_second"),
        total_token_throughput: mean("tokens_per_second"),
        ttft_mean_ms: mean("time_to_first_token_ms"),
        ttft_p99_ms: p99("time_to_first_token_ms"),
        // GuideLLM's `inter_token_latency_ms` is per request `(last − first token) / (n − 1)`:
        // servelab's TPOT (docs/metrics.md), not its per-token ITL. Its
        // `time_per_output_token_ms` divides the whole request time, first token included, by
        // the output tokens: neither, so it is not imported.
        tpot_mean_ms: mean("inter_token_latency_ms"),
        tpot_p99_ms: p99("inter_token_latency_ms"),
        itl_mean_ms: None,
        itl_p99_ms: None,
        e2el_mean_ms: secs_to_ms(mean("request_latency")),
        e2el_p99_ms: secs_to_ms(p99("request_latency")),
        completed,
        failed,
        duration_s: duration,
    };
    let strategy = [&["config", "strategy"][..], &["args", "strategy"][..], &["strategy"][..]]
        .iter()
        .find_map(|p| {
            let mut cur = b;
            for k in *p {
                cur = cur.get(*k)?;
            }
            Some(cur)
        });
    let streams = strategy.and_then(|st| u(st, "streams"));
    let rate =
        strategy.and_then(|st| f(st, "rate")).or_else(|| first_f64(b, &[&["config", "rate"]]));
    let model = first_str(
        b,
        &[&["worker", "backend_model"], &["config", "model"], &["args", "model"], &["model"]],
    )
    .or_else(|| first_str(report, &[&["args", "model"], &["config", "model"]]))
    .unwrap_or_default();
    let info = RunInfo {
        backend: "guidellm".into(),
        base_url: first_str(b, &[&["worker", "backend_target"], &["config", "target"]])
            .unwrap_or_default(),
        model,
        load: LoadSpec {
            request_rate: rate.filter(|r| r.is_finite()),
            max_concurrency: streams,
            ..LoadSpec::default()
        },
        started_at: String::new(),
        ..RunInfo::default()
    };
    finish(SourceTool::Guidellm, label, info, headline, b.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::import_common::missing;

    #[test]
    fn vllm_dates_become_rfc3339() {
        assert_eq!(rfc3339_from_vllm("20261121-114912"), "2026-11-21T11:49:12Z");
        assert_eq!(rfc3339_from_vllm("yesterday"), "yesterday");
    }

    #[test]
    fn python_infinity_and_nan_import() {
        // SGLang writes its default rate as a bare Infinity; strings keep the word.
        let text = r#"{"backend": "sglang", "request_rate": Infinity, "mean_e2e_latency_ms": 5.0,
            "output_throughput": NaN, "request_throughput": 2.0, "note": "NaN Infinity \" x"}"#;
        let run = &parse_result_text(text, "s.jsonl").unwrap()[0];
        assert_eq!(run.config.info.load.request_rate, None);
        assert_eq!(run.headline.output_throughput, None);
        assert_eq!(run.headline.request_throughput, Some(2.0));
        assert_eq!(
            python_json(r#"{"a": "Infinity", "b": -Infinity}"#),
            r#"{"a": "Infinity", "b": "-inf"}"#
        );
    }

    #[test]
    fn huge_guidellm_counts_are_refused() {
        // Found by the property test: errored + incomplete overflowed. Such a count is no
        // count at all: refused, naming the key.
        let text = r#"{"benchmarks": [{"metrics": {"request_totals":
            {"successful": 1, "errored": 18446744073709551615, "incomplete": 5}}}]}"#;
        let e = parse_result_text(text, "g.json").unwrap_err().to_string();
        assert!(
            e.contains("\"errored\" is 18446744073709551615: a count must be a whole number"),
            "{e}"
        );
    }

    /// Issue 28 item 10: impossible counts were stored (as -1, or clamped).
    #[test]
    fn impossible_counts_and_negative_figures_are_refused() {
        let e = parse_result_text(r#"{"completed": 1e308, "failed": -1}"#, "x.json")
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with(
                "x.json: \"completed\" is 1e+308: a count must be a whole number from 0 to 2^53"
            ),
            "{e}"
        );
        let e = parse_result_text(r#"{"completed": 3, "failed": -1}"#, "x.json").unwrap_err();
        assert!(e.to_string().contains("\"failed\" is -1"), "{e}");
        let e = parse_result_text(r#"{"completed": 2.5}"#, "x.json").unwrap_err();
        assert!(e.to_string().contains("\"completed\" is 2.5"), "{e}");
        let e =
            parse_result_text(r#"{"completed": 3, "mean_ttft_ms": -4.0}"#, "x.json").unwrap_err();
        assert!(
            e.to_string().contains(
                "ttft_mean_ms is -4: a throughput, latency or duration cannot be negative"
            ),
            "{e}"
        );
        assert!(parse_result_text(r#"{"completed": 3.0, "failed": 0}"#, "x.json").is_ok());
    }

    /// Issue 25 item 12: GuideLLM 0.3 puts `request_totals` beside `metrics`, and its
    /// `time_per_output_token_ms` is not TPOT.
    #[test]
    fn guidellm_0_3_counts_at_benchmark_level_and_no_tpot() {
        let text = r#"{"benchmarks": [{
            "request_totals": {"successful": 95, "errored": 3, "incomplete": 2, "total": 100},
            "metrics": {
                "time_to_first_token_ms": {"successful": {"mean": 40.0, "percentiles": {"p99": 90.0}}},
                "time_per_output_token_ms": {"successful": {"mean": 12.0, "percentiles": {"p99": 20.0}}},
                "inter_token_latency_ms": {"successful": {"mean": 10.0, "percentiles": {"p99": 15.0}}}
            }}]}"#;
        let r = &parse_result_text(text, "g.json").unwrap()[0];
        assert_eq!((r.headline.completed, r.headline.failed), (Some(95), Some(5)));
        // TPOT is GuideLLM's inter_token_latency_ms (10/15), never time_per_output_token_ms
        // (12/20); servelab's per-token ITL is not in the file.
        assert_eq!((r.headline.tpot_mean_ms, r.headline.tpot_p99_ms), (Some(10.0), Some(15.0)));
        assert_eq!(r.headline.itl_mean_ms, None);
        assert!(r.missing.contains(&"itl_mean_ms".to_string()));
    }

    #[test]
    fn a_file_without_figures_is_refused() {
        for text in ["{}", "{\"model_id\": \"m\"}", "{\"a\":1}\n{\"completed\":3}"] {
            let e = parse_result_text(text, "x.json").unwrap_err().to_string();
            assert!(e.contains("has none of a result's figures"), "{e}");
        }
        assert!(parse_result_text("{\"completed\": 3}", "x.json").is_ok());
    }

    #[test]
    fn missing_names_every_none_then_records() {
        let h = Headline { request_throughput: Some(1.0), ..Headline::default() };
        let m = missing(&h);
        assert_eq!(m.len(), 14);
        assert_eq!(m[0], "output_throughput");
        assert_eq!(m.last().map(String::as_str), Some("records"));
    }

    #[test]
    fn garbage_is_a_format_error_naming_the_file() {
        let e = parse_result_text("not json", "x.json").unwrap_err();
        assert!(e.to_string().starts_with("x.json: line 1"), "{e}");
        let e = parse_result_text("[1,2]", "y.json").unwrap_err();
        assert!(e.to_string().contains("not a JSON object"), "{e}");
    }
}
