//! `servelab runs | compare | report`: wiring of the results store.

use clap::{Args, Subcommand};

use crate::{ExitStatus, Failure};

#[derive(Debug, Subcommand)]
pub enum RunsCommand {
    /// List stored runs.
    List,
}

#[derive(Debug, Args)]
pub struct CompareArgs {}

#[derive(Debug, Args)]
pub struct ReportArgs {}

pub async fn runs(_cmd: RunsCommand) -> Result<ExitStatus, Failure> {
    Err(Failure::usage("servelab runs is not available yet"))
}

pub async fn compare(_args: CompareArgs) -> Result<ExitStatus, Failure> {
    Err(Failure::usage("servelab compare is not available yet"))
}

pub async fn report(_args: ReportArgs) -> Result<ExitStatus, Failure> {
    Err(Failure::usage("servelab report is not available yet"))
}
