//! CLI options ([`SimArgs`]) and the validated configuration ([`SimConfig`]).

use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use crate::fault::{parse_fault_rate, Fault};
use crate::model::{EngineModel, FixedModel, Jitter, JitterDist, PerTokenModel};
use crate::quirk::{Quirk, Quirks};
use crate::spec::Speculation;
use crate::SimError;

/// Which built-in [`EngineModel`] times the requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum TimingKind {
    /// Constant `--ttft-ms` and `--itl-ms`.
    Fixed,
    /// TTFT = `--overhead-ms` + prompt tokens × `--prefill-us-per-token`; ITL `--itl-ms`.
    PerToken,
}

/// CLI options of `servelab sim serve`.
#[derive(clap::Args, Debug, Clone)]
pub struct SimArgs {
    /// Address to bind.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// Port to bind (0 picks a free one).
    #[arg(long, default_value_t = 8000)]
    pub port: u16,
    /// Model name served by /v1/models and required (when given) in requests.
    #[arg(long = "served-model-name", alias = "model", default_value = "servelab-sim")]
    pub model: String,
    /// Tokenizer: a built-in encoding (cl100k_base, ...) or a tokenizer.json path.
    #[arg(long, default_value = "cl100k_base")]
    pub tokenizer: String,
    /// Prompt + max_tokens beyond this are rejected with 400, like vLLM.
    #[arg(long, default_value_t = 32768)]
    pub max_model_len: u64,
    /// Timing model.
    #[arg(long, value_enum, default_value_t = TimingKind::Fixed)]
    pub timing: TimingKind,
    /// Time to first token (fixed timing), from getting a decode slot.
    #[arg(long, default_value_t = 50.0)]
    pub ttft_ms: f64,
    /// Inter-token latency.
    #[arg(long, default_value_t = 10.0)]
    pub itl_ms: f64,
    /// Jitter scale per token (0 = none); see --jitter-dist.
    #[arg(long, default_value_t = 0.0)]
    pub jitter_ms: f64,
    /// Jitter distribution: normal/uniform are zero-mean and resampled when they would make a
    /// negative gap; exponential is a non-negative extra delay with mean --jitter-ms.
    #[arg(long, value_enum, default_value_t = JitterDist::Normal)]
    pub jitter_dist: JitterDist,
    /// Fixed part of TTFT (per-token timing).
    #[arg(long, default_value_t = 20.0)]
    pub overhead_ms: f64,
    /// Prefill time per prompt token (per-token timing).
    #[arg(long, default_value_t = 100.0)]
    pub prefill_us_per_token: f64,
    /// Tokens per SSE event: K, or A-B drawn uniformly per event (seeded).
    #[arg(long, default_value = "1")]
    pub tokens_per_chunk: String,
    /// At most N requests decode at once; the rest wait in a FIFO queue.
    #[arg(long)]
    pub max_num_seqs: Option<usize>,
    /// Mean of the seeded natural output length (simulated EOS), in tokens.
    #[arg(long, default_value_t = 256.0)]
    pub eos_mean_tokens: f64,
    /// The first N output tokens of each request are reasoning; MIN-MAX draws N uniformly
    /// per request (seeded).
    #[arg(long, default_value = "0")]
    pub reasoning_tokens: String,
    /// How reasoning is sent: field (chat: `delta.reasoning_content`) or think-tags
    /// (`<think>…</think>` in the content).
    #[arg(long, value_enum, default_value_t = crate::ReasoningFormat::Field)]
    pub reasoning_format: crate::ReasoningFormat,
    /// Inject a fault at random: KIND[=ARG]=P, repeatable (e.g. rate-limit=0.05).
    #[arg(long)]
    pub fault_rate: Vec<String>,
    /// /health and all requests answer 503 for the first S seconds.
    #[arg(long, default_value_t = 0.0)]
    pub startup_secs: f64,
    /// Append one JSON line per finished request (the ground truth) to this file.
    #[arg(long)]
    pub truth_log: Option<PathBuf>,
    /// Also record in the truth each request's prompt as the server rendered it and the
    /// answer text it sent (audits of multi-turn histories and shared prefixes; costs memory).
    #[arg(long)]
    pub truth_text: bool,
    /// Seed of every random choice (output text, lengths, jitter, faults).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Serve this engine file's deployment (docs/predict.md): the engine model's scheduler
    /// and step times decide when every token is sent, instead of --timing, --ttft-ms,
    /// --itl-ms and --max-num-seqs. A file, or the name of a built-in one (those of
    /// examples/engines/, e.g. qwen3-8b-h100-tp1).
    #[arg(long, value_name = "FILE|NAME")]
    pub engine: Option<PathBuf>,
    /// With --engine: tensor parallelism of each replica, instead of the file's.
    #[arg(long, requires = "engine")]
    pub tp: Option<u32>,
    /// With --engine: KV-cache format (bf16, fp8, ...), instead of the file's.
    #[arg(long, requires = "engine")]
    pub kv_dtype: Option<String>,
    /// With --engine: tokens per step (the chunked-prefill budget), instead of the file's.
    #[arg(long, requires = "engine")]
    pub max_num_batched_tokens: Option<u32>,
    /// With --engine: the weights' format (bf16, fp8, int4, ...), instead of the model's,
    /// as serving a quantized checkpoint would.
    #[arg(long, requires = "engine", value_name = "DTYPE")]
    pub weight_dtype: Option<String>,
    /// With --engine: reuse the KV blocks of identical prompt prefixes (vLLM's flag; the
    /// engine file's `scheduler.prefix_caching` otherwise). With its `--no-` form, the later
    /// one wins, as in vLLM (a lab appends an option's flag after the command's own).
    #[arg(long, requires = "engine", overrides_with = "no_enable_prefix_caching")]
    pub enable_prefix_caching: bool,
    /// With --engine: no prefix cache: every prompt is computed in full (vLLM's flag).
    #[arg(long, requires = "engine", overrides_with = "enable_prefix_caching")]
    pub no_enable_prefix_caching: bool,
    /// Speculative decoding: every decode step verifies K drafted tokens and sends the
    /// accepted ones with the one it samples (1 to K + 1 tokens per step, one SSE event).
    /// Fixed timing: a step is one --itl-ms. With --engine: the engine's step plus the
    /// roofline cost of verifying K + 1 tokens per sequence (docs/sim.md).
    #[arg(long, value_name = "K")]
    pub speculative_tokens: Option<u32>,
    /// With --speculative-tokens: the probability that one drafted token is accepted (each
    /// independently, until the first rejection).
    #[arg(long, value_name = "P", requires = "speculative_tokens", default_value_t = 0.7)]
    pub acceptance_rate: f64,
    /// Quirks of real servers, applied to every request: a comma-separated LIST, repeatable.
    ///
    /// no-done                       streams end without `data: [DONE]`
    /// reject-ignore-eos             a body with `ignore_eos` gets 422 naming it
    /// reject-min-tokens             a body with `min_tokens` gets 422 naming it
    /// reject-unknown-fields         top-level fields outside OpenAI's request schema get 422
    /// ignore-max-completion-tokens  chat length: `max_tokens`, else --default-max-tokens
    /// ignore-stream-options         usage always on the finish_reason chunk, never per chunk
    /// usage-on-finish-chunk         requested usage on the finish_reason chunk, not its own
    /// no-usage                      no usage object ever
    /// models-error                  GET /v1/models answers 500
    /// no-metrics                    GET /metrics answers 404
    /// no-keep-alive                 `Connection: close` on every response, then close
    /// transformers                  `transformers serve` 5.17.0: no-done, reject-unknown-fields,
    ///                               ignore-max-completion-tokens, ignore-stream-options,
    ///                               models-error, no-metrics
    ///
    /// See docs/sim.md, "Quirks of real servers".
    #[arg(long = "quirk", value_name = "LIST", verbatim_doc_comment)]
    pub quirk: Vec<String>,
    /// Chat output length when the request sets no `max_tokens` under the
    /// ignore-max-completion-tokens quirk.
    #[arg(long, default_value_t = 1024)]
    pub default_max_tokens: u64,
}

