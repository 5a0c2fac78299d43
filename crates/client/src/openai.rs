//! The OpenAI-compatible wire protocol: request bodies and streamed events.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::{json, Map, Value};
use servelab_records::{ChunkKind, Usage};
pub use servelab_workload::Api;
use servelab_workload::{ChatMessage, PromptBody};

/// What goes into every request body besides the prompt.
#[derive(Debug, Clone)]
pub struct BodyOptions {
    /// Which endpoint the body is for: `prompt` and `max_tokens` (completions) or `messages`
    /// and `max_completion_tokens` (chat).
    pub api: Api,
    /// The `model` field, as the server lists it.
    pub model: String,
    /// Send `ignore_eos` (and `min_tokens` equal to `max_tokens`), so every request generates
    /// exactly its requested output length.
    pub ignore_eos: bool,
    /// Ask for usage in every chunk (vLLM's `continuous_usage_stats`), giving exact per-chunk
    /// token counts without tokenizing anything.
    pub continuous_usage: bool,
    /// Extra top-level fields (`--extra-body`), merged last so the user can override anything.
    pub extra: Map<String, Value>,
}

/// Serialize one request body. Done before the run starts, never on the send path: for every
/// prompt, or for a trace on the loop's look-ahead thread a bounded number of arrivals ahead.
pub fn request_body(opts: &BodyOptions, prompt: &PromptBody, max_tokens: Option<u64>) -> Vec<u8> {
    let mut body = Map::new();
    body.insert("model".into(), Value::String(opts.model.clone()));
    match opts.api {
        Api::Completions => {
            body.insert("prompt".into(), Value::String(prompt_text(prompt)));
            if let Some(n) = max_tokens {
                body.insert("max_tokens".into(), json!(n));
            }
        }
        Api::Chat => {
            body.insert("messages".into(), messages(prompt));
            if let Some(n) = max_tokens {
                body.insert("max_completion_tokens".into(), json!(n));
            }
        }
    }
    body.insert("stream".into(), Value::Bool(true));
    let mut stream_options = json!({"include_usage": true});
    if opts.continuous_usage {
        stream_options["continuous_usage_stats"] = Value::Bool(true);
    }
    body.insert("stream_options".into(), stream_options);
    if opts.ignore_eos {
        body.insert("ignore_eos".into(), Value::Bool(true));
        if let Some(n) = max_tokens {
            // With ignore_eos a server may still stop early on a stop token; min_tokens pins it.
            body.insert("min_tokens".into(), json!(n));
        }
    }
    for (k, v) in &opts.extra {
        body.insert(k.clone(), v.clone());
    }
    serde_json::to_vec(&Value::Object(body)).unwrap_or_default()
}

/// The completions API takes text only: chat message texts joined with `"\n"` (images, which
/// it cannot carry, are left out).
fn prompt_text(prompt: &PromptBody) -> String {
    match prompt {
        PromptBody::Text(t) => t.clone(),
        PromptBody::Chat(msgs) => msgs.iter().map(|m| m.text()).collect::<Vec<_>>().join("\n"),
    }
}

/// Chat messages as OpenAI takes them: a string `content`, or content parts
/// (`[{"type": "text", ...}, {"type": "image_url", "image_url": {"url": ...}}]`) for a message
/// that carries images.
fn messages(prompt: &PromptBody) -> Value {
    match prompt {
        PromptBody::Text(t) => json!([ChatMessage::new("user", t.as_str())]),
        PromptBody::Chat(msgs) => json!(msgs),
    }
}

/// One parsed stream event.
#[derive(Debug, PartialEq, Default)]
pub struct Event<'a> {
    /// The text the event carries (the first choice's); empty for usage-only events.
    pub text: Cow<'a, str>,
    /// Whether `text` is answer content or reasoning; `None`: the event carried no text field.
    pub kind: Option<ChunkKind>,
    /// The server's token counts, when the event has a `usage` object.
    pub usage: Option<Usage>,
    /// The first choice has a non-null `finish_reason`.
    pub finished: bool,
}

/// Why an event could not be used.
#[derive(Debug, PartialEq)]
pub enum EventError {
    /// The server reported an error inside the stream.
    Server(String),
    /// Not JSON, or not the shape of a completion chunk.
    Malformed(String),
}

