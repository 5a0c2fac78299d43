//! Second stage of argument parsing: raw arguments → validated plans. Every error names the
//! flag and the bad value, and says what is expected.

use std::path::PathBuf;
use std::sync::Arc;

use clap::Parser;
use serde_json::{Map, Value};
use servelab_engine::{FitOptions, FitParam};
use servelab_load::{parse_positive_or_inf, LoadSpec, Ramp, RampStrategy};
use servelab_metrics::{parse_percentiles, MetricsConfig, Slo, SloSpec};
use servelab_plan::{
    seconds, Api, DatasetSpec, GpuSource, GpuSpec, Limits, OutputSpec, Plan, RecordSpec, Recording,
    RequestSpec, SimTarget, Target, WorkloadSpec,
};
use servelab_store::StoreRecording;
use servelab_sweep::render::parse_columns;
use servelab_sweep::{default_scenario, grid_levels, KneeRule, PromptPolicy, SweepPlan};
use servelab_workload::{
    HfDatasetSpec, ImageFormat, ImageOptions, ImageSize, LengthRange, MaxTokensField,
    SessionSource, SessionSpec, SyntheticSessions, ThinkTime, TraceFormat, TraceOptions, TraceSpec,
};
use std::time::Duration;

use crate::args::{
    Backend, BenchArgs, ContinuousUsage, DatasetName, MaxTokensFieldArg, ProfileArgs, RampUp,
    RangeStyle, SweepArgs,
};

/// Prompts of the zero-setup run.
pub const ZERO_SETUP_PROMPTS: usize = 200;
/// Concurrency cap of the zero-setup run.
pub const ZERO_SETUP_CONCURRENCY: u64 = 32;
/// The deployment the zero-setup run's simulator models: a built-in engine file.
pub const ZERO_SETUP_ENGINE: &str = "qwen3-8b-h100-tp1";

/// The plan of `servelab bench`.
pub fn bench_plan(a: &BenchArgs, api_key: Option<String>) -> Result<Plan, String> {
    bench_plan_as(a, api_key, shard_spec(&a.shard)?)
}

/// The plan of `servelab bench`, run as `shard` (a lab profile: whatever the environment).
fn bench_plan_as(
    a: &BenchArgs,
    api_key: Option<String>,
    shard: servelab_plan::ShardSpec,
) -> Result<Plan, String> {
    let rate =
        parse_positive_or_inf(&a.request_rate).map_err(|e| format!("--request-rate: {e}"))?;
    let mut plan = plan(a, api_key, rate.is_finite().then_some(rate), shard)?;
    if a.zero_setup {
        // vLLM's defaults (1,000 prompts at once) make the simulator share a laptop's cores
        // with 1,000 streams, and its late tokens are the first thing a newcomer sees. The
        // demonstration is sized so the machine keeps up and the figures can be checked
        // against the simulator's own log; any explicit flag brings vLLM's defaults back.
        plan.workload.num_prompts = ZERO_SETUP_PROMPTS;
        plan.load.max_concurrency = Some(ZERO_SETUP_CONCURRENCY);
        // A modeled engine rather than fixed delays: TTFT and TPOT then depend on the batch,
        // as a real server's do, and the truth check still holds the client to the tokens'
        // actual send times.
        if let Target::Simulator(sim) = &mut plan.target {
            sim.engine.get_or_insert_with(|| PathBuf::from(ZERO_SETUP_ENGINE));
        }
        plan.check().map_err(|e| e.to_string())?;
    }
    Ok(plan)
}

