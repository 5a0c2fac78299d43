//! Seeded bootstrap confidence intervals, as pure functions.
//!
//! A sample is a list of *units* (one per request, or one per repeated run), each holding
//! values (one TTFT; or all the inter-token gaps of one request). Resampling draws units with
//! replacement, so values that belong together (the gaps of one request) stay together, and
//! the statistic (mean, median or a percentile) is taken over the pooled values of the drawn units.
//!
//! The interval of a difference `stat(B) − stat(A)` is the percentile interval of the
//! differences of independently resampled A and B; when it excludes 0, the difference is
//! larger than run-to-run noise at that confidence.

use crate::stats::percentile;

use crate::Stat;

/// SplitMix64 (Steele, Lea, Flood 2014): tiny, fast, and fully determined by its seed, so a
/// comparison prints the same interval every time it is run.
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// A generator whose whole sequence is fixed by `seed`.
    pub fn new(seed: u64) -> SplitMix64 {
        SplitMix64(seed)
    }

    /// The next 64 uniformly random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (Lemire's multiply-shift; the bias is below 2⁻³² for any n a
    /// benchmark has). `n` must be positive.
    pub fn below(&mut self, n: usize) -> usize {
        ((u128::from(self.next_u64()) * n as u128) >> 64) as usize
    }
}

/// numpy-linear percentile of unsorted values, reordering them (selection, not a sort).
/// `None` when empty.
pub fn percentile_unsorted(values: &mut [f64], p: f64) -> Option<f64> {
    let n = values.len();
    if n == 0 {
        return None;
    }
    let rank = (p.clamp(0.0, 100.0) / 100.0) * (n - 1) as f64;
    let lo = rank.floor() as usize;
    let (_, lo_v, right) = values.select_nth_unstable_by(lo, f64::total_cmp);
    let lo_v = *lo_v;
    let hi_v = right.iter().copied().min_by(f64::total_cmp).unwrap_or(lo_v);
    // The same interpolation as servelab_metrics::stats::percentile on the two neighbours.
    Some(percentile(&[lo_v, hi_v], (rank - lo as f64) * 100.0))
}

/// The statistic of `values` (reordered for p99); `None` when empty.
pub fn statistic(values: &mut [f64], stat: Stat) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    match stat {
        Stat::Mean => Some(values.iter().sum::<f64>() / values.len() as f64),
        Stat::Median => percentile_unsorted(values, 50.0),
        Stat::P(p) => percentile_unsorted(values, p),
    }
}

/// The statistic over the pooled values of all units.
pub fn pooled(units: &[Vec<f64>], stat: Stat) -> Option<f64> {
    let mut all: Vec<f64> = units.iter().flatten().copied().collect();
    statistic(&mut all, stat)
}

/// One bootstrap replicate: `units.len()` units drawn with replacement, pooled into `buf`.
fn resample_stat(
    units: &[Vec<f64>],
    stat: Stat,
    rng: &mut SplitMix64,
    buf: &mut Vec<f64>,
) -> Option<f64> {
    buf.clear();
    for _ in 0..units.len() {
        buf.extend_from_slice(&units[rng.below(units.len())]);
    }
    statistic(buf, stat)
}

/// A confidence interval.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Interval {
    /// Lower bound, in the statistic's unit.
    pub lo: f64,
    /// Upper bound, in the statistic's unit.
    pub hi: f64,
}

impl Interval {
    /// True when 0 lies outside `[lo, hi]`: the difference is larger than the noise.
    pub fn excludes_zero(&self) -> bool {
        self.lo > 0.0 || self.hi < 0.0
    }
}

/// The most bootstrap resamples taken: 1,000 already give a 95 % interval's ends to within a
/// few tenths of a percent; a million take seconds per comparison. Inputs past it are refused
/// where they are read.
pub const MAX_RESAMPLES: usize = 1_000_000;

