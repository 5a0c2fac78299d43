//! End-to-end: the workloads of issue 15 against the simulator started in-process, checked
//! against what reached the server (its truth log, with prompt and reply texts), not only
//! against what the client thinks it sent.

use std::collections::BTreeMap;
use std::time::Duration;

use servelab_bench::BenchOutcome;
use servelab_client::runner::request_id;
use servelab_records::RequestRecord;
use servelab_sim::{SimConfig, SimHandle, TruthRecord};

use crate::common;

async fn sim(cfg: SimConfig) -> SimHandle {
    servelab_sim::start(cfg.with_port(0).with_truth_text()).await.expect("sim starts")
}

async fn bench(sim: &SimHandle, args: &[&str]) -> BenchOutcome {
    let settings = common::bench_settings(&sim.base_url(), args);
    common::run_bench(&settings, Duration::from_secs(90)).await
}

/// The truth record of each measured record, by the `x-request-id` servelab sent.
fn truth_of<'a>(
    sim: &SimHandle,
    records: &'a [RequestRecord],
) -> Vec<(&'a RequestRecord, TruthRecord)> {
    let mut by_id: BTreeMap<String, TruthRecord> =
        sim.truth().into_iter().filter_map(|t| Some((t.request_id.clone()?, t))).collect();
    records
        .iter()
        .filter(|r| !r.warmup)
        .map(|r| (r, by_id.remove(&request_id(r)).expect("the server saw every request")))
        .collect()
}

/// Median of sent − scheduled (the trace instant) over the measured records, in ms: how
/// late the replay sent. Printed by the replay tests.
fn median_schedule_lag_ms(records: &[RequestRecord]) -> f64 {
    let mut lags: Vec<u64> = records
        .iter()
        .filter(|r| !r.warmup)
        .map(|r| {
            assert!(r.sent_ns >= r.scheduled_ns, "never sent early: {r:?}");
            r.sent_ns - r.scheduled_ns
        })
        .collect();
    lags.sort_unstable();
    lags[lags.len() / 2] as f64 / 1e6
}

/// The median schedule lag bound of the replay tests: a replay on this machine lags well
/// under a millisecond at the median, but a shared 2-core machine running other builds can
/// deschedule the client for tens of milliseconds.
const LAG_MEDIAN_BOUND_MS: f64 = 25.0;

/// The server received the requests in the trace's order: of two requests due more than
/// [`LAG_MEDIAN_BOUND_MS`] apart, the earlier reached it first (its arrival sequence is
/// lower). Closer ones may swap when the machine delays one send.
fn arrived_in_trace_order(pairs: &[(&RequestRecord, TruthRecord)]) {
    let apart = (LAG_MEDIAN_BOUND_MS * 1e6) as u64;
    for (a, ta) in pairs {
        for (b, tb) in pairs {
            if a.scheduled_ns + apart < b.scheduled_ns {
                assert!(
                    ta.seq < tb.seq,
                    "request {} due before {} arrived after it",
                    a.index,
                    b.index
                );
            }
        }
    }
}

