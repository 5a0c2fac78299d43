//! The measuring loop: one loop for every load mode.
//!
//! A dispatcher walks the precomputed arrival schedule. For each arrival it waits until the
//! arrival time, then (with a concurrency cap) for a free slot, and starts the request with its
//! *intended* send time = max(arrival, moment the slot was freed). Rate-limited open loop,
//! closed loop (`--max-concurrency`, rate inf), and both combined are the same code.
//! Requests are never dropped for being late; lateness is recorded (`sent_ns − intended_ns`).
//! What an arrival sends comes from a [`RequestSource`] (a request, or a session's turns one
//! after another); how one request goes on the wire and its stream is read is `wire`'s.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use servelab_load::{Arrival, Arrivals, Dispatch, Exhausted};
use servelab_records::{RequestRecord, SessionTurn};
use tokio::sync::{mpsc, watch};

use crate::ahead::{Ahead, Order};
use crate::http::{Pool, Target};
use crate::scrape::Baseline;
use crate::session::SessionRun;
use crate::source::RequestSource;
use crate::timed_io::since_epoch;
use crate::wire::{one_request, unsent, Ctx, NO_BODY};

pub use crate::planned::{PlannedRequest, RequestWriter};
pub use crate::wire::{measured_index, request_id, Progress, MAX_ERROR_BODY};

/// Everything the loop needs.
#[derive(Debug, Clone)]
pub struct RunConfig {
    /// Where requests go.
    pub target: Target,
    /// The measured requests, by unit (a request or a session); cycled in duration mode.
    pub source: RequestSource,
    /// Warm-up requests, run before the clock starts and recorded with `warmup: true`.
    pub warmups: Vec<PlannedRequest>,
    /// How intended send times are spaced.
    pub arrivals: Arrivals,
    /// A replay: measured request `i` is due at `send_at[i]` ns after the run origin (e.g. a
    /// trace's timestamps), overriding `arrivals`; `None`: the arrival process decides.
    pub send_at: Option<Arc<[u64]>>,
    /// The unit each measured arrival starts, and the index it is recorded (and identified to
    /// the server) under: arrival `i` is unit `ids[i]`. A shard of a larger run sends part of
    /// the global schedule and keeps the global indices, so the shards' records merge without
    /// collisions. `None`: arrival `i` is unit `i`.
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
    /// Taken after warm-ups, before the measured phase starts (see [`Baseline`]).
    pub baseline: Option<Arc<Baseline>>,
    /// How each response's reasoning is told from its answer (`--reasoning-parser`).
    pub reasoning_parser: crate::ReasoningParser,
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
            source: RequestSource::requests(cfg.warmups.clone()),
            warmup: true,
            arrivals: Arrivals::Burst,
            send_at: None,
            ids: None,
            start_at: None,
            duration: None,
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
        source: cfg.source.clone(),
        warmup: false,
        arrivals: cfg.arrivals,
        send_at: cfg.send_at.clone(),
        ids: cfg.ids.clone(),
        start_at: cfg.start_at,
        duration: cfg.duration,
    };
    let (end, _) =
        phase(&cfg, measured, pool.unwrap_or_default(), &progress, &sink, &interrupt).await;
    Ok(end)
}

/// One phase of a run: the warm-ups (all at once, before the clock) or the measured requests.
struct Phase {
    source: RequestSource,
    warmup: bool,
    arrivals: Arrivals,
    send_at: Option<Arc<[u64]>>,
    ids: Option<Arc<[u64]>>,
    start_at: Option<std::time::SystemTime>,
    duration: Option<Duration>,
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
    ph: Phase,
    pool: Pool,
    progress: &Arc<Progress>,
    sink: &mpsc::UnboundedSender<RequestRecord>,
    interrupt: &watch::Receiver<bool>,
) -> (RunEnd, Pool) {
    let duration_ns = ph.duration.map(|d| d.as_nanos() as u64);
    // What the arrivals start: a shard's are its share of the global units (`ids`).
    let units = ph.ids.as_ref().map_or(ph.source.units(), |ids| ids.len());
    // A replay never cycles; a duration run cycles until its end.
    let cycles = ph.duration.is_some() && ph.send_at.is_none();
    let order =
        Order { units, ids: ph.ids.clone(), end: if cycles { u64::MAX } else { units as u64 } };
    let units_sent = Units::start(ph.source, order).await;
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
        reasoning: cfg.reasoning_parser,
    });
    let issue = Arc::new(Issue {
        ctx: ctx.clone(),
        units: units_sent,
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
    let mut tasks = issue_all(&issue, cfg.max_concurrency, interrupt).await;
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

/// Hand out the phase's arrivals, one task each, or with a cap of N to N workers (the task
/// that frees a slot takes the next arrival itself, with no hand-off through another task
/// that a loaded runtime would schedule late); returns the tasks still running.
async fn issue_all(
    issue: &Arc<Issue>,
    max_concurrency: Option<usize>,
    interrupt: &watch::Receiver<bool>,
) -> tokio::task::JoinSet<()> {
    let mut tasks = tokio::task::JoinSet::new();
    match max_concurrency {
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
        None => {
            let mut interrupt = interrupt.clone();
            while let Some(a) = issue.next_arrival() {
                if !wait_for_arrival(issue.ctx.origin, a.scheduled_ns, &mut interrupt).await {
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
    tasks
}

/// What the arrivals of a phase start, ready to send (see [`RequestSource`]).
enum Units {
    /// Unit `g` is request `g` (cycled).
    Prompts(Arc<[PlannedRequest]>),
    /// Requests being written ahead of their arrivals.
    OnDemand(Ahead),
    /// Unit `g` is a session.
    Sessions(Arc<SessionRun>),
}

impl Units {
    /// `source`'s units, sent in `order`: on-demand bodies get their first window written
    /// now, before the clock starts.
    async fn start(source: RequestSource, order: Order) -> Units {
        match source {
            RequestSource::Prompts { requests, .. } => Units::Prompts(requests),
            RequestSource::Sessions(run) => Units::Sessions(run),
            RequestSource::OnDemand(writer) => Units::OnDemand(Ahead::start(writer, order).await),
        }
    }
}

/// What the tasks issuing one phase's requests share.
struct Issue {
    ctx: Arc<Ctx>,
    units: Units,
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
        let g = self.global_index(a);
        let planned = match &self.units {
            Units::Sessions(run) => return self.send_session(run, a, intended_ns).await,
            Units::OnDemand(ahead) => ahead.take(a.index),
            // A shard's arrival is the global request `g`.
            Units::Prompts(requests) => requests[(g % requests.len() as u64) as usize].clone(),
        };
        let rec = self.record(g, a.scheduled_ns, intended_ns, &planned);
        one_request(&self.ctx, planned.body, rec, false).await.0
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
            warmup: self.warmup,
            prompt_tokens: planned.prompt_tokens,
            max_tokens: planned.max_tokens,
            ..RequestRecord::due(index, scheduled_ns, intended_ns)
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
