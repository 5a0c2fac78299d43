//! ShareGPT conversations as sessions, with all their turns.
//!
//! Roles: `human`/`user` are the user; `gpt`/`assistant`/`chatgpt`/`bard`/`bing`/`model` the
//! assistant; a leading `system` message is the session's system prompt. Leading assistant
//! messages are dropped; the conversation then has to alternate user, assistant, user, ...:
//! it is cut at the first message that breaks the alternation or has another role. Each user
//! message with the assistant reply after it is a turn, whose reference reply gives the output
//! length (at least 1) unless `output_len` is fixed; a last user message without a reply is a
//! turn only when `output_len` is fixed. Conversations with no turn are skipped.

use std::borrow::Cow;
use std::path::Path;

use rand::seq::SliceRandom;
use rayon::prelude::*;
use serde::Deserialize;

use super::{finish_turns, Limits, ParsedTurn, Session, SystemPrompt, Turn};
use crate::error::{read_text, serde_message, DatasetError};
use crate::synth::item_rng;
use crate::tokenizer::Tokenizer;

#[derive(Deserialize)]
struct Entry<'a> {
    #[serde(default)]
    id: Option<serde_json::Value>,
    #[serde(borrow, default)]
    conversations: Option<Vec<Message<'a>>>,
}

#[derive(Deserialize)]
struct Message<'a> {
    #[serde(borrow, default, alias = "role")]
    from: Option<Cow<'a, str>>,
    #[serde(borrow, alias = "content")]
    value: Cow<'a, str>,
}

#[derive(Clone, Copy, PartialEq)]
pub(crate) enum Role {
    System,
    User,
    Assistant,
    Other,
}

pub(crate) fn role(name: &str) -> Role {
    match name.to_ascii_lowercase().as_str() {
        "system" => Role::System,
        "human" | "user" => Role::User,
        "gpt" | "assistant" | "chatgpt" | "bard" | "bing" | "model" => Role::Assistant,
        _ => Role::Other,
    }
}

/// A conversation reduced to its system prompt and (user, reply) pairs.
pub(crate) struct Dialogue<'a> {
    pub id: String,
    pub system: Option<&'a str>,
    pub pairs: Vec<(&'a str, Option<&'a str>)>,
}

/// Apply the alternation rules of the module docs to (role, text) messages.
pub(crate) fn dialogue<'a>(
    id: String,
    messages: impl IntoIterator<Item = (Role, &'a str)>,
    keep_unanswered: bool,
) -> Dialogue<'a> {
    let mut messages = messages.into_iter().peekable();
    let mut system = None;
    if let Some(&(Role::System, text)) = messages.peek() {
        system = Some(text);
        messages.next();
    }
    while messages.peek().is_some_and(|&(r, _)| r == Role::Assistant) {
        messages.next();
    }
    let mut pairs = Vec::new();
    while let Some((Role::User, user)) = messages.next() {
        match messages.next() {
            Some((Role::Assistant, reply)) => pairs.push((user, Some(reply))),
            _ => {
                if keep_unanswered {
                    pairs.push((user, None));
                }
                break;
            }
        }
    }
    Dialogue { id, system, pairs }
}

/// Token counts of a dialogue's texts, as a session.
pub(crate) fn to_session(d: &Dialogue<'_>, limits: Limits, tok: &Tokenizer) -> Option<Session> {
    let take = limits.max_turns.unwrap_or(usize::MAX).min(d.pairs.len());
    let parsed: Vec<ParsedTurn> = d.pairs[..take]
        .iter()
        .map(|&(user, reply)| {
            let output_tokens = match (limits.output_len, reply) {
                (Some(n), _) => Some(n),
                (None, Some(r)) => Some((tok.count(r) as u64).max(1)),
                (None, None) => None,
            };
            ParsedTurn {
                turn: Turn {
                    user: user.to_string(),
                    user_tokens: tok.count(user) as u64,
                    output_tokens,
                    think_time_ns: 0,
                },
                think_ns: None,
            }
        })
        .collect();
    if parsed.is_empty() {
        return None;
    }
    let system = d.system.map(|s| SystemPrompt { text: s.into(), tokens: tok.count(s) as u64 });
    Some(Session { id: d.id.clone(), system, turns: finish_turns(parsed) })
}

pub(crate) fn load(
    path: &Path,
    limits: Limits,
    num: usize,
    tok: &Tokenizer,
    seed: u64,
) -> Result<Vec<Session>, DatasetError> {
    let text = read_text(path)?;
    if text.trim().is_empty() {
        return Err(DatasetError::Empty { path: path.into(), expected: "a ShareGPT JSON array" });
    }
    let mut de = serde_json::Deserializer::from_str(&text);
    let entries: Vec<Entry<'_>> = serde_path_to_error::deserialize(&mut de)
        .map_err(|e| crate::sharegpt::json_error(path, e))?;
    de.end().map_err(|e| DatasetError::Json {
        path: path.into(),
        line: e.line(),
        column: e.column(),
        message: serde_message(&e),
    })?;
    let keep_unanswered = limits.output_len.is_some();
    let mut dialogues: Vec<Dialogue<'_>> = entries
        .iter()
        .enumerate()
        .filter_map(|(i, e)| {
            let id = match &e.id {
                Some(serde_json::Value::String(s)) => s.clone(),
                Some(serde_json::Value::Number(n)) => n.to_string(),
                _ => format!("sharegpt-{i}"),
            };
            let messages = e
                .conversations
                .as_ref()?
                .iter()
                .map(|m| (m.from.as_deref().map_or(Role::Other, role), m.value.as_ref()));
            let d = dialogue(id, messages, keep_unanswered);
            (!d.pairs.is_empty()).then_some(d)
        })
        .collect();
    if dialogues.is_empty() {
        return Err(DatasetError::Content {
            path: path.into(),
            problem: "no conversation has a user message followed by a reply; expected ShareGPT \
                 {\"conversations\": [{\"from\": \"human\", \"value\": ...}, {\"from\": \"gpt\", \
                 \"value\": ...}, ...]}"
                .into(),
        });
    }
    dialogues.shuffle(&mut item_rng(seed, 0));
    dialogues.truncate(num);
    Ok(dialogues.par_iter().filter_map(|d| to_session(d, limits, tok)).collect())
}
