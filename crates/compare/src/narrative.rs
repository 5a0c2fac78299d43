//! The written summary's fact rules: short sentences produced by fixed rules from the numbers,
//! never by hand. They read the same per-scenario views as the verdicts
//! ([`crate::verdict`]): one deployment (label) per entry, one level (concurrency, or prompts
//! at rate inf) per row, never two scenarios at once. So a "lightest load" is a deployment's
//! lightest level, not any single-point series, and a degradation runs over its levels.
//!
//! A scenario with verdicts is summed up by them (champion, best balance, degradation, with
//! their figures): R1 to R4 would say the same with other figures, and could name another
//! model, so they are only written for a scenario the verdicts cannot judge (no level that two
//! deployments share). R0 is written for every scenario. Rules are documented in
//! docs/store.md; rejected points (success rate below the minimum) never win a rule.
//!
//! | rule | finds |
//! |---|---|
//! | R0 rejected | every rejected point, with its success rate |
//! | R1 best throughput | the highest output token throughput of any level |
//! | R2 best single-request latency | the lowest mean TTFT among each deployment's lightest level |
//! | R3 best balance | the lowest mean of (output throughput rank + p99 TTFT rank) over the levels a deployment shares; needs 2+ deployments |
//! | R4 worst degradation | the largest p99 TTFT ratio heaviest/lightest level; needs a deployment with 2+ levels, ratio > 1 |

use serde::Serialize;

use crate::compare::{rejected, CompareOptions};
use crate::deploy::{Entry, ScenarioView};
use crate::rank::rank_values;
use crate::verdict::ScenarioVerdicts;
use servelab_metrics::{Metric, MetricKey, Stat};

const OUTPUT: MetricKey = MetricKey::of(Metric::OutputThroughput);
const TTFT_MEAN: MetricKey = MetricKey::stat(Metric::Ttft, Stat::Mean);
const TPOT_MEAN: MetricKey = MetricKey::stat(Metric::Tpot, Stat::Mean);
const TTFT_P99: MetricKey = MetricKey::stat(Metric::Ttft, Stat::P(99.0));

/// One sentence and the rule that produced it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    /// The rule's id, `R0` to `R4`.
    pub rule: &'static str,
    /// The scenario (workload) it is about, as [`crate::deploy::Workload::name`] names it.
    pub scenario: String,
    /// The sentence.
    pub text: String,
}

fn finding(rule: &'static str, v: &ScenarioView, text: String) -> Finding {
    Finding { rule, scenario: v.workload.name(), text }
}

/// R0: every rejected point of the view.
pub fn rule_rejected(v: &ScenarioView, o: &CompareOptions) -> Vec<Finding> {
    let mut out = Vec::new();
    for e in &v.entries {
        for (row, cell) in v.rows.iter().zip(&e.cells) {
            let Some(sr) = cell.as_ref().and_then(|s| s.success_rate()) else { continue };
            if rejected(Some(sr), o.min_success_rate) {
                out.push(finding(
                    "R0",
                    v,
                    format!(
                        "{} at {} is excluded: success rate {:.1}% is below {:.1}%.",
                        e.name,
                        row.words(),
                        sr * 100.0,
                        o.min_success_rate * 100.0
                    ),
                ));
            }
        }
    }
    out
}

/// The best `(entry, row, value)` of a metric over candidate cells; ties keep the first.
fn best<'a>(
    v: &'a ScenarioView,
    cands: impl Iterator<Item = (usize, usize)>,
    m: MetricKey,
    o: &CompareOptions,
) -> Option<(&'a Entry, usize, f64)> {
    let mut best: Option<(&Entry, usize, f64)> = None;
    for (e, r) in cands {
        let Some(x) = v.entries[e].value(r, m, o) else { continue };
        if best.is_none_or(|(_, _, b)| m.better(x, b)) {
            best = Some((&v.entries[e], r, x));
        }
    }
    best
}

/// The levels of entry `e` that count (measured, not rejected), lightest first.
fn levels(v: &ScenarioView, e: usize, m: MetricKey, o: &CompareOptions) -> Vec<usize> {
    (0..v.rows.len()).filter(|&r| v.entries[e].value(r, m, o).is_some()).collect()
}

/// R1: the highest output token throughput of any accepted level.
pub fn rule_best_throughput(v: &ScenarioView, o: &CompareOptions) -> Option<Finding> {
    let cands = (0..v.entries.len()).flat_map(|e| (0..v.rows.len()).map(move |r| (e, r)));
    let (e, r, x) = best(v, cands, OUTPUT, o)?;
    let text =
        format!("Best throughput: {} with {x:.1} output tok/s at {}.", e.name, v.rows[r].words());
    Some(finding("R1", v, text))
}

