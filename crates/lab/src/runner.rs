//! The experiment driver: ask the strategy for the next trial, launch its engine, wait for
//! it, run every profile through a [`ProfileRunner`] (the CLI's is `servelab bench`, which
//! scrapes the engine's `/metrics` through each profile), stop the engine, save the trial;
//! repeat until the strategy is done, then write the report.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use servelab_client::http::{self, Target};
use servelab_metrics::Summary;
use tokio::sync::watch;

use crate::config::Experiment;
use crate::error::{invalid, LabError};
use crate::process::{describe, free_port, render, Engine};
use crate::profile::ProfileSpec;
use crate::strategy::{command_template, next, Next, Outcome};
use crate::trial::{self, ProfileResult, TrialResult, TrialSpec, TrialStatus};

/// Why a profile run did not produce a summary.
#[derive(Debug, Clone, PartialEq)]
pub enum RunError {
    /// Ctrl-C: stop the experiment (the trial is not recorded, so `--resume` reruns it).
    Interrupted,
    /// The bench could not run (bad options, unreachable target): the trial fails.
    Failed(String),
}

/// What a trial's profile runs go through.
pub trait ProfileRunner {
    /// Benchmark `base_url` with `profile` for `trial` (launched as `command`). `repeat`
    /// counts the runs of this profile in this trial from 0; each run should send prompts of
    /// its own (a prefix cache must not make the second run faster), the same ones for the
    /// same `repeat` in every trial.
    fn run_profile(
        &mut self,
        trial: &TrialSpec,
        command: &str,
        profile: &ProfileSpec,
        repeat: u32,
        base_url: &str,
    ) -> impl Future<Output = Result<Summary, RunError>>;

    /// A progress message for the user.
    fn note(&mut self, message: &str);
}

/// Where and how an experiment runs.
#[derive(Debug, Clone)]
pub struct RunOptions {
    pub dir: PathBuf,
    /// Skip trials already finished in `dir` (otherwise `dir` must have none).
    pub resume: bool,
    /// What `{servelab}` stands for in templates.
    pub servelab: String,
    /// Lines of the engine log kept with a failed trial.
    pub log_tail_lines: usize,
}

/// How an experiment run ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Finish {
    Done {
        outcome: Outcome,
        trials: Vec<TrialResult>,
    },
    /// Interrupted: the finished trials are saved; `--resume` continues.
    Interrupted {
        finished: usize,
    },
}

/// Run the experiment to the end (or to an interrupt), saving each trial as it finishes and
/// the report at the end.
pub async fn run_experiment<R: ProfileRunner>(
    exp: &Experiment,
    opts: &RunOptions,
    runner: &mut R,
    interrupt: watch::Receiver<bool>,
) -> Result<Finish, LabError> {
    std::fs::create_dir_all(&opts.dir)
        .map_err(|e| LabError::Write { path: opts.dir.clone(), message: e.to_string() })?;
    let mut done = trial::load_all(&opts.dir)?;
    if !opts.resume && !done.is_empty() {
        return Err(invalid(
            "--output-dir",
            format!(
                "{} already holds {} finished trials: pass --resume to continue that \
                 experiment, or choose another --output-dir",
                opts.dir.display(),
                done.len()
            ),
        ));
    }
    if !done.is_empty() {
        runner.note(&format!("resuming: {} trials already finished", done.len()));
    }
    loop {
        if *interrupt.borrow() {
            return Ok(Finish::Interrupted { finished: done.len() });
        }
        match next(exp, &done) {
            Next::Done(outcome) => {
                crate::report::write_all(&opts.dir, exp, &done, Some(&outcome))?;
                return Ok(Finish::Done { outcome, trials: done });
            }
            Next::Run(spec) => {
                runner.note(&format!("trial {}: starting", spec.id));
                let all = 0..exp.acceptance.repeats.max(1);
                let Some(t) = run_trial(exp, &spec, all, opts, runner, interrupt.clone()).await?
                else {
                    return Ok(Finish::Interrupted { finished: done.len() });
                };
                finished(runner, &t);
                trial::save(&opts.dir, &t)?;
                done.push(t);
            }
            Next::RunPair { reference, candidate } => {
                runner.note(&format!(
                    "trial {} and its reference {}: launched in turn",
                    candidate.id, reference.id
                ));
                let Some((r, c)) =
                    run_pair(exp, &reference, &candidate, opts, runner, &interrupt).await?
                else {
                    return Ok(Finish::Interrupted { finished: done.len() });
                };
                for t in [r, c] {
                    finished(runner, &t);
                    trial::save(&opts.dir, &t)?;
                    done.push(t);
                }
            }
        }
    }
}

fn finished<R: ProfileRunner>(runner: &mut R, t: &TrialResult) {
    match t.failure() {
        Some(r) => runner.note(&format!("trial {}: failed: {r}", t.spec.id)),
        None => runner.note(&format!("trial {}: finished", t.spec.id)),
    }
}

