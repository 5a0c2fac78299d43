//! `--slo ttft_p99:500,tpot_p99:50`: objectives on a point's summary, and the search for the
//! highest load that meets them.

use serde::{Deserialize, Serialize};
use servelab_metrics::{Distribution, Summary};

use crate::error::{invalid, SweepError};
use crate::grid::Axis;

/// Which latency an objective bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SloMetric {
    Ttft,
    Tpot,
    Itl,
    E2el,
}

/// Which statistic of it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SloStat {
    Mean,
    Median,
    /// A percentile in (0, 100].
    P(f64),
}

/// One objective: `metric stat <= limit_ms`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SloTerm {
    pub metric: SloMetric,
    pub stat: SloStat,
    pub limit_ms: f64,
}

impl SloTerm {
    /// `ttft_p99` and so on, as the user wrote it.
    pub fn key(&self) -> String {
        let m = match self.metric {
            SloMetric::Ttft => "ttft",
            SloMetric::Tpot => "tpot",
            SloMetric::Itl => "itl",
            SloMetric::E2el => "e2el",
        };
        let s = match self.stat {
            SloStat::Mean => "mean".to_string(),
            SloStat::Median => "median".to_string(),
            SloStat::P(p) => format!("p{p}"),
        };
        format!("{m}_{s}")
    }

    /// The value this term reads from a summary; `None` when the summary lacks that
    /// percentile or the metric had no samples.
    pub fn value(&self, s: &Summary) -> Option<f64> {
        let d = metric_of(s, self.metric);
        if d.count == 0 {
            return None;
        }
        stat_of(d, self.stat)
    }
}

/// The distribution a metric names.
pub fn metric_of(s: &Summary, m: SloMetric) -> &Distribution {
    match m {
        SloMetric::Ttft => &s.ttft_ms,
        SloMetric::Tpot => &s.tpot_ms,
        SloMetric::Itl => &s.itl_ms,
        SloMetric::E2el => &s.e2el_ms,
    }
}

/// A statistic of a distribution; `None` for a percentile it was not computed with.
pub fn stat_of(d: &Distribution, stat: SloStat) -> Option<f64> {
    match stat {
        SloStat::Mean => Some(d.mean),
        SloStat::Median => Some(d.median),
        SloStat::P(p) => d.percentile(p),
    }
}

/// All objectives of `--slo`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SloSpec {
    pub terms: Vec<SloTerm>,
}

/// Whether one summary meets the objectives, and what it missed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SloCheck {
    pub pass: bool,
    pub violations: Vec<String>,
}

/// `metric_stat` → (metric, stat), e.g. `ttft_p99`, `e2el_mean`, `tpot_median`.
pub fn parse_key(key: &str) -> Option<(SloMetric, SloStat)> {
    let (m, s) = key.split_once('_')?;
    let metric = match m {
        "ttft" => SloMetric::Ttft,
        "tpot" => SloMetric::Tpot,
        "itl" => SloMetric::Itl,
        "e2el" | "e2e" => SloMetric::E2el,
        _ => return None,
    };
    let stat = match s {
        "mean" => SloStat::Mean,
        "median" | "p50" => SloStat::Median,
        _ => {
            let p: f64 = s.strip_prefix('p')?.parse().ok()?;
            if !(p > 0.0 && p <= 100.0) {
                return None;
            }
            SloStat::P(p)
        }
    };
    Some((metric, stat))
}

/// `ttft_p99:500,tpot_p99:50` (milliseconds).
pub fn parse_slo(s: &str) -> Result<SloSpec, SweepError> {
    let mut terms = Vec::new();
    for item in s.split([',', ' ']).map(str::trim).filter(|t| !t.is_empty()) {
        let (k, v) = item
            .split_once(':')
            .ok_or_else(|| invalid("--slo", format!("'{item}' is not METRIC_STAT:MS")))?;
        let (metric, stat) = parse_key(k).ok_or_else(|| {
            invalid(
                "--slo",
                format!(
                    "unknown objective '{k}': use ttft, tpot, itl or e2el with _mean, _median \
                     or _pNN, e.g. ttft_p99:500"
                ),
            )
        })?;
        let limit_ms: f64 =
            v.parse().ok().filter(|x: &f64| x.is_finite() && *x > 0.0).ok_or_else(|| {
                invalid("--slo", format!("'{v}' in '{item}' is not a positive ms"))
            })?;
        terms.push(SloTerm { metric, stat, limit_ms });
    }
    if terms.is_empty() {
        return Err(invalid("--slo", "give at least one objective, e.g. ttft_p99:500"));
    }
    Ok(SloSpec { terms })
}

impl SloSpec {
    /// Percentiles the summaries must carry for these objectives.
    pub fn percentiles(&self) -> Vec<f64> {
        self.terms
            .iter()
            .filter_map(|t| if let SloStat::P(p) = t.stat { Some(p) } else { None })
            .collect()
    }

