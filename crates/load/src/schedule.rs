//! Arrival schedules: open-loop request times, as offsets from the run origin.

use std::sync::Arc;

use rand::rngs::StdRng;
use rand::SeedableRng;
use rand_distr::{Distribution, Gamma};

/// How inter-arrival gaps are drawn.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Arrivals {
    /// Every request at time zero (`--request-rate inf`).
    Burst,
    /// Gamma-distributed gaps with mean `1/rate` and the given shape (`--burstiness`):
    /// shape 1 is a Poisson process, below 1 burstier, above 1 more regular. This is the
    /// parameterisation `vllm bench serve` uses (scale = 1 / (rate × shape)).
    Gamma {
        /// Mean arrivals per second.
        rate: f64,
        /// Gamma shape (`--burstiness`).
        shape: f64,
    },
    /// Exactly `1/rate` apart (`--burstiness inf`).
    Constant {
        /// Arrivals per second.
        rate: f64,
    },
}

/// An invalid `--request-rate` or `--burstiness`.
#[derive(Debug, Clone, thiserror::Error, PartialEq)]
pub enum ScheduleError {
    /// The request rate is zero, negative or NaN.
    #[error("--request-rate must be a positive number of requests per second or 'inf' (got {0})")]
    Rate(f64),
    /// The burstiness is zero, negative or NaN.
    #[error("--burstiness must be a positive number or 'inf' (got {0})")]
    Burstiness(f64),
}

impl Arrivals {
    /// Build from the CLI's rate (`None` = inf) and burstiness (`f64::INFINITY` = constant).
    pub fn new(rate: Option<f64>, burstiness: f64) -> Result<Self, ScheduleError> {
        if burstiness.is_nan() || burstiness <= 0.0 {
            return Err(ScheduleError::Burstiness(burstiness));
        }
        match rate {
            None => Ok(Arrivals::Burst),
            Some(r) if r.is_infinite() && r > 0.0 => Ok(Arrivals::Burst),
            Some(r) if r.is_nan() || r <= 0.0 => Err(ScheduleError::Rate(r)),
            Some(rate) if burstiness.is_infinite() => Ok(Arrivals::Constant { rate }),
            Some(rate) => Ok(Arrivals::Gamma { rate, shape: burstiness }),
        }
    }
}

/// A deterministic sequence of arrival offsets in nanoseconds: endless and starting at 0 for
/// an arrival process, or exactly the given instants for a replay ([`Schedule::at_offsets`]).
pub struct Schedule {
    arrivals: Arrivals,
    next_ns: f64,
    rng: StdRng,
    gamma: Option<Gamma<f64>>,
    /// Explicit instants (a trace replay) and the position in them; `None`: drawn arrivals.
    offsets: Option<(Arc<[u64]>, usize)>,
}

impl Schedule {
    /// A schedule for `arrivals`; the same `seed` gives the same gamma gaps.
    pub fn new(arrivals: Arrivals, seed: u64) -> Self {
        let gamma = match arrivals {
            // Validated in `Arrivals::new`; a hand-built invalid one degrades to constant.
            Arrivals::Gamma { rate, shape } => Gamma::new(shape, 1.0 / (rate * shape)).ok(),
            _ => None,
        };
        Self { arrivals, next_ns: 0.0, rng: StdRng::seed_from_u64(seed), gamma, offsets: None }
    }

    /// The given instants (ns since the run origin, e.g. a trace's timestamps), in order, and
    /// then nothing more. The caller sorts them; an instant earlier than the one before is
    /// sent as soon as its turn comes.
    pub fn at_offsets(offsets: Arc<[u64]>) -> Self {
        let mut s = Self::new(Arrivals::Burst, 0);
        s.offsets = Some((offsets, 0));
        s
    }

    /// True for explicit instants ([`Schedule::at_offsets`]).
    pub fn is_explicit(&self) -> bool {
        self.offsets.is_some()
    }

    /// The first `n` arrivals.
    pub fn take_n(arrivals: Arrivals, seed: u64, n: usize) -> Vec<u64> {
        Self::new(arrivals, seed).take(n).collect()
    }
}

impl Iterator for Schedule {
    type Item = u64;

