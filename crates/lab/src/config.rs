//! The experiment file (YAML): engines to launch, profiles to run, options to try, how to
//! judge them. Parsing checks everything before any engine starts, and every error names the
//! field (`engines[1].ready_timeout_secs`) and says what is expected.

use std::path::Path;
use std::time::Duration;

use serde::Deserialize;
use serde_yaml_ng::{Mapping, Value};
use servelab_metrics::{Metric, MetricKey, SloSpec};

use crate::error::{invalid, LabError};
use crate::profile::{scalar, ProfileSpec};

/// A whole experiment, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct Experiment {
    /// The experiment's name (default `lab`).
    pub name: String,
    /// How trials are chosen.
    pub strategy: Strategy,
    /// The engines to launch, in file order; names are unique.
    pub engines: Vec<EngineSpec>,
    /// The benchmarks every trial runs, in file order; names are unique.
    pub profiles: Vec<ProfileSpec>,
    /// Options to try, in the order the file lists them (greedy tries them in this order).
    pub options: Vec<OptionSpec>,
    /// What to maximise.
    pub objective: Objective,
    /// When a trial counts, and when a gain is real.
    pub acceptance: Acceptance,
    /// The seed every profile's prompts are derived from (default 42; see
    /// [`crate::seeds::run_seed`]).
    pub seed: u64,
}

/// How to launch and reach one engine. Templates may hold `{port}` (a free port chosen per
/// trial) and `{servelab}` (this servelab binary).
#[derive(Debug, Clone, PartialEq)]
pub struct EngineSpec {
    /// Letters, digits, `.`, `_` or `-`; it starts trial ids and folder names.
    pub name: String,
    /// Shell command (run with `sh -c`), without the options under test.
    pub command: String,
    /// Environment variables set for the command, in file order.
    pub env: Vec<(String, String)>,
    /// GET this until it answers 200.
    pub ready_url: String,
    /// How long to wait for `ready_url` before giving up on the launch (default 600 s).
    pub ready_timeout: Duration,
    /// The OpenAI-compatible base URL the profiles benchmark.
    pub base_url: String,
    /// SIGTERM to SIGKILL (default 10 s).
    pub stop_grace: Duration,
}

/// One option under test: flags appended to an engine's command.
#[derive(Debug, Clone, PartialEq)]
pub struct OptionSpec {
    /// Letters, digits, `.`, `_` or `-`; it joins trial ids (`engine+opt1+opt2`).
    pub name: String,
    /// The flags, as one shell string.
    pub flags: String,
}

/// How an experiment chooses its trials.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Strategy {
    /// Every engine once, with its own flags.
    Baseline,
    /// From the best baseline, add options one at a time; keep those that help.
    Greedy,
    /// Every engine with every combination of options.
    Grid,
}

/// The number a trial is judged by, per profile.
impl Strategy {
    /// The name as the file spells it: `baseline`, `greedy` or `grid`.
    pub fn name(self) -> &'static str {
        match self {
            Strategy::Baseline => "baseline",
            Strategy::Greedy => "greedy",
            Strategy::Grid => "grid",
        }
    }
}

/// The throughputs an experiment can maximise: each is a sum over completed requests, so
/// the bootstrap can resample them per request.
pub const OBJECTIVES: [Metric; 3] =
    [Metric::TotalTokenThroughput, Metric::OutputThroughput, Metric::RequestThroughput];

/// Maximise `metric`, counting only runs that meet `slo` (when given).
#[derive(Debug, Clone, PartialEq)]
pub struct Objective {
    /// One of [`OBJECTIVES`].
    pub metric: MetricKey,
    /// Objectives a run must meet to count; `None` counts every run.
    pub slo: Option<SloSpec>,
}

/// When a trial counts, and when a difference is more than noise.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Acceptance {
    /// Completed / (completed + failed) must reach this (default 1.0: no failed request).
    pub min_success_rate: f64,
    /// A gain must exceed this percentage and the bootstrap interval (default 2).
    pub min_gain_pct: f64,
    /// Confidence of the bootstrap interval (default 0.95).
    pub confidence: f64,
    /// Bootstrap resamples (default 1000).
    pub resamples: usize,
    /// Runs of each profile per trial (default 1). With 2 or more, the run-to-run spread of
    /// the objective, pooled over the trials compared so far, sets a noise bar too: what a
    /// machine's own noise does to throughput, which per-request units cannot show.
    pub repeats: u32,
    /// Greedy steps launch the candidate and the configuration it would replace in turn,
    /// `repeats` times each (A B B A ...), and judge the candidate on the ratios of
    /// neighbouring launches: a machine whose speed drifts over minutes moves both alike.
    pub interleave: bool,
}

