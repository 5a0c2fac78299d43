//! `servelab doctor`: what an OpenAI-compatible server actually does, found in seconds, and
//! the servelab flags that follow from it.
//!
//! Every generation probe is one planned request sent through the measuring loop
//! ([`crate::runner::run`]) with a body from [`crate::openai::request_body`], so a probe sees
//! exactly what `bench` would: the outcome, the failure message, the per-request stream notes
//! ([`StreamNotes`]). Each asks for [`PROBE_TOKENS`] tokens and is bounded: a request timeout,
//! and a stop as soon as the stream is clearly past what was asked ([`STOP_AFTER_CHUNKS`]), so
//! a server that ignores the length field costs a fraction of a second, not its default
//! length.
//!
//! Two entry points, both returning plain data:
//!
//! - [`preflight`]: the cheap checks a run needs before it starts (reachability and the model,
//!   streaming in the chosen API, `[DONE]`, whether `ignore_eos` and `min_tokens` are accepted,
//!   which max-tokens field is honoured): a handful of 8-token requests. `bench`, `sweep` and
//!   `lab` can call it first and act on [`Preflight::advice`].
//! - [`diagnose`]: every check (both APIs, usage placement and `stream_options`, prompt token
//!   counts against servelab's tokenizer, reasoning fields, `/metrics`, the `Date` header and,
//!   with `clock`, its resolution, keep-alive).
//!
//! [`advise`] derives the flags to use from a [`Diagnosis`] (a pure function), and
//! [`Diagnosis::checks`] gives one row per check for a table or JSON.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http::header::{HeaderMap, CONNECTION, DATE};
use serde::Serialize;
use serde_json::{Map, Value};
use servelab_load::Arrivals;
use servelab_records::{
    ChunkKind, FailureKind, Outcome, RequestRecord, StreamNotes, Usage, UsageAt,
};
use servelab_workload::{PromptBody, Tokenizer};
use tokio::sync::{mpsc, watch};

use crate::http::{connect, drive, get_request, get_with_headers, read_body, within, Target};
use crate::openai::{request_body, Api, BodyOptions, MaxTokensField};
use crate::runner::{run, PlannedRequest, Progress, RunConfig};
use crate::source::RequestSource;

/// Output tokens every probe asks for.
pub const PROBE_TOKENS: u64 = 8;

/// A probe's stream is stopped once it has sent this many output chunks: far past
/// [`PROBE_TOKENS`], so the length field it was given was ignored (a server that splits a
/// token over two chunks still stays under it).
pub const STOP_AFTER_CHUNKS: u64 = 2 * PROBE_TOKENS;

/// The prompt every probe sends: one that needs more than [`PROBE_TOKENS`] tokens to answer,
/// so a model is unlikely to end it early on its own.
pub const PROMPT: &str = "Count from one to thirty in words, separated by commas.";

/// The default bound on one generation probe (a cold server's first request may be slow).
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(15);

/// The bound on one GET (`/health`, `/v1/models`, `/metrics`).
const GET_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a `Date` reading (`clock`) may take.
const CLOCK_BUDGET: Duration = Duration::from_secs(8);

/// An HTTP GET's answer: its status, or why there was none.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Answer {
    /// The server answered with this status.
    Status(u16),
    /// No answer: the connection or the read failed, or it took too long.
    Error(String),
}

impl Answer {
    fn status(&self) -> Option<u16> {
        match self {
            Answer::Status(s) => Some(*s),
            Answer::Error(_) => None,
        }
    }

    fn describe(&self, what: &str) -> String {
        match self {
            Answer::Status(s) => format!("{what} {s}"),
            Answer::Error(e) => format!("{what}: {e}"),
        }
    }
}

/// Reachability and the model to use.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Reach {
    /// `GET /health`.
    pub health: Answer,
    /// `GET /v1/models`.
    pub models: Answer,
    /// The model ids `/v1/models` listed (control characters escaped).
    pub model_ids: Vec<String>,
    /// Why no model ids could be read, when they could not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub models_error: Option<String>,
    /// The model the probes ask for: `--model`, else the first listed; `None`: neither.
    pub model: Option<String>,
    /// The model came from the caller, not from the listing.
    pub model_given: bool,
    /// The `Date` header of the first answer, and when it was received.
    #[serde(skip)]
    date: Option<(String, SystemTime)>,
    /// `/health` said `x-servelab-sim: exact`: servelab's own simulator without quirks, which
    /// honours every field a run asks for.
    #[serde(skip)]
    pub exact_sim: bool,
}

impl Reach {
    /// True when either GET got an HTTP answer.
    pub fn reachable(&self) -> bool {
        self.health.status().is_some() || self.models.status().is_some()
    }
}

/// How one probe request ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "result", rename_all = "snake_case")]
pub enum ProbeEnd {
    /// The response completed (as the measuring loop accepts it).
    Complete,
    /// Stopped by doctor after [`STOP_AFTER_CHUNKS`] chunks: it was streaming far past the
    /// length asked for.
    Stopped,
    /// The request failed, as `bench` would record it.
    Failed {
        /// The failure class.
        kind: FailureKind,
        /// The failure message (with the server's error text for an HTTP error).
        message: String,
    },
}

/// What one probe request saw.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Probe {
    /// The HTTP status, if headers came.
    pub status: Option<u16>,
    /// How it ended.
    pub end: ProbeEnd,
    /// Output chunks (content and reasoning).
    pub chunks: usize,
    /// Of those, chunks of reasoning (`delta.reasoning_content` / `delta.reasoning`).
    pub reasoning_chunks: usize,
    /// Every output chunk carried its own token count (usage in every chunk).
    pub chunk_tokens: bool,
    /// The server's usage object, if it sent one.
    pub usage: Option<Usage>,
    /// The stream notes the measuring loop kept.
    pub notes: StreamNotes,
}

impl Probe {
    fn failed(kind: FailureKind, message: String) -> Probe {
        Probe {
            status: None,
            end: ProbeEnd::Failed { kind, message },
            chunks: 0,
            reasoning_chunks: 0,
            chunk_tokens: false,
            usage: None,
            notes: StreamNotes::default(),
        }
    }

    fn of(rec: RequestRecord, stopped: bool) -> Probe {
        let end = match rec.outcome {
            Outcome::Success => ProbeEnd::Complete,
            Outcome::Failure { kind: FailureKind::Cancelled, .. } if stopped => ProbeEnd::Stopped,
            Outcome::Failure { kind, message } => ProbeEnd::Failed { kind, message },
        };
        Probe {
            status: rec.status,
            end,
            chunks: rec.chunks.len(),
            reasoning_chunks: rec.chunks.iter().filter(|c| c.kind == ChunkKind::Reasoning).count(),
            chunk_tokens: !rec.chunks.is_empty() && rec.chunks.iter().all(|c| c.tokens.is_some()),
            usage: rec.usage,
            notes: rec.stream,
        }
    }

    /// The server refused the request (HTTP 4xx): its status and message.
    pub fn refused(&self) -> Option<(u16, &str)> {
        match (&self.end, self.status) {
            (ProbeEnd::Failed { message, .. }, Some(s)) if (400..500).contains(&s) => {
                let prefix = format!("HTTP {s}: ");
                Some((s, message.strip_prefix(prefix.as_str()).unwrap_or(message)))
            }
            _ => None,
        }
    }

    /// Output streamed: the response completed, or was stopped while streaming.
    pub fn streamed(&self) -> bool {
        matches!(self.end, ProbeEnd::Complete | ProbeEnd::Stopped)
    }

    /// Output tokens seen: the server's count, else the chunks.
    pub fn tokens(&self) -> u64 {
        match self.usage {
            Some(u) if self.end == ProbeEnd::Complete => u.completion_tokens,
            _ => self.chunks as u64,
        }
    }

    /// Where usage came, if it came: the loop's note, else per chunk when every chunk had a
    /// count.
    fn usage_at(&self) -> Option<UsageAt> {
        self.notes.usage_at.or_else(|| self.chunk_tokens.then_some(UsageAt::PerChunk))
    }

    fn failure(&self) -> Option<String> {
        match &self.end {
            ProbeEnd::Failed { kind, message } => Some(format!("{kind}: {message}")),
            _ => None,
        }
    }

    fn finish(&self) -> &str {
        self.notes.finish_reason.as_deref().unwrap_or("none")
    }
}

/// The body fields a probe of one API was sent with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct BodyChoice {
    /// `stream_options.include_usage` was sent.
    pub stream_usage: bool,
    /// Which length field(s) were sent.
    #[serde(serialize_with = "ser_field")]
    pub max_tokens_field: MaxTokensField,
}

/// Streaming in one API.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StreamCheck {
    /// The API probed.
    #[serde(serialize_with = "ser_api")]
    pub api: Api,
    /// The probe that decided (the first that was not refused, else the first).
    pub probe: Probe,
    /// The body that probe was sent with.
    pub body: BodyChoice,
    /// When an earlier body was refused: that refusal (status and message), which a simpler
    /// body avoided.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refused_first: Option<(u16, String)>,
}

impl StreamCheck {
    /// Streaming works in this API.
    pub fn ok(&self) -> bool {
        self.probe.streamed()
    }

    fn options(&self, model: &str) -> BodyOptions {
        BodyOptions {
            api: self.api,
            model: model.to_string(),
            max_tokens_field: self.body.max_tokens_field,
            ignore_eos: false,
            min_tokens: false,
            stream_usage: self.body.stream_usage,
            continuous_usage: false,
            extra: Map::new(),
        }
    }
}

/// Whether a request field (`ignore_eos`, `min_tokens`) is accepted.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
pub enum FieldCheck {
    /// The server took the field.
    Accepted {
        /// The answer had the length asked for (`Some(true)`), ended early at the model's end
        /// of sequence (`Some(false)`), or it cannot be told.
        honoured: Option<bool>,
        /// Output tokens seen.
        tokens: u64,
        /// The answer's `finish_reason`.
        finish_reason: Option<String>,
    },
    /// The server refused a request carrying the field.
    Refused {
        /// Its HTTP status.
        status: u16,
        /// Its message.
        message: String,
    },
    /// The probe failed otherwise.
    Failed {
        /// The failure.
        message: String,
    },
    /// Not probed.
    NotRun {
        /// Why.
        why: String,
    },
}

