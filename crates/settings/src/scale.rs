//! The settings of `servelab scale`: the scaled run's arguments checked as every shard will
//! resolve them, and its start instant.

use std::path::Path;
use std::time::{Duration, SystemTime};

use clap::Parser;
use servelab_plan::time::rfc3339_millis;
use servelab_scale::{MergeFrom, ScaleRun, ScaleSpec};

use crate::args::{Cli, Command, LabCommand, MergeFromArg, ScaleCommon, ScaleRunArg};
use crate::resolve;

/// The run every shard is part of, checked as its shards will check it: the run's arguments
/// with what the scaled run adds to them ([`servelab_scale::shard_args`], `--shard 0/N`)
/// resolve into a bench or sweep plan (a lab's experiment is loaded, every profile checked
/// against N) here, so a typo or a value the shards would refuse (a `--max-concurrency` below
/// N) fails on this machine, not on N of them.
pub fn spec(c: &ScaleCommon) -> Result<ScaleSpec, String> {
    let run = match c.run {
        ScaleRunArg::Bench => ScaleRun::Bench,
        ScaleRunArg::Sweep => ScaleRun::Sweep,
        ScaleRunArg::Lab => ScaleRun::Lab,
    };
    let spec = ScaleSpec {
        name: c.name.clone(),
        shards: c.shards,
        run,
        args: c.args.clone(),
        label: c.label.clone().unwrap_or_else(|| c.name.clone()),
        merge_from: match c.merge_from {
            MergeFromArg::Records => MergeFrom::Records,
            MergeFromArg::Digests => MergeFrom::Digests,
        },
    };
    // Reserved flags first: named as such, not as clap's complaint about a repeat.
    spec.check().map_err(|e| e.to_string())?;
    // The start instant and folders only stand in for the shards' own: any value parses alike.
    let shard = servelab_scale::shard_args(&spec, "0", "results", "results/servelab.db");
    let argv = ["servelab".to_string()]
        .into_iter()
        .chain(shard)
        .chain(["--shard".to_string(), format!("0/{}", spec.shards)]);
    let what = run.name();
    let cli = Cli::try_parse_from(argv).map_err(|e| {
        format!(
            "the {what} arguments after -- do not parse: {}",
            e.to_string().lines().next().unwrap_or_default()
        )
    })?;
    let as_shard =
        |e: String| format!("the {what} arguments after --, as each shard runs them: {e}");
    match cli.command {
        Command::Bench(b) if run == ScaleRun::Bench => {
            resolve::bench_plan(&b, None).map_err(as_shard)?;
        }
        Command::Sweep(a) if run == ScaleRun::Sweep => {
            resolve::sweep_plan(&a).map_err(as_shard)?;
        }
        Command::Lab(LabCommand::Run(a)) if run == ScaleRun::Lab => {
            let loaded = servelab_lab::load_experiment(&a.experiment, resolve::profile_plan)
                .map_err(|e| as_shard(e.to_string()))?;
            resolve::lab_shard(&a, Path::new("results"), &loaded).map_err(as_shard)?;
        }
        _ => return Err(format!("the arguments after -- must be {what} arguments")),
    }
    Ok(spec)
}

/// `--start-at` checked (as the shards will read it), else `ahead` from now; RFC 3339.
pub fn start(given: Option<&str>, ahead: Duration) -> Result<String, String> {
    let at = match given {
        Some(t) => servelab_plan::time::parse_instant(t).map_err(|e| format!("--start-at: {e}"))?,
        None => SystemTime::now() + ahead,
    };
    Ok(rfc3339_millis(at))
}
