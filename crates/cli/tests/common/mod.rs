//! Shared by the integration tests: a `servelab bench` built from command-line arguments,
//! resolved exactly as the binary resolves them, and run to its end.

pub mod bench_sim;
pub mod lab;
pub mod workloads;

use std::time::Duration;

use clap::Parser;
use servelab::args::BenchArgs;
use servelab::args::{Cli, Command};
use servelab_bench::BenchOutcome;
use tokio::sync::watch;

/// The settings of `servelab bench --base-url URL --no-progress --no-store ARGS...`.
/// `--no-store`: tests never write to the user's results store.
pub fn bench_settings(url: &str, args: &[&str]) -> BenchArgs {
    let mut argv = vec!["servelab", "bench", "--base-url", url, "--no-progress", "--no-store"];
    argv.extend_from_slice(args);
    let cli = Cli::try_parse_from(argv).expect("valid args");
    let Command::Bench(a) = cli.command else { unreachable!("bench subcommand") };
    *a
}

/// Runs a bench to its end; the test fails if it errs or outlasts `limit`.
pub async fn run_bench(settings: &BenchArgs, limit: Duration) -> BenchOutcome {
    let (_tx, rx) = watch::channel(false);
    tokio::time::timeout(limit, servelab::bench(settings, rx))
        .await
        .unwrap_or_else(|_| panic!("bench did not finish within {limit:?}"))
        .expect("bench ran")
}
