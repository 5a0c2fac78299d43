//! Side-by-side comparison against a baseline (the first subject), with a noise verdict per
//! metric.
//!
//! Noise: with 2+ repeated runs on both sides, run-to-run noise (any metric): Welch's t
//! interval while either side has fewer than 5 runs, else the bootstrap over the repeats. Otherwise latency metrics bootstrap over per-request
//! samples (request-to-request noise within a run); run-level metrics (throughputs, success
//! rate) of single runs have no noise estimate and say so.

use serde::Serialize;

use crate::data::{Identity, Subject};
use crate::welch::{welch_interval, MIN_BOOTSTRAP_REPEATS};
use servelab_metrics::bootstrap::{diff_interval, Interval};
use servelab_metrics::{
    MetricKey, Stat, Summary, DEPLOYMENT_KEYS, GPU_KEYS, HEADLINE, LOAD_KEYS, REASONING_KEYS,
};
use servelab_records::LoadSpec;

/// Comparison settings.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct CompareOptions {
    /// Runs below this success rate (a fraction) are rejected: shown, never the winner.
    pub min_success_rate: f64,
    /// Bootstrap replicates.
    pub resamples: usize,
    /// Seed of the bootstrap, so intervals are the same every time.
    pub seed: u64,
    /// Confidence level of the intervals.
    pub level: f64,
}

impl Default for CompareOptions {
    fn default() -> Self {
        CompareOptions { min_success_rate: 0.99, resamples: 1000, seed: 0, level: 0.95 }
    }
}

/// How the noise of a difference was estimated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Noise {
    /// Welch's t interval over repeated runs, when either side has fewer than 5 (a
    /// bootstrap of so few runs understates the noise).
    FewRepeats {
        /// The baseline's runs.
        baseline: usize,
        /// This subject's runs.
        this: usize,
    },
    /// Bootstrap over repeated runs (counts of the baseline's and this subject's runs).
    Repeats {
        /// The baseline's runs.
        baseline: usize,
        /// This subject's runs.
        this: usize,
    },
    /// Bootstrap over per-request samples.
    Requests {
        /// The baseline's requests.
        baseline: usize,
        /// This subject's requests.
        this: usize,
    },
    /// No estimate: single runs of a run-level metric, or runs without records.
    Unknown,
}

/// What the difference means.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DeltaVerdict {
    /// Better than the baseline, beyond the noise.
    Better,
    /// Worse than the baseline, beyond the noise.
    Worse,
    /// The interval includes 0: not distinguishable from noise.
    WithinNoise,
    /// No noise estimate.
    Unknown,
}

/// A subject's difference from the baseline on one metric.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Delta {
    /// This value minus the baseline's, in the metric's unit.
    pub abs: f64,
    /// Relative to the baseline, percent; `None` when the baseline is 0.
    pub pct: Option<f64>,
    /// Confidence interval of `abs`; `None` without a noise estimate.
    pub interval: Option<Interval>,
    /// How the interval was estimated.
    pub noise: Noise,
    /// What the difference means, given the interval and the metric's direction.
    pub verdict: DeltaVerdict,
}

/// One metric across subjects.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MetricRow {
    /// The metric and statistic.
    pub metric: MetricKey,
    /// Each subject's value, in subject order; `None` where it lacks the metric.
    pub values: Vec<Option<f64>>,
    /// `None` for the baseline and where either value is missing.
    pub deltas: Vec<Option<Delta>>,
    /// Index of the best non-rejected subject, if any has the metric.
    pub best: Option<usize>,
}

/// A subject's header facts.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SubjectInfo {
    /// Display name.
    pub name: String,
    /// The load it ran at.
    pub load: LoadSpec,
    /// Its workload and load; `None` for a subject without runs.
    pub identity: Option<Identity>,
    /// How many runs (repeats) it has.
    pub runs: usize,
    /// Completed / (completed + failed) over its runs, a fraction; `None` when unknown.
    pub success_rate: Option<f64>,
    /// True when its success rate is below the minimum: shown, never the winner.
    pub rejected: bool,
    /// True when every run of it was predicted by the engine model: beside a measured
    /// subject its difference is the prediction's error, neither better nor worse.
    pub predicted: bool,
}

