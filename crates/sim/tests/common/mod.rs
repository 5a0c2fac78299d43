//! A tiny hyper HTTP/1.1 client for the sim's integration tests, plus SSE helpers.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

/// Every network step of a test is bounded by this.
pub const STEP: Duration = Duration::from_secs(20);

/// What the client saw.
#[derive(Debug)]
pub struct Seen {
    pub status: u16,
    pub headers: http::HeaderMap,
    /// Body frames with their arrival time.
    pub frames: Vec<(Instant, Bytes)>,
    /// Set when the body ended with an error (e.g. a reset).
    pub body_error: Option<String>,
}

impl Seen {
    pub fn body(&self) -> Vec<u8> {
        self.frames.iter().flat_map(|(_, b)| b.iter().copied()).collect()
    }
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body()).into_owned()
    }
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body()).expect("JSON body")
    }
    /// The `data:` payloads of the SSE stream, in order.
    pub fn events(&self) -> Vec<String> {
        sse_payloads(&self.text())
    }
}

pub fn sse_payloads(text: &str) -> Vec<String> {
    text.split("\n\n")
        .filter(|e| !e.is_empty())
        .map(|e| e.strip_prefix("data: ").unwrap_or(e).to_string())
        .collect()
}

/// Send one request on a fresh connection and read the whole response.
pub async fn send(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Result<Seen, String> {
    tokio::time::timeout(STEP, send_inner(addr, method, path, headers, body))
        .await
        .map_err(|_| "timed out".to_string())?
}

async fn send_inner(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Result<Seen, String> {
    let tcp = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
    let _ = tcp.set_nodelay(true);
    let (mut tx, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(conn);
    let mut req = http::Request::builder()
        .method(method)
        .uri(path)
        .header("host", addr.to_string())
        .header("content-type", "application/json");
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let req = req.body(Full::new(Bytes::from(body.to_string()))).map_err(|e| e.to_string())?;
    let resp = tx.send_request(req).await.map_err(|e| error_chain(&e))?;
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let mut body = resp.into_body();
    let mut frames = Vec::new();
    let mut body_error = None;
    while let Some(f) = body.frame().await {
        match f {
            Ok(f) => {
                if let Ok(d) = f.into_data() {
                    frames.push((Instant::now(), d));
                }
            }
            Err(e) => {
                body_error = Some(error_chain(&e));
                break;
            }
        }
    }
    Ok(Seen { status, headers, frames, body_error })
}

/// An error and all its sources, for asserting on resets.
pub fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}

pub async fn post(addr: SocketAddr, path: &str, body: &str) -> Seen {
    send(addr, "POST", path, &[], body).await.expect("request")
}

pub async fn post_with(addr: SocketAddr, path: &str, headers: &[(&str, &str)], body: &str) -> Seen {
    send(addr, "POST", path, headers, body).await.expect("request")
}

/// Parse an SSE payload as JSON.
pub fn parse(e: &str) -> serde_json::Value {
    serde_json::from_str(e).unwrap_or_else(|err| panic!("not JSON ({err}): {e}"))
}
