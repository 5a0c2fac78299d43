//! Scale a servelab run out over many processes or machines, on schedulers people already
//! run: each shard is `servelab bench` (or `sweep`, or `lab run`) with the same arguments (the
//! scheduler tells it which shard it is, [`servelab_load::Shard::from_env`]), all shards share
//! one start instant and one results folder. A bench's shards are made one run by one
//! `servelab runs merge`; a sweep's or lab's merge every run themselves, and shard 0 writes
//! the outputs and stores the merged runs.
//!
//! | module | what |
//! |---|---|
//! | [`shard_args`] | the arguments every shard runs with (pure) |
//! | [`k8s`] | a Kubernetes Indexed Job of N shards (and, for a bench, the Job that merges them) |
//! | [`slurm`] | an sbatch script: N tasks of one step (then, for a bench, the merge) |
//! | [`local`] | N shard processes on this machine (rehearsal) |
#![warn(missing_docs)]
#![cfg_attr(not(test), warn(unused_crate_dependencies))]

pub mod k8s;
pub mod local;
pub mod slurm;
mod yaml;

/// The result file name every bench shard is given; a shard writes it as
/// `run-shard-KK-of-NN.json` (and `.records.jsonl` beside it).
pub const RESULT_NAME: &str = "run.json";

/// The results store in the results folder, where the merged runs go.
pub const DB_NAME: &str = "servelab.db";

/// Where a sweep's shard 0 writes the sweep (in the results folder).
pub const SWEEP_DIR: &str = "sweep";

/// What each shard runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ScaleRun {
    /// `servelab bench`: one run, merged by `servelab runs merge` after every shard ended.
    #[default]
    Bench,
    /// `servelab sweep`: every point a sharded run, merged by every shard.
    Sweep,
    /// `servelab lab run EXPERIMENT`: shard 0 launches the engines, every profile run sharded.
    Lab,
}

impl ScaleRun {
    /// The command's name, as the user types it.
    pub fn name(self) -> &'static str {
        match self {
            ScaleRun::Bench => "bench",
            ScaleRun::Sweep => "sweep",
            ScaleRun::Lab => "lab run",
        }
    }

    /// Flags the scaled run sets on every shard itself; given in the run's arguments they
    /// would conflict, or split what must be shared (the start, the folder, the store).
    fn reserved(self) -> &'static [&'static str] {
        match self {
            ScaleRun::Bench => &[
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
            ],
            ScaleRun::Sweep => &[
                "--shard",
                "--start-at",
                "--result-dir",
                "--output-dir",
                "--resume",
                "--no-store",
                "--no-progress",
                "--disable-tqdm",
                "--db",
                "--label",
            ],
            ScaleRun::Lab => {
                &["--shard", "--start-at", "--output-dir", "--resume", "--no-store", "--db"]
            }
        }
    }
}

/// What a bench's merge takes from its shards.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MergeFrom {
    /// Every shard's records (`--save-detailed`), merged exactly by `runs merge`.
    #[default]
    Records,
    /// Every shard's digest (a few kB to tens of kB), merged by `runs merge-digests`:
    /// percentiles within 0.5 %, for runs whose records are too many to move.
    Digests,
}

impl MergeFrom {
    /// The `servelab` subcommand that merges them.
    pub fn command(self) -> &'static str {
        match self {
            MergeFrom::Records => "runs merge",
            MergeFrom::Digests => "runs merge-digests",
        }
    }
}

/// What cannot be scaled; the message names the input.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScaleError {
    /// A flag the scaled run sets itself.
    #[error("{0}: set by `servelab scale` on every shard; leave it out of the {1} arguments")]
    Reserved(String, &'static str),
    /// A lab without its experiment file.
    #[error("a scaled lab needs its experiment file first after --, e.g. `-- experiment.yaml`")]
    NoExperiment,
    /// A lab on Kubernetes: its engines would run in shard 0's pod.
    #[error(
        "a lab cannot be rendered as a Kubernetes Indexed Job: shard 0 launches each trial's \
         engine in its own pod, and every pod of the Job has the same template (every shard \
         would hold the GPUs). Run the lab's shards with `scale slurm` or `scale local`, or \
         start them by hand with `lab run --shard K/N` (docs/scale.md)"
    )]
    LabOnKubernetes,
    /// Fewer than two shards.
    #[error("--shards must be at least 2 (one shard is the run unsplit: run the command itself)")]
    NoShards,
    /// A name Kubernetes would refuse.
    #[error(
        "--name '{0}': must be 1 to 52 lower-case letters, digits or '-', starting with a \
         letter and ending with a letter or digit (it names Kubernetes objects)"
    )]
    Name(String),
    /// Digests asked of a sweep or lab, whose shards merge their points themselves.
    #[error(
        "--merge-from digests is for a bench: a sweep's or lab's shards merge every point from \
         records themselves"
    )]
    DigestsNotBench,
    /// A `--base-url` the shards could not use (shown without its credentials).
    #[error("--base-url '{0}': {1}")]
    BaseUrl(String, String),
    /// An empty label, or one with control characters.
    #[error("--label '{}': must be non-empty, without control characters", .0.escape_debug())]
    Label(String),
}