/// The reference and the candidate launched in turn, one round of profiles per launch, in
/// the order A B B A A B ...: a linear drift of the machine then weighs on both alike. A
/// configuration that fails a launch is not launched again. `Ok(None)`: interrupted (nothing
/// saved; the pair runs again on resume).
async fn run_pair<R: ProfileRunner>(
    exp: &Experiment,
    reference: &TrialSpec,
    candidate: &TrialSpec,
    opts: &RunOptions,
    runner: &mut R,
    interrupt: &watch::Receiver<bool>,
) -> Result<Option<(TrialResult, TrialResult)>, LabError> {
    let mut acc: [Option<TrialResult>; 2] = [None, None];
    for round in 0..exp.acceptance.repeats.max(1) {
        let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
        for which in order {
            let spec = [reference, candidate][which];
            if acc[which].as_ref().is_some_and(|t| t.failure().is_some()) {
                continue;
            }
            let launch = run_trial(exp, spec, round..round + 1, opts, runner, interrupt.clone());
            let Some(t) = launch.await? else { return Ok(None) };
            acc[which] = Some(match acc[which].take() {
                None => t,
                Some(mut so_far) => {
                    if t.failure().is_some() {
                        so_far.status = t.status;
                    }
                    so_far.profiles.extend(t.profiles);
                    so_far
                }
            });
        }
    }
    let [Some(r), Some(c)] = acc else {
        return Err(invalid("acceptance.repeats", "an interleaved step ran no launch"));
    };
    Ok(Some((r, c)))
}

/// Why the engine never became ready.
#[derive(Debug, Clone, PartialEq)]
enum NotReady {
    Exited(String),
    Timeout(String),
    Interrupted,
}

/// `http://host:port/path` → (`http://host:port`, `/path`).
pub fn split_url(url: &str) -> (String, String) {
    let after_scheme = url.find("://").map_or(0, |i| i + 3);
    match url[after_scheme..].find('/') {
        Some(i) => (url[..after_scheme + i].to_string(), url[after_scheme + i..].to_string()),
        None => (url.to_string(), "/".to_string()),
    }
}

/// Poll `url` until it answers 200, the engine exits, the timeout passes, or an interrupt.
async fn wait_ready(
    engine: &mut Engine,
    url: &str,
    timeout: Duration,
    interrupt: &mut watch::Receiver<bool>,
) -> Result<(), NotReady> {
    let (base, path) = split_url(url);
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(st) = engine.exited() {
            return Err(NotReady::Exited(describe(st)));
        }
        if *interrupt.borrow() {
            return Err(NotReady::Interrupted);
        }
        let last = match Target::resolve(&base, "/").await {
            Err(e) => e.to_string(),
            Ok(t) => match tokio::time::timeout(Duration::from_secs(2), http::get(&t, &path)).await
            {
                Ok(Ok((200, _))) => return Ok(()),
                Ok(Ok((s, _))) => format!("GET {path} answered HTTP {s}"),
                Ok(Err(e)) => format!("GET {path}: {e}"),
                Err(_) => format!("GET {path}: no answer within 2 s"),
            },
        };
        if Instant::now() >= deadline {
            return Err(NotReady::Timeout(last));
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(100)) => {}
            _ = interrupt.changed() => {}
        }
    }
}

