//! The OpenAI/vLLM wire format: request parsing and validation, error bodies, and the JSON of
//! every response and SSE event. Pure functions; no I/O.
//!
//! Chat prompt template (documented in docs/sim.md): each message becomes
//! `<|{role}|>\n{content}\n`, followed by `<|assistant|>\n`; prompt_tokens is the token count of
//! that text with the configured tokenizer (no special tokens).
//!
//! Images: a chat content part `{"type":"image_url","image_url":{"url":"data:image/...;base64,..."}}`
//! adds no template text; the server decodes the data URL, reads the pixel size from the image
//! header (PNG or JPEG) and counts [`image_tokens`] prompt tokens for it: one token per 28×28
//! pixel patch, rounded up on each side (Qwen2-VL's 14-pixel patches merged 2×2, without its
//! resizing). Remote `http(s)://` images are refused (the simulator fetches nothing).

use std::fmt::Write;

use base64::Engine as _;
use serde::Deserialize;
use servelab_workload::Tokenizer;

use crate::quirk::{is_openai_field, Quirks};
use crate::truth::ImageSeen;
use crate::SimConfig;

/// Which OpenAI endpoint a request came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    Completions,
    Chat,
}

impl Endpoint {
    /// Name used in truth records.
    pub fn name(&self) -> &'static str {
        match self {
            Endpoint::Completions => "completions",
            Endpoint::Chat => "chat",
        }
    }
}

/// An error answered with vLLM's body shape:
/// `{"error":{"message":..,"type":..,"param":..,"code":<status>}}`, or with FastAPI's
/// `{"detail":..}` when `detail` is set.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    pub status: u16,
    pub kind: &'static str,
    pub message: String,
    pub param: Option<&'static str>,
    /// The body is `{"detail":<message>}` (a FastAPI server's, e.g. `transformers serve`).
    pub detail: bool,
}

impl ApiError {
    pub fn bad_request(message: impl Into<String>, param: Option<&'static str>) -> Self {
        Self { status: 400, kind: "BadRequestError", message: message.into(), param, detail: false }
    }

    pub fn new(status: u16, kind: &'static str, message: impl Into<String>) -> Self {
        Self { status, kind, message: message.into(), param: None, detail: false }
    }

    /// 422 for a field this server does not accept (the `reject-*` quirks).
    fn unsupported_field(field: &'static str) -> Self {
        Self {
            status: 422,
            kind: "UnprocessableEntityError",
            message: format!("'{field}' is not a supported request field on this server"),
            param: Some(field),
            detail: false,
        }
    }

    /// The JSON body (no trailing newline).
    pub fn body(&self) -> String {
        if self.detail {
            return format!("{{\"detail\":{}}}", json_str(&self.message));
        }
        // Built by hand to keep vLLM's field order.
        format!(
            "{{\"error\":{{\"message\":{},\"type\":\"{}\",\"param\":{},\"code\":{}}}}}",
            json_str(&self.message),
            self.kind,
            self.param.map_or("null".to_string(), json_str),
            self.status
        )
    }
}

