//! Renderer tests: vLLM's reference block byte for byte, snapshots of every renderer on a
//! fixed summary, and the JSON checked against the shipped schema.

use servelab_metrics::{summarize, Distribution, MetricsConfig, Slo, Summary};
use servelab_outputs::*;
use servelab_records::{
    Chunk, ChunkKind, FailureKind, LoadSpec, Outcome, RequestRecord, RunInfo, Usage,
};

const MS: u64 = 1_000_000;

fn chunk(t_ms: u64, kind: ChunkKind, text: &str, tokens: u32) -> Chunk {
    Chunk { t_ns: t_ms * MS, kind, text: text.into(), tokens: Some(tokens) }
}

fn record(index: u64, intended_ms: u64, end_ms: u64, chunks: Vec<Chunk>) -> RequestRecord {
    RequestRecord {
        index,
        warmup: false,
        scheduled_ns: intended_ms * MS,
        intended_ns: intended_ms * MS,
        sent_ns: intended_ms * MS + 250_000,
        prompt_tokens: Some(32),
        max_tokens: Some(8),
        usage: None,
        chunks,
        end_ns: Some(end_ms * MS),
        status: Some(200),
        outcome: Outcome::Success,
        server: None,
        // The client handled each response's bytes at most 0.05 × index ms after arrival.
        read_lag_ns: Some(index * 50_000),
        retries: 0,
        session: None,
        stream: Default::default(),
    }
}

fn info() -> RunInfo {
    RunInfo {
        backend: "openai-chat".into(),
        base_url: "http://127.0.0.1:8000".into(),
        endpoint: "/v1/chat/completions".into(),
        model: "sim/tiny".into(),
        tokenizer: None,
        dataset: "random".into(),
        num_prompts: 5,
        load: LoadSpec {
            request_rate: Some(4.0),
            burstiness: 1.0,
            max_concurrency: Some(3),
            duration_s: None,
        },
        ramp: None,
        num_warmups: 1,
        seed: 7,
        simulated: true,
        started_at: "2026-11-21T12:00:00Z".into(),
        servelab_version: "0.1.0".into(),
        interrupted: false,
        shard: None,
        gpus: None,
    }
}

fn fixture_records() -> Vec<RequestRecord> {
    fixture_parts().0
}

/// Hand-made run: a warm-up, three completed requests (one with multi-token chunks, one with
/// reasoning, one whose usage disagrees with its chunk counts) and two failures.
pub(crate) fn fixture() -> Summary {
    let (records, cfg) = fixture_parts();
    summarize(&records, &info(), &cfg)
}

fn fixture_parts() -> (Vec<RequestRecord>, MetricsConfig) {
    use ChunkKind::{Content, Reasoning};
    let mut warm = record(0, 0, 900, vec![chunk(500, Content, "w", 1)]);
    warm.warmup = true;
    let a = record(
        1,
        0,
        420,
        vec![
            chunk(120, Content, "Hello", 1),
            chunk(220, Content, " big world", 3),
            chunk(420, Content, "!", 1),
        ],
    );
    let mut b = record(
        2,
        250,
        1_250,
        vec![
            chunk(450, Reasoning, "hmm", 2),
            chunk(850, Content, "ok", 1),
            chunk(1_250, Content, ".", 1),
        ],
    );
    b.scheduled_ns = 200 * MS;
    b.usage = Some(Usage { prompt_tokens: 40, completion_tokens: 5, reasoning_tokens: Some(2) });
    let c =
        record(3, 500, 1_600, vec![chunk(700, Content, "a", 1), chunk(1_600, Content, "bc", 2)]);
    let mut d = record(4, 750, 1_000, vec![]);
    d.outcome = Outcome::Failure {
        kind: FailureKind::HttpStatus,
        message: "HTTP 503: {\"error\": \"overloaded, retry\"}\nsecond line".into(),
    };
    d.status = Some(503);
    let mut e = record(5, 1_000, 2_000, vec![chunk(1_300, Content, "x", 1)]);
    e.outcome =
        Outcome::Failure { kind: FailureKind::Timeout, message: "no byte for 0.7 s".into() };
    let cfg = MetricsConfig {
        percentiles: vec![50.0, 90.0, 99.0],
        goodput: Some(Slo { ttft_ms: Some(250.0), tpot_ms: Some(300.0), ..Slo::default() }),
        window_ns: 1_000_000_000,
    };
    (vec![warm, a, b, c, d, e], cfg)
}

