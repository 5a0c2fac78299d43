//! One request on the wire: build the HTTP request, send it on a pooled connection (once
//! more on a fresh one when a kept-alive connection was closed unanswered), read the stream
//! chunk by chunk with each chunk stamped at the socket read that brought it, and hand the
//! finished record to the sink. The measuring loop ([`crate::runner`]) decides when; this
//! module only how.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Method, Request, Response};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use servelab_records::{FailureKind, Outcome, RequestRecord};
use tokio::sync::{mpsc, watch};

use crate::http::{connect, drive, Conn, Pool, Target};
use crate::limits::{guarded, Expired, Limits};
use crate::planned::PlannedRequest;
use crate::session::Reply;
use crate::sse::human_bytes;
use crate::stream::{fail, Progress as StreamProgress, StreamReader};
use crate::timed_io::{ReadEnd, ReadStamp};

/// Live counters for a progress display. Updated with relaxed atomics, never locked.
#[derive(Debug, Default)]
pub struct Progress {
    /// Requests sent so far (warm-ups included).
    pub started: AtomicU64,
    /// Requests that finished successfully.
    pub completed: AtomicU64,
    /// Requests that finished with a failure.
    pub failed: AtomicU64,
    /// Output chunks received so far.
    pub chunks: AtomicU64,
    /// Output tokens received so far: exact with per-chunk usage, else one per chunk (exact
    /// counts come after the run).
    pub tokens: AtomicU64,
    /// Requests sent a second time after a kept-alive connection closed unanswered (the sum of
    /// the records' `retries`).
    pub retries: AtomicU64,
}

/// Shared state of one phase: where requests go, its clock, where records go.
pub(crate) struct Ctx {
    pub(crate) target: Target,
    pub(crate) pool: Pool,
    pub(crate) origin: Instant,
    /// `origin` in read-stamp time (ns since the process epoch).
    pub(crate) origin_epoch_ns: u64,
    pub(crate) timeout: Duration,
    pub(crate) stall_timeout: Option<Duration>,
    pub(crate) progress: Arc<Progress>,
    pub(crate) sink: mpsc::UnboundedSender<RequestRecord>,
    /// Flips to true when in-flight requests must stop now.
    pub(crate) abort: watch::Receiver<bool>,
    /// How each response's reasoning is told from its answer.
    pub(crate) reasoning: crate::ReasoningParser,
}

impl Ctx {
    pub(crate) fn now_ns(&self) -> u64 {
        self.origin.elapsed().as_nanos() as u64
    }

    /// When the bytes that completed the current frame arrived, in run time (`now` if the
    /// connection has no stamp; never later than now, never earlier than `floor`), and now.
    fn read_ns(&self, reads: &ReadStamp, floor: u64) -> (u64, u64) {
        let now = self.now_ns();
        let t = match reads.last() {
            Some(t) => t.saturating_sub(self.origin_epoch_ns).clamp(floor, now.max(floor)),
            None => now,
        };
        (t, now)
    }
}

/// Send one request, record every chunk until the stream ends, hand the record to the sink;
/// returns when the response ended (ns since origin), and with `keep_reply` the reply of a
/// successful request (what the next turn of a session resends).
pub(crate) async fn one_request(
    ctx: &Ctx,
    body: Bytes,
    mut rec: RequestRecord,
    keep_reply: bool,
) -> (u64, Option<Reply>) {
    ctx.progress.started.fetch_add(1, Ordering::Relaxed);
    let origin = tokio::time::Instant::from_std(ctx.origin);
    let deadline = origin + Duration::from_nanos(rec.intended_ns) + ctx.timeout;
    let limits = Limits::new(origin, deadline, ctx.stall_timeout);
    let mut abort = ctx.abort.clone();
    let ended = tokio::select! {
        r = guarded(&limits, exchange(ctx, body, &mut rec, &limits)) => r,
        _ = abort.wait_for(|v| *v) => Ok(fail(FailureKind::Cancelled, "interrupted while in flight".into())),
    };
    let outcome = match ended {
        Ok(outcome) => outcome,
        Err(Expired::Timeout) => {
            fail(FailureKind::Timeout, format!("no complete response within {:?}", ctx.timeout))
        }
        Err(Expired::Stalled) => fail(
            FailureKind::Timeout,
            format!(
                "stream stalled: no data for {:.1} s after {} chunks",
                ctx.stall_timeout.unwrap_or_default().as_secs_f64(),
                rec.chunks.len()
            ),
        ),
    };
    let end = *rec.end_ns.get_or_insert_with(|| ctx.now_ns());
    let counter = if matches!(outcome, Outcome::Success) {
        &ctx.progress.completed
    } else {
        &ctx.progress.failed
    };
    counter.fetch_add(1, Ordering::Relaxed);
    let reply = (keep_reply && matches!(outcome, Outcome::Success)).then(|| Reply::of(&rec));
    rec.outcome = outcome;
    let _ = ctx.sink.send(rec);
    (end, reply)
}

