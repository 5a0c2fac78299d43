//! Step time: a roofline per operator class, summed, plus fixed overheads.
//!
//! Each class costs `max(flops / (peak × η_compute), bytes / (bandwidth × η_mem))` on one GPU of
//! the TP group (all GPUs of a group do the same work in lockstep), the peak being the GPU's
//! sustained tensor rate (`GpuSpec::sustained_flops`), not its datasheet's. The activations
//! each token writes and reads between kernels (norms, residuals, rotary, the gated
//! activation, GEMM inputs and outputs) are a memory-bound class of their own: small next to
//! the GEMMs on a GPU whose compute is slow for its bandwidth (H20 in BF16: 2 %), a fifth of a
//! prompt's time where it is fast (H100 in FP8).

use crate::config::{Calibration, WorkerSpec};
use crate::dtype::ComputeClass;

/// What a step computes, aggregated over its sequences. Build it with [`BatchShape::add`].
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct BatchShape {
    /// New tokens of all sequences (the GEMM `M`).
    pub tokens: u64,
    /// Sequences in the step.
    pub seqs: u64,
    /// Sequences that sample a token this step (LM-head rows).
    pub sampled: u64,
    /// Σ over decode sequences (1 new token) of their context, the new token included.
    pub decode_ctx: f64,
    /// The same, each capped at the sliding window.
    pub decode_ctx_win: f64,
    /// Σ over prefill chunks of the (query, key) pairs of causal attention.
    pub prefill_pairs: f64,
    /// The same under the sliding window.
    pub prefill_pairs_win: f64,
    /// Σ over prefill chunks of the context read (prefix + chunk).
    pub prefill_ctx: f64,
    /// The same, capped at the sliding window.
    pub prefill_ctx_win: f64,
    /// Every sequence computes the same few tokens after its cached context (speculative
    /// verification): vLLM from 0.11 captures such uniform decode steps as full CUDA graphs,
    /// as it does single-token decodes. Set by the caller.
    pub uniform_decode: bool,
}

/// Seconds as whole ns, at least 1 (a step always takes time).
fn whole_ns(seconds: f64) -> u64 {
    ((seconds * 1e9).round() as u64).max(1)
}

/// Σ_{j=p+1}^{p+q} min(j, w): causal pairs of a chunk of `q` tokens after `p` cached ones,
/// each token seeing at most `w` keys (`w = u64::MAX`: no window).
fn pairs(p: u64, q: u64, w: u64) -> f64 {
    let tri = |a: u64, b: u64| -> f64 {
        // Σ_{j=a}^{b} j, in f64 (exact below 2^53).
        if b < a {
            0.0
        } else {
            (a + b) as f64 * (b - a + 1) as f64 / 2.0
        }
    };
    let end = p + q;
    if end <= w {
        tri(p + 1, end)
    } else if p >= w {
        q as f64 * w as f64
    } else {
        tri(p + 1, w) + (end - w) as f64 * w as f64
    }
}

impl BatchShape {
    /// Adds one sequence computing `new` tokens after `before` already in its KV cache;
    /// `samples` if the step ends its prompt or is a decode (it then produces a token).
    pub fn add(&mut self, new: u64, before: u64, samples: bool, window: Option<u64>) {
        let w = window.unwrap_or(u64::MAX);
        self.tokens += new;
        self.seqs += 1;
        if samples {
            self.sampled += 1;
        }
        let ctx = before + new;
        if new == 1 && before > 0 {
            self.decode_ctx += ctx as f64;
            self.decode_ctx_win += ctx.min(w) as f64;
        } else {
            self.prefill_pairs += pairs(before, new, u64::MAX);
            self.prefill_pairs_win += pairs(before, new, w);
            self.prefill_ctx += ctx as f64;
            self.prefill_ctx_win += ctx.min(w) as f64;
        }
    }
}

/// Seconds per operator class of one step.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct StepCost {
    /// Q, K, V, O projections.
    pub attn_proj: f64,
    /// Dense MLPs and MoE blocks (routed experts touched, shared experts, routers).
    pub mlp: f64,
    /// LM head of the sampled rows.
    pub lm_head: f64,
    /// Attention of prefill chunks.
    pub attn_prefill: f64,
    /// Attention of decodes: reads each running sequence's whole KV.
    pub attn_decode: f64,
    /// Activation traffic between kernels: per token and layer, 8 hidden-wide and 4
    /// intermediate-wide (TP-split) 16-bit tensors written or read.
    pub activations: f64,
    /// TP all-reduces: 2 per layer, each `latency + 2(n−1)/n × tokens × hidden × 2 B / link`.
    pub all_reduce: f64,
    /// Fixed step, per-layer and per-sequence overheads.
    pub overhead: f64,
    /// A step without a CUDA graph: the time the GPU waits for kernel launches beyond its own
    /// work, `max(0, layers × eager_layer_us − GPU time)`.
    pub launch: f64,
    /// With async scheduling, the CPU time (step and per-sequence overheads) done while the
    /// previous step ran on the GPU: `min(CPU time, the rest)`, taken off the total, so the
    /// step lasts the longer of the two.
    pub overlapped: f64,
}

