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

/// The text of the engine file at `path`, or of the built-in one of that name when no such
/// file exists (see [`load_engine_file`]).
pub fn read_engine_file(path: impl AsRef<Path>) -> Result<String> {
    let path = path.as_ref();
    match ENGINE_PRESETS.iter().find(|(n, _)| Path::new(n) == path) {
        Some((_, yaml)) if !path.exists() => Ok(yaml.to_string()),
        _ => read(path).map_err(|e| match e {
            EngineError::Io { path, message } => EngineError::Io {
                path,
                message: format!(
                    "{message} (built-in engine files: {})",
                    engine_preset_names().join(", ")
                ),
            },
            e => e,
        }),
    }
}

/// Reads and validates an engine file; a relative `model_config` is resolved against the
/// engine file's directory. A path that does not exist but is the name of a built-in engine
/// file ([`engine_preset_names`]) loads that one, so a file beside the user wins over a
/// preset of the same name.
pub fn load_engine_file(path: impl AsRef<Path>) -> Result<EngineConfig> {
    load_engine_file_with(path, |_| {})
}

/// [`load_engine_file`] with `edit` applied to the file before it is validated (command-line
/// overrides of its settings). A `model_config` naming a Hugging Face model rather than a file
/// is refused: [`load_engine_file_via`] fetches those.
pub fn load_engine_file_with(
    path: impl AsRef<Path>,
    edit: impl FnOnce(&mut EngineFile),
) -> Result<EngineConfig> {
    load_engine_file_via(path, edit, |_| {
        Err("this caller reads no Hugging Face Hub; give a config.json path instead")
    })
}

/// [`load_engine_file_with`] where a `model_config` that names no file but has the shape of a
/// Hugging Face model id (`org/name`, not ending in `.json`) is asked of `hub`, which returns
/// that model's `config.json` text: the Hub cache or a download, I/O this crate leaves to its
/// caller. A file of that name beside the engine file wins.
pub fn load_engine_file_via<E: std::fmt::Display>(
    path: impl AsRef<Path>,
    edit: impl FnOnce(&mut EngineFile),
    hub: impl FnOnce(&str) -> std::result::Result<String, E>,
) -> Result<EngineConfig> {
    let path = path.as_ref();
    let mut file = EngineFile::parse(&read_engine_file(path)?)?;
    edit(&mut file);
    let json = match &file.model_config {
        Some(v) => {
            let p = Path::new(v);
            let full = if p.is_relative() {
                path.parent().unwrap_or(Path::new(".")).join(p)
            } else {
                p.to_path_buf()
            };
            if !full.exists() && is_hub_model_id(v) {
                Some(hub(v).map_err(|e| {
                    EngineError::invalid(
                        "model_config",
                        format!("{v}: no such file beside the engine file, and from the Hub: {e}"),
                    )
                })?)
            } else {
                Some(read(&full)?)
            }
        }
        None => None,
    };
    file.build(json.as_deref())
}

/// Whether `v` reads as a Hugging Face model id (`org/name`) rather than a path: one slash,
/// no `.json` ending, no leading dot or slash, and only the characters the Hub allows.
fn is_hub_model_id(v: &str) -> bool {
    let part = |p: &str| {
        !p.is_empty()
            && !p.starts_with('.')
            && p.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
    };
    !v.ends_with(".json")
        && matches!(v.split_once('/'), Some((org, name)) if part(org) && part(name))
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

    #[test]
    fn hub_model_ids_are_told_from_paths() {
        assert!(is_hub_model_id("Qwen/Qwen3-8B"));
        assert!(is_hub_model_id("org/name.v1_2"));
        for path in ["config.json", "hf/config.json", "/abs/x", "./a/b", "a/b/c", "../a", "a/"] {
            assert!(!is_hub_model_id(path), "{path}");
        }
    }

    /// `model_config` reads a real file, relative to the engine file or absolute; a Hub id is
    /// asked of the caller's `hub` only when no file of that name exists.
    #[test]
    fn model_config_reads_a_file_or_asks_the_hub() {
        let dir = tempfile::tempdir().unwrap();
        let preset = Path::new(env!("CARGO_MANIFEST_DIR")).join("presets/qwen3-8b.json");
        let json = std::fs::read_to_string(&preset).unwrap();
        std::fs::create_dir_all(dir.path().join("hf")).unwrap();
        std::fs::write(dir.path().join("hf/config.json"), &json).unwrap();
        let engine = |name: &str, model_config: &str| {
            let f = dir.path().join(name);
            std::fs::write(&f, format!("model_config: {model_config}\ngpu: h100\n")).unwrap();
            f
        };
        let mut want = crate::ModelSpec::preset("qwen3-8b").unwrap();
        let no_hub = |m: &str| -> std::result::Result<String, String> { panic!("asked for {m}") };

        let cfg = load_engine_file_via(engine("rel.yaml", "hf/config.json"), |_| {}, no_hub);
        want.name = "hf/config.json".into();
        assert_eq!(cfg.unwrap().model, want);
        let abs = dir.path().join("hf/config.json").display().to_string();
        let cfg = load_engine_file_via(engine("abs.yaml", &abs), |_| {}, no_hub).unwrap();
        assert_eq!(cfg.model.layers, want.layers);

        let e = load_engine_file_via(engine("missing.yaml", "hf/nope.json"), |_| {}, no_hub);
        let e = e.unwrap_err().to_string();
        assert!(e.starts_with("cannot read ") && e.contains("hf/nope.json"), "{e}");

        let mut asked = None;
        let hub = |m: &str| -> std::result::Result<String, String> {
            asked = Some(m.to_string());
            Ok(json.clone())
        };
        let cfg = load_engine_file_via(engine("hub.yaml", "Qwen/Qwen3-8B"), |_| {}, hub).unwrap();
        assert_eq!(asked.as_deref(), Some("Qwen/Qwen3-8B"));
        want.name = "Qwen/Qwen3-8B".into();
        assert_eq!(cfg.model, want);
        let e = load_engine_file_via(engine("hub.yaml", "Qwen/Qwen3-8B"), |_| {}, |_| Err("404"))
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "model_config: Qwen/Qwen3-8B: no such file beside the engine file, and from the Hub: \
             404"
        );
        let e = load_engine_file(engine("hub.yaml", "Qwen/Qwen3-8B")).unwrap_err().to_string();
        assert!(e.contains("give a config.json path instead"), "{e}");

        // A file named like a model id beside the engine file wins over the Hub.
        std::fs::create_dir_all(dir.path().join("Qwen")).unwrap();
        std::fs::write(dir.path().join("Qwen/Qwen3-8B"), &json).unwrap();
        load_engine_file_via(engine("hub.yaml", "Qwen/Qwen3-8B"), |_| {}, no_hub).unwrap();
    }
}
