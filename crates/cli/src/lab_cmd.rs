//! `servelab lab`: wiring of the lab crate to the bench runner and the store.
//!
//! The experiment, strategies, engine processes and reports live in `servelab-lab`; this
//! module turns each profile into bench settings (with the bench's own flag parser, so a
//! profile takes any bench option) and runs it with [`crate::bench::run`].

use std::io::Write;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use servelab_lab::profile::ProfileSpec;
use servelab_lab::report::EXPERIMENT_COPY;
use servelab_lab::runner::{ProfileRunner, RunError, RunOptions};
use servelab_lab::{Experiment, Finish, TrialSpec};
use servelab_metrics::Summary;
use tokio::sync::watch;

use crate::cli::BenchArgs;
use crate::settings::{BenchSettings, TargetSpec};
use crate::{ExitStatus, Failure};

#[derive(Debug, Subcommand)]
pub enum LabCommand {
    /// Run an experiment file: launch each configuration, benchmark it, keep what helps.
    Run(Box<LabRunArgs>),
    /// Rebuild report.md, report.html and chart.svg of an experiment folder.
    Report {
        /// The --output-dir of a `servelab lab run`.
        dir: PathBuf,
    },
}

#[derive(Debug, Clone, Args)]
pub struct LabRunArgs {
    /// The experiment YAML (docs/lab.md).
    pub experiment: PathBuf,
    /// Continue the experiment in --output-dir: finished trials are not run again.
    #[arg(long)]
    pub resume: bool,
    /// Where trials, logs and the report go (default: lab-<experiment name>).
    #[arg(long, value_name = "DIR")]
    pub output_dir: Option<PathBuf>,
    /// Results store every profile run is recorded in (default as for `servelab bench`).
    #[arg(long, env = "SERVELAB_DB", value_name = "PATH")]
    pub db: Option<PathBuf>,
    /// Do not record the profile runs in the results store.
    #[arg(long)]
    pub no_store: bool,
}

/// The bench flags of a profile, parsed as `servelab bench` would.
#[derive(Debug, Parser)]
#[command(name = "profile")]
struct ProfileArgs {
    #[command(flatten)]
    bench: BenchArgs,
}

/// Bench settings for a profile (target and store filled in per trial).
pub fn profile_settings(p: &ProfileSpec, args: &LabRunArgs) -> Result<BenchSettings, String> {
    let argv = std::iter::once("profile".to_string()).chain(p.args());
    let parsed = ProfileArgs::try_parse_from(argv).map_err(|e| {
        // clap's first line says what is wrong; the usage text after it is not ours.
        let text = e.to_string();
        text.lines().next().unwrap_or("").trim_start_matches("error: ").to_string()
    })?;
    let mut bench = parsed.bench;
    bench.base_url = Some("http://127.0.0.1:1".to_string());
    bench.no_progress = true;
    bench.db = args.db.clone();
    bench.no_store = args.no_store;
    // The lab waited for readiness already; a bench that cannot reach the engine should
    // fail fast, not wait the bench's default minute.
    bench.ready_timeout = 10.0;
    BenchSettings::from_args(bench, std::env::var("OPENAI_API_KEY").ok().filter(|k| !k.is_empty()))
        .map_err(|e| e.to_string())
}

/// Runs each profile as a `servelab bench`, recorded in the store with the trial as tags.
struct BenchProfiles {
    experiment: String,
    settings: ProfileSettings,
    interrupt: watch::Receiver<bool>,
}

