//! The experiment report: the recommended command (pasteable), the conclusion as published
//! (baseline vs optimized per profile, the engines' baselines compared, the kept steps
//! against the baseline: [`crate::conclusion`]), the trials (baselines first), the step table
//! (option, delta per profile against the step before, kept or rejected and why), the notes
//! (what the search skipped, options that quantize: [`crate::sections`]), one section per
//! experiment with its full summary blocks, the engine's own figures, the failed trials' log
//! tails, and charts. Written as `report.md`,
//! `report.html` (self-contained), `chart.svg`, `baseline-vs-optimized.svg` and `lab.json`.

use std::path::Path;

use servelab_outputs::chart::{render_svg, Chart, Series};
use servelab_outputs::fmt::{fixed, percent, MISSING};
use servelab_outputs::html::{esc, figure, page, table as html_table};
use servelab_outputs::markdown::{Align, Table};

use crate::conclusion;
use crate::config::Experiment;
use crate::error::LabError;
use crate::noise::pooled_cv;
use crate::sections::{experiments, notes};
use crate::strategy::{Decision, Outcome, Step};
use crate::trial::{TrialResult, TrialStatus};

/// The file the experiment is copied to, so `--resume` and `lab report` read the same one.
pub const EXPERIMENT_COPY: &str = "experiment.yaml";

/// The chart of the kept path from the baseline to the optimized configuration.
pub const CONCLUSION_CHART: &str = "baseline-vs-optimized.svg";

fn objective_line(exp: &Experiment, trials: &[TrialResult]) -> String {
    let slo = match &exp.objective.slo {
        Some(s) => {
            format!(" under the SLO {}", s.text("≤"))
        }
        None => String::new(),
    };
    let a = &exp.acceptance;
    let (runs, run_bar) = if a.interleave {
        (
            format!(
                " Each greedy step launched the candidate and the configuration it would \
                 replace in turn (A B B A ...), {} launches each, one run of every profile per \
                 launch; a step is judged on the ratios of neighbouring launches.",
                a.repeats
            ),
            format!(
                ", the {:.0}% interval of the mean log ratio, its spread pooled over the steps \
                 so far",
                a.confidence * 100.0
            ),
        )
    } else if a.repeats > 1 {
        (
            format!(" Each profile ran {} times per trial (the mean counts).", a.repeats),
            format!(
                ", the {:.0}% interval of the run-to-run spread pooled over the trials so far",
                a.confidence * 100.0
            ),
        )
    } else {
        (String::new(), String::new())
    };
    format!(
        "Strategy {}; objective: maximise {}{slo}.{runs} A configuration counts only with \
         success rate ≥ {:.1}% in every run; a change counts when it exceeds max({}%, the \
         {:.0}% bootstrap interval of the difference{run_bar}). {}",
        exp.strategy.name(),
        exp.objective.metric.label(),
        a.min_success_rate * 100.0,
        a.min_gain_pct,
        a.confidence * 100.0,
        cache_line(exp, trials)
    )
}

/// What each run's prompts and cache state were, so a prefix cache's gain can be judged.
/// Trials saved before runs recorded their cache state were also measured before profiles
/// drew prompts of their own: said so, rather than claimed for them.
pub fn cache_line(exp: &Experiment, trials: &[TrialResult]) -> String {
    let old = trials.iter().flat_map(|t| &t.profiles).any(|p| p.after_runs.is_none());
    if old {
        return "Cache state: not recorded. These trials were measured before servelab gave \
                each profile and repeat prompts of its own: profiles with one seed shared \
                prompts (a 1,000-token random prompt is a prefix of the 1,024-token one), \
                which a prefix cache could serve across profiles, so a gain of an option that \
                turns one on is not established here."
            .to_string();
    }
    let shared: Vec<&str> =
        exp.profiles.iter().filter(|p| p.shared_prefixes).map(|p| p.name.as_str()).collect();
    let shared = if shared.is_empty() {
        String::new()
    } else {
        format!(" (except {}, which share prompts on purpose)", shared.join(", "))
    };
    format!(
        "Cache state: every launch starts a fresh engine; its first run starts with a cold \
         cache and later runs follow runs of other prompts (the engine metrics say which). \
         Each profile and each repeat sends prompts of its own, drawn from lab seed {}{shared}, \
         so no run is served from another's prefix cache; a gain in a profile that does not \
         reuse prefixes by design, made with a prefix-cache hit rate over {:.0} points above the \
         configuration it replaces, is not credited.",
        exp.seed,
        crate::seeds::REUSE_BAR * 100.0
    )
}

