//! HTTP/1.1 serving: the accept loop, the per-connection socket wrapper that can end a
//! connection with a TCP RST, routing, and the request handlers.

use std::io;
use std::pin::Pin;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{header, HeaderValue, Method, Request, Response, StatusCode};
use http_body::{Body, Frame};
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::api::{self, ApiError, Endpoint, Render};
use crate::body::{Job, SseBody};
use crate::conn::{ConnFlags, ConnIo};
use crate::engine::{
    finish, natural_length, output_length, Arrival, Generation, SimEngine, Slot, Waiting,
};
use crate::fault::{draw_fault, Fault};
use crate::truth::TruthChunk;

/// Largest request body accepted.
const MAX_BODY_BYTES: usize = 32 << 20;

/// Any response body the sim sends.
pub enum SimBody {
    Full(Option<Bytes>),
    Sse(Box<SseBody>),
}

impl Body for SimBody {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        match self.get_mut() {
            SimBody::Full(b) => Poll::Ready(b.take().map(|b| Ok(Frame::data(b)))),
            SimBody::Sse(s) => Pin::new(s.as_mut()).poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        matches!(self, SimBody::Full(None))
    }

    fn size_hint(&self) -> http_body::SizeHint {
        match self {
            SimBody::Full(Some(b)) => http_body::SizeHint::with_exact(b.len() as u64),
            SimBody::Full(None) => http_body::SizeHint::with_exact(0),
            SimBody::Sse(_) => http_body::SizeHint::default(),
        }
    }
}

type Resp = Response<SimBody>;

fn response(status: u16, content_type: &'static str, body: impl Into<Bytes>) -> Resp {
    let mut r = Response::new(SimBody::Full(Some(body.into())));
    *r.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    r
}

fn json(status: u16, body: impl Into<Bytes>) -> Resp {
    response(status, "application/json", body)
}

fn error(e: &ApiError) -> Resp {
    let mut r = json(e.status, e.body());
    if e.status == 429 {
        r.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    }
    r
}

/// The error answered for a status fault.
fn fault_error(f: Fault) -> ApiError {
    match f {
        Fault::RateLimit => {
            ApiError::new(429, "RateLimitError", "servelab-sim injected rate limit")
        }
        Fault::Unavailable => {
            ApiError::new(503, "ServiceUnavailableError", "servelab-sim injected unavailability")
        }
        _ => ApiError::new(500, "InternalServerError", "servelab-sim injected server error"),
    }
}

fn reset_now() -> io::Error {
    io::Error::new(io::ErrorKind::ConnectionReset, "servelab-sim injected reset")
}

