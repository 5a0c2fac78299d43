//! Trials and their results: one engine configuration (engine + options), launched once and
//! run through every profile. Each finished trial is one JSON file in its folder of the
//! experiment directory (`<dir>/<trial>/trial.json`, next to its `engine.log`), written
//! atomically, so a resumed experiment skips exactly the trials that finished.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use servelab_metrics::{EngineMetrics, Summary};
use servelab_metrics::{Metric, MetricKey, SloCheck, SloSpec};

use crate::error::LabError;

/// What the engine reported about one profile (from the bench's `/metrics` scrapes; see
/// [`EngineMetrics`]). Absent figures are `None`: the engine does not export them, or has no
/// `/metrics`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EngineFigures {
    /// Prefix-cache hits / queries over the profile (tokens), in [0, 1].
    pub prefix_cache_hit_rate: Option<f64>,
    /// KV-cache usage, the largest scraped before, during or after the profile, in [0, 1].
    pub kv_cache_usage: Option<f64>,
    /// Preemptions during the profile.
    pub preemptions: Option<f64>,
    /// Accepted / drafted speculative tokens over the profile.
    pub spec_decode_acceptance: Option<f64>,
    /// Requests running at the end of the profile (gauge).
    pub requests_running: Option<f64>,
    /// Requests waiting at the end of the profile (gauge).
    pub requests_waiting: Option<f64>,
    /// The most requests running in any scrape during the profile.
    #[serde(default)]
    pub peak_requests_running: Option<f64>,
    /// The most requests waiting in any scrape during the profile.
    #[serde(default)]
    pub peak_requests_waiting: Option<f64>,
    /// Token counters over the profile (a check against the client's counts).
    pub prompt_tokens: Option<f64>,
    /// Tokens the engine generated over the profile.
    pub generation_tokens: Option<f64>,
    /// Requests the engine finished successfully over the profile.
    pub requests_succeeded: Option<f64>,
}

impl From<&EngineMetrics> for EngineFigures {
    fn from(e: &EngineMetrics) -> EngineFigures {
        let last = e.series.last();
        EngineFigures {
            prefix_cache_hit_rate: e.prefix_cache_hit_rate,
            kv_cache_usage: e.peak_kv_cache_usage,
            preemptions: e.preemptions,
            spec_decode_acceptance: e.spec_decode_acceptance,
            requests_running: last.and_then(|p| p.requests_running),
            requests_waiting: last.and_then(|p| p.requests_waiting),
            peak_requests_running: e.peak_requests_running,
            peak_requests_waiting: e.peak_requests_waiting,
            prompt_tokens: e.prompt_tokens,
            generation_tokens: e.generation_tokens,
            requests_succeeded: e.requests_finished,
        }
    }
}

/// Which configuration a trial runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TrialSpec {
    /// `engine` or `engine+option+option` (options in experiment order); a reference run
    /// adds `.ref-<option>` (see [`TrialSpec::reference`]).
    pub id: String,
    /// The engine's name.
    pub engine: String,
    /// Names of the options added to its command, in experiment order.
    pub options: Vec<String>,
    /// With `acceptance.interleave`: this is the configuration `options` measured again,
    /// launch by launch in turn with the step that tries this option.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference_for: Option<String>,
}

impl TrialSpec {
    /// The trial of `engine` with `options`, its id joined with `+`.
    pub fn new(engine: &str, options: &[String]) -> TrialSpec {
        let id = std::iter::once(engine.to_string())
            .chain(options.iter().cloned())
            .collect::<Vec<_>>()
            .join("+");
        TrialSpec { id, engine: engine.to_string(), options: options.to_vec(), reference_for: None }
    }

    /// `of` measured again alongside the step that tries `option`.
    pub fn reference(of: &TrialSpec, option: &str) -> TrialSpec {
        TrialSpec {
            id: format!("{}.ref-{option}", of.id),
            reference_for: Some(option.to_string()),
            ..of.clone()
        }
    }
}

/// One profile's outcome in one trial (one run of it, with `acceptance.repeats` > 1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProfileResult {
    /// The profile's name.
    pub profile: String,
    /// Which run of the profile this is, from 0.
    #[serde(default)]
    pub repeat: u32,
    /// The cache state the run started from: how many profile runs (other prompts) this
    /// launch of the engine served before it; `Some(0)` is a fresh engine. `None` in trials
    /// saved before servelab kept it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after_runs: Option<u32>,
    /// Measured requests that succeeded.
    pub completed: u64,
    /// Measured requests that failed.
    pub failed: u64,
    /// First intended send to last response end, seconds.
    pub duration_s: f64,
    /// Prompt plus output tokens of completed requests per second.
    pub total_tokens_per_s: f64,
    /// Output tokens of completed requests per second.
    pub output_tokens_per_s: f64,
    /// Completed requests per second.
    pub requests_per_s: f64,
    /// P99 TTFT, ms; `None` when no request produced a token.
    pub ttft_p99_ms: Option<f64>,
    /// P99 TPOT, ms; `None` when no request produced 2 or more tokens.
    pub tpot_p99_ms: Option<f64>,
    /// Mean TPOT, ms (the published lab tables' latency figure); `None` as for the P99, and
    /// in trials saved before it was kept.
    #[serde(default)]
    pub tpot_mean_ms: Option<f64>,
    /// The objective's SLO check, when the objective has one.
    pub slo: Option<SloCheck>,
    /// Failed requests by kind, e.g. `http_status: 3`.
    pub failures: Vec<String>,
    /// Total (prompt + output) and output tokens of each completed request: the units the
    /// bootstrap resamples.
    pub request_total_tokens: Vec<f64>,
    /// Output tokens of each completed request.
    pub request_output_tokens: Vec<f64>,
    /// What the engine's `/metrics` said about this profile.
    pub engine: EngineFigures,
    /// The bench was interrupted: a partial result.
    pub interrupted: bool,
    /// The run's summary block as `vllm bench serve` prints it, which published lab reports
    /// paste per experiment; `None` in trials saved before servelab kept it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary_block: Option<String>,
}

