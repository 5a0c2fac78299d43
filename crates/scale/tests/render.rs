//! The rendered files of a 16-shard run: snapshots, and the Kubernetes manifests read back
//! as the Kubernetes API's own types (as `kubectl apply` would parse them).

use k8s_openapi::api::batch::v1::Job;
use servelab_scale::k8s::{self, K8sSpec};
use servelab_scale::slurm::{self, SlurmSpec};
use servelab_scale::ScaleSpec;

fn scale() -> ScaleSpec {
    ScaleSpec {
        name: "llama-rate-200".into(),
        shards: 16,
        run: servelab_scale::ScaleRun::Bench,
        args: [
            "--base-url",
            "http://llm-d-gateway.llm.svc:80",
            "--model",
            "meta-llama/Llama-3.1-70B-Instruct",
            "--dataset-name",
            "random",
            "--random-input-len",
            "1024",
            "--random-output-len",
            "256",
            "--num-prompts",
            "60000",
            "--request-rate",
            "200",
            "--max-concurrency",
            "16000",
            "--seed",
            "17",
        ]
        .map(String::from)
        .to_vec(),
        label: "llama-70b-rate-200".into(),
        merge_from: Default::default(),
    }
}

fn k8s_spec() -> K8sSpec {
    K8sSpec {
        scale: scale(),
        image: "servelab:0.1.0".into(),
        claim: "servelab-results".into(),
        namespace: Some("bench".into()),
        cpu: Some("2".into()),
        start_at: "2026-12-01T09:00:00.000Z".into(),
        merge_deadline_s: 21_600,
    }
}

#[test]
fn the_indexed_job_and_the_merge_job_are_valid_kubernetes_jobs() {
    let yaml = k8s::render(&k8s_spec()).unwrap();
    let docs: Vec<Job> = yaml
        .split("\n---\n")
        .filter(|d| d.contains("kind: Job"))
        .map(|d| serde_yaml_ng::from_str::<Job>(d.trim_start_matches("---\n")).unwrap())
        .collect();
    assert_eq!(docs.len(), 2);
    let shards = docs[0].spec.as_ref().unwrap();
    assert_eq!(shards.completion_mode.as_deref(), Some("Indexed"));
    assert_eq!((shards.completions, shards.parallelism), (Some(16), Some(16)));
    assert_eq!(shards.backoff_limit, Some(0));
    let pod = shards.template.spec.as_ref().unwrap();
    assert_eq!(pod.restart_policy.as_deref(), Some("Never"));
    let c = &pod.containers[0];
    let args = c.args.as_ref().unwrap();
    assert_eq!(args[0], "bench");
    let after = |flag: &str| args[args.iter().position(|a| a == flag).unwrap() + 1].clone();
    assert_eq!(after("--start-at"), "2026-12-01T09:00:00.000Z");
    assert_eq!(after("--result-dir"), "/results/llama-rate-200");
    let env = c.env.as_ref().unwrap();
    assert_eq!((env[0].name.as_str(), env[0].value.as_deref()), ("SERVELAB_SHARDS", Some("16")));
    let claim = pod.volumes.as_ref().unwrap()[0].persistent_volume_claim.as_ref().unwrap();
    assert_eq!(claim.claim_name, "servelab-results");
    let merge = docs[1].spec.as_ref().unwrap();
    assert_eq!(docs[1].metadata.name.as_deref(), Some("llama-rate-200-merge"));
    assert_eq!(docs[1].metadata.namespace.as_deref(), Some("bench"));
    let script = &merge.template.spec.as_ref().unwrap().containers[0].command.as_ref().unwrap()[2];
    assert!(script.contains("deadline=$(( $(date +%s) + 21600 ))"), "{script}");
    assert!(script.contains("exec servelab runs merge \"$dir\" --label"), "{script}");
    assert_eq!(docs[1].spec.as_ref().unwrap().active_deadline_seconds, Some(21_600 + 1_800));
    assert!(script.contains("--label llama-70b-rate-200 "), "{script}");
    insta::assert_snapshot!("k8s_16_shards", yaml);
    // A label with spaces and quotes reaches the merge as one word.
    let mut odd = k8s_spec();
    odd.scale.label = "70b 'fast'".into();
    assert!(k8s::merge_script(&odd).contains(r"--label '70b '\''fast'\''' --db"));
}

#[test]
fn the_sbatch_script_runs_one_step_of_n_tasks_then_merges() {
    let spec = SlurmSpec {
        scale: scale(),
        cpus_per_task: 2,
        nodes: Some(4),
        exe: "servelab".into(),
        start_at: None,
        lead_s: 60,
    };
    let script = slurm::render(&spec).unwrap();
    assert!(script.starts_with("#!/bin/bash\n"));
    assert!(script.contains("#SBATCH --ntasks=16\n"));
    assert!(script.contains("start_at=$(( $(date +%s) + 60 ))"));
    assert!(script.contains("--label llama-70b-rate-200 "));
    insta::assert_snapshot!("sbatch_16_shards", script);
    // docs/examples/scale holds these files as `servelab scale` writes them.
    assert_eq!(script, include_str!("../../../docs/examples/scale/sbatch-16.sh"));
    let yaml = k8s::render(&k8s_spec()).unwrap();
    assert_eq!(yaml, include_str!("../../../docs/examples/scale/indexed-job-16.yaml"));
    let fixed = slurm::render(&SlurmSpec { start_at: Some("1796115600".into()), ..spec }).unwrap();
    assert!(fixed.contains("start_at=1796115600\n"));
}

