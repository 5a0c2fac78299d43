//! Every command-line definition (raw, unvalidated); [`crate::resolve`] turns them into plans.
//!
//! Flag names follow `vllm bench serve` where it has the same concept, so existing scripts
//! carry over.

use std::path::PathBuf;

use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};
use servelab_sweep::render::DEFAULT_COLUMNS;

/// The `servelab` command line.
#[derive(Debug, Parser)]
#[command(name = "servelab", version, about = "A performance lab for LLM serving.")]
pub struct Cli {
    /// The command to run.
    #[command(subcommand)]
    pub command: Command,
}

impl Cli {
    /// Parse a command line. A `bench` given neither a target nor any workload or load flag is
    /// the zero-setup run ([`BenchArgs::zero_setup`]).
    pub fn parse_args(
        args: impl IntoIterator<Item = std::ffi::OsString>,
    ) -> Result<Cli, clap::Error> {
        let mut cmd = Cli::command();
        let matches = cmd.try_get_matches_from_mut(args)?;
        let mut cli = Cli::from_arg_matches(&matches)?;
        let given = |m: &clap::ArgMatches| {
            m.value_source("request_rate") == Some(clap::parser::ValueSource::CommandLine)
        };
        let prompts_given = |m: &clap::ArgMatches| {
            m.value_source("num_prompts") == Some(clap::parser::ValueSource::CommandLine)
        };
        let typed_backend = |m: &clap::ArgMatches| {
            m.get_raw("backend")
                .and_then(|mut v| v.next())
                .filter(|_| {
                    m.value_source("backend") == Some(clap::parser::ValueSource::CommandLine)
                })
                .map(|v| v.to_string_lossy().into_owned())
        };
        match (&mut cli.command, matches.subcommand()) {
            (Command::Bench(a), Some(("bench", m))) => {
                a.zero_setup = zero_setup(&cmd, m);
                a.backend_given = typed_backend(m);
            }
            (Command::Sweep(a), Some(("sweep", m))) => {
                a.request_rate_given = given(m);
                a.num_prompts_given = prompts_given(m);
                a.backend_given = typed_backend(m);
            }
            (Command::Predict(a), Some(("predict", m))) => {
                a.sweep.request_rate_given = given(m);
                a.sweep.num_prompts_given = prompts_given(m);
            }
            _ => {}
        }
        Ok(cli)
    }
}

/// True when no flag under the Target, Workload or Load headings came from the command line.
/// `--sim-engine` only picks the simulator's deployment, so the run stays sized for this
/// machine.
fn zero_setup(cli: &clap::Command, m: &clap::ArgMatches) -> bool {
    let Some(bench) = cli.find_subcommand("bench") else { return false };
    bench
        .get_arguments()
        .filter(|a| matches!(a.get_help_heading(), Some("Target" | "Workload" | "Load")))
        .filter(|a| a.get_id() != "sim_engine")
        .all(|a| {
            m.value_source(a.get_id().as_str())
                .is_none_or(|s| s == clap::parser::ValueSource::DefaultValue)
        })
}

/// The commands of `servelab`.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Benchmark an OpenAI-compatible endpoint (or, with no target, the built-in simulator).
    Bench(Box<BenchArgs>),
    /// Run a grid of loads (concurrency or request rate) × scenarios, as tables and charts.
    Sweep(Box<SweepArgs>),
    /// List, show, export, import or delete stored runs.
    #[command(subcommand)]
    Runs(RunsCommand),
    /// Compare runs side by side, with deltas against the first.
    Compare(Box<CompareArgs>),
    /// Write a self-contained HTML report (and a Markdown twin) for runs or sweeps.
    Report(Box<ReportArgs>),
    /// Launch engine configurations, benchmark each, keep what helps, recommend a command.
    #[command(subcommand)]
    Lab(LabCommand),
    /// The simulated OpenAI-compatible engine.
    #[command(subcommand)]
    Sim(SimCommand),
    /// Predict what a deployment would do: a sweep run in virtual time through the engine
    /// model (docs/predict.md), written and stored as `sweep` writes a measured one.
    Predict(Box<PredictArgs>),
    /// Scale one run out over many shards: render a Kubernetes Indexed Job or a Slurm batch
    /// script, or run the shards here; the shards merge into one run (docs/scale.md).
    #[command(subcommand)]
    Scale(ScaleCommand),
    /// Check in seconds what an OpenAI-compatible server actually does (streaming, `[DONE]`,
    /// usage, length fields, ignore_eos, /metrics, ...) and say which flags to use with it.
    Doctor(Box<DoctorArgs>),
}

/// The flags of `servelab doctor`.
#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// Server base URL, e.g. http://127.0.0.1:8000.
    #[arg(long)]
    pub base_url: String,
    /// Model name to request (default: the first model of /v1/models).
    #[arg(long)]
    pub model: Option<String>,
    /// Tokenizer to count the prompt with (default: the model's, as bench resolves it).
    #[arg(long)]
    pub tokenizer: Option<String>,
    /// The API you mean to benchmark; both are probed.
    #[arg(long, value_enum, default_value = "openai")]
    pub backend: Backend,
    /// Extra request header NAME:VALUE (repeatable). The API key comes from OPENAI_API_KEY.
    #[arg(long = "header", value_name = "NAME:VALUE")]
    pub headers: Vec<String>,
    /// Longest one probe request may take, seconds (each asks for 8 tokens).
    #[arg(long, default_value_t = 15.0, value_name = "SECS")]
    pub request_timeout: f64,
    /// Also read the server's clock from its Date header to the millisecond (takes seconds).
    #[arg(long)]
    pub clock: bool,
    /// One JSON object: every check with its typed value, and the advice.
    #[arg(long)]
    pub json: bool,
}

/// The flags of `servelab predict`: an engine file and every sweep flag.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct PredictArgs {
    /// Fit the engine model to a measured sweep instead.
    #[command(subcommand)]
    pub command: Option<PredictCommand>,
    /// Engine file (YAML): model, GPU, TP, replicas or P/D, scheduler options, calibration
    /// (see examples/engines/; their names, e.g. qwen3-32b-h20-tp4, are built in).
    #[arg(long, value_name = "FILE|NAME", required = true, help_heading = "Predict")]
    pub engine: Option<PathBuf>,
    /// The sweep to predict: the flags of `servelab sweep` (no target: nothing is sent).
    #[command(flatten)]
    pub sweep: SweepArgs,
}

/// The commands of `servelab predict`.
#[derive(Debug, Subcommand)]
pub enum PredictCommand {
    /// Fit an engine file's calibration to measured sweep tables; print the per-cell error
    /// before and after, and write the fitted engine file.
    Calibrate(CalibrateArgs),
}

/// The flags of `servelab sim replay`.
#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// The fixture file, e.g. testdata/servers/transformers-serve.yaml.
    pub fixture: PathBuf,
    /// Address to bind.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// Port to bind (0 picks a free one).
    #[arg(long, default_value_t = 8000)]
    pub port: u16,
}

