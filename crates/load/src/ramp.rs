//! A request rate that ramps from a start to an end rate over the run (`vllm bench serve`'s
//! `--ramp-up-strategy linear|exponential --ramp-up-start-rps A --ramp-up-end-rps B`): request
//! `i` of `n` arrives after a gap drawn at the rate reached at progress `i / (n − 1)`, so the
//! ramp ends exactly at the last request, whatever the run's duration turns out to be.

use rand::rngs::StdRng;
use rand::SeedableRng;
use rand_distr::{Distribution, Gamma};
use serde::{Deserialize, Serialize};

/// How the rate moves from start to end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RampStrategy {
    /// `start + (end − start) · progress`.
    Linear,
    /// `start · (end / start)^progress`.
    Exponential,
}

/// A ramped request rate.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Ramp {
    /// How the rate moves.
    pub strategy: RampStrategy,
    /// Requests per second at the first request.
    pub start_rps: f64,
    /// Requests per second at the last request.
    pub end_rps: f64,
}

impl Ramp {
    /// A checked ramp; the message names the flag.
    pub fn new(strategy: RampStrategy, start_rps: f64, end_rps: f64) -> Result<Ramp, String> {
        let ok = |v: f64| v.is_finite() && v >= 0.0;
        if !ok(start_rps) || (strategy == RampStrategy::Exponential && start_rps == 0.0) {
            return Err(format!(
                "--ramp-up-start-rps: must be a finite number of requests per second, {} \
                 (got {start_rps})",
                if strategy == RampStrategy::Exponential {
                    "above 0 for exponential"
                } else {
                    ">= 0"
                }
            ));
        }
        if !ok(end_rps) || end_rps == 0.0 {
            return Err(format!(
                "--ramp-up-end-rps: must be a finite number of requests per second above 0 \
                 (got {end_rps})"
            ));
        }
        Ok(Ramp { strategy, start_rps, end_rps })
    }

    /// The rate at request `i` of `n`.
    pub fn rate_at(&self, i: usize, n: usize) -> f64 {
        let progress = i as f64 / (n.saturating_sub(1).max(1)) as f64;
        match self.strategy {
            RampStrategy::Linear => self.start_rps + (self.end_rps - self.start_rps) * progress,
            RampStrategy::Exponential => {
                self.start_rps * (self.end_rps / self.start_rps).powf(progress)
            }
        }
    }

    /// When each of `n` requests arrives, ns from the start: gaps drawn from a gamma of shape
    /// `burstiness` (`inf`: constant) with mean `1 / rate_at(i)`; a request at rate 0 (a linear
    /// ramp's start) arrives with the one before it. Deterministic for `seed`.
    pub fn offsets(&self, burstiness: f64, n: usize, seed: u64) -> Vec<u64> {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut t = 0.0f64;
        (0..n)
            .map(|i| {
                let rate = self.rate_at(i, n);
                let gap = if rate <= 0.0 {
                    0.0
                } else if burstiness.is_infinite() {
                    1.0 / rate
                } else {
                    Gamma::new(burstiness, 1.0 / (rate * burstiness))
                        .map_or(1.0 / rate, |g| g.sample(&mut rng))
                };
                // The first request goes at time zero, as a rate's first arrival does here.
                if i > 0 {
                    t += gap * 1e9;
                }
                t.round() as u64
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_follow_the_strategy() {
        let lin = Ramp::new(RampStrategy::Linear, 1.0, 9.0).unwrap();
        assert_eq!([0, 2, 4].map(|i| lin.rate_at(i, 5)), [1.0, 5.0, 9.0]);
        let exp = Ramp::new(RampStrategy::Exponential, 1.0, 16.0).unwrap();
        assert_eq!([0, 2, 4].map(|i| exp.rate_at(i, 5)), [1.0, 4.0, 16.0]);
    }

    #[test]
    fn constant_gaps_are_the_inverse_rates() {
        let lin = Ramp::new(RampStrategy::Linear, 1.0, 4.0).unwrap();
        // Gaps before requests 1..3 at rates 2, 3, 4 per second.
        assert_eq!(lin.offsets(f64::INFINITY, 4, 0), [0, 500_000_000, 833_333_333, 1_083_333_333]);
    }

    #[test]
    fn poisson_gaps_are_seeded_and_speed_up() {
        let r = Ramp::new(RampStrategy::Exponential, 2.0, 200.0).unwrap();
        let a = r.offsets(1.0, 2_000, 7);
        assert_eq!(a, r.offsets(1.0, 2_000, 7));
        assert!(a.windows(2).all(|w| w[0] <= w[1]));
        // The first tenth of the requests take far longer than the last tenth.
        let first = a[200] - a[0];
        let last = a[1_999] - a[1_799];
        assert!(first > 10 * last, "{first} vs {last}");
    }

    #[test]
    fn bad_rates_name_their_flag() {
        assert!(Ramp::new(RampStrategy::Exponential, 0.0, 5.0).unwrap_err().contains("start"));
        assert!(Ramp::new(RampStrategy::Linear, 0.0, 0.0).unwrap_err().contains("end"));
        assert!(Ramp::new(RampStrategy::Linear, 0.0, 5.0).is_ok());
    }
}
