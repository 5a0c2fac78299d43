//! Load: when each request is due.
//!
//! An arrival [`Schedule`] is computed up front from the request rate and burstiness (so the
//! measuring loop never draws random numbers while it times), and [`Slots`] caps concurrency
//! while remembering *when* each slot was freed, so a waiting request's intended send time is
//! exact rather than the moment a busy event loop noticed the free slot.

mod schedule;
mod slots;

pub use schedule::{Arrivals, Schedule, ScheduleError};
pub use slots::{SlotReleaser, Slots};
