//! HTTP/1.1 connections to the target, pooled without a lock on the streaming path.
//!
//! hyper's low-level client is used directly: one connection carries one request at a time,
//! so a stream's timing is never shared with another's, and connections can be opened before
//! the clock starts (`preconnect`) so TCP handshakes are not measured as server latency.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Mutex;
use std::time::Duration;

use bytes::Bytes;
use http::header::{HeaderName, HeaderValue};
use http::Uri;
use http_body_util::Full;
use hyper::client::conn::http1::{self, SendRequest};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

use crate::timed_io::{peer_gone, raw_socket, RawSocket, ReadStamp, TimedStream};

/// Where requests go.
#[derive(Debug, Clone)]
pub struct Target {
    pub addr: SocketAddr,
    /// `host:port` for the Host header.
    pub authority: String,
    /// Base URL as the user gave it, without a trailing slash (for reports).
    pub base_url: String,
    /// Path of the generation endpoint, e.g. `/v1/completions`.
    pub path: String,
    /// Extra headers (`--header`, Authorization). Never logged or stored. At most one
    /// Authorization: see [`Target::add_header`].
    pub headers: Vec<(HeaderName, HeaderValue)>,
    /// Where the Authorization header in `headers` came from, if there is one.
    auth: Option<AuthSource>,
}

/// Where an Authorization header came from, weakest first: a stronger source replaces a
/// weaker one, never the reverse.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum AuthSource {
    /// The API key (`OPENAI_API_KEY` or its flag).
    ApiKey,
    /// An explicit `--header Authorization: ...`.
    Header,
}

/// Headers that describe the connection or the message framing, which servelab sets itself:
/// a user's value would contradict what is actually sent and break every request.
const RESERVED_HEADERS: &[&str] = &[
    "content-length",
    "transfer-encoding",
    "host",
    "connection",
    "keep-alive",
    "te",
    "trailer",
    "upgrade",
    "proxy-connection",
    "x-request-id",
];

#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    #[error("invalid base URL '{0}': expected http://HOST:PORT")]
    Url(String),
    #[error("invalid base URL '{url}': port {port} is out of range (1-65535)")]
    Port { url: String, port: String },
    #[error(
        "base URL '{0}' uses https, which this build does not support yet; \
         benchmark the engine's plain-http port"
    )]
    Https(String),
    #[error("cannot resolve '{host}': {message}")]
    Resolve { host: String, message: String },
    /// The value is never shown: it may be a secret.
    #[error("invalid header '{0}': expected NAME:VALUE with a valid name and value")]
    Header(String),
    #[error("header '{name}' cannot be set: {why}")]
    Reserved { name: String, why: &'static str },
}

impl Target {
    /// Resolve `base_url` once, up front, so no lookup happens while timing.
    pub async fn resolve(base_url: &str, path: &str) -> Result<Self, TargetError> {
        let shown = base_url.to_string();
        let base = base_url.trim_end_matches('/');
        let uri: Uri = base.parse().map_err(|_| TargetError::Url(shown.clone()))?;
        match uri.scheme_str() {
            Some("http") => {}
            Some("https") => return Err(TargetError::Https(shown)),
            _ => return Err(TargetError::Url(shown)),
        }
        let authority = uri.authority().ok_or_else(|| TargetError::Url(shown.clone()))?.as_str();
        let host_port = authority.rsplit_once('@').map_or(authority, |(_, hp)| hp);
        let (host, port) =
            split_host_port(host_port).ok_or_else(|| TargetError::Url(shown.clone()))?;
        let port = match port {
            None | Some("") => 80,
            Some(p) => match p.parse::<u32>() {
                Ok(n) if (1..=65535).contains(&n) => n as u16,
                Ok(_) => return Err(TargetError::Port { url: shown, port: p.to_string() }),
                Err(_) => return Err(TargetError::Url(shown)),
            },
        };
        let host_for_lookup = host.trim_start_matches('[').trim_end_matches(']');
        let addr = tokio::net::lookup_host((host_for_lookup, port))
            .await
            .map_err(|e| TargetError::Resolve { host: host.to_string(), message: e.to_string() })?
            .next()
            .ok_or_else(|| TargetError::Resolve {
                host: host.to_string(),
                message: "no address".into(),
            })?;
        // A base URL may carry a path prefix (e.g. behind a gateway); keep it.
        let prefix = uri.path().trim_end_matches('/');
        let path = if path.starts_with('/') { path.to_string() } else { format!("/{path}") };
        Ok(Self {
            addr,
            authority: format!("{host}:{port}"),
            base_url: base.to_string(),
            path: format!("{prefix}{path}"),
            headers: Vec::new(),
            auth: None,
        })
    }