impl FieldCheck {
    fn of(p: &Probe) -> FieldCheck {
        if let Some((status, message)) = p.refused() {
            return FieldCheck::Refused { status, message: message.to_string() };
        }
        if let Some(message) = p.failure() {
            return FieldCheck::Failed { message };
        }
        let tokens = p.tokens();
        let finish = p.notes.finish_reason.clone();
        let honoured = if p.end == ProbeEnd::Stopped || tokens > PROBE_TOKENS {
            None
        } else if tokens == PROBE_TOKENS {
            Some(true)
        } else if finish.as_deref() == Some("stop") {
            Some(false)
        } else {
            None
        };
        FieldCheck::Accepted { honoured, tokens, finish_reason: finish }
    }

    /// True when the server refused it.
    pub fn refused(&self) -> bool {
        matches!(self, FieldCheck::Refused { .. })
    }

    fn accepted(&self) -> bool {
        matches!(self, FieldCheck::Accepted { .. })
    }
}

/// Whether one length field is honoured.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
pub enum Length {
    /// The answer stopped at the length asked for.
    Honoured {
        /// Output tokens.
        tokens: u64,
    },
    /// The server generated past it.
    Ignored {
        /// Output tokens seen (when `stopped`, when doctor stopped reading).
        tokens: u64,
        /// Doctor stopped the stream early.
        stopped: bool,
    },
    /// The server refused a request carrying the field.
    Refused {
        /// Its HTTP status.
        status: u16,
        /// Its message.
        message: String,
    },
    /// It cannot be told (the answer ended early on its own, or the probe failed).
    Unknown {
        /// Why.
        why: String,
    },
}

impl Length {
    fn of(p: &Probe) -> Length {
        if let Some((status, message)) = p.refused() {
            return Length::Refused { status, message: message.to_string() };
        }
        let tokens = p.tokens();
        if p.end == ProbeEnd::Stopped || tokens > PROBE_TOKENS {
            return Length::Ignored { tokens, stopped: p.end == ProbeEnd::Stopped };
        }
        if let Some(f) = p.failure() {
            return Length::Unknown { why: f };
        }
        if tokens == PROBE_TOKENS || p.notes.finish_reason.as_deref() == Some("length") {
            return Length::Honoured { tokens };
        }
        Length::Unknown {
            why: format!("the answer ended after {tokens} tokens (finish_reason {})", p.finish()),
        }
    }

    fn honoured(&self) -> bool {
        matches!(self, Length::Honoured { .. })
    }

    fn fails(&self) -> bool {
        matches!(self, Length::Ignored { .. } | Length::Refused { .. })
    }

    fn short(&self) -> String {
        match self {
            Length::Honoured { tokens } => format!("honoured ({tokens} tokens)"),
            Length::Ignored { stopped: true, .. } => {
                format!("ignored (still streaming past {STOP_AFTER_CHUNKS} chunks)")
            }
            Length::Ignored { tokens, .. } => format!("ignored ({tokens} tokens)"),
            Length::Refused { status, message } => format!("refused (HTTP {status}: {message})"),
            Length::Unknown { why } => format!("unknown: {why}"),
        }
    }
}

/// Which max-tokens field one API honours: each sent alone, [`PROBE_TOKENS`] asked.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MaxTokensCheck {
    /// The API probed.
    #[serde(serialize_with = "ser_api")]
    pub api: Api,
    /// Only `max_tokens`.
    pub max_tokens: Length,
    /// Only `max_completion_tokens`.
    pub max_completion_tokens: Length,
}

impl MaxTokensCheck {
    /// The `--max-tokens-field` to use: `Auto` when its field works (or nothing says it does
    /// not), the other field when only that one is honoured, `None` when neither is.
    pub fn field(&self) -> Option<MaxTokensField> {
        let (auto, other, other_field) = match self.api {
            Api::Chat => (&self.max_completion_tokens, &self.max_tokens, MaxTokensField::MaxTokens),
            Api::Completions => {
                (&self.max_tokens, &self.max_completion_tokens, MaxTokensField::MaxCompletionTokens)
            }
        };
        match (auto.fails(), other.honoured(), other.fails()) {
            (false, _, _) => Some(MaxTokensField::Auto),
            (true, true, _) => Some(other_field),
            (true, false, true) => None,
            // The other field could not be told: keep the default and say so.
            (true, false, false) => Some(MaxTokensField::Auto),
        }
    }
}

/// The checks of one API: streaming, the fields, the length field.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ApiChecks {
    /// Streaming.
    pub stream: StreamCheck,
    /// `ignore_eos` alone.
    pub ignore_eos: FieldCheck,
    /// `min_tokens` alone.
    pub min_tokens: FieldCheck,
    /// The length field; `None` when streaming failed.
    pub max_tokens: Option<MaxTokensCheck>,
}

/// What [`preflight`] found: the checks a run needs before it starts.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Preflight {
    /// The base URL probed (credentials removed).
    pub base_url: String,
    /// The API asked for.
    #[serde(serialize_with = "ser_api")]
    pub api: Api,
    /// Reachability and the model.
    pub reach: Reach,
    /// The checks of `api`; `None` when the server did not answer or no model is known.
    pub checks: Option<ApiChecks>,
}

impl Preflight {
    /// Streaming works in the API asked for.
    pub fn streams(&self) -> bool {
        self.checks.as_ref().is_some_and(|c| c.stream.ok())
    }

    /// The flags to use, from these checks alone.
    pub fn advice(&self) -> Advice {
        advise_parts(self, None, None, None)
    }
}

/// What usage a stream carried.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "seen", rename_all = "snake_case")]
pub enum UsageSeen {
    /// A usage object came; where (`None`: the loop did not say).
    Present {
        /// Where it came.
        at: Option<UsageAt>,
    },
    /// No usage object.
    Absent,
    /// The server refused the request.
    Refused {
        /// Its HTTP status.
        status: u16,
        /// Its message.
        message: String,
    },
    /// Not probed, or the probe failed.
    NotRun {
        /// Why.
        why: String,
    },
}

impl UsageSeen {
    fn of(p: &Probe) -> UsageSeen {
        if let Some((status, message)) = p.refused() {
            return UsageSeen::Refused { status, message: message.to_string() };
        }
        if let Some(f) = p.failure() {
            return UsageSeen::NotRun { why: f };
        }
        match p.usage {
            Some(_) => UsageSeen::Present { at: p.usage_at() },
            None if p.chunk_tokens => UsageSeen::Present { at: Some(UsageAt::PerChunk) },
            None => UsageSeen::Absent,
        }
    }

    fn present(&self) -> Option<bool> {
        match self {
            UsageSeen::Present { .. } => Some(true),
            UsageSeen::Absent => Some(false),
            _ => None,
        }
    }

    fn short(&self) -> String {
        match self {
            UsageSeen::Present { at: Some(at) } => usage_at_words(*at).to_string(),
            UsageSeen::Present { at: None } => "present".into(),
            UsageSeen::Absent => "none".into(),
            UsageSeen::Refused { status, .. } => format!("refused (HTTP {status})"),
            UsageSeen::NotRun { why } => format!("not run ({why})"),
        }
    }
}

fn usage_at_words(at: UsageAt) -> &'static str {
    match at {
        UsageAt::PerChunk => "every chunk",
        UsageAt::FinishChunk => "the finish chunk",
        UsageAt::Separate => "a separate last chunk",
    }
}

/// What the server does with `stream_options`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StreamOptions {
    /// Usage comes when asked for, not otherwise.
    Honoured,
    /// Usage comes either way.
    UsageAlways,
    /// Usage never comes.
    UsageNever,
    /// Usage comes without asking and not when asked (odd, but seen).
    Inverted,
    /// A request carrying it is refused.
    Refused,
    /// It cannot be told.
    Unknown,
}

/// Usage placement and `stream_options`, in the API used.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UsageCheck {
    /// The API probed.
    #[serde(serialize_with = "ser_api")]
    pub api: Api,
    /// With `stream_options: {"include_usage": true}`.
    pub asked: UsageSeen,
    /// Without `stream_options`.
    pub unasked: UsageSeen,
    /// With `continuous_usage_stats: true` as well.
    pub continuous: UsageSeen,
}

impl UsageCheck {
    /// What the server does with `stream_options`.
    pub fn stream_options(&self) -> StreamOptions {
        if matches!(self.asked, UsageSeen::Refused { .. }) {
            return StreamOptions::Refused;
        }
        match (self.asked.present(), self.unasked.present()) {
            (Some(true), Some(false)) => StreamOptions::Honoured,
            (Some(true), Some(true)) => StreamOptions::UsageAlways,
            (Some(false), Some(false)) => StreamOptions::UsageNever,
            (Some(false), Some(true)) => StreamOptions::Inverted,
            _ => StreamOptions::Unknown,
        }
    }

    /// `continuous_usage_stats` gave usage on every chunk (`None`: cannot be told).
    pub fn continuous_honoured(&self) -> Option<bool> {
        match &self.continuous {
            UsageSeen::Present { at: Some(UsageAt::PerChunk) } => Some(true),
            UsageSeen::Present { .. } | UsageSeen::Absent | UsageSeen::Refused { .. } => {
                Some(false)
            }
            UsageSeen::NotRun { .. } => None,
        }
    }

    /// Usage came in any probe.
    pub fn any(&self) -> bool {
        [&self.asked, &self.unasked, &self.continuous].iter().any(|u| u.present() == Some(true))
    }
}

/// The server's prompt token counts against servelab's tokenizer.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PromptCheck {
    /// The tokenizer servelab counted with.
    pub tokenizer: String,
    /// Set when that tokenizer is a stand-in for the model's (counts are estimates).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub estimate: Option<String>,
    /// Why there is no tokenizer count.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// servelab's count of [`PROMPT`].
    pub client: Option<u64>,
    /// The server's `usage.prompt_tokens` for [`PROMPT`] on `/v1/completions`.
    pub completions: Option<u64>,
    /// The server's `usage.prompt_tokens` for [`PROMPT`] as one user message on chat.
    pub chat: Option<u64>,
}

impl PromptCheck {
    /// Server − servelab on completions (0 when they agree).
    pub fn completions_diff(&self) -> Option<i64> {
        Some(self.completions? as i64 - self.client? as i64)
    }

    /// The chat template's overhead: chat's prompt tokens − servelab's count of the text.
    pub fn chat_overhead(&self) -> Option<i64> {
        Some(self.chat? as i64 - self.client? as i64)
    }
}

