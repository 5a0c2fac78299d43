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

/// The Jobs of a rendered manifest, validated as strictly as a schema validator does:
/// read as the Kubernetes API's own `Job` type, nothing may be lost (a field the type does
/// not know is dropped on the way, so the round trip differs), and no value may be a plain
/// scalar other than a number or a boolean (a YAML 1.1 reader such as PyYAML types a plain
/// `2026-12-01T09:00:00.000Z` as a timestamp, and refuses it where a string belongs).
fn jobs(yaml: &str) -> Vec<Job> {
    let docs: Vec<&str> = yaml.split("---\n").skip(1).collect();
    assert!(!docs.is_empty(), "{yaml}");
    for (n, line) in yaml.lines().enumerate() {
        if let Some(v) = plain_value(line) {
            let typed = v.parse::<f64>().is_ok() || v == "true" || v == "false";
            assert!(typed, "line {}: plain scalar {v:?} (quote it)\n{yaml}", n + 1);
        }
    }
    docs.iter()
        .map(|d| {
            let raw: serde_json::Value = serde_yaml_ng::from_str(d).unwrap();
            let job: Job = serde_json::from_value(raw.clone())
                .unwrap_or_else(|e| panic!("not a Job: {e}\n{d}"));
            assert_eq!(serde_json::to_value(&job).unwrap(), raw, "fields Job does not know");
            job
        })
        .collect()
}