    /// Add a `NAME:VALUE` header. An Authorization header replaces any other (the API
    /// key's); framing and connection headers (Content-Length, Transfer-Encoding,
    /// Host, Connection, ...) and `x-request-id`, which servelab sets itself, are refused.
    /// Content-Type and Accept replace servelab's own.
    pub fn add_header(&mut self, spec: &str) -> Result<(), TargetError> {
        // Only the name is ever shown back: the value may be a secret.
        let bad = || TargetError::Header(header_name_for_error(spec));
        let (k, v) = spec.split_once(':').ok_or_else(bad)?;
        let name = HeaderName::from_bytes(k.trim().as_bytes()).map_err(|_| bad())?;
        let mut value = HeaderValue::from_str(v.trim()).map_err(|_| bad())?;
        if RESERVED_HEADERS.contains(&name.as_str()) {
            let why = if name.as_str() == "x-request-id" {
                "servelab sets it to each request's own id, which joins its records with the \
                 server's logs"
            } else {
                "servelab sets the connection and message framing itself"
            };
            return Err(TargetError::Reserved { name: k.trim().to_string(), why });
        }
        if name == http::header::AUTHORIZATION || name == http::header::PROXY_AUTHORIZATION {
            value.set_sensitive(true);
        }
        if name == http::header::AUTHORIZATION {
            self.set_auth(AuthSource::Header, value);
        } else {
            self.headers.push((name, value));
        }
        Ok(())
    }

    /// Add `Authorization: Bearer KEY`, marked sensitive so it never appears in debug output.
    /// An explicit Authorization header (given before or after) wins over the key. An empty
    /// key sets nothing.
    pub fn set_api_key(&mut self, key: &str) -> Result<(), TargetError> {
        let key = key.trim();
        if key.is_empty() {
            return Ok(());
        }
        let value = HeaderValue::from_str(&format!("Bearer {key}"))
            .map_err(|_| TargetError::Header("Authorization: Bearer <key>".into()))?;
        self.set_auth(AuthSource::ApiKey, value);
        Ok(())
    }

    /// Keep one Authorization header: the one from the strongest source so far.
    fn set_auth(&mut self, source: AuthSource, mut value: HeaderValue) {
        if self.auth.is_some_and(|have| have > source) {
            return;
        }
        value.set_sensitive(true);
        self.headers.retain(|(k, _)| k != http::header::AUTHORIZATION);
        self.headers.push((http::header::AUTHORIZATION, value));
        self.auth = Some(source);
    }
}

/// `host` and the text after its `:`, if any; IPv6 hosts keep their brackets.
fn split_host_port(s: &str) -> Option<(&str, Option<&str>)> {
    if s.starts_with('[') {
        let close = s.find(']')?;
        let (host, rest) = s.split_at(close + 1);
        return match rest {
            "" => Some((host, None)),
            r => Some((host, Some(r.strip_prefix(':')?))),
        };
    }
    let (host, port) = match s.split_once(':') {
        Some((h, p)) => (h, Some(p)),
        None => (s, None),
    };
    (!host.is_empty()).then_some((host, port))
}

/// The header name of a `--header` argument for an error message; nothing when there is no
/// `:` (then the whole argument may be a secret).
fn header_name_for_error(spec: &str) -> String {
    match spec.split_once(':') {
        Some((k, _)) => format!("{}: ...", crate::text::sanitize(k.trim())),
        None => "(no ':' in the argument; not shown)".to_string(),
    }
}

/// hyper's connection state machine: reads, writes and decodes for one connection.
type Driver = Pin<Box<http1::Connection<TokioIo<TimedStream>, Full<Bytes>>>>;

