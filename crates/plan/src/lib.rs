//! What one servelab run is, and the seam every way of running one plugs into.
//!
//! A [`Plan`] is validated data: the [`Target`] (where), kept apart from the request format
//! ([`RequestSpec`]), the workload ([`WorkloadSpec`]: what), the [`LoadSpec`] (when), the
//! [`Limits`], what to compute ([`MetricsConfig`]), what to write ([`OutputSpec`]) and how the
//! run is filed ([`RecordSpec`]).
//!
//! Every mode that runs benchmarks (`bench`, each point of a `sweep`, each profile of a `lab`,
//! and predictions or shards) hands plans to one [`Runner`]. The measuring conductor
//! (`servelab-bench`) is one runner; tests use fakes. Recording into the results store is a
//! [`Recording`] hook the conductor calls, so no runner depends on the store.

#![warn(missing_docs)]
#![cfg_attr(not(test), warn(unused_crate_dependencies))]

mod record;
mod runner;
mod spec;
pub mod time;

pub use record::{NoRecording, RecordSink, Recording};
pub use runner::{write_file, RunError, Runner};
pub use servelab_load::{LoadSpec, Shard};
pub use servelab_metrics::MetricsConfig;
pub use servelab_records::{GpuSource, RunKind};
pub use servelab_workload::{Api, DatasetSpec, LengthRange, SessionSource};
pub use spec::{
    seconds, ClockReference, GpuSpec, Limits, OutputSpec, Plan, PlanError, RecordSpec, RequestSpec,
    ShardSpec, SimTarget, Target, WorkloadSpec, DEFAULT_SHARD_LEAD,
};
