//! Strategies, as pure functions of the experiment and the trials finished so far.
//!
//! [`next`] says which trial to run next, or that the experiment is done and what it found.
//! Because it only reads finished trials, the same function drives a fresh run, a resumed
//! one (finished trials are skipped) and `servelab lab report` (which replays it).

use serde::Serialize;
use servelab_metrics::bootstrap::{diff_interval, Interval};
use servelab_metrics::Stat;

use crate::config::{Experiment, Strategy};
use crate::noise::{paired, pooled_cv, pooled_sd, run_noise_pct};
use crate::trial::{ProfileResult, TrialResult, TrialSpec};

/// How one profile moved between two trials.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ProfileVerdict {
    /// The objective rose by more than the noise bar.
    Better,
    /// The objective fell by more than the noise bar.
    Worse,
    /// Within noise.
    Same,
}

/// How one profile's objective changed from the trial compared against to the candidate.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProfileDelta {
    /// The profile's name.
    pub profile: String,
    /// The objective of the trial compared against.
    pub base: f64,
    /// The objective of the candidate.
    pub value: f64,
    /// The change, percent (interleaved steps: the geometric mean of the ratios of
    /// neighbouring launches).
    pub delta_pct: f64,
    /// The bar a change must clear: max(min gain, bootstrap interval half-width, run-to-run
    /// bar), percent.
    pub noise_pct: f64,
    /// The run-to-run bar alone, when repeated runs gave one.
    pub run_noise_pct: Option<f64>,
    /// Whether the change clears the noise bar, and which way.
    pub verdict: ProfileVerdict,
    /// The candidate's prefix-cache hit rate (percent, mean over its runs) when it was above
    /// [`crate::seeds::REUSE_BAR`] in a profile whose prompts should not repeat: a gain there
    /// came from reuse the workload does not have, so it is not credited (verdict `same`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uncredited_hits_pct: Option<f64>,
}

/// A profile's prefix-cache hit rate, the mean over its runs (`None`: not reported).
fn hit_rate(t: &TrialResult, profile: &str) -> Option<f64> {
    let hits: Vec<f64> =
        t.runs(profile).iter().filter_map(|r| r.engine.prefix_cache_hit_rate).collect();
    (!hits.is_empty()).then(|| hits.iter().sum::<f64>() / hits.len() as f64)
}

/// A gain in a profile whose prompts should not repeat (see [`crate::seeds`]), made while
/// the candidate served more of its prompt tokens from its prefix cache than the
/// configuration it would replace, by over [`crate::seeds::REUSE_BAR`], is owed to reuse
/// the workload does not have (prompts seen in earlier runs), not credited. Hits both
/// configurations have (a prompt template shared by every request) do not count against it.
fn withhold_reuse(d: &mut ProfileDelta, base: &TrialResult, cand: &TrialResult, exp: &Experiment) {
    let Some(spec) = exp.profiles.iter().find(|p| p.name == d.profile) else { return };
    if crate::seeds::reuses_prefixes(spec) {
        return;
    }
    let Some(hits) = hit_rate(cand, &d.profile) else { return };
    let before = hit_rate(base, &d.profile).unwrap_or(0.0);
    if hits - before > crate::seeds::REUSE_BAR && d.verdict == ProfileVerdict::Better {
        d.verdict = ProfileVerdict::Same;
        d.uncredited_hits_pct = Some(hits * 100.0);
    }
}

/// What a step did with its trial.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// A starting point (an engine with its own flags).
    Baseline,
    /// Better than noise in some profile and worse in none: the option stays.
    Kept,
    /// Invalid, worse in some profile, or within noise: the option is dropped.
    Rejected,
}

/// One row of the step table.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Step {
    /// The trial's id (`engine+opt1+opt2`).
    pub trial: String,
    /// The option this step added (none for a baseline).
    pub option: Option<String>,
    /// The trial it was compared against.
    pub against: Option<String>,
    /// Objective per profile (`None`: the trial has no valid value there).
    pub values: Vec<(String, Option<f64>)>,
    /// The change per profile against `against`; empty for a baseline or an invalid trial.
    pub deltas: Vec<ProfileDelta>,
    /// What the step did with the trial.
    pub decision: Decision,
    /// Why, in one line (`ok`, `worse: ...`, `better: ...`, or why the trial cannot count).
    pub reason: String,
}

/// What an experiment found.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Outcome {
    /// The strategy that ran.
    pub strategy: Strategy,
    /// Every step, in the order run.
    pub steps: Vec<Step>,
    /// The winning trial, if any trial was valid.
    pub best: Option<String>,
    /// Options of the winning trial.
    pub kept: Vec<String>,
    /// Its launch command (engine command + kept flags, as a template).
    pub recommended: Option<String>,
}

/// What to do next.
#[derive(Debug, Clone, PartialEq)]
pub enum Next {
    /// Launch this trial.
    Run(TrialSpec),
    /// With `acceptance.interleave`: launch `reference` and `candidate` in turn, one round of
    /// profiles per launch (A B B A ...), and save both.
    RunPair {
        /// The configuration the candidate would replace.
        reference: TrialSpec,
        /// The configuration with one more option.
        candidate: TrialSpec,
    },
    /// Nothing left to run; what the experiment found.
    Done(Outcome),
}

/// Why a trial cannot count, or `None` when it can.
pub fn invalid_reason(t: &TrialResult, exp: &Experiment) -> Option<String> {
    if let Some(r) = t.failure() {
        return Some(format!("trial failed: {r}"));
    }
    for p in &exp.profiles {
        let runs = t.runs(&p.name);
        if runs.len() < exp.acceptance.repeats as usize {
            return Some(format!(
                "profile {} ran {} of {} times",
                p.name,
                runs.len(),
                exp.acceptance.repeats
            ));
        }
        for r in runs {
            if let Some(why) = invalid_run(r, &p.name, exp) {
                return Some(why);
            }
        }
    }
    None
}

