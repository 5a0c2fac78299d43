//! `Tokenizer::from_spec("org/name")` downloads through the environment's Hub settings. The
//! one test of this binary owns the process environment (tests in other binaries run in other
//! processes), so setting variables here races with nothing.

mod common;

use servelab_workload::Tokenizer;

#[test]
fn from_spec_downloads_an_uncached_model_once() {
    let server = common::serve("200 OK", common::fixture_tokenizer(), 1);
    let home = tempfile::tempdir().unwrap();
    std::env::set_var("HF_HOME", home.path());
    std::env::set_var("HF_ENDPOINT", &server.endpoint);
    std::env::remove_var("HF_HUB_CACHE");
    std::env::remove_var("HF_HUB_OFFLINE");
    std::env::remove_var("HF_TOKEN");

    let tok = Tokenizer::from_spec("acme/tiny-model").unwrap();
    assert_eq!(tok.name(), "acme/tiny-model");
    assert_eq!(tok.count("hello world"), 2);
    let cached = home.path().join("hub/models--acme--tiny-model/snapshots/0123abcd/tokenizer.json");
    assert!(cached.is_file());
    assert_eq!(servelab_workload::hub::cached_tokenizer("acme/tiny-model"), Some(cached));
    // Served from the cache: the server accepts no second connection.
    assert_eq!(Tokenizer::from_spec("acme/tiny-model").unwrap().count("hello world"), 2);
    assert_eq!(server.requests.lock().unwrap().len(), 1);

    std::env::set_var("HF_HUB_OFFLINE", "1");
    let err = Tokenizer::from_spec("acme/other-model").unwrap_err().to_string();
    assert_eq!(
        err,
        "cannot get the tokenizer for model 'acme/other-model': it is not cached and \
         HF_HUB_OFFLINE is set; pass a local file with --tokenizer path/to/tokenizer.json"
    );
}