impl ProfileRunner for BenchProfiles {
    async fn run_profile(
        &mut self,
        trial: &TrialSpec,
        command: &str,
        profile: &ProfileSpec,
        repeat: u32,
        base_url: &str,
    ) -> Result<Summary, RunError> {
        if *self.interrupt.borrow() {
            return Err(RunError::Interrupted);
        }
        let mut s = self
            .settings
            .iter()
            .find(|(n, _)| *n == profile.name)
            .map(|(_, s)| s.clone())
            .ok_or_else(|| RunError::Failed(format!("no settings for profile {}", profile.name)))?;
        s.target = TargetSpec::Url(base_url.to_string());
        // Fresh prompts per run, the same per run number in every trial.
        s.seed = s.seed.wrapping_add(u64::from(repeat));
        let run = if repeat > 0 { format!("#{}", repeat + 1) } else { String::new() };
        s.store.label = Some(format!("{}/{}/{}{run}", self.experiment, trial.id, profile.name));
        s.store.tags.extend([
            ("lab.experiment".to_string(), self.experiment.clone()),
            ("lab.trial".to_string(), trial.id.clone()),
            ("lab.engine".to_string(), trial.engine.clone()),
            ("lab.options".to_string(), trial.options.join(",")),
            ("lab.profile".to_string(), profile.name.clone()),
            ("lab.repeat".to_string(), (repeat + 1).to_string()),
            ("engine".to_string(), trial.engine.clone()),
            ("engine_flags".to_string(), command.to_string()),
        ]);
        let out = crate::bench::run(&s, self.interrupt.clone())
            .await
            .map_err(|e| RunError::Failed(e.to_string()))?;
        Ok(out.summary)
    }

    fn note(&mut self, message: &str) {
        eprintln!("lab: {message}");
    }
}

/// Bench settings per profile name.
type ProfileSettings = Vec<(String, BenchSettings)>;

/// Load the experiment and check every profile's bench options before any engine starts.
fn prepare(args: &LabRunArgs) -> Result<(Experiment, String, ProfileSettings), Failure> {
    let text = std::fs::read_to_string(&args.experiment).map_err(|e| {
        Failure::usage(format!("cannot read experiment file {}: {e}", args.experiment.display()))
    })?;
    let exp = servelab_lab::config::parse(&text)
        .map_err(|e| Failure::usage(format!("{}: {e}", args.experiment.display())))?;
    let mut settings = Vec::new();
    for (i, p) in exp.profiles.iter().enumerate() {
        let mut s = profile_settings(p, args).map_err(|m| {
            Failure::usage(format!(
                "{}: profiles[{i}] ({}): {m}",
                args.experiment.display(),
                p.name
            ))
        })?;
        // The SLO's percentiles and p99 (reported per trial) must be in every summary.
        s.percentiles.push(99.0);
        s.percentiles
            .extend(exp.objective.slo.as_ref().map(|o| o.percentiles()).unwrap_or_default());
        s.percentiles.sort_by(f64::total_cmp);
        s.percentiles.dedup();
        settings.push((p.name.clone(), s));
    }
    Ok((exp, text, settings))
}

/// Run an experiment; the outcome or how far it got. Tests call this with their own
/// interrupt flag.
pub async fn run_experiment(
    args: &LabRunArgs,
    interrupt: watch::Receiver<bool>,
) -> Result<(Finish, PathBuf), Failure> {
    let (exp, text, settings) = prepare(args)?;
    let dir = args.output_dir.clone().unwrap_or_else(|| {
        PathBuf::from(format!("lab-{}", servelab_sweep::grid::file_safe(&exp.name)))
    });
    if args.resume && !dir.is_dir() {
        return Err(Failure::usage(format!(
            "--resume: {} does not exist (give the --output-dir of the earlier run)",
            dir.display()
        )));
    }
    std::fs::create_dir_all(&dir)
        .map_err(|e| Failure::runtime(format!("cannot create {}: {e}", dir.display())))?;
    let copy = dir.join(EXPERIMENT_COPY);
    if args.resume {
        if let Ok(old) = std::fs::read_to_string(&copy) {
            if old != text {
                eprintln!(
                    "warning: {} differs from the experiment this folder was started with; \
                     finished trials are reused by name",
                    args.experiment.display()
                );
            }
        }
    }
    let servelab = std::env::current_exe()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| "servelab".to_string());
    let opts = RunOptions { dir: dir.clone(), resume: args.resume, servelab, log_tail_lines: 40 };
    let mut runner =
        BenchProfiles { experiment: exp.name.clone(), settings, interrupt: interrupt.clone() };
    // The copy is written only once the folder is known to be ours (run_experiment refuses
    // a folder with finished trials unless resuming).
    let finish = async {
        let f = servelab_lab::run_experiment(&exp, &opts, &mut runner, interrupt).await;
        f.map_err(|e| match e {
            servelab_lab::LabError::Invalid { .. } => Failure::usage(e),
            other => Failure::runtime(other),
        })
    };
    let no_trials = servelab_lab::trial::load_all(&dir).map(|t| t.is_empty()).unwrap_or(false);
    if args.resume || no_trials {
        std::fs::write(&copy, &text)
            .map_err(|e| Failure::runtime(format!("cannot write {}: {e}", copy.display())))?;
    }
    Ok((finish.await?, dir))
}