fn testdata(name: &str) -> String {
    format!("{}/../../testdata/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// `servelab sweep` against `sim` with `args` after the common flags, writing to `dir`;
/// returns its sweep.json.
async fn sweep(
    sim: &SimHandle,
    dir: &std::path::Path,
    args: &[&str],
) -> servelab_sweep::SweepResult {
    use clap::Parser;
    use servelab::args::{Cli, Command};
    let url = sim.base_url();
    let mut argv = vec![
        "servelab",
        "sweep",
        "--base-url",
        &url,
        "--no-progress",
        "--no-store",
        "--settle-secs",
        "0",
        "--output-dir",
        dir.to_str().unwrap(),
    ];
    argv.extend_from_slice(args);
    let cli = Cli::try_parse_from(argv).expect("valid args");
    let Command::Sweep(a) = cli.command else { unreachable!("sweep") };
    let (_tx, rx) = tokio::sync::watch::channel(false);
    tokio::time::timeout(Duration::from_secs(60), servelab::sweep(&a, rx))
        .await
        .expect("sweep finished")
        .expect("sweep ran");
    serde_json::from_slice(&std::fs::read(dir.join("sweep.json")).unwrap()).unwrap()
}

/// The flags of the 64-session test below.
const SESSION_ARGS: [&str; 21] = [
    "--backend",
    "openai-chat",
    "--dataset-name",
    "sessions",
    "--session-turns",
    "3",
    "--session-system-prompt-len",
    "8",
    "--num-prompts",
    "64",
    "--max-concurrency",
    "64",
    "--random-input-len",
    "12",
    "--random-output-len",
    "4",
    "--ignore-eos",
    "--think-time",
    "0.02",
    "--seed",
    "5",
];

/// 64 synthetic sessions of 3 turns at `--max-concurrency 64`: turn k's prompt at the server
/// is turn k−1's prompt, the server's own reply to it, and a new user message; a turn is
/// sent only after the previous reply ended plus the think time, never alongside it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_resend_the_history_and_never_overlap_their_turns() {
    let _serial = crate::serial::one_at_a_time();
    let sim = sim(SimConfig::fixed(5.0, 1.0)).await;
    let out = bench(&sim, &SESSION_ARGS).await;
    let pairs = truth_of(&sim, &out.records);
    assert_eq!(pairs.len(), 64 * 3);
    // The sessions the run prepared (same spec, count, tokenizer and seed): each turn's new
    // user message is its own text.
    let plan = servelab::resolve::bench_plan(
        &common::bench_settings(&sim.base_url(), &SESSION_ARGS),
        None,
    )
    .unwrap();
    let servelab_plan::DatasetSpec::Sessions(spec) = &plan.workload.dataset else { panic!() };
    let tokenizer =
        servelab_workload::Tokenizer::builtin(servelab_workload::tokenizer::DEFAULT_ENCODING)
            .unwrap();
    let prepared = servelab_workload::load_sessions(spec, 64, &tokenizer, plan.workload.seed)
        .unwrap()
        .sessions;
    for (r, t) in &pairs {
        let turn = r.session.unwrap();
        let user = &prepared[(turn.session % 64) as usize].turns[turn.turn as usize].user;
        let tail = format!("<|user|>\n{user}\n<|assistant|>\n");
        assert!(t.prompt.as_deref().unwrap().ends_with(&tail), "turn {turn:?} ends with {tail:?}");
    }
    let mut sessions: BTreeMap<u64, Vec<(&RequestRecord, TruthRecord)>> = BTreeMap::new();
    for (r, t) in pairs {
        sessions.entry(r.session.expect("a turn").session).or_default().push((r, t));
    }
    assert_eq!(sessions.len(), 64);
    for turns in sessions.values_mut() {
        turns.sort_by_key(|(r, _)| r.session.unwrap().turn);
        assert_eq!(turns.len(), 3);
        for w in turns.windows(2) {
            let ((prev, prev_t), (next, next_t)) = (&w[0], &w[1]);
            // What the server received: the whole history with its own reply.
            let reply = prev_t.reply.as_deref().expect("reply text recorded");
            assert!(!reply.is_empty());
            let prompt = next_t.prompt.as_deref().expect("prompt text recorded");
            let history = format!("{}{reply}\n<|user|>\n", prev_t.prompt.as_deref().unwrap());
            assert!(prompt.starts_with(&history), "{prompt:?} after {history:?}");
            assert!(prompt.ends_with("\n<|assistant|>\n"), "{prompt:?}");
            assert!(next_t.seq > prev_t.seq, "the server saw the turns in order");
            // Due exactly the think time after the reply ended, and not sent before.
            let end = prev.end_ns.unwrap();
            assert_eq!(next.intended_ns, end + 20_000_000);
            assert!(next.sent_ns >= next.intended_ns);
        }
        // Every turn starts with the same system prompt.
        assert!(turns[0].1.prompt.as_deref().unwrap().starts_with("<|system|>\n"));
    }
    let s = out.summary.sessions.as_ref().expect("session figures");
    assert_eq!((s.sessions, s.completed, s.cut, s.turns), (64, 64, 0, 192));
    assert_eq!(s.by_turn.iter().map(|t| t.requests).collect::<Vec<_>>(), [64, 64, 64]);
    // The client's count of the history's contents: 8 system + 12 per user message + 4 per
    // reply (the server's usage).
    for (r, _) in sessions.values().flatten() {
        let k = u64::from(r.session.unwrap().turn);
        assert_eq!(r.prompt_tokens, Some(8 + 12 * (k + 1) + 4 * k), "turn {k}");
    }
    // The summary counts what the server says (chat template included): growing by turn.
    let prompt_means: Vec<f64> = s.by_turn.iter().map(|t| t.mean_prompt_tokens.unwrap()).collect();
    assert!(prompt_means.windows(2).all(|w| w[1] > w[0]), "{prompt_means:?}");
    assert_eq!(out.summary.info.num_prompts, 64, "--num-prompts counts sessions");
    sim.shutdown().await;
}

/// A Mooncake trace replayed at twice its speed: every request is due at its timestamp / 2,
/// and requests sharing leading hash ids reach the server with identical prompt prefixes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mooncake_trace_replays_at_its_timestamps_with_its_shared_prefixes() {
    let _serial = crate::serial::one_at_a_time();
    let sim = sim(SimConfig::fixed(5.0, 1.0).with_max_model_len(8192)).await;
    let path = testdata("mooncake-trace.jsonl");
    let out = bench(
        &sim,
        &[
            "--dataset-name",
            "mooncake",
            "--dataset-path",
            &path,
            "--trace-speedup",
            "2",
            "--ignore-eos",
        ],
    )
    .await;
    let pairs = truth_of(&sim, &out.records);
    let offsets_ms = [0, 250, 250, 900, 1500, 2100];
    assert_eq!(pairs.len(), offsets_ms.len());
    let mut by_index: Vec<_> = pairs;
    by_index.sort_by_key(|(r, _)| r.index);
    for ((r, _), ms) in by_index.iter().zip(offsets_ms) {
        assert_eq!(r.scheduled_ns, ms * 1_000_000 / 2, "request {}", r.index);
        assert_eq!(r.intended_ns, r.scheduled_ns);
    }
    // What was actually sent, and what reached the server, follows the trace.
    let lag = median_schedule_lag_ms(&out.records);
    eprintln!("mooncake replay: median schedule lag (sent - trace instant) {lag:.3} ms");
    assert!(lag < LAG_MEDIAN_BOUND_MS, "median schedule lag {lag} ms");
    arrived_in_trace_order(&by_index);
    let replay = out.summary.replay.as_ref().expect("replay figures");
    assert_eq!((replay.rows.rows, replay.rows.replayed), (6, 6));
    assert!(!out.summary.warnings.iter().any(|w| w.starts_with("the replay fell behind")));
    let prompt = |i: usize| by_index[i].1.prompt.clone().unwrap();
    let common = |a: &str, b: &str| a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count();
    // Request 4 is blocks [0, 1] whole: every request that starts with them begins with it.
    for i in [0, 2, 5] {
        assert!(prompt(i).starts_with(&prompt(4)), "request {i}");
    }
    // Request 1 shares only block 0 with request 0; request 3 shares nothing.
    let one_block = common(&prompt(0), &prompt(1));
    assert!(one_block > 0 && one_block < prompt(4).len(), "{one_block}");
    assert!(common(&prompt(0), &prompt(3)) < 8);
    assert_eq!(out.summary.completed, 6);
    sim.shutdown().await;
}