/// Why one run of a profile cannot count.
fn invalid_run(r: &ProfileResult, name: &str, exp: &Experiment) -> Option<String> {
    if r.interrupted {
        return Some(format!("profile {name} was interrupted"));
    }
    let rate = r.success_rate();
    if rate < exp.acceptance.min_success_rate || r.completed == 0 {
        let kinds = if r.failures.is_empty() {
            String::new()
        } else {
            format!(" ({})", r.failures.join(", "))
        };
        return Some(format!(
            "profile {name}: {} of {} requests failed{kinds}; success {:.1}% < {:.1}%",
            r.failed,
            r.completed + r.failed,
            rate * 100.0,
            exp.acceptance.min_success_rate * 100.0
        ));
    }
    if let Some(check) = r.slo.as_ref().filter(|c| !c.pass) {
        return Some(format!("profile {name}: SLO missed: {}", check.violations.join("; ")));
    }
    None
}

/// The objective per profile, `None` where the trial has none.
pub fn values(t: &TrialResult, exp: &Experiment) -> Vec<(String, Option<f64>)> {
    let valid = invalid_reason(t, exp).is_none();
    exp.profiles
        .iter()
        .map(|p| {
            let v = t.value(&p.name, exp.objective.metric);
            (p.name.clone(), v.filter(|_| valid))
        })
        .collect()
}

/// One number to rank valid trials by: the geometric mean of the objective over profiles
/// (so a profile with large absolute numbers does not drown the others).
pub fn score(t: &TrialResult, exp: &Experiment) -> Option<f64> {
    let vs: Option<Vec<f64>> = values(t, exp).into_iter().map(|(_, v)| v).collect();
    let vs = vs?;
    if vs.is_empty() || vs.iter().any(|v| *v <= 0.0) {
        return None;
    }
    Some((vs.iter().map(|v| v.ln()).sum::<f64>() / vs.len() as f64).exp())
}

/// The bar a relative change must clear, percent: the larger of `min_gain_pct` and the
/// half-width of the bootstrap interval of the difference, relative to `base`.
pub fn noise_pct(min_gain_pct: f64, base: f64, ci: Option<Interval>) -> f64 {
    let ci_pct = match ci {
        Some(i) if base > 0.0 => (i.hi - i.lo) / 2.0 / base * 100.0,
        _ => 0.0,
    };
    min_gain_pct.max(ci_pct)
}

/// Better, worse or within noise.
pub fn verdict(delta_pct: f64, noise_pct: f64) -> ProfileVerdict {
    if delta_pct > noise_pct {
        ProfileVerdict::Better
    } else if delta_pct < -noise_pct {
        ProfileVerdict::Worse
    } else {
        ProfileVerdict::Same
    }
}

/// Compare a candidate with the trial it would replace, profile by profile. `pool` is every
/// trial compared so far (the candidate included): with repeated runs, their pooled
/// run-to-run spread sets a noise bar as well.
pub fn deltas(
    base: &TrialResult,
    cand: &TrialResult,
    exp: &Experiment,
    pool: &[&TrialResult],
) -> Vec<ProfileDelta> {
    let m = exp.objective.metric;
    let a = &exp.acceptance;
    let mut out = Vec::new();
    for (i, p) in exp.profiles.iter().enumerate() {
        let (Some(b), Some(v)) = (base.value(&p.name, m), cand.value(&p.name, m)) else {
            continue;
        };
        let delta_pct = if b > 0.0 { (v - b) / b * 100.0 } else { 0.0 };
        let units = |t: &TrialResult| -> Vec<Vec<f64>> {
            t.runs(&p.name).iter().flat_map(|r| r.units(m)).collect()
        };
        let ci = diff_interval(
            &units(base),
            &units(cand),
            Stat::Mean,
            a.resamples,
            i as u64,
            a.confidence,
        );
        let mut noise = noise_pct(a.min_gain_pct, b, ci);
        let (nb, nc) = (base.runs(&p.name).len(), cand.runs(&p.name).len());
        let run_noise = run_to_run(pool, &p.name, exp)
            .map(|(cv, df)| run_noise_pct(cv, df, nb, nc, a.confidence));
        if let Some(r) = run_noise {
            noise = noise.max(r);
        }
        let mut d = ProfileDelta {
            profile: p.name.clone(),
            base: b,
            value: v,
            delta_pct,
            noise_pct: noise,
            run_noise_pct: run_noise,
            verdict: verdict(delta_pct, noise),
            uncredited_hits_pct: None,
        };
        withhold_reuse(&mut d, base, cand, exp);
        out.push(d);
    }
    out
}

/// The pooled run-to-run spread of a profile's objective over the finished trials of `pool`
/// that ran it more than once: (coefficient of variation, degrees of freedom).
pub fn run_to_run(pool: &[&TrialResult], profile: &str, exp: &Experiment) -> Option<(f64, u32)> {
    let groups: Vec<Vec<f64>> = pool
        .iter()
        .filter(|t| t.failure().is_none())
        .map(|t| {
            let runs = t.runs(profile);
            let clean =
                runs.iter().all(|r: &&ProfileResult| invalid_run(r, profile, exp).is_none());
            if clean {
                runs.iter().map(|r| r.value(exp.objective.metric)).collect()
            } else {
                Vec::new()
            }
        })
        .collect();
    pooled_cv(&groups)
}

/// Keep a candidate only when it is valid (no failed requests, SLO met), better than noise
/// in at least one profile, and worse than noise in none. The reason says which.
pub fn judge(
    base: &TrialResult,
    cand: &TrialResult,
    exp: &Experiment,
    pool: &[&TrialResult],
) -> (Decision, String, Vec<ProfileDelta>) {
    if let Some(why) = invalid_reason(cand, exp) {
        return (Decision::Rejected, why, Vec::new());
    }
    let ds = deltas(base, cand, exp, pool);
    let (decision, reason) = decide(&ds);
    (decision, reason, ds)
}

