//! The conformance corpus: every exchange of every server in `testdata/servers/` served byte
//! for byte by the replay server, and measured by `servelab bench` as a user would run it.
//! Each exchange's `expect` says what servelab must make of it: outcome, text, token counts,
//! TTFT, chunk count, where usage came, and the notes on what the server did.
//!
//! Timing tolerance: the replay server writes each frame at its stated time after the request
//! arrived; a 2-core CI machine may delay a write or the client's read by tens of
//! milliseconds when builds run beside the tests (71 ms seen for a 40 ms frame), never make it
//! early. The lower bound is what tells the frames apart (a first token taken from a role-only
//! chunk written earlier would read early); the upper bound only catches gross errors.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;
use servelab_records::{ChunkKind, Outcome, RequestRecord, UsageAt};
use servelab_sim::replay::{start_replay, Exchange, Fixture};

use crate::common;

/// Scheduling noise allowed on a loaded 2-core machine.
const SLACK_MS: f64 = 150.0;

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
    if let Some(want) = expect.get("encoding").and_then(Value::as_str) {
        bad.extend(differ("encoding", want.into(), r.stream.encoding.clone().unwrap_or_default()));
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

/// The edges of the stream contract, one case each (testdata/hostile-server.yaml): compressed,
/// close-delimited and length-framed bodies, a BOM, CR line ends, keep-alive comments, choices
/// out of order, bytes after `[DONE]`, streams cut short or without output, a 204, an
/// encoding servelab cannot decode, JSON instead of a stream, tool calls as the only output.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_server_is_read_as_the_contract_says() {
    let path = corpus_dir().join("../hostile-server.yaml");
    let bad = run_fixture(&path).await;
    assert!(bad.is_empty(), "hostile-server.yaml:\n{}", bad.join("\n"));
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

/// `servelab sweep --scenario 16:8 --concurrency 1,2` of chat against `url`, results in `dir`,
/// within 120 s (`Err` when it took longer).
async fn corpus_sweep(
    url: &str,
    dir: &Path,
) -> Result<Result<servelab::ExitStatus, servelab::Failure>, tokio::time::error::Elapsed> {
    use clap::Parser;
    use servelab::args::{Cli, Command};
    let args = [
        "servelab",
        "sweep",
        "--base-url",
        url,
        "--no-progress",
        "--no-store",
        "--backend",
        "openai-chat",
        "--model",
        "corpus-model",
        "--scenario",
        "16:8",
        "--concurrency",
        "1,2",
        "--num-prompts",
        "4",
        "--settle-secs",
        "0",
        "--tokenizer",
        "cl100k_base",
        "--server-metrics-interval",
        "0",
        "--output-dir",
        dir.to_str().unwrap(),
    ];
    let Command::Sweep(a) = Cli::try_parse_from(args).unwrap().command else { unreachable!() };
    let (_tx, rx) = tokio::sync::watch::channel(false);
    tokio::time::timeout(Duration::from_secs(120), servelab::sweep(&a, rx)).await
}

/// `transformers serve` as the corpus records it refuses `ignore_eos` with 422 and sends no
/// `[DONE]`: a scenario sweep (which always asks for `ignore_eos`) still measures every
/// request, because the preflight leaves the refused field out and the run says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scenario_sweep_adapts_to_transformers_serve() {
    let fixture = Fixture::load(&corpus_dir().join("transformers-serve.yaml")).unwrap();
    let server = start_replay(fixture, "127.0.0.1", 0).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    corpus_sweep(&server.base_url(), dir.path())
        .await
        .expect("sweep within 120 s")
        .expect("sweep runs");
    for c in [1, 2] {
        let p = dir.path().join(format!("points/16x8/concurrency-{c}.json"));
        let point: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&p).expect("point result")).unwrap();
        let s = &point["summary"];
        let planned = s["info"]["num_prompts"].as_u64();
        assert_eq!((s["completed"].as_u64(), s["failed"].as_u64()), (planned, Some(0)), "{s}");
        let warnings: Vec<&str> =
            s["warnings"].as_array().unwrap().iter().filter_map(|w| w.as_str()).collect();
        let has = |w: &str| warnings.iter().any(|x| x.contains(w));
        assert!(has("refuses ignore_eos (HTTP 422"), "{warnings:?}");
        assert!(
            has(&format!("sent no data: [DONE] in {0} of {0}", planned.unwrap())),
            "{warnings:?}"
        );
    }
    // Every measured request went without the refused fields; only the probe carried one
    // (the sweep's points share what the first point's preflight found).
    let bodies: Vec<Value> = server.served().into_iter().filter_map(|s| s.body).collect();
    let with_eos = bodies.iter().filter(|b| b.get("ignore_eos").is_some()).count();
    assert_eq!(with_eos, 1, "one ignore_eos probe for the whole sweep");
    server.shutdown().await;
}