/// Subjects side by side against the first (the baseline), one row per headline metric.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    /// Header facts of each subject, baseline first.
    pub subjects: Vec<SubjectInfo>,
    /// One row per headline metric, in [`HEADLINE`] order, then output tokens/s per GPU and
    /// per user ([`DEPLOYMENT_KEYS`]) when runs have them, then the reasoning models' ones
    /// ([`REASONING_KEYS`]) when a run had reasoning, then the GPU energy and cost ones
    /// ([`GPU_KEYS`]) when a run had them.
    pub rows: Vec<MetricRow>,
    /// How each subject's workload or load differs from the baseline's, one line per
    /// subject that differs (`B: prompts: 10 prompts vs 100 prompts`); empty when all match.
    pub differences: Vec<String>,
    /// The settings used.
    pub options: CompareOptions,
}

impl Comparison {
    /// True when predicted and measured subjects stand side by side: their differences are
    /// a prediction's error, and no value is best.
    pub fn mixes_predictions(&self) -> bool {
        let predicted = |p: bool| self.subjects.iter().any(|s| s.predicted == p);
        predicted(true) && predicted(false)
    }
}

/// Rejected: the success rate is known and below the minimum.
pub fn rejected(success_rate: Option<f64>, min: f64) -> bool {
    success_rate.is_some_and(|s| s < min)
}

/// The verdict of a difference interval for a metric's direction.
pub fn verdict(metric: MetricKey, interval: Option<Interval>) -> DeltaVerdict {
    match interval {
        None => DeltaVerdict::Unknown,
        Some(i) if !i.excludes_zero() => DeltaVerdict::WithinNoise,
        Some(i) => {
            let up = i.lo > 0.0;
            if up == metric.higher_is_better() {
                DeltaVerdict::Better
            } else {
                DeltaVerdict::Worse
            }
        }
    }
}

/// The values of a metric as 1-value units per repeated run. The reasoning figures have none:
/// their noise is read from the requests that had reasoning.
fn repeat_units(s: &Subject, metric: MetricKey) -> Vec<Vec<f64>> {
    if metric.metric.is_reasoning() {
        return Vec::new();
    }
    s.runs.iter().filter_map(|r| r.metric(metric)).map(|v| vec![v]).collect()
}

/// Noise interval of `this − base` for one metric, and how it was estimated.
fn noise(
    base: &Subject,
    this: &Subject,
    metric: MetricKey,
    o: &CompareOptions,
    seed: u64,
) -> (Option<Interval>, Noise) {
    let (ra, rb) = (repeat_units(base, metric), repeat_units(this, metric));
    if ra.len() >= 2 && rb.len() >= 2 && ra.len().min(rb.len()) < MIN_BOOTSTRAP_REPEATS {
        let flat = |u: &[Vec<f64>]| u.iter().flatten().copied().collect::<Vec<f64>>();
        let i = welch_interval(&flat(&ra), &flat(&rb), o.level);
        return (i, Noise::FewRepeats { baseline: ra.len(), this: rb.len() });
    }
    if ra.len() >= 2 && rb.len() >= 2 {
        let i = diff_interval(&ra, &rb, Stat::Mean, o.resamples, seed, o.level);
        return (i, Noise::Repeats { baseline: ra.len(), this: rb.len() });
    }
    if let Some(stat) = metric.stat {
        if let (Some(ua), Some(ub)) = (base.units(metric.metric), this.units(metric.metric)) {
            if let Some(i) = diff_interval(&ua, &ub, stat, o.resamples, seed, o.level) {
                return (Some(i), Noise::Requests { baseline: ua.len(), this: ub.len() });
            }
        }
    }
    (None, Noise::Unknown)
}

/// The metrics compared: the headline's, then per GPU and per user, the reasoning models'
/// when a run had reasoning, the GPU energy and cost ones when a run had them, and the load's
/// when a run reached a steady state.
fn metric_keys(subjects: &[Subject]) -> Vec<MetricKey> {
    let any = |has: fn(&Summary) -> bool| {
        subjects.iter().flat_map(|s| &s.runs).any(|r| r.summary.as_ref().is_some_and(has))
    };
    let when = |yes: bool, keys: &'static [MetricKey]| if yes { keys } else { &[] };
    let reasoning = when(any(|s| s.reasoning.is_some()), &REASONING_KEYS);
    let gpu = when(any(|s| s.gpu.is_some()), &GPU_KEYS);
    let steady = |s: &Summary| s.load.as_ref().is_some_and(|l| l.steady_figures().is_some());
    let load = when(any(steady), &LOAD_KEYS);
    HEADLINE
        .iter()
        .chain(&deployment_keys(subjects))
        .chain(reasoning)
        .chain(gpu)
        .chain(load)
        .copied()
        .collect()
}