/// The flags of `servelab predict calibrate`.
#[derive(Debug, Args)]
pub struct CalibrateArgs {
    /// Engine file (YAML) describing the measured deployment, or the name of a built-in one
    /// (those of examples/engines/, e.g. qwen3-32b-h20-tp4).
    #[arg(long, value_name = "FILE|NAME")]
    pub engine: PathBuf,
    /// Measured sweeps: Markdown tables as published (a heading with ISL:OSL over each
    /// table), servelab sweep.json files, or stored runs (a sweep's --label, a run id or
    /// label: measured sweep points of ISL:OSL scenarios at concurrency levels).
    #[arg(required_unless_present = "runs", value_name = "TABLE")]
    pub tables: Vec<PathBuf>,
    /// Stored measured runs to fit (a sweep's --label, a run label or id), read from the
    /// results store; repeatable. The same as naming them as TABLE, without the ambiguity of
    /// a file of that name.
    #[arg(long = "runs", value_name = "LABEL", num_args = 1..)]
    pub runs: Vec<String>,
    /// Also fit once per scenario with that scenario left out and report its error: how the
    /// calibration does on a scenario it did not see (one more fit per scenario).
    #[arg(long)]
    pub leave_one_out: bool,
    /// Parameters to fit: eta_gemm, eta_attn, eta_moe, eta_mem, eta_link, step_overhead_us,
    /// layer_overhead_us, piecewise_layer_us, per_seq_overhead_us, tp_step_overhead_us,
    /// tp_per_seq_overhead_us, frontend_us, allreduce_base_us, allreduce_hop_us [default: eta_gemm,layer_overhead_us,per_seq_overhead_us,frontend_us;
    /// piecewise_layer_us in place of layer_overhead_us for an engine whose graphed steps are
    /// all piecewise CUDA graphs, vLLM V1 before 0.11].
    #[arg(long)]
    pub params: Option<String>,
    /// Loss evaluations at most (each simulates every kept cell).
    #[arg(long, default_value_t = 80)]
    pub max_evals: usize,
    /// Requests each measured point ran, per unit of its concurrency (a sweep of `vllm bench
    /// serve --num-prompts 10×C --max-concurrency C` ran 10): the fit simulates as many, at
    /// least --min-requests. Mean TTFT at high load depends on it (the first wave queues).
    #[arg(long, default_value_t = 10, value_name = "N")]
    pub requests_per_concurrency: usize,
    /// The fewest requests a point is simulated with (1: exactly N × concurrency).
    #[arg(long, default_value_t = 100, value_name = "N")]
    pub min_requests: usize,
    /// Start from the engine family's default calibration (`vllm-v0`'s CPU times for a V0
    /// file, ...) instead of the engine file's.
    #[arg(long)]
    pub defaults: bool,
    /// Where the fitted engine file goes (default: FILE with `.fitted.yaml`).
    #[arg(long, short, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// The results store stored runs are read from.
    #[command(flatten)]
    pub db: DbArg,
}

/// The commands of `servelab sim`.
#[derive(Debug, Subcommand)]
pub enum SimCommand {
    /// Serve the simulated engine until Ctrl-C.
    Serve(Box<servelab_sim::SimArgs>),
    /// Serve a conformance fixture (testdata/servers/*.yaml: what one real server sends,
    /// byte for byte and on its timing) until Ctrl-C.
    Replay(ReplayArgs),
}

/// The API a backend speaks. `vllm`, `sglang` and `lmdeploy` are the OpenAI backends under
/// the names their users know.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Backend {
    /// `/v1/completions`.
    #[value(alias = "vllm", alias = "sglang", alias = "lmdeploy", alias = "tgi")]
    Openai,
    /// `/v1/chat/completions`.
    #[value(alias = "vllm-chat", alias = "sglang-chat", alias = "lmdeploy-chat")]
    OpenaiChat,
}

/// Which client's convention `--random-range-ratio` follows (`--random-range-style`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RangeStyle {
    /// `vllm bench serve`: lengths in [L × (1 − R), L × (1 + R)], R in [0, 1).
    Vllm,
    /// SGLang's `bench_serving` (and InferenceX's client): lengths in [L × R, L], R in
    /// [0, 1]; its default R of 0 draws from 1 to L.
    Sglang,
}

/// Where the prompts come from (`--dataset-name`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DatasetName {
    /// Random token ids with exact input and output lengths.
    Random,
    /// ShareGPT conversations (`--dataset-path`).
    Sharegpt,
    /// One request per line: `{"prompt": ...}` or `{"messages": [...]}` (`--dataset-path`).
    Jsonl,
    /// N shared prefixes × unique suffixes, for prefix-cache studies.
    Prefix,
    /// Multi-turn sessions, each turn resending the history with the server's replies: from
    /// a ShareGPT `.json` or a JSONL `--dataset-path`, or synthetic without one
    /// (`--session-turns`, `--random-input-len`/`--random-output-len` per turn). Concurrency
    /// and rate count sessions; `--num-prompts` is the number of sessions.
    Sessions,
    /// A Mooncake trace (JSONL: timestamp ms, input_length, output_length, hash_ids),
    /// replayed at its timestamps; equal hash ids become equal prompt blocks.
    Mooncake,
    /// An Azure LLM inference trace (CSV: TIMESTAMP, ContextTokens, GeneratedTokens).
    Azure,
    /// A BurstGPT trace (CSV: Timestamp, Model, Request tokens, Response tokens, ...).
    Burstgpt,
    /// Random text plus random images per request (chat API; `--random-mm-*`).
    #[value(name = "random-mm")]
    RandomMm,
    /// A Hugging Face dataset (`--hf-name ORG/NAME`): a local directory, the local HF cache,
    /// or a download.
    Hf,
}

/// How `--ramp-up-strategy` moves the request rate from its start to its end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RampUp {
    /// Linearly with the request index.
    Linear,
    /// Geometrically with the request index.
    Exponential,
}

/// The shapes one run can be written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RunFormat {
    /// vLLM's summary block, then servelab's sections.
    Text,
    /// The run summary as Markdown tables.
    Markdown,
    /// The result JSON, with per-request arrays.
    Json,
    /// One CSV row for the run.
    Csv,
    /// One CSV row per request.
    RequestsCsv,
    /// One JSON line per request.
    RequestsJsonl,
    /// SGLang's bench_serving summary block (backend, traffic rate, retokenized count, E2E).
    Sglang,
    /// llm-d-benchmark's Benchmark Report, schema v0.2 (JSON).
    LlmdReport,
    /// AIPerf's summary JSON (profile_export_aiperf.json).
    Aiperf,
    /// AIPerf's per-request records (profile_export.jsonl).
    AiperfJsonl,
}

impl From<RunFormat> for servelab_outputs::RunFormat {
    fn from(f: RunFormat) -> Self {
        use servelab_outputs::RunFormat as R;
        match f {
            RunFormat::Text => R::Text,
            RunFormat::Markdown => R::Markdown,
            RunFormat::Json => R::Json,
            RunFormat::Csv => R::Csv,
            RunFormat::RequestsCsv => R::RequestsCsv,
            RunFormat::RequestsJsonl => R::RequestsJsonl,
            RunFormat::Sglang => R::Sglang,
            RunFormat::LlmdReport => R::LlmdReport,
            RunFormat::Aiperf => R::Aiperf,
            RunFormat::AiperfJsonl => R::AiperfJsonl,
        }
    }
}

