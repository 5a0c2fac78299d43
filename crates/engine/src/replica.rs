//! One worker's scheduler: vLLM-V1-like continuous batching over a KV block pool.
//!
//! Per step: running requests first, in admission order, each scheduling what it lacks (one
//! token for a decode, the next chunk for a prefill) within the token budget; a request that
//! cannot get its KV blocks preempts the most recently admitted running request (recompute: its
//! blocks are freed and it goes back to the front of the waiting queue), possibly itself. Then,
//! if nothing was preempted, waiting requests in FIFO order while `max_num_seqs` and the budget
//! allow; a request whose blocks do not fit stops admission (no skipping ahead). A TensorRT-LLM
//! worker admits a request only with the blocks of its whole sequence, taken at once, and so
//! never preempts. A request
//! whose computed tokens reach its length samples one token at the step's end.

use std::collections::VecDeque;

use crate::config::WorkerSpec;
use crate::cost::{BatchShape, CostModel};
use crate::kv::{request_block_keys, BlockId, BlockPool};
use crate::model::Hybrid;

/// Which running requests a scheduling pass takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Every running request.
    All,
    /// Those with more than one token to compute (prompt chunks, recomputation).
    Prefill,
    /// Those computing one token.
    Decode,
}

/// Caller-chosen request id.
pub type RequestId = u64;

#[derive(Debug, Clone)]
struct Req {
    id: RequestId,
    prompt: u32,
    output: u32,
    keys: Vec<u64>,
    /// Prompt plus sampled tokens.
    len: u32,
    /// Tokens whose KV is computed.
    computed: u32,
    generated: u32,
    blocks: Vec<BlockId>,
    /// Blocks beyond one per `block_size` tokens: a hybrid model's sliding-window layers
    /// ([`Hybrid`]).
    extra: Vec<BlockId>,
    /// Leading blocks already registered in the prefix cache.
    registered: usize,
    preemptions: u32,
}

/// What one step of a worker did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WorkerStep {
    /// Step duration, ns.
    pub duration_ns: u64,
    /// Requests that sampled one token at the step's end.
    pub sampled: Vec<RequestId>,
    /// Of those, the ones whose token is their first.
    pub first_token: Vec<RequestId>,
    /// Requests that completed (their last token was sampled); their blocks are freed.
    pub finished: Vec<RequestId>,
    /// Requests preempted while scheduling this step.
    pub preempted: Vec<RequestId>,
    /// (request, tokens computed) of the batch, in schedule order.
    pub batch: Vec<(RequestId, u32)>,
    /// Requests admitted for a remote prefill in this step, which computes nothing else
    /// ([`Worker::admit_remote`]).
    pub admitted: Vec<RequestId>,
}

/// Counters a worker exposes (a real engine's `/metrics`).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct WorkerCounters {
    /// Requests running.
    pub running: u32,
    /// Requests waiting.
    pub waiting: u32,
    /// KV blocks held by requests.
    pub blocks_used: u64,
    /// KV blocks in the pool.
    pub blocks_total: u64,
    /// Preemptions so far.
    pub preemptions_total: u64,
    /// Prompt tokens of requests that completed their prefill.
    pub prompt_tokens_total: u64,
    /// Tokens sampled.
    pub generation_tokens_total: u64,
    /// Prompt tokens looked up in the prefix cache.
    pub prefix_cache_queries: u64,
    /// Of those, tokens found cached.
    pub prefix_cache_hits: u64,
}

/// One worker: a TP group with its scheduler, KV pool and cost model.
#[derive(Debug, Clone)]
pub struct Worker {
    cost: CostModel,
    pool: BlockPool,
    block_size: u32,
    max_seqs: usize,
    budget: u32,
    chunked: bool,
    caching: bool,
    /// Prefill chunks and decodes share a step; off: prefill-first steps.
    mixed: bool,
    /// Admission takes the KV blocks of the whole sequence (TensorRT-LLM's
    /// `GUARANTEED_NO_EVICT`): no preemption.
    reserve_full: bool,
    /// The next step is chosen while the current one runs (vLLM's async scheduling).
    async_scheduling: bool,
    /// The newest waiting requests that reached the queue after the next step was chosen
    /// (async scheduling): they join the step after that. Always the back of `waiting`:
    /// arrivals are queued in order and preempted requests go to the front.
    held: usize,
    max_model_len: Option<u32>,
    hybrid: Option<Hybrid>,
    slab: Vec<Option<Req>>,
    free_slots: Vec<usize>,
    running: Vec<usize>,
    waiting: VecDeque<usize>,
    counters: WorkerCounters,
    scratch: Vec<(usize, u32)>,
    /// (request, prompt tokens) that reached this decode worker before their prefill, to be
    /// admitted for a remote prefill ([`Worker::admit_remote`]).
    remote: VecDeque<(RequestId, u32)>,
    jitter: f64,
    rng: SplitMix64,
}

/// SplitMix64: a tiny, seeded, portable generator (deterministic across platforms).
#[derive(Debug, Clone)]
pub(crate) struct SplitMix64(pub(crate) u64);

impl SplitMix64 {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [−1, 1).
    fn signed_unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
    }

    /// Uniform in `0..n` (`n` ≥ 1): the high half of a 128-bit product, no modulo bias to
    /// speak of.
    pub(crate) fn below(&mut self, n: usize) -> usize {
        ((u128::from(self.next_u64()) * n as u128) >> 64) as usize
    }
}