impl StepCost {
    /// The step's duration in seconds.
    pub fn total(&self) -> f64 {
        self.attn_proj
            + self.mlp
            + self.lm_head
            + self.attn_prefill
            + self.attn_decode
            + self.activations
            + self.all_reduce
            + self.overhead
            + self.launch
            - self.overlapped
    }
}

/// Bytes of one activation element on the wire: engines all-reduce in the model's 16-bit
/// activation type, whatever the weight format.
const ACTIVATION_BYTES: f64 = 2.0;

/// Fraction of an all-reduce's message each GPU sends (and receives): `2(n−1)/n`, the
/// reduce-scatter plus all-gather that bandwidth-optimal all-reduces (ring, two-shot) move;
/// nccl-tests calls it the bus-bandwidth factor. 0 at TP 1.
pub fn bus_factor(tp: u32) -> f64 {
    if tp <= 1 {
        return 0.0;
    }
    let n = f64::from(tp);
    2.0 * (n - 1.0) / n
}

/// Latency of one all-reduce call of a TP group, µs: `base + steps × hop`. Through a switch
/// (NVSwitch) every GPU reaches every other in one hop, and the engines' own all-reduce
/// (vLLM's and SGLang's custom kernel, TensorRT-LLM's) does a reduce-scatter step and an
/// all-gather step: 2 steps at any TP. Over point-to-point links a ring takes 2(n−1) steps
/// (NCCL's latency model: a base per call plus a per-step hardware latency). 0 at TP 1.
pub fn allreduce_latency_us(tp: u32, switched: bool, link_us: f64, c: &Calibration) -> f64 {
    if tp <= 1 {
        return 0.0;
    }
    let steps = if switched { 2.0 } else { 2.0 * (f64::from(tp) - 1.0) };
    c.allreduce_base_us + steps * c.allreduce_hop_us.unwrap_or(link_us)
}

/// Per-GPU constants of one worker, precomputed so a step costs a few multiplications.
#[derive(Debug, Clone, PartialEq)]
pub struct CostModel {
    tp: f64,
    /// Effective FLOP/s of 16-bit, dense-weight and expert GEMMs, and attention.
    half_flops: f64,
    weight_flops: f64,
    expert_flops: f64,
    /// Fixed GPU time of each MoE layer's fused-expert call, seconds.
    moe_layer: f64,
    attn_flops: f64,
    /// Effective memory bandwidth, bytes/s.
    mem_bw: f64,
    /// Parameters (whole model, not split) and bytes per GPU of each class.
    attn_params: f64,
    attn_bytes: f64,
    dense_params: f64,
    dense_bytes: f64,
    /// MoE: layers, experts, top-k, per-expert params and bytes per GPU, shared + router.
    moe_layers: f64,
    experts: f64,
    top_k: f64,
    expert_params: f64,
    expert_bytes: f64,
    shared_params: f64,
    shared_bytes: f64,
    router_params: f64,
    lm_params: f64,
    lm_bytes: f64,
    /// Attention FLOPs per (query, key) pair per layer of a prompt and of a decode
    /// ([`crate::ModelSpec::attn_pair_flops`]: `4 × q_dim` for both without MLA).
    attn_pair_flops: f64,
    attn_pair_flops_decode: f64,
    full_layers: f64,
    win_layers: f64,
    /// KV bytes per token per layer on one GPU.
    kv_layer_bytes: f64,
    /// Activation bytes each token moves between kernels on one GPU, all layers.
    act_bytes_per_token: f64,
    /// All-reduce: calls per step, bytes per token per call, ring factor, link, latency.
    ar_calls: f64,
    ar_bytes_per_token: f64,
    ar_link_bw: f64,
    ar_latency: f64,
    overhead: f64,
    /// The per-step part of `overhead` (CPU time), seconds.
    step_cpu: f64,
    /// The engine core schedules the next step while the GPU runs this one.
    async_scheduling: bool,
    /// The per-layer part of `overhead` (GPU time), seconds.
    layer_overhead: f64,
    /// Per-step time of a step run as piecewise CUDA graphs, seconds.
    piecewise: f64,
    /// Decode-only graphed steps are full graphs.
    full_decode: bool,
    per_seq: f64,
    window: Option<u64>,
    /// Kernel launches of one step without a graph, seconds.
    eager_launch: f64,
    /// Largest step run as a CUDA graph (tokens); `None`: no graphs (`enforce_eager`).
    graph_max: Option<u64>,
    /// Graphs also cover steps with prompt tokens (vLLM V1's piecewise graphs).
    graph_mixed: bool,
}

