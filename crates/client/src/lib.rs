//! Client: how requests are sent and timed.
//!
//! [`runner::run`] is the one measuring loop: it takes what to send from a [`RequestSource`]
//! (prompts, trace rows or sessions) and decides when; the private `wire` module sends one
//! request and reads its stream. [`sse`] frames the byte stream, [`openai`] speaks the
//! OpenAI-compatible protocol, [`http`] holds connections, [`server_timings`] reads an
//! engine's own timings (llama.cpp), and [`tokens`] fills per-chunk token counts after the run.

#![warn(missing_docs)]
#![cfg_attr(not(test), warn(unused_crate_dependencies))]

mod ahead;
pub mod clock;
pub mod decode;
pub mod doctor;
pub mod gpu;
pub mod http;
mod limits;
pub mod openai;
mod periodic;
mod planned;
pub mod prom;
pub mod reasoning;
pub mod runner;
pub mod scrape;
pub mod server_timings;
mod session;
mod source;
pub mod sse;
pub mod stream;
mod text;
mod timed_io;
pub mod tokens;
mod wire;

pub use http::{Target, TargetError};
pub use openai::{Api, BodyOptions};
pub use planned::{PlannedRequest, RequestWriter};
pub use reasoning::ReasoningParser;
pub use runner::{run, Progress, RunConfig, RunEnd, StopReason};
pub use session::{Reply, SessionRun};
pub use source::{global_schedule, RequestSource, Share};