/// Whether to ask the server for usage in every chunk (vLLM's `continuous_usage_stats`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ContinuousUsage {
    /// On for the built-in simulator, off otherwise (servers that reject unknown fields).
    Auto,
    /// Always ask.
    On,
    /// Never ask: per-chunk token counts come from retokenizing the output after the run.
    Off,
}

/// Which body field carries the requested output length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum MaxTokensFieldArg {
    /// `max_tokens` for completions, `max_completion_tokens` for chat (OpenAI's API).
    Auto,
    /// `max_tokens` for both (servers that ignore `max_completion_tokens`).
    #[value(name = "max_tokens", alias = "max-tokens")]
    MaxTokens,
    /// `max_completion_tokens` for both.
    #[value(name = "max_completion_tokens", alias = "max-completion-tokens")]
    MaxCompletionTokens,
    /// Both fields.
    Both,
}

/// The flags of `servelab bench`, shared by `servelab sweep` and lab profiles.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Set by [`Cli::parse_args`]: no target, workload or load flag was given, so the run is
    /// the zero-setup demonstration against the built-in simulator, sized for this machine.
    #[arg(skip)]
    pub zero_setup: bool,
    /// Set by [`Cli::parse_args`] for `bench`: `--backend` as typed (`vllm`), which the API
    /// flavour (`openai`) forgets; `--format sglang` prints it as `Backend:`.
    #[arg(skip)]
    pub backend_given: Option<String>,

    // --- target
    /// Server base URL, e.g. http://127.0.0.1:8000. With no --base-url, --host or --port, the
    /// built-in simulator is started in-process and benchmarked: with no workload or load flag,
    /// the engine model of Qwen3-8B on one H100 (200 prompts, at most 32 at once); with any,
    /// fixed timing (TTFT 50 ms, ITL 10 ms, whatever the batch or prompt length) unless
    /// --sim-engine names a deployment.
    #[arg(long, help_heading = "Target")]
    pub base_url: Option<String>,
    /// Server host, instead of --base-url (default: 127.0.0.1 when only --port is given).
    #[arg(long, help_heading = "Target")]
    pub host: Option<String>,
    /// Server port, instead of --base-url (default: 8000 when only --host is given).
    #[arg(long, help_heading = "Target")]
    pub port: Option<u16>,
    /// Endpoint path (default: /v1/completions or /v1/chat/completions by backend).
    #[arg(long, help_heading = "Target")]
    pub endpoint: Option<String>,
    /// API to benchmark: completions or chat completions.
    #[arg(long, value_enum, default_value = "openai", help_heading = "Target")]
    pub backend: Backend,
    /// Model name to request (default: the first model of /v1/models).
    #[arg(long, help_heading = "Target")]
    pub model: Option<String>,
    /// Extra request header NAME:VALUE (repeatable). The API key comes from OPENAI_API_KEY.
    #[arg(long = "header", value_name = "NAME:VALUE", help_heading = "Target")]
    pub headers: Vec<String>,
    /// JSON object merged into every request body (sampling parameters, ...).
    #[arg(long, value_name = "JSON", help_heading = "Target")]
    pub extra_body: Option<String>,
    /// Ask the server to ignore EOS so every request generates exactly its output length.
    #[arg(long, help_heading = "Target")]
    pub ignore_eos: bool,
    /// Ask for token usage in every streamed chunk (vLLM's continuous_usage_stats), so each
    /// chunk's token count comes from the server.
    #[arg(long, value_enum, default_value = "auto", help_heading = "Target")]
    pub continuous_usage: ContinuousUsage,
    /// How reasoning is told from the answer: auto (per response, the reasoning fields, else
    /// `<think>…</think>` in the content), field, think-tags or none.
    #[arg(long, default_value = "auto", help_heading = "Target")]
    pub reasoning_parser: servelab_metrics::ReasoningParser,
    /// Which body field carries the output length: auto is `max_tokens` for completions and
    /// `max_completion_tokens` for chat; `servelab doctor` says which one a server honours.
    #[arg(long, value_enum, default_value = "auto", help_heading = "Target")]
    pub max_tokens_field: MaxTokensFieldArg,
    /// Send no `stream_options` (for a server that refuses the field); usage then comes only
    /// where the server sends it unasked.
    #[arg(long, help_heading = "Target")]
    pub no_stream_usage: bool,
    /// Skip the preflight (`servelab doctor`'s fast checks) before the run: the request
    /// fields are sent as given, whether or not the server accepts them.
    #[arg(long, help_heading = "Target")]
    pub no_preflight: bool,
    /// With no target: the built-in simulator serves this engine file's deployment, its
    /// engine model deciding when every token is sent (docs/predict.md). A file, or the name
    /// of a built-in one (those of examples/engines/, e.g. qwen3-8b-h100-tp1). Without it, a
    /// run with any workload or load flag gets fixed timing (TTFT 50 ms, ITL 10 ms).
    #[arg(long, value_name = "FILE|NAME", help_heading = "Target")]
    pub sim_engine: Option<PathBuf>,
    /// Seconds to wait for the server to become ready (/health or /v1/models).
    #[arg(long, default_value_t = 60.0, help_heading = "Target")]
    pub ready_timeout: f64,
    /// Seconds after which one request fails with `timeout`.
    #[arg(long, default_value_t = 600.0, help_heading = "Target")]
    pub request_timeout: f64,
    /// Seconds without any data, once a stream has sent its first token, after which the
    /// request fails with `timeout` (an engine stopping mid-stream can leave connections open
    /// and silent); 0 turns it off.
    #[arg(long, default_value_t = 60.0, value_name = "SECS", help_heading = "Target")]
    pub stall_timeout: f64,
    /// Seconds between scrapes of the server's Prometheus /metrics during the run (vLLM,
    /// llama.cpp and SGLang names); 0 turns scraping off.
    #[arg(long, default_value_t = 1.0, value_name = "SECS", help_heading = "Target")]
    pub server_metrics_interval: f64,
    /// Read the GPUs' power, utilisation, memory and clocks during the run, for joules per
    /// output token and watts per GPU: a DCGM exporter's Prometheus endpoint
    /// (http://HOST:9400/metrics), or `nvml` for this machine's GPUs through NVIDIA's driver.
    #[arg(long, value_name = "URL|nvml", help_heading = "Target")]
    pub gpu_metrics: Option<String>,
    /// Seconds between readings of --gpu-metrics (each on its own connection, off the
    /// measuring path).
    #[arg(long, default_value_t = 1.0, value_name = "SECS", help_heading = "Target")]
    pub gpu_metrics_interval: f64,
    /// Price of one GPU hour in USD: the run reports $ per million output tokens, for --gpus
    /// GPUs (else the GPUs --gpu-metrics saw).
    #[arg(long, value_name = "USD", help_heading = "Store")]
    pub gpu_hourly_cost: Option<f64>,
    /// Measured requests whose records are kept whole in memory (the summary is exact). Past
    /// them a long run folds its records into sketches as they come, in bounded memory:
    /// counts, throughput and means stay exact, percentiles come within 0.5 %; every record
    /// still goes to the store and the --save-detailed file.
    #[arg(long, default_value_t = 100_000, value_name = "N", help_heading = "Target")]
    pub keep_records: usize,

    // --- workload
    /// tokenizer.json path or directory, a built-in encoding (cl100k_base, o200k_base, ...),
    /// or a Hugging Face model name (cached, or downloaded when a network exists).
    #[arg(long, help_heading = "Workload")]
    pub tokenizer: Option<String>,
    /// Dataset to draw prompts from.
    #[arg(long, value_enum, default_value = "random", help_heading = "Workload")]
    pub dataset_name: DatasetName,
    /// Dataset file (needed by sharegpt and jsonl).
    #[arg(long, help_heading = "Workload")]
    pub dataset_path: Option<PathBuf>,
    /// Number of prompts to send (warm-ups not included).
    #[arg(long, default_value_t = 1000, help_heading = "Workload")]
    pub num_prompts: usize,
    /// Input tokens per request (random dataset).
    #[arg(long, default_value_t = 1024, help_heading = "Workload")]
    pub random_input_len: u64,
    /// Output tokens per request (random dataset).
    #[arg(long, default_value_t = 128, help_heading = "Workload")]
    pub random_output_len: u64,
    /// Draw each input and output length uniformly from [len × (1 − R), len × (1 + R)]
    /// (random dataset; 0 = exact lengths). 1 also means exact lengths, as in SGLang's
    /// bench_serving, whose range is [len × R, len] (`--random-range-style sglang`).
    #[arg(long, default_value_t = 0.0, help_heading = "Workload")]
    pub random_range_ratio: f64,
    /// Whose convention --random-range-ratio follows: vLLM's ± R around the length, or
    /// SGLang's [len × R, len] (to reproduce a run of SGLang's or InferenceX's client; with
    /// it, R = 0 draws from 1 to len, as SGLang's default does).
    #[arg(long, value_enum, default_value_t = RangeStyle::Vllm, help_heading = "Workload")]
    pub random_range_style: RangeStyle,
    /// Tokens of a prefix shared by every prompt, added before its random input tokens
    /// (random dataset).
    #[arg(long, default_value_t = 0, help_heading = "Workload")]
    pub random_prefix_len: u64,
    /// Fixed output length for ShareGPT (default: the reply's length).
    #[arg(long, help_heading = "Workload")]
    pub sharegpt_output_len: Option<u64>,
    /// Number of distinct shared prefixes (prefix dataset).
    #[arg(long, default_value_t = 8, help_heading = "Workload")]
    pub prefix_num_prefixes: u64,
    /// Tokens of each shared prefix (prefix dataset).
    #[arg(long, default_value_t = 512, help_heading = "Workload")]
    pub prefix_len: u64,
    /// Tokens of each prompt's own suffix after the prefix (prefix dataset).
    #[arg(long, default_value_t = 128, help_heading = "Workload")]
    pub prefix_suffix_len: u64,
    /// Output tokens per request (prefix dataset).
    #[arg(long, default_value_t = 128, help_heading = "Workload")]
    pub prefix_output_len: u64,
    /// Random seed for the prompts and the arrival times.
    #[arg(long, default_value_t = 0, help_heading = "Workload")]
    pub seed: u64,
    /// Turns per synthetic session: N, or MIN-MAX drawn per session (sessions dataset).
    #[arg(long, default_value = "4", help_heading = "Workload")]
    pub session_turns: String,
    /// Tokens of the system prompt every synthetic session starts with (sessions dataset).
    #[arg(long, default_value_t = 0, help_heading = "Workload")]
    pub session_system_prompt_len: u64,
    /// Keep at most this many turns of each file conversation (sessions dataset).
    #[arg(long, help_heading = "Workload")]
    pub session_max_turns: Option<usize>,
    /// The user's pause between a reply and the next turn, seconds: S, exp:MEAN (Poisson
    /// user) or uniform:MIN-MAX (sessions dataset).
    #[arg(long, default_value = "0", help_heading = "Workload")]
    pub think_time: String,
    /// Replay the trace this many times faster (mooncake, azure, burstgpt).
    #[arg(long, default_value_t = 1.0, help_heading = "Workload")]
    pub trace_speedup: f64,
    /// Start the replay this many seconds into the trace (before speedup).
    #[arg(long, default_value_t = 0.0, help_heading = "Workload")]
    pub trace_start_secs: f64,
    /// Replay only this many seconds of the trace (before speedup); default: to its end.
    #[arg(long, help_heading = "Workload")]
    pub trace_window_secs: Option<f64>,
    /// Replay at most this many requests of the trace (its window's first ones).
    #[arg(long, help_heading = "Workload")]
    pub trace_max_requests: Option<usize>,
    /// Tokens each Mooncake hash id stands for.
    #[arg(long, default_value_t = 512, help_heading = "Workload")]
    pub mooncake_block_size: u64,
    /// Keep only BurstGPT rows of this model (e.g. ChatGPT).
    #[arg(long, help_heading = "Workload")]
    pub burstgpt_model: Option<String>,
    /// Keep only BurstGPT rows of this log type (e.g. "Conversation log").
    #[arg(long, help_heading = "Workload")]
    pub burstgpt_log_type: Option<String>,
    /// Images per request (random-mm dataset).
    #[arg(long, default_value_t = 1, help_heading = "Workload")]
    pub random_mm_images: u32,
    /// Image sizes WxH, comma-separated, one drawn per image (random-mm dataset).
    #[arg(long, default_value = "512x512", help_heading = "Workload")]
    pub random_mm_image_size: String,
    /// Image encoding: jpeg or png (random-mm dataset).
    #[arg(long, default_value = "jpeg", help_heading = "Workload")]
    pub random_mm_image_format: String,
    /// The Hugging Face dataset: ORG/NAME, or a local directory or file (hf dataset).
    #[arg(long, help_heading = "Workload")]
    pub hf_name: Option<String>,
    /// Its split (train, test, ...).
    #[arg(long, help_heading = "Workload")]
    pub hf_split: Option<String>,
    /// Its subset (configuration).
    #[arg(long, help_heading = "Workload")]
    pub hf_subset: Option<String>,
    /// Output tokens of every request instead of the reference answer's length (hf dataset).
    #[arg(long, help_heading = "Workload")]
    pub hf_output_len: Option<u64>,

    // --- load
    /// Requests per second, or `inf` to send all at once.
    #[arg(long, default_value = "inf", help_heading = "Load")]
    pub request_rate: String,
    /// Gamma shape of inter-arrival times: 1 = Poisson, `inf` = constant spacing.
    #[arg(long, default_value = "1.0", help_heading = "Load")]
    pub burstiness: String,
    /// Ramp the request rate from --ramp-up-start-rps at the first request to
    /// --ramp-up-end-rps at the last (vllm bench serve's flags), instead of --request-rate.
    #[arg(long, value_enum, help_heading = "Load")]
    pub ramp_up_strategy: Option<RampUp>,
    /// Requests per second at the first request of the ramp.
    #[arg(long, help_heading = "Load")]
    pub ramp_up_start_rps: Option<f64>,
    /// Requests per second at the last request of the ramp.
    #[arg(long, help_heading = "Load")]
    pub ramp_up_end_rps: Option<f64>,
    /// Most requests in flight at once (default: no limit).
    #[arg(long, help_heading = "Load")]
    pub max_concurrency: Option<usize>,
    /// Stop issuing after this many seconds (prompts are cycled), then drain.
    #[arg(long, help_heading = "Load")]
    pub duration: Option<f64>,
    /// Warm-up requests sent before the run starts, left out of the metrics.
    #[arg(long, default_value_t = 0, help_heading = "Load")]
    pub num_warmups: usize,
    /// Seconds in-flight requests may finish after Ctrl-C before they are cancelled.
    #[arg(long, default_value_t = 5.0, help_heading = "Load")]
    pub drain_timeout: f64,

    // --- metrics and output
    /// SLOs for goodput, e.g. `--goodput ttft:500 tpot:50 e2el:10000` (milliseconds).
    #[arg(long, num_args = 1.., value_name = "METRIC:MS", help_heading = "Output")]
    pub goodput: Vec<String>,
    /// Which latency sections vLLM's block prints (vllm bench serve's flag): a comma list of
    /// ttft, tpot, itl, e2el. Default: all four. The JSON result always has all of them.
    #[arg(long, help_heading = "Output")]
    pub percentile_metrics: Option<String>,
    /// Comma-separated percentiles to report for every latency metric, e.g. 50,90,99.9.
    #[arg(long, default_value = "50,90,95,99", help_heading = "Output")]
    pub metric_percentiles: String,
    /// Save the result JSON (vllm bench serve compatible keys, plus servelab's own).
    #[arg(long, help_heading = "Output")]
    pub save_result: bool,
    /// Also write one JSON line per request, as requests finish.
    #[arg(long, help_heading = "Output")]
    pub save_detailed: bool,
    /// Directory for the result files.
    #[arg(long, default_value = ".", help_heading = "Output")]
    pub result_dir: PathBuf,
    /// Result file name (default: BACKEND-RATEqps[-concurrencyN]-MODEL-TIME.json).
    #[arg(long, help_heading = "Output")]
    pub result_filename: Option<String>,
    /// No progress bar.
    #[arg(long, alias = "disable-tqdm", help_heading = "Output")]
    pub no_progress: bool,
    /// What to print on stdout when the run ends.
    #[arg(long, value_enum, default_value = "text", help_heading = "Output")]
    pub format: RunFormat,

    // --- results store (docs/store.md)
    /// Results store to record this run in (default: $XDG_DATA_HOME/servelab/servelab.db,
    /// else ~/.local/share/servelab/servelab.db).
    #[arg(long, env = "SERVELAB_DB", value_name = "PATH", help_heading = "Store")]
    pub db: Option<PathBuf>,
    /// Name for this run in the store (`servelab compare LABEL ...`).
    #[arg(long, help_heading = "Store")]
    pub label: Option<String>,
    /// Tag the stored run, KEY=VALUE (repeatable), e.g. `--tag gpu=h100 --tag engine=vllm`.
    #[arg(long = "tag", value_name = "KEY=VALUE", help_heading = "Store")]
    pub tags: Vec<String>,
    /// Do not record this run in the results store.
    #[arg(long, help_heading = "Store")]
    pub no_store: bool,
    /// GPUs serving the deployment under test (all replicas, prefill and decode), for
    /// per-GPU throughput and cost. Recorded with the run; servelab cannot see it otherwise.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..), help_heading = "Store")]
    pub gpus: Option<u32>,

    /// Scale out (docs/scale.md).
    #[command(flatten)]
    pub shard: ShardArgs,
}

