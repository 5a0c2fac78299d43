//! The timing decision: how long prefill takes and when each token is due.
//!
//! [`EngineModel`] is the seam for performance models: `fixed` and `per-token` are its two
//! implementations now; a calibrated model can be plugged in through
//! [`crate::SimConfig::engine_model`]. Jitter is applied on top by [`TokenClock`], seeded per
//! request, so every model gets the same jitter semantics.

use std::fmt::Debug;
use std::time::Duration;

use rand::Rng;
use rand_distr::{Distribution, Exp, Normal};

/// What the engine knows about one request when timing it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestShape {
    /// Tokens in the prompt.
    pub prompt_tokens: u64,
    /// Tokens this request will generate.
    pub output_tokens: u64,
}

/// A snapshot of the engine when the decision is taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct EngineState {
    /// Requests holding a decode slot (this one included once it has its slot).
    pub running: u64,
    /// Requests queued for a slot.
    pub waiting: u64,
}

/// Decides TTFT and inter-token latency. Must be cheap: it is called per token.
pub trait EngineModel: Send + Sync + Debug {
    /// Time from getting a slot to the first token.
    fn ttft(&self, req: &RequestShape, state: &EngineState) -> Duration;
    /// Time from token `index - 1` to token `index` (`index >= 1`), before jitter.
    fn itl(&self, req: &RequestShape, state: &EngineState, index: u64) -> Duration;
}

/// Constant TTFT and ITL.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FixedModel {
    /// Time from getting a slot to the first token.
    pub ttft: Duration,
    /// Time between successive tokens.
    pub itl: Duration,
}

impl EngineModel for FixedModel {
    fn ttft(&self, _: &RequestShape, _: &EngineState) -> Duration {
        self.ttft
    }
    fn itl(&self, _: &RequestShape, _: &EngineState, _: u64) -> Duration {
        self.itl
    }
}

/// TTFT = overhead + prompt_tokens × prefill time per token; constant ITL.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PerTokenModel {
    /// The fixed part of TTFT.
    pub overhead: Duration,
    /// Prefill time per prompt token.
    pub prefill_per_token: Duration,
    /// Time between successive tokens.
    pub itl: Duration,
}

impl EngineModel for PerTokenModel {
    fn ttft(&self, req: &RequestShape, _: &EngineState) -> Duration {
        let per = self.prefill_per_token.as_nanos() as u64;
        self.overhead + Duration::from_nanos(per.saturating_mul(req.prompt_tokens))
    }
    fn itl(&self, _: &RequestShape, _: &EngineState, _: u64) -> Duration {
        self.itl
    }
}

/// Shape of the timing noise.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum JitterDist {
    /// N(0, σ), zero-mean; draws that would make a negative gap are resampled.
    Normal,
    /// Exp with mean σ: always a non-negative extra delay.
    Exponential,
    /// U(−σ, σ), zero-mean; draws that would make a negative gap are resampled.
    Uniform,
}

/// Per-token timing noise of scale `scale` (σ, mean or half-width, see [`JitterDist`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Jitter {
    /// Shape of the noise.
    pub dist: JitterDist,
    /// σ (normal), mean (exponential) or half-width (uniform); zero means no noise.
    pub scale: Duration,
}

/// Attempts before giving up on a resample and using a zero gap (keeps the loop bounded).
const MAX_RESAMPLES: usize = 16;

impl Jitter {
    /// No noise.
    pub const NONE: Jitter = Jitter { dist: JitterDist::Normal, scale: Duration::ZERO };

    /// One raw draw in signed nanoseconds.
    pub(crate) fn sample_ns(&self, rng: &mut impl Rng) -> i64 {
        let s = self.scale.as_nanos() as f64;
        if s <= 0.0 {
            return 0;
        }
        let v = match self.dist {
            JitterDist::Normal => Normal::new(0.0, s).map(|d| d.sample(rng)).unwrap_or(0.0),
            JitterDist::Exponential => Exp::new(1.0 / s).map(|d| d.sample(rng)).unwrap_or(0.0),
            JitterDist::Uniform => rng.random_range(-s..=s),
        };
        v as i64
    }

    /// The jittered due time of a token whose un-jittered time is `base_ns`, never before
    /// `floor_ns` (the previous token's due time, or the slot start): resampled, not clamped.
    pub(crate) fn apply(&self, base_ns: u64, floor_ns: u64, rng: &mut impl Rng) -> u64 {
        if self.scale.is_zero() {
            return base_ns.max(floor_ns);
        }
        for _ in 0..MAX_RESAMPLES {
            let t = base_ns.saturating_add_signed(self.sample_ns(rng));
            if t >= floor_ns {
                return t;
            }
        }
        base_ns.max(floor_ns)
    }
}

