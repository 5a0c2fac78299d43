//! End to end: `servelab lab` launching `servelab sim serve` processes as engines.
//!
//! The options under test change the simulated engine's capacity and timing by large
//! factors (8× more slots, 4× slower tokens, 20% injected errors), so the verdicts hold on a
//! noisy shared machine. Every test ends by checking that no engine process survived.

use std::time::{Duration, Instant};

use servelab::args::LabRunArgs;
use servelab::run_experiment;
use servelab_lab::conclusion::{change_pct, signed_pct};
use servelab_lab::strategy::Decision;
use servelab_lab::trial::TrialStatus;
use servelab_lab::Finish;
use tokio::sync::watch;

use crate::common::lab::{args, assert_no_survivors, marker, sim, survivors, write, BIN, TINY};

async fn run(a: &LabRunArgs) -> Finish {
    let (_tx, rx) = watch::channel(false);
    let (f, _) = run_experiment(a, rx).await.unwrap_or_else(|e| panic!("lab failed: {e}"));
    f
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn greedy_keeps_what_helps_and_rejects_what_hurts_or_fails() {
    let m = marker("greedy");
    let tmp = tempfile::tempdir().unwrap();
    let yaml = format!(
        "name: greedy-test\nstrategy: greedy\nengines:\n\
         \x20 - {{name: slow, command: '{}', ready_timeout_secs: 60, stop_grace_secs: 3}}\n\
         \x20 - {{name: sim, command: '{}', ready_timeout_secs: 60, stop_grace_secs: 3}}\n\
         profiles:\n{TINY}\
         options:\n  slots16: --max-num-seqs 16\n  slow-tokens: --itl-ms 20\n  \
         flaky: --fault-rate server-error=0.2\n",
        sim(&m, "--itl-ms 10 --max-num-seqs 2"),
        sim(&m, "--itl-ms 5 --max-num-seqs 2"),
    );
    let file = write(tmp.path(), &yaml);
    let dir = tmp.path().join("out");
    let a = args(&file, &dir);
    let Finish::Done { outcome, trials } = run(&a).await else { panic!("interrupted?") };
    assert_no_survivors(&m);

    let steps: Vec<(&str, Decision)> =
        outcome.steps.iter().map(|s| (s.trial.as_str(), s.decision)).collect();
    assert_eq!(
        steps,
        vec![
            ("slow", Decision::Baseline),
            ("sim", Decision::Baseline),
            ("sim+slots16", Decision::Kept),
            ("sim+slots16+slow-tokens", Decision::Rejected),
            ("sim+slots16+flaky", Decision::Rejected),
        ],
        "{:#?}",
        outcome.steps
    );
    let gain = outcome.steps[2].deltas[0].delta_pct;
    assert!(gain > 200.0, "16 slots instead of 2 should be several times faster: {gain:+.1}%");
    assert!(outcome.steps[3].reason.starts_with("worse: tiny -"), "{}", outcome.steps[3].reason);
    assert!(outcome.steps[3].deltas[0].delta_pct < -30.0, "{:?}", outcome.steps[3].deltas);
    let why = &outcome.steps[4].reason;
    assert!(
        why.starts_with("profile tiny: ") && why.contains("requests failed (http_status"),
        "{why}"
    );
    assert_eq!(outcome.kept, vec!["slots16"]);
    assert_eq!(
        outcome.recommended.as_deref(),
        Some(sim(&m, "--itl-ms 5 --max-num-seqs 16").as_str())
    );
    // Baselines: the engine with faster tokens wins.
    let v =
        |id: &str| trials.iter().find(|t| t.spec.id == id).unwrap().profiles[0].total_tokens_per_s;
    assert!(v("sim") > v("slow"), "sim {} vs slow {}", v("sim"), v("slow"));
    // The sim exports vLLM's counters: 32 requests × 16 output tokens per profile.
    let sim = trials.iter().find(|t| t.spec.id == "sim").unwrap();
    assert_eq!(sim.profiles[0].engine.generation_tokens, Some(512.0));
    assert_eq!(sim.profiles[0].engine.requests_running, Some(0.0));
    // Sampled while the ~1.4 s profile ran: both slots busy, the rest queued.
    assert_eq!(sim.profiles[0].engine.peak_requests_running, Some(2.0));
    assert!(
        sim.profiles[0].engine.peak_requests_waiting.unwrap() >= 1.0,
        "{:?}",
        sim.profiles[0].engine
    );
    assert!(sim.startup_secs.unwrap() > 0.0);

    // The experiment folder: a log and a result per trial, and the report.
    for t in &trials {
        let folder = dir.join(t.spec.id.replace('+', "_"));
        assert!(folder.join("trial.json").is_file(), "{}", folder.display());
        assert!(folder.join("engine.log").is_file());
    }
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(md.contains("--itl-ms 5 --max-num-seqs 16"), "{md}");
    assert!(md.contains("| sim+slots16+flaky"), "{md}");
    let svg = std::fs::read_to_string(dir.join("chart.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("<polyline"), "{svg}");
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(html.contains("<svg") && html.contains("Steps"));

    // Resume: every trial finished, so nothing is launched again and the outcome is the same.
    let logs_before: Vec<_> = trials
        .iter()
        .map(|t| {
            std::fs::metadata(dir.join(t.spec.id.replace('+', "_")).join("engine.log"))
                .unwrap()
                .modified()
                .unwrap()
        })
        .collect();
    let again = LabRunArgs { resume: true, ..a.clone() };
    let Finish::Done { outcome: o2, .. } = run(&again).await else { panic!() };
    assert_eq!(o2.recommended, outcome.recommended);
    let logs_after: Vec<_> = trials
        .iter()
        .map(|t| {
            std::fs::metadata(dir.join(t.spec.id.replace('+', "_")).join("engine.log"))
                .unwrap()
                .modified()
                .unwrap()
        })
        .collect();
    assert_eq!(logs_before, logs_after, "a finished trial was run again");
    // Without --resume, a folder with finished trials is refused.
    let (_tx, rx) = watch::channel(false);
    let e = run_experiment(&a, rx).await.unwrap_err().to_string();
    assert!(e.contains("pass --resume"), "{e}");

    // `servelab lab report DIR` rebuilds the report; the runs are in the store with tags.
    std::fs::remove_file(dir.join("report.md")).unwrap();
    let out = std::process::Command::new(BIN).args(["lab", "report"]).arg(&dir).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("## Steps"));
    assert!(dir.join("report.md").is_file());
    let out = std::process::Command::new(BIN)
        .args(["runs", "list", "--tag", "lab.trial=sim+slots16", "--format", "json", "--db"])
        .arg(a.db.as_ref().unwrap())
        .output()
        .unwrap();
    let listed = String::from_utf8_lossy(&out.stdout);
    assert!(listed.contains("greedy-test/sim+slots16/tiny"), "{listed}");
    assert_no_survivors(&m);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_engines_are_failed_trials_and_the_experiment_goes_on() {
    let m = marker("failing");
    let tmp = tempfile::tempdir().unwrap();
    // good: ready at once. bad: not a program. late: starts answering 200 after 30 s, past
    // its 1.5 s readiness timeout. crashy: its sim is killed 2 s after launch, mid-profile
    // (one slot: the profile takes ~2.7 s).
    let yaml = format!(
        "name: failing-test\nstrategy: baseline\nengines:\n\
         \x20 - {{name: good, command: '{}', ready_timeout_secs: 60, stop_grace_secs: 3}}\n\
         \x20 - {{name: bad, command: '/nonexistent/engine-{m} --port {{port}}', ready_timeout_secs: 60}}\n\
         \x20 - {{name: late, command: '{}', ready_timeout_secs: 1.5, stop_grace_secs: 3}}\n\
         \x20 - {{name: crashy, command: '{} & sleep 2; kill $!; exit 3', ready_timeout_secs: 60}}\n\
         profiles:\n{TINY}",
        sim(&m, "--itl-ms 5 --max-num-seqs 16"),
        sim(&m, "--itl-ms 5 --startup-secs 30"),
        sim(&m, "--itl-ms 5 --max-num-seqs 1"),
    );
    let file = write(tmp.path(), &yaml);
    let dir = tmp.path().join("out");
    let mut a = args(&file, &dir);
    a.no_store = true;
    let Finish::Done { outcome, trials } = run(&a).await else { panic!("interrupted?") };
    assert_no_survivors(&m);
    assert_eq!(outcome.best.as_deref(), Some("good"));
    let reason = |id: &str| match &trials.iter().find(|t| t.spec.id == id).unwrap().status {
        TrialStatus::Failed { reason, log_tail } => (reason.clone(), log_tail.clone()),
        TrialStatus::Finished => panic!("{id} did not fail"),
    };
    let (r, tail) = reason("bad");
    assert!(r.starts_with("engine exited (exit code 127) before it was ready"), "{r}");
    assert!(tail.contains("nonexistent"), "{tail}");
    let (r, _) = reason("late");
    assert!(r.starts_with("engine not ready within 2 s (GET /health answered HTTP 503)"), "{r}");
    let (r, _) = reason("crashy");
    assert!(r.starts_with("engine exited (exit code 3)"), "{r}");
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(md.contains("## Failed trial late") && md.contains("## Failed trial bad"), "{md}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupt_mid_trial_stops_the_engine_and_resume_finishes_the_rest() {
    let m = marker("interrupt");
    let tmp = tempfile::tempdir().unwrap();
    // quick finishes; long (1 slot, 64 requests of ~85 ms: ~5.4 s) is interrupted mid-profile.
    let yaml = format!(
        "name: interrupt-test\nstrategy: baseline\nengines:\n\
         \x20 - {{name: quick, command: '{}', ready_timeout_secs: 60, stop_grace_secs: 3}}\n\
         \x20 - {{name: long, command: '{}', ready_timeout_secs: 60, stop_grace_secs: 3}}\n\
         profiles:\n{}",
        sim(&m, "--itl-ms 5 --max-num-seqs 16"),
        sim(&m, "--itl-ms 5 --max-num-seqs 1"),
        TINY.replace("num_prompts: 32", "num_prompts: 64"),
    );
    let file = write(tmp.path(), &yaml);
    let dir = tmp.path().join("out");
    let mut a = args(&file, &dir);
    a.no_store = true;
    let (tx, rx) = watch::channel(false);
    let task = {
        let a = a.clone();
        tokio::spawn(async move { run_experiment(&a, rx).await })
    };
    // Wait until the long trial's engine is up and its profile under way.
    let deadline = Instant::now() + Duration::from_secs(60);
    while !dir.join("long/engine.log").exists() || survivors(&m).is_empty() {
        assert!(Instant::now() < deadline, "the long trial never started");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(!survivors(&m).is_empty(), "the long engine should be running");
    tx.send(true).unwrap();
    let (finish, _) = tokio::time::timeout(Duration::from_secs(30), task)
        .await
        .expect("the lab did not stop after the interrupt")
        .unwrap()
        .unwrap();
    assert_eq!(finish, Finish::Interrupted { finished: 1 });
    assert_no_survivors(&m);
    assert!(dir.join("quick/trial.json").is_file());
    assert!(!dir.join("long/trial.json").exists(), "an interrupted trial is not recorded");
    // The report of an unfinished experiment lists what finished and says how to go on.
    assert_eq!(servelab_lab::report::report_dir(&dir, BIN).unwrap(), None);
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(md.contains("unfinished") && md.contains("| quick"), "{md}");

    // Resume: quick is skipped, long runs to the end.
    let quick_log = std::fs::metadata(dir.join("quick/engine.log")).unwrap().modified().unwrap();
    let Finish::Done { trials, outcome } = run(&LabRunArgs { resume: true, ..a }).await else {
        panic!()
    };
    assert_eq!(trials.len(), 2);
    assert_eq!(trials.iter().find(|t| t.spec.id == "long").unwrap().profiles[0].completed, 64);
    assert_eq!(outcome.best.as_deref(), Some("quick"));
    let quick_after = std::fs::metadata(dir.join("quick/engine.log")).unwrap().modified().unwrap();
    assert_eq!(quick_log, quick_after, "quick was run again");
    assert_no_survivors(&m);
}

#[test]
fn a_bad_profile_option_is_a_usage_error_naming_the_profile() {
    let tmp = tempfile::tempdir().unwrap();
    let file = write(
        tmp.path(),
        "engines:\n  - {name: a, command: 'true'}\nprofiles:\n  - {name: p, num_promts: 3}\n",
    );
    let out = std::process::Command::new(BIN)
        .args(["lab", "run"])
        .arg(&file)
        .arg("--output-dir")
        .arg(tmp.path().join("out"))
        .arg("--no-store")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("profiles[0] (p): unexpected argument '--num-promts' found"), "{err}");
    assert!(!tmp.path().join("out").exists(), "nothing should start on a bad file");
}

/// Profiles whose own seeds meet within the repeats would send one another's prompts (the
/// llama-server sample's did: seeds 1 and 2, three runs each): refused before any engine starts.
#[test]
fn profiles_whose_seeds_meet_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let file = write(
        tmp.path(),
        "engines:\n  - {name: a, command: 'true'}\nprofiles:\n  - {name: p, num_prompts: 3, \
         seed: 1}\n  - {name: q, num_prompts: 3, seed: 2}\nacceptance: {repeats: 3}\n",
    );
    let out = std::process::Command::new(BIN)
        .args(["lab", "run"])
        .arg(&file)
        .arg("--output-dir")
        .arg(tmp.path().join("out"))
        .arg("--no-store")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("profiles[1].seed: profile 'q' (seed 2) and profiles[0] 'p'"), "{err}");
    assert!(!tmp.path().join("out").exists(), "nothing should start on a bad file");
}

/// Run `servelab lab run` as a process, send it `signals` once its long trial's profile is
/// under way, and return its exit code and stderr. Engines must all be gone afterwards.
fn signal_the_binary(test: &str, signals: &[&str]) -> (Option<i32>, String) {
    let m = marker(test);
    let tmp = tempfile::tempdir().unwrap();
    let yaml = format!(
        "name: {test}\nengines:\n\
         \x20 - {{name: long, command: '{}', ready_timeout_secs: 60, stop_grace_secs: 3}}\n\
         profiles:\n{}",
        sim(&m, "--itl-ms 5 --max-num-seqs 1"),
        TINY.replace("num_prompts: 32", "num_prompts: 64"),
    );
    let file = write(tmp.path(), &yaml);
    let err_path = tmp.path().join("stderr");
    let mut child = std::process::Command::new(BIN)
        .args(["lab", "run"])
        .arg(&file)
        .arg("--output-dir")
        .arg(tmp.path().join("out"))
        .arg("--no-store")
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&err_path).unwrap())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !std::fs::read_to_string(&err_path).unwrap_or_default().contains("ready in") {
        assert!(Instant::now() < deadline, "the engine never became ready");
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(700));
    assert!(!survivors(&m).is_empty(), "the engine should be running");
    for sig in signals {
        let ok = std::process::Command::new("kill")
            .arg(format!("-{sig}"))
            .arg(child.id().to_string())
            .status()
            .unwrap();
        assert!(ok.success());
        std::thread::sleep(Duration::from_millis(100));
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "servelab did not exit after {signals:?}");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_no_survivors(&m);
    (status.code(), std::fs::read_to_string(&err_path).unwrap_or_default())
}

