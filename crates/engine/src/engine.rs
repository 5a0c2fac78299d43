//! The engine: workers composed as DP replicas behind a router, or as P/D pools linked by a
//! KV transfer. One step machine serves both the virtual-time driver and a wall-clock server.
//!
//! A driver calls [`Engine::step`] with the current time until it returns `None` (every idle
//! worker with work has started a step), delivers each outcome's tokens at its `end_ns`, and
//! waits until the earlier of [`Engine::next_event_ns`] and its next arrival.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use crate::config::{ConditionalDisagg, EngineConfig, Router, WorkerSpec};
use crate::error::{EngineError, Result};
use crate::replica::{RequestId, SplitMix64, Worker, WorkerCounters};

/// What the engine knows about a request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestShape {
    /// Prompt tokens.
    pub prompt_tokens: u32,
    /// Tokens to generate (the engine stops exactly there, as with `ignore_eos`).
    pub output_tokens: u32,
    /// Prefix hashes of the prompt's blocks (Mooncake `hash_ids`); empty: no prefix reuse.
    pub block_hashes: Vec<u64>,
    /// Tokens each hash covers; 0: the engine's block size.
    pub hash_block_tokens: u32,
}

/// What one started step will do; its tokens are emitted at `end_ns`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct StepOutcome {
    /// Index of the worker that runs it.
    pub worker: usize,
    /// Start, ns.
    pub start_ns: u64,
    /// End, ns: every token of the step is emitted then.
    pub end_ns: u64,
    /// (request, tokens) emitted to clients at `end_ns`.
    pub emitted: Vec<(RequestId, u32)>,
    /// Requests whose first token is among `emitted`.
    pub first_token: Vec<RequestId>,
    /// Requests whose last token is among `emitted`.
    pub finished: Vec<RequestId>,
    /// Requests preempted while scheduling this step.
    pub preempted: Vec<RequestId>,
    /// Requests whose prefill ended here and whose KV leaves for a decode worker (P/D).
    pub handed_off: Vec<RequestId>,
    /// Tokens computed by the step.
    pub batch_tokens: u64,
    /// Sequences in the step.
    pub batch_seqs: u32,
}

/// Engine-wide gauges and counters, as a real engine's `/metrics` shows them.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct EngineGauges {
    /// Requests running on some worker.
    pub running: u32,
    /// Requests waiting on some worker.
    pub waiting: u32,
    /// KV blocks in use over all blocks (0–1).
    pub kv_usage: f64,
    /// KV transfers in flight (P/D).
    pub transferring: u32,
    /// Preemptions so far.
    pub preemptions_total: u64,
    /// Prompt tokens of requests that got their first token (prefill workers' for P/D).
    pub prompt_tokens_total: u64,
    /// Tokens emitted to clients.
    pub generation_tokens_total: u64,
    /// Prompt tokens looked up in prefix caches.
    pub prefix_cache_queries: u64,
    /// Prompt tokens found cached.
    pub prefix_cache_hits: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    /// Prefill and decode (a plain replica).
    Both,
    /// Prefill only; the request then moves to a decode worker.
    Prefill,
    /// Decode of requests whose KV arrived from a prefill worker.
    Decode,
}

#[derive(Debug, Clone)]
struct Slot {
    worker: Worker,
    role: Role,
    busy_until: u64,
    /// When the step in flight (or the last one) started.
    step_start: u64,
    /// When this worker's API server is free to take the next request.
    frontend_free: u64,
    /// Requests in its API server, not yet in the scheduler, and those it is held for while
    /// they are elsewhere (P/D: on their way back to it).
    in_frontend: usize,
    /// Requests of the step in flight that finished in it (a prefill-only request always
    /// does): the scheduler has dropped them, but the GPU computes them until `busy_until`.
    leaving: usize,
    /// SGLang's `--scheduler-recv-interval` (`SchedulerConfig::recv_interval`).
    recv_interval: u32,
    /// Its `SchedulerRecvSkipper` counter: 1 for each decode step, 1,000 after a step with
    /// prompt tokens; the scheduler takes its new requests when it reaches `recv_interval`.
    recv_counter: u32,
    /// Whether the last step had prompt tokens (kept only with a receive interval).
    last_had_prompt: bool,
    /// Requests past the API server that the scheduler has not yet taken (with a receive
    /// interval): reached at `t_ns`, counted in `in_frontend` until taken.
    held: Vec<(u64, RequestId, RequestShape)>,
}

impl Slot {
    /// Queues a request that reached this worker's scheduler at `t_ns`: with async
    /// scheduling, one that came while a step ran waits for the step after the next, which
    /// the scheduler chose when that step started.
    fn queue(&mut self, t_ns: u64, id: RequestId, shape: &RequestShape, output: u32, pre: u32) {
        // Checked when the request arrived, so this cannot be rejected.
        let _ = self.worker.add(
            id,
            shape.prompt_tokens,
            output,
            (&shape.block_hashes, shape.hash_block_tokens),
            pre,
        );
        if self.worker.async_scheduling() && t_ns > self.step_start && t_ns <= self.busy_until {
            self.worker.hold_newest();
        }
    }

    /// The scheduler takes the requests held for it, as it does when its receive counter
    /// fires or it is idle.
    fn take_held(&mut self) {
        for (t, id, shape) in std::mem::take(&mut self.held) {
            self.in_frontend -= 1;
            self.queue(t, id, &shape, shape.output_tokens, 0);
        }
    }

    /// The top of a scheduler iteration about to run a step: with a receive interval, the
    /// counter adds the last step's weight and, when it reaches the interval, the scheduler
    /// takes what is held; an idle scheduler (no step to run without them) takes it at once.
    fn receive(&mut self) {
        if self.recv_interval <= 1 {
            return;
        }
        if !self.worker.has_work() {
            if !self.held.is_empty() {
                self.take_held();
                self.recv_counter = 0;
            }
            return;
        }
        self.recv_counter += if self.last_had_prompt { 1000 } else { 1 };
        if self.recv_counter >= self.recv_interval {
            self.recv_counter = 0;
            self.take_held();
        }
    }

