//! A Kubernetes Indexed Job of N shards, and for a bench the Job that merges them: files a
//! user applies with `kubectl apply -f`, no controller to install.
//!
//! Every pod runs the same arguments; Kubernetes gives each its index
//! (`JOB_COMPLETION_INDEX`) and the manifest the count (`SERVELAB_SHARDS`), from which the
//! shard takes its place. Results go to a shared volume (a `ReadWriteMany` claim), one folder
//! per run. A bench's merge Job waits for every shard's result there, then stores the merged
//! run in a results store on the same volume; a sweep's shards merge each point themselves,
//! and shard 0 writes the sweep and stores its points there. A lab is not rendered: its
//! engines would run in shard 0's pod, and the Job's pods share one template.

use serde_json::{json, Value};

use crate::{
    header, sh_quote, shard_args, wait_for_results, without_secrets, ScaleError, ScaleRun,
    ScaleSpec, DB_NAME,
};

/// Where the results volume is mounted in every pod.
pub const MOUNT: &str = "/results";

/// Seconds the merge Job has, after its wait for the shards, to merge and store the run.
pub const MERGE_TIME_S: u64 = 1_800;

/// A Kubernetes rendering of a scaled run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct K8sSpec {
    /// The run.
    pub scale: ScaleSpec,
    /// The servelab image (built from the repository's `Dockerfile`).
    pub image: String,
    /// The `ReadWriteMany` PersistentVolumeClaim results go to.
    pub claim: String,
    /// Namespace of both Jobs; `None`: kubectl's current one.
    pub namespace: Option<String>,
    /// CPU each shard requests (and is limited to), e.g. `"4"`; `None`: no request.
    pub cpu: Option<String>,
    /// The shared start instant, RFC 3339 (render shortly before applying: pods pulling the
    /// image after it start late, and say so).
    pub start_at: String,
    /// How long the merge Job waits for the shards' result files, seconds (the Job's own
    /// deadline adds [`MERGE_TIME_S`]).
    pub merge_deadline_s: u64,
}

fn metadata(spec: &K8sSpec, name: &str) -> Value {
    let mut m = json!({
        "name": name,
        "labels": {"app.kubernetes.io/name": "servelab", "servelab.dev/run": spec.scale.name},
    });
    if let Some(ns) = &spec.namespace {
        m["namespace"] = json!(ns);
    }
    m
}

fn volume(spec: &K8sSpec) -> (Value, Value) {
    (
        json!([{"name": "results", "persistentVolumeClaim": {"claimName": spec.claim}}]),
        json!([{"name": "results", "mountPath": MOUNT}]),
    )
}

/// The Secret the shards read credentials from (see [`crate::without_secrets`]).
pub fn secret_name(spec: &K8sSpec) -> String {
    format!("{}-secrets", spec.scale.name)
}

/// The Indexed Job that runs the shards. Credentials in the run's arguments are not written:
/// each is an environment variable filled from the Secret [`secret_name`], which Kubernetes
/// expands where the arguments say `$(NAME)`.
pub fn shards_job(spec: &K8sSpec) -> Value {
    let (args, secrets) = without_secrets(&spec.scale.args, |env| format!("$({env})"));
    let s = &ScaleSpec { args, ..spec.scale.clone() };
    let dir = format!("{MOUNT}/{}", s.name);
    let (volumes, mounts) = volume(spec);
    let mut env = vec![json!({"name": servelab_load::SHARDS_ENV, "value": s.shards.to_string()})];
    env.extend(secrets.iter().map(|x| {
        json!({"name": x.env, "valueFrom": {"secretKeyRef": {"name": secret_name(spec), "key": x.key}}})
    }));
    let mut container = json!({
        "name": "shard",
        "image": spec.image,
        "args": shard_args(s, &spec.start_at, &dir, &format!("{dir}/{DB_NAME}")),
        "env": env,
        "volumeMounts": mounts,
    });
    if let Some(cpu) = &spec.cpu {
        container["resources"] = json!({"requests": {"cpu": cpu}, "limits": {"cpu": cpu}});
    }
    json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": metadata(spec, &s.name),
        "spec": {
            "completionMode": "Indexed",
            "completions": s.shards,
            "parallelism": s.shards,
            // A shard run again would send its part of the schedule late: a failed shard
            // fails the run, which is then run again as a whole.
            "backoffLimit": 0,
            "template": {
                "metadata": {"labels": {"app.kubernetes.io/name": "servelab",
                    "servelab.dev/run": s.name}},
                "spec": {
                    "restartPolicy": "Never",
                    // One shard per node where there are enough nodes: shards on one node
                    // share its cores and network, which is what scaling out avoids.
                    "topologySpreadConstraints": [{
                        "maxSkew": 1,
                        "topologyKey": "kubernetes.io/hostname",
                        "whenUnsatisfiable": "ScheduleAnyway",
                        "labelSelector": {"matchLabels": {"servelab.dev/run": s.name}},
                    }],
                    "containers": [container],
                    "volumes": volumes,
                },
            },
        },
    })
}

