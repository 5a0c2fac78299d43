//! A replay server: serves a conformance fixture (`testdata/servers/*.yaml`) byte for byte.
//!
//! Each fixture describes what one real server sends (its stream framing, headers, errors,
//! `/metrics`), written from that server's source and docs. The replay server answers every
//! request with the first exchange that matches it, writing the fixture's frames raw on the
//! socket at the stated times, so the client under test meets exactly those bytes: chunked or
//! close-delimited bodies, compressed streams, CR line ends, a byte-order mark. It speaks just
//! enough HTTP/1.1 for that (keep-alive, `content-length` request bodies), nothing more.

use std::collections::BTreeMap;
use std::io::Write;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use serde::Deserialize;
use serde_json::{Map, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::time::Instant;

use crate::SimError;

/// One server's fixture file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fixture {
    /// Display name (`vLLM`, `llama.cpp llama-server`).
    pub server: String,
    /// Engine family key (`vllm`, `llamacpp`, ...).
    pub family: String,
    /// The version whose source and docs the file follows.
    pub version: String,
    /// Where each behaviour was read.
    #[serde(default)]
    pub sources: Vec<String>,
    /// What this server sends that matters to a client, in a paragraph.
    #[serde(default)]
    pub summary: String,
    /// Short statements for the docs table (`done`, `usage`, `max_tokens`, ...).
    #[serde(default)]
    pub traits: BTreeMap<String, String>,
    /// The answers, first match wins.
    pub exchanges: Vec<Exchange>,
}

/// One request pattern and the answer to it.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Exchange {
    /// Unique within the file.
    pub name: String,
    /// `POST` unless given.
    #[serde(default = "post")]
    pub method: String,
    /// The request path (any query string is ignored when matching).
    pub path: String,
    /// Conditions on the request's JSON body.
    #[serde(default)]
    pub when: When,
    /// The status code.
    #[serde(default = "ok")]
    pub status: u16,
    /// The status text (a generic one for the code when absent).
    #[serde(default)]
    pub reason: Option<String>,
    /// Response headers, written in the file's order.
    #[serde(default, deserialize_with = "ordered_pairs")]
    pub headers: Vec<(String, String)>,
    /// How the body's end is marked.
    #[serde(default)]
    pub framing: Framing,
    /// A content-encoding the server applies to the body.
    #[serde(default)]
    pub encoding: Option<Encoding>,
    /// Milliseconds from the request's arrival to the first frame.
    #[serde(default)]
    pub first_ms: f64,
    /// Milliseconds between frames unless a frame says otherwise.
    #[serde(default)]
    pub gap_ms: f64,
    /// The body, one network write each.
    #[serde(default)]
    pub frames: Vec<Frame>,
    /// Flags of `servelab bench` that make it send a request this exchange matches (read by
    /// the conformance tests, not by the server).
    #[serde(default)]
    pub bench_args: Vec<String>,
    /// What a client must make of this answer (read by the conformance tests).
    #[serde(default)]
    pub expect: Option<Value>,
}

/// A YAML mapping as its pairs, in the file's order (a header's position can matter to a
/// client, and a map type would sort them).
fn ordered_pairs<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Vec<(String, String)>, D::Error> {
    struct Pairs;
    impl<'de> serde::de::Visitor<'de> for Pairs {
        type Value = Vec<(String, String)>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a mapping of header names to values")
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(
            self,
            mut m: A,
        ) -> Result<Self::Value, A::Error> {
            let mut out = Vec::new();
            while let Some((k, v)) = m.next_entry::<String, String>()? {
                out.push((k, v));
            }
            Ok(out)
        }
    }
    d.deserialize_map(Pairs)
}

fn post() -> String {
    "POST".into()
}

fn ok() -> u16 {
    200
}

/// Conditions on a request body's top-level fields; all must hold.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct When {
    /// Fields that must be present.
    #[serde(default)]
    pub has: Vec<String>,
    /// Fields that must be absent.
    #[serde(default)]
    pub lacks: Vec<String>,
    /// Fields that must equal these values.
    #[serde(default)]
    pub equals: Map<String, Value>,
}

impl When {
    /// True when `body` (a JSON object, or nothing for a body that is not one) meets every
    /// condition.
    pub fn holds(&self, body: Option<&Map<String, Value>>) -> bool {
        let empty = Map::new();
        let b = body.unwrap_or(&empty);
        self.has.iter().all(|f| b.contains_key(f))
            && self.lacks.iter().all(|f| !b.contains_key(f))
            && self.equals.iter().all(|(k, v)| b.get(k) == Some(v))
    }
}

