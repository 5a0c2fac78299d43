//! The experiment driver: ask the strategy for the next trial, launch its engine, wait for
//! it, run every profile's plan through a [`Runner`] (the CLI's is the measuring conductor, which
//! scrapes the engine's `/metrics` through each profile), stop the engine, save the trial;
//! repeat until the strategy is done, then write the report.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use servelab_client::http::{self, Target};
use servelab_metrics::Summary;
use servelab_plan::{Plan, RunError, Runner};
use tokio::sync::watch;

use crate::config::Experiment;
use crate::error::{invalid, LabError};
use crate::process::{describe, free_port, render, EngineProcess};
use crate::shards::LabShard;
use crate::strategy::{command_template, next, Next, Outcome};
use crate::trial::{self, ProfileResult, TrialResult, TrialSpec, TrialStatus};

/// Where and how an experiment runs.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// The experiment folder: one sub-folder per trial, and the report.
    pub dir: PathBuf,
    /// Skip trials already finished in `dir` (otherwise `dir` must have none).
    pub resume: bool,
    /// What `{servelab}` stands for in templates.
    pub servelab: String,
    /// Lines of the engine log kept with a failed trial.
    pub log_tail_lines: usize,
    /// The plan of each profile, in the experiment's profile order (see [`profile_plans`]).
    pub plans: Vec<Plan>,
    /// This process's part of a sharded lab (the runner then runs each plan as its shard
    /// of it); `None`: the whole lab.
    pub shard: Option<LabShard>,
}

/// How an experiment run ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Finish {
    /// The strategy is done; the report is written.
    Done {
        /// What the experiment found.
        outcome: Outcome,
        /// Every finished trial.
        trials: Vec<TrialResult>,
    },
    /// Interrupted: the finished trials are saved; `--resume` continues.
    Interrupted {
        /// Trials finished so far.
        finished: usize,
    },
}

/// Run `exp` (parsed from `text`) in `opts.dir`: refuse a folder with finished trials unless
/// resuming, keep a copy of the experiment there (what `--resume` and `lab report` read), and
/// warn when a resumed experiment file changed since.
pub async fn run_in_dir<R: Runner>(
    exp: &Experiment,
    text: &str,
    opts: &RunOptions,
    runner: &mut R,
    interrupt: watch::Receiver<bool>,
) -> Result<Finish, LabError> {
    let dir = &opts.dir;
    if opts.resume && !dir.is_dir() {
        return Err(invalid(
            "--resume",
            format!("{} does not exist (give the --output-dir of the earlier run)", dir.display()),
        ));
    }
    let write = |e: std::io::Error| LabError::Write { path: dir.clone(), message: e.to_string() };
    std::fs::create_dir_all(dir).map_err(write)?;
    let copy = dir.join(crate::report::EXPERIMENT_COPY);
    if opts.resume && std::fs::read_to_string(&copy).is_ok_and(|old| old != text) {
        servelab_outputs::term::warn(&format!(
            "the experiment differs from the one {} was started with; finished trials are \
             reused by name",
            dir.display()
        ));
    }
    // The copy is written only once the folder is known to be ours (run_experiment refuses
    // a folder with finished trials unless resuming).
    if opts.resume || trial::load_all(dir).is_ok_and(|t| t.is_empty()) {
        std::fs::write(&copy, text).map_err(write)?;
    }
    run_experiment(exp, opts, runner, interrupt).await
}

/// Run the experiment to the end (or to an interrupt), saving each trial as it finishes and
/// the report at the end.
pub async fn run_experiment<R: Runner>(
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
        note(&format!("resuming: {} trials already finished", done.len()));
    }
    loop {
        if *interrupt.borrow() {
            return Ok(Finish::Interrupted { finished: done.len() });
        }
        match next(exp, &done) {
            Next::Done(outcome) => {
                crate::report::write_all(&opts.dir, exp, &done, Some(&outcome), &opts.servelab)?;
                return Ok(Finish::Done { outcome, trials: done });
            }
            Next::Run(spec) => {
                note(&format!("trial {}: starting", spec.id));
                let all = 0..exp.acceptance.repeats.max(1);
                let Some(t) = run_trial(exp, &spec, all, opts, runner, interrupt.clone()).await?
                else {
                    return Ok(Finish::Interrupted { finished: done.len() });
                };
                finished(&t);
                trial::save(&opts.dir, &t)?;
                done.push(t);
            }
            Next::RunPair { reference, candidate } => {
                note(&format!(
                    "trial {} and its reference {}: launched in turn",
                    candidate.id, reference.id
                ));
                let Some((r, c)) =
                    run_pair(exp, &reference, &candidate, opts, runner, &interrupt).await?
                else {
                    return Ok(Finish::Interrupted { finished: done.len() });
                };
                for t in [r, c] {
                    finished(&t);
                    trial::save(&opts.dir, &t)?;
                    done.push(t);
                }
            }
        }
    }
}