/// Output tokens/s per GPU when a run states its GPU count, and per user when a run has a
/// mean TPOT ([`DEPLOYMENT_KEYS`]).
fn deployment_keys(subjects: &[Subject]) -> Vec<MetricKey> {
    let runs = || subjects.iter().flat_map(|s| &s.runs);
    DEPLOYMENT_KEYS
        .into_iter()
        .filter(|&k| runs().any(|r| r.deployment_value(k).is_some()))
        .collect()
}

/// Index of the best value among non-rejected subjects; ties keep the earlier. `None` for a
/// metric without a better direction ([`servelab_metrics::Metric::has_direction`]).
pub fn best_index(metric: MetricKey, values: &[Option<f64>], rejected: &[bool]) -> Option<usize> {
    if !metric.metric.has_direction() {
        return None;
    }
    let mut best: Option<(usize, f64)> = None;
    for (i, v) in values.iter().enumerate() {
        let Some(v) = *v else { continue };
        if rejected.get(i).copied().unwrap_or(false) {
            continue;
        }
        if best.is_none_or(|(_, b)| metric.better(v, b)) {
            best = Some((i, v));
        }
    }
    best.map(|(i, _)| i)
}

/// Compare subjects against the first.
pub fn compare(subjects: &[Subject], o: &CompareOptions) -> Comparison {
    let infos: Vec<SubjectInfo> = subjects
        .iter()
        .map(|s| {
            let sr = s.success_rate();
            SubjectInfo {
                name: s.name.clone(),
                load: s.load(),
                identity: s.identity(),
                runs: s.runs.len(),
                success_rate: sr,
                rejected: rejected(sr, o.min_success_rate),
                predicted: !s.runs.is_empty()
                    && s.runs.iter().all(|r| crate::data::is_predicted_name(&r.name)),
            }
        })
        .collect();
    let rejected: Vec<bool> = infos.iter().map(|i| i.rejected).collect();
    let rows = metric_keys(subjects)
        .iter()
        .enumerate()
        .map(|(mi, &metric)| {
            let values: Vec<Option<f64>> =
                subjects.iter().map(|s| s.metric_value(metric)).collect();
            let deltas = subjects
                .iter()
                .enumerate()
                .map(|(i, s)| {
                    let (Some(base), Some(v)) = (values[0], values[i]) else { return None };
                    if i == 0 {
                        return None;
                    }
                    // A distinct, fixed seed per (metric, subject): reproducible, independent.
                    let seed = o.seed ^ ((mi as u64) << 32) ^ i as u64;
                    let (interval, noise) = noise(&subjects[0], s, metric, o, seed);
                    let abs = v - base;
                    Some(Delta {
                        abs,
                        pct: (base != 0.0).then(|| abs / base * 100.0),
                        interval,
                        noise,
                        verdict: verdict(metric, interval),
                    })
                })
                .collect();
            let best = best_index(metric, &values, &rejected);
            MetricRow { metric, values, deltas, best }
        })
        .collect();
    let differences = differences(&infos);
    Comparison { subjects: infos, rows, options: *o, differences }
}

/// One line per subject whose identity differs from the baseline's.
fn differences(infos: &[SubjectInfo]) -> Vec<String> {
    let Some(base) = infos.first().and_then(|b| b.identity.as_ref()) else { return Vec::new() };
    infos
        .iter()
        .skip(1)
        .filter_map(|s| {
            let d = s.identity.as_ref()?.differences(base);
            (!d.is_empty()).then(|| format!("{}: {}", s.name, d.join("; ")))
        })
        .collect()
}

/// Subjects of one workload and load, one from each operand, to compare with each other.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    /// The shared identity in words; `None` when each operand was a single subject.
    pub heading: Option<String>,
    /// One subject per operand, in operand order.
    pub subjects: Vec<Subject>,
}