/// Tokens per SSE event: uniform in `min..=max` (equal for a fixed K).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkSize {
    /// Fewest tokens in one event (at least 1).
    pub min: u32,
    /// Most tokens in one event (at least `min`).
    pub max: u32,
}

impl FromStr for ChunkSize {
    type Err = SimError;

    fn from_str(s: &str) -> Result<Self, SimError> {
        let bad = || {
            SimError::Config(format!(
                "--tokens-per-chunk '{s}': expected K or A-B with 1 <= A <= B"
            ))
        };
        let (a, b) = match s.split_once('-') {
            Some((a, b)) => (a.trim().parse::<u32>(), b.trim().parse::<u32>()),
            None => (s.trim().parse::<u32>(), s.trim().parse::<u32>()),
        };
        match (a, b) {
            (Ok(min), Ok(max)) if min >= 1 && min <= max => Ok(ChunkSize { min, max }),
            _ => Err(bad()),
        }
    }
}

/// Validated configuration of one simulated engine. [`SimConfig::fixed`] (or `default()`:
/// TTFT 50 ms, ITL 10 ms) and the `with_*` methods build one in code; [`SimArgs::into_config`]
/// from the CLI.
#[derive(Debug, Clone)]
pub struct SimConfig {
    /// Address to bind (a host name or an IP address).
    pub host: String,
    /// Port to bind; 0 picks a free one.
    pub port: u16,
    /// Served model name: listed by `/v1/models`; a request naming another model gets 404.
    pub model: String,
    /// Tokenizer spec for `Tokenizer::from_spec`.
    pub tokenizer: String,
    /// Longest prompt + `max_tokens` accepted, in tokens; longer requests get 400, like vLLM.
    pub max_model_len: u64,
    /// The timing decision.
    pub engine_model: Arc<dyn EngineModel>,
    /// Per-token noise on top of the engine model ([`Jitter::NONE`]: none).
    pub jitter: Jitter,
    /// Tokens per SSE event.
    pub tokens_per_chunk: ChunkSize,
    /// At most this many requests decode at once; the rest wait in a FIFO queue. `None`: no
    /// capacity limit. Unused in engine-model mode, whose scheduler has its own limit.
    pub max_num_seqs: Option<usize>,
    /// Mean of the seeded natural output length (the simulated EOS), in tokens: exponential,
    /// at least 1. Requests with `ignore_eos` generate `max_tokens` instead.
    pub eos_mean_tokens: f64,
    /// How many of each request's first output tokens are reasoning, and how they are sent.
    pub reasoning: crate::Reasoning,
    /// Faults injected at random, each with its probability per request; the first hit wins
    /// and a request's `x-servelab-fault` header overrides them.
    pub fault_rates: Vec<(Fault, f64)>,
    /// `/health` and every request answer 503 for this long after the sim starts.
    pub startup: Duration,
    /// Also append one JSON line per finished request (a [`crate::TruthRecord`]) to this
    /// file, created or truncated. `None`: the truth is kept in memory only.
    pub truth_log: Option<PathBuf>,
    /// Record each request's rendered prompt and answer text in the truth.
    pub truth_text: bool,
    /// Seed of every random choice (output text, lengths, jitter, faults).
    pub seed: u64,
    /// Engine-model mode: this deployment's scheduler and step times decide when every token
    /// is sent, instead of `engine_model`, `jitter`, `tokens_per_chunk` and `max_num_seqs`.
    /// `None`: off.
    pub engine: Option<Arc<servelab_engine::EngineConfig>>,
    /// Quirks of real servers applied to every request ([`Quirks::NONE`]: none, vLLM's
    /// behaviour).
    pub quirks: Quirks,
    /// Chat output length when a request sets no `max_tokens` under
    /// [`Quirk::IgnoreMaxCompletionTokens`] (capped by what `max_model_len` leaves).
    pub default_max_tokens: u64,
    /// Speculative decoding: decode steps of 1 to K + 1 tokens ([`crate::spec`]). `None`: off.
    pub speculative: Option<Speculation>,
}