/// Random images reach the server as valid data URLs of the requested size and count.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_images_arrive_at_their_size() {
    let _serial = crate::serial::one_at_a_time();
    let sim = sim(SimConfig::fixed(5.0, 1.0)).await;
    let out = bench(
        &sim,
        &[
            "--backend",
            "openai-chat",
            "--dataset-name",
            "random-mm",
            "--random-mm-images",
            "2",
            "--random-mm-image-size",
            "64x32",
            "--random-mm-image-format",
            "png",
            "--num-prompts",
            "4",
            "--random-input-len",
            "16",
            "--random-output-len",
            "3",
        ],
    )
    .await;
    for (_, t) in truth_of(&sim, &out.records) {
        assert_eq!(t.images.len(), 2);
        assert!(t.images.iter().all(|i| (i.width, i.height) == (64, 32)), "{:?}", t.images);
    }
    sim.shutdown().await;
}

/// `--dataset-name hf --hf-name DIR` reads a local dataset directory, offline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_local_hugging_face_dataset_is_sent() {
    let _serial = crate::serial::one_at_a_time();
    let sim = sim(SimConfig::fixed(5.0, 1.0)).await;
    let dir = testdata("hf-cache/datasets--servelab--tiny-instruct/snapshots/0a1b2c3d");
    let out = bench(
        &sim,
        &["--dataset-name", "hf", "--hf-name", &dir, "--num-prompts", "3", "--hf-output-len", "4"],
    )
    .await;
    let pairs = truth_of(&sim, &out.records);
    assert_eq!(pairs.len(), 3);
    assert!(pairs.iter().all(|(_, t)| t.completion_tokens == 4));
    sim.shutdown().await;
}

/// A sweep of multi-turn sessions: every point runs whole sessions (the concurrency counts
/// sessions) and reports their figures.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sweep_runs_sessions_at_each_point() {
    let _serial = crate::serial::one_at_a_time();
    let sim = sim(SimConfig::fixed(5.0, 1.0)).await;
    let dir = tempfile::tempdir().unwrap();
    let sweep = sweep(
        &sim,
        dir.path(),
        &[
            "--concurrency",
            "1,3",
            "--num-prompts",
            "6",
            "--backend",
            "openai-chat",
            "--dataset-name",
            "sessions",
            "--session-turns",
            "2",
            "--random-input-len",
            "8",
            "--random-output-len",
            "3",
            "--ignore-eos",
        ],
    )
    .await;
    let points = &sweep.scenarios[0].points;
    assert_eq!(points.len(), 2);
    for p in points {
        let s = p.summary.sessions.as_ref().expect("session figures");
        assert_eq!((s.sessions, s.turns), (p.num_prompts as u64, 2 * p.num_prompts as u64));
        // At most one turn per session in flight: concurrency counts sessions.
        assert!(p.summary.peak_concurrency <= p.load.value() as u64);
    }
    sim.shutdown().await;
}

