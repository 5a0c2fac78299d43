//! The wire format over real HTTP: SSE events field by field, usage accounting, non-streaming
//! bodies, the side endpoints and vLLM-style errors.

use crate::common;

use common::*;
use servelab_sim::{start, SimConfig};
use servelab_workload::Tokenizer;

fn fast() -> SimConfig {
    SimConfig::fixed(5.0, 1.0)
}

fn tok() -> Tokenizer {
    Tokenizer::from_spec("cl100k_base").unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streaming_completions_events_usage_and_done() {
    let sim = start(fast()).await.unwrap();
    let body = r#"{"model":"servelab-sim","prompt":"hello world","max_tokens":5,"ignore_eos":true,
        "stream":true,"stream_options":{"include_usage":true}}"#;
    let seen =
        post_with(sim.addr(), "/v1/completions", &[("x-request-id", "servelab-1")], body).await;
    assert_eq!(seen.status, 200);
    assert!(seen.headers["content-type"].to_str().unwrap().starts_with("text/event-stream"));
    assert!(seen.text().ends_with("data: [DONE]\n\n"));
    let events = seen.events();
    assert_eq!(events.len(), 5 + 1 + 1, "{events:?}");
    let mut text = String::new();
    for (i, e) in events[..5].iter().enumerate() {
        let v = parse(e);
        assert!(v["id"].as_str().unwrap().starts_with("cmpl-"));
        assert_eq!(v["object"], "text_completion");
        assert_eq!(v["model"], "servelab-sim");
        assert!(v["created"].as_u64().unwrap() > 1_600_000_000);
        let c = &v["choices"][0];
        assert_eq!(c["index"], 0);
        assert!(c["logprobs"].is_null() && c["stop_reason"].is_null());
        let want = if i == 4 { serde_json::json!("length") } else { serde_json::Value::Null };
        assert_eq!(c["finish_reason"], want);
        assert!(v.get("usage").is_none());
        text.push_str(c["text"].as_str().unwrap());
    }
    let u = parse(&events[5]);
    assert_eq!(u["choices"], serde_json::json!([]));
    assert_eq!(u["usage"]["prompt_tokens"], 2);
    assert_eq!(u["usage"]["completion_tokens"], 5);
    assert_eq!(u["usage"]["total_tokens"], 7);
    assert_eq!(events[6], "[DONE]");
    // Retokenizing the text gives exactly completion_tokens.
    assert_eq!(tok().count(&text), 5);
    let truth = sim.truth();
    assert_eq!(truth.len(), 1);
    assert_eq!(truth[0].request_id.as_deref(), Some("servelab-1"));
    assert_eq!((truth[0].prompt_tokens, truth[0].completion_tokens), (2, 5));
    assert_eq!(truth[0].chunks.len(), 5);
    assert_eq!(truth[0].outcome, "ok");
    assert_eq!(truth[0].endpoint, "completions");
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streaming_chat_role_chunk_continuous_usage_and_reasoning() {
    let sim = start(fast().with_reasoning_tokens(2)).await.unwrap();
    let body = r#"{"messages":[{"role":"user","content":"hi there"}],"max_completion_tokens":6,
        "ignore_eos":true,"stream":true,
        "stream_options":{"include_usage":true,"continuous_usage_stats":true}}"#;
    let seen = post(sim.addr(), "/v1/chat/completions", body).await;
    assert_eq!(seen.status, 200);
    let events = seen.events();
    // role + 6 tokens + usage + [DONE]
    assert_eq!(events.len(), 9, "{events:?}");
    let prompt = tok().count("<|user|>\nhi there\n<|assistant|>\n") as u64;
    let role = parse(&events[0]);
    assert_eq!(role["object"], "chat.completion.chunk");
    assert!(role["id"].as_str().unwrap().starts_with("chatcmpl-"));
    assert_eq!(role["choices"][0]["delta"], serde_json::json!({"role":"assistant","content":""}));
    assert_eq!(role["usage"]["completion_tokens"], 0);
    let (mut reasoning, mut content) = (String::new(), String::new());
    for (i, e) in events[1..7].iter().enumerate() {
        let v = parse(e);
        let d = &v["choices"][0]["delta"];
        if i < 2 {
            reasoning.push_str(d["reasoning_content"].as_str().unwrap());
            assert!(d.get("content").is_none());
        } else {
            content.push_str(d["content"].as_str().unwrap());
        }
        assert_eq!(v["usage"]["completion_tokens"], i as u64 + 1);
        assert_eq!(v["usage"]["prompt_tokens"], prompt);
        assert_eq!(v["usage"]["total_tokens"], prompt + i as u64 + 1);
        let fin = &v["choices"][0]["finish_reason"];
        assert_eq!(fin.as_str(), (i == 5).then_some("length"));
    }
    assert_eq!(tok().count(&reasoning), 2);
    assert_eq!(tok().count(&format!("{reasoning}{content}")), 6);
    let u = parse(&events[7]);
    assert_eq!(u["choices"], serde_json::json!([]));
    assert_eq!(u["usage"]["completion_tokens"], 6);
    assert_eq!(events[8], "[DONE]");
    // The role chunk carries no tokens: the truth has 6 token events.
    let t = &sim.truth()[0];
    assert_eq!(t.chunks.iter().map(|c| c.tokens).sum::<u32>(), 6);
    assert_eq!(t.chunks.len(), 6);
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eos_min_tokens_and_no_usage_unless_asked() {
    // Mean 3 tokens: a max_tokens of 200 is almost never reached → "stop".
    let sim = start(fast().with_eos_mean_tokens(3.0)).await.unwrap();
    let body = r#"{"prompt":"x","max_tokens":200,"stream":true}"#;
    let seen = post(sim.addr(), "/v1/completions", body).await;
    let events = seen.events();
    assert_eq!(events.last().map(String::as_str), Some("[DONE]"));
    let last = parse(&events[events.len() - 2]);
    assert_eq!(last["choices"][0]["finish_reason"], "stop");
    assert!(events.iter().all(|e| !e.contains("\"usage\"")));
    let body = r#"{"prompt":"x","max_tokens":200,"min_tokens":40,"stream":true}"#;
    let seen = post(sim.addr(), "/v1/completions", body).await;
    assert!(seen.events().len() >= 41);
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn non_streaming_bodies() {
    let sim = start(fast().with_reasoning_tokens(1)).await.unwrap();
    let seen = post(
        sim.addr(),
        "/v1/completions",
        r#"{"prompt":[1,2,3],"max_tokens":4,"ignore_eos":true}"#,
    )
    .await;
    assert_eq!(seen.status, 200);
    let v = seen.json();
    assert_eq!(v["object"], "text_completion");
    assert_eq!(v["choices"][0]["finish_reason"], "length");
    assert_eq!(
        v["usage"],
        serde_json::json!({"prompt_tokens":3,"total_tokens":7,"completion_tokens":4})
    );
    assert_eq!(tok().count(v["choices"][0]["text"].as_str().unwrap()), 4);

    let body = r#"{"messages":[{"role":"user","content":"hi"}],"max_tokens":3,"ignore_eos":true}"#;
    let v = post(sim.addr(), "/v1/chat/completions", body).await.json();
    assert_eq!(v["object"], "chat.completion");
    let m = &v["choices"][0]["message"];
    assert_eq!(m["role"], "assistant");
    let all =
        format!("{}{}", m["reasoning_content"].as_str().unwrap(), m["content"].as_str().unwrap());
    assert_eq!(tok().count(&all), 3);
    assert_eq!(v["usage"]["completion_tokens"], 3);
    let t = sim.truth();
    assert_eq!(t.len(), 2);
    assert_eq!(t[1].chunks.len(), 1);
    assert_eq!(t[1].chunks[0].tokens, 3);
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn side_endpoints() {
    let sim = start(fast().with_model("m1").with_max_model_len(4096)).await.unwrap();
    let models = send(sim.addr(), "GET", "/v1/models", &[], "").await.unwrap();
    let v = models.json();
    assert_eq!(v["object"], "list");
    assert_eq!(v["data"][0]["id"], "m1");
    assert_eq!(v["data"][0]["object"], "model");
    assert_eq!(v["data"][0]["owned_by"], "servelab");
    assert_eq!(v["data"][0]["max_model_len"], 4096);
    let health = send(sim.addr(), "GET", "/health", &[], "").await.unwrap();
    assert_eq!((health.status, health.body().len()), (200, 0));
    post(sim.addr(), "/v1/completions", r#"{"prompt":"a b","max_tokens":2,"ignore_eos":true}"#)
        .await;
    let m = send(sim.addr(), "GET", "/metrics", &[], "").await.unwrap().text();
    assert!(m.contains("vllm:prompt_tokens_total{model_name=\"m1\",engine=\"0\"} 2.0"), "{m}");
    assert!(m.contains("vllm:generation_tokens_total{model_name=\"m1\",engine=\"0\"} 2.0"), "{m}");
    assert!(
        m.contains("vllm:time_to_first_token_seconds_count{model_name=\"m1\",engine=\"0\"} 1.0")
    );
    assert!(m.contains("vllm:num_requests_running{model_name=\"m1\",engine=\"0\"} 0.0"));
    assert!(m.contains(
        "vllm:request_success_total{model_name=\"m1\",engine=\"0\",finished_reason=\"length\"} 1.0"
    ));
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_get_vllm_errors() {
    let sim = start(fast().with_max_model_len(1000)).await.unwrap();
    let a = sim.addr();
    let cases: &[(&str, &str, u16, &str)] = &[
        ("/v1/completions", "{not json", 400, "BadRequestError"),
        ("/v1/completions", r#"{"prompt":"x","max_tokens":"ten"}"#, 400, "BadRequestError"),
        ("/v1/completions", r#"{"prompt":"x","max_tokens":100000}"#, 400, "BadRequestError"),
        ("/v1/completions", r#"{"prompt":"x","n":2}"#, 400, "BadRequestError"),
        ("/v1/completions", r#"{"prompt":5}"#, 400, "BadRequestError"),
        ("/v1/completions", r#"{"prompt":"x","model":"gpt-9"}"#, 404, "NotFoundError"),
        (
            "/v1/chat/completions",
            r#"{"messages":[{"role":"user","content":7}]}"#,
            400,
            "BadRequestError",
        ),
        ("/v1/chat/completions", r#"[]"#, 400, "BadRequestError"),
    ];
    for (path, body, status, kind) in cases {
        let seen = post(a, path, body).await;
        assert_eq!(seen.status, *status, "{body}");
        let v = seen.json();
        assert_eq!(v["error"]["type"], *kind, "{body}");
        assert_eq!(v["error"]["code"], *status, "{body}");
        assert!(v["error"]["message"].as_str().is_some_and(|m| !m.is_empty()));
        assert!(v["error"].get("param").is_some());
    }
    let seen = send(a, "GET", "/v1/completions", &[], "").await.unwrap();
    assert_eq!(seen.status, 405);
    let seen = send(a, "POST", "/nope", &[], "{}").await.unwrap();
    assert_eq!((seen.status, seen.json()["detail"].as_str()), (404, Some("Not Found")));
    // A bad fault header names the problem.
    let seen =
        post_with(a, "/v1/completions", &[("x-servelab-fault", "explode")], r#"{"prompt":"x"}"#)
            .await;
    assert_eq!(seen.status, 400);
    assert!(seen.text().contains("explode"));
    // Still serving after all that.
    let ok = post(a, "/v1/completions", r#"{"prompt":"x","max_tokens":1}"#).await;
    assert_eq!(ok.status, 200);
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn startup_window_answers_503() {
    let sim = start(fast().with_startup_secs(30.0)).await.unwrap();
    let h = send(sim.addr(), "GET", "/health", &[], "").await.unwrap();
    assert_eq!(h.status, 503);
    let r = post(sim.addr(), "/v1/completions", r#"{"prompt":"x"}"#).await;
    assert_eq!(r.status, 503);
    assert!(r.text().contains("starting up"));
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hf_tokenizer_usage_is_exact() {
    // testdata/smollm2-tokenizer.json: see testdata/README.md for its source.
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../testdata/smollm2-tokenizer.json");
    let sim = start(fast().with_tokenizer(path)).await.unwrap();
    let body = r#"{"prompt":"The quick brown fox","max_tokens":40,"ignore_eos":true,"stream":true,
        "stream_options":{"include_usage":true}}"#;
    let events = post(sim.addr(), "/v1/completions", body).await.events();
    let tok = Tokenizer::from_spec(path).unwrap();
    let text: String = events[..40]
        .iter()
        .map(|e| parse(e)["choices"][0]["text"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(tok.count(&text), 40);
    let u = parse(&events[40]);
    assert_eq!(u["usage"]["prompt_tokens"], tok.count("The quick brown fox") as u64);
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keep_alive_serves_several_requests_per_connection() {
    use http_body_util::{BodyExt, Full};
    let sim = start(fast()).await.unwrap();
    let tcp = tokio::net::TcpStream::connect(sim.addr()).await.unwrap();
    let (mut tx, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tcp)).await.unwrap();
    tokio::spawn(conn);
    for i in 0..3 {
        tokio::time::timeout(STEP, tx.ready()).await.unwrap().unwrap();
        let body = r#"{"prompt":"x","max_tokens":3,"stream":true}"#;
        let req = http::Request::post("/v1/completions")
            .header("host", "sim")
            .header("x-request-id", format!("servelab-{i}"))
            .body(Full::new(bytes::Bytes::from(body)))
            .unwrap();
        let resp = tokio::time::timeout(STEP, tx.send_request(req)).await.unwrap().unwrap();
        assert_eq!(resp.status(), 200);
        let text = tokio::time::timeout(STEP, resp.into_body().collect()).await.unwrap().unwrap();
        assert!(String::from_utf8_lossy(&text.to_bytes()).ends_with("data: [DONE]\n\n"));
    }
    let ids: Vec<_> = sim.truth().into_iter().filter_map(|t| t.request_id).collect();
    assert_eq!(ids, vec!["servelab-0", "servelab-1", "servelab-2"]);
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_inputs_never_break_the_server() {
    let sim = start(fast()).await.unwrap();
    let a = sim.addr();
    let bodies = [
        "",
        "null",
        "\u{0}\u{1}",
        r#"{"prompt":"x","max_tokens":9223372036854775807}"#,
        r#"{"prompt":"x","max_tokens":-5}"#,
        r#"{"prompt":"x","max_tokens":1.5}"#,
        r#"{"prompt":"x","min_tokens":-1}"#,
        r#"{"prompt":[4294967296]}"#,
        r#"{"prompt":[[1,2],[3]]}"#,
        r#"{"prompt":[]}"#,
        r#"{"prompt":["a","b"]}"#,
        r#"{"prompt":null,"stream":"yes"}"#,
        r#"{"prompt":"x","stream":true,"stream_options":null,"n":null,"max_tokens":null}"#,
        r#"{"messages":[]}"#,
        r#"{"messages":[{"role":"user","content":[{"type":"image_url"}]}]}"#,
        r#"{"messages":[{"role":"user"}],"max_completion_tokens":2,"stream":true}"#,
        &format!(r#"{{"prompt":"{}"}}"#, "[".repeat(10_000)),
        &"[".repeat(100_000),
    ];
    for path in ["/v1/completions", "/v1/chat/completions"] {
        for b in &bodies {
            let seen = post(a, path, b).await;
            assert!(matches!(seen.status, 200 | 400), "{path} {b:.60}: {}", seen.status);
        }
    }
    // Non-UTF-8 bytes in headers and a weird method.
    let r = send(a, "DELETE", "/v1/models", &[("x-request-id", "é")], "").await.unwrap();
    assert_eq!(r.status, 405);
    let ok = post(a, "/v1/completions", r#"{"prompt":"x","max_tokens":1}"#).await;
    assert_eq!(ok.status, 200);
    sim.shutdown().await;
}

/// Random images sent as data URLs reach the server whole: it decodes each one, the truth log
/// records the pixel size that was requested, and `usage.prompt_tokens` adds one token per
/// 28×28 patch to the text's count.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_images_arrive_as_data_urls_of_the_requested_size() {
    use rand::SeedableRng;
    use servelab_workload::{random_image_data_url, ImageFormat, ImageSize};
    let sim = start(fast()).await.unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let sizes = [(512, 512, ImageFormat::Jpeg), (100, 30, ImageFormat::Png)];
    let parts: Vec<serde_json::Value> = sizes
        .iter()
        .map(|&(width, height, format)| {
            let url = random_image_data_url(ImageSize { width, height }, format, &mut rng).unwrap();
            serde_json::json!({"type": "image_url", "image_url": {"url": url}})
        })
        .chain([serde_json::json!({"type": "text", "text": "describe"})])
        .collect();
    let body = serde_json::json!({
        "model": "servelab-sim", "max_tokens": 2, "ignore_eos": true,
        "messages": [{"role": "user", "content": parts}],
    });
    let seen = post(sim.addr(), "/v1/chat/completions", &body.to_string()).await;
    assert_eq!(seen.status, 200, "{}", seen.text());
    let text_tokens = tok().count("<|user|>\ndescribe\n<|assistant|>\n") as u64;
    // 512×512: 19×19 patches; 100×30: 4×2.
    let want = text_tokens + 361 + 8;
    assert_eq!(seen.json()["usage"]["prompt_tokens"], want);
    let truth = sim.truth();
    let got: Vec<_> = truth[0].images.iter().map(|i| (i.width, i.height, i.tokens)).collect();
    assert_eq!(got, vec![(512, 512, 361), (100, 30, 8)]);
    assert_eq!(truth[0].prompt_tokens, want);
    // A PNG of noise does not compress: at least its raw pixels.
    assert!(truth[0].images[1].bytes >= 100 * 30 * 3);
    let bad = r#"{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://x/a.png"}}]}]}"#;
    let seen = post(sim.addr(), "/v1/chat/completions", bad).await;
    assert_eq!(seen.status, 400);
    assert!(seen.text().contains("only data: URLs"), "{}", seen.text());
    sim.shutdown().await;
}
