//! The written summary: short sentences produced by fixed rules from the numbers, never by
//! hand. Each rule is documented in docs/store.md and applies only when its inputs exist,
//! to the series of one workload (sweep scenario and dataset) at a time;
//! rejected points (success rate below the minimum) never win a rule.
//!
//! | rule | finds |
//! |---|---|
//! | R0 rejected | every rejected point, with its success rate |
//! | R1 best throughput | the highest output token throughput of any point |
//! | R2 best single-request latency | the lowest mean TTFT among each series' lightest-load point |
//! | R3 best balance | the lowest mean of (output throughput rank + p99 TTFT rank) over the workloads and loads a series ran; needs 2+ series |
//! | R4 worst degradation | the largest p99 TTFT ratio heaviest/lightest load; needs a series with 2+ points, ratio > 1 |

use serde::Serialize;

use crate::compare::{rejected, CompareOptions};
use crate::data::Subject;
use crate::deploy::Workload;
use crate::rank::{identities, point_value, rank_values, Series};
use servelab_metrics::{Metric, MetricKey, Stat};
use servelab_records::LoadSpec;

const OUTPUT: MetricKey = MetricKey::of(Metric::OutputThroughput);
const TTFT_MEAN: MetricKey = MetricKey::stat(Metric::Ttft, Stat::Mean);
const TPOT_MEAN: MetricKey = MetricKey::stat(Metric::Tpot, Stat::Mean);
const TTFT_P99: MetricKey = MetricKey::stat(Metric::Ttft, Stat::P(99.0));

/// One sentence and the rule that produced it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    /// The rule's id, `R0` to `R4`.
    pub rule: &'static str,
    /// The sentence.
    pub text: String,
}

fn ok(p: &Subject, o: &CompareOptions) -> bool {
    !rejected(p.success_rate(), o.min_success_rate)
}

/// R0: every rejected point.
pub fn rule_rejected(series: &[Series], o: &CompareOptions) -> Vec<Finding> {
    let mut out = Vec::new();
    for s in series {
        for p in &s.points {
            if let (false, Some(sr)) = (ok(p, o), p.success_rate()) {
                out.push(Finding {
                    rule: "R0",
                    text: format!(
                        "{} at {} is excluded: success rate {:.1}% is below {:.1}%.",
                        s.name,
                        p.load(),
                        sr * 100.0,
                        o.min_success_rate * 100.0
                    ),
                });
            }
        }
    }
    out
}

/// The best `(series, point, value)` of a metric over candidate points; ties keep the first.
fn best<'a>(
    cands: impl Iterator<Item = (&'a Series, &'a Subject)>,
    metric: MetricKey,
) -> Option<(&'a Series, &'a Subject, f64)> {
    let mut best: Option<(&Series, &Subject, f64)> = None;
    for (s, p) in cands {
        let Some(v) = point_value(p, metric) else { continue };
        if best.is_none_or(|(_, _, b)| metric.better(v, b)) {
            best = Some((s, p, v));
        }
    }
    best
}

/// R1: highest output token throughput of any accepted point.
pub fn rule_best_throughput(series: &[Series], o: &CompareOptions) -> Option<Finding> {
    let cands =
        series.iter().flat_map(|s| s.points.iter().map(move |p| (s, p))).filter(|(_, p)| ok(p, o));
    let (s, p, v) = best(cands, OUTPUT)?;
    Some(Finding {
        rule: "R1",
        text: format!("Best throughput: {} with {v:.1} output tok/s at {}.", s.name, p.load()),
    })
}

/// R2: lowest mean TTFT among each series' lightest accepted point.
pub fn rule_best_latency(series: &[Series], o: &CompareOptions) -> Option<Finding> {
    let cands = series.iter().filter_map(|s| Some((s, s.points.iter().find(|p| ok(p, o))?)));
    let (s, p, v) = best(cands, TTFT_MEAN)?;
    let tpot =
        point_value(p, TPOT_MEAN).map(|t| format!(", mean TPOT {t:.2} ms")).unwrap_or_default();
    Some(Finding {
        rule: "R2",
        text: format!(
            "Best single-request latency: {}, mean TTFT {v:.1} ms{tpot} at {}, its lightest load.",
            s.name,
            p.load()
        ),
    })
}

