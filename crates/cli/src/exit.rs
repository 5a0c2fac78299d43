//! Typed exit codes and the errors that lead to them.

use std::process::ExitCode;

/// How `servelab` ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitStatus {
    /// Everything asked for was done.
    Success = 0,
    /// The run completed but an SLO or threshold the user set was not met.
    ThresholdFailed = 1,
    /// Bad usage, or a runtime error that stopped the work.
    Error = 2,
}

impl From<ExitStatus> for ExitCode {
    fn from(s: ExitStatus) -> ExitCode {
        ExitCode::from(s as u8)
    }
}

/// An error that ends the command, with the message the user sees.
#[derive(Debug, thiserror::Error)]
pub enum Failure {
    /// The user's input is wrong (a flag, a file): fix it and rerun.
    #[error("{0}")]
    Usage(String),
    /// Something failed while running (server unreachable, disk full).
    #[error("{0}")]
    Runtime(String),
}

impl Failure {
    /// A [`Failure::Usage`] with `e`'s message.
    pub fn usage(e: impl std::fmt::Display) -> Self {
        Failure::Usage(e.to_string())
    }

    /// A [`Failure::Runtime`] with `e`'s message.
    pub fn runtime(e: impl std::fmt::Display) -> Self {
        Failure::Runtime(e.to_string())
    }

    /// The exit status the command ends with: always [`ExitStatus::Error`].
    pub fn status(&self) -> ExitStatus {
        ExitStatus::Error
    }
}
