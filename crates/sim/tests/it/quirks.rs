//! Server-wide quirks (`--quirk`): each one observed from the client side, next to the
//! default (vLLM) behaviour it replaces.

use crate::common;

use std::time::Duration;

use common::*;
use servelab_sim::{start, Quirk, Quirks, SimConfig, SimHandle};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

async fn sim(quirks: &[Quirk]) -> SimHandle {
    start(SimConfig::fixed(2.0, 0.5).with_quirks(quirks.iter().copied())).await.unwrap()
}

async fn get(sim: &SimHandle, path: &str) -> Seen {
    send(sim.addr(), "GET", path, &[], "").await.expect("request")
}

const CHAT: &str = "/v1/chat/completions";
const COMPLETIONS: &str = "/v1/completions";

/// 3 tokens, streamed, usage asked for.
const STREAM_USAGE: &str = r#"{"prompt":"hello world","max_tokens":3,"ignore_eos":true,
    "stream":true,"stream_options":{"include_usage":true}}"#;

/// The usage object of `completion` tokens for the 2-token prompt "hello world".
fn usage_json(completion: u64) -> String {
    format!(
        r#""usage":{{"prompt_tokens":2,"total_tokens":{},"completion_tokens":{completion}}}"#,
        2 + completion
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_done_ends_the_stream_after_the_finish_chunk() {
    let plain = sim(&[]).await;
    let seen = post(plain.addr(), COMPLETIONS, STREAM_USAGE).await;
    assert!(seen.text().ends_with(&format!("{}}}\n\ndata: [DONE]\n\n", usage_json(3))));
    plain.shutdown().await;

    let quirky = sim(&[Quirk::NoDone]).await;
    let seen = post(quirky.addr(), COMPLETIONS, STREAM_USAGE).await;
    assert_eq!(seen.status, 200);
    assert!(seen.body_error.is_none(), "{:?}", seen.body_error);
    let text = seen.text();
    assert!(!text.contains("[DONE]"), "{text}");
    // The usage event is the last bytes of the body, cleanly ended.
    assert!(text.ends_with(&format!("\"choices\":[],{}}}\n\n", usage_json(3))), "{text}");
    let events = seen.events();
    assert_eq!(events.len(), 3 + 1, "{events:?}");
    assert_eq!(parse(&events[2])["choices"][0]["finish_reason"], "length");
    // Without usage the finish_reason chunk ends the stream.
    let body = r#"{"messages":[{"role":"user","content":"hi"}],"max_tokens":2,"ignore_eos":true,
        "stream":true}"#;
    let seen = post(quirky.addr(), CHAT, body).await;
    assert!(seen.text().ends_with("\"finish_reason\":\"length\"}]}\n\n"), "{}", seen.text());
    assert_eq!(quirky.truth().last().map(|t| t.outcome.clone()).as_deref(), Some("ok"));
    quirky.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reject_ignore_eos_answers_422_naming_the_field() {
    let plain = sim(&[]).await;
    assert_eq!(post(plain.addr(), COMPLETIONS, STREAM_USAGE).await.status, 200);
    plain.shutdown().await;

    let quirky = sim(&[Quirk::RejectIgnoreEos]).await;
    for body in [STREAM_USAGE, r#"{"prompt":"x","ignore_eos":false}"#] {
        let seen = post(quirky.addr(), COMPLETIONS, body).await;
        assert_eq!(seen.status, 422);
        assert_eq!(seen.headers["content-type"], "application/json");
        let e = &seen.json()["error"];
        assert_eq!(e["param"], "ignore_eos");
        assert_eq!(e["code"], 422);
        assert!(e["message"].as_str().unwrap().contains("'ignore_eos'"), "{e}");
    }
    let body = r#"{"messages":[{"role":"user","content":"hi"}],"ignore_eos":true,"max_tokens":1}"#;
    assert_eq!(post(quirky.addr(), CHAT, body).await.status, 422);
    assert_eq!(quirky.truth().last().map(|t| t.outcome.clone()).as_deref(), Some("bad-request"));
    // Other extra fields are fine.
    let body = r#"{"prompt":"x","max_tokens":2,"min_tokens":1}"#;
    assert_eq!(post(quirky.addr(), COMPLETIONS, body).await.status, 200);
    quirky.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reject_min_tokens_answers_422_naming_the_field() {
    let body = r#"{"prompt":"x","max_tokens":3,"min_tokens":2}"#;
    let plain = sim(&[]).await;
    assert_eq!(post(plain.addr(), COMPLETIONS, body).await.status, 200);
    plain.shutdown().await;

    let quirky = sim(&[Quirk::RejectMinTokens]).await;
    let seen = post(quirky.addr(), COMPLETIONS, body).await;
    assert_eq!(seen.status, 422);
    let e = &seen.json()["error"];
    assert_eq!((e["param"].as_str(), e["code"].as_u64()), (Some("min_tokens"), Some(422)));
    assert!(e["message"].as_str().unwrap().contains("'min_tokens'"), "{e}");
    // ignore_eos alone is accepted.
    assert_eq!(post(quirky.addr(), COMPLETIONS, STREAM_USAGE).await.status, 200);
    quirky.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reject_unknown_fields_lists_them_like_transformers_serve() {
    let body = r#"{"model":"servelab-sim","messages":[{"role":"user","content":"hi"}],
        "max_completion_tokens":2,"min_tokens":1,"ignore_eos":true,"stream":true,
        "stream_options":{"include_usage":true,"continuous_usage_stats":true}}"#;
    let plain = sim(&[]).await;
    assert_eq!(post(plain.addr(), CHAT, body).await.status, 200);
    plain.shutdown().await;

    let quirky = sim(&[Quirk::RejectUnknownFields]).await;
    let seen = post(quirky.addr(), CHAT, body).await;
    assert_eq!(seen.status, 422);
    assert_eq!(
        seen.text(),
        r#"{"detail":"Fields not in the OpenAI request schema: {'ignore_eos', 'min_tokens'}"}"#
    );
    // max_completion_tokens is chat's, not completions'.
    let seen =
        post(quirky.addr(), COMPLETIONS, r#"{"prompt":"x","max_completion_tokens":2}"#).await;
    assert_eq!(seen.status, 422);
    assert_eq!(
        seen.json()["detail"],
        "Fields not in the OpenAI request schema: {'max_completion_tokens'}"
    );
    // OpenAI's own fields (stream_options' contents are not checked) pass.
    let ok = r#"{"model":"servelab-sim","messages":[{"role":"user","content":"hi"}],
        "max_completion_tokens":2,"temperature":0.5,"top_p":1,"seed":3,"user":"u","stream":true,
        "stream_options":{"include_usage":true,"continuous_usage_stats":true}}"#;
    assert_eq!(post(quirky.addr(), CHAT, ok).await.status, 200);
    let ok = r#"{"prompt":"x","max_tokens":2,"echo":false,"stop":["\n"],"logprobs":null}"#;
    assert_eq!(post(quirky.addr(), COMPLETIONS, ok).await.status, 200);
    quirky.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ignore_max_completion_tokens_uses_max_tokens_or_the_default() {
    let completion = |s: &Seen| {
        assert_eq!(s.status, 200, "{}", s.text());
        let v = s.json();
        (
            v["usage"]["completion_tokens"].as_u64().unwrap(),
            v["choices"][0]["finish_reason"].clone(),
        )
    };
    let both = r#"{"messages":[{"role":"user","content":"hi"}],"max_completion_tokens":2,
        "max_tokens":4,"ignore_eos":true}"#;
    let only_mct = r#"{"messages":[{"role":"user","content":"hi"}],"max_completion_tokens":2,
        "ignore_eos":true}"#;
    let plain = sim(&[]).await;
    assert_eq!(completion(&post(plain.addr(), CHAT, both).await).0, 2);
    assert_eq!(completion(&post(plain.addr(), CHAT, only_mct).await).0, 2);
    plain.shutdown().await;

    let cfg = SimConfig::fixed(2.0, 0.5)
        .with_quirk(Quirk::IgnoreMaxCompletionTokens)
        .with_default_max_tokens(6)
        .with_eos_mean_tokens(1.0);
    let quirky = start(cfg).await.unwrap();
    assert_eq!(completion(&post(quirky.addr(), CHAT, both).await), (4, "length".into()));
    assert_eq!(completion(&post(quirky.addr(), CHAT, only_mct).await), (6, "length".into()));
    // Without ignore_eos the simulated EOS (mean 1 token) still ends it early.
    let eos = r#"{"messages":[{"role":"user","content":"hi"}],"max_completion_tokens":100}"#;
    let (n, finish) = completion(&post(quirky.addr(), CHAT, eos).await);
    assert!(n < 6 && finish == "stop", "{n} {finish}");
    // Completions are unaffected.
    let seen =
        post(quirky.addr(), COMPLETIONS, r#"{"prompt":"x","max_tokens":3,"ignore_eos":true}"#)
            .await;
    assert_eq!(completion(&seen).0, 3);
    quirky.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ignore_stream_options_sends_usage_on_the_finish_chunk_always() {
    let no_opts = r#"{"prompt":"hello world","max_tokens":3,"ignore_eos":true,"stream":true}"#;
    let continuous = r#"{"prompt":"hello world","max_tokens":3,"ignore_eos":true,"stream":true,
        "stream_options":{"include_usage":true,"continuous_usage_stats":true}}"#;
    let opts_without_stream =
        r#"{"prompt":"x","max_tokens":1,"stream_options":{"include_usage":true}}"#;
    let plain = sim(&[]).await;
    let seen = post(plain.addr(), COMPLETIONS, no_opts).await;
    assert!(!seen.text().contains("usage"));
    let seen = post(plain.addr(), COMPLETIONS, continuous).await;
    assert_eq!(seen.events().iter().filter(|e| e.contains("\"usage\"")).count(), 4);
    assert_eq!(post(plain.addr(), COMPLETIONS, opts_without_stream).await.status, 400);
    plain.shutdown().await;

    let quirky = sim(&[Quirk::IgnoreStreamOptions]).await;
    for body in [no_opts, continuous, STREAM_USAGE] {
        let seen = post(quirky.addr(), COMPLETIONS, body).await;
        let events = seen.events();
        // 3 token events and [DONE]: no separate usage event, usage only on the last token's.
        assert_eq!(events.len(), 4, "{events:?}");
        assert_eq!(events[3], "[DONE]");
        for e in &events[..2] {
            assert!(!e.contains("usage"), "{e}");
        }
        let suffix =
            format!("\"finish_reason\":\"length\",\"stop_reason\":null}}],{}}}", usage_json(3));
        assert!(events[2].ends_with(&suffix), "{}", events[2]);
    }
    // Chat too (role chunk, then tokens).
    let body = r#"{"messages":[{"role":"user","content":"hi"}],"max_tokens":2,"ignore_eos":true,
        "stream":true}"#;
    let events = post(quirky.addr(), CHAT, body).await.events();
    assert_eq!(events.len(), 1 + 2 + 1, "{events:?}");
    let last = parse(&events[2]);
    assert_eq!(last["choices"][0]["finish_reason"], "length");
    assert_eq!(last["usage"]["completion_tokens"], 2);
    assert!(events[..2].iter().all(|e| !e.contains("usage")));
    // stream_options without stream is no longer an error.
    assert_eq!(post(quirky.addr(), COMPLETIONS, opts_without_stream).await.status, 200);
    quirky.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn usage_on_finish_chunk_moves_the_usage_event() {
    let plain = sim(&[]).await;
    let events = post(plain.addr(), COMPLETIONS, STREAM_USAGE).await.events();
    assert_eq!(events.len(), 3 + 1 + 1, "{events:?}");
    assert!(!events[2].contains("usage"));
    assert!(events[3].ends_with(&format!("\"choices\":[],{}}}", usage_json(3))), "{}", events[3]);
    plain.shutdown().await;

    let quirky = sim(&[Quirk::UsageOnFinishChunk]).await;
    let events = post(quirky.addr(), COMPLETIONS, STREAM_USAGE).await.events();
    assert_eq!(events.len(), 3 + 1, "{events:?}");
    let suffix =
        format!("\"finish_reason\":\"length\",\"stop_reason\":null}}],{}}}", usage_json(3));
    assert!(events[2].ends_with(&suffix), "{}", events[2]);
    assert!(events[..2].iter().all(|e| !e.contains("usage")));
    assert_eq!(events[3], "[DONE]");
    // Not asked for: still none.
    let body = r#"{"prompt":"hello world","max_tokens":3,"ignore_eos":true,"stream":true}"#;
    assert!(!post(quirky.addr(), COMPLETIONS, body).await.text().contains("usage"));
    quirky.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_usage_sends_no_usage_object_at_all() {
    let continuous = r#"{"messages":[{"role":"user","content":"hi"}],"max_tokens":3,
        "ignore_eos":true,"stream":true,
        "stream_options":{"include_usage":true,"continuous_usage_stats":true}}"#;
    let full = r#"{"prompt":"hello world","max_tokens":3,"ignore_eos":true}"#;
    let plain = sim(&[]).await;
    assert!(post(plain.addr(), CHAT, continuous).await.text().contains("\"usage\""));
    assert_eq!(post(plain.addr(), COMPLETIONS, full).await.json()["usage"]["completion_tokens"], 3);
    plain.shutdown().await;

    let quirky = sim(&[Quirk::NoUsage]).await;
    let seen = post(quirky.addr(), CHAT, continuous).await;
    let events = seen.events();
    // role + 3 tokens + [DONE], no usage event and no usage on any chunk.
    assert_eq!(events.len(), 1 + 3 + 1, "{events:?}");
    assert!(!seen.text().contains("usage"), "{}", seen.text());
    let seen = post(quirky.addr(), COMPLETIONS, full).await;
    assert_eq!(seen.status, 200);
    let v = seen.json();
    assert!(v.get("usage").is_none(), "{v}");
    assert!(seen.text().ends_with("\"prompt_logprobs\":null}]}"), "{}", seen.text());
    assert_eq!(v["choices"][0]["finish_reason"], "length");
    let body = r#"{"messages":[{"role":"user","content":"hi"}],"max_tokens":2,"ignore_eos":true}"#;
    let v = post(quirky.addr(), CHAT, body).await.json();
    assert!(v.get("usage").is_none() && v["choices"][0]["message"]["content"].is_string(), "{v}");
    // The truth still counts the tokens.
    assert_eq!(quirky.truth().last().map(|t| t.completion_tokens), Some(2));
    quirky.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn models_error_answers_500_but_health_is_fine() {
    let plain = sim(&[]).await;
    assert_eq!(get(&plain, "/v1/models").await.json()["data"][0]["id"], "servelab-sim");
    plain.shutdown().await;

    let quirky = sim(&[Quirk::ModelsError]).await;
    let seen = get(&quirky, "/v1/models").await;
    assert_eq!(seen.status, 500);
    assert_eq!(seen.text(), "Internal Server Error");
    assert_eq!(get(&quirky, "/health").await.status, 200);
    assert_eq!(get(&quirky, "/metrics").await.status, 200);
    assert_eq!(post(quirky.addr(), COMPLETIONS, STREAM_USAGE).await.status, 200);
    quirky.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_metrics_answers_404() {
    let plain = sim(&[]).await;
    let seen = get(&plain, "/metrics").await;
    assert_eq!(seen.status, 200);
    assert!(seen.text().contains("vllm:num_requests_running"));
    plain.shutdown().await;

    let quirky = sim(&[Quirk::NoMetrics]).await;
    let seen = get(&quirky, "/metrics").await;
    assert_eq!(seen.status, 404);
    assert_eq!(seen.text(), r#"{"detail":"Not Found"}"#);
    assert_eq!(get(&quirky, "/v1/models").await.status, 200);
    assert_eq!(get(&quirky, "/health").await.status, 200);
    quirky.shutdown().await;
}

/// Send raw `request` bytes on a fresh connection and read until the server closes it or
/// `wait` passes: the bytes read and whether the server closed the connection.
async fn raw(sim: &SimHandle, request: &str, wait: Duration) -> (String, bool) {
    let mut tcp = tokio::net::TcpStream::connect(sim.addr()).await.unwrap();
    tcp.write_all(request.as_bytes()).await.unwrap();
    let mut buf = Vec::new();
    let closed = tokio::time::timeout(wait, tcp.read_to_end(&mut buf)).await.is_ok();
    (String::from_utf8_lossy(&buf).into_owned(), closed)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_keep_alive_closes_after_every_response() {
    let health = "GET /health HTTP/1.1\r\nhost: sim\r\n\r\n";
    let body = r#"{"prompt":"x","max_tokens":2,"ignore_eos":true,"stream":true}"#;
    let stream = format!(
        "POST /v1/completions HTTP/1.1\r\nhost: sim\r\ncontent-type: application/json\r\n\
         content-length: {}\r\n\r\n{body}",
        body.len()
    );
    let plain = sim(&[]).await;
    let (text, closed) = raw(&plain, health, Duration::from_millis(300)).await;
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(!closed && !text.to_ascii_lowercase().contains("connection:"), "{text}");
    plain.shutdown().await;

    let quirky = sim(&[Quirk::NoKeepAlive]).await;
    for req in [health, &stream, "GET /nope HTTP/1.1\r\nhost: sim\r\n\r\n"] {
        let (text, closed) = raw(&quirky, req, STEP).await;
        assert!(closed, "{text}");
        let lower = text.to_ascii_lowercase();
        assert_eq!(lower.matches("connection: close\r\n").count(), 1, "{text}");
        assert_eq!(lower.matches("connection:").count(), 1, "{text}");
    }
    let (text, _) = raw(&quirky, &stream, STEP).await;
    assert!(text.contains("data: [DONE]\n\n"), "{text}");
    let seen = post(quirky.addr(), COMPLETIONS, STREAM_USAGE).await;
    assert_eq!(seen.headers["connection"], "close");
    quirky.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transformers_preset_is_its_six_quirks() {
    let parts = [
        Quirk::NoDone,
        Quirk::RejectUnknownFields,
        Quirk::IgnoreMaxCompletionTokens,
        Quirk::IgnoreStreamOptions,
        Quirk::ModelsError,
        Quirk::NoMetrics,
    ];
    let preset = SimConfig::default().with_quirk(Quirk::Transformers).quirks;
    assert_eq!(preset, parts.into_iter().collect::<Quirks>());
    assert_eq!(Quirks::parse_list("transformers").unwrap(), preset);
    assert!(SimConfig::default().quirks.is_empty());

    let quirky = sim(&[Quirk::Transformers]).await;
    // A vLLM-style benchmark request is refused...
    let body = r#"{"messages":[{"role":"user","content":"hi"}],"max_completion_tokens":2,
        "ignore_eos":true,"stream":true,"stream_options":{"include_usage":true}}"#;
    let seen = post(quirky.addr(), CHAT, body).await;
    assert_eq!(seen.status, 422);
    assert_eq!(seen.json()["detail"], "Fields not in the OpenAI request schema: {'ignore_eos'}");
    // ...an OpenAI one is served: max_tokens, usage on the finish chunk, no [DONE].
    let body = r#"{"messages":[{"role":"user","content":"hi"}],"max_completion_tokens":9,
        "max_tokens":2,"stream":true}"#;
    let seen = post(quirky.addr(), CHAT, body).await;
    assert_eq!(seen.status, 200);
    let events = seen.events();
    assert!(!seen.text().contains("[DONE]"), "{events:?}");
    let last = parse(events.last().unwrap());
    assert!(last["choices"][0]["finish_reason"].is_string(), "{last}");
    let n = last["usage"]["completion_tokens"].as_u64().unwrap();
    assert!((1..=2).contains(&n), "{last}");
    assert_eq!(get(&quirky, "/v1/models").await.status, 500);
    assert_eq!(get(&quirky, "/metrics").await.status, 404);
    assert_eq!(get(&quirky, "/health").await.status, 200);
    quirky.shutdown().await;
}
