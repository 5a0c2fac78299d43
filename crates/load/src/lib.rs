//! Load: when each request is due.
//!
//! A [`LoadSpec`] says how a run is loaded (rate, burstiness, concurrency cap, duration); a
//! sweep moves it along one axis with a [`Level`]. From it, an arrival [`Schedule`] is computed
//! (so the measuring loop never draws random numbers while it times), and a [`Dispatch`] hands
//! out arrivals in order until the requests or the duration run out. Concurrency is capped by
//! the client running a fixed number of workers that each take the next arrival when they
//! become free, so a waiting request's intended send time is exactly the moment its slot freed.

#![warn(missing_docs)]
#![cfg_attr(not(test), warn(unused_crate_dependencies))]

mod dispatch;
mod ramp;
mod schedule;
mod shard;
mod spec;

pub use dispatch::{Arrival, Dispatch, Exhausted};
pub use ramp::{Ramp, RampStrategy};
pub use schedule::{Arrivals, Schedule, ScheduleError};
pub use shard::{Shard, ShardError, SHARDS_ENV};
pub use spec::{
    parse_concurrency_list, parse_positive_or_inf, parse_rate_list, Axis, Level, LoadError,
    LoadSpec,
};
