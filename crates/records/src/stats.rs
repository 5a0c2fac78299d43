//! The sample statistics every stage must compute alike, with numpy's definitions (vLLM uses
//! `np.mean` and `np.percentile`): the metrics crate summarizes measured runs with them and
//! the engine model its virtual-time runs, so a predicted and a measured P99 are the same
//! statistic. They live here, below both.

/// Sum with numpy's pairwise algorithm (blocks of 128, 8-way unrolled), so means agree with
/// `np.mean` to the last bit in the common case and errors stay O(log n) for long runs.
pub fn pairwise_sum(xs: &[f64]) -> f64 {
    const BLOCK: usize = 128;
    let n = xs.len();
    if n < 8 {
        return xs.iter().fold(0.0, |acc, x| acc + x);
    }
    if n <= BLOCK {
        let mut r = [0.0f64; 8];
        r.copy_from_slice(&xs[..8]);
        let full = n - n % 8;
        let mut i = 8;
        while i < full {
            for (j, rj) in r.iter_mut().enumerate() {
                *rj += xs[i + j];
            }
            i += 8;
        }
        let mut res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for x in &xs[full..] {
            res += x;
        }
        return res;
    }
    let mut half = n / 2;
    half -= half % 8;
    pairwise_sum(&xs[..half]) + pairwise_sum(&xs[half..])
}

/// Arithmetic mean (`np.mean`); 0 for an empty sample.
pub fn mean(xs: &[f64]) -> f64 {
    if xs.is_empty() {
        return 0.0;
    }
    pairwise_sum(xs) / xs.len() as f64
}

/// Percentile `p` in `[0, 100]` of a sorted sample with numpy's default `linear` method:
/// rank `p/100 · (n−1)`, interpolated between its neighbours with numpy's `_lerp` (which
/// interpolates from the upper end when the fraction is ≥ 0.5). `p` outside `[0, 100]` is
/// clamped; 0 for an empty sample.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let (lo, hi, t) = percentile_ranks(sorted.len(), p);
    lerp(sorted[lo], sorted[hi], t)
}

/// The two sorted positions [`percentile`] reads for `p` in a sample of `n ≥ 1`, and the
/// fraction between them: a caller that selects only those order statistics instead of
/// sorting gets the same value.
pub fn percentile_ranks(n: usize, p: f64) -> (usize, usize, f64) {
    let q = if p.is_nan() { 0.0 } else { p.clamp(0.0, 100.0) / 100.0 };
    let rank = q * (n.max(1) - 1) as f64;
    let lo = (rank.floor() as usize).min(n.max(1) - 1);
    let hi = (lo + 1).min(n.max(1) - 1);
    (lo, hi, rank - lo as f64)
}

fn lerp(a: f64, b: f64, t: f64) -> f64 {
    let diff = b - a;
    if t >= 0.5 {
        b - diff * (1.0 - t)
    } else {
        a + diff * t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentile_interpolates_as_numpy() {
        let x = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0];
        assert_eq!(percentile(&x, 99.0), 9.91);
        assert_eq!(percentile(&[1.0, 2.0, 3.0, 4.0], 50.0), 2.5);
        assert_eq!(percentile(&[51.75, 55.0], 99.0), 54.9675);
        assert_eq!(percentile(&[], 99.0), 0.0);
        assert_eq!(percentile(&[3.0], f64::NAN), 3.0);
        assert_eq!(mean(&[0.1; 10]), 0.1);
    }
}