impl Default for SimConfig {
    fn default() -> Self {
        Self::fixed(50.0, 10.0)
    }
}

/// Milliseconds (user input) to a Duration, rejecting negative or non-finite values.
fn ms(name: &str, v: f64) -> Result<Duration, SimError> {
    if (0.0..1e9).contains(&v) {
        Ok(Duration::from_secs_f64(v / 1e3))
    } else {
        Err(SimError::Config(format!("{name} = {v}: expected a non-negative number")))
    }
}

impl SimConfig {
    /// Fixed timing: TTFT and ITL in milliseconds, everything else default. Negative or
    /// non-finite values are treated as 0.
    pub fn fixed(ttft_ms: f64, itl_ms: f64) -> Self {
        let d = |v: f64| ms("", v).unwrap_or(Duration::ZERO);
        Self {
            host: "127.0.0.1".to_string(),
            port: 0,
            model: "servelab-sim".to_string(),
            tokenizer: servelab_workload::tokenizer::DEFAULT_ENCODING.to_string(),
            max_model_len: 32768,
            engine_model: Arc::new(FixedModel { ttft: d(ttft_ms), itl: d(itl_ms) }),
            jitter: Jitter::NONE,
            tokens_per_chunk: ChunkSize { min: 1, max: 1 },
            max_num_seqs: None,
            eos_mean_tokens: 256.0,
            reasoning: crate::Reasoning::fixed(0),
            fault_rates: Vec::new(),
            startup: Duration::ZERO,
            truth_log: None,
            truth_text: false,
            seed: 0,
            engine: None,
            quirks: Quirks::NONE,
            default_max_tokens: DEFAULT_MAX_TOKENS,
            speculative: None,
        }
    }