impl CostModel {
    /// Precomputes the constants of `w`.
    pub fn new(w: &WorkerSpec) -> Self {
        let m = &w.model;
        let c = &w.calibration;
        let g = &w.gpu;
        let tp = f64::from(w.tp);
        let layers = f64::from(m.layers);
        let wb = m.weight_dtype.bytes();
        let eb = m.expert_dtype.bytes();
        let attn_params = layers * m.attn_params_per_layer() as f64;
        let dense_params = f64::from(m.dense_layers()) * m.dense_mlp_params() as f64;
        let (experts, top_k) = m
            .moe
            .as_ref()
            .map_or((0.0, 0.0), |x| (f64::from(x.experts), f64::from(x.experts_per_token)));
        let lm_params = m.embedding_params() as f64;
        // What a TP group adds to the per-step and per-sequence CPU time (`1 + log2 TP`).
        let tp_factor = if w.tp > 1 { 1.0 + tp.log2() } else { 0.0 };
        let step_us = c.step_overhead_us + tp_factor * c.tp_step_overhead_us;
        let per_seq_us = c.per_seq_overhead_us + tp_factor * c.tp_per_seq_overhead_us;
        Self {
            tp,
            half_flops: g.sustained_flops(ComputeClass::Half) * c.eta_gemm,
            weight_flops: g.sustained_flops(m.weight_dtype.compute_class()) * c.eta_gemm,
            expert_flops: g.sustained_flops(m.expert_dtype.compute_class()) * c.eta_moe,
            moe_layer: c.moe_layer_us * 1e-6,
            attn_flops: g.sustained_flops(ComputeClass::Half) * c.eta_attn,
            mem_bw: g.mem_bw() * c.eta_mem,
            attn_params,
            attn_bytes: attn_params * wb / tp,
            dense_params,
            dense_bytes: dense_params * wb / tp,
            moe_layers: f64::from(m.moe_layers()),
            experts,
            top_k,
            expert_params: m.expert_params() as f64,
            expert_bytes: m.expert_params() as f64 * eb / tp,
            shared_params: m.shared_expert_params() as f64,
            shared_bytes: m.shared_expert_params() as f64 * eb / tp,
            router_params: m.router_params() as f64,
            lm_params,
            lm_bytes: lm_params * 2.0 / tp,
            attn_pair_flops: m.attn_pair_flops(false),
            attn_pair_flops_decode: m.attn_pair_flops(true),
            full_layers: f64::from(m.layers - m.sliding_layers),
            win_layers: f64::from(m.sliding_layers),
            kv_layer_bytes: w.kv_bytes_per_token_per_gpu() / layers,
            act_bytes_per_token: {
                // The tensors the activation reserve counts (config.rs): 8 hidden-wide, 4
                // intermediate-wide (the experts a token is routed to, TP-split).
                let inter = match &m.moe {
                    Some(x) => f64::from(
                        (x.experts_per_token * x.expert_intermediate + x.shared_intermediate)
                            .max(m.intermediate),
                    ),
                    None => f64::from(m.intermediate),
                };
                layers * (8.0 * f64::from(m.hidden) + 4.0 * inter / tp) * ACTIVATION_BYTES
            },
            ar_calls: if w.tp > 1 { 2.0 * layers } else { 0.0 },
            ar_bytes_per_token: f64::from(m.hidden) * ACTIVATION_BYTES * bus_factor(w.tp),
            ar_link_bw: g.intra.bandwidth_gb_s * 1e9 * c.eta_link,
            ar_latency: allreduce_latency_us(w.tp, g.intra_switched, g.intra.latency_us, c) * 1e-6,
            overhead: (step_us + layers * c.layer_overhead_us) * 1e-6,
            step_cpu: step_us * 1e-6,
            async_scheduling: w.scheduler.async_scheduling,
            layer_overhead: layers * c.layer_overhead_us * 1e-6,
            piecewise: layers * c.piecewise_layer_us * 1e-6,
            full_decode: w.scheduler.full_decode_graphs,
            per_seq: per_seq_us * 1e-6,
            window: m.sliding_window.map(u64::from),
            eager_launch: layers * c.eager_layer_us * 1e-6,
            graph_max: (!w.scheduler.enforce_eager && w.scheduler.cuda_graph_max_batch > 0)
                .then_some(u64::from(w.scheduler.cuda_graph_max_batch)),
            graph_mixed: w.engine.traits().graphs_mixed_steps,
        }
    }

