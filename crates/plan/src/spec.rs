//! The plan of one run and its parts.

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use serde_json::{Map, Value};
use servelab_load::{LoadSpec, Shard};
use servelab_metrics::MetricsConfig;
use servelab_records::{GpuSource, RunKind};
use servelab_workload::{Api, DatasetSpec, MaxTokensField};

/// Where requests go.
#[derive(Debug, Clone, PartialEq)]
pub enum Target {
    /// An OpenAI-compatible server at this base URL (`http://host:port`).
    Url(String),
    /// The built-in simulator, started in-process for the run (a runner may keep one
    /// running across the runs of a sweep).
    Simulator(SimTarget),
}

impl Target {
    /// True for the built-in simulator.
    pub fn is_simulator(&self) -> bool {
        matches!(self, Target::Simulator(_))
    }
}

/// How the built-in simulator is set up when it is the target.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SimTarget {
    /// Decode slots; `None`: no capacity limit (with `engine`: the file's scheduler limit).
    pub max_num_seqs: Option<usize>,
    /// An engine file: the simulator serves this deployment, its engine model deciding when
    /// every token is sent (`servelab sim serve --engine`).
    pub engine: Option<PathBuf>,
}

/// How each request is written: API, endpoint, model, headers and body options.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestSpec {
    /// Completions or chat.
    pub api: Api,
    /// Request path, e.g. `/v1/completions`.
    pub endpoint: String,
    /// Model to request; `None`: the first of `/v1/models`.
    pub model: Option<String>,
    /// Extra headers, `NAME:VALUE`.
    pub headers: Vec<String>,
    /// Sent as a bearer token.
    pub api_key: Option<String>,
    /// Merged into every request body.
    pub extra_body: Map<String, Value>,
    /// Ask the server to ignore EOS so every request generates its full output length
    /// (`ignore_eos`, and `min_tokens` equal to the length).
    pub ignore_eos: bool,
    /// Which field(s) carry the requested output length.
    pub max_tokens_field: MaxTokensField,
    /// Send `stream_options.include_usage` (off for a server that refuses it).
    pub stream_usage: bool,
    /// Probe a real server before the run and adapt the request fields to what it accepts
    /// (`servelab doctor`'s fast checks); off: send them as given.
    pub preflight: bool,
    /// Ask for usage in every chunk; `None`: on for the built-in simulator, off otherwise
    /// (servers may reject unknown fields).
    pub continuous_usage: Option<bool>,
    /// How each response's reasoning is told from its answer (`--reasoning-parser`).
    pub reasoning_parser: servelab_records::ReasoningParser,
}

impl RequestSpec {
    /// Requests of `api` to its default endpoint, everything else off.
    pub fn new(api: Api) -> RequestSpec {
        RequestSpec {
            api,
            endpoint: api.default_endpoint().to_string(),
            model: None,
            headers: Vec::new(),
            api_key: None,
            extra_body: Map::new(),
            ignore_eos: false,
            max_tokens_field: MaxTokensField::Auto,
            stream_usage: true,
            preflight: true,
            continuous_usage: None,
            reasoning_parser: servelab_records::ReasoningParser::Auto,
        }
    }
}

/// What is sent: the dataset and how many prompts of it.
#[derive(Debug, Clone)]
pub struct WorkloadSpec {
    /// Tokenizer spec; `None`: the model's, else an estimate (and a warning).
    pub tokenizer: Option<String>,
    /// Where prompts come from.
    pub dataset: DatasetSpec,
    /// Measured requests (cycled in duration mode).
    pub num_prompts: usize,
    /// Seed of the dataset draw and the arrival schedule.
    pub seed: u64,
    /// Requests sent before the clock starts, recorded as warm-ups.
    pub num_warmups: usize,
}

/// How long things may take, and what is read beside the requests while they run.
#[derive(Debug, Clone, PartialEq)]
pub struct Limits {
    /// Waiting for the server to become ready.
    pub ready_timeout: Duration,
    /// One request, from its intended send.
    pub request_timeout: Duration,
    /// Silence after the first token; `None`: no stall detection.
    pub stall_timeout: Option<Duration>,
    /// In-flight requests after an interrupt, before they are cancelled.
    pub drain_timeout: Duration,
    /// Between scrapes of the server's `/metrics`; `None`: no scraping.
    pub server_metrics_interval: Option<Duration>,
    /// The GPUs' telemetry read during the run, and the price of their time.
    pub gpu: GpuSpec,
    /// Measured records kept whole; past them the summary is folded from sketches as the
    /// records come (`servelab_metrics::fold`).
    pub keep_records: usize,
}

