//! Synthetic text with an exact token count: draw random token ids, decode, re-encode, and
//! trim or extend until the re-encoded text has exactly the wanted length.
//!
//! Re-encoding is needed because decoded ids do not always encode back to the same number of
//! ids (two tokens may merge, a byte sequence may split), so the count is only trusted after
//! the final text has been encoded.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::error::DatasetError;
use crate::tokenizer::Tokenizer;

/// Attempts before giving up on one prompt; in practice 1 to 3 are used.
const MAX_ROUNDS: usize = 64;
/// After this many attempts a boundary merge with the shared prefix is tolerated (the total
/// count stays exact, only the last prefix token may differ between prompts).
const PREFIX_STRICT_ROUNDS: usize = 16;

/// A per-item random stream that depends only on the run seed and the item's index, so
/// results are the same whatever order (or thread) items are generated in.
pub(crate) fn item_rng(seed: u64, index: u64) -> StdRng {
    // splitmix64 of the pair: well-spread seeds for neighbouring indices.
    let mut z = seed ^ index.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    StdRng::seed_from_u64(z ^ (z >> 31))
}

/// Integer bounds `[floor(n·(1−r)), ceil(n·(1+r))]`, as vLLM draws lengths. The products are
/// nudged by 1e-9 so that float noise (100 × 1.1 = 110.00000000000001) does not widen them.
pub(crate) fn length_bounds(n: u64, range_ratio: f64) -> (u64, u64) {
    let x = n as f64;
    let low = (x * (1.0 - range_ratio) + 1e-9).floor().max(0.0) as u64;
    let high = (x * (1.0 + range_ratio) - 1e-9).ceil().max(0.0) as u64;
    (low, high.max(low))
}

/// A text shared at the start of several prompts, with its ids.
#[derive(Debug, Clone, Default)]
pub(crate) struct Prefix {
    pub text: String,
    pub ids: Vec<u32>,
}

/// Draws exact-length texts for one tokenizer.
pub(crate) struct Synth<'t> {
    tok: &'t Tokenizer,
    /// Ids to draw from, and the text of each.
    pool: Vec<u32>,
    pool_text: Vec<String>,
    special: Vec<u32>,
    special_text: Vec<String>,
    /// Whether a word-wise count may stand in for a full encode (see
    /// [`Tokenizer::counts_by_word`]).
    fast: bool,
}

impl<'t> Synth<'t> {
    pub fn new(tok: &'t Tokenizer) -> Result<Self, DatasetError> {
        let pool = tok.sampleable_ids();
        if pool.is_empty() {
            return Err(DatasetError::Spec(format!(
                "tokenizer {} has no ordinary tokens to draw synthetic text from",
                tok.name()
            )));
        }
        let pool_text = pool.iter().map(|&id| tok.decode(&[id])).collect::<Result<_, _>>()?;
        let special = tok.special_ids();
        let special_text = special
            .iter()
            .filter_map(|&id| tok.decode(&[id]).ok())
            .filter(|t| !t.is_empty())
            .collect();
        Ok(Self { tok, pool, pool_text, special, special_text, fast: tok.counts_by_word() })
    }

    /// `n` random pool tokens, as text: the concatenation of their texts (whether it
    /// re-encodes to `n` tokens is checked by the caller).
    fn draw_text(&self, rng: &mut StdRng, n: usize) -> String {
        let mut text = String::with_capacity(n * 8);
        for _ in 0..n {
            text.push_str(&self.pool_text[rng.random_range(0..self.pool.len())]);
        }
        text
    }

    fn draw_ids(&self, rng: &mut StdRng, n: usize, out: &mut Vec<u32>) {
        out.extend((0..n).map(|_| self.pool[rng.random_range(0..self.pool.len())]));
    }

    /// A prefix of exactly `len` tokens, to be shared by several prompts.
    pub fn prefix(&self, rng: &mut StdRng, len: usize) -> Result<Prefix, DatasetError> {
        let text = self.text(rng, &Prefix::default(), len)?;
        let ids = self.tok.encode(&text);
        Ok(Prefix { text, ids })
    }

