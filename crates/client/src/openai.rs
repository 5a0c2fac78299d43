//! The OpenAI-compatible wire protocol: request bodies and streamed events.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::{json, Map, Value};
use servelab_records::{ChunkKind, Usage};
pub use servelab_workload::{Api, MaxTokensField};
use servelab_workload::{ChatMessage, PromptBody};

/// What goes into every request body besides the prompt.
#[derive(Debug, Clone)]
pub struct BodyOptions {
    /// Which endpoint the body is for: `prompt` (completions) or `messages` (chat).
    pub api: Api,
    /// The `model` field, as the server lists it.
    pub model: String,
    /// Which field(s) carry the requested output length.
    pub max_tokens_field: MaxTokensField,
    /// Send `ignore_eos`, so a request does not end at the model's end-of-sequence token.
    pub ignore_eos: bool,
    /// Send `min_tokens` equal to the requested length (with `ignore_eos`, a server may still
    /// stop early on a stop token; `min_tokens` pins it).
    pub min_tokens: bool,
    /// Send `stream_options: {"include_usage": true}` (OpenAI's way to get the usage object
    /// in a stream). Off for a server that refuses the field.
    pub stream_usage: bool,
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
        Api::Completions => body.insert("prompt".into(), Value::String(prompt_text(prompt))),
        Api::Chat => body.insert("messages".into(), messages(prompt)),
    };
    if let Some(n) = max_tokens {
        for field in opts.max_tokens_field.names(opts.api) {
            body.insert((*field).into(), json!(n));
        }
    }
    body.insert("stream".into(), Value::Bool(true));
    if opts.stream_usage {
        let mut stream_options = json!({"include_usage": true});
        if opts.continuous_usage {
            stream_options["continuous_usage_stats"] = Value::Bool(true);
        }
        body.insert("stream_options".into(), stream_options);
    }
    if opts.ignore_eos {
        body.insert("ignore_eos".into(), Value::Bool(true));
    }
    if let (true, Some(n)) = (opts.min_tokens, max_tokens) {
        body.insert("min_tokens".into(), json!(n));
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
    /// Choice 0's `finish_reason`, when non-null.
    pub finish_reason: Option<String>,
    /// The event carried choices other than index 0 (`n` > 1), which are not measured.
    pub other_choices: bool,
    /// Choice 0's output came as tool-call deltas (`tool_calls`) or a `refusal`, not as
    /// content: its name, when so.
    pub other_output: Option<&'static str>,
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
    #[serde(borrow, default, deserialize_with = "null_as_empty")]
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

/// `"choices": null` (sent by some proxies on usage-only chunks) reads as no choices.
fn null_as_empty<'de, D, T>(d: D) -> Result<Vec<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Ok(Option::<Vec<T>>::deserialize(d)?.unwrap_or_default())
}

#[derive(Deserialize)]
struct RawChoice<'a> {
    /// Which choice this is; servers that send one choice may leave it out.
    #[serde(default)]
    index: Option<u64>,
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
    #[serde(borrow, default)]
    refusal: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "null_as_empty")]
    tool_calls: Vec<RawToolCall<'a>>,
}

#[derive(Deserialize)]
struct RawToolCall<'a> {
    #[serde(borrow, default)]
    function: Option<RawFunction<'a>>,
}

