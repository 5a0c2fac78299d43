//! servelab's settings, in two stages (as uv's CLI and settings crates): [`args`] holds every
//! command-line definition as clap parses it (raw, unvalidated; flag names follow
//! `vllm bench serve` where it has the same concept), and [`resolve`] turns them into
//! validated plans, every error naming the flag ([`scale`]: the scaled run's). The `servelab` binary parses with these,
//! resolves, and calls the library stages.

#![warn(missing_docs)]
#![cfg_attr(not(test), warn(unused_crate_dependencies))]

pub mod args;
pub mod resolve;
pub mod scale;
