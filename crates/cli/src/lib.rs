//! The `servelab` command: parse ([`args`]), resolve into plans ([`resolve`]), call the
//! library stages, print, and say how to exit.
//!
//! `main` only calls [`main_with`]; tests call the same functions with arguments they build.

#![warn(missing_docs)]
#![cfg_attr(not(test), warn(unused_crate_dependencies))]

pub mod doctor;
pub mod exit;
mod scale;
mod store;

use std::path::PathBuf;

use servelab_bench::{interrupt_on_signals, BenchOutcome, Conductor};
use servelab_outputs::term;
use servelab_plan::RunError;
use tokio::sync::watch;

pub use exit::{ExitStatus, Failure};
pub use servelab_settings::{args, resolve};

use crate::args::{
    BenchArgs, CalibrateArgs, Cli, Command, LabCommand, LabRunArgs, PredictArgs, PredictCommand,
    SimCommand, SweepArgs,
};

/// Parse `args`, run the command, print results, and say how to exit.
pub fn main_with(args: impl IntoIterator<Item = std::ffi::OsString>) -> ExitStatus {
    let cli = match Cli::parse_args(args) {
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
            servelab_sim::serve(*args, term::note).await.map_err(Failure::runtime)?;
            Ok(ExitStatus::Success)
        }
        Command::Sim(SimCommand::Replay(a)) => {
            servelab_sim::replay::serve_replay(&a.fixture, &a.host, a.port, term::note)
                .await
                .map_err(Failure::runtime)?;
            Ok(ExitStatus::Success)
        }
        Command::Bench(a) => {
            // Checked before the run, not after it.
            let sections = match &a.percentile_metrics {
                Some(list) => servelab_outputs::LatencySection::parse_list(list)
                    .map_err(|e| Failure::usage(format!("--percentile-metrics: {e}")))?,
                None => servelab_outputs::LatencySection::ALL.to_vec(),
            };
            let out = bench(&a, interrupt_on_signals(servelab_bench::DRAIN)).await?;
            term::stdout(&match a.format {
                args::RunFormat::Text => {
                    servelab_outputs::render_text_with(&out.summary, &sections)
                }
                args::RunFormat::Sglang => {
                    let backend = a.backend_given.as_deref();
                    let s = &out.summary;
                    let block =
                        servelab_outputs::sglang_block_as(s, backend.unwrap_or(&s.info.backend));
                    // SGLang's block has no warnings section: they follow it.
                    block + &servelab_outputs::warning_lines(s)
                }
                f => servelab_outputs::render_run(&out.summary, &out.records, f.into()),
            });
            if !out.save_errors.is_empty() {
                // Printed above and stored: only the files are missing.
                return Err(Failure::runtime(format!(
                    "the run finished but not every file was written: {}",
                    out.save_errors.join("; ")
                )));
            }
            if out.stop == servelab_bench::StopReason::Interrupted {
                // As sweep and lab: the partial result is kept, but the run asked for did not
                // happen, and a script must not take it for a finished one.
                return Err(Failure::runtime(
                    "interrupted: the summary above is a partial result (it is stored and \
                     saved as such)",
                ));
            }
            Ok(ExitStatus::Success)
        }
        Command::Sweep(a) => sweep(&a, interrupt_on_signals(servelab_bench::DRAIN)).await,
        Command::Predict(a) => match &a.command {
            Some(PredictCommand::Calibrate(c)) => predict_calibrate(c),
            None => predict(&a).await,
        },
        Command::Lab(LabCommand::Run(a)) => {
            lab(&a, interrupt_on_signals("stopping the engine and the lab")).await
        }
        Command::Lab(LabCommand::Report { dir }) => {
            let outcome = servelab_lab::report::report_dir(&dir, &servelab_shown())
                .map_err(Failure::usage)?;
            print_lab_report(&dir);
            if outcome.is_none() {
                term::note(&format!("note: the experiment in {} is unfinished", dir.display()));
            }
            Ok(ExitStatus::Success)
        }
        Command::Runs(cmd) => store::runs(cmd),
        Command::Compare(a) => store::compare(*a).await,
        Command::Report(a) => store::report(*a).await,
        Command::Scale(cmd) => scale::scale(cmd).await,
        Command::Doctor(a) => doctor::doctor(&a).await,
    }
}

