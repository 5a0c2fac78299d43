//! The files `servelab scale k8s` and `servelab scale slurm` render, run here as a scheduler
//! would run them: shard processes of the real binary with the scheduler's environment
//! against a simulator on 127.0.0.1:0, then the rendered merge shell script (`sh`, `bash`)
//! with the binary on PATH. A merge step that cannot take what the shards write fails here,
//! not on a cluster.

use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, SystemTime};

use servelab_scale::k8s::{self, K8sSpec};
use servelab_scale::slurm::{self, SlurmSpec};
use servelab_scale::ScaleSpec;
use servelab_sim::SimConfig;
use servelab_store::{Filter, Store};

const BIN: &str = env!("CARGO_BIN_EXE_servelab");

fn scale(url: &str) -> ScaleSpec {
    let bench = [
        "--base-url",
        url,
        "--num-prompts",
        "12",
        "--request-rate",
        "40",
        "--seed",
        "3",
        "--random-input-len",
        "16",
        "--random-output-len",
        "4",
        "--ignore-eos",
        "--tokenizer",
        "cl100k_base",
        "--metric-percentiles",
        "50,99.9",
        "--goodput",
        "ttft:1000",
    ];
    ScaleSpec {
        name: "rehearsal".into(),
        shards: 2,
        run: servelab_scale::ScaleRun::Bench,
        args: bench.map(String::from).to_vec(),
        label: "merged run".into(),
        merge_from: Default::default(),
    }
}

/// PATH with the servelab binary's folder first (the scripts call `servelab`), then `extra`.
fn path_with(extra: &Path) -> String {
    let bin = Path::new(BIN).parent().unwrap();
    format!("{}:{}:{}", bin.display(), extra.display(), std::env::var("PATH").unwrap_or_default())
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// The merged run in `db`: one run, labelled, over the 12 requests, with the shards'
/// percentiles and goodput objective (not the defaults).
fn check_merged(db: &Path) {
    let store = Store::open_existing(db).unwrap();
    let rows = store.list(&Filter { label: Some("merged run".into()), ..Filter::default() });
    let rows = rows.unwrap();
    assert_eq!(rows.len(), 1);
    let records = store.records(rows[0].id).unwrap();
    assert_eq!(records.iter().map(|r| r.index).collect::<Vec<_>>(), (0..12).collect::<Vec<_>>());
    let summary = store.run(rows[0].id).unwrap().summary.unwrap();
    assert_eq!(summary.completed, 12);
    assert_eq!(summary.percentiles, vec![50.0, 99.9]);
    assert_eq!(summary.slo.and_then(|s| s.ttft_ms), Some(1000.0));
    assert!(summary.request_goodput.is_some());
    let p: Vec<f64> = summary.ttft_ms.percentiles.iter().map(|p| p.0).collect();
    assert_eq!(p, vec![50.0, 99.9]);
}

/// Off the runtime that serves the simulator: the shards and scripts are child processes.
async fn run(mut cmd: Command) -> Output {
    tokio::task::spawn_blocking(move || cmd.output().expect("runs")).await.unwrap()
}

/// The rendered Indexed Job's pods, run here: each with the rendered args and environment
/// and its index, the volume's folder made `results`.
async fn run_pods(spec: &K8sSpec, results: &Path) -> Vec<Output> {
    let job = k8s::shards_job(spec);
    let container = &job["spec"]["template"]["spec"]["containers"][0];
    let mount = format!("{}/{}", k8s::MOUNT, spec.scale.name);
    let args: Vec<String> = container["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().replace(&mount, results.to_str().unwrap()))
        .collect();
    let env = &container["env"][0];
    let pods: Vec<_> = (0..spec.scale.shards)
        .map(|k| {
            let mut cmd = Command::new(BIN);
            cmd.args(&args)
                .env("JOB_COMPLETION_INDEX", k.to_string())
                .env(env["name"].as_str().unwrap(), env["value"].as_str().unwrap());
            // At once, as the Job starts them: a sweep's shards wait for each other.
            tokio::spawn(run(cmd))
        })
        .collect();
    let mut outs = Vec::new();
    for pod in pods {
        outs.push(pod.await.unwrap());
    }
    outs
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_indexed_job_s_pods_and_merge_job_run_as_rendered() {
    let sim = servelab_sim::start(SimConfig::fixed(10.0, 2.0).with_port(0)).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let results = dir.path().join("results");
    let start = SystemTime::now() + Duration::from_secs(3);
    let spec = K8sSpec {
        scale: scale(&sim.base_url()),
        image: "servelab:test".into(),
        claim: "c".into(),
        namespace: None,
        cpu: None,
        start_at: servelab_plan::time::rfc3339_millis(start),
        merge_deadline_s: 30,
    };
    let mount = format!("{}/rehearsal", k8s::MOUNT);
    for out in run_pods(&spec, &results).await {
        assert!(out.status.success(), "{}", text(&out));
    }
    // Beside each result: its records and its digest, which the merge must not take.
    assert!(results.join("run-shard-1-of-2.digest.json").is_file());

    let script = k8s::merge_script(&spec);
    let here = format!("dir={}\n", results.display());
    let local = script.replacen(&format!("dir={mount}\n"), &here, 1);
    assert_ne!(local, script, "the script starts from the results folder");
    let mut cmd = Command::new("sh");
    cmd.args(["-c", &local]).env("PATH", path_with(dir.path()));
    let out = run(cmd).await;
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("merged from 2 shards"), "{}", text(&out));
    check_merged(&results.join("servelab.db"));

    // A shard whose result never came: the wait ends at its deadline and names it.
    std::fs::rename(results.join("run-shard-1-of-2.json"), dir.path().join("away.json")).unwrap();
    let quick = K8sSpec { merge_deadline_s: 0, ..spec.clone() };
    let local = k8s::merge_script(&quick).replacen(&format!("dir={mount}\n"), &here, 1);
    let mut cmd = Command::new("sh");
    cmd.args(["-c", &local]).env("PATH", path_with(dir.path()));
    let out = run(cmd).await;
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("after 0 s from shards 1 (of 2)"), "{}", text(&out));
    sim.shutdown().await;
}

/// A stand-in for `srun`: runs the command once per task with Slurm's task variables.
const FAKE_SRUN: &str = r#"#!/bin/sh
n=1
while [ $# -gt 0 ]; do
  case "$1" in
    --ntasks=*) n=${1#--ntasks=}; shift ;;
    --*) shift ;;
    *) break ;;
  esac
