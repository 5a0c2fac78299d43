//! Hugging Face model names: find a model's `tokenizer.json` (or its `config.json`, for the
//! engine model) in the local cache, or download it once into that cache.
//!
//! The cache layout is the one `huggingface_hub` uses, so files are shared with Python tools:
//! `{hub cache}/models--{org}--{name}/snapshots/{revision}/tokenizer.json`, with
//! `refs/main` holding the revision. The file is written in place (no blob symlinks), as
//! `huggingface_hub` itself does where symlinks are unavailable.

use std::path::{Path, PathBuf};
use std::time::Duration;

/// The public Hub, used when `HF_ENDPOINT` is not set.
pub(crate) const DEFAULT_ENDPOINT: &str = "https://huggingface.co";

/// One file of a model repository that servelab fetches, and how it is checked and named.
struct ModelFile {
    /// The file name in the repository.
    name: &'static str,
    /// What it is, in errors.
    what: &'static str,
    /// Largest size accepted.
    max_bytes: u64,
    /// The advice that ends every error.
    advice: &'static str,
    /// Refuses a body that is not this file (an error page, a truncated download).
    check: fn(&[u8]) -> Result<(), String>,
}

/// A model's `tokenizer.json` (big multilingual vocabularies are ~30 MB).
const TOKENIZER: ModelFile = ModelFile {
    name: "tokenizer.json",
    what: "the tokenizer",
    max_bytes: 256 * 1024 * 1024,
    advice: "pass a local file with --tokenizer path/to/tokenizer.json",
    check: |body| tokenizers::Tokenizer::from_bytes(body).map(drop).map_err(|e| e.to_string()),
};

/// A model's `config.json` (its shapes, for the engine model): a few kB, a JSON object.
const CONFIG: ModelFile = ModelFile {
    name: "config.json",
    what: "config.json",
    max_bytes: 16 * 1024 * 1024,
    advice: "download it and give the engine file's model_config its path",
    check: |body| match serde_json::from_slice::<serde_json::Value>(body) {
        Ok(serde_json::Value::Object(_)) => Ok(()),
        Ok(_) => Err("not a JSON object".into()),
        Err(e) => Err(e.to_string()),
    },
};

/// Where and how to reach the Hub: normally read from the environment (`HF_ENDPOINT`,
/// `HF_HUB_CACHE`, `HF_HOME`, `HF_TOKEN`, `HF_HUB_OFFLINE`); tests build one directly so they
/// never touch process-wide variables.
#[derive(Debug, Clone, PartialEq)]
pub struct HubConfig {
    /// Base URL, without a trailing slash (`HF_ENDPOINT`).
    pub endpoint: String,
    /// The hub cache directory holding `models--*` folders.
    pub cache_dir: PathBuf,
    /// Bearer token for gated or private models (`HF_TOKEN`).
    pub token: Option<String>,
    /// Never touch the network (`HF_HUB_OFFLINE=1`).
    pub offline: bool,
    /// Limit for establishing the connection.
    pub connect_timeout: Duration,
    /// Limit for the whole download.
    pub total_timeout: Duration,
}

impl HubConfig {
    /// The configuration the Hugging Face tools would use in this environment, if a cache
    /// directory can be placed at all (it needs `HF_HUB_CACHE`, `HF_HOME` or `HOME`).
    pub(crate) fn from_env() -> Option<Self> {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        Some(Self {
            endpoint: var("HF_ENDPOINT")
                .unwrap_or_else(|| DEFAULT_ENDPOINT.to_string())
                .trim_end_matches('/')
                .to_string(),
            cache_dir: hub_cache_dir()?,
            token: var("HF_TOKEN"),
            offline: var("HF_HUB_OFFLINE").is_some_and(|v| is_truthy(&v)),
            connect_timeout: Duration::from_secs(10),
            total_timeout: Duration::from_secs(120),
        })
    }
}

/// `huggingface_hub`'s reading of a boolean environment variable.
fn is_truthy(value: &str) -> bool {
    matches!(value.trim().to_ascii_lowercase().as_str(), "1" | "true" | "yes" | "on")
}

/// The hub cache directory: `HF_HUB_CACHE`, else `HF_HOME/hub`, else
/// `$XDG_CACHE_HOME/huggingface/hub`, else `~/.cache/huggingface/hub`.
pub(crate) fn hub_cache_dir() -> Option<PathBuf> {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    if let Some(dir) = var("HF_HUB_CACHE") {
        return Some(dir);
    }
    let hf_home = var("HF_HOME")
        .or_else(|| var("XDG_CACHE_HOME").map(|c| c.join("huggingface")))
        .or_else(|| var("HOME").map(|h| h.join(".cache/huggingface")))?;
    Some(hf_home.join("hub"))
}

