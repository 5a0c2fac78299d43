//! Command-line definitions (raw, unvalidated). [`crate::settings`] turns them into settings.
//!
//! Flag names follow `vllm bench serve` where it has the same concept, so existing scripts
//! carry over.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

#[derive(Debug, Parser)]
#[command(name = "servelab", version, about = "A performance lab for LLM serving.")]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Benchmark an OpenAI-compatible endpoint (or, with no target, the built-in simulator).
    Bench(Box<BenchArgs>),
    /// Run a grid of loads (concurrency or request rate) × scenarios, as tables and charts.
    Sweep(Box<crate::sweep_cmd::SweepArgs>),
    /// List, show, export, import or delete stored runs.
    #[command(subcommand)]
    Runs(crate::store_cmd::RunsCommand),
    /// Compare runs side by side, with deltas against the first.
    Compare(Box<crate::store_cmd::CompareArgs>),
    /// Write a self-contained HTML report (and a Markdown twin) for runs or sweeps.
    Report(Box<crate::store_cmd::ReportArgs>),
    /// Launch engine configurations, benchmark each, keep what helps, recommend a command.
    #[command(subcommand)]
    Lab(crate::lab_cmd::LabCommand),
    /// The simulated OpenAI-compatible engine.
    #[command(subcommand)]
    Sim(SimCommand),
}

#[derive(Debug, Subcommand)]
pub enum SimCommand {
    /// Serve the simulated engine until Ctrl-C.
    Serve(Box<servelab_sim::SimArgs>),
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
}

/// Whether to ask the server for usage in every chunk (vLLM's `continuous_usage_stats`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ContinuousUsage {
    /// On for the built-in simulator, off otherwise (servers that reject unknown fields).
    Auto,
    On,
    Off,
}

#[derive(Debug, Args)]
pub struct BenchArgs {
    // --- target
    /// Server base URL, e.g. http://127.0.0.1:8000. With no --base-url, --host or --port, the
    /// built-in simulator is started in-process and benchmarked.
    #[arg(long, help_heading = "Target")]
    pub base_url: Option<String>,
    #[arg(long, help_heading = "Target")]
    pub host: Option<String>,
    #[arg(long, help_heading = "Target")]
    pub port: Option<u16>,
    /// Endpoint path (default: /v1/completions or /v1/chat/completions by backend).
    #[arg(long, help_heading = "Target")]
    pub endpoint: Option<String>,
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
    #[arg(long, value_enum, default_value = "auto", help_heading = "Target")]
    pub continuous_usage: ContinuousUsage,
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

    // --- workload
    /// tokenizer.json path or directory, a built-in encoding (cl100k_base, o200k_base, ...),
    /// or a Hugging Face model name (cached, or downloaded when a network exists).
    #[arg(long, help_heading = "Workload")]
    pub tokenizer: Option<String>,
    #[arg(long, value_enum, default_value = "random", help_heading = "Workload")]
    pub dataset_name: DatasetName,
    #[arg(long, help_heading = "Workload")]
    pub dataset_path: Option<PathBuf>,
    #[arg(long, default_value_t = 1000, help_heading = "Workload")]
    pub num_prompts: usize,
    #[arg(long, default_value_t = 1024, help_heading = "Workload")]
    pub random_input_len: u64,
    #[arg(long, default_value_t = 128, help_heading = "Workload")]
    pub random_output_len: u64,
    #[arg(long, default_value_t = 0.0, help_heading = "Workload")]
    pub random_range_ratio: f64,
    #[arg(long, default_value_t = 0, help_heading = "Workload")]
    pub random_prefix_len: u64,
    /// Fixed output length for ShareGPT (default: the reply's length).
    #[arg(long, help_heading = "Workload")]
    pub sharegpt_output_len: Option<u64>,
    #[arg(long, default_value_t = 8, help_heading = "Workload")]
    pub prefix_num_prefixes: u64,
    #[arg(long, default_value_t = 512, help_heading = "Workload")]
    pub prefix_len: u64,
    #[arg(long, default_value_t = 128, help_heading = "Workload")]
    pub prefix_suffix_len: u64,
    #[arg(long, default_value_t = 128, help_heading = "Workload")]
    pub prefix_output_len: u64,
    #[arg(long, default_value_t = 0, help_heading = "Workload")]
    pub seed: u64,

    // --- load
    /// Requests per second, or `inf` to send all at once.
    #[arg(long, default_value = "inf", help_heading = "Load")]
    pub request_rate: String,
    /// Gamma shape of inter-arrival times: 1 = Poisson, `inf` = constant spacing.
    #[arg(long, default_value = "1.0", help_heading = "Load")]
    pub burstiness: String,
    #[arg(long, help_heading = "Load")]
    pub max_concurrency: Option<usize>,
    /// Stop issuing after this many seconds (prompts are cycled), then drain.
    #[arg(long, help_heading = "Load")]
    pub duration: Option<f64>,
    #[arg(long, default_value_t = 0, help_heading = "Load")]
    pub num_warmups: usize,
    /// Seconds in-flight requests may finish after Ctrl-C before they are cancelled.
    #[arg(long, default_value_t = 5.0, help_heading = "Load")]
    pub drain_timeout: f64,

    // --- metrics and output
    /// SLOs for goodput, e.g. `--goodput ttft:500 tpot:50 e2el:10000` (milliseconds).
    #[arg(long, num_args = 1.., value_name = "METRIC:MS", help_heading = "Output")]
    pub goodput: Vec<String>,
    #[arg(long, default_value = "50,90,95,99", help_heading = "Output")]
    pub metric_percentiles: String,
    /// Save the result JSON (vllm bench serve compatible keys, plus servelab's own).
    #[arg(long, help_heading = "Output")]
    pub save_result: bool,
    /// Also write one JSON line per request, as requests finish.
    #[arg(long, help_heading = "Output")]
    pub save_detailed: bool,
    #[arg(long, default_value = ".", help_heading = "Output")]
    pub result_dir: PathBuf,
    #[arg(long, help_heading = "Output")]
    pub result_filename: Option<String>,
    /// No progress bar.
    #[arg(long, alias = "disable-tqdm", help_heading = "Output")]
    pub no_progress: bool,

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
}
