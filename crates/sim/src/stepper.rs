//! The engine-model mode of the simulator (`--engine FILE`): one task owns a
//! `servelab_engine::Engine` and runs its steps in wall-clock time. A request is added when
//! its stream starts; the tokens of each step are handed to their requests when the step
//! ends, so when a token is sent depends on everything else in the batch, as in a real
//! engine: TPOT rises with concurrency, throughput saturates, queues build past saturation,
//! and requests are preempted when KV blocks run out. The engine's gauges are published for
//! `/metrics` after every step.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use servelab_engine::{CostModel, Engine, EngineConfig, RequestShape, StepOutcome};
use servelab_timer::PreciseTimer;
use tokio::sync::{mpsc, watch};

use crate::spec::{verify_extra_ns, Speculation};

/// Tokens of one step for one request, handed over when the step ends.
#[derive(Debug, Clone, PartialEq)]
pub struct Emit {
    /// Tokens produced for the request by the step.
    pub tokens: u32,
    /// When the step ended (the tokens' due time).
    pub at: Instant,
    /// The request's last tokens.
    pub last: bool,
    /// The engine refused the request (it can never fit its KV cache).
    pub error: Option<String>,
}

/// The engine's gauges as `/metrics` shows them (kept as atomics: read without locks).
#[derive(Debug, Default)]
pub struct Gauges {
    /// Requests running on some worker.
    pub running: AtomicU64,
    /// Requests waiting (API server and scheduler queues).
    pub waiting: AtomicU64,
    /// KV blocks in use over all blocks, as `f64` bits.
    pub kv_usage_bits: AtomicU64,
    /// Preemptions so far.
    pub preemptions: AtomicU64,
    /// Prefix-cache lookups and hits, in tokens.
    pub prefix_queries: AtomicU64,
    /// See `prefix_queries`.
    pub prefix_hits: AtomicU64,
    /// Speculative decoding: tokens drafted so far (K per decode step).
    pub spec_drafted: AtomicU64,
    /// Speculative decoding: drafted tokens accepted so far.
    pub spec_accepted: AtomicU64,
}

impl Gauges {
    /// KV-cache usage in [0, 1].
    pub fn kv_usage(&self) -> f64 {
        f64::from_bits(self.kv_usage_bits.load(Relaxed))
    }
}

struct Add {
    id: u64,
    shape: RequestShape,
    out: mpsc::UnboundedSender<Emit>,
    /// Speculative decoding: the tokens of each of the request's steps (the engine runs one
    /// step per entry).
    steps: Option<Vec<u32>>,
}

/// Where a request's tokens go, and how far it has come.
struct Out {
    tx: mpsc::UnboundedSender<Emit>,
    /// See [`Add::steps`].
    steps: Option<Vec<u32>>,
    /// Steps handed over so far.
    done_steps: usize,
    /// Tokens in its KV cache: prompt and tokens sent.
    ctx: u64,
}

impl Out {
    /// The client tokens of the engine's next `k` tokens (steps, under speculation).
    fn take(&mut self, k: u32) -> u32 {
        let n = match &self.steps {
            Some(steps) => {
                let end = (self.done_steps + k as usize).min(steps.len());
                steps[self.done_steps.min(end)..end].iter().sum()
            }
            None => k,
        };
        self.done_steps += k as usize;
        self.ctx += u64::from(n);
        n
    }
}

/// What the engine task is told, and when it happened: a request joins, or one whose client
/// went away leaves.
enum Msg {
    Add(Add, Instant),
    Abort(u64, Instant),
}

/// One request's tokens as the engine's steps produce them. Dropping it before the last
/// token (the client disconnected) aborts the request in the engine, freeing its sequence
/// slot and KV blocks as a real engine does.
#[derive(Debug)]
pub struct Feed {
    rx: mpsc::UnboundedReceiver<Emit>,
    id: u64,
    done: bool,
    tx: mpsc::UnboundedSender<Msg>,
}

impl Feed {
    /// The next step's tokens for this request.
    pub fn poll_recv(&mut self, cx: &mut std::task::Context<'_>) -> std::task::Poll<Option<Emit>> {
        let p = self.rx.poll_recv(cx);
        if let std::task::Poll::Ready(Some(e)) = &p {
            self.done |= e.last || e.error.is_some();
        }
        p
    }

