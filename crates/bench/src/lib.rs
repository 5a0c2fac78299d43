//! The conductor: one [`Plan`] run end to end.
//!
//! [`Conductor::bench`] resolves the target (starting the built-in simulator when the plan
//! asks for it), builds the workload, runs the one measuring loop of `servelab-client`,
//! writes records as they arrive (to the detail file and to the [`Recording`] hook), then
//! attributes tokens and summarizes. The [`Conductor`] is the measuring [`Runner`] that
//! `sweep` and `lab` drive; `servelab bench` calls it once.
//!
//! [`Plan`]: servelab_plan::Plan
//! [`Recording`]: servelab_plan::Recording
//! [`Runner`]: servelab_plan::Runner

#![warn(missing_docs)]
#![cfg_attr(not(test), warn(unused_crate_dependencies))]

mod clock;
mod conductor;
mod drain;
mod finish;
mod measure;
pub mod preflight;
mod prepare;
mod progress;
mod save;
mod signals;
mod sinks;
mod truth;

pub use clock::{read_clock, said};
pub use conductor::Conductor;
pub use drain::{gauge_sum, requests_in_server, wait_drained, Drain};
pub use measure::preconnect_count;
pub use save::BenchOutcome;
pub use servelab_client::global_schedule;
pub use servelab_client::StopReason;
pub use signals::{interrupt_on_signals, DRAIN};