/// A credential in the run's arguments, kept out of the rendered files: the shards read it
/// from the environment variable `env` (on Kubernetes filled from the Secret's key `key`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Secret {
    /// The environment variable the shards read it from, e.g. `SERVELAB_URL_USERINFO`.
    pub env: String,
    /// The key in the Kubernetes Secret, e.g. `url-userinfo`.
    pub key: String,
    /// What it is, in words: `the user and password in --base-url`.
    pub what: String,
}

/// Header names whose values are credentials (compared in lower case; a name containing one
/// of these words counts too).
const SECRET_HEADER_WORDS: [&str; 7] =
    ["authorization", "cookie", "key", "token", "secret", "password", "auth"];

/// The run's arguments with every credential replaced by `placeholder(env)`, and the
/// credentials' descriptions: the user and password of `--base-url` (the host stays
/// visible), and the value of a `--header` whose name says it is a credential
/// (`Authorization`, `X-API-Key`, `Cookie`, ...; the name stays visible).
pub fn without_secrets(
    args: &[String],
    placeholder: impl Fn(&str) -> String,
) -> (Vec<String>, Vec<Secret>) {
    let mut out = Vec::with_capacity(args.len());
    let mut secrets: Vec<Secret> = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        let (flag, inline) = match a.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v)),
            _ => (a.as_str(), None),
        };
        let value = match inline {
            Some(v) => Some(v),
            None if flag == "--base-url" || flag == "--header" => {
                args.get(i + 1).map(String::as_str)
            }
            None => None,
        };
        let redacted = match (flag, value) {
            ("--base-url", Some(v)) => url_userinfo(v).map(|(start, end)| {
                let env = "SERVELAB_URL_USERINFO".to_string();
                let r = format!("{}{}{}", &v[..start], placeholder(&env), &v[end..]);
                secrets.push(Secret {
                    env,
                    key: "url-userinfo".into(),
                    what: "the user and password in --base-url".into(),
                });
                r
            }),
            ("--header", Some(v)) => v.split_once(':').and_then(|(name, _)| {
                let lower = name.trim().to_ascii_lowercase();
                SECRET_HEADER_WORDS.iter().any(|w| lower.contains(w)).then(|| {
                    let n = secrets.iter().filter(|s| s.key.starts_with("header-")).count() + 1;
                    let env = format!("SERVELAB_HEADER_{n}");
                    let r = format!("{}: {}", name.trim(), placeholder(&env));
                    // Named in shell comments and messages: letters, digits and '-' only.
                    let shown: String = name
                        .trim()
                        .chars()
                        .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
                        .collect();
                    secrets.push(Secret {
                        env,
                        key: format!("header-{n}"),
                        what: format!("the value of the {shown} header"),
                    });
                    r
                })
            }),
            _ => None,
        };
        match (redacted, inline) {
            (Some(r), Some(_)) => out.push(format!("{flag}={r}")),
            (Some(r), None) => {
                out.push(a.clone());
                out.push(r);
                i += 1;
            }
            (None, _) => out.push(a.clone()),
        }
        i += 1;
    }
    (out, secrets)
}

/// The byte range of the `user:password` in `http://user:password@host...`, if any.
fn url_userinfo(url: &str) -> Option<(usize, usize)> {
    let start = url.find("://")? + 3;
    let authority_end = url[start..].find(['/', '?', '#']).map_or(url.len(), |i| start + i);
    let at = url[start..authority_end].rfind('@')? + start;
    Some((start, at))
}

