//! `examples/lab-sim.yaml` as users run it, a lab run as two shards, and interleaved greedy
//! steps: their decisions come from wall-clock throughput, with wide margins.

use std::time::Duration;

use servelab::args::{LabRunArgs, ShardArgs};
use servelab::run_experiment;
use servelab_lab::strategy::Decision;
use servelab_lab::Finish;
use tokio::sync::watch;

use crate::common::lab::{args, assert_no_survivors, marker, sim, write, BIN, TINY};

/// `examples/lab-sim.yaml`, as README and docs/lab.md tell users to run it (from the
/// repository root), with the real binary: its engines are the engine-model simulator, so its
/// options trade off as on a real engine. It must keep more sequences and TP 2, reject the
/// tiny chunked-prefill budget (worse) and the FP8 KV cache (within noise at short contexts),
/// and leave no engine behind.
#[test]
fn the_shipped_example_experiment_runs_and_recommends_more_seqs_and_tp2() {
    let m = marker("example");
    let tmp = tempfile::tempdir().unwrap();
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/lab-sim.yaml");
    // Only the model name changes, so this test's engines can be told from any others.
    let yaml = std::fs::read_to_string(example)
        .unwrap()
        .replace("--served-model-name sim", &format!("--served-model-name {m}"));
    assert!(yaml.contains(&m), "the example names its model with --served-model-name sim");
    let file = write(tmp.path(), &yaml);
    let out_dir = tmp.path().join("out");
    // From the repository root, where the example's engine file paths start.
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let out = std::process::Command::new(BIN)
        .current_dir(root)
        .args(["lab", "run"])
        .arg(&file)
        .arg("--output-dir")
        .arg(&out_dir)
        .arg("--no-store")
        .output()
        .unwrap();
    let log = std::fs::read_to_string(out_dir.join("sim-a/engine.log")).unwrap_or_default();
    assert!(out.status.success(), "{}\n{log}", String::from_utf8_lossy(&out.stderr));
    assert_no_survivors(&m);
    let md = std::fs::read_to_string(out_dir.join("report.md")).unwrap();
    // `fp8-kv` is neutral in the engine model at these short contexts (a few percent), so
    // against the 10% bar a loaded 2-core machine's noise decides it: one run in two kept it
    // while other builds ran. The test holds it to "no large effect either way" and asserts
    // the decisions that are far from the bar exactly.
    let lab: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("lab.json")).unwrap()).unwrap();
    let step = |option: &str| {
        lab["outcome"]["steps"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["option"] == option)
            .unwrap_or_else(|| panic!("no step tried {option}: {md}"))
            .clone()
    };
    let fp8 = step("fp8-kv");
    for d in fp8["deltas"].as_array().unwrap() {
        let pct = d["delta_pct"].as_f64().unwrap();
        assert!(pct.abs() < 25.0, "fp8-kv moved {} by {pct:.1}%: {md}", d["profile"]);
    }
    let kept_fp8 = fp8["decision"] == "kept";
    let best = if kept_fp8 {
        "Best configuration: `sim-a+more-seqs+tp2+fp8-kv` (options kept: more-seqs, tp2, fp8-kv)."
    } else {
        "Best configuration: `sim-a+more-seqs+tp2` (options kept: more-seqs, tp2)."
    };
    assert!(md.contains(best), "{md}");
    assert_eq!(step("more-seqs")["decision"], "kept", "{md}");
    assert_eq!(step("tp2")["decision"], "kept", "{md}");
    assert_eq!(step("tiny-prefill-budget")["decision"], "rejected", "{md}");
    assert!(md.contains("--max-num-seqs 32"), "{md}");
    assert!(md.contains("--tp 2"), "{md}");
    assert!(md.contains("| tiny-prefill-budget |") && md.contains("| rejected | worse"), "{md}");
}