#[derive(Deserialize, Default)]
struct StreamOptions {
    include_usage: Option<bool>,
    continuous_usage_stats: Option<bool>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Prompt {
    Text(String),
    Texts(Vec<String>),
    Ids(Vec<u32>),
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Content {
    Text(String),
    Parts(Vec<Part>),
}

#[derive(Deserialize)]
struct Part {
    #[serde(rename = "type")]
    kind: String,
    text: Option<String>,
    image_url: Option<ImageUrl>,
}

#[derive(Deserialize)]
struct ImageUrl {
    url: String,
}

/// Side of the square pixel patch that counts as one prompt token.
pub const IMAGE_PATCH_PX: u32 = 28;

/// Prompt tokens the simulator counts for a `width`×`height` image: one per
/// [`IMAGE_PATCH_PX`]-pixel patch, each side rounded up.
pub fn image_tokens(width: u32, height: u32) -> u64 {
    u64::from(width.div_ceil(IMAGE_PATCH_PX)) * u64::from(height.div_ceil(IMAGE_PATCH_PX))
}

/// Decode a `data:image/...;base64,...` URL and read the image's size from its header.
fn decode_image(url: &str) -> Result<ImageSeen, String> {
    let Some(rest) = url.strip_prefix("data:") else {
        let shown: String = url.chars().take(40).collect();
        return Err(format!(
            "only data: URLs are supported by servelab-sim (it fetches nothing), got '{shown}'"
        ));
    };
    let Some((meta, payload)) = rest.split_once(',') else {
        return Err("the data URL has no ',' before its payload".into());
    };
    if !meta.ends_with(";base64") {
        return Err(format!("the data URL is not base64 ('{meta}'): expected ';base64,'"));
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(payload)
        .map_err(|e| format!("the data URL's base64 payload is invalid: {e}"))?;
    let (width, height) = image::io::Reader::new(std::io::Cursor::new(&bytes))
        .with_guessed_format()
        .map_err(|e| format!("cannot read the image: {e}"))?
        .into_dimensions()
        .map_err(|e| format!("cannot read the image size (PNG or JPEG expected): {e}"))?;
    Ok(ImageSeen { width, height, bytes: bytes.len() as u64, tokens: image_tokens(width, height) })
}

#[derive(Deserialize)]
struct Message {
    role: String,
    content: Option<Content>,
}

/// Fields common to both endpoints, plus each endpoint's input.
#[derive(Deserialize)]
struct RawRequest {
    model: Option<String>,
    prompt: Option<Prompt>,
    messages: Option<Vec<Message>>,
    max_tokens: Option<i64>,
    max_completion_tokens: Option<i64>,
    min_tokens: Option<i64>,
    ignore_eos: Option<bool>,
    n: Option<i64>,
    stream: Option<bool>,
    /// Kept raw: vLLM only rejects a non-empty object without `stream` (Python truthiness).
    stream_options: Option<serde_json::Value>,
}

/// A validated generation request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GenRequest {
    pub endpoint: Endpoint,
    pub stream: bool,
    /// A stream ends with usage (a `choices: []` event, or on the finish chunk).
    pub include_usage: bool,
    /// Cumulative usage on every event (only with include_usage, like vLLM).
    pub continuous_usage: bool,
    /// The stream's final usage rides on the `finish_reason` event instead of its own
    /// `choices: []` event (the `usage-on-finish-chunk` and `ignore-stream-options` quirks).
    pub usage_on_finish: bool,
    pub prompt_tokens: u64,
    pub max_tokens: u64,
    pub min_tokens: u64,
    pub ignore_eos: bool,
    /// The chat request's images (their tokens are in `prompt_tokens`).
    pub images: Vec<ImageSeen>,
    /// Prefix hashes of the prompt's blocks of [`PROMPT_BLOCK_TOKENS`] tokens (empty unless
    /// asked for): equal leading hashes mean equal prompt prefixes.
    pub prompt_blocks: Vec<u64>,
    /// The prompt as rendered (chat template applied), when asked for.
    pub prompt_text: Option<String>,
}

/// What else [`parse_request`] derives from the prompt besides its token count.
#[derive(Debug, Clone, Copy, Default)]
pub struct PromptNeeds {
    /// The prefix hashes of its blocks (engine-model prefix cache).
    pub hashes: bool,
    /// Its rendered text (`--truth-text`).
    pub text: bool,
}

/// Tokens per prompt block hashed for the engine model's prefix cache (vLLM's block size).
pub const PROMPT_BLOCK_TOKENS: u32 = 16;

/// Prefix hashes of the full blocks of `ids`: block `i`'s hash covers blocks `0..=i` (and
/// `seed`), so two prompts share exactly the leading hashes of the blocks they share.
pub fn prefix_block_hashes(ids: &[u32], seed: u64) -> Vec<u64> {
    use std::hash::{Hash, Hasher};
    let mut prev = seed;
    ids.chunks_exact(PROMPT_BLOCK_TOKENS as usize)
        .map(|block| {
            let mut h = std::hash::DefaultHasher::new();
            (prev, block).hash(&mut h);
            prev = h.finish();
            prev
        })
        .collect()
}

/// vLLM's default `max_tokens` for /v1/completions.
pub const COMPLETIONS_DEFAULT_MAX_TOKENS: u64 = 16;

/// The chat template text of `messages` (see the module docs); images go to `images`.
fn chat_prompt(messages: &[Message], images: &mut Vec<ImageSeen>) -> Result<String, ApiError> {
    let mut s = String::new();
    for (i, m) in messages.iter().enumerate() {
        let _ = writeln!(s, "<|{}|>", m.role);
        match &m.content {
            None => {}
            Some(Content::Text(t)) => s.push_str(t),
            Some(Content::Parts(parts)) => {
                for p in parts {
                    match (p.kind.as_str(), &p.text, &p.image_url) {
                        ("text", Some(t), _) => s.push_str(t),
                        ("image_url", _, Some(u)) => {
                            let img = decode_image(&u.url).map_err(|e| {
                                ApiError::bad_request(
                                    format!("messages[{i}]: image_url: {e}"),
                                    Some("messages"),
                                )
                            })?;
                            images.push(img);
                        }
                        _ => {
                            return Err(ApiError::bad_request(
                                format!(
                                    "messages[{i}]: content part of type '{}' is not supported \
                                     (only {{\"type\":\"text\",\"text\":..}} and \
                                     {{\"type\":\"image_url\",\"image_url\":{{\"url\":..}}}})",
                                    p.kind
                                ),
                                Some("messages"),
                            ))
                        }
                    }
                }
            }
        }
        s.push('\n');
    }
    s.push_str("<|assistant|>\n");
    Ok(s)
}

/// Prompt tokens of the request: text under the tokenizer plus [`image_tokens`] per image;
/// with `hash`, also the prefix hashes of its blocks ([`prefix_block_hashes`]; a request's
/// images seed them, so prompts with different images never share a cached prefix).
fn prompt_tokens(
    raw: &RawRequest,
    endpoint: Endpoint,
    tok: &Tokenizer,
    images: &mut Vec<ImageSeen>,
    needs: PromptNeeds,
    rendered: &mut Option<String>,
) -> Result<(u64, Vec<u64>), ApiError> {
    // One text's tokens (and, when asked, its block hashes seeded by `imgs`, and the text).
    let text = |t: &str, imgs: &[ImageSeen], rendered: &mut Option<String>| {
        if needs.text {
            *rendered = Some(t.to_string());
        }
        if needs.hashes {
            let ids = tok.encode(t);
            (ids.len(), ids_hashes(&ids, imgs))
        } else {
            (tok.count(t), Vec::new())
        }
    };
    let (n, blocks) = match endpoint {
        Endpoint::Completions => match &raw.prompt {
            None => return Err(ApiError::bad_request("'prompt' is required", Some("prompt"))),
            Some(Prompt::Text(t)) => text(t, &[], rendered),
            Some(Prompt::Texts(v)) if v.len() == 1 => text(&v[0], &[], rendered),
            Some(Prompt::Texts(v)) if v.is_empty() => {
                return Err(ApiError::bad_request("'prompt' must not be empty", Some("prompt")))
            }
            Some(Prompt::Texts(_)) => {
                return Err(ApiError::bad_request(
                    "batched prompts are not supported by servelab-sim: send one prompt",
                    Some("prompt"),
                ))
            }
            Some(Prompt::Ids(ids)) => {
                (ids.len(), if needs.hashes { ids_hashes(ids, &[]) } else { Vec::new() })
            }
        },
        Endpoint::Chat => match &raw.messages {
            None => return Err(ApiError::bad_request("'messages' is required", Some("messages"))),
            Some(m) => {
                let t = chat_prompt(m, images)?;
                text(&t, images, rendered)
            }
        },
    };
    Ok((n as u64 + images.iter().map(|i| i.tokens).sum::<u64>(), blocks))
}

/// [`prefix_block_hashes`] seeded by the request's images.
fn ids_hashes(ids: &[u32], images: &[ImageSeen]) -> Vec<u64> {
    use std::hash::{Hash, Hasher};
    let mut h = std::hash::DefaultHasher::new();
    for i in images {
        (i.width, i.height, i.bytes).hash(&mut h);
    }
    prefix_block_hashes(ids, h.finish())
}

/// The `reject-*` quirks: 422 for a body with a field the server refuses. Parses the body's
/// top-level keys a second time, so it runs only when one of those quirks is on.
fn reject_fields(endpoint: Endpoint, body: &[u8], q: Quirks) -> Result<(), ApiError> {
    use std::collections::BTreeMap;
    let keys: BTreeMap<String, serde::de::IgnoredAny> = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("invalid request body: {e}"), None))?;
    if q.reject_unknown_fields {
        let chat = endpoint == Endpoint::Chat;
        let unknown: Vec<String> = keys
            .keys()
            .filter(|k| !is_openai_field(chat, k))
            .map(|k| format!("'{}'", k.replace('\\', "\\\\").replace('\'', "\\'")))
            .collect();
        if !unknown.is_empty() {
            return Err(ApiError {
                status: 422,
                kind: "UnprocessableEntityError",
                message: format!(
                    "Fields not in the OpenAI request schema: {{{}}}",
                    unknown.join(", ")
                ),
                param: None,
                detail: true,
            });
        }
    }
    if q.reject_ignore_eos && keys.contains_key("ignore_eos") {
        return Err(ApiError::unsupported_field("ignore_eos"));
    }
    if q.reject_min_tokens && keys.contains_key("min_tokens") {
        return Err(ApiError::unsupported_field("min_tokens"));
    }
    Ok(())
}

