//! Written verdicts per model: one judgement for each model (deployment, label) of a
//! scenario, produced by fixed rules from its figures, and a comparison of the variants of
//! one model (runs tagged with the same `model=NAME`). Every sentence carries the figures it
//! was judged on. The rules are documented in docs/store.md:
//!
//! | rule | judgement | when |
//! |---|---|---|
//! | V1 | throughput champion | the highest total token throughput at the heaviest shared level (2+ models); when the runs state their GPUs and another leads per GPU, "in total", naming the leader per GPU |
//! | V2 | degrades the hardest under load | the highest mean TTFT at the heaviest shared level (absolute, not growth), at least 2x its lightest and 2x the median of the others; not the champion |
//! | V3 | best balance (for a large model, when it is one and larger than the champion) | the lowest sum of ranks in single-request TTFT, throughput and TPOT under load among the models left, if it ties or beats the champion's sum or has the fastest first token |
//! | V3L | best balance for a large model | when V3 named no large model: the large model with the lowest rank sum of all large ones (2+ in the scenario), if no rule above judged it and it is not latency-bound (V4) |
//! | V4 | latency-bound: TTFT explodes with concurrency | a model left whose mean TTFT grows 10x or more and is 3x the median of the other models' at the heaviest level |
//! | V5 | its figures | any other model |
//! | P | a prediction: its figures, judged apart | a predicted deployment beside measured ones |
//! | W1 | variant comparison | each model beside the first one of the same model: the same `model=` tag, else the same label without its quantization words (`big-70b-awq`, `big-70b-fp8`) |
//!
//! A model's size (billions of parameters) is its `params=` tag, else the first size word of
//! its label, its `model=` tag or the served model's name ([`params_in`]); **large** is
//! [`LARGE_PARAMS_B`] or more.

use serde::Serialize;
use servelab_metrics::{Metric, MetricKey, Stat};
use servelab_outputs::fmt::grouped;
use std::cmp::Ordering;

use crate::compare::CompareOptions;
use crate::deploy::{Entry, Row, ScenarioView, Workload};
use crate::rank::rank_values;

const TOTAL: MetricKey = MetricKey::of(Metric::TotalTokenThroughput);
const TTFT: MetricKey = MetricKey::stat(Metric::Ttft, Stat::Mean);
const TPOT: MetricKey = MetricKey::stat(Metric::Tpot, Stat::Mean);
const PER_GPU: MetricKey = MetricKey::of(Metric::OutputThroughputPerGpu);

/// Mean TTFT growing at least this many times from the lightest to the heaviest level is
/// degradation (V2).
pub const DEGRADES: f64 = 2.0;
/// Mean TTFT growing at least this many times: latency-bound, TTFT explodes (V2, V4).
pub const EXPLODES: f64 = 10.0;
/// A model whose mean TTFT at the heaviest level is at least this many times the median of
/// the other models' stands out from the field (V4): when every request is sent at once,
/// every model's TTFT grows tens of times, so growth alone does not tell models apart.
pub const LAGS: f64 = 3.0;
/// A variant whose mean TPOT differs by at least this fraction is significantly faster or
/// slower (W1).
pub const SIGNIFICANT: f64 = 0.10;
/// The tag that marks runs of one model in different variants (`model=Qwen3-32B`).
pub const MODEL_TAG: &str = "model";
/// The tag that gives a model's size (`params=32b`, `params=235B-A22B`), when its label and
/// model name do not.
pub const PARAMS_TAG: &str = "params";
/// A model of at least this many billion parameters is large (V3, V3L).
pub const LARGE_PARAMS_B: f64 = 30.0;
/// Label words that name a variant (quantization, weight format) of a model rather than the
/// model: W1 compares labels without them. Matched whole and case-insensitively, besides
/// llama.cpp's `q4_k_m`-style types ([`is_variant_word`]).
pub const VARIANT_WORDS: [&str; 20] = [
    "awq", "gptq", "fp8", "fp4", "nvfp4", "mxfp4", "int8", "int4", "w8a8", "w4a16", "w8a16",
    "w4a8", "bf16", "fp16", "fp32", "gguf", "bnb", "4bit", "8bit", "marlin",
];