#[derive(Deserialize)]
struct RawFunction<'a> {
    #[serde(borrow, default)]
    name: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    arguments: Option<Cow<'a, str>>,
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
    // Choice 0 by its index, not its position: with n > 1 choices interleave, and a server
    // may list them in any order.
    let mut choice0 = None;
    for (pos, c) in raw.choices.into_iter().enumerate() {
        if c.index.unwrap_or(pos as u64) == 0 && choice0.is_none() {
            choice0 = Some(c);
        } else {
            ev.other_choices = true;
        }
    }
    if let Some(choice) = choice0 {
        ev.finish_reason = match choice.finish_reason {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s),
            Some(other) => Some(other.to_string()),
        };
        if let Some(t) = choice.text {
            ev.text = t;
            ev.kind = Some(ChunkKind::Content);
        } else if let Some(d) = choice.delta {
            let has_content = d.content.is_some();
            if let Some(r) = d.reasoning_content.or(d.reasoning).filter(|r| !r.is_empty()) {
                ev.text = r;
                ev.kind = Some(ChunkKind::Reasoning);
            } else if let Some(c) = d.content.filter(|c| !c.is_empty()) {
                ev.text = c;
                ev.kind = Some(ChunkKind::Content);
            } else if let Some(r) = d.refusal.filter(|r| !r.is_empty()) {
                ev.text = r;
                ev.kind = Some(ChunkKind::Content);
                ev.other_output = Some("refusal");
            } else if !d.tool_calls.is_empty() {
                // A tool call's name and argument text are what the model generated.
                let mut text = String::new();
                for f in d.tool_calls.into_iter().filter_map(|t| t.function) {
                    text.extend(f.name.into_iter().chain(f.arguments));
                }
                ev.text = Cow::Owned(text);
                ev.kind = Some(ChunkKind::Content);
                ev.other_output = Some("tool_calls");
            } else if has_content {
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
            max_tokens_field: MaxTokensField::Auto,
            ignore_eos: true,
            min_tokens: true,
            stream_usage: true,
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
        o.min_tokens = false;
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
        o.min_tokens = false;
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
        assert_eq!(
            (e.text.as_ref(), e.kind, e.finish_reason),
            (" a", Some(ChunkKind::Content), None)
        );
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
        assert_eq!(e.finish_reason.as_deref(), Some("length"));
        assert_eq!(
            e.usage,
            Some(Usage { prompt_tokens: 3, completion_tokens: 2, reasoning_tokens: None })
        );
        let e = parse_event(r#"{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":9}}"#)
            .unwrap();
        assert_eq!((e.kind, e.usage.map(|u| u.completion_tokens)), (None, Some(9)));
    }

    #[test]
    fn choice_zero_is_found_by_its_index_and_others_are_flagged() {
        let e = parse_event(
            r#"{"choices":[{"index":1,"text":"B"},{"index":0,"text":"A","finish_reason":"stop"}]}"#,
        )
        .unwrap();
        assert_eq!(
            (e.text.as_ref(), e.finish_reason.as_deref(), e.other_choices),
            ("A", Some("stop"), true)
        );
        let e = parse_event(r#"{"choices":[{"index":1,"delta":{"content":"B"}}]}"#).unwrap();
        assert_eq!((e.kind, e.other_choices), (None, true));
        // No index: the first listed is choice 0.
        let e = parse_event(r#"{"choices":[{"text":"A"}]}"#).unwrap();
        assert_eq!((e.text.as_ref(), e.other_choices), ("A", false));
        let e =
            parse_event(r#"{"choices":null,"usage":{"prompt_tokens":1,"completion_tokens":2}}"#)
                .unwrap();
        assert_eq!((e.kind, e.usage.map(|u| u.completion_tokens)), (None, Some(2)));
    }

    #[test]
    fn tool_calls_and_refusals_are_output() {
        let e = parse_event(
            r#"{"choices":[{"index":0,"delta":{"content":null,"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"get","arguments":"{\"a\""}}]}}]}"#,
        )
        .unwrap();
        assert_eq!(
            (e.text.as_ref(), e.kind, e.other_output),
            ("get{\"a\"", Some(ChunkKind::Content), Some("tool_calls"))
        );
        let e = parse_event(r#"{"choices":[{"delta":{"refusal":"No."}}]}"#).unwrap();
        assert_eq!((e.text.as_ref(), e.other_output), ("No.", Some("refusal")));
        // A role-only delta carries nothing; an empty content delta is content of no text.
        let e = parse_event(r#"{"choices":[{"delta":{"role":"assistant"}}]}"#).unwrap();
        assert_eq!(e.kind, None);
        let e = parse_event(r#"{"choices":[{"delta":{"content":"","logprobs":null}}]}"#).unwrap();
        assert_eq!((e.kind, e.text.as_ref()), (Some(ChunkKind::Content), ""));
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