/// Parse and validate a request body like vLLM would (or like the server `cfg.quirks`
/// describes): the served model, `max_model_len` and the quirks come from `cfg`.
pub fn parse_request(
    endpoint: Endpoint,
    body: &[u8],
    cfg: &SimConfig,
    tok: &Tokenizer,
    needs: PromptNeeds,
) -> Result<GenRequest, ApiError> {
    let (served_model, max_model_len, q) = (cfg.model.as_str(), cfg.max_model_len, cfg.quirks);
    let raw: RawRequest = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("invalid request body: {e}"), None))?;
    if q.reject_unknown_fields || q.reject_ignore_eos || q.reject_min_tokens {
        reject_fields(endpoint, body, q)?;
    }
    if let Some(m) = &raw.model {
        if m != served_model {
            return Err(ApiError {
                status: 404,
                kind: "NotFoundError",
                message: format!("The model `{m}` does not exist."),
                param: Some("model"),
                detail: false,
            });
        }
    }
    if let Some(n) = raw.n {
        if n != 1 {
            return Err(ApiError::bad_request(
                format!("n = {n} is not supported by servelab-sim: only n = 1"),
                Some("n"),
            ));
        }
    }
    let mut images = Vec::new();
    let mut prompt_text = None;
    let (prompt_tokens, prompt_blocks) =
        prompt_tokens(&raw, endpoint, tok, &mut images, needs, &mut prompt_text)?;
    if prompt_tokens > max_model_len {
        return Err(ApiError::bad_request(
            format!(
                "This model's maximum context length is {max_model_len} tokens. However, your \
                 request has {prompt_tokens} input tokens. Please reduce the length of the input."
            ),
            None,
        ));
    }
    let asked = match endpoint {
        Endpoint::Chat if q.ignore_max_completion_tokens => raw.max_tokens,
        Endpoint::Chat => raw.max_completion_tokens.or(raw.max_tokens),
        Endpoint::Completions => raw.max_tokens,
    };
    let max_tokens = match asked {
        Some(m) if m < 1 => {
            return Err(ApiError::bad_request(
                format!("max_tokens must be at least 1, got {m}."),
                Some("max_tokens"),
            ))
        }
        Some(m) => m as u64,
        None => match endpoint {
            Endpoint::Completions => COMPLETIONS_DEFAULT_MAX_TOKENS,
            // Capped so that the default alone never makes the request too long.
            Endpoint::Chat if q.ignore_max_completion_tokens => {
                cfg.default_max_tokens.min(max_model_len - prompt_tokens).max(1)
            }
            Endpoint::Chat => (max_model_len - prompt_tokens).max(1),
        },
    };
    if prompt_tokens.saturating_add(max_tokens) > max_model_len {
        return Err(ApiError::bad_request(
            format!(
                "This model's maximum context length is {max_model_len} tokens. However, you \
                 requested {} tokens ({prompt_tokens} in the messages, {max_tokens} in the \
                 completion). Please reduce the length of the messages or completion.",
                prompt_tokens.saturating_add(max_tokens)
            ),
            Some("max_tokens"),
        ));
    }
    let min_tokens = match raw.min_tokens {
        None => 0,
        Some(m) if m < 0 => {
            return Err(ApiError::bad_request(
                format!("min_tokens must be greater than or equal to 0, got {m}."),
                Some("min_tokens"),
            ))
        }
        Some(m) if m as u64 > max_tokens => {
            return Err(ApiError::bad_request(
                format!(
                    "min_tokens must be less than or equal to max_tokens={max_tokens}, got {m}."
                ),
                Some("min_tokens"),
            ))
        }
        Some(m) => m as u64,
    };
    let stream = raw.stream.unwrap_or(false);
    let opts: StreamOptions = match raw.stream_options {
        _ if q.ignore_stream_options => StreamOptions::default(),
        None | Some(serde_json::Value::Null) => StreamOptions::default(),
        Some(v) => {
            let non_empty = v.as_object().is_some_and(|m| !m.is_empty());
            if non_empty && !raw.stream.unwrap_or(false) {
                return Err(ApiError::bad_request(
                    "Stream options can only be defined when `stream=True`.",
                    Some("stream_options"),
                ));
            }
            serde_json::from_value(v).map_err(|e| {
                ApiError::bad_request(
                    format!("invalid stream_options: {e}"),
                    Some("stream_options"),
                )
            })?
        }
    };
    // ignore-stream-options: usage on the finish chunk whether asked or not, never per chunk.
    let include_usage =
        !q.no_usage && (q.ignore_stream_options || opts.include_usage.unwrap_or(false));
    Ok(GenRequest {
        endpoint,
        stream,
        include_usage,
        continuous_usage: include_usage && opts.continuous_usage_stats.unwrap_or(false),
        usage_on_finish: include_usage && (q.ignore_stream_options || q.usage_on_finish_chunk),
        prompt_tokens,
        max_tokens,
        min_tokens,
        ignore_eos: raw.ignore_eos.unwrap_or(false),
        images,
        prompt_blocks,
        prompt_text,
    })
}

