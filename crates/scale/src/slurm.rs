//! An sbatch script: one job step of N tasks (each a shard: Slurm gives it `SLURM_PROCID` of
//! `SLURM_NTASKS`), then for a bench the merge on the first node; a sweep's or lab's shards
//! merge their runs themselves, and the script says where shard 0 wrote them.

use crate::{
    header, sh_quote, shard_args, wait_for_results, without_secrets, ScaleError, ScaleRun,
    ScaleSpec, Secret, DB_NAME, SWEEP_DIR,
};

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

/// `s` in double quotes for a POSIX shell (`\\`, `"`, `$` and `` ` `` escaped).
fn double_quoted(s: &str) -> String {
    let mut out = String::from('"');
    for c in s.chars() {
        if matches!(c, '\\' | '"' | '$' | '`') {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
}

/// Lines that say where the credentials went and stop the script early when one is not set.
fn secrets_preamble(secrets: &[Secret]) -> String {
    if secrets.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "# Credentials are kept out of this script: export them before sbatch, which passes\n\
         # the environment on to the tasks:\n",
    );
    for x in secrets {
        out.push_str(&format!("#   export {}='...'   # {}\n", x.env, x.what));
    }
    for x in secrets {
        out.push_str(&format!(
            ": \"${{{env}:?export {env} ({what}) before sbatch}}\"\n",
            env = x.env,
            what = x.what
        ));
    }
    out
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
    let db = format!("@RESULTS@/{DB_NAME}");
    // Credentials stay out of the script: the tasks read them from the environment that
    // sbatch and srun pass on.
    let (args, secrets) = without_secrets(&s.args, |env| format!("@ENV:{env}@"));
    let s = &ScaleSpec { args, ..s.clone() };
    let args: Vec<String> = shard_args(s, "@START_AT@", "@RESULTS@", &db)
        .iter()
        .map(|a| {
            if a.contains("@ENV:") {
                let mut q = double_quoted(a);
                for x in &secrets {
                    q = q.replace(&format!("@ENV:{}@", x.env), &format!("${{{}}}", x.env));
                }
                q
            } else if a.contains("@START_AT@") {
                a.replace("@START_AT@", "\"$start_at\"")
            } else if a.contains("@RESULTS@") {
                // The rest of such a value is a plain folder or file name.
                format!("\"{}\"", a.replace("@RESULTS@", "$results"))
            } else {
                sh_quote(a)
            }
        })
        .collect();
    let exe = sh_quote(&spec.exe);
    let srun = format!(
        "srun --ntasks={n} --cpus-per-task={cpus} {exe} \\\n    {args}",
        n = s.shards,
        cpus = spec.cpus_per_task,
        args = flag_lines(&args).join(" \\\n    "),
    );
    let after = match s.run {
        ScaleRun::Bench => format!(
            "{srun}\n\
             # Every task has ended; a shared filesystem may show another node's files late.\n\
             {wait}\
             {exe} {merge} \"$results\" --label {qlabel} --db \"$results/{DB_NAME}\"\n",
            merge = s.merge_from.command(),
            wait = wait_for_results("results", s.shards, VISIBLE_WAIT_S),
            qlabel = sh_quote(&s.label),
        ),
        // The tasks' own exit status (1: an SLO unmet, no recommendation) is the script's,
        // after saying where the outputs are.
        ScaleRun::Sweep | ScaleRun::Lab => {
            let outputs = match s.run {
                ScaleRun::Sweep => format!("sweep: $results/{SWEEP_DIR}"),
                _ => "lab report: $results/report.md".to_string(),
            };
            format!(
                "rc=0\n\
                 {srun} || rc=$?\n\
                 echo \"{outputs} (runs stored in $results/{DB_NAME})\"\n\
                 exit \"$rc\"\n"
            )
        }
    };
    Ok(format!(
        "#!/bin/bash\n\
         {header}\
         #   sbatch THIS_FILE\n\
         #SBATCH --job-name={name}\n\
         #SBATCH --ntasks={n}\n\
         #SBATCH --cpus-per-task={cpus}\n\
         {nodes}\
         #SBATCH --output={name}-%j.out\n\
         set -euo pipefail\n\
         results=\"${{SERVELAB_RESULTS:-$PWD/{name}-$SLURM_JOB_ID}}\"\n\
         mkdir -p \"$results\"\n\
         {preamble}\
         {start}\
         {after}",
        preamble = secrets_preamble(&secrets),
        n = s.shards,
        header = header(s, "$results"),
        name = s.name,
        cpus = spec.cpus_per_task,
    ))
}