/// Every trial: status, startup time, objective per profile, success rate.
pub fn trials_table(exp: &Experiment, trials: &[TrialResult]) -> Table {
    let mut headers = vec!["trial".to_string(), "status".into(), "startup s".into()];
    for p in &exp.profiles {
        headers.push(format!("{} {}", p.name, exp.objective.metric.label()));
        headers.push(format!("{} ok/failed", p.name));
        headers.push(format!("{} Mean TPOT (ms)", p.name));
    }
    let n = headers.len();
    let mut align = vec![Align::Left, Align::Left];
    align.extend(std::iter::repeat_n(Align::Right, n - 2));
    let mut t = Table::new(headers).with_align(&align);
    for tr in trials {
        let mut row = vec![
            tr.spec.id.clone(),
            match &tr.status {
                TrialStatus::Finished => "finished".to_string(),
                TrialStatus::Failed { .. } => "failed".to_string(),
            },
            fixed(tr.startup_secs, 1),
        ];
        for p in &exp.profiles {
            let runs = tr.runs(&p.name);
            let Some(mean) = tr.value(&p.name, exp.objective.metric) else {
                row.extend([MISSING.to_string(), MISSING.to_string(), MISSING.to_string()]);
                continue;
            };
            // With repeats: the mean, and how far apart its runs were.
            let spread = match pooled_cv(&[runs
                .iter()
                .map(|r| r.value(exp.objective.metric))
                .collect::<Vec<_>>()])
            {
                Some((cv, _)) => format!(" ±{:.1}%", cv * 100.0),
                None => String::new(),
            };
            row.push(format!("{mean:.1}{spread}"));
            let (ok, failed) =
                runs.iter().fold((0, 0), |(o, f), r| (o + r.completed, f + r.failed));
            row.push(format!("{ok}/{failed}"));
            row.push(fixed(tr.tpot_mean(&p.name), 2));
        }
        t.push(row);
    }
    t
}

fn decision(d: Decision) -> &'static str {
    match d {
        Decision::Baseline => "baseline",
        Decision::Kept => "kept",
        Decision::Rejected => "rejected",
    }
}

/// One row per step: option, the delta per profile against the trial it would replace,
/// the decision and why.
pub fn steps_table(exp: &Experiment, steps: &[Step]) -> Table {
    let mut headers = vec!["#".to_string(), "trial".into(), "option".into(), "vs".into()];
    for p in &exp.profiles {
        headers.push(format!("{} Δ", p.name));
    }
    headers.push("decision".into());
    headers.push("why".into());
    let mut align = vec![Align::Right, Align::Left, Align::Left, Align::Left];
    align.extend(std::iter::repeat_n(Align::Right, exp.profiles.len()));
    align.extend([Align::Left, Align::Left]);
    let mut t = Table::new(headers).with_align(&align);
    for (i, s) in steps.iter().enumerate() {
        let mut row = vec![
            i.to_string(),
            s.trial.clone(),
            s.option.clone().unwrap_or_else(|| MISSING.into()),
            s.against.clone().unwrap_or_else(|| MISSING.into()),
        ];
        for p in &exp.profiles {
            let d = s.deltas.iter().find(|d| d.profile == p.name);
            row.push(d.map_or(MISSING.to_string(), |d| format!("{:+.1}%", d.delta_pct)));
        }
        row.push(decision(s.decision).to_string());
        row.push(s.reason.clone());
        t.push(row);
    }
    t
}

