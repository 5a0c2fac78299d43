//! Descriptive statistics with numpy's definitions, so every number can be compared with
//! `vllm bench serve` (which uses `np.mean`, `np.std`, `np.median`, `np.percentile`).
//!
//! All functions take a slice that is already sorted ascending where order matters; sorting
//! happens once, in [`Distribution::from_unsorted`]. Empty samples give `0.0` everywhere, as
//! vLLM's `np.mean(x or 0)` does, and [`Distribution::count`] tells that the sample was empty.

use serde::{Deserialize, Serialize};
pub use servelab_records::stats::{mean, pairwise_sum, percentile, percentile_ranks};

/// Nanoseconds to milliseconds.
pub fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

/// Population standard deviation (`np.std`, `ddof=0`); 0 for an empty sample.
pub fn std(xs: &[f64]) -> f64 {
    if xs.is_empty() {
        return 0.0;
    }
    let m = mean(xs);
    let sq: Vec<f64> = xs.iter().map(|x| (x - m) * (x - m)).collect();
    (pairwise_sum(&sq) / xs.len() as f64).sqrt()
}

/// Median of a sorted sample (`np.median`): the middle value, or the mean of the two middle
/// values; 0 for an empty sample.
pub fn median(sorted: &[f64]) -> f64 {
    let n = sorted.len();
    if n == 0 {
        return 0.0;
    }
    if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
    }
}

/// Smallest value of a sorted sample; 0 when empty.
pub fn min(sorted: &[f64]) -> f64 {
    sorted.first().copied().unwrap_or(0.0)
}

/// Largest value of a sorted sample; 0 when empty.
pub fn max(sorted: &[f64]) -> f64 {
    sorted.last().copied().unwrap_or(0.0)
}

/// Puts at each position that [`min`], [`max`], [`median`] and [`percentile`] read for
/// `percentiles` the value a sort would put there, by selection in O(n) instead of sorting in
/// O(n log n): a predicted sweep summarizes millions of per-token gaps. Order statistics do
/// not depend on how they are found, and values equal under `total_cmp` are bitwise equal, so
/// every statistic is the sorted sample's to the last bit.
fn select_order_statistics(xs: &mut [f64], percentiles: &[f64]) {
    let n = xs.len();
    if n == 0 {
        return;
    }
    let mut ranks = vec![0, n - 1, (n - 1) / 2, n / 2];
    for &p in percentiles {
        let (lo, hi, _) = percentile_ranks(n, p);
        ranks.extend([lo, hi]);
    }
    ranks.sort_unstable();
    ranks.dedup();
    // Each selection leaves everything before its rank no larger and everything after no
    // smaller, so the next rank is found in the part after it, and earlier ranks stay put.
    let mut start = 0;
    for r in ranks {
        xs[start..].select_nth_unstable_by(r - start, f64::total_cmp);
        start = r + 1;
    }
}

/// Summary statistics of one sample (milliseconds for latencies).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Distribution {
    /// Number of samples; 0 means every other field is a placeholder 0.
    pub count: u64,
    /// Arithmetic mean.
    pub mean: f64,
    /// Middle value (mean of the two middle ones for an even count).
    pub median: f64,
    /// Population standard deviation (`ddof=0`, as `np.std`).
    pub std: f64,
    /// Smallest sample.
    pub min: f64,
    /// Largest sample.
    pub max: f64,
    /// `(p, value)` for each requested percentile, in the requested order.
    pub percentiles: Vec<(f64, f64)>,
}

impl Distribution {
    /// Mean and std in the sample's own order (numpy's pairwise sum depends on order, and
    /// vLLM sums in request order), then one sort for the order statistics.
    pub fn from_unsorted(mut xs: Vec<f64>, percentiles: &[f64]) -> Distribution {
        let (m, sd) = (mean(&xs), std(&xs));
        select_order_statistics(&mut xs, percentiles);
        Distribution::order_statistics(&xs, percentiles, m, sd)
    }

    /// Computes every statistic from a sample already sorted ascending.
    pub fn from_sorted(sorted: &[f64], percentiles: &[f64]) -> Distribution {
        Distribution::order_statistics(sorted, percentiles, mean(sorted), std(sorted))
    }

    /// The order statistics of `sorted`, with its mean and std computed by the caller.
    fn order_statistics(sorted: &[f64], percentiles: &[f64], mean: f64, std: f64) -> Distribution {
        Distribution {
            count: sorted.len() as u64,
            mean,
            median: median(sorted),
            std,
            min: min(sorted),
            max: max(sorted),
            percentiles: percentiles.iter().map(|&p| (p, percentile(sorted, p))).collect(),
        }
    }

