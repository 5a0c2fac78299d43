//! `servelab sweep`: a grid of loads (concurrency or request rate) × scenarios, each point a
//! full bench run, reduced to tables, charts, the saturation knee and the highest load that
//! meets an SLO.
//!
//! This crate holds the plan, the pure analysis and the renderers, and a driver generic over
//! a [`run::PointRunner`] that runs one bench: the CLI supplies the real one, tests a fake.

pub mod charts;
pub mod drain;
pub mod error;
pub mod grid;
pub mod knee;
pub mod render;
pub mod result;
pub mod run;
pub mod slo;
pub mod store;
pub mod suite;

pub use error::SweepError;
pub use grid::{DatasetChoice, PromptPolicy, Scenario};
pub use knee::{find_knee, Knee, KneeRule};
pub use result::{PointResult, Role, ScenarioResult, SweepResult};
pub use run::{run_sweep, PointRunner, PointSpec, RunError, SweepPlan};