    /// The sliding window of the model, for [`BatchShape::add`].
    pub fn window(&self) -> Option<u64> {
        self.window
    }

    /// Expected distinct experts `E·(1 − (1 − k/E)^T)` touched by `tokens` tokens, each routed
    /// to `k` of `E` experts independently and uniformly.
    pub fn experts_touched(&self, tokens: f64) -> f64 {
        if self.experts == 0.0 {
            return 0.0;
        }
        self.experts * (1.0 - (1.0 - self.top_k / self.experts).powf(tokens))
    }

    fn roof(&self, flops: f64, rate: f64, bytes: f64) -> f64 {
        (flops / rate).max(bytes / self.mem_bw)
    }

    /// Cost of each operator class of a step.
    pub fn breakdown(&self, b: &BatchShape) -> StepCost {
        let t = b.tokens as f64;
        let tp = self.tp;
        let attn_proj =
            self.roof(2.0 * t * self.attn_params / tp, self.weight_flops, self.attn_bytes);
        let dense =
            self.roof(2.0 * t * self.dense_params / tp, self.weight_flops, self.dense_bytes);
        let moe = if self.moe_layers > 0.0 {
            let touched = self.experts_touched(t);
            let flops = 2.0 * t * (self.top_k * self.expert_params + self.shared_params) / tp;
            let bytes = touched * self.expert_bytes + self.shared_bytes;
            let router =
                self.roof(2.0 * t * self.router_params, self.half_flops, self.router_params * 2.0);
            self.moe_layers * (self.roof(flops, self.expert_flops, bytes) + router + self.moe_layer)
        } else {
            0.0
        };
        let s = b.sampled as f64;
        let lm_head = self.roof(2.0 * s * self.lm_params / tp, self.half_flops, self.lm_bytes);
        let pf_pairs = b.prefill_pairs * self.full_layers + b.prefill_pairs_win * self.win_layers;
        let pf_ctx = b.prefill_ctx * self.full_layers + b.prefill_ctx_win * self.win_layers;
        let attn_prefill = self.roof(
            self.attn_pair_flops * pf_pairs / tp,
            self.attn_flops,
            pf_ctx * self.kv_layer_bytes,
        );
        let dc = b.decode_ctx * self.full_layers + b.decode_ctx_win * self.win_layers;
        let attn_decode = self.roof(
            self.attn_pair_flops_decode * dc / tp,
            self.attn_flops,
            dc * self.kv_layer_bytes,
        );
        let all_reduce =
            self.ar_calls * (self.ar_latency + t * self.ar_bytes_per_token / self.ar_link_bw);
        let mut c = StepCost {
            attn_proj,
            mlp: dense + moe,
            lm_head,
            attn_prefill,
            attn_decode,
            activations: t * self.act_bytes_per_token / self.mem_bw,
            all_reduce,
            overhead: self.overhead + b.seqs as f64 * self.per_seq,
            launch: 0.0,
            overlapped: 0.0,
        };
        // A graphed step that is not one full graph replays its pieces with attention launched
        // between them; an eager step pays its launches below instead.
        let graphed = self.graphed(b);
        if graphed && !(self.full_decode && (b.prefill_pairs == 0.0 || b.uniform_decode)) {
            c.overhead += self.piecewise;
        }
        if !graphed {
            let gpu = c.attn_proj
                + c.mlp
                + c.lm_head
                + c.attn_prefill
                + c.attn_decode
                + c.activations
                + c.all_reduce
                + self.layer_overhead;
            c.launch = (self.eager_launch - gpu).max(0.0);
        }
        if self.async_scheduling {
            let cpu = self.step_cpu + b.seqs as f64 * self.per_seq;
            c.overlapped = cpu.min(c.total() - cpu);
        }
        c
    }

