//! The per-experiment sections and the notes of a published lab report: for each trial, its
//! backend parameters and, per profile, the profile's bench options, the run's full summary
//! block and a one-line summary against the engine's baseline; then what the search did not
//! try (a greedy search ends at a local optimum) and which options quantize something, whose
//! effect on accuracy servelab does not measure.

use servelab_metrics::{Metric, MetricKey};
use servelab_outputs::fmt::{fixed, grouped, MISSING};

use crate::conclusion::{change_pct, pasteable_command, signed_pct};
use crate::config::{Experiment, Strategy};
use crate::strategy::Outcome;
use crate::trial::{ProfileResult, TrialResult, TrialStatus};

const TOTAL: MetricKey = MetricKey::of(Metric::TotalTokenThroughput);

/// One profile of one experiment.
#[derive(Debug, Clone, PartialEq)]
pub struct ProfileSection {
    /// The profile's name.
    pub profile: String,
    /// Its `servelab bench` options, as flags.
    pub bench: String,
    /// The first run's summary block; `None` when the trial was saved without it.
    pub block: Option<String>,
    /// What the trial file recorded, when it has no summary block.
    pub recorded: String,
    /// How many runs the profile had in this trial.
    pub runs: usize,
    /// `` `trial` Total TPS = N, Mean TPOT = N ms (against `engine`: +N%, -N%). ``
    pub line: String,
}

/// One experiment: a finished trial (an engine with options), each profile it ran.
#[derive(Debug, Clone, PartialEq)]
pub struct ExperimentSection {
    /// The trial's id.
    pub trial: String,
    /// The flags its options added to the engine's command (`-` for none).
    pub flags: String,
    /// The launch command as a user pastes it (env first, `{port}` as 8000, `{servelab}` as
    /// the binary; see [`crate::conclusion::pasteable_command`]).
    pub command: String,
    /// Its profiles, in experiment order.
    pub profiles: Vec<ProfileSection>,
}

/// The flags the options of `t` add, in order; `-` for a baseline.
fn option_flags(exp: &Experiment, t: &TrialResult) -> String {
    let flags: Vec<&str> = t
        .spec
        .options
        .iter()
        .filter_map(|o| exp.options.iter().find(|x| x.name == *o).map(|x| x.flags.as_str()))
        .collect();
    if flags.is_empty() {
        MISSING.to_string()
    } else {
        flags.join(" ")
    }
}

/// What a trial file recorded of a run saved without its summary block.
fn recorded(r: &ProfileResult) -> String {
    let ms = |v: Option<f64>| v.map_or(MISSING.to_string(), |x| format!("{x:.2} ms"));
    format!(
        "{} ok / {} failed in {} s; Total TPS {}, output {} tok/s, {} req/s; P99 TTFT {}, \
         P99 TPOT {}, Mean TPOT {}",
        r.completed,
        r.failed,
        fixed(Some(r.duration_s), 2),
        fixed(Some(r.total_tokens_per_s), 2),
        fixed(Some(r.output_tokens_per_s), 2),
        fixed(Some(r.requests_per_s), 2),
        ms(r.ttft_p99_ms),
        ms(r.tpot_p99_ms),
        ms(r.tpot_mean_ms),
    )
}

/// Every finished trial that is a configuration of its own (reference launches re-measure
/// one and are left to the trials table), with its profiles; `servelab` is what
/// `{servelab}` stands for in its command.
pub fn experiments(
    exp: &Experiment,
    trials: &[TrialResult],
    servelab: &str,
) -> Vec<ExperimentSection> {
    let mut out = Vec::new();
    for t in trials {
        if t.status != TrialStatus::Finished || t.spec.reference_for.is_some() {
            continue;
        }
        let base = trials.iter().find(|b| {
            b.spec.engine == t.spec.engine
                && b.spec.options.is_empty()
                && b.spec.reference_for.is_none()
        });
        let profiles = exp
            .profiles
            .iter()
            .filter_map(|p| {
                let runs = t.runs(&p.name);
                let first = runs.first()?;
                let tps = t.value(&p.name, TOTAL);
                let tpot = t.tpot_mean(&p.name);
                let against = match base.filter(|b| b.spec.id != t.spec.id) {
                    Some(b) => {
                        let (bt, bp) = (b.value(&p.name, TOTAL), b.tpot_mean(&p.name));
                        format!(
                            " (against `{}`: Total TPS {}, Mean TPOT {})",
                            b.spec.id,
                            signed_pct(change_pct(bt, tps)),
                            signed_pct(change_pct(bp, tpot))
                        )
                    }
                    None => String::new(),
                };
                let mean = if runs.len() > 1 {
                    format!(", the mean of {} runs", runs.len())
                } else {
                    String::new()
                };
                Some(ProfileSection {
                    profile: p.name.clone(),
                    bench: p.args().join(" "),
                    block: first.summary_block.clone(),
                    recorded: recorded(first),
                    runs: runs.len(),
                    line: format!(
                        "`{}` Total TPS = {}, Mean TPOT = {} ms{mean}{against}.",
                        t.spec.id,
                        grouped(tps, 2),
                        grouped(tpot, 2)
                    ),
                })
            })
            .collect();
        out.push(ExperimentSection {
            trial: t.spec.id.clone(),
            flags: option_flags(exp, t),
            command: pasteable_command(exp, &t.spec.engine, &t.command_template, servelab),
            profiles,
        });
    }
    out
}