/// `--shard`, `--start-at` and `--clock-reference`: one run (a bench, a sweep, a lab) as
/// shard K of N (docs/scale.md). `lab run` words their help for a lab.
#[derive(Debug, Clone, Default, Args)]
pub struct ShardArgs {
    /// Send shard K of N of the run (0-based), e.g. `2/16`: every shard draws the same global
    /// workload and schedule from the seed and sends requests i with i mod N = K. Default:
    /// Kubernetes' JOB_COMPLETION_INDEX with SERVELAB_SHARDS, or Slurm's SLURM_PROCID of
    /// SLURM_NTASKS, else the whole run.
    #[arg(long, value_name = "K/N", help_heading = "Scale out")]
    pub shard: Option<String>,
    /// Wall-clock time zero of the arrival schedule, shared by every shard (required with
    /// --shard K/N, N > 1; a sharded sweep's first point): RFC 3339 (2026-11-25T12:00:00Z)
    /// or Unix seconds.
    #[arg(long, value_name = "INSTANT", help_heading = "Scale out")]
    pub start_at: Option<String>,
    /// What a shard reads its clock's offset against before it starts, so the merge can
    /// check that the shards shared their time zero: `target` (the target's Date header,
    /// narrowed to milliseconds at its second boundaries; the default), `ntp://HOST[:PORT]`
    /// (an NTP server: give every shard the same one), `http://HOST[:PORT][/PATH]` (another
    /// server's Date header), or `none`.
    #[arg(long, value_name = "REF", help_heading = "Scale out")]
    pub clock_reference: Option<String>,
    /// Seconds from the last shard's end of one run of a sharded sweep or lab (a point, a
    /// profile run) to every shard's start of the next: time for each shard to see the
    /// others' end files in the shared folder. Raise it where that folder is slow to show
    /// new files (NFS attribute caching). Default: 2.
    #[arg(long, value_name = "SECS", help_heading = "Scale out")]
    pub shard_lead: Option<f64>,
}