/// How a response body's end is marked.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Framing {
    /// `transfer-encoding: chunked`, one chunk per frame.
    #[default]
    Chunked,
    /// No length: the body ends when the server closes the connection (HTTP/1.0 style).
    Close,
    /// `content-length` of the whole body; frames are still written at their times.
    Length,
}

/// A content-encoding the replay server can apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Encoding {
    /// gzip, flushed at each frame.
    Gzip,
    /// zlib-wrapped deflate (what HTTP's `deflate` means), flushed at each frame.
    Deflate,
}

/// One body write.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum Frame {
    /// Text, written as UTF-8 after the exchange's gap.
    Text(String),
    /// Text or base64 bytes, after a gap of its own.
    Detailed {
        /// Text to write.
        #[serde(default)]
        raw: Option<String>,
        /// Bytes to write, in base64 (a byte-order mark, invalid UTF-8).
        #[serde(default)]
        b64: Option<String>,
        /// Milliseconds after the frame before (instead of the exchange's gap).
        #[serde(default)]
        after_ms: Option<f64>,
    },
}

impl Fixture {
    /// Read and check a fixture file.
    pub fn load(path: &Path) -> Result<Fixture, SimError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| SimError::Config(format!("{}: {e}", path.display())))?;
        Fixture::parse(&text).map_err(|e| SimError::Config(format!("{}: {e}", path.display())))
    }

    /// Parse and check a fixture.
    pub fn parse(text: &str) -> Result<Fixture, String> {
        let f: Fixture = serde_yaml_ng::from_str(text).map_err(|e| e.to_string())?;
        let mut names = std::collections::HashSet::new();
        for x in &f.exchanges {
            if !names.insert(x.name.as_str()) {
                return Err(format!("exchange name '{}' appears twice", x.name));
            }
            for (i, fr) in x.frames.iter().enumerate() {
                fr.bytes().map_err(|e| format!("exchange '{}' frame {i}: {e}", x.name))?;
            }
        }
        Ok(f)
    }

    /// The exchange answering `method path` with this body.
    pub fn find(
        &self,
        method: &str,
        path: &str,
        body: Option<&Map<String, Value>>,
    ) -> Option<&Exchange> {
        let path = path.split('?').next().unwrap_or(path);
        self.exchanges
            .iter()
            .find(|x| x.method.eq_ignore_ascii_case(method) && x.path == path && x.when.holds(body))
    }
}

impl Frame {
    /// The frame's bytes.
    pub fn bytes(&self) -> Result<Vec<u8>, String> {
        match self {
            Frame::Text(s) => Ok(s.clone().into_bytes()),
            Frame::Detailed { raw: Some(s), b64: None, .. } => Ok(s.clone().into_bytes()),
            Frame::Detailed { raw: None, b64: Some(b), .. } => {
                base64::engine::general_purpose::STANDARD
                    .decode(b.trim())
                    .map_err(|e| format!("b64: {e}"))
            }
            _ => Err("a frame gives exactly one of raw and b64".into()),
        }
    }

    fn after_ms(&self) -> Option<f64> {
        match self {
            Frame::Text(_) => None,
            Frame::Detailed { after_ms, .. } => *after_ms,
        }
    }
}

impl Exchange {
    /// When each frame is due, in ms after the request arrived.
    pub fn frame_times_ms(&self) -> Vec<f64> {
        let mut t = self.first_ms;
        self.frames
            .iter()
            .enumerate()
            .map(|(i, f)| {
                if i > 0 {
                    t += f.after_ms().unwrap_or(self.gap_ms);
                }
                t
            })
            .collect()
    }
}

/// One request the replay server answered.
#[derive(Debug, Clone)]
pub struct Served {
    /// The exchange that answered (`None`: no match, answered 404).
    pub exchange: Option<String>,
    /// `METHOD path`.
    pub request: String,
    /// The request body, when it was JSON.
    pub body: Option<Value>,
}

/// A running replay server.
pub struct ReplayHandle {
    addr: SocketAddr,
    served: Arc<Mutex<Vec<Served>>>,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl ReplayHandle {
    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://ADDR`.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every request answered so far, in order.
    pub fn served(&self) -> Vec<Served> {
        self.served.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// Stop accepting and wait for the accept loop to end.
    pub async fn shutdown(self) {
        let _ = self.stop.send(true);
        let _ = self.task.await;
    }
}

/// Serve `fixture` on `host:port` (port 0 picks one) until shut down.
pub async fn start_replay(
    fixture: Fixture,
    host: &str,
    port: u16,
) -> Result<ReplayHandle, SimError> {
    let bind_err = |e: std::io::Error| SimError::Bind {
        addr: format!("{host}:{port}"),
        message: e.to_string(),
    };
    let listener = TcpListener::bind((host, port)).await.map_err(bind_err)?;
    let addr = listener.local_addr().map_err(|e| SimError::Io(e.to_string()))?;
    let fixture = Arc::new(fixture);
    let served = Arc::new(Mutex::new(Vec::new()));
    let (stop, mut stopped) = watch::channel(false);
    let log = served.clone();
    let task = tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = stopped.wait_for(|s| *s) => return,
                accepted = listener.accept() => {
                    let Ok((sock, _)) = accepted else { continue };
                    let _ = sock.set_nodelay(true);
                    tokio::spawn(connection(sock, fixture.clone(), log.clone()));
                }
            }
        }
    });
    Ok(ReplayHandle { addr, served, stop, task })
}

