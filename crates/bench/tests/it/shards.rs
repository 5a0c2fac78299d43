//! Sharded runs checked for what they send and merge, not for measured time: sessions split
//! by session across shards, and shards' digests merging to the exact summary. (One run as
//! four shards matching the single run's measured figures is the timing binary's `shards`;
//! it reads each shard's clock. These skip the reading, a few seconds at `Date`-second
//! boundaries, and start 2 s ahead: time to draw a workload.)

use std::time::{Duration, SystemTime};

use servelab_bench::Conductor;
use servelab_metrics::digest::{merge_digests, ExactFigures, ShardDigest};
use servelab_metrics::merge::{merge_shards, MergeOptions, ShardRun};
use servelab_plan::{
    Api, ClockReference, DatasetSpec, LoadSpec, OutputSpec, RequestSpec, Shard, ShardSpec,
};
use servelab_sim::{start, SimConfig};
use tokio::sync::watch;

use crate::common::{flags, plan, seen, PROMPTS};

/// Multi-turn sessions split by session: two shards together send exactly the turns one
/// process sends (same record ids at the server), every session's turns from one shard, and
/// the shards' records merge.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_are_split_by_session_across_shards() {
    use servelab_plan::SessionSource;
    use servelab_workload::{SessionSpec, SyntheticSessions, ThinkTime};
    let sim = start(SimConfig::fixed(5.0, 1.0).with_port(0)).await.unwrap();
    let url = sim.base_url();
    let (_stop, interrupt) = watch::channel(false);
    let sessions_plan = || {
        let mut p = plan(&url);
        p.request = RequestSpec { ignore_eos: true, ..RequestSpec::new(Api::Chat) };
        p.workload.num_prompts = 10;
        p.workload.dataset = DatasetSpec::Sessions(SessionSpec {
            source: SessionSource::Synthetic(SyntheticSessions {
                turns_min: 1,
                turns_max: 4,
                input_len: 16,
                output_len: 4,
                range_ratio: 0.0,
                system_prompt_len: 8,
            }),
            think_time: ThinkTime::Zero,
        });
        p.load = LoadSpec { request_rate: Some(40.0), ..LoadSpec::default() };
        p
    };
    let mark = sim.truth_len();
    let single = Conductor::new(interrupt.clone()).bench(&sessions_plan()).await.unwrap();
    let single_seen = seen(&sim, mark);
    assert_eq!(single_seen.len(), single.records.len());

    let mark = sim.truth_len();
    let start_at = SystemTime::now() + Duration::from_secs(2);
    let mut tasks = Vec::new();
    for k in 0..2 {
        let mut p = sessions_plan();
        p.shard = ShardSpec {
            shard: Some(Shard::new(k, 2).unwrap()),
            start_at: Some(start_at),
            clock: ClockReference::Off,
            ..ShardSpec::default()
        };
        let interrupt = interrupt.clone();
        tasks.push(tokio::spawn(async move { Conductor::new(interrupt).bench(&p).await.unwrap() }));
    }
    let mut shards = Vec::new();
    let mut digests = Vec::new();
    for t in tasks {
        let out = t.await.unwrap();
        let info = out.summary.info.clone();
        let shard = info.shard.clone().unwrap().shard;
        assert!(out.records.iter().all(|r| shard.owns(r.session.unwrap().session)));
        let alpha = servelab_metrics::sketch::SHARD_SKETCH_ALPHA;
        digests.push(ShardDigest::new(&out.summary, &out.records, alpha).unwrap());
        shards.push(ShardRun::new(&out.summary, out.records));
    }
    assert_eq!(seen(&sim, mark), single_seen, "the same turns reached the server");
    let merged = merge_shards(shards, MergeOptions::default()).unwrap();
    assert_eq!(merged.records.len(), single.records.len());
    let m = servelab_metrics::summarize(&merged.records, &merged.info, &flags());
    let exact = m.sessions.unwrap();
    assert_eq!(exact.sessions, 10);
    // The shards' digests give the same session figures (sessions are whole in one shard).
    let d = merge_digests(&digests, MergeOptions::default(), None).unwrap().sessions.unwrap();
    assert_eq!((d.sessions, d.completed, d.cut, d.turns), (10, 10, 0, exact.turns));
    assert_eq!(d.mean_turns, exact.mean_turns);
    let (g, e) = (&d.session_latency_ms, &exact.session_latency_ms);
    assert_eq!((g.count, g.min, g.max), (e.count, e.min, e.max));
    assert!((g.mean - e.mean).abs() <= 1e-9 * e.mean);
    assert_eq!(d.by_turn.len(), exact.by_turn.len());
    for (g, e) in d.by_turn.iter().zip(&exact.by_turn) {
        assert_eq!((g.turn, g.requests, g.failed), (e.turn, e.requests, e.failed));
        assert_eq!(g.mean_prompt_tokens, e.mean_prompt_tokens);
        assert_eq!(
            (g.ttft_ms.count, g.ttft_ms.min, g.ttft_ms.max),
            (e.ttft_ms.count, e.ttft_ms.min, e.ttft_ms.max)
        );
    }
    sim.shutdown().await;
}