/// A lab runs a multi-turn profile (as a lab YAML writes it) against an engine it launches
/// (`servelab sim serve`, logging what it received): every turn is run, and turn 1 of each
/// session reached the engine with turn 0 and the engine's own reply before it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lab_profile_runs_sessions() {
    let _serial = crate::serial::one_at_a_time();
    // What a profile's `{dataset_name: sessions, session_turns: 2-6, ...}` becomes.
    let args: Vec<String> =
        ["--dataset-name", "sessions", "--session-turns", "2-6", "--think-time", "exp:1.5"]
            .map(String::from)
            .into();
    let plan = servelab::resolve::profile_plan(args).expect("a valid profile");
    let servelab_plan::DatasetSpec::Sessions(spec) = &plan.workload.dataset else {
        panic!("{:?}", plan.workload.dataset)
    };
    assert_eq!(
        spec.think_time,
        servelab_workload::ThinkTime::Exponential { mean: Duration::from_millis(1500) }
    );

    let tmp = tempfile::tempdir().unwrap();
    let truth = tmp.path().join("truth.jsonl");
    let marker = format!("labsessions-{}", std::process::id());
    let yaml = format!(
        "name: sessions-lab\nstrategy: baseline\nengines:\n\
         \x20 - {{name: sim, command: '{} sim serve --port {{port}} --served-model-name {marker} \
         --ttft-ms 5 --itl-ms 1 --truth-log {} --truth-text', ready_timeout_secs: 60, \
         stop_grace_secs: 3}}\n\
         profiles:\n\
         \x20 - {{name: chat, backend: openai-chat, dataset_name: sessions, session_turns: 2, \
         think_time: 0.01, num_prompts: 4, max_concurrency: 4, random_input_len: 8, \
         random_output_len: 3, ignore_eos: true, seed: 1, tokenizer: cl100k_base}}\n",
        env!("CARGO_BIN_EXE_servelab"),
        truth.display(),
    );
    let file = tmp.path().join("exp.yaml");
    std::fs::write(&file, yaml).unwrap();
    let a = servelab::args::LabRunArgs {
        experiment: file,
        resume: false,
        output_dir: Some(tmp.path().join("out")),
        db: None,
        no_store: true,
        shard: Default::default(),
    };
    let (_tx, rx) = tokio::sync::watch::channel(false);
    let (finish, _) =
        tokio::time::timeout(Duration::from_secs(90), servelab::run_experiment(&a, rx))
            .await
            .expect("the lab finished")
            .unwrap_or_else(|e| panic!("lab failed: {e}"));
    let servelab_lab::Finish::Done { trials, .. } = finish else { panic!("interrupted?") };
    let p = &trials[0].profiles[0];
    assert_eq!((p.completed, p.failed), (8, 0), "4 sessions of 2 turns: {p:?}");
    // The engine's log (written by the launched process, flushed as it stopped).
    let log: Vec<TruthRecord> = std::fs::read_to_string(&truth)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|t: &TruthRecord| t.request_id.as_deref().is_some_and(|id| !id.contains("-w")))
        .collect();
    assert_eq!(log.len(), 8);
    let (first, second): (Vec<&TruthRecord>, Vec<&TruthRecord>) =
        log.iter().partition(|t| t.prompt.as_deref().unwrap().matches("<|user|>").count() == 1);
    assert_eq!((first.len(), second.len()), (4, 4));
    for t in &second {
        let prompt = t.prompt.as_deref().unwrap();
        let earlier = first.iter().any(|f| {
            let history = format!(
                "{}{}\n<|user|>\n",
                f.prompt.as_deref().unwrap(),
                f.reply.as_deref().unwrap()
            );
            prompt.starts_with(&history)
        });
        assert!(earlier, "turn 1 resends a turn 0 with its reply: {prompt:?}");
    }
}

/// `--ramp-up-strategy linear` sends request `i` after a gap at the rate reached at that
/// request: with constant gaps (`--burstiness inf`) the intended instants are exact.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_linear_ramp_sets_each_arrival() {
    let _serial = crate::serial::one_at_a_time();
    let sim = sim(SimConfig::fixed(2.0, 1.0)).await;
    let out = bench(
        &sim,
        &[
            "--num-prompts",
            "4",
            "--random-input-len",
            "8",
            "--random-output-len",
            "2",
            "--burstiness",
            "inf",
            "--ramp-up-strategy",
            "linear",
            "--ramp-up-start-rps",
            "10",
            "--ramp-up-end-rps",
            "40",
        ],
    )
    .await;
    let mut scheduled: Vec<u64> =
        out.records.iter().filter(|r| !r.warmup).map(|r| r.scheduled_ns).collect();
    scheduled.sort_unstable();
    // Gaps at 20, 30 and 40 requests per second.
    assert_eq!(scheduled, [0, 50_000_000, 83_333_333, 108_333_333]);
    assert_eq!(truth_of(&sim, &out.records).len(), 4);
    sim.shutdown().await;
}

#[test]
fn ramp_flags_are_checked() {
    let _serial = crate::serial::one_at_a_time();
    let plan = |extra: &[&str]| {
        let a = common::bench_settings("http://127.0.0.1:1", extra);
        servelab::resolve::bench_plan(&a, None)
    };
    let e = plan(&["--ramp-up-strategy", "linear"]).unwrap_err();
    assert!(e.contains("--ramp-up-start-rps"), "{e}");
    let e = plan(&[
        "--ramp-up-strategy",
        "exponential",
        "--ramp-up-start-rps",
        "0",
        "--ramp-up-end-rps",
        "5",
    ])
    .unwrap_err();
    assert!(e.contains("above 0"), "{e}");
    let e = plan(&[
        "--request-rate",
        "5",
        "--ramp-up-strategy",
        "linear",
        "--ramp-up-start-rps",
        "1",
        "--ramp-up-end-rps",
        "5",
    ])
    .unwrap_err();
    assert!(e.contains("drop --request-rate"), "{e}");
}

