//! Token counting and generation: a built-in tiktoken encoding or a Hugging Face
//! `tokenizer.json`, behind one type.
//!
//! Counts never include special tokens (no BOS/EOS added): servelab counts the tokens of
//! the text it sends and receives, and says so in `docs/metrics.md`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::wordcount::WordCounter;

/// Built-in tiktoken encodings, usable with no file and no network.
pub const BUILTIN_ENCODINGS: [&str; 4] = ["o200k_base", "cl100k_base", "p50k_base", "r50k_base"];

/// The default encoding when nothing else is asked for.
pub const DEFAULT_ENCODING: &str = "cl100k_base";

/// Why a tokenizer could not be loaded or used.
#[derive(Debug, thiserror::Error)]
pub enum TokenizerError {
    /// A `tokenizer.json` could not be read or does not parse.
    #[error("cannot read tokenizer file {path}: {message}")]
    File {
        /// The file that was read.
        path: PathBuf,
        /// What went wrong reading or parsing it.
        message: String,
    },
    /// The spec names no file, directory, built-in encoding or cached model.
    #[error(
        "tokenizer '{spec}' is not a tokenizer.json path, a directory holding one, or a built-in \
         encoding ({builtins}); to use a Hugging Face model name, make its tokenizer.json \
         available (see --tokenizer in `servelab bench --help`)",
        builtins = BUILTIN_ENCODINGS.join(", ")
    )]
    Unknown {
        /// The `--tokenizer` value as given.
        spec: String,
    },
    /// Token ids that do not decode to text under this tokenizer.
    #[error("cannot decode token ids: {0}")]
    Decode(String),
    /// A model's tokenizer could not be had from the Hugging Face Hub; the message names the
    /// model and what to do.
    #[error("{0}")]
    Hub(String),
}

impl From<crate::hub::HubError> for TokenizerError {
    fn from(e: crate::hub::HubError) -> Self {
        TokenizerError::Hub(e.0)
    }
}

#[derive(Clone)]
enum Inner {
    Tiktoken(Arc<tiktoken_rs::CoreBPE>),
    Hf(Arc<tokenizers::Tokenizer>),
}

/// The largest `tokenizer.json` read (real ones are up to a few tens of MB).
pub const MAX_TOKENIZER_BYTES: u64 = 128 << 20;

/// A tokenizer, cheap to clone and safe to share across threads.
#[derive(Clone)]
pub struct Tokenizer {
    name: String,
    inner: Inner,
    /// Word-level memo for counting, when the tokenizer's pre-tokenizer allows it.
    words: Option<Arc<WordCounter>>,
}

impl std::fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokenizer").field("name", &self.name).finish()
    }
}

impl Tokenizer {
    /// A built-in tiktoken encoding by name (`cl100k_base`, `o200k_base`, ...).
    pub fn builtin(name: &str) -> Result<Self, TokenizerError> {
        let bpe = match name {
            "o200k_base" => tiktoken_rs::o200k_base(),
            "cl100k_base" => tiktoken_rs::cl100k_base(),
            "p50k_base" => tiktoken_rs::p50k_base(),
            "r50k_base" | "gpt2" => tiktoken_rs::r50k_base(),
            _ => return Err(TokenizerError::Unknown { spec: name.to_string() }),
        }
        .map_err(|e| TokenizerError::Decode(e.to_string()))?;
        // Every built-in split pattern (GPT-2's, cl100k's, o200k's) cuts where the word memo does.
        let words = Some(Arc::new(WordCounter::without_added_tokens()));
        Ok(Self { name: name.to_string(), inner: Inner::Tiktoken(Arc::new(bpe)), words })
    }

    /// A Hugging Face `tokenizer.json`, or a directory containing one (at most
    /// [`MAX_TOKENIZER_BYTES`]).
    pub fn from_path(path: &Path) -> Result<Self, TokenizerError> {
        let file = if path.is_dir() { path.join("tokenizer.json") } else { path.to_path_buf() };
        let failed = |message: String| TokenizerError::File { path: file.clone(), message };
        // The largest tokenizer.json files are tens of MB; `/dev/zero` must not grow forever.
        let bytes = crate::bounded::read_bounded(&file, MAX_TOKENIZER_BYTES)
            .map_err(|e| failed(e.to_string()))?;
        let tok = tokenizers::Tokenizer::from_bytes(&bytes).map_err(|e| failed(e.to_string()))?;
        drop(bytes);
        let words = WordCounter::for_tokenizer(&tok).map(Arc::new);
        Ok(Self { name: path.display().to_string(), inner: Inner::Hf(Arc::new(tok)), words })
    }