/// Reasoning output seen in any probe.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReasoningCheck {
    /// Chunks of `delta.reasoning_content` / `delta.reasoning`.
    pub chunks: usize,
    /// `usage.completion_tokens_details.reasoning_tokens`, when reported.
    pub reasoning_tokens: Option<u64>,
}

/// The server's `/metrics`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MetricsCheck {
    /// `GET /metrics`.
    pub answer: Answer,
    /// Engine families its series names belong to (`vllm`, `sglang`, ...).
    pub families: Vec<String>,
    /// Series servelab keeps from it during a run (see [`crate::prom::engine_series`]).
    pub kept: usize,
}

/// A `Date` reading of the server's clock (`clock`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClockCheck {
    /// Server clock − this host's, ms.
    pub offset_ms: f64,
    /// ± ms.
    pub uncertainty_ms: f64,
    /// Why only whole seconds, when so.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// The `Date` header.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DateCheck {
    /// The header as sent, if it was.
    pub value: Option<String>,
    /// Server clock − this host's in whole seconds, from the one header (± 1 s).
    pub skew_s: Option<i64>,
    /// The reading asked for with `clock`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reading: Option<ClockCheck>,
    /// Why the reading asked for failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// A reading was asked for.
    pub asked: bool,
}

/// Keep-alive on the generation endpoint.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KeepAliveCheck {
    /// A second request went out on the first one's connection (`None`: cannot be told).
    pub reused: Option<bool>,
    /// The first answer said `Connection: close`.
    pub connection_close: bool,
    /// Why it could not be told.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Everything [`diagnose`] found.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Diagnosis {
    /// The cheap checks, in the API asked for.
    pub preflight: Preflight,
    /// The other API's checks (its streaming always; the rest when it streams).
    pub other: Option<ApiChecks>,
    /// Usage placement and `stream_options`, in the API to use.
    pub usage: Option<UsageCheck>,
    /// Prompt token counts.
    pub prompt: Option<PromptCheck>,
    /// Reasoning output.
    pub reasoning: ReasoningCheck,
    /// `/metrics`.
    pub metrics: MetricsCheck,
    /// The `Date` header.
    pub date: DateCheck,
    /// Keep-alive.
    pub keep_alive: Option<KeepAliveCheck>,
}

/// How a doctor run ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Streaming works in the API asked for.
    Ok,
    /// A check asked for failed (streaming in the API asked for, the clock reading).
    CheckFailed,
    /// The server did not answer, or no model is known.
    Unreachable,
}

impl Diagnosis {
    /// The API whose checks decide: the one asked for if it streams, else the other if that
    /// does.
    fn used(&self) -> Option<&ApiChecks> {
        let asked = self.preflight.checks.as_ref();
        match asked {
            Some(c) if c.stream.ok() => Some(c),
            _ => self.other.as_ref().filter(|o| o.stream.ok()).or(asked),
        }
    }

    /// The checks of `api`, if probed.
    pub fn api(&self, api: Api) -> Option<&ApiChecks> {
        [self.preflight.checks.as_ref(), self.other.as_ref()]
            .into_iter()
            .flatten()
            .find(|c| c.stream.api == api)
    }

    /// How the run ends (and so its exit code).
    pub fn verdict(&self) -> Verdict {
        if !self.preflight.reach.reachable() || self.preflight.reach.model.is_none() {
            Verdict::Unreachable
        } else if !self.preflight.streams() || (self.date.asked && self.date.reading.is_none()) {
            Verdict::CheckFailed
        } else {
            Verdict::Ok
        }
    }
}

/// What to probe, beyond the target.
#[derive(Debug, Clone)]
pub struct Options {
    /// The API the user means to benchmark.
    pub api: Api,
    /// `--model`; `None`: the first model `/v1/models` lists.
    pub model: Option<String>,
    /// `--tokenizer`; `None`: the model's, as `bench` resolves it.
    pub tokenizer: Option<String>,
    /// The bound on one generation probe.
    pub request_timeout: Duration,
    /// Read the server's clock from its `Date` header (takes seconds).
    pub clock: bool,
}

impl Options {
    /// Defaults for `api`: the listed model, the model's tokenizer, no clock reading.
    pub fn new(api: Api) -> Options {
        Options {
            api,
            model: None,
            tokenizer: None,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            clock: false,
        }
    }
}

// ---------------------------------------------------------------------------------------
// Probing.

/// The cheap checks a run needs before it starts, in a few seconds: `GET /health` and
/// `GET /v1/models` (the model: `model`, else the first listed), one streamed 8-token request
/// in `api` (with a simpler body if the server refuses the first: without `stream_options`,
/// with one length field), `[DONE]` (in its stream notes), `ignore_eos` and `min_tokens`
/// each sent alone, and which max-tokens field is honoured (each alone). Every request goes
/// through the measuring loop, bounded by `request_timeout` and stopped once it streams far
/// past 8 tokens.
///
/// `target` is the server: its headers and credentials are sent; its path is used for `api`
/// when it is one of its own (bench's `--endpoint`), else `api`'s default endpoint under the
/// base URL's path prefix. Never fails: what could not be done
/// is in the result ([`Preflight::checks`] is `None` when the server did not answer or no
/// model is known). [`Preflight::advice`] says which flags to use; `bench`, `sweep` and
/// `lab` can call this before they start.
pub async fn preflight(
    target: &Target,
    api: Api,
    model: Option<&str>,
    request_timeout: Duration,
) -> Preflight {
    probe(target, api, model, request_timeout, false).await
}

/// [`preflight`] as a run takes it: servelab's exact simulator ([`Reach::exact_sim`]) is
/// reached but not probed (it honours every field).
pub async fn run_preflight(
    target: &Target,
    api: Api,
    model: Option<&str>,
    request_timeout: Duration,
) -> Preflight {
    probe(target, api, model, request_timeout, true).await
}

async fn probe(
    target: &Target,
    api: Api,
    model: Option<&str>,
    request_timeout: Duration,
    trust_exact: bool,
) -> Preflight {
    let reach = reach(target, model).await;
    let probe = reach.reachable() && !(trust_exact && reach.exact_sim);
    let checks = match (&reach.model, probe) {
        (Some(m), true) => Some(api_checks(target, api, true, m, request_timeout).await),
        _ => None,
    };
    Preflight { base_url: target.base_url.clone(), api, reach, checks }
}

/// Every check: [`preflight`], then the other API, usage and `stream_options`, prompt token
/// counts (with `opts.tokenizer`, by default the model's), reasoning fields, `/metrics`, the
/// `Date` header (read to the millisecond with `opts.clock`), and keep-alive.
pub async fn diagnose(target: &Target, opts: &Options) -> Diagnosis {
    let pre = preflight(target, opts.api, opts.model.as_deref(), opts.request_timeout).await;
    let timeout = opts.request_timeout;
    let mut diagnosis = Diagnosis {
        other: None,
        usage: None,
        prompt: None,
        reasoning: ReasoningCheck { chunks: 0, reasoning_tokens: None },
        metrics: MetricsCheck {
            answer: Answer::Error("not run".into()),
            families: Vec::new(),
            kept: 0,
        },
        date: date_from(&pre.reach, opts.clock),
        keep_alive: None,
        preflight: pre,
    };
    let reach = &diagnosis.preflight.reach;
    if !reach.reachable() {
        return diagnosis;
    }
    diagnosis.metrics = metrics(target).await;
    if opts.clock {
        let path = if reach.models.status() == Some(200) { "/v1/models" } else { "/health" };
        let deadline = tokio::time::Instant::now() + CLOCK_BUDGET;
        match crate::clock::date_reading(target, path, deadline).await {
            Ok(Some(r)) => {
                diagnosis.date.reading = Some(ClockCheck {
                    offset_ms: r.offset_ms,
                    uncertainty_ms: r.uncertainty_ms,
                    note: r.note(),
                });
            }
            Ok(None) => diagnosis.date.error = Some("no readable Date header".into()),
            Err(e) => diagnosis.date.error = Some(e.to_string()),
        }
    }
    let Some(model) = reach.model.clone() else { return diagnosis };
    let other_api = match opts.api {
        Api::Chat => Api::Completions,
        Api::Completions => Api::Chat,
    };
    diagnosis.other = Some(api_checks(target, other_api, false, &model, timeout).await);
    let Some(used) = diagnosis.used().cloned() else { return diagnosis };
    if used.stream.ok() {
        let at = endpoint(target, used.stream.api, used.stream.api == opts.api);
        let base = used.stream.options(&model);
        let prompt = PromptBody::Text(PROMPT.into());
        let unasked = BodyOptions { stream_usage: false, ..base.clone() };
        let unasked = UsageSeen::of(&send(&at, &unasked, &prompt, timeout).await);
        let continuous = if base.stream_usage {
            let o = BodyOptions { continuous_usage: true, ..base.clone() };
            UsageSeen::of(&send(&at, &o, &prompt, timeout).await)
        } else {
            UsageSeen::NotRun { why: "stream_options is refused".into() }
        };
        let asked = match &used.stream.refused_first {
            Some((status, message)) if !base.stream_usage => {
                UsageSeen::Refused { status: *status, message: message.clone() }
            }
            _ => UsageSeen::of(&used.stream.probe),
        };
        diagnosis.usage = Some(UsageCheck { api: used.stream.api, asked, unasked, continuous });
        diagnosis.keep_alive =
            Some(keep_alive(&at, &base, used.max_tokens.as_ref(), timeout).await);
    }
    diagnosis.prompt = Some(prompt_check(&diagnosis, opts.tokenizer.as_deref(), &model).await);
    let probes: Vec<&Probe> = [diagnosis.preflight.checks.as_ref(), diagnosis.other.as_ref()]
        .into_iter()
        .flatten()
        .map(|c| &c.stream.probe)
        .collect();
    diagnosis.reasoning = ReasoningCheck {
        chunks: probes.iter().map(|p| p.reasoning_chunks).sum(),
        reasoning_tokens: probes.iter().filter_map(|p| p.usage?.reasoning_tokens).max(),
    };
    diagnosis
}

