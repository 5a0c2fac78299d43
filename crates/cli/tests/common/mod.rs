//! Shared by the integration tests: a `servelab bench` built from command-line arguments,
//! resolved exactly as the binary resolves them, and run to its end.

use std::time::Duration;

use clap::Parser;
use servelab::bench::{self, BenchOutcome};
use servelab::cli::{Cli, Command};
use servelab::settings::BenchSettings;
use tokio::sync::watch;

/// The settings of `servelab bench --base-url URL --no-progress --no-store ARGS...`.
/// `--no-store`: tests never write to the user's results store.
pub fn bench_settings(url: &str, args: &[&str]) -> BenchSettings {
    let mut argv = vec!["servelab", "bench", "--base-url", url, "--no-progress", "--no-store"];
    argv.extend_from_slice(args);
    let cli = Cli::try_parse_from(argv).expect("valid args");
    let Command::Bench(a) = cli.command else { unreachable!("bench subcommand") };
    BenchSettings::from_args(*a, None).expect("valid settings")
}

/// Runs a bench to its end; the test fails if it errs or outlasts `limit`.
pub async fn run_bench(settings: &BenchSettings, limit: Duration) -> BenchOutcome {
    let (_tx, rx) = watch::channel(false);
    tokio::time::timeout(limit, bench::run(settings, rx))
        .await
        .unwrap_or_else(|_| panic!("bench did not finish within {limit:?}"))
        .expect("bench ran")
}