/// Whether `spec` has the shape of a Hub model id (`org/name`, ASCII letters, digits, `-`,
/// `_`, `.`), which also makes it safe to use in a URL and a cache folder name.
pub(crate) fn is_model_name(spec: &str) -> bool {
    let part_ok = |p: &str| {
        !p.is_empty()
            && !p.starts_with('.')
            && p.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
    };
    matches!(spec.split_once('/'), Some((org, name)) if part_ok(org) && part_ok(name))
}

/// The cache folder of one model.
fn model_dir(cache_dir: &Path, model: &str) -> PathBuf {
    cache_dir.join(format!("models--{}", model.replace('/', "--")))
}

/// The cached `tokenizer.json` for `model` (`org/name`), if any cache holds it.
pub fn cached_tokenizer(model: &str) -> Option<PathBuf> {
    cached_tokenizer_in(&hub_cache_dir()?, model)
}

/// The cached `tokenizer.json` for `model` under `cache_dir`: the snapshot that `refs/main`
/// names if it holds one, else the last snapshot in name order that does.
pub fn cached_tokenizer_in(cache_dir: &Path, model: &str) -> Option<PathBuf> {
    cached_file_in(cache_dir, model, TOKENIZER.name)
}

/// The cached `config.json` for `model` under `cache_dir`, found as
/// [`cached_tokenizer_in`] finds a tokenizer.
pub fn cached_config_in(cache_dir: &Path, model: &str) -> Option<PathBuf> {
    cached_file_in(cache_dir, model, CONFIG.name)
}

fn cached_file_in(cache_dir: &Path, model: &str, name: &str) -> Option<PathBuf> {
    let dir = model_dir(cache_dir, model);
    if let Ok(rev) = std::fs::read_to_string(dir.join("refs/main")) {
        let file = dir.join("snapshots").join(rev.trim()).join(name);
        if !rev.trim().is_empty() && file.is_file() {
            return Some(file);
        }
    }
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir.join("snapshots"))
        .ok()?
        .flatten()
        .map(|e| e.path().join(name))
        .filter(|f| f.is_file())
        .collect();
    found.sort();
    found.pop()
}

/// A tokenizer that could not be had from the Hub; the message names the model and what to
/// do.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct HubError(pub String);

fn hub_error(file: &ModelFile, model: &str, why: impl std::fmt::Display) -> HubError {
    HubError(format!("cannot get {} for model '{model}': {why}; {}", file.what, file.advice))
}

/// Download `model`'s `tokenizer.json` into the cache the environment names (see
/// [`HubConfig::from_env`]) and return its path. Returns the cached file without any network
/// access when one exists.
pub(crate) fn download_tokenizer(model: &str) -> Result<PathBuf, HubError> {
    download_with_env(&TOKENIZER, model)
}

/// Download `model`'s `tokenizer.json` into `config`'s cache and return its path. Returns the
/// cached file without any network access when one exists.
pub fn download_tokenizer_with(config: &HubConfig, model: &str) -> Result<PathBuf, HubError> {
    download_file(config, &TOKENIZER, model)
}

/// The text of `model`'s `config.json` (`org/name`), from the cache the environment names or
/// downloaded into it once (`HF_ENDPOINT`, `HF_HUB_CACHE`, `HF_HOME`, `HF_TOKEN`,
/// `HF_HUB_OFFLINE`, as the Hugging Face tools read them): the engine model's shapes of a
/// model that has no preset.
pub fn model_config_json(model: &str) -> Result<String, HubError> {
    let path = download_with_env(&CONFIG, model)?;
    std::fs::read_to_string(&path)
        .map_err(|e| hub_error(&CONFIG, model, format!("cannot read {}: {e}", path.display())))
}

/// Download `model`'s `config.json` into `config`'s cache and return its path. Returns the
/// cached file without any network access when one exists.
pub fn download_config_with(config: &HubConfig, model: &str) -> Result<PathBuf, HubError> {
    download_file(config, &CONFIG, model)
}

fn download_with_env(file: &ModelFile, model: &str) -> Result<PathBuf, HubError> {
    let config = HubConfig::from_env().ok_or_else(|| {
        hub_error(file, model, "no cache directory (set HF_HOME, HF_HUB_CACHE or HOME)")
    })?;
    download_file(&config, file, model)
}

fn download_file(config: &HubConfig, file: &ModelFile, model: &str) -> Result<PathBuf, HubError> {
    if !is_model_name(model) {
        return Err(hub_error(file, model, "not a Hugging Face model id of the form org/name"));
    }
    if let Some(found) = cached_file_in(&config.cache_dir, model, file.name) {
        return Ok(found);
    }
    if config.offline {
        return Err(hub_error(file, model, "it is not cached and HF_HUB_OFFLINE is set"));
    }
    let (body, revision) = fetch(config, file, model)?;
    // Refuse to cache an error page or a truncated file: it would be "found" forever after.
    (file.check)(&body).map_err(|e| {
        let why = format!("{} did not return a valid {}: {e}", config.endpoint, file.name);
        hub_error(file, model, why)
    })?;
    store(&config.cache_dir, model, &revision, file.name, &body)
        .map_err(|e| hub_error(file, model, format!("cannot write to the cache: {e}")))
}