impl ShardArgs {
    /// Any of the three was given.
    pub fn given(&self) -> bool {
        self.shard.is_some() || self.start_at.is_some() || self.clock_reference.is_some()
    }
}

/// The flags of `servelab sweep`: every bench flag, plus the grid and how to judge it.
#[derive(Debug, Args)]
pub struct SweepArgs {
    /// The bench flags every point starts from.
    #[command(flatten)]
    pub bench: BenchArgs,

    /// Set by [`Cli::parse_args`]: `--request-rate` came from the command line, so even a
    /// single `inf` is the grid (one point, all at once), not the default concurrency grid.
    #[arg(skip)]
    pub request_rate_given: bool,
    /// Set by [`Cli::parse_args`]: `--num-prompts` came from the command line, so every point
    /// sends exactly that many (it was silently ignored: points scaled with the load).
    #[arg(skip)]
    pub num_prompts_given: bool,
    /// Set by [`Cli::parse_args`]: `--backend` as typed (`vllm`, `sglang`), which the API
    /// flavour (`openai`) forgets; SGLang's block prints it as `Backend:`.
    #[arg(skip)]
    pub backend_given: Option<String>,

    /// Concurrency levels to sweep (closed loop), e.g. 1,2,4,8. Default 1,2,4,8,16,32,64
    /// unless --request-rate lists rates (e.g. --request-rate 1,2,4 sweeps the rate).
    #[arg(long, value_name = "N,N,...", help_heading = "Sweep")]
    pub concurrency: Option<String>,
    /// A random-dataset scenario with exactly ISL input and OSL output tokens (ignore_eos);
    /// repeatable. Without --scenario or --suite, the bench dataset options make one scenario.
    #[arg(long = "scenario", value_name = "ISL:OSL", help_heading = "Sweep")]
    pub scenarios: Vec<String>,
    /// A YAML suite of named scenarios, or a built-in one: `classic` (ShareGPT 10,000
    /// prompts, which needs --dataset-path; random 1024:1024, 2000:6000, 6000:2000, over the
    /// command's grid) or `lmdeploy` (the same four cases with 10,000, 2,000, 500 and 500
    /// prompts, each sent all at once).
    #[arg(long, value_name = "FILE|classic|lmdeploy", help_heading = "Sweep")]
    pub suite: Option<String>,
    /// Prompts per point = this × the level (concurrency, or req/s), clamped to
    /// [--min-prompts, --max-prompts], so each point reaches steady state.
    #[arg(long, default_value_t = 5.0, help_heading = "Sweep")]
    pub prompts_per_concurrency: f64,
    /// Fewest prompts per point.
    #[arg(long, default_value_t = 10, help_heading = "Sweep")]
    pub min_prompts: usize,
    /// Most prompts per point.
    #[arg(long, default_value_t = 2000, help_heading = "Sweep")]
    pub max_prompts: usize,
    /// Send the same prompts at every point (default: fresh prompts per point, so a prefix
    /// cache cannot make later points look faster).
    #[arg(long, help_heading = "Sweep")]
    pub same_prompts: bool,
    /// Seconds to pause between points when the server has no vLLM /metrics to poll.
    #[arg(long, default_value_t = 2.0, help_heading = "Sweep")]
    pub settle_secs: f64,
    /// Longest wait for the server to drain (vllm:num_requests_running = 0) between points.
    #[arg(long, default_value_t = 120.0, help_heading = "Sweep")]
    pub drain_timeout_secs: f64,
    /// Find the highest level meeting these objectives (ms), e.g. ttft_p99:500,tpot_p99:50:
    /// bisect between the measured levels that bracket it, then confirm. Exit 1 if none does.
    #[arg(long, value_name = "METRIC_STAT:MS,...", help_heading = "Sweep")]
    pub slo: Option<String>,
    /// A rate search stops when its bracket is narrower than this fraction.
    #[arg(long, default_value_t = 0.1, help_heading = "Sweep")]
    pub slo_resolution: f64,
    /// At most this many probe runs per scenario for the SLO search (plus one confirming run).
    #[arg(long, default_value_t = 6, help_heading = "Sweep")]
    pub slo_max_probes: usize,
    /// Knee: the load after which a doubling adds less than this percentage of output
    /// throughput. Latency is not part of it: `--slo` decides what is acceptable.
    #[arg(long, default_value_t = 10.0, help_heading = "Sweep")]
    pub knee_min_gain_pct: f64,
    /// Table columns: load, request_throughput, output_throughput, total_throughput,
    /// peak_concurrency, completed, failed, or METRIC_STAT (ttft_p99, tpot_mean, e2el_median);
    /// also output_throughput_per_gpu, interactivity, delivered_rate, delivered_concurrency,
    /// steady_output_throughput, steady_ttft_p99 (and the other steady_* latencies),
    /// joules_per_output_token, usd_per_million_output_tokens (docs/metrics.md).
    #[arg(long, default_value = DEFAULT_COLUMNS, help_heading = "Sweep")]
    pub columns: String,
    /// Where results go (default: `sweep-<timestamp>`).
    #[arg(long, value_name = "DIR", help_heading = "Sweep")]
    pub output_dir: Option<PathBuf>,
    /// Continue the sweep in DIR: points whose result file is complete are not run again.
    #[arg(long, value_name = "DIR", conflicts_with = "output_dir", help_heading = "Sweep")]
    pub resume: Option<PathBuf>,
    /// With no target: give the built-in simulator this many sequence slots, so the sweep
    /// shows saturation.
    #[arg(long, value_name = "N", help_heading = "Sweep")]
    pub sim_max_num_seqs: Option<usize>,
}