/// The plan of `a` with the request rate `rate` (`None`: all at once), run as `shard`.
fn plan(
    a: &BenchArgs,
    api_key: Option<String>,
    rate: Option<f64>,
    shard: servelab_plan::ShardSpec,
) -> Result<Plan, String> {
    let target = match (&a.base_url, &a.host, a.port) {
        (Some(_), _, _) | (_, Some(_), _) | (_, _, Some(_)) if a.sim_engine.is_some() => {
            return Err("--sim-engine: only for the built-in simulator (drop --base-url/--host/\
                        --port)"
                .into())
        }
        (Some(url), None, None) => Target::Url(url.clone()),
        (Some(_), _, _) => return Err("--base-url: give either --base-url or --host/--port".into()),
        (None, None, None) => {
            Target::Simulator(SimTarget { engine: a.sim_engine.clone(), ..SimTarget::default() })
        }
        (None, host, port) => Target::Url(format!(
            "http://{}:{}",
            host.as_deref().unwrap_or("127.0.0.1"),
            port.unwrap_or(8000)
        )),
    };
    let api = match a.backend {
        Backend::Openai => Api::Completions,
        Backend::OpenaiChat => Api::Chat,
    };
    let extra_body = match a.extra_body.as_deref().map(serde_json::from_str::<Value>) {
        None => Map::new(),
        Some(Ok(Value::Object(m))) => m,
        Some(Ok(_)) => {
            return Err("--extra-body: must be a JSON object, e.g. '{\"temperature\":0}'".into())
        }
        Some(Err(e)) => return Err(format!("--extra-body: invalid JSON: {e}")),
    };
    let burstiness =
        parse_positive_or_inf(&a.burstiness).map_err(|e| format!("--burstiness: {e}"))?;
    let load = LoadSpec::new(rate, burstiness, a.max_concurrency.map(|c| c as u64), a.duration)
        .map_err(|e| e.to_string())?;
    let request = RequestSpec {
        endpoint: a.endpoint.clone().unwrap_or_else(|| api.default_endpoint().to_string()),
        model: a.model.clone(),
        headers: a.headers.clone(),
        api_key,
        extra_body,
        ignore_eos: a.ignore_eos,
        max_tokens_field: match a.max_tokens_field {
            MaxTokensFieldArg::Auto => MaxTokensField::Auto,
            MaxTokensFieldArg::MaxTokens => MaxTokensField::MaxTokens,
            MaxTokensFieldArg::MaxCompletionTokens => MaxTokensField::MaxCompletionTokens,
            MaxTokensFieldArg::Both => MaxTokensField::Both,
        },
        stream_usage: !a.no_stream_usage,
        preflight: !a.no_preflight,
        continuous_usage: match a.continuous_usage {
            ContinuousUsage::Auto => None,
            ContinuousUsage::On => Some(true),
            ContinuousUsage::Off => Some(false),
        },
        reasoning_parser: a.reasoning_parser,
        ..RequestSpec::new(api)
    };
    let tags = a
        .tags
        .iter()
        .map(|t| {
            servelab_store::model::parse_tag(t)
                .ok_or_else(|| format!("--tag: expected KEY=VALUE (got '{t}')"))
        })
        .collect::<Result<_, _>>()?;
    let plan = Plan {
        target,
        request,
        workload: WorkloadSpec {
            tokenizer: a.tokenizer.clone(),
            dataset: dataset(a)?,
            num_prompts: a.num_prompts,
            seed: a.seed,
            num_warmups: a.num_warmups,
        },
        load,
        ramp: ramp(a, rate)?,
        limits: Limits {
            ready_timeout: seconds("--ready-timeout", a.ready_timeout)?,
            request_timeout: seconds("--request-timeout", a.request_timeout)?,
            stall_timeout: Some(seconds("--stall-timeout", a.stall_timeout)?)
                .filter(|d| !d.is_zero()),
            drain_timeout: seconds("--drain-timeout", a.drain_timeout)?,
            server_metrics_interval: Some(seconds(
                "--server-metrics-interval",
                a.server_metrics_interval,
            )?)
            .filter(|d| !d.is_zero()),
            gpu: gpu_spec(a)?,
            keep_records: a.keep_records,
        },
        metrics: MetricsConfig {
            percentiles: parse_percentiles(&a.metric_percentiles)
                .map_err(|e| format!("--metric-percentiles: {e}"))?,
            goodput: Slo::parse(&a.goodput)?,
            ..MetricsConfig::default()
        },
        output: OutputSpec {
            save_result: a.save_result,
            save_detailed: a.save_detailed,
            result_dir: a.result_dir.clone(),
            result_filename: a.result_filename.clone(),
            progress: !a.no_progress,
        },
        record: RecordSpec { label: a.label.clone(), tags, gpus: a.gpus, ..RecordSpec::default() },
        shard,
    };
    plan.check().map_err(|e| e.to_string())?;
    Ok(plan)
}

fn dataset(a: &BenchArgs) -> Result<DatasetSpec, String> {
    let path = |name: &str| {
        a.dataset_path.clone().ok_or_else(|| {
            format!("--dataset-path: --dataset-name {name} needs --dataset-path FILE")
        })
    };
    // A pause between turns means nothing without turns; ignoring it would mislead.
    if a.dataset_name != DatasetName::Sessions
        && parse_think_time(&a.think_time).map_err(|e| format!("--think-time: {e}"))?
            != ThinkTime::Zero
    {
        return Err("--think-time: only multi-turn sessions pause between turns (--dataset-name \
                    sessions); drop it"
            .into());
    }
    Ok(match a.dataset_name {
        DatasetName::Random => {
            if a.random_input_len == 0 {
                return Err("--random-input-len: must be at least 1".into());
            }
            if a.random_output_len == 0 {
                return Err("--random-output-len: must be at least 1 (a request that may \
                            generate nothing measures no TTFT)"
                    .into());
            }
            DatasetSpec::Random {
                input_len: a.random_input_len,
                output_len: a.random_output_len,
                range: length_range(a)?,
                prefix_len: a.random_prefix_len,
            }
        }
        DatasetName::Sharegpt => {
            DatasetSpec::ShareGpt { path: path("sharegpt")?, output_len: a.sharegpt_output_len }
        }
        DatasetName::Jsonl => DatasetSpec::Jsonl { path: path("jsonl")? },
        DatasetName::Prefix => DatasetSpec::Prefix {
            num_prefixes: a.prefix_num_prefixes.max(1),
            prefix_len: a.prefix_len,
            suffix_len: a.prefix_suffix_len,
            output_len: a.prefix_output_len,
        },
        DatasetName::Sessions => DatasetSpec::Sessions(sessions(a)?),
        DatasetName::Mooncake => {
            trace(a, TraceFormat::Mooncake { block_size: a.mooncake_block_size }, "mooncake")?
        }
        DatasetName::Azure => trace(a, TraceFormat::Azure, "azure")?,
        DatasetName::Burstgpt => trace(
            a,
            TraceFormat::BurstGpt {
                model: a.burstgpt_model.clone(),
                log_type: a.burstgpt_log_type.clone(),
            },
            "burstgpt",
        )?,
        DatasetName::RandomMm => {
            if a.backend != Backend::OpenaiChat {
                return Err("--dataset-name random-mm: images go in chat messages; add \
                            --backend openai-chat"
                    .into());
            }
            let sizes = a
                .random_mm_image_size
                .split(',')
                .map(|t| t.trim().parse::<ImageSize>())
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| format!("--random-mm-image-size: {e} (expected WxH, e.g. 512x512)"))?;
            let format = match a.random_mm_image_format.to_ascii_lowercase().as_str() {
                "jpeg" | "jpg" => ImageFormat::Jpeg,
                "png" => ImageFormat::Png,
                other => {
                    return Err(format!("--random-mm-image-format: '{other}' is not jpeg or png"))
                }
            };
            DatasetSpec::RandomMultimodal {
                input_len: a.random_input_len,
                output_len: a.random_output_len.max(1),
                range: length_range(a)?,
                images: ImageOptions { per_prompt: a.random_mm_images, sizes, format },
            }
        }
        DatasetName::Hf => DatasetSpec::Hf(HfDatasetSpec {
            name: a.hf_name.clone().ok_or(
                "--hf-name: --dataset-name hf needs --hf-name ORG/NAME \
                                           (or a local directory)",
            )?,
            split: a.hf_split.clone(),
            subset: a.hf_subset.clone(),
            output_len: a.hf_output_len,
        }),
    })
}