/// The interrupt flag, also raised by SIGTERM: a lab stopped by `kill` or a job scheduler
/// must stop its engines too, not only one stopped by Ctrl-C.
fn with_sigterm(mut ctrl_c: watch::Receiver<bool>) -> watch::Receiver<bool> {
    use tokio::signal::unix::{signal, SignalKind};
    let (tx, rx) = watch::channel(*ctrl_c.borrow());
    let mut term = signal(SignalKind::terminate()).ok();
    tokio::spawn(async move {
        let term_recv = async {
            match term.as_mut() {
                Some(t) => {
                    t.recv().await;
                }
                None => std::future::pending::<()>().await,
            }
        };
        let ctrl_c_raised = async {
            while ctrl_c.changed().await.is_ok() {
                if *ctrl_c.borrow() {
                    return;
                }
            }
            // The Ctrl-C watcher is gone: only SIGTERM can raise the flag now.
            std::future::pending::<()>().await
        };
        tokio::select! {
            _ = term_recv => eprintln!("\nterminated: stopping the engine and the lab"),
            _ = ctrl_c_raised => {}
        }
        let _ = tx.send(true);
        // Keep the sender alive so receivers never see the flag's channel close.
        std::future::pending::<()>().await
    });
    rx
}

pub async fn run(cmd: LabCommand, interrupt: watch::Receiver<bool>) -> Result<ExitStatus, Failure> {
    match cmd {
        LabCommand::Run(args) => {
            let (finish, dir) = run_experiment(&args, with_sigterm(interrupt)).await?;
            match finish {
                Finish::Interrupted { finished } => Err(Failure::runtime(format!(
                    "interrupted after {finished} finished trials; continue with: servelab lab \
                     run {} --resume --output-dir {}",
                    args.experiment.display(),
                    dir.display()
                ))),
                Finish::Done { outcome, .. } => {
                    print_outcome(&dir);
                    Ok(if outcome.recommended.is_some() {
                        ExitStatus::Success
                    } else {
                        ExitStatus::ThresholdFailed
                    })
                }
            }
        }
        LabCommand::Report { dir } => {
            let outcome = servelab_lab::report::report_dir(&dir).map_err(Failure::usage)?;
            print_outcome(&dir);
            if outcome.is_none() {
                eprintln!("note: the experiment in {} is unfinished", dir.display());
            }
            Ok(ExitStatus::Success)
        }
    }
}

/// Print the Markdown report and say where the files are.
fn print_outcome(dir: &std::path::Path) {
    let text = std::fs::read_to_string(dir.join("report.md")).unwrap_or_default();
    let mut stdout = std::io::stdout().lock();
    // A closed pipe (`| head`) is not an error worth reporting.
    let _ = stdout.write_all(text.as_bytes());
    let _ = stdout.flush();
    eprintln!(
        "Lab report: {} (and report.html, chart.svg, lab.json; trials and engine logs in {})",
        dir.join("report.md").display(),
        dir.display()
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args() -> LabRunArgs {
        LabRunArgs {
            experiment: PathBuf::from("x.yaml"),
            resume: false,
            output_dir: None,
            db: Some(PathBuf::from("s.db")),
            no_store: true,
        }
    }

    #[test]
    fn builtin_profiles_become_bench_settings() {
        let p = servelab_lab::profile::builtin("throughput").unwrap();
        let s = profile_settings(&p, &args()).unwrap();
        assert_eq!(s.num_prompts, 1000);
        assert_eq!(s.dataset_label, "random(1024:128)");
        assert!(s.ignore_eos);
        assert_eq!(s.seed, 0);
        assert!(!s.progress);
        assert!(!s.store.enabled);
        assert_eq!(s.store.db, Some(PathBuf::from("s.db")));
        assert_eq!(s.ready_timeout, std::time::Duration::from_secs(10));
        let p = servelab_lab::profile::builtin("sharegpt").unwrap();
        let e = profile_settings(&p, &args()).unwrap_err();
        assert_eq!(e, "--dataset-path: --dataset-name sharegpt needs --dataset-path FILE");
    }
}