/// Why a request can never run on a worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reject {
    /// Needs more KV blocks than the worker has.
    TooLong {
        /// Blocks needed for prompt + output.
        needed: u64,
        /// Blocks of the worker.
        capacity: u64,
    },
    /// Prompt plus output exceed `max_model_len`.
    OverMaxModelLen {
        /// Prompt + output tokens.
        len: u64,
        /// `max_model_len`.
        max: u32,
    },
    /// Chunked prefill is off and the prompt exceeds the step's token budget.
    PromptOverBudget {
        /// Prompt tokens.
        prompt: u32,
        /// `max_num_batched_tokens`.
        budget: u32,
    },
}

impl std::fmt::Display for Reject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Reject::TooLong { needed, capacity } => {
                write!(f, "request needs {needed} KV blocks, more than the {capacity} a worker has")
            }
            Reject::OverMaxModelLen { len, max } => {
                write!(f, "prompt + output of {len} tokens exceed max_model_len {max}")
            }
            Reject::PromptOverBudget { prompt, budget } => write!(
                f,
                "prompt of {prompt} tokens exceeds max_num_batched_tokens {budget} with \
                 chunked prefill off"
            ),
        }
    }
}

impl Worker {
    /// A worker of spec `w` with `blocks` KV blocks; `stream` tells workers' noise apart.
    pub fn new(w: &WorkerSpec, blocks: u64, stream: u64) -> Self {
        let s = &w.scheduler;
        let blocks = u32::try_from(blocks).unwrap_or(u32::MAX);
        Self {
            cost: CostModel::new(w),
            pool: BlockPool::new(blocks),
            block_size: s.block_size,
            max_seqs: if s.max_num_seqs_from_kv {
                let context = s.max_model_len.or(w.model.max_position_embeddings);
                let tokens = u64::from(blocks).saturating_mul(u64::from(s.block_size));
                usize::try_from(crate::family::sglang_max_running_requests(tokens, context))
                    .unwrap_or(usize::MAX)
            } else {
                s.max_num_seqs as usize
            },
            budget: s.max_num_batched_tokens,
            chunked: s.chunked_prefill,
            caching: s.prefix_caching,
            mixed: s.mixed_batches,
            reserve_full: w.engine.traits().reserve_full_kv,
            async_scheduling: s.async_scheduling,
            held: 0,
            max_model_len: s.max_model_len,
            hybrid: w.model.hybrid(),
            slab: Vec::new(),
            free_slots: Vec::new(),
            running: Vec::new(),
            waiting: VecDeque::new(),
            counters: WorkerCounters { blocks_total: u64::from(blocks), ..Default::default() },
            scratch: Vec::new(),
            remote: VecDeque::new(),
            jitter: w.calibration.step_jitter,
            rng: SplitMix64(w.calibration.seed ^ stream.wrapping_mul(0xA076_1D64_78BD_642F)),
        }
    }

    /// The worker's cost model.
    pub fn cost(&self) -> &CostModel {
        &self.cost
    }

    /// Whether it has requests running or waiting.
    pub fn has_work(&self) -> bool {
        !self.running.is_empty() || !self.waiting.is_empty() || !self.remote.is_empty()
    }

    /// Running plus waiting requests; the engine adds those its step in flight still computes
    /// (the least-loaded router's measure).
    pub fn load(&self) -> usize {
        self.running.len() + self.waiting.len() + self.remote.len()
    }

    /// Requests waiting for their first step (admitted for a remote prefill or not).
    pub fn waiting(&self) -> usize {
        self.waiting.len()
    }

    /// A request whose prompt a prefill worker will compute reaches this decode worker first,
    /// as in Dynamo 0.1-0.3: its V0 scheduler admits it through the prefill path (the prompt
    /// counts against the token budget) in a step that runs no forward pass and no decode
    /// (prefill-first), only the step's CPU time, and hands the prompt to the prefill queue
    /// at that step's end ([`WorkerStep::admitted`]).
    pub fn admit_remote(&mut self, id: RequestId, prompt: u32) {
        self.remote.push_back((id, prompt));
    }

    /// Its counters now.
    pub fn counters(&self) -> WorkerCounters {
        WorkerCounters {
            running: self.running.len() as u32,
            waiting: self.waiting.len() as u32,
            blocks_used: self.pool.used() as u64,
            ..self.counters
        }
    }

    fn blocks_for(&self, tokens: u32) -> usize {
        tokens.div_ceil(self.block_size) as usize
    }

    /// Blocks a request holds beyond `blocks_for(upto)` once its KV reaches `upto` tokens,
    /// `n` of them computed in this step: the other full-attention groups' blocks of every
    /// token, and each sliding group's for the window behind the step's tokens plus the
    /// step's own (one more for a window that does not start on a block boundary).
    fn extra_blocks(&self, upto: u32, n: u32) -> usize {
        let Some(h) = self.hybrid else { return 0 };
        let full = self.blocks_for(upto);
        let reach = upto.min(h.window.saturating_sub(1).saturating_add(n));
        let sliding = (self.blocks_for(reach) + 1).min(full);
        full * (h.full_groups as usize - 1) + sliding * h.sliding_groups as usize
    }

    /// Frees a request's extra blocks beyond `keep` (the window has moved past them).
    fn trim_extra(&mut self, slot: usize, keep: usize) {
        let r = self.slab[slot].as_mut().expect("live slot");
        if r.extra.len() > keep {
            self.pool.release(&r.extra[keep..]);
            r.extra.truncate(keep);
        }
    }

