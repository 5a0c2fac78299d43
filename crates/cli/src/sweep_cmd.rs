//! `servelab sweep`: wiring of the sweep crate to the bench runner.
//!
//! Every bench option applies to every point; the sweep options choose the grid (levels ×
//! scenarios), how many prompts each point sends, how to judge the curve, and where the
//! results go. The plan, analysis and renderers live in `servelab-sweep`; this module only
//! turns flags into a plan and runs each point with [`crate::bench::run`].

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use servelab_client::http::{self, Target};
use servelab_load::{parse_concurrency_list, parse_rate_list, Level};
use servelab_metrics::Summary;
use servelab_sweep::drain::{wait_drained, Drain};
use servelab_sweep::grid::parse_scenario;
use servelab_sweep::render::{column_percentiles, parse_columns, Column, DEFAULT_COLUMNS};
use servelab_sweep::run::write_outputs;
use servelab_sweep::{
    run_sweep, DatasetChoice, KneeRule, PointRunner, PointSpec, PromptPolicy, RunError, Scenario,
    SweepPlan,
};
use servelab_workload::DatasetSpec;
use tokio::sync::watch;

use crate::cli::{BenchArgs, ContinuousUsage, DatasetName};
use crate::settings::{BenchSettings, TargetSpec};
use crate::{ExitStatus, Failure};

/// The default grid when neither `--concurrency` nor a rate list is given.
pub const DEFAULT_CONCURRENCY: &str = "1,2,4,8,16,32,64";

#[derive(Debug, Args)]
pub struct SweepArgs {
    #[command(flatten)]
    pub bench: BenchArgs,

    /// Concurrency levels to sweep (closed loop), e.g. 1,2,4,8. Default 1,2,4,8,16,32,64
    /// unless --request-rate lists rates (e.g. --request-rate 1,2,4 sweeps the rate).
    #[arg(long, value_name = "N,N,...", help_heading = "Sweep")]
    pub concurrency: Option<String>,
    /// A random-dataset scenario with exactly ISL input and OSL output tokens (ignore_eos);
    /// repeatable. Without --scenario or --suite, the bench dataset options make one scenario.
    #[arg(long = "scenario", value_name = "ISL:OSL", help_heading = "Sweep")]
    pub scenarios: Vec<String>,
    /// A YAML suite of named scenarios, or `classic` (ShareGPT 10,000 prompts, which needs
    /// --dataset-path; random 1024:1024, 2000:6000, 6000:2000).
    #[arg(long, value_name = "FILE|classic", help_heading = "Sweep")]
    pub suite: Option<String>,
    /// Prompts per point = this × the level (concurrency, or req/s), clamped to
    /// [--min-prompts, --max-prompts], so each point reaches steady state.
    #[arg(long, default_value_t = 5.0, help_heading = "Sweep")]
    pub prompts_per_concurrency: f64,
    #[arg(long, default_value_t = 10, help_heading = "Sweep")]
    pub min_prompts: usize,
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
    /// Knee: throughput must still rise by more than this percentage per doubling of load.
    #[arg(long, default_value_t = 10.0, help_heading = "Sweep")]
    pub knee_min_gain_pct: f64,
    /// Knee: P99 TTFT must stay below this multiple of its value at the lowest level.
    #[arg(long, default_value_t = 3.0, help_heading = "Sweep")]
    pub knee_max_ttft_factor: f64,
    /// Table columns: load, request_throughput, output_throughput, total_throughput,
    /// peak_concurrency, completed, failed, or METRIC_STAT (ttft_p99, tpot_mean, e2el_median).
    #[arg(long, default_value = DEFAULT_COLUMNS, help_heading = "Sweep")]
    pub columns: String,
    /// Where results go (default: sweep-<timestamp>).
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

/// Runs each point as a full `servelab bench`.
struct BenchRunner {
    base: BenchSettings,
    dataset_path: Option<PathBuf>,
    metrics: Option<Target>,
    settle: Duration,
    drain_timeout: Duration,
    interrupt: watch::Receiver<bool>,
}

impl BenchRunner {
    fn settings(&self, sc: &Scenario, p: &PointSpec) -> Result<BenchSettings, String> {
        let mut s = self.base.clone();
        match p.load {
            Level::Concurrency(c) => s.max_concurrency = Some(c),
            Level::Rate(r) => {
                s.request_rate = Some(r);
                s.arrivals = servelab_load::Arrivals::new(Some(r), s.burstiness)
                    .map_err(|e| e.to_string())?;
                s.max_concurrency = sc.max_concurrency.or(s.max_concurrency);
            }
        }
        if let Some((spec, label, ignore_eos)) = dataset(sc, self.dataset_path.as_ref())? {
            s.dataset = spec;
            s.dataset_label = label;
            s.ignore_eos |= ignore_eos;
        }
        s.num_prompts = p.num_prompts;
        s.seed = p.seed;
        s.save_result = false;
        s.save_detailed = false;
        // In the results store, a sweep's points are findable by scenario and level.
        s.store.kind = servelab_store::RunKind::SweepPoint;
        s.store.tags.extend([
            ("sweep.scenario".to_string(), sc.name.clone()),
            ("sweep.load".to_string(), p.load.file_stem()),
            ("sweep.role".to_string(), p.role.as_str().to_string()),
        ]);
        Ok(s)
    }
}

/// The bench dataset of a scenario: `None` keeps the command's own.
fn dataset(
    sc: &Scenario,
    path: Option<&PathBuf>,
) -> Result<Option<(DatasetSpec, String, bool)>, String> {
    let need = |p: &Option<PathBuf>, what: &str| {
        p.clone().or_else(|| path.cloned()).ok_or_else(|| {
            format!("scenario '{}' needs --dataset-path FILE (the {what} file)", sc.name)
        })
    };
    Ok(match &sc.dataset {
        DatasetChoice::FromArgs => None,
        &DatasetChoice::Random { input_len, output_len } => Some((
            DatasetSpec::Random { input_len, output_len, range_ratio: 0.0, prefix_len: 0 },
            format!("random({input_len}:{output_len})"),
            true,
        )),
        DatasetChoice::Sharegpt { path: p, output_len } => {
            let p = need(p, "ShareGPT JSON")?;
            let label = format!("sharegpt({})", p.display());
            Some((DatasetSpec::ShareGpt { path: p, output_len: *output_len }, label, false))
        }
        DatasetChoice::Jsonl { path: p } => {
            let p = need(p, "JSONL")?;
            let label = format!("jsonl({})", p.display());
            Some((DatasetSpec::Jsonl { path: p }, label, false))
        }
    })
}

impl PointRunner for BenchRunner {
    async fn run_point(&mut self, sc: &Scenario, p: &PointSpec) -> Result<Summary, RunError> {
        if *self.interrupt.borrow() {
            return Err(RunError::Interrupted);
        }
        let s = self.settings(sc, p).map_err(RunError::Failed)?;
        let out = crate::bench::run(&s, self.interrupt.clone())
            .await
            .map_err(|e| RunError::Failed(e.to_string()))?;
        Ok(out.summary)
    }

