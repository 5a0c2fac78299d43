//! Client: how requests are sent and timed.
//!
//! [`runner::run`] is the one measuring loop; [`sse`] frames the byte stream, [`openai`] speaks
//! the OpenAI-compatible protocol, [`http`] holds connections, [`server_timings`] reads an
//! engine's own timings (llama.cpp), and [`tokens`] fills per-chunk token counts after the run.

pub mod http;
pub mod limits;
pub mod openai;
pub mod prom;
pub mod runner;
pub mod scrape;
pub mod server_timings;
pub mod sse;
pub mod text;
pub mod timed_io;
pub mod tokens;

pub use http::{Target, TargetError};
pub use openai::{Api, BodyOptions};
pub use runner::{run, PlannedRequest, Progress, RunConfig, RunEnd, StopReason};