    /// True when the sample had no values (all fields are placeholder zeros).
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The value for percentile `p`, if it was requested.
    pub fn percentile(&self, p: f64) -> Option<f64> {
        self.percentiles.iter().find(|(q, _)| *q == p).map(|(_, v)| *v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Expected values below were computed with numpy 2.x:
    // x = [1, 2, 3, 4, 10]
    // np.percentile(x, [50, 90, 95, 99]) == [3.0, 7.6000000000000005, 8.799999999999999, 9.76]
    #[test]
    fn percentiles_match_numpy_linear() {
        let x = [1.0, 2.0, 3.0, 4.0, 10.0];
        assert_eq!(percentile(&x, 0.0), 1.0);
        assert_eq!(percentile(&x, 50.0), 3.0);
        assert_eq!(percentile(&x, 90.0), 7.6000000000000005);
        assert_eq!(percentile(&x, 95.0), 8.799999999999999);
        assert_eq!(percentile(&x, 99.0), 9.76);
        assert_eq!(percentile(&x, 100.0), 10.0);
        assert_eq!(percentile(&[5.0], 99.0), 5.0);
        assert_eq!(percentile(&[], 99.0), 0.0);
        // np.percentile([51.75, 55.0], 99) == 54.9675 (interpolated from the upper end).
        assert_eq!(percentile(&[51.75, 55.0], 99.0), 54.9675);
    }

    #[test]
    fn mean_std_median_match_numpy() {
        let x = [1.0, 2.0, 3.0, 4.0, 10.0];
        assert_eq!(mean(&x), 4.0);
        // np.std([1,2,3,4,10]) == sqrt(10) == 3.1622776601683795
        assert_eq!(std(&x), 10f64.sqrt());
        assert_eq!(median(&x), 3.0);
        assert_eq!(median(&[1.0, 2.0, 3.0, 4.0]), 2.5);
        assert_eq!(mean(&[]), 0.0);
        assert_eq!(std(&[]), 0.0);
        assert_eq!(median(&[]), 0.0);
        assert_eq!(std(&[7.0]), 0.0);
    }

    #[test]
    fn pairwise_sum_is_exact_on_integers_and_long_inputs() {
        let xs: Vec<f64> = (1..=1000).map(f64::from).collect();
        assert_eq!(pairwise_sum(&xs), 500_500.0);
        let xs: Vec<f64> = (1..=13).map(f64::from).collect();
        assert_eq!(pairwise_sum(&xs), 91.0);
        // np.mean([0.1] * 10) == 0.1 exactly (a naive left fold gives 0.09999999999999999).
        assert_eq!(mean(&[0.1; 10]), 0.1);
    }

    /// `x_i = ((i·7919) mod 1000) / 7 + i/1000`, a long unsorted sample.
    fn sample(n: u32) -> Vec<f64> {
        (0..n).map(|i| f64::from((i * 7919) % 1000) / 7.0 + f64::from(i) * 1e-3).collect()
    }

    #[test]
    fn long_samples_match_numpy_bit_for_bit() {
        // Values printed by numpy 2.x for the same list (mean and std in list order).
        let cases: [(u32, [f64; 3], [f64; 5]); 2] = [
            (
                1000,
                [71.85664285714286, 41.24017776175836, 71.8395],
                [
                    71.8395,
                    128.8673857142857,
                    135.95133571428573,
                    141.81849571428572,
                    143.21360671428573,
                ],
            ),
            (
                257,
                [71.51432573652029, 41.128166658429365, 71.75042857142857],
                [
                    71.75042857142857,
                    128.3920857142857,
                    135.39182857142856,
                    140.91228,
                    141.9849565714286,
                ],
            ),
        ];
        for (n, [m, sd, med], pcts) in cases {
            let x = sample(n);
            assert_eq!(mean(&x), m, "mean n={n}");
            assert_eq!(std(&x), sd, "std n={n}");
            let mut sorted = x.clone();
            sorted.sort_by(f64::total_cmp);
            assert_eq!(median(&sorted), med, "median n={n}");
            for (p, want) in [50.0, 90.0, 95.0, 99.0, 99.9].into_iter().zip(pcts) {
                assert_eq!(percentile(&sorted, p), want, "p{p} n={n}");
            }
        }
    }

    #[test]
    fn distribution_sorts_once_and_keeps_requested_order() {
        let d = Distribution::from_unsorted(vec![10.0, 1.0, 4.0, 3.0, 2.0], &[99.0, 50.0]);
        assert_eq!(d.count, 5);
        assert_eq!(d.min, 1.0);
        assert_eq!(d.max, 10.0);
        assert_eq!(d.median, 3.0);
        assert_eq!(d.percentiles, vec![(99.0, 9.76), (50.0, 3.0)]);
        assert_eq!(d.percentile(50.0), Some(3.0));
        assert_eq!(d.percentile(95.0), None);
        let e = Distribution::from_unsorted(vec![], &[99.0]);
        assert!(e.is_empty());
        assert_eq!(e.percentiles, vec![(99.0, 0.0)]);
    }

    #[test]
    fn selected_order_statistics_are_the_sorted_samples_to_the_bit() {
        // Samples of every small size and a few large ones, from a handful of values (ties,
        // both zeros, a NaN) or spread out; each summarized by selection and by a full sort.
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            state >> 11
        };
        let few = [0.0, -0.0, 1.5, 2.0, 7.25, 1e9, f64::NAN];
        let pct = [0.0, 50.0, 90.0, 95.0, 99.0, 99.9, 100.0, 33.3];
        let bits = |d: &Distribution| {
            let mut v = vec![d.count, d.mean.to_bits(), d.median.to_bits(), d.std.to_bits()];
            v.extend([d.min.to_bits(), d.max.to_bits()]);
            v.extend(d.percentiles.iter().map(|(_, x)| x.to_bits()));
            v
        };
        for n in (0..70).chain([511, 1000, 4097]) {
            for spread in [false, true] {
                let xs: Vec<f64> = (0..n)
                    .map(|_| {
                        let r = next();
                        if spread {
                            (r % 1_000_000) as f64 / 7.0
                        } else {
                            few[(r % 6) as usize + usize::from(n == 13)]
                        }
                    })
                    .collect();
                let mut sorted = xs.clone();
                sorted.sort_by(f64::total_cmp);
                let by_sort = Distribution {
                    mean: mean(&xs),
                    std: std(&xs),
                    ..Distribution::from_sorted(&sorted, &pct)
                };
                let by_select = Distribution::from_unsorted(xs, &pct);
                assert_eq!(bits(&by_select), bits(&by_sort), "n {n}, spread {spread}");
            }
        }
    }
}