impl Default for Limits {
    /// `servelab bench`'s defaults.
    fn default() -> Self {
        Limits {
            ready_timeout: Duration::from_secs(60),
            request_timeout: Duration::from_secs(600),
            stall_timeout: Some(Duration::from_secs(60)),
            drain_timeout: Duration::from_secs(5),
            server_metrics_interval: Some(Duration::from_secs(1)),
            gpu: GpuSpec::default(),
            keep_records: servelab_metrics::fold::KEEP_RECORDS,
        }
    }
}

/// The GPUs' telemetry a run reads (`--gpu-metrics`), and the price of a GPU hour
/// (`--gpu-hourly-cost`): the energy and cost figures of `servelab_metrics::gpu`.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuSpec {
    /// Where the telemetry is read; `None`: not read.
    pub source: Option<GpuSource>,
    /// Between readings.
    pub interval: Duration,
    /// USD per GPU hour; `None`: no cost figures.
    pub hourly_cost_usd: Option<f64>,
}

impl Default for GpuSpec {
    /// Nothing read, a reading a second when it is.
    fn default() -> Self {
        GpuSpec { source: None, interval: Duration::from_secs(1), hourly_cost_usd: None }
    }
}

/// Files a run writes besides the store, and whether it shows progress.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct OutputSpec {
    /// Write the result JSON.
    pub save_result: bool,
    /// Write one JSON line per request as requests finish (and per-request arrays in the
    /// result JSON).
    pub save_detailed: bool,
    /// Where result files go.
    pub result_dir: PathBuf,
    /// Result file name; `None`: vLLM's default name.
    pub result_filename: Option<String>,
    /// Show live progress on stderr.
    pub progress: bool,
}

/// How the run is filed in the results store.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordSpec {
    /// Name to find the run by.
    pub label: Option<String>,
    /// `KEY=VALUE` tags.
    pub tags: Vec<(String, String)>,
    /// What produced the run.
    pub kind: RunKind,
    /// GPUs serving the deployment under test (`--gpus`), for per-GPU figures and cost.
    pub gpus: Option<u32>,
}

impl Default for RecordSpec {
    fn default() -> Self {
        RecordSpec { label: None, tags: Vec::new(), kind: RunKind::Bench, gpus: None }
    }
}

/// Whether this run is one shard of a larger one, the instant all shards count from, and the
/// clock a shard reads its offset against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardSpec {
    /// Shard `k` of `N` (`--shard`, or the scheduler's environment); `None`: the whole run.
    pub shard: Option<Shard>,
    /// Wall-clock time zero of the arrival schedule (`--start-at`); `None`: when the measured
    /// phase starts.
    pub start_at: Option<SystemTime>,
    /// What a shard reads its clock offset against (`--clock-reference`).
    pub clock: ClockReference,
    /// From the last shard's end of one run of a sweep or lab to every shard's start of the
    /// next (`--shard-lead`): time for each shard to see the others' end files.
    pub lead: Duration,
}

/// The default `--shard-lead`: ample for a local or fast shared folder.
pub const DEFAULT_SHARD_LEAD: Duration = Duration::from_secs(2);

impl Default for ShardSpec {
    fn default() -> Self {
        ShardSpec {
            shard: None,
            start_at: None,
            clock: ClockReference::Target,
            lead: DEFAULT_SHARD_LEAD,
        }
    }
}

/// The clock a shard compares its own with (`--clock-reference`), so the merge can tell
/// whether the shards' shared time zero was shared in fact.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ClockReference {
    /// The target's `Date` header, narrowed at its second boundaries (`target`).
    #[default]
    Target,
    /// Another HTTP server's `Date` header: `http://HOST[:PORT][/PATH]` (path `/` by default).
    Http(String),
    /// An NTP server, by SNTP: `HOST[:PORT]` from `ntp://HOST[:PORT]` (port 123 by default).
    Ntp(String),
    /// No reading (`none`): the merge cannot check the shards' clocks.
    Off,
}