    /// Adds `n` blocks to a request's extra blocks; false if the pool has too few.
    fn allocate_extra(&mut self, slot: usize, n: usize) -> bool {
        if n == 0 {
            return true;
        }
        let r = self.slab[slot].as_mut().expect("live slot");
        self.pool.allocate(n, &mut r.extra)
    }

    /// Checks a request could ever run here.
    pub fn check(&self, prompt: u32, output: u32) -> Result<(), Reject> {
        if let Some(max) = self.max_model_len {
            let len = u64::from(prompt) + u64::from(output.max(1));
            if len > u64::from(max) {
                return Err(Reject::OverMaxModelLen { len, max });
            }
        }
        let len = prompt.saturating_add(output.max(1));
        let chunk = if self.chunked { prompt.min(self.budget) } else { prompt };
        let needed = (self.blocks_for(len) + self.extra_blocks(len, chunk.max(1))) as u64;
        if needed > u64::from(self.pool.total()) {
            return Err(Reject::TooLong { needed, capacity: u64::from(self.pool.total()) });
        }
        if !self.chunked && prompt > self.budget {
            return Err(Reject::PromptOverBudget { prompt, budget: self.budget });
        }
        Ok(())
    }

    /// Queues a request. `precomputed` prompt tokens already have KV here (P/D: transferred
    /// from a prefill worker; at most `prompt - 1`, so the first step samples a token).
    pub fn add(
        &mut self,
        id: RequestId,
        prompt: u32,
        output: u32,
        hashes: (&[u64], u32),
        precomputed: u32,
    ) -> Result<(), Reject> {
        self.check(prompt, output)?;
        let keys = if self.caching {
            request_block_keys(prompt, hashes.0, hashes.1, self.block_size, id)
        } else {
            Vec::new()
        };
        let req = Req {
            id,
            prompt: prompt.max(1),
            output: output.max(1),
            keys,
            len: prompt.max(1),
            computed: precomputed.min(prompt.saturating_sub(1)),
            generated: 0,
            blocks: Vec::new(),
            extra: Vec::new(),
            registered: 0,
            preemptions: 0,
        };
        let slot = match self.free_slots.pop() {
            Some(s) => {
                self.slab[s] = Some(req);
                s
            }
            None => {
                self.slab.push(Some(req));
                self.slab.len() - 1
            }
        };
        self.waiting.push_back(slot);
        Ok(())
    }

    /// Whether the worker chooses its next step while the current one runs.
    pub fn async_scheduling(&self) -> bool {
        self.async_scheduling
    }

    /// Marks the request queued last as having arrived after the next step was chosen: with
    /// async scheduling it waits one more step (unless the worker would otherwise idle).
    pub fn hold_newest(&mut self) {
        self.held = (self.held + 1).min(self.waiting.len());
    }

    fn req(&self, slot: usize) -> &Req {
        // Slots in `running`/`waiting` always hold a request.
        self.slab[slot].as_ref().expect("live slot")
    }

    fn req_mut(&mut self, slot: usize) -> &mut Req {
        self.slab[slot].as_mut().expect("live slot")
    }

    /// Frees the KV of the last running request and puts it at the front of the queue.
    fn preempt_last(&mut self) -> Option<(usize, RequestId)> {
        let slot = self.running.pop()?;
        self.trim_extra(slot, 0);
        let mut blocks = std::mem::take(&mut self.req_mut(slot).blocks);
        self.pool.release(&blocks);
        blocks.clear();
        let r = self.req_mut(slot);
        r.blocks = blocks;
        r.computed = 0;
        r.registered = 0;
        r.preemptions += 1;
        let id = r.id;
        self.counters.preemptions_total += 1;
        self.waiting.push_front(slot);
        Some((slot, id))
    }

    /// Schedules the running requests of `phase`; returns the budget left.
    fn schedule_running(&mut self, out: &mut WorkerStep, phase: Phase) -> u32 {
        let mut budget = self.budget;
        let mut i = 0;
        while i < self.running.len() && budget > 0 {
            let slot = self.running[i];
            let r = self.req(slot);
            let prefilling = r.len - r.computed > 1;
            if (phase == Phase::Prefill && !prefilling) || (phase == Phase::Decode && prefilling) {
                i += 1;
                continue;
            }
            let n = (r.len - r.computed).min(budget);
            let upto = r.computed + n;
            let need = self.blocks_for(upto).saturating_sub(r.blocks.len());
            let need_extra = if self.hybrid.is_some() {
                let extra = self.extra_blocks(upto, n);
                self.trim_extra(slot, extra);
                extra - self.req(slot).extra.len()
            } else {
                0
            };
            let mut self_preempted = false;
            while self.pool.free() < need + need_extra {
                match self.preempt_last() {
                    Some((victim, id)) => {
                        out.preempted.push(id);
                        if victim == slot {
                            self_preempted = true;
                            break;
                        }
                    }
                    None => break,
                }
            }
            if self_preempted {
                break;
            }
            let mut blocks = std::mem::take(&mut self.req_mut(slot).blocks);
            let ok = self.pool.allocate(need, &mut blocks);
            self.req_mut(slot).blocks = blocks;
            if !(ok && self.allocate_extra(slot, need_extra)) {
                break;
            }
            self.scratch.push((slot, n));
            budget -= n;
            i += 1;
        }
        budget
    }

