//! The simulated engine: shared state, decode slots, and the per-request generation plan
//! (how many tokens, which words, when each SSE event is due).

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Exp};
use std::task::{Context, Poll};

use servelab_workload::Tokenizer;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::stepper::Feed;

use crate::api::{GenRequest, PROMPT_BLOCK_TOKENS};
use crate::metrics::Metrics;
use crate::model::{EngineState, RequestShape, TokenClock};
use crate::truth::{ImageSeen, TruthChunk, TruthRecord, TruthSink};
use crate::{SimConfig, SimError};
use servelab_timer::PreciseTimer;

use crate::parse_pool::ParsePool;

/// Word pool size: plenty of variety, cheap to build once.
const WORD_POOL: usize = 2000;

/// The simulated engine: everything its requests share (not the engine model,
/// `servelab_engine::Engine`, which it drives in `--engine` mode).
#[derive(Debug)]
pub struct SimEngine {
    pub cfg: SimConfig,
    pub tokenizer: Tokenizer,
    /// Pre-decoded single-token words (each starts with a space), never decoded per chunk.
    pub words: Vec<String>,
    pub timer: PreciseTimer,
    /// Threads that parse and tokenize requests off the async workers.
    pub parse_pool: ParsePool,
    pub metrics: Metrics,
    pub truth: Arc<TruthSink>,
    /// Decode slots (`--max-num-seqs`); FIFO because tokio's semaphore is fair.
    pub slots: Option<Arc<Semaphore>>,
    pub next_seq: AtomicU64,
    /// Engine-model mode (`--engine`): the task running the engine's steps.
    pub stepper: Option<crate::stepper::Stepper>,
    pub started: Instant,
    /// Unix seconds at start, for `created` fields.
    pub created: u64,
}

impl SimEngine {
    /// Load the tokenizer and word pool and start the timer and truth writer (blocking).
    pub fn new(cfg: SimConfig) -> Result<Self, SimError> {
        let tokenizer = Tokenizer::from_spec(&cfg.tokenizer)
            .map_err(|e| SimError::Config(format!("--tokenizer: {e}")))?;
        let words: Vec<String> = tokenizer
            .word_tokens(WORD_POOL)
            .into_iter()
            .filter_map(|id| tokenizer.decode(&[id]).ok())
            .collect();
        if words.is_empty() {
            return Err(SimError::Config(format!(
                "--tokenizer {}: no single-token words found to generate text from",
                cfg.tokenizer
            )));
        }
        let truth = TruthSink::new(cfg.truth_log.as_deref()).map_err(|e| {
            SimError::Io(format!("cannot create truth log {:?}: {e}", cfg.truth_log))
        })?;
        let timer =
            PreciseTimer::start().map_err(|e| SimError::Io(format!("timer thread: {e}")))?;
        let parse_pool =
            ParsePool::start().map_err(|e| SimError::Io(format!("parse threads: {e}")))?;
        let created = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let stepper = match &cfg.engine {
            Some(e) => {
                Some(crate::stepper::Stepper::start(e, cfg.speculative).map_err(SimError::Config)?)
            }
            None => None,
        };
        Ok(Self {
            // The engine model has its own scheduler (max_num_seqs, KV blocks).
            slots: if stepper.is_some() {
                None
            } else {
                cfg.max_num_seqs.map(|n| Arc::new(Semaphore::new(n)))
            },
            stepper,
            cfg,
            tokenizer,
            words,
            timer,
            parse_pool,
            metrics: Metrics::default(),
            truth,
            next_seq: AtomicU64::new(0),
            started: Instant::now(),
            created,
        })
    }

    pub fn starting_up(&self) -> bool {
        self.started.elapsed() < self.cfg.startup
    }

    /// Requests running and waiting: the engine model's in `--engine` mode.
    pub fn state(&self) -> EngineState {
        if let Some(s) = &self.stepper {
            return EngineState {
                running: s.gauges.running.load(Relaxed),
                waiting: s.gauges.waiting.load(Relaxed),
            };
        }
        EngineState {
            running: self.metrics.running.load(Relaxed),
            waiting: self.metrics.waiting.load(Relaxed),
        }
    }

    /// The seeded RNG of request `seq` (splitmix-style mixing so nearby seqs differ).
    pub fn request_rng(&self, seq: u64) -> SmallRng {
        let mut z = self.cfg.seed ^ seq.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        SmallRng::seed_from_u64(z ^ (z >> 31))
    }
}