/// R3: lowest mean of (output throughput rank + p99 TTFT rank) over the levels a series
/// ran, among 2+ series; ties go to the higher best throughput.
pub fn rule_best_balance(series: &[Series], o: &CompareOptions) -> Option<Finding> {
    if series.len() < 2 {
        return None;
    }
    let mut score: Vec<(usize, f64, usize)> = Vec::new(); // (series index, rank sum, levels)
                                                          // Ranked per workload and load, never across scenarios or prompt counts.
    for id in identities(series) {
        let at = |m: MetricKey| -> Vec<(String, f64)> {
            series
                .iter()
                .enumerate()
                .filter_map(|(i, s)| {
                    let p = s.at_identity(&id).filter(|p| ok(p, o))?;
                    Some((i.to_string(), point_value(p, m)?))
                })
                .collect()
        };
        let (thr, lat) = (rank_values(OUTPUT, &at(OUTPUT)), rank_values(TTFT_P99, &at(TTFT_P99)));
        if thr.len() < 2 || lat.len() < 2 {
            continue;
        }
        for t in &thr {
            let Some(l) = lat.iter().find(|l| l.name == t.name) else { continue };
            let i: usize = t.name.parse().unwrap_or(usize::MAX);
            match score.iter_mut().find(|(j, _, _)| *j == i) {
                Some(e) => {
                    e.1 += (t.rank + l.rank) as f64;
                    e.2 += 1;
                }
                None => score.push((i, (t.rank + l.rank) as f64, 1)),
            }
        }
    }
    let peak = |i: usize| -> f64 {
        series[i].points.iter().filter_map(|p| point_value(p, OUTPUT)).fold(0.0, f64::max)
    };
    let (i, sum, n) = score.into_iter().filter(|(i, _, _)| *i < series.len()).min_by(|a, b| {
        (a.1 / a.2 as f64).total_cmp(&(b.1 / b.2 as f64)).then(peak(b.0).total_cmp(&peak(a.0)))
    })?;
    let levels_word = if n == 1 { "load level" } else { "load levels" };
    Some(Finding {
        rule: "R3",
        text: format!(
            "Best balance: {} (mean rank {:.1} in output throughput plus p99 TTFT, over {n} {levels_word}).",
            series[i].name,
            sum / n as f64
        ),
    })
}

/// R4: the largest growth of p99 TTFT from a series' lightest to its heaviest accepted point.
pub fn rule_worst_degradation(series: &[Series], o: &CompareOptions) -> Option<Finding> {
    let mut worst: Option<(&Series, LoadSpec, f64, LoadSpec, f64, f64)> = None;
    for s in series {
        let pts: Vec<(&Subject, f64)> = s
            .points
            .iter()
            .filter(|p| ok(p, o))
            .filter_map(|p| Some((p, point_value(p, TTFT_P99)?)))
            .collect();
        let (Some((lo, a)), Some((hi, b))) = (pts.first(), pts.last()) else { continue };
        if pts.len() < 2 || *a <= 0.0 {
            continue;
        }
        let ratio = b / a;
        if ratio > 1.0 && worst.as_ref().is_none_or(|w| ratio > w.5) {
            worst = Some((s, lo.load(), *a, hi.load(), *b, ratio));
        }
    }
    let (s, lo, a, hi, b, r) = worst?;
    Some(Finding {
        rule: "R4",
        text: format!(
            "Worst degradation under load: {}, p99 TTFT grows {r:.1}x from {a:.1} ms at {lo} to {b:.1} ms at {hi}.",
            s.name
        ),
    })
}

/// Every rule in order, for each workload (sweep scenario and dataset) apart: a best or a
/// worst is never found across two scenarios.
pub fn written_summary(series: &[Series], o: &CompareOptions) -> Vec<Finding> {
    let workload = |s: &Series| s.points.first().and_then(|p| p.runs.first()).map(Workload::of);
    let mut groups: Vec<(Option<Workload>, Vec<Series>)> = Vec::new();
    for s in series {
        let w = workload(s);
        match groups.iter_mut().find(|(g, _)| *g == w) {
            Some((_, v)) => v.push(s.clone()),
            None => groups.push((w, vec![s.clone()])),
        }
    }
    let mut out = rule_rejected(series, o);
    for (_, g) in &groups {
        out.extend(rule_best_throughput(g, o));
        out.extend(rule_best_latency(g, o));
        out.extend(rule_best_balance(g, o));
        out.extend(rule_worst_degradation(g, o));
    }
    out
}