    /// The cheap acceptance test: a word-wise count, valid when the suffix starts a new word
    /// after the prefix and no special token's text appears.
    fn fast_accept(&self, prefix: &Prefix, suffix: &str, text: &str, total: usize) -> bool {
        let boundary = prefix.text.is_empty()
            || (prefix.text.chars().next_back().is_some_and(|c| !c.is_whitespace())
                && suffix.as_bytes().first() == Some(&b' ')
                && suffix.as_bytes().get(1).is_some_and(u8::is_ascii_alphabetic));
        self.fast
            && boundary
            && !self.special_text.iter().any(|s| text.contains(s.as_str()))
            && self.tok.count(text) == total
    }

    /// `prefix.text` followed by random text, exactly `total` tokens in all (`total` must be
    /// at least the prefix's length).
    pub fn text(
        &self,
        rng: &mut StdRng,
        prefix: &Prefix,
        total: usize,
    ) -> Result<String, DatasetError> {
        let need = total.saturating_sub(prefix.ids.len());
        if need == 0 {
            return Ok(prefix.text.clone());
        }
        let mut suffix = self.draw_text(rng, need);
        let mut tail = Vec::with_capacity(need + 8);
        for round in 0..MAX_ROUNDS {
            let text = format!("{}{suffix}", prefix.text);
            if self.fast_accept(prefix, &suffix, &text, total) {
                return Ok(text);
            }
            let ids = self.tok.encode(&text);
            let keeps_prefix = ids.starts_with(&prefix.ids);
            let clean = !ids.iter().any(|id| self.special.binary_search(id).is_ok());
            if ids.len() == total && clean && (keeps_prefix || round >= PREFIX_STRICT_ROUNDS) {
                return Ok(text);
            }
            tail.clear();
            if keeps_prefix && clean {
                // Work from the re-encoded tail: it is what the text really is.
                tail.extend_from_slice(&ids[prefix.ids.len()..]);
                tail.truncate(need);
                let missing = need - tail.len();
                self.draw_ids(rng, missing, &mut tail);
            } else {
                // The random start merged into the prefix, or formed a special token: redraw.
                self.draw_ids(rng, need, &mut tail);
            }
            suffix = self.tok.decode(&tail)?;
        }
        Err(DatasetError::ExactLength {
            target: total,
            tokenizer: self.tok.name().to_string(),
            rounds: MAX_ROUNDS,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_match_vllm_floor_ceil() {
        assert_eq!(length_bounds(1024, 0.0), (1024, 1024));
        assert_eq!(length_bounds(1024, 0.1), (921, 1127));
        assert_eq!(length_bounds(100, 0.1), (90, 110));
        assert_eq!(length_bounds(100, 0.3), (70, 130));
        assert_eq!(length_bounds(10, 0.5), (5, 15));
        assert_eq!(length_bounds(0, 0.5), (0, 0));
    }

    #[test]
    fn item_rngs_differ_by_index_and_seed() {
        let a: u64 = item_rng(0, 0).random();
        let b: u64 = item_rng(0, 1).random();
        let c: u64 = item_rng(1, 0).random();
        assert!(a != b && a != c && b != c);
        assert_eq!(a, item_rng(0, 0).random::<u64>());
    }

    #[test]
    fn exact_lengths_with_a_prefix() {
        let tok = Tokenizer::builtin("cl100k_base").unwrap();
        let synth = Synth::new(&tok).unwrap();
        let mut rng = item_rng(7, 0);
        let prefix = synth.prefix(&mut rng, 50).unwrap();
        assert_eq!(tok.count(&prefix.text), 50);
        for (i, total) in [50usize, 51, 60, 300].into_iter().enumerate() {
            let text = synth.text(&mut item_rng(7, i as u64 + 1), &prefix, total).unwrap();
            assert!(text.starts_with(&prefix.text));
            assert_eq!(tok.count(&text), total);
        }
    }
}
