//! The conformance corpus: every exchange of every server in `testdata/servers/` served byte
//! for byte by the replay server, and measured by `servelab bench` as a user would run it.
//! Each exchange's `expect` says what servelab must make of it: outcome, text, token counts,
//! TTFT, chunk count, where usage came, and the notes on what the server did.
//!
//! Timing tolerance: the replay server writes each frame at its stated time after the request
//! arrived; a 2-core CI machine may delay a write or the client's read by several
//! milliseconds, never make it early (beyond the sub-millisecond between send and arrival).

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;
use servelab_records::{ChunkKind, Outcome, RequestRecord, UsageAt};
use servelab_sim::replay::{start_replay, Exchange, Fixture};

mod common;

/// Scheduling noise allowed on a loaded 2-core machine.
const SLACK_MS: f64 = 25.0;

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/servers")
}

/// Every fixture file in the corpus.
fn corpus() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(corpus_dir())
        .expect("testdata/servers")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    files
}

/// The backend flag for an exchange's path; `None` for routes bench does not stream from.
fn backend(x: &Exchange) -> Option<&'static str> {
    match (x.method.as_str(), x.path.as_str()) {
        ("POST", "/v1/completions") => Some("openai"),
        ("POST", "/v1/chat/completions") => Some("openai-chat"),
        _ => None,
    }
}

/// The bench arguments that send two requests of `x`'s kind, one at a time.
fn bench_args(x: &Exchange, backend: &'static str) -> Vec<String> {
    let mut args: Vec<String> = [
        "--backend",
        backend,
        "--num-prompts",
        "2",
        "--max-concurrency",
        "1",
        "--num-warmups",
        "0",
        "--random-input-len",
        "16",
        "--random-output-len",
        "8",
        "--tokenizer",
        "cl100k_base",
        "--request-timeout",
        "10",
        "--ready-timeout",
        "5",
        "--server-metrics-interval",
        "0",
        "--no-preflight",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    if !x.bench_args.iter().any(|a| a == "--model") {
        args.extend(["--model".to_string(), "corpus-model".to_string()]);
    }
    args.extend(x.bench_args.iter().cloned());
    args
}

/// What one record should be, per `expect`; every departure, in words.
fn check(expect: &Value, r: &RequestRecord) -> Vec<String> {
    let mut bad = Vec::new();
    let differ = |what: &str, want: String, got: String| {
        (want != got).then(|| format!("{what}: expected {want}, measured {got}"))
    };
    let (kind, message) = match &r.outcome {
        Outcome::Success => ("success".to_string(), String::new()),
        Outcome::Failure { kind, message } => (kind.as_str().to_string(), message.clone()),
    };
    if let Some(want) = expect.get("outcome").and_then(Value::as_str) {
        if want != kind {
            bad.push(format!("outcome: expected {want}, measured {kind} ({message})"));
        }
    }
    if let Some(want) = expect.get("message").and_then(Value::as_str) {
        if !message.contains(want) {
            bad.push(format!("message: expected to contain {want:?}, was {message:?}"));
        }
    }
    let text = |k: ChunkKind| -> String {
        r.chunks.iter().filter(|c| c.kind == k).map(|c| c.text.as_str()).collect()
    };
    if let Some(want) = expect.get("content").and_then(Value::as_str) {
        bad.extend(differ(
            "content",
            format!("{want:?}"),
            format!("{:?}", text(ChunkKind::Content)),
        ));
    }
    if let Some(want) = expect.get("reasoning").and_then(Value::as_str) {
        bad.extend(differ(
            "reasoning",
            format!("{want:?}"),
            format!("{:?}", text(ChunkKind::Reasoning)),
        ));
    }
    if let Some(want) = expect.get("output_tokens").and_then(Value::as_u64) {
        let got = r.usage.map_or("no usage".into(), |u| u.completion_tokens.to_string());
        bad.extend(differ("output_tokens", want.to_string(), got));
    }
    if let Some(want) = expect.get("prompt_tokens").and_then(Value::as_u64) {
        let got = r.usage.map_or("no usage".into(), |u| u.prompt_tokens.to_string());
        bad.extend(differ("prompt_tokens", want.to_string(), got));
    }
    if let Some(want) = expect.get("chunks").and_then(Value::as_u64) {
        let got = r.chunks.iter().filter(|c| !c.text.is_empty()).count();
        bad.extend(differ("chunks", want.to_string(), got.to_string()));
    }
    if let Some(want) = expect.get("usage_at").and_then(Value::as_str) {
        let got = match r.stream.usage_at {
            Some(UsageAt::PerChunk) => "per_chunk",
            Some(UsageAt::FinishChunk) => "finish_chunk",
            Some(UsageAt::Separate) => "separate",
            None => "none",
        };
        bad.extend(differ("usage_at", want.into(), got.into()));
    }
    if let Some(want) = expect.get("finish_reason").and_then(Value::as_str) {
        bad.extend(differ(
            "finish_reason",
            want.into(),
            r.stream.finish_reason.clone().unwrap_or_default(),
        ));
    }
    let notes = expect.get("notes").and_then(Value::as_array).cloned().unwrap_or_default();
    let has = |n: &str| notes.iter().any(|v| v.as_str() == Some(n));
    for (name, got) in [
        ("no_done", r.stream.no_done),
        ("after_done", r.stream.after_done),
        ("other_choices", r.stream.other_choices),
        ("bom", r.stream.bom),
    ] {
        if kind == "success" || has(name) {
            bad.extend(differ(&format!("note {name}"), has(name).to_string(), got.to_string()));
        }
    }
    if let Some(want) = expect.get("ttft_ms").and_then(Value::as_f64) {
        match r.first_token_ns() {
            None => bad.push(format!("ttft_ms: expected {want}, no output came")),
            Some(t) => {
                let got = t.saturating_sub(r.sent_ns) as f64 / 1e6;
                if got < want - 1.0 || got > want + SLACK_MS {
                    bad.push(format!("ttft_ms: expected {want} (+{SLACK_MS}), measured {got:.2}"));
                }
            }
        }
    }
    bad
}

/// Every exchange of one fixture file through bench; the departures, prefixed by exchange.
async fn run_fixture(path: &Path) -> Vec<String> {
    let fixture = Fixture::load(path).unwrap_or_else(|e| panic!("{e}"));
    let server = start_replay(fixture.clone(), "127.0.0.1", 0).await.expect("replay starts");
    let mut bad = Vec::new();
    for x in &fixture.exchanges {
        let (Some(expect), Some(backend)) = (&x.expect, backend(x)) else { continue };
        let before = server.served().len();
        let args = bench_args(x, backend);
        let argv: Vec<&str> = args.iter().map(String::as_str).collect();
        let settings = common::bench_settings(&server.base_url(), &argv);
        let out = common::run_bench(&settings, Duration::from_secs(60)).await;
        let served: Vec<_> = server.served().into_iter().skip(before).collect();
        let posts: Vec<_> = served.iter().filter(|s| s.request.starts_with("POST")).collect();
        if posts.len() != 2 || posts.iter().any(|s| s.exchange.as_deref() != Some(&x.name)) {
            bad.push(format!(
                "{}: bench's requests were answered by {:?}, not by this exchange (bench_args {:?}; first body {})",
                x.name,
                posts.iter().map(|s| s.exchange.clone()).collect::<Vec<_>>(),
                x.bench_args,
                posts.first().and_then(|s| s.body.clone()).unwrap_or_default()
            ));
            continue;
        }
        let measured: Vec<&RequestRecord> = out.records.iter().filter(|r| !r.warmup).collect();
        for r in measured {
            bad.extend(check(expect, r).into_iter().map(|b| format!("{}: {b}", x.name)));
        }
    }
    server.shutdown().await;
    bad
}

/// One test per server keeps each failure's name readable; this list must name every file.
macro_rules! corpus_tests {
    ($($test:ident => $file:literal),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $test() {
                let bad = run_fixture(&corpus_dir().join($file)).await;
                assert!(bad.is_empty(), "{}:\n{}", $file, bad.join("\n"));
            }
        )*

        #[test]
        fn every_corpus_file_has_a_test() {
            let listed = [$($file),*];
            for f in corpus() {
                let name = f.file_name().unwrap().to_string_lossy().into_owned();
                assert!(listed.contains(&name.as_str()), "{name} has no test in conformance.rs");
            }
            assert!(listed.len() >= 12, "the corpus covers at least twelve servers");
        }
    };
}

