//! Load: when each request is due.
//!
//! An arrival [`Schedule`] is computed from the request rate and burstiness (so the measuring
//! loop never draws random numbers while it times), and a [`Dispatch`] hands out arrivals in
//! order until the requests or the duration run out. Concurrency is capped by the client
//! running a fixed number of workers that each take the next arrival when they become free,
//! so a waiting request's intended send time is exactly the moment its slot freed.

mod dispatch;
mod schedule;

pub use dispatch::{Arrival, Dispatch, Exhausted};
pub use schedule::{Arrivals, Schedule, ScheduleError};