/// Marks a request as waiting for a slot; undone on drop.
#[derive(Debug)]
pub struct Waiting(Arc<SimEngine>);

impl Waiting {
    pub fn new(engine: &Arc<SimEngine>) -> Self {
        engine.metrics.waiting.fetch_add(1, Relaxed);
        Self(engine.clone())
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        self.0.metrics.waiting.fetch_sub(1, Relaxed);
    }
}

/// A held decode slot; counts as running until dropped.
#[derive(Debug)]
pub struct Slot {
    engine: Arc<SimEngine>,
    _permit: Option<OwnedSemaphorePermit>,
}

impl Slot {
    pub fn new(engine: &Arc<SimEngine>, permit: Option<OwnedSemaphorePermit>) -> Self {
        // In engine-model mode the engine counts its own running requests.
        if engine.stepper.is_none() {
            engine.metrics.running.fetch_add(1, Relaxed);
        }
        Self { engine: engine.clone(), _permit: permit }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        if self.engine.stepper.is_some() {
            return;
        }
        self.engine.metrics.running.fetch_sub(1, Relaxed);
    }
}

/// Output length and finish reason: the seeded natural length (EOS) is used unless
/// `ignore_eos` or it reaches `max_tokens`; never below `min_tokens`.
pub fn output_length(req: &GenRequest, natural: u64) -> (u64, &'static str) {
    if req.ignore_eos {
        return (req.max_tokens, "length");
    }
    let n = natural.max(req.min_tokens).max(1);
    if n >= req.max_tokens {
        (req.max_tokens, "length")
    } else {
        (n, "stop")
    }
}

/// A natural output length: exponential with the given mean, at least 1 token.
pub fn natural_length(mean: f64, rng: &mut impl Rng) -> u64 {
    let v = Exp::new(1.0 / mean.max(1.0)).map(|d| d.sample(rng)).unwrap_or(mean);
    (v.ceil() as u64).max(1)
}

/// One planned SSE event.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub tokens: u32,
    /// Due time, ns after the request arrived.
    pub due_ns: u64,
    pub text: String,
    /// Chat: these tokens are reasoning.
    pub reasoning: bool,
    /// Tokens carried by all events so far, this one included.
    pub cumulative: u64,
    pub last: bool,
}

/// The generation of one request: yields its events in order.
#[derive(Debug)]
pub struct Generation {
    pub rng: SmallRng,
    pub total: u64,
    pub finish: &'static str,
    pub shape: RequestShape,
    pub reasoning: u64,
    /// Engine-model mode: why the engine refused the request, if it did.
    pub refused: Option<String>,
    sent: u64,
    clock: Option<TokenClock>,
    /// Engine-model mode: the engine's steps hand over the tokens, and when they were due
    /// counts from `received`.
    feed: Option<(Feed, Instant)>,
    /// Engine-model mode: the prefix hashes of the prompt's blocks, for the prefix cache.
    blocks: Vec<u64>,
    /// The answer part of a step that ended the reasoning phase, the next event (at the
    /// step's instant: an event never mixes reasoning and content).
    held: Option<Event>,
}

impl Generation {
    pub fn new(
        rng: SmallRng,
        req: &GenRequest,
        total: u64,
        finish: &'static str,
        reasoning: u64,
    ) -> Self {
        Self {
            rng,
            total,
            finish,
            shape: RequestShape { prompt_tokens: req.prompt_tokens, output_tokens: total },
            reasoning: reasoning.min(total),
            refused: None,
            sent: 0,
            clock: None,
            feed: None,
            blocks: req.prompt_blocks.clone(),
            held: None,
        }
    }

    /// Tokens planned so far.
    pub fn sent(&self) -> u64 {
        self.sent
    }

    /// The request got its slot `slot_ns` after arrival (received at `received`): start the
    /// clock, or in engine-model mode join the engine's batch.
    pub fn start(&mut self, engine: &SimEngine, slot_ns: u64, received: Instant) {
        if let Some(s) = &engine.stepper {
            let blocks = std::mem::take(&mut self.blocks);
            // Speculative decoding: the tokens of each step, drawn from this request's stream.
            let steps = engine.cfg.speculative.map(|sp| sp.plan(self.total, &mut self.rng));
            let feed =
                s.add(self.shape.prompt_tokens, self.total, blocks, PROMPT_BLOCK_TOKENS, steps);
            self.feed = Some((feed, received));
            return;
        }
        let ttft = engine.cfg.engine_model.ttft(&self.shape, &engine.state());
        self.clock = Some(TokenClock::new(slot_ns, ttft));
    }