    /// A request of `prompt` tokens enters this worker's API server at `now_ns` (`fixed`
    /// and `per_token` ns: one request at a time, the per-token part serial); returns when
    /// it reaches the scheduler.
    fn enter_api_server(
        &mut self,
        now_ns: u64,
        prompt: u32,
        (fixed, per_token): (f64, f64),
    ) -> u64 {
        let serial = (per_token * f64::from(prompt)).round() as u64;
        self.frontend_free = self.frontend_free.max(now_ns) + serial;
        self.in_frontend += 1;
        self.frontend_free + fixed.round() as u64
    }

    /// The least-loaded router's measure at `now_ns`: requests in the API server, waiting,
    /// running, and those the step in flight still computes.
    fn load(&self, now_ns: u64) -> usize {
        let leaving = if self.busy_until > now_ns { self.leaving } else { 0 };
        self.worker.load() + self.in_frontend + leaving
    }
}

/// KV transfer: fixed latency plus bytes over the link.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Transfer {
    latency_ns: f64,
    /// Seconds per prompt token: KV bytes per token / (link bandwidth × GPUs in parallel).
    ns_per_token: f64,
}

/// A KV transfer in flight: (ready_ns, sequence, request, decode worker), the worker being
/// the one whose API server the request passed, `None` when it is routed on arrival.
type InFlight = (u64, u64, RequestId, Option<usize>);

/// A deployment's workers and their router.
#[derive(Debug, Clone)]
pub struct Engine {
    slots: Vec<Slot>,
    router: Router,
    /// Next worker per role for round robin: [plain/prefill, decode].
    rr: [usize; 2],
    /// Draws of the random router.
    rng: SplitMix64,
    transfer: Option<Transfer>,
    /// KV transfers in flight, the earliest first.
    in_flight: BinaryHeap<Reverse<InFlight>>,
    /// P/D: the decode pool's API-server time (fixed, per prompt token, ns) where the family
    /// sends the request through the decode server after the prefill
    /// ([`crate::family::FamilyTraits::pd_decode_server_after_prefill`]).
    decode_frontend_ns: Option<(f64, f64)>,
    seq: u64,
    /// Shapes of requests between prefill and decode (P/D only).
    parked: HashMap<RequestId, RequestShape>,
    /// (ready_ns, sequence, worker, request) of requests in an API server.
    frontend: BinaryHeap<Reverse<(u64, u64, usize, RequestId)>>,
    /// Shapes of requests not yet in a scheduler: in an API server, or (where the decode
    /// worker takes them first) waiting for it to admit them or for a prefill worker.
    queued: HashMap<RequestId, RequestShape>,
    /// P/D where the decode worker takes a request first
    /// ([`crate::family::FamilyTraits::pd_decode_admits_first`]).
    decode_first: bool,
    /// The decode worker each such request belongs to, until its KV leaves the prefill
    /// worker.
    home: HashMap<RequestId, usize>,
    /// Dynamo 0.1-0.3's conditional disaggregation: which prompts the decode worker keeps.
    conditional: Option<ConditionalDisagg>,
    frontend_ns: (f64, f64),
    generation_tokens: u64,
}

impl Engine {
    /// Builds the workers of `cfg`.
    pub fn new(cfg: &EngineConfig) -> Result<Self> {
        let mut slots = Vec::new();
        let mut push = |spec: WorkerSpec, n: u32, role: Role, key: &str| -> Result<()> {
            // A config built in code skips `EngineFile::build`'s checks: keep the essentials.
            if spec.tp == 0 || n == 0 {
                return Err(EngineError::invalid(key, "TP and worker counts must be >= 1"));
            }
            let blocks = spec.kv_blocks().map_err(|m| EngineError::invalid(key, m))?;
            for _ in 0..n {
                let stream = slots.len() as u64;
                let worker = Worker::new(&spec, blocks, stream);
                slots.push(Slot {
                    worker,
                    role,
                    busy_until: 0,
                    step_start: 0,
                    frontend_free: 0,
                    in_frontend: 0,
                    leaving: 0,
                    recv_interval: spec.scheduler.recv_interval,
                    recv_counter: 0,
                    last_had_prompt: false,
                    held: Vec::new(),
                });
            }
            Ok(())
        };
        let transfer = match &cfg.pd {
            None => {
                push(cfg.worker(cfg.tp), cfg.replicas, Role::Both, "tp")?;
                None
            }
            Some(pd) => {
                let (p, d) = (&pd.prefill, &pd.decode);
                push(cfg.pool_worker(p), p.workers, Role::Prefill, "pd.prefill.tp")?;
                push(cfg.pool_worker(d), d.workers, Role::Decode, "pd.decode.tp")?;
                // Each GPU sends the KV it holds over its own NIC, all at once: the pool with
                // the smaller TP holds the larger share a GPU (an MLA latent is whole on every
                // rank, `WorkerSpec::kv_bytes_per_token_per_gpu`).
                let narrow = if p.tp <= d.tp { p } else { d };
                let per_token = cfg.pool_worker(narrow).kv_bytes_per_token_per_gpu();
                // The prefill workers send: their link efficiency.
                let eta_link = cfg.pool_worker(p).calibration.eta_link;
                let bw = pd.link.bandwidth_gb_s * 1e9 * eta_link;
                Some(Transfer {
                    latency_ns: pd.link.latency_us * 1e3,
                    ns_per_token: per_token / bw * 1e9,
                })
            }
        };
        // Requests enter through the API servers of the workers they are routed to first: the
        // prefill pool's with P/D.
        let entry = match &cfg.pd {
            Some(pd) => cfg.pool_worker(&pd.prefill).calibration,
            None => cfg.calibration,
        };
        let decode_frontend_ns =
            cfg.pd.as_ref().filter(|_| cfg.engine.traits().pd_decode_server_after_prefill).map(
                |pd| {
                    let c = cfg.pool_worker(&pd.decode).calibration;
                    (c.frontend_us * 1e3, c.frontend_per_token_us * 1e3)
                },
            );
        Ok(Self {
            slots,
            router: cfg.router,
            rr: [0, 0],
            // Its own stream: the workers' step jitter draws from theirs.
            rng: SplitMix64(cfg.calibration.seed ^ 0x00D1_5EED_0F0F_0A7E),
            transfer,
            in_flight: BinaryHeap::new(),
            decode_frontend_ns,
            seq: 0,
            parked: HashMap::new(),
            frontend: BinaryHeap::new(),
            queued: HashMap::new(),
            decode_first: cfg.pd.is_some() && cfg.engine.traits().pd_decode_admits_first,
            home: HashMap::new(),
            conditional: cfg.pd.as_ref().and_then(|p| p.conditional),
            frontend_ns: (entry.frontend_us * 1e3, entry.frontend_per_token_us * 1e3),
            generation_tokens: 0,
        })
    }

