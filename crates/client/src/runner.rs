//! The measuring loop: one loop for every load mode.
//!
//! A dispatcher walks the precomputed arrival schedule. For each arrival it waits until the
//! arrival time, then (with a concurrency cap) for a free slot, and starts the request with its
//! *intended* send time = max(arrival, moment the slot was freed). Rate-limited open loop,
//! closed loop (`--max-concurrency`, rate inf), and both combined are the same code.
//! Requests are never dropped for being late; lateness is recorded (`sent_ns − intended_ns`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Method, Request};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use servelab_load::{Arrival, Arrivals, Dispatch, Exhausted};
use servelab_records::{FailureKind, Outcome, RequestRecord, SessionTurn};
use tokio::sync::{mpsc, watch};

use crate::ahead::{Ahead, Order};
use crate::http::{connect, drive, Conn, Pool, Target};
use crate::limits::{guarded, Expired, Limits};
use crate::scrape::Baseline;
use crate::session::{Reply, SessionRun};
use crate::sse::human_bytes;
use crate::stream::{fail, Progress as StreamProgress, StreamReader};
use crate::timed_io::{since_epoch, ReadEnd, ReadStamp};

pub use crate::planned::{PlannedRequest, RequestSource};

/// Everything the loop needs.
#[derive(Debug, Clone)]
pub struct RunConfig {
    /// Where requests go.
    pub target: Target,
    /// Measured requests, in order. In duration mode they are cycled.
    pub requests: Vec<PlannedRequest>,
    /// Measured requests written on demand instead of `requests`, a bounded number of
    /// arrivals ahead of their sends (the first ones before the clock starts): a long trace's
    /// bodies are never all in memory. With `ids`, local request `i` is the source's request
    /// `ids[i]`. `None`: `requests`.
    pub source: Option<Arc<dyn RequestSource>>,
    /// Warm-up requests, run before the clock starts and recorded with `warmup: true`.
    pub warmups: Vec<PlannedRequest>,
    /// How intended send times are spaced.
    pub arrivals: Arrivals,
    /// A replay: measured request `i` is due at `send_at[i]` ns after the run origin (e.g. a
    /// trace's timestamps), overriding `arrivals`; `None`: the arrival process decides.
    pub send_at: Option<Arc<[u64]>>,
    /// The index each measured request is recorded (and identified to the server) under:
    /// request `i` is `ids[i]`. A shard of a larger run sends part of the global schedule and
    /// keeps the global indices, so the shards' records merge without collisions. `None`:
    /// request `i` is `i`.
    pub ids: Option<Arc<[u64]>>,
    /// The wall-clock instant the measured phase's origin is (time zero of `send_at` and the
    /// arrival schedule), shared by the shards of one run; `None`: when the measured phase
    /// starts. An instant already past makes the requests due before now late, and counted
    /// so, never dropped.
    pub start_at: Option<std::time::SystemTime>,
    /// Seeds the arrival schedule: the same seed gives the same send times.
    pub seed: u64,
    /// At most this many requests in flight; a request due while all slots are busy is
    /// intended for the moment one frees. `None`: no cap.
    pub max_concurrency: Option<usize>,
    /// Stop issuing new requests after this long (measured phase), then drain.
    pub duration: Option<Duration>,
    /// A request that has not finished after this long fails with `timeout`.
    pub request_timeout: Duration,
    /// A stream that sends nothing for this long after its first output chunk fails with
    /// `timeout` ("stalled"); `None`: only `request_timeout` applies.
    pub stall_timeout: Option<Duration>,
    /// How long in-flight requests may finish after an interrupt before they are cancelled.
    pub drain_timeout: Duration,
    /// Connections to open before the clock starts.
    pub preconnect: usize,
    /// Multi-turn sessions: each arrival starts one and its turns go one after another
    /// (`requests` is then unused in the measured phase); `None`: single requests.
    pub sessions: Option<Arc<SessionRun>>,
    /// Taken after warm-ups, before the measured phase starts (see [`Baseline`]).
    pub baseline: Option<Arc<Baseline>>,
}

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

