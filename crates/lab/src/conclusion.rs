//! The experiment's conclusion as teams publish it (docs/lab.md, "The conclusion"): the
//! command to serve the winner with, a per-profile table "baseline vs optimized" (Total TPS and
//! Mean TPOT, with the change in percent), the gain of every kept step against the baseline
//! (not only against the step before), one sentence per profile comparing the engines'
//! baselines, and a chart of the kept path from the baseline to the optimized configuration.
//!
//! Everything here is a pure function of the experiment, its finished trials and the
//! outcome; the report renders what it returns.

use servelab_outputs::chart::{spans, Chart, Series};
use servelab_outputs::fmt::{fixed, round2, thousands, MISSING};
use servelab_outputs::markdown::{Align, Table};

use crate::config::Experiment;
use crate::process::render;
use crate::strategy::{invalid_reason, Decision, Outcome};
use crate::trial::{TrialResult, TrialSpec};

/// The port the recommended command serves on: vLLM's default. The lab itself launched each
/// trial on a free port it chose; a user serving the winner picks a fixed one.
pub const RECOMMENDED_PORT: u16 = 8000;

/// The two figures the published lab tables show for one profile of one trial.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Figures {
    /// Prompt plus output tokens per second, the mean over the profile's runs.
    pub total_tps: Option<f64>,
    /// Mean time per output token, ms, the mean over the profile's runs.
    pub tpot_mean_ms: Option<f64>,
}

/// A profile's figures in a trial; both `None` when the trial cannot count (it failed, or a
/// run missed the acceptance rules), so an invalid run never stands for a configuration.
pub fn figures(t: &TrialResult, exp: &Experiment, profile: &str) -> Figures {
    if invalid_reason(t, exp).is_some() {
        return Figures::default();
    }
    let runs = t.runs(profile);
    let total_tps = (!runs.is_empty())
        .then(|| runs.iter().map(|r| r.total_tokens_per_s).sum::<f64>() / runs.len() as f64);
    Figures { total_tps, tpot_mean_ms: t.tpot_mean(profile) }
}

/// `(new - base) / base` in percent; `None` without both values or with a zero base.
pub fn change_pct(base: Option<f64>, new: Option<f64>) -> Option<f64> {
    match (base, new) {
        (Some(b), Some(n)) if b != 0.0 && b.is_finite() && n.is_finite() => {
            Some((n - b) / b * 100.0)
        }
        _ => None,
    }
}

/// A signed percentage with two decimals at most: `+92.8%`, `-85.67%`, or [`MISSING`].
pub fn signed_pct(v: Option<f64>) -> String {
    match v {
        Some(x) if x.is_finite() => {
            format!("{}{}%", if x >= 0.0 { "+" } else { "" }, round2(x))
        }
        _ => MISSING.to_string(),
    }
}

/// The winner against its engine's baseline, profile by profile.
#[derive(Debug, Clone, PartialEq)]
pub struct Conclusion {
    /// The baseline trial: the winner's engine with its own flags.
    pub baseline: String,
    /// The winning trial.
    pub optimized: String,
    /// `(profile, baseline figures, optimized figures)`, in the experiment's profile order.
    pub rows: Vec<(String, Figures, Figures)>,
}

fn trial<'a>(trials: &'a [TrialResult], id: &str) -> Option<&'a TrialResult> {
    trials.iter().find(|t| t.spec.id == id)
}

/// The winner and the baseline of its engine, when the experiment has a winner and that
/// baseline finished.
pub fn conclusion(exp: &Experiment, trials: &[TrialResult], o: &Outcome) -> Option<Conclusion> {
    let best = trial(trials, o.best.as_deref()?)?;
    let base = trial(trials, &TrialSpec::new(&best.spec.engine, &[]).id)?;
    let rows = exp
        .profiles
        .iter()
        .map(|p| (p.name.clone(), figures(base, exp, &p.name), figures(best, exp, &p.name)))
        .collect();
    Some(Conclusion { baseline: base.spec.id.clone(), optimized: best.spec.id.clone(), rows })
}