    async fn settle(&mut self) {
        let Some(target) = self.metrics.clone() else {
            tokio::time::sleep(self.settle).await;
            return;
        };
        let fetch = || {
            let t = target.clone();
            async move {
                match tokio::time::timeout(Duration::from_secs(5), http::get(&t, "/metrics")).await
                {
                    Ok(Ok((200, body))) => Some(String::from_utf8_lossy(&body).into_owned()),
                    _ => None,
                }
            }
        };
        match wait_drained(fetch, self.drain_timeout, Duration::from_millis(100)).await {
            Drain::Drained => {}
            Drain::Unknown => {
                // No vLLM gauges: fall back to a fixed pause, once and for all.
                self.metrics = None;
                tokio::time::sleep(self.settle).await;
            }
            Drain::TimedOut(n) => eprintln!(
                "warning: the server still holds {n} requests after {:.0} s; starting the next \
                 point anyway (raise --drain-timeout-secs)",
                self.drain_timeout.as_secs_f64()
            ),
        }
    }

    fn note(&mut self, message: &str) {
        eprintln!("sweep: {message}");
    }
}

fn positive(flag: &str, v: f64) -> Result<f64, Failure> {
    if v.is_finite() && v > 0.0 {
        Ok(v)
    } else {
        Err(Failure::usage(format!("{flag}: must be a number > 0 (got {v})")))
    }
}

fn non_negative(flag: &str, v: f64) -> Result<f64, Failure> {
    if v.is_finite() && v >= 0.0 {
        Ok(v)
    } else {
        Err(Failure::usage(format!("{flag}: must be a number >= 0 (got {v})")))
    }
}

fn secs(flag: &str, v: f64) -> Result<Duration, Failure> {
    if v.is_finite() && v >= 0.0 {
        Ok(Duration::from_secs_f64(v))
    } else {
        Err(Failure::usage(format!("{flag}: must be a non-negative number of seconds (got {v})")))
    }
}

/// The sweep's scenarios: a suite, `--scenario`s, or the bench dataset options.
fn scenarios(a: &SweepArgs) -> Result<Vec<Scenario>, Failure> {
    let mut out = match &a.suite {
        Some(spec) => servelab_sweep::suite::load_suite(spec).map_err(Failure::usage)?,
        None => Vec::new(),
    };
    for s in &a.scenarios {
        let sc = parse_scenario(s).map_err(Failure::usage)?;
        if out.iter().any(|o| o.name == sc.name) {
            return Err(Failure::usage(format!("--scenario: '{s}' is given twice")));
        }
        out.push(sc);
    }
    if out.is_empty() {
        let name = match a.bench.dataset_name {
            DatasetName::Random => {
                format!("random-{}x{}", a.bench.random_input_len, a.bench.random_output_len)
            }
            DatasetName::Sharegpt => "sharegpt".into(),
            DatasetName::Jsonl => "jsonl".into(),
            DatasetName::Prefix => "prefix".into(),
        };
        out.push(Scenario::new(name, DatasetChoice::FromArgs));
    }
    Ok(out)
}

/// The swept levels: `--concurrency`, else a `--request-rate` other than `inf` (a list or a
/// single rate), else the default concurrency grid. A single rate beside `--concurrency`
/// applies to every concurrency level.
fn grid_loads(concurrency: Option<&str>, rate: &str) -> Result<Vec<Level>, Failure> {
    let rate_given = rate.trim() != "inf";
    match (concurrency, rate_given) {
        (Some(_), true) if rate.contains(',') => Err(Failure::usage(
            "--concurrency with a --request-rate list: sweep one axis at a time",
        )),
        (Some(c), _) => {
            parse_concurrency_list(c).map_err(|e| Failure::usage(format!("--concurrency: {e}")))
        }
        (None, true) => {
            parse_rate_list(rate).map_err(|e| Failure::usage(format!("--request-rate: {e}")))
        }
        (None, false) => parse_concurrency_list(DEFAULT_CONCURRENCY).map_err(Failure::usage),
    }
}

/// What the flags resolve to before anything runs.
struct Prepared {
    plan: SweepPlan,
    base: BenchSettings,
    columns: Vec<Column>,
    sim_slots: Option<usize>,
}

/// Turn flags into a plan, the base bench settings and the runner's options.
fn plan(mut a: SweepArgs, api_key: Option<String>) -> Result<Prepared, Failure> {
    let loads = grid_loads(a.concurrency.as_deref(), &a.bench.request_rate)?;
    if matches!(loads.first(), Some(Level::Rate(_))) {
        // Each point sets its own rate; the base settings take the default.
        a.bench.request_rate = "inf".into();
    }
    let columns = parse_columns(&a.columns).map_err(Failure::usage)?;
    let slo = a
        .slo
        .as_deref()
        .map(|s| servelab_metrics::SloSpec::parse("--slo", s))
        .transpose()
        .map_err(Failure::usage)?;
    let scenarios = scenarios(&a)?;
    let dataset_path = a.bench.dataset_path.clone();
    let file_dataset = matches!(a.bench.dataset_name, DatasetName::Sharegpt | DatasetName::Jsonl);
    let mut base = BenchSettings::from_args(a.bench, api_key).map_err(Failure::usage)?;
    let mut pcts = base.percentiles.clone();
    pcts.push(99.0);
    pcts.extend(column_percentiles(&columns));
    pcts.extend(slo.as_ref().map(|s| s.percentiles()).unwrap_or_default());
    pcts.sort_by(f64::total_cmp);
    pcts.dedup();
    base.percentiles = pcts;
    // Check every scenario's dataset before the first run, not halfway through.
    let mut warnings = Vec::new();
    for sc in &scenarios {
        dataset(sc, dataset_path.as_ref()).map_err(Failure::usage)?;
        let from_file =
            sc.dataset.is_file() || (sc.dataset == DatasetChoice::FromArgs && file_dataset);
        if from_file && !a.same_prompts {
            warnings.push(format!(
                "scenario '{}' draws its prompts from a file, so points at different loads \
                 repeat prompts: with a prefix cache on the server, repeats are answered faster \
                 and later points can look better than they are",
                sc.name
            ));
        }
    }
    let (output_dir, resume) = match (a.resume, a.output_dir) {
        (Some(d), _) => {
            if !d.is_dir() {
                return Err(Failure::usage(format!(
                    "--resume {}: no such directory (give the --output-dir of an earlier sweep)",
                    d.display()
                )));
            }
            (d, true)
        }
        (None, Some(d)) => (d, false),
        (None, None) => (
            PathBuf::from(format!("sweep-{}", crate::time::compact(&crate::time::now_rfc3339()))),
            false,
        ),
    };
    if a.min_prompts == 0 || a.max_prompts < a.min_prompts {
        return Err(Failure::usage(format!(
            "--min-prompts {} / --max-prompts {}: need 1 <= min <= max",
            a.min_prompts, a.max_prompts
        )));
    }
    let plan = SweepPlan {
        scenarios,
        loads,
        prompts: PromptPolicy {
            fixed: None,
            per_load: positive("--prompts-per-concurrency", a.prompts_per_concurrency)?,
            min: a.min_prompts,
            max: a.max_prompts,
        },
        base_seed: base.seed,
        fresh_prompts: !a.same_prompts,
        knee: KneeRule {
            min_gain_per_doubling: non_negative("--knee-min-gain-pct", a.knee_min_gain_pct)?
                / 100.0,
            max_ttft_factor: positive("--knee-max-ttft-factor", a.knee_max_ttft_factor)?,
        },
        slo,
        slo_resolution: positive("--slo-resolution", a.slo_resolution)?,
        slo_max_probes: a.slo_max_probes,
        output_dir,
        resume,
        warnings,
    };
    Ok(Prepared { plan, base, columns, sim_slots: a.sim_max_num_seqs })
}

pub async fn run(args: SweepArgs, interrupt: watch::Receiver<bool>) -> Result<ExitStatus, Failure> {
    let settle = secs("--settle-secs", args.settle_secs)?;
    let drain_timeout = secs("--drain-timeout-secs", args.drain_timeout_secs)?;
    let dataset_path = args.bench.dataset_path.clone();
    let api_key = std::env::var("OPENAI_API_KEY").ok().filter(|k| !k.is_empty());
    let Prepared { plan, mut base, columns, sim_slots } = plan(args, api_key)?;

    // One simulator for the whole sweep (not one per point), so the drain check sees it.
    let mut sim = None;
    if base.target == TargetSpec::Simulator {
        let mut cfg = servelab_sim::SimConfig::default();
        if let Some(n) = sim_slots {
            cfg = cfg.with_max_num_seqs(n);
        }
        let handle = servelab_sim::start(cfg)
            .await
            .map_err(|e| Failure::runtime(format!("cannot start the built-in simulator: {e}")))?;
        eprintln!(
            "No --base-url given: sweeping the built-in simulator at {} (TTFT 50 ms, ITL 10 ms, \
             {}). Pass --base-url to measure a real server.",
            handle.base_url(),
            sim_slots.map_or("no capacity limit".to_string(), |n| format!("{n} sequence slots"))
        );
        base.target = TargetSpec::Url(handle.base_url());
        base.tokenizer
            .get_or_insert_with(|| servelab_workload::tokenizer::DEFAULT_ENCODING.to_string());
        if base.continuous_usage == ContinuousUsage::Auto {
            base.continuous_usage = ContinuousUsage::On;
        }
        sim = Some(handle);
    } else if sim_slots.is_some() {
        return Err(Failure::usage(
            "--sim-max-num-seqs: only for the built-in simulator (drop --base-url/--host/--port)",
        ));
    }
    let metrics = match &base.target {
        TargetSpec::Url(u) => Target::resolve(u, "/metrics").await.ok(),
        TargetSpec::Simulator => None,
    };
    let mut runner = BenchRunner { base, dataset_path, metrics, settle, drain_timeout, interrupt };
    let result = run_sweep(&plan, &mut runner).await;
    if let Some(h) = sim {
        h.shutdown().await;
    }
    let result = result.map_err(Failure::runtime)?;
    let dir = &plan.output_dir;
    write_outputs(dir, &result, &columns).map_err(Failure::runtime)?;
    let text = servelab_sweep::render::summary_markdown(&result, &columns);
    let mut stdout = std::io::stdout().lock();
    // A closed pipe (`| head`) is not an error worth reporting.
    let _ = stdout.write_all(text.as_bytes());
    let _ = stdout.flush();
    eprintln!("Sweep results in {}", dir.display());
    if result.interrupted {
        return Err(Failure::runtime(format!(
            "interrupted: partial results are in {d}; continue with --resume {d}",
            d = dir.display()
        )));
    }
    if result.slo_unmet() {
        eprintln!("SLO not met at any measured load");
        return Ok(ExitStatus::ThresholdFailed);
    }
    Ok(ExitStatus::Success)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_axis_at_a_time() {
        let c = |v: &[usize]| v.iter().map(|&n| Level::Concurrency(n)).collect::<Vec<_>>();
        assert_eq!(grid_loads(Some("4,1"), "inf").unwrap(), c(&[1, 4]));
        assert_eq!(grid_loads(Some("2"), "5").unwrap(), c(&[2]));
        assert_eq!(grid_loads(None, "inf").unwrap(), c(&[1, 2, 4, 8, 16, 32, 64]));
        assert_eq!(grid_loads(None, "2,1").unwrap(), vec![Level::Rate(1.0), Level::Rate(2.0)]);
        assert_eq!(grid_loads(None, "3").unwrap(), vec![Level::Rate(3.0)]);
        let e = grid_loads(Some("1"), "1,2").unwrap_err().to_string();
        assert_eq!(e, "--concurrency with a --request-rate list: sweep one axis at a time");
        assert!(grid_loads(None, "1,inf").is_err());
    }
}
