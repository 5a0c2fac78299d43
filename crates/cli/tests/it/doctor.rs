//! `servelab doctor` against the in-process simulator (127.0.0.1 only): the plain simulator
//! is reported clean, and each of its quirks (what real servers do differently) is reported
//! as what it is, with the flags that follow.

use std::time::Duration;

use servelab::doctor::{render_json, render_text};
use servelab::ExitStatus;
use servelab_client::doctor::{
    advise, diagnose, Answer, Check, Diagnosis, FieldCheck, Length, Options, Status, StreamOptions,
    UsageSeen, Verdict,
};
use servelab_client::openai::MaxTokensField;
use servelab_client::{Api, Target};
use servelab_records::UsageAt;
use servelab_sim::{Quirk, SimConfig, SimHandle};

/// Fast timing, and no natural end of sequence within a probe, so every answer is the
/// length it was asked for (or the server's default) and the report is deterministic.
async fn sim(quirks: &[Quirk]) -> SimHandle {
    let cfg = SimConfig::fixed(5.0, 2.0)
        .with_eos_mean_tokens(1e6)
        .with_quirks(quirks.iter().copied())
        .with_port(0);
    servelab_sim::start(cfg).await.expect("sim starts")
}

async fn doctor(sim: &SimHandle, api: Api, model: Option<&str>) -> Diagnosis {
    let target = Target::resolve(&sim.base_url(), api.default_endpoint()).await.expect("target");
    let mut opts = Options::new(api);
    opts.model = model.map(str::to_string);
    opts.request_timeout = Duration::from_secs(10);
    // Every probe is bounded; so is the whole.
    tokio::time::timeout(Duration::from_secs(60), diagnose(&target, &opts))
        .await
        .expect("doctor ends within its bound")
}

fn row(d: &Diagnosis, name: &str) -> Check {
    d.checks().into_iter().find(|c| c.check == name).unwrap_or_else(|| panic!("no row {name}"))
}

