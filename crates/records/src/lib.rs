//! What one benchmark run observed, request by request.
//!
//! This crate is the contract between the measuring loop (`servelab-client`), which fills
//! records as responses stream in, and everything downstream (`servelab-metrics`,
//! `servelab-outputs`, the store), which only reads them. It holds data, no logic beyond
//! small accessors, so that every later stage is a pure function of these types.
//!
//! All times are nanoseconds since the run's origin (one `Instant` taken before the first
//! arrival), so records serialize compactly and compare across requests exactly.
//!
//! Below every stage that reads records, it also holds the few definitions those stages must
//! share exactly and that the engine model (which sits beside metrics, not above it) needs
//! too: numpy's [`stats::percentile`], the `ISL:OSL` pair ([`IslOsl`]), the published sweep
//! table ([`published`]) and civil-date arithmetic ([`time`]).

#![warn(missing_docs)]
#![cfg_attr(not(test), warn(unused_crate_dependencies))]

pub mod gpu;
pub mod isl_osl;
pub mod published;
pub mod reasoning;
pub mod stats;
pub mod time;

use std::collections::BTreeMap;

pub use gpu::{GpuReading, GpuScrape, GpuSource};
pub use isl_osl::{IslOsl, NotIslOsl};
pub use published::{PointSummary, PublishedColumn, PUBLISHED_COLUMNS};
pub use reasoning::ReasoningParser;
use serde::{Deserialize, Serialize};
pub use servelab_load::{LoadSpec, Ramp, RampStrategy, Shard};

/// Nanoseconds since the run origin.
pub type Nanos = u64;

/// One request as the client saw it, from its scheduled arrival to its last byte.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RequestRecord {
    /// Position in the arrival schedule (0-based, warm-ups included).
    pub index: u64,
    /// Warm-up requests are recorded but excluded from metrics.
    #[serde(default)]
    pub warmup: bool,
    /// When the schedule said this request arrives (open-loop arrival time).
    pub scheduled_ns: Nanos,
    /// When the request was due to be sent: the later of its arrival and the moment a
    /// concurrency slot was freed by the request before it. Latencies are measured from here,
    /// so the tool's own lateness counts against it instead of hiding (coordinated omission).
    pub intended_ns: Nanos,
    /// When the request's bytes were handed to the connection.
    pub sent_ns: Nanos,
    /// Prompt length in tokens as the client counted it (dataset tokenizer), if known.
    pub prompt_tokens: Option<u64>,
    /// Output length the client asked for (`max_tokens`), if any.
    pub max_tokens: Option<u64>,
    /// Token counts reported by the server's `usage` object, if it sent one.
    pub usage: Option<Usage>,
    /// Every SSE event that carried output (text, reasoning, or a usage-only count), in order.
    pub chunks: Vec<Chunk>,
    /// When the response ended (last byte, `[DONE]`, or the error), if it did.
    pub end_ns: Option<Nanos>,
    /// HTTP status of the response, if headers arrived.
    pub status: Option<u16>,
    /// Whether the request succeeded, and if not, why.
    pub outcome: Outcome,
    /// The engine's own account of its work on this request (llama.cpp's `timings` object),
    /// when the server sent one. Absent from records of servers that do not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<ServerTimings>,
    /// The client's own lateness on this response: the longest wait, over its stream events,
    /// between the event's bytes arriving (kernel receive time) and the client handling it.
    /// Absent where the platform gives no receive times, and in older records.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_lag_ns: Option<u64>,
    /// How many times the request was sent again on a fresh connection because the kept-alive
    /// connection it first went out on had been closed by the server without an answer (the
    /// keep-alive race). Each retry is a second send the server may have seen; 0 (omitted) for
    /// almost every request and in older records.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub retries: u32,
    /// The session and turn this request was, in a multi-turn run; absent otherwise (and in
    /// older records).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<SessionTurn>,
    /// What the server's stream did that a client has to allow for without failing the
    /// request (no `[DONE]`, bytes after it, other choices, a compressed body, ...), and the
    /// `finish_reason` it gave. Empty (omitted) for a stream exactly as OpenAI's.
    #[serde(default, skip_serializing_if = "StreamNotes::is_plain")]
    pub stream: StreamNotes,
}