/// `lab run --shard K/N`: two shards in this process, one shared folder. Shard 0 launches
/// every engine; both send half of every profile run to it and merge each run alike, so both
/// take the same greedy steps. An engine that never starts and one killed mid-experiment end
/// as the same failed trials on both shards, and neither shard waits out its bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lab_run_as_two_shards_takes_the_same_steps_over_merged_runs() {
    let m = marker("shards");
    let tmp = tempfile::tempdir().unwrap();
    // crashy: one slot, its sim killed 4 s after launch: during the first profile (~2.7 s
    // from ~2.3 s), unless the machine is slow enough to delay it past that.
    let yaml = format!(
        "name: shard-test\nstrategy: greedy\nengines:\n\
         \x20 - {{name: sim, command: '{}', ready_timeout_secs: 60, stop_grace_secs: 3}}\n\
         \x20 - {{name: crashy, command: '{} & sleep 4; kill $!; exit 3', ready_timeout_secs: 60}}\n\
         \x20 - {{name: bad, command: '/nonexistent/engine-{m} --port {{port}}', ready_timeout_secs: 60}}\n\
         profiles:\n{TINY}{}\
         options:\n  slots16: --max-num-seqs 16\n  slow-tokens: --itl-ms 20\n",
        sim(&m, "--itl-ms 5 --max-num-seqs 2"),
        sim(&m, "--itl-ms 5 --max-num-seqs 1"),
        TINY.replace("name: tiny", "name: tiny2").replace("seed: 1", "seed: 7"),
    );
    let file = write(tmp.path(), &yaml);
    let dir = tmp.path().join("out");
    let start = std::time::SystemTime::now() + Duration::from_secs(1);
    let start = start.duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64();
    let mut shards = Vec::new();
    for k in 0..2 {
        // Both shards are given one store (beside `dir`): only shard 0 records, merged runs.
        let shard = ShardArgs {
            shard: Some(format!("{k}/2")),
            start_at: Some(format!("{start:.3}")),
            clock_reference: None,
            // The default lead: each profile run prepares (preflight, workload) within it.
            shard_lead: None,
        };
        let a = LabRunArgs { shard, ..args(&file, &dir) };
        let (tx, rx) = watch::channel(false);
        shards.push(tokio::spawn(async move {
            let _keep = tx;
            let lab = tokio::time::timeout(Duration::from_secs(240), run_experiment(&a, rx));
            lab.await.expect("the sharded lab finished within 240 s")
        }));
    }
    let mut ends = Vec::new();
    for s in shards {
        match s.await.unwrap() {
            Ok((Finish::Done { outcome, trials }, d)) => ends.push((outcome, trials, d)),
            Ok((f, _)) => panic!("interrupted? {f:?}"),
            Err(e) => panic!("lab shard failed: {e}"),
        }
    }
    assert_no_survivors(&m);
    let [(o0, t0, d0), (o1, t1, d1)] = <[_; 2]>::try_from(ends).unwrap();
    assert_eq!(d0, dir);
    assert_eq!(d1, dir.join("shards").join("shard-1"));
    // The same steps and trials on both shards.
    assert_eq!(o0, o1);
    assert_eq!(t0, t1);
    let steps: Vec<(&str, Decision)> =
        o0.steps.iter().map(|s| (s.trial.as_str(), s.decision)).collect();
    assert_eq!(steps[0], ("sim", Decision::Baseline), "{steps:?}");
    assert!(steps.contains(&("sim+slots16", Decision::Kept)), "{steps:?}");
    assert!(steps.contains(&("sim+slots16+slow-tokens", Decision::Rejected)), "{steps:?}");
    assert_eq!(o0.recommended.as_deref(), Some(sim(&m, "--itl-ms 5 --max-num-seqs 16").as_str()));
    let failure = |id: &str| t0.iter().find(|t| t.spec.id == id).and_then(|t| t.failure());
    let crashy = failure("crashy").expect("crashy failed");
    assert!(crashy.starts_with("engine exited (exit code 3)"), "{crashy}");
    let bad = failure("bad").expect("bad failed");
    assert!(bad.starts_with("engine exited (exit code 127) before it was ready"), "{bad}");
    // Every finished profile run holds both shards' halves, merged.
    for t in t0.iter().filter(|t| t.failure().is_none()) {
        assert_eq!(t.profiles.len(), 2, "{}", t.spec.id);
        for p in &t.profiles {
            assert_eq!((p.completed, p.failed), (32, 0), "{} {}", t.spec.id, p.profile);
            // The engine's /metrics counts both shards' requests: 32 × 16 tokens.
            assert_eq!(p.engine.generation_tokens, Some(512.0), "{} {}", t.spec.id, p.profile);
        }
    }
    // One launch per trial, by shard 0 alone: engine logs only in its folder.
    let shared = dir.join("shards");
    let files: Vec<String> = std::fs::read_dir(&shared)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let count = |f: &dyn Fn(&str) -> bool| files.iter().filter(|n| f(n)).count();
    assert_eq!(count(&|n| n.starts_with("launch-") && n.ends_with("-round-0.json")), t0.len());
    // Shard 1 arrived at every launch before shard 0 set its start.
    assert_eq!(count(&|n| n.ends_with("-shard-1-of-2.here")), t0.len());
    let parts = |k: u32| count(&|n| n.ends_with(&format!("-shard-{k}-of-2.json")));
    let runs: usize = t0.iter().map(|t| t.profiles.len()).sum();
    assert!(parts(0) >= runs && parts(0) == parts(1), "{files:?}");
    // Shard 0 stored every merged profile run once, with both halves' records: each profile
    // of a trial, and the run the crashy engine died in if it died mid-run (then its
    // requests failed; on a slow start it dies before, and the run is forgone).
    let store = servelab_store::Store::open_existing(&tmp.path().join("store.db")).unwrap();
    let mut stored: Vec<(String, String)> = Vec::new();
    for row in store.list(&servelab_store::Filter::default()).unwrap() {
        let tag = |k: &str| row.tags.iter().find(|t| t.0 == k).map(|t| t.1.clone());
        assert_eq!(tag("shards").as_deref(), Some("2"), "{row:?}");
        let (trial, profile) = (tag("lab.trial").unwrap(), tag("lab.profile").unwrap());
        let label = row.label.as_deref().unwrap_or_default();
        assert!(label.starts_with(&format!("shard-test/{trial}/{profile}")), "{label}");
        assert_eq!(store.record_count(row.id).unwrap(), 32, "{label}");
        stored.push((trial, profile));
    }
    stored.retain(|(trial, _)| trial != "crashy");
    stored.sort();
    let mut expected: Vec<(String, String)> = t0
        .iter()
        .filter(|t| t.spec.id != "crashy")
        .flat_map(|t| t.profiles.iter().map(|p| (t.spec.id.clone(), p.profile.clone())))
        .collect();
    expected.sort();
    assert_eq!(stored, expected);
    for t in &t0 {
        let id = t.spec.id.replace('+', "_");
        assert!(dir.join(&id).join("engine.log").is_file(), "{id}");
        assert!(!d1.join(&id).join("engine.log").exists(), "{id}");
    }
    assert!(dir.join("report.md").is_file());
}