    /// Resolve a user's `--tokenizer` value: an existing path, a built-in encoding name, or a
    /// Hugging Face model name found in the local cache (see [`crate::hub`]).
    pub fn from_spec(spec: &str) -> Result<Self, TokenizerError> {
        let path = Path::new(spec);
        if path.exists() {
            return Self::from_path(path);
        }
        if BUILTIN_ENCODINGS.contains(&spec) || spec == "gpt2" {
            return Self::builtin(spec);
        }
        if let Some(file) = crate::hub::cached_tokenizer(spec) {
            let mut tok = Self::from_path(&file)?;
            tok.name = spec.to_string();
            return Ok(tok);
        }
        if crate::hub::is_model_name(spec) {
            // Not cached: fetch it once into the standard cache (or explain how to avoid that).
            let file = crate::hub::download_tokenizer(spec)?;
            let mut tok = Self::from_path(&file)?;
            tok.name = spec.to_string();
            return Ok(tok);
        }
        Err(TokenizerError::Unknown { spec: spec.to_string() })
    }

    /// What the user asked for (path, encoding or model name).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The token ids of `text`, no special tokens added.
    pub fn encode(&self, text: &str) -> Vec<u32> {
        match &self.inner {
            Inner::Tiktoken(bpe) => bpe.encode_ordinary(text),
            Inner::Hf(tok) => {
                tok.encode_fast(text, false).map(|e| e.get_ids().to_vec()).unwrap_or_default()
            }
        }
    }

    /// Number of tokens of `text` (no special tokens added), as `encode(text).len()`.
    pub fn count(&self, text: &str) -> usize {
        match &self.inner {
            Inner::Hf(tok) => match &self.words {
                Some(words) => words.count(text, |t| self.hf_encode_len(tok, t)),
                None => self.hf_encode_len(tok, text),
            },
            Inner::Tiktoken(bpe) => match &self.words {
                Some(words) => words.count(text, |t| bpe.encode_ordinary(t).len()),
                None => bpe.encode_ordinary(text).len(),
            },
        }
    }

    /// Whether [`Self::count`] counts word by word, so that text cut before a space followed by
    /// an ASCII letter (after a non-space) tokenizes as its two halves would.
    pub(crate) fn counts_by_word(&self) -> bool {
        self.words.is_some()
    }

    fn hf_encode_len(&self, tok: &tokenizers::Tokenizer, text: &str) -> usize {
        tok.encode_fast(text, false).map(|e| e.len()).unwrap_or_default()
    }

    /// Decode ids to text. Invalid UTF-8 at token boundaries is replaced, as servers do.
    pub fn decode(&self, ids: &[u32]) -> Result<String, TokenizerError> {
        match &self.inner {
            Inner::Tiktoken(bpe) => bpe
                .decode_bytes(ids)
                .map(|b| String::from_utf8_lossy(&b).into_owned())
                .map_err(|e| TokenizerError::Decode(e.to_string())),
            Inner::Hf(tok) => {
                tok.decode(ids, false).map_err(|e| TokenizerError::Decode(e.to_string()))
            }
        }
    }

    /// Number of ids in the vocabulary (special tokens included).
    pub fn vocab_size(&self) -> usize {
        match &self.inner {
            Inner::Tiktoken(bpe) => {
                // CoreBPE does not expose its size; probe the dense id range once.
                let mut n = 0u32;
                while bpe.decode_bytes(&[n]).is_ok() {
                    n += 1;
                }
                n as usize
            }
            Inner::Hf(tok) => tok.get_vocab_size(true),
        }
    }

    /// Ids of special tokens (BOS, EOS, chat markers): never drawn for synthetic text.
    ///
    /// tiktoken's specials live above the dense id range that [`Self::vocab_size`] probes, so
    /// none are reported for built-in encodings.
    pub fn special_ids(&self) -> Vec<u32> {
        match &self.inner {
            Inner::Tiktoken(_) => Vec::new(),
            Inner::Hf(tok) => {
                let mut ids: Vec<u32> = tok
                    .get_added_tokens_decoder()
                    .into_iter()
                    .filter(|(_, t)| t.special)
                    .map(|(id, _)| id)
                    .collect();
                ids.sort_unstable();
                ids
            }
        }
    }