/// The engine's `/metrics` figures per trial and profile (only rows that have any).
pub fn engine_table(trials: &[TrialResult]) -> Table {
    let mut t = Table::new([
        "trial",
        "profile",
        "started on",
        "prefix-cache hit",
        "peak KV-cache usage",
        "preemptions",
        "spec-decode accept",
        "peak running",
        "peak waiting",
        "running after",
        "prompt tokens",
        "generation tokens",
    ])
    .with_align(&[[Align::Left; 3].as_slice(), &[Align::Right; 9]].concat());
    let (pct, num) = (percent, fixed);
    for tr in trials {
        for p in &tr.profiles {
            let e = &p.engine;
            if *e == Default::default() {
                continue;
            }
            let name = if p.repeat > 0 {
                format!("{} #{}", p.profile, p.repeat + 1)
            } else {
                p.profile.clone()
            };
            let started = match p.after_runs {
                Some(0) => "fresh engine".to_string(),
                Some(1) => "warmed by 1 run".to_string(),
                Some(n) => format!("warmed by {n} runs"),
                None => MISSING.to_string(),
            };
            t.push([
                tr.spec.id.clone(),
                name,
                started,
                pct(e.prefix_cache_hit_rate),
                pct(e.kv_cache_usage),
                num(e.preemptions, 0),
                pct(e.spec_decode_acceptance),
                num(e.peak_requests_running, 0),
                num(e.peak_requests_waiting, 0),
                num(e.requests_running, 0),
                num(e.prompt_tokens, 0),
                num(e.generation_tokens, 0),
            ]);
        }
    }
    t
}

/// The objective per step, one line per profile (x: step number).
pub fn chart(exp: &Experiment, steps: &[Step]) -> Chart {
    let series = exp
        .profiles
        .iter()
        .map(|p| {
            let points = steps
                .iter()
                .enumerate()
                .filter_map(|(i, s)| {
                    let v = s.values.iter().find(|(n, _)| *n == p.name)?.1?;
                    Some((i as f64, v))
                })
                .collect();
            Series::line(p.name.clone(), points)
        })
        .collect();
    Chart {
        name: "chart".into(),
        title: format!("{} per step", exp.objective.metric.label()),
        x_label: "step (see the step table)".into(),
        y_label: exp.objective.metric.label(),
        series,
        x_log: None,
        y_log: None,
        mark: None,
    }
}

/// The winner's serving command as a user pastes it, and the URL it serves (see
/// [`conclusion::pasteable_command`]).
fn pasteable(
    exp: &Experiment,
    trials: &[TrialResult],
    o: &Outcome,
    servelab: &str,
) -> Option<(String, Option<String>)> {
    let template = o.recommended.as_deref()?;
    let best = trials.iter().find(|t| Some(&t.spec.id) == o.best.as_ref())?;
    let engine = &best.spec.engine;
    Some((
        conclusion::pasteable_command(exp, engine, template, servelab),
        conclusion::pasteable_base_url(exp, engine, servelab),
    ))
}

fn unfinished_text() -> &'static str {
    "The experiment is unfinished: continue it with `servelab lab run EXPERIMENT --resume \
     --output-dir DIR`."
}

fn no_winner_text() -> &'static str {
    "No configuration was valid (every baseline failed or missed the acceptance rules): no \
     recommendation."
}

fn kept_list(o: &Outcome) -> String {
    if o.kept.is_empty() {
        "none".to_string()
    } else {
        o.kept.join(", ")
    }
}

fn serve_line(url: Option<&str>) -> String {
    match url {
        Some(u) => format!(
            "Serve it with this command (port {}; choose your own), then benchmark {u}:",
            conclusion::RECOMMENDED_PORT
        ),
        None => "Serve it with this command:".to_string(),
    }
}

fn recommendation_md(
    exp: &Experiment,
    trials: &[TrialResult],
    o: Option<&Outcome>,
    servelab: &str,
) -> String {
    let Some(o) = o else { return format!("{}\n", unfinished_text()) };
    match pasteable(exp, trials, o, servelab) {
        Some((cmd, url)) => format!(
            "Best configuration: `{}` (options kept: {}).\n\n{}\n\n```sh\n{cmd}\n```\n",
            o.best.as_deref().unwrap_or(""),
            kept_list(o),
            serve_line(url.as_deref())
        ),
        None => format!("{}\n", no_winner_text()),
    }
}

/// The conclusion sections in Markdown: baseline vs optimized, the engines' baselines, the
/// kept steps against the baseline.
fn conclusion_md(exp: &Experiment, trials: &[TrialResult], o: &Outcome) -> String {
    let mut out = String::new();
    if let Some(c) = conclusion::conclusion(exp, trials, o) {
        out.push_str("\n## Baseline vs optimized\n\n");
        out.push_str(&conclusion::final_table(&c).to_markdown());
        out.push_str(&format!(
            "\nChart: [{CONCLUSION_CHART}]({CONCLUSION_CHART}) (Total TPS along the kept steps, \
             one line per profile).\n"
        ));
    }
    let sentences = conclusion::engine_sentences(exp, trials);
    if !sentences.is_empty() {
        out.push_str("\n## Engine baselines\n\n");
        for s in sentences {
            out.push_str(&format!("- {s}\n"));
        }
    }
    if let Some(t) = conclusion::cumulative_table(exp, trials, o) {
        out.push_str("\n## Every option against the baseline\n\n");
        out.push_str(&t.to_markdown());
    }
    out
}