/// One HTTP/1.1 connection: the request handle, its driver, and the stamp of its latest
/// socket read.
///
/// The driver is polled by the request's own task ([`drive`]) instead of a task of its own:
/// a socket read then wakes one task, not two that may sit on different cores, which keeps
/// the client's per-chunk cost (and so its effect on what it measures) small.
pub struct Conn {
    pub sender: SendRequest<Full<Bytes>>,
    pub reads: ReadStamp,
    /// `None` once the connection has ended.
    pub driver: Option<Driver>,
    /// The socket, to look at it directly before reuse; valid while `driver` is `Some` (the
    /// driver owns the stream).
    socket: RawSocket,
}

impl Conn {
    fn is_closed(&self) -> bool {
        self.driver.is_none() || self.sender.is_closed()
    }

    /// True when this idle connection must not carry another request: hyper saw it end, or
    /// the kernel already holds the server's FIN or RST (or stray bytes). One syscall, once
    /// per request start; it catches most keep-alive closes before anything is sent, so they
    /// cost neither a retry nor a failure.
    pub fn is_stale(&self) -> bool {
        self.is_closed() || peer_gone(self.socket)
    }
}

/// Await `fut` while driving the connection in the same task.
pub async fn drive<F: Future>(driver: &mut Option<Driver>, fut: F) -> F::Output {
    let mut fut = std::pin::pin!(fut);
    std::future::poll_fn(|cx| {
        if let Some(d) = driver.as_mut() {
            // Ready means the connection ended; `fut` then sees the error or end itself.
            if d.as_mut().poll(cx).is_ready() {
                *driver = None;
            }
        }
        fut.as_mut().poll(cx)
    })
    .await
}

/// Open one HTTP/1.1 connection (Nagle off: SSE events are small and latency-critical).
pub async fn connect(addr: SocketAddr) -> std::io::Result<Conn> {
    let stream = TcpStream::connect(addr).await?;
    stream.set_nodelay(true)?;
    let socket = raw_socket(&stream);
    let (stream, reads) = TimedStream::new(stream);
    let (sender, driver) =
        http1::handshake(TokioIo::new(stream)).await.map_err(std::io::Error::other)?;
    Ok(Conn { sender, reads, driver: Some(Box::pin(driver)), socket })
}

/// Idle keep-alive connections. The lock is taken once when a request starts and once when it
/// ends, never per chunk.
#[derive(Default)]
pub struct Pool {
    idle: Mutex<Vec<Conn>>,
}

impl Pool {
    /// An idle connection that is still open, if any. Stale ones are dropped (closed).
    pub fn take(&self) -> Option<Conn> {
        loop {
            // The socket check runs outside the lock: other requests never wait on a syscall.
            let conn = self.idle.lock().unwrap_or_else(|e| e.into_inner()).pop()?;
            if !conn.is_stale() {
                return Some(conn);
            }
        }
    }

    pub fn put(&self, conn: Conn) {
        if !conn.is_closed() {
            self.idle.lock().unwrap_or_else(|e| e.into_inner()).push(conn);
        }
    }

