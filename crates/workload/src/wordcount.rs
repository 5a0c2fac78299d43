//! Fast token counting for byte-level BPE tokenizers (GPT-2 style and the built-in tiktoken
//! encodings), by memoizing counts of words.
//!
//! A full `encode` allocates a `String` per token and an `Encoding`; loading ShareGPT counts
//! millions of tokens, so that cost dominates. For a tokenizer whose only pre-tokenizers are
//! `ByteLevel` (with its regex) and `Digits`, and which has no normalizer, the text can be cut
//! before every space that follows a non-space and precedes an ASCII letter: no piece of
//! GPT-2's, cl100k's or Llama 3's split pattern crosses such a position (only runs of
//! whitespace span a space, and they would need whitespace before it), and BPE never merges
//! across pieces. So the count of the text is the sum of the counts of the words, and words
//! repeat. The tests check the sum against a full encode.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

/// Words longer than this are counted but not remembered (long runs without spaces are rare
/// and would only fill memory).
const MAX_MEMO_WORD: usize = 64;
/// Memo entries per tokenizer and thread before the memo is reset.
const MAX_MEMO_ENTRIES: usize = 500_000;

static NEXT_ID: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// Per thread, per counter id: word → token count.
    static MEMO: RefCell<HashMap<u64, HashMap<Box<str>, u32>>> = RefCell::new(HashMap::new());
}

/// Counts tokens word by word, for one eligible tokenizer.
#[derive(Debug)]
pub(crate) struct WordCounter {
    /// Distinguishes memo entries of different tokenizers (never reused).
    id: u64,
    /// Added-token contents: a text holding one is counted whole, as the tokenizer matches
    /// them before pre-tokenization.
    added: Vec<String>,
    /// `first_bytes[b]`: some added token starts with byte `b` (one pass screens the text).
    first_bytes: [bool; 256],
}

impl WordCounter {
    /// A counter if `tok` is eligible (see the module docs), else `None`.
    pub fn for_tokenizer(tok: &tokenizers::Tokenizer) -> Option<Self> {
        let eligible = tok.get_normalizer().is_none()
            && tok.get_truncation().is_none()
            && matches!(tok.get_model(), tokenizers::ModelWrapper::BPE(_))
            && tok
                .get_pre_tokenizer()
                .is_some_and(|p| serde_json::to_value(p).is_ok_and(|v| pre_tokenizer_eligible(&v)));
        eligible.then(|| {
            let added: Vec<String> =
                tok.get_added_vocabulary().get_vocab().keys().cloned().collect();
            let mut first_bytes = [false; 256];
            for a in &added {
                if let Some(&b) = a.as_bytes().first() {
                    first_bytes[b as usize] = true;
                }
            }
            Self { id: NEXT_ID.fetch_add(1, Ordering::Relaxed), added, first_bytes }
        })
    }

    /// A counter for a tokenizer that never matches added tokens inside text (tiktoken's
    /// `encode_ordinary`).
    pub fn without_added_tokens() -> Self {
        Self {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            added: Vec::new(),
            first_bytes: [false; 256],
        }
    }

    /// Whether an added token's text occurs in `text`.
    fn holds_added_token(&self, text: &str) -> bool {
        let bytes = text.as_bytes();
        bytes.iter().enumerate().any(|(i, &b)| {
            self.first_bytes[b as usize]
                && self.added.iter().any(|a| bytes[i..].starts_with(a.as_bytes()))
        })
    }

    /// Token count of `text`, using `full` (a whole encode) for words not yet seen.
    pub fn count(&self, text: &str, full: impl Fn(&str) -> usize) -> usize {
        if self.holds_added_token(text) {
            return full(text);
        }
        MEMO.with(|memo| {
            let mut memo = memo.borrow_mut();
            let words = memo.entry(self.id).or_default();
            if words.len() > MAX_MEMO_ENTRIES {
                words.clear();
            }
            split_words(text)
                .map(|w| {
                    if w.len() > MAX_MEMO_WORD {
                        return full(w);
                    }
                    if let Some(&n) = words.get(w) {
                        return n as usize;
                    }
                    let n = full(w);
                    words.insert(w.into(), n as u32);
                    n
                })
                .sum()
        })
    }
}