#[test]
fn bad_input_is_refused_before_rendering() {
    let mut spec = k8s_spec();
    spec.scale.args.push("--shard".into());
    assert_eq!(
        k8s::render(&spec).unwrap_err().to_string(),
        "--shard: set by `servelab scale` on every shard; leave it out of the bench arguments"
    );
}

/// A 16-shard concurrency sweep against one gateway, with an SLO search.
fn sweep() -> ScaleSpec {
    ScaleSpec {
        name: "llama-sweep".into(),
        shards: 16,
        run: servelab_scale::ScaleRun::Sweep,
        args: [
            "--base-url",
            "http://llm-d-gateway.llm.svc:80",
            "--model",
            "meta-llama/Llama-3.1-70B-Instruct",
            "--scenario",
            "1024:256",
            "--concurrency",
            "1024,2048,4096,8192,16384",
            "--slo",
            "ttft_p99:2000,tpot_p99:80",
        ]
        .map(String::from)
        .to_vec(),
        label: "llama-70b-sweep".into(),
        merge_from: Default::default(),
    }
}

#[test]
fn a_sweep_is_one_indexed_job_whose_shard_0_writes_and_stores_it() {
    let spec = K8sSpec { scale: sweep(), ..k8s_spec() };
    let yaml = k8s::render(&spec).unwrap();
    let docs: Vec<&str> = yaml.split("\n---\n").filter(|d| d.contains("kind: Job")).collect();
    assert_eq!(docs.len(), 1, "no merge Job: every shard merges each point");
    let job: Job = serde_yaml_ng::from_str(docs[0].trim_start_matches("---\n")).unwrap();
    let spec_ = job.spec.as_ref().unwrap();
    assert_eq!((spec_.completions, spec_.parallelism), (Some(16), Some(16)));
    let args = spec_.template.spec.as_ref().unwrap().containers[0].args.clone().unwrap();
    assert_eq!(args[0], "sweep");
    let after = |flag: &str| args[args.iter().position(|a| a == flag).unwrap() + 1].clone();
    assert_eq!(after("--result-dir"), "/results/llama-sweep/shards");
    assert_eq!(after("--output-dir"), "/results/llama-sweep/sweep");
    assert_eq!(after("--db"), "/results/llama-sweep/servelab.db");
    assert_eq!(after("--label"), "llama-70b-sweep");
    assert!(yaml.contains(
        "kubectl logs -f -l job-name=llama-sweep,batch.kubernetes.io/job-completion-index=0"
    ));
    insta::assert_snapshot!("k8s_sweep_16_shards", yaml);
    assert_eq!(yaml, include_str!("../../../docs/examples/scale/indexed-job-sweep-16.yaml"));
}

#[test]
fn a_lab_runs_on_slurm_and_is_refused_on_kubernetes() {
    let lab = ScaleSpec {
        name: "vllm-lab".into(),
        shards: 4,
        run: servelab_scale::ScaleRun::Lab,
        args: vec!["experiments/vllm-h100.yaml".into()],
        label: "vllm-lab".into(),
        merge_from: Default::default(),
    };
    let e = k8s::render(&K8sSpec { scale: lab.clone(), ..k8s_spec() }).unwrap_err();
    assert_eq!(e, servelab_scale::ScaleError::LabOnKubernetes);
    assert!(e.to_string().contains("scale slurm"), "{e}");
    let spec = SlurmSpec {
        scale: lab,
        cpus_per_task: 4,
        nodes: Some(4),
        exe: "servelab".into(),
        start_at: None,
        lead_s: 60,
    };
    let script = slurm::render(&spec).unwrap();
    assert!(
        script.contains(
            "srun --ntasks=4 --cpus-per-task=4 servelab \\\n    lab run experiments/vllm-h100.yaml"
        ),
        "{script}"
    );
    assert!(
        script.contains("--output-dir \"$results\" \\\n    --db \"$results/servelab.db\""),
        "{script}"
    );
    assert!(!script.contains("runs merge"), "{script}");
    assert!(script.contains(" || rc=$?\n"), "{script}");
    insta::assert_snapshot!("sbatch_lab_4_shards", script);
    assert_eq!(script, include_str!("../../../docs/examples/scale/sbatch-lab-4.sh"));
}

#[test]
fn merged_from_digests_the_shards_keep_their_records_and_the_merge_takes_digests() {
    let light = ScaleSpec { merge_from: servelab_scale::MergeFrom::Digests, ..scale() };
    let yaml = k8s::render(&K8sSpec { scale: light.clone(), ..k8s_spec() }).unwrap();
    assert!(!yaml.contains("--save-detailed"), "{yaml}");
    assert!(yaml.contains("exec servelab runs merge-digests \"$dir\""), "{yaml}");
    let sbatch = slurm::render(&SlurmSpec {
        scale: light,
        cpus_per_task: 2,
        nodes: None,
        exe: "servelab".into(),
        start_at: None,
        lead_s: 60,
    })
    .unwrap();
    assert!(!sbatch.contains("--save-detailed"), "{sbatch}");
    assert!(sbatch.contains("servelab runs merge-digests \"$results\""), "{sbatch}");
    // The default ships records and merges them exactly.
    let yaml = k8s::render(&k8s_spec()).unwrap();
    assert!(yaml.contains("--save-detailed") && yaml.contains("exec servelab runs merge \"$dir\""));
}
