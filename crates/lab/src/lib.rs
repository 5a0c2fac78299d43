//! `servelab lab`: launch engine configurations, benchmark each with a set of profiles, keep
//! the options that help, and recommend a launch command (docs/lab.md).
//!
//! * [`config`]: the experiment file, checked up front.
//! * [`profile`]: built-in and custom profiles (sets of bench options).
//! * `process`: engine process groups, logs, and the guard that kills them.
//! * [`strategy`]: baseline, greedy and grid, as pure functions of finished trials;
//!   `noise`: the run-to-run noise bar from repeated runs.
//! * `runner`: the driver, generic over a [`servelab_plan::Runner`] (the CLI supplies the
//!   measuring conductor).
//! * [`shards`]: a lab run as shard k of N, shard 0 launching the engines.
//! * [`trial`]: trial results and their files; [`conclusion`]: the published conclusion
//!   (baseline vs optimized, engine baselines, cumulative gains, the pasteable command);
//!   [`sections`]: the per-experiment sections and the notes; [`report`]: Markdown, HTML and
//!   SVG.

#![warn(missing_docs)]
#![cfg_attr(not(test), warn(unused_crate_dependencies))]

pub mod conclusion;
pub mod config;
mod error;
mod noise;
mod process;
pub mod profile;
pub mod report;
mod runner;
pub mod sections;
pub mod seeds;
pub mod shards;
pub mod strategy;
pub mod trial;

pub use config::{Experiment, Strategy};
pub use error::LabError;
pub use runner::{
    default_dir, load_experiment, profile_plans, run_experiment, run_in_dir, Finish, Loaded,
    RunOptions,
};
pub use shards::LabShard;
pub use strategy::{Decision, Outcome, Step};
pub use trial::{TrialResult, TrialSpec};