/// `ByteLevel` with its regex, optionally in a `Sequence` with `Digits`.
fn pre_tokenizer_eligible(v: &serde_json::Value) -> bool {
    let is_byte_level = |p: &serde_json::Value| {
        p["type"] == "ByteLevel" && p["use_regex"] == serde_json::Value::Bool(true)
    };
    if is_byte_level(v) {
        return true;
    }
    match (v["type"].as_str(), v["pretokenizers"].as_array()) {
        (Some("Sequence"), Some(items)) => {
            items.iter().any(is_byte_level)
                && items.iter().all(|p| is_byte_level(p) || p["type"] == "Digits")
        }
        _ => false,
    }
}

/// Whether a piece of the split pattern always ends at byte `at`: before a space that follows
/// a non-whitespace character and precedes an ASCII letter, or before a newline that follows an
/// ASCII letter or digit (a letter or number run never takes the newline, and the punctuation
/// piece of cl100k-style patterns that does needs punctuation before it).
fn is_cut(text: &str, at: usize) -> bool {
    let bytes = text.as_bytes();
    let prev = || text[..at].chars().next_back();
    match bytes[at] {
        b' ' => {
            bytes.get(at + 1).is_some_and(u8::is_ascii_alphabetic)
                && prev().is_some_and(|c| !c.is_whitespace())
        }
        b'\n' => prev().is_some_and(|c| c.is_ascii_alphanumeric()),
        _ => false,
    }
}

/// Cut `text` at every position where [`is_cut`] holds.
pub(crate) fn split_words(text: &str) -> impl Iterator<Item = &str> {
    let bytes = text.as_bytes();
    let mut start = 0;
    let mut i = 1;
    std::iter::from_fn(move || {
        if start >= bytes.len() {
            return None;
        }
        while i < bytes.len() {
            let at = i;
            i += 1;
            if at > start && is_cut(text, at) {
                let word = &text[start..at];
                start = at;
                return Some(word);
            }
        }
        let word = &text[start..];
        start = bytes.len();
        Some(word)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_before_space_letter_only() {
        let words: Vec<&str> = split_words("Hello world,  two  spaces 3 x\tab é ok").collect();
        assert_eq!(words, vec!["Hello", " world,  two  spaces 3", " x\tab é", " ok"]);
        let lines: Vec<&str> = split_words("one\ntwo.\n3\n\nfour\n").collect();
        assert_eq!(lines, vec!["one", "\ntwo.\n3", "\n\nfour", "\n"]);
        assert_eq!(split_words("").count(), 0);
        assert_eq!(split_words(" a").collect::<Vec<_>>(), vec![" a"]);
        assert_eq!(split_words("a b").collect::<Vec<_>>(), vec!["a", " b"]);
    }

    #[test]
    fn eligibility_from_json() {
        let v = |s: &str| serde_json::from_str::<serde_json::Value>(s).unwrap();
        assert!(pre_tokenizer_eligible(&v(r#"{"type":"ByteLevel","use_regex":true}"#)));
        assert!(pre_tokenizer_eligible(&v(
            r#"{"type":"Sequence","pretokenizers":[{"type":"Digits"},{"type":"ByteLevel","use_regex":true}]}"#
        )));
        assert!(!pre_tokenizer_eligible(&v(r#"{"type":"ByteLevel","use_regex":false}"#)));
        assert!(!pre_tokenizer_eligible(&v(r#"{"type":"Metaspace"}"#)));
        assert!(!pre_tokenizer_eligible(&v(
            r#"{"type":"Sequence","pretokenizers":[{"type":"Split"},{"type":"ByteLevel","use_regex":true}]}"#
        )));
    }
}