/// Billions of parameters a name states: the first word (split at anything but letters,
/// digits and `.`) that is a number followed by `b` (`32b`, `70B`, `1.5B`; in `235B-A22B`,
/// 235, the total of a mixture of experts), or `NxMb` (`8x7b`: 56). `None` when no word is.
pub fn params_in(name: &str) -> Option<f64> {
    name.split(|c: char| !(c.is_ascii_alphanumeric() || c == '.')).find_map(|w| {
        let w = w.to_ascii_lowercase();
        let n = w.strip_suffix('b')?;
        let size = |x: &str| -> Option<f64> {
            let ok = !x.is_empty()
                && x.chars().all(|c| c.is_ascii_digit() || c == '.')
                && x.starts_with(|c: char| c.is_ascii_digit());
            ok.then(|| x.parse::<f64>().ok()).flatten().filter(|v| *v > 0.0)
        };
        match n.split_once('x') {
            Some((k, m)) => Some(size(k)? * size(m)?),
            None => size(n),
        }
    })
}

/// Whether a label word names a variant: one of [`VARIANT_WORDS`], or a llama.cpp quant type
/// (`q8_0`, `q4_k_m`, `q6_k`, `iq4_xs`).
pub fn is_variant_word(w: &str) -> bool {
    let w = w.to_ascii_lowercase();
    if VARIANT_WORDS.contains(&w.as_str()) {
        return true;
    }
    let rest = w.strip_prefix("iq").or_else(|| w.strip_prefix('q'));
    rest.is_some_and(|r| {
        let mut parts = r.split('_');
        parts.next().is_some_and(|d| d.len() == 1 && d.chars().all(|c| c.is_ascii_digit()))
            && parts.all(|p| {
                !p.is_empty() && p.len() <= 2 && p.chars().all(|c| c.is_ascii_alphanumeric())
            })
    })
}

/// The model a label names without its variant words (`big-70b-awq` → `big-70b`), lowercase,
/// words joined by `-`. Words are split at `-`, `/`, `:` and spaces.
pub fn label_model(label: &str) -> String {
    label
        .split(['-', '/', ':', ' '])
        .filter(|w| !w.is_empty() && !is_variant_word(w))
        .map(str::to_ascii_lowercase)
        .collect::<Vec<_>>()
        .join("-")
}

/// A model's size in billions of parameters: its `params=` tag, else the first size in its
/// label, its `model=` tag, or the model name its runs served.
pub fn model_size(e: &Entry) -> Option<f64> {
    if let Some(p) = e.tag(PARAMS_TAG) {
        return p.trim().parse::<f64>().ok().filter(|v| *v > 0.0).or_else(|| params_in(p));
    }
    let served = e.cells.iter().flatten().flat_map(|s| &s.runs).find_map(|r| {
        let info = r.config.as_ref().map(|c| &c.info).or(r.summary.as_ref().map(|s| &s.info))?;
        Some(info.model.clone())
    });
    params_in(&e.name)
        .or_else(|| e.tag(MODEL_TAG).and_then(params_in))
        .or_else(|| served.as_deref().and_then(params_in))
}

/// `32B`, `1.5B`.
fn size_words(b: f64) -> String {
    let s = format!("{b:.2}");
    format!("{}B", s.trim_end_matches('0').trim_end_matches('.'))
}

/// One judgement.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModelVerdict {
    /// The rule that produced it, `V1` to `V5` or `W1`.
    pub rule: &'static str,
    /// The model (deployment) judged.
    pub model: String,
    /// The judgement in a few words (`A is the throughput champion.`).
    pub headline: String,
    /// The figures it rests on.
    pub text: String,
}

/// The verdicts of one scenario.
#[derive(Debug, Clone, PartialEq)]
pub struct ScenarioVerdicts {
    /// The scenario.
    pub workload: Workload,
    /// The lightest and the heaviest level the models were judged between.
    pub levels: (Row, Row),
    /// One verdict per model, in the order the models came.
    pub models: Vec<ModelVerdict>,
    /// One verdict per variant beside its model's first variant.
    pub variants: Vec<ModelVerdict>,
}

/// A model's figures at the lightest (`l`) and heaviest (`h`) judged level it ran; `h` is
/// the scenario's heaviest judged level unless the model did not run there (`at_h` false).
#[derive(Debug, Clone, Copy)]
struct Figures {
    /// The row of its `h` figures.
    h: usize,
    /// Whether `h` is the scenario's heaviest judged level.
    at_h: bool,
    thr_l: Option<f64>,
    thr_h: Option<f64>,
    thr_max: Option<f64>,
    ttft_l: Option<f64>,
    ttft_h: Option<f64>,
    tpot_l: Option<f64>,
    tpot_h: Option<f64>,
}