/// `target` pointed at `api`'s endpoint under its base URL's path prefix; for the API asked
/// for (`asked`), a path of the target's own (bench's `--endpoint`) is kept.
fn endpoint(target: &Target, api: Api, asked: bool) -> Target {
    let rest = target.base_url.split_once("://").map_or(target.base_url.as_str(), |(_, r)| r);
    let prefix = rest.find('/').map_or("", |i| &rest[i..]).trim_end_matches('/');
    let own = target.path.strip_prefix(prefix).unwrap_or(&target.path);
    let custom = !matches!(own, "" | "/" | "/v1/completions" | "/v1/chat/completions");
    let mut at = target.clone();
    if !(asked && custom) {
        at.path = format!("{prefix}{}", api.default_endpoint());
    }
    at
}

async fn api_checks(
    target: &Target,
    api: Api,
    asked: bool,
    model: &str,
    timeout: Duration,
) -> ApiChecks {
    let at = endpoint(target, api, asked);
    let stream = stream_check(&at, api, model, timeout).await;
    if !stream.ok() {
        let why = || "streaming failed".to_string();
        return ApiChecks {
            stream,
            ignore_eos: FieldCheck::NotRun { why: why() },
            min_tokens: FieldCheck::NotRun { why: why() },
            max_tokens: None,
        };
    }
    let prompt = PromptBody::Text(PROMPT.into());
    let base = stream.options(model);
    let o = BodyOptions { ignore_eos: true, ..base.clone() };
    let ignore_eos = FieldCheck::of(&send(&at, &o, &prompt, timeout).await);
    let o = BodyOptions { min_tokens: true, ..base.clone() };
    let min_tokens = FieldCheck::of(&send(&at, &o, &prompt, timeout).await);
    // With ignore_eos where it is accepted, an answer cannot end early on its own.
    let len_base = BodyOptions { ignore_eos: ignore_eos.accepted(), ..base };
    let mut lengths = Vec::new();
    for field in [MaxTokensField::MaxTokens, MaxTokensField::MaxCompletionTokens] {
        let o = BodyOptions { max_tokens_field: field, ..len_base.clone() };
        lengths.push(Length::of(&send(&at, &o, &prompt, timeout).await));
    }
    let max_completion_tokens = lengths.pop().unwrap_or(Length::Unknown { why: "not run".into() });
    let max_tokens = lengths.pop().unwrap_or(Length::Unknown { why: "not run".into() });
    ApiChecks {
        stream,
        ignore_eos,
        min_tokens,
        max_tokens: Some(MaxTokensCheck { api, max_tokens, max_completion_tokens }),
    }
}

/// Streaming in `api`: the fullest body first (usage asked for; on chat both length fields,
/// so a server reading either stops at 8), then simpler ones while the server refuses them.
async fn stream_check(at: &Target, api: Api, model: &str, timeout: Duration) -> StreamCheck {
    let bodies: &[(bool, MaxTokensField)] = match api {
        Api::Completions => &[(true, MaxTokensField::Auto), (false, MaxTokensField::Auto)],
        Api::Chat => &[
            (true, MaxTokensField::Both),
            (true, MaxTokensField::Auto),
            (false, MaxTokensField::Both),
            (false, MaxTokensField::Auto),
        ],
    };
    let prompt = PromptBody::Text(PROMPT.into());
    let mut first: Option<StreamCheck> = None;
    for &(stream_usage, field) in bodies {
        let body = BodyChoice { stream_usage, max_tokens_field: field };
        let opts = BodyOptions {
            api,
            model: model.to_string(),
            max_tokens_field: field,
            ignore_eos: false,
            min_tokens: false,
            stream_usage,
            continuous_usage: false,
            extra: Map::new(),
        };
        let probe = send(at, &opts, &prompt, timeout).await;
        let refused = probe.refused().map(|(s, m)| (s, m.to_string()));
        let check = StreamCheck { api, probe, body, refused_first: None };
        match (refused, first.take()) {
            (None, None) => return check,
            (None, Some(f)) => {
                let refused_first = f.probe.refused().map(|(s, m)| (s, m.to_string()));
                return StreamCheck { refused_first, ..check };
            }
            (Some(_), None) => first = Some(check),
            (Some(_), Some(f)) => first = Some(f),
        }
    }
    first.unwrap_or_else(|| StreamCheck {
        api,
        probe: Probe::failed(FailureKind::Connect, "no request was sent".into()),
        body: BodyChoice { stream_usage: true, max_tokens_field: MaxTokensField::Auto },
        refused_first: None,
    })
}

/// One request through the measuring loop, as `bench` sends it, asking for
/// [`PROBE_TOKENS`] tokens; stopped once it has streamed [`STOP_AFTER_CHUNKS`] chunks.
async fn send(at: &Target, opts: &BodyOptions, prompt: &PromptBody, timeout: Duration) -> Probe {
    let body = request_body(opts, prompt, Some(PROBE_TOKENS));
    let cfg = RunConfig {
        target: at.clone(),
        source: RequestSource::requests(vec![PlannedRequest {
            body: Bytes::from(body),
            prompt_tokens: None,
            max_tokens: Some(PROBE_TOKENS),
        }]),
        warmups: Vec::new(),
        arrivals: Arrivals::Burst,
        send_at: None,
        ids: None,
        start_at: None,
        seed: 0,
        max_concurrency: Some(1),
        duration: None,
        request_timeout: timeout,
        stall_timeout: None,
        drain_timeout: Duration::ZERO,
        preconnect: 1,
        baseline: None,
        reasoning_parser: crate::ReasoningParser::Auto,
    };
    let progress = Arc::new(Progress::default());
    let (tx, mut rx) = mpsc::unbounded_channel();
    let (stop, interrupt) = watch::channel(false);
    let watched = progress.clone();
    let watcher = tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_millis(2)).await;
            if watched.chunks.load(Ordering::Relaxed) >= STOP_AFTER_CHUNKS {
                let _ = stop.send(true);
                return true;
            }
        }
    });
    // The loop bounds the request; this bounds the connect before it too.
    let ran = tokio::time::timeout(timeout + GET_TIMEOUT, run(cfg, progress, tx, interrupt)).await;
    watcher.abort();
    let stopped = watcher.await.unwrap_or(false);
    match ran {
        Err(_) => Probe::failed(
            FailureKind::Timeout,
            format!("no answer within {:.0} s", (timeout + GET_TIMEOUT).as_secs_f64()),
        ),
        Ok(Err(e)) => Probe::failed(FailureKind::Connect, format!("connect {}: {e}", at.addr)),
        Ok(Ok(_)) => match rx.try_recv() {
            Ok(rec) => Probe::of(rec, stopped),
            Err(_) => Probe::failed(FailureKind::Cancelled, "the request was not sent".into()),
        },
    }
}

/// One GET with its headers, within [`GET_TIMEOUT`]; the body at most
/// [`crate::http::MAX_GET_BODY`].
async fn get_full(target: &Target, path: &str) -> std::io::Result<(u16, HeaderMap, Bytes)> {
    within(GET_TIMEOUT, get_with_headers(target, path)).await
}

fn header(headers: &HeaderMap, name: http::header::HeaderName) -> Option<String> {
    headers
        .get(name)
        .map(|v| crate::text::sanitize_owned(String::from_utf8_lossy(v.as_bytes()).into()))
}

async fn reach(target: &Target, model: Option<&str>) -> Reach {
    let (mut date, mut exact_sim) = (None, false);
    let health = match get_full(target, "/health").await {
        Ok((status, headers, _)) => {
            date = header(&headers, DATE).map(|d| (d, SystemTime::now()));
            exact_sim = headers.get("x-servelab-sim").is_some_and(|v| v == "exact");
            Answer::Status(status)
        }
        Err(e) => Answer::Error(e.to_string()),
    };
    let mut model_ids = Vec::new();
    let (models, models_error) = match get_full(target, "/v1/models").await {
        Ok((status, headers, body)) => {
            if date.is_none() {
                date = header(&headers, DATE).map(|d| (d, SystemTime::now()));
            }
            let error = if status != 200 {
                Some(format!("GET /v1/models answered HTTP {status}"))
            } else {
                match serde_json::from_slice::<Value>(&body) {
                    Ok(v) => {
                        model_ids = v["data"]
                            .as_array()
                            .map(|a| {
                                a.iter()
                                    .filter_map(|m| m["id"].as_str())
                                    .map(|s| crate::text::sanitize(s).into_owned())
                                    .collect()
                            })
                            .unwrap_or_default();
                        model_ids.is_empty().then(|| "GET /v1/models listed no model".to_string())
                    }
                    Err(e) => Some(format!("GET /v1/models: invalid JSON: {e}")),
                }
            };
            (Answer::Status(status), error)
        }
        Err(e) => (Answer::Error(e.to_string()), Some(format!("GET /v1/models: {e}"))),
    };
    let model_given = model.is_some();
    let model = model.map(str::to_string).or_else(|| model_ids.first().cloned());
    Reach { health, models, model_ids, models_error, model, model_given, date, exact_sim }
}

fn date_from(reach: &Reach, asked: bool) -> DateCheck {
    let skew_s = reach.date.as_ref().and_then(|(d, at)| {
        let server = httpdate::parse_http_date(d).ok()?;
        Some(match server.duration_since(*at) {
            Ok(ahead) => ahead.as_secs() as i64,
            Err(behind) => -(behind.duration().as_secs() as i64),
        })
    });
    DateCheck {
        value: reach.date.as_ref().map(|(d, _)| d.clone()),
        skew_s,
        reading: None,
        error: None,
        asked,
    }
}

/// Engine families by series-name prefix.
const FAMILIES: [(&str, &str); 7] = [
    ("vllm:", "vllm"),
    ("sglang:", "sglang"),
    ("llamacpp:", "llamacpp"),
    ("trtllm", "trtllm"),
    ("tgi_", "tgi"),
    ("lmdeploy", "lmdeploy"),
    ("dynamo_", "dynamo"),
];

/// The engine families whose series names appear in a `/metrics` body.
pub fn metric_families(text: &str) -> Vec<String> {
    let samples = crate::prom::parse(text);
    FAMILIES
        .iter()
        .filter(|(prefix, _)| samples.iter().any(|s| s.name.starts_with(prefix)))
        .map(|(_, name)| name.to_string())
        .collect()
}