/// `acceptance.interleave`: each greedy step launches the candidate and the current best in
/// turn (A B B A), one round of profiles per launch, and judges the ratios of neighbouring
/// launches. Its decisions weigh each gain against the spread between launches, which a
/// loaded machine widens (a +569 % gain was judged within a ±581 % noise beside the `it`
/// binary's tests); beside this binary's few simulated engines it is not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interleaved_steps_launch_the_reference_and_the_candidate_in_turn() {
    let m = marker("interleave");
    let tmp = tempfile::tempdir().unwrap();
    let yaml = format!(
        "name: interleave-test\nstrategy: greedy\nengines:\n\
         \x20 - {{name: sim, command: '{}', ready_timeout_secs: 60, stop_grace_secs: 3}}\n\
         profiles:\n{TINY}\
         options:\n  slots16: --max-num-seqs 16\n  slow-tokens: --itl-ms 20\n\
         acceptance: {{repeats: 2, interleave: true, min_gain_pct: 10}}\n",
        sim(&m, "--itl-ms 5 --max-num-seqs 2"),
    );
    let file = write(tmp.path(), &yaml);
    let dir = tmp.path().join("out");
    let a = args(&file, &dir);
    let (_tx, rx) = watch::channel(false);
    let (finish, _) = run_experiment(&a, rx).await.unwrap_or_else(|e| panic!("lab failed: {e}"));
    let Finish::Done { outcome, trials } = finish else { panic!("interrupted?") };
    assert_no_survivors(&m);
    let steps: Vec<(&str, Option<&str>, Decision)> = outcome
        .steps
        .iter()
        .map(|s| (s.trial.as_str(), s.against.as_deref(), s.decision))
        .collect();
    assert_eq!(
        steps,
        vec![
            ("sim", None, Decision::Baseline),
            ("sim+slots16", Some("sim.ref-slots16"), Decision::Kept),
            ("sim+slots16+slow-tokens", Some("sim+slots16.ref-slow-tokens"), Decision::Rejected),
        ],
        "{:#?}",
        outcome.steps
    );
    assert!(outcome.steps[1].deltas[0].delta_pct > 200.0, "{:?}", outcome.steps[1].deltas);
    assert!(outcome.steps[1].deltas[0].run_noise_pct.is_some());
    assert_eq!(outcome.kept, vec!["slots16"]);
    // Every trial of a step ran each profile once per launch, two launches each; the
    // references are saved as trials of their own, with both launches in one log.
    let ids: Vec<&str> = trials.iter().map(|t| t.spec.id.as_str()).collect();
    assert!(ids.contains(&"sim.ref-slots16") && ids.contains(&"sim+slots16.ref-slow-tokens"));
    for t in &trials {
        let runs: Vec<u32> = t.profiles.iter().map(|p| p.repeat).collect();
        assert_eq!(runs, vec![0, 1], "{}", t.spec.id);
    }
    let log = std::fs::read_to_string(dir.join("sim.ref-slots16").join("engine.log")).unwrap();
    assert_eq!(log.matches("servelab sim listening").count(), 2, "{log}");
}