/// Renders the JSON of one response: ids and names are fixed per request.
#[derive(Debug, Clone)]
pub struct Render {
    pub endpoint: Endpoint,
    pub id: String,
    pub created: u64,
    /// The model name, already a JSON string literal.
    pub model_json: String,
    pub prompt_tokens: u64,
}

fn json_str(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".to_string())
}

impl Render {
    pub fn new(
        endpoint: Endpoint,
        seq: u64,
        seed: u64,
        created: u64,
        model: &str,
        prompt: u64,
    ) -> Self {
        let prefix = match endpoint {
            Endpoint::Completions => "cmpl",
            Endpoint::Chat => "chatcmpl",
        };
        Self {
            endpoint,
            id: format!("{prefix}-{seed:016x}{seq:016x}"),
            created,
            model_json: json_str(model),
            prompt_tokens: prompt,
        }
    }

    fn usage(&self, completion: u64) -> String {
        format!(
            "{{\"prompt_tokens\":{},\"total_tokens\":{},\"completion_tokens\":{completion}}}",
            self.prompt_tokens,
            self.prompt_tokens + completion
        )
    }

    fn head(&self, out: &mut String) {
        let object = match self.endpoint {
            Endpoint::Completions => "text_completion",
            Endpoint::Chat => "chat.completion.chunk",
        };
        let _ = write!(
            out,
            "data: {{\"id\":\"{}\",\"object\":\"{object}\",\"created\":{},\"model\":{},",
            self.id, self.created, self.model_json
        );
    }