    fn next(&mut self) -> Option<u64> {
        if let Some((offsets, pos)) = &mut self.offsets {
            let t = offsets.get(*pos).copied();
            *pos += usize::from(t.is_some());
            return t;
        }
        let now = self.next_ns;
        let gap_s = match (self.arrivals, &self.gamma) {
            (Arrivals::Burst, _) => 0.0,
            (Arrivals::Gamma { .. }, Some(g)) => g.sample(&mut self.rng),
            (Arrivals::Gamma { rate, .. }, None) | (Arrivals::Constant { rate }, _) => 1.0 / rate,
        };
        // Accumulate in f64 nanoseconds so rounding never drifts the mean rate.
        self.next_ns += gap_s * 1e9;
        Some(now.round() as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn burst_is_all_zero() {
        assert_eq!(Schedule::take_n(Arrivals::Burst, 1, 3), vec![0, 0, 0]);
        assert_eq!(Arrivals::new(None, 1.0), Ok(Arrivals::Burst));
        assert_eq!(Arrivals::new(Some(f64::INFINITY), 1.0), Ok(Arrivals::Burst));
    }

    #[test]
    fn constant_spacing_is_exact() {
        let a = Arrivals::new(Some(4.0), f64::INFINITY).unwrap();
        assert_eq!(a, Arrivals::Constant { rate: 4.0 });
        assert_eq!(Schedule::take_n(a, 0, 4), vec![0, 250_000_000, 500_000_000, 750_000_000]);
        let third = Schedule::take_n(Arrivals::Constant { rate: 3.0 }, 0, 4);
        assert_eq!(third, vec![0, 333_333_333, 666_666_667, 1_000_000_000]);
    }

    #[test]
    fn gamma_is_seeded_and_has_the_requested_mean_rate() {
        let a = Arrivals::new(Some(10.0), 1.0).unwrap();
        let x = Schedule::take_n(a, 7, 20_001);
        assert_eq!(x, Schedule::take_n(a, 7, 20_001));
        assert_ne!(x, Schedule::take_n(a, 8, 20_001));
        assert_eq!(x[0], 0);
        assert!(x.windows(2).all(|w| w[0] <= w[1]));
        // 20,000 gaps of mean 0.1 s: the sum is 2,000 s ± ~1.5% (10 sigma is 7%).
        let total_s = x[20_000] as f64 / 1e9;
        assert!((total_s - 2000.0).abs() < 30.0, "{total_s}");
    }

    #[test]
    fn burstier_shapes_spread_gaps_more() {
        let cv = |shape: f64| {
            let x = Schedule::take_n(Arrivals::Gamma { rate: 1.0, shape }, 3, 10_001);
            let gaps: Vec<f64> = x.windows(2).map(|w| (w[1] - w[0]) as f64).collect();
            let m = gaps.iter().sum::<f64>() / gaps.len() as f64;
            let v = gaps.iter().map(|g| (g - m).powi(2)).sum::<f64>() / gaps.len() as f64;
            v.sqrt() / m
        };
        // A gamma's coefficient of variation is 1/sqrt(shape).
        assert!((cv(1.0) - 1.0).abs() < 0.05);
        assert!((cv(0.25) - 2.0).abs() < 0.15);
        assert!((cv(4.0) - 0.5).abs() < 0.03);
    }

    #[test]
    fn explicit_offsets_are_replayed_once_in_order() {
        let offsets: Arc<[u64]> = Arc::from(vec![0, 5, 5, 1_000_000_007]);
        let got: Vec<u64> = Schedule::at_offsets(offsets.clone()).collect();
        assert_eq!(got, offsets.to_vec());
        assert_eq!(Schedule::at_offsets(Arc::from(Vec::new())).next(), None);
    }

    #[test]
    fn invalid_inputs_are_named() {
        assert_eq!(Arrivals::new(Some(0.0), 1.0), Err(ScheduleError::Rate(0.0)));
        assert_eq!(Arrivals::new(Some(-1.0), 1.0), Err(ScheduleError::Rate(-1.0)));
        assert_eq!(Arrivals::new(Some(1.0), 0.0), Err(ScheduleError::Burstiness(0.0)));
        assert!(ScheduleError::Rate(0.0).to_string().contains("--request-rate"));
    }
}