/// The operands of a `compare`, matched point by point.
#[derive(Debug, Clone, PartialEq)]
pub struct Pairing {
    /// The comparisons to make.
    pub points: Vec<Point>,
    /// Subjects left out: no subject of the same identity in every other operand.
    pub unmatched: Vec<String>,
}

/// Match operands (each one subject or more, as `subjects_of` splits them) point by
/// point. When every operand is one subject, they are compared as they are (differences
/// in workload or load are then named by the comparison). Otherwise each identity of the
/// first operand that every other operand also has becomes one point, or, failing that, the
/// one subject of the same scenario, dataset and load with another prompt count (not at
/// rate inf without a cap; the comparison names the difference); the rest are listed as
/// unmatched. An error when no identity is shared: nothing would be compared.
pub fn pair(operands: Vec<Vec<Subject>>) -> Result<Pairing, String> {
    if operands.iter().all(|o| o.len() == 1) {
        let subjects = operands.into_iter().flatten().collect();
        return Ok(Pairing { points: vec![Point { heading: None, subjects }], unmatched: vec![] });
    }
    let mut points = Vec::new();
    let mut used: Vec<Vec<bool>> = operands.iter().map(|o| vec![false; o.len()]).collect();
    for first in operands.first().into_iter().flatten() {
        let Some(id) = first.identity() else { continue };
        let found: Vec<Option<usize>> = operands
            .iter()
            .zip(&used)
            .map(|(o, u)| {
                o.iter().position(|s| s.identity().as_ref() == Some(&id)).or_else(|| {
                    // The same point run with another prompt count (a prediction beside a
                    // measurement, a sweep scaling prompts differently): compared, and the
                    // comparison names the difference as a caveat. Not at rate inf without a
                    // cap, where the prompt count is the load.
                    if id.load == LoadSpec::default().to_string() {
                        return None;
                    }
                    let like = |s: &Subject| {
                        s.identity().is_some_and(|t| {
                            t.scenario == id.scenario
                                && t.dataset == id.dataset
                                && t.load == id.load
                        })
                    };
                    let mut c = o.iter().enumerate().filter(|(i, s)| !u[*i] && like(s));
                    match (c.next(), c.next()) {
                        (Some((i, _)), None) => Some(i),
                        _ => None,
                    }
                })
            })
            .collect();
        if found.iter().all(Option::is_some) {
            let idx: Vec<usize> = found.into_iter().flatten().collect();
            for (o, &i) in idx.iter().enumerate() {
                used[o][i] = true;
            }
            let subjects = idx.iter().enumerate().map(|(o, &i)| operands[o][i].clone()).collect();
            points.push(Point { heading: Some(id.describe()), subjects });
        }
    }
    let unmatched: Vec<String> = operands
        .iter()
        .zip(&used)
        .flat_map(|(o, u)| o.iter().zip(u).filter(|(_, &u)| !u))
        .map(|(s, _)| {
            let id = s.identity().map(|i| i.describe()).unwrap_or_default();
            format!("{} ({id})", s.name)
        })
        .collect();
    if points.is_empty() {
        // A few examples, not every point of two sweeps (that made a 3 KB line).
        const SHOWN: usize = 3;
        let more = match unmatched.len().saturating_sub(SHOWN) {
            0 => String::new(),
            n => format!(" and {n} more"),
        };
        return Err(format!(
            "no workload and load is common to every operand ({}{more}). Compare runs of one \
             workload and load: pass run ids (`servelab runs list --label LABEL`) or sweeps \
             of the same scenarios and levels",
            unmatched[..unmatched.len().min(SHOWN)].join("; ")
        ));
    }
    Ok(Pairing { points, unmatched })
}

#[cfg(test)]
mod tests {
    use super::*;
    use servelab_metrics::Metric;

    #[test]
    fn counts_with_no_direction_have_no_best_value() {
        let values = [Some(4.0), Some(6.0)];
        for m in [Metric::ReasoningTokens, Metric::AnswerTokens] {
            assert_eq!(best_index(MetricKey::of(m), &values, &[false, false]), None);
        }
        let ttft = MetricKey::stat(Metric::Ttft, Stat::Mean);
        assert_eq!(best_index(ttft, &values, &[false, false]), Some(0));
        assert_eq!(best_index(MetricKey::of(Metric::OutputThroughput), &values, &[]), Some(1));
        assert_eq!(best_index(ttft, &values, &[true, false]), Some(1), "rejected: never best");
    }
}