/// `servelab sim replay FILE`: serve until Ctrl-C.
pub async fn serve_replay(
    path: &Path,
    host: &str,
    port: u16,
    announce: impl FnOnce(&str),
) -> Result<(), SimError> {
    let fixture = Fixture::load(path)?;
    let what =
        format!("{} {} ({} exchanges)", fixture.server, fixture.version, fixture.exchanges.len());
    let handle = start_replay(fixture, host, port).await?;
    announce(&format!("replaying {what} on {}", handle.base_url()));
    let _ = tokio::signal::ctrl_c().await;
    handle.shutdown().await;
    Ok(())
}

/// The largest request head or body read.
const MAX_REQUEST: usize = 8 << 20;

/// Answer requests on one connection until it closes or an answer closes it.
async fn connection(mut sock: TcpStream, fixture: Arc<Fixture>, log: Arc<Mutex<Vec<Served>>>) {
    let mut buf = Vec::new();
    loop {
        let Some((method, path, body, arrived)) = read_request(&mut sock, &mut buf).await else {
            return;
        };
        let json: Option<Value> = serde_json::from_slice(&body).ok();
        let x = fixture.find(&method, &path, json.as_ref().and_then(Value::as_object));
        if let Ok(mut l) = log.lock() {
            l.push(Served {
                exchange: x.map(|x| x.name.clone()),
                request: format!("{method} {path}"),
                body: json.clone(),
            });
        }
        let keep = match x {
            Some(x) => answer(&mut sock, x, arrived).await,
            None => {
                let msg = format!(
                    "{{\"detail\":\"no exchange of the fixture matches {method} {path}\"}}"
                );
                let head = format!(
                    "HTTP/1.1 404 Not Found\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
                    msg.len()
                );
                sock.write_all(head.as_bytes()).await.is_ok()
                    && sock.write_all(msg.as_bytes()).await.is_ok()
            }
        };
        if !keep {
            let _ = sock.shutdown().await;
            return;
        }
    }
}

/// Read one request: method, path, body and when its last byte arrived. `None` when the
/// connection closed or the request is not one this server reads.
async fn read_request(
    sock: &mut TcpStream,
    buf: &mut Vec<u8>,
) -> Option<(String, String, Vec<u8>, Instant)> {
    let mut chunk = [0u8; 16 << 10];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        if buf.len() > MAX_REQUEST {
            return None;
        }
        let n = sock.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut first = lines.next()?.split(' ');
    let method = first.next()?.to_string();
    let path = first.next()?.to_string();
    let length: usize = lines
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.trim().eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.trim().parse().ok())
        .unwrap_or(0);
    if length > MAX_REQUEST {
        return None;
    }
    while buf.len() < head_end + length {
        let n = sock.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let arrived = Instant::now();
    let body = buf[head_end..head_end + length].to_vec();
    buf.drain(..head_end + length);
    Some((method, path, body, arrived))
}