fn result(d: &Diagnosis, name: &str) -> String {
    row(d, name).result
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_plain_simulator_is_clean() {
    let s = sim(&[]).await;
    let d = doctor(&s, Api::Completions, None).await;
    let a = advise(&d);
    assert_eq!(d.verdict(), Verdict::Ok);
    assert!(a.flags().is_empty() && a.drop().is_empty(), "{a:?}");
    assert!(a.notes.is_empty(), "{:?}", a.notes);
    // vLLM's continuous_usage_stats works: worth trying, not needed.
    assert_eq!(a.optional(), ["--continuous-usage on"]);
    for c in d.checks() {
        assert_eq!(c.status, Status::Ok, "{c:#?}");
    }
    assert_eq!(result(&d, "model"), "servelab-sim");
    assert_eq!(result(&d, "[DONE]"), "sent");
    assert_eq!(result(&d, "usage"), "separate chunk");
    assert_eq!(result(&d, "stream_options"), "honoured");
    assert_eq!(result(&d, "max-tokens field (chat)"), "max_completion_tokens");
    assert_eq!(result(&d, "max-tokens field (completions)"), "max_tokens");
    assert_eq!(result(&d, "ignore_eos"), "accepted");
    assert_eq!(result(&d, "min_tokens"), "accepted");
    assert_eq!(result(&d, "/metrics"), "vllm");
    assert_eq!(result(&d, "Date header"), "present");
    assert_eq!(result(&d, "keep-alive"), "yes");
    // The simulator counts with servelab's default tokenizer: the counts agree exactly.
    let p = d.prompt.as_ref().expect("prompt check");
    assert_eq!(p.completions_diff(), Some(0), "{p:?}");
    assert!(p.chat_overhead().is_some_and(|n| n > 0), "{p:?}");
    let u = d.usage.as_ref().expect("usage check");
    assert_eq!(u.continuous_honoured(), Some(true));
    // Both APIs stream, and chat honours both length fields.
    for api in [Api::Completions, Api::Chat] {
        let c = d.api(api).expect("probed");
        assert!(c.stream.ok(), "{api:?}");
        assert!(!c.stream.probe.notes.no_done);
    }
    let chat = d.api(Api::Chat).unwrap().max_tokens.as_ref().unwrap();
    assert_eq!(chat.max_tokens, Length::Honoured { tokens: 8 });
    assert_eq!(chat.max_completion_tokens, Length::Honoured { tokens: 8 });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_done_is_reported_and_accepted() {
    let s = sim(&[Quirk::NoDone]).await;
    let d = doctor(&s, Api::Completions, None).await;
    assert_eq!(d.verdict(), Verdict::Ok);
    assert_eq!(result(&d, "[DONE]"), "missing");
    assert_eq!(row(&d, "[DONE]").status, Status::Warn);
    assert!(d.api(Api::Chat).unwrap().stream.probe.notes.no_done);
    let a = advise(&d);
    assert!(a.flags().is_empty(), "{a:?}");
    assert!(a.notes.iter().any(|n| n.contains("[DONE]")), "{:?}", a.notes);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_ignore_eos_drops_the_flag() {
    let s = sim(&[Quirk::RejectIgnoreEos]).await;
    let d = doctor(&s, Api::Completions, None).await;
    let c = d.api(Api::Completions).unwrap();
    assert!(
        matches!(&c.ignore_eos, FieldCheck::Refused { status: 422, message }
        if message.contains("ignore_eos")),
        "{:?}",
        c.ignore_eos
    );
    assert!(matches!(c.min_tokens, FieldCheck::Accepted { .. }), "{:?}", c.min_tokens);
    assert_eq!(result(&d, "ignore_eos"), "refused (422)");
    let a = advise(&d);
    assert_eq!(a.drop(), ["--ignore-eos"]);
    assert!(a.notes.iter().any(|n| n.contains("may end early")), "{:?}", a.notes);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_min_tokens_drops_ignore_eos_too() {
    let s = sim(&[Quirk::RejectMinTokens]).await;
    let d = doctor(&s, Api::Chat, None).await;
    let c = d.api(Api::Chat).unwrap();
    assert!(matches!(c.ignore_eos, FieldCheck::Accepted { honoured: Some(true), .. }));
    assert!(matches!(c.min_tokens, FieldCheck::Refused { status: 422, .. }), "{:?}", c.min_tokens);
    assert_eq!(advise(&d).drop(), ["--ignore-eos"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_fields_refused_leave_streaming_working() {
    let s = sim(&[Quirk::RejectUnknownFields]).await;
    let d = doctor(&s, Api::Completions, None).await;
    assert_eq!(d.verdict(), Verdict::Ok);
    let c = d.api(Api::Completions).unwrap();
    assert!(c.stream.ok() && c.stream.refused_first.is_none());
    assert!(c.ignore_eos.refused() && c.min_tokens.refused());
    // On completions, max_completion_tokens is not OpenAI's: refused, and not needed.
    let m = c.max_tokens.as_ref().unwrap();
    assert!(matches!(m.max_completion_tokens, Length::Refused { status: 422, .. }));
    assert_eq!(m.field(), Some(MaxTokensField::Auto));
    let a = advise(&d);
    assert_eq!(a.drop(), ["--ignore-eos"]);
    assert!(a.flags().is_empty(), "{a:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ignored_max_completion_tokens_asks_for_max_tokens() {
    let s = sim(&[Quirk::IgnoreMaxCompletionTokens]).await;
    let d = doctor(&s, Api::Chat, None).await;
    let m = d.api(Api::Chat).unwrap().max_tokens.clone().unwrap();
    assert!(matches!(m.max_completion_tokens, Length::Ignored { .. }), "{m:?}");
    assert_eq!(m.max_tokens, Length::Honoured { tokens: 8 });
    assert_eq!(result(&d, "max-tokens field (chat)"), "max_tokens");
    assert_eq!(advise(&d).flags(), ["--max-tokens-field max_tokens"]);
    // Streaming itself sent both fields, so it stopped at 8 all the same.
    let chat = &d.api(Api::Chat).unwrap().stream;
    assert_eq!(chat.body.max_tokens_field, MaxTokensField::Both);
    assert_eq!(chat.probe.chunks, 8);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ignored_stream_options_put_usage_on_the_finish_chunk_either_way() {
    let s = sim(&[Quirk::IgnoreStreamOptions]).await;
    let d = doctor(&s, Api::Completions, None).await;
    let u = d.usage.as_ref().unwrap();
    assert_eq!(u.asked, UsageSeen::Present { at: Some(UsageAt::FinishChunk) });
    assert_eq!(u.unasked, UsageSeen::Present { at: Some(UsageAt::FinishChunk) });
    assert_eq!(u.stream_options(), StreamOptions::UsageAlways);
    assert_eq!(u.continuous_honoured(), Some(false));
    assert_eq!(result(&d, "stream_options"), "ignored");
    assert!(advise(&d).optional().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn usage_on_the_finish_chunk_is_placed() {
    let s = sim(&[Quirk::UsageOnFinishChunk]).await;
    let d = doctor(&s, Api::Chat, None).await;
    let u = d.usage.as_ref().unwrap();
    assert_eq!(u.asked, UsageSeen::Present { at: Some(UsageAt::FinishChunk) });
    assert_eq!(u.unasked, UsageSeen::Absent);
    assert_eq!(u.stream_options(), StreamOptions::Honoured);
    assert_eq!(result(&d, "usage"), "finish chunk");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_usage_is_said_and_prompt_counts_are_unknown() {
    let s = sim(&[Quirk::NoUsage]).await;
    let d = doctor(&s, Api::Completions, None).await;
    let u = d.usage.as_ref().unwrap();
    assert_eq!((u.asked.clone(), u.unasked.clone()), (UsageSeen::Absent, UsageSeen::Absent));
    assert_eq!(u.stream_options(), StreamOptions::UsageNever);
    assert_eq!(result(&d, "usage"), "none");
    assert_eq!(d.prompt.as_ref().unwrap().completions, None);
    // Without usage the length verdicts come from the chunks.
    let m = d.api(Api::Completions).unwrap().max_tokens.clone().unwrap();
    assert_eq!(m.max_tokens, Length::Honoured { tokens: 8 });
    let a = advise(&d);
    assert!(a.notes.iter().any(|n| n.contains("no usage")), "{:?}", a.notes);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_model_list_needs_model_and_says_so() {
    let s = sim(&[Quirk::ModelsError]).await;
    let d = doctor(&s, Api::Completions, None).await;
    assert_eq!(d.preflight.reach.models, Answer::Status(500));
    assert_eq!(d.verdict(), Verdict::Unreachable);
    assert_eq!(result(&d, "model"), "unknown");
    let a = advise(&d);
    assert!(a.line().starts_with("Use these flags: cannot tell yet"), "{}", a.line());
    assert!(a.notes[0].contains("pass --model"), "{:?}", a.notes);

    let d = doctor(&s, Api::Completions, Some("servelab-sim")).await;
    assert_eq!(d.verdict(), Verdict::Ok);
    assert_eq!(advise(&d).flags(), ["--model servelab-sim"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_metrics_turns_scraping_off() {
    let s = sim(&[Quirk::NoMetrics]).await;
    let d = doctor(&s, Api::Completions, None).await;
    assert_eq!(d.metrics.answer, Answer::Status(404));
    assert_eq!(result(&d, "/metrics"), "HTTP 404");
    assert_eq!(advise(&d).flags(), ["--server-metrics-interval 0"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_keep_alive_is_seen() {
    let s = sim(&[Quirk::NoKeepAlive]).await;
    let d = doctor(&s, Api::Completions, None).await;
    let k = d.keep_alive.as_ref().unwrap();
    assert_eq!((k.reused, k.connection_close), (Some(false), true), "{k:?}");
    assert_eq!(result(&d, "keep-alive"), "no");
    assert_eq!(d.verdict(), Verdict::Ok);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transformers_serve_is_diagnosed_with_its_flags() {
    let s = sim(&[Quirk::Transformers]).await;
    let d = doctor(&s, Api::Chat, Some("servelab-sim")).await;
    assert_eq!(d.verdict(), Verdict::Ok);
    let a = advise(&d);
    assert_eq!(
        a.flags(),
        ["--model servelab-sim", "--max-tokens-field max_tokens", "--server-metrics-interval 0"]
    );
    assert_eq!(a.drop(), ["--ignore-eos"]);
    let text = render_text(&d, &a).replace(&s.base_url(), "http://127.0.0.1:PORT");
    insta::assert_snapshot!("doctor_transformers", text);
    // The JSON has one object per check, each with its typed value.
    let v: serde_json::Value = serde_json::from_str(&render_json(&d, &a)).expect("JSON");
    let checks = v["checks"].as_array().unwrap();
    assert_eq!(checks.len(), d.checks().len());
    let done = checks.iter().find(|c| c["check"] == "[DONE]").unwrap();
    assert_eq!(
        (done["status"].as_str(), &done["value"]),
        (Some("warn"), &serde_json::json!(false))
    );
    let field = checks.iter().find(|c| c["check"] == "max-tokens field (chat)").unwrap();
    assert_eq!(field["value"]["max_completion_tokens"]["verdict"], "ignored");
    assert_eq!(v["advice"]["drop"], serde_json::json!(["--ignore-eos"]));
    assert_eq!(v["verdict"], "ok");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_preflight_is_the_cheap_part() {
    let s = sim(&[Quirk::Transformers]).await;
    let target = Target::resolve(&s.base_url(), "/v1/chat/completions").await.unwrap();
    let p = servelab_client::doctor::preflight(
        &target,
        Api::Chat,
        Some("servelab-sim"),
        Duration::from_secs(10),
    )
    .await;
    assert!(p.streams());
    let c = p.checks.as_ref().unwrap();
    assert!(c.stream.probe.notes.no_done);
    let a = p.advice();
    assert_eq!(a.flags(), ["--model servelab-sim", "--max-tokens-field max_tokens"]);
    assert_eq!(a.drop(), ["--ignore-eos"]);
}

/// A run's preflight reaches servelab's exact simulator (its `/health` says so) and sends it
/// no probes; a simulator with a quirk, or `doctor`'s own preflight, is probed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_does_not_probe_the_exact_simulator() {
    use servelab_client::doctor::run_preflight;
    let within = Duration::from_secs(10);
    let exact = sim(&[]).await;
    let target = Target::resolve(&exact.base_url(), "/v1/chat/completions").await.unwrap();
    let p = run_preflight(&target, Api::Chat, Some("servelab-sim"), within).await;
    assert!(p.reach.exact_sim && p.checks.is_none(), "{p:?}");
    assert!(exact.truth().is_empty(), "no request was generated");
    let p = servelab_client::doctor::preflight(&target, Api::Chat, Some("servelab-sim"), within);
    assert!(p.await.checks.is_some(), "doctor probes every server");
    let quirky = sim(&[Quirk::Transformers]).await;
    let target = Target::resolve(&quirky.base_url(), "/v1/chat/completions").await.unwrap();
    let p = run_preflight(&target, Api::Chat, Some("servelab-sim"), within).await;
    assert!(!p.reach.exact_sim && p.checks.is_some(), "{p:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_listening_is_unreachable_at_once() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let target = Target::resolve(&format!("http://127.0.0.1:{port}"), "/").await.unwrap();
    let started = std::time::Instant::now();
    let d = diagnose(&target, &Options::new(Api::Completions)).await;
    assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
    assert_eq!(d.verdict(), Verdict::Unreachable);
    assert_eq!(result(&d, "reachable"), "no");
    assert!(advise(&d).flags().is_empty());
}

/// The command's exit codes: 0 clean, 2 without a model or a server (run outside any
/// runtime: the command starts its own).
#[test]
fn exit_codes() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let plain = rt.block_on(sim(&[]));
    let broken = rt.block_on(sim(&[Quirk::ModelsError]));
    let run = |args: &[&str]| {
        let mut all = vec!["servelab", "doctor"];
        all.extend_from_slice(args);
        servelab::main_with(all.into_iter().map(std::ffi::OsString::from))
    };
    assert_eq!(run(&["--base-url", &plain.base_url(), "--json"]), ExitStatus::Success);
    assert_eq!(run(&["--base-url", &broken.base_url()]), ExitStatus::Error);
    assert_eq!(
        run(&[
            "--base-url",
            &broken.base_url(),
            "--model",
            "servelab-sim",
            "--backend",
            "openai-chat"
        ]),
        ExitStatus::Success
    );
    assert_eq!(run(&["--base-url", "http://127.0.0.1:1"]), ExitStatus::Error);
    assert_eq!(
        run(&["--base-url", &plain.base_url(), "--request-timeout", "0"]),
        ExitStatus::Error
    );
}