impl Figures {
    /// Mean TTFT at its heaviest level over the lightest.
    fn growth(&self) -> Option<f64> {
        match (self.ttft_l, self.ttft_h) {
            (Some(a), Some(b)) if a > 0.0 => Some(b / a),
            _ => None,
        }
    }

    /// A figure at the scenario's heaviest level: `None` for a model that did not run it.
    fn at_heaviest(&self, v: Option<f64>) -> Option<f64> {
        v.filter(|_| self.at_h)
    }
}

fn ms(v: Option<f64>) -> String {
    format!("{} ms", grouped(v, 2))
}

fn tps(v: Option<f64>) -> String {
    format!("{} tok/s", grouped(v, 2))
}

/// `+12.3%`; empty without both values.
fn change(from: Option<f64>, to: Option<f64>) -> String {
    match (from, to) {
        (Some(a), Some(b)) if a != 0.0 => format!(" ({:+.1}%)", (b - a) / a * 100.0),
        _ => String::new(),
    }
}

/// `TTFT` at a level: "single-request TTFT" at concurrency 1, else "mean TTFT ... at L".
fn first_token(f: &Figures, l: &Row) -> String {
    if l.concurrency == Some(1) {
        format!("single-request TTFT {}", ms(f.ttft_l))
    } else {
        format!("mean TTFT {} at {}", ms(f.ttft_l), l.words())
    }
}

/// Ranks (1 = best) of each entry for a metric among the entries that have it; `None` for
/// an entry without the value (never ranked last with a missing figure).
fn ranks(vals: &[Option<f64>], m: MetricKey) -> Vec<Option<usize>> {
    let have: Vec<(String, f64)> =
        vals.iter().enumerate().filter_map(|(i, v)| Some((i.to_string(), (*v)?))).collect();
    let ranked = rank_values(m, &have);
    (0..vals.len())
        .map(|i| ranked.iter().find(|r| r.name == i.to_string()).map(|r| r.rank))
        .collect()
}

/// ` (rank k of m)`, `m` the models that have the figure; empty without a rank or a field.
fn rank_words(r: Option<usize>, of: usize) -> String {
    match r {
        Some(k) if of > 1 => format!(" (rank {k} of {of})"),
        _ => String::new(),
    }
}

/// The median of some values (the mean of the middle two for an even count).
fn median(mut v: Vec<f64>) -> Option<f64> {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(v[n / 2]),
        _ => Some((v[n / 2 - 1] + v[n / 2]) / 2.0),
    }
}

/// The verdicts of one scenario; `None` when no model has a level with its throughput. The
/// rules judge in order, each model once: V1, V2, V3, V3L, then V4 or V5 for the rest.
///
/// Predictions beside measurements (`predict` next to `sweep`) are judged apart (rule P): the
/// rules rank the measured deployments only, and each prediction gets its figures under a
/// headline saying it is one, so a prediction is never the "champion" or the "best balance"
/// of the deployment it predicts.
pub fn scenario_verdicts(v: &ScenarioView, o: &CompareOptions) -> Option<ScenarioVerdicts> {
    let predicted = |e: &&Entry| crate::data::is_predicted_name(&e.name);
    if v.entries.iter().any(|e| predicted(&e)) && !v.entries.iter().all(|e| predicted(&e)) {
        let only = |keep: bool| ScenarioView {
            workload: v.workload.clone(),
            rows: v.rows.clone(),
            entries: v.entries.iter().filter(|e| predicted(e) == keep).cloned().collect(),
        };
        let mut out = scenario_verdicts(&only(false), o)?;
        let apart = only(true);
        if let Some(s) = Scene::new(&apart, o) {
            out.models.extend((0..s.n).map(|i| {
                let r = s.rest_verdict(i);
                ModelVerdict {
                    rule: "P",
                    headline: format!(
                        "{} is a prediction, not judged against the measured deployments:",
                        r.model
                    ),
                    ..r
                }
            }));
        }
        return Some(out);
    }
    let s = Scene::new(v, o)?;
    let mut judged: Vec<Option<ModelVerdict>> = vec![None; s.n];
    let champ = s.champion();
    if let Some(c) = champ {
        judged[c] = Some(s.champion_verdict(c));
    }
    if let Some(d) = s.hardest(champ) {
        judged[d] = Some(s.hardest_verdict(d));
    }
    let balance = s.balance(champ, &judged);
    if let Some(b) = balance {
        judged[b] = Some(s.balance_verdict(b, champ));
    }
    if let Some(b) = s.large_balance(balance, &judged) {
        judged[b] = Some(s.large_balance_verdict(b));
    }
    for (i, j) in judged.iter_mut().enumerate() {
        if j.is_none() {
            *j = Some(s.rest_verdict(i));
        }
    }
    Some(ScenarioVerdicts {
        workload: v.workload.clone(),
        levels: (s.l().clone(), s.h().clone()),
        models: judged.into_iter().flatten().collect(),
        variants: variants(v, &s.shared, o),
    })
}

