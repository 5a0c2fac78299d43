//! Saturation: where the throughput curve bends.
//!
//! The knee is the highest load, walking up from the lowest, up to which every step still
//! raised throughput by more than `min_gain_per_doubling` (scaled to one doubling of the
//! load, so uneven grids compare fairly) and kept P99 TTFT under `max_ttft_factor` × its
//! value at the lowest load. Past it, more load buys queueing, not tokens.

use serde::{Deserialize, Serialize};

/// One measured level, reduced to what the knee rule reads.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CurvePoint {
    /// The level: concurrent requests, or requests per second.
    pub load: f64,
    /// Output tokens per second.
    pub throughput: f64,
    /// P99 TTFT, ms.
    pub ttft_p99_ms: f64,
}

/// Thresholds of the knee rule.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct KneeRule {
    /// Smallest throughput gain per doubling of load that still counts as rising (0.10 = 10%).
    pub min_gain_per_doubling: f64,
    /// Largest P99 TTFT, as a multiple of the lowest load's, before latency has "exploded".
    pub max_ttft_factor: f64,
}

impl Default for KneeRule {
    fn default() -> Self {
        Self { min_gain_per_doubling: 0.10, max_ttft_factor: 3.0 }
    }
}

impl KneeRule {
    /// The rule from the flags: a minimum gain in percent per doubling (>= 0) and a TTFT
    /// growth factor (> 0). Errors name the flag.
    pub fn from_flags(min_gain_pct: f64, max_ttft_factor: f64) -> Result<KneeRule, String> {
        if !(min_gain_pct.is_finite() && min_gain_pct >= 0.0) {
            return Err(format!("--knee-min-gain-pct: must be a number >= 0 (got {min_gain_pct})"));
        }
        if !(max_ttft_factor.is_finite() && max_ttft_factor > 0.0) {
            return Err(format!(
                "--knee-max-ttft-factor: must be a number > 0 (got {max_ttft_factor})"
            ));
        }
        Ok(KneeRule { min_gain_per_doubling: min_gain_pct / 100.0, max_ttft_factor })
    }
}

/// Where the curve bends.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Knee {
    /// Index into the (load-sorted) points.
    pub index: usize,
    /// The load at the knee.
    pub load: f64,
    /// Why the next level is past saturation; `None` when the grid never saturated.
    pub reason: Option<String>,
}

/// Throughput gain from `(l0, t0)` to `(l1, t1)` per doubling of the load:
/// `(t1/t0)^(1/log2(l1/l0)) − 1`. Infinite when throughput rises from zero; 0 when the
/// loads are not increasing.
pub fn gain_per_doubling(l0: f64, t0: f64, l1: f64, t1: f64) -> f64 {
    let doublings = (l1 / l0).log2();
    if !(doublings.is_finite() && doublings > 0.0) {
        return 0.0;
    }
    if t0 <= 0.0 {
        return if t1 > 0.0 { f64::INFINITY } else { 0.0 };
    }
    (t1 / t0).powf(1.0 / doublings) - 1.0
}

/// The knee of points sorted by ascending load; `None` for no points.
pub fn find_knee(points: &[CurvePoint], rule: &KneeRule) -> Option<Knee> {
    let first = points.first()?;
    let base_ttft = first.ttft_p99_ms;
    for (i, w) in points.windows(2).enumerate() {
        let (a, b) = (w[0], w[1]);
        let gain = gain_per_doubling(a.load, a.throughput, b.load, b.throughput);
        let reason = if base_ttft > 0.0 && b.ttft_p99_ms >= rule.max_ttft_factor * base_ttft {
            Some(format!(
                "at {} P99 TTFT is {:.1}x its value at {} ({:.2} ms vs {:.2} ms)",
                fmt_load(b.load),
                b.ttft_p99_ms / base_ttft,
                fmt_load(first.load),
                b.ttft_p99_ms,
                base_ttft
            ))
        } else if gain <= rule.min_gain_per_doubling {
            Some(format!(
                "from {} to {} throughput rises only {:.1}% per doubling (threshold {:.0}%)",
                fmt_load(a.load),
                fmt_load(b.load),
                gain * 100.0,
                rule.min_gain_per_doubling * 100.0
            ))
        } else {
            None
        };
        if reason.is_some() {
            return Some(Knee { index: i, load: a.load, reason });
        }
    }
    Some(Knee { index: points.len() - 1, load: points[points.len() - 1].load, reason: None })
}

fn fmt_load(v: f64) -> String {
    format!("{v}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(load: f64, throughput: f64, ttft: f64) -> CurvePoint {
        CurvePoint { load, throughput, ttft_p99_ms: ttft }
    }

    #[test]
    fn gain_is_per_doubling() {
        assert_eq!(gain_per_doubling(1.0, 100.0, 2.0, 200.0), 1.0);
        assert!((gain_per_doubling(1.0, 100.0, 4.0, 121.0) - 0.1).abs() < 1e-12);
        assert_eq!(gain_per_doubling(2.0, 0.0, 4.0, 5.0), f64::INFINITY);
        assert_eq!(gain_per_doubling(2.0, 1.0, 2.0, 5.0), 0.0);
    }

    #[test]
    fn knee_where_throughput_flattens() {
        let pts =
            [p(1.0, 100.0, 20.0), p(2.0, 200.0, 21.0), p(4.0, 390.0, 22.0), p(8.0, 400.0, 25.0)];
        let k = find_knee(&pts, &KneeRule::default()).unwrap();
        assert_eq!((k.index, k.load), (2, 4.0));
        assert_eq!(
            k.reason.as_deref(),
            Some("from 4 to 8 throughput rises only 2.6% per doubling (threshold 10%)")
        );
    }

    #[test]
    fn knee_where_ttft_explodes_even_if_throughput_rises() {
        let pts = [p(1.0, 100.0, 20.0), p(2.0, 200.0, 30.0), p(4.0, 400.0, 60.0)];
        let k = find_knee(&pts, &KneeRule::default()).unwrap();
        assert_eq!((k.index, k.load), (1, 2.0));
        assert_eq!(
            k.reason.as_deref(),
            Some("at 4 P99 TTFT is 3.0x its value at 1 (60.00 ms vs 20.00 ms)")
        );
    }

    #[test]
    fn unsaturated_grid_and_degenerate_inputs() {
        let pts = [p(1.0, 100.0, 20.0), p(2.0, 190.0, 20.0)];
        let k = find_knee(&pts, &KneeRule::default()).unwrap();
        assert_eq!((k.index, k.reason), (1, None));
        assert_eq!(find_knee(&[], &KneeRule::default()), None);
        let one = find_knee(&[p(4.0, 1.0, 0.0)], &KneeRule::default()).unwrap();
        assert_eq!((one.index, one.load), (0, 4.0));
    }
}