    /// Delay every later token (the `stall` fault).
    pub fn stall(&mut self, d: Duration) {
        if let Some(c) = self.clock.as_mut() {
            c.shift(d);
        }
    }

    /// The next event: planned at once by the timing model, or in engine-model mode when the
    /// engine's step that produces it ends. `None` when all tokens are sent (or the engine
    /// refused the request).
    pub fn poll_event(&mut self, engine: &SimEngine, cx: &mut Context<'_>) -> Poll<Option<Event>> {
        if let Some(ev) = self.take_held() {
            return Poll::Ready(Some(ev));
        }
        let Some((rx, received)) = self.feed.as_mut() else {
            return Poll::Ready(self.next_event(engine));
        };
        let received = *received;
        if self.sent >= self.total {
            return Poll::Ready(None);
        }
        let emit = match rx.poll_recv(cx) {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(None) => return Poll::Ready(None),
            Poll::Ready(Some(e)) if e.error.is_some() => {
                self.refused = e.error;
                return Poll::Ready(None);
            }
            Poll::Ready(Some(e)) => e,
        };
        let k = u64::from(emit.tokens).min(self.total - self.sent);
        let due = emit.at.saturating_duration_since(received).as_nanos() as u64;
        let now = reasoning_part(self.sent, self.reasoning, k);
        let (mut text, mut cut) = (String::with_capacity(8 * k as usize), 0);
        for i in 0..k {
            text.push_str(&engine.words[self.rng.random_range(0..engine.words.len())]);
            if i + 1 == now {
                cut = text.len();
            }
        }
        Poll::Ready(Some(self.split(k, now, due, emit.last, text, cut)))
    }

    /// [`Generation::poll_event`] as a future.
    pub async fn next_event_async(&mut self, engine: &SimEngine) -> Option<Event> {
        std::future::poll_fn(|cx| self.poll_event(engine, cx)).await
    }

    /// The next event, or `None` when all tokens are planned (or the clock is not started).
    pub fn next_event(&mut self, engine: &SimEngine) -> Option<Event> {
        if let Some(ev) = self.take_held() {
            return Some(ev);
        }
        let clock = self.clock.as_mut()?;
        if self.sent >= self.total {
            return None;
        }
        let cs = engine.cfg.tokens_per_chunk;
        // Config fields are public: never trust min <= max here (an empty range panics).
        let lo = cs.min.max(1);
        // Prefill yields one token; decode steps (multi-step scheduling, speculative decoding)
        // then yield K at a time. So the first event carries one token, as engines send it.
        let spec = engine.cfg.speculative;
        let mut k = match spec {
            _ if self.sent == 0 => 1,
            // Speculative decoding: one step, 1 to K + 1 tokens.
            Some(sp) => u64::from(sp.step_tokens(&mut self.rng)),
            None => self.rng.random_range(lo..=cs.max.max(lo)) as u64,
        };
        k = k.min(self.total - self.sent);
        let reasoning = self.sent < self.reasoning;
        // An event never mixes reasoning and content: a chunk stops at the phase's end, and a
        // speculative step (which cannot) is sent as two events at its instant.
        if reasoning && spec.is_none() {
            k = k.min(self.reasoning - self.sent);
        }
        let now = reasoning_part(self.sent, self.reasoning, k);
        let state = engine.state();
        let mut due = 0;
        let (mut text, mut cut) = (String::with_capacity(8 * k as usize), 0);
        for i in 0..k {
            // A speculative step's tokens come out together, one step (ITL) after the last.
            if spec.is_none() || i == 0 {
                let itl = engine.cfg.engine_model.itl(&self.shape, &state, clock.index() + 1);
                due = clock.next(&engine.cfg.jitter, itl, &mut self.rng);
            }
            text.push_str(&engine.words[self.rng.random_range(0..engine.words.len())]);
            if i + 1 == now {
                cut = text.len();
            }
        }
        Some(self.split(k, now, due, false, text, cut))
    }