    fn tail(&self, out: &mut String, usage: Option<u64>) {
        if let Some(c) = usage {
            let _ = write!(out, ",\"usage\":{}", self.usage(c));
        }
        out.push_str("}\n\n");
    }

    /// The chat role event (`delta: {"role":"assistant","content":""}`), carrying no tokens.
    pub fn role_event(&self, out: &mut String, usage: Option<u64>) {
        self.head(out);
        out.push_str(
            "\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\
             \"logprobs\":null,\"finish_reason\":null}]",
        );
        self.tail(out, usage);
    }

    /// One token-carrying event. `reasoning` puts chat text in `delta.reasoning_content`.
    pub fn token_event(
        &self,
        out: &mut String,
        text: &str,
        reasoning: bool,
        finish: Option<&str>,
        usage: Option<u64>,
    ) {
        self.head(out);
        let finish = finish.map_or("null".to_string(), |f| format!("\"{f}\""));
        let text = json_str(text);
        match self.endpoint {
            Endpoint::Completions => {
                let _ = write!(
                    out,
                    "\"choices\":[{{\"index\":0,\"text\":{text},\"logprobs\":null,\
                     \"finish_reason\":{finish},\"stop_reason\":null}}]"
                );
            }
            Endpoint::Chat => {
                let field = if reasoning { "reasoning_content" } else { "content" };
                let _ = write!(
                    out,
                    "\"choices\":[{{\"index\":0,\"delta\":{{\"{field}\":{text}}},\
                     \"logprobs\":null,\"finish_reason\":{finish}}}]"
                );
            }
        }
        self.tail(out, usage);
    }