async fn metrics(target: &Target) -> MetricsCheck {
    match get_full(target, "/metrics").await {
        Ok((status, _, body)) => {
            let (families, kept) = if status == 200 {
                let text = String::from_utf8_lossy(&body);
                (metric_families(&text), crate::prom::engine_series(&text).len())
            } else {
                (Vec::new(), 0)
            };
            MetricsCheck { answer: Answer::Status(status), families, kept }
        }
        Err(e) => {
            MetricsCheck { answer: Answer::Error(e.to_string()), families: Vec::new(), kept: 0 }
        }
    }
}

/// A streamed request, read to its end, then a second request on the same connection.
async fn keep_alive(
    at: &Target,
    base: &BodyOptions,
    lengths: Option<&MaxTokensCheck>,
    timeout: Duration,
) -> KeepAliveCheck {
    // The field that stops the answer at 8 tokens, so reading it to its end is short.
    let field = lengths.and_then(MaxTokensCheck::field).unwrap_or(base.max_tokens_field);
    let opts = BodyOptions { max_tokens_field: field, ..base.clone() };
    let body = request_body(&opts, &PromptBody::Text(PROMPT.into()), Some(PROBE_TOKENS));
    let exchange = async {
        let mut conn = connect(at.addr).await?;
        let mut req = http::Request::post(at.path.as_str())
            .header(http::header::HOST, at.authority.as_str())
            .header(http::header::CONTENT_TYPE, "application/json")
            .header(http::header::ACCEPT, "text/event-stream");
        for (k, v) in &at.headers {
            req = req.header(k, v);
        }
        let req = req
            .body(http_body_util::Full::new(Bytes::from(body)))
            .map_err(std::io::Error::other)?;
        let sent = conn.sender.send_request(req);
        let resp = drive(&mut conn.driver, sent).await.map_err(std::io::Error::other)?;
        let close = header(resp.headers(), CONNECTION)
            .is_some_and(|v| v.split(',').any(|t| t.trim().eq_ignore_ascii_case("close")));
        read_body(&mut conn, resp.into_body()).await?;
        // A close right after the answer: give its FIN a moment to arrive.
        tokio::time::sleep(Duration::from_millis(20)).await;
        if conn.is_stale() || drive(&mut conn.driver, conn.sender.ready()).await.is_err() {
            return Ok((Some(false), close));
        }
        let sent = conn.sender.send_request(get_request(at, "/health")?);
        let reused = drive(&mut conn.driver, sent).await.is_ok();
        Ok::<_, std::io::Error>((Some(reused), close))
    };
    match within(timeout, exchange).await {
        Ok((reused, connection_close)) => KeepAliveCheck { reused, connection_close, error: None },
        Err(e) => {
            KeepAliveCheck { reused: None, connection_close: false, error: Some(e.to_string()) }
        }
    }
}

/// The tokenizer `bench` would count with: `spec`, else the model's when its name is a
/// Hugging Face id, else the built-in default (an estimate, said so).
async fn tokenizer(spec: Option<&str>, model: &str) -> (Result<Tokenizer, String>, Option<String>) {
    let spec = spec.map(str::to_string);
    let model = model.to_string();
    let resolved = tokio::task::spawn_blocking(move || {
        if let Some(spec) = spec {
            return (Tokenizer::from_spec(&spec).map_err(|e| e.to_string()), None);
        }
        if model.contains('/') {
            if let Ok(t) = Tokenizer::from_spec(&model) {
                return (Ok(t), None);
            }
        }
        let name = servelab_workload::tokenizer::DEFAULT_ENCODING;
        let note = format!(
            "no tokenizer for model '{model}': servelab's counts are estimates from {name}; \
             pass --tokenizer"
        );
        (Tokenizer::builtin(name).map_err(|e| e.to_string()), Some(note))
    });
    match tokio::time::timeout(Duration::from_secs(60), resolved).await {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => (Err(e.to_string()), None),
        Err(_) => (Err("loading the tokenizer took over 60 s".into()), None),
    }
}

async fn prompt_check(d: &Diagnosis, spec: Option<&str>, model: &str) -> PromptCheck {
    let (tok, estimate) = tokenizer(spec, model).await;
    let server = |api| {
        d.api(api).and_then(|c| {
            (c.stream.probe.end == ProbeEnd::Complete)
                .then_some(c.stream.probe.usage)
                .flatten()
                .map(|u| u.prompt_tokens)
        })
    };
    let (tokenizer, client, error) = match tok {
        Ok(t) => (t.name().to_string(), Some(t.count(PROMPT) as u64), None),
        Err(e) => (spec.unwrap_or(model).to_string(), None, Some(e)),
    };
    PromptCheck {
        tokenizer,
        estimate,
        error,
        client,
        completions: server(Api::Completions),
        chat: server(Api::Chat),
    }
}

// ---------------------------------------------------------------------------------------
// Advice.

/// The servelab flags a diagnosis calls for.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct Advice {
    /// `--backend`, when the API asked for does not stream and the other does.
    #[serde(serialize_with = "ser_opt_api")]
    pub backend: Option<Api>,
    /// `--model`, when `/v1/models` cannot name it (bench would not find it).
    pub model: Option<String>,
    /// `--max-tokens-field`, when not `auto`.
    #[serde(serialize_with = "ser_opt_field")]
    pub max_tokens_field: Option<MaxTokensField>,
    /// `--no-stream-usage`: the server refuses `stream_options`.
    pub no_stream_usage: bool,
    /// `--continuous-usage on` is worth trying: the server gives usage on every chunk when
    /// asked (exact per-chunk token counts). Optional: not in [`Advice::flags`].
    pub continuous_usage: bool,
    /// `--server-metrics-interval 0`: no `/metrics` servelab can read.
    pub no_server_metrics: bool,
    /// Drop `--ignore-eos`: the server refuses `ignore_eos` or `min_tokens`.
    pub drop_ignore_eos: bool,
    /// Why no flags can be said yet (the server did not answer, no model is known).
    pub blocked: Option<String>,
    /// What else the user should know, in words.
    pub notes: Vec<String>,
}

impl Advice {
    /// The flags to add, in command-line form.
    pub fn flags(&self) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(api) = self.backend {
            out.push(format!("--backend {}", api.backend()));
        }
        if let Some(m) = &self.model {
            out.push(format!("--model {m}"));
        }
        if let Some(f) = self.max_tokens_field {
            out.push(format!("--max-tokens-field {}", f.as_str()));
        }
        if self.no_stream_usage {
            out.push("--no-stream-usage".into());
        }
        if self.no_server_metrics {
            out.push("--server-metrics-interval 0".into());
        }
        out
    }

    /// The flags to leave out.
    pub fn drop(&self) -> Vec<String> {
        if self.drop_ignore_eos {
            vec!["--ignore-eos".into()]
        } else {
            Vec::new()
        }
    }

    /// Flags worth trying, not needed.
    pub fn optional(&self) -> Vec<String> {
        if self.continuous_usage {
            vec!["--continuous-usage on".into()]
        } else {
            Vec::new()
        }
    }

    /// One line: `Use these flags: ...` (what to drop, what is optional).
    pub fn line(&self) -> String {
        if let Some(why) = &self.blocked {
            return format!("Use these flags: cannot tell yet: {why}");
        }
        let flags = self.flags();
        let drop = self.drop();
        let mut line = if flags.is_empty() {
            "Use these flags: none needed".to_string()
        } else {
            format!("Use these flags: {}", flags.join(" "))
        };
        if !drop.is_empty() {
            line.push_str(&format!("; drop {}", drop.join(" ")));
        }
        let optional = self.optional();
        if !optional.is_empty() {
            line.push_str(&format!(
                " (optional: {}, exact per-chunk token counts)",
                optional.join(" ")
            ));
        }
        line
    }
}

/// The flags a diagnosis calls for: a pure function of what was found.
pub fn advise(d: &Diagnosis) -> Advice {
    advise_parts(&d.preflight, d.other.as_ref(), d.usage.as_ref(), Some(&d.metrics))
}

fn advise_parts(
    pre: &Preflight,
    other: Option<&ApiChecks>,
    usage: Option<&UsageCheck>,
    metrics: Option<&MetricsCheck>,
) -> Advice {
    let mut a = Advice::default();
    let reach = &pre.reach;
    if !reach.reachable() {
        a.blocked = Some("the server did not answer".into());
        a.notes.push(format!(
            "the server did not answer ({}; {}): check --base-url",
            reach.health.describe("GET /health"),
            reach.models.describe("GET /v1/models")
        ));
        return a;
    }
    let Some(model) = &reach.model else {
        a.blocked = Some("no model to ask for".into());
        a.notes.push(format!(
            "no model to ask for ({}): pass --model NAME",
            reach.models_error.as_deref().unwrap_or("GET /v1/models listed none")
        ));
        return a;
    };
    if let Some(e) = &reach.models_error {
        a.model = Some(model.clone());
        a.notes.push(format!("{e}: bench cannot find the model itself, so pass --model"));
    } else if reach.model_given && !reach.model_ids.contains(model) {
        a.notes.push(format!(
            "--model {model} is not among the models /v1/models lists ({})",
            reach.model_ids.join(", ")
        ));
    }
    let asked = pre.checks.as_ref();
    let used = match (asked, other) {
        (Some(c), _) if c.stream.ok() => c,
        (_, Some(o)) if o.stream.ok() => {
            a.backend = Some(o.stream.api);
            a.notes.push(format!(
                "streaming fails on {} ({}): use {}",
                pre.api.default_endpoint(),
                asked.and_then(|c| c.stream.probe.failure()).unwrap_or_default(),
                o.stream.api.default_endpoint()
            ));
            o
        }
        (Some(c), _) => {
            a.blocked = Some("streaming works in neither API".into());
            a.notes.push(format!(
                "streaming fails on {}: {}",
                pre.api.default_endpoint(),
                c.stream.probe.failure().unwrap_or_default()
            ));
            return a;
        }
        (None, _) => return a,
    };
    let api = used.stream.api;
    if !used.stream.body.stream_usage {
        a.no_stream_usage = true;
        if let Some((status, _)) = &used.stream.refused_first {
            a.notes.push(format!(
                "the server refuses stream_options (HTTP {status}): usage comes only where it \
                 sends it unasked"
            ));
        }
    }
    if used.stream.probe.notes.no_done {
        a.notes.push(
            "the stream ends without data: [DONE]; servelab takes the finish_reason chunk as \
             the end"
                .into(),
        );
    }
    if let Some(m) = &used.max_tokens {
        match m.field() {
            Some(MaxTokensField::Auto) => {}
            Some(f) => {
                a.max_tokens_field = Some(f);
                let ignored = MaxTokensField::Auto.names(api).join(", ");
                a.notes.push(format!(
                    "{ignored} is ignored on {}: output lengths would be the server's default",
                    api.default_endpoint()
                ));
            }
            None => a.notes.push(format!(
                "{} honours neither max_tokens nor max_completion_tokens: every request \
                 generates the server's default length",
                api.default_endpoint()
            )),
        }
    }
    let refusals: Vec<String> =
        [("ignore_eos", &used.ignore_eos), ("min_tokens", &used.min_tokens)]
            .into_iter()
            .filter_map(|(name, c)| match c {
                FieldCheck::Refused { status, .. } => Some(format!("{name} (HTTP {status})")),
                _ => None,
            })
            .collect();
    if !refusals.is_empty() {
        a.drop_ignore_eos = true;
        a.notes.push(format!(
            "the server refuses {}, which --ignore-eos sends: without it requests may end early \
             at the model's end of sequence, so output lengths vary (servelab counts what came)",
            refusals.join(" and ")
        ));
    } else if let FieldCheck::Accepted { honoured: Some(false), .. } = &used.ignore_eos {
        a.notes.push("ignore_eos is accepted but the answer still ended at its EOS".into());
    }
    if let Some(u) = usage {
        if u.continuous_honoured() == Some(true) && !a.no_stream_usage {
            a.continuous_usage = true;
        }
        if !u.any() {
            a.notes.push(
                "the server sends no usage: output tokens are counted with servelab's \
                 tokenizer (pass --tokenizer for exact counts)"
                    .into(),
            );
        }
    }
    if let Some(m) = metrics {
        if m.answer != Answer::Status(200) || m.kept == 0 {
            a.no_server_metrics = true;
        }
    }
    a
}