    /// Ids that synthetic prompts may be drawn from, ascending; never special tokens.
    ///
    /// Preferred: tokens that decode to a space and ASCII letters (`" table"`). Each is its own
    /// pre-tokenized piece, so random sequences of them re-encode almost unchanged and hit the
    /// tokenizer's word cache: the exact-length search then takes one or two encodes. At most
    /// the 8,000 lowest such ids are used. Text of arbitrary tokens glues into long unique
    /// pieces whose BPE is several times slower, and partial UTF-8 bytes never re-encode to
    /// themselves. Vocabularies with fewer than 1,000 such tokens fall back to printable ASCII
    /// tokens, then to every token with valid text.
    pub fn sampleable_ids(&self) -> Vec<u32> {
        const ENOUGH: usize = 1000;
        const MAX_POOL: usize = 8000;
        let special = self.special_ids();
        let candidates: Vec<(u32, String)> = (0..self.vocab_size() as u32)
            .filter(|id| special.binary_search(id).is_err())
            .filter_map(|id| self.decode(&[id]).ok().map(|t| (id, t)))
            .filter(|(_, t)| !t.is_empty() && !t.contains('\u{FFFD}'))
            .collect();
        let word = |t: &str| {
            t.strip_prefix(' ')
                .is_some_and(|w| !w.is_empty() && w.bytes().all(|b| b.is_ascii_alphabetic()))
        };
        let printable = |t: &str| t.bytes().all(|b| b == b' ' || b.is_ascii_graphic());
        for keep in [&word as &dyn Fn(&str) -> bool, &printable] {
            let ids: Vec<u32> =
                candidates.iter().filter(|(_, t)| keep(t)).map(|&(id, _)| id).collect();
            if ids.len() >= ENOUGH {
                // Lowest ids first (BPE merges are frequency ordered): the commonest pieces,
                // and few enough to stay in the tokenizer's 10,000-word cache.
                return ids.into_iter().take(MAX_POOL).collect();
            }
        }
        candidates.into_iter().map(|(id, _)| id).collect()
    }

    /// Byte offsets in `text` at which each token of `encode(text)` ends, in order.
    ///
    /// Used to attribute a whole output's tokens to the SSE chunks that carried them: a token
    /// belongs to the chunk in which its last byte arrived.
    pub fn token_end_offsets(&self, text: &str) -> Vec<usize> {
        match &self.inner {
            Inner::Tiktoken(bpe) => {
                let mut end = 0usize;
                bpe.encode_ordinary(text)
                    .into_iter()
                    .map(|id| {
                        end += bpe.decode_bytes(&[id]).map(|b| b.len()).unwrap_or(0);
                        end.min(text.len())
                    })
                    .collect()
            }
            // `encode`, not `encode_fast`: the fast path skips offsets (all would read 0).
            Inner::Hf(tok) => match tok.encode(text, false) {
                Ok(enc) => enc.get_offsets().iter().map(|&(_, e)| e).collect(),
                Err(_) => Vec::new(),
            },
        }
    }

    /// Ids whose text is a single space-prefixed lowercase ASCII word that encodes back to
    /// exactly itself. Any sequence of them re-encodes to the same ids, so text built from them
    /// has an exact, tokenizer-independent-of-context token count. Deterministic order.
    pub fn word_tokens(&self, max: usize) -> Vec<u32> {
        let mut out = Vec::new();
        let limit = self.vocab_size().min(200_000) as u32;
        for id in 0..limit {
            if out.len() >= max {
                break;
            }
            let Ok(text) = self.decode(&[id]) else { continue };
            let is_word = text
                .strip_prefix(' ')
                .is_some_and(|w| w.len() >= 2 && w.bytes().all(|b| b.is_ascii_lowercase()));
            if !is_word {
                continue;
            }
            if self.encode(&text) == [id] && self.encode(&format!("{text}{text}")) == [id, id] {
                out.push(id);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hf_token_end_offsets_are_real_offsets() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../testdata/smollm2-tokenizer.json");
        let t = Tokenizer::from_path(Path::new(path)).unwrap();
        let text = "Hello, world! How are you?";
        let ends = t.token_end_offsets(text);
        assert_eq!(ends.len(), t.count(text));
        assert!(ends.windows(2).all(|w| w[0] < w[1]), "{ends:?}");
        assert_eq!(ends.first(), Some(&5), "'Hello' ends at byte 5: {ends:?}");
        assert_eq!(ends.last(), Some(&text.len()));
    }

    #[test]
    fn builtin_counts_and_round_trips() {
        let t = Tokenizer::builtin("cl100k_base").unwrap();
        let ids = t.encode("hello world");
        assert_eq!(ids.len(), 2);
        assert_eq!(t.decode(&ids).unwrap(), "hello world");
        assert_eq!(t.token_end_offsets("hello world"), vec![5, 11]);
    }

    #[test]
    fn word_tokens_concatenate_without_merging() {
        let t = Tokenizer::builtin("cl100k_base").unwrap();
        let words = t.word_tokens(500);
        assert_eq!(words.len(), 500);
        let seq: Vec<u32> = words.iter().copied().cycle().take(2000).collect();
        let text = t.decode(&seq).unwrap();
        assert_eq!(t.encode(&text), seq);
    }

    #[test]
    fn unknown_spec_names_the_input() {
        let err = Tokenizer::from_spec("no-such-encoding").unwrap_err().to_string();
        assert!(err.contains("no-such-encoding"), "{err}");
    }
}