    /// The final usage event: `"choices":[]` and `usage`.
    pub fn usage_event(&self, out: &mut String, completion: u64) {
        self.head(out);
        out.push_str("\"choices\":[]");
        self.tail(out, Some(completion));
    }

    /// The whole non-streaming response body (`usage: false`: without its `usage` field).
    pub fn full_response(
        &self,
        reasoning: &str,
        content: &str,
        finish: &str,
        completion: u64,
        usage: bool,
    ) -> String {
        let usage =
            if usage { format!(",\"usage\":{}", self.usage(completion)) } else { String::new() };
        match self.endpoint {
            Endpoint::Completions => format!(
                "{{\"id\":\"{}\",\"object\":\"text_completion\",\"created\":{},\"model\":{},\
                 \"choices\":[{{\"index\":0,\"text\":{},\"logprobs\":null,\
                 \"finish_reason\":\"{finish}\",\"stop_reason\":null,\"prompt_logprobs\":null}}]\
                 {usage}}}",
                self.id,
                self.created,
                self.model_json,
                json_str(&format!("{reasoning}{content}")),
            ),
            Endpoint::Chat => {
                let r = if reasoning.is_empty() { "null".to_string() } else { json_str(reasoning) };
                format!(
                    "{{\"id\":\"{}\",\"object\":\"chat.completion\",\"created\":{},\"model\":{},\
                     \"choices\":[{{\"index\":0,\"message\":{{\"role\":\"assistant\",\
                     \"reasoning_content\":{r},\"content\":{},\"tool_calls\":[]}},\
                     \"logprobs\":null,\"finish_reason\":\"{finish}\",\"stop_reason\":null}}]\
                     {usage}}}",
                    self.id,
                    self.created,
                    self.model_json,
                    json_str(content),
                )
            }
        }
    }
}

/// The error object vLLM sends inside a stream, then `[DONE]` unless `done` is false (the
/// `no-done` quirk).
pub fn stream_error_events(out: &mut String, done: bool) {
    let e = ApiError::new(500, "InternalServerError", "servelab-sim injected stream error");
    let _ = write!(out, "data: {}\n\n", e.body());
    if done {
        out.push_str("data: [DONE]\n\n");
    }
}