/// How a response stream departed from OpenAI's own, as far as a client must allow for it.
/// Each departure servelab accepts is noted here, per request, so a run can say once what the
/// server did instead of hiding it.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct StreamNotes {
    /// The `finish_reason` of choice 0 (`stop`, `length`, ...), when the server gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish_reason: Option<String>,
    /// The stream ended after a `finish_reason` without `data: [DONE]` (`transformers serve`
    /// does this); accepted as complete.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub no_done: bool,
    /// More bytes came after `data: [DONE]`; they were not read as output.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub after_done: bool,
    /// Events carried choices other than index 0 (`n` > 1); only choice 0 is measured.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub other_choices: bool,
    /// The body came content-encoded (`gzip`, `deflate`, `br`) and was decoded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encoding: Option<String>,
    /// A UTF-8 byte-order mark preceded the first event (skipped, as the SSE spec says).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub bom: bool,
    /// Where the `usage` object came, when it came.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage_at: Option<UsageAt>,
    /// Output came only as tool-call arguments or a refusal, not as content (counted as output
    /// all the same).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub other_output: Option<String>,
    /// The reasoning came inside the content as `<think>…</think>` and the client parsed it
    /// out: the chunks wholly inside it are labelled [`ChunkKind::Reasoning`], and the one
    /// chunk holding both the reasoning's end and the answer's start, if any, is described
    /// here (text is never changed or split, so every other figure stays as measured).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub think: Option<ThinkTags>,
}

/// Where the answer began, in a response whose reasoning came as `<think>…</think>` inside
/// the content.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ThinkTags {
    /// The chunk (index in the record's `chunks`) whose text ends the reasoning (`</think>`)
    /// and begins the answer; `None` when no chunk held both (the tag ended a chunk, or no
    /// answer came). That chunk stays [`ChunkKind::Content`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mixed_chunk: Option<u32>,
    /// Bytes of that chunk's text that are reasoning (up to and including `</think>`).
    #[serde(default)]
    pub reasoning_bytes: u32,
    /// Of that chunk's tokens, those of the reasoning: the tokens that end within its first
    /// `reasoning_bytes` bytes when the output was retokenized, else the chunk's count shared
    /// by bytes. `None` until the chunk's count is known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_tokens: Option<u32>,
}

impl StreamNotes {
    /// True when there is nothing to record (no finish reason, no departure).
    pub fn is_plain(&self) -> bool {
        *self == StreamNotes::default()
    }
}

/// Where a stream's `usage` object came.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UsageAt {
    /// On every output chunk, cumulative (vLLM's `continuous_usage_stats`).
    PerChunk,
    /// On the chunk that carried the `finish_reason` (llama.cpp, `transformers serve`).
    FinishChunk,
    /// On its own chunk with no choices, after the last output (OpenAI, vLLM).
    Separate,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// Where a request sits in a multi-turn run: turn `turn` (0-based) of session `session`
/// (the session's position in the workload, 0-based).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionTurn {
    /// The session's position in the workload.
    pub session: u64,
    /// The turn's position in its session.
    pub turn: u32,
}

/// What the engine says it spent on one request, from its own clock. Each field is `None`
/// when the server did not report it.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct ServerTimings {
    /// Prompt tokens the engine processed (llama.cpp `prompt_n`; excludes tokens reused from
    /// its prompt cache, so it can be below `usage.prompt_tokens`).
    pub prompt_tokens: Option<u64>,
    /// Time the engine spent processing the prompt, ms (llama.cpp `prompt_ms`).
    pub prompt_ms: Option<f64>,
    /// Tokens the engine generated (llama.cpp `predicted_n`).
    pub generated_tokens: Option<u64>,
    /// Time from the end of prompt processing to the last token, ms (llama.cpp
    /// `predicted_ms`).
    pub generation_ms: Option<f64>,
}

