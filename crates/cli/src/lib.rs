//! The `servelab` command: parse ([`args`]), resolve into plans ([`resolve`]), call the
//! library stages, print, and say how to exit.
//!
//! `main` only calls [`main_with`]; tests call the same functions with arguments they build.

pub mod args;
pub mod exit;
pub mod resolve;
mod store;

use std::path::PathBuf;

use clap::Parser;
use servelab_bench::{BenchOutcome, Conductor};
use servelab_outputs::term;
use servelab_plan::RunError;
use tokio::sync::watch;

pub use exit::{ExitStatus, Failure};

use crate::args::{BenchArgs, Cli, Command, LabCommand, LabRunArgs, SimCommand, SweepArgs};

/// Parse `args`, run the command, print results, and say how to exit.
pub fn main_with(args: impl IntoIterator<Item = std::ffi::OsString>) -> ExitStatus {
    let cli = match Cli::try_parse_from(args) {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() { ExitStatus::Error } else { ExitStatus::Success };
            let _ = e.print();
            return code;
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            term::error(&format!("cannot start the async runtime: {e}"));
            return ExitStatus::Error;
        }
    };
    match runtime.block_on(dispatch(cli)) {
        Ok(status) => status,
        Err(f) => {
            term::error(&f.to_string());
            f.status()
        }
    }
}

async fn dispatch(cli: Cli) -> Result<ExitStatus, Failure> {
    match cli.command {
        Command::Sim(SimCommand::Serve(args)) => {
            servelab_sim::serve(*args).await.map_err(Failure::runtime)?;
            Ok(ExitStatus::Success)
        }
        Command::Bench(a) => {
            let out = bench(&a, interrupt_on_signals(DRAIN)).await?;
            term::stdout(&servelab_outputs::text::render(&out.summary));
            Ok(ExitStatus::Success)
        }
        Command::Sweep(a) => sweep(&a, interrupt_on_signals(DRAIN)).await,
        Command::Lab(LabCommand::Run(a)) => {
            lab(&a, interrupt_on_signals("stopping the engine and the lab")).await
        }
        Command::Lab(LabCommand::Report { dir }) => {
            let outcome = servelab_lab::report::report_dir(&dir).map_err(Failure::usage)?;
            print_lab_report(&dir);
            if outcome.is_none() {
                term::note(&format!("note: the experiment in {} is unfinished", dir.display()));
            }
            Ok(ExitStatus::Success)
        }
        Command::Runs(cmd) => store::runs(cmd),
        Command::Compare(a) => store::compare(*a).await,
        Command::Report(a) => store::report(*a).await,
    }
}

/// `servelab bench`: resolve the plan, run it with the measuring conductor.
pub async fn bench(
    a: &BenchArgs,
    interrupt: watch::Receiver<bool>,
) -> Result<BenchOutcome, Failure> {
    let plan = resolve::bench_plan(a, resolve::api_key()).map_err(Failure::usage)?;
    let mut c = Conductor::new(interrupt);
    if let Some(r) = resolve::recording(a.db.clone(), a.no_store) {
        c = c.with_recording(r);
    }
    let out = c.bench(&plan).await;
    c.shutdown().await;
    out.map_err(Failure::from)
}

/// `servelab sweep`: resolve, run every point with the conductor, write the outputs.
pub async fn sweep(a: &SweepArgs, interrupt: watch::Receiver<bool>) -> Result<ExitStatus, Failure> {
    let plan = resolve::sweep_plan(a).map_err(Failure::usage)?;
    let settle = servelab_plan::seconds("--settle-secs", a.settle_secs).map_err(Failure::usage)?;
    let drain = servelab_plan::seconds("--drain-timeout-secs", a.drain_timeout_secs)
        .map_err(Failure::usage)?;
    let mut c = Conductor::new(interrupt).with_settle(settle, drain);
    if let Some(r) = resolve::recording(a.bench.db.clone(), a.bench.no_store) {
        c = c.with_recording(r);
    }
    let result = servelab_sweep::run_sweep(&plan, &mut c).await;
    c.shutdown().await;
    let result = result.map_err(Failure::runtime)?;
    let dir = &plan.output_dir;
    servelab_sweep::run::write_outputs(dir, &result, &plan.columns).map_err(Failure::runtime)?;
    term::stdout(&servelab_sweep::render::summary_markdown(&result, &plan.columns));
    term::note(&format!("Sweep results in {}", dir.display()));
    if result.interrupted {
        return Err(Failure::runtime(format!(
            "interrupted: partial results are in {d}; continue with --resume {d}",
            d = dir.display()
        )));
    }
    if result.slo_unmet() {
        term::note("SLO not met at any measured load");
        return Ok(ExitStatus::ThresholdFailed);
    }
    Ok(ExitStatus::Success)
}

