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
    /// The server's address, resolved once before the run so no lookup is timed.
    pub addr: SocketAddr,
    /// `host:port` for the Host header.
    pub authority: String,
    /// Base URL as the user gave it, without a trailing slash and without any credentials
    /// (`user:password@` is taken out and sent as Basic auth): safe to record and print.
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
    /// `http://user:password@host` in the base URL.
    Url,
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

/// Why a base URL or a header cannot be used. URLs in the messages have their credentials
/// redacted ([`redact_url`]).
#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    /// The base URL does not parse as `http://HOST[:PORT][/PREFIX]`; holds it with any
    /// credentials redacted.
    #[error("invalid base URL '{0}': expected http://HOST:PORT")]
    Url(String),
    /// The base URL's port is a number outside 1-65535.
    #[error("invalid base URL '{url}': port {port} is out of range (1-65535)")]
    Port {
        /// The base URL, credentials redacted.
        url: String,
        /// The port as written in it.
        port: String,
    },
    /// The base URL is `https://`, which this build cannot speak; holds it, credentials
    /// redacted.
    #[error(
        "base URL '{0}' uses https, which this build does not support yet; \
         benchmark the engine's plain-http port"
    )]
    Https(String),
    /// The host name did not resolve to an address.
    #[error("cannot resolve '{host}': {message}")]
    Resolve {
        /// The host that was looked up.
        host: String,
        /// The resolver's error, or "no address".
        message: String,
    },
    /// A `--header` is not `NAME:VALUE` with a valid name and value; holds `NAME: ...` (or a
    /// note that there was no `:`).
    /// The value is never shown: it may be a secret.
    #[error("invalid header '{0}': expected NAME:VALUE with a valid name and value")]
    Header(String),
    /// A header servelab sets itself (framing, Host, request id) was given.
    #[error("header '{name}' cannot be set: {why}")]
    Reserved {
        /// The header's name as given.
        name: String,
        /// Why servelab must set it itself.
        why: &'static str,
    },
}

impl Target {
    /// Resolve `base_url` once, up front, so no lookup happens while timing. Credentials in
    /// the URL (`http://user:password@host`) are removed from [`Target::base_url`] and sent as
    /// `Authorization: Basic`, unless an API key or an explicit Authorization header replaces
    /// them.
    pub async fn resolve(base_url: &str, path: &str) -> Result<Self, TargetError> {
        let shown = redact_url(base_url);
        let base = base_url.trim_end_matches('/');
        let uri: Uri = base.parse().map_err(|_| TargetError::Url(shown.clone()))?;
        match uri.scheme_str() {
            Some("http") => {}
            Some("https") => return Err(TargetError::Https(shown)),
            _ => return Err(TargetError::Url(shown)),
        }
        let authority = uri.authority().ok_or_else(|| TargetError::Url(shown.clone()))?.as_str();
        let (userinfo, host_port) = match authority.rsplit_once('@') {
            Some((u, hp)) => (Some(u), hp),
            None => (None, authority),
        };
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
        let mut target = Self {
            addr,
            authority: format!("{host}:{port}"),
            base_url: format!("http://{host_port}{prefix}"),
            path: format!("{prefix}{path}"),
            headers: Vec::new(),
            auth: None,
        };
        if let Some(u) = userinfo {
            let (user, password) = u.split_once(':').unwrap_or((u, ""));
            let pair = format!("{}:{}", percent_decode(user), percent_decode(password));
            let value = HeaderValue::from_str(&format!("Basic {}", base64(pair.as_bytes())))
                .map_err(|_| TargetError::Url(shown.clone()))?;
            target.set_auth(AuthSource::Url, value);
        }
        Ok(target)
    }

    /// Add a `NAME:VALUE` header. An Authorization header replaces any other (from the URL
    /// or the API key); framing and connection headers (Content-Length, Transfer-Encoding,
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
    /// An explicit Authorization header (given before or after) wins over the key; the key
    /// wins over credentials in the URL. An empty key sets nothing.
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

/// `url` with any `user:password@` replaced by `***@`, for messages that show what the user
/// typed. Works on strings that do not parse as URLs too.
pub fn redact_url(url: &str) -> String {
    let after_scheme = url.find("://").map_or(0, |i| i + 3);
    let rest = &url[after_scheme..];
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => format!("{}***{}", &url[..after_scheme], &rest[at..]),
        None => url.to_string(),
    }
}