/// Why issuing stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// Every planned request was issued.
    Exhausted,
    /// `--duration` elapsed.
    Duration,
    /// The user interrupted (Ctrl-C).
    Interrupted,
}

/// What the loop reports when it returns; the records themselves went to the sink as they
/// finished.
#[derive(Debug, Clone, Copy)]
pub struct RunEnd {
    /// Why issuing stopped.
    pub stop: StopReason,
    /// The measured phase's origin, for converting record offsets back to instants.
    pub origin: Instant,
    /// Measured requests issued (each has a record).
    pub issued: u64,
}

/// Shared state of one phase.
struct Ctx {
    target: Target,
    pool: Pool,
    origin: Instant,
    /// `origin` in read-stamp time (ns since the process epoch).
    origin_epoch_ns: u64,
    timeout: Duration,
    stall_timeout: Option<Duration>,
    progress: Arc<Progress>,
    sink: mpsc::UnboundedSender<RequestRecord>,
    /// Flips to true when in-flight requests must stop now.
    abort: watch::Receiver<bool>,
}

impl Ctx {
    fn now_ns(&self) -> u64 {
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

/// Run warm-ups, then the measured phase. Each finished request is sent to `sink` at once, so
/// a crash or interrupt loses nothing already measured. `interrupt` flipping to true stops
/// issuing; requests still running `drain_timeout` later are cancelled and recorded as such.
pub async fn run(
    cfg: RunConfig,
    progress: Arc<Progress>,
    sink: mpsc::UnboundedSender<RequestRecord>,
    interrupt: watch::Receiver<bool>,
) -> std::io::Result<RunEnd> {
    let pool = Pool::default();
    let conns = cfg.preconnect.max(1).min(cfg.max_concurrency.unwrap_or(usize::MAX));
    // A server that stopped accepting after it answered readiness leaves a connect hanging
    // for the kernel's SYN retries (over two minutes): bound it as a request is bounded.
    let mut stop = interrupt.clone();
    let opening =
        crate::http::unless_interrupted(&mut stop, pool.preconnect(cfg.target.addr, conns));
    match tokio::time::timeout(cfg.request_timeout, opening).await {
        Err(_) => {
            return Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!(
                    "no connection to {} opened within {:.0} s (--request-timeout): the server \
                     accepts no connections",
                    cfg.target.addr,
                    cfg.request_timeout.as_secs_f64()
                ),
            ))
        }
        Ok(None) => {
            return Ok(RunEnd { stop: StopReason::Interrupted, origin: Instant::now(), issued: 0 })
        }
        Ok(Some(opened)) => opened?,
    }
    let mut pool = Some(pool);
    if !cfg.warmups.is_empty() {
        let warm = Phase {
            requests: &cfg.warmups,
            warmup: true,
            arrivals: Arrivals::Burst,
            send_at: None,
            ids: None,
            start_at: None,
            duration: None,
            sessions: None,
            source: None,
        };
        let (end, p) =
            phase(&cfg, warm, pool.take().unwrap_or_default(), &progress, &sink, &interrupt).await;
        pool = Some(p);
        if end.stop == StopReason::Interrupted {
            return Ok(end);
        }
        if let Some(b) = &cfg.baseline {
            b.take().await;
        }
    }
    let measured = Phase {
        requests: &cfg.requests,
        warmup: false,
        arrivals: cfg.arrivals,
        send_at: cfg.send_at.clone(),
        ids: cfg.ids.clone(),
        start_at: cfg.start_at,
        duration: cfg.duration,
        sessions: cfg.sessions.clone(),
        source: cfg.source.clone(),
    };
    let (end, _) =
        phase(&cfg, measured, pool.unwrap_or_default(), &progress, &sink, &interrupt).await;
    Ok(end)
}