    /// Speculative decoding: `tokens` drafted per step, each accepted with probability
    /// `acceptance` ([`crate::spec`]).
    pub fn with_speculation(mut self, s: Speculation) -> Self {
        self.speculative = Some(s);
        self
    }

    /// Record every request's rendered prompt and answer text in the truth.
    pub fn with_truth_text(mut self) -> Self {
        self.truth_text = true;
        self
    }

    /// Engine-model mode: `cfg`'s scheduler and step times decide when tokens are sent.
    pub fn with_engine(mut self, cfg: servelab_engine::EngineConfig) -> Self {
        self.engine = Some(Arc::new(cfg));
        self
    }

    /// Bind `port` (0 picks a free one).
    pub fn with_port(mut self, port: u16) -> Self {
        self.port = port;
        self
    }
    /// Serve the model name `model`.
    pub fn with_model(mut self, model: &str) -> Self {
        self.model = model.to_string();
        self
    }
    /// Count and generate tokens with the tokenizer `spec` (a built-in encoding or a
    /// tokenizer.json path).
    pub fn with_tokenizer(mut self, spec: &str) -> Self {
        self.tokenizer = spec.to_string();
        self
    }
    /// Time requests with the engine model `m`.
    pub fn with_engine_model(mut self, m: Arc<dyn EngineModel>) -> Self {
        self.engine_model = m;
        self
    }
    /// Per-token jitter of shape `dist` and scale `scale_ms` milliseconds (negative or
    /// non-finite: none).
    pub fn with_jitter(mut self, dist: JitterDist, scale_ms: f64) -> Self {
        self.jitter = Jitter { dist, scale: ms("", scale_ms).unwrap_or(Duration::ZERO) };
        self
    }
    /// `min..=max` tokens per SSE event (raised to at least 1, and `max` to at least `min`).
    pub fn with_tokens_per_chunk(mut self, min: u32, max: u32) -> Self {
        self.tokens_per_chunk = ChunkSize { min: min.max(1), max: max.max(min.max(1)) };
        self
    }
    /// At most `n` requests decode at once (at least 1); the rest queue.
    pub fn with_max_num_seqs(mut self, n: usize) -> Self {
        self.max_num_seqs = Some(n.max(1));
        self
    }
    /// Natural output lengths with mean `mean` tokens (see [`SimConfig::eos_mean_tokens`]).
    pub fn with_eos_mean_tokens(mut self, mean: f64) -> Self {
        self.eos_mean_tokens = mean;
        self
    }
    /// The first `n` output tokens are reasoning.
    pub fn with_reasoning_tokens(mut self, n: u64) -> Self {
        self.reasoning.min = n;
        self.reasoning.max = n;
        self
    }
    /// The first `min..=max` output tokens (drawn per request) are reasoning.
    pub fn with_reasoning_range(mut self, min: u64, max: u64) -> Self {
        self.reasoning.min = min;
        self.reasoning.max = max.max(min);
        self
    }
    /// Send the reasoning in `format`.
    pub fn with_reasoning_format(mut self, format: crate::ReasoningFormat) -> Self {
        self.reasoning.format = format;
        self
    }
    /// Also inject `fault` into a request with probability `p`, drawn after the rates added
    /// before.
    pub fn with_fault_rate(mut self, fault: Fault, p: f64) -> Self {
        self.fault_rates.push((fault, p));
        self
    }
    /// Answer 503 for the first `secs` seconds (clamped to 0..=10⁶).
    pub fn with_startup_secs(mut self, secs: f64) -> Self {
        // NaN is no delay (clamping would keep it, and a NaN Duration panics).
        let secs = if secs.is_nan() { 0.0 } else { secs.clamp(0.0, 1e6) };
        self.startup = Duration::from_secs_f64(secs);
        self
    }
    /// Also write the truth log to `path`.
    pub fn with_truth_log(mut self, path: impl Into<PathBuf>) -> Self {
        self.truth_log = Some(path.into());
        self
    }
    /// Accept at most `n` tokens of prompt + `max_tokens`.
    pub fn with_max_model_len(mut self, n: u64) -> Self {
        self.max_model_len = n;
        self
    }
    /// Seed every random choice with `seed`.
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }
    /// Also have the quirk `q` (a preset adds all its parts).
    pub fn with_quirk(mut self, q: Quirk) -> Self {
        self.quirks.insert(q);
        self
    }
    /// Also have every quirk of `qs`.
    pub fn with_quirks(mut self, qs: impl IntoIterator<Item = Quirk>) -> Self {
        for q in qs {
            self.quirks.insert(q);
        }
        self
    }
    /// Chat output length without `max_tokens` under
    /// [`Quirk::IgnoreMaxCompletionTokens`] (at least 1).
    pub fn with_default_max_tokens(mut self, n: u64) -> Self {
        self.default_max_tokens = n.max(1);
        self
    }
}