/// The `x-request-id` sent with a request, so a server's logs (and the simulator's truth log)
/// can be joined with servelab's records.
pub fn request_id(rec: &RequestRecord) -> String {
    let phase = if rec.warmup { "w" } else { "" };
    format!("servelab-{phase}{}", rec.index)
}

/// The index of the measured request whose [`request_id`] is `id`; `None` for a warm-up's id
/// or one servelab did not send.
pub fn measured_index(id: &str) -> Option<u64> {
    id.strip_prefix("servelab-")?.parse().ok()
}

fn connect_failed(ctx: &Ctx, e: &std::io::Error) -> Outcome {
    fail(FailureKind::Connect, format!("connect {}: {e}", ctx.target.addr))
}

/// True when a connection ended before any byte of the response to the request just sent,
/// and the server had closed it cleanly (FIN) or refused our bytes: the signature of an idle
/// kept-alive connection closed by the server, as opposed to a reset of this request.
fn closed_unanswered(reads: &ReadStamp) -> bool {
    reads.last().is_none() && (reads.write_failed() || reads.end() == ReadEnd::Eof)
}

/// The HTTP exchange proper: send, then read the error or the stream. Fills `rec` as data
/// arrives, so a timeout or abort keeps the chunks received so far.
async fn exchange(ctx: &Ctx, body: Bytes, rec: &mut RequestRecord, limits: &Limits) -> Outcome {
    let (conn, resp) = match send(ctx, body, rec).await {
        Ok(sent) => sent,
        Err(outcome) => return outcome,
    };
    let status = resp.status();
    rec.status = Some(status.as_u16());
    let header =
        |name| resp.headers().get(name).map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
    let resp_type = header(http::header::CONTENT_TYPE);
    let location = if status.is_redirection() { header(http::header::LOCATION) } else { None };
    let encoding = header(http::header::CONTENT_ENCODING);
    let body = resp.into_body();
    if !status.is_success() {
        return refused(ctx, conn, body, status, location).await;
    }
    match StreamReader::new(status.as_u16(), resp_type, encoding.as_deref()) {
        Ok(reader) => {
            let reader = reader.with_reasoning_parser(ctx.reasoning);
            read_stream(ctx, conn, body, reader, rec, limits).await
        }
        Err(outcome) => outcome,
    }
}

/// Send the request on a pooled connection (a fresh one when none is idle), stamping
/// `rec.sent_ns`; the connection and the response head, or the failure.
async fn send(
    ctx: &Ctx,
    body: Bytes,
    rec: &mut RequestRecord,
) -> Result<(Conn, Response<Incoming>), Outcome> {
    let (mut conn, mut reused) = match ctx.pool.take() {
        Some(c) => (c, true),
        None => (connect(ctx.target.addr).await.map_err(|e| connect_failed(ctx, &e))?, false),
    };
    loop {
        let req = build_request(ctx, body.clone(), rec)
            .map_err(|e| fail(FailureKind::Connect, format!("cannot build request: {e}")))?;
        // Driving the pooled connection first notices a close that already arrived; nothing
        // was sent on it, so a fresh connection here is not a retry.
        if drive(&mut conn.driver, conn.sender.ready()).await.is_err() {
            conn = connect(ctx.target.addr).await.map_err(|e| connect_failed(ctx, &e))?;
            reused = false;
        }
        conn.reads.begin_exchange();
        rec.sent_ns = ctx.now_ns();
        let sent = conn.sender.send_request(req);
        match drive(&mut conn.driver, sent).await {
            Ok(r) => return Ok((conn, r)),
            // The keep-alive race: the server closed this idle connection (FIN, or our write
            // was refused) just as we reused it, and not a byte of an answer came. Send once
            // more on a fresh connection, and count it: the server may have seen the first
            // send too (a server that reads a request and closes without answering looks the
            // same from here). A reset (RST on an open connection) is the server refusing this
            // request and fails it, as does anything on a fresh connection. Latency still
            // counts from the intended send, so the stale connection's cost is measured.
            Err(_) if reused && rec.retries == 0 && closed_unanswered(&conn.reads) => {
                rec.retries += 1;
                ctx.progress.retries.fetch_add(1, Ordering::Relaxed);
                conn = connect(ctx.target.addr).await.map_err(|e| connect_failed(ctx, &e))?;
                reused = false;
            }
            Err(e) => return Err(fail(classify_hyper(&e), format!("sending request: {e}"))),
        }
    }
}

