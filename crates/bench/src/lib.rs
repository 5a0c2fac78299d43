//! The conductor: one [`Plan`] run end to end.
//!
//! [`Conductor::bench`] resolves the target (starting the built-in simulator when the plan
//! asks for it), then runs the plan in three stages, each a module: `prepare` (reach the
//! server, load the workload, write the requests and this process's share of them),
//! `measure` (the one measuring loop of `servelab-client`; `sinks` write records as they
//! arrive to the detail file and the [`Recording`] hook, and count their tokens once the clock
//! stopped) and `finish` (the summary and its warnings; then `save`). The [`Conductor`] is
//! the measuring [`Runner`] that `sweep` and `lab` drive; `servelab bench` calls it once.
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