/// The ramp of `--ramp-up-strategy` (with its start and end rates), `None` without one.
fn ramp(a: &BenchArgs, rate: Option<f64>) -> Result<Option<Ramp>, String> {
    let Some(strategy) = a.ramp_up_strategy else {
        if a.ramp_up_start_rps.is_some() || a.ramp_up_end_rps.is_some() {
            return Err("--ramp-up-start-rps/--ramp-up-end-rps: give --ramp-up-strategy \
                        linear|exponential too"
                .into());
        }
        return Ok(None);
    };
    if rate.is_some() {
        return Err(
            "--ramp-up-strategy: the ramp sets the request rate; drop --request-rate".into()
        );
    }
    let (Some(start), Some(end)) = (a.ramp_up_start_rps, a.ramp_up_end_rps) else {
        return Err("--ramp-up-strategy: give --ramp-up-start-rps and --ramp-up-end-rps".into());
    };
    let strategy = match strategy {
        RampUp::Linear => RampStrategy::Linear,
        RampUp::Exponential => RampStrategy::Exponential,
    };
    Ramp::new(strategy, start, end).map(Some)
}

/// `--random-range-ratio` under `--random-range-style`, for the random datasets. Under
/// vLLM's style, SGLang's 1.0 (its exact-length setting) also means exact.
fn length_range(a: &BenchArgs) -> Result<LengthRange, String> {
    let r = a.random_range_ratio;
    let range = match a.random_range_style {
        RangeStyle::Vllm if r == 1.0 => LengthRange::EXACT,
        RangeStyle::Vllm => LengthRange::Around(r),
        RangeStyle::Sglang => LengthRange::Below(r),
    };
    range.check().map_err(|_| match a.random_range_style {
        RangeStyle::Vllm => "--random-range-ratio: must be in [0, 1), or 1 for exact lengths \
                             (SGLang's spelling; --random-range-style sglang reads R as \
                             SGLang does)"
            .to_string(),
        RangeStyle::Sglang => {
            "--random-range-ratio: must be in [0, 1] under --random-range-style sglang".into()
        }
    })?;
    Ok(range)
}

/// `--random-range-ratio` for the synthetic sessions, which draw as vLLM does.
fn range_ratio(a: &BenchArgs) -> Result<f64, String> {
    if a.random_range_style == RangeStyle::Sglang {
        return Err("--random-range-style sglang: applies to the random datasets; synthetic \
                    sessions spread lengths as vLLM does (omit it)"
            .into());
    }
    Ok(length_range(a)?.ratio())
}

/// The multi-turn sessions of `--dataset-name sessions`.
fn sessions(a: &BenchArgs) -> Result<SessionSpec, String> {
    let think_time = parse_think_time(&a.think_time).map_err(|e| format!("--think-time: {e}"))?;
    let source = match &a.dataset_path {
        Some(p) if p.extension().is_some_and(|e| e == "jsonl") => SessionSource::Jsonl {
            path: p.clone(),
            output_len: None,
            max_turns: a.session_max_turns,
        },
        Some(p) => SessionSource::ShareGpt {
            path: p.clone(),
            output_len: a.sharegpt_output_len,
            max_turns: a.session_max_turns,
        },
        None => {
            let (turns_min, turns_max) =
                parse_range(&a.session_turns).map_err(|e| format!("--session-turns: {e}"))?;
            SessionSource::Synthetic(SyntheticSessions {
                turns_min,
                turns_max,
                input_len: a.random_input_len,
                output_len: a.random_output_len,
                range_ratio: range_ratio(a)?,
                system_prompt_len: a.session_system_prompt_len,
            })
        }
    };
    Ok(SessionSpec { source, think_time })
}

/// `N` or `MIN-MAX`, both at least 1.
fn parse_range(s: &str) -> Result<(u32, u32), String> {
    let num = |t: &str| t.trim().parse::<u32>().map_err(|_| format!("'{s}' is not N or MIN-MAX"));
    let (lo, hi) = match s.split_once('-') {
        Some((lo, hi)) => (num(lo)?, num(hi)?),
        None => (num(s)?, num(s)?),
    };
    if lo == 0 || lo > hi {
        return Err(format!("'{s}': need 1 <= MIN <= MAX"));
    }
    Ok((lo, hi))
}

/// `S` (fixed), `exp:MEAN` or `uniform:MIN-MAX`, in seconds.
pub fn parse_think_time(s: &str) -> Result<ThinkTime, String> {
    let secs = |t: &str| -> Result<Duration, String> {
        let v: f64 = t.trim().parse().map_err(|_| format!("'{t}' is not a number of seconds"))?;
        Duration::try_from_secs_f64(v).map_err(|_| format!("'{t}': must be >= 0 seconds"))
    };
    let s = s.trim();
    Ok(match s.split_once(':') {
        None => match secs(s)? {
            d if d.is_zero() => ThinkTime::Zero,
            d => ThinkTime::Fixed(d),
        },
        Some(("exp", mean)) => ThinkTime::Exponential { mean: secs(mean)? },
        Some(("uniform", range)) => {
            let (lo, hi) =
                range.split_once('-').ok_or_else(|| format!("'{s}': expected uniform:MIN-MAX"))?;
            let (min, max) = (secs(lo)?, secs(hi)?);
            if min > max {
                return Err(format!("'{s}': MIN is above MAX"));
            }
            ThinkTime::Uniform { min, max }
        }
        Some(_) => return Err(format!("'{s}': expected S, exp:MEAN or uniform:MIN-MAX")),
    })
}