fn finished(t: &TrialResult) {
    match t.failure() {
        Some(r) => note(&format!("trial {}: failed: {r}", t.spec.id)),
        None => note(&format!("trial {}: finished", t.spec.id)),
    }
}

/// The reference and the candidate launched in turn, one round of profiles per launch, in
/// the order A B B A A B ...: a linear drift of the machine then weighs on both alike. A
/// configuration that fails a launch is not launched again. `Ok(None)`: interrupted (nothing
/// saved; the pair runs again on resume).
async fn run_pair<R: Runner>(
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
    engine: &mut EngineProcess,
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
                // No health route (Ollama has none): up once /v1/models says so.
                Ok(Ok((s @ (404 | 405), _))) if path == "/health" => {
                    match tokio::time::timeout(Duration::from_secs(2), http::get(&t, "/v1/models"))
                        .await
                    {
                        Ok(Ok((m, _))) if http::up_without_health_route(s, m) => return Ok(()),
                        _ => format!("GET {path} answered HTTP {s} and /v1/models did not answer"),
                    }
                }
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
/// every profile once). `Ok(None)`: interrupted (nothing saved). In a sharded lab shard 0
/// does this and tells the others (see [`crate::shards`]); they send their parts to its
/// engine and keep its result.
async fn run_trial<R: Runner>(
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
    let round = rounds.start;
    match &opts.shard {
        Some(s) if !s.launches() => {
            let wait = s.launch(&spec.id, round, engine_spec.ready_timeout, &mut interrupt);
            let Some(launch) = wait.await? else { return Ok(None) };
            if let Some(start) = launch.start() {
                note(&format!("trial {}: shard 0's engine at {}", spec.id, launch.base_url));
                let mut part = TrialResult {
                    spec: spec.clone(),
                    command: launch.command.clone(),
                    command_template: String::new(),
                    status: TrialStatus::Finished,
                    startup_secs: None,
                    profiles: Vec::new(),
                };
                let plans = engine_plans(&opts.plans, &launch.base_url, Some(start));
                let run = run_profiles(exp, rounds, None, &mut part, runner, &plans, &interrupt);
                // A failed part: shard 0's result says how the trial ended.
                if let ProfilesEnd::Interrupted = run.await {
                    return Ok(None);
                }
            }
            s.result(&spec.id, round, engine_spec.stop_grace, &mut interrupt).await
        }
        Some(s) => {
            let t = launch_trial(exp, spec, engine_spec, rounds, opts, runner, interrupt).await?;
            if let Some(t) = &t {
                if t.startup_secs.is_none() {
                    s.publish_launch(&spec.id, round, &t.command, None)?;
                }
                s.publish_result(round, t)?;
            }
            Ok(t)
        }
        None => launch_trial(exp, spec, engine_spec, rounds, opts, runner, interrupt).await,
    }
}

/// The profiles' plans aimed at one engine, starting (in a sharded lab) not before `start`.
fn engine_plans(plans: &[Plan], base_url: &str, start: Option<SystemTime>) -> Vec<Plan> {
    plans
        .iter()
        .map(|p| {
            let mut p = Plan { target: servelab_plan::Target::Url(base_url.into()), ..p.clone() };
            p.shard.start_at = start;
            p
        })
        .collect()
}

/// [`run_trial`] on the process that launches the engine.
async fn launch_trial<R: Runner>(
    exp: &Experiment,
    spec: &TrialSpec,
    engine_spec: &crate::config::EngineSpec,
    rounds: std::ops::Range<u32>,
    opts: &RunOptions,
    runner: &mut R,
    mut interrupt: watch::Receiver<bool>,
) -> Result<Option<TrialResult>, LabError> {
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
    let mut engine = match EngineProcess::spawn(&command, &env, &log) {
        Ok(e) => e,
        Err(e) => {
            failed(&mut result, format!("cannot start `{command}`: {e}"));
            return Ok(Some(with_log_tail(result, &log, opts.log_tail_lines)));
        }
    };
    // In a sharded lab: when every shard starts the first profile.
    let mut start = None;
    match wait_ready(&mut engine, &ready_url, engine_spec.ready_timeout, &mut interrupt).await {
        Ok(()) => {
            runner.target_restarted();
            let secs = started.elapsed().as_secs_f64();
            result.startup_secs = Some(secs);
            note(&format!("trial {}: ready in {secs:.1} s at {base_url}", spec.id));
            if let Some(s) = &opts.shard {
                // Every shard here first: one still busy with the last launch would start
                // late, and its late requests would weigh on this engine's figures.
                if !s.arrivals(&spec.id, rounds.start, &mut interrupt).await? {
                    engine.stop(engine_spec.stop_grace).await;
                    return Ok(None);
                }
                let at = SystemTime::now() + s.lead;
                s.publish_launch(&spec.id, rounds.start, &command, Some((&base_url, at)))?;
                start = Some(at);
            }
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
        // Every profile runs against this trial's engine.
        let plans = engine_plans(&opts.plans, &base_url, start);
        let own = Some(&mut engine);
        let run = run_profiles(exp, rounds, own, &mut result, runner, &plans, &interrupt);
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

/// Run the profiles' `rounds` against a trial's engine: `engine` is the process when this
/// process launched it (a sharded lab's other shards only send).
async fn run_profiles<R: Runner>(
    exp: &Experiment,
    rounds: std::ops::Range<u32>,
    mut engine: Option<&mut EngineProcess>,
    result: &mut TrialResult,
    runner: &mut R,
    plans: &[Plan],
    interrupt: &watch::Receiver<bool>,
) -> ProfilesEnd {
    // Rounds of every profile, not each profile N times in a row: a slow drift of the
    // machine then spreads over all profiles instead of landing on one.
    let of = exp.acceptance.repeats.max(1);
    let runs: Vec<(u32, usize)> =
        rounds.flat_map(|r| (0..exp.profiles.len()).map(move |i| (r, i))).collect();
    let plan_of = |(repeat, i): (u32, usize)| {
        let (p, base) = (&exp.profiles[i], plans.get(i)?);
        Some(run_plan(base, exp, &result.spec, &result.command, &p.name, repeat))
    };
    for (n, &(repeat, i)) in runs.iter().enumerate() {
        let p = &exp.profiles[i];
        if *interrupt.borrow() {
            return ProfilesEnd::Interrupted;
        }
        let Some(plan) = plan_of((repeat, i)) else {
            return ProfilesEnd::Failed(format!("no plan for profile {}", p.name));
        };
        let run = runner.run(&plan).await;
        if let Some(st) = engine.as_mut().and_then(|e| e.exited()) {
            let why = format!("engine exited ({}) during profile {}", describe(st), p.name);
            // Peers that finished this run go on to the next: tell them it will not run.
            if let (Ok(_), Some(next)) = (&run, runs.get(n + 1).and_then(|&r| plan_of(r))) {
                runner.forgo(&next, &why).await;
            }
            return ProfilesEnd::Failed(why);
        }
        let summary = match run {
            Ok(s) => s,
            Err(RunError::Interrupted) => return ProfilesEnd::Interrupted,
            Err(RunError::Usage(m) | RunError::Failed(m)) => {
                return ProfilesEnd::Failed(format!("profile {}: {m}", p.name))
            }
        };
        if summary.info.interrupted || *interrupt.borrow() {
            return ProfilesEnd::Interrupted;
        }
        let mut r = ProfileResult::from_summary(&p.name, &summary, exp.objective.slo.as_ref());
        r.repeat = repeat;
        // The cache state this run started from: runs earlier in this launch warmed it.
        r.after_runs = Some(u32::try_from(n).unwrap_or(u32::MAX));
        result.profiles.push(r);
        let run_no = if of > 1 { format!(" (run {} of {of})", repeat + 1) } else { String::new() };
        note(&format!(
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

/// An experiment file read and checked, with every profile's plan, before any engine starts.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// The experiment.
    pub exp: Experiment,
    /// The file as read (copied into the output folder).
    pub text: String,
    /// Each profile's plan, in profile order, as the lab runs them ([`profile_plans`]).
    pub plans: Vec<Plan>,
}

/// Read the experiment at `path` and turn each profile's options into a plan with `plan_of`
/// (the CLI parses them exactly as `servelab bench` flags). Errors name the file and field.
pub fn load_experiment(
    path: &Path,
    plan_of: impl Fn(Vec<String>) -> Result<Plan, String>,
) -> Result<Loaded, LabError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| LabError::Read { path: path.to_path_buf(), message: e.to_string() })?;
    let at = |what: String, m: String| invalid(format!("{}: {what}", path.display()), m);
    // Checked to run, not to report: `lab report` still renders a folder measured before.
    let exp = crate::config::parse(&text)
        .and_then(|exp| crate::seeds::check(&exp.profiles, exp.acceptance.repeats).map(|_| exp))
        .map_err(|e| match e {
            LabError::Invalid { field, message } => at(field, message),
            other => other,
        })?;
    let mut plans = Vec::new();
    for (i, p) in exp.profiles.iter().enumerate() {
        plans.push(plan_of(p.args()).map_err(|m| at(format!("profiles[{i}] ({})", p.name), m))?);
    }
    let plans = profile_plans(&exp, plans);
    Ok(Loaded { exp, text, plans })
}

/// The output folder when none is given: `lab-<experiment name>`.
pub fn default_dir(exp: &Experiment) -> PathBuf {
    PathBuf::from(format!("lab-{}", servelab_outputs::file_safe(&exp.name)))
}

/// The plans of the experiment's profiles as the lab runs them: no progress display, a short
/// readiness wait (the lab waited for the engine already; a bench that cannot reach it should
/// fail fast), and every percentile the reports and the SLO read.
pub fn profile_plans(exp: &Experiment, plans: Vec<Plan>) -> Vec<Plan> {
    let slo = exp.objective.slo.as_ref().map(|o| o.percentiles()).unwrap_or_default();
    plans
        .into_iter()
        .map(|mut p| {
            p.output.progress = false;
            p.limits.ready_timeout = Duration::from_secs(10);
            p.with_percentiles(slo.iter().copied().chain([99.0]))
        })
        .collect()
}

/// One run of a profile in a trial: prompts of its own per profile and run (the same per run
/// number in every trial), filed in the store under the trial.
fn run_plan(
    base: &Plan,
    exp: &Experiment,
    trial: &TrialSpec,
    command: &str,
    profile: &str,
    repeat: u32,
) -> Plan {
    let mut p = base.clone();
    // Fresh prompts per profile and per run, the same in every trial (crate::seeds).
    if let Some(spec) = exp.profiles.iter().find(|s| s.name == profile) {
        p.workload.seed = crate::seeds::run_seed(exp.seed, spec, repeat);
    }
    let run = if repeat > 0 { format!("#{}", repeat + 1) } else { String::new() };
    p.record.label = Some(format!("{}/{}/{profile}{run}", exp.name, trial.id));
    p.record.tags.extend([
        ("lab.experiment".to_string(), exp.name.clone()),
        ("lab.trial".to_string(), trial.id.clone()),
        ("lab.engine".to_string(), trial.engine.clone()),
        ("lab.options".to_string(), trial.options.join(",")),
        ("lab.profile".to_string(), profile.to_string()),
        ("lab.repeat".to_string(), (repeat + 1).to_string()),
        ("engine".to_string(), trial.engine.clone()),
        ("engine_flags".to_string(), command.to_string()),
    ]);
    p
}

/// A progress line for the user.
fn note(message: &str) {
    servelab_outputs::term::note(&format!("lab: {message}"));
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