/// Default of `--default-max-tokens`.
pub const DEFAULT_MAX_TOKENS: u64 = 1024;

impl SimArgs {
    /// Validate the options into a configuration; errors name the bad option.
    pub fn into_config(self) -> Result<SimConfig, SimError> {
        let itl = ms("--itl-ms", self.itl_ms)?;
        let engine_model: Arc<dyn EngineModel> = match self.timing {
            TimingKind::Fixed => Arc::new(FixedModel { ttft: ms("--ttft-ms", self.ttft_ms)?, itl }),
            TimingKind::PerToken => Arc::new(PerTokenModel {
                overhead: ms("--overhead-ms", self.overhead_ms)?,
                prefill_per_token: ms("--prefill-us-per-token", self.prefill_us_per_token)? / 1000,
                itl,
            }),
        };
        if !(self.eos_mean_tokens.is_finite() && self.eos_mean_tokens >= 1.0) {
            return Err(SimError::Config(format!(
                "--eos-mean-tokens = {}: expected a number >= 1",
                self.eos_mean_tokens
            )));
        }
        if self.max_num_seqs == Some(0) {
            return Err(SimError::Config("--max-num-seqs must be at least 1".to_string()));
        }
        if !(self.startup_secs.is_finite() && self.startup_secs >= 0.0) {
            return Err(SimError::Config(format!(
                "--startup-secs = {}: expected a non-negative number",
                self.startup_secs
            )));
        }
        let fault_rates = self
            .fault_rate
            .iter()
            .map(|s| {
                parse_fault_rate(s).map_err(|e| SimError::Config(format!("--fault-rate: {e}")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let mut quirks = Quirks::NONE;
        for list in &self.quirk {
            quirks.add_list(list).map_err(|e| SimError::Config(format!("--quirk: {e}")))?;
        }
        if self.default_max_tokens == 0 {
            return Err(SimError::Config("--default-max-tokens must be at least 1".to_string()));
        }
        let tokens_per_chunk: ChunkSize = self.tokens_per_chunk.parse()?;
        let speculative = match self.speculative_tokens {
            Some(k) => Some(Speculation::new(k, self.acceptance_rate).map_err(SimError::Config)?),
            None => None,
        };
        if speculative.is_some() && tokens_per_chunk.max > 1 {
            return Err(SimError::Config(
                "--speculative-tokens decides the tokens of each event: drop --tokens-per-chunk"
                    .to_string(),
            ));
        }
        Ok(SimConfig {
            host: self.host,
            port: self.port,
            model: self.model,
            tokenizer: self.tokenizer,
            max_model_len: self.max_model_len,
            engine_model,
            jitter: Jitter { dist: self.jitter_dist, scale: ms("--jitter-ms", self.jitter_ms)? },
            tokens_per_chunk,
            speculative,
            max_num_seqs: self.max_num_seqs,
            eos_mean_tokens: self.eos_mean_tokens,
            reasoning: crate::Reasoning {
                format: self.reasoning_format,
                ..self.reasoning_tokens.parse::<crate::Reasoning>()?
            },
            fault_rates,
            startup: Duration::from_secs_f64(self.startup_secs),
            truth_log: self.truth_log,
            truth_text: self.truth_text,
            seed: self.seed,
            quirks,
            default_max_tokens: self.default_max_tokens,
            engine: match &self.engine {
                Some(p) => {
                    let edit = |f: &mut servelab_engine::EngineFile| {
                        // --max-num-seqs is the engine's own scheduler limit in this mode.
                        if let Some(n) = self.max_num_seqs {
                            f.scheduler.max_num_seqs = u32::try_from(n).unwrap_or(u32::MAX);
                        }
                        if let Some(n) = self.max_num_batched_tokens {
                            f.scheduler.max_num_batched_tokens = n;
                        }
                        if self.tp.is_some() {
                            f.tp = self.tp;
                        }
                        if self.kv_dtype.is_some() {
                            f.kv_dtype = self.kv_dtype.clone();
                        }
                        if self.weight_dtype.is_some() {
                            f.weight_dtype = self.weight_dtype.clone();
                        }
                        if self.enable_prefix_caching || self.no_enable_prefix_caching {
                            f.scheduler.prefix_caching = self.enable_prefix_caching;
                        }
                    };
                    let hub = servelab_workload::hub::model_config_json;
                    let cfg = servelab_engine::load_engine_file_via(p, edit, hub)
                        .map_err(|e| SimError::Config(format!("--engine {}: {e}", p.display())))?;
                    Some(Arc::new(cfg))
                }
                None => None,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        sim: SimArgs,
    }

    fn parse(args: &[&str]) -> Result<SimConfig, SimError> {
        let mut v = vec!["sim"];
        v.extend_from_slice(args);
        Cli::try_parse_from(v).map_err(|e| SimError::Config(e.to_string()))?.sim.into_config()
    }

    #[test]
    fn chunk_sizes_parse() {
        assert_eq!("4".parse::<ChunkSize>().ok(), Some(ChunkSize { min: 4, max: 4 }));
        assert_eq!("2-5".parse::<ChunkSize>().ok(), Some(ChunkSize { min: 2, max: 5 }));
        assert!("0".parse::<ChunkSize>().is_err());
        assert!("5-2".parse::<ChunkSize>().is_err());
        assert!("x".parse::<ChunkSize>().is_err());
    }

    #[test]
    fn cli_defaults_and_options() {
        let c = parse(&[]).unwrap();
        assert_eq!(c.port, 8000);
        assert_eq!(c.model, "servelab-sim");
        assert_eq!(c.max_num_seqs, None);
        let c = parse(&[
            "--timing",
            "per-token",
            "--fault-rate",
            "rate-limit=0.5",
            "--fault-rate",
            "stall=2=0.1",
            "--tokens-per-chunk",
            "2-3",
            "--max-num-seqs",
            "4",
        ])
        .unwrap();
        assert_eq!(c.fault_rates, vec![(Fault::RateLimit, 0.5), (Fault::Stall { secs: 2.0 }, 0.1)]);
        assert_eq!(c.tokens_per_chunk, ChunkSize { min: 2, max: 3 });
        assert_eq!(c.max_num_seqs, Some(4));
    }

    #[test]
    fn cli_errors_name_the_option() {
        let e = parse(&["--itl-ms=-1"]).unwrap_err().to_string();
        assert!(e.contains("--itl-ms"), "{e}");
        let e = parse(&["--fault-rate", "nope=0.1"]).unwrap_err().to_string();
        assert!(e.contains("nope"), "{e}");
        let e = parse(&["--max-num-seqs", "0"]).unwrap_err().to_string();
        assert!(e.contains("--max-num-seqs"), "{e}");
        let e = parse(&["--quirk", "no-done,nope"]).unwrap_err().to_string();
        assert!(e.contains("--quirk") && e.contains("'nope'"), "{e}");
        assert!(e.contains("no-done, reject-ignore-eos") && e.contains("transformers"), "{e}");
        assert!(matches!(parse(&["--quirk", "x"]), Err(SimError::Config(_))));
    }

    /// `--speculative-tokens K --acceptance-rate P` (P 0.7 unless given), checked by flag.
    #[test]
    fn speculative_decoding_switch() {
        assert_eq!(parse(&[]).unwrap().speculative, None);
        let s = parse(&["--speculative-tokens", "3"]).unwrap().speculative.unwrap();
        assert_eq!((s.tokens, s.acceptance), (3, 0.7));
        let s = parse(&["--speculative-tokens", "2", "--acceptance-rate", "0.5"]).unwrap();
        assert_eq!(s.speculative, Some(crate::Speculation { tokens: 2, acceptance: 0.5 }));
        let e = parse(&["--speculative-tokens", "2", "--acceptance-rate", "2"]).unwrap_err();
        assert!(e.to_string().contains("--acceptance-rate 2"), "{e}");
        let e = parse(&["--speculative-tokens", "2", "--tokens-per-chunk", "4"]).unwrap_err();
        assert!(e.to_string().contains("--tokens-per-chunk"), "{e}");
    }

    /// The switches a lab rehearses on the simulator reach the engine model.
    #[test]
    fn engine_switches_edit_the_deployment() {
        let engine =
            concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/engines/qwen3-8b-h100-tp1.yaml");
        let cfg = |extra: &[&str]| {
            let mut args = vec!["--engine", engine];
            args.extend_from_slice(extra);
            parse(&args).unwrap().engine.unwrap()
        };
        let base = cfg(&[]);
        assert!(base.scheduler.prefix_caching, "vLLM's default");
        assert!(!cfg(&["--no-enable-prefix-caching"]).scheduler.prefix_caching);
        assert!(cfg(&["--enable-prefix-caching"]).scheduler.prefix_caching);
        let fp8 = cfg(&["--weight-dtype", "fp8"]);
        assert_eq!(fp8.model.weight_dtype, servelab_engine::DType::Fp8);
        assert_ne!(base.model.weight_dtype, servelab_engine::DType::Fp8);
        let e = parse(&["--weight-dtype", "fp8"]).unwrap_err().to_string();
        assert!(e.contains("--engine"), "{e}");
        let e = parse(&["--engine", engine, "--weight-dtype", "fp7"]).unwrap_err().to_string();
        assert!(e.contains("weight_dtype"), "{e}");
        // The later of the two wins, as in vLLM.
        let on_off = ["--no-enable-prefix-caching", "--enable-prefix-caching"];
        assert!(cfg(&on_off).scheduler.prefix_caching);
        assert!(!cfg(&[on_off[1], on_off[0]]).scheduler.prefix_caching);
    }

    #[test]
    fn quirks_are_comma_separated_and_repeatable() {
        let c = parse(&[]).unwrap();
        assert!(c.quirks.is_empty());
        assert_eq!(c.default_max_tokens, 1024);
        let c = parse(&[
            "--quirk",
            "no-done,no-usage",
            "--quirk",
            "no-keep-alive",
            "--default-max-tokens",
            "7",
        ])
        .unwrap();
        assert_eq!(c.quirks.names(), ["no-done", "no-usage", "no-keep-alive"]);
        assert_eq!(c.default_max_tokens, 7);
        let c = parse(&["--quirk", "transformers"]).unwrap();
        assert_eq!(c.quirks, SimConfig::default().with_quirk(Quirk::Transformers).quirks);
        assert!(c.quirks.no_done && c.quirks.models_error && !c.quirks.no_keep_alive);
    }
}