/// Route one request.
async fn route(
    engine: Arc<SimEngine>,
    reset: Arc<ConnFlags>,
    req: Request<Incoming>,
) -> Result<Resp, io::Error> {
    let path = req.uri().path().to_string();
    let endpoint = match path.as_str() {
        "/v1/completions" => Some(Endpoint::Completions),
        "/v1/chat/completions" => Some(Endpoint::Chat),
        _ => None,
    };
    let get_paths = ["/health", "/v1/models", "/metrics"];
    match (req.method(), endpoint) {
        (&Method::POST, Some(ep)) => generate(engine, reset, ep, req).await,
        (_, Some(_)) => Ok(method_not_allowed("POST")),
        (&Method::GET, None) if path == "/health" => {
            let status = if engine.starting_up() { 503 } else { 200 };
            let mut r = response(status, "application/json", Bytes::new());
            // Tells servelab's preflight that this server honours every field as asked.
            if engine.cfg.quirks == crate::quirk::Quirks::NONE {
                r.headers_mut().insert("x-servelab-sim", HeaderValue::from_static("exact"));
            }
            Ok(r)
        }
        // The quirks: routes of a server that fails or lacks them.
        (&Method::GET, None) if path == "/v1/models" && engine.cfg.quirks.models_error => {
            Ok(response(500, "text/plain; charset=utf-8", "Internal Server Error"))
        }
        (&Method::GET, None) if path == "/metrics" && engine.cfg.quirks.no_metrics => {
            Ok(json(404, r#"{"detail":"Not Found"}"#))
        }
        (&Method::GET, None) if path == "/v1/models" => Ok(json(
            200,
            api::models_body(&engine.cfg.model, engine.created, engine.cfg.max_model_len),
        )),
        (&Method::GET, None) if path == "/metrics" => Ok(response(
            200,
            "text/plain; version=0.0.4; charset=utf-8",
            engine
                .metrics
                .render_with(&engine.cfg.model, engine.stepper.as_ref().map(|s| &*s.gauges)),
        )),
        (_, None) if get_paths.contains(&path.as_str()) => Ok(method_not_allowed("GET")),
        _ => Ok(json(404, r#"{"detail":"Not Found"}"#)),
    }
}

fn method_not_allowed(allow: &'static str) -> Resp {
    let mut r = json(405, r#"{"detail":"Method Not Allowed"}"#);
    r.headers_mut().insert(header::ALLOW, HeaderValue::from_static(allow));
    r
}

/// A generation request: validate, apply faults, then stream or answer in full.
async fn generate(
    engine: Arc<SimEngine>,
    reset: Arc<ConnFlags>,
    endpoint: Endpoint,
    req: Request<Incoming>,
) -> Result<Resp, io::Error> {
    let seq = engine.next_seq.fetch_add(1, Relaxed);
    let header =
        |name: &str| req.headers().get(name).and_then(|v| v.to_str().ok()).map(str::to_string);
    let request_id = header("x-request-id");
    let fault_header = header("x-servelab-fault");
    let body = Limited::new(req.into_body(), MAX_BODY_BYTES).collect().await;
    let arrival = Arrival {
        seq,
        request_id,
        received: Instant::now(),
        images: Default::default(),
        text: Default::default(),
        reply: Default::default(),
        reasoning: Default::default(),
    };
    let reject = |e: ApiError, outcome: &str| {
        finish(&engine, &arrival, endpoint.name(), 0, 0, 0, Vec::new(), outcome);
        Ok(error(&e))
    };
    let body = match body {
        Ok(b) => b.to_bytes(),
        Err(e) => {
            return reject(
                ApiError::bad_request(format!("cannot read request body: {e}"), None),
                "bad-request",
            )
        }
    };
    if engine.starting_up() {
        let e = ApiError::new(503, "ServiceUnavailableError", "The server is starting up");
        return reject(e, "unavailable");
    }
    // Parsing and tokenizing a long prompt costs CPU; on the runtime's workers it would hold up
    // reading *other* requests, whose receipt (the truth's time zero) would then be late
    // without the truth showing it. On the parse threads it overlaps the TTFT budget instead.
    let parse_engine = engine.clone();
    let parsed = engine
        .parse_pool
        .run(move || {
            let e = &parse_engine;
            let needs = api::PromptNeeds {
                hashes: e.cfg.engine.as_ref().is_some_and(|c| c.scheduler.prefix_caching),
                text: e.cfg.truth_text,
            };
            api::parse_request(endpoint, &body, &e.cfg, &e.tokenizer, needs)
        })
        .await;
    let gen_req = match parsed {
        Some(Ok(mut r)) => {
            let _ = arrival.images.set(r.images.clone());
            if let Some(t) = r.prompt_text.take() {
                let _ = arrival.text.set(t);
            }
            r
        }
        Some(Err(e)) => return reject(e, "bad-request"),
        None => {
            let e = ApiError::new(503, "ServiceUnavailableError", "The server is shutting down");
            return reject(e, "unavailable");
        }
    };
    let mut rng = engine.request_rng(seq);
    let rate_fault = draw_fault(&engine.cfg.fault_rates, &mut rng);
    let fault = match fault_header.map(|h| h.parse::<Fault>()) {
        Some(Ok(f)) => Some(f),
        Some(Err(e)) => {
            let e = ApiError::bad_request(format!("x-servelab-fault: {e}"), None);
            return reject(e, "bad-request");
        }
        None => rate_fault,
    };
    if let Some(f) = fault {
        if f.status().is_some() {
            return reject(fault_error(f), f.kind());
        }
        if matches!(f, Fault::ResetBefore | Fault::CloseBefore) {
            finish(
                &engine,
                &arrival,
                endpoint.name(),
                gen_req.prompt_tokens,
                0,
                0,
                Vec::new(),
                f.kind(),
            );
            // An error from the service makes hyper drop the connection without a response:
            // with the reset flag as an RST, without it as a FIN (the request was read whole,
            // so the close is clean).
            if f == Fault::ResetBefore {
                reset.reset.store(true, Relaxed);
                return Err(reset_now());
            }
            return Err(io::Error::other("servelab-sim injected close"));
        }
    }
    let natural = natural_length(engine.cfg.eos_mean_tokens, &mut rng);
    let (total, finish_reason) = output_length(&gen_req, natural);
    let reasoning = engine.cfg.reasoning.draw(&mut rng);
    let gen = Generation::new(rng, &gen_req, total, finish_reason, reasoning);
    let _ = arrival.reasoning.set(gen.reasoning);
    let render = Render::new(
        endpoint,
        seq,
        engine.cfg.seed,
        engine.created,
        &engine.cfg.model,
        gen_req.prompt_tokens,
    );
    let job = Job { engine, arrival, req: gen_req, render, gen, fault, reset };
    if job.req.stream {
        let mut r = Response::new(SimBody::Sse(Box::new(SseBody::new(job))));
        r.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/event-stream; charset=utf-8"),
        );
        return Ok(r);
    }
    // If the client goes away while we wait, hyper drops this future: still record it.
    let guard = AbortGuard {
        engine: job.engine.clone(),
        arrival: job.arrival.clone(),
        endpoint,
        prompt_tokens: job.req.prompt_tokens,
        armed: true,
    };
    let r = complete(job).await;
    guard.disarm();
    r
}

/// Records an "aborted" truth record unless disarmed.
struct AbortGuard {
    engine: Arc<SimEngine>,
    arrival: Arrival,
    endpoint: Endpoint,
    prompt_tokens: u64,
    armed: bool,
}

impl AbortGuard {
    fn disarm(mut self) {
        self.armed = false;
    }
}

impl Drop for AbortGuard {
    fn drop(&mut self) {
        if self.armed {
            let (e, a) = (&self.engine, &self.arrival);
            finish(e, a, self.endpoint.name(), self.prompt_tokens, 0, 0, Vec::new(), "aborted");
        }
    }
}

/// A non-streaming response: sent whole when its last token is due.
async fn complete(mut job: Job) -> Result<Resp, io::Error> {
    let engine = job.engine.clone();
    // As for streams: the clock starts at receipt unless the request waited for a slot.
    let (permit, waited) = match &engine.slots {
        Some(sem) => match sem.clone().try_acquire_owned() {
            Ok(p) => (Some(p), false),
            Err(_) => {
                let _waiting = Waiting::new(&engine);
                (sem.clone().acquire_owned().await.ok(), true)
            }
        },
        None => (None, false),
    };
    let slot = Slot::new(&engine, permit);
    engine.metrics.prompt_tokens.fetch_add(job.req.prompt_tokens, Relaxed);
    let queue_ns = if waited { job.arrival.now_ns() } else { 0 };
    job.gen.start(&engine, queue_ns, job.arrival.received);
    let point = job.fault_point();
    let (mut reasoning, mut content) = (String::new(), String::new());
    let mut due_ns = queue_ns;
    let mut stalled = false;
    loop {
        if job.gen.sent() >= point {
            match job.fault {
                Some(Fault::Stall { secs }) if !stalled => {
                    stalled = true;
                    job.gen.stall(Duration::from_secs_f64(secs))
                }
                Some(Fault::ResetMid { .. }) => {
                    engine.timer.sleep_until(job.arrival.at(due_ns)).await;
                    let c = (job.gen.sent() > 0).then(|| vec![chunk(&job, due_ns)]);
                    drop(slot);
                    finish(
                        &engine,
                        &job.arrival,
                        job.req.endpoint.name(),
                        job.req.prompt_tokens,
                        job.gen.sent(),
                        queue_ns,
                        c.unwrap_or_default(),
                        job.outcome(),
                    );
                    job.reset.reset.store(true, Relaxed);
                    return Err(reset_now());
                }
                _ => {}
            }
        }
        let Some(ev) = job.gen.next_event_async(&engine).await else { break };
        due_ns = ev.due_ns;
        let shape = (ev.reasoning, ev.tokens, ev.cumulative);
        let phase = job.gen.reasoning;
        let (text, field) = crate::reasoning::sent_as(&engine.cfg.reasoning, phase, shape, ev.text);
        if field && job.req.endpoint == Endpoint::Chat {
            reasoning.push_str(&text);
        } else {
            content.push_str(&text);
        }
    }
    engine.timer.sleep_until(job.arrival.at(due_ns)).await;
    let total = job.gen.total;
    let c = chunk(&job, due_ns);
    if engine.cfg.truth_text {
        let _ = job.arrival.reply.set(content.clone());
    }
    engine.metrics.generation_tokens.fetch_add(total, Relaxed);
    drop(slot);
    let usage = !engine.cfg.quirks.no_usage;
    let resp = match job.fault {
        Some(Fault::StreamError) => {
            error(&ApiError::new(500, "InternalServerError", "servelab-sim injected stream error"))
        }
        Some(Fault::Malformed) => {
            // Cut in half by bytes (never panics on a char boundary): not valid JSON.
            let full = Bytes::from(job.render.full_response(
                &reasoning,
                &content,
                job.gen.finish,
                total,
                usage,
            ));
            json(200, full.slice(..full.len() / 2))
        }
        _ => {
            json(200, job.render.full_response(&reasoning, &content, job.gen.finish, total, usage))
        }
    };
    if job.fault.is_none() {
        let m = &engine.metrics;
        let ctr = if job.gen.finish == "stop" { &m.success_stop } else { &m.success_length };
        ctr.fetch_add(1, Relaxed);
    }
    finish(
        &engine,
        &job.arrival,
        job.req.endpoint.name(),
        job.req.prompt_tokens,
        total,
        queue_ns,
        vec![c],
        job.outcome(),
    );
    Ok(resp)
}

/// The single truth chunk of a non-streaming response, sent now.
fn chunk(job: &Job, due_ns: u64) -> TruthChunk {
    TruthChunk {
        tokens: job.gen.sent() as u32,
        intended_ns: due_ns,
        actual_ns: job.arrival.now_ns(),
    }
}

/// Serve one connection until it closes or the server shuts down.
async fn serve_conn(engine: Arc<SimEngine>, tcp: TcpStream, mut stop: watch::Receiver<bool>) {
    let _ = tcp.set_nodelay(true);
    let reset = Arc::new(ConnFlags::default());
    let io = ConnIo { tcp, flags: reset.clone() };
    // The no-keep-alive quirk: every response says `Connection: close`, and hyper then
    // closes the connection after it.
    let close = engine.cfg.quirks.no_keep_alive;
    let svc = hyper::service::service_fn(move |req| {
        let r = route(engine.clone(), reset.clone(), req);
        async move {
            let mut r = r.await?;
            if close {
                r.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
            }
            Ok::<_, io::Error>(r)
        }
    });
    let conn = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .keep_alive(!close)
        .serve_connection(TokioIo::new(io), svc);
    tokio::select! {
        _ = conn => {}
        _ = stopped(&mut stop) => {}
    }
}

/// Accept connections until `stop` turns true, then drop every connection (aborting
/// streams, whose truth records say "aborted").
pub async fn accept_loop(
    engine: Arc<SimEngine>,
    listener: TcpListener,
    mut stop: watch::Receiver<bool>,
) {
    let mut conns = JoinSet::new();
    let conn_stop = stop.clone();
    loop {
        tokio::select! {
            r = listener.accept() => match r {
                Ok((tcp, _)) => {
                    conns.spawn(serve_conn(engine.clone(), tcp, conn_stop.clone()));
                }
                // Out of file descriptors or similar: back off instead of spinning.
                Err(_) => tokio::time::sleep(Duration::from_millis(5)).await,
            },
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
            _ = stopped(&mut stop) => break,
        }
    }
    drop(listener);
    conns.shutdown().await;
}

/// Resolves once the stop flag is true (or its sender is gone).
async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}
