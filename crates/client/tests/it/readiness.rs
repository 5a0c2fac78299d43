//! Readiness probes and model discovery end by their deadlines, whatever the server does, and
//! stop at once when interrupted. The deadlines are logic, not measured time: these tests run
//! on tokio's paused clock (virtual time that jumps to the next timer when all is idle), so
//! they take no wall time and no machine load can move them.

use crate::common;

use std::net::SocketAddr;
use std::time::Duration;

use common::target;
use servelab_client::http::{
    first_model, first_model_within, get, unless_interrupted, wait_ready, MAX_GET_BODY,
    MODEL_DISCOVERY_TIMEOUT,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::time::Instant;

/// A server that accepts connections, reads what comes, and answers with `reply` (nothing at
/// all when empty), then holds the connection open in silence.
async fn server(reply: &'static [u8]) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let _ = s.read(&mut buf).await;
                let _ = s.write_all(reply).await;
                // Hold the connection; read until the client goes away.
                while matches!(s.read(&mut buf).await, Ok(n) if n > 0) {}
            });
        }
    });
    addr
}

#[tokio::test(start_paused = true)]
async fn readiness_wait_ends_at_its_deadline_against_a_silent_server() {
    let t = target(&format!("http://{}", server(b"").await)).await;
    let start = Instant::now();
    let err = wait_ready(&t, Duration::from_millis(1500)).await.unwrap_err();
    let took = start.elapsed();
    assert!(took >= Duration::from_millis(1400) && took < Duration::from_millis(2500), "{took:?}");
    assert!(err.contains("no answer within"), "{err}");
}

#[tokio::test(start_paused = true)]
async fn readiness_wait_ends_when_headers_come_and_the_body_never_does() {
    let t = target(&format!(
        "http://{}",
        server(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n").await
    ))
    .await;
    let start = Instant::now();
    let err = wait_ready(&t, Duration::from_secs(1)).await.unwrap_err();
    assert!(start.elapsed() < Duration::from_secs(2), "{:?}", start.elapsed());
    assert!(err.contains("no answer within"), "{err}");
}

#[tokio::test(start_paused = true)]
async fn model_discovery_is_bounded() {
    let t = target(&format!("http://{}", server(b"").await)).await;
    let start = Instant::now();
    let err = first_model_within(&t, Duration::from_millis(800)).await.unwrap_err();
    assert!(start.elapsed() < Duration::from_millis(1800), "{:?}", start.elapsed());
    assert_eq!(err, "GET /v1/models: no answer within 0.8 s");
}

/// Without a bound from the caller, discovery gives up after 30 s (virtual time here).
#[tokio::test(start_paused = true)]
async fn model_discovery_has_a_default_bound() {
    assert_eq!(MODEL_DISCOVERY_TIMEOUT, Duration::from_secs(30));
    let t = target(&format!("http://{}", server(b"").await)).await;
    let start = Instant::now();
    let err = first_model(&t).await.unwrap_err();
    assert_eq!(start.elapsed(), MODEL_DISCOVERY_TIMEOUT);
    assert_eq!(err, "GET /v1/models: no answer within 30.0 s");
}

#[tokio::test(start_paused = true)]
async fn an_interrupt_stops_model_discovery_at_once() {
    let t = target(&format!("http://{}", server(b"").await)).await;
    let (tx, mut rx) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let _ = tx.send(true);
    });
    let start = Instant::now();
    assert_eq!(unless_interrupted(&mut rx, first_model(&t)).await, None);
    assert!(start.elapsed() < Duration::from_secs(2), "{:?}", start.elapsed());
    // Already interrupted: nothing is started.
    assert_eq!(unless_interrupted(&mut rx, async { 1 }).await, None);
    // No one left to interrupt: the future just runs.
    let (tx, mut rx) = tokio::sync::watch::channel(false);
    drop(tx);
    assert_eq!(unless_interrupted(&mut rx, async { 2 }).await, Some(2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_get_body_past_the_limit_is_an_error_not_a_buffer() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let (mut s, _) = listener.accept().await.unwrap();
        let mut buf = [0u8; 4096];
        let _ = s.read(&mut buf).await;
        let _ = s.write_all(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n").await;
        let chunk = vec![b'x'; 1 << 20];
        let head = format!("{:x}\r\n", chunk.len());
        for _ in 0..(MAX_GET_BODY >> 20) + 4 {
            if s.write_all(head.as_bytes()).await.is_err()
                || s.write_all(&chunk).await.is_err()
                || s.write_all(b"\r\n").await.is_err()
            {
                return;
            }
        }
    });
    let t = target(&format!("http://{addr}")).await;
    let err = tokio::time::timeout(Duration::from_secs(20), get(&t, "/metrics"))
        .await
        .expect("bounded")
        .unwrap_err();
    assert_eq!(err.to_string(), "body larger than 32 MiB");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_id_with_control_characters_is_refused_not_printed() {
    let body = r#"{"data":[{"id":"m\u001b[2Jx"}]}"#;
    let reply = format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{body}", body.len());
    let reply: &'static [u8] = Box::leak(reply.into_bytes().into_boxed_slice());
    let t = target(&format!("http://{}", server(reply).await)).await;
    let err = first_model_within(&t, Duration::from_secs(5)).await.unwrap_err();
    assert_eq!(
        err,
        "GET /v1/models listed a model id with control characters ('m\\u{1b}[2Jx'); pass --model"
    );
}