/// The simulator with the `transformers` quirks: ignores `max_completion_tokens`, refuses
/// `ignore_eos`. The preflight sends the length as `max_tokens` instead and drops
/// `ignore_eos`; without the preflight every request fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_adapts_to_a_server_with_transformers_quirks_and_says_so() {
    let cfg = servelab_sim::SimConfig::fixed(5.0, 1.0)
        .with_quirk(servelab_sim::Quirk::Transformers)
        .with_port(0);
    let sim = servelab_sim::start(cfg).await.unwrap();
    let args = [
        "--backend",
        "openai-chat",
        "--model",
        "servelab-sim",
        "--num-prompts",
        "4",
        "--random-input-len",
        "16",
        "--random-output-len",
        "8",
        "--ignore-eos",
        "--tokenizer",
        "cl100k_base",
        "--server-metrics-interval",
        "0",
    ];
    let out =
        common::run_bench(&common::bench_settings(&sim.base_url(), &args), Duration::from_secs(60))
            .await;
    let s = &out.summary;
    assert_eq!((s.completed, s.failed), (4, 0), "{:?}", s.failures);
    for r in out.records.iter().filter(|r| !r.warmup) {
        let got = r.usage.map(|u| u.completion_tokens).unwrap();
        assert!(got <= 8, "asked 8, got {got}: the length went in a field the server reads");
        assert!(r.stream.no_done);
    }
    let w: Vec<String> = s.warnings.iter().map(ToString::to_string).collect();
    let w = w.join("\n");
    assert!(
        w.contains("the server ignores max_completion_tokens; the length was sent as max_tokens"),
        "{w}"
    );
    assert!(w.contains("refuses ignore_eos"), "{w}");

    let mut no = args.to_vec();
    no.push("--no-preflight");
    let out =
        common::run_bench(&common::bench_settings(&sim.base_url(), &no), Duration::from_secs(60))
            .await;
    assert_eq!(out.summary.completed, 0);
    assert!(out.summary.failures.iter().any(|f| f.messages.iter().any(|m| m.contains("HTTP 422"))));
    sim.shutdown().await;
}

