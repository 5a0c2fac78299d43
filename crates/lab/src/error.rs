//! Typed errors of the lab stage; each names the bad input and what to do.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum LabError {
    /// A field of the experiment file has a bad value; `field` is its path, e.g.
    /// `engines[0].command`.
    #[error("{field}: {message}")]
    Invalid { field: String, message: String },
    #[error("cannot read experiment file {path}: {message}")]
    Read { path: PathBuf, message: String },
    #[error("cannot write {path}: {message} (check the --output-dir permissions and free space)")]
    Write { path: PathBuf, message: String },
    #[error("{path}: {message}")]
    State { path: PathBuf, message: String },
}

/// Shorthand for [`LabError::Invalid`].
pub fn invalid(field: impl Into<String>, message: impl Into<String>) -> LabError {
    LabError::Invalid { field: field.into(), message: message.into() }
}