/// Run an experiment; the outcome or how far it got. Tests call this with their own
/// interrupt flag.
pub async fn run_experiment(
    a: &LabRunArgs,
    interrupt: watch::Receiver<bool>,
) -> Result<(servelab_lab::Finish, PathBuf), Failure> {
    let text = std::fs::read_to_string(&a.experiment).map_err(|e| {
        Failure::usage(format!("cannot read experiment file {}: {e}", a.experiment.display()))
    })?;
    let at = |m: String| Failure::usage(format!("{}: {m}", a.experiment.display()));
    let exp = servelab_lab::config::parse(&text).map_err(|e| at(e.to_string()))?;
    // Check every profile's options before any engine starts.
    let mut plans = Vec::new();
    for (i, p) in exp.profiles.iter().enumerate() {
        plans.push(
            resolve::profile_plan(p.args())
                .map_err(|m| at(format!("profiles[{i}] ({}): {m}", p.name)))?,
        );
    }
    let dir = a.output_dir.clone().unwrap_or_else(|| {
        PathBuf::from(format!("lab-{}", servelab_sweep::grid::file_safe(&exp.name)))
    });
    let servelab = std::env::current_exe()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| "servelab".to_string());
    let opts = servelab_lab::RunOptions {
        dir: dir.clone(),
        resume: a.resume,
        servelab,
        log_tail_lines: 40,
        plans: servelab_lab::profile_plans(&exp, plans),
    };
    let mut c = Conductor::new(interrupt.clone());
    if let Some(r) = resolve::recording(a.db.clone(), a.no_store) {
        c = c.with_recording(r);
    }
    let finish = servelab_lab::run_in_dir(&exp, &text, &opts, &mut c, interrupt).await;
    c.shutdown().await;
    let finish = finish.map_err(|e| match e {
        servelab_lab::LabError::Invalid { .. } => Failure::usage(e),
        other => Failure::runtime(other),
    })?;
    Ok((finish, dir))
}

async fn lab(a: &LabRunArgs, interrupt: watch::Receiver<bool>) -> Result<ExitStatus, Failure> {
    match run_experiment(a, interrupt).await? {
        (servelab_lab::Finish::Interrupted { finished }, dir) => Err(Failure::runtime(format!(
            "interrupted after {finished} finished trials; continue with: servelab lab run {} \
             --resume --output-dir {}",
            a.experiment.display(),
            dir.display()
        ))),
        (servelab_lab::Finish::Done { outcome, .. }, dir) => {
            print_lab_report(&dir);
            Ok(if outcome.recommended.is_some() {
                ExitStatus::Success
            } else {
                ExitStatus::ThresholdFailed
            })
        }
    }
}

/// Print the Markdown report and say where the files are.
fn print_lab_report(dir: &std::path::Path) {
    term::stdout(&std::fs::read_to_string(dir.join("report.md")).unwrap_or_default());
    term::note(&format!(
        "Lab report: {} (and report.html, chart.svg, lab.json; trials and engine logs in {})",
        dir.join("report.md").display(),
        dir.display()
    ));
}

impl From<RunError> for Failure {
    fn from(e: RunError) -> Failure {
        match e {
            RunError::Usage(m) => Failure::Usage(m),
            other => Failure::Runtime(other.to_string()),
        }
    }
}

/// What an interrupted bench or sweep does.
const DRAIN: &str = "no new requests; draining those in flight";

/// A flag that turns true on the first Ctrl-C or SIGTERM (so a job scheduler's stop leaves a
/// usable partial result, and a lab stops its engines); a second signal exits at once.
/// `what` says what stopping means, in the line printed.
pub fn interrupt_on_signals(what: &'static str) -> watch::Receiver<bool> {
    use tokio::signal::unix::{signal, SignalKind};
    let (tx, rx) = watch::channel(false);
    tokio::spawn(async move {
        let mut term_sig = signal(SignalKind::terminate()).ok();
        let mut next = async || {
            let t = async {
                match term_sig.as_mut() {
                    Some(t) => {
                        t.recv().await;
                    }
                    None => std::future::pending::<()>().await,
                }
            };
            tokio::select! {
                r = tokio::signal::ctrl_c() => r.is_ok().then_some("interrupted"),
                _ = t => Some("terminated"),
            }
        };
        if let Some(how) = next().await {
            term::note(&format!("\n{how}: {what} (interrupt again to quit now)"));
            let _ = tx.send(true);
            if next().await.is_some() {
                std::process::exit(ExitStatus::Error as i32);
            }
        }
        // Keep the sender alive so receivers never see the flag's channel close.
        std::future::pending::<()>().await
    });
    rx
}
