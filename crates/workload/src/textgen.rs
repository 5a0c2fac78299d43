//! Exact-length random text that composes: the building block of sessions and traces.
//!
//! For a byte-level BPE tokenizer whose count is additive word by word
//! ([`Tokenizer::counts_by_word`]), text is drawn from "word" tokens (a space and lowercase
//! ASCII letters, each encoding back to exactly itself; see [`Tokenizer::word_tokens`]). Every
//! such token is its own pre-tokenized piece, so a sequence of `n` of them encodes back to the
//! same `n` ids with no encode needed, any whole-word prefix of it has exactly that many tokens,
//! and two such texts joined have the sum of their counts. This is the fast path: no encoding
//! at all while generating millions of tokens.
//!
//! Other tokenizers fall back to [`Synth`], which checks every text with a full encode; callers
//! then check concatenations themselves ([`TextGen::composes`] is false).

use rand::rngs::{SmallRng, StdRng};
use rand::{RngCore, SeedableRng};

use crate::error::DatasetError;
use crate::synth::{Prefix, Synth};
use crate::tokenizer::Tokenizer;

/// Word tokens drawn from (the commonest, lowest ids).
const MAX_WORDS: usize = 8000;
/// Fewer word tokens than this: use the checked path.
const MIN_WORDS: usize = 1000;

pub(crate) struct TextGen<'t> {
    /// Texts of the word tokens (fast path), or empty.
    words: Vec<Box<str>>,
    /// The checked generator, for tokenizers without the fast path.
    synth: Option<Synth<'t>>,
}

impl<'t> TextGen<'t> {
    pub fn new(tok: &'t Tokenizer) -> Result<Self, DatasetError> {
        if tok.counts_by_word() {
            let ids = tok.word_tokens(MAX_WORDS);
            if ids.len() >= MIN_WORDS {
                let words = ids
                    .iter()
                    .map(|&id| tok.decode(&[id]).map(String::into_boxed_str))
                    .collect::<Result<_, _>>()?;
                return Ok(Self { words, synth: None });
            }
        }
        Ok(Self { words: Vec::new(), synth: Some(Synth::new(tok)?) })
    }

    /// Whether texts from [`Self::text`] joined together have exactly the sum of their counts,
    /// and whether [`Self::prefix`] is exact.
    pub fn composes(&self) -> bool {
        self.synth.is_none()
    }

    /// Random text of exactly `n` tokens. On the fast path it starts with a space followed by
    /// a letter and ends with a letter.
    pub fn text(&self, rng: &mut StdRng, n: usize) -> Result<String, DatasetError> {
        match &self.synth {
            None => {
                let mut out = String::with_capacity(n * 8);
                self.push_words(rng, n, &mut out);
                Ok(out)
            }
            Some(synth) => synth.text(rng, &Prefix::default(), n),
        }
    }

    /// Append `n` random word tokens (fast path only).
    ///
    /// Four word indices come from each 64-bit draw of a small generator seeded from `rng`
    /// (16 bits each, scaled to the pool: a bias below 1 in 8 between words, irrelevant for
    /// filler text), which makes generation about twice as fast as one draw per word.
    fn push_words(&self, rng: &mut StdRng, n: usize, out: &mut String) {
        let len = self.words.len() as u64;
        let mut fast = SmallRng::from_rng(rng);
        let mut left = n;
        while left > 0 {
            let bits = fast.next_u64();
            for k in 0..left.min(4) {
                let chunk = (bits >> (16 * k)) & 0xFFFF;
                out.push_str(&self.words[((chunk * len) >> 16) as usize]);
            }
            left -= left.min(4);
        }
    }

    /// The first `n` tokens of a fast-path `text` (every token starts with its one space), or
    /// the whole text if it has fewer.
    pub fn prefix(text: &str, n: usize) -> &str {
        if n == 0 {
            return "";
        }
        // The (n+1)-th space starts token n+1.
        match text.bytes().enumerate().filter(|&(_, b)| b == b' ').nth(n) {
            Some((at, _)) => &text[..at],
            None => text,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synth::item_rng;

    #[test]
    fn fast_texts_are_exact_and_compose() {
        let tok = Tokenizer::builtin("cl100k_base").unwrap();
        let g = TextGen::new(&tok).unwrap();
        assert!(g.composes());
        let a = g.text(&mut item_rng(1, 0), 300).unwrap();
        let b = g.text(&mut item_rng(1, 1), 17).unwrap();
        assert_eq!(tok.encode(&a).len(), 300);
        assert_eq!(tok.encode(&format!("{a}{b}{a}")).len(), 617);
        for n in [0, 1, 5, 299, 300, 301] {
            assert_eq!(tok.encode(TextGen::prefix(&a, n)).len(), n.min(300), "prefix {n}");
        }
        assert!(a.starts_with(' ') && a.as_bytes()[1].is_ascii_lowercase());
    }
}