fn dist(mean: f64, median: f64, p99: f64) -> Distribution {
    Distribution {
        count: 1,
        mean,
        median,
        std: 0.0,
        min: mean,
        max: mean,
        percentiles: vec![(99.0, p99)],
    }
}

/// The summary behind shared/reference/summary-vllm-bench-serve.txt (first block).
fn reference_summary() -> Summary {
    let cfg = MetricsConfig { percentiles: vec![99.0], ..MetricsConfig::default() };
    let mut s = summarize(&[], &RunInfo::default(), &cfg);
    s.completed = 1;
    s.failed = 0;
    s.duration_s = 6.684;
    s.total_input_tokens = 1024;
    s.total_output_tokens = 128;
    s.request_throughput = 1.0 / 6.684;
    s.output_throughput = 128.0 / 6.684;
    s.peak_output_throughput = 20.0;
    s.peak_concurrency = 1;
    s.total_token_throughput = 172.39;
    s.ttft_ms = dist(83.91, 83.91, 83.91);
    s.tpot_ms = dist(51.95, 51.95, 51.95);
    s.itl_ms = dist(51.95, 51.75, 55.0);
    s.e2el_ms = dist(6_681.6, 6_681.6, 6_681.6);
    s
}

const REFERENCE: &str = "\
============ Serving Benchmark Result ============
Successful requests:                     1         
Failed requests:                         0         
Benchmark duration (s):                  6.68      
Total input tokens:                      1024      
Total generated tokens:                  128       
Request throughput (req/s):              0.15      
Output token throughput (tok/s):         19.15     
Peak output token throughput (tok/s):    20.00     
Peak concurrent requests:                1.00      
Total token throughput (tok/s):          172.39    
---------------Time to First Token----------------
Mean TTFT (ms):                          83.91     
Median TTFT (ms):                        83.91     
P99 TTFT (ms):                           83.91     
-----Time per Output Token (excl. 1st token)------
Mean TPOT (ms):                          51.95     
Median TPOT (ms):                        51.95     
P99 TPOT (ms):                           51.95     
---------------Inter-token Latency----------------
Mean ITL (ms):                           51.95     
Median ITL (ms):                         51.75     
P99 ITL (ms):                            55.00     
";

#[test]
fn vllm_block_matches_the_reference_byte_for_byte() {
    // The reference file, when present, must agree with the copy above.
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/reference/summary-vllm-bench-serve.txt"
    );
    if let Ok(file) = std::fs::read_to_string(path) {
        assert!(file.starts_with(REFERENCE), "reference file changed");
    }
    let block = vllm_block(&reference_summary());
    // vLLM prints E2EL only when selected; servelab always prints it after ITL.
    let e2el = "\
----------------End-to-end Latency----------------
Mean E2EL (ms):                          6681.60   
Median E2EL (ms):                        6681.60   
P99 E2EL (ms):                           6681.60   
==================================================
";
    assert_eq!(block, format!("{REFERENCE}{e2el}"));
    // With vLLM's default `--percentile-metrics ttft,tpot,itl`, exactly vLLM's block.
    let sections = LatencySection::parse_list("itl,TTFT, tpot").unwrap();
    assert_eq!(sections, [LatencySection::Ttft, LatencySection::Tpot, LatencySection::Itl]);
    let vllm_default = vllm_block_with(&reference_summary(), &sections);
    assert_eq!(vllm_default, format!("{REFERENCE}{}\n", "=".repeat(50)));
    let only_e2el = vllm_block_with(&reference_summary(), &[LatencySection::E2el]);
    assert!(only_e2el.contains("E2EL") && !only_e2el.contains("TTFT (ms)"), "{only_e2el}");
    assert!(LatencySection::parse_list("ttft,goodput").unwrap_err().contains("goodput"));
    assert!(LatencySection::parse_list(" , ").is_err());
}