/// Kept when better than noise in at least one profile and worse in none; the reason says
/// which.
fn decide(ds: &[ProfileDelta]) -> (Decision, String) {
    let show = |d: &ProfileDelta| match d.uncredited_hits_pct {
        Some(h) => format!(
            "{} {:+.1}% (noise ±{:.1}%; not credited: {h:.1}% prefix-cache hits on prompts \
             that should not repeat)",
            d.profile, d.delta_pct, d.noise_pct
        ),
        None => format!("{} {:+.1}% (noise ±{:.1}%)", d.profile, d.delta_pct, d.noise_pct),
    };
    let worse: Vec<String> =
        ds.iter().filter(|d| d.verdict == ProfileVerdict::Worse).map(show).collect();
    if !worse.is_empty() {
        return (Decision::Rejected, format!("worse: {}", worse.join(", ")));
    }
    let better: Vec<String> =
        ds.iter().filter(|d| d.verdict == ProfileVerdict::Better).map(show).collect();
    if better.is_empty() {
        let all: Vec<String> = ds.iter().map(show).collect();
        return (Decision::Rejected, format!("within noise: {}", all.join(", ")));
    }
    (Decision::Kept, format!("better: {}", better.join(", ")))
}

/// The log ratios candidate / reference of one profile, run by run (run *k* of each were
/// neighbouring launches).
fn log_ratios(
    reference: &TrialResult,
    cand: &TrialResult,
    profile: &str,
    exp: &Experiment,
) -> Vec<f64> {
    let m = exp.objective.metric;
    let refs = reference.runs(profile);
    cand.runs(profile)
        .iter()
        .filter_map(|c| {
            let r = refs.iter().find(|r| r.repeat == c.repeat)?;
            let (a, b) = (c.value(m), r.value(m));
            (a > 0.0 && b > 0.0).then(|| (a / b).ln())
        })
        .collect()
}

/// An interleaved step, profile by profile: the change is the geometric mean of the
/// candidate / reference ratios of neighbouring launches, and the noise bar comes from the
/// spread of those ratios pooled over the steps so far (`pairs`, this one included).
pub fn paired_deltas(
    reference: &TrialResult,
    cand: &TrialResult,
    exp: &Experiment,
    pairs: &[(&TrialResult, &TrialResult)],
) -> Vec<ProfileDelta> {
    let (m, a) = (exp.objective.metric, &exp.acceptance);
    let mut out = Vec::new();
    for p in &exp.profiles {
        let logs = log_ratios(reference, cand, &p.name, exp);
        let (Some(b), Some(v)) = (reference.value(&p.name, m), cand.value(&p.name, m)) else {
            continue;
        };
        if logs.is_empty() {
            continue;
        }
        let groups: Vec<Vec<f64>> = pairs
            .iter()
            .filter(|(r, c)| invalid_reason(r, exp).is_none() && invalid_reason(c, exp).is_none())
            .map(|(r, c)| log_ratios(r, c, &p.name, exp))
            .collect();
        let (delta_pct, bar) = paired(&logs, pooled_sd(&groups), a.confidence);
        let noise = bar.map_or(a.min_gain_pct, |b| b.max(a.min_gain_pct));
        let mut d = ProfileDelta {
            profile: p.name.clone(),
            base: b,
            value: v,
            delta_pct,
            noise_pct: noise,
            run_noise_pct: bar,
            verdict: verdict(delta_pct, noise),
            uncredited_hits_pct: None,
        };
        withhold_reuse(&mut d, reference, cand, exp);
        out.push(d);
    }
    out
}

fn paired_step(
    reference: &TrialResult,
    cand: &TrialResult,
    option: &str,
    exp: &Experiment,
    pairs: &[(&TrialResult, &TrialResult)],
) -> Step {
    let (decision, reason, deltas) = if let Some(why) = invalid_reason(cand, exp) {
        (Decision::Rejected, why, Vec::new())
    } else if let Some(why) = invalid_reason(reference, exp) {
        let why = format!("its reference launches failed, so it cannot be judged: {why}");
        (Decision::Rejected, why, Vec::new())
    } else {
        let ds = paired_deltas(reference, cand, exp, pairs);
        let (decision, reason) = decide(&ds);
        (decision, reason, ds)
    };
    Step {
        trial: cand.spec.id.clone(),
        option: Some(option.to_string()),
        against: Some(reference.spec.id.clone()),
        values: values(cand, exp),
        deltas,
        decision,
        reason,
    }
}

/// When the best baseline leads every other valid baseline by no more than noise in every
/// profile, the choice between them is noise: the sentence that says so, with the changes.
/// `None` when it is better than noise somewhere against each of them.
pub fn baseline_within_noise(
    exp: &Experiment,
    baselines: &[&TrialResult],
    best: &TrialResult,
) -> Option<String> {
    let show = |d: &ProfileDelta| {
        format!("{} {:+.1}% (noise ±{:.1}%)", d.profile, d.delta_pct, d.noise_pct)
    };
    let close: Vec<String> = baselines
        .iter()
        .filter(|t| t.spec.id != best.spec.id && invalid_reason(t, exp).is_none())
        .filter_map(|other| {
            let ds = deltas(other, best, exp, baselines);
            let ahead = ds.iter().any(|d| d.verdict == ProfileVerdict::Better);
            (!ahead && !ds.is_empty()).then(|| {
                let all: Vec<String> = ds.iter().map(show).collect();
                format!("`{}` ({})", other.spec.id, all.join(", "))
            })
        })
        .collect();
    (!close.is_empty()).then(|| {
        format!(
            "the best baseline by the score, but within noise of {}: which engine the search \
             starts from is noise, not a measured difference",
            close.join(" and ")
        )
    })
}

fn baseline_step(t: &TrialResult, exp: &Experiment) -> Step {
    Step {
        trial: t.spec.id.clone(),
        option: None,
        against: None,
        values: values(t, exp),
        deltas: Vec::new(),
        decision: Decision::Baseline,
        reason: invalid_reason(t, exp).unwrap_or_else(|| "ok".to_string()),
    }
}

fn step(
    base: &TrialResult,
    cand: &TrialResult,
    option: Option<&str>,
    exp: &Experiment,
    pool: &[&TrialResult],
) -> Step {
    let (decision, reason, deltas) = judge(base, cand, exp, pool);
    Step {
        trial: cand.spec.id.clone(),
        option: option.map(str::to_string),
        against: Some(base.spec.id.clone()),
        values: values(cand, exp),
        deltas,
        decision,
        reason,
    }
}

