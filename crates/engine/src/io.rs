//! The one place that reads files: an engine file and the `config.json` it names.

use std::path::Path;

use crate::config::{EngineConfig, EngineFile};
use crate::error::{EngineError, Result};

fn read(path: &Path) -> Result<String> {
    std::fs::read_to_string(path)
        .map_err(|e| EngineError::Io { path: path.display().to_string(), message: e.to_string() })
}

/// The engine files of `examples/engines/`, built into the binary so a deployment can be named
/// without a checkout (`--sim-engine qwen3-8b-h100-tp1`, the zero-setup demo).
const ENGINE_PRESETS: &[(&str, &str)] = &[
    ("qwen3-8b-h100-tp1", include_str!("../../../examples/engines/qwen3-8b-h100-tp1.yaml")),
    ("qwen3-32b-h20-tp4", include_str!("../../../examples/engines/qwen3-32b-h20-tp4.yaml")),
    ("qwen3-32b-h20-pd-2p2d", include_str!("../../../examples/engines/qwen3-32b-h20-pd-2p2d.yaml")),
    (
        "llama-3.3-70b-h200-tp4-fp8",
        include_str!("../../../examples/engines/llama-3.3-70b-h200-tp4-fp8.yaml"),
    ),
    ("gpt-oss-120b-b200-tp2", include_str!("../../../examples/engines/gpt-oss-120b-b200-tp2.yaml")),
];

/// Names of the built-in engine files (those of `examples/engines/`, without `.yaml`).
pub fn engine_preset_names() -> Vec<&'static str> {
    ENGINE_PRESETS.iter().map(|(n, _)| *n).collect()
}

/// Reads and validates an engine file; a relative `model_config` is resolved against the
/// engine file's directory. A path that does not exist but is the name of a built-in engine
/// file ([`engine_preset_names`]) loads that one, so a file beside the user wins over a
/// preset of the same name.
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
    let text = match ENGINE_PRESETS.iter().find(|(n, _)| Path::new(n) == path) {
        Some((_, yaml)) if !path.exists() => yaml.to_string(),
        _ => read(path).map_err(|e| match e {
            EngineError::Io { path, message } => EngineError::Io {
                path,
                message: format!(
                    "{message} (built-in engine files: {})",
                    engine_preset_names().join(", ")
                ),
            },
            e => e,
        })?,
    };
    let mut file = EngineFile::parse(&text)?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_built_in_engine_file_loads_as_its_example_does() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/engines");
        let files = std::fs::read_dir(&dir).unwrap().count();
        assert_eq!(engine_preset_names().len(), files, "every example engine file is built in");
        for name in engine_preset_names() {
            let built_in = load_engine_file(name).unwrap();
            let example = load_engine_file(dir.join(format!("{name}.yaml"))).unwrap();
            assert_eq!(format!("{built_in:?}"), format!("{example:?}"), "{name}");
        }
    }

    #[test]
    fn a_missing_file_names_the_built_in_ones() {
        let e = load_engine_file("no-such-engine.yaml").unwrap_err().to_string();
        assert!(e.contains("no-such-engine.yaml"), "{e}");
        assert!(e.contains("qwen3-8b-h100-tp1"), "{e}");
    }
}
