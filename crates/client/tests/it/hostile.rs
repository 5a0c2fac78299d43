//! A hostile server: garbage, oversize, silence and protocol oddities, answered to the
//! measuring loop through the public API. Each case checks the record's outcome and kind, and
//! that nothing hangs past the configured timeouts (every run is bounded) or grows without
//! bound.

use crate::common;

use std::time::{Duration, Instant};

use common::*;
use servelab_client::runner::MAX_ERROR_BODY;
use servelab_client::sse::MAX_EVENT_BYTES;
use servelab_records::FailureKind;

const TIMEOUT: Duration = Duration::from_secs(5);

/// One request against a server scripted by `respond`; its record.
async fn one<F, Fut>(respond: F) -> servelab_records::RequestRecord
where
    F: Fn(tokio::net::TcpStream, String) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let addr = hostile(respond).await;
    let mut records = run_against(addr, 1, TIMEOUT).await;
    assert_eq!(records.len(), 1);
    records.remove(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_huge_line_without_a_newline_fails_at_the_event_limit() {
    // 40 MB of one line, well past the 16 MiB limit.
    let start = Instant::now();
    let r = one(|mut s, _| async move {
        let _ = write_all(&mut s, &[SSE_HEAD, &chunk(b"data: {\"choices\":[{\"text\":\"")]).await;
        let piece = chunk(&vec![b'a'; 1 << 20]);
        for _ in 0..40 {
            if !write_all(&mut s, &[&piece]).await {
                return;
            }
        }
    })
    .await;
    let (kind, message) = failure(&r).expect("fails");
    assert_eq!(kind, FailureKind::Malformed, "{message}");
    assert!(message.contains("16 MiB limit"), "{message}");
    assert_eq!(MAX_EVENT_BYTES, 16 << 20);
    assert!(start.elapsed() < TIMEOUT, "failed only after {:?}", start.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_error_body_is_read_only_up_to_its_limit() {
    let start = Instant::now();
    let r = one(|mut s, _| async move {
        let head = b"HTTP/1.1 500 Internal Server Error\r\ncontent-type: text/plain\r\n\
                     content-length: 41943040\r\n\r\n";
        let _ = write_all(&mut s, &[head]).await;
        let piece = vec![b'e'; 1 << 20];
        for _ in 0..40 {
            if !write_all(&mut s, &[&piece]).await {
                return;
            }
        }
    })
    .await;
    let (kind, message) = failure(&r).expect("fails");
    assert_eq!(kind, FailureKind::HttpStatus);
    assert!(message.starts_with("HTTP 500: eeee"), "{message}");
    assert!(message.ends_with("(error body longer than 64 KiB: not read further)"), "{message}");
    assert!(message.len() < 400, "{}", message.len());
    assert_eq!(MAX_ERROR_BODY, 64 << 10);
    assert!(start.elapsed() < TIMEOUT, "{:?}", start.elapsed());
}

/// ESC, OSC and BEL in a server's error text reach the record escaped, never raw.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terminal_control_bytes_in_error_text_are_escaped() {
    let r = one(|mut s, _| async move {
        let body = "\u{1b}]0;pwned\u{7}\u{1b}[2J\u{1b}[31mboom\r\n";
        let head =
            format!("HTTP/1.1 500 Internal Server Error\r\ncontent-length: {}\r\n\r\n", body.len());
        write_all(&mut s, &[head.as_bytes(), body.as_bytes()]).await;
    })
    .await;
    let (kind, message) = failure(&r).expect("fails");
    assert_eq!(kind, FailureKind::HttpStatus);
    assert_eq!(message, "HTTP 500: \\u{1b}]0;pwned\\u{7}\\u{1b}[2J\\u{1b}[31mboom");

    let r = one(|mut s, _| async move {
        let ev = "data: {\"error\":{\"message\":\"bad \\u001b[5mthing\\u0007\"}}\n\n";
        write_all(&mut s, &[SSE_HEAD, &chunk(ev.as_bytes()), LAST_CHUNK]).await;
    })
    .await;
    let (kind, message) = failure(&r).expect("fails");
    assert_eq!(kind, FailureKind::StreamError);
    assert_eq!(message, "bad \\u{1b}[5mthing\\u{7}");
}

/// An answer with `status`, `content_type` and `body`, whole.
async fn plain(
    status: &'static str,
    content_type: &'static str,
    body: &'static str,
) -> servelab_records::RequestRecord {
    one(move |mut s, _| async move {
        let head = format!(
            "HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\n\r\n",
            body.len()
        );
        write_all(&mut s, &[head.as_bytes(), body.as_bytes()]).await;
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn html_with_200_names_its_content_type() {
    let r = plain(
        "200 OK",
        "text/html; charset=utf-8",
        "<!DOCTYPE html>\n<html>\n\n<body>\n  Welcome to nginx!\n</body>\n</html>\n",
    )
    .await;
    assert_eq!(
        failure(&r),
        Some((
            FailureKind::Malformed,
            "HTTP 200 with content-type 'text/html; charset=utf-8' instead of text/event-stream: \
             <!DOCTYPE html> <html> <body> Welcome to nginx! </body> </html>"
        ))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_json_completion_says_the_server_ignored_stream_true() {
    let r = plain(
        "200 OK",
        "application/json",
        r#"{"id":"cmpl-1","object":"text_completion","choices":[{"index":0,"text":"hi","finish_reason":"length"}],"usage":{"prompt_tokens":1,"completion_tokens":1}}"#,
    )
    .await;
    let (kind, message) = failure(&r).expect("fails");
    assert_eq!(kind, FailureKind::Malformed);
    assert!(
        message.starts_with(
            "the server ignored \"stream\": true and answered with one JSON completion \
             (content-type 'application/json') instead of an event stream: {\"id\":\"cmpl-1\""
        ),
        "{message}"
    );
}

/// A mislabelled but valid event stream is still measured.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_stream_labelled_otherwise_still_counts() {
    let body: &'static str =
        Box::leak(format!("{}data: [DONE]\n\n", text_event("hi")).into_boxed_str());
    let r = plain("200 OK", "text/plain", body).await;
    assert!(r.is_success(), "{r:?}");
    assert_eq!(r.output_text(), "hi");
}

/// A stream scripted as a list of raw writes after [`SSE_HEAD`], each its own HTTP chunk.
async fn stream_of(events: Vec<Vec<u8>>, end: bool) -> servelab_records::RequestRecord {
    let events = std::sync::Arc::new(events);
    one(move |mut s, _| {
        let events = events.clone();
        async move {
            if !write_all(&mut s, &[SSE_HEAD]).await {
                return;
            }
            for e in events.iter() {
                if !write_all(&mut s, &[&chunk(e)]).await {
                    return;
                }
            }
            if end {
                write_all(&mut s, &[LAST_CHUNK]).await;
            }
        }
    })
    .await
}

fn done() -> Vec<u8> {
    b"data: [DONE]\n\n".to_vec()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn absurd_or_negative_usage_is_malformed_not_measured() {
    for usage in [
        r#"{"prompt_tokens":5,"completion_tokens":-3}"#,
        r#"{"prompt_tokens":5,"completion_tokens":1e30}"#,
        r#"{"prompt_tokens":18446744073709551615,"completion_tokens":2}"#,
        r#"{"prompt_tokens":5,"completion_tokens":"many"}"#,
    ] {
        let ev = format!("data: {{\"choices\":[],\"usage\":{usage}}}\n\n");
        let r = stream_of(vec![text_event("a").into(), ev.into_bytes(), done()], true).await;
        let (kind, message) = failure(&r).unwrap_or_else(|| panic!("{usage}: {r:?}"));
        assert_eq!(kind, FailureKind::Malformed, "{usage}: {message}");
        assert_eq!(r.usage, None, "{usage}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redirect_is_not_followed_and_says_where_it_pointed() {
    let r = one(|mut s, _| async move {
        write_all(
            &mut s,
            &[b"HTTP/1.1 307 Temporary Redirect\r\nlocation: http://elsewhere:8000/v1/completions\r\ncontent-length: 0\r\n\r\n"],
        )
        .await;
    })
    .await;
    assert_eq!(
        failure(&r),
        Some((
            FailureKind::HttpStatus,
            "HTTP 307 redirect to http://elsewhere:8000/v1/completions: servelab does not follow \
             redirects; point --base-url at the address that answers"
        ))
    );
    assert_eq!(r.status, Some(307));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_json_event_is_malformed() {
    let r = stream_of(
        vec![text_event("a").into(), b"data: {\"choices\":[{\"text\":\n\n".to_vec(), done()],
        true,
    )
    .await;
    let (kind, message) = failure(&r).expect("fails");
    assert_eq!(kind, FailureKind::Malformed);
    assert!(message.contains("{\"choices\":[{\"text\":"), "{message}");
    // What came before the bad event is kept.
    assert_eq!(r.output_text(), "a");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_utf8_in_an_event_is_malformed() {
    let r = stream_of(
        vec![b"data: {\"choices\":[{\"text\":\"\xff\xfe\"}]}\n\n".to_vec(), done()],
        true,
    )
    .await;
    assert_eq!(failure(&r), Some((FailureKind::Malformed, "event data is not valid UTF-8")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_without_done_is_incomplete() {
    let r = stream_of(vec![text_event("a").into(), text_event("b").into()], true).await;
    assert_eq!(
        failure(&r),
        Some((
            FailureKind::Incomplete,
            "stream ended without data: [DONE] and without a finish_reason, after 2 output chunks"
        ))
    );
    assert_eq!(r.output_text(), "ab");
    let r = stream_of(vec![text_event("a").into(), b"data: {\"choi".to_vec()], true).await;
    assert_eq!(failure(&r), Some((FailureKind::Incomplete, "stream ended inside an event")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_truncated_chunked_body_is_a_reset() {
    let r = one(|mut s, _| async move {
        let ev = text_event("a");
        // The chunk promises 0x100 bytes; the connection closes after a few.
        write_all(&mut s, &[SSE_HEAD, &chunk(ev.as_bytes()), b"100\r\ndata: {\"ch"]).await;
    })
    .await;
    let (kind, message) = failure(&r).expect("fails");
    assert_eq!(kind, FailureKind::Reset, "{message}");
    assert!(message.starts_with("reading stream: "), "{message}");
    assert_eq!(r.output_text(), "a");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn byte_by_byte_events_and_crlf_endings_are_measured_whole() {
    let mut stream = String::new();
    for t in ["H\u{e9}", "llo", " \u{1F600}"] {
        stream.push_str(&text_event(t));
    }
    stream.push_str("data: [DONE]\n\n");
    // Every byte in its own HTTP chunk, written and flushed one at a time.
    let bytes: Vec<Vec<u8>> = stream.as_bytes().iter().map(|b| vec![*b]).collect();
    let r = stream_of(bytes, true).await;
    assert!(r.is_success(), "{r:?}");
    assert_eq!(r.output_text(), "H\u{e9}llo \u{1F600}");
    assert_eq!(r.chunks.len(), 3);

    let crlf = stream.replace("\n\n", "\r\n\r\n");
    let r = stream_of(vec![crlf.into_bytes()], true).await;
    assert!(r.is_success(), "{r:?}");
    assert_eq!(r.output_text(), "H\u{e9}llo \u{1F600}");
}

/// On the paused clock: the server's 30 s of silence and the client's limit are virtual.
#[tokio::test(start_paused = true)]
async fn headers_then_silence_times_out_at_the_request_timeout() {
    let addr = hostile(|mut s, _| async move {
        write_all(&mut s, &[SSE_HEAD]).await;
        tokio::time::sleep(Duration::from_secs(30)).await;
    })
    .await;
    let start = tokio::time::Instant::now();
    let records = run_against(addr, 1, Duration::from_millis(800)).await;
    let took = start.elapsed();
    assert!(took < Duration::from_secs(3), "{took:?}");
    let (kind, message) = failure(&records[0]).expect("fails");
    assert_eq!(kind, FailureKind::Timeout);
    assert!(message.starts_with("no complete response within"), "{message}");
    assert_eq!(records[0].status, Some(200));
}

/// On the paused clock: the server's 30 s of silence and the client's limit are virtual.
#[tokio::test(start_paused = true)]
async fn a_stall_after_output_ends_at_the_stall_limit() {
    let addr = hostile(|mut s, _| async move {
        write_all(&mut s, &[SSE_HEAD, &chunk(text_event("a").as_bytes())]).await;
        tokio::time::sleep(Duration::from_secs(30)).await;
    })
    .await;
    let cfg = servelab_client::RunConfig {
        stall_timeout: Some(Duration::from_millis(300)),
        ..config(target(&format!("http://{addr}")).await, 1)
    };
    let start = tokio::time::Instant::now();
    let (records, _, _) = run_all(cfg).await;
    assert!(start.elapsed() < Duration::from_secs(3), "{:?}", start.elapsed());
    let (kind, message) = failure(&records[0]).expect("fails");
    assert_eq!(kind, FailureKind::Timeout);
    assert!(message.starts_with("stream stalled: no data for 0.3 s after 1 chunks"), "{message}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn informational_responses_before_the_real_one_are_skipped() {
    let r = one(|mut s, _| async move {
        let body = format!("{}data: [DONE]\n\n", text_event("ok"));
        write_all(
            &mut s,
            &[
                b"HTTP/1.1 100 Continue\r\n\r\n",
                b"HTTP/1.1 103 Early Hints\r\nlink: </x>; rel=preload\r\n\r\n",
                SSE_HEAD,
                &chunk(body.as_bytes()),
                LAST_CHUNK,
            ],
        )
        .await;
    })
    .await;
    assert!(r.is_success(), "{r:?}");
    assert_eq!((r.status, r.output_text().as_str()), (Some(200), "ok"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_garbage_status_line_is_malformed() {
    let r = one(|mut s, _| async move {
        write_all(&mut s, &[b"SSH-2.0-OpenSSH_9.6\r\n\r\n"]).await;
    })
    .await;
    let (kind, message) = failure(&r).expect("fails");
    assert_eq!(kind, FailureKind::Malformed, "{message}");
}

/// A server that reads each request and closes without a byte: the first send (on the
/// pre-opened, so reused, connection) is retried once and counted; the retry's close on a
/// fresh connection fails the request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_closes_unanswered_fails_after_one_counted_retry() {
    let seen = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = seen.clone();
    let addr = hostile(move |_s, _| {
        count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        async {}
    })
    .await;
    let records = run_against(addr, 3, TIMEOUT).await;
    for r in &records {
        assert_eq!(failure(r).map(|f| f.0), Some(FailureKind::Reset), "{r:?}");
    }
    let sends: usize = records.iter().map(|r| 1 + r.retries as usize).sum();
    assert_eq!(seen.load(std::sync::atomic::Ordering::SeqCst), sends);
    assert_eq!(records[0].retries, 1);
}

/// Millions of tiny events (3 M cost 1.5 GB before the bound): the request fails as
/// `too_large` at the chunk bound, and the server's endless stream is read no further.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endless_tiny_events_fail_as_too_large_at_the_chunk_bound() {
    let start = Instant::now();
    let r = one(|mut s, _| async move {
        let _ = write_all(&mut s, &[SSE_HEAD]).await;
        let ev = b"data: {\"choices\":[{\"index\":0,\"text\":\"a\"}]}\n\n".repeat(4096);
        let piece = chunk(&ev);
        // 3 M events, far past the bound, unless the client stops reading.
        for _ in 0..750 {
            if !write_all(&mut s, &[&piece]).await {
                return;
            }
        }
    })
    .await;
    let (kind, message) = failure(&r).expect("fails");
    assert_eq!(kind, FailureKind::TooLarge, "{message}");
    assert_eq!(r.chunks.len(), servelab_client::stream::MAX_CHUNKS);
    assert!(start.elapsed() < TIMEOUT, "failed only after {:?}", start.elapsed());
}