/// Azure and BurstGPT traces replay at their timestamps (sped up), without their zero-length
/// rows, and every kept row reaches the server with its exact output length.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn azure_and_burstgpt_traces_replay_at_their_timestamps() {
    let _serial = crate::serial::one_at_a_time();
    let sim = sim(SimConfig::fixed(2.0, 0.5).with_max_model_len(8192)).await;
    let azure = testdata("azure-trace.csv");
    let out = bench(
        &sim,
        &[
            "--dataset-name",
            "azure",
            "--dataset-path",
            &azure,
            "--trace-speedup",
            "20",
            "--ignore-eos",
        ],
    )
    .await;
    let mut got: Vec<(u64, u64)> = truth_of(&sim, &out.records)
        .iter()
        .map(|(r, t)| (r.scheduled_ns, t.completion_tokens))
        .collect();
    got.sort_unstable();
    // Offsets from 18:15:46.68059 over 20; the row with 0 generated tokens is skipped.
    let expected_ms = [0.0, 4314.579, 4319.41, 7819.41, 15_000.0];
    let outputs = [44, 109, 55, 16, 7];
    assert_eq!(got.len(), 5);
    for ((at, tokens), (ms, want)) in got.iter().zip(expected_ms.iter().zip(outputs)) {
        let expected = ms * 1e6 / 20.0;
        assert!((*at as f64 - expected).abs() < 1.0, "{at} vs {expected}");
        assert_eq!(*tokens, want);
    }
    let lag = median_schedule_lag_ms(&out.records);
    eprintln!("azure replay: median schedule lag (sent - trace instant) {lag:.3} ms");
    assert!(lag < LAG_MEDIAN_BOUND_MS, "median schedule lag {lag} ms");
    arrived_in_trace_order(&truth_of(&sim, &out.records));
    let rows = out.summary.replay.as_ref().expect("replay figures").rows;
    assert_eq!((rows.zero_length, rows.replayed), (1, 5));
    let mark = sim.truth_len();
    let burst = testdata("burstgpt.csv");
    let out = bench(
        &sim,
        &[
            "--dataset-name",
            "burstgpt",
            "--dataset-path",
            &burst,
            "--burstgpt-model",
            "chatgpt",
            "--trace-speedup",
            "100",
            "--ignore-eos",
        ],
    )
    .await;
    let mut at: Vec<u64> =
        out.records.iter().filter(|r| !r.warmup).map(|r| r.scheduled_ns).collect();
    at.sort_unstable();
    // ChatGPT rows at 5, 45, 120 and 176 s, over 100, from the first.
    assert_eq!(at, [0, 400_000_000, 1_150_000_000, 1_710_000_000]);
    let lag = median_schedule_lag_ms(&out.records);
    eprintln!("burstgpt replay: median schedule lag (sent - trace instant) {lag:.3} ms");
    assert!(lag < LAG_MEDIAN_BOUND_MS, "median schedule lag {lag} ms");
    // This run's requests reuse the Azure run's ids: only the log since this run counts.
    let seq: BTreeMap<String, u64> =
        sim.truth_since(mark).into_iter().filter_map(|t| Some((t.request_id?, t.seq))).collect();
    let mut arrived: Vec<(u64, u64)> = out
        .records
        .iter()
        .filter(|r| !r.warmup)
        .map(|r| (r.scheduled_ns, seq[&request_id(r)]))
        .collect();
    arrived.sort_unstable();
    assert!(arrived.windows(2).all(|w| w[0].1 < w[1].1), "arrivals in trace order: {arrived:?}");
    let rows = out.summary.replay.as_ref().expect("replay figures").rows;
    // Three GPT-4 rows left out by --burstgpt-model (the zero-length one among them).
    assert_eq!((rows.rows, rows.filtered, rows.zero_length, rows.replayed), (7, 3, 0, 4));
    sim.shutdown().await;
}

/// Sessions from a JSONL file: the system prompt and the file's turns reach the server, each
/// turn with the replies the server gave.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jsonl_conversations_run_as_sessions() {
    let _serial = crate::serial::one_at_a_time();
    let sim = sim(SimConfig::fixed(2.0, 0.5)).await;
    let path = testdata("conversations.jsonl");
    let out = bench(
        &sim,
        &[
            "--backend",
            "openai-chat",
            "--dataset-name",
            "sessions",
            "--dataset-path",
            &path,
            "--num-prompts",
            "3",
            "--max-concurrency",
            "3",
        ],
    )
    .await;
    let pairs = truth_of(&sim, &out.records);
    let code: Vec<_> = pairs
        .iter()
        .filter(|(_, t)| {
            t.prompt.as_deref().unwrap().starts_with("<|system|>\nYou review Rust code.")
        })
        .collect();
    assert_eq!(code.len(), 2, "the code review session's two turns");
    let second = code.iter().find(|(r, _)| r.session.unwrap().turn == 1).unwrap();
    let first = code.iter().find(|(r, _)| r.session.unwrap().turn == 0).unwrap();
    let prompt = second.1.prompt.as_deref().unwrap();
    assert!(prompt.contains("Is unwrap on user input fine?"));
    assert!(prompt.contains(first.1.reply.as_deref().unwrap()));
    assert!(prompt.contains("What should I use instead?"));
    // The file's think time (1.5 s) separates the turns.
    assert_eq!(second.0.intended_ns, first.0.end_ns.unwrap() + 1_500_000_000);
    sim.shutdown().await;
}

