//! `servelab lab`: wiring of the lab crate to the bench runner and the store.

use clap::Subcommand;
use tokio::sync::watch;

use crate::{ExitStatus, Failure};

#[derive(Debug, Subcommand)]
pub enum LabCommand {
    /// Run an experiment file.
    Run,
}

pub async fn run(_cmd: LabCommand, _interrupt: watch::Receiver<bool>) -> Result<ExitStatus, Failure> {
    Err(Failure::usage("servelab lab is not available yet"))
}
