//! Hugging Face model names: find a model's `tokenizer.json` in the local caches.

use std::path::PathBuf;

/// The cached `tokenizer.json` for `model` (`org/name`), if any cache holds it.
pub fn cached_tokenizer(model: &str) -> Option<PathBuf> {
    let hf_home = std::env::var_os("HF_HOME").map(PathBuf::from).or_else(|| {
        std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/huggingface"))
    })?;
    let snapshots =
        hf_home.join("hub").join(format!("models--{}", model.replace('/', "--"))).join("snapshots");
    let mut found = None;
    for entry in std::fs::read_dir(snapshots).ok()?.flatten() {
        let file = entry.path().join("tokenizer.json");
        if file.is_file() {
            found = Some(file);
        }
    }
    found
}

/// The message for a model name that no cache holds.
pub fn not_cached_message(model: &str) -> String {
    format!(
        "tokenizer for model '{model}' is not cached; pass a tokenizer.json path with --tokenizer"
    )
}
