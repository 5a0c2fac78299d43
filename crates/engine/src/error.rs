//! Errors of the engine model: every message names the bad key or input and what is expected.

/// Why an engine file, model config, table or calibration input was rejected.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum EngineError {
    /// A key has a value out of range or of the wrong kind.
    #[error("{key}: {message}")]
    Invalid {
        /// The offending key, dotted (`scheduler.max_num_seqs`).
        key: String,
        /// What was wrong and what is expected.
        message: String,
    },
    /// A YAML or JSON document could not be parsed.
    #[error("cannot parse {what}: {message}")]
    Parse {
        /// What was being parsed (`engine file`, `config.json`).
        what: String,
        /// The parser's message (it names unknown keys and their expected alternatives).
        message: String,
    },
    /// A file could not be read (only [`crate::load_engine_file`] reads files).
    #[error("cannot read {path}: {message}")]
    Io {
        /// The path.
        path: String,
        /// The OS message.
        message: String,
    },
}

impl EngineError {
    /// An [`EngineError::Invalid`] for `key`.
    pub fn invalid(key: impl Into<String>, message: impl Into<String>) -> Self {
        Self::Invalid { key: key.into(), message: message.into() }
    }
}

/// Result with [`EngineError`].
pub type Result<T> = std::result::Result<T, EngineError>;