/// Server-reported token accounting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Usage {
    /// Prompt tokens the server counted.
    pub prompt_tokens: u64,
    /// Output tokens the server generated (reasoning included).
    pub completion_tokens: u64,
    /// Reasoning tokens when the server breaks them out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_tokens: Option<u64>,
}

/// What kind of output a chunk carried.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChunkKind {
    /// Answer text (`text` for completions, `delta.content` for chat).
    Content,
    /// Reasoning text (`delta.reasoning_content` / `delta.reasoning`).
    Reasoning,
}

/// One SSE event that carried output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Chunk {
    /// When the network read that completed this event returned.
    pub t_ns: Nanos,
    /// Whether it carried answer or reasoning text.
    pub kind: ChunkKind,
    /// The text it carried (may be empty for a usage-only event).
    pub text: String,
    /// Tokens in this chunk. Filled during the run from `continuous_usage_stats` when the
    /// server sends them, otherwise after the run by retokenizing the whole output (never on
    /// the hot path). `None` until known.
    pub tokens: Option<u32>,
}

/// How a request ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "result", rename_all = "snake_case")]
pub enum Outcome {
    /// The response completed normally.
    Success,
    /// The request failed.
    Failure {
        /// The class of failure.
        kind: FailureKind,
        /// What went wrong, in words (status line, error text, I/O error).
        message: String,
    },
}

/// Failure classes, so a report can say *why* requests failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureKind {
    /// The server answered with a non-2xx status.
    HttpStatus,
    /// No response or no progress within the timeout.
    Timeout,
    /// The connection could not be made.
    Connect,
    /// The connection was reset or closed before the response completed.
    Reset,
    /// The server sent an error object inside the stream.
    StreamError,
    /// An SSE event was not valid JSON of the expected shape, or bytes were not UTF-8.
    Malformed,
    /// The stream ended without `[DONE]`.
    Incomplete,
    /// The run was interrupted (Ctrl-C or duration end) while the request was in flight.
    Cancelled,
    /// The response passed what servelab keeps of one response (its output text or its
    /// chunk count); it was read no further.
    TooLarge,
}

impl FailureKind {
    /// Every failure kind, in report order.
    pub const ALL: [FailureKind; 9] = [
        FailureKind::HttpStatus,
        FailureKind::Timeout,
        FailureKind::Connect,
        FailureKind::Reset,
        FailureKind::StreamError,
        FailureKind::Malformed,
        FailureKind::Incomplete,
        FailureKind::Cancelled,
        FailureKind::TooLarge,
    ];

    /// The snake_case name stored and shown: `http_status`, `timeout`, ...
    pub fn as_str(self) -> &'static str {
        match self {
            FailureKind::HttpStatus => "http_status",
            FailureKind::Timeout => "timeout",
            FailureKind::Connect => "connect",
            FailureKind::Reset => "reset",
            FailureKind::StreamError => "stream_error",
            FailureKind::Malformed => "malformed",
            FailureKind::Incomplete => "incomplete",
            FailureKind::Cancelled => "cancelled",
            FailureKind::TooLarge => "too_large",
        }
    }
}

impl std::fmt::Display for FailureKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl RequestRecord {
    /// Request `index`, arriving at `scheduled_ns` and due at `intended_ns`, before it is
    /// sent: no bytes, no response, a success until something fails. The runner fills it in
    /// as the response arrives; tests set the fields they need with `..`.
    pub fn due(index: u64, scheduled_ns: Nanos, intended_ns: Nanos) -> Self {
        RequestRecord {
            index,
            warmup: false,
            scheduled_ns,
            intended_ns,
            sent_ns: 0,
            prompt_tokens: None,
            max_tokens: None,
            usage: None,
            chunks: Vec::new(),
            end_ns: None,
            status: None,
            outcome: Outcome::Success,
            server: None,
            read_lag_ns: None,
            retries: 0,
            session: None,
            stream: StreamNotes::default(),
        }
    }

