//! Helpers shared by the client's integration tests: a run through the public API
//! (`servelab_client::run` with a `RunConfig`, as the CLI builds one) and its records.
#![allow(dead_code)]

pub mod dates;
pub mod ntp;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use servelab_client::{run, PlannedRequest, Progress, RequestSource, RunConfig, RunEnd, Target};
use servelab_load::Arrivals;
use servelab_records::{FailureKind, Outcome, RequestRecord};
use tokio::sync::{mpsc, watch};

/// A streaming completion request body.
pub const STREAM: &str = r#"{"model":"servelab-sim","prompt":"hello","max_tokens":5,"ignore_eos":true,"stream":true,"stream_options":{"include_usage":true}}"#;

/// Every test run is bounded by this, whatever the server does.
pub const RUN_BOUND: Duration = Duration::from_secs(60);

/// A run of `n` identical streaming requests, all arriving at once, one connection opened
/// beforehand, tight timeouts.
pub fn config(target: Target, n: usize) -> RunConfig {
    let planned = PlannedRequest {
        body: Bytes::from_static(STREAM.as_bytes()),
        prompt_tokens: None,
        max_tokens: Some(5),
    };
    RunConfig {
        target,
        source: RequestSource::requests(vec![planned; n]),
        warmups: Vec::new(),
        arrivals: Arrivals::Burst,
        send_at: None,
        ids: None,
        start_at: None,
        seed: 7,
        max_concurrency: None,
        duration: None,
        request_timeout: Duration::from_secs(10),
        stall_timeout: None,
        drain_timeout: Duration::from_secs(1),
        preconnect: 1,
        baseline: None,
        reasoning_parser: servelab_client::ReasoningParser::Auto,
    }
}

/// Run `cfg` to its end (bounded by [`RUN_BOUND`]); the records by index, the loop's end and
/// its live counters.
pub async fn run_all(cfg: RunConfig) -> (Vec<RequestRecord>, RunEnd, Arc<Progress>) {
    let progress = Arc::new(Progress::default());
    let (tx, mut rx) = mpsc::unbounded_channel();
    let (_stop, interrupt) = watch::channel(false);
    let end = tokio::time::timeout(RUN_BOUND, run(cfg, progress.clone(), tx, interrupt))
        .await
        .expect("the run ends within its bound")
        .expect("the run starts");
    let mut records = Vec::new();
    while let Ok(r) = rx.try_recv() {
        records.push(r);
    }
    records.sort_by_key(|r| r.index);
    (records, end, progress)
}

pub async fn target(base_url: &str) -> Target {
    Target::resolve(base_url, "/v1/completions").await.expect("target")
}

/// The failure kind and message, or `None` for a success.
pub fn failure(r: &RequestRecord) -> Option<(FailureKind, &str)> {
    match &r.outcome {
        Outcome::Success => None,
        Outcome::Failure { kind, message } => Some((*kind, message.as_str())),
    }
}

/// A raw HTTP/1.1 server on 127.0.0.1:0 that answers whatever a test scripts: each
/// connection's first request is read (headers and a `Content-Length` body), then
/// `respond(stream, request_head)` writes the answer byte for byte and returns (closing the
/// connection, unless it kept the stream somewhere).
pub async fn hostile<F, Fut>(respond: F) -> std::net::SocketAddr
where
    F: Fn(tokio::net::TcpStream, String) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let respond = Arc::new(respond);
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            let respond = respond.clone();
            tokio::spawn(async move {
                let _ = s.set_nodelay(true);
                if let Some(head) = read_request(&mut s).await {
                    respond(s, head).await;
                }
            });
        }
    });
    addr
}

/// Read one request: its head as text (the body is read and dropped). `None` if the client
/// closed first.
pub async fn read_request(s: &mut tokio::net::TcpStream) -> Option<String> {
    use tokio::io::AsyncReadExt;
    let mut buf = Vec::new();
    let mut byte = [0u8; 4096];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = s.read(&mut byte).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&byte[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let len: usize = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-length").then(|| v.trim().parse().ok())?
        })
        .unwrap_or(0);
    let mut have = buf.len() - head_end;
    while have < len {
        let n = s.read(&mut byte).await.ok()?;
        if n == 0 {
            return None;
        }
        have += n;
    }
    Some(head)
}

/// Write `parts` in order, stopping quietly when the client has gone.
pub async fn write_all(s: &mut tokio::net::TcpStream, parts: &[&[u8]]) -> bool {
    use tokio::io::AsyncWriteExt;
    for p in parts {
        if s.write_all(p).await.is_err() {
            return false;
        }
    }
    true
}

/// The head of a 200 SSE response with a chunked body.
pub const SSE_HEAD: &[u8] =
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";

/// One HTTP chunk holding `data`.
pub fn chunk(data: &[u8]) -> Vec<u8> {
    let mut c = format!("{:x}\r\n", data.len()).into_bytes();
    c.extend_from_slice(data);
    c.extend_from_slice(b"\r\n");
    c
}

/// The last chunk of a chunked body.
pub const LAST_CHUNK: &[u8] = b"0\r\n\r\n";

/// A valid completion event carrying `text`.
pub fn text_event(text: &str) -> String {
    format!(
        "data: {{\"choices\":[{{\"index\":0,\"text\":\"{text}\",\"finish_reason\":null}}]}}\n\n"
    )
}

/// A run of `n` requests against `addr` with the given request timeout, one at a time.
pub async fn run_against(
    addr: std::net::SocketAddr,
    n: usize,
    request_timeout: Duration,
) -> Vec<RequestRecord> {
    let cfg = RunConfig {
        max_concurrency: Some(1),
        request_timeout,
        ..config(target(&format!("http://{addr}")).await, n)
    };
    run_all(cfg).await.0
}
