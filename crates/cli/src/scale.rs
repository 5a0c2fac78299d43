//! `servelab scale`: check the bench arguments, then render the scheduler's files or run the
//! shards here and merge them.

use std::time::{Duration, SystemTime};

use clap::Parser;
use servelab_outputs::term;
use servelab_plan::time::rfc3339_millis;
use servelab_scale::{k8s, local, slurm, ScaleSpec};

use crate::args::{Cli, Command, ScaleCommand, ScaleCommon};
use crate::{ExitStatus, Failure};

/// The run every shard is part of, checked as its shards will check it: the bench arguments
/// with what the scaled run adds to them ([`servelab_scale::shard_args`], `--shard 0/N`)
/// resolve into a bench plan here, so a typo or a value the shards would refuse (a
/// `--max-concurrency` below N) fails on this machine, not on N of them.
fn spec(c: &ScaleCommon) -> Result<ScaleSpec, Failure> {
    let spec = ScaleSpec {
        name: c.name.clone(),
        shards: c.shards,
        bench_args: c.bench.clone(),
        label: c.label.clone().unwrap_or_else(|| c.name.clone()),
    };
    // Reserved flags first: named as such, not as clap's complaint about a repeat.
    spec.check().map_err(Failure::usage)?;
    // The start instant and folder only stand in for the shards' own: any value parses alike.
    let shard = servelab_scale::shard_args(&spec.bench_args, "0", "results");
    let argv = ["servelab".to_string()]
        .into_iter()
        .chain(shard)
        .chain(["--shard".to_string(), format!("0/{}", spec.shards)]);
    let bench = match Cli::try_parse_from(argv) {
        Ok(Cli { command: Command::Bench(b), .. }) => b,
        Ok(_) => return Err(Failure::usage("the arguments after -- must be bench arguments")),
        Err(e) => {
            return Err(Failure::usage(format!(
                "the bench arguments after -- do not parse: {}",
                e.to_string().lines().next().unwrap_or_default()
            )))
        }
    };
    crate::resolve::bench_plan(&bench, None).map_err(|e| {
        Failure::usage(format!("the bench arguments after --, as each shard runs them: {e}"))
    })?;
    Ok(spec)
}

/// `--start-at` checked (as the shards will read it), else `ahead` from now; RFC 3339.
fn start(given: Option<&str>, ahead: Duration) -> Result<String, Failure> {
    let at = match given {
        Some(t) => servelab_plan::time::parse_instant(t)
            .map_err(|e| Failure::usage(format!("--start-at: {e}")))?,
        None => SystemTime::now() + ahead,
    };
    Ok(rfc3339_millis(at))
}

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

pub fn scale(cmd: ScaleCommand) -> Result<ExitStatus, Failure> {
    match cmd {
        ScaleCommand::K8s(a) => {
            let start_at = start(a.start_at.as_deref(), Duration::from_secs(a.start_in))?;
            let spec = k8s::K8sSpec {
                scale: spec(&a.common)?,
                image: a.image.clone(),
                claim: a.claim.clone(),
                namespace: a.namespace.clone(),
                cpu: a.cpu.clone(),
                start_at,
                merge_deadline_s: a.merge_deadline,
            };
            emit(&k8s::render(&spec).map_err(Failure::usage)?, a.output.as_deref())?;
        }
        ScaleCommand::Slurm(a) => {
            let start_at = match &a.start_at {
                Some(t) => Some(start(Some(t), Duration::ZERO)?),
                None => None,
            };
            let spec = slurm::SlurmSpec {
                scale: spec(&a.common)?,
                cpus_per_task: a.cpus_per_task,
                nodes: a.nodes,
                exe: a.exe.clone(),
                start_at,
                lead_s: a.lead,
            };
            emit(&slurm::render(&spec).map_err(Failure::usage)?, a.output.as_deref())?;
        }
        ScaleCommand::Local(a) => {
            let scale = spec(&a.common)?;
            let ahead = servelab_plan::seconds("--start-in", a.start_in).map_err(Failure::usage)?;
            let start_at = start(None, ahead)?;
            let stamp = SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0);
            let results =
                a.results.clone().unwrap_or_else(|| format!("{}-{stamp}", scale.name).into());
            let exe = std::env::current_exe()
                .map_err(|e| Failure::runtime(format!("cannot find this program: {e}")))?;
            let label = scale.label.clone();
            let spec = local::LocalSpec { scale, exe, results: results.clone(), start_at };
            term::note(&format!(
                "Running {} shards from {} (logs and results in {})",
                spec.scale.shards,
                spec.start_at,
                results.display()
            ));
            local::run_local(&spec).map_err(Failure::runtime)?;
            let opts = servelab_metrics::merge::MergeOptions {
                max_clock_spread_ms: a.max_clock_spread_ms,
                force: false,
            };
            let mut store = crate::store::open(&a.db)?;
            let folder = [results.to_string_lossy().into_owned()];
            let (id, summary) =
                store.merge_into(&folder, &label, &[], opts).map_err(Failure::usage)?;
            term::stdout(&servelab_outputs::render_text(&summary));
            term::note(&format!("Stored the merged run as #{id} ({label})"));
        }
    }
    Ok(ExitStatus::Success)
}
