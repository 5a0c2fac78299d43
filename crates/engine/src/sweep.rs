//! Sweep points: one closed-loop run per (scenario, concurrency), as `servelab sweep` runs them.

use crate::config::EngineConfig;
use crate::driver::{run, GaugeSampling, RunOptions, VirtualLoad};
use crate::engine::{Engine, RequestShape};
use crate::error::Result;
use crate::summary::{summarize, PointSummary};

pub use servelab_records::IslOsl;

/// The `ISL:OSL` of a sweep point: [`IslOsl`], servelab's one type for it. The old name is
/// kept only while `calibrate.rs` (being reshaped in parallel) still spells it.
pub type Scenario = IslOsl;

/// Runs `requests` requests of `scenario` at closed-loop `concurrency` on a fresh engine and
/// summarises them.
pub fn predict_point(
    cfg: &EngineConfig,
    scenario: IslOsl,
    concurrency: u32,
    requests: usize,
) -> Result<PointSummary> {
    let shape = RequestShape {
        prompt_tokens: scenario.isl,
        output_tokens: scenario.osl,
        ..Default::default()
    };
    predict_shapes(cfg, &vec![shape; requests], concurrency)
}

/// Runs `shapes` (requests of their own lengths, sent in order) at closed-loop `concurrency`
/// on a fresh engine and summarises them: a point whose benchmark drew its lengths.
pub fn predict_shapes(
    cfg: &EngineConfig,
    shapes: &[RequestShape],
    concurrency: u32,
) -> Result<PointSummary> {
    let mut engine = Engine::new(cfg)?;
    let load = VirtualLoad::Closed { concurrency, arrivals_ns: None };
    let opts = RunOptions { network_ns: 0, gauges: GaugeSampling::Off };
    let r = run(&mut engine, shapes, &load, opts)?;
    Ok(summarize(&r, concurrency))
}
