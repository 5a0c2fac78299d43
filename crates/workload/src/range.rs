//! How the random datasets spread lengths around the asked length: the two conventions the
//! field's clients use under one flag name, `--random-range-ratio`.

use crate::error::DatasetError;
use crate::synth::length_bounds;

/// The interval a random dataset draws each prompt's and output's length from, uniformly.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum LengthRange {
    /// `vllm bench serve`'s: `[floor(L·(1−r)), ceil(L·(1+r))]`, `r` in `[0, 1)`; the mean is
    /// `L`.
    Around(f64),
    /// SGLang's `bench_serving` (and InferenceX's client): `[max(floor(L·r), 1), L]`, `r` in
    /// `[0, 1]`; the mean is below `L` (SGLang's default `r` of 0 draws from 1 to `L`).
    Below(f64),
}

impl LengthRange {
    /// Every request at exactly `L`.
    pub const EXACT: LengthRange = LengthRange::Around(0.0);

    /// True when every length is `L`.
    pub fn is_exact(self) -> bool {
        matches!(self, LengthRange::Around(r) if r == 0.0)
            || matches!(self, LengthRange::Below(r) if r == 1.0)
    }

    /// An error naming the ratio when it is outside its convention's interval.
    pub fn check(self) -> Result<(), DatasetError> {
        let bad = |r: f64, range: &str, what: &str| {
            Err(DatasetError::Spec(format!("range_ratio must be in {range} ({what}), got {r}")))
        };
        match self {
            LengthRange::Around(r) if !(0.0..1.0).contains(&r) => {
                bad(r, "[0, 1)", "lengths within L × (1 ± ratio)")
            }
            LengthRange::Below(r) if !(0.0..=1.0).contains(&r) => {
                bad(r, "[0, 1]", "lengths from L × ratio to L")
            }
            _ => Ok(()),
        }
    }

    /// Integer bounds for length `n`, both inclusive. SGLang's never falls below 1 token
    /// (a zero-token draw would be no request); vLLM's low end may be 0, which the callers
    /// refuse or raise as vLLM does.
    pub fn bounds(self, n: u64) -> (u64, u64) {
        match self {
            LengthRange::Around(r) => length_bounds(n, r),
            LengthRange::Below(r) => {
                // As Python's int(): truncation; nudged so that 1000 × 0.8 is 800, not 799.
                let low = ((n as f64 * r) + 1e-9).floor().max(1.0) as u64;
                (low.min(n.max(1)), n.max(1))
            }
        }
    }

    /// The ratio as given.
    pub fn ratio(self) -> f64 {
        match self {
            LengthRange::Around(r) | LengthRange::Below(r) => r,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_follow_each_clients_convention() {
        assert_eq!(LengthRange::Around(0.5).bounds(1000), (500, 1500));
        assert_eq!(LengthRange::Around(0.1).bounds(100), (90, 110));
        assert_eq!(LengthRange::EXACT.bounds(1024), (1024, 1024));
        // InferenceX's 1,024 at 0.8: int(819.2) = 819.
        assert_eq!(LengthRange::Below(0.8).bounds(1024), (819, 1024));
        assert_eq!(LengthRange::Below(0.8).bounds(1000), (800, 1000));
        assert_eq!(LengthRange::Below(0.0).bounds(1024), (1, 1024));
        assert_eq!(LengthRange::Below(1.0).bounds(7), (7, 7));
        assert!(LengthRange::Below(1.0).is_exact() && LengthRange::EXACT.is_exact());
        assert!(!LengthRange::Below(0.0).is_exact() && !LengthRange::Around(0.2).is_exact());
    }

    #[test]
    fn ratios_outside_their_interval_are_refused() {
        assert!(LengthRange::Below(1.0).check().is_ok());
        let e = LengthRange::Around(1.0).check().unwrap_err().to_string();
        assert!(e.contains("range_ratio must be in [0, 1)") && e.contains("got 1"), "{e}");
        let e = LengthRange::Below(1.5).check().unwrap_err().to_string();
        assert!(e.contains("[0, 1] (lengths from L × ratio to L), got 1.5"), "{e}");
        assert!(LengthRange::Below(f64::NAN).check().is_err());
    }
}