/// A trace replay of `--dataset-path` in `format`.
fn trace(a: &BenchArgs, format: TraceFormat, name: &str) -> Result<DatasetSpec, String> {
    let path = a.dataset_path.clone().ok_or_else(|| {
        format!("--dataset-path: --dataset-name {name} needs --dataset-path FILE (the trace)")
    })?;
    let secs = |flag: &str, v: f64| {
        Duration::try_from_secs_f64(v).map_err(|_| format!("{flag}: must be >= 0 seconds"))
    };
    if !(a.trace_speedup.is_finite() && a.trace_speedup > 0.0) {
        return Err("--trace-speedup: must be a positive number".into());
    }
    Ok(DatasetSpec::Trace(TraceSpec {
        path,
        format,
        options: TraceOptions {
            speedup: a.trace_speedup,
            window_start: secs("--trace-start-secs", a.trace_start_secs)?,
            window_duration: a
                .trace_window_secs
                .map(|v| secs("--trace-window-secs", v))
                .transpose()?,
            max_requests: a.trace_max_requests,
        },
    }))
}

/// The plan of a lab profile: its options parsed exactly as `servelab bench` parses flags
/// (the target is the trial's engine, set per run). A profile is one run: a sharded lab
/// (`lab run --shard`, or the scheduler's environment) shards every profile run alike.
pub fn profile_plan(args: Vec<String>) -> Result<Plan, String> {
    let argv = std::iter::once("profile".to_string()).chain(args);
    let parsed = ProfileArgs::try_parse_from(argv).map_err(|e| {
        // clap's first line says what is wrong; the usage text after it is not ours.
        let text = e.to_string();
        text.lines().next().unwrap_or("").trim_start_matches("error: ").to_string()
    })?;
    let b = &parsed.bench;
    if b.shard.given() {
        return Err("--shard/--start-at/--clock-reference: a profile is one run of the lab; \
                    shard the whole lab instead (`servelab lab run --shard K/N --start-at T`, \
                    docs/scale.md)"
            .into());
    }
    bench_plan_as(&parsed.bench, api_key(), servelab_plan::ShardSpec::default())
}

/// The API key from `OPENAI_API_KEY`, when set and not empty.
pub fn api_key() -> Option<String> {
    std::env::var("OPENAI_API_KEY").ok().filter(|k| !k.is_empty())
}

/// Recording into the results store, unless `--no-store`.
pub fn recording(
    db: Option<PathBuf>,
    no_store: bool,
) -> Result<Option<Arc<dyn Recording>>, String> {
    if no_store {
        return Ok(None);
    }
    // A store named on the command line that cannot take the run is the user's error, found
    // before the run (the default store only warns: the bench goes on without it).
    if let Some(path) = &db {
        match servelab_store::Store::open(path) {
            Ok(s) if s.is_read_only() => {
                return Err(format!(
                    "--db {}: the store is read-only here, so the run could not be recorded; \
                     give a writable --db or --no-store",
                    path.display()
                ))
            }
            Ok(_) => {}
            Err(e) => return Err(format!("--db {}: {e}", path.display())),
        }
    }
    Ok(Some(Arc::new(StoreRecording { db }) as Arc<dyn Recording>))
}

/// The plan of `servelab sweep`.
pub fn sweep_plan(a: &SweepArgs) -> Result<SweepPlan, String> {
    // `--request-rate inf` typed alone is one point with every request at once; only the
    // flag's default leaves the grid to --concurrency (default 1..64).
    let rates = (a.bench.request_rate.trim() != "inf" || a.request_rate_given)
        .then_some(a.bench.request_rate.as_str());
    let loads = grid_levels(a.concurrency.as_deref(), rates).map_err(|e| e.to_string())?;
    // On a rate grid each point sets its own rate; a single rate beside --concurrency
    // holds at every point.
    let base_rate = match (loads.first(), rates) {
        (Some(servelab_load::Level::Concurrency(_)), Some(r)) => {
            Some(parse_positive_or_inf(r).map_err(|e| format!("--request-rate: {e}"))?)
        }
        _ => None,
    };
    let rate = base_rate.filter(|r| r.is_finite());
    let mut base = plan(&a.bench, api_key(), rate, shard_spec(&a.bench.shard)?)?;
    if base.shard.is_split() {
        servelab_sweep::check_sharded(base.shard.shard_or_whole(), &loads, a.resume.is_some())?;
    } else {
        base.shard.whole_runs_only("sweeps")?;
    }
    let trace_rates = matches!(base.workload.dataset, DatasetSpec::Trace(_))
        && loads.iter().any(|l| matches!(l, servelab_load::Level::Rate(_)));
    if let (Target::Simulator(sim), Some(n)) = (&mut base.target, a.sim_max_num_seqs) {
        sim.max_num_seqs = Some(n);
    } else if a.sim_max_num_seqs.is_some() {
        return Err(
            "--sim-max-num-seqs: only for the built-in simulator (drop --base-url/--host/--port)"
                .into(),
        );
    }
    let mut scenarios = match &a.suite {
        Some(spec) => servelab_sweep::suite::load_suite(spec).map_err(|e| e.to_string())?,
        None => Vec::new(),
    };
    for s in &a.scenarios {
        let sc = servelab_sweep::grid::parse_scenario(s).map_err(|e| e.to_string())?;
        if scenarios.iter().any(|o| o.name == sc.name) {
            return Err(format!("--scenario: '{s}' is given twice"));
        }
        scenarios.push(sc);
    }
    if scenarios.is_empty() {
        scenarios.push(default_scenario(&base.workload.dataset));
        // A scenario of its own replaces the trace; the trace itself sets its rate.
        if trace_rates {
            return Err("--request-rate: a sweep over a trace replay cannot set rate levels \
                        (each request is sent at its trace timestamp); sweep --concurrency \
                        levels instead, or run the trace at several --trace-speedup values"
                .into());
        }
    }
    let output_dir = match (&a.resume, &a.output_dir) {
        (Some(d), _) if !d.is_dir() => {
            return Err(format!(
                "--resume {}: no such directory (give the --output-dir of an earlier sweep)",
                d.display()
            ))
        }
        (Some(d), _) | (None, Some(d)) => d.clone(),
        (None, None) => PathBuf::from(format!(
            "sweep-{}",
            servelab_plan::time::compact(&servelab_plan::time::now_rfc3339())
        )),
    };
    let slo_resolution = a.slo_resolution;
    if !(slo_resolution.is_finite() && slo_resolution > 0.0) {
        return Err(format!("--slo-resolution: must be a number > 0 (got {slo_resolution})"));
    }
    Ok(SweepPlan {
        base,
        dataset_path: a.bench.dataset_path.clone(),
        scenarios,
        loads,
        prompts: PromptPolicy {
            // `--num-prompts N` given: every point sends N (a suite's own counts still win).
            fixed: a.num_prompts_given.then_some(a.bench.num_prompts),
            ..PromptPolicy::scaled(a.prompts_per_concurrency, a.min_prompts, a.max_prompts)?
        },
        fresh_prompts: !a.same_prompts,
        knee: KneeRule::from_flags(a.knee_min_gain_pct)?,
        slo: a.slo.as_deref().map(|s| SloSpec::parse("--slo", s)).transpose()?,
        slo_resolution,
        slo_max_probes: a.slo_max_probes,
        output_dir,
        resume: a.resume.is_some(),
        columns: parse_columns(&a.columns).map_err(|e| e.to_string())?,
    })
}

