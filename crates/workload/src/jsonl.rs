//! The `jsonl` dataset: one request per line, `{"prompt": "..."}` or
//! `{"messages": [{"role": "...", "content": "..."}]}`, with an optional integer
//! `"output_tokens"` or `"max_tokens"`. Blank lines are skipped; lines are used in file order
//! and cycled when more prompts are asked for than the file holds.

use std::path::Path;

use rayon::prelude::*;
use serde_json::{Map, Value};

use crate::error::{read_text, serde_message, DatasetError};
use crate::prompt::{ChatMessage, Prompt, PromptBody};
use crate::tokenizer::Tokenizer;

/// The JSON type name of a value, for "got ..." in messages.
pub(crate) fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// One parsed line: its body and requested output length.
type Request = (PromptBody, Option<u64>);

/// Builds errors that point at one line.
pub(crate) struct At<'p> {
    pub path: &'p Path,
    pub line: usize,
}

impl At<'_> {
    pub fn field(&self, field: impl Into<String>, expected: &str, got: &Value) -> DatasetError {
        DatasetError::Field {
            path: self.path.into(),
            line: self.line,
            column: None,
            field: field.into(),
            problem: format!("must be {expected} (got {})", kind(got)),
        }
    }

    pub fn shape(&self, problem: impl Into<String>) -> DatasetError {
        DatasetError::Shape { path: self.path.into(), line: self.line, problem: problem.into() }
    }
}

/// Parse one non-blank line.
fn parse_line(at: &At<'_>, line: &str) -> Result<Request, DatasetError> {
    let value: Value = serde_json::from_str(line).map_err(|e| DatasetError::Json {
        path: at.path.into(),
        line: at.line,
        column: e.column(),
        message: serde_message(&e),
    })?;
    let Value::Object(obj) = value else {
        return Err(at.shape(format!(
            "expected a JSON object like {{\"prompt\": \"...\"}} (got {})",
            kind(&value)
        )));
    };
    let body = match (obj.get("prompt"), obj.get("messages")) {
        (Some(_), Some(_)) => {
            return Err(at.shape("has both \"prompt\" and \"messages\"; give exactly one"))
        }
        (Some(Value::String(p)), None) => PromptBody::Text(p.clone()),
        (Some(other), None) => return Err(at.field("prompt", "a string", other)),
        (None, Some(m)) => PromptBody::Chat(parse_messages(at, m)?),
        (None, None) => {
            return Err(at.shape(
                "missing field \"prompt\" or \"messages\"; expected {\"prompt\": \"...\"} or \
                 {\"messages\": [{\"role\": \"user\", \"content\": \"...\"}]}",
            ))
        }
    };
    Ok((body, output_tokens(at, &obj)?))
}

fn parse_messages(at: &At<'_>, value: &Value) -> Result<Vec<ChatMessage>, DatasetError> {
    let Value::Array(items) = value else {
        return Err(at.field("messages", "an array of {\"role\", \"content\"} objects", value));
    };
    if items.is_empty() {
        return Err(at.shape("field \"messages\" must not be empty"));
    }
    items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let Value::Object(m) = item else {
                return Err(at.field(format!("messages[{i}]"), "an object", item));
            };
            let text = |key: &str| match m.get(key) {
                Some(Value::String(s)) => Ok(s.clone()),
                Some(other) => Err(at.field(format!("messages[{i}].{key}"), "a string", other)),
                None => Err(at.shape(format!("missing field \"messages[{i}].{key}\""))),
            };
            Ok(ChatMessage::new(text("role")?, text("content")?))
        })
        .collect()
}

/// `output_tokens`, else `max_tokens`, as a non-negative integer.
pub(crate) fn output_tokens(
    at: &At<'_>,
    obj: &Map<String, Value>,
) -> Result<Option<u64>, DatasetError> {
    for key in ["output_tokens", "max_tokens"] {
        match obj.get(key) {
            None | Some(Value::Null) => continue,
            Some(v) => {
                return v
                    .as_u64()
                    .map(Some)
                    .ok_or_else(|| at.field(key, "a non-negative integer", v));
            }
        }
    }
    Ok(None)
}

/// Parse every non-blank line of the file, in order.
pub(crate) fn parse(path: &Path, text: &str) -> Result<Vec<Request>, DatasetError> {
    let requests = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| parse_line(&At { path, line: i + 1 }, l))
        .collect::<Result<Vec<_>, _>>()?;
    if requests.is_empty() {
        return Err(DatasetError::Empty {
            path: path.into(),
            expected: "one JSON object per line, like {\"prompt\": \"...\"}",
        });
    }
    Ok(requests)
}

/// Load `num` prompts from a JSON Lines file.
pub(crate) fn load(path: &Path, num: usize, tok: &Tokenizer) -> Result<Vec<Prompt>, DatasetError> {
    let text = read_text(path)?;
    let mut requests = parse(path, &text)?;
    requests.truncate(num); // lines past num are never sent: do not tokenize them
    let prompts: Vec<Prompt> = requests
        .into_par_iter()
        .map(|(body, output_tokens)| {
            let mut p = Prompt { body, prompt_tokens: 0, output_tokens };
            p.prompt_tokens = tok.count(&p.text()) as u64;
            p
        })
        .collect();
    Ok(crate::cycle(prompts, num))
}