#[derive(Deserialize)]
struct RawEvent<'a> {
    #[serde(borrow, default)]
    choices: Vec<RawChoice<'a>>,
    #[serde(default)]
    usage: Option<RawUsage>,
    #[serde(default)]
    error: Option<Value>,
    #[serde(default, borrow)]
    object: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    message: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct RawChoice<'a> {
    #[serde(borrow, default)]
    text: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    delta: Option<RawDelta<'a>>,
    #[serde(default)]
    finish_reason: Option<Value>,
}

#[derive(Deserialize)]
struct RawDelta<'a> {
    #[serde(borrow, default)]
    content: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    reasoning_content: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    reasoning: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct RawUsage {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
    #[serde(default)]
    completion_tokens_details: Option<RawDetails>,
}

#[derive(Deserialize)]
struct RawDetails {
    #[serde(default)]
    reasoning_tokens: Option<u64>,
}

/// The largest token count a usage field may hold: far beyond any context length, and small
/// enough that sums over millions of requests cannot overflow. A larger (or negative, or
/// fractional) count is a malformed event, not a measurement.
pub const MAX_TOKENS: u64 = u32::MAX as u64;

/// Parse one event's data (already known not to be `[DONE]`).
pub fn parse_event(data: &str) -> Result<Event<'_>, EventError> {
    let raw: RawEvent<'_> = serde_json::from_str(data)
        .map_err(|e| EventError::Malformed(format!("{e}: {}", clip(data))))?;
    if let Some(err) = raw.error {
        let message = err
            .get("message")
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| err.to_string());
        return Err(EventError::Server(message));
    }
    if raw.object.as_deref() == Some("error") {
        return Err(EventError::Server(raw.message.map(Cow::into_owned).unwrap_or_default()));
    }
    let usage = match raw.usage {
        Some(u) => {
            let reasoning = u.completion_tokens_details.and_then(|d| d.reasoning_tokens);
            for (field, n) in [
                ("prompt_tokens", Some(u.prompt_tokens)),
                ("completion_tokens", Some(u.completion_tokens)),
                ("completion_tokens_details.reasoning_tokens", reasoning),
            ] {
                if let Some(n) = n.filter(|n| *n > MAX_TOKENS) {
                    return Err(EventError::Malformed(format!(
                        "usage.{field} = {n} is not a plausible token count (at most {MAX_TOKENS})"
                    )));
                }
            }
            Some(Usage {
                prompt_tokens: u.prompt_tokens,
                completion_tokens: u.completion_tokens,
                reasoning_tokens: reasoning,
            })
        }
        None => None,
    };
    let mut ev = Event { usage, ..Event::default() };
    if let Some(choice) = raw.choices.into_iter().next() {
        ev.finished = choice.finish_reason.is_some_and(|f| !f.is_null());
        if let Some(t) = choice.text {
            ev.text = t;
            ev.kind = Some(ChunkKind::Content);
        } else if let Some(d) = choice.delta {
            if let Some(r) = d.reasoning_content.or(d.reasoning).filter(|r| !r.is_empty()) {
                ev.text = r;
                ev.kind = Some(ChunkKind::Reasoning);
            } else if let Some(c) = d.content {
                ev.text = c;
                ev.kind = Some(ChunkKind::Content);
            }
        }
    }
    Ok(ev)
}