    /// Number of workers.
    pub fn workers(&self) -> usize {
        self.slots.len()
    }

    /// Picks a worker of `role` by the router at `now_ns`.
    fn route(&mut self, role: Role, now_ns: u64) -> usize {
        let idx: Vec<usize> =
            (0..self.slots.len()).filter(|&i| self.slots[i].role == role).collect();
        let k = usize::from(role == Role::Decode);
        match self.router {
            Router::RoundRobin => {
                let i = idx[self.rr[k] % idx.len()];
                self.rr[k] += 1;
                i
            }
            Router::LeastLoaded => {
                *idx.iter().min_by_key(|&&i| (self.slots[i].load(now_ns), i)).unwrap_or(&idx[0])
            }
            Router::Random => idx[self.rng.below(idx.len())],
        }
    }

    /// A request arrives at `now_ns`: it is routed, passes its worker's API server (one request
    /// at a time) and then waits for the scheduler. Rejected at once (with the reason) if it
    /// could never run.
    pub fn add_request(&mut self, id: RequestId, shape: RequestShape, now_ns: u64) -> Result<()> {
        let role = if self.transfer.is_some() { Role::Prefill } else { Role::Both };
        let check = |role: Role, output: u32| -> Result<()> {
            match self.slots.iter().find(|s| s.role == role) {
                Some(s) => s
                    .worker
                    .check(shape.prompt_tokens, output)
                    .map_err(|r| EngineError::invalid("request", r.to_string())),
                None => Ok(()),
            }
        };
        if role == Role::Prefill {
            check(Role::Prefill, 1)?;
            check(Role::Decode, shape.output_tokens)?;
        } else {
            check(Role::Both, shape.output_tokens)?;
        }
        // Where the decode worker takes it first, its API server (the Processor) is the entry.
        let entry = if self.decode_first { Role::Decode } else { role };
        let w = self.route(entry, now_ns);
        let ready = self.slots[w].enter_api_server(now_ns, shape.prompt_tokens, self.frontend_ns);
        self.seq += 1;
        self.frontend.push(Reverse((ready, self.seq, w, id)));
        self.queued.insert(id, shape);
        Ok(())
    }

    /// Moves requests whose API-server time is over by `now_ns` into their worker's queue.
    fn admit(&mut self, now_ns: u64) {
        while let Some(&Reverse((t, _, w, id))) = self.frontend.peek() {
            if t > now_ns {
                break;
            }
            self.frontend.pop();
            let Some(shape) = self.queued.remove(&id) else { continue };
            // Dynamo's conditional disaggregation decides before the decode engine sees the
            // request, from the prefill queue as it is then.
            let local = self.slots[w].role == Role::Decode
                && self
                    .conditional
                    .is_some_and(|c| !c.remote(shape.prompt_tokens, self.prefill_queue()));
            let slot = &mut self.slots[w];
            if slot.recv_interval > 1 && slot.role == Role::Both {
                // Taken at the scheduler's next receive (`Slot::receive`).
                slot.held.push((t, id, shape));
                continue;
            }
            slot.in_frontend -= 1;
            if local {
                // Prefilled here, a whole V0 prefill, and decoded here.
                slot.queue(t, id, &shape, shape.output_tokens, 0);
                continue;
            }
            if slot.role == Role::Decode {
                // Only where the decode worker takes requests first: admitted for the prefill;
                // it stays queued until a prefill worker takes it.
                slot.worker.admit_remote(id, shape.prompt_tokens);
                self.queued.insert(id, shape);
                self.home.insert(id, w);
                continue;
            }
            let output = if slot.role == Role::Prefill { 1 } else { shape.output_tokens };
            slot.queue(t, id, &shape, output, 0);
            if slot.role == Role::Prefill {
                self.parked.insert(id, shape);
            }
        }
    }

    /// Prompts waiting for a prefill worker: handed to the prefill queue and not yet started
    /// (Dynamo's JetStream queue, whose length its conditional disaggregation reads).
    fn prefill_queue(&self) -> usize {
        self.slots
            .iter()
            .filter(|s| s.role == Role::Prefill)
            .map(|s| s.in_frontend + s.worker.waiting())
            .sum()
    }

    /// Moves KV transfers that completed by `now_ns` to decode workers.
    fn deliver(&mut self, now_ns: u64) {
        while let Some(&Reverse((t, _, id, chosen))) = self.in_flight.peek() {
            if t > now_ns {
                break;
            }
            self.in_flight.pop();
            if let Some(w) = chosen {
                self.slots[w].in_frontend -= 1;
            }
            let Some(shape) = self.parked.remove(&id) else { continue };
            let w = chosen.unwrap_or_else(|| self.route(Role::Decode, now_ns));
            let pre = shape.prompt_tokens.saturating_sub(1);
            self.slots[w].queue(t, id, &shape, shape.output_tokens, pre);
        }
    }