/// The highest-scoring valid trial; ties keep the earlier one.
fn best<'a>(trials: &[&'a TrialResult], exp: &Experiment) -> Option<&'a TrialResult> {
    let mut out: Option<(&TrialResult, f64)> = None;
    for t in trials {
        if let Some(s) = score(t, exp) {
            if out.is_none_or(|(_, b)| s > b) {
                out = Some((t, s));
            }
        }
    }
    out.map(|(t, _)| t)
}

fn outcome(exp: &Experiment, steps: Vec<Step>, winner: Option<&TrialResult>) -> Outcome {
    Outcome {
        strategy: exp.strategy,
        steps,
        best: winner.map(|t| t.spec.id.clone()),
        kept: winner.map(|t| t.spec.options.clone()).unwrap_or_default(),
        recommended: winner.map(|t| t.command_template.clone()),
    }
}

/// Option subsets of `n` options, as index lists in experiment order: by size, then
/// lexicographically (the empty set, the baseline, is left out).
pub fn combinations(n: usize) -> Vec<Vec<usize>> {
    let mut out: Vec<Vec<usize>> =
        (1u32..(1u32 << n)).map(|mask| (0..n).filter(|i| mask & (1 << i) != 0).collect()).collect();
    out.sort_by(|a: &Vec<usize>, b| a.len().cmp(&b.len()).then_with(|| a.cmp(b)));
    out
}

/// The next trial to run, or the outcome when every trial the strategy needs has finished.
pub fn next(exp: &Experiment, done: &[TrialResult]) -> Next {
    let find = |s: &TrialSpec| done.iter().find(|t| t.spec.id == s.id);
    let mut baselines = Vec::new();
    for e in &exp.engines {
        let spec = TrialSpec::new(&e.name, &[]);
        match find(&spec) {
            Some(t) => baselines.push(t),
            None => return Next::Run(spec),
        }
    }
    let mut steps: Vec<Step> = baselines.iter().map(|t| baseline_step(t, exp)).collect();
    if exp.strategy != Strategy::Grid {
        if let Some(b) = best(&baselines, exp) {
            if let (Some(why), Some(step)) = (
                baseline_within_noise(exp, &baselines, b),
                steps.iter_mut().find(|s| s.trial == b.spec.id),
            ) {
                step.reason = format!("{}; {why}", step.reason);
            }
        }
    }
    match exp.strategy {
        Strategy::Baseline => Next::Done(outcome(exp, steps, best(&baselines, exp))),
        Strategy::Grid => {
            let mut all = baselines.clone();
            for (e, base) in exp.engines.iter().zip(&baselines) {
                for combo in combinations(exp.options.len()) {
                    let names: Vec<String> =
                        combo.iter().map(|&i| exp.options[i].name.clone()).collect();
                    let spec = TrialSpec::new(&e.name, &names);
                    let Some(t) = find(&spec) else { return Next::Run(spec) };
                    all.push(t);
                    steps.push(step(base, t, Some(&names.join("+")), exp, &all));
                }
            }
            Next::Done(outcome(exp, steps, best(&all, exp)))
        }
        Strategy::Greedy => {
            let Some(mut current) = best(&baselines, exp) else {
                return Next::Done(outcome(exp, steps, None));
            };
            let mut kept: Vec<String> = Vec::new();
            // The trials walked so far, in the order the strategy ran them: each step is
            // judged on what was known when it ran, so later trials never change it.
            let mut pool = baselines.clone();
            let mut pairs: Vec<(&TrialResult, &TrialResult)> = Vec::new();
            for opt in &exp.options {
                let mut names = kept.clone();
                names.push(opt.name.clone());
                let spec = TrialSpec::new(&current.spec.engine, &names);
                let (t, s) = if exp.acceptance.interleave {
                    // The current configuration is launched again, in turn with the candidate.
                    let reference = TrialSpec::reference(&current.spec, &opt.name);
                    let (Some(r), Some(t)) = (find(&reference), find(&spec)) else {
                        return Next::RunPair { reference, candidate: spec };
                    };
                    pairs.push((r, t));
                    (t, paired_step(r, t, &opt.name, exp, &pairs))
                } else {
                    let Some(t) = find(&spec) else { return Next::Run(spec) };
                    pool.push(t);
                    (t, step(current, t, Some(&opt.name), exp, &pool))
                };
                if s.decision == Decision::Kept {
                    kept = names;
                    current = t;
                }
                steps.push(s);
            }
            Next::Done(outcome(exp, steps, Some(current)))
        }
    }
}

/// The launch command template of a configuration: the engine's command with each option's
/// flags merged in, in experiment order (see [`merge_flags`]).
pub fn command_template(exp: &Experiment, spec: &TrialSpec) -> Option<String> {
    let engine = exp.engines.iter().find(|e| e.name == spec.engine)?;
    let mut cmd = engine.command.clone();
    for name in &spec.options {
        let opt = exp.options.iter().find(|o| &o.name == name)?;
        cmd = merge_flags(&cmd, &opt.flags);
    }
    Some(cmd)
}

/// Whitespace-separated tokens with their byte spans.
fn tokens(s: &str) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut start = None;
    for (i, c) in s.char_indices() {
        match (c.is_whitespace(), start) {
            (true, Some(b)) => {
                out.push((b, i));
                start = None;
            }
            (false, None) => start = Some(i),
            _ => {}
        }
    }
    if let Some(b) = start {
        out.push((b, s.len()));
    }
    out
}

/// A token that is a flag (`--x`, `-x`), not a value such as `-1`.
fn is_flag(t: &str) -> bool {
    t.starts_with('-') && !t[1..].starts_with(|c: char| c.is_ascii_digit() || c == '.')
}