    /// [`Feed::poll_recv`] as a future.
    #[cfg(test)]
    pub async fn recv(&mut self) -> Option<Emit> {
        std::future::poll_fn(|cx| self.poll_recv(cx)).await
    }
}

impl Drop for Feed {
    fn drop(&mut self) {
        if !self.done {
            // The task may already be gone (shutdown): nothing left to free then.
            let _ = self.tx.send(Msg::Abort(self.id, Instant::now()));
        }
    }
}

/// The handle requests use to join the engine-model batch.
#[derive(Debug)]
pub struct Stepper {
    tx: mpsc::UnboundedSender<Msg>,
    next_id: AtomicU64,
    /// The engine's gauges.
    pub gauges: Arc<Gauges>,
    _stop: watch::Sender<bool>,
}

impl std::fmt::Debug for Add {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Add").field("shape", &self.shape).finish()
    }
}

impl Stepper {
    /// Start the engine task for `cfg` on the current tokio runtime, with speculative
    /// decoding `spec` if any; it stops when the stepper is dropped.
    pub fn start(cfg: &EngineConfig, spec: Option<Speculation>) -> Result<Stepper, String> {
        let engine = Engine::new(cfg).map_err(|e| format!("--engine: {e}"))?;
        let spec = match spec {
            Some(_) if engine.workers() > 1 || cfg.pd.is_some() => {
                return Err(format!(
                    "--speculative-tokens: modelled for one worker (one TP group); this \
                     deployment has {} (replicas or P/D pools)",
                    engine.workers()
                ))
            }
            Some(s) => Some((s, CostModel::new(&cfg.worker(cfg.tp)))),
            None => None,
        };
        let timer = PreciseTimer::start().map_err(|e| format!("engine timer thread: {e}"))?;
        let (tx, rx) = mpsc::unbounded_channel();
        let (stop, stop_rx) = watch::channel(false);
        let gauges = Arc::new(Gauges::default());
        tokio::spawn(drive(engine, spec, timer, rx, stop_rx, gauges.clone()));
        Ok(Stepper { tx, next_id: AtomicU64::new(0), gauges, _stop: stop })
    }

    /// Add a request of `prompt_tokens` generating exactly `output_tokens`, whose prompt's
    /// blocks of `hash_block_tokens` tokens have the prefix hashes `block_hashes` (empty: no
    /// prefix-cache reuse): its tokens arrive on the returned feed as the engine's steps
    /// produce them. Under speculative decoding, `steps` holds the tokens of each of its steps
    /// ([`Speculation::plan`]), summing to `output_tokens`.
    pub fn add(
        &self,
        prompt_tokens: u64,
        output_tokens: u64,
        block_hashes: Vec<u64>,
        hash_block_tokens: u32,
        steps: Option<Vec<u32>>,
    ) -> Feed {
        let (out, rx) = mpsc::unbounded_channel();
        let id = self.next_id.fetch_add(1, Relaxed);
        // The engine runs one step per planned step: it is told of steps, not tokens.
        let engine_tokens = steps.as_ref().map_or(output_tokens, |s| s.len() as u64);
        let shape = RequestShape {
            prompt_tokens: u32::try_from(prompt_tokens).unwrap_or(u32::MAX),
            output_tokens: u32::try_from(engine_tokens).unwrap_or(u32::MAX).max(1),
            block_hashes,
            hash_block_tokens,
        };
        // The task only stops with the stepper, so the send cannot fail while it lives.
        let _ = self.tx.send(Msg::Add(Add { id, shape, out, steps }, Instant::now()));
        Feed { rx, id, done: false, tx: self.tx.clone() }
    }
}