/// Flags that set the KV cache's data type (vLLM, SGLang, llama.cpp, servelab's simulator).
const KV_FLAGS: [&str; 6] =
    ["--kv-cache-dtype", "--kv-dtype", "-ctk", "-ctv", "--cache-type-k", "--cache-type-v"];
/// Flags that quantize weights or activations.
const WEIGHT_FLAGS: [&str; 3] = ["--quantization", "-q", "--quantize"];
/// Words (of a flag's value or a file name) that name a quantized format.
const QUANT_WORDS: [&str; 22] = [
    "fp8",
    "fp4",
    "nvfp4",
    "mxfp4",
    "int8",
    "int4",
    "awq",
    "gptq",
    "w8a8",
    "w4a16",
    "bitsandbytes",
    "q8_0",
    "q4_0",
    "q4_1",
    "q5_0",
    "q5_1",
    "q2_k",
    "q3_k_m",
    "q4_k_m",
    "q5_k_m",
    "q6_k",
    "iq4_xs",
];

/// What `flags` quantize, if anything: `("the KV cache", "q8_0")` or
/// `("weights or activations", "fp8")`.
pub fn quantizes(flags: &str) -> Option<(&'static str, String)> {
    let words: Vec<&str> = flags.split_whitespace().collect();
    for (i, w) in words.iter().enumerate() {
        let (flag, inline) = match w.split_once('=') {
            Some((f, v)) => (f, Some(v)),
            None => (*w, None),
        };
        let value = || inline.or(words.get(i + 1).copied()).unwrap_or("").to_string();
        if KV_FLAGS.contains(&flag) {
            return Some(("the KV cache", value()));
        }
        if WEIGHT_FLAGS.contains(&flag) {
            return Some(("weights or activations", value()));
        }
    }
    flags
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .map(str::to_ascii_lowercase)
        .find(|w| QUANT_WORDS.contains(&w.as_str()))
        .map(|w| ("weights or activations", w))
}

/// The notes of a finished experiment: what the search did not try, and where a kept or
/// tried option (or an engine's own command) quantizes something.
pub fn notes(exp: &Experiment, trials: &[TrialResult], o: &Outcome) -> Vec<String> {
    let mut out = Vec::new();
    let tried = |opt: &str| trials.iter().any(|t| t.spec.options.iter().any(|x| x == opt));
    let untried: Vec<&str> =
        exp.options.iter().map(|x| x.name.as_str()).filter(|n| !tried(n)).collect();
    match o.strategy {
        Strategy::Baseline => out.push(
            "Strategy baseline: each engine with its own command; no option was tried.".into(),
        ),
        Strategy::Grid => out.push(
            "Grid search: every combination of the options on every engine was measured; \
             nothing was skipped."
                .into(),
        ),
        Strategy::Greedy => {
            let best_engine = o
                .best
                .as_ref()
                .and_then(|b| trials.iter().find(|t| &t.spec.id == b))
                .map(|t| t.spec.engine.clone());
            let rejected: Vec<String> = o
                .steps
                .iter()
                .filter(|s| s.decision == crate::strategy::Decision::Rejected)
                .filter_map(|s| s.option.clone())
                .collect();
            let k = exp.options.len();
            let measured = best_engine.as_ref().map_or(0, |e| {
                let mut sets: Vec<Vec<String>> = trials
                    .iter()
                    .filter(|t| &t.spec.engine == e)
                    .map(|t| t.spec.options.clone())
                    .collect();
                sets.sort();
                sets.dedup();
                sets.len()
            });
            let mut s = format!(
                "Greedy search: each option was tried once, in file order, on top of the options \
                 kept before it; {measured} of the {} combinations of the {k} options were \
                 measured",
                1u64 << k.min(63)
            );
            if let Some(e) = &best_engine {
                s.push_str(&format!(" on `{e}`"));
            }
            s.push('.');
            if !rejected.is_empty() {
                s.push_str(&format!(
                    " Rejected options ({}) were not tried again on top of options kept after \
                     them, nor together: one of them might help in a combination never measured, \
                     so the recommendation is a local optimum.",
                    rejected.iter().map(|r| format!("`{r}`")).collect::<Vec<_>>().join(", ")
                ));
            }
            let others: Vec<&str> = exp
                .engines
                .iter()
                .map(|e| e.name.as_str())
                .filter(|n| best_engine.as_deref() != Some(*n))
                .collect();
            if !others.is_empty() && k > 0 {
                s.push_str(&format!(
                    " The other engines ({}) ran their own command only.",
                    others.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ")
                ));
            }
            out.push(s);
        }
    }
    if !untried.is_empty() {
        out.push(format!(
            "Never tried: {} (the search ended, or no valid configuration to build on).",
            untried.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ")
        ));
    }
    for opt in &exp.options {
        let Some((what, word)) = quantizes(&opt.flags) else { continue };
        let fate = if o.kept.contains(&opt.name) {
            "it is in the recommended command"
        } else if tried(&opt.name) {
            "it was not kept"
        } else {
            "it was not tried"
        };
        out.push(format!(
            "`{}` (`{}`) quantizes {what} ({word}): it can change the model's outputs, which \
             servelab does not measure; check accuracy on your task before adopting it ({fate}).",
            opt.name, opt.flags
        ));
    }
    for e in &exp.engines {
        if let Some((what, word)) = quantizes(&e.command) {
            out.push(format!(
                "Engine `{}`'s own command quantizes {what} ({word}), in every trial: its figures \
                 are of that quantization.",
                e.name
            ));
        }
    }
    out
}