    /// Every objective is met, and no request failed (a failed request has no latency, so
    /// it cannot be said to meet one).
    pub fn check(&self, s: &Summary) -> SloCheck {
        let mut violations = Vec::new();
        if s.failed > 0 {
            violations.push(format!("{} requests failed", s.failed));
        }
        if s.completed == 0 {
            violations.push("no request completed".to_string());
        }
        for t in &self.terms {
            match t.value(s) {
                Some(v) if v <= t.limit_ms => {}
                Some(v) => violations.push(format!("{} {:.2} ms > {} ms", t.key(), v, t.limit_ms)),
                None => violations.push(format!("{} was not measured", t.key())),
            }
        }
        SloCheck { pass: violations.is_empty(), violations }
    }
}

/// Where the limit lies among measured levels.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Bracket {
    /// Even the lowest level misses the objectives.
    NonePass,
    /// Every level meets them: the limit is above the grid.
    AllPass { pass: f64 },
    /// `pass` meets them, the next level `fail` does not.
    Between { pass: f64, fail: f64 },
}

/// Bracket the limit in `(load, pass)` pairs sorted by load: the lowest failing level and
/// the highest passing level below it (a pass above a failure is taken as noise).
pub fn bracket(points: &[(f64, bool)]) -> Bracket {
    let first_fail = points.iter().position(|&(_, ok)| !ok);
    match first_fail {
        None => match points.last() {
            Some(&(l, _)) => Bracket::AllPass { pass: l },
            None => Bracket::NonePass,
        },
        Some(0) => Bracket::NonePass,
        Some(i) => Bracket::Between { pass: points[i - 1].0, fail: points[i].0 },
    }
}

/// The next level to measure between `pass` and `fail`, or `None` when they are within one
/// step: 1 for concurrency, a factor `1 + resolution` for rates.
pub fn next_probe(axis: Axis, pass: f64, fail: f64, resolution: f64) -> Option<f64> {
    match axis {
        Axis::Concurrency => {
            let (lo, hi) = (pass.round() as i64, fail.round() as i64);
            (hi - lo > 1).then(|| ((lo + hi) / 2) as f64)
        }
        Axis::Rate => {
            let mid = (pass + fail) / 2.0;
            // Three significant digits keep labels and file names readable.
            let mid = round_sig(mid, 3);
            (fail / pass > 1.0 + resolution && mid > pass && mid < fail).then_some(mid)
        }
    }
}

fn round_sig(v: f64, digits: i32) -> f64 {
    if v <= 0.0 || !v.is_finite() {
        return v;
    }
    let scale = 10f64.powi(digits - 1 - v.log10().floor() as i32);
    (v * scale).round() / scale
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_objectives() {
        let s = parse_slo("ttft_p99:500,tpot_mean:50 e2el_median:9000").unwrap();
        assert_eq!(
            s.terms,
            vec![
                SloTerm { metric: SloMetric::Ttft, stat: SloStat::P(99.0), limit_ms: 500.0 },
                SloTerm { metric: SloMetric::Tpot, stat: SloStat::Mean, limit_ms: 50.0 },
                SloTerm { metric: SloMetric::E2el, stat: SloStat::Median, limit_ms: 9000.0 },
            ]
        );
        assert_eq!(s.percentiles(), vec![99.0]);
        assert_eq!(s.terms[0].key(), "ttft_p99");
        let e = parse_slo("ttft_p999:5").unwrap_err().to_string();
        assert!(e.starts_with("--slo: unknown objective 'ttft_p999'"), "{e}");
        assert!(parse_slo("ttft_p99").is_err());
        assert!(parse_slo("ttft_p99:-3").is_err());
        assert!(parse_slo("").is_err());
        assert!(parse_slo("foo_p99:3").is_err());
    }

    #[test]
    fn brackets() {
        assert_eq!(bracket(&[]), Bracket::NonePass);
        assert_eq!(bracket(&[(1.0, false), (2.0, true)]), Bracket::NonePass);
        assert_eq!(bracket(&[(1.0, true), (2.0, true)]), Bracket::AllPass { pass: 2.0 });
        assert_eq!(
            bracket(&[(1.0, true), (2.0, true), (4.0, false), (8.0, true)]),
            Bracket::Between { pass: 2.0, fail: 4.0 }
        );
    }

    #[test]
    fn probes_bisect_to_one_step() {
        assert_eq!(next_probe(Axis::Concurrency, 4.0, 8.0, 0.1), Some(6.0));
        assert_eq!(next_probe(Axis::Concurrency, 4.0, 6.0, 0.1), Some(5.0));
        assert_eq!(next_probe(Axis::Concurrency, 4.0, 5.0, 0.1), None);
        assert_eq!(next_probe(Axis::Rate, 2.0, 4.0, 0.1), Some(3.0));
        assert_eq!(next_probe(Axis::Rate, 2.0, 2.2, 0.1), None);
        assert_eq!(next_probe(Axis::Rate, 1.0, 1.5, 0.1), Some(1.25));
        assert_eq!(round_sig(2.34567, 3), 2.35);
    }
}
