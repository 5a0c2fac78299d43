//! Sweep points: one closed-loop run per (scenario, concurrency), as `servelab sweep` runs them.

use serde::{Deserialize, Serialize};

use crate::config::EngineConfig;
use crate::driver::{run, GaugeSampling, Load, RunOptions};
use crate::engine::{Engine, RequestShape};
use crate::error::Result;
use crate::summary::{summarize, PointSummary};

/// Fixed input and output lengths (`ISL:OSL`), as the random dataset with no range makes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Scenario {
    /// Prompt tokens.
    pub isl: u32,
    /// Output tokens.
    pub osl: u32,
}

impl std::fmt::Display for Scenario {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.isl, self.osl)
    }
}

/// Runs `requests` requests of `scenario` at closed-loop `concurrency` on a fresh engine and
/// summarises them.
pub fn predict_point(
    cfg: &EngineConfig,
    scenario: Scenario,
    concurrency: u32,
    requests: usize,
) -> Result<PointSummary> {
    let mut engine = Engine::new(cfg)?;
    let shape = RequestShape {
        prompt_tokens: scenario.isl,
        output_tokens: scenario.osl,
        ..Default::default()
    };
    let shapes = vec![shape; requests];
    let load = Load::Closed { concurrency, arrivals_ns: None };
    let opts = RunOptions { network_ns: 0, gauges: GaugeSampling::Off };
    let r = run(&mut engine, &shapes, &load, opts)?;
    Ok(summarize(&r, concurrency))
}