/// The plan of `servelab predict`: the sweep's, with no target (nothing is sent) and its
/// results in `predict-<timestamp>` unless told otherwise.
pub fn predict_plan(a: &SweepArgs) -> Result<SweepPlan, String> {
    let b = &a.bench;
    if b.base_url.is_some() || b.host.is_some() || b.port.is_some() {
        return Err("--base-url: predict sends nothing; drop --base-url/--host/--port (the \
                    deployment is the --engine file)"
            .into());
    }
    if a.sim_max_num_seqs.is_some() {
        return Err("--sim-max-num-seqs: predict models the engine file's scheduler; set \
                    scheduler.max_num_seqs there"
            .into());
    }
    if b.duration.is_some() {
        return Err("--duration: predict runs a fixed number of prompts per point".into());
    }
    if b.sim_engine.is_some() {
        return Err("--sim-engine: predict runs no simulator; the deployment is --engine".into());
    }
    if b.gpu_metrics.is_some() {
        return Err("--gpu-metrics: predict reads no GPUs (the engine model predicts no power); \
                    drop it: --gpu-hourly-cost alone gives the predicted cost"
            .into());
    }
    shard_spec(&b.shard)?.whole_runs_only("predictions")?;
    let mut plan = sweep_plan(a)?;
    if a.output_dir.is_none() && a.resume.is_none() {
        plan.output_dir = PathBuf::from(format!(
            "predict-{}",
            servelab_plan::time::compact(&servelab_plan::time::now_rfc3339())
        ));
    }
    Ok(plan)
}