/// The shell script of the merge Job: wait (at most `merge_deadline_s`) for every shard's
/// result file, then merge the folder.
pub fn merge_script(spec: &K8sSpec) -> String {
    let s = &spec.scale;
    format!(
        "dir={MOUNT}/{name}\n{wait}\
         exec servelab {merge} \"$dir\" --label {label} --db \"$dir/{DB_NAME}\"\n",
        merge = s.merge_from.command(),
        name = s.name,
        wait = wait_for_results("dir", s.shards, spec.merge_deadline_s),
        label = sh_quote(&s.label),
    )
}

/// The Job that merges the shards' results into one stored run.
pub fn merge_job(spec: &K8sSpec) -> Value {
    let (volumes, mounts) = volume(spec);
    json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": metadata(spec, &format!("{}-merge", spec.scale.name)),
        "spec": {
            "backoffLimit": 0,
            // The wait for the shards, then time for the merge itself.
            "activeDeadlineSeconds": spec.merge_deadline_s + MERGE_TIME_S,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{
                        "name": "merge",
                        "image": spec.image,
                        "command": ["sh", "-c", merge_script(spec)],
                        "volumeMounts": mounts,
                    }],
                    "volumes": volumes,
                },
            },
        },
    })
}

/// The Jobs as one YAML file (the shards, then a bench's merge), with a header saying how to
/// use it.
pub fn render(spec: &K8sSpec) -> Result<String, ScaleError> {
    spec.scale.check()?;
    let s = &spec.scale;
    if s.run == ScaleRun::Lab {
        return Err(ScaleError::LabOnKubernetes);
    }
    let follow = match s.run {
        ScaleRun::Bench => format!("job/{}-merge", s.name),
        // Shard 0 prints the sweep's table.
        _ => format!("-l job-name={},batch.kubernetes.io/job-completion-index=0", s.name),
    };
    let mut out = format!(
        "{header}\
         # Needs a ReadWriteMany PersistentVolumeClaim '{claim}'. Every shard starts its\n\
         # schedule at {start}: apply before then (render again for a later start).\n\
         #   kubectl apply -f THIS_FILE\n\
         #   kubectl logs -f {follow}\n",
        header = header(s, &format!("{MOUNT}/{}", s.name)),
        claim = spec.claim,
        start = spec.start_at,
    );
    let (_, secrets) = without_secrets(&s.args, |e| e.to_string());
    if !secrets.is_empty() {
        let ns = spec.namespace.as_ref().map(|n| format!(" -n {n}")).unwrap_or_default();
        out.push_str(&format!(
            "# Credentials are kept out of this file: the shards read them from the Secret\n\
             # '{name}' (as environment variables). Create it before applying:\n\
             #   kubectl create secret generic {name}{ns} \\\n",
            name = secret_name(spec)
        ));
        let lines: Vec<String> = secrets
            .iter()
            .map(|x| format!("#     --from-literal={}='...'   # {}", x.key, x.what))
            .collect();
        out.push_str(&lines.join(" \\\n"));
        out.push('\n');
    }
    let mut docs = vec![shards_job(spec)];
    if s.run == ScaleRun::Bench {
        docs.push(merge_job(spec));
    }
    for doc in docs {
        out.push_str("---\n");
        out.push_str(&crate::yaml::to_yaml(&doc));
    }
    Ok(out)
}
