//! `servelab scale`: check the run's arguments, then render the scheduler's files or run the
//! shards here (and merge a bench's).

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use servelab_outputs::term;
use servelab_scale::{k8s, local, slurm, MergeFrom, ScaleRun, ScaleSpec};
use servelab_settings::scale::{spec, start};

use crate::args::{ScaleCommand, ScaleRunArg};
use crate::store::Shards;
use crate::{ExitStatus, Failure};

fn emit(text: &str, output: Option<&std::path::Path>) -> Result<(), Failure> {
    match output {
        Some(p) => {
            std::fs::write(p, text)
                .map_err(|e| Failure::runtime(format!("cannot write {}: {e}", p.display())))?;
            term::note(&format!("Wrote {}", p.display()));
        }
        None => term::stdout(text),
    }
    Ok(())
}

/// `servelab scale clock`: one reading, printed (exit 2 when there is none).
async fn clock(a: &crate::args::ScaleClockArgs) -> Result<ExitStatus, Failure> {
    let reference: servelab_plan::ClockReference =
        a.clock_reference.parse().map_err(Failure::usage)?;
    let within = servelab_plan::seconds("--within", a.within).map_err(Failure::usage)?;
    let started = std::time::Instant::now();
    let (label, r) = servelab_bench::read_clock(&reference, a.base_url.as_deref(), within)
        .await
        .map_err(Failure::runtime)?;
    let took = started.elapsed().as_secs_f64();
    if a.json {
        let v = serde_json::json!({
            "reference": label,
            "offset_ms": r.offset_ms,
            "uncertainty_ms": r.uncertainty_ms,
            "exchanges": r.exchanges,
            "seconds": took,
            "note": r.note(),
        });
        term::stdout(&format!("{v}\n"));
    } else {
        term::stdout(&format!(
            "clock against {label}: {} in {took:.2} s{}\n",
            servelab_bench::said(&r),
            r.note().map(|n| format!(" ({n})")).unwrap_or_default()
        ));
    }
    Ok(ExitStatus::Success)
}

pub async fn scale(cmd: ScaleCommand) -> Result<ExitStatus, Failure> {
    match cmd {
        ScaleCommand::Clock(a) => return clock(&a).await,
        ScaleCommand::K8s(a) => {
            // Said before the experiment is read: no experiment makes it possible.
            if a.common.run == ScaleRunArg::Lab {
                return Err(Failure::usage(servelab_scale::ScaleError::LabOnKubernetes));
            }
            let start_at = start(a.start_at.as_deref(), Duration::from_secs(a.start_in))
                .map_err(Failure::usage)?;
            let spec = k8s::K8sSpec {
                scale: spec(&a.common).map_err(Failure::usage)?,
                image: a.image.clone(),
                claim: a.claim.clone(),
                namespace: a.namespace.clone(),
                cpu: a.cpu.clone(),
                start_at,
                merge_deadline_s: a.merge_deadline,
            };
            emit(&k8s::render(&spec).map_err(Failure::usage)?, a.output.as_deref())?;
            note_secrets(&spec.scale, &format!("the Secret '{}'", k8s::secret_name(&spec)));
        }
        ScaleCommand::Slurm(a) => {
            let start_at = match &a.start_at {
                Some(t) => Some(start(Some(t), Duration::ZERO).map_err(Failure::usage)?),
                None => None,
            };
            let spec = slurm::SlurmSpec {
                scale: spec(&a.common).map_err(Failure::usage)?,
                cpus_per_task: a.cpus_per_task,
                nodes: a.nodes,
                exe: a.exe.clone(),
                start_at,
                lead_s: a.lead,
            };
            emit(&slurm::render(&spec).map_err(Failure::usage)?, a.output.as_deref())?;
            note_secrets(&spec.scale, "environment variables exported before sbatch");
        }
        ScaleCommand::Local(a) => {
            let scale = spec(&a.common).map_err(Failure::usage)?;
            let ahead = servelab_plan::seconds("--start-in", a.start_in).map_err(Failure::usage)?;
            let start_at = start(None, ahead).map_err(Failure::usage)?;
            let stamp = SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0);
            let results =
                a.results.clone().unwrap_or_else(|| format!("{}-{stamp}", scale.name).into());
            let exe = std::env::current_exe()
                .map_err(|e| Failure::runtime(format!("cannot find this program: {e}")))?;
            // A sweep's or lab's shard 0 stores into the store this command names.
            let db = servelab_store::resolve_db_path(a.db.db.clone())
                .unwrap_or_else(|| results.join(servelab_scale::DB_NAME));
            let spec =
                local::LocalSpec { scale, exe, results: results.clone(), start_at, db: db.clone() };
            term::note(&format!(
                "Running {} shards of {} from {} (logs and results in {})",
                spec.scale.shards,
                spec.scale.run.name(),
                spec.start_at,
                results.display()
            ));
            let ended = local::run_local(&spec).map_err(Failure::runtime)?;
            return local_outputs(&spec, &a, ended, &db);
        }
    }
    Ok(ExitStatus::Success)
}

/// Say which credentials of the run's arguments the rendered file leaves out, and where the
/// shards read them from instead (the file's header says how to provide them).
fn note_secrets(scale: &ScaleSpec, from: &str) {
    let (_, secrets) = servelab_scale::without_secrets(&scale.args, |e| e.to_string());
    if !secrets.is_empty() {
        let what: Vec<&str> = secrets.iter().map(|s| s.what.as_str()).collect();
        term::note(&format!(
            "kept out of the file: {}; the shards read them from {from} (see its header)",
            what.join(", ")
        ));
    }
}

/// After a local rehearsal: a bench's shards merged into the store; a sweep's or lab's
/// outputs (shard 0's) shown.
fn local_outputs(
    spec: &local::LocalSpec,
    a: &crate::args::ScaleLocalArgs,
    ended: local::Ended,
    db: &Path,
) -> Result<ExitStatus, Failure> {
    let results = &spec.results;
    let shown: PathBuf = match spec.scale.run {
        ScaleRun::Bench => {
            let opts = servelab_metrics::merge::MergeOptions {
                max_clock_spread_ms: a.max_clock_spread_ms,
                force: false,
            };
            let folder = [results.to_string_lossy().into_owned()];
            let shards = match spec.scale.merge_from {
                MergeFrom::Records => Shards::Records(&folder),
                MergeFrom::Digests => Shards::Digests(&folder, None),
            };
            crate::store::merge_and_store(&a.db, &spec.scale.label, &[], opts, shards)?;
            return Ok(exit_of(ended));
        }
        ScaleRun::Sweep => results.join(servelab_scale::SWEEP_DIR).join("summary.md"),
        ScaleRun::Lab => results.join("report.md"),
    };
    match std::fs::read_to_string(&shown) {
        Ok(text) => term::stdout(&text),
        Err(e) => {
            return Err(Failure::runtime(format!(
                "shard 0 wrote no {}: {e} (see {})",
                shown.display(),
                results.join("shard-0.log").display()
            )))
        }
    }
    term::note(&format!(
        "Shard 0's outputs: {} (merged runs stored in {})",
        shown.parent().unwrap_or(results).display(),
        db.display()
    ));
    Ok(exit_of(ended))
}

fn exit_of(ended: local::Ended) -> ExitStatus {
    match ended {
        local::Ended::Ok => ExitStatus::Success,
        local::Ended::ThresholdFailed => ExitStatus::ThresholdFailed,
    }
}