/// The URL of one file of a model on the main branch.
fn file_url(endpoint: &str, model: &str, name: &str) -> String {
    format!("{}/{model}/resolve/main/{name}", endpoint.trim_end_matches('/'))
}

/// GET the file; returns its bytes and the revision the Hub reported (`main` when none).
fn fetch(config: &HubConfig, file: &ModelFile, model: &str) -> Result<(Vec<u8>, String), HubError> {
    let url = file_url(&config.endpoint, model, file.name);
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_connect(Some(config.connect_timeout))
        .timeout_global(Some(config.total_timeout))
        .build()
        .into();
    let mut request = agent.get(&url);
    if let Some(token) = &config.token {
        request = request.header("Authorization", &format!("Bearer {token}"));
    }
    let err = |why: String| hub_error(file, model, why);
    let mut response = request.call().map_err(|e| match e {
        ureq::Error::StatusCode(401 | 403) => {
            err(format!("{url} refused access (gated or private model? set HF_TOKEN)"))
        }
        ureq::Error::StatusCode(404) => err(format!("{url} was not found")),
        ureq::Error::StatusCode(code) => err(format!("{url} answered HTTP {code}")),
        other => err(format!("cannot reach {}: {other}", config.endpoint)),
    })?;
    let revision = response
        .headers()
        .get("x-repo-commit")
        .and_then(|v| v.to_str().ok())
        .filter(|r| is_safe_revision(r))
        .unwrap_or("main")
        .to_string();
    let body = response
        .body_mut()
        .with_config()
        .limit(file.max_bytes)
        .read_to_vec()
        .map_err(|e| err(format!("download from {url} failed: {e}")))?;
    Ok((body, revision))
}

/// A revision usable as a folder name: a commit hash, in practice.
fn is_safe_revision(rev: &str) -> bool {
    !rev.is_empty() && rev.len() <= 64 && rev.bytes().all(|b| b.is_ascii_alphanumeric())
}

/// Write the file into the cache layout; the rename makes a half-written file never visible.
fn store(
    cache_dir: &Path,
    model: &str,
    revision: &str,
    name: &str,
    body: &[u8],
) -> std::io::Result<PathBuf> {
    let dir = model_dir(cache_dir, model);
    let snapshot = dir.join("snapshots").join(revision);
    std::fs::create_dir_all(&snapshot)?;
    std::fs::create_dir_all(dir.join("refs"))?;
    let file = snapshot.join(name);
    let partial = snapshot.join(format!("{name}.{}.partial", std::process::id()));
    std::fs::write(&partial, body)?;
    std::fs::rename(&partial, &file)?;
    std::fs::write(dir.join("refs/main"), revision)?;
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_names_are_org_slash_name() {
        assert!(is_model_name("HuggingFaceTB/SmolLM2-135M-Instruct"));
        assert!(is_model_name("org/name.v1_2"));
        assert!(!is_model_name("gpt2"));
        assert!(!is_model_name("a/b/c"));
        assert!(!is_model_name("../etc"));
        assert!(!is_model_name("org/.."));
        assert!(!is_model_name("org/na me"));
        assert!(!is_model_name("/abs"));
    }

    #[test]
    fn url_follows_resolve_main() {
        assert_eq!(
            file_url("http://127.0.0.1:9/", "org/m", TOKENIZER.name),
            "http://127.0.0.1:9/org/m/resolve/main/tokenizer.json"
        );
    }

    #[test]
    fn truthy_values() {
        assert!(is_truthy("1") && is_truthy("TRUE") && is_truthy(" yes"));
        assert!(!is_truthy("0") && !is_truthy("false") && !is_truthy(""));
    }

    #[test]
    fn cache_prefers_refs_main() {
        let dir = tempfile::tempdir().unwrap();
        let m = model_dir(dir.path(), "org/m");
        for rev in ["aaa", "zzz"] {
            std::fs::create_dir_all(m.join("snapshots").join(rev)).unwrap();
            std::fs::write(m.join("snapshots").join(rev).join("tokenizer.json"), "{}").unwrap();
        }
        let found = cached_tokenizer_in(dir.path(), "org/m").unwrap();
        assert!(found.ends_with("snapshots/zzz/tokenizer.json"), "{found:?}");
        std::fs::create_dir_all(m.join("refs")).unwrap();
        std::fs::write(m.join("refs/main"), "aaa\n").unwrap();
        let found = cached_tokenizer_in(dir.path(), "org/m").unwrap();
        assert!(found.ends_with("snapshots/aaa/tokenizer.json"), "{found:?}");
        assert_eq!(cached_tokenizer_in(dir.path(), "org/other"), None);
    }
}