/// The engine task: add arriving requests, start steps on idle workers, hand each step's
/// tokens over when it ends, sleep until the next step ends or a request arrives.
///
/// The engine runs on its own clock: a worker's next step starts when its previous one ends
/// (or when a request arrives at an idle worker), not when this task happens to wake. So a
/// late wakeup (a loaded machine) delays the hand-over of tokens past their due time, which
/// the truth log counts as the simulator's lateness, instead of silently stretching the
/// model's schedule.
///
/// Under speculative decoding each step ends later by the cost of verifying the drafted
/// tokens ([`verify_extra_ns`]), and the engine's next step waits for that end (`hold`).
async fn drive(
    mut engine: Engine,
    spec: Option<(Speculation, CostModel)>,
    timer: PreciseTimer,
    mut rx: mpsc::UnboundedReceiver<Msg>,
    mut stop: watch::Receiver<bool>,
    gauges: Arc<Gauges>,
) {
    let t0 = Instant::now();
    let ns = |i: Instant| i.saturating_duration_since(t0).as_nanos() as u64;
    let at = |n: u64| t0 + Duration::from_nanos(n);
    let mut clock = Clock::default();
    let mut outs: HashMap<u64, Out> = HashMap::new();
    // Speculative decoding: no step starts before the previous one's verification ends.
    let mut hold = 0u64;
    let next_event = |e: &Engine, hold: u64| e.next_event_ns().map(|t| t.max(hold));
    // Started steps by end time (and a sequence number for ties).
    let mut steps: BTreeMap<(u64, u64), StepOutcome> = BTreeMap::new();
    let mut seq = 0u64;
    let mut arrived: VecDeque<Msg> = VecDeque::new();
    loop {
        let wall = ns(Instant::now());
        // Catch the engine up with the wall clock, event by event in its own time.
        while let Some(ev) =
            clock.next(next_event(&engine, hold), arrived.front().map(|m| ns(m.at())), wall)
        {
            match ev {
                Next::Step(t) => {
                    while let Some(mut o) = engine.step(t) {
                        if let Some((sp, cost)) = &spec {
                            let decode_ctx: Vec<u64> = o
                                .emitted
                                .iter()
                                .filter(|(id, _)| !o.first_token.contains(id))
                                .filter_map(|(id, _)| outs.get(id).map(|x| x.ctx))
                                .collect();
                            let prefill = o.batch_tokens.saturating_sub(decode_ctx.len() as u64);
                            o.end_ns += verify_extra_ns(cost, sp.tokens, &decode_ctx, prefill);
                            hold = hold.max(o.end_ns);
                        }
                        seq += 1;
                        steps.insert((o.end_ns, seq), o);
                    }
                    clock.stepped(t);
                }
                Next::Message(t) => match arrived.pop_front() {
                    Some(Msg::Abort(id, _)) => {
                        engine.abort(id);
                        outs.remove(&id);
                    }
                    Some(Msg::Add(a, _)) => match engine.add_request(a.id, a.shape.clone(), t) {
                        Ok(()) => {
                            let ctx = u64::from(a.shape.prompt_tokens);
                            outs.insert(
                                a.id,
                                Out { tx: a.out, steps: a.steps, done_steps: 0, ctx },
                            );
                        }
                        Err(e) => {
                            let _ = a.out.send(Emit {
                                tokens: 0,
                                at: at(t),
                                last: true,
                                error: Some(e.to_string()),
                            });
                        }
                    },
                    None => {}
                },
            }
        }
        // Hand over the tokens of every step that has ended.
        while let Some(entry) = steps.first_entry() {
            if entry.key().0 > wall {
                break;
            }
            let o = entry.remove();
            let when = at(o.end_ns);
            for &(id, k) in &o.emitted {
                let last = o.finished.contains(&id);
                if let Some(out) = outs.get_mut(&id) {
                    let tokens = out.take(k);
                    if let (Some((sp, _)), false) = (&spec, o.first_token.contains(&id)) {
                        gauges.spec_drafted.fetch_add(u64::from(sp.tokens), Relaxed);
                        gauges
                            .spec_accepted
                            .fetch_add(u64::from(tokens.saturating_sub(1)), Relaxed);
                    }
                    let _ = out.tx.send(Emit { tokens, at: when, last, error: None });
                }
                if last {
                    outs.remove(&id);
                }
            }
        }
        publish(&engine, &gauges);
        let next =
            [steps.first_key_value().map(|(k, _)| k.0), clock.pending(next_event(&engine, hold))]
                .into_iter()
                .flatten()
                .min();
        let sleep = async {
            match next {
                Some(n) => timer.sleep_until(at(n.max(wall))).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            a = rx.recv() => match a {
                Some(a) => {
                    arrived.push_back(a);
                    while let Ok(a) = rx.try_recv() {
                        arrived.push_back(a);
                    }
                }
                None => return,
            },
            () = sleep => {}
            _ = stop.changed() => return,
        }
    }
}

impl Msg {
    fn at(&self) -> Instant {
        match self {
            Msg::Add(_, t) | Msg::Abort(_, t) => *t,
        }
    }
}

/// What the engine does next on its own clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Next {
    /// Start the steps due at this time.
    Step(u64),
    /// Take the first message, at this time.
    Message(u64),
}