// ---------------------------------------------------------------------------------------
// Rows.

/// How a check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// As servelab's defaults expect.
    Ok,
    /// Different, and the advice allows for it.
    Warn,
    /// Broken.
    Fail,
    /// Not run.
    Skipped,
}

/// One row: a check, its result in a word or two, the detail, and its value as data.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Check {
    /// The check's name.
    pub check: String,
    /// How it came out.
    pub status: Status,
    /// The result, short.
    pub result: String,
    /// The detail, in words.
    pub detail: String,
    /// The typed finding.
    pub value: Value,
}

fn row(
    check: &str,
    status: Status,
    result: impl Into<String>,
    detail: impl Into<String>,
    value: Value,
) -> Check {
    Check { check: check.into(), status, result: result.into(), detail: detail.into(), value }
}

fn to_value<T: Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

impl Diagnosis {
    /// One row per check, in the order of the table.
    pub fn checks(&self) -> Vec<Check> {
        let mut out = Vec::new();
        let reach = &self.preflight.reach;
        let reachable = reach.reachable();
        out.push(row(
            "reachable",
            if reachable { Status::Ok } else { Status::Fail },
            if reachable { "yes" } else { "no" },
            format!(
                "{}, {}",
                reach.health.describe("GET /health"),
                reach.models.describe("GET /v1/models")
            ),
            to_value(reach),
        ));
        let (status, result, detail) = match (&reach.model, &reach.models_error) {
            (None, e) => (
                Status::Fail,
                "unknown".to_string(),
                format!("{}: pass --model", e.as_deref().unwrap_or("no model listed")),
            ),
            (Some(m), Some(e)) => (Status::Warn, m.clone(), format!("{e}; --model given")),
            (Some(m), None) if reach.model_given && !reach.model_ids.contains(m) => (
                Status::Warn,
                m.clone(),
                format!("not listed by /v1/models ({})", reach.model_ids.join(", ")),
            ),
            (Some(m), None) => (
                Status::Ok,
                m.clone(),
                if reach.model_given {
                    "--model, listed by /v1/models".to_string()
                } else {
                    format!("first of {} listed by /v1/models", reach.model_ids.len())
                },
            ),
        };
        out.push(row("model", status, result, detail, to_value(&reach.model)));
        for api in [Api::Completions, Api::Chat] {
            out.push(self.stream_row(api));
        }
        let used = self.used();
        let stream = used.map(|c| &c.stream).filter(|s| s.ok());
        out.push(match stream {
            Some(s) if s.probe.end == ProbeEnd::Stopped => row(
                "[DONE]",
                Status::Skipped,
                "unknown",
                "the stream was stopped before its end",
                Value::Null,
            ),
            Some(s) if s.probe.notes.no_done => row(
                "[DONE]",
                Status::Warn,
                "missing",
                format!(
                    "{} ends after its finish_reason without data: [DONE]; servelab accepts it",
                    s.api.default_endpoint()
                ),
                Value::Bool(false),
            ),
            Some(s) => row(
                "[DONE]",
                Status::Ok,
                "sent",
                format!("{} ends with data: [DONE]", s.api.default_endpoint()),
                Value::Bool(true),
            ),
            None => match used.and_then(|c| c.stream.probe.failure()) {
                Some(f) if f.contains("[DONE]") => {
                    row("[DONE]", Status::Fail, "missing", f, Value::Bool(false))
                }
                _ => row("[DONE]", Status::Skipped, "not run", "no stream", Value::Null),
            },
        });
        out.extend(self.usage_rows());
        for api in [Api::Chat, Api::Completions] {
            if let Some(r) = self.max_tokens_row(api) {
                out.push(r);
            }
        }
        for (name, pick) in [
            ("ignore_eos", (|c: &ApiChecks| &c.ignore_eos) as fn(&ApiChecks) -> &FieldCheck),
            ("min_tokens", |c: &ApiChecks| &c.min_tokens),
        ] {
            out.push(match used {
                Some(c) => field_row(name, c.stream.api, pick(c)),
                None => row(name, Status::Skipped, "not run", "no stream", Value::Null),
            });
        }
        out.push(self.prompt_row());
        let r = &self.reasoning;
        out.push(if used.is_none_or(|c| !c.stream.ok()) {
            row("reasoning", Status::Skipped, "not run", "no stream", Value::Null)
        } else if r.chunks > 0 {
            let tokens = r.reasoning_tokens.map(|n| format!("; usage counts {n} reasoning tokens"));
            row(
                "reasoning",
                Status::Ok,
                "seen",
                format!(
                    "{} chunks of delta.reasoning_content / delta.reasoning{}",
                    r.chunks,
                    tokens.unwrap_or_default()
                ),
                to_value(r),
            )
        } else {
            row(
                "reasoning",
                Status::Ok,
                "none",
                "no reasoning fields in the probes' streams",
                to_value(r),
            )
        });
        out.push(self.metrics_row());
        out.push(self.date_row());
        out.push(match &self.keep_alive {
            Some(k) => {
                let (status, result, detail) = match (k.reused, k.connection_close, &k.error) {
                    (Some(true), _, _) => {
                        (Status::Ok, "yes", "a second request reused the connection".to_string())
                    }
                    (Some(false), true, _) => (
                        Status::Warn,
                        "no",
                        "the server answers Connection: close: every request opens a connection"
                            .to_string(),
                    ),
                    (Some(false), false, _) => (
                        Status::Warn,
                        "no",
                        "the server closes the connection after each answer without saying so"
                            .to_string(),
                    ),
                    (None, _, e) => {
                        (Status::Skipped, "unknown", e.clone().unwrap_or_else(|| "not run".into()))
                    }
                };
                row("keep-alive", status, result, detail, to_value(k))
            }
            None => row("keep-alive", Status::Skipped, "not run", "no stream", Value::Null),
        });
        out
    }

    fn stream_row(&self, api: Api) -> Check {
        let name = match api {
            Api::Completions => "completions streaming",
            Api::Chat => "chat streaming",
        };
        let Some(c) = self.api(api) else {
            return row(name, Status::Skipped, "not run", "", Value::Null);
        };
        let s = &c.stream;
        let p = &s.probe;
        let asked = api == self.preflight.api;
        let value = to_value(s);
        if !s.ok() {
            let status = if asked { Status::Fail } else { Status::Warn };
            return row(name, status, "fails", p.failure().unwrap_or_default(), value);
        }
        let mut detail = match p.end {
            ProbeEnd::Stopped => {
                format!("stopped past {STOP_AFTER_CHUNKS} chunks ({PROBE_TOKENS} tokens asked)")
            }
            _ => format!("{} chunks, finish_reason {}", p.chunks, p.finish()),
        };
        let mut status = Status::Ok;
        if let Some((code, _)) = &s.refused_first {
            status = Status::Warn;
            detail.push_str(&format!(
                "; only {} (the fuller body got HTTP {code})",
                body_words(&s.body, api)
            ));
        }
        let notes = &p.notes;
        for (on, what) in [
            (notes.bom, "a byte-order mark first".to_string()),
            (notes.other_choices, "other choices than 0".to_string()),
            (notes.after_done, "bytes after [DONE]".to_string()),
        ] {
            if on {
                detail.push_str(&format!("; {what}"));
            }
        }
        if let Some(e) = &notes.encoding {
            detail.push_str(&format!("; {e}-encoded"));
        }
        if let Some(o) = &notes.other_output {
            detail.push_str(&format!("; output as {o}"));
        }
        row(name, status, "ok", detail, value)
    }

    fn usage_rows(&self) -> Vec<Check> {
        let Some(u) = &self.usage else {
            return vec![
                row("usage", Status::Skipped, "not run", "no stream", Value::Null),
                row("stream_options", Status::Skipped, "not run", "no stream", Value::Null),
            ];
        };
        let (status, result) = match &u.asked {
            UsageSeen::Present { at } => (
                Status::Ok,
                at.map_or("present".to_string(), |at| match at {
                    UsageAt::PerChunk => "per chunk".into(),
                    UsageAt::FinishChunk => "finish chunk".into(),
                    UsageAt::Separate => "separate chunk".into(),
                }),
            ),
            UsageSeen::Absent => (Status::Warn, "none".into()),
            UsageSeen::Refused { status, .. } => (Status::Warn, format!("refused ({status})")),
            UsageSeen::NotRun { .. } => (Status::Skipped, "unknown".into()),
        };
        let continuous = match u.continuous_honoured() {
            Some(true) => "honoured",
            Some(false) => "not honoured",
            None => "not run",
        };
        let usage = row(
            "usage",
            status,
            result,
            format!(
                "include_usage: {}; unasked: {}; continuous_usage_stats: {continuous}",
                u.asked.short(),
                u.unasked.short()
            ),
            to_value(u),
        );
        let so = u.stream_options();
        let (status, result, detail) = match so {
            StreamOptions::Honoured => (Status::Ok, "honoured", "usage comes when asked for"),
            StreamOptions::UsageAlways => {
                (Status::Ok, "ignored", "usage comes whether asked for or not")
            }
            StreamOptions::UsageNever => (
                Status::Warn,
                "ignored",
                "no usage either way: servelab counts output tokens with its tokenizer",
            ),
            StreamOptions::Inverted => (Status::Warn, "odd", "usage comes only when not asked for"),
            StreamOptions::Refused => {
                (Status::Warn, "refused", "a request carrying stream_options is refused")
            }
            StreamOptions::Unknown => (Status::Skipped, "unknown", "a usage probe failed"),
        };
        vec![usage, row("stream_options", status, result, detail, to_value(&so))]
    }