/// Shards that save their result also write their digests; merged, the digests give the
/// whole run's summary: counts, throughput, goodput, windows, means and extremes as the exact
/// merge of the records gives them, percentiles within the sketches' stated accuracy of the
/// exact rank values, and peak concurrency bounded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shards_write_digests_that_merge_to_the_exact_summary() {
    use servelab_metrics::sketch::SHARD_SKETCH_ALPHA;
    let sim = start(SimConfig::fixed(10.0, 1.0).with_port(0)).await.unwrap();
    let url = sim.base_url();
    let dir = tempfile::tempdir().unwrap();
    let (_stop, interrupt) = watch::channel(false);
    let start_at = SystemTime::now() + Duration::from_secs(2);
    let mut tasks = Vec::new();
    for k in 0..2 {
        let mut p = plan(&url);
        p.shard = ShardSpec {
            shard: Some(Shard::new(k, 2).unwrap()),
            start_at: Some(start_at),
            clock: ClockReference::Off,
            ..ShardSpec::default()
        };
        p.output = OutputSpec {
            save_result: true,
            result_dir: dir.path().to_path_buf(),
            ..OutputSpec::default()
        };
        let interrupt = interrupt.clone();
        tasks.push(tokio::spawn(async move { Conductor::new(interrupt).bench(&p).await.unwrap() }));
    }
    let mut shards = Vec::new();
    let mut digests = Vec::new();
    for t in tasks {
        let out = t.await.unwrap();
        let path = out.result_path.clone().unwrap().with_extension("digest.json");
        let text = std::fs::read(&path).unwrap();
        // A few kB, not the records.
        assert!(text.len() < 64 * 1024, "{} bytes", text.len());
        digests.push(serde_json::from_slice::<ShardDigest>(&text).unwrap());
        shards.push(ShardRun::new(&out.summary, out.records));
    }
    let merged = merge_shards(shards, MergeOptions::default()).unwrap();
    let exact = servelab_metrics::summarize(&merged.records, &merged.info, &flags());
    let got = merge_digests(&digests, MergeOptions::default(), None).unwrap();
    // Additive figures are exact, over the same global span.
    assert_eq!(got.info, exact.info);
    assert_eq!(got.percentiles, exact.percentiles);
    // The first arrival is at the schedule's 0, so the windows are the exact ones too.
    assert_eq!(ExactFigures::of(&got), ExactFigures::of(&exact));
    assert_eq!(got.completed, PROMPTS as u64);
    assert!(!got.warnings.iter().any(|w| w.contains("rounded down")), "{:?}", got.warnings);
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * b.abs().max(1.0);
    assert!(close(got.mean_concurrency, exact.mean_concurrency));
    assert!(got.peak_concurrency <= exact.peak_concurrency);
    assert!(got.peak_concurrency >= 1);
    let pairs = [
        ("ttft", &got.ttft_ms, &exact.ttft_ms),
        ("tpot", &got.tpot_ms, &exact.tpot_ms),
        ("itl", &got.itl_ms, &exact.itl_ms),
        ("itl_chunk", &got.itl_chunk_ms, &exact.itl_chunk_ms),
        ("e2el", &got.e2el_ms, &exact.e2el_ms),
        ("schedule_lag", &got.schedule_lag_ms, &exact.schedule_lag_ms),
        ("client_queue", &got.client_queue_ms, &exact.client_queue_ms),
    ];
    // The client's own read lag, where this platform gives kernel receive times.
    assert_eq!(got.read_lag_ms.is_some(), exact.read_lag_ms.is_some());
    assert_eq!(got.ttfc_ms, None);
    for (name, g, e) in pairs {
        assert_eq!(g.count, e.count, "{name}");
        assert_eq!((g.min, g.max), (e.min, e.max), "{name}");
        assert!(close(g.mean, e.mean) && (g.std - e.std).abs() <= 1e-6 * e.std.max(1.0), "{name}");
    }
    // Percentiles: within α of the exact rank-⌊q(n−1)⌋ value of all requests.
    let mut rows: Vec<&servelab_metrics::RequestRow> =
        exact.requests.iter().filter(|r| r.is_success()).collect();
    for (name, f, d) in [
        ("ttft", (|r: &servelab_metrics::RequestRow| r.ttft_ms) as fn(&_) -> _, &got.ttft_ms),
        ("e2el", |r: &servelab_metrics::RequestRow| r.e2el_ms, &got.e2el_ms),
    ] {
        let mut v: Vec<f64> = rows.iter_mut().filter_map(|r| f(r)).collect();
        v.sort_by(f64::total_cmp);
        for (p, x) in &d.percentiles {
            let want = v[((p / 100.0) * (v.len() - 1) as f64).floor() as usize];
            assert!((x - want).abs() <= SHARD_SKETCH_ALPHA * want, "{name} p{p}: {x} vs {want}");
        }
    }
    // Shards that are not one run's are refused as the records' merge refuses them.
    let mut other = digests[1].clone();
    other.info.seed += 1;
    let e = merge_digests(&[digests[0].clone(), other], MergeOptions::default(), None).unwrap_err();
    assert!(e.to_string().contains("the seed differs"), "{e}");
    let e = merge_digests(&digests[..1], MergeOptions::default(), None).unwrap_err();
    assert!(e.to_string().contains("shards missing: [1] of 2"), "{e}");
    sim.shutdown().await;
}