done
k=0
pids=""
while [ "$k" -lt "$n" ]; do
  SLURM_PROCID=$k SLURM_NTASKS=$n "$@" > "$SERVELAB_RESULTS/task-$k.log" 2>&1 &
  pids="$pids $!"
  k=$((k + 1))
done
rc=0
for p in $pids; do wait "$p" || rc=1; done
exit $rc
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sbatch_script_runs_its_tasks_and_merges_as_rendered() {
    use std::os::unix::fs::PermissionsExt;
    let sim = servelab_sim::start(SimConfig::fixed(10.0, 2.0).with_port(0)).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let srun = dir.path().join("srun");
    std::fs::write(&srun, FAKE_SRUN).unwrap();
    std::fs::set_permissions(&srun, std::fs::Permissions::from_mode(0o755)).unwrap();
    let spec = SlurmSpec {
        scale: scale(&sim.base_url()),
        cpus_per_task: 1,
        nodes: None,
        exe: "servelab".into(),
        start_at: None,
        lead_s: 3,
    };
    let script = slurm::render(&spec).unwrap();
    let results = dir.path().join("results");
    let mut cmd = Command::new("bash");
    cmd.args(["-c", &script])
        .env("PATH", path_with(dir.path()))
        .env("SERVELAB_RESULTS", &results)
        .env("SLURM_JOB_ID", "7");
    let out = run(cmd).await;
    let logs = std::fs::read_to_string(results.join("task-1.log")).unwrap_or_default();
    assert!(out.status.success(), "{}\ntask 1: {logs}", text(&out));
    assert!(text(&out).contains("merged from 2 shards"), "{}", text(&out));
    check_merged(&results.join("servelab.db"));
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sweep_s_indexed_job_pods_write_and_store_the_sweep_as_rendered() {
    let sim = servelab_sim::start(SimConfig::fixed(10.0, 2.0).with_port(0)).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let results = dir.path().join("results");
    let sweep = [
        "--base-url",
        &sim.base_url(),
        "--scenario",
        "16:4",
        "--concurrency",
        "2,4",
        "--min-prompts",
        "8",
        "--max-prompts",
        "8",
        "--settle-secs",
        "0",
        "--tokenizer",
        "cl100k_base",
    ];
    let spec = K8sSpec {
        scale: ScaleSpec {
            name: "rehearsal".into(),
            shards: 2,
            run: servelab_scale::ScaleRun::Sweep,
            args: sweep.map(String::from).to_vec(),
            label: "swept".into(),
            merge_from: Default::default(),
        },
        image: "servelab:test".into(),
        claim: "c".into(),
        namespace: None,
        cpu: None,
        start_at: servelab_plan::time::rfc3339_millis(SystemTime::now() + Duration::from_secs(3)),
        merge_deadline_s: 30,
    };
    let outs = run_pods(&spec, &results).await;
    for out in &outs {
        assert!(out.status.success(), "{}", text(out));
    }
    // Shard 0 wrote the sweep where the header says, each point with both shards' requests.
    let result: servelab_sweep::SweepResult =
        serde_json::from_slice(&std::fs::read(results.join("sweep/sweep.json")).unwrap()).unwrap();
    let points = &result.scenarios[0].points;
    assert_eq!(points.len(), 2);
    for p in points {
        assert_eq!(p.summary.completed, 8);
    }
    assert!(text(&outs[0]).contains("| Concurrency |"), "shard 0 prints the table");
    // And stored each merged point once, labelled, in the folder's store.
    let store = Store::open_existing(&results.join("servelab.db")).unwrap();
    let rows = store.list(&Filter { label: Some("swept".into()), ..Filter::default() }).unwrap();
    assert_eq!(rows.len(), 2, "{rows:?}");
    for row in rows {
        assert!(row.tags.contains(&("shards".into(), "2".into())), "{:?}", row.tags);
        assert_eq!(store.records(row.id).unwrap().len(), 8);
    }
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sbatch_script_of_a_lab_runs_its_tasks_as_rendered() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let srun = dir.path().join("srun");
    std::fs::write(&srun, FAKE_SRUN).unwrap();
    std::fs::set_permissions(&srun, std::fs::Permissions::from_mode(0o755)).unwrap();
    // One simulated engine (2 slots), and one option that gives it 16: a greedy lab of two
    // trials, whose engines task 0 alone launches.
    let engine =
        format!("{BIN} sim serve --port {{port}} --ttft-ms 10 --itl-ms 5 --max-num-seqs 2");
    let experiment = format!(
        "name: scaled-lab\nstrategy: greedy\nengines:\n\
         \x20 - {{name: sim, command: '{engine}', ready_timeout_secs: 60, stop_grace_secs: 3}}\n\
         profiles:\n\
         \x20 - {{name: tiny, dataset_name: random, random_input_len: 32, random_output_len: 16, \
         ignore_eos: true, num_prompts: 32, max_concurrency: 16, seed: 1, tokenizer: cl100k_base}}\n\
         options:\n  slots16: --max-num-seqs 16\n"
    );
    let file = dir.path().join("lab.yaml");
    std::fs::write(&file, experiment).unwrap();
    let spec = SlurmSpec {
        scale: ScaleSpec {
            name: "rehearsal".into(),
            shards: 2,
            run: servelab_scale::ScaleRun::Lab,
            args: vec![file.to_string_lossy().into_owned()],
            label: "rehearsal".into(),
            merge_from: Default::default(),
        },
        cpus_per_task: 1,
        nodes: None,
        exe: "servelab".into(),
        start_at: None,
        lead_s: 3,
    };
    let script = slurm::render(&spec).unwrap();
    let results = dir.path().join("results");
    let mut cmd = Command::new("bash");
    cmd.args(["-c", &script])
        .env("PATH", path_with(dir.path()))
        .env("SERVELAB_RESULTS", &results)
        .env("SLURM_JOB_ID", "8");
    let out = run(cmd).await;
    let logs = std::fs::read_to_string(results.join("task-1.log")).unwrap_or_default();
    assert!(out.status.success(), "{}\ntask 1: {logs}", text(&out));
    assert!(text(&out).contains("lab report: "), "{}", text(&out));
    // Task 0 wrote the lab's report, kept the option, and stored each merged profile run.
    let lab: serde_json::Value =
        serde_json::from_slice(&std::fs::read(results.join("lab.json")).unwrap()).unwrap();
    let recommended = lab["outcome"]["recommended"].as_str().unwrap_or_default();
    assert!(recommended.ends_with("--max-num-seqs 16"), "{lab}");
    assert!(results.join("report.md").is_file());
    assert!(results.join("shards").join("shard-1").is_dir());
    let store = Store::open_existing(&results.join("servelab.db")).unwrap();
    let rows = store.list(&Filter::default()).unwrap();
    assert_eq!(rows.len(), 2, "{rows:?}");
    for row in rows {
        assert!(row.tags.contains(&("shards".into(), "2".into())), "{:?}", row.tags);
        assert_eq!(store.records(row.id).unwrap().len(), 32);
    }
}

fn servelab(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(BIN);
    cmd.args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("binary runs")
}

#[test]
fn what_a_shard_would_refuse_is_refused_when_rendering() {
    let refused = |args: &[&str], says: &str| {
        let out = servelab(args, &[]);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out));
        assert!(text(&out).contains(says), "{args:?}: {}", text(&out));
        assert!(out.stdout.is_empty(), "nothing rendered for {args:?}");
    };
    // Without a target every shard would start its own simulator.
    refused(
        &["scale", "k8s", "--shards", "4", "--", "--request-rate", "5"],
        "--base-url: shard 0/4 needs the one server every shard sends to",
    );
    // Each of 4 shards would get no slot of a cap of 2.
    refused(
        &[
            "scale",
            "k8s",
            "--shards",
            "4",
            "--",
            "--base-url",
            "http://gpu:8000",
            "--request-rate",
            "5",
            "--max-concurrency",
            "2",
        ],
        "--max-concurrency 2 is the whole run's cap, shared by 4 shards",
    );
    refused(
        &["scale", "slurm", "--shards", "2", "--", "--goodput", "itl:5"],
        "--goodput: unknown metric 'itl'",
    );
    refused(
        &["scale", "slurm", "--shards", "2", "--", "--no-progress"],
        "--no-progress: set by `servelab scale` on every shard",
    );
    refused(&["scale", "k8s", "--shards", "1"], "--shards must be at least 2");
    // A base URL no shard could use, named without its password.
    refused(
        &["scale", "k8s", "--shards", "2", "--", "--base-url", "http://alice:pw-77@gpu:99999"],
        "--base-url 'http://***@gpu:99999': its port must be a number from 1 to 65535",
    );
    refused(
        &["scale", "slurm", "--shards", "2", "--", "--base-url", "gpu:8000"],
        "--base-url 'gpu:8000': must start with http:// or https://",
    );
    // A sweep's and a lab's shards are checked as they will run.
    let gpu = ["--base-url", "http://gpu:8000"];
    let sweep = |more: &[&'static str]| {
        let mut a = vec!["scale", "slurm", "--run", "sweep", "--shards", "4", "--"];
        a.extend(gpu);
        a.extend(more);
        a
    };
    refused(
        &sweep(&["--concurrency", "2,8"]),
        "--concurrency 2: a sweep point's cap is shared by 4 shards",
    );
    refused(
        &sweep(&["--output-dir", "o"]),
        "--output-dir: set by `servelab scale` on every shard; leave it out of the sweep arguments",
    );
    refused(&sweep(&["--concurrency", "4,x"]), "--concurrency");
    let ok = servelab(&sweep(&["--concurrency", "4,8"]), &[]);
    assert!(ok.status.success(), "{}", text(&ok));
    assert!(text(&ok).contains("sweep: $results/sweep"), "{}", text(&ok));
    refused(
        &["scale", "k8s", "--run", "lab", "--shards", "2", "--", "lab.yaml"],
        "a lab cannot be rendered as a Kubernetes Indexed Job",
    );
    refused(
        &["scale", "slurm", "--run", "lab", "--shards", "2", "--", "/nonexistent/lab.yaml"],
        "/nonexistent/lab.yaml",
    );
    refused(
        &["scale", "slurm", "--run", "lab", "--shards", "2"],
        "a scaled lab needs its experiment file first after --",
    );
    let ok = servelab(
        &[
            "scale",
            "slurm",
            "--shards",
            "2",
            "--",
            "--base-url",
            "http://gpu:8000",
            "--request-rate",
            "5",
        ],
        &[],
    );
    assert!(ok.status.success(), "{}", text(&ok));
}