/// The published final table: one row per profile, the baseline's and the optimized
/// configuration's Total TPS and Mean TPOT, and each change in percent.
pub fn final_table(c: &Conclusion) -> Table {
    let mut t = Table::new([
        "Benchmark Case".to_string(),
        format!("Baseline ({}) Total TPS", c.baseline),
        format!("Optimized ({}) Total TPS", c.optimized),
        "Total TPS change".into(),
        "Baseline Mean TPOT (ms)".into(),
        "Optimized Mean TPOT (ms)".into(),
        "Mean TPOT change".into(),
    ]);
    for (profile, b, o) in &c.rows {
        t.push([
            profile.clone(),
            fixed(b.total_tps, 2),
            fixed(o.total_tps, 2),
            signed_pct(change_pct(b.total_tps, o.total_tps)),
            fixed(b.tpot_mean_ms, 2),
            fixed(o.tpot_mean_ms, 2),
            signed_pct(change_pct(b.tpot_mean_ms, o.tpot_mean_ms)),
        ]);
    }
    t
}

/// The engine's baseline step and every kept step of that engine's path, in the order run,
/// as `(step index, trial id, option added)`.
fn kept_path<'a>(
    o: &'a Outcome,
    trials: &[TrialResult],
    engine: &str,
) -> Vec<(usize, &'a str, Option<&'a str>)> {
    o.steps
        .iter()
        .enumerate()
        .filter(|(_, s)| matches!(s.decision, Decision::Baseline | Decision::Kept))
        .filter(|(_, s)| trial(trials, &s.trial).is_some_and(|t| t.spec.engine == engine))
        .map(|(i, s)| (i, s.trial.as_str(), s.option.as_deref()))
        .collect()
}

/// Every option tried on the winner's engine against that engine's baseline, rejected ones
/// included: the objective per profile and its cumulative change since the baseline (the
/// step table's deltas are against the configuration each step would replace). Rows: the
/// baseline, then each step on that engine in the order run, with its decision.
pub fn cumulative_table(exp: &Experiment, trials: &[TrialResult], o: &Outcome) -> Option<Table> {
    let best = trial(trials, o.best.as_deref()?)?;
    let base = o.steps.get(kept_path(o, trials, &best.spec.engine).first()?.0)?;
    let steps: Vec<(usize, &crate::strategy::Step)> = o
        .steps
        .iter()
        .enumerate()
        .filter(|(_, s)| trial(trials, &s.trial).is_some_and(|t| t.spec.engine == best.spec.engine))
        .filter(|(_, s)| s.decision != Decision::Baseline || s.trial == base.trial)
        .collect();
    let m = exp.objective.metric;
    let mut headers =
        vec!["#".to_string(), "trial".into(), "option added".into(), "decision".into()];
    for p in &exp.profiles {
        headers.push(format!("{} {}", p.name, m.label()));
        headers.push(format!("{} vs baseline", p.name));
    }
    let mut align = vec![Align::Right, Align::Left, Align::Left, Align::Left];
    align.extend(std::iter::repeat_n(Align::Right, exp.profiles.len() * 2));
    let mut t = Table::new(headers).with_align(&align);
    let value = |step: &crate::strategy::Step, name: &str| {
        step.values.iter().find(|(n, _)| n == name).and_then(|(_, v)| *v)
    };
    for (i, step) in steps {
        let decision = match step.decision {
            Decision::Baseline => "baseline",
            Decision::Kept => "kept",
            Decision::Rejected => "rejected",
        };
        let option = step.option.as_deref().unwrap_or(MISSING);
        let mut row = vec![i.to_string(), step.trial.clone(), option.into(), decision.into()];
        for p in &exp.profiles {
            let v = value(step, &p.name);
            row.push(fixed(v, 1));
            row.push(signed_pct(change_pct(value(base, &p.name), v)));
        }
        t.push(row);
    }
    Some(t)
}