/// Write one exchange's answer; whether the connection can carry another request.
async fn answer(sock: &mut TcpStream, x: &Exchange, arrived: Instant) -> bool {
    let reason = x.reason.clone().unwrap_or_else(|| {
        http::StatusCode::from_u16(x.status)
            .ok()
            .and_then(|s| s.canonical_reason())
            .unwrap_or("")
            .to_string()
    });
    let mut encoder = x.encoding.map(Encoder::new);
    // Every frame is encoded before anything is written, so a `length` body can be measured
    // and the writes carry exactly what the client will read.
    let mut pieces: Vec<Vec<u8>> = Vec::with_capacity(x.frames.len() + 1);
    for f in &x.frames {
        let bytes = f.bytes().unwrap_or_default();
        pieces.push(match encoder.as_mut() {
            Some(e) => e.frame(&bytes),
            None => bytes,
        });
    }
    if let Some(e) = encoder {
        pieces.push(e.finish());
    }
    let mut head = format!("HTTP/1.1 {} {reason}\r\n", x.status);
    for (k, v) in &x.headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    match (x.encoding, x.headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("content-encoding"))) {
        (Some(Encoding::Gzip), false) => head.push_str("content-encoding: gzip\r\n"),
        (Some(Encoding::Deflate), false) => head.push_str("content-encoding: deflate\r\n"),
        _ => {}
    }
    match x.framing {
        Framing::Chunked => head.push_str("transfer-encoding: chunked\r\n"),
        Framing::Close => head.push_str("connection: close\r\n"),
        Framing::Length => {
            let n: usize = pieces.iter().map(Vec::len).sum();
            head.push_str(&format!("content-length: {n}\r\n"));
        }
    }
    head.push_str("\r\n");
    if sock.write_all(head.as_bytes()).await.is_err() {
        return false;
    }
    let times = x.frame_times_ms();
    for (i, piece) in pieces.iter().enumerate() {
        // The encoder's closing bytes go with the last frame.
        if let Some(ms) = times.get(i) {
            tokio::time::sleep_until(arrived + Duration::from_secs_f64(ms.max(0.0) / 1000.0)).await;
        }
        if piece.is_empty() {
            continue;
        }
        let wrote = match x.framing {
            Framing::Chunked => {
                let mut c = format!("{:x}\r\n", piece.len()).into_bytes();
                c.extend_from_slice(piece);
                c.extend_from_slice(b"\r\n");
                sock.write_all(&c).await
            }
            _ => sock.write_all(piece).await,
        };
        if wrote.is_err() {
            return false;
        }
    }
    match x.framing {
        Framing::Chunked => sock.write_all(b"0\r\n\r\n").await.is_ok(),
        Framing::Close => false,
        Framing::Length => true,
    }
}

/// A streaming compressor flushed at each frame, as a server compressing a stream must.
enum Encoder {
    Gzip(flate2::write::GzEncoder<Vec<u8>>),
    Deflate(flate2::write::ZlibEncoder<Vec<u8>>),
}

impl Encoder {
    fn new(e: Encoding) -> Encoder {
        let level = flate2::Compression::default();
        match e {
            Encoding::Gzip => Encoder::Gzip(flate2::write::GzEncoder::new(Vec::new(), level)),
            Encoding::Deflate => {
                Encoder::Deflate(flate2::write::ZlibEncoder::new(Vec::new(), level))
            }
        }
    }

    fn frame(&mut self, bytes: &[u8]) -> Vec<u8> {
        fn step<W: Write>(w: &mut W, b: &[u8]) {
            let _ = w.write_all(b);
            let _ = w.flush();
        }
        match self {
            Encoder::Gzip(e) => {
                step(e, bytes);
                std::mem::take(e.get_mut())
            }
            Encoder::Deflate(e) => {
                step(e, bytes);
                std::mem::take(e.get_mut())
            }
        }
    }

    fn finish(self) -> Vec<u8> {
        match self {
            Encoder::Gzip(e) => e.finish().unwrap_or_default(),
            Encoder::Deflate(e) => e.finish().unwrap_or_default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIXTURE: &str = r#"
server: Example
family: example
version: "1"
exchanges:
  - name: refuse
    path: /v1/completions
    when: {has: [ignore_eos]}
    status: 422
    headers: {content-type: application/json}
    framing: length
    frames: ['{"detail":"no"}']
  - name: stream
    path: /v1/completions
    headers:
      content-type: text/event-stream
    first_ms: 40
    gap_ms: 10
    frames:
      - "data: a\n\n"
      - {raw: "data: b\n\n", after_ms: 5}
      - {b64: "ZGF0YTogW0RPTkVdCgo="}
"#;

    #[test]
    fn exchanges_match_in_order_and_frames_are_timed() {
        let f = Fixture::parse(FIXTURE).unwrap();
        let body = |v: Value| v.as_object().cloned();
        let eos = body(serde_json::json!({"ignore_eos": true}));
        assert_eq!(f.find("POST", "/v1/completions", eos.as_ref()).unwrap().name, "refuse");
        let plain = body(serde_json::json!({"stream": true}));
        let x = f.find("post", "/v1/completions?x=1", plain.as_ref()).unwrap();
        assert_eq!(x.name, "stream");
        assert_eq!(x.frame_times_ms(), vec![40.0, 45.0, 55.0]);
        assert_eq!(x.frames[2].bytes().unwrap(), b"data: [DONE]\n\n");
        assert!(f.find("GET", "/v1/completions", None).is_none());
    }

    #[test]
    fn bad_fixtures_are_refused_with_the_reason() {
        let twice = FIXTURE.replace("name: refuse", "name: stream");
        assert_eq!(Fixture::parse(&twice).unwrap_err(), "exchange name 'stream' appears twice");
        let typo = FIXTURE.replace("first_ms", "frist_ms");
        assert!(Fixture::parse(&typo).unwrap_err().contains("frist_ms"));
    }
}