/// A response that is not a success: the failure says its status and the start of its body
/// (a redirect, where it points).
async fn refused(
    ctx: &Ctx,
    mut conn: Conn,
    mut body: Incoming,
    status: http::StatusCode,
    location: Option<String>,
) -> Outcome {
    let (bytes, whole) = read_capped(&mut conn, &mut body, MAX_ERROR_BODY).await;
    // A connection whose body was not read to its end cannot carry another request.
    if whole {
        ctx.pool.put(conn);
    }
    let text = String::from_utf8_lossy(&bytes[..bytes.len().min(300)]).into_owned();
    let mut message = format!("HTTP {}: {}", status.as_u16(), text.trim());
    if status.is_redirection() {
        let to = location.as_deref().unwrap_or("nowhere (no Location header)");
        message = format!(
            "HTTP {} redirect to {to}: servelab does not follow redirects; point --base-url \
             at the address that answers",
            status.as_u16()
        );
    }
    if !whole && bytes.len() > MAX_ERROR_BODY {
        message.push_str(&format!(
            " (error body longer than {}: not read further)",
            human_bytes(MAX_ERROR_BODY)
        ));
    }
    fail(FailureKind::HttpStatus, message)
}

/// Read the stream to its end, each chunk stamped at the socket read that brought it; the
/// connection goes back to the pool when the body was read whole.
async fn read_stream(
    ctx: &Ctx,
    mut conn: Conn,
    mut body: Incoming,
    mut reader: StreamReader,
    rec: &mut RequestRecord,
    limits: &Limits,
) -> Outcome {
    let mut last_t = rec.sent_ns;
    loop {
        let frame = match drive(&mut conn.driver, body.frame()).await {
            None => break,
            Some(Ok(f)) => f,
            Some(Err(e)) => return fail(classify_hyper(&e), format!("reading stream: {e}")),
        };
        // Stamped at the socket read that completed this frame, not when this task woke.
        let (t, now) = ctx.read_ns(&conn.reads, rec.chunks.last().map_or(rec.sent_ns, |c| c.t_ns));
        if conn.reads.is_arrival() {
            // How late this client handled bytes that had arrived: its own overhead.
            rec.read_lag_ns = rec.read_lag_ns.max(Some(now.saturating_sub(t)));
        }
        let Ok(data) = frame.into_data() else { continue };
        last_t = t;
        let before = rec.chunks.len();
        let progress = match reader.feed(&data, t, rec) {
            Ok(p) => p,
            Err(outcome) => return outcome,
        };
        // Once output has started, a silent stream is stuck (an engine stopping mid-stream
        // can keep its connections open: llama-server on SIGTERM does); before it, a long
        // queue or prefill is normal and only the request timeout applies.
        if !rec.chunks.is_empty() {
            limits.output_at(t);
        }
        let added = &rec.chunks[before..];
        ctx.progress.chunks.fetch_add(added.len() as u64, Ordering::Relaxed);
        // Exact when the server sends per-chunk usage; otherwise one per chunk, an estimate.
        let tokens: u64 = added.iter().map(|c| u64::from(c.tokens.unwrap_or(1))).sum();
        ctx.progress.tokens.fetch_add(tokens, Ordering::Relaxed);
        if progress == StreamProgress::Done {
            // The response ends at the read that carried [DONE].
            rec.end_ns = Some(t);
            // Read the body's terminator so the connection can be reused; a server that
            // keeps the body open after [DONE] only costs us the connection, not the result.
            let rest = async {
                while let Some(Ok(f)) = body.frame().await {
                    if let Ok(d) = f.into_data() {
                        let _ = reader.feed(&d, t, rec);
                    }
                }
            };
            let drained =
                tokio::time::timeout(Duration::from_secs(1), drive(&mut conn.driver, rest)).await;
            if drained.is_ok() {
                ctx.pool.put(conn);
            }
            return reader.finish(t, rec);
        }
    }
    // The body ended without [DONE]: complete if a finish_reason came, ending at the last read.
    let outcome = reader.finish(last_t, rec);
    if matches!(outcome, Outcome::Success) {
        rec.end_ns = Some(last_t);
        ctx.pool.put(conn);
    }
    outcome
}