/// One scenario as the rules see it: the judged levels, each model's figures there, and its
/// ranks among the models that have each figure.
struct Scene<'a> {
    v: &'a ScenarioView,
    o: &'a CompareOptions,
    /// Models.
    n: usize,
    /// Judged levels: those where 2+ models have throughput (every level of a lone model).
    shared: Vec<usize>,
    /// The lightest and the heaviest judged level.
    li: usize,
    hi: usize,
    figs: Vec<Figures>,
    /// Under load, among the models that ran the heaviest level; and single-request TTFT.
    thr_h: Vec<Option<f64>>,
    ttft_h: Vec<Option<f64>>,
    tpot_h: Vec<Option<f64>>,
    ttft_l: Vec<Option<f64>>,
    /// Ranks (1 = best) of those figures.
    r_thr: Vec<Option<usize>>,
    r_ttft: Vec<Option<usize>>,
    r_tpot: Vec<Option<usize>>,
    /// Billions of parameters, when known.
    size: Vec<Option<f64>>,
}

impl<'a> Scene<'a> {
    fn new(v: &'a ScenarioView, o: &'a CompareOptions) -> Option<Scene<'a>> {
        let n = v.entries.len();
        let need = n.min(2);
        let shared: Vec<usize> = (0..v.rows.len())
            .filter(|&i| {
                v.entries.iter().filter(|e| e.value(i, TOTAL, o).is_some()).count() >= need
            })
            .collect();
        let (&li, &hi) = (shared.first()?, shared.last()?);
        let figs: Vec<Figures> = v.entries.iter().map(|e| figures(e, &shared, o)).collect();
        let thr_h: Vec<Option<f64>> = figs.iter().map(|f| f.at_heaviest(f.thr_h)).collect();
        let ttft_h: Vec<Option<f64>> = figs.iter().map(|f| f.at_heaviest(f.ttft_h)).collect();
        let tpot_h: Vec<Option<f64>> = figs.iter().map(|f| f.at_heaviest(f.tpot_h)).collect();
        let ttft_l: Vec<Option<f64>> = figs.iter().map(|f| f.ttft_l).collect();
        Some(Scene {
            v,
            o,
            n,
            li,
            hi,
            figs,
            r_thr: ranks(&thr_h, TOTAL),
            r_ttft: ranks(&ttft_l, TTFT),
            r_tpot: ranks(&tpot_h, TPOT),
            thr_h,
            ttft_h,
            tpot_h,
            ttft_l,
            size: v.entries.iter().map(model_size).collect(),
            shared,
        })
    }

    fn l(&self) -> &Row {
        &self.v.rows[self.li]
    }

    fn h(&self) -> &Row {
        &self.v.rows[self.hi]
    }

    fn name(&self, i: usize) -> String {
        self.v.entries[i].name.clone()
    }

    /// Rank sum under load and for the first token; `None` for a model without all three.
    fn score(&self, i: usize) -> Option<usize> {
        Some(self.r_thr[i]? + self.r_ttft[i]? + self.r_tpot[i]?)
    }

    /// Whether `b` balances better than `a`: a lower rank sum, then more throughput.
    fn better(&self, a: usize, b: usize) -> bool {
        match (self.score(a), self.score(b)) {
            (Some(x), Some(y)) => y < x || (y == x && self.thr_h[b] > self.thr_h[a]),
            (None, Some(_)) => true,
            _ => false,
        }
    }

    /// How far a model's mean TTFT under load stands above the field's: its value over the
    /// median of the other models' (V2, V4). Growth against its own light level alone would
    /// call every model latency-bound when all are sent at once.
    fn above_field(&self, i: usize) -> Option<(f64, f64)> {
        let mine = self.ttft_h[i]?;
        let others: Vec<f64> =
            (0..self.n).filter(|&j| j != i).filter_map(|j| self.ttft_h[j]).collect();
        let others = median(others)?;
        (others > 0.0).then_some((mine / others, others))
    }

    fn latency_bound(&self, i: usize) -> bool {
        self.figs[i].growth().is_some_and(|g| g >= EXPLODES)
            && self.above_field(i).is_some_and(|(x, _)| x >= LAGS)
    }

    fn large(&self, i: usize) -> bool {
        self.size[i].is_some_and(|p| p >= LARGE_PARAMS_B)
    }

    /// V1: the highest total token throughput at the heaviest level (2+ models).
    fn champion(&self) -> Option<usize> {
        let thr_h = &self.thr_h;
        (self.n >= 2)
            .then(|| {
                (0..self.n).filter(|&i| thr_h[i].is_some()).reduce(|a, b| {
                    if thr_h[b] > thr_h[a] {
                        b
                    } else {
                        a
                    }
                })
            })
            .flatten()
    }

    fn champion_verdict(&self, c: usize) -> ModelVerdict {
        let (f, l, h, o) = (&self.figs[c], self.l(), self.h(), self.o);
        let every = self.shared.iter().all(|&i| {
            let mine = self.v.entries[c].value(i, TOTAL, o);
            self.v.entries.iter().all(|e| e.value(i, TOTAL, o) <= mine)
        });
        let lead = if every && self.shared.len() > 1 {
            "Highest total token throughput at every level".to_string()
        } else {
            "Highest total token throughput under load".to_string()
        };
        let scale = match (f.thr_l, f.thr_h, self.li != self.hi) {
            (Some(a), Some(b), true) if a > 0.0 => {
                format!(", {:.1}x its {} at {}", b / a, tps(f.thr_l), l.words())
            }
            _ => String::new(),
        };
        let lowest = if self.r_tpot[c] == Some(1) { "lowest " } else { "" };
        let (headline, per_gpu) = match self.per_gpu_leader(c) {
            Some((leader, note)) => (
                format!(
                    "{} is the throughput champion in total; {} per GPU.",
                    self.name(c),
                    self.name(leader)
                ),
                note,
            ),
            None => (format!("{} is the throughput champion.", self.name(c)), String::new()),
        };
        ModelVerdict {
            rule: "V1",
            model: self.name(c),
            headline,
            text: format!(
                "{lead} ({} at {}{scale}){per_gpu}; {lowest}mean TPOT under load {}; {}.",
                tps(f.thr_h),
                h.words(),
                ms(f.tpot_h),
                first_token(f, l),
            ),
        }
    }

    /// When the runs state their GPUs and the champion `c` is not the best per GPU at the
    /// heaviest level (it won with more GPUs): the leader per GPU, and the words saying so.
    fn per_gpu_leader(&self, c: usize) -> Option<(usize, String)> {
        let per_gpu: Vec<Option<f64>> =
            self.v.entries.iter().map(|e| e.value(self.hi, PER_GPU, self.o)).collect();
        let rank = ranks(&per_gpu, PER_GPU);
        let known = per_gpu.iter().flatten().count();
        let leader = (0..self.n).find(|&i| rank[i] == Some(1))?;
        let mine = rank[c]?;
        (known > 1 && mine > 1).then(|| {
            let note = format!(
                ", but {} output tok/s per GPU{}, where {} leads with {}",
                grouped(per_gpu[c], 2),
                rank_words(Some(mine), known),
                self.name(leader),
                grouped(per_gpu[leader], 2),
            );
            (leader, note)
        })
    }

    /// V2: degrades the worst in absolute terms: the highest mean TTFT at the heaviest level,
    /// standing out from the field and grown at least 2x; never the champion.
    fn hardest(&self, champ: Option<usize>) -> Option<usize> {
        let ttft_h = &self.ttft_h;
        (self.n >= 2 && self.li != self.hi)
            .then(|| {
                (0..self.n).filter(|&i| ttft_h[i].is_some()).reduce(|a, b| {
                    if ttft_h[b] > ttft_h[a] {
                        b
                    } else {
                        a
                    }
                })
            })
            .flatten()
            .filter(|&i| {
                self.figs[i].growth().is_some_and(|g| g >= DEGRADES)
                    && self.above_field(i).is_some_and(|(x, _)| x >= DEGRADES)
                    && Some(i) != champ
            })
    }

    fn hardest_verdict(&self, d: usize) -> ModelVerdict {
        let (f, l, h) = (&self.figs[d], self.l(), self.h());
        let g = f.growth().unwrap_or(0.0);
        let (x, others) = self.above_field(d).unwrap_or((0.0, 0.0));
        let bound = if self.latency_bound(d) {
            " (latency-bound: TTFT explodes with concurrency)"
        } else {
            ""
        };
        ModelVerdict {
            rule: "V2",
            model: self.name(d),
            headline: format!("{} degrades the hardest under load{bound}.", self.name(d)),
            text: format!(
                "Mean TTFT reaches {} at {}, the highest of {} models and {x:.1}x the median of \
                 the others ({}), from {} at {} ({g:.1}x); mean TPOT {} → {}; total throughput \
                 caps at {}.",
                ms(f.ttft_h),
                h.words(),
                self.ttft_h.iter().flatten().count(),
                ms(Some(others)),
                ms(f.ttft_l),
                l.words(),
                grouped(f.tpot_l, 2),
                ms(f.tpot_h),
                tps(f.thr_max),
            ),
        }
    }

    /// V3: the best balance among the models not judged yet, if it ties or beats the
    /// champion's rank sum or has the fastest first token.
    fn balance(&self, champ: Option<usize>, judged: &[Option<ModelVerdict>]) -> Option<usize> {
        let left = (0..self.n).filter(|&i| judged[i].is_none() && self.score(i).is_some());
        left.reduce(|a, b| if self.better(a, b) { b } else { a }).filter(|&b| {
            self.n >= 2
                && (champ.is_none_or(|c| self.score(c).is_none_or(|cs| self.score(b) <= Some(cs)))
                    || self.r_ttft[b] == Some(1))
        })
    }

    fn balance_verdict(&self, b: usize, champ: Option<usize>) -> ModelVerdict {
        // "For a large model" when it is one and the champion is smaller: the champion's
        // lead is partly its size.
        let size = &self.size;
        let smaller_champ = champ
            .and_then(|c| Some((c, size[c]?)))
            .filter(|&(_, cs)| self.large(b) && size[b].is_some_and(|bs| bs > cs));
        let (headline, sizes) = match (smaller_champ, size[b]) {
            (Some((c, cs)), Some(bs)) => (
                format!("{} offers the best balance for a large model.", self.name(b)),
                format!(
                    "; {} parameters against {}'s {}",
                    size_words(bs),
                    self.name(c),
                    size_words(cs)
                ),
            ),
            _ => (format!("{} offers the best balance.", self.name(b)), String::new()),
        };
        ModelVerdict {
            rule: "V3",
            model: self.name(b),
            headline,
            text: self.balance_text(b, &sizes),
        }
    }

    /// V3L: when V3 named no large model, the best rank sum of all the large models (2+),
    /// when no other judgement took it and it is not latency-bound against the field.
    fn large_balance(
        &self,
        balance: Option<usize>,
        judged: &[Option<ModelVerdict>],
    ) -> Option<usize> {
        let v3_large = balance.is_some_and(|b| self.large(b));
        (self.n_large() >= 2 && !v3_large)
            .then(|| {
                (0..self.n).filter(|&i| self.large(i) && self.score(i).is_some()).reduce(|a, b| {
                    if self.better(a, b) {
                        b
                    } else {
                        a
                    }
                })
            })
            .flatten()
            .filter(|&i| judged[i].is_none() && !self.latency_bound(i))
    }

    fn n_large(&self) -> usize {
        (0..self.n).filter(|&i| self.large(i)).count()
    }

    fn large_balance_verdict(&self, b: usize) -> ModelVerdict {
        let among = format!(
            "; {} parameters, the best rank sum of the {} models of {} or more",
            size_words(self.size[b].unwrap_or(0.0)),
            self.n_large(),
            size_words(LARGE_PARAMS_B)
        );
        ModelVerdict {
            rule: "V3L",
            model: self.name(b),
            headline: format!("{} offers the best balance for a large model.", self.name(b)),
            text: self.balance_text(b, &among),
        }
    }

    /// The figures of a balance judgement (V3, V3L), ranked among `among` models.
    fn balance_text(&self, b: usize, among: &str) -> String {
        let (f, l, count) =
            (&self.figs[b], self.l(), |v: &[Option<f64>]| v.iter().flatten().count());
        let first = if self.r_ttft[b] == Some(1) {
            format!("Fastest first token: {}", first_token(f, l))
        } else {
            format!(
                "{}{}",
                upper_first(&first_token(f, l)),
                rank_words(self.r_ttft[b], count(&self.ttft_l))
            )
        };
        format!(
            "{first}; {} at {}{} with mean TPOT {}{}{among}.",
            tps(f.thr_h),
            self.h().words(),
            rank_words(self.r_thr[b], count(&self.thr_h)),
            ms(f.tpot_h),
            rank_words(self.r_tpot[b], count(&self.tpot_h)),
        )
    }

    /// V4 (latency-bound against the field) or V5 (its figures): a model no rule above judged.
    fn rest_verdict(&self, i: usize) -> ModelVerdict {
        let (f, l, h) = (&self.figs[i], self.l(), self.h());
        let hr = &self.v.rows[f.h];
        let growth = f.growth().filter(|_| self.li != f.h);
        let ttft = match growth {
            Some(g) => format!(
                "mean TTFT {} at {} → {} at {} ({g:.1}x)",
                ms(f.ttft_l),
                l.words(),
                ms(f.ttft_h),
                hr.words()
            ),
            None => first_token(f, l),
        };
        let figures = if f.at_h {
            let n_thr = self.thr_h.iter().flatten().count();
            format!(
                "{} at {}{}, mean TPOT {} there; {ttft}.",
                tps(f.thr_h),
                h.words(),
                rank_words(self.r_thr[i], n_thr),
                ms(f.tpot_h)
            )
        } else if f.thr_h.is_some() {
            format!(
                "not run at {}; at {}, its heaviest level: {}, mean TPOT {} there; {ttft}.",
                h.words(),
                hr.words(),
                tps(f.thr_h),
                ms(f.tpot_h)
            )
        } else {
            format!("no level shared with another model; {ttft}.")
        };
        if self.latency_bound(i) {
            let (x, others) = self.above_field(i).unwrap_or((0.0, 0.0));
            ModelVerdict {
                rule: "V4",
                model: self.name(i),
                headline: format!(
                    "{} is latency-bound: TTFT explodes with concurrency.",
                    self.name(i)
                ),
                text: format!(
                    "{} Mean TTFT at {} is {x:.1}x the median of the other models ({}).",
                    upper_first(&figures),
                    h.words(),
                    ms(Some(others))
                ),
            }
        } else {
            ModelVerdict {
                rule: "V5",
                model: self.name(i),
                headline: format!("{}:", self.name(i)),
                text: upper_first(&figures),
            }
        }
    }
}