impl Default for Acceptance {
    fn default() -> Self {
        Acceptance {
            min_success_rate: 1.0,
            min_gain_pct: 2.0,
            confidence: 0.95,
            resamples: 1000,
            repeats: 1,
            interleave: false,
        }
    }
}

// ---- the file as written

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ExperimentFile {
    name: Option<String>,
    strategy: Option<Strategy>,
    seed: Option<u64>,
    engines: Vec<EngineFile>,
    profiles: Vec<Value>,
    #[serde(default)]
    options: Option<Mapping>,
    objective: Option<ObjectiveFile>,
    acceptance: Option<AcceptanceFile>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct EngineFile {
    name: String,
    command: String,
    #[serde(default)]
    env: Mapping,
    ready_url: Option<String>,
    ready_timeout_secs: Option<f64>,
    base_url: Option<String>,
    stop_grace_secs: Option<f64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ObjectiveFile {
    maximize: Option<String>,
    slo: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AcceptanceFile {
    min_success_rate: Option<f64>,
    min_gain_pct: Option<f64>,
    confidence: Option<f64>,
    resamples: Option<usize>,
    repeats: Option<u32>,
    interleave: Option<bool>,
}

/// Read and check an experiment file.
pub fn load(path: &Path) -> Result<Experiment, LabError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| LabError::Read { path: path.to_path_buf(), message: e.to_string() })?;
    parse(&text)
}

/// Parse and check experiment YAML.
pub fn parse(text: &str) -> Result<Experiment, LabError> {
    let f: ExperimentFile =
        serde_yaml_ng::from_str(text).map_err(|e| invalid("experiment", e.to_string()))?;
    let name = f.name.unwrap_or_else(|| "lab".to_string());
    if name.trim().is_empty() {
        return Err(invalid("name", "must not be empty"));
    }
    if f.engines.is_empty() {
        return Err(invalid("engines", "list at least one engine (name, command)"));
    }
    let mut engines: Vec<EngineSpec> = Vec::new();
    for (i, e) in f.engines.into_iter().enumerate() {
        let e = engine(i, e)?;
        if engines.iter().any(|o| o.name == e.name) {
            return Err(invalid(
                format!("engines[{i}].name"),
                format!("'{}' is used twice", e.name),
            ));
        }
        engines.push(e);
    }
    if f.profiles.is_empty() {
        return Err(invalid("profiles", "list at least one profile (e.g. throughput)"));
    }
    let mut profiles: Vec<ProfileSpec> = Vec::new();
    for (i, v) in f.profiles.iter().enumerate() {
        let p = crate::profile::from_yaml(i, v)?;
        if profiles.iter().any(|o| o.name == p.name) {
            return Err(invalid(
                format!("profiles[{i}].name"),
                format!("'{}' is used twice", p.name),
            ));
        }
        profiles.push(p);
    }
    let options = options(f.options.unwrap_or_default())?;
    let total = MetricKey::of(Metric::TotalTokenThroughput);
    let objective = match f.objective {
        None => Objective { metric: total, slo: None },
        Some(o) => Objective {
            metric: match o.maximize.as_deref() {
                None => total,
                Some(m) => MetricKey::parse(m)
                    .filter(|k| OBJECTIVES.contains(&k.metric))
                    .ok_or_else(|| {
                        invalid(
                            "objective.maximize",
                            format!(
                                "'{m}' is not a throughput to maximise: use total_tokens_per_s, \
                                 output_tokens_per_s or requests_per_s"
                            ),
                        )
                    })?,
            },
            slo: o
                .slo
                .as_deref()
                .map(|s| SloSpec::parse("--slo", s))
                .transpose()
                .map_err(|e| invalid("objective.slo", e))?,
        },
    };
    let acceptance = acceptance(f.acceptance)?;
    let strategy = f.strategy.unwrap_or(if options.is_empty() {
        Strategy::Baseline
    } else {
        Strategy::Greedy
    });
    if strategy != Strategy::Baseline && options.is_empty() {
        return Err(invalid(
            "options",
            format!("strategy {} needs options to try", strategy.name()),
        ));
    }
    if strategy == Strategy::Grid {
        let trials = engines.len().saturating_mul(1usize << options.len().min(20));
        if options.len() > 8 || trials > 256 {
            return Err(invalid(
                "strategy",
                format!(
                    "grid of {} options over {} engines is {trials} trials: use greedy for \
                     spaces this large (grid allows at most 8 options and 256 trials)",
                    options.len(),
                    engines.len()
                ),
            ));
        }
    }
    if acceptance.interleave && strategy != Strategy::Greedy {
        return Err(invalid(
            "acceptance.interleave",
            format!("applies to greedy steps; strategy {} has none", strategy.name()),
        ));
    }
    let seed = f.seed.unwrap_or(crate::seeds::DEFAULT_LAB_SEED);
    Ok(Experiment { name, strategy, engines, profiles, options, objective, acceptance, seed })
}

fn secs(field: String, v: Option<f64>, default: f64) -> Result<Duration, LabError> {
    let v = v.unwrap_or(default);
    match servelab_plan::seconds(&field, v) {
        Ok(d) if v > 0.0 => Ok(d),
        // Beyond 1e9 s (31 years) a timeout is a typo, and would not fit a Duration.
        _ => {
            Err(invalid(field, format!("must be a positive number of seconds up to 1e9 (got {v})")))
        }
    }
}

fn engine(i: usize, e: EngineFile) -> Result<EngineSpec, LabError> {
    let at = |f: &str| format!("engines[{i}].{f}");
    check_name(&at("name"), &e.name)?;
    if e.command.trim().is_empty() {
        return Err(invalid(
            at("command"),
            "must not be empty (e.g. 'vllm serve MODEL --port {port}')",
        ));
    }
    let mut env = Vec::new();
    for (k, v) in e.env {
        let key = scalar(&k).ok_or_else(|| invalid(at("env"), "keys must be names"))?;
        let val = scalar(&v)
            .ok_or_else(|| invalid(format!("{}.{key}", at("env")), "must be a string or number"))?;
        env.push((key, val));
    }
    let base_url = e.base_url.unwrap_or_else(|| "http://127.0.0.1:{port}".to_string());
    if !base_url.starts_with("http://") {
        return Err(invalid(at("base_url"), format!("'{base_url}' must start with http://")));
    }
    let ready_url =
        e.ready_url.unwrap_or_else(|| format!("{}/health", base_url.trim_end_matches('/')));
    if !ready_url.starts_with("http://") {
        return Err(invalid(at("ready_url"), format!("'{ready_url}' must start with http://")));
    }
    Ok(EngineSpec {
        name: e.name,
        command: e.command.trim().to_string(),
        env,
        ready_url,
        ready_timeout: secs(at("ready_timeout_secs"), e.ready_timeout_secs, 600.0)?,
        base_url,
        stop_grace: secs(at("stop_grace_secs"), e.stop_grace_secs, 10.0)?,
    })
}

/// Names become trial ids (`engine+opt1+opt2`) and folder names.
fn check_name(field: &str, name: &str) -> Result<(), LabError> {
    let ok = !name.is_empty()
        && name.chars().all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
        && !name.starts_with('.');
    if ok {
        Ok(())
    } else {
        Err(invalid(field, format!("'{name}' must be letters, digits, '.', '_' or '-'")))
    }
}

fn options(m: Mapping) -> Result<Vec<OptionSpec>, LabError> {
    let mut out = Vec::new();
    for (k, v) in m {
        let name = scalar(&k).ok_or_else(|| invalid("options", "option names must be strings"))?;
        let field = format!("options.{name}");
        check_name(&field, &name)?;
        let flags = match &v {
            Value::Sequence(items) => {
                let parts: Option<Vec<String>> = items.iter().map(scalar).collect();
                parts
                    .ok_or_else(|| invalid(&field, "must be flags as a string or a list"))?
                    .join(" ")
            }
            other => scalar(other).ok_or_else(|| invalid(&field, "must be flags as a string"))?,
        };
        if flags.trim().is_empty() {
            return Err(invalid(field, "must not be empty (e.g. '--max-num-seqs 256')"));
        }
        out.push(OptionSpec { name, flags: flags.trim().to_string() });
    }
    Ok(out)
}

fn acceptance(a: Option<AcceptanceFile>) -> Result<Acceptance, LabError> {
    let d = Acceptance::default();
    let Some(a) = a else { return Ok(d) };
    let out = Acceptance {
        min_success_rate: a.min_success_rate.unwrap_or(d.min_success_rate),
        min_gain_pct: a.min_gain_pct.unwrap_or(d.min_gain_pct),
        confidence: a.confidence.unwrap_or(d.confidence),
        resamples: a.resamples.unwrap_or(d.resamples),
        repeats: a.repeats.unwrap_or(d.repeats),
        interleave: a.interleave.unwrap_or(d.interleave),
    };
    if !(0.0..=1.0).contains(&out.min_success_rate) {
        return Err(invalid("acceptance.min_success_rate", "must be in [0, 1] (1 = no failures)"));
    }
    if !(out.min_gain_pct.is_finite() && out.min_gain_pct >= 0.0) {
        return Err(invalid("acceptance.min_gain_pct", "must be a percentage >= 0"));
    }
    if !(out.confidence > 0.0 && out.confidence < 1.0) {
        return Err(invalid("acceptance.confidence", "must be in (0, 1), e.g. 0.95"));
    }
    if out.resamples > servelab_metrics::bootstrap::MAX_RESAMPLES {
        // u64::MAX panicked after the trials ran; a huge count would run for hours.
        return Err(invalid("acceptance.resamples", "must be at most 1000000 (1000 is plenty)"));
    }
    if !(1..=20).contains(&out.repeats) {
        return Err(invalid("acceptance.repeats", "must be 1 to 20 runs of each profile"));
    }
    if out.interleave && out.repeats < 2 {
        return Err(invalid(
            "acceptance.interleave",
            "needs repeats of 2 or more (pairs of neighbouring launches are compared)",
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINIMAL: &str = "
engines:
  - name: sim
    command: servelab sim serve --port {port}
profiles: [throughput]
";

    fn err(text: &str) -> String {
        parse(text).unwrap_err().to_string()
    }

    #[test]
    fn minimal_file_gets_the_defaults() {
        let e = parse(MINIMAL).unwrap();
        assert_eq!(e.name, "lab");
        assert_eq!(e.strategy, Strategy::Baseline);
        let g = &e.engines[0];
        assert_eq!(g.base_url, "http://127.0.0.1:{port}");
        assert_eq!(g.ready_url, "http://127.0.0.1:{port}/health");
        assert_eq!(g.ready_timeout, Duration::from_secs(600));
        assert_eq!(g.stop_grace, Duration::from_secs(10));
        assert_eq!(e.profiles[0].name, "throughput");
        assert_eq!(
            e.objective,
            Objective { metric: MetricKey::of(Metric::TotalTokenThroughput), slo: None }
        );
        assert_eq!(e.acceptance, Acceptance::default());
    }

    #[test]
    fn options_keep_their_order_and_default_to_greedy() {
        let e = parse(&format!(
            "{MINIMAL}options:\n  zeta: --max-num-seqs 16\n  alpha: [--itl-ms, 20]\n"
        ))
        .unwrap();
        assert_eq!(e.strategy, Strategy::Greedy);
        let names: Vec<_> = e.options.iter().map(|o| (o.name.as_str(), o.flags.as_str())).collect();
        assert_eq!(names, vec![("zeta", "--max-num-seqs 16"), ("alpha", "--itl-ms 20")]);
    }

    #[test]
    fn objective_and_acceptance() {
        let e = parse(&format!(
            "{MINIMAL}objective: {{maximize: output_tokens_per_s, slo: 'ttft_p99:500'}}\n\
             acceptance: {{min_gain_pct: 5, resamples: 200, repeats: 3}}\n"
        ))
        .unwrap();
        assert_eq!(e.acceptance.repeats, 3);
        assert_eq!(e.objective.metric, MetricKey::of(Metric::OutputThroughput));
        assert_eq!(e.objective.slo.as_ref().unwrap().terms[0].limit_ms, 500.0);
        assert_eq!(e.acceptance.min_gain_pct, 5.0);
        assert_eq!(e.acceptance.resamples, 200);
        assert_eq!(e.acceptance.min_success_rate, 1.0);
    }

    #[test]
    fn repeats_are_bounded_and_interleave_needs_two_and_greedy() {
        let e = err(&format!("{MINIMAL}acceptance: {{repeats: 0}}\n"));
        assert_eq!(e, "acceptance.repeats: must be 1 to 20 runs of each profile");
        let e = err(&format!("{MINIMAL}acceptance: {{resamples: 18446744073709551615}}\n"));
        assert!(e.starts_with("acceptance.resamples: must be at most 1000000"), "{e}");
        let e = err(&format!("{MINIMAL}acceptance: {{interleave: true}}\n"));
        assert!(e.starts_with("acceptance.interleave: needs repeats of 2"), "{e}");
        let e = err(&format!("{MINIMAL}acceptance: {{interleave: true, repeats: 2}}\n"));
        assert_eq!(e, "acceptance.interleave: applies to greedy steps; strategy baseline has none");
        let ok = parse(&format!(
            "{MINIMAL}options: {{a: --a}}\nacceptance: {{interleave: true, repeats: 2}}\n"
        ))
        .unwrap();
        assert!(ok.acceptance.interleave);
    }

    #[test]
    fn errors_name_the_field() {
        assert!(err("engines: []\nprofiles: [throughput]\n").starts_with("engines: list at least"));
        let e = err("engines:\n  - name: a\nprofiles: [throughput]\n");
        assert!(e.contains("engines[0]") && e.contains("missing field `command`"), "{e}");
        let e = err("engines:\n  - name: a\n    comand: x\n    command: y\nprofiles: [x]\n");
        assert!(e.contains("unknown field `comand`"), "{e}");
        let e = err(&MINIMAL.replace("{port}", "{port}\n    ready_timeout_secs: -1"));
        assert_eq!(
            e,
            "engines[0].ready_timeout_secs: must be a positive number of seconds up to 1e9 (got -1)"
        );
        // Found by the property test: a huge timeout panicked converting to a Duration.
        let e = err(&MINIMAL.replace("{port}", "{port}\n    stop_grace_secs: 1e300"));
        assert!(e.starts_with("engines[0].stop_grace_secs: must be a positive"), "{e}");
        let e = err(&MINIMAL.replace("name: sim", "name: 'a b'"));
        assert_eq!(e, "engines[0].name: 'a b' must be letters, digits, '.', '_' or '-'");
        let e = err(&format!("{MINIMAL}options:\n  fast: ''\n"));
        assert_eq!(e, "options.fast: must not be empty (e.g. '--max-num-seqs 256')");
        let e = err(&format!("{MINIMAL}objective: {{slo: 'ttft_p77x:5'}}\n"));
        assert!(e.starts_with("objective.slo: --slo: unknown objective 'ttft_p77x'"), "{e}");
        let e = err(&format!("{MINIMAL}acceptance: {{confidence: 2}}\n"));
        assert_eq!(e, "acceptance.confidence: must be in (0, 1), e.g. 0.95");
        let e = err(&format!("{MINIMAL}strategy: grid\n"));
        assert_eq!(e, "options: strategy grid needs options to try");
        let e = err(
            &MINIMAL.replace("command: servelab", "base_url: https://x\n    command: servelab")
        );
        assert_eq!(e, "engines[0].base_url: 'https://x' must start with http://");
        let e =
            err("engines:\n  - name: a\n    command: x\nprofiles: [throughput]\nstrategy: best\n");
        assert!(e.starts_with("experiment: strategy: unknown variant `best`"), "{e}");
    }

    #[test]
    fn duplicate_engine_names_are_refused() {
        let text = "engines:\n  - {name: a, command: x}\n  - {name: a, command: y}\nprofiles: [throughput]\n";
        assert_eq!(err(text), "engines[1].name: 'a' is used twice");
    }

    #[test]
    fn grid_size_is_bounded() {
        let mut text = format!("{MINIMAL}strategy: grid\noptions:\n");
        for i in 0..9 {
            text.push_str(&format!("  o{i}: --x {i}\n"));
        }
        assert!(err(&text).starts_with("strategy: grid of 9 options over 1 engines is 512 trials"));
    }
}