struct Phase<'a> {
    requests: &'a [PlannedRequest],
    warmup: bool,
    arrivals: Arrivals,
    send_at: Option<Arc<[u64]>>,
    ids: Option<Arc<[u64]>>,
    start_at: Option<std::time::SystemTime>,
    duration: Option<Duration>,
    sessions: Option<Arc<SessionRun>>,
    source: Option<Arc<dyn RequestSource>>,
}

/// The monotonic instant of wall-clock `at`: later than now when `at` is to come, earlier
/// when it is past (but never before the read-stamp epoch, which the records' times are
/// converted through).
fn origin_at(at: std::time::SystemTime) -> Instant {
    let now = Instant::now();
    match at.duration_since(std::time::SystemTime::now()) {
        Ok(ahead) => now + ahead,
        Err(past) => {
            let age = Duration::from_nanos(since_epoch(now));
            now.checked_sub(past.duration().min(age)).unwrap_or(now)
        }
    }
}

async fn phase(
    cfg: &RunConfig,
    ph: Phase<'_>,
    pool: Pool,
    progress: &Arc<Progress>,
    sink: &mpsc::UnboundedSender<RequestRecord>,
    interrupt: &watch::Receiver<bool>,
) -> (RunEnd, Pool) {
    let duration_ns = ph.duration.map(|d| d.as_nanos() as u64);
    // What an arrival starts: a request, or a whole session.
    // A shard's sessions (and on-demand requests) are its share of the global ones (`ids`).
    let units = match (&ph.sessions, &ph.source, &ph.ids) {
        (Some(_), _, Some(ids)) | (None, Some(_), Some(ids)) => ids.len(),
        (Some(s), _, None) => s.len(),
        (None, Some(src), None) => src.len(),
        (None, None, _) => ph.requests.len(),
    };
    // Written before the clock starts: the first window of on-demand bodies.
    let ahead = match (&ph.source, &ph.sessions) {
        (Some(src), None) => {
            // A replay never cycles; a duration run cycles until its end.
            let cycles = ph.duration.is_some() && ph.send_at.is_none();
            let end = if cycles { u64::MAX } else { units as u64 };
            let order = Order { units, ids: ph.ids.clone(), end };
            Some(Ahead::start(src.clone(), order).await)
        }
        _ => None,
    };
    let (abort_tx, abort_rx) = watch::channel(false);
    let origin = ph.start_at.map_or_else(Instant::now, origin_at);
    let ctx = Arc::new(Ctx {
        target: cfg.target.clone(),
        pool,
        origin,
        origin_epoch_ns: since_epoch(origin),
        timeout: cfg.request_timeout,
        stall_timeout: cfg.stall_timeout,
        progress: progress.clone(),
        sink: sink.clone(),
        abort: abort_rx,
    });
    let issue = Arc::new(Issue {
        ctx: ctx.clone(),
        requests: ph.requests.into(),
        ahead,
        sessions: ph.sessions,
        interrupt: interrupt.clone(),
        warmup: ph.warmup,
        ids: ph.ids,
        dispatch: Mutex::new(match ph.send_at {
            // Only as many instants as requests: a replay never cycles.
            Some(at) if at.len() > units => Dispatch::at_offsets(at[..units].into(), duration_ns),
            Some(at) => Dispatch::at_offsets(at, duration_ns),
            None => Dispatch::new(ph.arrivals, cfg.seed, units, duration_ns),
        }),
    });
    let mut tasks = tokio::task::JoinSet::new();
    match cfg.max_concurrency {
        // A cap of N is N workers: the task that frees a slot takes the next arrival itself,
        // with no hand-off through another task that a loaded runtime would schedule late.
        Some(cap) => {
            let n = issue.dispatch().most_in_flight(cap);
            for i in 0..n {
                // A large cap takes a while to spawn: an interrupt stops it.
                if i % 1024 == 0 && *interrupt.borrow() {
                    break;
                }
                tasks.spawn(worker(issue.clone(), interrupt.clone()));
            }
        }
        // No cap: one task per arrival.
        None => {
            let mut interrupt = interrupt.clone();
            while let Some(a) = issue.next_arrival() {
                if !wait_for_arrival(origin, a.scheduled_ns, &mut interrupt).await {
                    break;
                }
                let issue = issue.clone();
                tasks.spawn(async move {
                    issue.send(a, a.scheduled_ns).await;
                });
                // Reap finished tasks so the set does not grow with the whole run.
                while tasks.try_join_next().is_some() {}
            }
        }
    }

    let mut interrupt = interrupt.clone();
    drain(&mut tasks, cfg.drain_timeout, &mut interrupt, &abort_tx).await;
    let (stopped, issued) = {
        let d = issue.dispatch.lock().unwrap_or_else(|e| e.into_inner());
        (d.stopped(), d.issued())
    };
    let stop = if *interrupt.borrow() {
        StopReason::Interrupted
    } else if stopped == Some(Exhausted::Duration) {
        StopReason::Duration
    } else {
        StopReason::Exhausted
    };
    drop(issue);
    let pool = match Arc::try_unwrap(ctx) {
        Ok(ctx) => ctx.pool,
        Err(_) => Pool::default(),
    };
    (RunEnd { stop, origin, issued }, pool)
}