#[test]
fn ctrl_c_stops_the_engine_and_says_how_to_resume() {
    let (code, err) = signal_the_binary("sigint", &["INT"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("interrupted after 0 finished trials") && err.contains("--resume"),
        "{err}"
    );
}

#[test]
fn a_second_ctrl_c_quits_at_once_and_still_kills_the_engine() {
    let (code, err) = signal_the_binary("sigint2", &["INT", "INT"]);
    assert_eq!(code, Some(2), "{err}");
}

#[test]
fn sigterm_stops_the_engine_too() {
    let (code, err) = signal_the_binary("sigterm", &["TERM"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("terminated: stopping the engine"), "{err}");
}

/// Issue 28: a lab killed with SIGKILL runs no handler, and left its `sh -c` wrapper and the
/// engine running. The engine's watchdog sees the lab's end of its pipe close and kills the
/// group: nothing of it is left within the helper's 5 s bound.
#[test]
fn sigkill_of_the_lab_takes_its_engine_down() {
    let (code, err) = signal_the_binary("sigkill", &["KILL"]);
    assert_eq!(code, None, "killed by a signal: {err}");
}

/// `acceptance.repeats: 2`: every profile runs twice per trial, in rounds, the second run with
/// the next seed (fresh prompts), recorded as its own store run; the trial's value is the
/// mean, and the report shows the spread of the runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeats_run_every_profile_again_with_fresh_prompts() {
    let m = marker("repeats");
    let tmp = tempfile::tempdir().unwrap();
    let yaml = format!(
        "name: repeat-test\nstrategy: baseline\nengines:\n\
         \x20 - {{name: sim, command: '{}', ready_timeout_secs: 60, stop_grace_secs: 3}}\n\
         profiles:\n{TINY}\
         acceptance: {{repeats: 2}}\n",
        sim(&m, "--itl-ms 2 --max-num-seqs 16"),
    );
    let file = write(tmp.path(), &yaml);
    let dir = tmp.path().join("out");
    let a = args(&file, &dir);
    let Finish::Done { outcome, trials } = run(&a).await else { panic!("interrupted?") };
    assert_no_survivors(&m);
    assert_eq!(outcome.best.as_deref(), Some("sim"));
    let runs: Vec<(u32, u64)> =
        trials[0].profiles.iter().map(|p| (p.repeat, p.completed)).collect();
    assert_eq!(runs, vec![(0, 32), (1, 32)]);
    let mean =
        (trials[0].profiles[0].total_tokens_per_s + trials[0].profiles[1].total_tokens_per_s) / 2.0;
    assert_eq!(outcome.steps[0].values[0].1, Some(mean));
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(md.contains("Each profile ran 2 times per trial"), "{md}");
    assert!(md.contains(&format!("{mean:.1} ±")), "{md}");
    assert!(md.contains(" 64/0 |"), "{md}");
    // Two store runs; the second with seed 2 (the profile's 1, plus one).
    let show = |label: &str| {
        let out = std::process::Command::new(BIN)
            .args(["runs", "show", label, "--db"])
            .arg(a.db.as_ref().unwrap())
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    assert!(show("repeat-test/sim/tiny").contains("\"seed\": 1,"));
    let second = show("repeat-test/sim/tiny#2");
    assert!(second.contains("\"seed\": 2,") && second.contains("lab.repeat=2"), "{second}");
}

/// Issue 25: every built-in used seed 42, so a 1,000-token random prompt was an exact prefix
/// of the 1,024-token one, and an engine with a prefix cache served the second profile from
/// the first one's prompts. Two profiles of those shapes on the engine-model simulator (prefix
/// caching on, as in vLLM) and a repeat: the simulator's own truth log shows that no prompt
/// of one run starts like a prompt of another, its /metrics count no prefix-cache hit, and
/// each run says the cache state it started from.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn profiles_and_repeats_send_prompts_of_their_own() {
    let m = marker("seeds");
    let tmp = tempfile::tempdir().unwrap();
    let truth = tmp.path().join("truth.jsonl");
    let engine =
        concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/engines/qwen3-8b-h100-tp1.yaml");
    let command = format!(
        "{BIN} sim serve --port {{port}} --served-model-name {m} --engine {engine} \
         --truth-log {} --truth-text",
        truth.display()
    );
    let profile = |name: &str, isl: u32| {
        format!(
            "  - {{name: {name}, base: throughput, random_input_len: {isl}, random_output_len: 4, \
             num_prompts: 3, tokenizer: cl100k_base}}\n"
        )
    };
    let yaml = format!(
        "name: seeds-test\nstrategy: baseline\nengines:\n\
         \x20 - {{name: sim, command: '{command}', ready_timeout_secs: 60, stop_grace_secs: 3}}\n\
         profiles:\n{}{}acceptance: {{repeats: 2}}\n",
        profile("long", 1024),
        profile("short", 1000),
    );
    let file = write(tmp.path(), &yaml);
    let dir = tmp.path().join("out");
    let a = LabRunArgs { no_store: true, ..args(&file, &dir) };
    let Finish::Done { trials, .. } = run(&a).await else { panic!("interrupted?") };
    assert_no_survivors(&m);
    let runs: Vec<(String, u32, Option<u32>)> =
        trials[0].profiles.iter().map(|p| (p.profile.clone(), p.repeat, p.after_runs)).collect();
    let want = |n: &str, r, a| (n.to_string(), r, Some(a));
    assert_eq!(
        runs,
        vec![want("long", 0, 0), want("short", 0, 1), want("long", 1, 2), want("short", 1, 3)]
    );
    for p in &trials[0].profiles {
        assert_eq!(p.engine.prefix_cache_hit_rate, Some(0.0), "{} #{}", p.profile, p.repeat);
    }
    // The truth: 12 prompts, no two alike in their first 64 characters (the chat template
    // adds nothing to a completion prompt).
    let text = std::fs::read_to_string(&truth).unwrap();
    let prompts: Vec<String> = text
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .map(|v| v["prompt"].as_str().expect("--truth-text keeps prompts").to_string())
        .collect();
    assert_eq!(prompts.len(), 12);
    let mut heads: Vec<String> = prompts.iter().map(|p| p.chars().take(64).collect()).collect();
    heads.sort();
    heads.dedup();
    assert_eq!(heads.len(), 12, "runs shared prompt prefixes: {prompts:#?}");
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    let row = |cells: &[&str]| {
        md.lines().any(|l| {
            let l: Vec<&str> = l.split('|').map(str::trim).collect();
            l.len() > cells.len() && l[1..=cells.len()] == *cells
        })
    };
    assert!(row(&["sim", "long", "fresh engine"]), "{md}");
    assert!(row(&["sim", "short #2", "warmed by 3 runs"]), "{md}");
    assert!(md.contains("drawn from lab seed 42"), "{md}");
}

/// The seed-003 report shape from real runs: two engines and three options on simulated
/// engines end in the published conclusion: the final table "baseline vs optimized" with
/// Total TPS and Mean TPOT, every kept step against the baseline, the engine-baseline
/// sentence with its figures, the chart, and a command a user can paste.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_engines_and_three_options_end_in_the_published_conclusion() {
    let m = marker("conclusion");
    let tmp = tempfile::tempdir().unwrap();
    let yaml = format!(
        "name: conclusion-test\nstrategy: greedy\nengines:\n\
         \x20 - {{name: slow, command: '{}', ready_timeout_secs: 60, stop_grace_secs: 3}}\n\
         \x20 - {{name: sim, command: '{}', ready_timeout_secs: 60, stop_grace_secs: 3, \
         env: {{SIM_NOTE: 'two words'}}}}\n\
         profiles:\n{TINY}\
         options:\n  slots16: --max-num-seqs 16\n  slow-tokens: --itl-ms 20\n  \
         fast-tokens: --itl-ms 1\n",
        sim(&m, "--itl-ms 10 --max-num-seqs 2"),
        sim(&m, "--itl-ms 5 --max-num-seqs 2"),
    );
    let file = write(tmp.path(), &yaml);
    let dir = tmp.path().join("out");
    let mut a = args(&file, &dir);
    a.no_store = true;
    let Finish::Done { outcome, trials } = run(&a).await else { panic!("interrupted?") };
    assert_no_survivors(&m);
    let steps: Vec<(&str, Decision)> =
        outcome.steps.iter().map(|s| (s.trial.as_str(), s.decision)).collect();
    assert_eq!(
        steps,
        vec![
            ("slow", Decision::Baseline),
            ("sim", Decision::Baseline),
            ("sim+slots16", Decision::Kept),
            ("sim+slots16+slow-tokens", Decision::Rejected),
            ("sim+slots16+fast-tokens", Decision::Kept),
        ],
        "{:#?}",
        outcome.steps
    );
    let t = |id: &str| &trials.iter().find(|t| t.spec.id == id).unwrap().profiles[0];
    let (base, best, other) = (t("sim"), t("sim+slots16+fast-tokens"), t("slow"));
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();

    // The final table: the baseline's and the winner's figures, and the changes.
    let tpot = |p: &servelab_lab::trial::ProfileResult| p.tpot_mean_ms.unwrap();
    let pct = |b: f64, n: f64| signed_pct(change_pct(Some(b), Some(n)));
    let row = format!(
        "{:.2} | {:.2} | {} | {:.2} | {:.2} | {} |",
        base.total_tokens_per_s,
        best.total_tokens_per_s,
        pct(base.total_tokens_per_s, best.total_tokens_per_s),
        tpot(base),
        tpot(best),
        pct(tpot(base), tpot(best)),
    );
    let squeezed: String = md.split(' ').filter(|s| !s.is_empty()).collect::<Vec<_>>().join(" ");
    assert!(squeezed.contains("| Benchmark Case | Baseline (sim) Total TPS | Optimized (sim+slots16+fast-tokens) Total TPS |"), "{md}");
    assert!(squeezed.contains(&format!("| tiny | {row}")), "{row}\n{md}");
    assert!(best.total_tokens_per_s > 2.0 * base.total_tokens_per_s);
    assert!(tpot(best) < tpot(base), "{} vs {}", tpot(best), tpot(base));

    // Every option against the baseline: the last step's cumulative gain is larger than its
    // own step delta (against sim+slots16), and the rejected option has its row too.
    let cumulative = pct(base.total_tokens_per_s, best.total_tokens_per_s);
    assert!(md.contains("## Every option against the baseline"), "{md}");
    assert!(squeezed.contains("| 3 | sim+slots16+slow-tokens | slow-tokens | rejected |"), "{md}");
    let last = squeezed
        .lines()
        .find(|l| l.starts_with("| 4 | sim+slots16+fast-tokens | fast-tokens |"))
        .unwrap_or_else(|| panic!("{md}"));
    assert!(last.ends_with(&format!("| {cumulative} |")), "{last}");
    let step = outcome.steps[4].deltas[0].delta_pct;
    let cum = (best.total_tokens_per_s - base.total_tokens_per_s) / base.total_tokens_per_s * 100.0;
    assert!(cum > step + 50.0, "cumulative {cum} vs step {step}");

    // The engine-baseline sentence, with its figures.
    let diff = base.total_tokens_per_s - other.total_tokens_per_s;
    assert!(diff > 0.0, "sim {} vs slow {}", base.total_tokens_per_s, other.total_tokens_per_s);
    let sentence = format!(
        "- tiny: `sim` Total TPS = {}, `slow` Total TPS = {}. `sim` is faster by {} tok/s",
        servelab_outputs::fmt::thousands(base.total_tokens_per_s, 2),
        servelab_outputs::fmt::thousands(other.total_tokens_per_s, 2),
        servelab_outputs::fmt::thousands(diff, 2),
    );
    assert!(md.contains(&sentence), "{sentence}\n{md}");
    assert!(
        md.contains(&format!(
            "; Mean TPOT = {:.2} ms vs {:.2} ms, reduced by",
            tpot(base),
            tpot(other)
        )),
        "{md}"
    );

    // The command to paste: the engine's own, its environment first, no placeholder left.
    let start = md.find("```sh\n").unwrap() + 6;
    let cmd = &md[start..start + md[start..].find("\n```").unwrap()];
    assert!(!cmd.contains('{') && !cmd.contains('}'), "{cmd}");
    assert_eq!(
        cmd,
        format!(
            "SIM_NOTE='two words' {BIN} sim serve --port 8000 --served-model-name {m} \
             --ttft-ms 10 --itl-ms 1 --max-num-seqs 16"
        )
    );
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("lab.json")).unwrap()).unwrap();
    assert_eq!(json["recommended_command"].as_str(), Some(cmd));

    // The chart of baseline vs optimized, as a file and inline in the HTML.
    let svg = std::fs::read_to_string(dir.join("baseline-vs-optimized.svg")).unwrap();
    assert!(svg.contains("<svg") && svg.contains("<polyline") && svg.contains("fast-tokens"));
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(html.contains("<h2>Baseline vs optimized</h2>") && html.contains("Engine baselines"));
    assert_eq!(html.matches("<svg").count(), 2, "two charts inline");
}