/// `--base-url` as the shards will need it: `http://` or `https://`, a host, a numeric port
/// if any. The message leaves out any user and password.
fn check_base_url(url: &str) -> Result<(), ScaleError> {
    let shown = match url_userinfo(url) {
        Some((s, e)) => format!("{}***{}", &url[..s], &url[e..]),
        None => url.to_string(),
    };
    let bad = |why: &str| Err(ScaleError::BaseUrl(shown.clone(), why.to_string()));
    let Some(rest) = url.strip_prefix("http://").or_else(|| url.strip_prefix("https://")) else {
        return bad("must start with http:// or https://");
    };
    if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return bad("must not hold spaces or control characters");
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host_port = authority.rsplit('@').next().unwrap_or("");
    let (host, port) = match host_port.rsplit_once(':') {
        // An IPv6 address in brackets holds colons of its own.
        Some((h, p)) if !p.contains(']') => (h, Some(p)),
        _ => (host_port, None),
    };
    if host.is_empty() {
        return bad("names no host");
    }
    if let Some(p) = port {
        if p.parse::<u16>().map_or(true, |p| p == 0) {
            return bad("its port must be a number from 1 to 65535");
        }
    }
    Ok(())
}

/// One scaled run: how many shards, what each runs, and what the merged run is called.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScaleSpec {
    /// The run's name: Job and folder names.
    pub name: String,
    /// How many shards.
    pub shards: u32,
    /// What each shard runs.
    pub run: ScaleRun,
    /// The command's arguments, the same on every shard: bench or sweep flags, or a lab's
    /// experiment file and then `lab run` flags.
    pub args: Vec<String>,
    /// Label of the merged run (a sweep's: of every merged point) in the store; a lab's runs
    /// are labelled by the lab.
    pub label: String,
    /// What a bench's merge takes from the shards.
    pub merge_from: MergeFrom,
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
        for a in &self.args {
            let flag = a.split('=').next().unwrap_or(a);
            if self.run.reserved().contains(&flag) {
                return Err(ScaleError::Reserved(flag.to_string(), self.run.name()));
            }
        }
        for (i, a) in self.args.iter().enumerate() {
            let url = match a.strip_prefix("--base-url=") {
                Some(v) => Some(v),
                None if a == "--base-url" => self.args.get(i + 1).map(String::as_str),
                None => None,
            };
            if let Some(u) = url {
                check_base_url(u)?;
            }
        }
        if self.merge_from == MergeFrom::Digests && self.run != ScaleRun::Bench {
            return Err(ScaleError::DigestsNotBench);
        }
        if self.run == ScaleRun::Lab && self.args.first().is_none_or(|a| a.starts_with('-')) {
            return Err(ScaleError::NoExperiment);
        }
        Ok(())
    }
}

/// The arguments of one shard: the command, the run's arguments, then the shared start and
/// the shared folder `dir`. A bench shard writes its result files there, with no store or
/// progress bar (a shard is filed by the merge). A sweep's shards exchange their parts in
/// `dir/shards`, shard 0 writes the sweep to `dir/sweep` and stores its merged points in
/// `db`; a lab's shards share `dir` as the lab's folder, and shard 0 stores in `db`.
/// `start_at`, `dir` and `db` are values or shell expansions of them.
pub fn shard_args(spec: &ScaleSpec, start_at: &str, dir: &str, db: &str) -> Vec<String> {
    let mut args: Vec<String> = spec.run.name().split(' ').map(String::from).collect();
    args.extend(spec.args.iter().cloned());
    let tail: Vec<String> = match spec.run {
        // Merged from digests, a shard ships no records: they are what is too big to move.
        ScaleRun::Bench => ["--start-at", start_at, "--save-result"]
            .into_iter()
            .chain((spec.merge_from == MergeFrom::Records).then_some("--save-detailed"))
            .chain(["--no-store", "--no-progress", "--result-dir", dir])
            .chain(["--result-filename", RESULT_NAME])
            .map(String::from)
            .collect(),
        ScaleRun::Sweep => vec![
            "--start-at".into(),
            start_at.into(),
            "--no-progress".into(),
            "--result-dir".into(),
            format!("{dir}/shards"),
            "--output-dir".into(),
            format!("{dir}/{SWEEP_DIR}"),
            "--db".into(),
            db.into(),
            "--label".into(),
            spec.label.clone(),
        ],
        ScaleRun::Lab => {
            ["--start-at", start_at, "--output-dir", dir, "--db", db].map(String::from).to_vec()
        }
    };
    args.extend(tail);
    args
}