    pub fn idle(&self) -> usize {
        self.idle.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Open `n` connections ahead of the run, a bounded number at a time.
    pub async fn preconnect(&self, addr: SocketAddr, n: usize) -> std::io::Result<()> {
        let mut left = n;
        while left > 0 {
            let batch = left.min(64);
            let mut set = tokio::task::JoinSet::new();
            for _ in 0..batch {
                set.spawn(connect(addr));
            }
            while let Some(res) = set.join_next().await {
                self.put(res.map_err(std::io::Error::other)??);
            }
            left -= batch;
        }
        Ok(())
    }
}

/// The longest one readiness probe (a GET of `/health` or `/v1/models`) may take: a server
/// that accepts and then says nothing must not hold up the wait past its deadline, nor keep
/// the other path from being tried.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// How long [`first_model`] waits for `/v1/models`.
pub const MODEL_DISCOVERY_TIMEOUT: Duration = Duration::from_secs(30);

/// The largest GET body read (`/metrics`, `/v1/models`); a larger one is an error, read no
/// further. An engine's `/metrics` is well under 1 MiB.
pub const MAX_GET_BODY: usize = 32 << 20;

/// A plain GET (readiness checks, `/v1/models`, `/metrics`): status and body (at most
/// [`MAX_GET_BODY`]). Not bounded in time: use [`get_within`], or wrap it in a timeout.
/// Cancel-safe: dropping the future closes its connection.
pub async fn get(target: &Target, path: &str) -> std::io::Result<(u16, Bytes)> {
    let mut conn = connect(target.addr).await?;
    let mut req = http::Request::get(path).header(http::header::HOST, target.authority.as_str());
    for (k, v) in &target.headers {
        req = req.header(k, v);
    }
    let req = req.body(Full::new(Bytes::new())).map_err(std::io::Error::other)?;
    let sent = conn.sender.send_request(req);
    let resp = drive(&mut conn.driver, sent).await.map_err(std::io::Error::other)?;
    let status = resp.status().as_u16();
    let limited = http_body_util::Limited::new(resp.into_body(), MAX_GET_BODY);
    let body = drive(&mut conn.driver, http_body_util::BodyExt::collect(limited))
        .await
        .map_err(|e| {
            if e.is::<http_body_util::LengthLimitError>() {
                std::io::Error::other(format!("body larger than {} MiB", MAX_GET_BODY >> 20))
            } else {
                std::io::Error::other(e)
            }
        })?
        .to_bytes();
    Ok((status, body))
}

/// [`get`] within `timeout` (connecting included); past it, an error of kind `TimedOut`.
pub async fn get_within(
    target: &Target,
    path: &str,
    timeout: Duration,
) -> std::io::Result<(u16, Bytes)> {
    match tokio::time::timeout(timeout, get(target, path)).await {
        Ok(r) => r,
        Err(_) => Err(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!("no answer within {:.1} s", timeout.as_secs_f64()),
        )),
    }
}

/// Poll `/health`, then `/v1/models`, until one answers 200 or `timeout` passes. Every probe
/// is bounded by what is left of `timeout` (and by [`PROBE_TIMEOUT`]), so the whole wait
/// ends by its deadline whatever the server does. Cancel-safe: a caller may `select!` it
/// against Ctrl-C (see [`unless_interrupted`]).
pub async fn wait_ready(target: &Target, timeout: Duration) -> Result<(), String> {
    let deadline = tokio::time::Instant::now() + timeout;
    let mut last = String::from("no answer");
    loop {
        for path in ["/health", "/v1/models"] {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            if left.is_zero() {
                return Err(last);
            }
            match get_within(target, path, left.min(PROBE_TIMEOUT)).await {
                Ok((200, _)) => return Ok(()),
                Ok((status, _)) => last = format!("GET {path} answered HTTP {status}"),
                Err(e) => last = format!("GET {path}: {e}"),
            }
        }
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        if left.is_zero() {
            return Err(last);
        }
        tokio::time::sleep(left.min(Duration::from_millis(250))).await;
    }
}

/// The first model id listed by `/v1/models`, within [`MODEL_DISCOVERY_TIMEOUT`].
/// Cancel-safe: a caller should `select!` it against Ctrl-C (see [`unless_interrupted`]).
pub async fn first_model(target: &Target) -> Result<String, String> {
    first_model_within(target, MODEL_DISCOVERY_TIMEOUT).await
}

/// The first model id listed by `/v1/models`, within `timeout`.
pub async fn first_model_within(target: &Target, timeout: Duration) -> Result<String, String> {
    let (status, body) = get_within(target, "/v1/models", timeout)
        .await
        .map_err(|e| format!("GET /v1/models: {e}"))?;
    if status != 200 {
        return Err(format!("GET /v1/models answered HTTP {status}"));
    }
    let v: serde_json::Value =
        serde_json::from_slice(&body).map_err(|e| format!("GET /v1/models: invalid JSON: {e}"))?;
    let id = v["data"][0]["id"]
        .as_str()
        .ok_or_else(|| "GET /v1/models listed no model; pass --model".to_string())?;
    // The id is sent back in every request and printed in every report: one with control
    // characters is refused rather than printed raw or silently altered.
    if crate::text::sanitize(id) != id {
        return Err(format!(
            "GET /v1/models listed a model id with control characters ('{}'); pass --model",
            crate::text::sanitize(id)
        ));
    }
    Ok(id.to_string())
}

