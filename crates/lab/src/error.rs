//! Typed errors of the lab stage; each names the bad input and what to do.

use std::path::PathBuf;

/// Why an experiment could not start or finish.
#[derive(Debug, thiserror::Error)]
pub enum LabError {
    /// A field of the experiment file has a bad value; `field` is its path, e.g.
    /// `engines[0].command`.
    #[error("{field}: {message}")]
    Invalid {
        /// The field's path.
        field: String,
        /// What is wrong and what is expected.
        message: String,
    },
    /// The experiment file could not be read.
    #[error("cannot read experiment file {path}: {message}")]
    Read {
        /// The experiment file.
        path: PathBuf,
        /// The I/O error.
        message: String,
    },
    /// An output file or folder could not be written.
    #[error("cannot write {path}: {message} (check the --output-dir permissions and free space)")]
    Write {
        /// The file or folder.
        path: PathBuf,
        /// The I/O error.
        message: String,
    },
    /// A finished trial's saved result could not be read back.
    #[error("{path}: {message}")]
    State {
        /// The trial's result file.
        path: PathBuf,
        /// The I/O or parse error, and what to do.
        message: String,
    },
    /// A sharded lab's shard 0 did not write a launch or its result in time.
    #[error("{path}: {message}")]
    Shard {
        /// The file waited for, in the shared folder.
        path: PathBuf,
        /// Which shard waited, how long, and where to look.
        message: String,
    },
}

/// Shorthand for [`LabError::Invalid`].
pub fn invalid(field: impl Into<String>, message: impl Into<String>) -> LabError {
    LabError::Invalid { field: field.into(), message: message.into() }
}