/// One sentence comparing two engines' baselines on a profile, faster engine first, as
/// published: "`A` Total TPS = N, `B` Total TPS = N. `A` is faster by N tok/s (N%); Mean
/// TPOT = N ms vs N ms, reduced by N ms (N%)." The percentages are of the slower engine's
/// figures.
pub fn engine_sentence(profile: &str, a: (&str, Figures), b: (&str, Figures)) -> String {
    let ((fa, a_fig), (fb, b_fig)) = match (a.1.total_tps, b.1.total_tps) {
        (Some(x), Some(y)) if y > x => (b, a),
        _ => (a, b),
    };
    let tps = |v: Option<f64>| v.map_or(MISSING.to_string(), |v| thousands(v, 2));
    let mut s = format!(
        "{profile}: `{fa}` Total TPS = {}, `{fb}` Total TPS = {}.",
        tps(a_fig.total_tps),
        tps(b_fig.total_tps)
    );
    match (a_fig.total_tps, b_fig.total_tps) {
        (Some(x), Some(y)) if x == y => s.push_str(&format!(" `{fa}` and `{fb}` are as fast")),
        (Some(x), Some(y)) => {
            let pct = change_pct(Some(y), Some(x)).map_or(MISSING.to_string(), round2);
            s.push_str(&format!(" `{fa}` is faster by {} tok/s ({pct}%)", thousands(x - y, 2)));
        }
        (None, _) => s.push_str(&format!(" `{fa}` has no valid baseline here")),
        (_, None) => s.push_str(&format!(" `{fb}` has no valid baseline here")),
    }
    let ms = |v: Option<f64>| v.map_or(MISSING.to_string(), |v| format!("{} ms", thousands(v, 2)));
    s.push_str(&format!("; Mean TPOT = {} vs {}", ms(a_fig.tpot_mean_ms), ms(b_fig.tpot_mean_ms)));
    if let (Some(x), Some(y)) = (a_fig.tpot_mean_ms, b_fig.tpot_mean_ms) {
        if x == y {
            s.push_str(", unchanged");
        } else {
            let word = if x < y { "reduced" } else { "increased" };
            let pct = change_pct(Some(y), Some(x)).map_or(MISSING.to_string(), |p| round2(p.abs()));
            s.push_str(&format!(", {word} by {} ms ({pct}%)", thousands((x - y).abs(), 2)));
        }
    }
    s.push('.');
    s
}

/// What a trial measured on a profile, whether or not it counts as a configuration (`None`
/// only when the trial failed or never ran the profile): an engine's baseline that misses
/// the SLO is still that engine's figure.
fn measured(t: &TrialResult, profile: &str) -> Figures {
    let runs = t.runs(profile);
    if t.failure().is_some() || runs.is_empty() {
        return Figures::default();
    }
    let total = runs.iter().map(|r| r.total_tokens_per_s).sum::<f64>() / runs.len() as f64;
    Figures { total_tps: Some(total), tpot_mean_ms: t.tpot_mean(profile) }
}

/// The engines' baselines compared, per profile: the fastest baseline against each other
/// engine's (by Total TPS), with the measured figures; a baseline that cannot count as a
/// configuration (it missed the SLO or failed requests) is followed by why. Empty with a
/// single engine.
pub fn engine_sentences(exp: &Experiment, trials: &[TrialResult]) -> Vec<String> {
    if exp.engines.len() < 2 {
        return Vec::new();
    }
    let mut out = Vec::new();
    for p in &exp.profiles {
        let mut bases: Vec<(&str, Figures, Option<String>)> = exp
            .engines
            .iter()
            .map(|e| match trial(trials, &e.name) {
                Some(t) => (e.name.as_str(), measured(t, &p.name), invalid_reason(t, exp)),
                None => (e.name.as_str(), Figures::default(), None),
            })
            .collect();
        // Fastest first; engines without figures last, in file order.
        bases.sort_by(|x, y| {
            let v = |f: &Figures| f.total_tps.unwrap_or(f64::NEG_INFINITY);
            v(&y.1).total_cmp(&v(&x.1))
        });
        let caveat = |(name, _, why): &(&str, Figures, Option<String>)| {
            why.as_ref().map(|w| format!(" `{name}` does not count as a configuration: {w}."))
        };
        for other in &bases[1..] {
            let mut s = engine_sentence(&p.name, (bases[0].0, bases[0].1), (other.0, other.1));
            // Within noise, "faster" is not a finding: say so.
            let pair = (trial(trials, bases[0].0), trial(trials, other.0));
            if let (Some(fast), Some(slow)) = pair {
                let valid =
                    invalid_reason(fast, exp).is_none() && invalid_reason(slow, exp).is_none();
                let d = crate::strategy::deltas(slow, fast, exp, &[fast, slow]);
                if let Some(d) = d.iter().find(|d| d.profile == p.name).filter(|_| valid) {
                    if d.verdict != crate::strategy::ProfileVerdict::Better {
                        s.push_str(&format!(
                            " The difference ({:+.1}%) is within noise (±{:.1}%): neither engine \
                             is measurably faster here.",
                            d.delta_pct, d.noise_pct
                        ));
                    }
                }
            }
            for c in [caveat(&bases[0]), caveat(other)].into_iter().flatten() {
                s.push_str(&c);
            }
            out.push(s);
        }
    }
    out
}

