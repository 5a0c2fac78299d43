//! Run-to-run noise of a profile's objective, from repeated runs: the spread a machine adds
//! on its own (other processes, frequency scaling, caches), which resampling the requests of
//! one run cannot show when every request is alike (fixed lengths, `ignore_eos`).
//!
//! The spread is assumed to be one relative size for every configuration of an experiment
//! (same machine, same workload), so it is pooled over all trials compared so far: two runs
//! per trial then give as many degrees of freedom as trials.

use statrs::distribution::{ContinuousCDF, StudentsT};

/// Pooled coefficient of variation of groups of repeated values: each value relative to its
/// group's mean, squared deviations summed over all groups, divided by the degrees of freedom
/// Σ(nᵢ − 1). Returns (CV, degrees of freedom); `None` without a group of 2 or more values.
pub fn pooled_cv(groups: &[Vec<f64>]) -> Option<(f64, u32)> {
    let mut squares = 0.0;
    let mut df = 0u32;
    for g in groups.iter().filter(|g| g.len() >= 2) {
        let mean = g.iter().sum::<f64>() / g.len() as f64;
        if mean.is_nan() || mean <= 0.0 {
            continue;
        }
        squares += g.iter().map(|v| (v / mean - 1.0).powi(2)).sum::<f64>();
        df += g.len() as u32 - 1;
    }
    (df > 0).then(|| ((squares / f64::from(df)).sqrt(), df))
}

/// Pooled standard deviation of groups of values, each around its own group's mean:
/// (SD, degrees of freedom Σ(nᵢ − 1)); `None` without a group of 2 or more. For the log
/// ratios of interleaved launches, one group per step.
pub fn pooled_sd(groups: &[Vec<f64>]) -> Option<(f64, u32)> {
    let mut squares = 0.0;
    let mut df = 0u32;
    for g in groups.iter().filter(|g| g.len() >= 2) {
        let mean = g.iter().sum::<f64>() / g.len() as f64;
        squares += g.iter().map(|v| (v - mean).powi(2)).sum::<f64>();
        df += g.len() as u32 - 1;
    }
    (df > 0).then(|| ((squares / f64::from(df)).sqrt(), df))
}

/// A paired comparison: the candidate over the reference as a percentage, from the mean log
/// ratio of neighbouring launches, and the noise bar in percent for a pooled SD of log ratios
/// with `df` degrees of freedom (the half-width of the interval of the mean log ratio, turned
/// into a ratio).
pub fn paired(log_ratios: &[f64], sd: Option<(f64, u32)>, confidence: f64) -> (f64, Option<f64>) {
    let n = log_ratios.len().max(1) as f64;
    let mean = log_ratios.iter().sum::<f64>() / n;
    let bar =
        sd.map(|(sd, df)| ((t_two_sided(df, confidence) * sd / n.sqrt()).exp() - 1.0) * 100.0);
    ((mean.exp() - 1.0) * 100.0, bar)
}

/// The two-sided Student t quantile: |T| ≤ t with probability `confidence`, `df` degrees of
/// freedom.
pub fn t_two_sided(df: u32, confidence: f64) -> f64 {
    StudentsT::new(0.0, 1.0, f64::from(df))
        .map(|t| t.inverse_cdf(0.5 + confidence / 2.0))
        .unwrap_or(f64::INFINITY)
}

/// Half-width, in percent, of the confidence interval of the relative difference between the
/// means of `n_base` and `n_cand` runs, for a pooled CV with `df` degrees of freedom.
pub fn run_noise_pct(cv: f64, df: u32, n_base: usize, n_cand: usize, confidence: f64) -> f64 {
    let se = cv * (1.0 / n_base as f64 + 1.0 / n_cand as f64).sqrt();
    t_two_sided(df, confidence) * se * 100.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pooled_cv_is_relative_and_pools_degrees_of_freedom() {
        // 9 and 11 around 10: ±10 %, one degree of freedom.
        let (cv, df) = pooled_cv(&[vec![9.0, 11.0]]).unwrap();
        assert_eq!(df, 1);
        assert!((cv - 0.02f64.sqrt()).abs() < 1e-15, "{cv}");
        // The same relative spread at twice the level pools to the same CV, 2 dof.
        let (cv2, df2) = pooled_cv(&[vec![9.0, 11.0], vec![18.0, 22.0], vec![5.0]]).unwrap();
        assert_eq!(df2, 2);
        assert!((cv2 - cv).abs() < 1e-15);
        // Three values: deviations -0.1, 0, +0.1 over 2 dof.
        let (cv3, df3) = pooled_cv(&[vec![90.0, 100.0, 110.0]]).unwrap();
        assert_eq!(df3, 2);
        assert!((cv3 - 0.01f64.sqrt()).abs() < 1e-15);
        assert_eq!(pooled_cv(&[vec![1.0], vec![]]), None);
        assert_eq!(pooled_cv(&[vec![0.0, 0.0]]), None);
    }

    #[test]
    fn pooled_sd_is_absolute_and_paired_works_in_log_ratios() {
        let (sd, df) = pooled_sd(&[vec![0.1, 0.3], vec![-0.1, 0.1], vec![1.0]]).unwrap();
        assert_eq!(df, 2);
        assert!((sd - 0.02f64.sqrt()).abs() < 1e-15, "{sd}");
        assert_eq!(pooled_sd(&[vec![0.5]]), None);
        // Ratios 1.1 and 1.21 (log 0.0953, 0.1906): geometric mean +15.36 %.
        let logs = [1.1f64.ln(), 1.21f64.ln()];
        let (delta, bar) = paired(&logs, Some((0.05, 4)), 0.95);
        assert!((delta - (1.1f64 * 1.21).sqrt().mul_add(100.0, -100.0)).abs() < 1e-9, "{delta}");
        let expected = ((2.776_445_105 * 0.05 / 2f64.sqrt()).exp() - 1.0) * 100.0;
        assert!((bar.unwrap() - expected).abs() < 1e-6, "{bar:?}");
        assert_eq!(paired(&logs, None, 0.95).1, None);
    }

    #[test]
    fn t_quantiles_match_the_tables() {
        assert!((t_two_sided(1, 0.95) - 12.706_204_736).abs() < 1e-6);
        assert!((t_two_sided(10, 0.95) - 2.228_138_852).abs() < 1e-6);
        assert!((t_two_sided(4, 0.90) - 2.131_846_786).abs() < 1e-6);
        assert!((t_two_sided(100_000, 0.95) - 1.959_983).abs() < 1e-4);
    }

    #[test]
    fn run_noise_scales_with_cv_runs_and_confidence() {
        // CV 4 %, 10 dof, 2 runs a side: SE 4 %, bar 2.228 × 4 %.
        let bar = run_noise_pct(0.04, 10, 2, 2, 0.95);
        assert!((bar - 2.228_138_852 * 4.0).abs() < 1e-6, "{bar}");
        assert!(run_noise_pct(0.04, 10, 4, 4, 0.95) < bar);
    }
}