/// What servelab measured of one fixture, in a table row: taken from the exchanges' own
/// expectations, so the table cannot say more than the tests check.
fn docs_row(fx: &Fixture) -> String {
    let streamed: Vec<&Value> = fx
        .exchanges
        .iter()
        .filter(|x| backend(x).is_some())
        .filter_map(|x| x.expect.as_ref())
        .filter(|e| e.get("outcome").and_then(Value::as_str) == Some("success"))
        .collect();
    let notes = |n: &str| {
        streamed.iter().any(|e| {
            e.get("notes").and_then(Value::as_array).is_some_and(|a| a.iter().any(|v| v == n))
        })
    };
    let done = if notes("no_done") { "**not sent**" } else { "sent" };
    let mut usage: Vec<&str> =
        streamed.iter().filter_map(|e| e.get("usage_at").and_then(Value::as_str)).collect();
    usage.sort_unstable();
    usage.dedup();
    let usage =
        if usage.is_empty() { "never".to_string() } else { usage.join(", ").replace('_', " ") };
    let refuses = |field: &str| {
        fx.exchanges
            .iter()
            .find(|x| x.when.has.iter().any(|h| h == field) && x.status >= 400)
            .map(|x| format!("**refused** ({})", x.status))
    };
    let eos = refuses("ignore_eos").unwrap_or_else(|| "accepted".into());
    let reasoning = if streamed.iter().any(|e| e.get("reasoning").is_some()) { "yes" } else { "-" };
    let metrics = fx.exchanges.iter().find(|x| x.method == "GET" && x.path == "/metrics").map_or(
        "-".to_string(),
        |x| {
            if x.status != 200 {
                return format!("none ({})", x.status);
            }
            let body: String = x
                .frames
                .iter()
                .filter_map(|f| f.bytes().ok())
                .map(|b| String::from_utf8_lossy(&b).into_owned())
                .collect();
            if body.trim_start().starts_with(['[', '{']) {
                return "JSON".into();
            }
            // The first of the engine's own series (not the Python client's process ones).
            let name = body
                .lines()
                .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
                .filter_map(|l| l.split(['{', ' ']).next())
                .find(|n| !n.starts_with("python_") && !n.starts_with("process_"))
                .unwrap_or("");
            format!("`{name}`")
        },
    );
    let mut treat = Vec::new();
    if notes("no_done") {
        treat.push("complete after its finish_reason, noted per run");
    }
    if refuses("ignore_eos").is_some() {
        treat.push("preflight leaves ignore_eos out, counts early ends");
    }
    if reasoning == "yes" {
        treat.push("reasoning chunks are output (TTFT at the first)");
    }
    if treat.is_empty() {
        treat.push("as OpenAI's");
    }
    format!(
        "| {} | {} | {done} | {usage} | {eos} | {reasoning} | {metrics} | {} | {} |",
        fx.server,
        fx.version,
        treat.join("; "),
        streamed.len()
    )
}

/// docs/conformance.md's generated part: the summary table and each server's traits.
fn docs_generated() -> String {
    let mut out = String::from(
        "| server | version | `[DONE]` | usage came | `ignore_eos` | reasoning | /metrics | servelab | streams tested |\n|---|---|---|---|---|---|---|---|---|\n",
    );
    let fixtures: Vec<(PathBuf, Fixture)> =
        corpus().into_iter().map(|p| (p.clone(), Fixture::load(&p).unwrap())).collect();
    for (_, fx) in &fixtures {
        out.push_str(&docs_row(fx));
        out.push('\n');
    }
    for (path, fx) in &fixtures {
        let file = path.file_name().unwrap().to_string_lossy();
        out.push_str(&format!("\n### {} {}\n\n", fx.server, fx.version));
        out.push_str(&format!(
            "Fixture: [`testdata/servers/{file}`](../testdata/servers/{file}). {}\n\n",
            fx.summary.trim()
        ));
        for (k, v) in &fx.traits {
            out.push_str(&format!("- **{k}**: {}\n", v.trim()));
        }
        out.push_str("\nRead from:\n");
        for s in &fx.sources {
            out.push_str(&format!("- {}\n", s.trim()));
        }
    }
    out
}

/// The docs table is the corpus's, regenerated with `SERVELAB_UPDATE_DOCS=1`.
#[test]
fn the_docs_table_is_the_corpus() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/conformance.md");
    let doc = std::fs::read_to_string(&path).expect("docs/conformance.md");
    const MARK: &str =
        "<!-- generated by crates/cli/tests/it/conformance.rs: do not edit below -->\n";
    let head = doc.split(MARK).next().unwrap_or("").to_string();
    let want = format!("{head}{MARK}{}", docs_generated());
    if std::env::var_os("SERVELAB_UPDATE_DOCS").is_some() {
        std::fs::write(&path, &want).unwrap();
        return;
    }
    assert!(doc == want, "docs/conformance.md is out of date: run SERVELAB_UPDATE_DOCS=1 cargo test -p servelab --test it conformance::the_docs_table");
}