#[test]
fn optional_vllm_lines_appear_in_vllm_order() {
    let s = fixture();
    let text = vllm_block(&s);
    let labels: Vec<&str> = text.lines().map(|l| l.split(':').next().unwrap_or("")).collect();
    let pos = |l: &str| labels.iter().position(|x| *x == l).unwrap_or(usize::MAX);
    assert!(pos("Failed requests") < pos("Maximum request concurrency"));
    assert!(pos("Maximum request concurrency") < pos("Request rate configured (RPS)"));
    assert!(pos("Request rate configured (RPS)") < pos("Benchmark duration (s)"));
    assert!(pos("Request throughput (req/s)") < pos("Request goodput (req/s)"));
    assert!(pos("Request goodput (req/s)") < pos("Output token throughput (tok/s)"));
    assert!(text.contains("P90 TTFT (ms):"));
    assert!(!text.contains("NaN"));
}

#[test]
fn text_snapshot() {
    insta::assert_snapshot!("text", render_text(&fixture()));
}

/// Issue 25 item 7: SGLang's block names the backend the user typed.
#[test]
fn the_sglang_block_prints_the_backend_given() {
    let s = fixture();
    assert!(servelab_outputs::sglang_block(&s)
        .contains("Backend:                                 openai-chat\n"));
    let b = servelab_outputs::sglang_block_as(&s, "vllm");
    assert!(b.contains("Backend:                                 vllm\n"), "{b}");
}

/// Issue 25 item 14: every section printed Median and P50, the same figure twice.
#[test]
fn the_median_is_not_repeated_as_p50() {
    let s = fixture();
    assert!(s.ttft_ms.percentiles.iter().any(|(p, _)| *p == 50.0), "the fixture has a p50");
    let text = render_text(&s);
    assert!(text.contains("Median TTFT (ms):"), "{text}");
    assert!(!text.contains("P50 "), "{text}");
    assert!(text.contains("P99 TTFT (ms):"), "{text}");
}

/// The simulator's log next to the measurement, and a counted re-send.
#[test]
fn simulator_truth_adds_its_section() {
    use servelab_metrics::truth::{attach, ServerTruth, TruthEvent};
    let (mut records, cfg) = fixture_parts();
    let first = records.iter_mut().find(|r| !r.warmup).unwrap();
    first.retries = 1;
    let truth: Vec<ServerTruth> = records
        .iter()
        .filter(|r| r.is_success())
        .map(|r| {
            let first = r.chunks[0].t_ns - r.intended_ns;
            let events = r
                .chunks
                .iter()
                .map(|c| {
                    let at = c.t_ns - r.intended_ns;
                    // Set 0.25 ms earlier than sent after the first; received 0.5 ms later.
                    let late = if at == first { 0 } else { 250_000 };
                    TruthEvent {
                        tokens: c.tokens.unwrap_or(1),
                        intended_ns: at - 500_000 - late,
                        actual_ns: at - 500_000,
                    }
                })
                .collect();
            ServerTruth { index: r.index, events }
        })
        .collect();
    let mut s = summarize(&records, &info(), &cfg);
    attach(&mut s, &records, &truth);
    insta::assert_snapshot!("text_truth", servelab_block(&s));
    // A simulator that could not keep its schedule is named as such, whatever servelab saw.
    let mut late = s.clone();
    if let Some(t) = late.truth.as_mut() {
        t.set_itl_ms = 10.0;
    }
    let text = servelab_block(&late);
    assert!(
        text.contains(
            "But the simulator did not keep its own schedule (ITL set 10.00, did 300.00 ms)"
        ),
        "{text}"
    );
    let v = result_value(&s, false);
    assert_eq!(v["servelab"]["truth"]["ttft_overhead_ms"], 0.5);
    assert_eq!(v["servelab"]["retries"], 1);
    let schema_text = include_str!("../../../../docs/schema/servelab-result-v1.schema.json");
    let schema: serde_json::Value = serde_json::from_str(schema_text).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let errors: Vec<String> = validator.iter_errors(&v).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "{errors:#?}");
}

