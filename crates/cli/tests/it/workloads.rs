//! End-to-end: the workloads of issue 15 against the simulator started in-process, checked
//! against what reached the server (its truth log, with prompt and reply texts) and against
//! the schedule the client computed, not against measured time (the replays' send lateness is
//! the timing binary's).

use std::collections::BTreeMap;
use std::time::Duration;

use servelab_records::RequestRecord;
use servelab_sim::{SimConfig, TruthRecord};

use crate::common;
use crate::common::workloads::{bench, sim, testdata, truth_of};

/// `servelab sweep` against `sim` with `args` after the common flags, writing to `dir`;
/// returns its sweep.json.
async fn sweep(
    sim: &servelab_sim::SimHandle,
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

/// Random images reach the server as valid data URLs of the requested size and count.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_images_arrive_at_their_size() {
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

/// Sessions from a JSONL file: the system prompt and the file's turns reach the server, each
/// turn with the replies the server gave.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jsonl_conversations_run_as_sessions() {
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
    let sim = sim(SimConfig::fixed(5.0, 1.0)).await;
    let dir = tempfile::tempdir().unwrap();
    let sweep = sweep(
        &sim,
        dir.path(),
        // A sweep sizes its points with --min/--max-prompts (it ignores --num-prompts, which
        // left this test sending 100 and then 2,000 prompts).
        &[
            "--scenario",
            "32:4",
            "--request-rate",
            "20,inf",
            "--min-prompts",
            "8",
            "--max-prompts",
            "8",
        ],
    )
    .await;
    let points = &sweep.scenarios[0].points;
    assert_eq!(points.len(), 2);
    let burst = &points[1];
    assert!(burst.load.value().is_infinite());
    assert_eq!(burst.summary.info.load.request_rate, None, "inf is no rate: all at once");
    assert!(points.iter().all(|p| p.num_prompts == 8 && p.summary.completed == 8));
    // All 8 were due at time zero.
    assert_eq!(burst.summary.client_queue_ms.max, 0.0);
    assert!(burst.summary.peak_concurrency >= 2);
    let md = std::fs::read_to_string(dir.path().join("summary.md")).unwrap();
    assert!(md.lines().any(|l| l.trim_start_matches('|').trim_start().starts_with("inf ")), "{md}");
    // The knee is read from the finite levels only: one, so no curve.
    assert!(md.contains("Saturation: one level measured (request rate 20); no curve."), "{md}");
    sim.shutdown().await;
}

/// Flags a workload would silently ignore are refused with a usage error (exit 2) that names
/// them: a rate, burstiness or ramp beside a trace (its timestamps are the arrivals), rate
/// levels in a sweep over a trace, and a think time without sessions.
#[test]
fn flags_a_workload_would_ignore_are_refused() {
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
