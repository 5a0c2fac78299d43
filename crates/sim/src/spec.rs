//! Speculative decoding (`--speculative-tokens K --acceptance-rate P`): every decode step
//! verifies K drafted tokens and keeps the accepted ones plus the one the target model samples
//! itself, so one step (one SSE event) carries between 1 and K + 1 tokens.
//!
//! Each drafted token is accepted with probability P, independently, until the first
//! rejection (as in rejection sampling, a rejected draft ends the run). A step therefore yields
//! `1 + j` tokens with probability `P^j (1 − P)` for `j < K` and `P^K` for `j = K`; on average
//! `(1 − P^(K+1)) / (1 − P)` tokens (K + 1 at P = 1). The draws come from the request's own
//! seeded random stream, so a seed reproduces every step.
//!
//! What a step costs:
//! - fixed timing: one step is one `--itl-ms`, whatever it carries (ITL per token is then
//!   `--itl-ms` divided by the tokens of the step);
//! - engine model (`--engine`): the engine's step, plus the extra roofline time of verifying
//!   K + 1 tokens per decoding sequence instead of one ([`verify_extra_ns`]): next to nothing
//!   while decode is bound by reading the weights, up to K + 1 times the compute once the batch
//!   is large. The drafting itself is not priced (as for n-gram drafting); the engine's KV
//!   cache counts one block slot per step rather than per accepted token.

use rand::Rng;
use servelab_engine::cost::{BatchShape, CostModel};

/// The speculative-decoding switch of the simulator.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Speculation {
    /// Tokens drafted per step (K, at least 1).
    pub tokens: u32,
    /// Probability that one drafted token is accepted, in [0, 1].
    pub acceptance: f64,
}

impl Speculation {
    /// K drafted tokens per step, each accepted with probability `acceptance`; an error names
    /// the flag at fault.
    pub fn new(tokens: u32, acceptance: f64) -> Result<Self, String> {
        if tokens == 0 || tokens > 64 {
            return Err(format!("--speculative-tokens {tokens}: expected 1 to 64"));
        }
        if !(0.0..=1.0).contains(&acceptance) {
            return Err(format!(
                "--acceptance-rate {acceptance}: expected a probability in [0, 1]"
            ));
        }
        Ok(Self { tokens, acceptance })
    }

    /// Tokens one decode step yields: 1 + the drafted tokens accepted before the first
    /// rejection.
    pub fn step_tokens(&self, rng: &mut impl Rng) -> u32 {
        let mut accepted = 0;
        while accepted < self.tokens && rng.random::<f64>() < self.acceptance {
            accepted += 1;
        }
        1 + accepted
    }

    /// Mean tokens per decode step: `(1 − P^(K+1)) / (1 − P)`.
    pub fn mean_step_tokens(&self) -> f64 {
        let (p, k) = (self.acceptance, f64::from(self.tokens));
        if p >= 1.0 {
            k + 1.0
        } else {
            (1.0 - p.powf(k + 1.0)) / (1.0 - p)
        }
    }

    /// The tokens of each step of a request generating `total` tokens: the prefill's first
    /// token alone, then decode steps of [`Speculation::step_tokens`] each, the last one cut to
    /// what is left. Sums to `total` (at least one step).
    pub fn plan(&self, total: u64, rng: &mut impl Rng) -> Vec<u32> {
        let mut steps = vec![1u32];
        let mut left = total.saturating_sub(1);
        while left > 0 {
            let k = u64::from(self.step_tokens(rng)).min(left);
            steps.push(k as u32);
            left -= k;
        }
        steps
    }
}