/// Images a JSONL dataset references by path arrive as data URLs of the file's size.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jsonl_images_arrive_as_the_files_they_name() {
    let _serial = crate::serial::one_at_a_time();
    let sim = sim(SimConfig::fixed(2.0, 0.5)).await;
    let path = testdata("multimodal.jsonl");
    let out = bench(
        &sim,
        &[
            "--backend",
            "openai-chat",
            "--dataset-name",
            "jsonl",
            "--dataset-path",
            &path,
            "--num-prompts",
            "3",
        ],
    )
    .await;
    let pairs = truth_of(&sim, &out.records);
    assert_eq!(pairs.len(), 3);
    let mut seen: Vec<Vec<(u32, u32)>> =
        pairs.iter().map(|(_, t)| t.images.iter().map(|i| (i.width, i.height)).collect()).collect();
    seen.sort();
    // Lines 1 and 3 carry the local 4×3 PNG; line 2 also names a remote URL, which the
    // simulator does not fetch: it refuses that request before reading its images.
    assert_eq!(seen, [vec![], vec![(4, 3)], vec![(4, 3)]]);
    sim.shutdown().await;
}

/// ShareGPT conversations run with all their turns: the system message opens every turn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sharegpt_conversations_run_with_all_their_turns() {
    let _serial = crate::serial::one_at_a_time();
    let sim = sim(SimConfig::fixed(2.0, 0.5)).await;
    let path = testdata("sharegpt-multiturn.json");
    let out = bench(
        &sim,
        &[
            "--backend",
            "openai-chat",
            "--dataset-name",
            "sessions",
            "--dataset-path",
            &path,
            "--num-prompts",
            "3",
            "--sharegpt-output-len",
            "4",
            "--ignore-eos",
        ],
    )
    .await;
    let pairs = truth_of(&sim, &out.records);
    let s = out.summary.sessions.as_ref().unwrap();
    assert_eq!(s.sessions, 3);
    assert!(s.turns > 3, "conversations of several turns: {}", s.turns);
    for (r, t) in &pairs {
        assert_eq!(t.completion_tokens, 4);
        if t.prompt.as_deref().unwrap().starts_with("<|system|>\nBe concise.") {
            assert!(r.session.is_some());
        }
    }
    assert!(pairs.iter().any(|(r, t)| r.session.unwrap().turn == 1
        && t.prompt.as_deref().unwrap().contains("What is a prefix cache?")));
    sim.shutdown().await;
}

/// A rate grid ending at `inf` (seed-001's all-at-once cases): the inf point sends its prompts
/// at once, is in the table and sweep.json, and stays off the charts and the knee.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_grid_can_end_all_at_once() {
    let _serial = crate::serial::one_at_a_time();
    let sim = sim(SimConfig::fixed(5.0, 1.0)).await;
    let dir = tempfile::tempdir().unwrap();
    let sweep = sweep(
        &sim,
        dir.path(),
        &["--scenario", "32:4", "--request-rate", "20,inf", "--num-prompts", "8"],
    )
    .await;
    let points = &sweep.scenarios[0].points;
    assert_eq!(points.len(), 2);
    let burst = &points[1];
    assert!(burst.load.value().is_infinite());
    assert_eq!(burst.summary.info.load.request_rate, None, "inf is no rate: all at once");
    // All 8 were due at time zero.
    assert_eq!(burst.summary.client_queue_ms.max, 0.0);
    assert!(burst.summary.peak_concurrency >= 2);
    let md = std::fs::read_to_string(dir.path().join("summary.md")).unwrap();
    assert!(md.lines().any(|l| l.trim_start_matches('|').trim_start().starts_with("inf ")), "{md}");
    // The knee is read from the finite levels only: one, so no curve.
    assert!(md.contains("Saturation: one level measured (request rate 20); no curve."), "{md}");
    sim.shutdown().await;
}

