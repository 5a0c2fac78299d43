//! Reasoning models end to end: `servelab bench` against the simulator (in-process, 127.0.0.1:0)
//! with a reasoning phase, sent in the reasoning field or as `<think>…</think>` in the content.
//! Counts are checked exactly against the simulator's truth (how many reasoning tokens it drew
//! for each request); times against the timing it was told to produce and the moments its
//! truth log says it sent each chunk, within the scheduling noise of a loaded 2-core machine.

use std::collections::HashMap;
use std::time::Duration;

use servelab_bench::BenchOutcome;
use servelab_client::runner::request_id;
use servelab_sim::{ReasoningFormat, SimConfig, SimHandle, TruthRecord};

use crate::common;

/// Scheduling noise allowed per measurement on a loaded 2-core machine.
const SLACK_MS: f64 = 15.0;

/// 8 chat requests of exactly 30 output tokens, 2 at a time.
async fn bench(sim: &SimHandle, extra: &[&str]) -> BenchOutcome {
    let base = [
        "--backend",
        "openai-chat",
        "--ignore-eos",
        "--num-prompts",
        "8",
        "--random-input-len",
        "16",
        "--random-output-len",
        "30",
        "--max-concurrency",
        "2",
    ];
    let args = common::bench_settings(&sim.base_url(), &[&base[..], extra].concat());
    common::run_bench(&args, Duration::from_secs(60)).await
}

async fn sim(cfg: SimConfig) -> SimHandle {
    servelab_sim::start(cfg.with_port(0)).await.expect("sim starts")
}

fn truth_by_id(sim: &SimHandle) -> HashMap<String, TruthRecord> {
    sim.truth().into_iter().filter_map(|t| Some((t.request_id.clone()?, t))).collect()
}

/// Every request's reasoning and answer tokens equal the truth's, and the run's totals their
/// sums; each phase's times follow the truth's chunk times. Returns the truth's reasoning total.
fn check_against_truth(out: &BenchOutcome, sim: &SimHandle) -> u64 {
    let truth = truth_by_id(sim);
    let s = &out.summary;
    assert_eq!(s.completed, 8);
    assert_eq!(s.total_output_tokens, 8 * 30);
    let mut total = 0;
    for rec in out.records.iter().filter(|r| !r.warmup) {
        let t = &truth[&request_id(rec)];
        let row = s.requests.iter().find(|r| r.index == rec.index).unwrap();
        let p = row.reasoning.expect("every request reasoned");
        let r = t.reasoning_tokens;
        assert!((5..=15).contains(&r), "drawn in the range: {r}");
        assert_eq!(p.reasoning_tokens, Some(r), "request {}", rec.index);
        assert_eq!(p.answer_tokens, Some(30 - r), "request {}", rec.index);
        total += r;
        // One token per event: the first answer token is the truth's chunk r, the first
        // reasoning token its chunk 0. Measured from the intended send, the client sees each
        // after the server sent it (plus its queueing before the server got the request).
        let ttfr = p.ttfr_ms.unwrap();
        let ttfa = p.ttfa_ms.unwrap();
        let sent = |i: usize| t.chunks[i].actual_ns as f64 / 1e6;
        let (first, answer) = (sent(0), sent(r as usize));
        assert!(ttfr >= first && ttfr - first < SLACK_MS, "ttfr {ttfr} vs sent {first}");
        assert!(ttfa >= answer && ttfa - answer < SLACK_MS, "ttfa {ttfa} vs sent {answer}");
        // The answer begins r tokens of 5 ms after the reasoning.
        let gap = ttfa - ttfr;
        assert!((gap - 5.0 * r as f64).abs() < SLACK_MS, "ttfa - ttfr {gap} for {r} tokens");
    }
    let rs = s.reasoning.as_ref().expect("the run reports reasoning");
    assert_eq!(rs.requests, 8);
    assert_eq!(rs.total_reasoning_tokens, total);
    assert_eq!(rs.total_answer_tokens, 8 * 30 - total);
    assert_eq!(rs.reasoning_tokens.mean, total as f64 / 8.0);
    // Both phases decode at the simulator's 5 ms per token.
    for (name, d) in [("reasoning", &rs.reasoning_tpot_ms), ("answer", &rs.answer_tpot_ms)] {
        assert_eq!(d.count, 8);
        assert!((d.mean - 5.0).abs() < 1.5, "{name} TPOT {}", d.mean);
    }
    total
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reasoning_in_the_field_is_measured_per_phase_and_counted_per_token() {
    let _serial = crate::serial::one_at_a_time();
    let sim = sim(SimConfig::fixed(20.0, 5.0).with_reasoning_range(5, 15)).await;
    // Retokenized counts (no usage per chunk) and answer goodput: every request's first answer
    // token comes within 20 + 15 × 5 ms (plus noise), none within 1 ms.
    let out = bench(&sim, &["--continuous-usage", "off", "--goodput", "ttfa:5000"]).await;
    check_against_truth(&out, &sim);
    let s = &out.summary;
    assert_eq!(s.request_goodput, Some(s.request_throughput));
    sim.shutdown().await;
    let sim = sim_tags(1, 1).await;
    let out = bench(&sim, &["--continuous-usage", "on", "--goodput", "ttfa:1"]).await;
    assert_eq!(out.summary.request_goodput, Some(0.0));
    sim.shutdown().await;
}

async fn sim_tags(min: u32, max: u32) -> SimHandle {
    let cfg = SimConfig::fixed(20.0, 5.0)
        .with_reasoning_range(5, 15)
        .with_reasoning_format(ReasoningFormat::ThinkTags)
        .with_tokens_per_chunk(min, max);
    sim(cfg).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn think_tags_in_the_content_are_detected_and_give_the_same_figures() {
    let _serial = crate::serial::one_at_a_time();
    let sim = sim_tags(1, 1).await;
    let out = bench(&sim, &["--continuous-usage", "on"]).await;
    check_against_truth(&out, &sim);
    // The tags ride on the text: the first reasoning chunk opens them, and the reasoning ends
    // with the chunk that closes them.
    let rec = out.records.iter().find(|r| !r.warmup).unwrap();
    assert!(rec.chunks[0].text.starts_with("<think>"), "{:?}", rec.chunks[0].text);
    assert!(rec.stream.think.is_some());
    sim.shutdown().await;

    // Told there is no reasoning, the same stream is all answer, with the same TTFT and count.
    let sim = sim_tags(1, 1).await;
    let out = bench(&sim, &["--continuous-usage", "on", "--reasoning-parser", "none"]).await;
    assert_eq!(out.summary.completed, 8);
    assert_eq!(out.summary.total_output_tokens, 8 * 30);
    assert_eq!(out.summary.reasoning, None);
    assert_eq!(out.summary.ttfc_ms, None);
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn several_tokens_per_chunk_count_every_token_of_each_phase() {
    let _serial = crate::serial::one_at_a_time();
    let sim = sim_tags(2, 4).await;
    let out = bench(&sim, &["--continuous-usage", "on"]).await;
    let truth = truth_by_id(&sim);
    let s = &out.summary;
    assert_eq!(s.completed, 8);
    let mut total = 0;
    for rec in out.records.iter().filter(|r| !r.warmup) {
        let r = truth[&request_id(rec)].reasoning_tokens;
        let p = s.requests.iter().find(|x| x.index == rec.index).unwrap().reasoning.unwrap();
        assert_eq!((p.reasoning_tokens, p.answer_tokens), (Some(r), Some(30 - r)));
        total += r;
    }
    assert_eq!(s.reasoning.as_ref().unwrap().total_reasoning_tokens, total);
    sim.shutdown().await;
}