/// The `/v1/models` body.
pub fn models_body(model: &str, created: u64, max_model_len: u64) -> String {
    serde_json::json!({
        "object": "list",
        "data": [{
            "id": model,
            "object": "model",
            "created": created,
            "owned_by": "servelab",
            "root": model,
            "parent": null,
            "max_model_len": max_model_len,
            "permission": [],
        }],
    })
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tok() -> Tokenizer {
        Tokenizer::from_spec("cl100k_base").unwrap()
    }

    fn parse(ep: Endpoint, body: &str) -> Result<GenRequest, ApiError> {
        let cfg = SimConfig::default().with_model("m").with_max_model_len(100);
        parse_request(ep, body.as_bytes(), &cfg, &tok(), PromptNeeds::default())
    }

    #[test]
    fn completions_defaults_like_vllm() {
        let r = parse(Endpoint::Completions, r#"{"prompt":"hello world"}"#).unwrap();
        assert_eq!(r.prompt_tokens, 2);
        assert_eq!(r.max_tokens, 16);
        assert!(!r.stream && !r.include_usage && !r.continuous_usage);
        let r = parse(Endpoint::Completions, r#"{"prompt":[1,2,3],"max_tokens":5}"#).unwrap();
        assert_eq!((r.prompt_tokens, r.max_tokens), (3, 5));
        let r = parse(Endpoint::Completions, r#"{"prompt":["hello world"]}"#).unwrap();
        assert_eq!(r.prompt_tokens, 2);
    }

    #[test]
    fn chat_counts_the_template_and_prefers_max_completion_tokens() {
        let body = r#"{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}],
            "max_tokens":3,"max_completion_tokens":4,"stream":true,
            "stream_options":{"include_usage":true,"continuous_usage_stats":true}}"#;
        let r = parse(Endpoint::Chat, body).unwrap();
        assert_eq!(r.prompt_tokens, tok().count("<|user|>\nhi\n<|assistant|>\n") as u64);
        assert_eq!(r.max_tokens, 4);
        assert!(r.stream && r.include_usage && r.continuous_usage);
        let r = parse(Endpoint::Chat, r#"{"messages":[{"role":"user","content":"hi"}]}"#).unwrap();
        assert_eq!(r.max_tokens, 100 - r.prompt_tokens);
    }

    #[test]
    fn images_are_decoded_sized_and_counted() {
        use rand::SeedableRng;
        use servelab_workload::{random_image_data_url, ImageFormat, ImageSize};
        let mut rng = rand::rngs::StdRng::seed_from_u64(1);
        let jpeg =
            random_image_data_url(ImageSize { width: 64, height: 48 }, ImageFormat::Jpeg, &mut rng)
                .unwrap();
        let png =
            random_image_data_url(ImageSize { width: 29, height: 28 }, ImageFormat::Png, &mut rng)
                .unwrap();
        let body = format!(
            r#"{{"messages":[{{"role":"user","content":[{{"type":"text","text":"hi"}},
            {{"type":"image_url","image_url":{{"url":"{jpeg}"}}}},
            {{"type":"image_url","image_url":{{"url":"{png}"}}}}]}}],"max_tokens":1}}"#
        );
        let r = parse(Endpoint::Chat, &body).unwrap();
        let sizes: Vec<_> = r.images.iter().map(|i| (i.width, i.height, i.tokens)).collect();
        // 64×48: 3×2 patches of 28 px; 29×28: 2×1.
        assert_eq!(sizes, vec![(64, 48, 6), (29, 28, 2)]);
        assert!(r.images.iter().all(|i| i.bytes > 0));
        let text = tok().count("<|user|>\nhi\n<|assistant|>\n") as u64;
        assert_eq!(r.prompt_tokens, text + 8);
        assert_eq!(image_tokens(1, 1), 1);
        assert_eq!(image_tokens(56, 57), 6);
    }

    #[test]
    fn bad_images_are_refused_by_name() {
        let msg = |url: &str| {
            let body = format!(
                r#"{{"messages":[{{"role":"user","content":[{{"type":"image_url","image_url":{{"url":"{url}"}}}}]}}]}}"#
            );
            let e = parse(Endpoint::Chat, &body).unwrap_err();
            assert_eq!(e.status, 400);
            e.message
        };
        assert!(msg("https://example.com/a.png").contains("only data: URLs"));
        assert!(msg("data:image/png,abc").contains("not base64"));
        assert!(msg("data:image/png;base64,@@@").contains("base64 payload is invalid"));
        assert!(msg("data:image/png;base64,aGkh").contains("cannot read the image"));
        assert!(msg("data:image/png;base64").contains("no ','"));
    }

    #[test]
    fn rejections_match_vllm_statuses() {
        let e = parse(Endpoint::Completions, "{not json").unwrap_err();
        assert_eq!((e.status, e.kind), (400, "BadRequestError"));
        let e = parse(Endpoint::Completions, r#"{"prompt":"x","model":"other"}"#).unwrap_err();
        assert_eq!((e.status, e.kind), (404, "NotFoundError"));
        let e = parse(Endpoint::Completions, r#"{"prompt":"x","n":2}"#).unwrap_err();
        assert_eq!(e.status, 400);
        let e = parse(Endpoint::Completions, r#"{"prompt":"x","max_tokens":1000}"#).unwrap_err();
        assert_eq!(e.param, Some("max_tokens"));
        let e = parse(Endpoint::Completions, r#"{"prompt":"x","max_tokens":"3"}"#).unwrap_err();
        assert_eq!(e.status, 400);
        let e = parse(Endpoint::Completions, r#"{"prompt":"x","max_tokens":0}"#).unwrap_err();
        assert_eq!(e.status, 400);
        let e = parse(Endpoint::Completions, r#"{"prompt":"x","max_tokens":2,"min_tokens":3}"#)
            .unwrap_err();
        assert_eq!(e.param, Some("min_tokens"));
        let body = r#"{"prompt":"x","stream_options":{"include_usage":true}}"#;
        let e = parse(Endpoint::Completions, body).unwrap_err();
        assert_eq!(e.param, Some("stream_options"));
        assert!(parse(Endpoint::Completions, r#"{"prompt":"x","stream_options":{}}"#).is_ok());
        let body = r#"{"prompt":"x","stream":true,"stream_options":{"include_usage":"y"}}"#;
        assert_eq!(parse(Endpoint::Completions, body).unwrap_err().status, 400);
        let e = parse(Endpoint::Chat, r#"{"messages":"x"}"#).unwrap_err();
        assert_eq!(e.status, 400);
        assert_eq!(
            e.body(),
            format!(
                r#"{{"error":{{"message":{},"type":"BadRequestError","param":null,"code":400}}}}"#,
                json_str(&e.message)
            )
        );
    }

    #[test]
    fn events_have_vllm_fields() {
        let r = Render::new(Endpoint::Completions, 1, 0, 7, "m", 2);
        let mut s = String::new();
        r.token_event(&mut s, " hi", false, Some("length"), Some(1));
        assert_eq!(
            s,
            "data: {\"id\":\"cmpl-00000000000000000000000000000001\",\"object\":\"text_completion\",\
             \"created\":7,\"model\":\"m\",\"choices\":[{\"index\":0,\"text\":\" hi\",\
             \"logprobs\":null,\"finish_reason\":\"length\",\"stop_reason\":null}],\
             \"usage\":{\"prompt_tokens\":2,\"total_tokens\":3,\"completion_tokens\":1}}\n\n"
        );
        let r = Render::new(Endpoint::Chat, 1, 0, 7, "m", 2);
        let mut s = String::new();
        r.token_event(&mut s, " a", true, None, None);
        let v: serde_json::Value =
            serde_json::from_str(s.trim_start_matches("data: ").trim()).unwrap();
        assert_eq!(v["object"], "chat.completion.chunk");
        assert_eq!(v["choices"][0]["delta"]["reasoning_content"], " a");
        assert!(v.get("usage").is_none());
    }
}