impl ProfileResult {
    /// The result of one bench run of `profile`, with `slo` checked when given.
    pub fn from_summary(profile: &str, s: &Summary, slo: Option<&SloSpec>) -> ProfileResult {
        let engine = s.engine.as_ref().map(EngineFigures::from).unwrap_or_default();
        let ok = || s.requests.iter().filter(|r| r.is_success());
        let tokens = |r: &servelab_metrics::RequestRow| {
            (r.prompt_tokens.unwrap_or(0) + r.output_tokens.unwrap_or(0)) as f64
        };
        ProfileResult {
            profile: profile.to_string(),
            repeat: 0,
            after_runs: None,
            completed: s.completed,
            failed: s.failed,
            duration_s: s.duration_s,
            total_tokens_per_s: s.total_token_throughput,
            output_tokens_per_s: s.output_throughput,
            requests_per_s: s.request_throughput,
            ttft_p99_ms: (s.ttft_ms.count > 0).then(|| s.ttft_ms.percentile(99.0)).flatten(),
            tpot_p99_ms: (s.tpot_ms.count > 0).then(|| s.tpot_ms.percentile(99.0)).flatten(),
            tpot_mean_ms: (s.tpot_ms.count > 0).then_some(s.tpot_ms.mean),
            slo: slo.map(|o| o.check(s)),
            failures: s.failures.iter().map(|f| format!("{}: {}", f.kind, f.count)).collect(),
            request_total_tokens: ok().map(tokens).collect(),
            request_output_tokens: ok().map(|r| r.output_tokens.unwrap_or(0) as f64).collect(),
            engine,
            interrupted: s.info.interrupted,
            summary_block: Some(servelab_outputs::vllm_block(s)),
        }
    }

    /// The objective's number.
    pub fn value(&self, m: MetricKey) -> f64 {
        match m.metric {
            Metric::OutputThroughput => self.output_tokens_per_s,
            Metric::RequestThroughput => self.requests_per_s,
            _ => self.total_tokens_per_s,
        }
    }

    /// Completed / all measured requests; 0 when nothing ran.
    pub fn success_rate(&self) -> f64 {
        let n = self.completed + self.failed;
        if n == 0 {
            0.0
        } else {
            self.completed as f64 / n as f64
        }
    }

    /// Bootstrap units whose mean is the objective's value: each completed request's share,
    /// scaled by requests / duration.
    pub fn units(&self, m: MetricKey) -> Vec<Vec<f64>> {
        if self.duration_s <= 0.0 {
            return Vec::new();
        }
        let scale = self.completed as f64 / self.duration_s;
        let per_request: Vec<f64> = match m.metric {
            Metric::OutputThroughput => self.request_output_tokens.clone(),
            Metric::RequestThroughput => vec![1.0; self.completed as usize],
            _ => self.request_total_tokens.clone(),
        };
        per_request.into_iter().map(|t| vec![t * scale]).collect()
    }
}

/// How a trial ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum TrialStatus {
    /// Every profile ran (some requests may have failed; judged later).
    Finished,
    /// The engine did not start, never became ready, or died mid-profile; or a bench
    /// could not run.
    Failed {
        /// What went wrong.
        reason: String,
        /// The last lines of the engine's log.
        log_tail: String,
    },
}

/// A finished trial, as stored in `trial.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrialResult {
    /// The configuration it ran.
    pub spec: TrialSpec,
    /// The launch command as run (port and binary substituted).
    pub command: String,
    /// The launch command as a template: the engine's command plus the options' flags.
    pub command_template: String,
    /// How it ended.
    #[serde(flatten)]
    pub status: TrialStatus,
    /// Seconds from spawn to ready.
    pub startup_secs: Option<f64>,
    /// Every profile run, in the order run (one per profile and repeat).
    pub profiles: Vec<ProfileResult>,
}

impl TrialResult {
    /// Why the trial failed, or `None` when it finished.
    pub fn failure(&self) -> Option<&str> {
        match &self.status {
            TrialStatus::Finished => None,
            TrialStatus::Failed { reason, .. } => Some(reason),
        }
    }

    /// The first run of a profile.
    pub fn profile(&self, name: &str) -> Option<&ProfileResult> {
        self.profiles.iter().find(|p| p.profile == name)
    }