/// What the tasks issuing one phase's requests share.
struct Issue {
    ctx: Arc<Ctx>,
    requests: Arc<[PlannedRequest]>,
    /// On-demand requests, written ahead (replaces `requests`).
    ahead: Option<Ahead>,
    /// Multi-turn mode: arrivals start these sessions instead of `requests`.
    sessions: Option<Arc<SessionRun>>,
    /// Stops a session between turns.
    interrupt: watch::Receiver<bool>,
    warmup: bool,
    /// Global indices of the requests (see [`RunConfig::ids`]).
    ids: Option<Arc<[u64]>>,
    /// Taken only to hand out the next arrival, never while a request runs.
    dispatch: Mutex<Dispatch>,
}

impl Issue {
    fn dispatch(&self) -> std::sync::MutexGuard<'_, Dispatch> {
        self.dispatch.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn next_arrival(&self) -> Option<Arrival> {
        self.dispatch().next_arrival()
    }

    /// Send arrival `a`, due at `intended_ns`; returns when it ended (ns since origin). In
    /// multi-turn mode the arrival is a session, and it ends with its last turn.
    async fn send(self: Arc<Self>, a: Arrival, intended_ns: u64) -> u64 {
        if let Some(sessions) = &self.sessions {
            return self.send_session(sessions, a, intended_ns).await;
        }
        let taken;
        let planned = match &self.ahead {
            Some(ahead) => {
                taken = ahead.take(a.index);
                &taken
            }
            None => &self.requests[a.request],
        };
        let rec = self.record(self.global_index(a), a.scheduled_ns, intended_ns, planned);
        one_request(&self.ctx, planned.body.clone(), rec, false).await.0
    }

    /// The index arrival `a` is recorded (and identified to the server) under: its global
    /// index in a shard ([`RunConfig::ids`]), else its own.
    fn global_index(&self, a: Arrival) -> u64 {
        match &self.ids {
            Some(ids) => ids.get(a.request).copied().unwrap_or(a.index),
            None => a.index,
        }
    }

    /// A record for request `index` before it is sent.
    fn record(
        &self,
        index: u64,
        scheduled_ns: u64,
        intended_ns: u64,
        planned: &PlannedRequest,
    ) -> RequestRecord {
        RequestRecord {
            index,
            warmup: self.warmup,
            scheduled_ns,
            intended_ns,
            sent_ns: 0,
            prompt_tokens: planned.prompt_tokens,
            max_tokens: planned.max_tokens,
            usage: None,
            chunks: Vec::new(),
            end_ns: None,
            status: None,
            outcome: Outcome::Success,
            server: None,
            read_lag_ns: None,
            retries: 0,
            session: None,
            stream: Default::default(),
        }
    }