const EXPERIMENTS_INTRO: &str = "One section per configuration measured (reference launches, \
     which re-measure one beside a candidate, are in the trials table): the backend parameters, \
     then per profile its bench options, the summary block of its first run, and its figures \
     against the engine's baseline.";

fn runs_word(n: usize) -> String {
    if n > 1 {
        format!(" (run 1 of {n})")
    } else {
        String::new()
    }
}

/// The experiment sections in Markdown.
fn experiments_md(exp: &Experiment, trials: &[TrialResult], servelab: &str) -> String {
    let sections = experiments(exp, trials, servelab);
    if sections.is_empty() {
        return String::new();
    }
    let mut out = format!("\n## Experiments\n\n{EXPERIMENTS_INTRO}\n");
    for x in sections {
        out.push_str(&format!("\n### {}\n\nBackend parameters: `{}`.", x.trial, x.flags));
        if x.command.is_empty() {
            out.push('\n');
        } else {
            out.push_str(&format!(" Command:\n\n```sh\n{}\n```\n", x.command));
        }
        for p in x.profiles {
            out.push_str(&format!(
                "\nProfile **{}**: `{}`{}\n\n",
                p.profile,
                p.bench,
                runs_word(p.runs)
            ));
            match &p.block {
                Some(b) => out.push_str(&format!("```text\n{}\n```\n\n", b.trim_end())),
                None => out.push_str(&format!(
                    "Summary block not recorded (trial saved before servelab kept it); the trial \
                     file has: {}.\n\n",
                    p.recorded
                )),
            }
            out.push_str(&format!("{}\n", p.line));
        }
    }
    out
}

/// The experiment sections in HTML.
fn experiments_html(exp: &Experiment, trials: &[TrialResult], servelab: &str) -> String {
    let sections = experiments(exp, trials, servelab);
    if sections.is_empty() {
        return String::new();
    }
    let mut out = format!("<h2>Experiments</h2>\n<p>{}</p>\n", esc(EXPERIMENTS_INTRO));
    for x in sections {
        out.push_str(&format!(
            "<h3>{}</h3>\n<p>Backend parameters: <code>{}</code>.",
            esc(&x.trial),
            esc(&x.flags)
        ));
        if x.command.is_empty() {
            out.push_str("</p>\n");
        } else {
            out.push_str(&format!(" Command:</p>\n<pre>{}</pre>\n", esc(&x.command)));
        }
        for p in x.profiles {
            out.push_str(&format!(
                "<p>Profile <strong>{}</strong>: <code>{}</code>{}</p>\n",
                esc(&p.profile),
                esc(&p.bench),
                esc(&runs_word(p.runs))
            ));
            match &p.block {
                Some(b) => out.push_str(&format!("<pre>{}</pre>\n", esc(b.trim_end()))),
                None => out.push_str(&format!(
                    "<p>Summary block not recorded (trial saved before servelab kept it); the \
                     trial file has: {}.</p>\n",
                    esc(&p.recorded)
                )),
            }
            out.push_str(&format!("<p>{}</p>\n", code_spans_html(&p.line)));
        }
    }
    out
}

/// `text` with `code` spans as HTML, the rest escaped.
fn code_spans_html(text: &str) -> String {
    let parts: Vec<&str> = text.split('`').collect();
    if parts.len() % 2 == 0 {
        return esc(text);
    }
    parts
        .iter()
        .enumerate()
        .map(|(i, p)| if i % 2 == 1 { format!("<code>{}</code>", esc(p)) } else { esc(p) })
        .collect()
}