    /// Admits waiting requests in FIFO order: those of `phase` (a request whose KV arrived from a
    /// prefill worker, one token left, is a decode; [`Phase::All`] takes both).
    fn schedule_waiting(&mut self, mut budget: u32, phase: Phase) {
        while let Some(&slot) = self.waiting.front() {
            if self.running.len() >= self.max_seqs || budget == 0 {
                break;
            }
            let r = self.req(slot);
            let delivered = r.computed > 0 && r.len - r.computed == 1;
            if (phase == Phase::Prefill && delivered) || (phase == Phase::Decode && !delivered) {
                break;
            }
            // The rest came after this step was chosen: FIFO stops here.
            if self.waiting.len() <= self.held {
                break;
            }
            let bs = self.block_size;
            let r = self.req(slot);
            // Cached prefix: whole blocks, leaving at least one token to compute.
            let (hit, hit_free) = if r.computed == 0 && !r.keys.is_empty() {
                let usable = ((r.len - 1) / bs) as usize;
                let (h, f) = self.pool.lookup(&r.keys[..r.keys.len().min(usable)]);
                (h, f)
            } else {
                (0, 0)
            };
            let computed = if hit > 0 { hit as u32 * bs } else { r.computed };
            let mut n = r.len - computed;
            if n > budget {
                if !self.chunked {
                    break;
                }
                n = budget;
            }
            let have = hit.max(r.blocks.len());
            // Reserving the whole sequence (TensorRT-LLM) takes every block it will need now.
            let upto = if self.reserve_full { r.prompt + r.output } else { computed + n };
            let need = self.blocks_for(upto).saturating_sub(have);
            let need_extra = self.extra_blocks(upto, n).saturating_sub(r.extra.len());
            if self.pool.free() < need + need_extra + hit_free {
                break;
            }
            let prompt = r.prompt;
            let first_try = r.computed == 0 && r.generated == 0;
            let mut blocks = std::mem::take(&mut self.req_mut(slot).blocks);
            if hit > 0 {
                let keys = std::mem::take(&mut self.req_mut(slot).keys);
                self.pool.acquire(&keys, hit, &mut blocks);
                let r = self.req_mut(slot);
                r.keys = keys;
                r.registered = hit;
            }
            self.pool.allocate(need, &mut blocks);
            self.req_mut(slot).blocks = blocks;
            self.allocate_extra(slot, need_extra);
            let r = self.req_mut(slot);
            r.computed = computed;
            if first_try && !r.keys.is_empty() {
                self.counters.prefix_cache_queries += u64::from(prompt);
                self.counters.prefix_cache_hits += hit as u64 * u64::from(bs);
            }
            self.waiting.pop_front();
            self.running.push(slot);
            self.scratch.push((slot, n));
            budget -= n;
        }
    }

    /// Runs one step: schedules, prices and applies it. `None` if nothing could be scheduled
    /// (no work).
    pub fn step(&mut self) -> Option<WorkerStep> {
        if !self.has_work() {
            return None;
        }
        let mut out = WorkerStep::default();
        if !self.remote.is_empty() {
            // Whole prompts within the budget, at least one.
            let mut tokens = 0u32;
            while let Some(&(id, prompt)) = self.remote.front() {
                if !out.admitted.is_empty() && tokens.saturating_add(prompt) > self.budget {
                    break;
                }
                tokens = tokens.saturating_add(prompt);
                out.admitted.push(id);
                self.remote.pop_front();
            }
            out.duration_ns = self.jittered(self.cost.cpu_step_ns());
            return Some(out);
        }
        self.scratch.clear();
        self.schedule(&mut out);
        if self.scratch.is_empty() && self.held > 0 {
            // Nothing else to run: an idle scheduler takes what arrived at once.
            self.held = 0;
            self.schedule(&mut out);
        }
        self.held = 0;
        if self.scratch.is_empty() {
            return None;
        }
        let window = self.cost.window();
        let mut shape = BatchShape::default();
        for &(slot, n) in &self.scratch {
            let r = self.req(slot);
            let samples = r.computed + n == r.len;
            shape.add(u64::from(n), u64::from(r.computed), samples, window);
        }
        out.duration_ns = self.jittered(self.cost.step_ns(&shape));
        let scheduled = std::mem::take(&mut self.scratch);
        let mut any_finished = false;
        for &(slot, n) in &scheduled {
            any_finished |= self.apply(slot, n, &mut out);
        }
        self.scratch = scheduled;
        if any_finished {
            self.remove_finished();
        }
        Some(out)
    }

    /// Chooses the step's sequences into `scratch`.
    fn schedule(&mut self, out: &mut WorkerStep) {
        if self.mixed {
            let budget = self.schedule_running(out, Phase::All);
            if out.preempted.is_empty() {
                self.schedule_waiting(budget, Phase::All);
            }
        } else {
            // Prefill-first (vLLM V0, SGLang): prompts (continued chunks, then admissions)
            // get a step of their own; decodes run when no prompt work can be scheduled. A
            // request whose KV a prefill worker sent joins the decodes (Dynamo 0.1-0.3's patch
            // puts it at the front of V0's running queue as a decode; SGLang's decode server
            // merges it into the running batch), not a step of its own.
            let budget = self.schedule_running(out, Phase::Prefill);
            if out.preempted.is_empty() {
                self.schedule_waiting(budget, Phase::Prefill);
            }
            if self.scratch.is_empty() {
                let budget = self.schedule_running(out, Phase::Decode);
                if out.preempted.is_empty() {
                    self.schedule_waiting(budget, Phase::Decode);
                }
            }
        }
    }

