//! Scale a servelab run out over many processes or machines, on schedulers people already
//! run: each shard is `servelab bench` with the same arguments (the scheduler tells it which
//! shard it is, [`servelab_load::Shard::from_env`]), all shards share one start instant, write
//! their results to one place, and one `servelab runs merge` makes them one run.
//!
//! | module | what |
//! |---|---|
//! | [`shard_args`] | the arguments every shard runs with (pure) |
//! | [`k8s`] | a Kubernetes Indexed Job of N shards and the Job that merges them |
//! | [`slurm`] | an sbatch script: N tasks of one step, then the merge |
//! | [`local`] | N shard processes on this machine (rehearsal) |
#![warn(missing_docs)]
#![cfg_attr(not(test), warn(unused_crate_dependencies))]

pub mod k8s;
pub mod local;
pub mod slurm;

/// The result file name every shard is given; a shard writes it as
/// `run-shard-KK-of-NN.json` (and `.records.jsonl` beside it).
pub const RESULT_NAME: &str = "run.json";

/// Flags a scaled run sets on every shard itself; given in the bench arguments they would
/// conflict.
const RESERVED: &[&str] = &[
    "--shard",
    "--start-at",
    "--save-result",
    "--save-detailed",
    "--result-dir",
    "--result-filename",
    "--no-store",
    "--no-progress",
    "--disable-tqdm",
    "--db",
    "--label",
];

/// What cannot be scaled; the message names the input.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScaleError {
    /// A bench flag the scaled run sets itself.
    #[error("{0}: set by `servelab scale` on every shard; leave it out of the bench arguments")]
    Reserved(String),
    /// Fewer than two shards.
    #[error("--shards must be at least 2 (one process is `servelab bench`)")]
    NoShards,
    /// A name Kubernetes would refuse.
    #[error(
        "--name '{0}': must be 1 to 52 lower-case letters, digits or '-', starting with a \
         letter and ending with a letter or digit (it names Kubernetes objects)"
    )]
    Name(String),
    /// An empty label, or one with control characters.
    #[error("--label '{}': must be non-empty, without control characters", .0.escape_debug())]
    Label(String),
}

/// One scaled run: how many shards, what each runs, and what the merged run is called.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScaleSpec {
    /// The run's name: Job and folder names.
    pub name: String,
    /// How many shards.
    pub shards: u32,
    /// `servelab bench` arguments, the same on every shard.
    pub bench_args: Vec<String>,
    /// Label of the merged run in the store.
    pub label: String,
}

impl ScaleSpec {
    /// Check the name, the count and the bench arguments.
    pub fn check(&self) -> Result<(), ScaleError> {
        // One shard is an unsplit run: it writes no shard files for the merge to take.
        if self.shards < 2 {
            return Err(ScaleError::NoShards);
        }
        let n = &self.name;
        let ok = (1..=52).contains(&n.len())
            && n.bytes().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
            && n.starts_with(|c: char| c.is_ascii_lowercase())
            && !n.ends_with('-');
        if !ok {
            return Err(ScaleError::Name(n.clone()));
        }
        if self.label.is_empty() || self.label.chars().any(char::is_control) {
            return Err(ScaleError::Label(self.label.clone()));
        }
        for a in &self.bench_args {
            let flag = a.split('=').next().unwrap_or(a);
            if RESERVED.contains(&flag) {
                return Err(ScaleError::Reserved(flag.to_string()));
            }
        }
        Ok(())
    }
}

/// The arguments of one shard: `bench`, the user's bench arguments, then the shared start,
/// the result files in `results_dir`, and no store or progress bar (a shard is filed by the
/// merge). `start_at` is an instant (`--start-at`) or a shell expansion of one.
pub fn shard_args(bench_args: &[String], start_at: &str, results_dir: &str) -> Vec<String> {
    let mut args = vec!["bench".to_string()];
    args.extend(bench_args.iter().cloned());
    args.extend(
        [
            "--start-at",
            start_at,
            "--save-result",
            "--save-detailed",
            "--no-store",
            "--no-progress",
            "--result-dir",
            results_dir,
            "--result-filename",
            RESULT_NAME,
        ]
        .map(String::from),
    );
    args
}