/// The Markdown report.
pub fn markdown(
    exp: &Experiment,
    trials: &[TrialResult],
    o: Option<&Outcome>,
    servelab: &str,
) -> String {
    let mut out = format!(
        "# servelab lab: {}\n\n{}\n\n## Recommendation\n\n",
        exp.name,
        objective_line(exp, trials)
    );
    out.push_str(&recommendation_md(exp, trials, o, servelab));
    if let Some(o) = o {
        out.push_str(&conclusion_md(exp, trials, o));
        out.push_str("\n## Notes\n\n");
        for n in notes(exp, trials, o) {
            out.push_str(&format!("- {n}\n"));
        }
    }
    out.push_str("\n## Trials\n\n");
    out.push_str(&trials_table(exp, trials).to_markdown());
    if let Some(o) = o {
        out.push_str("\n## Steps\n\n");
        out.push_str(&steps_table(exp, &o.steps).to_markdown());
        out.push_str(
            "\nChart: [chart.svg](chart.svg) (the objective per step, one line per profile).\n",
        );
    }
    out.push_str(&experiments_md(exp, trials, servelab));
    let e = engine_table(trials);
    if !e.rows.is_empty() {
        out.push_str("\n## Engine metrics (from /metrics, per profile)\n\n");
        out.push_str(&e.to_markdown());
    }
    for t in trials {
        if let TrialStatus::Failed { reason, log_tail } = &t.status {
            out.push_str(&format!(
                "\n## Failed trial {}\n\n{reason}\n\nCommand: `{}`\n\n```text\n{log_tail}\n```\n",
                t.spec.id, t.command
            ));
        }
    }
    out
}

/// The self-contained HTML report (inline CSS and SVG, no scripts).
pub fn html(
    exp: &Experiment,
    trials: &[TrialResult],
    o: Option<&Outcome>,
    servelab: &str,
) -> String {
    let title = format!("servelab lab: {}", exp.name);
    let mut out =
        format!("<p>{}</p>\n<h2>Recommendation</h2>\n", esc(&objective_line(exp, trials)));
    match o {
        None => out.push_str(&format!("<p>{}</p>\n", code_spans_html(unfinished_text()))),
        Some(o) => match pasteable(exp, trials, o, servelab) {
            Some((cmd, url)) => out.push_str(&format!(
                "<p>Best configuration: <code>{}</code> (options kept: {}).</p>\n<p>{}</p>\n\
                 <pre>{}</pre>\n",
                esc(o.best.as_deref().unwrap_or("")),
                esc(&kept_list(o)),
                esc(&serve_line(url.as_deref())),
                esc(&cmd)
            )),
            None => out.push_str(&format!("<p>{}</p>\n", esc(no_winner_text()))),
        },
    }
    if let Some(o) = o {
        if let Some(c) = conclusion::conclusion(exp, trials, o) {
            out.push_str("<h2>Baseline vs optimized</h2>\n");
            out.push_str(&html_table(&conclusion::final_table(&c)));
            if let Some(ch) = conclusion::chart(exp, trials, o) {
                out.push_str(&figure(&ch));
            }
        }
        let sentences = conclusion::engine_sentences(exp, trials);
        if !sentences.is_empty() {
            out.push_str("<h2>Engine baselines</h2>\n<ul class=\"findings\">\n");
            for s in sentences {
                out.push_str(&format!("<li>{}</li>\n", code_spans_html(&s)));
            }
            out.push_str("</ul>\n");
        }
        if let Some(t) = conclusion::cumulative_table(exp, trials, o) {
            out.push_str("<h2>Every option against the baseline</h2>\n");
            out.push_str(&html_table(&t));
        }
        out.push_str("<h2>Notes</h2>\n<ul class=\"notes\">\n");
        for n in notes(exp, trials, o) {
            out.push_str(&format!("<li>{}</li>\n", code_spans_html(&n)));
        }
        out.push_str("</ul>\n");
    }
    out.push_str("<h2>Trials</h2>\n");
    out.push_str(&html_table(&trials_table(exp, trials)));
    if let Some(o) = o {
        out.push_str("<h2>Steps</h2>\n");
        out.push_str(&html_table(&steps_table(exp, &o.steps)));
        out.push_str(&figure(&chart(exp, &o.steps)));
    }
    out.push_str(&experiments_html(exp, trials, servelab));
    let e = engine_table(trials);
    if !e.rows.is_empty() {
        out.push_str("<h2>Engine metrics</h2>\n");
        out.push_str(&html_table(&e));
    }
    for t in trials {
        if let TrialStatus::Failed { reason, log_tail } = &t.status {
            out.push_str(&format!(
                "<h2>Failed trial {}</h2>\n<p>{}</p>\n<p>Command: <code>{}</code></p>\n<pre>{}</pre>\n",
                esc(&t.spec.id),
                esc(reason),
                esc(&t.command),
                esc(log_tail)
            ));
        }
    }
    page(&title, &out)
}