    /// Starts a step on the first idle worker that has work, at `now_ns`; `None` if there is
    /// none. Call until `None`.
    pub fn step(&mut self, now_ns: u64) -> Option<StepOutcome> {
        self.admit(now_ns);
        self.deliver(now_ns);
        for i in 0..self.slots.len() {
            let s = &mut self.slots[i];
            if s.busy_until > now_ns {
                continue;
            }
            s.receive();
            if !s.worker.has_work() {
                continue;
            }
            let Some(ws) = s.worker.step() else { continue };
            if s.recv_interval > 1 {
                s.last_had_prompt = ws.batch.iter().any(|&(_, n)| n > 1);
            }
            let end = now_ns + ws.duration_ns;
            s.step_start = now_ns;
            s.busy_until = end;
            s.leaving = ws.finished.len();
            let role = s.role;
            let mut out = StepOutcome {
                worker: i,
                start_ns: now_ns,
                end_ns: end,
                preempted: ws.preempted,
                batch_tokens: ws.batch.iter().map(|&(_, n)| u64::from(n)).sum(),
                batch_seqs: ws.batch.len() as u32,
                ..Default::default()
            };
            if role == Role::Prefill {
                // The prefill worker's token is not streamed: the decode worker re-samples
                // it once the KV has arrived (as vLLM's P/D proxy and Dynamo do).
                for id in ws.finished {
                    self.hand_off(id, end);
                    out.handed_off.push(id);
                }
            } else if !ws.admitted.is_empty() {
                // Admitted for a remote prefill: the prompts join the prefill queue at the
                // step's end; they count on this worker until their KV arrives.
                for id in ws.admitted {
                    self.slots[i].in_frontend += 1;
                    let p = self.route(Role::Prefill, end);
                    self.slots[p].in_frontend += 1;
                    self.seq += 1;
                    self.frontend.push(Reverse((end, self.seq, p, id)));
                }
            } else {
                out.emitted = ws.sampled.iter().map(|&id| (id, 1)).collect();
                self.generation_tokens += ws.sampled.len() as u64;
                out.first_token = ws.first_token;
                out.finished = ws.finished;
            }
            return Some(out);
        }
        None
    }

    /// Drops request `id` (its client disconnected), as vLLM aborts a request whose stream
    /// closed: out of its API server, the scheduler queues, a KV transfer or a batch, its KV
    /// blocks and sequence slot freed. Tokens of a step already started are still counted by
    /// that step; a later step no longer schedules it. Unknown ids are ignored.
    pub fn abort(&mut self, id: RequestId) {
        // Waiting for its decode worker's admission: dropped there. Admitted and not yet sent
        // back to it: no longer counted there.
        if let Some(d) = self.home.remove(&id) {
            if !self.slots[d].worker.abort(id) {
                self.slots[d].in_frontend = self.slots[d].in_frontend.saturating_sub(1);
            }
        }
        if self.queued.remove(&id).is_some() {
            // Its API-server entry stays in the heap and is skipped by `admit`.
            let w = self.frontend.iter().find(|Reverse(e)| e.3 == id).map(|Reverse(e)| e.2);
            if let Some(w) = w {
                self.slots[w].in_frontend -= 1;
            }
            return;
        }
        // Past its API server, not yet taken by a scheduler with a receive interval.
        for s in &mut self.slots {
            if let Some(k) = s.held.iter().position(|h| h.1 == id) {
                s.held.remove(k);
                s.in_frontend -= 1;
                return;
            }
        }
        // Between prefill and decode (P/D): the transfer lands for nobody.
        self.parked.remove(&id);
        for s in &mut self.slots {
            if s.worker.abort(id) {
                break;
            }
        }
    }

    /// A prefill ended at `end_ns`: the KV of request `id` travels to a decode worker, after
    /// that worker's API server has taken the request where the family's proxy sends it there
    /// only now (its connector then pulls the KV; a connector that pushes during the prefill
    /// would overlap the two, which this charges in full).
    fn hand_off(&mut self, id: RequestId, end_ns: u64) {
        let Some(t) = self.transfer else { return };
        let prompt = self.parked.get(&id).map_or(0, |s| s.prompt_tokens);
        let dt = (t.latency_ns + f64::from(prompt) * t.ns_per_token).round() as u64;
        let (start, chosen) = match self.decode_frontend_ns {
            Some(api) => {
                let w = self.route(Role::Decode, end_ns);
                (self.slots[w].enter_api_server(end_ns, prompt, api), Some(w))
            }
            // The worker that admitted it (counted there since).
            None => (end_ns, self.home.remove(&id)),
        };
        self.seq += 1;
        self.in_flight.push(Reverse((start + dt, self.seq, id, chosen)));
    }

    /// The earliest time a call to [`Engine::step`] may start something: a busy worker with
    /// work frees up, a request leaves an API server, or a KV transfer lands. `None` when the
    /// engine is idle.
    pub fn next_event_ns(&self) -> Option<u64> {
        let busy = self
            .slots
            .iter()
            .filter(|s| s.worker.has_work() || !s.held.is_empty())
            .map(|s| s.busy_until);
        let transfer = self.in_flight.peek().map(|Reverse((t, _, _, _))| *t);
        let frontend = self.frontend.peek().map(|Reverse((t, _, _, _))| *t);
        busy.chain(transfer).chain(frontend).min()
    }

    /// Whether nothing is in an API server, running, waiting or in transfer.
    pub fn is_idle(&self) -> bool {
        self.in_flight.is_empty()
            && self.frontend.is_empty()
            && self.slots.iter().all(|s| !s.worker.has_work() && s.held.is_empty())
    }

    /// Counters of worker `i`.
    pub fn worker_counters(&self, i: usize) -> Option<WorkerCounters> {
        self.slots.get(i).map(|s| s.worker.counters())
    }