/// The fixture's requests as turns of two sessions: servelab's section gains the multi-turn
/// figures (text) and a `servelab.sessions` object (JSON, valid under the schema).
#[test]
fn sessions_add_the_multi_turn_section() {
    let (mut records, cfg) = fixture_parts();
    for r in records.iter_mut().filter(|r| !r.warmup) {
        let (session, turn) = match r.index {
            1 => (0, 0),
            2 => (0, 1),
            3 => (1, 0),
            4 => (1, 1),
            _ => (2, 0),
        };
        r.session = Some(servelab_records::SessionTurn { session, turn });
    }
    let s = summarize(&records, &info(), &cfg);
    let ss = s.sessions.as_ref().unwrap();
    assert_eq!((ss.sessions, ss.completed, ss.cut, ss.turns), (3, 1, 2, 5));
    // Session 0: intended at 0 ms, last reply ended at 1,250 ms.
    assert_eq!(ss.session_latency_ms.mean, 1_250.0);
    insta::assert_snapshot!("text_sessions", servelab_block(&s));
    let v = result_value(&s, false);
    assert_eq!(v["servelab"]["sessions"]["by_turn"][1]["requests"], 2);
    let schema_text = include_str!("../../../../docs/schema/servelab-result-v1.schema.json");
    let schema: serde_json::Value = serde_json::from_str(schema_text).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let errors: Vec<String> = validator.iter_errors(&v).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "{errors:#?}");
}

/// llama.cpp-style engine timings on two of the fixture's completed requests: servelab's
/// section gains the server-vs-client split (text) and a `servelab.server` object (JSON).
#[test]
fn server_timings_add_the_split_section() {
    let (mut records, cfg) = fixture_parts();
    for (r, prompt_ms) in
        records.iter_mut().filter(|r| r.index == 1 || r.index == 3).zip([100.0, 150.0])
    {
        r.server = Some(servelab_records::ServerTimings {
            prompt_tokens: Some(10),
            prompt_ms: Some(prompt_ms),
            generated_tokens: Some(3),
            generation_ms: Some(280.0),
        });
    }
    let s = summarize(&records, &info(), &cfg);
    insta::assert_snapshot!("text_server", servelab_block(&s));
    let v = result_value(&s, false);
    assert_eq!(v["servelab"]["server"]["requests"], 2);
    assert_eq!(v["servelab"]["server"]["ttft_outside_prompt"]["count"], 2);
    // The shipped schema knows the object.
    let schema_text = include_str!("../../../../docs/schema/servelab-result-v1.schema.json");
    let schema: serde_json::Value = serde_json::from_str(schema_text).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let errors: Vec<String> = validator.iter_errors(&v).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "{errors:#?}");
}