/// Run `fut` unless `interrupt` turns true first (then `None`, and `fut` is dropped, which
/// for the functions of this module closes their connection). For the waits before a run
/// (readiness, model discovery), so Ctrl-C stops them at once.
pub async fn unless_interrupted<F: Future>(
    interrupt: &mut tokio::sync::watch::Receiver<bool>,
    fut: F,
) -> Option<F::Output> {
    if *interrupt.borrow() {
        return None;
    }
    let mut fut = std::pin::pin!(fut);
    tokio::select! {
        out = &mut fut => Some(out),
        r = interrupt.wait_for(|v| *v) => match r {
            Ok(_) => None,
            // No one can interrupt any more: just finish.
            Err(_) => Some(fut.await),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn auth(t: &Target) -> Vec<&str> {
        t.headers
            .iter()
            .filter(|(k, _)| k == http::header::AUTHORIZATION)
            .map(|(_, v)| v.to_str().unwrap())
            .collect()
    }

    #[test]
    fn hosts_and_ports_split() {
        assert_eq!(split_host_port("[::1]:8000"), Some(("[::1]", Some("8000"))));
        assert_eq!(split_host_port("h:"), Some(("h", Some(""))));
        assert_eq!(split_host_port(":80"), None);
    }

    #[tokio::test]
    async fn ports_out_of_range_are_refused() {
        for (url, port) in [("http://127.0.0.1:99999", "99999"), ("http://127.0.0.1:0", "0")] {
            let e = Target::resolve(url, "/v1/completions").await.unwrap_err();
            assert!(matches!(&e, TargetError::Port { port: p, .. } if p == port), "{e}");
            assert_eq!(
                e.to_string(),
                format!("invalid base URL '{url}': port {port} is out of range (1-65535)")
            );
        }
        let t = Target::resolve("http://127.0.0.1:65535/", "v1/x").await.unwrap();
        assert_eq!((t.authority.as_str(), t.path.as_str()), ("127.0.0.1:65535", "/v1/x"));
        assert!(Target::resolve("http://127.0.0.1:8x", "/").await.is_err());
        let t = Target::resolve("http://127.0.0.1", "/").await.unwrap();
        assert_eq!(t.addr.port(), 80);
    }

    #[tokio::test]
    async fn one_authorization_header_from_the_strongest_source() {
        let url = "http://127.0.0.1:8000";
        // API key < explicit header, whatever the order they are given in.
        let mut t = Target::resolve(url, "/").await.unwrap();
        t.set_api_key("sk-1").unwrap();
        assert_eq!(auth(&t), ["Bearer sk-1"]);
        t.add_header("Authorization: Token abc").unwrap();
        assert_eq!(auth(&t), ["Token abc"]);
        t.set_api_key("sk-2").unwrap();
        assert_eq!(auth(&t), ["Token abc"]);
        let mut t = Target::resolve(url, "/").await.unwrap();
        t.add_header("authorization:Token abc").unwrap();
        t.set_api_key("sk-1").unwrap();
        assert_eq!(auth(&t), ["Token abc"]);
        // A second explicit header replaces the first; an empty key sets nothing.
        t.add_header("Authorization: Token def").unwrap();
        assert_eq!(auth(&t), ["Token def"]);
        let mut t = Target::resolve("http://127.0.0.1:8000", "/").await.unwrap();
        t.set_api_key("  ").unwrap();
        assert!(auth(&t).is_empty());
        t.add_header("X-Custom: a").unwrap();
        t.add_header("X-Custom: b").unwrap();
        assert_eq!(t.headers.len(), 2);
    }

    #[tokio::test]
    async fn framing_and_connection_headers_are_refused_by_name() {
        let mut t = Target::resolve("http://127.0.0.1:8000", "/").await.unwrap();
        for spec in [
            "Content-Length: 5",
            "host: example.com",
            "Transfer-Encoding: chunked",
            "Connection: close",
            "x-request-id: mine",
        ] {
            let e = t.add_header(spec).unwrap_err();
            let name = spec.split(':').next().unwrap();
            assert!(e.to_string().starts_with(&format!("header '{name}' cannot be set: ")), "{e}");
        }
        assert!(t.headers.is_empty());
        // A malformed header never shows its value (it may be a key).
        let e = t.add_header("Bearer sk-secret").unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid header '(no ':' in the argument; not shown)': expected NAME:VALUE with a \
             valid name and value"
        );
        let e = t.add_header("Authorization: sk-\nsecret").unwrap_err();
        assert!(!e.to_string().contains("secret"), "{e}");
    }
}