/// The first lines of a rendered file: what the shards make, and where it goes (`dir`).
fn header(spec: &ScaleSpec, dir: &str) -> String {
    let n = spec.shards;
    match spec.run {
        ScaleRun::Bench => {
            format!(
                "# servelab: {n} shards of one run, merged as '{}' (docs/scale.md).\n",
                spec.label
            )
        }
        ScaleRun::Sweep => format!(
            "# servelab: {n} shards of a sweep (docs/scale.md): every point is merged on every\n\
             # shard; shard 0 writes the sweep to {dir}/{SWEEP_DIR} and stores its points,\n\
             # labelled '{}', in {dir}/{DB_NAME}.\n",
            spec.label
        ),
        ScaleRun::Lab => format!(
            "# servelab: {n} shards of a lab (docs/scale.md): shard 0 launches the engines,\n\
             # writes the lab's report to {dir} and stores its runs in {dir}/{DB_NAME}.\n"
        ),
    }
}

/// POSIX shell lines that wait, at most `wait_s` seconds, until the folder in the shell
/// variable `dir_var` holds every one of the `shards` shards' result files, saying which
/// shards are still missing every 10 s; they exit with status 2 naming them when time is up.
///
/// Only result files count (`run-shard-K-of-N.json`, the index zero-padded), not the
/// `.digest.json` and `.records.jsonl` beside them. A shard renames its result into place
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
            run: ScaleRun::Bench,
            args: args.iter().map(|a| a.to_string()).collect(),
            label: "l".into(),
            merge_from: Default::default(),
        }
    }

    #[test]
    fn checks_name_count_and_reserved_flags() {
        assert_eq!(spec("llama-70b-run", &["--request-rate", "50"]).check(), Ok(()));
        for bad in ["", "Run", "9run", "run-", "a_b", &"x".repeat(53)] {
            assert_eq!(spec(bad, &[]).check(), Err(ScaleError::Name(bad.into())), "{bad}");
        }
        let reserved = |f: &str, run: &'static str| Err(ScaleError::Reserved(f.into(), run));
        assert_eq!(spec("r", &["--shard=1/2"]).check(), reserved("--shard", "bench"));
        assert_eq!(spec("r", &["--db", "x"]).check(), reserved("--db", "bench"));
        assert_eq!(ScaleSpec { shards: 0, ..spec("r", &[]) }.check(), Err(ScaleError::NoShards));
        assert_eq!(ScaleSpec { shards: 1, ..spec("r", &[]) }.check(), Err(ScaleError::NoShards));
        // shard_args sets these on every shard; given twice, clap would refuse the repeat.
        for flag in ["--no-progress", "--disable-tqdm"] {
            assert_eq!(spec("r", &[flag]).check(), reserved(flag, "bench"));
        }
        // Each command its own: a sweep's shards share their folders and store, a lab's too.
        let sweep = |args: &[&str]| ScaleSpec { run: ScaleRun::Sweep, ..spec("r", args) };
        assert_eq!(sweep(&["--concurrency", "8,16"]).check(), Ok(()));
        assert_eq!(sweep(&["--output-dir", "o"]).check(), reserved("--output-dir", "sweep"));
        assert_eq!(sweep(&["--resume=o"]).check(), reserved("--resume", "sweep"));
        let lab = |args: &[&str]| ScaleSpec { run: ScaleRun::Lab, ..spec("r", args) };
        assert_eq!(lab(&["exp.yaml"]).check(), Ok(()));
        assert_eq!(lab(&["exp.yaml", "--resume"]).check(), reserved("--resume", "lab run"));
        assert_eq!(lab(&[]).check(), Err(ScaleError::NoExperiment));
        assert_eq!(lab(&["--no-store"]).check(), reserved("--no-store", "lab run"));
        assert_eq!(lab(&["--db=x", "e.yaml"]).check(), reserved("--db", "lab run"));
        let digests = |run| ScaleSpec { run, merge_from: MergeFrom::Digests, ..spec("r", &[]) };
        assert_eq!(digests(ScaleRun::Bench).check(), Ok(()));
        assert_eq!(digests(ScaleRun::Sweep).check(), Err(ScaleError::DigestsNotBench));
        let bad = ScaleSpec { label: "a\nb".into(), ..spec("r", &[]) };
        assert_eq!(
            bad.check().unwrap_err().to_string(),
            "--label 'a\\nb': must be non-empty, without control characters"
        );
    }

    #[test]
    fn a_shard_adds_the_shared_start_and_its_result_files() {
        let bench = spec("r", &["--num-prompts", "10"]);
        let args = shard_args(&bench, "1795600000", "/r", "/r/servelab.db");
        assert_eq!(
            args.join(" "),
            "bench --num-prompts 10 --start-at 1795600000 --save-result --save-detailed \
             --no-store --no-progress --result-dir /r --result-filename run.json"
        );
        // Merged from digests, a shard keeps its records to itself.
        let light = ScaleSpec { merge_from: MergeFrom::Digests, ..bench };
        assert_eq!(
            shard_args(&light, "1795600000", "/r", "/r/servelab.db").join(" "),
            "bench --num-prompts 10 --start-at 1795600000 --save-result --no-store \
             --no-progress --result-dir /r --result-filename run.json"
        );
        assert_eq!(MergeFrom::Digests.command(), "runs merge-digests");
        let sweep = ScaleSpec { run: ScaleRun::Sweep, ..spec("r", &["--concurrency", "8"]) };
        let args = shard_args(&sweep, "1795600000", "/r", "/r/servelab.db");
        assert_eq!(
            args.join(" "),
            "sweep --concurrency 8 --start-at 1795600000 --no-progress --result-dir /r/shards \
             --output-dir /r/sweep --db /r/servelab.db --label l"
        );
        let lab = ScaleSpec { run: ScaleRun::Lab, ..spec("r", &["exp.yaml"]) };
        let args = shard_args(&lab, "1795600000", "/r", "/db");
        assert_eq!(
            args.join(" "),
            "lab run exp.yaml --start-at 1795600000 --output-dir /r --db /db"
        );
    }

    #[test]
    fn credentials_are_replaced_and_described() {
        let args: Vec<String> = [
            "--base-url",
            "http://alice:PW@h:1/v1",
            "--header",
            "Authorization: Bearer X",
            "--header=X-Api-Key: k",
            "--header",
            "X-Priority: 1",
            "--model",
            "m",
        ]
        .map(String::from)
        .to_vec();
        let (out, secrets) = without_secrets(&args, |env| format!("$({env})"));
        assert_eq!(
            out,
            [
                "--base-url",
                "http://$(SERVELAB_URL_USERINFO)@h:1/v1",
                "--header",
                "Authorization: $(SERVELAB_HEADER_1)",
                "--header=X-Api-Key: $(SERVELAB_HEADER_2)",
                "--header",
                "X-Priority: 1",
                "--model",
                "m"
            ]
        );
        let keys: Vec<(&str, &str)> =
            secrets.iter().map(|s| (s.env.as_str(), s.key.as_str())).collect();
        assert_eq!(
            keys,
            [
                ("SERVELAB_URL_USERINFO", "url-userinfo"),
                ("SERVELAB_HEADER_1", "header-1"),
                ("SERVELAB_HEADER_2", "header-2")
            ]
        );
        assert_eq!(secrets[1].what, "the value of the Authorization header");
        let plain: Vec<String> = ["--base-url", "http://h:1"].map(String::from).to_vec();
        assert_eq!(without_secrets(&plain, |e| e.to_string()), (plain.clone(), vec![]));
        // An @ in the path is not a user.
        assert_eq!(url_userinfo("http://h:1/a@b"), None);
        assert_eq!(url_userinfo("https://u@h"), Some((8, 9)));
    }

    #[test]
    fn base_urls_are_checked_without_showing_credentials() {
        let with = |url: &str| spec("r", &["--base-url", url]).check();
        assert_eq!(with("http://gpu-0:8000"), Ok(()));
        assert_eq!(with("https://[::1]:443/v1"), Ok(()));
        assert_eq!(spec("r", &["--base-url=http://h"]).check(), Ok(()));
        let e = |url: &str| with(url).unwrap_err().to_string();
        assert_eq!(e("gpu-0:8000"), "--base-url 'gpu-0:8000': must start with http:// or https://");
        assert_eq!(
            e("http://alice:PW@h:99999"),
            "--base-url 'http://***@h:99999': its port must be a number from 1 to 65535"
        );
        assert_eq!(e("http://:80"), "--base-url 'http://:80': names no host");
        assert_eq!(
            e("http://h :80"),
            "--base-url 'http://h :80': must not hold spaces or control characters"
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