corpus_tests! {
    vllm => "vllm.yaml",
    vllm_reasoning => "vllm-reasoning.yaml",
    sglang => "sglang.yaml",
    trtllm_serve => "trtllm-serve.yaml",
    tgi => "tgi.yaml",
    lmdeploy => "lmdeploy.yaml",
    llama_server => "llama-server.yaml",
    ollama => "ollama.yaml",
    transformers_serve => "transformers-serve.yaml",
    dynamo => "dynamo.yaml",
    litellm => "litellm.yaml",
    openai => "openai.yaml",
    anthropic_openai => "anthropic-openai.yaml",
}

/// Every exchange has a unique name, frames that decode, and — where it has an `expect` — the
/// `bench_args` that reach it (a fixture nobody can run tests nothing).
#[test]
fn every_fixture_parses_and_its_expectations_can_be_reached() {
    for f in corpus() {
        let fx = Fixture::load(&f).unwrap_or_else(|e| panic!("{e}"));
        assert!(!fx.sources.is_empty(), "{}: no sources", f.display());
        for x in &fx.exchanges {
            if x.expect.is_some() && backend(x).is_some() {
                assert!(
                    x.first_ms >= 0.0 && !x.frames.is_empty() || x.status != 200,
                    "{}: {}",
                    f.display(),
                    x.name
                );
            }
        }
    }
}