    fn max_tokens_row(&self, api: Api) -> Option<Check> {
        let m = self.api(api)?.max_tokens.as_ref()?;
        let name = match api {
            Api::Chat => "max-tokens field (chat)",
            Api::Completions => "max-tokens field (completions)",
        };
        let (status, result) = match m.field() {
            Some(MaxTokensField::Auto) => (Status::Ok, MaxTokensField::Auto.names(api)[0]),
            Some(MaxTokensField::MaxTokens) => (Status::Warn, "max_tokens"),
            Some(MaxTokensField::MaxCompletionTokens) => (Status::Warn, "max_completion_tokens"),
            Some(MaxTokensField::Both) => (Status::Ok, "both"),
            None => (Status::Fail, "neither"),
        };
        let detail = format!(
            "max_completion_tokens: {}; max_tokens: {}",
            m.max_completion_tokens.short(),
            m.max_tokens.short()
        );
        Some(row(name, status, result, detail, to_value(m)))
    }

    fn prompt_row(&self) -> Check {
        let Some(p) = &self.prompt else {
            return row("prompt tokens", Status::Skipped, "not run", "", Value::Null);
        };
        let value = to_value(p);
        let Some(client) = p.client else {
            return row(
                "prompt tokens",
                Status::Skipped,
                "unknown",
                format!("tokenizer {}: {}", p.tokenizer, p.error.as_deref().unwrap_or("")),
                value,
            );
        };
        let mut parts = Vec::new();
        let (status, result) = match (p.completions_diff(), p.completions) {
            (Some(0), _) => (Status::Ok, "match".to_string()),
            (Some(d), Some(s)) => {
                parts.push(format!("completions: server {s}, servelab {client}"));
                (Status::Warn, format!("{d:+}"))
            }
            _ => (Status::Skipped, "unknown".to_string()),
        };
        if result == "match" {
            parts.push(format!("completions: {client} tokens both"));
        } else if p.completions.is_none() {
            parts.push("no usage.prompt_tokens on completions".into());
        }
        match (p.chat_overhead(), p.chat) {
            (Some(d), Some(s)) => {
                parts.push(format!("chat: server {s}, so the chat template adds {d:+} tokens"))
            }
            _ => parts.push("no usage.prompt_tokens on chat".into()),
        }
        parts.push(format!("tokenizer {}", p.tokenizer));
        if p.estimate.is_some() {
            parts.push("an estimate: pass --tokenizer".into());
        }
        row("prompt tokens", status, result, parts.join("; "), value)
    }

    fn metrics_row(&self) -> Check {
        let m = &self.metrics;
        let value = to_value(m);
        match (&m.answer, m.families.is_empty()) {
            (Answer::Status(200), false) => {
                let (status, kept) = if m.kept > 0 {
                    (Status::Ok, format!("servelab keeps {} of its series", m.kept))
                } else {
                    (Status::Warn, "none of its series are ones servelab keeps".to_string())
                };
                row("/metrics", status, m.families.join(", "), kept, value)
            }
            (Answer::Status(200), true) => row(
                "/metrics",
                Status::Warn,
                "no engine series",
                "no vllm:, sglang:, llamacpp:, trtllm, tgi_, lmdeploy or dynamo_ series",
                value,
            ),
            (Answer::Status(s), _) => row(
                "/metrics",
                Status::Warn,
                format!("HTTP {s}"),
                "no engine metrics: the run keeps only the client's view",
                value,
            ),
            (Answer::Error(e), _) => row("/metrics", Status::Warn, "no answer", e.clone(), value),
        }
    }

    fn date_row(&self) -> Check {
        let d = &self.date;
        let value = to_value(d);
        let Some(v) = &d.value else {
            let status = if d.asked { Status::Fail } else { Status::Warn };
            return row(
                "Date header",
                status,
                "missing",
                "no Date header: shards cannot check their start against it",
                value,
            );
        };
        let mut detail = match d.skew_s {
            Some(s) if s.abs() <= 2 => "in step with this host's clock (to the second)".to_string(),
            Some(s) => format!("server clock {s:+} s from this host's"),
            None => format!("unreadable: '{v}'"),
        };
        let mut status = Status::Ok;
        match (&d.reading, &d.error) {
            (Some(r), _) => {
                detail.push_str(&format!(
                    "; read to {:+.1} ± {:.1} ms",
                    r.offset_ms, r.uncertainty_ms
                ));
                if let Some(n) = &r.note {
                    detail.push_str(&format!(" ({n})"));
                }
            }
            (None, Some(e)) => {
                status = Status::Fail;
                detail.push_str(&format!("; reading failed: {e}"));
            }
            (None, None) if !d.asked => detail.push_str("; --clock reads its resolution"),
            _ => {}
        }
        row("Date header", status, "present", detail, value)
    }
}

fn field_row(name: &str, api: Api, c: &FieldCheck) -> Check {
    let value = to_value(c);
    let on = api.default_endpoint();
    match c {
        FieldCheck::Accepted { honoured, tokens, finish_reason } => {
            let finish = finish_reason.as_deref().unwrap_or("none");
            let (status, said) = match honoured {
                Some(true) => (Status::Ok, "the answer had the length asked for"),
                Some(false) => (Status::Warn, "but the answer still ended early"),
                None => (Status::Ok, "whether it is honoured cannot be told"),
            };
            row(
                name,
                status,
                "accepted",
                format!("{on}: {tokens} tokens, finish_reason {finish}: {said}"),
                value,
            )
        }
        FieldCheck::Refused { status, message } => row(
            name,
            Status::Warn,
            format!("refused ({status})"),
            format!("{on}: {message}"),
            value,
        ),
        FieldCheck::Failed { message } => row(name, Status::Fail, "failed", message.clone(), value),
        FieldCheck::NotRun { why } => row(name, Status::Skipped, "not run", why.clone(), value),
    }
}

fn body_words(b: &BodyChoice, api: Api) -> String {
    let usage = if b.stream_usage { "with stream_options" } else { "without stream_options" };
    format!("{usage}, {}", b.max_tokens_field.names(api).join(" + "))
}

fn ser_api<S: serde::Serializer>(api: &Api, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(api.backend())
}

fn ser_opt_api<S: serde::Serializer>(api: &Option<Api>, s: S) -> Result<S::Ok, S::Error> {
    match api {
        Some(a) => s.serialize_str(a.backend()),
        None => s.serialize_none(),
    }
}

fn ser_field<S: serde::Serializer>(f: &MaxTokensField, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(f.as_str())
}

