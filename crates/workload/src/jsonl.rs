//! The `jsonl` dataset: one request per line, `{"prompt": "..."}` or
//! `{"messages": [{"role": "...", "content": "..."}]}`, with an optional integer
//! `"output_tokens"` or `"max_tokens"`. Blank lines are skipped; lines are used in file order
//! and cycled when more prompts are asked for than the file holds.
//!
//! Images: a `prompt` line may carry `"images": ["a.png", "https://..."]` (becoming one user
//! message of content parts: the text, then the images), and a message's `content` may be
//! OpenAI content parts (`{"type": "text", "text"}`, `{"type": "image_url", "image_url":
//! {"url"}}`). URLs (`http://`, `https://`, `data:`) are sent as they are; anything else is a
//! file path, relative to the JSONL file's folder, read and sent as a `data:` URL.

use std::collections::HashMap;
use std::path::Path;

use rayon::prelude::*;
use serde_json::{Map, Value};

use crate::error::{for_each_line, serde_message, DatasetError};
use crate::image::{image_file_data_url, is_url};
use crate::prompt::{ChatMessage, ContentPart, MessageContent, Prompt, PromptBody};
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

/// One parsed line: its body and requested output length, and its line number.
type Request = (PromptBody, Option<u64>, usize);

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
        (Some(Value::String(p)), None) => match obj.get("images") {
            None | Some(Value::Null) => PromptBody::Text(p.clone()),
            Some(images) => {
                let mut parts = vec![ContentPart::text(p.as_str())];
                parts.extend(parse_images(at, images)?.into_iter().map(ContentPart::image));
                let content = MessageContent::Parts(parts);
                PromptBody::Chat(vec![ChatMessage { role: "user".into(), content }])
            }
        },
        (Some(other), None) => return Err(at.field("prompt", "a string", other)),
        (None, Some(_)) if obj.get("images").is_some_and(|v| !v.is_null()) => {
            return Err(at.shape(
                "\"images\" goes with \"prompt\"; with \"messages\", put images in a message's \
                 content parts ({\"type\": \"image_url\", \"image_url\": {\"url\": ...}})",
            ))
        }
        (None, Some(m)) => PromptBody::Chat(parse_messages(at, m)?),
        (None, None) => {
            return Err(at.shape(
                "missing field \"prompt\" or \"messages\"; expected {\"prompt\": \"...\"} or \
                 {\"messages\": [{\"role\": \"user\", \"content\": \"...\"}]}",
            ))
        }
    };
    Ok((body, output_tokens(at, &obj)?, at.line))
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
            let role = match m.get("role") {
                Some(Value::String(s)) => s.clone(),
                Some(other) => {
                    return Err(at.field(format!("messages[{i}].role"), "a string", other))
                }
                None => return Err(at.shape(format!("missing field \"messages[{i}].role\""))),
            };
            let content = match m.get("content") {
                Some(Value::String(s)) => MessageContent::Text(s.clone()),
                Some(Value::Array(parts)) => MessageContent::Parts(parse_parts(
                    at,
                    &format!("messages[{i}].content"),
                    parts,
                )?),
                Some(other) => {
                    return Err(at.field(
                        format!("messages[{i}].content"),
                        "a string or an array of content parts",
                        other,
                    ))
                }
                None => return Err(at.shape(format!("missing field \"messages[{i}].content\""))),
            };
            Ok(ChatMessage { role, content })
        })
        .collect()
}

/// `"images"`: one reference or an array of them.
fn parse_images(at: &At<'_>, value: &Value) -> Result<Vec<String>, DatasetError> {
    match value {
        Value::String(s) => Ok(vec![s.clone()]),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .map(|(i, v)| match v {
                Value::String(s) => Ok(s.clone()),
                other => Err(at.field(format!("images[{i}]"), "a path or URL string", other)),
            })
            .collect(),
        other => Err(at.field("images", "a path or URL string, or an array of them", other)),
    }
}

