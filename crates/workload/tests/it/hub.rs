//! Hub download against a local HTTP server, with an explicit configuration (no globals).

use crate::common;

use std::time::{Duration, Instant};

use servelab_workload::hub::{
    cached_config_in, cached_tokenizer_in, download_config_with, download_tokenizer_with, HubConfig,
};
use servelab_workload::Tokenizer;

fn config(endpoint: &str, cache: &std::path::Path) -> HubConfig {
    HubConfig {
        endpoint: endpoint.to_string(),
        cache_dir: cache.to_path_buf(),
        token: None,
        offline: false,
        connect_timeout: Duration::from_secs(5),
        total_timeout: Duration::from_secs(30),
    }
}

#[test]
fn downloads_into_the_hf_cache_layout_then_reuses_it() {
    let server = common::serve("200 OK", common::fixture_tokenizer(), 1);
    let cache = tempfile::tempdir().unwrap();
    let mut cfg = config(&server.endpoint, cache.path());
    cfg.token = Some("secret-token".into());
    let file = download_tokenizer_with(&cfg, "HuggingFaceTB/SmolLM2-135M-Instruct").unwrap();
    let model = cache.path().join("models--HuggingFaceTB--SmolLM2-135M-Instruct");
    assert_eq!(file, model.join("snapshots/0123abcd/tokenizer.json"));
    assert_eq!(std::fs::read_to_string(model.join("refs/main")).unwrap(), "0123abcd");
    assert_eq!(std::fs::read(&file).unwrap(), common::fixture_tokenizer());
    let requests = server.requests.lock().unwrap().clone();
    assert_eq!(requests.len(), 1);
    assert!(
        requests[0].starts_with(
            "GET /HuggingFaceTB/SmolLM2-135M-Instruct/resolve/main/tokenizer.json HTTP/1.1\r\n"
        ),
        "{}",
        requests[0]
    );
    assert!(requests[0].to_ascii_lowercase().contains("authorization: bearer secret-token"));
    // Found in the cache now, and a second call does not touch the network (the server
    // would refuse a second connection).
    assert_eq!(
        cached_tokenizer_in(cache.path(), "HuggingFaceTB/SmolLM2-135M-Instruct"),
        Some(file.clone())
    );
    assert_eq!(download_tokenizer_with(&cfg, "HuggingFaceTB/SmolLM2-135M-Instruct").unwrap(), file);
    assert_eq!(Tokenizer::from_path(&file).unwrap().count("hello world"), 2);
}

#[test]
fn offline_mode_never_connects_and_explains() {
    let cache = tempfile::tempdir().unwrap();
    let mut cfg = config("http://127.0.0.1:9", cache.path());
    cfg.offline = true;
    let err = download_tokenizer_with(&cfg, "org/model").unwrap_err().to_string();
    assert_eq!(
        err,
        "cannot get the tokenizer for model 'org/model': it is not cached and HF_HUB_OFFLINE is \
         set; pass a local file with --tokenizer path/to/tokenizer.json"
    );
}

#[test]
fn http_errors_name_the_model_and_the_fix() {
    let cache = tempfile::tempdir().unwrap();
    let server = common::serve("404 Not Found", b"nope".to_vec(), 1);
    let err = download_tokenizer_with(&config(&server.endpoint, cache.path()), "org/missing")
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        format!(
            "cannot get the tokenizer for model 'org/missing': {}/org/missing/resolve/main/\
             tokenizer.json was not found; pass a local file with --tokenizer \
             path/to/tokenizer.json",
            server.endpoint
        )
    );
    let server = common::serve("401 Unauthorized", Vec::new(), 1);
    let err = download_tokenizer_with(&config(&server.endpoint, cache.path()), "org/gated")
        .unwrap_err()
        .to_string();
    assert!(err.contains("'org/gated'") && err.contains("set HF_TOKEN"), "{err}");
    // A 200 that is not a tokenizer is refused and not cached.
    let server = common::serve("200 OK", b"<html>login</html>".to_vec(), 1);
    let err = download_tokenizer_with(&config(&server.endpoint, cache.path()), "org/html")
        .unwrap_err()
        .to_string();
    assert!(err.contains("did not return a valid tokenizer.json"), "{err}");
    assert_eq!(cached_tokenizer_in(cache.path(), "org/html"), None);
}

#[test]
fn unreachable_endpoint_fails_fast_with_advice() {
    // A port that was just free: nothing listens there.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let cache = tempfile::tempdir().unwrap();
    let cfg = config(&format!("http://127.0.0.1:{port}"), cache.path());
    let start = Instant::now();
    let err = download_tokenizer_with(&cfg, "org/model").unwrap_err().to_string();
    assert!(start.elapsed() < Duration::from_secs(20));
    assert!(
        err.starts_with("cannot get the tokenizer for model 'org/model': cannot reach"),
        "{err}"
    );
    assert!(err.ends_with("--tokenizer path/to/tokenizer.json"), "{err}");
}

#[test]
fn rejects_names_that_are_not_model_ids() {
    let cache = tempfile::tempdir().unwrap();
    let err = download_tokenizer_with(&config("http://127.0.0.1:9", cache.path()), "../x")
        .unwrap_err()
        .to_string();
    assert!(err.contains("not a Hugging Face model id"), "{err}");
}

/// A model's config.json (the engine model's shapes) comes the same way: downloaded once into
/// the cache layout, then found there; a body that is not a JSON object is refused, uncached.
#[test]
fn config_json_downloads_into_the_cache_and_is_checked() {
    let json = br#"{"hidden_size": 4096, "num_hidden_layers": 36}"#.to_vec();
    let server = common::serve("200 OK", json.clone(), 1);
    let cache = tempfile::tempdir().unwrap();
    let cfg = config(&server.endpoint, cache.path());
    let file = download_config_with(&cfg, "Qwen/Qwen3-8B").unwrap();
    assert_eq!(file, cache.path().join("models--Qwen--Qwen3-8B/snapshots/0123abcd/config.json"));
    assert_eq!(std::fs::read(&file).unwrap(), json);
    let requests = server.requests.lock().unwrap().clone();
    assert!(
        requests[0].starts_with("GET /Qwen/Qwen3-8B/resolve/main/config.json HTTP/1.1\r\n"),
        "{}",
        requests[0]
    );
    // Cached now: the server would refuse a second connection.
    assert_eq!(cached_config_in(cache.path(), "Qwen/Qwen3-8B"), Some(file.clone()));
    assert_eq!(download_config_with(&cfg, "Qwen/Qwen3-8B").unwrap(), file);
    assert_eq!(cached_tokenizer_in(cache.path(), "Qwen/Qwen3-8B"), None, "only config.json");

    let server = common::serve("200 OK", b"<html>login</html>".to_vec(), 1);
    let err = download_config_with(&config(&server.endpoint, cache.path()), "org/html")
        .unwrap_err()
        .to_string();
    assert!(err.starts_with("cannot get config.json for model 'org/html': "), "{err}");
    assert!(err.contains("did not return a valid config.json"), "{err}");
    assert!(err.ends_with("give the engine file's model_config its path"), "{err}");
    assert_eq!(cached_config_in(cache.path(), "org/html"), None);
    let mut offline = config("http://127.0.0.1:9", cache.path());
    offline.offline = true;
    let err = download_config_with(&offline, "org/other").unwrap_err().to_string();
    assert!(err.contains("not cached and HF_HUB_OFFLINE is set"), "{err}");
}