/// The commands of `servelab lab`.
#[derive(Debug, Subcommand)]
pub enum LabCommand {
    /// Run an experiment file: launch each configuration, benchmark it, keep what helps.
    Run(Box<LabRunArgs>),
    /// Rebuild report.md, report.html and chart.svg of an experiment folder.
    Report {
        /// The --output-dir of a `servelab lab run`.
        dir: PathBuf,
    },
}

/// The arguments of `servelab lab run`.
#[derive(Debug, Clone, Args)]
#[command(
    mut_arg("shard", |a| a.help("Run as shard K of N of the lab (0-based), e.g. `1/4`: shard 0 \
        launches each trial's engine, every shard sends its share of each profile run, and all \
        merge each run alike. --output-dir must be a folder every shard sees. Default: the \
        scheduler's environment (as for `servelab bench`), else the whole lab")),
    mut_arg("start_at", |a| a.help("Wall-clock instant every shard of the lab starts at \
        (required with --shard K/N, N > 1): RFC 3339 or Unix seconds")),
    mut_arg("clock_reference", |a| a.help("What each shard reads its clock's offset against \
        before a profile run (as for `servelab bench`): `target` (the engine's Date header; the \
        default), `ntp://HOST[:PORT]`, `http://HOST[:PORT][/PATH]`, or `none`")),
)]
pub struct LabRunArgs {
    /// The experiment YAML (docs/lab.md).
    pub experiment: PathBuf,
    /// Continue the experiment in --output-dir: finished trials are not run again.
    #[arg(long)]
    pub resume: bool,
    /// Where trials, logs and the report go (default: `lab-<experiment name>`).
    #[arg(long, value_name = "DIR")]
    pub output_dir: Option<PathBuf>,
    /// Results store every profile run is recorded in (default as for `servelab bench`).
    #[arg(long, env = "SERVELAB_DB", value_name = "PATH")]
    pub db: Option<PathBuf>,
    /// Do not record the profile runs in the results store.
    #[arg(long)]
    pub no_store: bool,
    /// Scale out: the lab as shard K of N (docs/scale.md).
    #[command(flatten)]
    pub shard: ShardArgs,
}

/// The bench flags of a profile, parsed as `servelab bench` would.
#[derive(Debug, Parser)]
#[command(name = "profile")]
pub struct ProfileArgs {
    /// The profile's options, as bench flags.
    #[command(flatten)]
    pub bench: BenchArgs,
}

/// `--db PATH` for the commands that read the store.
#[derive(Debug, Clone, Args)]
pub struct DbArg {
    /// Results store (default: $XDG_DATA_HOME/servelab/servelab.db, else
    /// ~/.local/share/servelab/servelab.db).
    #[arg(long, env = "SERVELAB_DB", value_name = "PATH", global = true)]
    pub db: Option<PathBuf>,
}

/// Output format of `runs list`, `compare`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Aligned plain-text table.
    Table,
    /// Markdown table.
    Markdown,
    /// JSON, for scripts.
    Json,
}