/// The engine's own time: it only moves forward, through the engine's events and the
/// messages' times, never past the wall clock.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Clock {
    /// The engine's time now.
    now: u64,
    /// Steps were started at this time and nothing has arrived since: an engine event not
    /// after it is one the engine could not act on (it would only repeat).
    stepped: Option<u64>,
}

impl Clock {
    /// The next event not after `wall`: the engine's next event `engine`, or the first
    /// message, sent at `message`. A message goes first on a tie, so a request arriving as a
    /// step ends joins the next step (as in the virtual-time driver). Moves the clock there.
    fn next(&mut self, engine: Option<u64>, message: Option<u64>, wall: u64) -> Option<Next> {
        let message = message.map(|t| t.max(self.now));
        let engine = self.pending(engine).map(|t| t.max(self.now));
        let next = match (engine, message) {
            (Some(e), Some(m)) if e < m => Next::Step(e),
            (_, Some(m)) => Next::Message(m),
            (Some(e), None) => Next::Step(e),
            (None, None) => return None,
        };
        let (Next::Step(t) | Next::Message(t)) = next;
        if t > wall {
            return None;
        }
        self.now = t;
        if matches!(next, Next::Message(_)) {
            self.stepped = None;
        }
        Some(next)
    }

    /// Steps were started at `t`.
    fn stepped(&mut self, t: u64) {
        self.stepped = Some(t);
    }

    /// The engine's next event, unless it is one already acted on.
    fn pending(&self, engine: Option<u64>) -> Option<u64> {
        engine.filter(|&t| self.stepped.is_none_or(|s| t > s))
    }
}