/// A vLLM `/metrics` seen over the run, with a restart: servelab's section gains the
/// engine's account (text) and a `servelab.engine` object (JSON) that the schema knows.
#[test]
fn engine_metrics_add_the_engine_section() {
    use servelab_records::ServerScrape;
    let scrape = |t_ms: f64, kv: &[(&str, f64)]| ServerScrape {
        t_ms,
        values: kv.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
        error: None,
    };
    let g = "vllm:generation_tokens_total";
    let p = "vllm:prompt_tokens_total";
    let scrapes = vec![
        scrape(-5.0, &[(g, 100.0), (p, 1000.0), ("vllm:num_requests_running", 0.0)]),
        scrape(
            150.0,
            &[
                (g, 104.0),
                (p, 1064.0),
                ("vllm:num_requests_running", 3.0),
                ("vllm:num_requests_waiting", 1.0),
                ("vllm:kv_cache_usage_perc", 0.42),
                ("vllm:prefix_cache_queries_total", 64.0),
                ("vllm:prefix_cache_hits_total", 16.0),
            ],
        ),
        ServerScrape { t_ms: 300.0, values: Default::default(), error: Some("refused".into()) },
        scrape(450.0, &[(g, 3.0), (p, 32.0), ("vllm:num_requests_running", 1.0)]),
        scrape(600.0, &[(g, 6.0), (p, 32.0), ("vllm:num_requests_running", 0.0)]),
    ];
    let mut s = fixture();
    servelab_metrics::engine::attach(&mut s, &scrapes);
    insta::assert_snapshot!("text_engine", servelab_block(&s));
    let v = result_value(&s, false);
    assert_eq!(v["servelab"]["engine"]["generation_tokens"], 10.0);
    assert_eq!(v["servelab"]["engine"]["restarts_s"], serde_json::json!([0.45]));
    let schema_text = include_str!("../../../../docs/schema/servelab-result-v1.schema.json");
    let schema: serde_json::Value = serde_json::from_str(schema_text).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let errors: Vec<String> = validator.iter_errors(&v).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "{errors:#?}");
}

#[test]
fn empty_run_prints_zeros_and_says_so() {
    let s = summarize(&[], &RunInfo::default(), &MetricsConfig::default());
    let text = render_text(&s);
    assert!(!text.contains("NaN") && !text.contains("inf"));
    assert!(text.contains("no ttft samples: its 0.00 values are placeholders"));
    insta::assert_snapshot!("text_empty", text);
}

#[test]
fn json_snapshot_and_compact_line() {
    let s = fixture();
    let value = result_value(&s, true);
    assert_eq!(render_json(&s, true), format!("{value}\n"));
    insta::assert_snapshot!("json_detailed", serde_json::to_string_pretty(&value).unwrap());
}

/// Issue 25 item 3: a ramped run's result file says so with vLLM's keys (its rate field
/// alone, "inf", would read as all at once), valid under the schema.
#[test]
fn a_ramped_run_writes_vllms_ramp_keys() {
    let mut s = fixture();
    s.info.load.request_rate = None;
    s.info.ramp = Some(
        servelab_records::Ramp::new(servelab_records::RampStrategy::Exponential, 2.0, 32.0)
            .unwrap(),
    );
    let v = result_value(&s, false);
    assert_eq!(v["request_rate"], "inf");
    assert_eq!(v["ramp_up_strategy"], "exponential");
    assert_eq!(
        (v["ramp_up_start_rps"].as_f64(), v["ramp_up_end_rps"].as_f64()),
        (Some(2.0), Some(32.0))
    );
    let schema_text = include_str!("../../../../docs/schema/servelab-result-v1.schema.json");
    let schema: serde_json::Value = serde_json::from_str(schema_text).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let errors: Vec<String> = validator.iter_errors(&v).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "{errors:#?}");
    assert!(result_value(&fixture(), false).get("ramp_up_strategy").is_none());
}