    /// Every run of a profile, in order.
    pub fn runs(&self, name: &str) -> Vec<&ProfileResult> {
        self.profiles.iter().filter(|p| p.profile == name).collect()
    }

    /// Mean TPOT of a profile, ms: the mean over its runs that measured one.
    pub fn tpot_mean(&self, name: &str) -> Option<f64> {
        let v: Vec<f64> = self.runs(name).iter().filter_map(|r| r.tpot_mean_ms).collect();
        (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
    }

    /// The objective of a profile: the mean over its runs.
    pub fn value(&self, name: &str, m: MetricKey) -> Option<f64> {
        let runs = self.runs(name);
        (!runs.is_empty()).then(|| runs.iter().map(|r| r.value(m)).sum::<f64>() / runs.len() as f64)
    }
}

/// The folder of one trial.
pub fn trial_dir(dir: &Path, id: &str) -> PathBuf {
    dir.join(servelab_outputs::file_safe(id))
}

const FILE: &str = "trial.json";

/// Write a finished trial atomically (temp file, then rename).
pub fn save(dir: &Path, t: &TrialResult) -> Result<(), LabError> {
    let folder = trial_dir(dir, &t.spec.id);
    let write = |p: &Path, e: std::io::Error| LabError::Write {
        path: p.to_path_buf(),
        message: e.to_string(),
    };
    std::fs::create_dir_all(&folder).map_err(|e| write(&folder, e))?;
    let json = serde_json::to_string_pretty(t)
        .map_err(|e| LabError::Write { path: folder.join(FILE), message: e.to_string() })?;
    let tmp = folder.join(format!("{FILE}.tmp"));
    std::fs::write(&tmp, json).map_err(|e| write(&tmp, e))?;
    let dest = folder.join(FILE);
    std::fs::rename(&tmp, &dest).map_err(|e| write(&dest, e))
}

/// Every finished trial under `dir`, sorted by id.
pub fn load_all(dir: &Path) -> Result<Vec<TrialResult>, LabError> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else { return Ok(out) };
    for entry in entries.flatten() {
        let path = entry.path().join(FILE);
        if !path.is_file() {
            continue;
        }
        let text = std::fs::read_to_string(&path)
            .map_err(|e| LabError::State { path: path.clone(), message: e.to_string() })?;
        let t: TrialResult = serde_json::from_str(&text).map_err(|e| LabError::State {
            path: path.clone(),
            message: format!("{e} (delete this trial's folder to run it again)"),
        })?;
        out.push(t);
    }
    out.sort_by(|a, b| a.spec.id.cmp(&b.spec.id));
    Ok(out)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn profile(name: &str, value: f64, failed: u64) -> ProfileResult {
        ProfileResult {
            profile: name.to_string(),
            repeat: 0,
            after_runs: None,
            completed: 4,
            failed,
            duration_s: 2.0,
            total_tokens_per_s: value,
            output_tokens_per_s: value / 2.0,
            requests_per_s: 2.0,
            ttft_p99_ms: Some(10.0),
            tpot_p99_ms: Some(5.0),
            tpot_mean_ms: Some(4.0),
            slo: None,
            failures: vec![],
            request_total_tokens: vec![value / 2.0; 4],
            request_output_tokens: vec![value / 4.0; 4],
            engine: EngineFigures::default(),
            interrupted: false,
            summary_block: None,
        }
    }

    #[test]
    fn ids_join_engine_and_options() {
        assert_eq!(TrialSpec::new("sim", &[]).id, "sim");
        assert_eq!(TrialSpec::new("sim", &["a".into(), "b".into()]).id, "sim+a+b");
    }

    #[test]
    fn units_average_to_the_throughput() {
        let p = profile("t", 100.0, 0);
        let u = p.units(MetricKey::of(Metric::TotalTokenThroughput));
        assert_eq!(u, vec![vec![100.0]; 4]);
        assert_eq!(p.units(MetricKey::of(Metric::RequestThroughput)), vec![vec![2.0]; 4]);
        assert_eq!(p.success_rate(), 1.0);
        assert_eq!(profile("t", 1.0, 1).success_rate(), 0.8);
    }

    #[test]
    fn trials_round_trip_through_their_folder() {
        let dir = tempfile::tempdir().unwrap();
        let t = TrialResult {
            spec: TrialSpec::new("sim", &["fast".into()]),
            command: "sim --port 1 --fast".into(),
            command_template: "sim --port {port} --fast".into(),
            status: TrialStatus::Failed { reason: "no".into(), log_tail: "tail".into() },
            startup_secs: Some(0.5),
            profiles: vec![profile("t", 10.0, 0)],
        };
        save(dir.path(), &t).unwrap();
        assert!(dir.path().join("sim_fast/trial.json").is_file());
        assert_eq!(load_all(dir.path()).unwrap(), vec![t]);
        std::fs::write(dir.path().join("sim_fast/trial.json"), "{").unwrap();
        let e = load_all(dir.path()).unwrap_err().to_string();
        assert!(e.contains("delete this trial's folder"), "{e}");
    }
}