/// The value of a `key: value` or `- value` line when it is a plain scalar (not quoted, not
/// a block, not a collection, not inside a literal block: those are indented past a `|`).
fn plain_value(line: &str) -> Option<&str> {
    thread_local!(static BLOCK: std::cell::Cell<Option<usize>> = const { std::cell::Cell::new(None) });
    let indent = line.len() - line.trim_start().len();
    if let Some(i) = BLOCK.get() {
        if indent > i {
            return None;
        }
        BLOCK.set(None);
    }
    let t = line.trim_start();
    if t.starts_with('#') || t.is_empty() || t == "---" {
        return None;
    }
    let t = t.strip_prefix("- ").unwrap_or(t);
    let v = match t.split_once(": ") {
        Some((k, v)) if !k.starts_with('"') || k.ends_with('"') => v,
        _ if t.ends_with(':') => return None,
        _ => t,
    };
    if v == "|" || v == "|-" {
        BLOCK.set(Some(indent));
        return None;
    }
    if v.starts_with('"') || v == "{}" || v == "[]" {
        return None;
    }
    Some(v)
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
    let docs = jobs(&yaml);
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
    assert_eq!(script, include_str!("../../../../docs/examples/scale/sbatch-16.sh"));
    let yaml = k8s::render(&k8s_spec()).unwrap();
    assert_eq!(yaml, include_str!("../../../../docs/examples/scale/indexed-job-16.yaml"));
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
    let docs = jobs(&yaml);
    assert_eq!(docs.len(), 1, "no merge Job: every shard merges each point");
    let job = &docs[0];
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
    assert_eq!(yaml, include_str!("../../../../docs/examples/scale/indexed-job-sweep-16.yaml"));
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
    assert_eq!(script, include_str!("../../../../docs/examples/scale/sbatch-lab-4.sh"));
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

/// The validator itself: what servelab wrote before (a plain timestamp among the args) and a
/// field the Job type does not have are both refused.
#[test]
#[should_panic(expected = "plain scalar \"2026-12-01T09:00:00.000Z\"")]
fn the_validator_refuses_a_plain_timestamp() {
    jobs(
        "---\napiVersion: \"batch/v1\"\nkind: \"Job\"\nspec:\n  template:\n    spec:\n      \
         containers:\n        - name: \"s\"\n          args:\n            - \"--start-at\"\n            \
         - 2026-12-01T09:00:00.000Z\n",
    );
}

#[test]
#[should_panic(expected = "fields Job does not know")]
fn the_validator_refuses_unknown_fields() {
    jobs(
        "---\napiVersion: \"batch/v1\"\nkind: \"Job\"\nspec:\n  completions: 2\n  \
         completionz: 2\n  template: {}\n",
    );
}

/// Issue 28: a run's credentials (`--base-url` with a user and password, an Authorization
/// header) were written verbatim into the manifest and the sbatch script. They stay out of
/// both: Kubernetes fills them from a Secret, Slurm from the environment, and the files say so.
#[test]
fn credentials_stay_out_of_the_manifest_and_the_script() {
    let mut secret = sweep();
    secret.args = [
        "--base-url",
        "http://alice:s3cr3t-pw@gpu-0:8000",
        "--header",
        "Authorization: Bearer tok-9x",
        "--concurrency",
        "16,32",
    ]
    .map(String::from)
    .to_vec();
    let yaml = k8s::render(&K8sSpec { scale: secret.clone(), ..k8s_spec() }).unwrap();
    assert!(!yaml.contains("s3cr3t") && !yaml.contains("Bearer tok-9x"), "{yaml}");
    assert!(yaml.contains("kubectl create secret generic llama-sweep-secrets -n bench"), "{yaml}");
    let docs = jobs(&yaml);
    let c = &docs[0].spec.as_ref().unwrap().template.spec.as_ref().unwrap().containers[0];
    let args = c.args.as_ref().unwrap();
    assert_eq!(args[2], "http://$(SERVELAB_URL_USERINFO)@gpu-0:8000");
    assert_eq!(args[4], "Authorization: $(SERVELAB_HEADER_1)");
    let env: Vec<(String, String)> = c
        .env
        .as_ref()
        .unwrap()
        .iter()
        .filter_map(|e| {
            let r = e.value_from.as_ref()?.secret_key_ref.as_ref()?;
            Some((e.name.clone(), format!("{}/{}", r.name, r.key)))
        })
        .collect();
    assert_eq!(
        env,
        [
            ("SERVELAB_URL_USERINFO".to_string(), "llama-sweep-secrets/url-userinfo".to_string()),
            ("SERVELAB_HEADER_1".to_string(), "llama-sweep-secrets/header-1".to_string())
        ]
    );

    // The script, run by bash with a stand-in srun: without the variables it stops before
    // srun; with them, srun receives the credentials as one argument each.
    let script = slurm::render(&SlurmSpec {
        scale: secret,
        cpus_per_task: 2,
        nodes: None,
        exe: "servelab".into(),
        start_at: Some("1796115600".into()),
        lead_s: 60,
    })
    .unwrap();
    assert!(!script.contains("s3cr3t") && !script.contains("Bearer tok-9x"), "{script}");
    let tmp = tempfile::tempdir().unwrap();
    let bin = tmp.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let srun = bin.join("srun");
    std::fs::write(
        &srun,
        "#!/bin/sh\nfor a in \"$@\"; do printf '%s\\n' \"$a\"; done > \"$ARGS\"\n",
    )
    .unwrap();
    std::process::Command::new("chmod").arg("+x").arg(&srun).status().unwrap();
    let file = tmp.path().join("job.sh");
    std::fs::write(&file, &script).unwrap();
    let run = |secrets: &[(&str, &str)]| {
        let mut c = std::process::Command::new("bash");
        c.arg(&file)
            .current_dir(tmp.path())
            .env("PATH", format!("{}:{}", bin.display(), std::env::var("PATH").unwrap()))
            .env("SLURM_JOB_ID", "7")
            .env("ARGS", tmp.path().join("args"))
            .env_remove("SERVELAB_URL_USERINFO")
            .env_remove("SERVELAB_HEADER_1");
        for (k, v) in secrets {
            c.env(k, v);
        }
        c.output().unwrap()
    };
    let out = run(&[]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("SERVELAB_URL_USERINFO: export SERVELAB_URL_USERINFO"), "{err}");
    assert!(!tmp.path().join("args").exists(), "srun ran without the credentials");
    let out = run(&[
        ("SERVELAB_URL_USERINFO", "alice:s3cr3t-pw"),
        ("SERVELAB_HEADER_1", "Bearer tok-9x"),
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let args = std::fs::read_to_string(tmp.path().join("args")).unwrap();
    let args: Vec<&str> = args.lines().collect();
    let at = args.iter().position(|a| *a == "--base-url").unwrap();
    assert_eq!(args[at + 1], "http://alice:s3cr3t-pw@gpu-0:8000");
    assert_eq!(args[at + 3], "Authorization: Bearer tok-9x");
}