/// Add `flags` to `command`. A flag the command already has, long (`--itl-ms`) or short
/// (llama.cpp's `-np`), is replaced value and all (`--itl-ms 20` over `--itl-ms 5`), because
/// some servers refuse a flag given twice; its last occurrence is the one replaced, since in
/// `docker run [docker flags] IMAGE [engine flags]` the engine's come last. A flag the
/// command lacks is appended. A flag whose value in the command is quoted is appended (last
/// one wins where the server allows repeats).
pub fn merge_flags(command: &str, flags: &str) -> String {
    let ft = tokens(flags);
    let mut cmd = command.to_string();
    let mut append: Vec<&str> = Vec::new();
    let mut i = 0;
    while i < ft.len() {
        let tok = &flags[ft[i].0..ft[i].1];
        let (group_end, name) = if is_flag(tok) {
            let name = tok.split('=').next().unwrap_or(tok);
            let has_value =
                !tok.contains('=') && ft.get(i + 1).is_some_and(|&(b, e)| !is_flag(&flags[b..e]));
            (if has_value { i + 2 } else { i + 1 }, Some(name))
        } else {
            (i + 1, None)
        };
        let group = &flags[ft[i].0..ft[group_end - 1].1];
        i = group_end;
        let Some(name) = name else {
            append.push(group);
            continue;
        };
        let ct = tokens(&cmd);
        let found = ct.iter().rposition(|&(b, e)| {
            let t = &cmd[b..e];
            t == name || t.strip_prefix(name).is_some_and(|r| r.starts_with('='))
        });
        let Some(k) = found else {
            append.push(group);
            continue;
        };
        let (b, e) = ct[k];
        let mut end = e;
        if !cmd[b..e].contains('=') {
            if let Some(&(vb, ve)) = ct.get(k + 1) {
                let v = &cmd[vb..ve];
                if v.starts_with(['\'', '"']) {
                    append.push(group);
                    continue;
                }
                if !is_flag(v) {
                    end = ve;
                }
            }
        }
        cmd.replace_range(b..end, group);
    }
    for g in append {
        cmd.push(' ');
        cmd.push_str(g);
    }
    cmd
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::parse;
    use crate::trial::EngineFigures;
    use crate::trial::{ProfileResult, TrialStatus};

    fn exp(strategy: &str) -> Experiment {
        parse(&format!(
            "strategy: {strategy}\nengines:\n  - {{name: a, command: run-a}}\n  - {{name: b, command: run-b}}\n\
             profiles:\n  - {{name: p, num_prompts: 4}}\n  - {{name: q, num_prompts: 4}}\n\
             options:\n  fast: --fast\n  slow: --slow\n  flaky: --flaky\n"
        ))
        .unwrap()
    }

    fn prof(name: &str, value: f64, failed: u64) -> ProfileResult {
        ProfileResult {
            profile: name.to_string(),
            repeat: 0,
            after_runs: None,
            completed: 4,
            failed,
            duration_s: 1.0,
            total_tokens_per_s: value,
            output_tokens_per_s: value,
            requests_per_s: 4.0,
            ttft_p99_ms: None,
            tpot_p99_ms: None,
            tpot_mean_ms: None,
            slo: None,
            failures: if failed > 0 { vec![format!("http_status: {failed}")] } else { vec![] },
            // Identical requests: the bootstrap interval is 0, the 2% floor applies.
            request_total_tokens: vec![value / 4.0; 4],
            request_output_tokens: vec![value / 4.0; 4],
            engine: EngineFigures::default(),
            interrupted: false,
            summary_block: None,
        }
    }

    fn trial(e: &Experiment, engine: &str, opts: &[&str], value: f64, failed: u64) -> TrialResult {
        let spec = TrialSpec::new(engine, &opts.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        TrialResult {
            command: String::new(),
            command_template: command_template(e, &spec).unwrap(),
            spec,
            status: TrialStatus::Finished,
            startup_secs: Some(0.1),
            profiles: vec![prof("p", value, failed), prof("q", value, failed)],
        }
    }

    fn run_id(n: Next) -> String {
        match n {
            Next::Run(s) => s.id,
            Next::RunPair { reference, candidate } => {
                format!("{} | {}", reference.id, candidate.id)
            }
            Next::Done(o) => panic!("done: {o:?}"),
        }
    }

    #[test]
    fn flags_replace_their_own_value_or_are_appended() {
        let base = "sim serve --port {port} --itl-ms 5 --max-num-seqs=2 --enforce-eager";
        assert_eq!(
            merge_flags(base, "--itl-ms 20"),
            "sim serve --port {port} --itl-ms 20 --max-num-seqs=2 --enforce-eager"
        );
        assert_eq!(
            merge_flags(base, "--max-num-seqs 16"),
            "sim serve --port {port} --itl-ms 5 --max-num-seqs 16 --enforce-eager"
        );
        assert_eq!(merge_flags(base, "--enforce-eager"), base);
        assert_eq!(
            merge_flags(base, "--fault-rate server-error=0.2 --seed -1 --x"),
            format!("{base} --fault-rate server-error=0.2 --seed -1 --x")
        );
        assert_eq!(merge_flags("a --t '{x y}'", "--t z"), "a --t '{x y}' --t z");
        assert_eq!(merge_flags("a", "plain words"), "a plain words");
        // Short flags, as llama.cpp spells them; a negative value is a value, not a flag.
        let llama = "llama-server -m m.gguf -c 8192 -t 2 -np 1";
        assert_eq!(merge_flags(llama, "-np 8"), "llama-server -m m.gguf -c 8192 -t 2 -np 8");
        assert_eq!(
            merge_flags(llama, "-t 1 -ctk q8_0"),
            format!("{llama} -ctk q8_0").replace("-t 2", "-t 1")
        );
        assert_eq!(merge_flags("s --seed 3", "--seed -1"), "s --seed -1");
        // The last occurrence: the engine's flag after the image, not docker's before it.
        assert_eq!(
            merge_flags("docker run -p 80:80 img serve -p 8000", "-p 9000"),
            "docker run -p 80:80 img serve -p 9000"
        );
    }

    #[test]
    fn noise_and_verdicts() {
        assert_eq!(noise_pct(2.0, 100.0, None), 2.0);
        assert_eq!(noise_pct(2.0, 100.0, Some(Interval { lo: -5.0, hi: 5.0 })), 5.0);
        assert_eq!(noise_pct(2.0, 100.0, Some(Interval { lo: 1.0, hi: 2.0 })), 2.0);
        assert_eq!(verdict(2.5, 2.0), ProfileVerdict::Better);
        assert_eq!(verdict(2.0, 2.0), ProfileVerdict::Same);
        assert_eq!(verdict(-2.5, 2.0), ProfileVerdict::Worse);
    }

    #[test]
    fn combinations_go_by_size_then_order() {
        assert_eq!(combinations(2), vec![vec![0], vec![1], vec![0, 1]]);
        assert_eq!(combinations(3).len(), 7);
        assert_eq!(combinations(3)[3], vec![0, 1]);
        assert!(combinations(0).is_empty());
    }

    #[test]
    fn greedy_keeps_only_what_helps() {
        let e = exp("greedy");
        let mut done = vec![];
        assert_eq!(run_id(next(&e, &done)), "a");
        done.push(trial(&e, "a", &[], 100.0, 0));
        assert_eq!(run_id(next(&e, &done)), "b");
        done.push(trial(&e, "b", &[], 150.0, 0));
        // From the best baseline, b.
        assert_eq!(run_id(next(&e, &done)), "b+fast");
        done.push(trial(&e, "b+fast".split('+').next().unwrap(), &["fast"], 600.0, 0));
        assert_eq!(run_id(next(&e, &done)), "b+fast+slow");
        done.push(trial(&e, "b", &["fast", "slow"], 300.0, 0));
        assert_eq!(run_id(next(&e, &done)), "b+fast+flaky");
        done.push(trial(&e, "b", &["fast", "flaky"], 900.0, 1));
        let Next::Done(o) = next(&e, &done) else { panic!() };
        assert_eq!(o.best.as_deref(), Some("b+fast"));
        assert_eq!(o.kept, vec!["fast"]);
        assert_eq!(o.recommended.as_deref(), Some("run-b --fast"));
        let d: Vec<_> = o.steps.iter().map(|s| (s.trial.as_str(), s.decision)).collect();
        assert_eq!(
            d,
            vec![
                ("a", Decision::Baseline),
                ("b", Decision::Baseline),
                ("b+fast", Decision::Kept),
                ("b+fast+slow", Decision::Rejected),
                ("b+fast+flaky", Decision::Rejected),
            ]
        );
        assert_eq!(o.steps[2].reason, "better: p +300.0% (noise ±2.0%), q +300.0% (noise ±2.0%)");
        assert_eq!(o.steps[3].reason, "worse: p -50.0% (noise ±2.0%), q -50.0% (noise ±2.0%)");
        assert_eq!(
            o.steps[4].reason,
            "profile p: 1 of 5 requests failed (http_status: 1); success 80.0% < 100.0%"
        );
        assert_eq!(o.steps[2].deltas[0].delta_pct, 300.0);
    }

    #[test]
    fn a_gain_within_noise_is_rejected() {
        let e = exp("greedy");
        let done = vec![
            trial(&e, "a", &[], 100.0, 0),
            trial(&e, "b", &[], 10.0, 0),
            trial(&e, "a", &["fast"], 101.0, 0),
            trial(&e, "a", &["slow"], 100.0, 0),
            trial(&e, "a", &["flaky"], 103.0, 0),
        ];
        let Next::Done(o) = next(&e, &done) else { panic!() };
        assert_eq!(o.steps[2].decision, Decision::Rejected);
        assert!(o.steps[2].reason.starts_with("within noise: p +1.0%"), "{}", o.steps[2].reason);
        assert_eq!(o.steps[4].decision, Decision::Kept);
        assert_eq!(o.recommended.as_deref(), Some("run-a --flaky"));
    }

    /// The issue-25 case: a prefix-cache option "won" a profile whose prompts an earlier
    /// profile had sent (99.2 % hits). A gain made on reused prompts is not credited unless
    /// the profile reuses prefixes by design; hits below the bar do not matter.
    #[test]
    fn a_gain_made_on_reused_prompts_is_not_credited() {
        let e = exp("greedy");
        let mut cached = trial(&e, "a", &["fast"], 104.0, 0);
        cached.profiles[0].engine.prefix_cache_hit_rate = Some(0.992);
        cached.profiles[1].engine.prefix_cache_hit_rate = Some(0.01);
        let done = vec![
            trial(&e, "a", &[], 100.0, 0),
            trial(&e, "b", &[], 10.0, 0),
            cached,
            // The next steps, whichever way this one goes.
            trial(&e, "a", &["slow"], 100.0, 0),
            trial(&e, "a", &["flaky"], 100.0, 0),
            trial(&e, "a", &["fast", "slow"], 104.0, 0),
            trial(&e, "a", &["fast", "flaky"], 104.0, 0),
        ];
        let Next::Done(o) = next(&e, &done) else { panic!() };
        let s = &o.steps[2];
        assert_eq!(s.decision, Decision::Kept, "q's gain still counts: {}", s.reason);
        assert_eq!(s.deltas[0].verdict, ProfileVerdict::Same);
        assert_eq!(s.deltas[0].uncredited_hits_pct, Some(99.2));
        assert_eq!(s.deltas[1].verdict, ProfileVerdict::Better);
        assert_eq!(s.reason, "better: q +4.0% (noise ±2.0%)");
        // Every profile's gain on reused prompts: nothing left to keep it for.
        let mut all = done.clone();
        all[2].profiles[1].engine.prefix_cache_hit_rate = Some(0.128);
        let Next::Done(o) = next(&e, &all) else { panic!() };
        assert_eq!(o.steps[2].decision, Decision::Rejected);
        assert_eq!(
            o.steps[2].reason,
            "within noise: p +4.0% (noise ±2.0%; not credited: 99.2% prefix-cache hits on \
             prompts that should not repeat), q +4.0% (noise ±2.0%; not credited: 12.8% \
             prefix-cache hits on prompts that should not repeat)"
        );
        // Hits the configuration it replaces had too (a shared template) are not the gain's.
        let mut both = all.clone();
        for t in [0, 2] {
            both[t].profiles[0].engine.prefix_cache_hit_rate = Some(0.95);
            both[t].profiles[1].engine.prefix_cache_hit_rate = Some(0.128);
        }
        let Next::Done(o) = next(&e, &both) else { panic!() };
        assert_eq!(o.steps[2].decision, Decision::Kept, "{}", o.steps[2].reason);
        // A profile that shares prefixes by design earns its hits.
        let mut shared = exp("greedy");
        shared.profiles[0].shared_prefixes = true;
        shared.profiles[1].shared_prefixes = true;
        let Next::Done(o) = next(&shared, &all) else { panic!() };
        assert_eq!(o.steps[2].decision, Decision::Kept);
        assert_eq!(o.steps[2].deltas[0].uncredited_hits_pct, None);
    }

    /// Issue 25: baselines 0.1–0.9 % apart were ranked without a word about noise.
    #[test]
    fn a_best_baseline_within_noise_says_so() {
        let e = exp("baseline");
        let done = vec![trial(&e, "a", &[], 100.0, 0), trial(&e, "b", &[], 100.9, 0)];
        let Next::Done(o) = next(&e, &done) else { panic!() };
        assert_eq!(o.best.as_deref(), Some("b"));
        assert_eq!(o.steps[0].reason, "ok");
        assert_eq!(
            o.steps[1].reason,
            "ok; the best baseline by the score, but within noise of `a` (p +0.9% (noise \
             ±2.0%), q +0.9% (noise ±2.0%)): which engine the search starts from is noise, not \
             a measured difference"
        );
        // Ahead by more than noise: nothing to say.
        let done = vec![trial(&e, "a", &[], 100.0, 0), trial(&e, "b", &[], 110.0, 0)];
        let Next::Done(o) = next(&e, &done) else { panic!() };
        assert_eq!(o.steps[1].reason, "ok");
    }

    /// A trial whose profiles ran once per value in `runs` (the same values for p and q).
    fn repeated(e: &Experiment, engine: &str, opts: &[&str], runs: &[f64]) -> TrialResult {
        let mut t = trial(e, engine, opts, runs[0], 0);
        t.profiles = runs
            .iter()
            .enumerate()
            .flat_map(|(i, &v)| {
                ["p", "q"].map(|name| ProfileResult { repeat: i as u32, ..prof(name, v, 0) })
            })
            .collect();
        t
    }

    fn with_repeats(strategy: &str, n: u32) -> Experiment {
        let mut e = exp(strategy);
        e.acceptance.repeats = n;
        e
    }

    #[test]
    fn repeated_runs_set_the_noise_bar_from_their_spread() {
        // Runs 5 % apart in every trial: a pooled CV of 5/√2 ≈ 3.54 % (run values 97.5 and
        // 102.5 around 100, ±2.5 %), so a +8 % mean gain is within noise at 95 %.
        let e = with_repeats("greedy", 2);
        let spread = |m: f64| [m * 0.975, m * 1.025];
        let done = vec![
            repeated(&e, "a", &[], &spread(100.0)),
            repeated(&e, "b", &[], &spread(50.0)),
            repeated(&e, "a", &["fast"], &spread(108.0)),
            repeated(&e, "a", &["slow"], &spread(100.0)),
            repeated(&e, "a", &["flaky"], &spread(150.0)),
        ];
        let Next::Done(o) = next(&e, &done) else { panic!() };
        // Pool at step "fast": a, b, a+fast: 3 dof, CV = √(3 × 2 × 0.025² / 3) = 0.0354.
        let d = &o.steps[2].deltas[0];
        let cv = (2.0f64 * 0.025 * 0.025).sqrt();
        let expected = crate::noise::t_two_sided(3, 0.95) * cv * 100.0; // √(1/2 + 1/2) = 1
        assert!((d.run_noise_pct.unwrap() - expected).abs() < 1e-9, "{d:?}");
        assert!((d.delta_pct - 8.0).abs() < 1e-9);
        assert_eq!(d.noise_pct, d.run_noise_pct.unwrap());
        assert_eq!(o.steps[2].decision, Decision::Rejected, "{}", o.steps[2].reason);
        assert!(
            o.steps[2].reason.starts_with("within noise: p +8.0% (noise ±11.3%)"),
            "{}",
            o.steps[2].reason
        );
        // +50 % clears it.
        assert_eq!(o.steps[4].decision, Decision::Kept);
        assert_eq!(o.best.as_deref(), Some("a+flaky"));
    }

    #[test]
    fn runs_that_agree_leave_the_floor_and_every_run_must_pass() {
        let e = with_repeats("greedy", 2);
        let done = vec![
            repeated(&e, "a", &[], &[100.0, 100.0]),
            repeated(&e, "b", &[], &[50.0, 50.0]),
            repeated(&e, "a", &["fast"], &[104.0, 104.0]),
        ];
        let Next::Run(_) = next(&e, &done) else { panic!() };
        let pool: Vec<&TrialResult> = done.iter().collect();
        let d = deltas(&done[0], &done[2], &e, &pool);
        assert_eq!(d[0].run_noise_pct, Some(0.0));
        assert_eq!(d[0].noise_pct, 2.0);
        assert_eq!(d[0].verdict, ProfileVerdict::Better);
        // One run short, or one run with a failure: the trial does not count.
        let mut short = done[2].clone();
        short.profiles.retain(|r| r.repeat == 0);
        assert_eq!(invalid_reason(&short, &e).as_deref(), Some("profile p ran 1 of 2 times"));
        let mut failing = done[2].clone();
        failing.profiles[3] = ProfileResult { repeat: 1, ..prof("q", 104.0, 1) };
        assert!(invalid_reason(&failing, &e)
            .unwrap()
            .starts_with("profile q: 1 of 5 requests failed"));
        // A trial's value is the mean of its runs.
        assert_eq!(
            repeated(&e, "a", &[], &[90.0, 110.0]).value("p", e.objective.metric),
            Some(100.0)
        );
    }

    /// A reference run of `of` for the step trying `option`, runs as given.
    fn reference(e: &Experiment, of: &[&str], option: &str, runs: &[f64]) -> TrialResult {
        let mut t = repeated(e, "a", of, runs);
        t.spec = TrialSpec::reference(&t.spec, option);
        t
    }

    #[test]
    fn interleaved_steps_compare_neighbouring_launches() {
        let mut e = with_repeats("greedy", 2);
        e.acceptance.interleave = true;
        let mut done = vec![repeated(&e, "a", &[], &[100.0, 100.0])];
        done.push(repeated(&e, "b", &[], &[50.0, 50.0]));
        // The first step asks for the candidate and a fresh launch of the best baseline.
        assert_eq!(run_id(next(&e, &done)), "a.ref-fast | a+fast");
        // The machine slowed down by a third between the baselines and this step: the
        // reference shows it, and the candidate's +20 % over its neighbours is what counts
        // (against the stale baseline it would look like -20 %).
        done.push(reference(&e, &[], "fast", &[66.0, 68.0]));
        done.push(repeated(&e, "a", &["fast"], &[79.2, 81.6]));
        assert_eq!(run_id(next(&e, &done)), "a+fast.ref-slow | a+fast+slow");
        let d = &{
            let Next::RunPair { .. } = next(&e, &done) else { panic!() };
            let pairs = vec![(&done[2], &done[3])];
            paired_deltas(&done[2], &done[3], &e, &pairs)
        }[0];
        assert!((d.delta_pct - 20.0).abs() < 1e-9, "{d:?}");
        // Both ratios are exactly 1.2: no spread, so the floor decides.
        assert_eq!(d.run_noise_pct, Some(0.0));
        assert_eq!(d.noise_pct, 2.0);
        assert_eq!(d.verdict, ProfileVerdict::Better);
        // slow: ratios 1.05 and 0.95 around 1 -> within noise; flaky: +50 % with a spread.
        done.push(reference(&e, &["fast"], "slow", &[80.0, 80.0]));
        done.push(repeated(&e, "a", &["fast", "slow"], &[84.0, 76.0]));
        done.push(reference(&e, &["fast"], "flaky", &[80.0, 82.0]));
        done.push(repeated(&e, "a", &["fast", "flaky"], &[124.0, 120.0]));
        let Next::Done(o) = next(&e, &done) else { panic!("{:?}", next(&e, &done)) };
        let d: Vec<_> = o.steps.iter().map(|s| (s.trial.as_str(), s.decision)).collect();
        assert_eq!(
            d,
            vec![
                ("a", Decision::Baseline),
                ("b", Decision::Baseline),
                ("a+fast", Decision::Kept),
                ("a+fast+slow", Decision::Rejected),
                ("a+fast+flaky", Decision::Kept),
            ]
        );
        assert_eq!(o.steps[3].against.as_deref(), Some("a+fast.ref-slow"));
        // Pooled over three steps (3 dof): the ±5 % step widens the bar for all that follow.
        let slow = &o.steps[3].deltas[0];
        assert!(slow.run_noise_pct.unwrap() > 10.0, "{slow:?}");
        assert!(o.steps[3].reason.starts_with("within noise"), "{}", o.steps[3].reason);
        assert_eq!(o.recommended.as_deref(), Some("run-a --fast --flaky"));
    }

    #[test]
    fn a_failed_reference_leaves_the_step_unjudged() {
        let mut e = with_repeats("greedy", 2);
        e.acceptance.interleave = true;
        let mut r = reference(&e, &[], "fast", &[100.0, 100.0]);
        r.status = TrialStatus::Failed { reason: "never ready".into(), log_tail: String::new() };
        let done = vec![
            repeated(&e, "a", &[], &[100.0, 100.0]),
            repeated(&e, "b", &[], &[50.0, 50.0]),
            r,
            repeated(&e, "a", &["fast"], &[200.0, 200.0]),
        ];
        assert_eq!(run_id(next(&e, &done)), "a.ref-slow | a+slow");
        let Next::RunPair { .. } = next(&e, &done) else { panic!() };
    }

    #[test]
    fn failed_baselines_leave_no_recommendation() {
        let e = exp("greedy");
        let mut a = trial(&e, "a", &[], 100.0, 0);
        a.status = TrialStatus::Failed { reason: "never ready".into(), log_tail: String::new() };
        let b = trial(&e, "b", &[], 100.0, 4);
        let Next::Done(o) = next(&e, &[a, b]) else { panic!() };
        assert_eq!(o.best, None);
        assert_eq!(o.recommended, None);
        assert_eq!(o.steps[0].reason, "trial failed: never ready");
    }

    #[test]
    fn grid_runs_every_combination_and_picks_the_best() {
        let e = exp("grid");
        let mut done = vec![trial(&e, "a", &[], 100.0, 0), trial(&e, "b", &[], 100.0, 0)];
        let mut order = vec![];
        while let Next::Run(s) = next(&e, &done) {
            order.push(s.id.clone());
            let v = if s.id == "b+fast+slow" { 500.0 } else { 120.0 };
            let opts: Vec<&str> = s.options.iter().map(String::as_str).collect();
            done.push(trial(&e, &s.engine, &opts, v, 0));
        }
        assert_eq!(order.len(), 14);
        assert_eq!(&order[..4], ["a+fast", "a+slow", "a+flaky", "a+fast+slow"]);
        let Next::Done(o) = next(&e, &done) else { panic!() };
        assert_eq!(o.best.as_deref(), Some("b+fast+slow"));
        assert_eq!(o.recommended.as_deref(), Some("run-b --fast --slow"));
        assert_eq!(o.steps.len(), 16);
    }

    #[test]
    fn baseline_picks_the_best_engine() {
        let e = exp("baseline");
        let Next::Done(o) =
            next(&e, &[trial(&e, "a", &[], 100.0, 0), trial(&e, "b", &[], 200.0, 0)])
        else {
            panic!()
        };
        assert_eq!(o.best.as_deref(), Some("b"));
        assert_eq!(o.recommended.as_deref(), Some("run-b"));
    }

    #[test]
    fn slo_misses_make_a_trial_invalid() {
        let e = exp("baseline");
        let mut t = trial(&e, "a", &[], 100.0, 0);
        t.profiles[1].slo = Some(servelab_metrics::SloCheck {
            pass: false,
            violations: vec!["ttft_p99 900.00 ms > 500 ms".into()],
        });
        assert_eq!(
            invalid_reason(&t, &e).as_deref(),
            Some("profile q: SLO missed: ttft_p99 900.00 ms > 500 ms")
        );
        assert_eq!(score(&t, &e), None);
        let s = score(&trial(&e, "a", &[], 100.0, 0), &e).unwrap();
        assert!((s - 100.0).abs() < 1e-9, "{s}");
    }
}
