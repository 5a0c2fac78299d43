//! Saturation: where the throughput curve of a load sweep bends (measured or predicted).
//!
//! The knee is the highest load, walking up from the lowest, up to which every step still
//! raised throughput by more than `min_gain_per_doubling` (scaled to one doubling of the
//! load, so uneven grids compare fairly). Past it, more load buys queueing, not tokens.
//! Latency is reported beside the knee, never folded into it: TTFT rising under batching is
//! normal (on an H100 a sweep's P99 TTFT grew 9.7x from 1 to 16 while throughput still rose
//! 2.8x from 4 to 16), and what latency is acceptable is for an SLO to decide.

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
}

impl Default for KneeRule {
    fn default() -> Self {
        Self { min_gain_per_doubling: 0.10 }
    }
}

impl KneeRule {
    /// The rule from the flag: a minimum gain in percent per doubling (>= 0). Errors name
    /// the flag.
    pub fn from_flags(min_gain_pct: f64) -> Result<KneeRule, String> {
        if !(min_gain_pct.is_finite() && min_gain_pct >= 0.0) {
            return Err(format!("--knee-min-gain-pct: must be a number >= 0 (got {min_gain_pct})"));
        }
        Ok(KneeRule { min_gain_per_doubling: min_gain_pct / 100.0 })
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
    /// P99 TTFT at the knee, ms: said beside the knee, never a reason for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_p99_ms: Option<f64>,
    /// The lowest load measured and its P99 TTFT (ms), what the knee's TTFT is set against.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lowest: Option<(f64, f64)>,
}

impl Knee {
    /// P99 TTFT at the knee over its value at the lowest load; `None` at the lowest load
    /// itself or without a positive base.
    pub fn ttft_growth(&self) -> Option<f64> {
        let (l, base) = self.lowest?;
        (l != self.load && base > 0.0).then_some(self.ttft_p99_ms? / base)
    }
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
    let at = |i: usize, reason: Option<String>| Knee {
        index: i,
        load: points[i].load,
        reason,
        ttft_p99_ms: Some(points[i].ttft_p99_ms),
        lowest: Some((first.load, first.ttft_p99_ms)),
    };
    for (i, w) in points.windows(2).enumerate() {
        let (a, b) = (w[0], w[1]);
        let gain = gain_per_doubling(a.load, a.throughput, b.load, b.throughput);
        if gain < rule.min_gain_per_doubling {
            return Some(at(
                i,
                Some(format!(
                    "from {} to {} throughput rises only {:.1}% per doubling (rule: a doubling \
                     that adds less than {:.0}% is past the knee)",
                    fmt_load(a.load),
                    fmt_load(b.load),
                    gain * 100.0,
                    rule.min_gain_per_doubling * 100.0
                )),
            ));
        }
    }
    Some(at(points.len() - 1, None))
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
            Some(
                "from 4 to 8 throughput rises only 2.6% per doubling (rule: a doubling that \
                 adds less than 10% is past the knee)"
            )
        );
        assert_eq!(k.ttft_growth(), Some(22.0 / 20.0));
    }

    /// The H100 `transformers serve` sweep of issue 25: P99 TTFT grows 9.7x from 1 to 16
    /// while output throughput still rises 2.8x from 4 to 16. The knee is where throughput
    /// stops rising (16), not where TTFT first triples (4); the TTFT growth is said beside it.
    #[test]
    fn rising_ttft_is_no_knee_while_throughput_still_rises() {
        let pts = [
            p(1.0, 14.0, 100.0),
            p(2.0, 26.0, 150.0),
            p(4.0, 47.0, 250.0),
            p(8.0, 88.0, 400.0),
            p(16.0, 134.0, 970.0),
            p(32.0, 140.0, 2100.0),
        ];
        let k = find_knee(&pts, &KneeRule::default()).unwrap();
        assert_eq!((k.index, k.load), (4, 16.0));
        assert_eq!(k.ttft_p99_ms, Some(970.0));
        assert!((k.ttft_growth().unwrap() - 9.7).abs() < 1e-12);
    }

    #[test]
    fn unsaturated_grid_and_degenerate_inputs() {
        let pts = [p(1.0, 100.0, 20.0), p(2.0, 190.0, 20.0)];
        let k = find_knee(&pts, &KneeRule::default()).unwrap();
        assert_eq!((k.index, k.reason), (1, None));
        assert_eq!(find_knee(&[], &KneeRule::default()), None);
        let one = find_knee(&[p(4.0, 1.0, 0.0)], &KneeRule::default()).unwrap();
        assert_eq!((one.index, one.load, one.ttft_growth()), (0, 4.0, None));
    }
}