impl std::str::FromStr for ClockReference {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let t = s.trim();
        let lower = t.to_ascii_lowercase();
        let bad = |why: &str| {
            format!(
                "--clock-reference '{t}': {why}; expected target, none, ntp://HOST[:PORT] or \
                 http://HOST[:PORT][/PATH]"
            )
        };
        match lower.as_str() {
            "target" | "" => return Ok(ClockReference::Target),
            "none" => return Ok(ClockReference::Off),
            _ => {}
        }
        if lower.starts_with("ntp://") {
            let host = t[6..].trim_end_matches('/');
            if host.is_empty() || host.contains('/') {
                return Err(bad("an NTP server is HOST or HOST:PORT"));
            }
            return Ok(ClockReference::Ntp(host.to_string()));
        }
        if lower.starts_with("http://") {
            if t.len() <= 7 {
                return Err(bad("no host"));
            }
            return Ok(ClockReference::Http(t.to_string()));
        }
        if lower.starts_with("https://") {
            return Err(bad("https is not supported; use an http:// server or ntp://"));
        }
        Err(bad("unknown reference"))
    }
}

impl std::fmt::Display for ClockReference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ClockReference::Target => f.write_str("target"),
            ClockReference::Http(url) => f.write_str(url),
            ClockReference::Ntp(host) => write!(f, "ntp://{host}"),
            ClockReference::Off => f.write_str("none"),
        }
    }
}

impl ShardSpec {
    /// The shard settings of a command line: `--shard K/N` (else the scheduler's environment,
    /// read through `env`), `--start-at INSTANT`, `--clock-reference REF` and `--shard-lead
    /// SECS`. Errors name the flag.
    pub fn from_flags(
        shard: Option<&str>,
        start_at: Option<&str>,
        clock: Option<&str>,
        lead_s: Option<f64>,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<ShardSpec, String> {
        let shard = match shard {
            Some(s) => Some(Shard::parse(s).map_err(|e| e.to_string())?),
            None => Shard::from_env(env).map_err(|e| e.to_string())?,
        };
        let start_at = start_at
            .map(|t| crate::time::parse_instant(t).map_err(|e| format!("--start-at: {e}")))
            .transpose()?;
        let clock = clock.map(str::parse).transpose()?.unwrap_or_default();
        let lead = match lead_s {
            None => DEFAULT_SHARD_LEAD,
            Some(s) if s.is_finite() && (0.0..=3600.0).contains(&s) => Duration::from_secs_f64(s),
            Some(s) => {
                return Err(format!("--shard-lead: expected seconds from 0 to 3600 (got {s})"))
            }
        };
        Ok(ShardSpec { shard, start_at, clock, lead })
    }

    /// Refuse a shard or a start instant where runs are whole (`what`, e.g. predictions,
    /// which send nothing): docs/scale.md.
    pub fn whole_runs_only(&self, what: &str) -> Result<(), String> {
        if self.is_split() || self.start_at.is_some() {
            return Err(format!(
                "--shard/--start-at (or a scheduler's shard environment): {what} do not run as \
                 shards; shard each bench or sweep instead (docs/scale.md)"
            ));
        }
        Ok(())
    }

    /// The shard, or the whole run.
    pub fn shard_or_whole(&self) -> Shard {
        self.shard.unwrap_or(Shard::WHOLE)
    }

    /// True when the run is split over more than one process.
    pub fn is_split(&self) -> bool {
        !self.shard_or_whole().is_whole()
    }
}

/// One benchmark run, validated.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Where requests go.
    pub target: Target,
    /// How each request is written.
    pub request: RequestSpec,
    /// What is sent.
    pub workload: WorkloadSpec,
    /// When it is sent.
    pub load: LoadSpec,
    /// A request rate ramping over the run (`--ramp-up-*`), instead of `load`'s rate.
    pub ramp: Option<servelab_load::Ramp>,
    /// Timeouts and scraping.
    pub limits: Limits,
    /// Percentiles and goodput objectives.
    pub metrics: MetricsConfig,
    /// Files and progress.
    pub output: OutputSpec,
    /// How the run is filed.
    pub record: RecordSpec,
    /// Shard of a larger run, and the shared start instant.
    pub shard: ShardSpec,
}

/// The most prompts one run prepares. A run holds its prompts (and their request bodies) in
/// memory; a million short ones take a few hundred MB. Longer runs cycle them (`--duration`).
pub const MAX_PROMPTS: usize = 1_000_000;