    /// True when the outcome is [`Outcome::Success`].
    pub fn is_success(&self) -> bool {
        matches!(self.outcome, Outcome::Success)
    }

    /// Time from intended send to the first chunk carrying any output text (reasoning or
    /// content). A role-only or usage-only event does not count.
    pub fn first_token_ns(&self) -> Option<Nanos> {
        self.chunks.iter().find(|c| !c.text.is_empty()).map(|c| c.t_ns)
    }

    /// Time of the first chunk carrying answer content (after any reasoning).
    pub fn first_content_ns(&self) -> Option<Nanos> {
        self.chunks
            .iter()
            .find(|c| c.kind == ChunkKind::Content && !c.text.is_empty())
            .map(|c| c.t_ns)
    }

    /// The whole generated text, reasoning and content, in arrival order.
    pub fn output_text(&self) -> String {
        self.chunks.iter().map(|c| c.text.as_str()).collect()
    }

    /// Output tokens: the server's count when it reported one, else the sum of known chunk
    /// counts.
    pub fn output_tokens(&self) -> Option<u64> {
        if let Some(u) = self.usage {
            return Some(u.completion_tokens);
        }
        let mut total = 0u64;
        for c in &self.chunks {
            total += u64::from(c.tokens?);
        }
        Some(total)
    }
}

/// The standard process collector's start instant (Unix seconds), which Python engines (vLLM,
/// SGLang) export and a scrape keeps beside the engine's series: when it changes, the engine
/// restarted, whatever its counters say.
pub const PROCESS_START_SERIES: &str = "process_start_time_seconds";

/// One scrape of the server's Prometheus `/metrics`, taken while a run went on.
///
/// Only the engine's own series are kept (`vllm:*`, `llamacpp:*`, `sglang:*`), each reduced
/// to one number over its label sets, and histogram buckets are dropped (`_sum` and `_count`
/// stay): a few dozen numbers per scrape, whatever the engine exports.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServerScrape {
    /// Milliseconds since the run origin; negative for the scrape taken before it.
    pub t_ms: f64,
    /// Series name to value; empty when the scrape failed.
    pub values: BTreeMap<String, f64>,
    /// Why the scrape failed (no answer, an HTTP status, a body without engine series).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// What produced a run, as the results store files it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RunKind {
    /// One `servelab bench`.
    Bench,
    /// One point of a `servelab sweep`.
    SweepPoint,
    /// One `servelab bench`-like run predicted by the engine model (`servelab predict`), not
    /// measured.
    Predicted,
    /// One point of a `servelab predict` sweep: predicted, not measured.
    PredictedSweepPoint,
}

impl RunKind {
    /// The name stored and shown: `bench`, `sweep-point`, `predicted`,
    /// `predicted-sweep-point`.
    pub fn as_str(self) -> &'static str {
        match self {
            RunKind::Bench => "bench",
            RunKind::SweepPoint => "sweep-point",
            RunKind::Predicted => "predicted",
            RunKind::PredictedSweepPoint => "predicted-sweep-point",
        }
    }

    /// The same kind of run, predicted by the engine model instead of measured.
    pub fn predicted(self) -> RunKind {
        match self {
            RunKind::Bench | RunKind::Predicted => RunKind::Predicted,
            RunKind::SweepPoint | RunKind::PredictedSweepPoint => RunKind::PredictedSweepPoint,
        }
    }

    /// True for a run the engine model predicted (nothing was measured).
    pub fn is_predicted(self) -> bool {
        matches!(self, RunKind::Predicted | RunKind::PredictedSweepPoint)
    }

    /// The kind a stored name stands for.
    pub fn parse(s: &str) -> Option<RunKind> {
        match s {
            "bench" => Some(RunKind::Bench),
            "sweep-point" => Some(RunKind::SweepPoint),
            "predicted" => Some(RunKind::Predicted),
            "predicted-sweep-point" => Some(RunKind::PredictedSweepPoint),
            _ => None,
        }
    }
}

