//! An sbatch script: one job step of N tasks (each a shard: Slurm gives it `SLURM_PROCID` of
//! `SLURM_NTASKS`), then the merge on the first node.

use crate::{sh_quote, shard_args, wait_for_results, ScaleError, ScaleSpec};

/// Seconds the merge waits, after the shards' step ended, for their result files to show on
/// the shared filesystem (NFS caches a folder's listing for up to a minute by default).
pub const VISIBLE_WAIT_S: u64 = 300;

/// A Slurm rendering of a scaled run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlurmSpec {
    /// The run.
    pub scale: ScaleSpec,
    /// Cores per shard.
    pub cpus_per_task: u32,
    /// Nodes to spread the shards over; `None`: Slurm decides.
    pub nodes: Option<u32>,
    /// The servelab binary on the nodes.
    pub exe: String,
    /// A fixed start instant; `None`: `lead_s` seconds after the script starts, computed in it.
    pub start_at: Option<String>,
    /// Seconds between the script's start and the shards' time zero (for srun to place them).
    pub lead_s: u32,
}

/// Arguments one flag and its values a line.
fn flag_lines(args: &[String]) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    for a in args {
        match lines.last_mut() {
            Some(line) if !a.starts_with("--") => {
                line.push(' ');
                line.push_str(a);
            }
            _ => lines.push(a.clone()),
        }
    }
    lines
}

/// The sbatch script.
pub fn render(spec: &SlurmSpec) -> Result<String, ScaleError> {
    spec.scale.check()?;
    let s = &spec.scale;
    let nodes = spec.nodes.map(|n| format!("#SBATCH --nodes={n}\n")).unwrap_or_default();
    let start = match &spec.start_at {
        Some(t) => format!("start_at={}\n", sh_quote(t)),
        None => format!(
            "# One time zero for every task, read once here: {lead} s for srun to place them.\n\
             start_at=$(( $(date +%s) + {lead} ))\n",
            lead = spec.lead_s
        ),
    };
    let args: Vec<String> = shard_args(&s.bench_args, "START_AT", "RESULTS")
        .iter()
        .map(|a| match a.as_str() {
            "START_AT" => "\"$start_at\"".to_string(),
            "RESULTS" => "\"$results\"".to_string(),
            a => sh_quote(a),
        })
        .collect();
    let exe = sh_quote(&spec.exe);
    Ok(format!(
        "#!/bin/bash\n\
         # servelab: {n} shards of one run, merged as '{label}' (docs/scale.md).\n\
         #   sbatch THIS_FILE\n\
         #SBATCH --job-name={name}\n\
         #SBATCH --ntasks={n}\n\
         #SBATCH --cpus-per-task={cpus}\n\
         {nodes}\
         #SBATCH --output={name}-%j.out\n\
         set -euo pipefail\n\
         results=\"${{SERVELAB_RESULTS:-$PWD/{name}-$SLURM_JOB_ID}}\"\n\
         mkdir -p \"$results\"\n\
         {start}\
         srun --ntasks={n} --cpus-per-task={cpus} {exe} \\\n    {args}\n\
         # Every task has ended; a shared filesystem may show another node's files late.\n\
         {wait}\
         {exe} runs merge \"$results\" --label {qlabel} --db \"$results/servelab.db\"\n",
        wait = wait_for_results("results", s.shards, VISIBLE_WAIT_S),
        n = s.shards,
        label = s.label,
        qlabel = sh_quote(&s.label),
        name = s.name,
        cpus = spec.cpus_per_task,
        args = flag_lines(&args).join(" \\\n    "),
    ))
}
