//! Typed errors of the sweep stage; each names the bad input and what to do.

use std::path::PathBuf;

/// Why a sweep could not start or finish.
#[derive(Debug, thiserror::Error)]
pub enum SweepError {
    /// A flag or suite field has a bad value.
    #[error("{flag}: {message}")]
    Invalid {
        /// The flag (`--scenario`) or suite field at fault.
        flag: String,
        /// What is wrong with its value.
        message: String,
    },
    /// The suite file could not be read or parsed.
    #[error("cannot read suite {path}: {message}")]
    Suite {
        /// The suite file.
        path: PathBuf,
        /// The I/O or parse error.
        message: String,
    },
    /// An output file or directory could not be written.
    #[error("cannot write {path}: {message} (check the --output-dir permissions and free space)")]
    Write {
        /// The file or directory.
        path: PathBuf,
        /// The I/O error.
        message: String,
    },
    /// A chart could not be rendered.
    #[error("chart {name}: {message}")]
    Chart {
        /// The chart's file stem.
        name: String,
        /// The renderer's error.
        message: String,
    },
    /// A bench run failed; the message is the runner's.
    #[error("{scenario} at {load}: {message}")]
    Point {
        /// The scenario's name.
        scenario: String,
        /// The load level, as printed (`concurrency 4`, `rate 2.5 req/s`).
        load: String,
        /// The runner's error.
        message: String,
    },
}

/// Shorthand for [`SweepError::Invalid`].
pub fn invalid(flag: impl Into<String>, message: impl Into<String>) -> SweepError {
    SweepError::Invalid { flag: flag.into(), message: message.into() }
}