/// The commands of `servelab runs`.
#[derive(Debug, Subcommand)]
pub enum RunsCommand {
    /// List stored runs, newest first.
    List(ListArgs),
    /// Show one run: configuration, tags and its summary.
    Show {
        /// Run id (or label: its latest run).
        run: String,
        /// The results store.
        #[command(flatten)]
        db: DbArg,
    },
    /// Write a run's result JSON (the shape of `bench --save-result`).
    Export {
        /// Run id (or label: its latest run).
        run: String,
        /// Output file (default: stdout).
        #[arg(short, long)]
        output: Option<PathBuf>,
        /// Add the per-request arrays (as `--save-detailed`).
        #[arg(long)]
        detailed: bool,
        /// The shape to write (json: the result file, as imported or as `--save-result`).
        #[arg(long, value_enum, default_value = "json")]
        format: RunFormat,
        /// The results store.
        #[command(flatten)]
        db: DbArg,
    },
    /// Import result files: vllm bench serve JSON, SGLang bench_serving JSONL, GuideLLM JSON,
    /// llm-d Benchmark Reports (v0.2, JSON or YAML), AIPerf's profile_export_aiperf.json and
    /// profile_export.jsonl.
    Import {
        /// Result files to import.
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Label for the imported runs (default: the label in the file, else its name).
        #[arg(long)]
        label: Option<String>,
        /// Tag the imported runs, KEY=VALUE (repeatable).
        #[arg(long = "tag", value_name = "KEY=VALUE")]
        tags: Vec<String>,
        /// The results store.
        #[command(flatten)]
        db: DbArg,
    },
    /// Delete runs and everything stored with them.
    Delete {
        /// Run ids, or labels (a label deletes every run with it).
        #[arg(required = true)]
        runs: Vec<String>,
        /// The results store.
        #[command(flatten)]
        db: DbArg,
    },
    /// Merge the digests the shards of one run wrote beside their results
    /// (`NAME-shard-K-of-N.digest.json`, a few kB to tens of kB each) into one stored run:
    /// counts, throughput and goodput exact, percentiles within the sketches' 0.5 %, for runs
    /// too large to ship every record (docs/scale.md).
    #[command(alias = "merge-sketches")]
    MergeDigests {
        /// The shards' `.digest.json` files, or folders of them.
        #[arg(required = true)]
        digests: Vec<String>,
        /// Percentiles to report, comma-separated (default: the shards' own).
        #[arg(long)]
        percentiles: Option<String>,
        /// The merged run's label and how strict the merge is.
        #[command(flatten)]
        merge: MergeArgs,
    },
    /// Merge the shards of one run (`bench --shard K/N`) into one stored run: percentiles over
    /// every request, throughput over the global span (docs/scale.md).
    Merge {
        /// The shards: run ids, a label (every run with it), result JSON files written with
        /// --save-result --save-detailed (their .records.jsonl beside them), or a folder of
        /// them (its NAME-shard-K-of-N.json files).
        #[arg(required = true)]
        runs: Vec<String>,
        /// The merged run's label and how strict the merge is.
        #[command(flatten)]
        merge: MergeArgs,
    },
}

/// What `runs merge` and `runs merge-digests` share: the merged run's label and tags, how
/// strict the merge is, and the store.
#[derive(Debug, Args)]
pub struct MergeArgs {
    /// Label of the merged run.
    #[arg(long)]
    pub label: String,
    /// Tag the merged run, KEY=VALUE (repeatable).
    #[arg(long = "tag", value_name = "KEY=VALUE")]
    pub tags: Vec<String>,
    /// Largest allowed difference between the shards' clocks, ms: refused when their
    /// readings (each with its uncertainty) show a larger one for certain, noted when they
    /// are too coarse to confirm it.
    #[arg(long, default_value_t = servelab_metrics::merge::DEFAULT_MAX_CLOCK_SPREAD_MS)]
    pub max_clock_spread_ms: f64,
    /// Merge even when shards are missing or their clocks spread wider (with a warning).
    #[arg(long)]
    pub force: bool,
    /// The results store.
    #[command(flatten)]
    pub db: DbArg,
}

/// The flags of `servelab runs list`.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// Only runs with this tag (repeatable: all must match).
    #[arg(long = "tag", value_name = "KEY=VALUE")]
    pub tags: Vec<String>,
    /// Only runs of this model (exact name).
    #[arg(long)]
    pub model: Option<String>,
    /// Only runs with this label.
    #[arg(long)]
    pub label: Option<String>,
    /// Only runs started on or after this date (YYYY-MM-DD).
    #[arg(long, value_name = "DATE")]
    pub since: Option<String>,
    /// Output format.
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
    /// The results store.
    #[command(flatten)]
    pub db: DbArg,
}

/// The arguments of `servelab compare`.
#[derive(Debug, Args)]
pub struct CompareArgs {
    /// Runs to compare, the first is the baseline: run ids, labels (all runs with the label
    /// are repeats), or result files (servelab/vLLM JSON, SGLang JSONL, GuideLLM JSON).
    #[arg(required = true, num_args = 2..)]
    pub runs: Vec<String>,
    /// Runs below this success rate (percent) are rejected: shown, never the winner.
    #[arg(long, default_value_t = 99.0, value_name = "PERCENT")]
    pub min_success_rate: f64,
    /// Output format.
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
    /// Bootstrap resamples for the noise intervals (at most 1,000,000).
    #[arg(long, default_value_t = 1000, value_parser = resamples)]
    pub resamples: usize,
    /// Seed of the bootstrap (the same seed gives the same intervals).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// The results store.
    #[command(flatten)]
    pub db: DbArg,
    /// Deployments side by side instead: one table per scenario (sweep scenario and dataset),
    /// a row per concurrency, output throughput, mean TTFT and mean TPOT of each operand with
    /// its change against the first (table or markdown).
    #[arg(long)]
    pub by_scenario: bool,
    /// With --by-scenario: then one table per deployment and scenario with the nine columns
    /// teams publish (req/s, output tok/s, E2E, TTFT and TPOT mean and P99).
    #[arg(long, requires = "by_scenario")]
    pub per_deployment: bool,
}

/// The arguments of `servelab report`.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Runs to report on: run ids, labels (a label's runs at several loads form a series),
    /// or result files.
    #[arg(required = true)]
    pub runs: Vec<String>,
    /// HTML file to write; the Markdown twin goes next to it with the extension `.md`.
    #[arg(short, long, default_value = "servelab-report.html")]
    pub output: PathBuf,
    /// Title of the report (and the lead of its chart titles).
    #[arg(long, default_value = "servelab report")]
    pub title: String,
    /// Also one table per deployment and scenario with the nine columns teams publish
    /// (req/s, output tok/s, E2E, TTFT and TPOT mean and P99).
    #[arg(long)]
    pub per_deployment: bool,
    /// Runs below this success rate (percent) are rejected: shown, never the winner.
    #[arg(long, default_value_t = 99.0, value_name = "PERCENT")]
    pub min_success_rate: f64,
    /// Bootstrap resamples for the noise intervals (at most 1,000,000).
    #[arg(long, default_value_t = 1000, value_parser = resamples)]
    pub resamples: usize,
    /// Seed of the bootstrap (the same seed gives the same intervals).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// The results store.
    #[command(flatten)]
    pub db: DbArg,
}

