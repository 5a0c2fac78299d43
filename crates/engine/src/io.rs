//! The one place that reads files: an engine file and the `config.json` it names.

use std::path::Path;

use crate::config::{EngineConfig, EngineFile};
use crate::error::{EngineError, Result};

fn read(path: &Path) -> Result<String> {
    std::fs::read_to_string(path)
        .map_err(|e| EngineError::Io { path: path.display().to_string(), message: e.to_string() })
}

/// Reads and validates an engine file; a relative `model_config` is resolved against the
/// engine file's directory.
pub fn load_engine_file(path: impl AsRef<Path>) -> Result<EngineConfig> {
    load_engine_file_with(path, |_| {})
}

/// [`load_engine_file`] with `edit` applied to the file before it is validated (command-line
/// overrides of its settings).
pub fn load_engine_file_with(
    path: impl AsRef<Path>,
    edit: impl FnOnce(&mut EngineFile),
) -> Result<EngineConfig> {
    let path = path.as_ref();
    let mut file = EngineFile::parse(&read(path)?)?;
    edit(&mut file);
    let json = match &file.model_config {
        Some(p) => {
            let p = Path::new(p);
            let full = if p.is_relative() {
                path.parent().unwrap_or(Path::new(".")).join(p)
            } else {
                p.to_path_buf()
            };
            Some(read(&full)?)
        }
        None => None,
    };
    file.build(json.as_deref())
}