/// A trace denser than the client may send (a request every 4 ms, two slots, requests of
/// ~25 ms): the sends fall behind the trace's instants into the client queue, where the
/// generic schedule-lag warning cannot see them, and the run says so in plain words. The
/// trace's cap shows in the replay's row counts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replay_the_client_cannot_keep_up_with_says_so() {
    let _serial = crate::serial::one_at_a_time();
    let sim = sim(SimConfig::fixed(5.0, 1.0)).await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dense.jsonl");
    let lines: Vec<String> = (0..40)
        .map(|i| {
            format!(
                r#"{{"timestamp": {}, "input_length": 16, "output_length": 20, "hash_ids": [{i}]}}"#,
                i * 4
            )
        })
        .collect();
    std::fs::write(&path, lines.join("\n")).unwrap();
    let out = bench(
        &sim,
        &[
            "--dataset-name",
            "mooncake",
            "--dataset-path",
            path.to_str().unwrap(),
            "--trace-max-requests",
            "30",
            "--max-concurrency",
            "2",
            "--ignore-eos",
            "--num-warmups",
            "0",
        ],
    )
    .await;
    assert_eq!(out.summary.completed, 30);
    let replay = out.summary.replay.as_ref().expect("replay figures");
    assert_eq!(
        replay.rows,
        servelab_metrics::TraceRows { rows: 40, over_cap: 10, replayed: 30, ..Default::default() }
    );
    // 30 requests of ≥ 25 ms on two slots take ≥ 375 ms; the trace spans 116 ms. The median
    // request is sent well over 10 ms after its instant, whatever the machine.
    assert!(replay.behind_ms.median > 50.0, "{:?}", replay.behind_ms);
    let warning = out
        .summary
        .warnings
        .iter()
        .find(|w| w.starts_with("the replay fell behind the trace"))
        .unwrap_or_else(|| panic!("{:#?}", out.summary.warnings));
    eprintln!("dense replay: {warning}");
    assert!(warning.contains("waiting for a free --max-concurrency slot"), "{warning}");
    sim.shutdown().await;
}

/// Flags a workload would silently ignore are refused with a usage error (exit 2) that names
/// them: a rate, burstiness or ramp beside a trace (its timestamps are the arrivals), rate
/// levels in a sweep over a trace, and a think time without sessions.
#[test]
fn flags_a_workload_would_ignore_are_refused() {
    let _serial = crate::serial::one_at_a_time();
    let trace = testdata("mooncake-trace.jsonl");
    let run = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_servelab"))
            .args(args)
            .args(["--base-url", "http://127.0.0.1:1", "--no-store", "--no-progress"])
            .output()
            .expect("binary runs");
        (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let replay = ["bench", "--dataset-name", "mooncake", "--dataset-path", &trace];
    let cases: [(Vec<&str>, &str); 6] = [
        ([&replay[..], &["--request-rate", "5"]].concat(), "--request-rate: a trace replay"),
        ([&replay[..], &["--burstiness", "0.5"]].concat(), "--burstiness: a trace replay"),
        (
            [
                &replay[..],
                &["--ramp-up-strategy", "linear", "--ramp-up-start-rps", "1"],
                &["--ramp-up-end-rps", "5"],
            ]
            .concat(),
            "--ramp-up-strategy/--ramp-up-start-rps/--ramp-up-end-rps: a trace replay",
        ),
        (
            vec!["sweep", "--dataset-name", "mooncake", "--dataset-path", &trace, "--request-rate"]
                .into_iter()
                .chain(["1,2"])
                .collect(),
            "--request-rate: a sweep over a trace replay cannot set rate levels",
        ),
        (
            vec!["bench", "--dataset-name", "random", "--think-time", "uniform:1-2"],
            "--think-time: only multi-turn sessions pause between turns",
        ),
        (
            vec!["bench", "--dataset-name", "mooncake", "--dataset-path", &trace, "--think-time"]
                .into_iter()
                .chain(["2"])
                .collect(),
            "--think-time: only multi-turn sessions",
        ),
    ];
    for (args, want) in cases {
        let (code, stderr) = run(&args);
        assert_eq!(code, Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(want), "{args:?}: {stderr}");
    }
    // A cap is what a replay does take.
    let e = servelab::resolve::bench_plan(
        &common::bench_settings(
            "http://127.0.0.1:1",
            &[&replay[1..], &["--max-concurrency", "4"]].concat(),
        ),
        None,
    );
    assert!(e.is_ok(), "{e:?}");
}

/// A sweep over a trace: every concurrency level replays the whole trace at its timestamps
/// (the cap is the level), and reports the replay's rows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sweep_replays_a_trace_at_each_level() {
    let _serial = crate::serial::one_at_a_time();
    let sim = sim(SimConfig::fixed(2.0, 0.5).with_max_model_len(8192)).await;
    let dir = tempfile::tempdir().unwrap();
    let path = testdata("mooncake-trace.jsonl");
    let sweep = sweep(
        &sim,
        dir.path(),
        &[
            "--concurrency",
            "1,4",
            "--dataset-name",
            "mooncake",
            "--dataset-path",
            &path,
            "--trace-speedup",
            "4",
            "--ignore-eos",
            "--num-warmups",
            "0",
        ],
    )
    .await;
    let points = &sweep.scenarios[0].points;
    assert_eq!(points.len(), 2);
    for p in points {
        assert_eq!(p.summary.completed, 6, "the whole trace at concurrency {}", p.load.value());
        let replay = p.summary.replay.as_ref().expect("replay figures");
        assert_eq!((replay.rows.rows, replay.rows.replayed, replay.behind_ms.count), (6, 6, 6));
        // The last row is due at 2,100 ms / 4: the point cannot be shorter.
        assert!(p.summary.duration_s >= 0.525, "{}", p.summary.duration_s);
        assert!(p.summary.peak_concurrency <= p.load.value() as u64);
    }
    // Each level sent the whole trace to the server.
    assert_eq!(sim.truth().iter().filter(|t| t.outcome == "ok").count(), 12);
    sim.shutdown().await;
}