    /// The step's event of its first `now` of `k` tokens (`text`, the first `now` words ending
    /// at byte `cut`), due at `due` ns; the rest, if any, is held as the next event at the same
    /// instant. `last`: the engine said the step ends the request.
    fn split(
        &mut self,
        k: u64,
        now: u64,
        due: u64,
        last: bool,
        mut text: String,
        cut: usize,
    ) -> Event {
        let reasoning = self.sent < self.reasoning;
        if now < k {
            let rest = text.split_off(cut);
            let cumulative = self.sent + k;
            let last = last || cumulative >= self.total;
            let tokens = (k - now) as u32;
            let ev = Event { tokens, due_ns: due, text: rest, reasoning: false, cumulative, last };
            self.held = Some(ev);
        }
        self.sent += now;
        Event {
            tokens: now as u32,
            due_ns: due,
            text,
            reasoning,
            cumulative: self.sent,
            last: (last && now == k) || self.sent >= self.total,
        }
    }

    /// The held answer part of the last step, counted as sent.
    fn take_held(&mut self) -> Option<Event> {
        let ev = self.held.take()?;
        self.sent = ev.cumulative;
        Some(ev)
    }
}

/// Of a step's next `k` tokens (`sent` sent, the first `reasoning` of the request reasoning),
/// how many go in its first event: the reasoning ones when the step crosses the end of the
/// reasoning phase, else all.
fn reasoning_part(sent: u64, reasoning: u64, k: u64) -> u64 {
    if sent < reasoning {
        k.min(reasoning - sent)
    } else {
        k
    }
}

/// Fields of the truth record known at arrival.
#[derive(Debug, Clone)]
pub struct Arrival {
    pub seq: u64,
    pub request_id: Option<String>,
    pub received: Instant,
    /// The request's images, set once it is parsed (unset for a request rejected before).
    pub images: std::sync::OnceLock<Vec<ImageSeen>>,
    /// With `--truth-text`: the rendered prompt and the answer text sent, once known.
    pub text: std::sync::OnceLock<String>,
    /// See `text`.
    pub reply: std::sync::OnceLock<String>,
    /// The reasoning tokens drawn for the request, once its generation is planned.
    pub reasoning: std::sync::OnceLock<u64>,
}

impl Arrival {
    /// ns since the request was received.
    pub fn now_ns(&self) -> u64 {
        self.received.elapsed().as_nanos() as u64
    }

    /// The instant `offset_ns` after arrival (saturating far in the future, never panicking).
    pub fn at(&self, offset_ns: u64) -> Instant {
        let far = Duration::from_secs(100 * 365 * 86_400);
        let d = Duration::from_nanos(offset_ns).min(far);
        self.received.checked_add(d).unwrap_or(self.received)
    }
}

