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