/// POSIX shell lines that wait, at most `wait_s` seconds, until the folder in the shell
/// variable `dir_var` holds every one of the `shards` shards' result files, saying which
/// shards are still missing every 10 s; they exit with status 2 naming them when time is up.
///
/// Only result files count (`run-shard-K-of-N.json`, the index zero-padded), not the
/// `.sketch.json` and `.records.jsonl` beside them. A shard renames its result into place
/// after its records are written, so a result file present means the shard's files are whole.
pub fn wait_for_results(dir_var: &str, shards: u32, wait_s: u64) -> String {
    let stem = RESULT_NAME.strip_suffix(".json").unwrap_or(RESULT_NAME);
    format!(
        "n={shards}\n\
         deadline=$(( $(date +%s) + {wait_s} ))\n\
         while :; do\n  \
         names=$(ls \"${dir_var}\" 2>/dev/null || true)\n  \
         missing=\"\"\n  \
         k=0\n  \
         while [ \"$k\" -lt \"$n\" ]; do\n    \
         grep -qE \"^{stem}-shard-0*$k-of-$n\\.json\\$\" <<EOF || missing=\"$missing $k\"\n\
         $names\n\
         EOF\n    \
         k=$((k + 1))\n  \
         done\n  \
         [ -z \"$missing\" ] && break\n  \
         if [ \"$(date +%s)\" -ge \"$deadline\" ]; then\n    \
         echo \"no result in ${dir_var} after {wait_s} s from shards$missing (of $n): see their logs\" >&2\n    \
         exit 2\n  \
         fi\n  \
         echo \"waiting for shards$missing (of $n)\"\n  \
         sleep 10\n\
         done\n"
    )
}

/// `s` quoted for a POSIX shell: as it is when it is plainly safe, else in single quotes.
pub fn sh_quote(s: &str) -> String {
    let plain =
        !s.is_empty() && s.bytes().all(|c| c.is_ascii_alphanumeric() || b"-_./:=,@%+".contains(&c));
    if plain {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(name: &str, args: &[&str]) -> ScaleSpec {
        ScaleSpec {
            name: name.into(),
            shards: 4,
            bench_args: args.iter().map(|a| a.to_string()).collect(),
            label: "l".into(),
        }
    }

    #[test]
    fn checks_name_count_and_reserved_flags() {
        assert_eq!(spec("llama-70b-run", &["--request-rate", "50"]).check(), Ok(()));
        for bad in ["", "Run", "9run", "run-", "a_b", &"x".repeat(53)] {
            assert_eq!(spec(bad, &[]).check(), Err(ScaleError::Name(bad.into())), "{bad}");
        }
        assert_eq!(
            spec("r", &["--shard=1/2"]).check(),
            Err(ScaleError::Reserved("--shard".into()))
        );
        assert_eq!(spec("r", &["--db", "x"]).check(), Err(ScaleError::Reserved("--db".into())));
        assert_eq!(ScaleSpec { shards: 0, ..spec("r", &[]) }.check(), Err(ScaleError::NoShards));
        assert_eq!(ScaleSpec { shards: 1, ..spec("r", &[]) }.check(), Err(ScaleError::NoShards));
        // shard_args sets these on every shard; given twice, clap would refuse the repeat.
        for flag in ["--no-progress", "--disable-tqdm"] {
            assert_eq!(spec("r", &[flag]).check(), Err(ScaleError::Reserved(flag.into())));
        }
        let bad = ScaleSpec { label: "a\nb".into(), ..spec("r", &[]) };
        assert_eq!(
            bad.check().unwrap_err().to_string(),
            "--label 'a\\nb': must be non-empty, without control characters"
        );
    }

    #[test]
    fn a_shard_adds_the_shared_start_and_its_result_files() {
        let args = shard_args(&["--num-prompts".into(), "10".into()], "1795600000", "/r");
        assert_eq!(
            args.join(" "),
            "bench --num-prompts 10 --start-at 1795600000 --save-result --save-detailed \
             --no-store --no-progress --result-dir /r --result-filename run.json"
        );
    }

    #[test]
    fn quotes_for_the_shell_only_when_needed() {
        assert_eq!(sh_quote("--request-rate"), "--request-rate");
        assert_eq!(sh_quote("http://gpu-0:8000"), "http://gpu-0:8000");
        assert_eq!(sh_quote("a b"), "'a b'");
        assert_eq!(sh_quote("it's"), r"'it'\''s'");
        assert_eq!(sh_quote("$HOME"), "'$HOME'");
        assert_eq!(sh_quote(""), "''");
    }
}