/// Model `e`'s figures at the lightest judged level (`shared[0]`) and at the heaviest it ran.
fn figures(e: &Entry, shared: &[usize], o: &CompareOptions) -> Figures {
    let (li, hi) = (shared[0], shared[shared.len() - 1]);
    // A model that did not run the heaviest level is judged at its own heaviest.
    let own = shared.iter().rev().copied().find(|&i| e.value(i, TOTAL, o).is_some());
    let hh = own.unwrap_or(hi);
    Figures {
        h: hh,
        at_h: hh == hi && own.is_some(),
        thr_l: e.value(li, TOTAL, o),
        thr_h: e.value(hh, TOTAL, o),
        thr_max: shared.iter().filter_map(|&i| e.value(i, TOTAL, o)).reduce(f64::max),
        ttft_l: e.value(li, TTFT, o),
        ttft_h: e.value(hh, TTFT, o),
        tpot_l: e.value(li, TPOT, o),
        tpot_h: e.value(hh, TPOT, o),
    }
}

fn upper_first(s: &str) -> String {
    let mut c = s.chars();
    c.next().map(|x| x.to_uppercase().chain(c).collect()).unwrap_or_default()
}

/// The model an entry is a variant of: its `model=` tag (`true`), else its label without
/// its variant words (`false`).
fn model_key(e: &Entry) -> (String, bool) {
    match e.tag(MODEL_TAG) {
        Some(m) => (m.to_string(), true),
        None => (label_model(&e.name), false),
    }
}

