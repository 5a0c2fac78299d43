//! Typed errors of the sweep stage; each names the bad input and what to do.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum SweepError {
    /// A flag or suite field has a bad value.
    #[error("{flag}: {message}")]
    Invalid { flag: String, message: String },
    #[error("cannot read suite {path}: {message}")]
    Suite { path: PathBuf, message: String },
    #[error("cannot write {path}: {message} (check the --output-dir permissions and free space)")]
    Write { path: PathBuf, message: String },
    #[error("chart {name}: {message}")]
    Chart { name: String, message: String },
    /// A bench run failed; the message is the runner's.
    #[error("{scenario} at {load}: {message}")]
    Point { scenario: String, load: String, message: String },
}

/// Shorthand for [`SweepError::Invalid`].
pub fn invalid(flag: impl Into<String>, message: impl Into<String>) -> SweepError {
    SweepError::Invalid { flag: flag.into(), message: message.into() }
}