    /// Whether a step runs as a captured CUDA graph: graphs on, no more tokens than the
    /// largest capture, and decode-only unless the family graphs mixed steps.
    pub fn graphed(&self, b: &BatchShape) -> bool {
        let decode_only = b.prefill_pairs == 0.0;
        self.graph_max.is_some_and(|max| b.tokens <= max && (decode_only || self.graph_mixed))
    }

    /// A step that schedules and runs nothing on the GPU: the per-step CPU time alone (a
    /// V0 step that only admits remote prefills), ns (at least 1).
    pub fn cpu_step_ns(&self) -> u64 {
        whole_ns(self.step_cpu)
    }

    /// The step's duration in ns (at least 1).
    pub fn step_ns(&self, b: &BatchShape) -> u64 {
        whole_ns(self.breakdown(b).total())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::EngineFile;

    fn worker(yaml: &str, tp: u32) -> WorkerSpec {
        EngineFile::parse(yaml).unwrap().build(None).unwrap().worker(tp)
    }

    fn close(got: f64, want: f64) {
        assert!((got - want).abs() <= 1e-9 * want.abs().max(1e-12), "got {got}, want {want}");
    }

    #[test]
    fn pairs_with_and_without_window() {
        assert_eq!(pairs(0, 4, u64::MAX), 10.0); // 1+2+3+4
        assert_eq!(pairs(2, 3, u64::MAX), 12.0); // 3+4+5
        assert_eq!(pairs(2, 3, 4), 11.0); // 3+4+4
        assert_eq!(pairs(10, 3, 4), 12.0); // 4+4+4
    }

    /// Qwen3-8B, bf16, H100 SXM, TP 1: a decode step of 64 sequences at context 1024 (1023
    /// cached + the new token), with η_mem = 0.8, η_gemm = 0.7, η_attn = 0.5 and overheads 1 ms
    /// + 36 layers × 10 µs + 64 sequences × 20 µs = 2.64 ms. Every class is memory-bound; bandwidth 3.35e12 × 0.8 = 2.68e12 B/s.
    ///
    /// - QKVO: 36 × (2·4096·4096 + 2·4096·1024) = 1,509,949,440 params × 2 B = 3,019,898,880 B
    ///   → 1.126828 ms (compute: 2·64·1.51e9 / 692.3e12 = 0.279 ms).
    /// - MLP: 36 × 3·4096·12288 = 5,435,817,984 params × 2 B = 10,871,635,968 B → 4.056581 ms.
    /// - LM head: 151,936 × 4096 × 2 B = 1,244,659,712 B → 0.464425 ms.
    /// - Attention decode: 64 × 1024 tokens × 36 layers × (2·8·128·2 = 4096 B) =
    ///   9,663,676,416 B → 3.605850 ms (compute: 4·4096·65536·36 / 494.5e12 = 0.078 ms).
    /// - Activations: 64 tokens × 36 layers × (8·4096 + 4·12288) × 2 B = 377,487,360 B →
    ///   0.140853 ms.
    /// - All-reduce: none at TP 1. Overhead: 2.64 ms.
    ///
    /// Total: 25,177,358,336 B / 2.68e12 B/s = 9.3945367 ms, + 2.64 ms = 12.0345367 ms, i.e.
    /// 64 tokens per 12.03 ms = 5,318 tok/s.
    #[test]
    fn decode_step_qwen3_8b_h100_batch_64() {
        let w = worker("model: qwen3-8b\ngpu: h100\nscheduler: {async_scheduling: false}\n", 1);
        let cm = CostModel::new(&w);
        let mut b = BatchShape::default();
        for _ in 0..64 {
            b.add(1, 1023, true, None);
        }
        let c = cm.breakdown(&b);
        let bw = 3.35e12 * 0.8;
        close(c.attn_proj, 3_019_898_880.0 / bw);
        close(c.mlp, 10_871_635_968.0 / bw);
        close(c.lm_head, 1_244_659_712.0 / bw);
        close(c.attn_decode, 9_663_676_416.0 / bw);
        assert_eq!(c.attn_prefill, 0.0);
        assert_eq!(c.all_reduce, 0.0);
        close(c.activations, 377_487_360.0 / bw);
        close(c.overhead, 2.64e-3);
        assert_eq!(c.overlapped, 0.0);
        close(c.total(), 25_177_358_336.0 / bw + 2.64e-3);
        assert_eq!(cm.step_ns(&b), 12_034_537);
        // With async scheduling the CPU part, 1 ms + 64 × 20 µs = 2.28 ms, runs during the
        // previous step: the step lasts its GPU part, 9.3945367 + 0.36 = 9.7545367 ms.
        let w = worker("model: qwen3-8b\ngpu: h100\nscheduler: {async_scheduling: true}\n", 1);
        let c = CostModel::new(&w).breakdown(&b);
        close(c.overlapped, 2.28e-3);
        close(c.total(), 25_177_358_336.0 / bw + 0.36e-3);
        // A step whose CPU part is the longer lasts that: 2 decodes at 5 ms of CPU each
        // (11 ms with the step's 1 ms) against about 6.1 ms of GPU time.
        let w = worker(
            "model: qwen3-8b\ngpu: h100\nscheduler: {async_scheduling: true}\n\
             calibration: {per_seq_overhead_us: 5000}\n",
            1,
        );
        let mut two = BatchShape::default();
        two.add(1, 1023, true, None);
        two.add(1, 1023, true, None);
        let c = CostModel::new(&w).breakdown(&two);
        close(c.total(), 11e-3);
    }

    /// Qwen3-32B on H20 TP 4, a 3000-token prefill from scratch (one step): compute-bound.
    /// The H20 sustains 142.25 of its 148 datasheet TFLOP/s in a BF16 matmul (`gpu.rs`), and
    /// the efficiencies are fractions of that.
    /// GEMMs: 2 × 3000 × (64 × 94,371,840 + 64 × 393,216,000) / 4 = 4.68e13 FLOP at
    /// 142.25e12 × 0.7 → 0.4701 s, split as QKVO 0.0910 s and MLP 0.3791 s.
    /// Attention: 4 × 8192 × (3000·3001/2) × 64 / 4 = 2.360e12 FLOP at 71.125e12 → 0.03318 s.
    /// All-reduce: 128 × (4 µs + 2 steps × 2 µs + 3000 × 5120 × 2 B × 2·3/4 / 315e9) =
    /// 128 × 154.3 µs (H20 boards are NVSwitch: two steps at any TP).
    /// Activations: 3000 × 64 × (8·5120 + 4·25600/4) × 2 B = 25.56 GB at 3.2e12 B/s → 7.99 ms.
    /// LM head (memory-bound) 0.12 ms; overhead 1 + 0.64 + 0.02 ms. Total ≈ 0.533 s (0.514 s
    /// at the datasheet peak).
    #[test]
    fn prefill_step_qwen3_32b_h20_tp4() {
        let w = worker("model: qwen3-32b\ngpu: h20\ntp: 4\n", 4);
        let cm = CostModel::new(&w);
        let mut b = BatchShape::default();
        b.add(3000, 0, true, None);
        let c = cm.breakdown(&b);
        let rate = 142.25e12 * 0.7;
        close(c.attn_proj, 2.0 * 3000.0 * 64.0 * 94_371_840.0 / 4.0 / rate);
        close(c.mlp, 2.0 * 3000.0 * 64.0 * 393_216_000.0 / 4.0 / rate);
        close(c.attn_prefill, 4.0 * 8192.0 * 4_501_500.0 * 64.0 / 4.0 / 71.125e12);
        let ar = 128.0 * (8e-6 + 3000.0 * 5120.0 * 2.0 * 1.5 / 315e9);
        close(c.all_reduce, ar);
        close(c.activations, 3000.0 * 64.0 * 133_120.0 / 3.2e12);
        assert!((c.total() - 0.533).abs() < 0.002, "{}", c.total());
    }

    /// All-reduce latency: `base + steps × hop`, two steps through NVSwitch at any TP, 2(n−1)
    /// around a PCIe ring; the bus factor 2(n−1)/n.
    #[test]
    fn allreduce_latency_and_bus_factor_by_tp_and_link() {
        let c = Calibration::default();
        assert_eq!(allreduce_latency_us(1, true, 2.0, &c), 0.0);
        for tp in [2, 4, 8] {
            assert_eq!(allreduce_latency_us(tp, true, 2.0, &c), 8.0);
        }
        assert_eq!(allreduce_latency_us(2, false, 5.0, &c), 14.0);
        assert_eq!(allreduce_latency_us(4, false, 5.0, &c), 34.0);
        let c = Calibration { allreduce_base_us: 1.0, allreduce_hop_us: Some(3.0), ..c };
        assert_eq!(allreduce_latency_us(4, false, 5.0, &c), 19.0);
        assert_eq!(
            (bus_factor(1), bus_factor(2), bus_factor(4), bus_factor(8)),
            (0.0, 1.0, 1.5, 1.75)
        );
        // L40S (PCIe) at TP 4 pays the ring; an H100 (NVSwitch) does not.
        let l40s = CostModel::new(&worker("model: qwen3-8b\ngpu: l40s\ntp: 4\n", 4));
        let h100 = CostModel::new(&worker("model: qwen3-8b\ngpu: h100\ntp: 4\n", 4));
        let mut b = BatchShape::default();
        b.add(1, 100, true, None);
        // 72 calls × (latency + 4096 × 2 B × 1.5 / (link × 0.7)).
        close(l40s.breakdown(&b).all_reduce, 72.0 * (34e-6 + 12_288.0 / (32e9 * 0.7)));
        close(h100.breakdown(&b).all_reduce, 72.0 * (8e-6 + 12_288.0 / (450e9 * 0.7)));
    }

    /// vLLM before 0.11 runs every graphed step as piecewise graphs: 36 layers × 128 µs =
    /// 4.608 ms more than the same decode on 0.11, whose decode-only steps are one full graph
    /// (as are speculative verification steps, uniform decodes); a mixed step pays it on both,
    /// and a family without piecewise graphs never does.
    #[test]
    fn piecewise_graphs_cost_per_layer_where_decode_is_not_one_full_graph() {
        let at = |version: &str| {
            CostModel::new(&worker(
                &format!("engine_version: \"{version}\"\nmodel: qwen3-8b\ngpu: h100\n"),
                1,
            ))
        };
        let (old, new) = (at("0.10.2"), at("0.11.0"));
        let mut decode = BatchShape::default();
        decode.add(1, 1000, true, None);
        close(old.breakdown(&decode).overhead - new.breakdown(&decode).overhead, 36.0 * 128e-6);
        let mut mixed = decode;
        mixed.add(200, 0, true, None);
        close(old.breakdown(&mixed).overhead, new.breakdown(&mixed).overhead);
        let mut verify = BatchShape::default();
        verify.add(4, 1000, true, None);
        close(new.breakdown(&verify).overhead, old.breakdown(&verify).overhead);
        verify.uniform_decode = true;
        close(new.breakdown(&verify).overhead, new.breakdown(&decode).overhead);
        close(old.breakdown(&verify).overhead - new.breakdown(&verify).overhead, 36.0 * 128e-6);
        // vLLM's own key says the same as the version.
        let piecewise = CostModel::new(&worker(
            "engine_version: \"0.11.0\"\nmodel: qwen3-8b\ngpu: h100\n\
             scheduler: {cudagraph_mode: PIECEWISE}\n",
            1,
        ));
        close(piecewise.breakdown(&decode).overhead, old.breakdown(&decode).overhead);
        let sglang = CostModel::new(&worker(
            "engine: sglang\nengine_version: \"0.4.9\"\nmodel: qwen3-8b\ngpu: h100\n",
            1,
        ));
        assert_eq!(sglang.piecewise, 0.0);
    }

    /// vLLM V0's TP terms: `(1 + log2 TP)` × 1,658 µs a step and × 79.6 µs a sequence on top
    /// of its 2,500 µs and 20 µs, none at TP 1 (family.rs, `V0_TP_STEP_US`).
    #[test]
    fn vllm_v0_tp_terms_scale_with_log2_tp() {
        let mut b = BatchShape::default();
        for _ in 0..2 {
            b.add(1, 100, true, None);
        }
        let overhead = |tp: u32| {
            let w = worker(&format!("engine: vllm-v0\nmodel: qwen3-32b\ngpu: h20\ntp: {tp}\n"), tp);
            CostModel::new(&w).breakdown(&b).overhead
        };
        let layers = 64.0 * 10e-6;
        close(overhead(1), 2500e-6 + layers + 2.0 * 20e-6);
        close(
            overhead(2),
            (2500.0 + 2.0 * 1658.0) * 1e-6 + layers + 2.0 * (20.0 + 2.0 * 79.6) * 1e-6,
        );
        close(
            overhead(8),
            (2500.0 + 4.0 * 1658.0) * 1e-6 + layers + 2.0 * (20.0 + 4.0 * 79.6) * 1e-6,
        );
        // Another family has none.
        let w = worker("engine: sglang\nmodel: qwen3-32b\ngpu: h20\ntp: 8\n", 8);
        close(CostModel::new(&w).breakdown(&b).overhead, 400e-6 + layers + 2.0 * 20e-6);
    }

    /// Without a CUDA graph the GPU waits for launches when its work is shorter: a batch-1
    /// decode of Qwen3-8B on one H100 is 6.06 ms of GPU time (weights + KV at 2.68 TB/s, 36 ×
    /// 10 µs per layer), less than 36 layers × 200 µs = 7.2 ms of launches, so `enforce_eager`
    /// makes it 7.2 ms + 1.02 ms of per-step CPU time. A graphed step pays no launches.
    #[test]
    fn enforce_eager_pays_the_launches_the_gpu_cannot_hide() {
        let graphed = CostModel::new(&worker(
            "model: qwen3-8b\ngpu: h100\nscheduler: {async_scheduling: false}\n",
            1,
        ));
        let eager = CostModel::new(&worker(
            "model: qwen3-8b\ngpu: h100\nscheduler: {enforce_eager: true, async_scheduling: false}\n",
            1,
        ));
        let mut b = BatchShape::default();
        b.add(1, 1023, true, None);
        assert!(graphed.graphed(&b) && !eager.graphed(&b));
        let g = graphed.breakdown(&b);
        assert_eq!(g.launch, 0.0);
        let gpu = g.total() - 1.02e-3;
        assert!((6.0e-3..6.1e-3).contains(&gpu), "{gpu}");
        close(eager.breakdown(&b).total(), 1.02e-3 + 7.2e-3);
        // A 600-token prefill is over vLLM V1's 512-token capture: eager, but its GPU time
        // (~10 ms) hides the launches.
        let mut p = BatchShape::default();
        p.add(600, 0, true, None);
        assert!(!graphed.graphed(&p));
        assert_eq!(graphed.breakdown(&p).launch, 0.0);
    }

    #[test]
    fn moe_weight_bytes_count_touched_experts() {
        // Without the fused call's fixed time, to see the bytes alone.
        let w = worker("model: qwen3-30b-a3b\ngpu: h100\ncalibration: {moe_layer_us: 0}\n", 1);
        let cm = CostModel::new(&w);
        // One token touches exactly k = 8 of 128 experts; many tokens touch nearly all.
        close(cm.experts_touched(1.0), 8.0);
        close(cm.experts_touched(2.0), 128.0 * (1.0 - (120.0f64 / 128.0).powi(2)));
        assert!(cm.experts_touched(1000.0) > 127.99);
        let step = |n: u64| {
            let mut b = BatchShape::default();
            for _ in 0..n {
                b.add(1, 100, true, None);
            }
            cm.breakdown(&b).mlp
        };
        // Memory-bound MoE: batch 1 reads 8 experts, batch 64 reads ~127: ~16x the bytes.
        let r = step(64) / step(1);
        assert!(r > 10.0 && r < 16.0, "{r}");
    }

    /// Every MoE layer pays the fused-expert call's fixed time (`moe_layer_us`, 25 µs), and
    /// with it the model's MoE layer lands on vLLM's `benchmark_moe.py` figures for
    /// Qwen3-30B-A3B in FP8 on an H100 (pull request 24700: 40.4 µs for one token, 78.1 for 4,
    /// 164.6 for 16, 247.7 for 128) within 5 % (39.1, 76.3, 170.1, 250.3).
    #[test]
    fn moe_layers_pay_the_fused_calls_fixed_time() {
        let yaml = "model: qwen3-30b-a3b\ngpu: h100\nweight_dtype: fp8\n";
        let with = CostModel::new(&worker(yaml, 1));
        let without =
            CostModel::new(&worker(&format!("{yaml}calibration: {{moe_layer_us: 0}}\n"), 1));
        let decode = |n: u64| {
            let mut b = BatchShape::default();
            for _ in 0..n {
                b.add(1, 100, true, None);
            }
            b
        };
        for n in [1, 4, 16, 128] {
            let b = decode(n);
            close(with.breakdown(&b).mlp - without.breakdown(&b).mlp, 48.0 * 25e-6);
        }
        // One layer's experts, without the router (a separate GEMM in the benchmark's caller).
        let layer = |n: u64| {
            let t = n as f64;
            let bytes = with.experts_touched(t) * with.expert_bytes;
            let flops = 2.0 * t * with.top_k * with.expert_params;
            with.roof(flops, with.expert_flops, bytes) + with.moe_layer
        };
        for (n, kernel_us) in [(1, 40.4), (4, 78.1), (16, 164.6), (128, 247.7)] {
            let got = layer(n) * 1e6;
            assert!((got / kernel_us - 1.0).abs() < 0.05, "batch {n}: {got:.1} µs, {kernel_us}");
        }
    }
}
