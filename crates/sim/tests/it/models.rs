//! The engine models behind the simulator, checked for what they decide rather than how
//! punctually it is sent: the per-token prefill model's intended first-token instant, and
//! engine-model mode's prefix cache counted at `/metrics`.

use std::sync::Arc;
use std::time::Duration;

use crate::common::*;
use servelab_sim::{start, PerTokenModel, SimConfig};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_token_prefill_sets_ttft() {
    let model = PerTokenModel {
        overhead: Duration::from_millis(10),
        prefill_per_token: Duration::from_micros(50),
        itl: Duration::from_millis(2),
    };
    let sim = start(SimConfig::default().with_engine_model(Arc::new(model))).await.unwrap();
    let ids: Vec<String> = (0..1000).map(|i| (i % 500 + 10).to_string()).collect();
    let body = format!(
        r#"{{"prompt":[{}],"max_tokens":3,"ignore_eos":true,"stream":true}}"#,
        ids.join(",")
    );
    let seen = post(sim.addr(), "/v1/completions", &body).await;
    assert_eq!(seen.status, 200);
    let t = &sim.truth()[0];
    assert_eq!(t.prompt_tokens, 1000);
    assert_eq!(t.chunks[0].intended_ns - t.queue_ns, 60_000_000);
    assert_eq!(t.chunks[2].intended_ns - t.queue_ns, 64_000_000);
    sim.shutdown().await;
}

/// In engine-model mode the prompt's token blocks are hashed, so a repeated prompt (and a
/// prompt sharing a prefix) hits the engine's prefix cache as on vLLM, and `/metrics` says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn engine_mode_prefix_cache_hits_on_shared_prompt_prefixes() {
    let cfg = servelab_engine::EngineFile::parse("model: qwen3-8b\ngpu: h100\n")
        .unwrap()
        .build(None)
        .unwrap();
    let sim = start(SimConfig::default().with_engine(cfg)).await.unwrap();
    let body = |ids: Vec<u32>| {
        let ids: Vec<String> = ids.iter().map(u32::to_string).collect();
        format!(
            r#"{{"prompt":[{}],"max_tokens":2,"ignore_eos":true,"stream":true}}"#,
            ids.join(",")
        )
    };
    let shared: Vec<u32> = (10..110).collect();
    let whole = [shared.clone(), (200..300).collect()].concat();
    let other_tail = [shared, vec![7; 100]].concat();
    // 200 tokens; the same 200; then their first 100 followed by 100 others.
    for ids in [whole.clone(), whole, other_tail] {
        assert_eq!(post(sim.addr(), "/v1/completions", &body(ids)).await.status, 200);
    }
    let m = send(sim.addr(), "GET", "/metrics", &[], "").await.unwrap().text();
    let value = |name: &str| -> f64 {
        m.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{name} in {m}"))
    };
    assert_eq!(value("vllm:prefix_cache_queries_total"), 600.0);
    // The repeat finds 12 of its 12.5 blocks (one token is always computed); the third
    // prompt finds the 6 full blocks of its 100 shared tokens.
    assert_eq!(value("vllm:prefix_cache_hits_total"), (12.0 + 6.0) * 16.0);
    sim.shutdown().await;
}

/// In engine-model mode a speculative step that ends the reasoning phase carries both kinds
/// of token: it is sent as two events at the step's instant, the reasoning tokens in the
/// reasoning field and the answer's in the content, so no event mixes them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn engine_mode_splits_a_step_that_ends_the_reasoning_phase() {
    let cfg = servelab_engine::EngineFile::parse("model: qwen3-8b\ngpu: h100\n")
        .unwrap()
        .build(None)
        .unwrap();
    // Every draft accepted: 10 tokens come from steps of 1 (the prefill), 4, 4 and 1.
    let spec = servelab_sim::Speculation::new(3, 1.0).unwrap();
    let config =
        SimConfig::default().with_engine(cfg).with_speculation(spec).with_reasoning_tokens(2);
    let sim = start(config).await.unwrap();
    let body = r#"{"messages":[{"role":"user","content":"hi"}],"max_completion_tokens":10,
        "ignore_eos":true,"stream":true,
        "stream_options":{"include_usage":true,"continuous_usage_stats":true}}"#;
    let seen = post(sim.addr(), "/v1/chat/completions", body).await;
    assert_eq!(seen.status, 200);
    // (reasoning?, content?, completion tokens so far) of each token-carrying event.
    let kinds: Vec<(bool, bool, u64)> = seen
        .events()
        .iter()
        .filter(|e| e.as_str() != "[DONE]")
        .map(|e| parse(e))
        .filter(|v| v["choices"].as_array().is_some_and(|c| !c.is_empty()))
        .filter(|v| v["choices"][0]["delta"].get("role").is_none())
        .map(|v| {
            let d = &v["choices"][0]["delta"];
            let has = |f: &str| d[f].as_str().is_some_and(|t| !t.is_empty());
            (
                has("reasoning_content"),
                has("content"),
                v["usage"]["completion_tokens"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        kinds,
        vec![
            (true, false, 1),
            (true, false, 2),
            (false, true, 5),
            (false, true, 9),
            (false, true, 10)
        ]
    );
    // The split step's two events share its instant.
    let t = &sim.truth()[0];
    let chunks: Vec<(u32, u64)> = t.chunks.iter().map(|c| (c.tokens, c.intended_ns)).collect();
    assert_eq!(chunks.iter().map(|c| c.0).collect::<Vec<_>>(), vec![1, 1, 3, 4, 1]);
    assert_eq!(chunks[1].1, chunks[2].1, "{chunks:?}");
    assert!(chunks[2].1 < chunks[3].1, "{chunks:?}");
    sim.shutdown().await;
}