/// Bootstrap percentile interval at `level` (e.g. 0.95) of `stat(b) − stat(a)`, from
/// `resamples` replicates seeded by `seed`. `None` when either side has fewer than 2 units
/// (no spread to learn from) or no values, or `resamples` is 0.
pub fn diff_interval(
    a: &[Vec<f64>],
    b: &[Vec<f64>],
    stat: Stat,
    resamples: usize,
    seed: u64,
    level: f64,
) -> Option<Interval> {
    if a.len() < 2 || b.len() < 2 || resamples == 0 {
        return None;
    }
    let mut rng = SplitMix64::new(seed);
    let mut buf = Vec::new();
    let resamples = resamples.min(MAX_RESAMPLES);
    let mut diffs = Vec::with_capacity(resamples);
    for _ in 0..resamples {
        let sa = resample_stat(a, stat, &mut rng, &mut buf)?;
        let sb = resample_stat(b, stat, &mut rng, &mut buf)?;
        diffs.push(sb - sa);
    }
    diffs.sort_by(f64::total_cmp);
    let tail = (1.0 - level.clamp(0.0, 1.0)) / 2.0 * 100.0;
    Some(Interval { lo: percentile(&diffs, tail), hi: percentile(&diffs, 100.0 - tail) })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn units(xs: &[f64]) -> Vec<Vec<f64>> {
        xs.iter().map(|x| vec![*x]).collect()
    }

    #[test]
    fn splitmix_matches_the_reference_sequence() {
        let mut r = SplitMix64::new(0);
        assert_eq!(r.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(r.next_u64(), 0x6E78_9E6A_A1B9_65F4);
        let mut r = SplitMix64::new(7);
        let draws: Vec<usize> = (0..6).map(|_| r.below(3)).collect();
        assert!(draws.iter().all(|d| *d < 3));
    }

    #[test]
    fn unsorted_percentile_equals_the_sorted_one() {
        let mut v = vec![5.0, 1.0, 4.0, 2.0, 3.0];
        assert_eq!(percentile_unsorted(&mut v, 50.0), Some(3.0));
        let mut v = vec![10.0, 0.0];
        assert_eq!(percentile_unsorted(&mut v, 99.0), Some(9.9));
        let mut v: Vec<f64> = (0..101).rev().map(f64::from).collect();
        assert_eq!(percentile_unsorted(&mut v, 99.0), Some(99.0));
        assert_eq!(percentile_unsorted(&mut [], 99.0), None);
        assert_eq!(statistic(&mut [1.0, 2.0, 6.0], Stat::Mean), Some(3.0));
    }

    #[test]
    fn pooled_takes_every_value_of_every_unit() {
        assert_eq!(pooled(&[vec![1.0, 2.0], vec![3.0, 6.0]], Stat::Mean), Some(3.0));
        assert_eq!(pooled(&[], Stat::Mean), None);
    }

    #[test]
    fn identical_constant_samples_give_a_zero_interval() {
        let a = units(&[5.0, 5.0, 5.0]);
        let ci = diff_interval(&a, &a, Stat::Mean, 1000, 1, 0.95).unwrap();
        assert_eq!(ci, Interval { lo: 0.0, hi: 0.0 });
        assert!(!ci.excludes_zero());
    }

    #[test]
    fn a_shift_larger_than_the_spread_is_detected_exactly() {
        let a = units(&[1.0, 2.0, 3.0]);
        let b = units(&[11.0, 12.0, 13.0]);
        let ci = diff_interval(&a, &b, Stat::Mean, 1000, 42, 0.95).unwrap();
        // Every replicate difference lies in [10 − 2, 10 + 2]; the seeded interval is exact.
        assert!(ci.lo >= 8.0 && ci.hi <= 12.0, "{ci:?}");
        assert_eq!(ci, Interval { lo: 8.666666666666668, hi: 11.333333333333334 });
        assert!(ci.excludes_zero());
        assert_eq!(ci, diff_interval(&a, &b, Stat::Mean, 1000, 42, 0.95).unwrap(), "seeded");
        // Means of 3 draws are multiples of 1/3: the bounds are such multiples too.
        let thirds = |x: f64| ((x * 3.0).round() - x * 3.0).abs() < 1e-9;
        assert!(thirds(ci.lo) && thirds(ci.hi), "{ci:?}");
    }

    #[test]
    fn overlapping_samples_are_within_noise() {
        let a = units(&[1.0, 9.0, 2.0, 8.0, 5.0]);
        let b = units(&[2.0, 8.0, 1.0, 9.0, 6.0]);
        let ci = diff_interval(&a, &b, Stat::Mean, 1000, 3, 0.95).unwrap();
        assert!(!ci.excludes_zero(), "{ci:?}");
    }

    #[test]
    fn too_few_units_give_no_interval() {
        assert_eq!(
            diff_interval(&units(&[1.0]), &units(&[1.0, 2.0]), Stat::Mean, 10, 0, 0.95),
            None
        );
        assert_eq!(
            diff_interval(&units(&[1.0, 2.0]), &units(&[1.0, 2.0]), Stat::Mean, 0, 0, 0.95),
            None
        );
    }
}