/// `host` and the text after its `:`, if any; IPv6 hosts keep their brackets.
pub(crate) fn split_host_port(s: &str) -> Option<(&str, Option<&str>)> {
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

/// `%XX` escapes decoded (RFC 3986 userinfo); a malformed escape is kept as it is.
fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        if b[i] == b'%' && i + 2 < b.len() {
            if let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Standard base64 with padding (RFC 4648 §4), for Basic auth.
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for group in bytes.chunks(3) {
        let n = group.iter().enumerate().fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
        for i in 0..4 {
            if i <= group.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// hyper's connection state machine: reads, writes and decodes for one connection.
type Driver = Pin<Box<http1::Connection<TokioIo<TimedStream>, Full<Bytes>>>>;

/// One HTTP/1.1 connection: the request handle, its driver, and the stamp of its latest
/// socket read.
///
/// The driver is polled by the request's own task ([`drive`]) instead of a task of its own:
/// a socket read then wakes one task, not two that may sit on different cores, which keeps
/// the client's per-chunk cost (and so its effect on what it measures) small.
pub(crate) struct Conn {
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
pub(crate) async fn drive<F: Future>(driver: &mut Option<Driver>, fut: F) -> F::Output {
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
pub(crate) async fn connect(addr: SocketAddr) -> std::io::Result<Conn> {
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
pub(crate) struct Pool {
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
pub(crate) const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// How long [`first_model`] waits for `/v1/models`.
pub const MODEL_DISCOVERY_TIMEOUT: Duration = Duration::from_secs(30);

/// The largest GET body read (`/metrics`, `/v1/models`); a larger one is an error, read no
/// further. An engine's `/metrics` is well under 1 MiB.
pub const MAX_GET_BODY: usize = 32 << 20;

/// A plain GET (readiness checks, `/v1/models`, `/metrics`): status and body (at most
/// [`MAX_GET_BODY`]). Not bounded in time: wrap it in a timeout.
/// Cancel-safe: dropping the future closes its connection.
pub async fn get(target: &Target, path: &str) -> std::io::Result<(u16, Bytes)> {
    get_with_headers(target, path).await.map(|(status, _, body)| (status, body))
}

/// [`get`], with the answer's headers.
pub async fn get_with_headers(
    target: &Target,
    path: &str,
) -> std::io::Result<(u16, http::HeaderMap, Bytes)> {
    let mut conn = connect(target.addr).await?;
    let sent = conn.sender.send_request(get_request(target, path)?);
    let resp = drive(&mut conn.driver, sent).await.map_err(std::io::Error::other)?;
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let body = read_body(&mut conn, resp.into_body()).await?;
    Ok((status, headers, body))
}

/// A server with no health route (its `/health` answered `health`, 404 or 405) is up once
/// `/v1/models` answers anything but 503 (`models`): `transformers serve` answers 500 there
/// without a Hugging Face cache, and Ollama has no `/health`.
pub fn up_without_health_route(health: u16, models: u16) -> bool {
    matches!(health, 404 | 405) && models != 503
}

/// A GET of `path` on `target`: its Host and its extra headers.
pub(crate) fn get_request(
    target: &Target,
    path: &str,
) -> std::io::Result<http::Request<Full<Bytes>>> {
    let mut req = http::Request::get(path).header(http::header::HOST, target.authority.as_str());
    for (k, v) in &target.headers {
        req = req.header(k, v);
    }
    req.body(Full::new(Bytes::new())).map_err(std::io::Error::other)
}

/// A response's body read to its end on `conn` (so it can carry the next request), at most
/// [`MAX_GET_BODY`]; a larger one is an error, read no further.
pub(crate) async fn read_body(
    conn: &mut Conn,
    body: hyper::body::Incoming,
) -> std::io::Result<Bytes> {
    let limited = http_body_util::Limited::new(body, MAX_GET_BODY);
    let collected =
        drive(&mut conn.driver, http_body_util::BodyExt::collect(limited)).await.map_err(|e| {
            if e.is::<http_body_util::LengthLimitError>() {
                std::io::Error::other(format!("body larger than {} MiB", MAX_GET_BODY >> 20))
            } else {
                std::io::Error::other(e)
            }
        })?;
    Ok(collected.to_bytes())
}

/// `fut` within `limit`; past it, an error of kind `TimedOut`.
pub async fn within<T>(
    limit: Duration,
    fut: impl Future<Output = std::io::Result<T>>,
) -> std::io::Result<T> {
    match tokio::time::timeout(limit, fut).await {
        Ok(r) => r,
        Err(_) => Err(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!("no answer within {:.1} s", limit.as_secs_f64()),
        )),
    }
}

/// [`get`] within `timeout` (connecting included); past it, an error of kind `TimedOut`.
pub(crate) async fn get_within(
    target: &Target,
    path: &str,
    timeout: Duration,
) -> std::io::Result<(u16, Bytes)> {
    within(timeout, get(target, path)).await
}

/// Poll `/health`, then `/v1/models`, until one answers 200 or `timeout` passes. Every probe
/// is bounded by what is left of `timeout` (and by 5 s), so the whole wait
/// ends by its deadline whatever the server does. Cancel-safe: a caller may `select!` it
/// against Ctrl-C (see [`unless_interrupted`]).
pub async fn wait_ready(target: &Target, timeout: Duration) -> Result<(), String> {
    let deadline = tokio::time::Instant::now() + timeout;
    let mut last = String::from("no answer");
    loop {
        let mut health = None;
        for path in ["/health", "/v1/models"] {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            if left.is_zero() {
                return Err(last);
            }
            match get_within(target, path, left.min(PROBE_TIMEOUT)).await {
                Ok((200, _)) => return Ok(()),
                Ok((status, _)) if health.is_some_and(|h| up_without_health_route(h, status)) => {
                    return Ok(())
                }
                Ok((status, _)) => {
                    health = health.or(Some(status));
                    last = format!("GET {path} answered HTTP {status}");
                }
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
    // The watch's guard ends with its arm, so the future stays `Send` while `fut` runs on.
    let interrupted = tokio::select! {
        out = &mut fut => return Some(out),
        r = interrupt.wait_for(|v| *v) => r.is_ok(),
    };
    // Err: no one can interrupt any more: just finish.
    if interrupted {
        None
    } else {
        Some(fut.await)
    }
}

/// One reading of a Prometheus-style endpoint: `GET path` on its own connection within
/// `timeout`, its body parsed by `parse` on the blocking pool (off the runtime's workers).
pub(crate) async fn get_parsed<T: Send + 'static>(
    target: &Target,
    path: &str,
    timeout: Duration,
    parse: fn(&str) -> T,
) -> Result<T, String> {
    let body = match tokio::time::timeout(timeout, get(target, path)).await {
        Ok(Ok((200, body))) => body,
        Ok(Ok((status, _))) => return Err(format!("GET {path} answered HTTP {status}")),
        Ok(Err(e)) => return Err(format!("GET {path}: {e}")),
        Err(_) => return Err(format!("GET {path}: no answer within {timeout:?}")),
    };
    tokio::task::spawn_blocking(move || parse(&String::from_utf8_lossy(&body)))
        .await
        .map_err(|e| format!("parsing {path}: {e}"))
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
    fn base64_matches_rfc_4648_vectors() {
        let cases = [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
            ("Aladdin:open sesame", "QWxhZGRpbjpvcGVuIHNlc2FtZQ=="),
        ];
        for (plain, encoded) in cases {
            assert_eq!(base64(plain.as_bytes()), encoded, "{plain}");
        }
    }

    #[test]
    fn percent_decoding_and_redaction() {
        assert_eq!(percent_decode("p%40ss%3Aw%zz%4"), "p@ss:w%zz%4");
        assert_eq!(redact_url("http://user:pw@host:8000/v1"), "http://***@host:8000/v1");
        assert_eq!(redact_url("http://a@b@host"), "http://***@host");
        assert_eq!(redact_url("user:pw@host/x@y"), "***@host/x@y");
        assert_eq!(redact_url("http://host:8000/a@b"), "http://host:8000/a@b");
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
    async fn url_credentials_become_basic_auth_and_never_reach_the_base_url() {
        let t =
            Target::resolve("http://al%40x:open%20sesame@127.0.0.1:8000/gw/", "/v1/completions")
                .await
                .unwrap();
        assert_eq!(t.base_url, "http://127.0.0.1:8000/gw");
        assert_eq!(t.authority, "127.0.0.1:8000");
        assert_eq!(t.path, "/gw/v1/completions");
        // base64("al@x:open sesame")
        assert_eq!(auth(&t), ["Basic YWxAeDpvcGVuIHNlc2FtZQ=="]);
        assert!(!format!("{t:?}").contains("YWxAeDpvcGVuIHNlc2FtZQ"), "sensitive in Debug");
        // An error about such a URL does not show the password either.
        let e = Target::resolve("https://u:secret@127.0.0.1:1", "/").await.unwrap_err();
        assert!(!e.to_string().contains("secret"), "{e}");
        let e = Target::resolve("http://u:secret@127.0.0.1:70000", "/").await.unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid base URL 'http://***@127.0.0.1:70000': port 70000 is out of range (1-65535)"
        );
    }

    #[tokio::test]
    async fn one_authorization_header_from_the_strongest_source() {
        let url = "http://u:p@127.0.0.1:8000";
        // URL < API key < explicit header, whatever the order they are given in.
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