/// The fit options of `servelab predict calibrate [--params LIST] --max-evals N`: `base` (the
/// engine's defaults, `FitOptions::for_engine`) with the parameters `--params` names, if any.
pub fn fit_options(
    params: Option<&str>,
    max_evals: usize,
    base: FitOptions,
) -> Result<FitOptions, String> {
    if max_evals == 0 {
        return Err("--max-evals: must be at least 1".into());
    }
    let Some(params) = params else {
        return Ok(FitOptions { max_evals, ..base });
    };
    let params = params
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            FitParam::parse(s).ok_or_else(|| {
                let names: Vec<&str> = FitParam::ALL.iter().map(|p| p.key()).collect();
                format!("--params: unknown parameter '{s}'; use {}", names.join(", "))
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    if params.is_empty() {
        return Err("--params: name at least one parameter to fit".into());
    }
    Ok(FitOptions { params, max_evals, ..base })
}

/// `opts` simulating `per_concurrency` × concurrency requests a point, at least `min`
/// (`servelab predict calibrate --requests-per-concurrency N --min-requests M`).
pub fn fit_requests(
    opts: FitOptions,
    per_concurrency: usize,
    min: usize,
) -> Result<FitOptions, String> {
    if per_concurrency == 0 {
        return Err("--requests-per-concurrency: must be at least 1".into());
    }
    if min == 0 {
        return Err("--min-requests: must be at least 1".into());
    }
    Ok(FitOptions { requests_per_concurrency: per_concurrency, min_requests: min, ..opts })
}

/// `--shard` (else the scheduler's environment), `--start-at`, `--clock-reference` and
/// `--shard-lead`.
fn shard_spec(a: &crate::args::ShardArgs) -> Result<servelab_plan::ShardSpec, String> {
    let env = |name: &str| std::env::var(name).ok();
    let (shard, start_at) = (a.shard.as_deref(), a.start_at.as_deref());
    let clock = a.clock_reference.as_deref();
    servelab_plan::ShardSpec::from_flags(shard, start_at, clock, a.shard_lead, env)
}

/// This process's part of a sharded lab ([`servelab_lab::LabShard::of`]); `None` for a
/// whole lab.
pub fn lab_shard(
    a: &crate::args::LabRunArgs,
    dir: &std::path::Path,
    loaded: &servelab_lab::Loaded,
) -> Result<Option<servelab_lab::LabShard>, String> {
    let spec = shard_spec(&a.shard)?;
    servelab_lab::LabShard::of(&spec, dir, &loaded.exp, &loaded.plans, a.resume)
}

/// `--gpu-metrics`, `--gpu-metrics-interval` and `--gpu-hourly-cost`.
fn gpu_spec(a: &BenchArgs) -> Result<GpuSpec, String> {
    let source = match a.gpu_metrics.as_deref().map(str::trim) {
        None => None,
        Some(s) if s.eq_ignore_ascii_case("nvml") => Some(GpuSource::Nvml),
        Some(s) if s.starts_with("http://") || s.starts_with("https://") => {
            Some(GpuSource::Dcgm(s.to_string()))
        }
        Some(s) => {
            return Err(format!(
                "--gpu-metrics '{s}': give a DCGM exporter's URL \
                 (http://HOST:9400/metrics) or nvml"
            ))
        }
    };
    let interval = seconds("--gpu-metrics-interval", a.gpu_metrics_interval)?;
    if interval.is_zero() {
        return Err("--gpu-metrics-interval: must be more than 0 seconds".into());
    }
    let hourly_cost_usd = match a.gpu_hourly_cost {
        Some(c) if !(c.is_finite() && c >= 0.0) => {
            return Err(format!("--gpu-hourly-cost: must be a price in USD, 0 or more (got {c})"))
        }
        c => c,
    };
    Ok(GpuSpec { source, interval, hourly_cost_usd })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::{Cli, Command};

    fn bench(args: &[&str]) -> Result<Plan, String> {
        let argv = ["servelab", "bench"].iter().chain(args);
        let Command::Bench(a) = Cli::try_parse_from(argv).unwrap().command else { unreachable!() };
        bench_plan(&a, None)
    }

    fn predict(args: &[&str]) -> Result<SweepPlan, String> {
        let argv = ["servelab", "predict", "--engine", "e.yaml"].iter().chain(args);
        let argv = argv.map(|s| std::ffi::OsString::from(*s));
        let Command::Predict(a) = Cli::parse_args(argv).unwrap().command else { unreachable!() };
        predict_plan(&a.sweep)
    }

    #[test]
    fn gpu_flags_become_the_plans_gpu_spec() {
        let g = bench(&[]).unwrap().limits.gpu;
        assert_eq!(g, GpuSpec::default());
        let url = "http://gpu-node:9400/metrics";
        let args =
            ["--gpu-metrics", url, "--gpu-metrics-interval", "0.25", "--gpu-hourly-cost", "2.5"];
        let g = bench(&args).unwrap().limits.gpu;
        assert_eq!(g.source, Some(GpuSource::Dcgm(url.into())));
        assert_eq!(g.interval, std::time::Duration::from_millis(250));
        assert_eq!(g.hourly_cost_usd, Some(2.5));
        let g = bench(&["--gpu-metrics", "NVML"]).unwrap().limits.gpu;
        assert_eq!(g.source, Some(GpuSource::Nvml));
        let e = bench(&["--gpu-metrics", "gpu-node:9400"]).unwrap_err();
        assert!(e.starts_with("--gpu-metrics 'gpu-node:9400': give a DCGM exporter's URL"), "{e}");
        let e = bench(&["--gpu-hourly-cost=NaN"]).unwrap_err();
        assert!(e.starts_with("--gpu-hourly-cost: must be a price in USD"), "{e}");
    }

    /// Issue 24: a single `--request-rate inf` with no `--concurrency` predicted the default
    /// 1..64 concurrency grid; it is one point, every request at once. Without the flag the
    /// default grid stays.
    #[test]
    fn a_single_infinite_rate_is_one_point_not_the_default_grid() {
        let p = predict(&["--request-rate", "inf", "--scenario", "100:10"]).unwrap();
        assert_eq!(p.loads, vec![servelab_load::Level::Rate(f64::INFINITY)]);
        let p = predict(&["--scenario", "100:10"]).unwrap();
        assert_eq!(p.loads.len(), 7, "the default concurrency grid");
        let p = predict(&["--request-rate", "inf", "--concurrency", "4", "--scenario", "1:1"]);
        assert_eq!(p.unwrap().loads, vec![servelab_load::Level::Concurrency(4)]);
    }

    /// `sweep --num-prompts N` was silently ignored (each point scaled its prompts with the
    /// load); given, it fixes every point's count. Not given, the points scale.
    #[test]
    fn a_given_num_prompts_fixes_every_sweep_point() {
        let sweep = |args: &[&str]| {
            let argv = ["servelab", "sweep", "--concurrency", "1,64"].iter().chain(args);
            let argv = argv.map(|s| std::ffi::OsString::from(*s));
            let Command::Sweep(a) = Cli::parse_args(argv).unwrap().command else { unreachable!() };
            sweep_plan(&a).unwrap().prompts
        };
        let fixed = sweep(&["--num-prompts", "8"]);
        assert_eq!(fixed.fixed, Some(8));
        assert_eq!(fixed.prompts_for(servelab_load::Level::Concurrency(64)), 8);
        let scaled = sweep(&[]);
        assert_eq!(scaled.fixed, None);
        assert_eq!(scaled.prompts_for(servelab_load::Level::Concurrency(1)), 10);
        assert_eq!(scaled.prompts_for(servelab_load::Level::Concurrency(64)), 320);
        let p = predict(&["--num-prompts", "16", "--scenario", "100:10"]).unwrap();
        assert_eq!(p.prompts.fixed, Some(16));
    }

    #[test]
    fn predict_takes_the_sweep_flags_and_no_target() {
        let p = predict(&["--concurrency", "1,4", "--scenario", "3000:150"]).unwrap();
        assert_eq!(p.loads.len(), 2);
        assert_eq!(p.scenarios[0].name, "3000x150");
        assert!(p.output_dir.display().to_string().starts_with("predict-"));
        let e = predict(&["--base-url", "http://x:1"]).unwrap_err();
        assert!(e.starts_with("--base-url: predict sends nothing"), "{e}");
        assert!(predict(&["--sim-max-num-seqs", "4"]).unwrap_err().starts_with("--sim-max"));
        // A prediction is priced, not metered.
        let p = predict(&["--gpu-hourly-cost", "2"]).unwrap();
        assert_eq!(p.base.limits.gpu.hourly_cost_usd, Some(2.0));
        let e = predict(&["--gpu-metrics", "nvml"]).unwrap_err();
        assert!(e.starts_with("--gpu-metrics: predict reads no GPUs"), "{e}");
        let base = FitOptions::default;
        let o = fit_options(Some("eta_gemm, frontend_us"), 5, base()).unwrap();
        assert_eq!((o.params, o.max_evals), (vec![FitParam::EtaGemm, FitParam::FrontendUs], 5));
        let o = fit_options(None, 7, base()).unwrap();
        assert_eq!((o.params, o.max_evals), (base().params, 7));
        let e = fit_options(Some("eta_gem"), 5, base()).unwrap_err();
        assert!(e.starts_with("--params: unknown parameter 'eta_gem'; use eta_gemm"), "{e}");
        assert!(fit_options(Some("eta_gemm"), 0, base()).is_err());
        assert!(fit_options(None, 0, base()).is_err());
        assert!(fit_options(Some(" , "), 5, base()).is_err());
        let o = fit_requests(base(), 10, 1).unwrap();
        assert_eq!((o.requests_per_concurrency, o.min_requests, o.params), (10, 1, base().params));
        assert!(fit_requests(base(), 0, 1).unwrap_err().starts_with("--requests-per-concurrency"));
        assert!(fit_requests(base(), 10, 0).unwrap_err().starts_with("--min-requests"));
    }

    #[test]
    fn flags_become_a_plan_and_errors_name_the_flag() {
        let p = bench(&["--request-rate", "2.5", "--burstiness", "inf"]).unwrap();
        assert_eq!(p.load.request_rate, Some(2.5));
        assert_eq!(p.load.arrivals(), servelab_load::Arrivals::Constant { rate: 2.5 });
        assert!(p.target.is_simulator());
        assert_eq!(p.workload.dataset.label(), "random(1024:128)");
        let e = bench(&["--request-rate", "0"]).unwrap_err();
        assert_eq!(e, "--request-rate: expected a positive number or 'inf' (got '0')");
        let e = bench(&["--goodput", "itl:5"]).unwrap_err();
        assert!(e.starts_with("--goodput: unknown metric 'itl': use ttft, tpot, e2el"), "{e}");
        let e = bench(&["--request-timeout", "1e20"]).unwrap_err();
        assert!(e.starts_with("--request-timeout: "), "{e}");
        let e = bench(&["--metric-percentiles", "101"]).unwrap_err();
        assert!(e.starts_with("--metric-percentiles: "), "{e}");
        assert!(bench(&["--max-concurrency", "0"]).is_err());
        assert!(bench(&["--duration=-1"]).is_err());
        let exact = bench(&["--random-range-ratio", "1.0"]).unwrap();
        assert!(matches!(
            exact.workload.dataset,
            DatasetSpec::Random { range, .. } if range == LengthRange::EXACT
        ));
        assert!(bench(&["--random-range-ratio", "1.5"]).is_err());
        let sglang = bench(&["--random-range-ratio", "0.8", "--random-range-style", "sglang"]);
        assert!(matches!(
            sglang.unwrap().workload.dataset,
            DatasetSpec::Random { range, .. } if range == LengthRange::Below(0.8)
        ));
        let e = bench(&["--random-range-ratio", "1.5", "--random-range-style", "sglang"]);
        assert!(e.unwrap_err().contains("[0, 1] under --random-range-style sglang"));
        let e = bench(&["--dataset-name", "sessions", "--random-range-style", "sglang"]);
        assert!(e.unwrap_err().starts_with("--random-range-style sglang: applies to the random"));
        let e = bench(&["--random-output-len", "0"]).unwrap_err();
        assert!(e.starts_with("--random-output-len: must be at least 1"), "{e}");
        let p = bench(&["--goodput", "ttft:500", "tpot:50"]).unwrap();
        let slo = p.metrics.goodput.unwrap();
        assert_eq!((slo.ttft_ms, slo.tpot_ms, slo.e2el_ms), (Some(500.0), Some(50.0), None));
    }

    #[test]
    fn the_shard_lead_is_seconds_and_defaults_to_two() {
        use std::time::Duration;
        assert_eq!(bench(&[]).unwrap().shard.lead, Duration::from_secs(2));
        assert_eq!(bench(&["--shard-lead", "0.5"]).unwrap().shard.lead, Duration::from_millis(500));
        let e = bench(&["--shard-lead=-1"]).unwrap_err();
        assert_eq!(e, "--shard-lead: expected seconds from 0 to 3600 (got -1)");
        assert!(bench(&["--shard-lead", "NaN"]).is_err());
    }

    #[test]
    fn the_gpu_count_is_filed_with_the_run() {
        assert_eq!(bench(&["--gpus", "8"]).unwrap().record.gpus, Some(8));
        assert_eq!(bench(&[]).unwrap().record.gpus, None);
    }

    #[test]
    fn builtin_profiles_become_plans() {
        let p = servelab_lab::profile::builtin("throughput").unwrap();
        let s = profile_plan(p.args()).unwrap();
        assert_eq!(s.workload.num_prompts, 1000);
        assert_eq!(s.workload.dataset.label(), "random(1024:128)");
        assert!(s.request.ignore_eos);
        // GPUStack's arrivals: 1000 req/s at constant spacing. No seed of its own: a lab
        // gives each profile and repeat one, derived from the lab's seed and the profile.
        assert_eq!(s.workload.seed, 0);
        assert_eq!(s.load.request_rate, Some(1000.0));
        assert_eq!(s.load.burstiness, f64::INFINITY);
        let p = servelab_lab::profile::builtin("sharegpt").unwrap();
        let e = profile_plan(p.args()).unwrap_err();
        assert_eq!(e, "--dataset-path: --dataset-name sharegpt needs --dataset-path FILE");
    }

    #[test]
    fn a_sharded_lab_needs_a_start_and_profiles_that_split() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("exp.yaml");
        let yaml = "name: s\nengines:\n  - {name: e, command: 'serve {port}'}\nprofiles:\n  \
                    - {name: p, max_concurrency: 4, num_prompts: 8}\n";
        std::fs::write(&file, yaml).unwrap();
        let loaded = servelab_lab::load_experiment(&file, profile_plan).unwrap();
        let lab = |args: &[&str]| {
            let argv = ["servelab", "lab", "run", "exp.yaml"].iter().chain(args);
            let Command::Lab(crate::args::LabCommand::Run(a)) =
                Cli::try_parse_from(argv).unwrap().command
            else {
                unreachable!()
            };
            lab_shard(&a, tmp.path(), &loaded)
        };
        assert!(lab(&[]).unwrap().is_none());
        assert!(lab(&["--shard", "0/1"]).unwrap().is_none(), "one shard of one is the lab");
        let s = lab(&["--shard", "1/4", "--start-at", "1795600000"]).unwrap().unwrap();
        assert_eq!((s.shard.index, s.shard.count), (1, 4));
        assert_eq!(s.dir, tmp.path().join("shards"));
        assert_eq!(s.started, std::time::UNIX_EPOCH + Duration::from_secs(1_795_600_000));
        // The profile's request timeout, and the margin every shard allows the others.
        assert_eq!(s.wait, loaded.plans[0].limits.request_timeout + Duration::from_secs(600));
        let e = lab(&["--shard", "1/4"]).unwrap_err();
        assert!(e.starts_with("--start-at: shard 1/4 of a lab needs"), "{e}");
        let e = lab(&["--shard", "1/4", "--start-at", "0", "--resume"]).unwrap_err();
        assert_eq!(e, "--resume: a sharded lab (shard 1/4) runs from its start");
        let e = lab(&["--shard", "1/8", "--start-at", "0"]).unwrap_err();
        assert!(e.starts_with("profiles (p): --max-concurrency 4 is the whole run's cap"), "{e}");
        // A profile is one run of the lab: its own options take no shard.
        let e = profile_plan(vec!["--shard".into(), "1/2".into()]).unwrap_err();
        assert!(e.starts_with("--shard/--start-at/--clock-reference: a profile is one"), "{e}");
        let e = profile_plan(vec!["--clock-reference".into(), "none".into()]).unwrap_err();
        assert!(e.starts_with("--shard/--start-at/--clock-reference: a profile is one"), "{e}");
        // The lab's reference goes to every profile run.
        let s = lab(&["--shard", "1/4", "--start-at", "0", "--clock-reference", "ntp://t"]);
        assert_eq!(s.unwrap().unwrap().clock, servelab_plan::ClockReference::Ntp("t".into()));
    }

    #[test]
    fn shard_flags_become_the_plan_shard() {
        const URL: [&str; 2] = ["--base-url", "http://gpu:8000"];
        let p =
            bench(&[&URL[..], &["--shard", "2/4", "--start-at", "1795600000.5"]].concat()).unwrap();
        assert_eq!(p.shard.shard, Some(servelab_plan::Shard::new(2, 4).unwrap()));
        let at = p.shard.start_at.unwrap().duration_since(std::time::UNIX_EPOCH).unwrap();
        assert_eq!(at.as_millis(), 1_795_600_000_500);
        assert_eq!(p.shard.clock, servelab_plan::ClockReference::Target);
        let ntp = ["--shard", "2/4", "--start-at", "0", "--clock-reference", "ntp://10.0.0.1:123"];
        let p = bench(&[&URL[..], &ntp[..]].concat()).unwrap();
        assert_eq!(p.shard.clock, servelab_plan::ClockReference::Ntp("10.0.0.1:123".into()));
        let e = bench(&[&URL[..], &["--clock-reference", "pool.ntp.org"]].concat()).unwrap_err();
        assert!(e.starts_with("--clock-reference 'pool.ntp.org': unknown reference"), "{e}");
        assert_eq!(
            bench(&["--shard", "4/4"]).unwrap_err(),
            "shard 4/4 is out of range: the index must be below the count, which must be at least 1"
        );
        assert!(bench(&["--start-at", "noon"]).unwrap_err().starts_with("--start-at: expected"));
        let sweep = |args: &[&str]| {
            let argv = ["servelab", "sweep", "--concurrency", "1,2"].iter().chain(args);
            let Command::Sweep(a) = Cli::try_parse_from(argv).unwrap().command else {
                unreachable!()
            };
            sweep_plan(&a).map(|_| ())
        };
        assert_eq!(sweep(&[]), Ok(()));
        let e = sweep(&[&URL[..], &["--shard", "1/2", "--start-at", "0"]].concat()).unwrap_err();
        assert!(e.starts_with("--concurrency 1: a sweep point's cap is shared by 2"), "{e}");
        let e =
            sweep(&[&URL[..], &["--shard", "1/2", "--start-at", "0", "--resume", "."]].concat())
                .unwrap_err();
        assert!(e.starts_with("--resume: a sharded sweep (shard 1/2)"), "{e}");
        let e = predict(&["--shard", "1/2", "--start-at", "0", "--concurrency", "4,8"]);
        let e = e.unwrap_err();
        assert!(e.contains("predictions do not run as shards"), "{e}");
        let e = bench(&["--shard", "1/2"]).unwrap_err();
        assert!(e.starts_with("--start-at: shard 1/2 "), "{e}");
        assert!(bench(&["--shard", "0/1"]).is_ok(), "one shard of one is the whole run");
        // Each shard would start a simulator of its own.
        let e = bench(&["--shard", "1/2", "--start-at", "0"]).unwrap_err();
        assert!(e.starts_with("--base-url: shard 1/2 needs the one server"), "{e}");
        let e = bench(
            &[&URL[..], &["--shard", "0/8", "--start-at", "0", "--max-concurrency", "4"]].concat(),
        );
        let e = e.unwrap_err();
        assert!(e.starts_with("--max-concurrency 4 is the whole run's cap"), "{e}");
    }
}
