//! Client: how requests are sent and timed.
//!
//! [`runner::run`] is the one measuring loop; [`sse`] frames the byte stream, [`openai`] speaks
//! the OpenAI-compatible protocol, [`http`] holds connections, [`server_timings`] reads an
//! engine's own timings (llama.cpp), and [`tokens`] fills per-chunk token counts after the run.

#![warn(missing_docs)]
#![cfg_attr(not(test), warn(unused_crate_dependencies))]

mod ahead;
pub mod clock;
pub mod decode;
pub mod doctor;
pub mod http;
mod limits;
pub mod openai;
mod planned;
pub mod prom;
pub mod runner;
pub mod scrape;
pub mod server_timings;
mod session;
pub mod sse;
pub mod stream;
mod text;
mod timed_io;
pub mod tokens;

pub use http::{Target, TargetError};
pub use openai::{Api, BodyOptions};
pub use planned::{PlannedRequest, RequestSource};
pub use runner::{run, Progress, RunConfig, RunEnd, StopReason};
pub use session::{Reply, SessionRun};