#[test]
fn json_keys_match_vllm() {
    let v = result_value(&fixture(), false);
    let obj = v.as_object().unwrap();
    for key in [
        "date",
        "backend",
        "model_id",
        "tokenizer_id",
        "num_prompts",
        "request_rate",
        "burstiness",
        "max_concurrency",
        "duration",
        "completed",
        "failed",
        "total_input_tokens",
        "total_output_tokens",
        "request_throughput",
        "request_goodput",
        "output_throughput",
        "total_token_throughput",
        "max_output_tokens_per_s",
        "max_concurrent_requests",
        "mean_ttft_ms",
        "median_ttft_ms",
        "std_ttft_ms",
        "p50_ttft_ms",
        "p90_ttft_ms",
        "p99_ttft_ms",
        "mean_tpot_ms",
        "p99_tpot_ms",
        "mean_itl_ms",
        "p99_itl_ms",
        "mean_e2el_ms",
        "p99_e2el_ms",
        "latencies",
        "queue_times",
    ] {
        assert!(obj.contains_key(key), "missing {key}");
    }
    assert!(!obj.contains_key("ttfts"), "per-request arrays only when detailed");
    assert_eq!(obj["date"], "20261121-120000");
    assert_eq!(obj["request_rate"], 4.0);
    assert_eq!(obj["servelab"]["schema_version"], 1);
}

#[test]
fn jsonl_snapshot_has_one_line_per_request() {
    let out = render_jsonl_records(&fixture());
    assert_eq!(out.lines().count(), 5);
    for line in out.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        assert!(v["index"].is_u64());
    }
    insta::assert_snapshot!("jsonl", out);
}

#[test]
fn csv_snapshots() {
    let s = fixture();
    let per_request = render_csv(&s);
    // The fixture has a request with reasoning: its columns follow.
    let reasoning = servelab_outputs::csv::REASONING_COLUMNS.join(",");
    let header = format!("{},{reasoning}", REQUEST_COLUMNS.join(","));
    assert_eq!(per_request.lines().next().unwrap(), header);
    insta::assert_snapshot!("csv", per_request);
    let summary = render_csv_summary(&s);
    let rows: Vec<&str> = summary.lines().collect();
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0].split(',').count(), rows[1].split(',').count());
    insta::assert_snapshot!("csv_summary", summary);
}

#[test]
fn markdown_snapshots() {
    let s = fixture();
    insta::assert_snapshot!("markdown", markdown_summary(&s));
    insta::assert_snapshot!("latency_plain", latency_table(&s).to_plain());
}

#[test]
fn rendered_json_validates_against_the_shipped_schema() {
    let schema_text = include_str!("../../../../docs/schema/servelab-result-v1.schema.json");
    let schema: serde_json::Value = serde_json::from_str(schema_text).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let empty = summarize(&[], &RunInfo::default(), &MetricsConfig::default());
    let with_texts: serde_json::Value =
        serde_json::from_str(&json::render(&fixture(), &fixture_records(), true)).unwrap();
    assert_eq!(
        with_texts["generated_texts"],
        serde_json::json!(["Hello big world!", "hmmok.", "abc", "", "x"])
    );
    let cases = [
        with_texts,
        result_value(&fixture(), true),
        result_value(&fixture(), false),
        result_value(&empty, false),
        result_value(&reference_summary(), true),
    ];
    for (i, doc) in cases.iter().enumerate() {
        let errors: Vec<String> = validator.iter_errors(doc).map(|e| e.to_string()).collect();
        assert!(errors.is_empty(), "case {i}: {errors:#?}");
    }
    // The schema is strict: a renamed key must fail.
    let mut bad = cases[2].clone();
    bad.as_object_mut().unwrap().insert("mean_ttft".into(), 1.0.into());
    assert!(!validator.is_valid(&bad));
}

