//! Standard result files of other tools: a servelab run through each export and back (the
//! figures each format carries come back exactly), and hand-written files of each format
//! (testdata/standard-files) imported with the values they state, checked against their
//! schemas.

use std::path::PathBuf;

use serde_json::Value;
use servelab_metrics::{summarize, MetricsConfig, Summary};
use servelab_outputs::{render_aiperf_records, render_aiperf_summary, render_llmd_report};
use servelab_records::{
    Chunk, ChunkKind, FailureKind, LoadSpec, Outcome, RequestRecord, RunInfo, Usage,
};
use servelab_store::{import_file, parse_result_text, Headline, SourceTool, Store};

const MS: u64 = 1_000_000;

/// Request `i`: sent at 40·i ms, first token after 20 + 5·i ms, then `n − 1` more one token
/// apart by 3 + i ms; request 5 fails with HTTP 503.
fn record(i: u64, n: u64) -> RequestRecord {
    let start = 40 * i * MS;
    let ttft = (20 + 5 * i) * MS;
    let gap = (3 + i) * MS;
    let chunks: Vec<Chunk> = (0..n)
        .map(|k| Chunk {
            t_ns: start + ttft + k * gap,
            kind: ChunkKind::Content,
            text: "x".into(),
            tokens: Some(1),
        })
        .collect();
    let failed = i == 5;
    RequestRecord {
        index: i,
        warmup: false,
        scheduled_ns: start,
        intended_ns: start,
        sent_ns: start + 100_000,
        prompt_tokens: Some(100 + i),
        max_tokens: Some(n),
        usage: (!failed).then_some(Usage {
            prompt_tokens: 100 + i,
            completion_tokens: n,
            reasoning_tokens: None,
        }),
        chunks: if failed { vec![] } else { chunks },
        end_ns: Some(start + ttft + (n - 1) * gap + MS),
        status: Some(if failed { 503 } else { 200 }),
        outcome: if failed {
            Outcome::Failure { kind: FailureKind::HttpStatus, message: "HTTP 503".into() }
        } else {
            Outcome::Success
        },
        server: None,
        read_lag_ns: None,
        retries: 0,
        session: None,
        stream: Default::default(),
    }
}

fn run() -> Summary {
    let records: Vec<RequestRecord> = (0..8).map(|i| record(i, 4 + i % 3)).collect();
    let info = RunInfo {
        backend: "vllm".into(),
        base_url: "http://gpu-host:8000".into(),
        endpoint: "/v1/completions".into(),
        model: "Qwen/Qwen3-8B".into(),
        dataset: "random(100:4)".into(),
        num_prompts: 8,
        load: LoadSpec {
            request_rate: Some(25.0),
            max_concurrency: Some(4),
            ..LoadSpec::default()
        },
        seed: 3,
        started_at: "2026-11-21T10:00:00Z".into(),
        servelab_version: "0.1.0".into(),
        ..RunInfo::default()
    };
    summarize(&records, &info, &MetricsConfig::default())
}

fn testdata(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata/standard-files").join(name)
}

fn validate(schema: &str, v: &Value) {
    let text = std::fs::read_to_string(testdata(schema)).unwrap();
    let validator = jsonschema::validator_for(&serde_json::from_str(&text).unwrap()).unwrap();
    let errors: Vec<String> = validator.iter_errors(v).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "{schema}: {errors:#?}");
}

fn close(a: Option<f64>, b: f64) {
    let a = a.unwrap_or(f64::NAN);
    assert!((a - b).abs() <= 1e-9 * b.abs().max(1.0), "{a} vs {b}");
}

#[test]
fn a_run_comes_back_whole_from_an_llmd_report() {
    let s = run();
    assert_eq!((s.completed, s.failed), (7, 1));
    let runs = parse_result_text(&render_llmd_report(&s), "run.json").unwrap();
    assert_eq!(runs.len(), 1);
    let r = &runs[0];
    assert_eq!(r.source, SourceTool::LlmdReport);
    assert_eq!(r.config.info, s.info);
    // Every headline figure the report carries, to the bit: counts, throughputs, the mean
    // and p99 of TTFT, TPOT, per-token ITL and E2E (ms, unconverted), the duration.
    assert_eq!(r.headline, Headline::from_summary(&s));
    assert_eq!(r.headline.completed, Some(7));
    assert_eq!(
        r.tags,
        vec![("source".into(), "llm-d-report".into()), ("tool".into(), "servelab".into())]
    );
    assert_eq!(r.missing, vec!["records".to_string()]);
}