/// OpenAI content parts: `{"type": "text", "text"}` and `{"type": "image_url", "image_url":
/// {"url"}}` (a plain string `image_url` is accepted too).
fn parse_parts(
    at: &At<'_>,
    field: &str,
    parts: &[Value],
) -> Result<Vec<ContentPart>, DatasetError> {
    parts
        .iter()
        .enumerate()
        .map(|(j, part)| {
            let here = format!("{field}[{j}]");
            let Value::Object(p) = part else {
                return Err(at.field(
                    here,
                    "an object like {\"type\": \"text\", \"text\": \"...\"}",
                    part,
                ));
            };
            match p.get("type").and_then(Value::as_str) {
                Some("text") => match p.get("text") {
                    Some(Value::String(t)) => Ok(ContentPart::text(t.as_str())),
                    Some(other) => Err(at.field(format!("{here}.text"), "a string", other)),
                    None => Err(at.shape(format!("missing field \"{here}.text\""))),
                },
                Some("image_url") => match p.get("image_url") {
                    Some(Value::String(u)) => Ok(ContentPart::image(u.as_str())),
                    Some(Value::Object(o)) => match o.get("url") {
                        Some(Value::String(u)) => Ok(ContentPart::image(u.as_str())),
                        Some(other) => {
                            Err(at.field(format!("{here}.image_url.url"), "a string", other))
                        }
                        None => Err(at.shape(format!("missing field \"{here}.image_url.url\""))),
                    },
                    Some(other) => Err(at.field(
                        format!("{here}.image_url"),
                        "an object {\"url\": ...}",
                        other,
                    )),
                    None => Err(at.shape(format!("missing field \"{here}.image_url\""))),
                },
                _ => {
                    Err(at
                        .shape(format!("field \"{here}.type\" must be \"text\" or \"image_url\"")))
                }
            }
        })
        .collect()
}

/// Replace every image reference that is a file path by the file as a `data:` URL (paths are
/// relative to `base`; each file is read once).
fn resolve_images(path: &Path, requests: &mut [Request], base: &Path) -> Result<(), DatasetError> {
    let mut cache: HashMap<String, String> = HashMap::new();
    for (body, _, line) in requests.iter_mut() {
        let PromptBody::Chat(messages) = body else { continue };
        for m in messages.iter_mut() {
            let MessageContent::Parts(parts) = &mut m.content else { continue };
            for part in parts.iter_mut() {
                let ContentPart::ImageUrl { image_url } = part else { continue };
                if is_url(&image_url.url) {
                    continue;
                }
                if let Some(url) = cache.get(&image_url.url) {
                    image_url.url = url.clone();
                    continue;
                }
                let url = image_file_data_url(&base.join(&image_url.url)).map_err(|problem| {
                    DatasetError::Shape { path: path.into(), line: *line, problem }
                })?;
                cache.insert(std::mem::take(&mut image_url.url), url.clone());
                image_url.url = url;
            }
        }
    }
    Ok(())
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

/// Parse the first `num` non-blank lines of the file, in order, reading no further: a file
/// of ten million lines costs what its first `num` do.
pub(crate) fn parse_first(path: &Path, num: usize) -> Result<Vec<Request>, DatasetError> {
    let mut requests = Vec::new();
    if num == 0 {
        return Ok(requests);
    }
    for_each_line(path, |line, text| {
        requests.push(parse_line(&At { path, line }, text)?);
        Ok(requests.len() < num)
    })?;
    if requests.is_empty() {
        return Err(DatasetError::Empty {
            path: path.into(),
            expected: "one JSON object per line, like {\"prompt\": \"...\"}",
        });
    }
    Ok(requests)
}

/// Load `num` prompts from a JSON Lines file (lines past `num` are never read).
pub(crate) fn load(path: &Path, num: usize, tok: &Tokenizer) -> Result<Vec<Prompt>, DatasetError> {
    let mut requests = parse_first(path, num)?;
    resolve_images(path, &mut requests, path.parent().unwrap_or(Path::new(".")))?;
    let prompts: Vec<Prompt> = requests
        .into_par_iter()
        .map(|(body, output_tokens, _)| {
            let mut p = Prompt { body, prompt_tokens: 0, output_tokens };
            p.prompt_tokens = tok.count(&p.text()) as u64;
            p
        })
        .collect();
    Ok(crate::cycle(prompts, num))
}