fn publish(engine: &Engine, g: &Gauges) {
    let s = engine.snapshot();
    g.running.store(u64::from(s.running), Relaxed);
    g.waiting.store(u64::from(s.waiting), Relaxed);
    g.kv_usage_bits.store(s.kv_usage.to_bits(), Relaxed);
    g.preemptions.store(s.preemptions_total, Relaxed);
    g.prefix_queries.store(s.prefix_cache_queries, Relaxed);
    g.prefix_hits.store(s.prefix_cache_hits, Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;
    use servelab_engine::EngineFile;

    #[tokio::test]
    async fn tokens_come_step_by_step_and_the_gauges_follow() {
        let cfg = EngineFile::parse("model: qwen3-8b\ngpu: h100\n").unwrap().build(None).unwrap();
        let s = Stepper::start(&cfg, None).unwrap();
        let t = Instant::now();
        let mut a = s.add(100, 5, Vec::new(), 0, None);
        let mut b = s.add(100, 5, Vec::new(), 0, None);
        let mut got = Vec::new();
        while let Some(e) = a.recv().await {
            got.push(e);
        }
        assert_eq!(got.iter().map(|e| e.tokens).sum::<u32>(), 5);
        assert!(got.last().unwrap().last && got.iter().all(|e| e.error.is_none()));
        assert!(got.windows(2).all(|w| w[0].at < w[1].at), "one step after another");
        assert!(got[0].at > t);
        let mut n = 0;
        while let Some(e) = b.recv().await {
            n += e.tokens;
        }
        assert_eq!(n, 5);
        assert_eq!(s.gauges.running.load(Relaxed), 0);
    }

    #[tokio::test]
    async fn a_request_that_can_never_fit_is_refused() {
        let cfg = EngineFile::parse("model: qwen3-8b\ngpu: h100\nscheduler: {num_gpu_blocks: 4}\n")
            .unwrap()
            .build(None)
            .unwrap();
        let s = Stepper::start(&cfg, None).unwrap();
        let mut r = s.add(5000, 5, Vec::new(), 0, None);
        let e = r.recv().await.unwrap();
        assert!(e.error.unwrap().contains("KV blocks"));
        assert!(r.recv().await.is_none());
    }

    /// A client that goes away mid-stream frees its sequence slot: with one slot, the next
    /// request starts as soon as the first one's feed is dropped, not after its 10,000 tokens.
    #[tokio::test]
    async fn a_dropped_feed_aborts_the_request() {
        let cfg = EngineFile::parse("model: qwen3-8b\ngpu: h100\nscheduler: {max_num_seqs: 1}\n")
            .unwrap()
            .build(None)
            .unwrap();
        let s = Stepper::start(&cfg, None).unwrap();
        let mut long = s.add(100, 10_000, Vec::new(), 0, None);
        let mut short = s.add(100, 3, Vec::new(), 0, None);
        assert!(long.recv().await.unwrap().error.is_none());
        assert_eq!(s.gauges.waiting.load(Relaxed), 1, "the short one waits for the slot");
        drop(long);
        let t = Instant::now();
        let mut n = 0;
        while let Some(e) = short.recv().await {
            n += e.tokens;
        }
        assert_eq!(n, 3);
        // Three decode steps of a small batch, not 10,000 steps of the long request.
        assert!(t.elapsed() < Duration::from_secs(20), "{:?}", t.elapsed());
    }

    /// The engine's clock takes events in time order, a message first on a tie, never past
    /// the wall clock nor backwards, and skips an engine event it has already acted on.
    #[test]
    fn the_engine_clock_orders_events_and_never_runs_ahead() {
        let mut c = Clock::default();
        assert_eq!(c.next(Some(10), Some(10), 100), Some(Next::Message(10)));
        assert_eq!(c.next(Some(10), Some(20), 100), Some(Next::Step(10)));
        c.stepped(10);
        // Not acted on again, nor is a message sent earlier taken before the clock's time.
        assert_eq!(c.next(Some(10), Some(5), 100), Some(Next::Message(10)));
        assert_eq!(c.next(Some(30), None, 100), Some(Next::Step(30)));
        c.stepped(30);
        assert_eq!(c.next(Some(30), None, 100), None);
        assert_eq!(c.pending(Some(30)), None);
        assert_eq!(c.next(Some(130), Some(120), 100), None, "not past the wall clock");
        assert_eq!(c.now, 30);
    }

    /// The end of each of the engine model's steps for one request served alone, in virtual
    /// time: what the stepper must reproduce on the wall clock.
    fn solo_step_ends(cfg: &EngineConfig, shape: RequestShape) -> Vec<u64> {
        let mut e = Engine::new(cfg).unwrap();
        e.add_request(0, shape, 0).unwrap();
        let (mut ends, mut now) = (Vec::new(), 0);
        loop {
            while let Some(o) = e.step(now) {
                ends.push(o.end_ns);
            }
            let Some(n) = e.next_event_ns() else { break };
            now = n;
        }
        ends
    }

    /// A late wakeup of the engine task (here: its runtime blocked for 100 ms) delays when
    /// tokens are handed over, never the model's schedule: the steps still run back to back on
    /// the engine's own times, so the lateness shows as tokens sent after their due time.
    #[tokio::test]
    async fn a_late_wakeup_keeps_the_models_schedule() {
        let cfg = EngineFile::parse("model: qwen3-8b\ngpu: h100\n").unwrap().build(None).unwrap();
        let shape = RequestShape { prompt_tokens: 100, output_tokens: 12, ..Default::default() };
        // The model's step ends for this request alone, in virtual time.
        let ends = solo_step_ends(&cfg, shape);
        let want: Vec<u64> = ends.windows(2).map(|w| w[1] - w[0]).collect();

        let s = Stepper::start(&cfg, None).unwrap();
        let mut f = s.add(100, 12, Vec::new(), 0, None);
        let first = f.recv().await.unwrap();
        std::thread::sleep(Duration::from_millis(100));
        let mut got = vec![(first, Instant::now())];
        while let Some(e) = f.recv().await {
            got.push((e, Instant::now()));
        }
        let gaps: Vec<u64> =
            got.windows(2).map(|w| (w[1].0.at - w[0].0.at).as_nanos() as u64).collect();
        assert_eq!(gaps, want, "steps back to back on the model's times");
        let (next, seen) = &got[1];
        let late = seen.saturating_duration_since(next.at);
        assert!(late > Duration::from_millis(50), "handed over late: {late:?}");
    }

    /// Speculative decoding in the engine model: each step sends its planned tokens (here all
    /// three drafts accepted: 1, then 4 and 4), the engine runs one step per planned step, and
    /// each decode step ends later by exactly the roofline cost of verifying 4 tokens instead
    /// of one at the request's context (101, then 105 tokens); the drafted and accepted
    /// counters follow.
    #[tokio::test]
    async fn speculative_steps_carry_their_tokens_and_pay_for_verification() {
        let cfg = EngineFile::parse("model: qwen3-8b\ngpu: h100\n").unwrap().build(None).unwrap();
        // The engine's own steps for a request of 3 steps, in virtual time.
        let shape = RequestShape { prompt_tokens: 100, output_tokens: 3, ..Default::default() };
        let ends = solo_step_ends(&cfg, shape);
        assert_eq!(ends.len(), 3);
        let cost = CostModel::new(&cfg.worker(cfg.tp));
        let verify = |ctx: u64| verify_extra_ns(&cost, 3, &[ctx], 0);
        let want = vec![ends[1] - ends[0] + verify(101), ends[2] - ends[1] + verify(105)];
        assert!(verify(101) > 0);

        let spec = Speculation::new(3, 1.0).unwrap();
        let s = Stepper::start(&cfg, Some(spec)).unwrap();
        let plan = vec![1, 4, 4];
        let mut f = s.add(100, 9, Vec::new(), 0, Some(plan));
        let mut got = Vec::new();
        while let Some(e) = f.recv().await {
            got.push(e);
        }
        let tokens: Vec<u32> = got.iter().map(|e| e.tokens).collect();
        assert_eq!(tokens, vec![1, 4, 4]);
        assert!(got[2].last && !got[1].last);
        let gaps: Vec<u64> =
            got.windows(2).map(|w| (w[1].at - w[0].at).as_nanos() as u64).collect();
        assert_eq!(gaps, want);
        assert_eq!(s.gauges.spec_drafted.load(Relaxed), 6);
        assert_eq!(s.gauges.spec_accepted.load(Relaxed), 6);
    }

    /// Speculation is modelled for one worker: a deployment of replicas is refused, by flag.
    #[tokio::test]
    async fn speculation_over_replicas_is_refused() {
        let cfg = EngineFile::parse("model: qwen3-8b\ngpu: h100\nreplicas: 2\n")
            .unwrap()
            .build(None)
            .unwrap();
        let e = Stepper::start(&cfg, Some(Speculation::new(2, 0.5).unwrap())).unwrap_err();
        assert!(e.contains("--speculative-tokens"), "{e}");
    }

    /// Prompts sharing their leading block hashes hit the prefix cache.
    #[tokio::test]
    async fn shared_prefix_blocks_hit_the_cache() {
        let cfg = EngineFile::parse("model: qwen3-8b\ngpu: h100\n").unwrap().build(None).unwrap();
        let s = Stepper::start(&cfg, None).unwrap();
        let blocks: Vec<u64> = (1..=8).collect();
        for _ in 0..2 {
            let mut f = s.add(128, 1, blocks.clone(), 16, None);
            while f.recv().await.is_some() {}
        }
        // The second prompt finds all but the last block (one token must be computed).
        assert_eq!(s.gauges.prefix_queries.load(Relaxed), 256);
        assert_eq!(s.gauges.prefix_hits.load(Relaxed), 112);
    }
}
