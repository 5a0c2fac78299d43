//! What a sweep produced: per-point results (as stored on disk) and per-scenario findings.

use serde::{Deserialize, Serialize};
use servelab_metrics::Summary;

use crate::slo::Bracket;
use servelab_load::{Axis, Level};
use servelab_metrics::knee::{Knee, KneeRule};
use servelab_metrics::SloSpec;

/// Why a point was run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// A level of the grid.
    Grid,
    /// A level between two grid levels, measured by the SLO search.
    Probe,
    /// A repeat of the level the SLO search settled on.
    Confirm,
}

impl Role {
    /// The role as tags and file names spell it.
    pub fn parse(s: &str) -> Option<Role> {
        [Role::Grid, Role::Probe, Role::Confirm].into_iter().find(|r| r.as_str() == s)
    }

    /// `grid`, `probe` or `confirm`.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Grid => "grid",
            Role::Probe => "probe",
            Role::Confirm => "confirm",
        }
    }
}

/// One full bench run of a sweep, as written to `points/<scenario>/<load>.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PointResult {
    /// The scenario's name.
    pub scenario: String,
    /// The load level it ran at.
    pub load: Level,
    /// Why it was run.
    pub role: Role,
    /// Prompts it sent.
    pub num_prompts: usize,
    /// The seed its prompts and arrivals were drawn with.
    pub seed: u64,
    /// False for a run that stopped early (Ctrl-C); such a point is run again on resume.
    pub complete: bool,
    /// What the run measured.
    pub summary: Summary,
}

/// The SLO search's answer for one scenario.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SloOutcome {
    /// The objectives searched for.
    pub spec: SloSpec,
    /// The bracket among all measured levels (grid and probes).
    pub bracket: Bracket,
    /// The highest level that met the objectives, if any.
    pub best: Option<f64>,
    /// Whether a repeat run at `best` met them too (`None`: not run).
    pub confirmed: Option<bool>,
    /// One sentence for the reader.
    pub verdict: String,
}

/// Everything measured and found for one scenario.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScenarioResult {
    /// The scenario's name.
    pub name: String,
    /// Whether its levels are concurrencies or request rates.
    pub axis: Axis,
    /// The dataset as bench labels it, e.g. `random(1000:100)`.
    pub dataset: String,
    /// Grid points, by ascending load.
    pub points: Vec<PointResult>,
    /// SLO probes and confirming runs, in the order they ran.
    pub probes: Vec<PointResult>,
    /// Where throughput saturated; `None` when no point was measured.
    pub knee: Option<Knee>,
    /// The SLO search's answer; `None` without `--slo`, or when no point was measured.
    pub slo: Option<SloOutcome>,
}

/// The whole sweep, as written to `sweep.json` (there without per-request rows, which stay in
/// the per-point files).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepResult {
    /// The sweep's label (`--label`): what was swept, e.g. a deployment ("Qwen3-32B 3P1D").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// Its `KEY=VALUE` tags (hardware, engine, layout), shown under the title.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<(String, String)>,
    /// Every scenario, in the order run.
    pub scenarios: Vec<ScenarioResult>,
    /// The thresholds the knees were found with.
    pub knee_rule: KneeRule,
    /// Things the reader must know (e.g. repeated prompts and prefix caches).
    pub warnings: servelab_metrics::Warnings,
    /// True when Ctrl-C stopped the sweep before every point ran.
    pub interrupted: bool,
}

impl SweepResult {
    /// True when an SLO was searched and some scenario had no level meeting it.
    pub fn slo_unmet(&self) -> bool {
        self.scenarios.iter().any(|s| s.slo.as_ref().is_some_and(|o| o.best.is_none()))
    }
}
