//! The sweep grid: scenarios, and how many prompts and which seed each point gets. The load
//! levels themselves are [`servelab_load::Level`]s.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use servelab_load::Level;
use servelab_records::{IslOsl, NotIslOsl};

use crate::error::{invalid, SweepError};

/// What each point of a scenario sends.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum DatasetChoice {
    /// The dataset options given to the command (`--dataset-name`, ...).
    FromArgs,
    /// Random prompts with exactly these token lengths (ignore_eos is forced on).
    Random {
        /// Prompt length, tokens.
        input_len: u64,
        /// Output length, tokens.
        output_len: u64,
    },
    /// ShareGPT conversations; `path` defaults to `--dataset-path`.
    Sharegpt {
        /// The ShareGPT JSON file.
        #[serde(default)]
        path: Option<PathBuf>,
        /// Output length in tokens for every request; `None` keeps each conversation's own.
        #[serde(default)]
        output_len: Option<u64>,
    },
    /// One request per JSON line; `path` defaults to `--dataset-path`.
    Jsonl {
        /// The JSONL file.
        #[serde(default)]
        path: Option<PathBuf>,
    },
}

impl DatasetChoice {
    /// True when every point reads the same file, so prompts repeat across points.
    pub fn is_file(&self) -> bool {
        matches!(self, DatasetChoice::Sharegpt { .. } | DatasetChoice::Jsonl { .. })
    }
}

/// `3000:150` → a random scenario named `3000x150` with those input:output lengths (read as
/// [`IslOsl`], servelab's one `ISL:OSL`; neither may be 0).
pub fn parse_scenario(s: &str) -> Result<Scenario, SweepError> {
    let lengths = s.parse::<IslOsl>().map_err(|e| e.to_string());
    let lengths = lengths.and_then(|l| {
        (l.isl > 0 && l.osl > 0).then_some(l).ok_or_else(|| NotIslOsl(s.into()).to_string())
    });
    let IslOsl { isl, osl } = lengths.map_err(|e| invalid("--scenario", e))?;
    let (input_len, output_len) = (u64::from(isl), u64::from(osl));
    Ok(Scenario::new(
        format!("{input_len}x{output_len}"),
        DatasetChoice::Random { input_len, output_len },
    ))
}

/// How many prompts a point sends.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PromptPolicy {
    /// A fixed count for every point; `None` scales with the load.
    pub fixed: Option<usize>,
    /// Prompts per unit of load (per concurrent request, or per req/s).
    pub per_load: f64,
    /// Fewest prompts a scaled point sends.
    pub min: usize,
    /// Most prompts a scaled point sends.
    pub max: usize,
}

impl Default for PromptPolicy {
    fn default() -> Self {
        Self { fixed: None, per_load: 5.0, min: 10, max: 2000 }
    }
}

impl PromptPolicy {
    /// Prompts per unit of load (> 0), clamped to `[min, max]` (1 <= min <= max). Errors
    /// name the flag.
    pub fn scaled(per_load: f64, min: usize, max: usize) -> Result<PromptPolicy, String> {
        if !(per_load.is_finite() && per_load > 0.0) {
            return Err(format!(
                "--prompts-per-concurrency: must be a number > 0 (got {per_load})"
            ));
        }
        if min == 0 || max < min {
            return Err(format!("--min-prompts {min} / --max-prompts {max}: need 1 <= min <= max"));
        }
        Ok(PromptPolicy { fixed: None, per_load, min, max })
    }

    /// `clamp(ceil(per_load × load), min, max)`, or the fixed count; always ≥ 1. An
    /// all-at-once level (rate inf) sends `max`.
    pub fn prompts_for(&self, load: Level) -> usize {
        if let Some(n) = self.fixed {
            return n.max(1);
        }
        if !load.value().is_finite() {
            return self.max.max(self.min).max(1);
        }
        let scaled = (self.per_load * load.value()).ceil();
        let scaled = if scaled.is_finite() && scaled > 0.0 { scaled as usize } else { 1 };
        scaled.clamp(self.min.max(1), self.max.max(self.min).max(1))
    }
}