    /// Engine-wide gauges now.
    pub fn snapshot(&self) -> EngineGauges {
        let mut g = EngineGauges {
            transferring: self.in_flight.len() as u32,
            waiting: self.frontend.len() as u32,
            generation_tokens_total: self.generation_tokens,
            ..Default::default()
        };
        let (mut used, mut total) = (0u64, 0u64);
        for s in &self.slots {
            let c = s.worker.counters();
            g.running += c.running;
            g.waiting += c.waiting + s.held.len() as u32;
            used += c.blocks_used;
            total += c.blocks_total;
            g.preemptions_total += c.preemptions_total;
            if s.role != Role::Decode {
                g.prompt_tokens_total += c.prompt_tokens_total;
                g.prefix_cache_queries += c.prefix_cache_queries;
                g.prefix_cache_hits += c.prefix_cache_hits;
            }
        }
        g.kv_usage = if total > 0 { used as f64 / total as f64 } else { 0.0 };
        g
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::EngineFile;

    /// An engine without API-server time or step noise, for exact traces.
    fn engine(yaml: &str) -> Engine {
        let mut cfg = EngineFile::parse(yaml).unwrap().build(None).unwrap();
        cfg.calibration.frontend_us = 0.0;
        cfg.calibration.frontend_per_token_us = 0.0;
        cfg.calibration.step_jitter = 0.0;
        Engine::new(&cfg).unwrap()
    }

    fn shape(p: u32, o: u32) -> RequestShape {
        RequestShape { prompt_tokens: p, output_tokens: o, ..Default::default() }
    }

    #[test]
    fn round_robin_spreads_requests() {
        let mut e = engine("model: qwen3-8b\ngpu: h100\nreplicas: 2\n");
        for id in 0..4 {
            e.add_request(id, shape(100, 2), 0).unwrap();
        }
        let a = e.step(0).unwrap();
        let b = e.step(0).unwrap();
        assert!(e.step(0).is_none(), "both workers busy");
        assert_eq!((a.worker, b.worker), (0, 1));
        assert_eq!(a.first_token, vec![0, 2]);
        assert_eq!(b.first_token, vec![1, 3]);
        assert_eq!(e.next_event_ns(), Some(a.end_ns.min(b.end_ns)));
        assert_eq!(e.snapshot().running, 4);
    }

    /// SGLang's `--scheduler-recv-interval 4`: a request that reaches a decoding scheduler
    /// waits until its counter (1 a decode step, 1,000 after a prompt step) reaches 4; an
    /// idle scheduler takes one at once.
    #[test]
    fn sglang_receives_new_requests_every_recv_interval_steps() {
        let yaml = "engine: sglang\nmodel: qwen3-8b\ngpu: h100\nscheduler: {recv_interval: 4}\n";
        let mut e = engine(yaml);
        e.add_request(0, shape(100, 50), 0).unwrap();
        let prefill = e.step(0).unwrap();
        assert_eq!(prefill.first_token, vec![0], "idle: taken at once");
        // After the prompt step the counter jumps to 1,000 and fires: nothing is held yet.
        let mut t = prefill.end_ns;
        let d1 = e.step(t).unwrap();
        assert_eq!(d1.batch_seqs, 1);
        // Request 1 reaches the scheduler during the first decode step.
        e.add_request(1, shape(100, 5), t + 1).unwrap();
        t = d1.end_ns;
        // Counter 1, 2, 3 at the next three decode steps: request 1 held, counted waiting.
        for _ in 0..3 {
            assert_eq!(e.snapshot().waiting, 1);
            let d = e.step(t).unwrap();
            assert_eq!((d.batch_seqs, d.batch_tokens), (1, 1), "still decoding alone");
            t = d.end_ns;
        }
        // Counter 4: taken, and SGLang's prefill-first step runs its prompt.
        let p1 = e.step(t).unwrap();
        assert_eq!(p1.first_token, vec![1]);
        assert_eq!(p1.batch_tokens, 100);
        // Without the interval it would have run right after the first decode step.
        let mut every = engine(&yaml.replace("recv_interval: 4", "recv_interval: 1"));
        every.add_request(0, shape(100, 50), 0).unwrap();
        let p = every.step(0).unwrap();
        let d = every.step(p.end_ns).unwrap();
        every.add_request(1, shape(100, 5), p.end_ns + 1).unwrap();
        assert_eq!(every.step(d.end_ns).unwrap().first_token, vec![1]);
        // Aborted while held: gone, nothing left waiting.
        let mut held = engine(yaml);
        held.add_request(0, shape(100, 50), 0).unwrap();
        let p = held.step(0).unwrap();
        let d = held.step(p.end_ns).unwrap();
        held.add_request(1, shape(100, 5), p.end_ns + 1).unwrap();
        let _ = held.step(d.end_ns);
        held.abort(1);
        assert_eq!(held.snapshot().waiting, 0);
    }

    #[test]
    fn recv_interval_is_sglangs_alone() {
        // SGLang's own flag name reads the same.
        let own = "engine: sglang\nmodel: qwen3-8b\ngpu: h100\nscheduler: {scheduler_recv_interval: 30}\n";
        let cfg = EngineFile::parse(own).unwrap().build(None).unwrap();
        assert_eq!(cfg.scheduler.recv_interval, 30);
        let err = EngineFile::parse("model: qwen3-8b\ngpu: h100\nscheduler: {recv_interval: 4}\n")
            .unwrap()
            .build(None)
            .unwrap_err()
            .to_string();
        assert!(err.contains("scheduler.recv_interval") && err.contains("remove it"), "{err}");
        let pd = "engine: sglang\nmodel: qwen3-8b\ngpu: h100\nscheduler: {recv_interval: 4}\n\
                  pd: {prefill: {workers: 1, tp: 1}, decode: {workers: 1, tp: 1}}\n";
        let err = EngineFile::parse(pd).unwrap().build(None).unwrap_err().to_string();
        assert!(err.contains("aggregated SGLang workers only"), "{err}");
        let zero = "engine: sglang\nmodel: qwen3-8b\ngpu: h100\nscheduler: {recv_interval: 0}\n";
        let err = EngineFile::parse(zero).unwrap().build(None).unwrap_err().to_string();
        assert!(err.contains("scheduler.recv_interval"), "{err}");
    }

    #[test]
    fn least_loaded_picks_the_emptiest() {
        let mut e = engine("model: qwen3-8b\ngpu: h100\nreplicas: 2\nrouter: least-loaded\n");
        e.add_request(0, shape(100, 50), 0).unwrap();
        e.add_request(1, shape(100, 50), 0).unwrap();
        let _ = e.step(0);
        let _ = e.step(0);
        e.add_request(2, shape(100, 1), 0).unwrap();
        assert!(e.step(0).is_none(), "both busy; request 2 enters worker 0's queue");
        assert_eq!(e.worker_counters(0).unwrap().waiting, 1);
    }

    #[test]
    fn random_spreads_requests_evenly_and_repeatably() {
        let yaml = "model: qwen3-8b\ngpu: h100\nreplicas: 4\nrouter: random\n";
        let picks = |yaml: &str| -> Vec<usize> {
            let mut e = engine(yaml);
            (0..4000).map(|_| e.route(Role::Both, 0)).collect()
        };
        let a = picks(yaml);
        let mut counts = [0usize; 4];
        for &w in &a {
            counts[w] += 1;
        }
        // 1,000 expected each; a binomial's standard deviation is 27, so ±100 is 3.6 sigma.
        assert!(counts.iter().all(|&n| n.abs_diff(1000) <= 100), "{counts:?}");
        assert_eq!(a, picks(yaml), "the same seed routes the same way");
        let other = picks(&format!("{yaml}calibration: {{seed: 7}}\n"));
        assert_ne!(a, other, "another seed, another draw");
        assert_ne!(&a[..8], &[0, 1, 2, 3, 0, 1, 2, 3], "not round robin");
    }

    #[test]
    fn pd_moves_the_request_after_prefill_and_transfer() {
        let mut e = engine(
            "model: qwen3-8b\ngpu: h100\npd: {prefill: {workers: 1, tp: 1}, decode: {workers: 1, tp: 1}, \
             link: {bandwidth_gb_s: 10, latency_us: 100}}\n",
        );
        e.add_request(7, shape(1000, 3), 0).unwrap();
        let p = e.step(0).unwrap();
        assert_eq!(p.worker, 0);
        assert!(p.emitted.is_empty());
        assert_eq!(p.handed_off, vec![7]);
        // KV: 147,456 B/token × 1000 / (10 GB/s × η_link 0.7) = 21.065 ms, + 0.1 ms latency.
        let ready = e.next_event_ns().unwrap();
        assert_eq!(ready - p.end_ns, 100_000 + 21_065_143);
        assert!(e.step(ready - 1).is_none());
        let d = e.step(ready).unwrap();
        assert_eq!(d.worker, 1);
        assert_eq!(d.batch_tokens, 1, "only the last prompt token is computed");
        assert_eq!(d.first_token, vec![7]);
        let d2 = e.step(d.end_ns).unwrap();
        let d3 = e.step(d2.end_ns).unwrap();
        assert_eq!(d3.finished, vec![7]);
        assert!(e.is_idle());
        assert_eq!(e.snapshot().generation_tokens_total, 3);
    }

    /// vLLM's proxy sends the request to the decode server once the prefill has answered:
    /// that server's API server takes it (1 ms + 1 µs per prompt token), and only then does
    /// the decode scheduler pull the KV. SGLang's router sent it there at arrival.
    #[test]
    fn pd_decode_server_takes_the_request_after_the_prefill() {
        let delay = |engine: &str| {
            let cfg = EngineFile::parse(&format!(
                "engine: {engine}\nmodel: qwen3-8b\ngpu: h100\n\
                 calibration: {{step_jitter: 0, frontend_us: 1000, frontend_per_token_us: 1}}\n\
                 pd: {{prefill: {{workers: 1, tp: 1}}, decode: {{workers: 1, tp: 1}}, \
                 link: {{bandwidth_gb_s: 10, latency_us: 100}}}}\n"
            ))
            .unwrap()
            .build(None)
            .unwrap();
            let mut e = Engine::new(&cfg).unwrap();
            e.add_request(0, shape(1000, 2), 0).unwrap();
            // The prefill server: 1 ms + 1,000 × 1 µs.
            assert_eq!(e.next_event_ns(), Some(2_000_000));
            let p = e.step(2_000_000).unwrap();
            assert_eq!(p.handed_off, vec![0]);
            let ready = e.next_event_ns().unwrap();
            assert!(e.step(ready - 1).is_none());
            let d = e.step(ready).unwrap();
            assert_eq!((d.worker, d.first_token.clone()), (1, vec![0]));
            ready - p.end_ns
        };
        // Transfer: 100 µs + 147,456 B/token × 1000 / (10 GB/s × 0.7) = 21.165143 ms.
        let transfer = 100_000 + 21_065_143;
        assert_eq!(delay("vllm-v1"), 2_000_000 + transfer);
        assert_eq!(delay("trtllm"), 2_000_000 + transfer);
        assert_eq!(delay("sglang"), transfer);
        assert_eq!(delay("dynamo"), transfer);
    }

    /// Dynamo 0.1-0.3 (`dynamo-v0`): the Processor (1 ms + 1 µs a prompt token) hands the
    /// request to the decode worker, whose V0 scheduler admits it in a step of its CPU time
    /// alone (2.5 ms at TP 1: no forward, no decode), and only then does the prompt reach the
    /// prefill worker; the KV comes back to that decode worker, which samples the first token
    /// in its next step. A request aborted while it waits for the prefill worker leaves no
    /// count behind.
    #[test]
    fn pd_dynamo_v0_decode_worker_admits_first() {
        let cfg = EngineFile::parse(
            "engine: dynamo\nengine_version: \"0.3.0\"\nmodel: qwen3-8b\ngpu: h100\n\
             calibration: {step_jitter: 0, frontend_us: 1000, frontend_per_token_us: 1}\n\
             pd: {prefill: {workers: 1, tp: 1}, decode: {workers: 1, tp: 1}, \
             link: {bandwidth_gb_s: 10, latency_us: 100}}\n",
        )
        .unwrap()
        .build(None)
        .unwrap();
        let mut e = Engine::new(&cfg).unwrap();
        e.add_request(0, shape(1000, 2), 0).unwrap();
        e.add_request(1, shape(1000, 2), 0).unwrap();
        // The decode worker's API server: 2 ms each, one after the other.
        assert_eq!(e.next_event_ns(), Some(2_000_000));
        let a = e.step(2_000_000).unwrap();
        assert_eq!((a.worker, a.end_ns, a.batch_seqs), (1, 4_500_000, 0));
        assert!(a.emitted.is_empty() && a.handed_off.is_empty());
        // Request 0's prefill starts at its end; the second left the API server during that
        // step and gets an admission step of its own.
        let p = e.step(4_500_000).unwrap();
        assert_eq!((p.worker, p.handed_off.clone()), (0, vec![0]));
        let b = e.step(4_500_000).unwrap();
        assert_eq!((b.worker, b.end_ns), (1, 7_000_000));
        e.abort(1);
        assert_eq!(e.slots[1].load(p.end_ns), 1, "request 0 still counts on its decode worker");
        // Request 1 would have reached the prefill worker at 7 ms: nothing is left to run then.
        assert_eq!(e.next_event_ns(), Some(7_000_000));
        assert!(e.step(7_000_000).is_none());
        let ready = e.next_event_ns().unwrap();
        assert_eq!(ready - p.end_ns, 100_000 + 21_065_143, "no second API server");
        let d = e.step(ready).unwrap();
        assert_eq!((d.worker, d.first_token.clone(), d.batch_tokens), (1, vec![0], 1));
        let d2 = e.step(d.end_ns).unwrap();
        assert_eq!(d2.finished, vec![0]);
        assert!(e.step(d2.end_ns).is_none() && e.is_idle());
        assert_eq!(e.slots.iter().map(|s| s.load(d2.end_ns)).sum::<usize>(), 0);
    }

    /// Dynamo 0.1-0.3's conditional disaggregation: a prompt at or under
    /// `max_local_prefill_length` is prefilled by the decode worker itself, and so is a long
    /// one that arrives while `max_prefill_queue_size` prompts wait for a prefill worker; the
    /// rest go to the prefill worker. Off, every prompt goes there.
    #[test]
    fn pd_dynamo_v0_conditional_disaggregation_keeps_short_prompts_and_overflow() {
        // (request, prompt tokens, arrival ms): a short one, a long one that takes the prefill
        // worker, one that waits for it, and one that finds that one waiting.
        let requests = [(0, 50, 0), (1, 4000, 0), (2, 4000, 5), (3, 4000, 10)];
        let run = |pd_flags: &str| {
            let cfg = EngineFile::parse(&format!(
                "engine: dynamo\nengine_version: \"0.3.0\"\nmodel: qwen3-8b\ngpu: h100\n\
                 calibration: {{step_jitter: 0, frontend_us: 1000}}\n\
                 pd: {{prefill: {{workers: 1, tp: 1}}, decode: {{workers: 1, tp: 1}}{pd_flags}}}\n"
            ))
            .unwrap()
            .build(None)
            .unwrap();
            let mut e = Engine::new(&cfg).unwrap();
            // Per request: handed off by a prefill worker, and the prompt tokens of the step
            // that gave its first token.
            let mut remote = [false; 4];
            let mut first_step_tokens = [0u64; 4];
            let mut pending = requests.iter().peekable();
            let mut now = 0;
            loop {
                while let Some(&&(id, prompt, at)) = pending.peek() {
                    if at * 1_000_000 > now {
                        break;
                    }
                    e.add_request(id, shape(prompt, 2), now).unwrap();
                    pending.next();
                }
                while let Some(s) = e.step(now) {
                    for id in s.handed_off {
                        remote[id as usize] = true;
                    }
                    for id in s.first_token {
                        assert_eq!(s.worker, 1, "first tokens come from the decode worker");
                        first_step_tokens[id as usize] = s.batch_tokens;
                    }
                }
                let next_arrival = pending.peek().map(|r| r.2 * 1_000_000);
                now = match (e.next_event_ns(), next_arrival) {
                    (Some(a), Some(b)) => a.min(b),
                    (a, b) => match a.or(b) {
                        Some(t) => t,
                        None => break,
                    },
                };
            }
            assert!(e.is_idle());
            (remote, first_step_tokens)
        };
        let conditional = ", conditional_disagg: true, max_local_prefill_length: 100, \
                           max_prefill_queue_size: 1";
        let (remote, tokens) = run(conditional);
        assert_eq!(remote, [false, true, true, false], "{tokens:?}");
        // Local prompts are computed whole by the decode worker; a remote one's first token
        // computes its last prompt token only (with whatever else decodes then).
        assert!(tokens[0] >= 50 && tokens[3] >= 4000, "{tokens:?}");
        assert!(tokens[1] < 50 && tokens[2] < 50, "{tokens:?}");
        // The defaults (1,000 tokens, a queue of 3): the long ones all go remote.
        let (remote, _) = run(", conditional_disagg: true");
        assert_eq!(remote, [false, true, true, true]);
        // Off (Dynamo's default, and written so): every prompt goes to the prefill worker.
        for flags in ["", ", conditional_disagg: false, remote_prefill: true"] {
            assert_eq!(run(flags).0, [true; 4], "{flags}");
        }
        assert_eq!(ConditionalDisagg::DEFAULT.max_local_prefill_length, 1000);
    }

    /// Dynamo 0.1-0.3 with a request aborted at every point of its path in turn (its
    /// decode worker's API server, waiting for admission, in the prefill queue, prefilling, in
    /// transfer, decoding): the others finish with all their tokens and no worker keeps a
    /// count of it.
    #[test]
    fn pd_dynamo_v0_aborts_leave_nothing_behind() {
        let yaml = "engine: dynamo-v0\nmodel: qwen3-8b\ngpu: h100\n\
                    pd: {prefill: {workers: 2, tp: 1}, decode: {workers: 2, tp: 1}}\n";
        let run = |victim: RequestId, at_event: usize| -> (Vec<u32>, usize) {
            let mut e = engine(yaml);
            for id in 0..4 {
                e.add_request(id, shape(500 + 100 * id as u32, 3), 0).unwrap();
            }
            let mut tokens = vec![0u32; 4];
            let (mut now, mut events) = (0, 0);
            while let Some(t) = e.next_event_ns() {
                now = now.max(t);
                if events == at_event {
                    e.abort(victim);
                }
                events += 1;
                while let Some(s) = e.step(now) {
                    for (id, n) in s.emitted {
                        tokens[id as usize] += n;
                    }
                }
                assert!(events < 1000, "the engine never idles");
            }
            assert!(e.is_idle());
            // Once the last step is over.
            let loads: Vec<usize> = e.slots.iter().map(|s| s.load(u64::MAX)).collect();
            assert_eq!(loads, vec![0; 4], "{victim} aborted at event {at_event}");
            (tokens, events)
        };
        let (all, events) = run(99, 0);
        assert_eq!(all, vec![3; 4]);
        for victim in 0..4 {
            for at in 0..events {
                let (tokens, _) = run(victim, at);
                for (id, &n) in tokens.iter().enumerate() {
                    if id as RequestId != victim {
                        assert_eq!(n, 3, "request {id} with {victim} aborted at event {at}");
                    }
                }
            }
        }
    }

    /// The KV transfer against one that was measured: Qwen3-8B from a TP-8 prefill instance
    /// to a TP-8 decode instance on another node of H800s, over eight ConnectX-7 NICs of 25
    /// GB/s each, took 31.65 ms for a 32,768-token prompt (4.50 GiB) and 8.84 ms for 8,192
    /// tokens in the Mooncake team's run (testdata/public/mooncake-…-pd-1p1d-c1.yaml). The
    /// model, at the default link efficiency, not fitted to them: 34.52 and 8.64 ms.
    #[test]
    fn pd_transfer_time_matches_a_measured_rdma_transfer() {
        let transfer_ms = |prompt: u32| {
            let mut e = engine(
                "model: qwen3-8b\ngpu: h800\npd: {prefill: {workers: 1, tp: 8}, decode: \
                 {workers: 1, tp: 8}, link: {bandwidth_gb_s: 25, latency_us: 10}}\n",
            );
            e.add_request(0, shape(prompt, 1), 0).unwrap();
            loop {
                let s = e.step(e.next_event_ns().unwrap()).unwrap();
                if !s.handed_off.is_empty() {
                    return (e.next_event_ns().unwrap() - s.end_ns) as f64 / 1e6;
                }
            }
        };
        let (long, short) = (transfer_ms(32_768), transfer_ms(8192));
        assert!((long - 34.52).abs() < 0.01 && (short - 8.64).abs() < 0.01, "{long} {short}");
        assert!((long / 31.65 - 1.0).abs() < 0.1 && (short / 8.84 - 1.0).abs() < 0.1);
    }

    /// With P/D, requests enter through the prefill workers' API servers: the prefill pool's
    /// own `frontend_us` applies (here 0, where the top level says 1 ms).
    #[test]
    fn pd_requests_enter_through_the_prefill_pools_api_server() {
        let cfg = EngineFile::parse(
            "model: qwen3-8b\ngpu: h100\ncalibration: {step_jitter: 0}\n\
             pd: {prefill: {workers: 1, tp: 1, calibration: {frontend_us: 0, \
             frontend_per_token_us: 0}}, decode: {workers: 1, tp: 1}}\n",
        )
        .unwrap()
        .build(None)
        .unwrap();
        let mut e = Engine::new(&cfg).unwrap();
        e.add_request(0, shape(100, 2), 0).unwrap();
        assert_eq!(e.step(0).map(|s| s.handed_off), Some(vec![0]));
    }

    /// With async scheduling the step after the one running was chosen when it started: a
    /// request that reaches the scheduler during a step joins the step after the next, unless
    /// the worker would otherwise idle.
    #[test]
    fn async_scheduling_takes_a_new_request_one_step_later() {
        let run = |async_on: bool| {
            let mut e = engine(&format!(
                "model: qwen3-8b\ngpu: h100\nscheduler: {{async_scheduling: {async_on}}}\n"
            ));
            e.add_request(0, shape(100, 10), 0).unwrap();
            let first = e.step(0).unwrap();
            // Request 1 arrives during request 0's first step.
            e.add_request(1, shape(100, 10), first.end_ns / 2).unwrap();
            let mut now = first.end_ns;
            let mut steps_to_first = 0;
            while let Some(s) = e.step(now) {
                steps_to_first += 1;
                if s.first_token.contains(&1) {
                    break;
                }
                now = s.end_ns;
            }
            steps_to_first
        };
        assert_eq!(run(false), 1, "the next step takes it");
        assert_eq!(run(true), 2, "the step after the next");
        // Alone, a request that arrives while the worker idles starts at once either way.
        let mut e = engine("model: qwen3-8b\ngpu: h100\nscheduler: {async_scheduling: true}\n");
        e.add_request(0, shape(100, 1), 0).unwrap();
        let a = e.step(0).unwrap();
        e.add_request(1, shape(100, 1), a.end_ns / 2).unwrap();
        let b = e.step(a.end_ns).unwrap();
        assert_eq!(b.first_token, vec![1], "nothing else to run: no step is lost");
    }

    #[test]
    fn the_api_server_spreads_simultaneous_arrivals() {
        let mut cfg =
            EngineFile::parse("model: qwen3-8b\ngpu: h100\nscheduler: {async_scheduling: false}\n")
                .unwrap()
                .build(None)
                .unwrap();
        cfg.calibration.step_jitter = 0.0;
        let mut e = Engine::new(&cfg).unwrap();
        // Tokenising 100 tokens × 1 µs, one request after the other, then 1000 µs each.
        e.add_request(0, shape(100, 2), 0).unwrap();
        e.add_request(1, shape(100, 2), 0).unwrap();
        assert!(e.step(0).is_none());
        assert_eq!(e.next_event_ns(), Some(1_100_000));
        assert!(e.step(1_099_999).is_none());
        assert_eq!(e.snapshot().waiting, 2);
        let a = e.step(1_100_000).unwrap();
        assert_eq!(a.first_token, vec![0]);
        // Request 1 reaches the scheduler at 1.2 ms, during request 0's step: it waits.
        assert!(a.end_ns > 1_200_000);
        assert_eq!(e.next_event_ns(), Some(1_200_000));
        assert!(e.step(1_200_000).is_none());
        let b = e.step(a.end_ns).unwrap();
        assert_eq!(b.batch_seqs, 2);
        assert_eq!(b.first_token, vec![1]);
    }

    #[test]
    fn impossible_requests_are_rejected() {
        let mut e = engine("model: qwen3-8b\ngpu: h100\nscheduler: {num_gpu_blocks: 10}\n");
        let err = e.add_request(1, shape(1000, 10), 0).unwrap_err().to_string();
        assert!(err.contains("needs 64 KV blocks, more than the 10"), "{err}");
    }

    /// An aborted request leaves wherever it is: in its API server (never scheduled) or
    /// running (its slot goes to the next waiting request).
    #[test]
    fn abort_removes_a_request_everywhere() {
        let mut e = engine("model: qwen3-8b\ngpu: h100\nscheduler: {max_num_seqs: 1}\n");
        e.add_request(1, shape(100, 1000), 0).unwrap();
        e.add_request(2, shape(100, 5), 0).unwrap();
        e.add_request(3, shape(100, 5), 0).unwrap();
        e.abort(3);
        let first = e.step(0).unwrap();
        assert_eq!(first.first_token, vec![1]);
        e.abort(1);
        let g = e.snapshot();
        assert_eq!((g.running, g.waiting), (0, 1));
        let mut emitted = Vec::new();
        let mut now = first.end_ns;
        while let Some(s) = e.step(now) {
            emitted.extend(s.emitted.iter().map(|&(id, _)| id));
            now = s.end_ns;
        }
        assert_eq!(emitted, vec![2; 5], "only request 2 runs after the aborts");
        assert!(e.is_idle());
    }
}
