//! N shard processes on this machine, against one target: the whole scaled path (shards,
//! shared start, result files, merge) rehearsed without a cluster.

use std::path::PathBuf;
use std::process::{Command, Stdio};

use crate::{shard_args, ScaleSpec};

/// A local rehearsal of a scaled run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalSpec {
    /// The run.
    pub scale: ScaleSpec,
    /// The servelab binary to run (the current one).
    pub exe: PathBuf,
    /// Where the shards write their results and logs.
    pub results: PathBuf,
    /// The shared start instant (`--start-at`).
    pub start_at: String,
    /// The results store a sweep's or lab's shard 0 stores its merged runs in.
    pub db: PathBuf,
}

/// The arguments of shard `k`: [`shard_args`] and `--shard k/N` (no scheduler to tell it).
pub fn local_args(spec: &LocalSpec, k: u32) -> Vec<String> {
    let dir = spec.results.to_string_lossy();
    let mut args = shard_args(&spec.scale, &spec.start_at, &dir, &spec.db.to_string_lossy());
    args.extend(["--shard".to_string(), format!("{k}/{}", spec.scale.shards)]);
    args
}

/// How the shards ended, when none failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// Every shard exited 0.
    Ok,
    /// Some exited 1 (an SLO unmet, no recommendation: the shards judge alike), none worse.
    ThresholdFailed,
}

/// Run every shard at once and wait for all; each one's output goes to `shard-K.log` in the
/// results folder (a bench's shard result files, which `runs merge` then takes, are there
/// too). Fails with which shards failed (exit status 2 or worse) and where their logs are.
pub fn run_local(spec: &LocalSpec) -> Result<Ended, String> {
    spec.scale.check().map_err(|e| e.to_string())?;
    std::fs::create_dir_all(&spec.results)
        .map_err(|e| format!("cannot create {}: {e}", spec.results.display()))?;
    let mut children = Vec::new();
    for k in 0..spec.scale.shards {
        let log_path = spec.results.join(format!("shard-{k}.log"));
        let log = std::fs::File::create(&log_path)
            .map_err(|e| format!("cannot create {}: {e}", log_path.display()))?;
        let err = log.try_clone().map_err(|e| format!("{}: {e}", log_path.display()))?;
        let child = Command::new(&spec.exe)
            .args(local_args(spec, k))
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(err)
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", spec.exe.display()))?;
        children.push((k, log_path, child));
    }
    let (mut failed, mut ended) = (Vec::new(), Ended::Ok);
    for (k, log, mut child) in children {
        match child.wait() {
            Ok(status) if status.success() => {}
            Ok(status) if status.code() == Some(1) => ended = Ended::ThresholdFailed,
            Ok(status) => failed.push(format!("shard {k} ({status}; see {})", log.display())),
            Err(e) => failed.push(format!("shard {k} ({e})")),
        }
    }
    if !failed.is_empty() {
        return Err(format!("shards failed: {}", failed.join(", ")));
    }
    Ok(ended)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_local_shard_is_told_its_index() {
        let spec = LocalSpec {
            scale: ScaleSpec {
                name: "r".into(),
                shards: 4,
                run: crate::ScaleRun::Bench,
                args: vec!["--num-prompts".into(), "8".into()],
                label: "r".into(),
                merge_from: Default::default(),
            },
            exe: "servelab".into(),
            results: "/tmp/r".into(),
            start_at: "1795600000".into(),
            db: "/tmp/db".into(),
        };
        let args = local_args(&spec, 2);
        assert_eq!(&args[..3], &["bench", "--num-prompts", "8"]);
        assert_eq!(&args[args.len() - 2..], &["--shard", "2/4"]);
    }
}