/// `servelab bench`: resolve the plan, run it with the measuring conductor.
pub async fn bench(
    a: &BenchArgs,
    interrupt: watch::Receiver<bool>,
) -> Result<BenchOutcome, Failure> {
    let plan = resolve::bench_plan(a, resolve::api_key()).map_err(Failure::usage)?;
    if a.zero_setup {
        let engine = match &a.sim_engine {
            Some(e) => e.display().to_string(),
            None => {
                format!("{} (Qwen3-8B on one H100, vLLM-like batching)", resolve::ZERO_SETUP_ENGINE)
            }
        };
        term::note(&format!(
            "Zero-setup run: {} prompts of {} tokens, at most {} at once, against the built-in \
             simulator serving the engine model of {engine}, sized so this machine can show \
             exact figures next to the simulator's own log. Any workload or load flag gives \
             vLLM's defaults instead (1000 prompts, all at once); --sim-engine picks another \
             deployment (or a file); --base-url measures a real server.",
            plan.workload.num_prompts,
            a.random_input_len,
            resolve::ZERO_SETUP_CONCURRENCY,
        ));
    }
    let mut c = Conductor::new(interrupt);
    if let Some(r) = resolve::recording(a.db.clone(), a.no_store).map_err(Failure::usage)? {
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
    let recording =
        resolve::recording(a.bench.db.clone(), a.bench.no_store).map_err(Failure::usage)?;
    if let (true, Some(start)) = (plan.base.shard.is_split(), plan.base.shard.start_at) {
        return sharded_sweep(plan, interrupt, start, (settle, drain), recording).await;
    }
    let mut c = Conductor::new(interrupt).with_settle(settle, drain);
    if let Some(r) = recording {
        c = c.with_recording(r);
    }
    let result = servelab_sweep::run_sweep(&plan, &mut c).await;
    c.shutdown().await;
    let result = result.map_err(Failure::runtime)?;
    // `--format sglang`: every case's block in SGLang's layout first, as the scripted suites
    // print them (blocks.txt keeps vLLM's).
    if a.bench.format == args::RunFormat::Sglang {
        let backend = a.backend_given.as_deref();
        term::stdout(&servelab_sweep::render::point_blocks(&result, Some(backend)));
    }
    sweep_outputs(&plan, result, "Sweep results")
}

/// A sweep as shard k of N (docs/scale.md, [`servelab_sweep::SweepPlan::sharded`]): shard 0
/// writes the sweep's outputs and stores the merged points; the shards' own parts are not
/// stored.
async fn sharded_sweep(
    mut plan: servelab_sweep::SweepPlan,
    interrupt: watch::Receiver<bool>,
    start: std::time::SystemTime,
    (settle, drain): (std::time::Duration, std::time::Duration),
    recording: Option<std::sync::Arc<dyn servelab_plan::Recording>>,
) -> Result<ExitStatus, Failure> {
    let (cancel, interrupt) = servelab_exchange::cancellable(interrupt);
    let c = Conductor::new(interrupt).with_settle(settle, drain);
    let read = servelab_store::read_shard_file;
    let mut r = plan.sharded(c, start, settle, read).with_recording(recording).with_cancel(cancel);
    let result = servelab_sweep::run_sweep(&plan, &mut r).await;
    r.into_inner().shutdown().await;
    let result = result.map_err(Failure::runtime)?;
    let shard = plan.base.shard.shard_or_whole();
    if shard.index == 0 {
        return sweep_outputs(&plan, result, "Sweep results");
    }
    term::stdout(&servelab_sweep::render::summary_markdown(&result, &plan.columns));
    term::note(&format!("shard {shard}: shard 0 writes the sweep's outputs"));
    if result.interrupted {
        return Err(Failure::runtime("interrupted: a sharded sweep runs again from its start"));
    }
    Ok(if result.slo_unmet() { ExitStatus::ThresholdFailed } else { ExitStatus::Success })
}

/// Write a finished sweep's files, print its table, and say how to exit.
fn sweep_outputs(
    plan: &servelab_sweep::SweepPlan,
    result: servelab_sweep::SweepResult,
    what: &str,
) -> Result<ExitStatus, Failure> {
    let dir = &plan.output_dir;
    servelab_sweep::run::write_outputs(dir, &result, &plan.columns).map_err(Failure::runtime)?;
    term::stdout(&servelab_sweep::render::summary_markdown(&result, &plan.columns));
    term::note(&format!("{what} in {}", dir.display()));
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

/// `servelab predict`: the sweep's plan, every point run in virtual time by the engine model,
/// the sweep's outputs, and each point stored as predicted.
pub async fn predict(a: &PredictArgs) -> Result<ExitStatus, Failure> {
    let mut plan = resolve::predict_plan(&a.sweep).map_err(Failure::usage)?;
    let engine = a.engine.as_deref().ok_or_else(|| Failure::usage("--engine FILE is required"))?;
    let mut p = servelab_predict::Predictor::from_file(engine)?;
    if let Some(r) = resolve::recording(a.sweep.bench.db.clone(), a.sweep.bench.no_store)
        .map_err(Failure::usage)?
    {
        p = p.with_recording(r);
    }
    // Provenance in every artefact: tags under summary.md's title and on every stored run,
    // the sentence first among the warnings, three columns on every CSV row.
    let prov = p.provenance();
    plan.base.record.tags.extend(prov.tags());
    let mut result = servelab_sweep::run_sweep(&plan, &mut p).await.map_err(Failure::runtime)?;
    result.warnings.insert(0, prov.sentence());
    // A knee read off a predicted concurrency curve, with how close such knees came on the
    // public tables (where they were checked over as many levels).
    let curve = |s: &servelab_sweep::ScenarioResult| {
        s.axis == servelab_load::Axis::Concurrency
            && s.points.len() >= servelab_engine::KneeAgreement::MIN_LEVELS
    };
    if result.scenarios.iter().any(curve) {
        result.warnings.insert(1, servelab_engine::KNEE_AGREEMENT.sentence());
    }
    // Each scenario's CSV with its own scenario's provenance (a scenario the fit did not
    // measure is outside its domain), judged by its requests' mean lengths as each point's
    // sentence is; by its label only when no request completed.
    let csvs: Vec<(std::path::PathBuf, servelab_engine::Provenance)> = result
        .scenarios
        .iter()
        .map(|s| {
            let path =
                plan.output_dir.join(format!("{}.csv", servelab_outputs::file_safe(&s.name)));
            let at = servelab_predict::scenario_of(s.points.iter().map(|p| &p.summary))
                .or_else(|| servelab_engine::IslOsl::of_label(&s.dataset));
            (path, servelab_engine::provenance_at(p.config(), at))
        })
        .collect();
    let status = sweep_outputs(&plan, result, "Predicted sweep results");
    for (path, prov) in csvs {
        if let Ok(text) = std::fs::read_to_string(&path) {
            std::fs::write(&path, servelab_predict::mark_csv(&text, &prov))
                .map_err(|e| Failure::runtime(format!("cannot write {}: {e}", path.display())))?;
        }
    }
    status
}

/// The measured runs a store label or id names, as sweep tables for a fit, each point with
/// its requests' lengths as sent. Predicted runs are refused: fitting the model to its own
/// output would measure nothing.
fn stored_tables(
    db: &args::DbArg,
    spec: &str,
) -> Result<Vec<servelab_engine::SweepTable>, Failure> {
    let store = store::open_existing(db)?;
    let ids = store
        .resolve(spec)
        .map_err(|e| Failure::usage(format!("{e}; '{spec}' is not a table file either")))?;
    let mut points = Vec::new();
    for id in ids {
        let run = store.run(id).map_err(Failure::runtime)?;
        if run.row.kind.is_predicted() {
            return Err(Failure::usage(format!(
                "run #{id} ('{spec}') is a prediction: calibrate fits measured runs"
            )));
        }
        use servelab_predict::calibrate as cal;
        // Each request's own lengths where known: a run with a range ratio or ShareGPT is
        // not its mean.
        let (dataset, cap, figures, drawn) = match store.summary_of(id).map_err(Failure::runtime)? {
            Some((summary, records)) => (
                summary.info.dataset.clone(),
                summary.info.load.max_concurrency,
                cal::figures_of(&summary),
                // A run stored without its requests' counts: its recorded draw, if any.
                match cal::drawn_lengths(&records) {
                    d if d.is_empty() => cal::redrawn_lengths(&summary),
                    d => d,
                },
            ),
            // An imported result file (vllm bench serve, SGLang, ...): its headline, and its
            // per-request lengths when it kept them. Points group by scenario: the label's, or
            // the file's mean lengths.
            None => {
                let Some(raw) = run.raw.as_ref() else { continue };
                let info = &run.config.info;
                let drawn = cal::imported_lengths(raw, &info.dataset);
                // A scenario label stands (a ranged one only with its draw); any other, the
                // file's mean lengths.
                let mean = cal::imported_scenario(raw);
                let named = servelab_engine::IslOsl::of_label(&info.dataset).is_some()
                    || servelab_workload::random_spec_of_label(&info.dataset).is_some();
                let dataset = if named {
                    cal::undrawn_label(&info.dataset, &drawn, mean)
                } else {
                    mean.map_or(info.dataset.clone(), |m| m.to_string())
                };
                let headline = &run.row.headline;
                (dataset, info.load.max_concurrency, cal::figures_by(|k| headline.get(k)), drawn)
            }
        };
        let Some(c) = cap else {
            return Err(Failure::usage(format!(
                "run #{id} ('{spec}') has no concurrency cap: calibrate fits concurrency sweeps"
            )));
        };
        let level = servelab_load::Level::Concurrency(usize::try_from(c).unwrap_or(usize::MAX));
        points.push(cal::MeasuredPoint {
            name: dataset.clone(),
            dataset,
            load: level,
            figures,
            drawn,
        });
    }
    if points.is_empty() {
        return Err(Failure::usage(format!("'{spec}': no finished run to fit")));
    }
    servelab_predict::calibrate::tables_from_points(points)
        .map_err(|e| Failure::usage(format!("'{spec}': {e}")))
}

/// `servelab predict calibrate`: fit, print the report, write the fitted engine file.
pub fn predict_calibrate(a: &CalibrateArgs) -> Result<ExitStatus, Failure> {
    let original = servelab_engine::read_engine_file(&a.engine)
        .map_err(|e| Failure::usage(format!("--engine: {e}")))?;
    let hub = servelab_workload::hub::model_config_json;
    let mut cfg = servelab_engine::load_engine_file_via(&a.engine, |_| {}, hub)
        .map_err(|e| Failure::usage(format!("--engine {}: {e}", a.engine.display())))?;
    if a.defaults {
        // The family's, not vLLM V1's: V0, SGLang and TensorRT-LLM start from their own CPU
        // times.
        cfg.calibration = cfg.engine.calibration_defaults();
    }
    let base = servelab_engine::FitOptions::for_engine(&cfg);
    let opts = resolve::fit_options(a.params.as_deref(), a.max_evals, base)
        .and_then(|o| resolve::fit_requests(o, a.requests_per_concurrency, a.min_requests))
        .map_err(Failure::usage)?;
    let mut tables = Vec::new();
    for t in &a.tables {
        if t.is_file() {
            tables.extend(servelab_predict::calibrate::read_tables(t).map_err(Failure::usage)?);
        } else {
            tables.extend(stored_tables(&a.db, &t.to_string_lossy())?);
        }
    }
    for label in &a.runs {
        tables.extend(stored_tables(&a.db, label)?);
    }
    let cells = tables.iter().map(|t| t.rows.len()).sum::<usize>();
    let drawn = tables.iter().map(|t| t.drawn.iter().filter(|d| !d.is_empty()).count()).sum();
    let own = match drawn {
        0 => String::new(),
        n if n == cells => ", each at its requests' own lengths".to_string(),
        n => format!(", {n} at their requests' own lengths"),
    };
    term::note(&format!(
        "Fitting {} parameters to {cells} measured cells{own} (at most {} evaluations)...",
        opts.params.len(),
        opts.max_evals
    ));
    let report = servelab_engine::calibrate(&cfg, &tables, &opts).map_err(Failure::runtime)?;
    term::stdout(&servelab_engine::calibrate::report_markdown(&report));
    // What the data could not pin down, and (asked) the error on scenarios left out.
    let mut fitted = cfg.clone();
    fitted.calibration = report.after;
    let id = servelab_engine::identifiability(&fitted, &tables, &opts).map_err(Failure::runtime)?;
    let held = if a.leave_one_out {
        servelab_engine::leave_one_scenario_out(&cfg, &tables, &opts).map_err(Failure::usage)?
    } else {
        Vec::new()
    };
    term::stdout(&format!("\n{}", servelab_engine::calibrate::diagnostics_markdown(&id, &held)));
    if let Some(note) = servelab_engine::calibrate::one_scenario_note(&tables) {
        term::stdout(&format!("\n{note}\n"));
    }
    let out = a.output.clone().unwrap_or_else(|| a.engine.with_extension("fitted.yaml"));
    let names: Vec<String> =
        a.tables.iter().map(|t| t.display().to_string()).chain(a.runs.iter().cloned()).collect();
    let note = format!(
        "{}, calibrated by `servelab predict calibrate` on {}",
        a.engine.display(),
        names.join(", ")
    );
    let on = report.fitted_on(&cfg, names.join(", "));
    let yaml = servelab_predict::calibrate::fitted_engine_yaml(&original, report.after, on, &note)
        .map_err(Failure::runtime)?;
    std::fs::write(&out, yaml)
        .map_err(|e| Failure::runtime(format!("cannot write {}: {e}", out.display())))?;
    term::note(&format!("Fitted engine file: {}", out.display()));
    Ok(ExitStatus::Success)
}

/// Run an experiment; the outcome or how far it got. Tests call this with their own
/// interrupt flag.
pub async fn run_experiment(
    a: &LabRunArgs,
    interrupt: watch::Receiver<bool>,
) -> Result<(servelab_lab::Finish, PathBuf), Failure> {
    let lab_failure = |e: servelab_lab::LabError| match e {
        servelab_lab::LabError::Invalid { .. } | servelab_lab::LabError::Read { .. } => {
            Failure::usage(e)
        }
        other => Failure::runtime(other),
    };
    let loaded =
        servelab_lab::load_experiment(&a.experiment, resolve::profile_plan).map_err(lab_failure)?;
    let shared = a.output_dir.clone().unwrap_or_else(|| servelab_lab::default_dir(&loaded.exp));
    let shard = resolve::lab_shard(a, &shared, &loaded).map_err(Failure::usage)?;
    // Shard 0 writes the lab's folder; the others keep theirs beside the exchanged files.
    let dir = shard.as_ref().map_or_else(|| shared.clone(), |s| s.lab_dir(&shared));
    let opts = servelab_lab::RunOptions {
        dir: dir.clone(),
        resume: a.resume,
        servelab: servelab_binary(),
        log_tail_lines: 40,
        plans: loaded.plans.clone(),
        shard: shard.clone(),
    };
    let (exp, text) = (&loaded.exp, &loaded.text);
    let recording = resolve::recording(a.db.clone(), a.no_store).map_err(Failure::usage)?;
    let finish = match shard {
        // Each profile run a sharded run, merged on every shard and stored by shard 0; the
        // parts are not stored (docs/scale.md).
        Some(s) => {
            if !s.launches() {
                term::note(&format!(
                    "lab shard {}: shard 0 launches the engines and writes the lab's report in \
                     {}",
                    s.shard,
                    shared.display()
                ));
            }
            let (cancel, stop) = servelab_exchange::cancellable(interrupt.clone());
            let c = Conductor::new(stop);
            let mut r = s
                .runner(c, servelab_store::read_shard_file)
                .with_recording(recording)
                .with_cancel(cancel);
            let finish = servelab_lab::run_in_dir(exp, text, &opts, &mut r, interrupt).await;
            r.into_inner().shutdown().await;
            finish
        }
        None => {
            let mut c = Conductor::new(interrupt.clone());
            if let Some(r) = recording {
                c = c.with_recording(r);
            }
            let finish = servelab_lab::run_in_dir(exp, text, &opts, &mut c, interrupt).await;
            c.shutdown().await;
            finish
        }
    };
    Ok((finish.map_err(lab_failure)?, dir))
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

/// This binary, for `{servelab}` in lab templates.
fn servelab_binary() -> String {
    std::env::current_exe().map_or("servelab".into(), |p| p.display().to_string())
}

/// This binary as a rebuilt report names it in a pasteable command: `servelab` when that
/// name on PATH is this very binary (a command with a build folder in it is of no use to
/// anyone else), else its full path.
fn servelab_shown() -> String {
    let me = std::env::current_exe().and_then(|p| p.canonicalize()).ok();
    let on_path = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path).map(|d| d.join("servelab")).find(|c| c.is_file())
    });
    match (me, on_path.and_then(|p| p.canonicalize().ok())) {
        (Some(a), Some(b)) if a == b => "servelab".into(),
        _ => servelab_binary(),
    }
}

/// Print the Markdown report and say where the files are.
fn print_lab_report(dir: &std::path::Path) {
    term::stdout(&std::fs::read_to_string(dir.join("report.md")).unwrap_or_default());
    term::note(&format!(
        "Lab report: {} (and report.html, chart.svg, baseline-vs-optimized.svg, lab.json; trials \
         and engine logs in {})",
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