/// W1: each model beside the first one of the same model (the same `model=` tag, else the
/// same label without its variant words), at every level both have (mean TPOT; at the
/// lightest also mean TTFT). Judged on mean TPOT at every such level: [`SIGNIFICANT`] lower
/// is "improves significantly over", higher "is significantly slower than", else "is on par
/// with"; the headline names the levels of each, so a variant that wins light and loses heavy
/// says both.
fn variants(v: &ScenarioView, shared: &[usize], o: &CompareOptions) -> Vec<ModelVerdict> {
    let mut out = Vec::new();
    for (k, e) in v.entries.iter().enumerate() {
        let (key, tagged) = model_key(e);
        if key.is_empty() {
            continue;
        }
        let Some(base) = v.entries[..k].iter().find(|b| model_key(b).0.eq_ignore_ascii_case(&key))
        else {
            continue;
        };
        let both: Vec<usize> = shared
            .iter()
            .copied()
            .filter(|&i| e.value(i, TPOT, o).is_some() && base.value(i, TPOT, o).is_some())
            .collect();
        let Some(&first) = both.first() else { continue };
        let how = if tagged && model_key(base).1 {
            format!("{MODEL_TAG}={key}")
        } else {
            format!("one model by label: {key}")
        };
        out.push(variant(base, e, &how, &v.rows, &both, first, o));
    }
    out
}

