//! The search for the highest load that meets `--slo` (the objectives themselves are
//! [`servelab_metrics::SloSpec`]).

use serde::{Deserialize, Serialize};
use servelab_load::Axis;

/// Where the limit lies among measured levels.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Bracket {
    /// Even the lowest level misses the objectives.
    NonePass,
    /// Every level meets them: the limit is above the grid.
    AllPass {
        /// The highest level measured.
        pass: f64,
    },
    /// `pass` meets them, the next level `fail` does not.
    Between {
        /// The highest level that meets them.
        pass: f64,
        /// The lowest level that misses them.
        fail: f64,
    },
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
