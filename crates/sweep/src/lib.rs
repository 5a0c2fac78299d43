//! `servelab sweep`: a grid of loads (concurrency or request rate) × scenarios, each point a
//! full bench run, reduced to tables, charts, the saturation knee and the highest load that
//! meets an SLO.
//!
//! This crate holds the plan, the pure analysis and the renderers, and a driver generic over
//! a [`servelab_plan::Runner`] that runs each point's plan: the CLI supplies the measuring
//! conductor, tests a fake.

#![warn(missing_docs)]
#![cfg_attr(not(test), warn(unused_crate_dependencies))]

pub mod charts;
mod error;
pub mod grid;
mod point;
pub mod render;
mod result;
pub mod run;
mod shards;
mod slo;
mod store;
pub mod suite;

pub use error::SweepError;
pub use grid::{DatasetChoice, PromptPolicy, Scenario};
pub use point::{default_scenario, grid_levels, scenario_dataset, DEFAULT_CONCURRENCY};
pub use result::{PointResult, Role, ScenarioResult, SloOutcome, SweepResult};
pub use run::{run_sweep, PointSpec, SweepPlan};
pub use servelab_metrics::knee::{find_knee, gain_per_doubling, CurvePoint, Knee, KneeRule};
pub use shards::check_sharded;
pub use slo::{bracket, next_probe, Bracket};
pub use store::{point_path, read_complete_point, write_atomic};