    fn jittered(&mut self, ns: u64) -> u64 {
        if self.jitter == 0.0 {
            return ns;
        }
        let f = 1.0 + self.jitter * self.rng.signed_unit();
        ((ns as f64 * f).round() as u64).max(1)
    }

    /// Applies `n` computed tokens to a request; true if it finished.
    fn apply(&mut self, slot: usize, n: u32, out: &mut WorkerStep) -> bool {
        let bs = self.block_size;
        let r = self.slab[slot].as_mut().expect("live slot");
        out.batch.push((r.id, n));
        r.computed += n;
        while r.registered < r.keys.len() && (r.registered as u32 + 1) * bs <= r.computed {
            self.pool.register(r.blocks[r.registered], r.keys[r.registered]);
            r.registered += 1;
        }
        if r.computed < r.len {
            return false;
        }
        r.generated += 1;
        r.len += 1;
        out.sampled.push(r.id);
        self.counters.generation_tokens_total += 1;
        if r.generated == 1 {
            out.first_token.push(r.id);
            self.counters.prompt_tokens_total += u64::from(r.prompt);
        }
        if r.generated < r.output {
            return false;
        }
        out.finished.push(r.id);
        self.pool.release(&r.blocks);
        self.pool.release(&r.extra);
        r.blocks.clear();
        r.extra.clear();
        true
    }

    fn remove_finished(&mut self) {
        let slab = &mut self.slab;
        let free = &mut self.free_slots;
        self.running.retain(|&s| {
            let done = slab[s].as_ref().is_some_and(|r| r.generated >= r.output);
            if done {
                slab[s] = None;
                free.push(s);
            }
            !done
        });
    }

    /// Drops a request whose client went away, wherever it is (waiting, prefilling or
    /// decoding): its KV blocks are freed (blocks registered in the prefix cache stay cached)
    /// and its sequence slot is free for the next step. False if it is not on this worker.
    pub fn abort(&mut self, id: RequestId) -> bool {
        if let Some(i) = self.remote.iter().position(|&(r, _)| r == id) {
            self.remote.remove(i);
            return true;
        }
        let Some(slot) = self.slab.iter().position(|r| r.as_ref().is_some_and(|r| r.id == id))
        else {
            return false;
        };
        let Some(r) = self.slab[slot].take() else { return false };
        let held_from = self.waiting.len() - self.held;
        if self.waiting.iter().skip(held_from).any(|&s| s == slot) {
            self.held -= 1;
        }
        self.pool.release(&r.blocks);
        self.pool.release(&r.extra);
        self.running.retain(|&s| s != slot);
        self.waiting.retain(|&s| s != slot);
        self.free_slots.push(slot);
        true
    }