/// Total TPS along the kept path, one line per profile: x is the position on the path (0 is
/// the baseline, the last point the optimized configuration), each point noted with the
/// option it added and its change against the baseline.
pub fn chart(exp: &Experiment, trials: &[TrialResult], o: &Outcome) -> Option<Chart> {
    let best = trial(trials, o.best.as_deref()?)?;
    let path = kept_path(o, trials, &best.spec.engine);
    let base = trial(trials, path.first()?.1)?;
    let series: Vec<Series> = exp
        .profiles
        .iter()
        .map(|p| {
            let b = figures(base, exp, &p.name).total_tps;
            let (mut points, mut notes) = (Vec::new(), Vec::new());
            for (x, (_, id, option)) in path.iter().enumerate() {
                let Some(t) = trial(trials, id) else { continue };
                let Some(v) = figures(t, exp, &p.name).total_tps else { continue };
                points.push((x as f64, v));
                notes.push(match option {
                    None => format!("baseline {}", thousands(v, 0)),
                    Some(opt) => format!("+{opt} {}", signed_pct(change_pct(b, Some(v)))),
                });
            }
            Series { notes, ..Series::line(p.name.clone(), points) }
        })
        .collect();
    let ys = series.iter().flat_map(|s| s.points.iter().map(|p| p.1));
    let y_log = spans(ys, 8.0).then_some(10.0);
    Some(Chart {
        name: "baseline-vs-optimized".into(),
        title: format!("Total TPS per profile: {} to {}", base.spec.id, best.spec.id),
        x_label: "kept step (0 = baseline, last = optimized)".into(),
        y_label: "Total TPS (tok/s)".into(),
        series,
        x_log: None,
        y_log,
        mark: None,
    })
}

