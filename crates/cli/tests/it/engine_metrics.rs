//! The engine's `/metrics` section of `servelab bench`: absent when scraping is off (the
//! scrapes' agreement with the client and an engine restart are the timing binary's).

use std::time::Duration;

use servelab_sim::SimConfig;

use crate::common;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scraping_off_or_no_metrics_gives_no_engine_section() {
    let sim = servelab_sim::start(SimConfig::fixed(5.0, 1.0).with_port(0)).await.unwrap();
    let args = ["--num-prompts", "4", "--random-input-len", "16", "--random-output-len", "4"];
    let off = [&args[..], &["--server-metrics-interval", "0"]].concat();
    let s = common::bench_settings(&sim.base_url(), &[&["--ignore-eos"], &off[..]].concat());
    let out = common::run_bench(&s, Duration::from_secs(60)).await;
    assert_eq!(out.summary.completed, 4);
    assert!(out.summary.engine.is_none());
    assert!(!servelab_outputs::render_text(&out.summary).contains("Engine /metrics"));
    sim.shutdown().await;
}