/// A plan that cannot run; the message names the setting.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct PlanError(pub String);

impl Plan {
    /// Where the result JSON goes: `--result-filename` in the result folder, else vLLM's
    /// default name `{prefix}-{rate}qps[-concurrency{c}]-{model}-{YYYYmmdd-HHMMSS}.json`
    /// (`prefix`: the backend, or `predict`).
    pub fn result_path(&self, prefix: &str, model: &str, started_at: &str) -> std::path::PathBuf {
        let name = self.output.result_filename.clone().unwrap_or_else(|| {
            let rate = self.load.request_rate.map_or("inf".to_string(), |r| format!("{r}"));
            let model = model.rsplit('/').next().unwrap_or(model);
            let concurrency =
                self.load.max_concurrency.map_or(String::new(), |c| format!("-concurrency{c}"));
            let when = crate::time::compact(started_at);
            format!("{prefix}-{rate}qps{concurrency}-{model}-{when}.json")
        });
        self.output.result_dir.join(shard_file_name(&name, &self.shard))
    }

    /// Check what the parts cannot check alone. Every error names the flag.
    pub fn check(&self) -> Result<(), PlanError> {
        if self.workload.num_prompts == 0 {
            return Err(PlanError("--num-prompts: must be at least 1".into()));
        }
        if self.workload.num_prompts > MAX_PROMPTS {
            return Err(PlanError(format!(
                "--num-prompts {}: at most {MAX_PROMPTS} distinct prompts are prepared before a \
                 run (each is held in memory); for a longer run give --duration with a \
                 --request-rate or a --max-concurrency, which cycles the prompts",
                self.workload.num_prompts
            )));
        }
        self.load.validate().map_err(|e| PlanError(e.to_string()))?;
        let trace = matches!(self.workload.dataset, DatasetSpec::Trace(_));
        // With every arrival at time zero and no cap, a duration has no end: the loop would
        // send the prompts again and again at once until memory ran out.
        if let (Some(d), None, None, None, false) = (
            self.load.duration_s,
            self.load.request_rate,
            self.load.max_concurrency,
            &self.ramp,
            trace,
        ) {
            return Err(PlanError(format!(
                "--duration {d}: with no --request-rate (all at once) and no --max-concurrency \
                 every request of the duration would be sent at the same instant, without end; \
                 give a finite --request-rate (open loop) or a --max-concurrency (closed loop)"
            )));
        }
        if trace {
            // The trace's timestamps are the arrival process: a rate would be ignored.
            let flag = if self.ramp.is_some() {
                Some("--ramp-up-strategy/--ramp-up-start-rps/--ramp-up-end-rps")
            } else if self.load.request_rate.is_some() {
                Some("--request-rate")
            } else if self.load.burstiness != 1.0 {
                Some("--burstiness")
            } else {
                None
            };
            if let Some(flag) = flag {
                return Err(PlanError(format!(
                    "{flag}: a trace replay sends each request at its trace timestamp, so the \
                     flag would be ignored; drop it (--trace-speedup replays faster or slower, \
                     --max-concurrency caps requests in flight)"
                )));
            }
        }
        if self.shard.is_split() {
            let shard = self.shard.shard_or_whole();
            // Without one shared time zero each shard's schedule starts when it does: the
            // merge would set their timelines against each other wrongly.
            if self.shard.start_at.is_none() {
                return Err(PlanError(format!(
                    "--start-at: shard {shard} (--shard, or the scheduler's environment) needs \
                     the run's shared start instant: give every shard the same --start-at \
                     (RFC 3339 or Unix seconds, far enough ahead for all to start); servelab \
                     scale sets it for you"
                )));
            }
            // Each shard would start a simulator of its own: N servers, not one run.
            if self.target.is_simulator() {
                return Err(PlanError(format!(
                    "--base-url: shard {shard} needs the one server every shard sends to; \
                     without it each shard would start its own built-in simulator (start one \
                     with `servelab sim serve --port 8000` and pass --base-url \
                     http://HOST:8000)"
                )));
            }
            if self.load.duration_s.is_some() && self.load.request_rate.is_none() {
                return Err(PlanError(format!(
                    "--shard {shard} with --duration needs a --request-rate: shards send parts \
                     of one finite global schedule"
                )));
            }
            if let Some(c) = self.load.concurrency() {
                if c < shard.count as usize {
                    return Err(PlanError(format!(
                        "--max-concurrency {c} is the whole run's cap, shared by {} shards: it \
                         must be at least the shard count",
                        shard.count
                    )));
                }
            }
        }
        self.metrics.validate().map_err(|e| PlanError(format!("--metric-percentiles: {e}")))
    }