/// One corpus server through a scenario sweep: what went wrong, if anything.
async fn sweep_one_server(path: &Path, dir: &Path) -> Vec<String> {
    let mut bad = Vec::new();
    let name = path.file_stem().unwrap().to_string_lossy().into_owned();
    let server = start_replay(Fixture::load(path).unwrap(), "127.0.0.1", 0).await.unwrap();
    match corpus_sweep(&server.base_url(), dir).await {
        Ok(Ok(_)) => {}
        other => bad.push(format!("{name}: sweep ended {other:?}")),
    }
    for c in [1, 2] {
        let p = dir.join(format!("points/16x8/concurrency-{c}.json"));
        let Ok(bytes) = std::fs::read(&p) else {
            bad.push(format!("{name}: no point at concurrency {c}"));
            continue;
        };
        let point: Value = serde_json::from_slice(&bytes).unwrap();
        let s = &point["summary"];
        if s["failed"].as_u64() != Some(0) || s["completed"].as_u64() == Some(0) {
            bad.push(format!(
                "{name} sweep c={c}: {} completed, failures {}",
                s["completed"], s["failures"]
            ));
        }
    }
    server.shutdown().await;
    bad
}

/// Every corpus server through a scenario sweep (which asks for `ignore_eos`) and a lab whose
/// engines are replays of the servers: every request measured, whatever the server refuses.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_corpus_server_runs_a_scenario_sweep_and_a_lab() {
    use servelab::args::LabRunArgs;
    let tmp = tempfile::tempdir().unwrap();
    // The servers' sweeps run side by side: each waits on its replay's timing, not the CPU.
    let mut sweeps = tokio::task::JoinSet::new();
    for path in corpus() {
        let dir = tmp.path().join(path.file_stem().unwrap());
        sweeps.spawn(async move { sweep_one_server(&path, &dir).await });
    }
    let mut bad = Vec::new();
    while let Some(found) = sweeps.join_next().await {
        bad.extend(found.unwrap());
    }
    bad.sort();

    // One lab, one engine per server: each a replay launched as a process.
    let bin = env!("CARGO_BIN_EXE_servelab");
    let engines: String = corpus()
        .iter()
        .map(|p| {
            let name = p.file_stem().unwrap().to_string_lossy().into_owned();
            // LiteLLM's /health wants the master key; its liveliness probe does not, and is
            // what a lab of LiteLLM names as its ready_url.
            let fx = Fixture::load(p).unwrap();
            let ready = if fx.find("GET", "/health/liveliness", None).is_some() {
                ", ready_url: 'http://127.0.0.1:{port}/health/liveliness'"
            } else {
                ""
            };
            format!(
                "  - {{name: {name}, command: '{bin} sim replay {} --port {{port}}', ready_timeout_secs: 30, stop_grace_secs: 3{ready}}}\n",
                p.display()
            )
        })
        .collect();
    let yaml = format!(
        "name: corpus\nstrategy: baseline\nengines:\n{engines}profiles:\n  - {{name: chat, backend: openai-chat, model: corpus-model, dataset_name: random, \
         random_input_len: 16, random_output_len: 8, ignore_eos: true, num_prompts: 4, max_concurrency: 2, \
         seed: 1, tokenizer: cl100k_base, server_metrics_interval: 0}}\n"
    );
    let file = tmp.path().join("corpus-lab.yaml");
    std::fs::write(&file, yaml).unwrap();
    let a = LabRunArgs {
        experiment: file,
        resume: false,
        output_dir: Some(tmp.path().join("lab")),
        db: None,
        no_store: true,
        shard: Default::default(),
    };
    let (_tx, rx) = tokio::sync::watch::channel(false);
    let (finish, _) = servelab::run_experiment(&a, rx).await.unwrap_or_else(|e| panic!("lab: {e}"));
    let servelab_lab::Finish::Done { trials, .. } = finish else { panic!("interrupted?") };
    assert_eq!(trials.len(), corpus().len());
    for t in &trials {
        let p = t.profiles.first();
        if t.failure().is_some() || p.map(|p| (p.completed, p.failed)) != Some((4, 0)) {
            bad.push(format!(
                "lab trial {}: {:?} {:?}",
                t.spec.id,
                t.failure(),
                p.map(|p| (p.completed, p.failed))
            ));
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}