    /// Run the session of arrival `a`: its first turn due at `intended_ns`, each later turn
    /// its think time after the previous reply ended (both its scheduled and intended time:
    /// the client, not a queue, decides it). A failed turn, an interrupt or the duration
    /// limit ends the session: later turns would resend a history that never happened.
    async fn send_session(&self, run: &SessionRun, a: Arrival, intended_ns: u64) -> u64 {
        // In a shard, the arrival is the global session `global_index(a)`.
        let g = self.global_index(a);
        let s = run.session_of(g);
        let mut replies = Vec::with_capacity(run.turns(s));
        let (mut scheduled, mut due, mut end) = (a.scheduled_ns, intended_ns, intended_ns);
        for k in 0..run.turns(s) {
            if k > 0 {
                due = end.saturating_add(run.think_ns(s, k));
                scheduled = due;
                if self.dispatch().past_duration(due) {
                    break;
                }
                let mut interrupt = self.interrupt.clone();
                if !wait_for_arrival(self.ctx.origin, due, &mut interrupt).await {
                    break;
                }
            }
            let turn = SessionTurn { session: g, turn: k as u32 };
            let planned = match run.turn(s, k, &replies) {
                Ok(p) => p,
                Err(e) => {
                    // A history that cannot be written is a failed turn, never a wrong prompt.
                    let mut rec = self.record(run.record_index(g, k), scheduled, due, &NO_BODY);
                    rec.session = Some(turn);
                    return unsent(&self.ctx, rec, format!("cannot write the turn's request: {e}"));
                }
            };
            let mut rec = self.record(run.record_index(g, k), scheduled, due, &planned);
            rec.session = Some(turn);
            let (e, reply) = one_request(&self.ctx, planned.body, rec, true).await;
            end = e;
            match reply {
                Some(r) => replies.push(r),
                None => break,
            }
        }
        end
    }
}

/// The request of a turn that could not be written (see [`unsent`]).
const NO_BODY: PlannedRequest =
    PlannedRequest { body: Bytes::new(), prompt_tokens: None, max_tokens: None };

/// Record `rec` as failed before anything was sent (its request could not be written), at
/// now; returns now.
fn unsent(ctx: &Ctx, mut rec: RequestRecord, message: String) -> u64 {
    let now = ctx.now_ns();
    rec.sent_ns = now;
    rec.end_ns = Some(now);
    rec.outcome = fail(FailureKind::Connect, message);
    ctx.progress.started.fetch_add(1, Ordering::Relaxed);
    ctx.progress.failed.fetch_add(1, Ordering::Relaxed);
    let _ = ctx.sink.send(rec);
    now
}

/// One concurrency slot: take the next arrival whenever free. Its intended send time is the
/// later of its arrival and the moment this slot freed.
async fn worker(issue: Arc<Issue>, mut interrupt: watch::Receiver<bool>) {
    let mut free_at = 0u64;
    while !*interrupt.borrow() {
        let Some(a) = issue.next_arrival() else { return };
        if !wait_for_arrival(issue.ctx.origin, a.scheduled_ns, &mut interrupt).await {
            return;
        }
        let intended = a.scheduled_ns.max(free_at);
        // Duration mode: a request whose slot freed after the end is not issued.
        if issue.dispatch().past_duration(intended) {
            issue.dispatch().stop_for_duration();
            return;
        }
        free_at = issue.clone().send(a, intended).await;
    }
}