/// Record a finished request: truth plus the latency histograms.
#[allow(clippy::too_many_arguments)]
pub fn finish(
    engine: &SimEngine,
    arrival: &Arrival,
    endpoint: &str,
    prompt_tokens: u64,
    completion_tokens: u64,
    queue_ns: u64,
    chunks: Vec<TruthChunk>,
    outcome: &str,
) {
    if let (Some(first), Some(last)) = (chunks.first(), chunks.last()) {
        engine.metrics.ttft.observe_ns(first.actual_ns.saturating_sub(queue_ns));
        engine.metrics.e2e.observe_ns(last.actual_ns);
    }
    engine.truth.push(TruthRecord {
        request_id: arrival.request_id.clone(),
        seq: arrival.seq,
        endpoint: endpoint.to_string(),
        prompt_tokens,
        completion_tokens,
        queue_ns,
        chunks,
        outcome: outcome.to_string(),
        images: arrival.images.get().cloned().unwrap_or_default(),
        prompt: arrival.text.get().cloned(),
        reply: arrival.reply.get().cloned(),
        reasoning_tokens: arrival.reasoning.get().map_or(0, |&n| n.min(completion_tokens)),
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::Endpoint;

    fn req(max: u64, min: u64, ignore_eos: bool) -> GenRequest {
        GenRequest {
            endpoint: Endpoint::Completions,
            stream: true,
            include_usage: false,
            continuous_usage: false,
            usage_on_finish: false,
            prompt_tokens: 1,
            max_tokens: max,
            min_tokens: min,
            ignore_eos,
            images: Vec::new(),
            prompt_blocks: Vec::new(),
            prompt_text: None,
        }
    }

    #[test]
    fn output_length_rules() {
        assert_eq!(output_length(&req(10, 0, true), 3), (10, "length"));
        assert_eq!(output_length(&req(10, 0, false), 3), (3, "stop"));
        assert_eq!(output_length(&req(10, 5, false), 3), (5, "stop"));
        assert_eq!(output_length(&req(10, 0, false), 50), (10, "length"));
        assert_eq!(output_length(&req(10, 10, false), 3), (10, "length"));
    }

    #[test]
    fn natural_length_has_the_right_mean() {
        let mut r = SmallRng::seed_from_u64(1);
        let n = 20_000;
        let mean = (0..n).map(|_| natural_length(256.0, &mut r)).sum::<u64>() as f64 / n as f64;
        assert!((mean - 256.5).abs() < 10.0, "{mean}");
    }

    /// Every event of one request of `total` tokens (`reasoning` of them reasoning) whose slot
    /// came `slot_ns` after arrival, as (tokens, due ns, reasoning, last); their text holds
    /// `total` tokens.
    fn planned(
        cfg: SimConfig,
        total: u64,
        reasoning: u64,
        slot_ns: u64,
    ) -> Vec<(u32, u64, bool, bool)> {
        let engine = SimEngine::new(cfg).unwrap();
        let r = req(total, 0, true);
        let mut g = Generation::new(SmallRng::seed_from_u64(0), &r, total, "length", reasoning);
        assert!(g.next_event(&engine).is_none(), "not started");
        g.start(&engine, slot_ns, Instant::now());
        let evs: Vec<Event> = std::iter::from_fn(|| g.next_event(&engine)).collect();
        let text: String = evs.iter().map(|e| e.text.as_str()).collect();
        assert_eq!(engine.tokenizer.count(&text), total as usize);
        evs.iter().map(|e| (e.tokens, e.due_ns, e.reasoning, e.last)).collect()
    }

    #[test]
    fn events_chunk_and_split_reasoning() {
        let cfg = SimConfig::fixed(50.0, 10.0).with_tokens_per_chunk(3, 3);
        assert_eq!(
            planned(cfg, 8, 2, 1_000),
            vec![
                (1, 50_001_000, true, false),
                (1, 60_001_000, true, false),
                (3, 90_001_000, false, false),
                (3, 120_001_000, false, true),
            ]
        );
    }

    /// Fixed timing with speculative decoding: one step per --itl-ms whatever it carries, so
    /// with every draft accepted (K = 3) 10 tokens come as 1 at TTFT, then 4, 4 and the last 1
    /// 10 ms apart (per-token ITL 2.5 ms); with none accepted, one token per step.
    #[test]
    fn speculative_steps_under_fixed_timing() {
        let events = |p: f64, total: u64| {
            let spec = crate::Speculation::new(3, p).unwrap();
            let cfg = SimConfig::fixed(50.0, 10.0).with_speculation(spec);
            let evs = planned(cfg, total, 0, 0);
            evs.into_iter().map(|(k, due, _, last)| (k, due, last)).collect::<Vec<_>>()
        };
        assert_eq!(
            events(1.0, 10),
            vec![
                (1, 50_000_000, false),
                (4, 60_000_000, false),
                (4, 70_000_000, false),
                (1, 80_000_000, true),
            ]
        );
        assert_eq!(
            events(0.0, 3),
            vec![(1, 50_000_000, false), (1, 60_000_000, false), (1, 70_000_000, true)]
        );
    }

    /// A speculative step that ends the reasoning phase is two events at its instant: the
    /// reasoning token, then the answer's three.
    #[test]
    fn a_speculative_step_across_the_reasoning_end_is_split_at_its_instant() {
        let spec = crate::Speculation::new(3, 1.0).unwrap();
        assert_eq!(
            planned(SimConfig::fixed(50.0, 10.0).with_speculation(spec), 10, 2, 0),
            vec![
                (1, 50_000_000, true, false),
                (1, 60_000_000, true, false),
                (3, 60_000_000, false, false),
                (4, 70_000_000, false, false),
                (1, 80_000_000, false, true),
            ]
        );
    }
}