/// How the run was driven; stored with the result so any number can be traced to its setup.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct RunInfo {
    /// API flavour the requests used (`openai` for completions, `openai-chat` for chat).
    pub backend: String,
    /// The server's base URL.
    pub base_url: String,
    /// The request path (`/v1/completions`, `/v1/chat/completions`).
    pub endpoint: String,
    /// The model name sent in each request.
    pub model: String,
    /// The tokenizer prompts and outputs were counted with, if known.
    pub tokenizer: Option<String>,
    /// The dataset's label, e.g. `random(1024:128)` or `sharegpt(path)`.
    pub dataset: String,
    /// Measured requests planned (warm-ups excluded).
    pub num_prompts: u64,
    /// Rate, burstiness, concurrency cap and duration (serialized as four fields here).
    #[serde(flatten)]
    pub load: LoadSpec,
    /// The ramped request rate the run used instead of `load`'s rate (`--ramp-up-*`):
    /// `load.request_rate` is then `None`, which alone would read as "all at once".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ramp: Option<Ramp>,
    /// Warm-up requests sent before the measured ones.
    pub num_warmups: u64,
    /// Seed for the dataset sampling and the arrival schedule.
    pub seed: u64,
    /// True when the target was the built-in simulator started in-process.
    pub simulated: bool,
    /// Wall-clock start as RFC 3339 / ISO 8601 (`YYYY-MM-DDTHH:MM:SSZ`).
    pub started_at: String,
    /// The servelab version that ran it (empty for imported runs).
    pub servelab_version: String,
    /// True when the run was interrupted and holds only part of the schedule.
    pub interrupted: bool,
    /// Set when this run is one shard of a larger run (absent otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<ShardInfo>,
    /// GPUs serving the deployment under test, as the user stated (`--gpus`) or a prediction
    /// modelled; absent when unknown. Per-GPU throughput and cost divide by it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpus: Option<u32>,
}

impl RunInfo {
    /// The load in words, as the run did it: `c=4`, `rate=2`, `inf`, or for a ramp
    /// `ramp linear 1→10 req/s` (with ` c=N` under a cap).
    pub fn load_words(&self) -> String {
        let Some(r) = self.ramp else { return self.load.to_string() };
        let how = match r.strategy {
            RampStrategy::Linear => "linear",
            RampStrategy::Exponential => "exponential",
        };
        let cap = self.load.max_concurrency.map(|c| format!(" c={c}")).unwrap_or_default();
        format!("ramp {how} {}→{} req/s{cap}", r.start_rps, r.end_rps)
    }
}

/// Which part of a larger run a shard sent, and how its clock compared with the target's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShardInfo {
    /// This shard (`index` of `count`).
    #[serde(flatten)]
    pub shard: Shard,
    /// The shared time zero of every shard's schedule (RFC 3339, milliseconds), when given.
    pub start_at: Option<String>,
    /// The reference clock minus this host's, in ms (`clock_reference` says which reference;
    /// absent: the target's `Date` header).
    pub clock_offset_ms: Option<f64>,
    /// The true offset is within `clock_offset_ms` ± this, in ms, as far as the reference
    /// stamps its own clock exactly. Absent in runs that read one whole-second `Date`: about
    /// ±500 ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_uncertainty_ms: Option<f64>,
    /// What the offset was read against, e.g. `date http://gpu-0:8000/v1/models` or
    /// `ntp 10.0.0.1:123`. Offsets compare only against the same reference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_reference: Option<String>,
}