#[test]
fn a_run_comes_back_from_aiperf_s_summary_without_per_token_itl() {
    let s = run();
    let text = render_aiperf_summary(&s);
    let runs = parse_result_text(&text, "profile_export_aiperf.json").unwrap();
    let r = &runs[0];
    assert_eq!(r.source, SourceTool::Aiperf);
    assert_eq!(r.config.info, s.info);
    let want = Headline { itl_mean_ms: None, itl_p99_ms: None, ..Headline::from_summary(&s) };
    // total_token_throughput is (total_isl + total_osl) / benchmark_duration.
    let total = r.headline.total_token_throughput;
    assert_eq!(
        Headline { total_token_throughput: want.total_token_throughput, ..r.headline },
        want
    );
    close(total, s.total_token_throughput);
    assert_eq!(r.missing, vec!["itl_mean_ms", "itl_p99_ms", "records"]);
}

#[test]
fn a_run_comes_back_from_aiperf_s_records() {
    let s = run();
    let text = render_aiperf_records(&s);
    let runs = parse_result_text(&text, "profile_export.jsonl").unwrap();
    assert_eq!(runs.len(), 1, "all the records are one run");
    let r = &runs[0];
    let h = Headline::from_summary(&s);
    assert_eq!((r.headline.completed, r.headline.failed), (Some(7), Some(1)));
    // The same per-request values in the same order: the same means and percentiles.
    for (got, want) in [
        (r.headline.ttft_mean_ms, h.ttft_mean_ms),
        (r.headline.ttft_p99_ms, h.ttft_p99_ms),
        (r.headline.tpot_mean_ms, h.tpot_mean_ms),
        (r.headline.tpot_p99_ms, h.tpot_p99_ms),
        (r.headline.e2el_mean_ms, h.e2el_mean_ms),
        (r.headline.e2el_p99_ms, h.e2el_p99_ms),
    ] {
        assert_eq!(got, want);
    }
    // Unix nanoseconds round each instant to the nanosecond.
    close(r.headline.duration_s, s.duration_s);
    close(r.headline.request_throughput, s.request_throughput);
    close(r.headline.output_throughput, s.output_throughput);
    close(r.headline.total_token_throughput, s.total_token_throughput);
    assert_eq!(r.headline.itl_mean_ms, None);
    assert_eq!(r.config.info.started_at, "2026-11-21T10:00:00Z");
    assert_eq!(r.config.info.num_prompts, 8);
    // In an artifacts folder, the records take the run's setup from the summary beside them.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("profile_export.jsonl"), &text).unwrap();
    std::fs::write(dir.path().join("profile_export_aiperf.json"), render_aiperf_summary(&s))
        .unwrap();
    let r = &import_file(&dir.path().join("profile_export.jsonl")).unwrap()[0];
    assert_eq!(r.config.info, s.info);
    assert_eq!(r.headline.completed, Some(7));
}

#[test]
fn an_inference_perf_report_in_yaml_imports_in_ms() {
    let path = testdata("inference-perf-br-v0.2.yaml");
    let v: Value = serde_yaml_ng::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    validate("llmd-br-v0.2.schema.json", &v);
    let runs = import_file(&path).unwrap();
    let r = &runs[0];
    assert_eq!(r.source.as_str(), "llm-d-report");
    assert!(r.tags.contains(&("tool".into(), "inference-perf".into())));
    let i = &r.config.info;
    assert_eq!((i.model.as_str(), i.backend.as_str()), ("Qwen/Qwen3-8B", "inference-perf"));
    assert_eq!(i.load.request_rate, Some(2.0));
    assert_eq!(i.load.max_concurrency, None, "concurrency .inf: no cap");
    assert_eq!(i.started_at, "2026-11-20T09:00:00Z");
    let h = &r.headline;
    // Seconds become milliseconds.
    close(h.ttft_mean_ms, 45.0);
    close(h.ttft_p99_ms, 90.0);
    close(h.tpot_mean_ms, 12.0);
    close(h.tpot_p99_ms, 20.0);
    close(h.itl_mean_ms, 11.5);
    close(h.itl_p99_ms, 25.0);
    close(h.e2el_mean_ms, 2500.0);
    close(h.e2el_p99_ms, 4000.0);
    assert_eq!((h.completed, h.failed), (Some(98), Some(2)));
    assert_eq!(h.request_throughput, Some(1.96));
    assert_eq!(h.output_throughput, Some(392.0));
    assert_eq!(h.total_token_throughput, Some(1960.0 + 392.0));
    assert_eq!(h.duration_s, Some(50.0));
    assert_eq!(r.missing, vec!["records".to_string()]);
}