/// A duration in ns, saturating (a plugged-in model may return anything).
fn dur_ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// Due times of successive tokens, at ABSOLUTE offsets from the request's arrival: token i is
/// due at slot + TTFT + Σ ITL (+ jitter of token i only), so lateness never accumulates.
#[derive(Debug, Clone)]
pub(crate) struct TokenClock {
    /// Un-jittered due time of the next token.
    next_base_ns: u64,
    /// Due time of the last token handed out (or the slot start).
    last_ns: u64,
    /// Index of the next token.
    index: u64,
    /// Extra delay added to every later token (the `stall` fault).
    shift_ns: u64,
}

impl TokenClock {
    /// A clock for a request that got its slot `slot_ns` after arrival, with first-token delay
    /// `ttft`.
    pub(crate) fn new(slot_ns: u64, ttft: Duration) -> Self {
        Self {
            next_base_ns: slot_ns.saturating_add(dur_ns(ttft)),
            last_ns: slot_ns,
            index: 0,
            shift_ns: 0,
        }
    }

    /// Index of the next token.
    pub(crate) fn index(&self) -> u64 {
        self.index
    }

    /// Delay every later token by `d`.
    pub(crate) fn shift(&mut self, d: Duration) {
        self.shift_ns = self.shift_ns.saturating_add(dur_ns(d));
    }

    /// Due time (ns after arrival) of the next token, `itl_next` being the model's ITL from
    /// this token to the one after it.
    pub(crate) fn next(&mut self, jitter: &Jitter, itl_next: Duration, rng: &mut impl Rng) -> u64 {
        let due = jitter.apply(self.next_base_ns.saturating_add(self.shift_ns), self.last_ns, rng);
        self.last_ns = due;
        self.next_base_ns = self.next_base_ns.saturating_add(dur_ns(itl_next));
        self.index += 1;
        due
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn rng() -> rand::rngs::SmallRng {
        rand::rngs::SmallRng::seed_from_u64(3)
    }

    #[test]
    fn per_token_ttft_is_overhead_plus_prefill() {
        let m = PerTokenModel {
            overhead: Duration::from_millis(5),
            prefill_per_token: Duration::from_micros(100),
            itl: Duration::from_millis(10),
        };
        let req = RequestShape { prompt_tokens: 1000, output_tokens: 1 };
        assert_eq!(m.ttft(&req, &EngineState::default()), Duration::from_millis(105));
    }

    #[test]
    fn clock_is_absolute_without_jitter() {
        let mut c = TokenClock::new(1_000, Duration::from_millis(50));
        let itl = Duration::from_millis(10);
        let mut r = rng();
        let due: Vec<u64> = (0..4).map(|_| c.next(&Jitter::NONE, itl, &mut r)).collect();
        assert_eq!(due, vec![50_001_000, 60_001_000, 70_001_000, 80_001_000]);
    }

    #[test]
    fn stall_shifts_later_tokens() {
        let mut c = TokenClock::new(0, Duration::from_millis(1));
        let itl = Duration::from_millis(1);
        let mut r = rng();
        assert_eq!(c.next(&Jitter::NONE, itl, &mut r), 1_000_000);
        c.shift(Duration::from_millis(100));
        assert_eq!(c.next(&Jitter::NONE, itl, &mut r), 102_000_000);
    }

    #[test]
    fn jitter_never_goes_backwards_and_does_not_accumulate() {
        for dist in [JitterDist::Normal, JitterDist::Exponential, JitterDist::Uniform] {
            let j = Jitter { dist, scale: Duration::from_millis(3) };
            let mut c = TokenClock::new(0, Duration::from_millis(1));
            let mut r = rng();
            let itl = Duration::from_millis(10);
            let due: Vec<u64> = (0..500).map(|_| c.next(&j, itl, &mut r)).collect();
            assert!(due.windows(2).all(|w| w[1] >= w[0]), "{dist:?}");
            // The last token stays near its absolute slot (4991 ms), not 500 × drift away.
            let last = *due.last().unwrap_or(&0) as f64 / 1e6;
            assert!((last - 4991.0).abs() < 20.0, "{dist:?}: {last}");
        }
    }

    #[test]
    fn exponential_jitter_is_non_negative() {
        let j = Jitter { dist: JitterDist::Exponential, scale: Duration::from_millis(2) };
        let mut r = rng();
        assert!((0..1000).all(|_| j.sample_ns(&mut r) >= 0));
    }
}
