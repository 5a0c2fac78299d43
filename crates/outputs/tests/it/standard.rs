//! The standard files of other tools (llm-d's Benchmark Report v0.2, AIPerf's summary JSON
//! and per-request JSON lines): snapshots of each on the fixed summary, each checked against
//! its schema (testdata/standard-files), and the unit rules the report's schema leaves to its
//! pydantic validators.

use serde_json::Value;
use servelab_outputs::{render_run, RunFormat};

use crate::render::fixture;

fn schema(name: &str) -> jsonschema::Validator {
    let path = format!("{}/../../testdata/standard-files/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap();
    jsonschema::validator_for(&serde_json::from_str(&text).unwrap()).unwrap()
}

fn valid(validator: &jsonschema::Validator, v: &Value) {
    let errors: Vec<String> = validator.iter_errors(v).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "{errors:#?}\n{v:#}");
}

/// The units llm-d's validators accept for each figure (schema_v0_2.py `check_units`).
fn units_allowed(section: &str, name: &str) -> &'static [&'static str] {
    match (section, name) {
        ("latency", "time_to_first_token" | "request_latency") => &["ms", "s"],
        ("latency", _) => &["ms/token", "s/token"],
        ("throughput", "request_rate") => &["queries/s"],
        ("throughput", _) => &["tokens/s"],
        _ => &["count", "pixels"],
    }
}

#[test]
fn llmd_report_is_valid_v0_2_and_snapshots() {
    let s = fixture();
    let text = render_run(&s, &[], RunFormat::LlmdReport);
    let v: Value = serde_json::from_str(&text).unwrap();
    valid(&schema("llmd-br-v0.2.schema.json"), &v);
    let agg = &v["results"]["request_performance"]["aggregate"];
    for section in ["latency", "throughput"] {
        for (name, st) in agg[section].as_object().unwrap() {
            let units = st["units"].as_str().unwrap();
            assert!(units_allowed(section, name).contains(&units), "{section}.{name}: {units}");
        }
    }
    // Exact figures, in the report's ms: the summary's own.
    assert_eq!(agg["requests"]["total"], 5);
    assert_eq!(agg["requests"]["failures"], 2);
    assert_eq!(agg["latency"]["time_to_first_token"]["mean"], s.ttft_ms.mean);
    assert_eq!(agg["latency"]["time_to_first_token"]["p99"], s.ttft_ms.percentiles[2].1);
    assert_eq!(agg["latency"]["time_to_first_token"]["p50"], s.ttft_ms.median);
    // 90 and 99 are the fixture's percentiles; 95 was not computed, so it is not written.
    assert!(agg["latency"]["time_to_first_token"].get("p95").is_none());
    assert_eq!(v["run"]["time"]["duration"], format!("PT{}S", s.duration_s));
    insta::assert_snapshot!("llmd_report", text);
}

#[test]
fn aiperf_summary_is_valid_and_snapshots() {
    let s = fixture();
    let text = render_run(&s, &[], RunFormat::Aiperf);
    let v: Value = serde_json::from_str(&text).unwrap();
    valid(&schema("aiperf-summary.schema.json"), &v);
    assert_eq!(v["request_count"]["avg"], 3);
    assert_eq!(v["error_request_count"]["avg"], 2);
    assert_eq!(v["time_to_first_token"]["unit"], "ms");
    assert_eq!(v["inter_token_latency"]["avg"], s.tpot_ms.mean);
    assert_eq!(v["inter_chunk_latency"]["avg"], s.itl_chunk_ms.mean);
    assert_eq!(v["benchmark_duration"], serde_json::json!({"unit": "sec", "avg": s.duration_s}));
    insta::assert_snapshot!("aiperf_summary", text);
}

#[test]
fn aiperf_records_are_valid_lines_and_snapshot() {
    let s = fixture();
    let text = render_run(&s, &[], RunFormat::AiperfJsonl);
    let validator = schema("aiperf-record.schema.json");
    let lines: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 5);
    for l in &lines {
        valid(&validator, l);
    }
    // Request 1 (index 1): intended at 0 ms of a run started 2026-11-21T12:00:00Z, ended at
    // 420 ms; its TTFT 120 ms and its chunk gaps 100 and 200 ms.
    let m = &lines[0]["metadata"];
    assert_eq!(m["request_start_ns"], 1_795_262_400_000_000_000_i64);
    assert_eq!(m["request_end_ns"], 1_795_262_400_420_000_000_i64);
    assert_eq!(lines[0]["metrics"]["time_to_first_token"]["value"], 120.0);
    assert_eq!(
        lines[0]["metrics"]["inter_chunk_latency"]["value"],
        serde_json::json!([100.0, 200.0])
    );
    assert_eq!(lines[3]["error"]["code"], 503);
    insta::assert_snapshot!("aiperf_records", text);
}