impl ShardInfo {
    /// How far from its offset the true one may be, ms: the stated uncertainty, else that of
    /// one whole-second `Date` (±500 ms).
    pub fn clock_uncertainty_or_whole_second(&self) -> f64 {
        self.clock_uncertainty_ms.unwrap_or(500.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(t: Nanos, kind: ChunkKind, text: &str, tokens: Option<u32>) -> Chunk {
        Chunk { t_ns: t, kind, text: text.into(), tokens }
    }

    fn record(chunks: Vec<Chunk>, usage: Option<Usage>) -> RequestRecord {
        RequestRecord {
            sent_ns: 10,
            prompt_tokens: Some(4),
            max_tokens: Some(3),
            usage,
            chunks,
            end_ns: Some(100),
            status: Some(200),
            ..RequestRecord::due(0, 0, 0)
        }
    }

    #[test]
    fn first_token_skips_empty_chunks_and_first_content_skips_reasoning() {
        let r = record(
            vec![
                chunk(5, ChunkKind::Content, "", Some(0)),
                chunk(20, ChunkKind::Reasoning, "hm", Some(1)),
                chunk(30, ChunkKind::Content, " ok", Some(2)),
            ],
            None,
        );
        assert_eq!(r.first_token_ns(), Some(20));
        assert_eq!(r.first_content_ns(), Some(30));
        assert_eq!(r.output_text(), "hm ok");
        assert_eq!(r.output_tokens(), Some(3));
    }

    #[test]
    fn usage_wins_over_chunk_counts_and_unknown_counts_give_none() {
        let usage = Usage { prompt_tokens: 4, completion_tokens: 7, reasoning_tokens: None };
        let r = record(vec![chunk(1, ChunkKind::Content, "a", None)], Some(usage));
        assert_eq!(r.output_tokens(), Some(7));
        let r = record(vec![chunk(1, ChunkKind::Content, "a", None)], None);
        assert_eq!(r.output_tokens(), None);
    }

    #[test]
    fn kinds_round_trip_and_know_predictions() {
        for k in [RunKind::Bench, RunKind::SweepPoint, RunKind::Predicted] {
            assert_eq!(RunKind::parse(k.as_str()), Some(k));
        }
        assert_eq!(RunKind::parse("predicted-sweep-point"), Some(RunKind::PredictedSweepPoint));
        assert_eq!(RunKind::SweepPoint.predicted(), RunKind::PredictedSweepPoint);
        assert_eq!(RunKind::Bench.predicted(), RunKind::Predicted);
        assert!(RunKind::Bench.predicted().is_predicted());
        assert!(!RunKind::SweepPoint.is_predicted());
        assert_eq!(RunKind::parse("sweep"), None);
    }

    #[test]
    fn record_round_trips_through_json() {
        let mut r = record(vec![chunk(1, ChunkKind::Content, "a", Some(1))], None);
        r.outcome = Outcome::Failure { kind: FailureKind::Reset, message: "boom".into() };
        let s = serde_json::to_string(&r).unwrap();
        assert!(s.contains("\"result\":\"failure\""), "{s}");
        let back: RequestRecord = serde_json::from_str(&s).unwrap();
        assert_eq!(back, r);
    }

    #[test]
    fn retries_are_omitted_when_zero_and_default_to_zero_in_older_records() {
        let mut r = record(vec![], None);
        let s = serde_json::to_string(&r).unwrap();
        assert!(!s.contains("retries"), "{s}");
        let back: RequestRecord = serde_json::from_str(&s).unwrap();
        assert_eq!(back.retries, 0);
        r.retries = 1;
        let s = serde_json::to_string(&r).unwrap();
        assert!(s.contains("\"retries\":1"), "{s}");
        assert_eq!(serde_json::from_str::<RequestRecord>(&s).unwrap(), r);
    }

    #[test]
    fn server_timings_are_omitted_when_absent_and_round_trip_when_present() {
        let mut r = record(vec![], None);
        let s = serde_json::to_string(&r).unwrap();
        assert!(!s.contains("server"), "{s}");
        r.server = Some(ServerTimings {
            prompt_tokens: Some(12),
            prompt_ms: Some(3.5),
            generated_tokens: Some(8),
            generation_ms: None,
        });
        let s = serde_json::to_string(&r).unwrap();
        let back: RequestRecord = serde_json::from_str(&s).unwrap();
        assert_eq!(back, r);
    }
}