fn clip(s: &str) -> &str {
    let mut end = s.len().min(120);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(api: Api) -> BodyOptions {
        BodyOptions {
            api,
            model: "m".into(),
            ignore_eos: true,
            continuous_usage: true,
            extra: serde_json::from_str(r#"{"temperature":0,"model":"x"}"#).unwrap(),
        }
    }

    #[test]
    fn completion_body_has_stream_usage_and_extra_fields_last() {
        let b = request_body(&opts(Api::Completions), &PromptBody::Text("hi".into()), Some(5));
        let v: Value = serde_json::from_slice(&b).unwrap();
        assert_eq!(
            v,
            json!({"model":"x","prompt":"hi","max_tokens":5,"stream":true,"ignore_eos":true,
                "min_tokens":5,"temperature":0,
                "stream_options":{"include_usage":true,"continuous_usage_stats":true}})
        );
    }

    #[test]
    fn chat_body_wraps_text_as_user_message() {
        let mut o = opts(Api::Chat);
        o.extra.clear();
        o.ignore_eos = false;
        o.continuous_usage = false;
        let b = request_body(&o, &PromptBody::Text("hi".into()), Some(3));
        let v: Value = serde_json::from_slice(&b).unwrap();
        assert_eq!(
            v,
            json!({"model":"m","messages":[{"role":"user","content":"hi"}],
                "max_completion_tokens":3,"stream":true,"stream_options":{"include_usage":true}})
        );
    }

    #[test]
    fn chat_body_carries_image_parts_and_completions_keep_text_only() {
        use servelab_workload::{ContentPart, MessageContent};
        let mut o = opts(Api::Chat);
        o.extra.clear();
        o.ignore_eos = false;
        o.continuous_usage = false;
        let chat = PromptBody::Chat(vec![
            ChatMessage::new("system", "be brief"),
            ChatMessage {
                role: "user".into(),
                content: MessageContent::Parts(vec![
                    ContentPart::text("what is this?"),
                    ContentPart::image("data:image/png;base64,iVBORw0KGgo="),
                ]),
            },
        ]);
        let b = request_body(&o, &chat, None);
        assert_eq!(
            String::from_utf8(b).unwrap(),
            r#"{"messages":[{"content":"be brief","role":"system"},{"content":[{"text":"what is this?","type":"text"},{"image_url":{"url":"data:image/png;base64,iVBORw0KGgo="},"type":"image_url"}],"role":"user"}],"model":"m","stream":true,"stream_options":{"include_usage":true}}"#
        );
        o.api = Api::Completions;
        let v: Value = serde_json::from_slice(&request_body(&o, &chat, None)).unwrap();
        assert_eq!(v["prompt"], "be brief\nwhat is this?");
    }

    #[test]
    fn parses_completion_chat_reasoning_and_usage_events() {
        let e =
            parse_event(r#"{"choices":[{"index":0,"text":" a","finish_reason":null}]}"#).unwrap();
        assert_eq!((e.text.as_ref(), e.kind, e.finished), (" a", Some(ChunkKind::Content), false));
        let e =
            parse_event(r#"{"choices":[{"delta":{"role":"assistant","content":""}}]}"#).unwrap();
        assert_eq!((e.text.as_ref(), e.kind), ("", Some(ChunkKind::Content)));
        let e = parse_event(r#"{"choices":[{"delta":{"reasoning_content":"hm"}}]}"#).unwrap();
        assert_eq!((e.text.as_ref(), e.kind), ("hm", Some(ChunkKind::Reasoning)));
        let e = parse_event(
            r#"{"choices":[{"delta":{"content":"\u00e9"},"finish_reason":"length"}],
                "usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}"#,
        )
        .unwrap();
        assert_eq!(e.text, "\u{e9}");
        assert!(e.finished);
        assert_eq!(
            e.usage,
            Some(Usage { prompt_tokens: 3, completion_tokens: 2, reasoning_tokens: None })
        );
        let e = parse_event(r#"{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":9}}"#)
            .unwrap();
        assert_eq!((e.kind, e.usage.map(|u| u.completion_tokens)), (None, Some(9)));
    }

    #[test]
    fn errors_in_stream_and_malformed_events_are_distinguished() {
        let e =
            parse_event(r#"{"error":{"message":"boom","type":"InternalServerError","code":500}}"#);
        assert_eq!(e, Err(EventError::Server("boom".into())));
        let e = parse_event(r#"{"object":"error","message":"old style","code":400}"#);
        assert_eq!(e, Err(EventError::Server("old style".into())));
        assert!(matches!(parse_event("{not json"), Err(EventError::Malformed(_))));
        assert_eq!(
            parse_event(
                r#"{"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":4294967296}}"#
            ),
            Err(EventError::Malformed(
                "usage.completion_tokens = 4294967296 is not a plausible token count \
                 (at most 4294967295)"
                    .into()
            ))
        );
        for bad in [r#"{"usage":{"completion_tokens":-1}}"#, r#"{"usage":{"prompt_tokens":1.5}}"#] {
            assert!(matches!(parse_event(bad), Err(EventError::Malformed(_))), "{bad}");
        }
        let e = parse_event(r#"{"usage":{"prompt_tokens":4294967295,"completion_tokens":0}}"#);
        assert_eq!(e.unwrap().usage.map(|u| u.prompt_tokens), Some(4_294_967_295));
        assert!(matches!(parse_event(r#"{"choices":5}"#), Err(EventError::Malformed(_))));
    }
}