fn ser_opt_field<S: serde::Serializer>(
    f: &Option<MaxTokensField>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match f {
        Some(f) => s.serialize_str(f.as_str()),
        None => s.serialize_none(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probe(end: ProbeEnd, chunks: usize, completion: Option<u64>) -> Probe {
        Probe {
            status: Some(200),
            end,
            chunks,
            reasoning_chunks: 0,
            chunk_tokens: false,
            usage: completion.map(|c| Usage {
                prompt_tokens: 12,
                completion_tokens: c,
                reasoning_tokens: None,
            }),
            notes: StreamNotes {
                finish_reason: Some("length".into()),
                usage_at: completion.map(|_| UsageAt::Separate),
                ..StreamNotes::default()
            },
        }
    }

    fn refused(status: u16, message: &str) -> Probe {
        Probe {
            status: Some(status),
            ..Probe::failed(FailureKind::HttpStatus, format!("HTTP {status}: {message}"))
        }
    }

    fn honoured() -> Length {
        Length::Honoured { tokens: PROBE_TOKENS }
    }

    fn clean(api: Api) -> ApiChecks {
        let accepted = FieldCheck::Accepted {
            honoured: Some(true),
            tokens: PROBE_TOKENS,
            finish_reason: Some("length".into()),
        };
        ApiChecks {
            stream: StreamCheck {
                api,
                probe: probe(ProbeEnd::Complete, 8, Some(8)),
                body: BodyChoice { stream_usage: true, max_tokens_field: MaxTokensField::Auto },
                refused_first: None,
            },
            ignore_eos: accepted.clone(),
            min_tokens: accepted,
            max_tokens: Some(MaxTokensCheck {
                api,
                max_tokens: honoured(),
                max_completion_tokens: honoured(),
            }),
        }
    }

    fn reach() -> Reach {
        Reach {
            health: Answer::Status(200),
            models: Answer::Status(200),
            model_ids: vec!["m".into()],
            models_error: None,
            model: Some("m".into()),
            model_given: false,
            date: None,
            exact_sim: false,
        }
    }

    fn diagnosis(api: Api) -> Diagnosis {
        let other = match api {
            Api::Chat => Api::Completions,
            Api::Completions => Api::Chat,
        };
        let present = UsageSeen::Present { at: Some(UsageAt::Separate) };
        Diagnosis {
            preflight: Preflight {
                base_url: "http://127.0.0.1:8000".into(),
                api,
                reach: reach(),
                checks: Some(clean(api)),
            },
            other: Some(clean(other)),
            usage: Some(UsageCheck {
                api,
                asked: present.clone(),
                unasked: UsageSeen::Absent,
                continuous: present,
            }),
            prompt: Some(PromptCheck {
                tokenizer: "cl100k_base".into(),
                estimate: None,
                error: None,
                client: Some(12),
                completions: Some(12),
                chat: Some(21),
            }),
            reasoning: ReasoningCheck { chunks: 0, reasoning_tokens: None },
            metrics: MetricsCheck {
                answer: Answer::Status(200),
                families: vec!["vllm".into()],
                kept: 9,
            },
            date: DateCheck {
                value: Some("Thu, 01 Jan 2026 00:00:00 GMT".into()),
                skew_s: Some(0),
                reading: None,
                error: None,
                asked: false,
            },
            keep_alive: Some(KeepAliveCheck {
                reused: Some(true),
                connection_close: false,
                error: None,
            }),
        }
    }

    #[test]
    fn a_clean_server_needs_no_flags() {
        let d = diagnosis(Api::Completions);
        let a = advise(&d);
        assert_eq!(a, Advice::default());
        assert_eq!(a.line(), "Use these flags: none needed");
        assert_eq!(d.verdict(), Verdict::Ok);
        assert!(d.checks().iter().all(|c| c.status == Status::Ok), "{:#?}", d.checks());
    }

    #[test]
    fn transformers_serve_gets_its_flags() {
        let mut d = diagnosis(Api::Chat);
        d.preflight.reach.models = Answer::Status(500);
        d.preflight.reach.models_error = Some("GET /v1/models answered HTTP 500".into());
        d.preflight.reach.model_ids.clear();
        d.preflight.reach.model_given = true;
        let chat = d.preflight.checks.as_mut().unwrap();
        chat.stream.probe.notes.no_done = true;
        chat.ignore_eos =
            FieldCheck::Refused { status: 422, message: "unknown: ignore_eos".into() };
        chat.min_tokens =
            FieldCheck::Refused { status: 422, message: "unknown: min_tokens".into() };
        chat.max_tokens.as_mut().unwrap().max_completion_tokens =
            Length::Ignored { tokens: 16, stopped: true };
        d.metrics = MetricsCheck { answer: Answer::Status(404), families: Vec::new(), kept: 0 };
        let a = advise(&d);
        assert_eq!(
            a.flags(),
            ["--model m", "--max-tokens-field max_tokens", "--server-metrics-interval 0"]
        );
        assert_eq!(a.drop(), ["--ignore-eos"]);
        assert!(a.line().ends_with("; drop --ignore-eos"), "{}", a.line());
        assert!(a.notes.iter().any(|n| n.contains("without data: [DONE]")), "{:?}", a.notes);
        assert!(a.notes.iter().any(|n| n.contains("may end early")), "{:?}", a.notes);
        assert_eq!(d.verdict(), Verdict::Ok);
    }

    #[test]
    fn a_missing_api_switches_the_backend_and_its_own_checks_decide() {
        let mut d = diagnosis(Api::Completions);
        let c = d.preflight.checks.as_mut().unwrap();
        c.stream.probe = Probe { status: Some(404), ..refused(404, "Not Found") };
        let chat = d.other.as_mut().unwrap();
        chat.max_tokens.as_mut().unwrap().max_completion_tokens =
            Length::Refused { status: 400, message: "no".into() };
        let a = advise(&d);
        assert_eq!(a.flags(), ["--backend openai-chat", "--max-tokens-field max_tokens"]);
        assert_eq!(d.verdict(), Verdict::CheckFailed);
        let rows = d.checks();
        let row = rows.iter().find(|r| r.check == "completions streaming").unwrap();
        assert_eq!((row.status, row.result.as_str()), (Status::Fail, "fails"));
    }

    #[test]
    fn refused_stream_options_asks_for_no_stream_usage_and_not_continuous() {
        let mut d = diagnosis(Api::Completions);
        let s = &mut d.preflight.checks.as_mut().unwrap().stream;
        s.body.stream_usage = false;
        s.refused_first = Some((422, "HTTP 422: stream_options".into()));
        let u = d.usage.as_mut().unwrap();
        u.asked = UsageSeen::Refused { status: 422, message: "x".into() };
        u.continuous = UsageSeen::NotRun { why: "stream_options is refused".into() };
        let a = advise(&d);
        assert_eq!(a.flags(), ["--no-stream-usage"]);
        assert_eq!(d.usage.as_ref().unwrap().stream_options(), StreamOptions::Refused);
    }

    #[test]
    fn unreachable_and_modelless_servers_end_with_code_two_and_no_flags() {
        let mut d = diagnosis(Api::Completions);
        d.preflight.reach.health = Answer::Error("connection refused".into());
        d.preflight.reach.models = Answer::Error("connection refused".into());
        assert_eq!(d.verdict(), Verdict::Unreachable);
        let a = advise(&d);
        assert!(a.flags().is_empty());
        assert_eq!(a.line(), "Use these flags: cannot tell yet: the server did not answer");
        assert!(a.notes[0].contains("did not answer"), "{:?}", a.notes);
        let mut d = diagnosis(Api::Completions);
        d.preflight.reach.model = None;
        d.preflight.reach.models_error = Some("GET /v1/models answered HTTP 500".into());
        assert_eq!(d.verdict(), Verdict::Unreachable);
        assert!(advise(&d).notes[0].contains("pass --model"));
    }

    #[test]
    fn the_length_field_to_use() {
        let check = |api, mt: Length, mct: Length| {
            MaxTokensCheck { api, max_tokens: mt, max_completion_tokens: mct }.field()
        };
        let ignored = || Length::Ignored { tokens: 40, stopped: false };
        let unknown = || Length::Unknown { why: "eos".into() };
        assert_eq!(check(Api::Chat, honoured(), honoured()), Some(MaxTokensField::Auto));
        assert_eq!(check(Api::Chat, honoured(), ignored()), Some(MaxTokensField::MaxTokens));
        assert_eq!(check(Api::Chat, ignored(), ignored()), None);
        assert_eq!(check(Api::Chat, unknown(), ignored()), Some(MaxTokensField::Auto));
        assert_eq!(check(Api::Chat, ignored(), unknown()), Some(MaxTokensField::Auto));
        assert_eq!(
            check(Api::Completions, ignored(), honoured()),
            Some(MaxTokensField::MaxCompletionTokens)
        );
        assert_eq!(check(Api::Completions, honoured(), ignored()), Some(MaxTokensField::Auto));
    }

    #[test]
    fn probes_are_read_as_verdicts() {
        assert_eq!(Length::of(&probe(ProbeEnd::Complete, 8, Some(8))), honoured());
        assert_eq!(
            Length::of(&probe(ProbeEnd::Stopped, 16, None)),
            Length::Ignored { tokens: 16, stopped: true }
        );
        assert_eq!(
            Length::of(&probe(ProbeEnd::Complete, 20, Some(20))),
            Length::Ignored { tokens: 20, stopped: false }
        );
        let mut early = probe(ProbeEnd::Complete, 3, Some(3));
        early.notes.finish_reason = Some("stop".into());
        assert!(matches!(Length::of(&early), Length::Unknown { .. }));
        assert_eq!(
            FieldCheck::of(&early),
            FieldCheck::Accepted {
                honoured: Some(false),
                tokens: 3,
                finish_reason: Some("stop".into())
            }
        );
        let r = refused(422, "unknown field ignore_eos");
        assert_eq!(
            FieldCheck::of(&r),
            FieldCheck::Refused { status: 422, message: "unknown field ignore_eos".into() }
        );
        assert!(matches!(Length::of(&r), Length::Refused { status: 422, .. }));
        let timeout = Probe::failed(FailureKind::Timeout, "no complete response".into());
        assert!(matches!(FieldCheck::of(&timeout), FieldCheck::Failed { .. }));
        assert_eq!(timeout.refused(), None);
        // A 5xx is a failure, not a refusal of the field.
        let e = Probe { status: Some(500), ..Probe::failed(FailureKind::HttpStatus, "x".into()) };
        assert_eq!(e.refused(), None);
    }

    #[test]
    fn usage_and_stream_options_verdicts() {
        let present = |at| UsageSeen::Present { at: Some(at) };
        let u =
            |asked, unasked, continuous| UsageCheck { api: Api::Chat, asked, unasked, continuous };
        let c = u(present(UsageAt::Separate), UsageSeen::Absent, present(UsageAt::PerChunk));
        let mut d = diagnosis(Api::Chat);
        d.usage = Some(c.clone());
        // Worth trying, not needed.
        let a = advise(&d);
        assert_eq!(
            (a.flags(), a.optional()),
            (Vec::<String>::new(), vec!["--continuous-usage on".to_string()])
        );
        assert!(a
            .line()
            .ends_with("(optional: --continuous-usage on, exact per-chunk token counts)"));
        assert_eq!(
            (c.stream_options(), c.continuous_honoured()),
            (StreamOptions::Honoured, Some(true))
        );
        let c = u(
            present(UsageAt::FinishChunk),
            present(UsageAt::FinishChunk),
            present(UsageAt::FinishChunk),
        );
        assert_eq!(
            (c.stream_options(), c.continuous_honoured()),
            (StreamOptions::UsageAlways, Some(false))
        );
        let c = u(UsageSeen::Absent, UsageSeen::Absent, UsageSeen::Absent);
        assert_eq!(c.stream_options(), StreamOptions::UsageNever);
        assert!(!c.any());
    }

    #[tokio::test]
    async fn endpoints_keep_the_base_urls_prefix() {
        let t = Target::resolve("http://127.0.0.1:8000/gw/", "/v1/completions").await.unwrap();
        assert_eq!(endpoint(&t, Api::Chat, false).path, "/gw/v1/chat/completions");
        assert_eq!(endpoint(&t, Api::Completions, true).path, "/gw/v1/completions");
        let t = Target::resolve("http://127.0.0.1:8000", "/").await.unwrap();
        assert_eq!(endpoint(&t, Api::Completions, true).path, "/v1/completions");
        // bench's --endpoint is kept for the API asked for, not for the other.
        let t =
            Target::resolve("http://127.0.0.1:8000/gw", "/openai/v1/completions").await.unwrap();
        assert_eq!(endpoint(&t, Api::Completions, true).path, "/gw/openai/v1/completions");
        assert_eq!(endpoint(&t, Api::Chat, false).path, "/gw/v1/chat/completions");
    }

    #[test]
    fn metric_families_by_series_name() {
        let text = "# HELP x\nvllm:num_requests_running{a=\"b\"} 1\ntgi_queue_size 0\n\
                    python_gc_objects_collected_total 3\n";
        assert_eq!(metric_families(text), ["vllm", "tgi"]);
        assert!(metric_families("process_cpu_seconds_total 1\n").is_empty());
    }
}
