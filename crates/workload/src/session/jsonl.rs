//! JSONL conversations: one session per line, in file order. Two shapes:
//!
//! - `{"id": ..., "messages": [{"role": "system"|"user"|"assistant", "content": "..."}, ...],
//!   "output_tokens": N}`: the ShareGPT rules (see `sharegpt.rs`) over the roles; an
//!   assistant message is the reference reply of the user message before it; a last user
//!   message without a reply is a turn too.
//! - `{"id": ..., "system": "...", "turns": [{"user": "...", "output_tokens": N,
//!   "think_time_ms": T}, ...]}`: explicit turns.
//!
//! A turn's output length is the spec's fixed `output_len`, else the turn's (or, for
//! `messages`, the line's) `output_tokens`/`max_tokens`, else the reference reply's token count,
//! else none (the server decides). `id` (string or number) defaults to `line-N`.

use std::path::Path;

use rayon::prelude::*;
use serde_json::{Map, Value};

use super::sharegpt::{dialogue, role};
use super::{finish_turns, Limits, ParsedTurn, Session, SystemPrompt, Turn};
use crate::error::{read_text, serde_message, DatasetError};
use crate::jsonl::{output_tokens, At};
use crate::tokenizer::Tokenizer;

/// A turn before tokenization: user text, reference reply, explicit output length, explicit
/// think time in ns.
type RawTurn = (String, Option<String>, Option<u64>, Option<u64>);

/// One line before tokenization.
struct Raw {
    id: String,
    system: Option<String>,
    turns: Vec<RawTurn>,
}

fn string_field(
    at: &At<'_>,
    obj: &Map<String, Value>,
    key: &str,
    field: &str,
) -> Result<Option<String>, DatasetError> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(at.field(field, "a string", other)),
    }
}

fn parse_line(at: &At<'_>, line: &str) -> Result<Raw, DatasetError> {
    let value: Value = serde_json::from_str(line).map_err(|e| DatasetError::Json {
        path: at.path.into(),
        line: at.line,
        column: e.column(),
        message: serde_message(&e),
    })?;
    let Value::Object(obj) = value else {
        return Err(at.shape(format!(
            "expected a JSON object like {{\"messages\": [...]}} or {{\"turns\": [...]}} (got {})",
            crate::jsonl::kind(&value)
        )));
    };
    let id = match obj.get("id") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        None | Some(Value::Null) => format!("line-{}", at.line),
        Some(other) => return Err(at.field("id", "a string or a number", other)),
    };
    match (obj.get("messages"), obj.get("turns")) {
        (Some(_), Some(_)) => Err(at.shape("has both \"messages\" and \"turns\"; give exactly one")),
        (Some(messages), None) => {
            let Value::Array(items) = messages else {
                return Err(at.field("messages", "an array of {\"role\", \"content\"} objects", messages));
            };
            let mut parsed = Vec::with_capacity(items.len());
            for (i, item) in items.iter().enumerate() {
                let Value::Object(m) = item else {
                    return Err(at.field(format!("messages[{i}]"), "an object", item));
                };
                let get = |key: &str| {
                    string_field(at, m, key, &format!("messages[{i}].{key}"))?.ok_or_else(|| {
                        at.shape(format!("missing field \"messages[{i}].{key}\""))
                    })
                };
                parsed.push((role(&get("role")?), get("content")?));
            }
            let line_output = output_tokens(at, &obj)?;
            let d = dialogue(id.clone(), parsed.iter().map(|(r, t)| (*r, t.as_str())), true);
            let system = d.system.map(str::to_string);
            let turns = d
                .pairs
                .iter()
                .map(|&(u, r)| (u.to_string(), r.map(str::to_string), line_output, None))
                .collect();
            Ok(Raw { id, system, turns })
        }
        (None, Some(turns)) => {
            let Value::Array(items) = turns else {
                return Err(at.field("turns", "an array of {\"user\": \"...\"} objects", turns));
            };
            let system = string_field(at, &obj, "system", "system")?;
            let mut parsed = Vec::with_capacity(items.len());
            for (i, item) in items.iter().enumerate() {
                let Value::Object(t) = item else {
                    return Err(at.field(format!("turns[{i}]"), "an object", item));
                };
                let user = string_field(at, t, "user", &format!("turns[{i}].user"))?
                    .ok_or_else(|| at.shape(format!("missing field \"turns[{i}].user\"")))?;
                let turn_at = At { path: at.path, line: at.line };
                let output = output_tokens(&turn_at, t).map_err(|e| prefix_field(e, &format!("turns[{i}].")))?;
                let think = match t.get("think_time_ms") {
                    None | Some(Value::Null) => None,
                    Some(v) => match v.as_f64() {
                        Some(ms) if ms >= 0.0 && ms.is_finite() => Some((ms * 1e6).round() as u64),
                        _ => {
                            return Err(at.field(
                                format!("turns[{i}].think_time_ms"),
                                "a non-negative number of milliseconds",
                                v,
                            ))
                        }
                    },
                };
                parsed.push((user, None, output, think));
            }
            Ok(Raw { id, system, turns: parsed })
        }
        (None, None) => Err(at.shape(
            "missing field \"messages\" or \"turns\"; expected {\"messages\": [{\"role\": \"user\", \
             \"content\": \"...\"}, ...]} or {\"turns\": [{\"user\": \"...\"}, ...]}",
        )),
    }
}

/// Put `prefix` before the field name of a field error (`max_tokens` → `turns[2].max_tokens`).
fn prefix_field(err: DatasetError, prefix: &str) -> DatasetError {
    match err {
        DatasetError::Field { path, line, column, field, problem } => {
            DatasetError::Field { path, line, column, field: format!("{prefix}{field}"), problem }
        }
        other => other,
    }
}

pub(crate) fn load(
    path: &Path,
    limits: Limits,
    num: usize,
    tok: &Tokenizer,
) -> Result<Vec<Session>, DatasetError> {
    let text = read_text(path)?;
    let mut raws = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let raw = parse_line(&At { path, line: i + 1 }, line)?;
        if !raw.turns.is_empty() {
            raws.push(raw);
        }
        if raws.len() == num {
            break; // later lines are never used: do not parse or tokenize them
        }
    }
    if raws.is_empty() {
        return Err(DatasetError::Empty {
            path: path.into(),
            expected: "one conversation per line with at least one user message, like \
                       {\"messages\": [{\"role\": \"user\", \"content\": \"...\"}]}",
        });
    }
    Ok(raws
        .par_iter()
        .map(|raw| {
            let take = limits.max_turns.unwrap_or(usize::MAX).min(raw.turns.len());
            let parsed = raw.turns[..take]
                .iter()
                .map(|(user, reply, output, think)| {
                    let output_tokens = limits
                        .output_len
                        .or(*output)
                        .or_else(|| reply.as_deref().map(|r| (tok.count(r) as u64).max(1)));
                    ParsedTurn {
                        turn: Turn {
                            user: user.clone(),
                            user_tokens: tok.count(user) as u64,
                            output_tokens,
                            think_time_ns: 0,
                        },
                        think_ns: *think,
                    }
                })
                .collect();
            let system = raw
                .system
                .as_deref()
                .map(|s| SystemPrompt { text: s.into(), tokens: tok.count(s) as u64 });
            Session { id: raw.id.clone(), system, turns: finish_turns(parsed) }
        })
        .collect())
}