    /// The plan with `extra` percentiles computed too (sorted, without repeats): what the
    /// tables and objectives of a sweep or a lab read must be in every summary.
    pub fn with_percentiles(mut self, extra: impl IntoIterator<Item = f64>) -> Plan {
        let p = &mut self.metrics.percentiles;
        p.extend(extra);
        p.sort_by(f64::total_cmp);
        p.dedup();
        self
    }

    /// The tag `key`, if set.
    pub fn tag(&self, key: &str) -> Option<&str> {
        self.record.tags.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }
}

/// A shard's result file: `NAME-shard-KK-of-NN.EXT` (zero-padded so they sort), so the
/// shards of one run can write to one folder; the whole run's name unchanged.
fn shard_file_name(name: &str, spec: &ShardSpec) -> String {
    if !spec.is_split() {
        return name.to_string();
    }
    let s = spec.shard_or_whole();
    let width = (s.count - 1).to_string().len();
    let (stem, ext) = match name.rsplit_once('.') {
        Some((stem, ext)) if !stem.is_empty() => (stem, format!(".{ext}")),
        _ => (name, String::new()),
    };
    format!("{stem}-shard-{:0width$}-of-{}{ext}", s.index, s.count)
}

/// A number of seconds from the user as a [`Duration`]: finite, non-negative and below a
/// billion seconds (so no conversion can overflow). Errors name the flag.
pub fn seconds(flag: &str, v: f64) -> Result<Duration, String> {
    if v.is_finite() && (0.0..1e9).contains(&v) {
        Ok(Duration::from_secs_f64(v))
    } else {
        Err(format!("{flag}: must be a number of seconds from 0 to 1e9 (got {v})"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> Plan {
        Plan {
            target: Target::Simulator(SimTarget::default()),
            request: RequestSpec::new(Api::Chat),
            workload: WorkloadSpec {
                tokenizer: None,
                dataset: DatasetSpec::Random {
                    input_len: 8,
                    output_len: 4,
                    range: crate::LengthRange::EXACT,
                    prefix_len: 0,
                },
                num_prompts: 3,
                seed: 0,
                num_warmups: 0,
            },
            load: LoadSpec::default(),
            ramp: None,
            limits: Limits::default(),
            metrics: MetricsConfig::default(),
            output: OutputSpec::default(),
            record: RecordSpec::default(),
            shard: ShardSpec::default(),
        }
    }

    #[test]
    fn checks_name_the_flag() {
        assert_eq!(plan().check(), Ok(()));
        let mut p = plan();
        p.workload.num_prompts = 0;
        assert_eq!(p.check().unwrap_err().0, "--num-prompts: must be at least 1");
        let mut p = plan();
        p.load.max_concurrency = Some(0);
        assert_eq!(p.check().unwrap_err().0, "--max-concurrency must be at least 1");
        let mut p = plan();
        p.shard.shard = Some(Shard::new(1, 4).unwrap());
        let e = p.check().unwrap_err().0;
        assert!(e.starts_with("--start-at: shard 1/4 (--shard, or the scheduler's env"), "{e}");
        p.shard.start_at = Some(std::time::UNIX_EPOCH);
        let e = p.check().unwrap_err().0;
        assert!(e.starts_with("--base-url: shard 1/4 needs the one server"), "{e}");
        p.target = Target::Url("http://127.0.0.1:8000".into());
        assert_eq!(p.check(), Ok(()));
        p.load.max_concurrency = Some(3);
        assert!(p.check().unwrap_err().0.starts_with("--max-concurrency 3 is the whole run's cap"));
        p.load.max_concurrency = Some(4);
        p.load.duration_s = Some(10.0);
        assert!(p.check().unwrap_err().0.starts_with("--shard 1/4 with --duration needs"));
        p.load.request_rate = Some(5.0);
        assert_eq!(p.check(), Ok(()));
        let mut q = plan();
        q.workload.num_prompts = usize::MAX;
        assert!(q.check().unwrap_err().0.contains("at most 1000000 distinct prompts"));
        // A duration needs a rate or a cap to end.
        let mut q = plan();
        q.load.duration_s = Some(1.0);
        let e = q.check().unwrap_err().0;
        assert!(e.starts_with("--duration 1: with no --request-rate"), "{e}");
        q.load.max_concurrency = Some(2);
        assert_eq!(q.check(), Ok(()));
        q.load = LoadSpec { request_rate: Some(3.0), duration_s: Some(1.0), ..LoadSpec::default() };
        assert_eq!(q.check(), Ok(()));
        // One shard of one is the whole run: no time zero to share.
        p.shard = ShardSpec { shard: Some(Shard::WHOLE), ..ShardSpec::default() };
        assert_eq!(p.check(), Ok(()));
    }

    #[test]
    fn clock_references_parse_and_print_back() {
        use ClockReference as C;
        for (text, want) in [
            ("target", C::Target),
            ("none", C::Off),
            ("ntp://10.0.0.1", C::Ntp("10.0.0.1".into())),
            ("NTP://time.internal:1123/", C::Ntp("time.internal:1123".into())),
            ("http://gpu-0:8000/health", C::Http("http://gpu-0:8000/health".into())),
        ] {
            let got: ClockReference = text.parse().unwrap();
            assert_eq!(got, want, "{text}");
            assert_eq!(got.to_string().parse::<ClockReference>().unwrap(), want);
        }
        for bad in ["ntp://", "ntp://a/b", "https://x", "pool.ntp.org", "http://"] {
            let e = bad.parse::<ClockReference>().unwrap_err();
            assert!(e.starts_with(&format!("--clock-reference '{bad}'")), "{e}");
        }
    }

    #[test]
    fn a_trace_refuses_the_flags_its_timestamps_replace() {
        let mut p = plan();
        p.workload.dataset = DatasetSpec::Trace(servelab_workload::TraceSpec {
            path: "t.jsonl".into(),
            format: servelab_workload::TraceFormat::Azure,
            options: servelab_workload::TraceOptions::default(),
        });
        p.load.max_concurrency = Some(4);
        assert_eq!(p.check(), Ok(()));
        let tail = ": a trace replay sends each request at its trace timestamp, so the flag \
                    would be ignored; drop it (--trace-speedup replays faster or slower, \
                    --max-concurrency caps requests in flight)";
        p.load.burstiness = 0.5;
        assert_eq!(p.check().unwrap_err().0, format!("--burstiness{tail}"));
        p.load.request_rate = Some(5.0);
        assert_eq!(p.check().unwrap_err().0, format!("--request-rate{tail}"));
        p.load = LoadSpec::default();
        p.ramp =
            Some(servelab_load::Ramp::new(servelab_load::RampStrategy::Linear, 1.0, 5.0).unwrap());
        assert_eq!(
            p.check().unwrap_err().0,
            format!("--ramp-up-strategy/--ramp-up-start-rps/--ramp-up-end-rps{tail}")
        );
    }

    #[test]
    fn each_shard_names_its_own_result_file() {
        let mut p = plan();
        p.output.result_filename = Some("run.json".into());
        assert_eq!(p.result_path("openai", "m", "t"), PathBuf::from("run.json"));
        p.shard.shard = Some(Shard::new(3, 16).unwrap());
        assert_eq!(p.result_path("openai", "m", "t"), PathBuf::from("run-shard-03-of-16.json"));
        p.shard.shard = Some(Shard::new(1, 2).unwrap());
        p.output.result_filename = Some("plain".into());
        assert_eq!(p.result_path("openai", "m", "t"), PathBuf::from("plain-shard-1-of-2"));
    }

    #[test]
    fn percentiles_merge_sorted_once() {
        let p = plan().with_percentiles([99.0, 99.9, 50.0]);
        assert_eq!(p.metrics.percentiles, vec![50.0, 90.0, 95.0, 99.0, 99.9]);
        assert_eq!(RequestSpec::new(Api::Chat).endpoint, "/v1/chat/completions");
    }

    #[test]
    fn seconds_are_bounded() {
        assert_eq!(seconds("--x", 1.5), Ok(Duration::from_millis(1500)));
        assert_eq!(seconds("--x", 0.0), Ok(Duration::ZERO));
        for bad in [-1.0, f64::NAN, f64::INFINITY, 1e20] {
            assert!(seconds("--x", bad).unwrap_err().starts_with("--x: "), "{bad}");
        }
    }
}