/// Launch, measure and stop one configuration: the profiles' runs `rounds` (each round runs
/// every profile once). `Ok(None)`: interrupted (nothing saved).
async fn run_trial<R: ProfileRunner>(
    exp: &Experiment,
    spec: &TrialSpec,
    rounds: std::ops::Range<u32>,
    opts: &RunOptions,
    runner: &mut R,
    mut interrupt: watch::Receiver<bool>,
) -> Result<Option<TrialResult>, LabError> {
    let engine_spec = exp
        .engines
        .iter()
        .find(|e| e.name == spec.engine)
        .ok_or_else(|| invalid("engines", format!("no engine named '{}'", spec.engine)))?;
    let template = command_template(exp, spec).ok_or_else(|| {
        invalid("options", format!("trial '{}' names an unknown option", spec.id))
    })?;
    let folder = trial::trial_dir(&opts.dir, &spec.id);
    std::fs::create_dir_all(&folder)
        .map_err(|e| LabError::Write { path: folder.clone(), message: e.to_string() })?;
    let log = folder.join("engine.log");
    // A rerun of an unfinished trial starts a fresh log; later launches of an interleaved
    // one append to it.
    if rounds.start == 0 {
        let _ = std::fs::remove_file(&log);
    }
    let port = free_port().map_err(|e| LabError::Write {
        path: opts.dir.clone(),
        message: format!("cannot find a free port on 127.0.0.1: {e}"),
    })?;
    let r = |t: &str| render(t, port, &opts.servelab);
    let command = r(&template);
    let (base_url, ready_url) = (r(&engine_spec.base_url), r(&engine_spec.ready_url));
    let env: Vec<(String, String)> =
        engine_spec.env.iter().map(|(k, v)| (k.clone(), r(v))).collect();
    let mut result = TrialResult {
        spec: spec.clone(),
        command: command.clone(),
        command_template: template,
        status: TrialStatus::Finished,
        startup_secs: None,
        profiles: Vec::new(),
    };
    let failed = |result: &mut TrialResult, reason: String| {
        result.status = TrialStatus::Failed { reason, log_tail: String::new() };
    };

    let started = Instant::now();
    let mut engine = match Engine::spawn(&command, &env, &log) {
        Ok(e) => e,
        Err(e) => {
            failed(&mut result, format!("cannot start `{command}`: {e}"));
            return Ok(Some(with_log_tail(result, &log, opts.log_tail_lines)));
        }
    };
    match wait_ready(&mut engine, &ready_url, engine_spec.ready_timeout, &mut interrupt).await {
        Ok(()) => {
            let secs = started.elapsed().as_secs_f64();
            result.startup_secs = Some(secs);
            runner.note(&format!("trial {}: ready in {secs:.1} s at {base_url}", spec.id));
        }
        Err(NotReady::Interrupted) => {
            engine.stop(engine_spec.stop_grace).await;
            return Ok(None);
        }
        Err(NotReady::Exited(st)) => failed(
            &mut result,
            format!("engine exited ({st}) before it was ready; see {}", log.display()),
        ),
        Err(NotReady::Timeout(last)) => failed(
            &mut result,
            format!(
                "engine not ready within {:.0} s ({last}); raise ready_timeout_secs if it \
                 needs longer",
                engine_spec.ready_timeout.as_secs_f64()
            ),
        ),
    }
    if result.failure().is_none() {
        let run =
            run_profiles(exp, rounds, &mut engine, &mut result, &base_url, runner, &interrupt);
        match run.await {
            ProfilesEnd::Interrupted => {
                engine.stop(engine_spec.stop_grace).await;
                return Ok(None);
            }
            ProfilesEnd::Failed(reason) => failed(&mut result, reason),
            ProfilesEnd::Done => {}
        }
    }
    engine.stop(engine_spec.stop_grace).await;
    Ok(Some(with_log_tail(result, &log, opts.log_tail_lines)))
}

enum ProfilesEnd {
    Done,
    Failed(String),
    Interrupted,
}

async fn run_profiles<R: ProfileRunner>(
    exp: &Experiment,
    rounds: std::ops::Range<u32>,
    engine: &mut Engine,
    result: &mut TrialResult,
    base_url: &str,
    runner: &mut R,
    interrupt: &watch::Receiver<bool>,
) -> ProfilesEnd {
    // Rounds of every profile, not each profile N times in a row: a slow drift of the
    // machine then spreads over all profiles instead of landing on one.
    let of = exp.acceptance.repeats.max(1);
    let runs = rounds.flat_map(|r| (0..exp.profiles.len()).map(move |i| (r, i)));
    for (repeat, i) in runs.collect::<Vec<_>>() {
        let p = &exp.profiles[i];
        if *interrupt.borrow() {
            return ProfilesEnd::Interrupted;
        }
        let run = runner.run_profile(&result.spec, &result.command, p, repeat, base_url).await;
        if let Some(st) = engine.exited() {
            return ProfilesEnd::Failed(format!(
                "engine exited ({}) during profile {}",
                describe(st),
                p.name
            ));
        }
        let summary = match run {
            Ok(s) => s,
            Err(RunError::Interrupted) => return ProfilesEnd::Interrupted,
            Err(RunError::Failed(m)) => {
                return ProfilesEnd::Failed(format!("profile {}: {m}", p.name))
            }
        };
        if summary.info.interrupted || *interrupt.borrow() {
            return ProfilesEnd::Interrupted;
        }
        let mut r = ProfileResult::from_summary(&p.name, &summary, exp.objective.slo.as_ref());
        r.repeat = repeat;
        result.profiles.push(r);
        let run_no = if of > 1 { format!(" (run {} of {of})", repeat + 1) } else { String::new() };
        runner.note(&format!(
            "trial {}: {}{run_no} {:.0} {} ({} ok, {} failed)",
            result.spec.id,
            p.name,
            summary_value(&summary, exp),
            exp.objective.metric.label(),
            summary.completed,
            summary.failed
        ));
    }
    ProfilesEnd::Done
}

fn summary_value(s: &Summary, exp: &Experiment) -> f64 {
    exp.objective.metric.value(s).unwrap_or(0.0)
}

fn with_log_tail(mut t: TrialResult, log: &Path, lines: usize) -> TrialResult {
    if let TrialStatus::Failed { log_tail, .. } = &mut t.status {
        *log_tail = crate::process::log_tail(log, lines);
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_split_into_base_and_path() {
        assert_eq!(
            split_url("http://127.0.0.1:8000/health"),
            ("http://127.0.0.1:8000".to_string(), "/health".to_string())
        );
        assert_eq!(split_url("http://h:1"), ("http://h:1".to_string(), "/".to_string()));
        assert_eq!(split_url("http://h:1/a/b?x=1").1, "/a/b?x=1");
    }
}