    /// Preemptions a request has had so far (0 once it finished).
    pub fn preemptions_of(&self, id: RequestId) -> u32 {
        self.slab.iter().flatten().find(|r| r.id == id).map_or(0, |r| r.preemptions)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::EngineFile;

    /// A worker of Qwen3-8B on H100 with a tiny budget and pool.
    fn worker(budget: u32, seqs: u32, blocks: u64, chunked: bool, caching: bool) -> Worker {
        let yaml = format!(
            "model: qwen3-8b\ngpu: h100\nscheduler: {{max_num_batched_tokens: {budget}, \
             max_num_seqs: {seqs}, num_gpu_blocks: {blocks}, block_size: 4, \
             chunked_prefill: {chunked}, prefix_caching: {caching}}}\n"
        );
        let cfg = EngineFile::parse(&yaml).unwrap().build(None).unwrap();
        Worker::new(&cfg.worker(1), blocks, 0)
    }

    fn batch(s: &WorkerStep) -> Vec<(u64, u32)> {
        s.batch.clone()
    }

    /// Budget 8, two requests (prompt 6 / output 2, prompt 5 / output 2), plenty of blocks.
    /// Step 1: A prefills 6, B gets the remaining 2 tokens (chunk). A samples its first token.
    /// Step 2: A decodes its 2nd (last) token and finishes; B prefills its last 3 and samples
    /// its first token. Step 3: B decodes its last token and finishes.
    #[test]
    fn chunked_prefill_trace() {
        let mut w = worker(8, 4, 100, true, false);
        w.add(1, 6, 2, (&[], 0), 0).unwrap();
        w.add(2, 5, 2, (&[], 0), 0).unwrap();
        let s1 = w.step().unwrap();
        assert_eq!(batch(&s1), vec![(1, 6), (2, 2)]);
        assert_eq!(s1.first_token, vec![1]);
        let s2 = w.step().unwrap();
        assert_eq!(batch(&s2), vec![(1, 1), (2, 3)]);
        assert_eq!(s2.first_token, vec![2]);
        assert_eq!(s2.sampled, vec![1, 2]);
        assert_eq!(s2.finished, vec![1]);
        let s3 = w.step().unwrap();
        assert_eq!(batch(&s3), vec![(2, 1)]);
        assert_eq!(s3.finished, vec![2]);
        assert!(w.step().is_none());
        let c = w.counters();
        assert_eq!((c.generation_tokens_total, c.prompt_tokens_total, c.blocks_used), (4, 11, 0));
    }

    /// A model with sliding-window layers (gpt-oss-20b: 12 of 24 slide over 128 tokens):
    /// groups of 12 layers, one full and one sliding. A request holds a block per 16 tokens
    /// of the full group and, of the sliding group, the window behind the tokens being
    /// computed and those tokens (one more for a window that does not start on a block),
    /// never more than the full group's: a prompt of 1,600 tokens prefilled 512 a step
    /// (budget 512) holds ceil((127 + 512) / 16) + 1 = 41 sliding blocks while prefilling,
    /// 12 + 1 for its last 64 tokens, 8 + 1 once decoding; the blocks left behind are freed
    /// when it is next scheduled, all of them when it finishes. A dense model holds none
    /// beside its own.
    #[test]
    fn a_sliding_window_holds_only_its_blocks() {
        let yaml = "model: gpt-oss-20b\ngpu: h100\nscheduler: {max_num_batched_tokens: 512, \
                    num_gpu_blocks: 1000, block_size: 16}\n";
        let cfg = EngineFile::parse(yaml).unwrap().build(None).unwrap();
        let hybrid = cfg.model.hybrid();
        assert_eq!(hybrid, Some(Hybrid { window: 128, full_groups: 1, sliding_groups: 1 }));
        assert_eq!(cfg.model.block_group_layers(), 12);
        let mut w = Worker::new(&cfg.worker(1), 1000, 0);
        w.add(1, 1600, 3, (&[], 0), 0).unwrap();
        let used = |w: &Worker| w.counters().blocks_used;
        w.step().unwrap();
        assert_eq!(used(&w), 32 + 32, "512 tokens: all within reach, no more than the full");
        w.step().unwrap();
        assert_eq!(used(&w), 64 + 41);
        w.step().unwrap();
        w.step().unwrap();
        assert_eq!(used(&w), 100 + 13, "the last 64 of the prompt, the window behind them");
        w.step().unwrap();
        assert_eq!(used(&w), 101 + 9, "decoding: the window, the new token");
        let s = w.step().unwrap();
        assert_eq!(s.finished, vec![1]);
        assert_eq!(used(&w), 0);
        // Too long for the pool with its window: its blocks and the 41 of a 512-token chunk.
        assert!(matches!(w.add(2, 15_700, 1, (&[], 0), 0), Err(Reject::TooLong { .. })));
        assert!(w.add(3, 15_300, 1, (&[], 0), 0).is_ok());
        let dense = worker(64, 4, 100, true, false);
        let qwen = crate::model::ModelSpec::preset("qwen3-8b").unwrap();
        assert_eq!((dense.hybrid, qwen.block_group_layers()), (None, 36));
    }

    /// Prefill-first steps (vLLM V0, SGLang): B arrives while A decodes; B's prompt gets a
    /// step of its own (A waits), then both decode together. max_model_len refuses a request
    /// whose prompt + output exceed it.
    #[test]
    fn prefill_first_steps_do_not_mix() {
        let yaml =
            "engine: sglang\nmodel: qwen3-8b\ngpu: h100\nscheduler: {max_num_batched_tokens: 64, \
                    num_gpu_blocks: 100, block_size: 4, max_model_len: 20}\n";
        let cfg = EngineFile::parse(yaml).unwrap().build(None).unwrap();
        let mut w = Worker::new(&cfg.worker(1), 100, 0);
        w.add(1, 6, 3, (&[], 0), 0).unwrap();
        assert_eq!(batch(&w.step().unwrap()), vec![(1, 6)]);
        w.add(2, 5, 2, (&[], 0), 0).unwrap();
        assert_eq!(batch(&w.step().unwrap()), vec![(2, 5)], "prompt alone");
        assert_eq!(batch(&w.step().unwrap()), vec![(1, 1), (2, 1)], "then the decodes");
        assert_eq!(w.add(3, 15, 6, (&[], 0), 0), Err(Reject::OverMaxModelLen { len: 21, max: 20 }));
        // A mixed engine (vLLM V1) would have run B's prompt beside A's decode.
        let mut v1 = worker(64, 4, 100, true, false);
        v1.add(1, 6, 3, (&[], 0), 0).unwrap();
        v1.step().unwrap();
        v1.add(2, 5, 2, (&[], 0), 0).unwrap();
        assert_eq!(batch(&v1.step().unwrap()), vec![(1, 1), (2, 5)]);
    }

    /// P/D on a prefill-first engine: a request whose KV arrived from a prefill worker (all
    /// but its last prompt token computed) joins the running decodes in one step, as Dynamo
    /// 0.1-0.3's patch and SGLang's decode server take it, not a step of its own; a new prompt
    /// still gets its own step first.
    #[test]
    fn a_transferred_request_joins_the_decodes() {
        // A decode worker of Dynamo's P/D: prefill-first, chunked prefill off.
        let yaml = "engine: dynamo-v0\nmodel: qwen3-8b\ngpu: h100\nscheduler: \
                    {num_gpu_blocks: 100, block_size: 4, chunked_prefill: false}\n";
        let cfg = EngineFile::parse(yaml).unwrap().build(None).unwrap();
        let mut w = Worker::new(&cfg.worker(1), 100, 0);
        w.add(1, 6, 3, (&[], 0), 5).unwrap();
        let first = w.step().unwrap();
        assert_eq!((batch(&first), first.first_token.clone()), (vec![(1, 1)], vec![1]));
        w.add(2, 9, 2, (&[], 0), 8).unwrap();
        assert_eq!(batch(&w.step().unwrap()), vec![(1, 1), (2, 1)], "one decode step");
        w.add(3, 5, 2, (&[], 0), 0).unwrap();
        w.add(4, 7, 2, (&[], 0), 6).unwrap();
        assert_eq!(batch(&w.step().unwrap()), vec![(3, 5)], "a prompt first, alone");
        assert_eq!(batch(&w.step().unwrap()), vec![(1, 1), (2, 1), (3, 1), (4, 1)]);
    }

    /// Dynamo 0.1-0.3's decode worker admits remote prefills as V0 prefills: whole prompts
    /// within the budget (8 here: 5 + 3, then 4), in steps that compute nothing and last the
    /// step's CPU time (this worker's default 1 ms, within its ±5 % jitter), before any
    /// decode.
    #[test]
    fn remote_prefills_are_admitted_in_steps_of_their_own() {
        let mut w = worker(8, 4, 100, false, false);
        w.add(9, 6, 3, (&[], 0), 5).unwrap();
        for (id, prompt) in [(1, 5), (2, 3), (3, 4)] {
            w.admit_remote(id, prompt);
        }
        assert_eq!(w.load(), 4);
        let cpu = |w: &Worker| w.cost.cpu_step_ns();
        let first = w.step().unwrap();
        assert_eq!((first.admitted.clone(), first.batch.len()), (vec![1, 2], 0));
        assert_eq!(cpu(&w), 1_000_000);
        assert!(first.duration_ns.abs_diff(cpu(&w)) <= 50_000, "{}", first.duration_ns);
        assert_eq!(w.step().unwrap().admitted, vec![3]);
        assert_eq!(batch(&w.step().unwrap()), vec![(9, 1)], "then the decode");
        assert!(w.abort(9) && !w.has_work());
    }

    /// Without chunked prefill, B (prompt 5) does not fit the 2 tokens left after A's 6 and
    /// waits whole; max_num_seqs 1 would also have held it back.
    #[test]
    fn no_chunking_waits_for_the_whole_prompt() {
        let mut w = worker(8, 4, 100, false, false);
        w.add(1, 6, 2, (&[], 0), 0).unwrap();
        w.add(2, 5, 2, (&[], 0), 0).unwrap();
        assert_eq!(batch(&w.step().unwrap()), vec![(1, 6)]);
        assert_eq!(batch(&w.step().unwrap()), vec![(1, 1), (2, 5)]);
        assert_eq!(
            w.add(3, 9, 1, (&[], 0), 0),
            Err(Reject::PromptOverBudget { prompt: 9, budget: 8 })
        );
    }

    /// 4 blocks of 4 tokens. A (prompt 7, output 4) takes 2 blocks; B (prompt 7, output 4)
    /// takes 2. Step 1 prefills both (7 + 7 = 14 ≤ budget 16), each samples → len 8 (2 blocks
    /// still suffice: tokens 0..7 computed). Step 2: A decodes token 8 → computed 8, needs
    /// blocks for 8 tokens = 2, fine; B too. Step 3: A needs 9 tokens = 3 blocks, none free →
    /// preempts B (the last admitted); A continues. B returns to the front of the queue and
    /// is recomputed (prompt + 2 sampled tokens = 9 tokens) once A finishes and frees blocks.
    #[test]
    fn preemption_trace() {
        let mut w = worker(16, 4, 4, true, false);
        w.add(1, 7, 4, (&[], 0), 0).unwrap();
        w.add(2, 7, 4, (&[], 0), 0).unwrap();
        assert_eq!(batch(&w.step().unwrap()), vec![(1, 7), (2, 7)]);
        assert_eq!(batch(&w.step().unwrap()), vec![(1, 1), (2, 1)]);
        let s3 = w.step().unwrap();
        assert_eq!(s3.preempted, vec![2]);
        assert_eq!(batch(&s3), vec![(1, 1)]);
        assert_eq!(w.counters().waiting, 1);
        assert_eq!(w.preemptions_of(2), 1);
        // No admission in a step that preempted; A needs no new block (10 tokens = 3 blocks).
        let s4 = w.step().unwrap();
        assert_eq!(batch(&s4), vec![(1, 1)]);
        assert_eq!(s4.finished, vec![1]);
        // B recomputes its 7 prompt + 2 generated tokens in one step and samples token 3.
        let s5 = w.step().unwrap();
        assert_eq!(batch(&s5), vec![(2, 9)]);
        assert!(s5.first_token.is_empty(), "not its first token");
        let s6 = w.step().unwrap();
        assert_eq!(s6.finished, vec![2]);
        assert_eq!(w.counters().preemptions_total, 1);
    }

    /// Prefix caching keeps a preempted request's own blocks (vLLM V1 hashes every full
    /// block, shared or not): 10 blocks of 4 tokens, budget 8. A (prompt 24, output 6)
    /// prefills in three steps (6 blocks); B (prompt 24, output 2) enters beside A's first
    /// decode with 7 tokens, preempts itself when it cannot grow, and is re-admitted from its
    /// cached full blocks while they and its next chunk fit: 4 tokens kept the first time, 8
    /// the second, after which its cached blocks and its chunk no longer fit beside A and it
    /// waits for A to finish, then resumes from token 8. Without the cache it recomputes from
    /// token 0 every time it is re-admitted, and thrashes where the pool is large and the
    /// budget small (GPUStack's A100 run of 100 prompts of 32,000 tokens: 1,188 preemptions
    /// and 12× the measured TPOT before, 100 and +23 % after).
    #[test]
    fn a_preempted_request_resumes_from_its_cached_blocks() {
        let run = |caching: bool| {
            let mut w = worker(8, 4, 10, true, caching);
            w.add(1, 24, 6, (&[], 0), 0).unwrap();
            w.add(2, 24, 2, (&[], 0), 0).unwrap();
            let mut steps = Vec::new();
            while let Some(s) = w.step() {
                steps.push(batch(&s));
                assert!(steps.len() < 100, "no progress: {steps:?}");
            }
            (steps, w.counters().preemptions_total)
        };
        let (steps, preemptions) = run(true);
        let a = |n| vec![(1, n)];
        let ab = |n| vec![(1, 1), (2, n)];
        assert_eq!(
            steps,
            vec![
                a(8),
                a(8),
                a(8),
                ab(7),
                a(1),
                ab(7),
                a(1),
                a(1),
                vec![(2, 8)],
                vec![(2, 8)],
                vec![(2, 1)]
            ]
        );
        assert_eq!(preemptions, 2);
        // Without the cache B starts over each time: as many preemptions, 8 more tokens
        // computed (29 for A, 25 for B, and 6 or 14 recomputed).
        let (plain, plain_preemptions) = run(false);
        let tokens = |s: &[Vec<(u64, u32)>]| s.iter().flatten().map(|x| x.1).sum::<u32>();
        assert_eq!((tokens(&steps), tokens(&plain), plain_preemptions), (60, 68, 2), "{plain:?}");
    }

    /// Prefix caching: B shares A's first two 4-token blocks; after A computed them, B
    /// computes only from token 8.
    #[test]
    fn prefix_cache_hit_skips_computation() {
        let mut w = worker(64, 4, 100, true, true);
        w.add(1, 10, 1, (&[11, 12], 4), 0).unwrap();
        assert_eq!(batch(&w.step().unwrap()), vec![(1, 10)]);
        w.add(2, 12, 1, (&[11, 12, 13], 4), 0).unwrap();
        assert_eq!(batch(&w.step().unwrap()), vec![(2, 4)]);
        let c = w.counters();
        assert_eq!((c.prefix_cache_queries, c.prefix_cache_hits), (22, 8));
    }

    #[test]
    fn max_num_seqs_limits_admission() {
        let mut w = worker(64, 1, 100, true, false);
        w.add(1, 4, 2, (&[], 0), 0).unwrap();
        w.add(2, 4, 2, (&[], 0), 0).unwrap();
        assert_eq!(batch(&w.step().unwrap()), vec![(1, 4)]);
        assert_eq!(batch(&w.step().unwrap()), vec![(1, 1)]);
        assert_eq!(batch(&w.step().unwrap()), vec![(2, 4)]);
        assert_eq!(
            w.add(3, 500, 1, (&[], 0), 0),
            Err(Reject::TooLong { needed: 126, capacity: 100 })
        );
    }

    /// SGLang without a stated cap derives it from its KV pool and context length
    /// (`model_runner.py`); a stated `max_num_seqs` is the cap, in SGLang and in vLLM.
    #[test]
    fn sglang_derives_its_running_cap_from_the_kv_pool() {
        let cap = |sched: &str, blocks: u64| {
            let yaml = format!("model: qwen3-8b\ngpu: h100\n{sched}");
            let cfg = EngineFile::parse(&yaml).unwrap().build(None).unwrap();
            Worker::new(&cfg.worker(1), blocks, 0).max_seqs
        };
        let sglang = "engine: sglang\nscheduler: {block_size: 16}\n";
        // 300,000 tokens over Qwen3-8B's 40,960: 3,750; a million tokens: the 4,096 ceiling.
        assert_eq!(cap(sglang, 18_750), 3750);
        assert_eq!(cap(sglang, 62_500), 4096);
        // A long context or a small pool: the 2,048 floor, then half the pool.
        let long = "engine: sglang\nscheduler: {block_size: 16, max_model_len: 202752}\n";
        assert_eq!(cap(long, 18_750), 2048);
        assert_eq!(cap(sglang, 100), 800);
        assert_eq!(cap("engine: sglang\nscheduler: {max_num_seqs: 64}\n", 18_750), 64);
        assert_eq!(cap("engine: vllm-v1\n", 18_750), 1024, "vLLM 0.11 on an H100: its default");
        assert_eq!(crate::family::sglang_max_running_requests(10, None), 5);
        assert_eq!(crate::family::sglang_max_running_requests(0, Some(40_960)), 1);
    }

    /// A decoding request aborted by its client frees its slot and blocks at once: the
    /// waiting request runs at the next step instead of after the long one.
    #[test]
    fn abort_frees_the_slot_and_the_blocks() {
        let mut w = worker(64, 1, 100, true, false);
        w.add(1, 4, 50, (&[], 0), 0).unwrap();
        w.add(2, 4, 2, (&[], 0), 0).unwrap();
        assert_eq!(batch(&w.step().unwrap()), vec![(1, 4)]);
        assert_eq!(w.counters().blocks_used, 1);
        assert!(w.abort(1));
        assert_eq!((w.counters().running, w.counters().blocks_used), (0, 0));
        assert_eq!(batch(&w.step().unwrap()), vec![(2, 4)]);
        assert!(!w.abort(1), "gone");
        // A waiting request can be aborted too.
        w.add(3, 4, 2, (&[], 0), 0).unwrap();
        assert!(w.abort(3));
        assert_eq!(batch(&w.step().unwrap()), vec![(2, 1)]);
        assert!(w.step().is_none());
    }
}