/// The commands of `servelab scale`.
#[derive(Debug, Subcommand)]
pub enum ScaleCommand {
    /// Write a Kubernetes Indexed Job of N shards and the Job that merges them.
    K8s(Box<ScaleK8sArgs>),
    /// Write an sbatch script: N tasks of one step, then the merge.
    Slurm(Box<ScaleSlurmArgs>),
    /// Run N shard processes on this machine and merge them into the store.
    Local(Box<ScaleLocalArgs>),
    /// Read this host's clock against a reference as each shard does before its run: check
    /// the hosts of a scaled run before starting it.
    Clock(ScaleClockArgs),
}

/// The flags of `servelab scale clock`.
#[derive(Debug, Args)]
pub struct ScaleClockArgs {
    /// The target whose Date header is read (with `--clock-reference target`).
    #[arg(long, env = "OPENAI_BASE_URL")]
    pub base_url: Option<String>,
    /// What to read against: `target` (the target's Date header, narrowed at its second
    /// boundaries), `ntp://HOST[:PORT]`, or `http://HOST[:PORT][/PATH]`.
    #[arg(long, value_name = "REF", default_value = "target")]
    pub clock_reference: String,
    /// Seconds the reading may take: a Date reading narrows and checks itself at four second
    /// boundaries (about 5 s); with less it stops early, at whole seconds.
    #[arg(long, default_value_t = 6.0, value_name = "SECS")]
    pub within: f64,
    /// Print the reading as JSON.
    #[arg(long)]
    pub json: bool,
}

/// What each shard of a scaled run runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ScaleRunArg {
    /// `servelab bench`: one run, merged after every shard ended.
    Bench,
    /// `servelab sweep`: every point a sharded run merged on every shard.
    Sweep,
    /// `servelab lab run EXPERIMENT`: shard 0 launches the engines (not on Kubernetes).
    Lab,
}

/// What a scaled bench's merge takes from its shards.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum MergeFromArg {
    /// Every shard's records, merged exactly (`runs merge`).
    Records,
    /// Every shard's digest, a few kB to tens of kB: percentiles within 0.5 %, for runs whose
    /// records are too many to move (`runs merge-digests`).
    Digests,
}

/// What every `servelab scale` command takes.
#[derive(Debug, Args)]
pub struct ScaleCommon {
    /// How many shards (at least 2).
    #[arg(long)]
    pub shards: u32,
    /// What each shard runs; the arguments after -- are its flags (a lab's: the experiment
    /// file, then `lab run` flags).
    #[arg(long, value_enum, default_value = "bench")]
    pub run: ScaleRunArg,
    /// The run's name (Job and folder names: lower-case letters, digits, '-').
    #[arg(long, default_value = "servelab-run")]
    pub name: String,
    /// Label of the merged run, or of a sweep's merged points (default: the name).
    #[arg(long)]
    pub label: Option<String>,
    /// What a bench's merge takes from its shards: their records (exact) or their digests.
    #[arg(long, value_enum, default_value = "records")]
    pub merge_from: MergeFromArg,
    /// The `--run` command's arguments, the same on every shard (after `--`).
    #[arg(last = true, value_name = "ARGS")]
    pub args: Vec<String>,
}

/// The flags of `servelab scale k8s`.
#[derive(Debug, Args)]
pub struct ScaleK8sArgs {
    #[command(flatten)]
    /// The run, its shards and their bench arguments.
    pub common: ScaleCommon,
    /// The servelab image (built from the repository's Dockerfile).
    #[arg(long, default_value = "servelab:latest")]
    pub image: String,
    /// ReadWriteMany PersistentVolumeClaim for the results.
    #[arg(long, default_value = "servelab-results")]
    pub claim: String,
    /// Namespace of the Jobs (default: kubectl's current one).
    #[arg(long)]
    pub namespace: Option<String>,
    /// CPU each shard requests and is limited to, e.g. 4.
    #[arg(long)]
    pub cpu: Option<String>,
    /// Time zero of every shard (RFC 3339 or Unix seconds); default: --start-in from now.
    #[arg(long)]
    pub start_at: Option<String>,
    /// Seconds from now to the shards' time zero, when --start-at is not given.
    #[arg(long, default_value_t = 300)]
    pub start_in: u64,
    /// How long the merge Job waits for the shards' result files, seconds (it then has 30 more
    /// minutes to merge).
    #[arg(long, default_value_t = 21_600)]
    pub merge_deadline: u64,
    /// Write to this file (default: stdout).
    #[arg(short, long)]
    pub output: Option<PathBuf>,
}

/// The flags of `servelab scale slurm`.
#[derive(Debug, Args)]
pub struct ScaleSlurmArgs {
    #[command(flatten)]
    /// The run, its shards and their bench arguments.
    pub common: ScaleCommon,
    /// Cores per shard.
    #[arg(long, default_value_t = 2)]
    pub cpus_per_task: u32,
    /// Nodes to spread the shards over (default: Slurm decides).
    #[arg(long)]
    pub nodes: Option<u32>,
    /// The servelab binary on the nodes.
    #[arg(long, default_value = "servelab")]
    pub exe: String,
    /// A fixed time zero (RFC 3339 or Unix seconds); default: --lead seconds after the
    /// script starts.
    #[arg(long)]
    pub start_at: Option<String>,
    /// Seconds between the script's start and the shards' time zero.
    #[arg(long, default_value_t = 60)]
    pub lead: u32,
    /// Write to this file (default: stdout).
    #[arg(short, long)]
    pub output: Option<PathBuf>,
}

/// The flags of `servelab scale local`.
#[derive(Debug, Args)]
pub struct ScaleLocalArgs {
    #[command(flatten)]
    /// The run, its shards and their bench arguments.
    pub common: ScaleCommon,
    /// Folder for the shards' result files and logs (default: ./NAME-UNIXTIME).
    #[arg(long)]
    pub results: Option<PathBuf>,
    /// Seconds from now to the shards' time zero: time for every process to start and read
    /// its clock (a Date reading takes about 5 s; with less, it is read again after the run).
    #[arg(long, default_value_t = 7.0)]
    pub start_in: f64,
    /// Largest allowed difference between the shards' clocks, ms (as for `runs merge`).
    #[arg(long, default_value_t = servelab_metrics::merge::DEFAULT_MAX_CLOCK_SPREAD_MS)]
    pub max_clock_spread_ms: f64,
    /// The results store the merged run goes to.
    #[command(flatten)]
    pub db: DbArg,
}

/// `--resamples`: a count up to the bootstrap's limit (a huge one would run for hours).
fn resamples(s: &str) -> Result<usize, String> {
    let n: usize = s.parse().map_err(|e| format!("expected a whole number ({e})"))?;
    let max = servelab_metrics::bootstrap::MAX_RESAMPLES;
    if n > max {
        return Err(format!(
            "at most {max} resamples (1000 give the intervals to a few tenths of a percent)"
        ));
    }
    Ok(n)
}