/// `s` as one shell word: as is when it holds only safe characters, else single-quoted.
pub fn shell_word(s: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || "_-./:,=+@%".contains(c);
    if !s.is_empty() && s.chars().all(safe) {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// How a pasteable command names the servelab binary at `path`: `servelab` when that is its
/// file name (the lab's own build folder, `target/debug/servelab`, is of no use to a reader),
/// else the path as given.
fn shown(path: &str) -> &str {
    if std::path::Path::new(path).file_name().is_some_and(|n| n == "servelab") {
        "servelab"
    } else {
        path
    }
}

/// The command to serve `template` (an engine command with the kept flags) as a user would
/// paste it: the engine's environment first (`KEY=value ...`), `{port}` as
/// [`RECOMMENDED_PORT`] and `{servelab}` as the servelab binary that ran the lab, named
/// `servelab` when that is its file name (the trials keep the full path they ran).
pub fn pasteable_command(exp: &Experiment, engine: &str, template: &str, servelab: &str) -> String {
    let r = |t: &str| render(t, RECOMMENDED_PORT, shown(servelab));
    let env = exp
        .engines
        .iter()
        .find(|e| e.name == engine)
        .map(|e| e.env.iter().map(|(k, v)| format!("{k}={} ", shell_word(&r(v)))).collect())
        .unwrap_or_else(String::new);
    format!("{env}{}", r(template))
}

/// The served base URL of the recommended command.
pub fn pasteable_base_url(exp: &Experiment, engine: &str, servelab: &str) -> Option<String> {
    let e = exp.engines.iter().find(|e| e.name == engine)?;
    Some(render(&e.base_url, RECOMMENDED_PORT, shown(servelab)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::parse;
    use crate::strategy::{next, Next};
    use crate::trial::{EngineFigures, ProfileResult, TrialStatus};

    fn exp() -> Experiment {
        parse(
            "strategy: greedy\nengines:\n  - {name: vllm, command: 'vllm serve m --port {port}', \
             env: {CUDA_VISIBLE_DEVICES: '0,1', NOTE: 'a b'}}\n  - {name: sglang, command: run-b}\n\
             profiles:\n  - {name: p, num_prompts: 4}\n  - {name: q, num_prompts: 4}\n\
             options:\n  fast: --fast\n  slow: --slow\n  faster: --faster\n",
        )
        .unwrap()
    }

    fn prof(name: &str, tps: f64, tpot: f64) -> ProfileResult {
        ProfileResult {
            profile: name.to_string(),
            repeat: 0,
            after_runs: Some(0),
            completed: 4,
            failed: 0,
            duration_s: 1.0,
            total_tokens_per_s: tps,
            output_tokens_per_s: tps,
            requests_per_s: 4.0,
            ttft_p99_ms: None,
            tpot_p99_ms: None,
            tpot_mean_ms: Some(tpot),
            slo: None,
            failures: vec![],
            request_total_tokens: vec![tps / 4.0; 4],
            request_output_tokens: vec![tps / 4.0; 4],
            engine: EngineFigures::default(),
            interrupted: false,
            summary_block: None,
        }
    }

    /// A trial with profile p at `tps` / `tpot` and profile q at ten times the throughput.
    fn trial(e: &Experiment, engine: &str, opts: &[&str], tps: f64, tpot: f64) -> TrialResult {
        let spec = TrialSpec::new(engine, &opts.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        let template = crate::strategy::command_template(e, &spec).unwrap();
        TrialResult {
            command: template.replace("{port}", "41000"),
            command_template: template,
            spec,
            status: TrialStatus::Finished,
            startup_secs: Some(0.1),
            profiles: vec![prof("p", tps, tpot), prof("q", tps * 10.0, tpot / 2.0)],
        }
    }

    /// vllm 1000 beats sglang 500; +fast kept (1500), +slow rejected (900), +faster kept
    /// (3000).
    fn finished() -> (Experiment, Vec<TrialResult>, Outcome) {
        let e = exp();
        let trials = vec![
            trial(&e, "vllm", &[], 1000.0, 20.0),
            trial(&e, "sglang", &[], 500.0, 40.0),
            trial(&e, "vllm", &["fast"], 1500.0, 15.0),
            trial(&e, "vllm", &["fast", "slow"], 900.0, 30.0),
            trial(&e, "vllm", &["fast", "faster"], 3000.0, 10.0),
        ];
        let Next::Done(o) = next(&e, &trials) else { panic!("not done") };
        // The winner's first run as a trial saves it now: with its summary block.
        let mut trials = trials;
        trials[4].profiles[0].summary_block = Some(
            "============ Serving Benchmark Result ============\n\
             Successful requests:                     4\n\
             Total token throughput (tok/s):          3000.00\n\
             Mean TPOT (ms):                          10.00\n\
             =================================================="
                .into(),
        );
        (e, trials, o)
    }

    #[test]
    fn the_published_sentence_with_its_figures() {
        let a = Figures { total_tps: Some(9632.35), tpot_mean_ms: Some(25.90) };
        let b = Figures { total_tps: Some(4996.0), tpot_mean_ms: Some(180.74) };
        let s = engine_sentence("throughput", ("SGLang", b), ("vLLM", a));
        assert_eq!(
            s,
            "throughput: `vLLM` Total TPS = 9,632.35, `SGLang` Total TPS = 4,996.00. `vLLM` is \
             faster by 4,636.35 tok/s (92.8%); Mean TPOT = 25.90 ms vs 180.74 ms, reduced by \
             154.84 ms (85.67%)."
        );
        let slower_tpot = Figures { tpot_mean_ms: Some(200.0), ..a };
        let s = engine_sentence("t", ("a", slower_tpot), ("b", b));
        assert!(s.ends_with("Mean TPOT = 200.00 ms vs 180.74 ms, increased by 19.26 ms (10.66%)."));
        let s = engine_sentence("t", ("a", a), ("b", Figures::default()));
        assert_eq!(
            s,
            "t: `a` Total TPS = 9,632.35, `b` Total TPS = -. `b` has no valid baseline here; \
             Mean TPOT = 25.90 ms vs -."
        );
    }

    #[test]
    fn the_final_table_is_the_winner_against_its_baseline() {
        let (e, trials, o) = finished();
        assert_eq!(o.best.as_deref(), Some("vllm+fast+faster"));
        let c = conclusion(&e, &trials, &o).unwrap();
        assert_eq!((c.baseline.as_str(), c.optimized.as_str()), ("vllm", "vllm+fast+faster"));
        let t = final_table(&c);
        assert_eq!(t.rows[0], ["p", "1000.00", "3000.00", "+200.0%", "20.00", "10.00", "-50.0%"]);
        assert_eq!(t.rows[1][0..4], ["q", "10000.00", "30000.00", "+200.0%"]);
        assert_eq!(t.headers[1], "Baseline (vllm) Total TPS");
    }

    #[test]
    fn every_option_is_measured_against_the_baseline_rejected_ones_too() {
        let (e, trials, o) = finished();
        let t = cumulative_table(&e, &trials, &o).unwrap();
        let rows: Vec<Vec<&str>> =
            t.rows.iter().map(|r| r.iter().map(String::as_str).collect()).collect();
        assert_eq!(
            rows,
            [
                ["0", "vllm", "-", "baseline", "1000.0", "+0.0%", "10000.0", "+0.0%"],
                ["2", "vllm+fast", "fast", "kept", "1500.0", "+50.0%", "15000.0", "+50.0%"],
                ["3", "vllm+fast+slow", "slow", "rejected", "900.0", "-10.0%", "9000.0", "-10.0%"],
                [
                    "4",
                    "vllm+fast+faster",
                    "faster",
                    "kept",
                    "3000.0",
                    "+200.0%",
                    "30000.0",
                    "+200.0%"
                ],
            ]
        );
        // The step table says +100% for the last step (against vllm+fast); here it is +200%.
        assert_eq!(o.steps[4].deltas[0].delta_pct, 100.0);
    }

    #[test]
    fn engine_baselines_are_compared_per_profile() {
        let (e, trials, _) = finished();
        let s = engine_sentences(&e, &trials);
        assert_eq!(s.len(), 2);
        assert_eq!(
            s[0],
            "p: `vllm` Total TPS = 1,000.00, `sglang` Total TPS = 500.00. `vllm` is faster by \
             500.00 tok/s (100.0%); Mean TPOT = 20.00 ms vs 40.00 ms, reduced by 20.00 ms (50.0%)."
        );
        assert!(s[1].starts_with("q: `vllm` Total TPS = 10,000.00"), "{}", s[1]);
        // A baseline that misses the acceptance rules keeps its measured figures, and says so.
        let mut trials = trials;
        trials[1].profiles[0].failed = 1;
        let s = engine_sentences(&e, &trials);
        assert!(
            s[0].starts_with("p: `vllm` Total TPS = 1,000.00, `sglang` Total TPS = 500.00.")
                && s[0].ends_with(
                    "(50.0%). `sglang` does not count as a configuration: profile p: 1 of 5 \
                     requests failed; success 80.0% < 100.0%."
                ),
            "{}",
            s[0]
        );
    }

    /// Issue 25: engines 0.1–0.9 % apart were called faster and slower; within noise the
    /// sentence says that neither is measurably faster.
    #[test]
    fn engine_baselines_within_noise_say_so() {
        let e = exp();
        let trials =
            vec![trial(&e, "vllm", &[], 1004.0, 20.0), trial(&e, "sglang", &[], 1000.0, 20.0)];
        let s = engine_sentences(&e, &trials);
        assert!(
            s[0].ends_with(
                "`vllm` is faster by 4.00 tok/s (0.4%); Mean TPOT = 20.00 ms vs 20.00 ms, \
                 unchanged. The difference (+0.4%) is within noise (±2.0%): neither engine is \
                 measurably faster here."
            ),
            "{}",
            s[0]
        );
    }

    #[test]
    fn the_chart_follows_the_kept_path() {
        let (e, trials, o) = finished();
        let c = chart(&e, &trials, &o).unwrap();
        assert_eq!(c.series.len(), 2);
        assert_eq!(c.series[0].points, [(0.0, 1000.0), (1.0, 1500.0), (2.0, 3000.0)]);
        assert_eq!(c.series[0].notes, ["baseline 1,000", "+fast +50.0%", "+faster +200.0%"]);
        // p and q are ten times apart: a log axis.
        assert_eq!(c.y_log, Some(10.0));
    }

    #[test]
    fn the_recommended_command_has_no_placeholders() {
        let (e, trials, o) = finished();
        let best = trials.iter().find(|t| Some(&t.spec.id) == o.best.as_ref()).unwrap();
        let cmd = pasteable_command(&e, "vllm", &best.command_template, "/bin/servelab");
        assert_eq!(
            cmd,
            "CUDA_VISIBLE_DEVICES=0,1 NOTE='a b' vllm serve m --port 8000 --fast --faster"
        );
        assert_eq!(pasteable_base_url(&e, "vllm", "s").as_deref(), Some("http://127.0.0.1:8000"));
        assert_eq!(
            render("{servelab} sim serve --port {port}", 8000, "/b/s"),
            "/b/s sim serve --port 8000"
        );
        // A simulator rehearsal names the binary `servelab`, not the lab's build folder.
        let sim = "{servelab} sim serve --port {port}";
        let cmd = pasteable_command(&e, "vllm", sim, "/work/target/debug/servelab");
        assert_eq!(cmd, "CUDA_VISIBLE_DEVICES=0,1 NOTE='a b' servelab sim serve --port 8000");
        let cmd = pasteable_command(&e, "vllm", sim, "/opt/servelab-0.2");
        assert!(cmd.ends_with("/opt/servelab-0.2 sim serve --port 8000"), "{cmd}");
        assert_eq!(shell_word("it's"), "'it'\\''s'");
        assert_eq!(shell_word(""), "''");
    }

    #[test]
    fn invalid_trials_have_no_figures() {
        let e = exp();
        let mut t = trial(&e, "vllm", &[], 100.0, 5.0);
        assert_eq!(
            figures(&t, &e, "p"),
            Figures { total_tps: Some(100.0), tpot_mean_ms: Some(5.0) }
        );
        t.profiles[0].failed = 1;
        assert_eq!(figures(&t, &e, "p"), Figures::default());
        assert_eq!(change_pct(Some(0.0), Some(1.0)), None);
        assert_eq!(signed_pct(Some(-85.674)), "-85.67%");
    }

    /// The HTML page with each inline chart replaced by `[svg]` (the charts are the chart
    /// backend's, snapshotted as models).
    fn without_svgs(page: &str) -> String {
        let mut out = String::new();
        for part in page.split("<figure class=\"chart\">") {
            match part.split_once("</figure>") {
                Some((_, rest)) => {
                    out.push_str("<figure class=\"chart\">[svg]</figure>");
                    out.push_str(rest);
                }
                None => out.push_str(part),
            }
        }
        out
    }

    #[test]
    fn lab_html_and_conclusion_chart_snapshots() {
        let (e, trials, o) = finished();
        let html = crate::report::html(&e, &trials, Some(&o), "/opt/servelab");
        insta::assert_snapshot!("lab_report_html", without_svgs(&html));
        insta::assert_debug_snapshot!("baseline_vs_optimized_chart", chart(&e, &trials, &o));
    }

    #[test]
    fn notes_say_what_greedy_skipped_and_what_quantizes() {
        let (_, trials, o) = finished();
        let e = parse(
            "strategy: greedy\nengines:\n  - {name: vllm, command: 'vllm serve m-awq --port {port}'}\n\
             \x20 - {name: sglang, command: run-b}\nprofiles:\n  - {name: p, num_prompts: 4}\n\
             \x20 - {name: q, num_prompts: 4}\noptions:\n  fast: --fast\n  slow: --slow\n\
             \x20 faster: --faster\n  kv8: --kv-cache-dtype fp8\n",
        )
        .unwrap();
        let n = crate::sections::notes(&e, &trials, &o);
        assert_eq!(
            n,
            [
                "Greedy search: each option was tried once, in file order, on top of the options \
                 kept before it; 4 of the 16 combinations of the 4 options were measured on \
                 `vllm`. Rejected options (`slow`) were not tried again on top of options kept \
                 after them, nor together: one of them might help in a combination never \
                 measured, so the recommendation is a local optimum. The other engines \
                 (`sglang`) ran their own command only.",
                "Never tried: `kv8` (the search ended, or no valid configuration to build on).",
                "`kv8` (`--kv-cache-dtype fp8`) quantizes the KV cache (fp8): it can change the \
                 model's outputs, which servelab does not measure; check accuracy on your task \
                 before adopting it (it was not tried).",
                "Engine `vllm`'s own command quantizes weights or activations (awq), in every \
                 trial: its figures are of that quantization.",
            ]
        );
        use crate::sections::quantizes;
        assert_eq!(quantizes("-ctk q8_0"), Some(("the KV cache", "q8_0".to_string())));
        assert_eq!(
            quantizes("--kv-cache-dtype=fp8_e5m2"),
            Some(("the KV cache", "fp8_e5m2".into()))
        );
        assert_eq!(quantizes("--quantization awq"), Some(("weights or activations", "awq".into())));
        assert_eq!(
            quantizes("-m model.Q4_1.gguf -np 4"),
            Some(("weights or activations", "q4_1".into()))
        );
        assert_eq!(quantizes("-np 8 -t 1 --max-num-seqs 32"), None);
    }

    /// The lab report in headless Chromium (no network): both charts are in the DOM with a
    /// line per profile, and the console logged nothing. Skipped, with a message, when
    /// Chromium is absent, unless SERVELAB_REQUIRE_BROWSER=1 (CI with Chromium).
    #[test]
    fn lab_html_renders_in_headless_chromium() {
        use servelab_outputs::browser;
        let Some(chromium) = browser::chromium("lab_html_renders_in_headless_chromium") else {
            return;
        };
        let (e, trials, o) = finished();
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("report.html");
        std::fs::write(&file, crate::report::html(&e, &trials, Some(&o), "/opt/servelab")).unwrap();
        let (dom, log) = browser::dump_dom(chromium, &file, &dir.path().join("profile"));
        assert_eq!(dom.matches("class=\"chart\"").count(), 2, "two charts in the DOM: {dom}");
        assert!(dom.matches("<polyline").count() >= 4, "a line per profile on each chart");
        assert!(dom.contains("<h2>Baseline vs optimized</h2>") && dom.contains("<h2>Notes</h2>"));
        assert!(dom.contains("<h3>vllm+fast+faster</h3>"), "the experiment sections");
        assert!(!log.contains("CONSOLE") && !log.contains("Uncaught"), "{log}");
    }

    #[test]
    fn a_rebuilt_report_lists_trials_in_step_order() {
        let (_, trials, o) = finished();
        let mut by_id = trials.clone();
        by_id.sort_by(|a, b| a.spec.id.cmp(&b.spec.id));
        let ids: Vec<String> =
            crate::report::in_step_order(by_id, &o).into_iter().map(|t| t.spec.id).collect();
        assert_eq!(ids, trials.iter().map(|t| t.spec.id.clone()).collect::<Vec<_>>());
    }

    #[test]
    fn the_report_as_published() {
        let (e, trials, o) = finished();
        let md = crate::report::markdown(&e, &trials, Some(&o), "/opt/servelab");
        insta::assert_snapshot!("lab_report_markdown", md);
        let html = crate::report::html(&e, &trials, Some(&o), "/opt/servelab");
        assert!(html.contains("<h2>Baseline vs optimized</h2>"), "{html}");
        assert!(html.contains("<li>p: <code>vllm</code> Total TPS = 1,000.00"), "{html}");
        assert!(html.contains("<pre>CUDA_VISIBLE_DEVICES=0,1 NOTE='a b' vllm serve"), "{html}");
        // Two charts inline: baseline vs optimized, and the objective per step.
        assert_eq!(html.matches("<figure class=\"chart\"><svg").count(), 2, "{html}");
    }
}