/// R2: the lowest mean TTFT among each deployment's lightest accepted level.
pub fn rule_best_latency(v: &ScenarioView, o: &CompareOptions) -> Option<Finding> {
    let cands =
        (0..v.entries.len()).filter_map(|e| Some((e, *levels(v, e, TTFT_MEAN, o).first()?)));
    let (e, r, x) = best(v, cands, TTFT_MEAN, o)?;
    let tpot =
        e.value(r, TPOT_MEAN, o).map(|t| format!(", mean TPOT {t:.2} ms")).unwrap_or_default();
    let text = format!(
        "Best single-request latency: {}, mean TTFT {x:.1} ms{tpot} at {}, its lightest level.",
        e.name,
        v.rows[r].words()
    );
    Some(finding("R2", v, text))
}

/// R3: the lowest mean of (output throughput rank + p99 TTFT rank) over the levels a
/// deployment shares with another; ties go to the higher peak throughput.
pub fn rule_best_balance(v: &ScenarioView, o: &CompareOptions) -> Option<Finding> {
    if v.entries.len() < 2 {
        return None;
    }
    let mut score: Vec<(usize, f64, usize)> = Vec::new(); // (entry, rank sum, levels)
    for r in 0..v.rows.len() {
        let at = |m: MetricKey| -> Vec<(String, f64)> {
            (0..v.entries.len())
                .filter_map(|e| Some((e.to_string(), v.entries[e].value(r, m, o)?)))
                .collect()
        };
        let (thr, lat) = (rank_values(OUTPUT, &at(OUTPUT)), rank_values(TTFT_P99, &at(TTFT_P99)));
        if thr.len() < 2 || lat.len() < 2 {
            continue;
        }
        for t in &thr {
            let Some(l) = lat.iter().find(|l| l.name == t.name) else { continue };
            let Ok(e) = t.name.parse::<usize>() else { continue };
            match score.iter_mut().find(|(j, _, _)| *j == e) {
                Some(s) => {
                    s.1 += (t.rank + l.rank) as f64;
                    s.2 += 1;
                }
                None => score.push((e, (t.rank + l.rank) as f64, 1)),
            }
        }
    }
    let peak = |e: usize| -> f64 {
        (0..v.rows.len()).filter_map(|r| v.entries[e].value(r, OUTPUT, o)).fold(0.0, f64::max)
    };
    let (e, sum, n) = score.into_iter().min_by(|a, b| {
        (a.1 / a.2 as f64).total_cmp(&(b.1 / b.2 as f64)).then(peak(b.0).total_cmp(&peak(a.0)))
    })?;
    let word = if n == 1 { "level" } else { "levels" };
    let text = format!(
        "Best balance: {} (mean rank {:.1} in output throughput plus p99 TTFT, over {n} {word}).",
        v.entries[e].name,
        sum / n as f64
    );
    Some(finding("R3", v, text))
}

/// R4: the largest growth of p99 TTFT from a deployment's lightest to its heaviest accepted
/// level.
pub fn rule_worst_degradation(v: &ScenarioView, o: &CompareOptions) -> Option<Finding> {
    let mut worst: Option<(usize, usize, f64, usize, f64, f64)> = None;
    for e in 0..v.entries.len() {
        let lv = levels(v, e, TTFT_P99, o);
        let (Some(&lo), Some(&hi)) = (lv.first(), lv.last()) else { continue };
        let at = |r: usize| v.entries[e].value(r, TTFT_P99, o).unwrap_or(0.0);
        let (a, b) = (at(lo), at(hi));
        if lo == hi || a <= 0.0 {
            continue;
        }
        let ratio = b / a;
        if ratio > 1.0 && worst.is_none_or(|w| ratio > w.5) {
            worst = Some((e, lo, a, hi, b, ratio));
        }
    }
    let (e, lo, a, hi, b, ratio) = worst?;
    let text = format!(
        "Worst degradation under load: {}, p99 TTFT grows {ratio:.1}x from {a:.1} ms at {} to {b:.1} ms at {}.",
        v.entries[e].name,
        v.rows[lo].words(),
        v.rows[hi].words()
    );
    Some(finding("R4", v, text))
}

/// The findings of every scenario: R0 always; R1 to R4 only where the scenario has no
/// verdicts (see the module's doc), so the report never holds two summaries that disagree.
pub fn written_summary(
    views: &[ScenarioView],
    judged: &[ScenarioVerdicts],
    o: &CompareOptions,
) -> Vec<Finding> {
    let mut out = Vec::new();
    for v in views {
        out.extend(rule_rejected(v, o));
        if judged.iter().any(|s| s.workload == v.workload) {
            continue;
        }
        out.extend(rule_best_throughput(v, o));
        out.extend(rule_best_latency(v, o));
        out.extend(rule_best_balance(v, o));
        out.extend(rule_worst_degradation(v, o));
    }
    out
}