#[test]
fn an_aiperf_summary_imports_with_its_units() {
    let path = testdata("aiperf-profile_export_aiperf.json");
    validate(
        "aiperf-summary.schema.json",
        &serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap(),
    );
    let r = &import_file(&path).unwrap()[0];
    assert_eq!(r.source.as_str(), "aiperf");
    let i = &r.config.info;
    assert_eq!((i.model.as_str(), i.base_url.as_str()), ("Qwen/Qwen3-8B", "http://dynamo:8000"));
    assert_eq!((i.load.max_concurrency, i.num_prompts), (Some(16), 100));
    let h = &r.headline;
    assert_eq!((h.request_throughput, h.output_throughput), (Some(9.5), Some(950.0)));
    assert_eq!(h.total_token_throughput, Some((47_500.0 + 9_500.0) / 10.0));
    assert_eq!((h.ttft_mean_ms, h.ttft_p99_ms), (Some(120.0), Some(260.0)));
    assert_eq!((h.tpot_mean_ms, h.tpot_p99_ms), (Some(7.5), Some(12.5)));
    assert_eq!((h.e2el_mean_ms, h.e2el_p99_ms), (Some(850.0), Some(1400.0)));
    assert_eq!((h.completed, h.failed, h.duration_s), (Some(95), Some(5), Some(10.0)));
    assert_eq!(r.missing, vec!["itl_mean_ms", "itl_p99_ms", "records"]);
}

#[test]
fn aiperf_records_import_as_one_run_by_aiperf_s_definitions() {
    let path = testdata("aiperf-profile_export.jsonl");
    let text = std::fs::read_to_string(&path).unwrap();
    for line in text.lines() {
        validate("aiperf-record.schema.json", &serde_json::from_str(line).unwrap());
    }
    let runs = import_file(&path).unwrap();
    assert_eq!(runs.len(), 1);
    let h = &runs[0].headline;
    // Three successes, one failure, from the first start to the last end: 2 s.
    assert_eq!((h.completed, h.failed, h.duration_s), (Some(3), Some(1), Some(2.0)));
    assert_eq!(h.request_throughput, Some(1.5));
    assert_eq!(h.output_throughput, Some((41.0 + 41.0 + 71.0) / 2.0));
    assert_eq!(h.total_token_throughput, Some((300.0 + 153.0) / 2.0));
    // TTFT 100 ms, 200 ms and 300,000,000 ns; numpy's linear p99 of three values.
    close(h.ttft_mean_ms, 200.0);
    close(h.ttft_p99_ms, 298.0);
    close(h.tpot_mean_ms, 40.0 / 3.0);
    close(h.tpot_p99_ms, 19.8);
    close(h.e2el_mean_ms, 2500.0 / 3.0);
    close(h.e2el_p99_ms, 1000.0);
    assert_eq!(runs[0].config.info.started_at, "2026-11-22T09:00:00Z");
}

#[test]
fn imported_files_are_stored_with_their_provenance() {
    let mut store = Store::open_in_memory().unwrap();
    for name in ["inference-perf-br-v0.2.yaml", "aiperf-profile_export_aiperf.json"] {
        let lines = store.import_into(&testdata(name), None, &[]).unwrap();
        assert_eq!(lines.len(), 1);
    }
    let rows = store.list(&servelab_store::Filter::default()).unwrap();
    let sources: Vec<&str> = rows.iter().map(|r| r.source.as_str()).collect();
    assert!(sources.contains(&"llm-d-report") && sources.contains(&"aiperf"), "{sources:?}");
    let llmd = rows.iter().find(|r| r.source == "llm-d-report").unwrap();
    assert!(llmd.tags.contains(&("tool".into(), "inference-perf".into())));
    assert_eq!(llmd.label.as_deref(), Some("inference-perf-br-v0.2"));
}