fn variant(
    base: &Entry,
    e: &Entry,
    how: &str,
    rows: &[Row],
    both: &[usize],
    first: usize,
    o: &CompareOptions,
) -> ModelVerdict {
    let (a, b) = (base.value(first, TPOT, o), e.value(first, TPOT, o));
    let levels = |want: Ordering| -> Vec<String> {
        both.iter()
            .filter(|&&i| tpot_change(base.value(i, TPOT, o), e.value(i, TPOT, o)) == want)
            .map(|&i| rows[i].words())
            .collect()
    };
    let (better, worse) = (levels(Ordering::Less), levels(Ordering::Greater));
    let at =
        |l: &[String]| if l.len() == both.len() { "every level".to_string() } else { and_list(l) };
    let judged = match (better.is_empty(), worse.is_empty()) {
        (false, true) => format!("improves significantly over {} at {}", base.name, at(&better)),
        (true, false) => format!("is significantly slower than {} at {}", base.name, at(&worse)),
        (false, false) => format!(
            "improves significantly over {} at {} but is significantly slower at {}",
            base.name,
            and_list(&better),
            and_list(&worse)
        ),
        (true, true) => format!("is on par with {} at every level", base.name),
    };
    let (ta, tb) = (base.value(first, TTFT, o), e.value(first, TTFT, o));
    let mut text = format!(
        "At {}: mean TPOT {} → {}{}, mean TTFT {} → {}{}",
        rows[first].words(),
        grouped(a, 2),
        ms(b),
        change(a, b),
        grouped(ta, 2),
        ms(tb),
        change(ta, tb),
    );
    for &i in &both[1..] {
        text.push_str(&format!(
            "; at {}: mean TPOT {} → {}{}",
            rows[i].words(),
            grouped(base.value(i, TPOT, o), 2),
            ms(e.value(i, TPOT, o)),
            change(base.value(i, TPOT, o), e.value(i, TPOT, o)),
        ));
    }
    text.push('.');
    ModelVerdict {
        rule: "W1",
        model: e.name.clone(),
        headline: format!("{} {judged} ({how}).", e.name),
        text,
    }
}