/// Wait until the arrival is due; false if interrupted first.
async fn wait_for_arrival(
    origin: Instant,
    scheduled_ns: u64,
    interrupt: &mut watch::Receiver<bool>,
) -> bool {
    let due = origin + Duration::from_nanos(scheduled_ns);
    if due > Instant::now() {
        tokio::select! {
            _ = sleep_until(due) => {}
            _ = interrupt.wait_for(|v| *v) => return false,
        }
    }
    !*interrupt.borrow()
}

/// Sleep until `due` with the sub-millisecond timer: tokio's wheel rounds up to the next
/// millisecond, which would add up to 1 ms of schedule lag to every paced arrival.
async fn sleep_until(due: Instant) {
    match servelab_timer::global() {
        Some(timer) => timer.sleep_until(due).await,
        None => tokio::time::sleep_until(due.into()).await,
    }
}

/// Wait for every issuing task. After an interrupt (before or during the wait) requests in
/// flight get `grace` to finish, then are told to abort and record what they have.
async fn drain<T: 'static>(
    tasks: &mut tokio::task::JoinSet<T>,
    grace: Duration,
    interrupt: &mut watch::Receiver<bool>,
    abort: &watch::Sender<bool>,
) {
    let all_done = async { while tasks.join_next().await.is_some() {} };
    tokio::pin!(all_done);
    tokio::select! {
        _ = &mut all_done => return,
        _ = interrupt.wait_for(|v| *v) => {}
    }
    tokio::select! {
        _ = &mut all_done => return,
        _ = tokio::time::sleep(grace) => {}
    }
    let _ = abort.send(true);
    all_done.await;
}

/// Send one request, record every chunk until the stream ends, hand the record to the sink;
/// returns when the response ended (ns since origin), and with `keep_reply` the reply of a
/// successful request (what the next turn of a session resends).
async fn one_request(
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

/// The HTTP exchange proper. Fills `rec` as data arrives, so a timeout or abort keeps the
/// chunks received so far.
async fn exchange(ctx: &Ctx, body: Bytes, rec: &mut RequestRecord, limits: &Limits) -> Outcome {
    let (mut conn, mut reused) = match ctx.pool.take() {
        Some(c) => (c, true),
        None => match connect(ctx.target.addr).await {
            Ok(c) => (c, false),
            Err(e) => return connect_failed(ctx, &e),
        },
    };
    let resp = loop {
        let req = match build_request(ctx, body.clone(), rec) {
            Ok(r) => r,
            Err(e) => return fail(FailureKind::Connect, format!("cannot build request: {e}")),
        };
        // Driving the pooled connection first notices a close that already arrived; nothing
        // was sent on it, so a fresh connection here is not a retry.
        if drive(&mut conn.driver, conn.sender.ready()).await.is_err() {
            conn = match connect(ctx.target.addr).await {
                Ok(c) => c,
                Err(e) => return connect_failed(ctx, &e),
            };
            reused = false;
        }
        conn.reads.begin_exchange();
        rec.sent_ns = ctx.now_ns();
        let sent = conn.sender.send_request(req);
        match drive(&mut conn.driver, sent).await {
            Ok(r) => break r,
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
                conn = match connect(ctx.target.addr).await {
                    Ok(c) => c,
                    Err(e) => return connect_failed(ctx, &e),
                };
                reused = false;
            }
            Err(e) => return fail(classify_hyper(&e), format!("sending request: {e}")),
        }
    };
    let status = resp.status();
    rec.status = Some(status.as_u16());
    let header =
        |name| resp.headers().get(name).map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
    let resp_type = header(http::header::CONTENT_TYPE);
    let location = if status.is_redirection() { header(http::header::LOCATION) } else { None };
    let encoding = header(http::header::CONTENT_ENCODING);
    let mut body = resp.into_body();
    if !status.is_success() {
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
        return fail(FailureKind::HttpStatus, message);
    }

    let mut reader = match StreamReader::new(status.as_u16(), resp_type, encoding.as_deref()) {
        Ok(r) => r,
        Err(outcome) => return outcome,
    };
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