/// The extra time of verifying K + 1 tokens per decoding sequence instead of one, in ns, for a
/// step of the decoding sequences whose contexts (tokens already in their KV cache) are
/// `decode_ctx`, beside `prefill_tokens` tokens of prompt chunks: the roofline of the step with
/// the verification minus that without it.
pub fn verify_extra_ns(
    cost: &CostModel,
    tokens: u32,
    decode_ctx: &[u64],
    prefill_tokens: u64,
) -> u64 {
    if decode_ctx.is_empty() {
        return 0;
    }
    let window = cost.window();
    let shape = |new: u64| {
        let mut b = BatchShape::default();
        if prefill_tokens > 0 {
            b.add(prefill_tokens, 0, true, window);
        }
        for &ctx in decode_ctx {
            b.add(new, ctx.max(1), true, window);
        }
        b.uniform_decode = prefill_tokens == 0;
        b
    };
    let plain = cost.step_ns(&shape(1));
    let verify = cost.step_ns(&shape(u64::from(tokens) + 1));
    verify.saturating_sub(plain)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::SeedableRng;

    #[test]
    fn every_draft_accepted_or_none() {
        let mut rng = SmallRng::seed_from_u64(7);
        let all = Speculation::new(3, 1.0).unwrap();
        assert_eq!(all.plan(10, &mut rng), vec![1, 4, 4, 1]);
        assert_eq!(all.mean_step_tokens(), 4.0);
        let none = Speculation::new(3, 0.0).unwrap();
        assert_eq!(none.plan(4, &mut rng), vec![1, 1, 1, 1]);
        assert_eq!(none.mean_step_tokens(), 1.0);
        assert_eq!(all.plan(1, &mut rng), vec![1]);
        assert_eq!(all.plan(0, &mut rng), vec![1], "a request always gets its first token");
    }

    /// The step sizes follow the truncated geometric law: at K = 2, P = 0.5 a step yields 1, 2
    /// or 3 tokens with probability 1/2, 1/4, 1/4 (mean 1.75).
    #[test]
    fn step_sizes_follow_the_acceptance_law() {
        let s = Speculation::new(2, 0.5).unwrap();
        assert_eq!(s.mean_step_tokens(), 1.75);
        let mut rng = SmallRng::seed_from_u64(1);
        let n = 40_000;
        let mut counts = [0u32; 4];
        for _ in 0..n {
            counts[s.step_tokens(&mut rng) as usize] += 1;
        }
        let share = |k: usize| f64::from(counts[k]) / f64::from(n);
        assert_eq!(counts[0], 0);
        assert!((share(1) - 0.5).abs() < 0.01, "{counts:?}");
        assert!((share(2) - 0.25).abs() < 0.01, "{counts:?}");
        assert!((share(3) - 0.25).abs() < 0.01, "{counts:?}");
    }

    #[test]
    fn bad_settings_name_the_flag() {
        assert!(Speculation::new(0, 0.5).unwrap_err().contains("--speculative-tokens"));
        assert!(Speculation::new(3, 1.5).unwrap_err().contains("--acceptance-rate"));
        assert!(Speculation::new(3, f64::NAN).unwrap_err().contains("--acceptance-rate"));
    }

    /// Verifying 4 tokens per sequence costs next to nothing for one sequence (decode reads the
    /// weights either way) and much more for 256 (the GEMMs become compute-bound).
    #[test]
    fn verification_is_cheap_alone_and_dear_in_a_large_batch() {
        let cfg = servelab_engine::EngineFile::parse("model: qwen3-8b\ngpu: h100\n")
            .unwrap()
            .build(None)
            .unwrap();
        let cost = CostModel::new(&cfg.worker(cfg.tp));
        let one = cost.step_ns(&{
            let mut b = BatchShape::default();
            b.add(1, 1000, true, None);
            b
        });
        let alone = verify_extra_ns(&cost, 3, &[1000], 0);
        assert!((alone as f64) < 0.1 * one as f64, "alone {alone} vs step {one}");
        let many = verify_extra_ns(&cost, 3, &[1000; 256], 0);
        assert!(many as f64 > one as f64, "256 sequences: {many} vs one step {one}");
        assert_eq!(verify_extra_ns(&cost, 3, &[], 512), 0, "no decode, nothing to verify");
    }
}