/// Mean TPOT `b` against `a`: `Less` at least [`SIGNIFICANT`] lower, `Greater` at least that
/// much higher, else (or unknown) `Equal`.
fn tpot_change(a: Option<f64>, b: Option<f64>) -> Ordering {
    match (a, b) {
        (Some(a), Some(b)) if a > 0.0 && (b - a) / a <= -SIGNIFICANT => Ordering::Less,
        (Some(a), Some(b)) if a > 0.0 && (b - a) / a >= SIGNIFICANT => Ordering::Greater,
        _ => Ordering::Equal,
    }
}

/// "a", "a and b", "a, b and c".
fn and_list(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

/// The verdicts of every scenario that has any.
pub fn verdicts(views: &[ScenarioView], o: &CompareOptions) -> Vec<ScenarioVerdicts> {
    views.iter().filter_map(|v| scenario_verdicts(v, o)).collect()
}

#[cfg(test)]
mod variant_tests {
    use super::*;

    #[test]
    fn a_tpot_change_is_significant_from_ten_percent_either_way() {
        assert_eq!(tpot_change(Some(16.0), Some(12.0)), Ordering::Less);
        assert_eq!(tpot_change(Some(60.0), Some(66.0)), Ordering::Greater);
        assert_eq!(tpot_change(Some(24.0), Some(22.0)), Ordering::Equal);
        assert_eq!(tpot_change(None, Some(1.0)), Ordering::Equal);
        assert_eq!(tpot_change(Some(0.0), Some(1.0)), Ordering::Equal);
    }

    #[test]
    fn levels_read_as_a_list() {
        let l = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(and_list(&l(&[])), "");
        assert_eq!(and_list(&l(&["1 concurrent"])), "1 concurrent");
        assert_eq!(and_list(&l(&["1", "10", "100"])), "1, 10 and 100");
    }
}
