//! Welch's t interval for the difference of two means, used for repeated runs when either
//! side has fewer than [`MIN_BOOTSTRAP_REPEATS`]: a bootstrap of two runs per side can only
//! draw the observed means, so its interval is as narrow as their spread and called a 2.5 %
//! difference "worse" (issue 25). Welch's interval widens with the few degrees of freedom
//! (t = 4.30 at 2 degrees instead of 1.96).
//!
//! Definition (Welch 1947): `d = mean(b) − mean(a)`, `se² = s_a²/n_a + s_b²/n_b` with the
//! sample variances, `ν = se⁴ / ((s_a²/n_a)²/(n_a−1) + (s_b²/n_b)²/(n_b−1))`, interval
//! `d ± t_{(1+level)/2, ν} · se`.

use servelab_metrics::bootstrap::Interval;

/// Repeats per side from which the run-to-run bootstrap is used instead.
pub const MIN_BOOTSTRAP_REPEATS: usize = 5;

/// `ln Γ(x)` for `x > 0` (Lanczos, g = 7, nine coefficients; |error| < 1e-13 here).
fn ln_gamma(x: f64) -> f64 {
    const G: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        // Reflection: Γ(x)Γ(1−x) = π / sin(πx).
        let pi = std::f64::consts::PI;
        return (pi / (pi * x).sin()).ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let t = x + 7.5;
    let s = G[1..].iter().enumerate().fold(G[0], |acc, (i, g)| acc + g / (x + i as f64 + 1.0));
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + s.ln()
}

/// Student's t distribution with `nu` degrees of freedom: `P(0 ≤ T ≤ x)`, by Simpson's rule
/// over `[0, x]` (the density is smooth; 2,000 intervals give 1e-9 for `x` ≤ 100).
fn t_mass(x: f64, nu: f64) -> f64 {
    let c =
        ln_gamma((nu + 1.0) / 2.0) - ln_gamma(nu / 2.0) - 0.5 * (nu * std::f64::consts::PI).ln();
    let pdf = |t: f64| (c - (nu + 1.0) / 2.0 * (1.0 + t * t / nu).ln()).exp();
    let n = 2000;
    let h = x / n as f64;
    let inner: f64 = (1..n).map(|i| pdf(i as f64 * h) * if i % 2 == 1 { 4.0 } else { 2.0 }).sum();
    (pdf(0.0) + inner + pdf(x)) * h / 3.0
}

/// The `p` quantile (0.5 < p < 1) of Student's t with `nu` > 0 degrees of freedom, by
/// bisection on [`t_mass`]; `None` outside that domain.
pub fn t_quantile(p: f64, nu: f64) -> Option<f64> {
    if !(p > 0.5 && p < 1.0 && nu > 0.0 && nu.is_finite()) {
        return None;
    }
    let target = p - 0.5;
    let (mut lo, mut hi) = (0.0_f64, 1.0_f64);
    while t_mass(hi, nu) < target {
        hi *= 2.0;
        if hi > 1e6 {
            return None;
        }
    }
    for _ in 0..60 {
        let mid = (lo + hi) / 2.0;
        if t_mass(mid, nu) < target {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Some((lo + hi) / 2.0)
}

fn mean_var(v: &[f64]) -> (f64, f64) {
    let n = v.len() as f64;
    let m = v.iter().sum::<f64>() / n;
    (m, v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (n - 1.0))
}

/// Welch's interval of `mean(b) − mean(a)` at `level` (0.95); `None` with fewer than 2
/// values on a side. Two sides without any spread give the point interval `[d, d]`.
pub fn welch_interval(a: &[f64], b: &[f64], level: f64) -> Option<Interval> {
    if a.len() < 2 || b.len() < 2 {
        return None;
    }
    let ((ma, va), (mb, vb)) = (mean_var(a), mean_var(b));
    let (na, nb) = (a.len() as f64, b.len() as f64);
    let (qa, qb) = (va / na, vb / nb);
    let se2 = qa + qb;
    let d = mb - ma;
    if se2 == 0.0 {
        return Some(Interval { lo: d, hi: d });
    }
    let nu = se2 * se2 / (qa * qa / (na - 1.0) + qb * qb / (nb - 1.0));
    let t = t_quantile((1.0 + level) / 2.0, nu)?;
    let half = t * se2.sqrt();
    Some(Interval { lo: d - half, hi: d + half })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn t_quantiles_match_the_tables() {
        // Two-sided 95 % critical values (any statistics table).
        for (nu, t) in [(1.0, 12.7062), (2.0, 4.3027), (4.0, 2.7764), (10.0, 2.2281)] {
            let q = t_quantile(0.975, nu).unwrap();
            assert!((q - t).abs() < 5e-4, "nu {nu}: {q} vs {t}");
        }
        assert!((t_quantile(0.975, 1e5).unwrap() - 1.95997).abs() < 1e-3);
        assert_eq!(t_quantile(0.4, 3.0), None);
        assert_eq!(t_quantile(0.975, 0.0), None);
    }

    #[test]
    fn two_runs_a_side_at_2_5_percent_are_within_noise() {
        // The bootstrap over these runs excludes 0 (every resampled B mean is below every
        // A mean); Welch's interval does not.
        let i = welch_interval(&[100.0, 101.0], &[97.5, 98.6], 0.95).unwrap();
        assert!(i.lo < 0.0 && i.hi > 0.0, "{i:?}");
        // d = -2.45, se² = 0.5/2 + 0.605/2 = 0.5525, ν = 0.5525² / (0.25² + 0.3025²) = 1.977.
        let half = (i.hi - i.lo) / 2.0;
        assert!(((i.hi + i.lo) / 2.0 + 2.45).abs() < 1e-12);
        let t = t_quantile(0.975, 0.5525_f64.powi(2) / (0.0625 + 0.3025_f64.powi(2))).unwrap();
        assert!((half - t * 0.5525_f64.sqrt()).abs() < 1e-9);
    }

    #[test]
    fn a_clear_difference_stays_clear_and_degenerate_inputs() {
        let i = welch_interval(&[100.0, 101.0, 100.5], &[80.0, 81.0, 80.2], 0.95).unwrap();
        assert!(i.hi < 0.0, "{i:?}");
        assert_eq!(welch_interval(&[1.0], &[2.0, 3.0], 0.95), None);
        let flat = welch_interval(&[5.0, 5.0], &[7.0, 7.0], 0.95).unwrap();
        assert_eq!((flat.lo, flat.hi), (2.0, 2.0));
    }
}
