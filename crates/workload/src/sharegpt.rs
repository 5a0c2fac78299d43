//! The `sharegpt` dataset: a JSON array of `{"conversations": [{"from", "value"}, ...]}`.
//!
//! As vLLM: keep conversations with at least 2 turns, shuffle them with the seed, use the
//! first turn as the prompt and the second turn's token count as the output length, drop
//! those outside the length filters, and take the first `num_prompts` that pass.

use std::borrow::Cow;
use std::path::Path;

use rand::seq::SliceRandom;
use rayon::prelude::*;
use serde::Deserialize;

use crate::error::{read_text, serde_message, DatasetError};
use crate::prompt::{Prompt, PromptBody};
use crate::synth::item_rng;
use crate::tokenizer::Tokenizer;

/// vLLM's `is_valid_sequence` limits.
const MIN_LEN: u64 = 4;
const MAX_PROMPT_LEN: u64 = 1024;
const MAX_TOTAL_LEN: u64 = 2048;

#[derive(Deserialize)]
struct Entry<'a> {
    // Entries without the key are skipped, as vLLM does.
    #[serde(borrow, default)]
    conversations: Option<Vec<Turn<'a>>>,
}

#[derive(Deserialize)]
struct Turn<'a> {
    // Borrowed from the file text unless the string holds escapes.
    #[serde(borrow)]
    value: Cow<'a, str>,
}

/// A conversation's first two turns.
type Pair<'a> = (Cow<'a, str>, Cow<'a, str>);

/// Parse the file into (prompt, completion) pairs of conversations with at least 2 turns.
fn parse<'a>(path: &Path, text: &'a str) -> Result<Vec<Pair<'a>>, DatasetError> {
    if text.trim().is_empty() {
        return Err(DatasetError::Empty { path: path.into(), expected: "a ShareGPT JSON array" });
    }
    let mut de = serde_json::Deserializer::from_str(text);
    let entries: Vec<Entry<'a>> =
        serde_path_to_error::deserialize(&mut de).map_err(|e| json_error(path, e))?;
    de.end().map_err(|e| DatasetError::Json {
        path: path.into(),
        line: e.line(),
        column: e.column(),
        message: serde_message(&e),
    })?;
    if entries.is_empty() {
        return Err(DatasetError::Empty { path: path.into(), expected: "a ShareGPT JSON array" });
    }
    let pairs: Vec<Pair<'a>> = entries
        .into_iter()
        .filter_map(|e| e.conversations)
        .filter(|c| c.len() >= 2)
        .map(|c| {
            let mut turns = c.into_iter().map(|t| t.value);
            (turns.next().unwrap_or_default(), turns.next().unwrap_or_default())
        })
        .collect();
    if pairs.is_empty() {
        return Err(DatasetError::NoConversations { path: path.into() });
    }
    Ok(pairs)
}

/// A syntax error as `Json`, a shape error as `Field` naming the JSON path.
pub(crate) fn json_error(
    path: &Path,
    err: serde_path_to_error::Error<serde_json::Error>,
) -> DatasetError {
    let field = err.path().to_string();
    let inner = err.into_inner();
    let (line, column) = (inner.line(), inner.column());
    match inner.classify() {
        serde_json::error::Category::Data if field != "." => DatasetError::Field {
            path: path.into(),
            line,
            column: Some(column),
            field,
            problem: format!("is invalid: {}", serde_message(&inner)),
        },
        serde_json::error::Category::Data => DatasetError::Shape {
            path: path.into(),
            line,
            problem: format!(
                "{}; expected a JSON array of {{\"conversations\": [...]}} objects",
                serde_message(&inner)
            ),
        },
        _ => DatasetError::Json { path: path.into(), line, column, message: serde_message(&inner) },
    }
}

/// Token counts of one pair if it passes the filters.
fn evaluate(pair: &Pair<'_>, tok: &Tokenizer, output_len: Option<u64>) -> Option<(u64, u64)> {
    let prompt_len = tok.count(&pair.0) as u64;
    if prompt_len < MIN_LEN {
        return None;
    }
    match output_len {
        Some(fixed) => Some((prompt_len, fixed)),
        None => {
            if prompt_len > MAX_PROMPT_LEN {
                return None; // no need to tokenize the completion
            }
            let out = tok.count(&pair.1) as u64;
            (out >= MIN_LEN && prompt_len + out <= MAX_TOTAL_LEN).then_some((prompt_len, out))
        }
    }
}

/// Load `num` prompts from a ShareGPT file, cycling through those that pass if too few do.
pub(crate) fn load(
    path: &Path,
    output_len: Option<u64>,
    num: usize,
    tok: &Tokenizer,
    seed: u64,
) -> Result<Vec<Prompt>, DatasetError> {
    let text = read_text(path)?;
    let mut pairs = parse(path, &text)?;
    pairs.shuffle(&mut item_rng(seed, 0));
    let mut kept: Vec<Prompt> = Vec::with_capacity(num);
    let mut next = 0;
    // Tokenize in parallel, in chunks a little larger than what is still missing, so a large
    // file costs only the conversations actually needed.
    while kept.len() < num && next < pairs.len() {
        let missing = num - kept.len();
        let end = pairs.len().min(next + missing + missing / 4 + 16);
        let passed: Vec<Option<Prompt>> = pairs[next..end]
            .par_iter()
            .map(|pair| {
                evaluate(pair, tok, output_len).map(|(p, o)| Prompt {
                    body: PromptBody::Text(pair.0.to_string()),
                    prompt_tokens: p,
                    output_tokens: Some(o),
                })
            })
            .collect();
        kept.extend(passed.into_iter().flatten().take(missing));
        next = end;
    }
    if kept.is_empty() && num > 0 {
        return Err(DatasetError::NoneUsable {
            path: path.into(),
            candidates: pairs.len(),
            tokenizer: tok.name().to_string(),
        });
    }
    Ok(crate::cycle(kept, num))
}
