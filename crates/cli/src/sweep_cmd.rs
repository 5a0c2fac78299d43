//! `servelab sweep`: wiring of the sweep crate to the bench runner.

use clap::Args;
use tokio::sync::watch;

use crate::{ExitStatus, Failure};

#[derive(Debug, Args)]
pub struct SweepArgs {}

pub async fn run(_args: SweepArgs, _interrupt: watch::Receiver<bool>) -> Result<ExitStatus, Failure> {
    Err(Failure::usage("servelab sweep is not available yet"))
}