/// shared/reference/summary-sglang-style.txt, as SGLang's bench_serving prints it.
const SGLANG_REFERENCE: &str = "\
============ Serving Benchmark Result ============
Backend:                                 vllm
Traffic request rate:                    inf
Successful requests:                     10000
Benchmark duration (s):                  578.48
Total input tokens:                      2258583
Total generated tokens:                  1992177
Total generated tokens (retokenized):    1992117
Request throughput (req/s):              17.29
Input token throughput (tok/s):          3904.34
Output token throughput (tok/s):         3443.81
----------------End-to-End Latency----------------
Mean E2E Latency (ms):                   289213.70
Median E2E Latency (ms):                 288336.32
---------------Time to First Token----------------
Mean TTFT (ms):                          275009.37
Median TTFT (ms):                        274460.89
P99 TTFT (ms):                           555801.53
-----Time per Output Token (excl. 1st token)------
Mean TPOT (ms):                          73.02
Median TPOT (ms):                        72.39
P99 TPOT (ms):                           118.02
---------------Inter-token Latency----------------
Mean ITL (ms):                           71.71
Median ITL (ms):                         65.32
P99 ITL (ms):                            161.67
==================================================
";

#[test]
fn sglang_block_matches_the_reference_byte_for_byte() {
    let path =
        concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/reference/summary-sglang-style.txt");
    if let Ok(file) = std::fs::read_to_string(path) {
        assert_eq!(file, SGLANG_REFERENCE, "reference file changed");
    }
    let mut s = reference_summary();
    s.info.backend = "vllm".into();
    s.completed = 10_000;
    s.duration_s = 578.48;
    s.total_input_tokens = 2_258_583;
    s.total_output_tokens = 1_992_177;
    s.retokenized_output_tokens = Some(1_992_117);
    s.request_throughput = 17.29;
    s.input_throughput = 3904.34;
    s.output_throughput = 3443.81;
    s.e2el_ms = dist(289_213.70, 288_336.32, 0.0);
    s.ttft_ms = dist(275_009.37, 274_460.89, 555_801.53);
    s.tpot_ms = dist(73.02, 72.39, 118.02);
    // SGLang's ITL is per chunk; the per-token ITL is not what it prints.
    s.itl_chunk_ms = dist(71.71, 65.32, 161.67);
    s.itl_ms = dist(1.0, 1.0, 1.0);
    assert_eq!(sglang_block(&s), SGLANG_REFERENCE);
    // A capped run at a finite rate: the rate as Python prints a float, the cap after it.
    s.info.load = LoadSpec { request_rate: Some(16.0), max_concurrency: Some(64), ..s.info.load };
    let text = sglang_block(&s);
    assert!(text.contains("\nTraffic request rate:                    16.0\nMax request concurrency:                 64\n"), "{text}");
    assert_eq!(render_run(&s, &[], RunFormat::Sglang), text);
}

#[test]
fn sglang_snapshots() {
    insta::assert_snapshot!("sglang", sglang_block(&fixture()));
    let cfg = MetricsConfig::default();
    insta::assert_snapshot!("sglang_empty", sglang_block(&summarize(&[], &info(), &cfg)));
}

/// The fixture as a trace replay: servelab's section gains the trace's rows and how far
/// behind its instants the sends were (text), and a `servelab.replay` object (JSON, valid
/// under the schema).
#[test]
fn a_replay_adds_the_trace_section() {
    let (records, cfg) = fixture_parts();
    let mut s = summarize(&records, &info(), &cfg);
    let rows = servelab_metrics::TraceRows {
        rows: 12,
        filtered: 2,
        outside_window: 3,
        zero_length: 1,
        over_cap: 1,
        replayed: 5,
    };
    servelab_metrics::replay::attach(&mut s, rows);
    insta::assert_snapshot!("text_replay", servelab_block(&s));
    let v = result_value(&s, false);
    assert_eq!(v["servelab"]["replay"]["rows"]["outside_window"], 3);
    assert_eq!(v["servelab"]["replay"]["rows"]["replayed"], 5);
    // Every fixture request is sent 0.25 ms after its instant.
    assert_eq!(v["servelab"]["replay"]["behind"]["median"], 0.25);
    let schema_text = include_str!("../../../../docs/schema/servelab-result-v1.schema.json");
    let schema: serde_json::Value = serde_json::from_str(schema_text).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let errors: Vec<String> = validator.iter_errors(&v).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "{errors:#?}");
}