/// How much of an error response's body is read: enough for any real error message; the
/// rest is left unread (the connection is then closed), never buffered.
pub const MAX_ERROR_BODY: usize = 64 << 10;

/// Read `body` until it ends or more than `cap` bytes came; returns at most `cap + 1` bytes
/// (one more than `cap` says it was cut) and whether the body was read to its end.
async fn read_capped(conn: &mut Conn, body: &mut Incoming, cap: usize) -> (Vec<u8>, bool) {
    let mut kept = Vec::new();
    loop {
        match drive(&mut conn.driver, body.frame()).await {
            None => return (kept, true),
            Some(Err(_)) => return (kept, false),
            Some(Ok(f)) => {
                if let Ok(data) = f.into_data() {
                    let take = data.len().min(cap + 1 - kept.len());
                    kept.extend_from_slice(&data[..take]);
                    if kept.len() > cap {
                        return (kept, false);
                    }
                }
            }
        }
    }
}

fn build_request(
    ctx: &Ctx,
    body: Bytes,
    rec: &RequestRecord,
) -> Result<Request<Full<Bytes>>, http::Error> {
    let req = Request::builder()
        .method(Method::POST)
        .uri(ctx.target.path.as_str())
        .header(http::header::HOST, ctx.target.authority.as_str())
        .header(http::header::CONTENT_TYPE, "application/json")
        .header(http::header::ACCEPT, "text/event-stream")
        // A compressed stream is decoded, but compression adds buffering that delays tokens.
        .header(http::header::ACCEPT_ENCODING, "identity")
        .header("x-request-id", request_id(rec));
    let mut req = req.body(Full::new(body))?;
    let headers = req.headers_mut();
    for (k, v) in &ctx.target.headers {
        // The user's Content-Type or Accept replaces servelab's; other names add a value.
        if k == http::header::CONTENT_TYPE || k == http::header::ACCEPT {
            headers.insert(k.clone(), v.clone());
        } else {
            headers.append(k.clone(), v.clone());
        }
    }
    Ok(req)
}

fn classify_hyper(e: &hyper::Error) -> FailureKind {
    if e.is_timeout() {
        FailureKind::Timeout
    } else if e.is_incomplete_message() || e.is_closed() || e.is_canceled() {
        FailureKind::Reset
    } else if e.is_parse() {
        FailureKind::Malformed
    } else {
        FailureKind::Reset
    }
}

/// The request of a turn that could not be written (see [`unsent`]).
pub(crate) const NO_BODY: PlannedRequest =
    PlannedRequest { body: Bytes::new(), prompt_tokens: None, max_tokens: None };

/// Record `rec` as failed before anything was sent (its request could not be written), at
/// now; returns now.
pub(crate) fn unsent(ctx: &Ctx, mut rec: RequestRecord, message: String) -> u64 {
    let now = ctx.now_ns();
    rec.sent_ns = now;
    rec.end_ns = Some(now);
    rec.outcome = fail(FailureKind::Connect, message);
    ctx.progress.started.fetch_add(1, Ordering::Relaxed);
    ctx.progress.failed.fetch_add(1, Ordering::Relaxed);
    let _ = ctx.sink.send(rec);
    now
}