/// A sweep of random images: every point's requests reach the server with their images.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sweep_runs_random_images_at_each_level() {
    let _serial = crate::serial::one_at_a_time();
    let sim = sim(SimConfig::fixed(2.0, 0.5)).await;
    let dir = tempfile::tempdir().unwrap();
    let sweep = sweep(
        &sim,
        dir.path(),
        &[
            "--concurrency",
            "1,2",
            "--backend",
            "openai-chat",
            "--dataset-name",
            "random-mm",
            "--random-mm-images",
            "2",
            "--random-mm-image-size",
            "48x16",
            "--random-input-len",
            "8",
            "--random-output-len",
            "2",
            "--num-warmups",
            "0",
        ],
    )
    .await;
    let points = &sweep.scenarios[0].points;
    assert_eq!(points.len(), 2);
    for p in points {
        assert_eq!((p.summary.completed, p.summary.failed), (p.num_prompts as u64, 0));
    }
    let truth = sim.truth();
    assert_eq!(truth.len(), points.iter().map(|p| p.num_prompts).sum::<usize>());
    for t in &truth {
        let sizes: Vec<(u32, u32)> = t.images.iter().map(|i| (i.width, i.height)).collect();
        assert_eq!(sizes, [(48, 16), (48, 16)]);
    }
    sim.shutdown().await;
}

/// `--think-time uniform:MIN-MAX` draws each pause between a reply and the next turn from
/// that range, and `--request-rate` starts sessions (not turns) at that rate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uniform_think_times_and_session_starts_per_second() {
    let _serial = crate::serial::one_at_a_time();
    let sim = sim(SimConfig::fixed(2.0, 0.5)).await;
    let out = bench(
        &sim,
        &[
            "--backend",
            "openai-chat",
            "--dataset-name",
            "sessions",
            "--session-turns",
            "3",
            "--num-prompts",
            "4",
            "--random-input-len",
            "8",
            "--random-output-len",
            "2",
            "--ignore-eos",
            "--think-time",
            "uniform:0.01-0.03",
            "--request-rate",
            "20",
            "--burstiness",
            "inf",
            "--num-warmups",
            "0",
        ],
    )
    .await;
    let mut by_session: BTreeMap<u64, Vec<&RequestRecord>> = BTreeMap::new();
    for r in &out.records {
        by_session.entry(r.session.unwrap().session).or_default().push(r);
    }
    assert_eq!(by_session.len(), 4);
    // Sessions start 50 ms apart (20 per second, constant gaps); later turns are not paced
    // by the rate.
    let starts: Vec<u64> = by_session
        .values()
        .map(|t| t.iter().find(|r| r.session.unwrap().turn == 0).unwrap().scheduled_ns)
        .collect();
    assert_eq!(starts, [0, 50_000_000, 100_000_000, 150_000_000]);
    let mut pauses = Vec::new();
    for turns in by_session.values_mut() {
        turns.sort_by_key(|r| r.session.unwrap().turn);
        assert_eq!(turns.len(), 3);
        for w in turns.windows(2) {
            pauses.push(w[1].intended_ns - w[0].end_ns.unwrap());
        }
    }
    assert!(pauses.iter().all(|p| (10_000_000..=30_000_000).contains(p)), "{pauses:?}");
    assert!(pauses.windows(2).any(|w| w[0] != w[1]), "drawn, not fixed: {pauses:?}");
    sim.shutdown().await;
}

/// `--hf-name ORG/NAME` resolves through the Hugging Face cache (`HF_HUB_CACHE`, offline),
/// its subset and split choose the file, and its rows reach the server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hugging_face_dataset_is_found_in_the_hub_cache() {
    let _serial = crate::serial::one_at_a_time();
    let sim = sim(SimConfig::fixed(2.0, 0.5)).await;
    let url = sim.base_url();
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_servelab"))
            .env("HF_HUB_CACHE", testdata("hf-cache"))
            .env("HF_HUB_OFFLINE", "1")
            .args(["bench", "--base-url", &url, "--no-store", "--no-progress"])
            .args(["--dataset-name", "hf", "--hf-name", "servelab/tiny-instruct"])
            .args(["--hf-subset", "data", "--hf-split", "test", "--num-prompts", "2"])
            .args(["--hf-output-len", "3", "--num-warmups", "0"])
            .output()
            .expect("binary runs")
    })
    .await
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let truth = sim.truth();
    assert_eq!(truth.len(), 2);
    for t in &truth {
        assert_eq!(t.prompt.as_deref(), Some("What is 2 + 2?"));
        assert_eq!(t.completion_tokens, 3);
    }
    sim.shutdown().await;
}