/// A named workload swept over load levels.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Scenario {
    /// Name in tables, charts and file names, e.g. `3000x150`.
    pub name: String,
    /// What its requests send.
    pub dataset: DatasetChoice,
    /// Levels; `None` uses the command's grid.
    pub loads: Option<Vec<Level>>,
    /// A fixed prompt count per point; `None` uses the command's policy.
    pub num_prompts: Option<usize>,
    /// Prompts per unit of load; `None` uses the command's `--prompts-per-concurrency`.
    pub prompts_per_load: Option<f64>,
    /// Concurrency cap for rate sweeps; `None` uses the command's `--max-concurrency`.
    pub max_concurrency: Option<usize>,
    /// Prompt counts of single levels (a suite case such as "concurrency 64 with 640
    /// prompts", as scripted serving suites run them); they win over every other policy.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub level_prompts: Vec<(Level, usize)>,
}

impl Scenario {
    /// A scenario with the command's levels, prompt policy and concurrency cap.
    pub fn new(name: impl Into<String>, dataset: DatasetChoice) -> Self {
        Self {
            name: name.into(),
            dataset,
            loads: None,
            num_prompts: None,
            prompts_per_load: None,
            max_concurrency: None,
            level_prompts: Vec::new(),
        }
    }
}

impl Scenario {
    /// The command's prompt policy with this scenario's overrides applied.
    pub fn prompt_policy(&self, base: PromptPolicy) -> PromptPolicy {
        PromptPolicy {
            fixed: self.num_prompts.or(base.fixed),
            per_load: self.prompts_per_load.unwrap_or(base.per_load),
            ..base
        }
    }
}

impl Scenario {
    /// How many prompts the point at `load` sends: the case's own count when the suite gives
    /// one for this level, else the command's policy with this scenario's overrides.
    pub fn prompts_for(&self, base: PromptPolicy, load: Level) -> usize {
        match self.level_prompts.iter().find(|(l, _)| *l == load) {
            Some(&(_, n)) => n.max(1),
            None => self.prompt_policy(base).prompts_for(load),
        }
    }
}

/// The seed of one point: the base seed mixed with the scenario, level and role (FNV-1a),
/// so every point draws fresh prompts and a resumed sweep draws the same ones again.
pub fn point_seed(base: u64, scenario: &str, load: Level, role: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let key = format!("{scenario}/{}/{role}", load.file_stem());
    for b in key.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    base ^ h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scenarios_are_isl_osl() {
        let s = parse_scenario("3000:150").unwrap();
        assert_eq!(s.name, "3000x150");
        assert_eq!(s.dataset, DatasetChoice::Random { input_len: 3000, output_len: 150 });
        let e = parse_scenario("3000").unwrap_err().to_string();
        assert_eq!(e, "--scenario: '3000' is not ISL:OSL (input and output tokens, e.g. 3000:150)");
        assert!(parse_scenario("0:10").is_err());
        assert!(parse_scenario("a:b").is_err());
    }

    #[test]
    fn prompts_scale_with_load_and_clamp() {
        let p = PromptPolicy { fixed: None, per_load: 5.0, min: 10, max: 100 };
        assert_eq!(p.prompts_for(Level::Concurrency(1)), 10);
        assert_eq!(p.prompts_for(Level::Concurrency(4)), 20);
        assert_eq!(p.prompts_for(Level::Concurrency(64)), 100);
        assert_eq!(p.prompts_for(Level::Rate(2.5)), 13);
        let f = PromptPolicy { fixed: Some(7), ..p };
        assert_eq!(f.prompts_for(Level::Concurrency(64)), 7);
    }

    #[test]
    fn a_level_with_its_own_count_wins() {
        let mut s = Scenario::new("s", DatasetChoice::FromArgs);
        s.num_prompts = Some(50);
        s.level_prompts = vec![(Level::Concurrency(64), 640)];
        let base = PromptPolicy::default();
        assert_eq!(s.prompts_for(base, Level::Concurrency(64)), 640);
        assert_eq!(s.prompts_for(base, Level::Concurrency(1)), 50);
        s.num_prompts = None;
        assert_eq!(s.prompts_for(base, Level::Concurrency(4)), 20);
    }

    #[test]
    fn seeds_differ_per_point_and_repeat_per_key() {
        let a = point_seed(0, "s", Level::Concurrency(1), "grid");
        let b = point_seed(0, "s", Level::Concurrency(2), "grid");
        let c = point_seed(0, "s", Level::Concurrency(1), "confirm");
        assert_ne!(a, b);
        assert_ne!(a, c);
        assert_eq!(a, point_seed(0, "s", Level::Concurrency(1), "grid"));
    }
}