#[test]
fn a_hand_run_shard_needs_the_shared_start() {
    let out = servelab(&["bench", "--shard", "1/2", "--num-prompts", "2", "--no-store"], &[]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("--start-at: shard 1/2"), "{}", text(&out));
    // The scheduler's environment is a shard too.
    let slurm = [("SLURM_PROCID", "0"), ("SLURM_NTASKS", "2")];
    let out = servelab(&["bench", "--num-prompts", "2", "--no-store"], &slurm);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("--start-at: shard 0/2"), "{}", text(&out));
    // An Indexed Job's index without the count: say how to run as a shard or as a whole.
    let out =
        servelab(&["bench", "--num-prompts", "2", "--no-store"], &[("JOB_COMPLETION_INDEX", "0")]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("set SERVELAB_SHARDS"), "{}", text(&out));
    assert!(text(&out).contains("--shard 0/1"), "{}", text(&out));
}

/// Issue 28: credentials given to `scale` stay out of what it writes, and it says where the
/// shards read them from instead.
#[test]
fn credentials_are_left_out_of_the_rendered_files_and_said_so() {
    for (what, from) in [("k8s", "the Secret 'creds-secrets'"), ("slurm", "environment variables")]
    {
        let out = servelab(
            &[
                "scale",
                what,
                "--shards",
                "2",
                "--name",
                "creds",
                "--",
                "--base-url",
                "http://alice:pw-77@gpu:8000",
                "--header",
                "Authorization: Bearer tok-99",
                "--request-rate",
                "5",
            ],
            &[],
        );
        assert!(out.status.success(), "{what}: {}", text(&out));
        let file = String::from_utf8_lossy(&out.stdout);
        assert!(!file.contains("pw-77") && !file.contains("tok-99"), "{what}: {file}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(
                "kept out of the file: the user and password in --base-url, the value \
                 of the Authorization header; the shards read them from "
            ) && err.contains(from),
            "{what}: {err}"
        );
    }
}