fn write(path: &Path, text: &str) -> Result<(), LabError> {
    std::fs::write(path, text)
        .map_err(|e| LabError::Write { path: path.to_path_buf(), message: e.to_string() })
}

/// Write `report.md`, `report.html`, `chart.svg` and `baseline-vs-optimized.svg` (when
/// finished) and `lab.json`. `servelab` is what `{servelab}` stands for in the recommended
/// command.
pub fn write_all(
    dir: &Path,
    exp: &Experiment,
    trials: &[TrialResult],
    o: Option<&Outcome>,
    servelab: &str,
) -> Result<(), LabError> {
    write(&dir.join("report.md"), &markdown(exp, trials, o, servelab))?;
    write(&dir.join("report.html"), &html(exp, trials, o, servelab))?;
    let svg = |c: &Chart, file: &str| {
        render_svg(c).map_err(|e| LabError::Write { path: dir.join(file), message: e.to_string() })
    };
    if let Some(o) = o {
        write(&dir.join("chart.svg"), &svg(&chart(exp, &o.steps), "chart.svg")?)?;
        if let Some(c) = conclusion::chart(exp, trials, o) {
            write(&dir.join(CONCLUSION_CHART), &svg(&c, CONCLUSION_CHART)?)?;
        }
    }
    let command = o.and_then(|o| pasteable(exp, trials, o, servelab)).map(|(c, _)| c);
    let json = serde_json::json!({
        "experiment": exp.name,
        "outcome": o,
        "recommended_command": command,
        "trials": trials,
    });
    write(&dir.join("lab.json"), &serde_json::to_string_pretty(&json).unwrap_or_default())
}

/// `servelab lab report DIR`: rebuild the report from the experiment copy and the finished
/// trials. Returns the outcome (`None` when the experiment is unfinished).
pub fn report_dir(dir: &Path, servelab: &str) -> Result<Option<Outcome>, LabError> {
    let exp = crate::config::load(&dir.join(EXPERIMENT_COPY)).map_err(|e| match e {
        LabError::Read { path, message } => LabError::Read {
            path,
            message: format!("{message} (is this the --output-dir of a servelab lab run?)"),
        },
        other => other,
    })?;
    let trials = crate::trial::load_all(dir)?;
    let outcome = match crate::strategy::next(&exp, &trials) {
        crate::strategy::Next::Done(o) => Some(o),
        crate::strategy::Next::Run(_) | crate::strategy::Next::RunPair { .. } => None,
    };
    let trials = match &outcome {
        Some(o) => in_step_order(trials, o),
        None => trials,
    };
    write_all(dir, &exp, &trials, outcome.as_ref(), servelab)?;
    Ok(outcome)
}

/// The trials in the order the steps ran them (a step's reference launch before its
/// candidate), as `lab run` lists them; the folders give them in id order. Trials no step
/// names keep their order, last.
pub fn in_step_order(mut trials: Vec<TrialResult>, o: &Outcome) -> Vec<TrialResult> {
    let mut out = Vec::with_capacity(trials.len());
    for s in &o.steps {
        let refs = s.against.iter().filter(|a| a.contains(".ref-"));
        for id in refs.chain(std::iter::once(&s.trial)) {
            if let Some(i) = trials.iter().position(|t| &t.spec.id == id) {
                out.push(trials.remove(i));
            }
        }
    }
    out.extend(trials);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trial::tests::profile;

    /// Trials saved before the cache state was kept were measured with shared seeds: the
    /// report says so instead of claiming prompts of their own for them.
    #[test]
    fn old_trials_do_not_claim_prompts_of_their_own() {
        let exp = crate::config::parse(
            "engines:\n  - {name: a, command: run-a}\nprofiles:\n  - {name: p, num_prompts: 4}\n",
        )
        .unwrap();
        let mut t = crate::trial::TrialResult {
            spec: crate::trial::TrialSpec::new("a", &[]),
            command: String::new(),
            command_template: String::new(),
            status: TrialStatus::Finished,
            startup_secs: None,
            profiles: vec![profile("p", 10.0, 0)],
        };
        assert!(
            cache_line(&exp, std::slice::from_ref(&t)).starts_with("Cache state: not recorded.")
        );
        t.profiles[0].after_runs = Some(0);
        let line = cache_line(&exp, &[t]);
        assert!(line.contains("drawn from lab seed 42, so no run is served"), "{line}");
    }
}
