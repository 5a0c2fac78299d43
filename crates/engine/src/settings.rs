//! The tunable parts of a deployment: the step-time model's calibration and the scheduler's
//! limits. Apart from the engine file ([`crate::config`]) so the engine families' defaults
//! ([`crate::family`]) can name them without the file's parsing.

use serde::{Deserialize, Serialize};

use crate::error::{EngineError, Result};

/// Calibration parameters of the step-time model. Each has a physical meaning and a bound;
/// defaults are typical of well-tuned engines on Hopper-class GPUs before any fit.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Calibration {
    /// Fraction of the GPU's sustained dense FLOP/s ([`crate::GpuSpec::sustained_flops`]: the
    /// published matmul measurement, below the datasheet peak) that GEMMs reach when
    /// compute-bound (0–1].
    pub eta_gemm: f64,
    /// Fraction of the sustained 16-bit FLOP/s that attention kernels reach when compute-bound
    /// (0–1].
    pub eta_attn: f64,
    /// Fraction of the sustained dense FLOP/s (of the experts' weight format) that MoE expert
    /// GEMMs reach when compute-bound (0–1]: grouped GEMMs that gather each expert's tokens,
    /// slower than one dense GEMM of the same FLOPs. Default 0.27: a Triton fused-MoE forward
    /// measured at 215 TFLOP/s on an H100 (BF16, 128 experts of 2,048 × 768, top 8, 32,768
    /// tokens; ByteDance-Seed/VeOmni pull request 460), of the 794.5 the H100 sustains in a
    /// dense BF16 matmul.
    pub eta_moe: f64,
    /// Fixed GPU time of an MoE layer's fused-expert call beyond its weight reads and FLOPs,
    /// µs: the routing-alignment, activation and reduction kernels and the two grouped GEMMs'
    /// own latency, which a small decode batch pays whole. Default 25: vLLM's
    /// `benchmark_moe.py` on an H100 (pull request 24700) puts the fused MoE of
    /// Qwen3-30B-A3B in FP8 at 40.4 µs for one token and 78.1 / 164.6 / 247.7 µs for 4 / 16 /
    /// 128, 20-29 µs above its expert weights read at 0.8 of the bandwidth at every batch (25
    /// puts all four within 3.3 %), and Mixtral's in BF16 (TP 2) 13 µs above at one token.
    pub moe_layer_us: f64,
    /// Fraction of peak memory bandwidth reached streaming weights and KV (0–1].
    pub eta_mem: f64,
    /// Fraction of link bandwidth reached by all-reduce and KV transfer (0–1].
    pub eta_link: f64,
    /// Fixed time per engine step: CPU scheduling, input preparation, sampling, launch (µs).
    pub step_overhead_us: f64,
    /// Fixed GPU time per layer per step: kernel latencies a roofline misses (µs).
    pub layer_overhead_us: f64,
    /// Time per layer of a step run as piecewise CUDA graphs, µs: the host launching the
    /// kernels left out of the graph pieces (attention, from Python) between them, which the
    /// GPU waits for at small batches. vLLM V1 default 128: full decode graphs instead of
    /// piecewise ones (the default from 0.11) took a batch of 10 decodes on one H100 from
    /// 4.07 to 5.98 requests/s of 1,024 + 128 tokens (vLLM pull request 25444,
    /// Qwen3-Coder-30B-A3B-FP8): 0.785 s over 128 steps of 48 layers. The other families
    /// capture whole decode steps and run the others eagerly: 0.
    pub piecewise_layer_us: f64,
    /// Fixed time per TP all-reduce call at any TP above 1 (kernel launch, the flags the
    /// GPUs exchange before and after), µs.
    pub allreduce_base_us: f64,
    /// Latency of one exchange step of an all-reduce, µs; two steps through a switch (NVSwitch),
    /// 2(n−1) around a ring (PCIe). `None`: the GPU's intra-node link latency.
    pub allreduce_hop_us: Option<f64>,
    /// Replaced by `allreduce_base_us` and `allreduce_hop_us`: a per-call figure fitted at one
    /// TP was charged whole at every TP. Accepted only to refuse it with that explanation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allreduce_us: Option<f64>,
    /// CPU time per sequence per step: input preparation, sampling, detokenisation (µs).
    pub per_seq_overhead_us: f64,
    /// CPU time per step that a TP group above 1 adds, µs per unit of `1 + log2(TP)` (2, 3, 4
    /// at TP 2, 4, 8; none at TP 1): the driver handing each step's inputs to the other ranks.
    /// 0 but for `vllm-v0` (see [`crate::EngineFamily::calibration_defaults`]).
    pub tp_step_overhead_us: f64,
    /// The same per sequence in the step, µs per unit of `1 + log2(TP)`.
    pub tp_per_seq_overhead_us: f64,
    /// CPU time to launch one layer's kernels when a step runs without a CUDA graph, µs: the
    /// GPU waits for the CPU when its kernels are shorter than their launches (small decode
    /// batches with `enforce_eager`, or batches above the largest captured size).
    pub eager_layer_us: f64,
    /// Fixed latency from a request's arrival until the scheduler sees it (HTTP, gateway,
    /// templating, hand-off to the engine core), µs; requests overlap in it.
    pub frontend_us: f64,
    /// API-server tokenisation time per prompt token, µs; one request at a time per worker,
    /// so simultaneous arrivals reach the scheduler spread out.
    pub frontend_per_token_us: f64,
    /// Step-time noise: each step lasts `(1 + step_jitter·u)` times its cost, `u` uniform in
    /// [−1, 1) from a seeded generator per worker. Breaks the lockstep that identical
    /// requests would otherwise keep forever in a deterministic model.
    pub step_jitter: f64,
    /// Seed of the step-time noise.
    pub seed: u64,
}

impl Default for Calibration {
    fn default() -> Self {
        Self {
            eta_gemm: 0.7,
            eta_attn: 0.5,
            eta_moe: 0.27,
            moe_layer_us: 25.0,
            eta_mem: 0.8,
            eta_link: 0.7,
            step_overhead_us: 1000.0,
            layer_overhead_us: 10.0,
            piecewise_layer_us: 128.0,
            allreduce_base_us: 4.0,
            allreduce_hop_us: None,
            allreduce_us: None,
            per_seq_overhead_us: 20.0,
            tp_step_overhead_us: 0.0,
            tp_per_seq_overhead_us: 0.0,
            // About fifteen operators per layer at ~13 µs of PyTorch dispatch and launch each
            // (an estimate; fit it on an eager table).
            eager_layer_us: 200.0,
            frontend_us: 1000.0,
            frontend_per_token_us: 1.0,
            step_jitter: 0.05,
            seed: 0,
        }
    }
}

impl Calibration {
    /// Checks every value is within its bound, naming the bad key.
    pub fn validate(&self) -> Result<()> {
        for (key, v) in [
            ("calibration.eta_gemm", self.eta_gemm),
            ("calibration.eta_attn", self.eta_attn),
            ("calibration.eta_moe", self.eta_moe),
            ("calibration.eta_mem", self.eta_mem),
            ("calibration.eta_link", self.eta_link),
        ] {
            if !(v > 0.0 && v <= 1.0) {
                return Err(EngineError::invalid(key, format!("expected 0 < value <= 1, got {v}")));
            }
        }
        for (key, v) in [
            ("calibration.step_overhead_us", self.step_overhead_us),
            ("calibration.layer_overhead_us", self.layer_overhead_us),
            ("calibration.moe_layer_us", self.moe_layer_us),
            ("calibration.piecewise_layer_us", self.piecewise_layer_us),
            ("calibration.per_seq_overhead_us", self.per_seq_overhead_us),
            ("calibration.tp_step_overhead_us", self.tp_step_overhead_us),
            ("calibration.tp_per_seq_overhead_us", self.tp_per_seq_overhead_us),
            ("calibration.eager_layer_us", self.eager_layer_us),
            ("calibration.frontend_us", self.frontend_us),
            ("calibration.frontend_per_token_us", self.frontend_per_token_us),
            ("calibration.allreduce_base_us", self.allreduce_base_us),
        ] {
            if !(v.is_finite() && v >= 0.0) {
                return Err(EngineError::invalid(key, format!("expected a value >= 0, got {v}")));
            }
        }
        if let Some(v) = self.allreduce_us {
            return Err(EngineError::invalid(
                "calibration.allreduce_us",
                format!(
                    "no longer read ({v} µs per call was charged whole at every TP): give \
                     allreduce_base_us (per call) and allreduce_hop_us (per exchange step), or \
                     move the part a TP-1 deployment also pays into layer_overhead_us \
                     (+2 × the excess per call; docs/predict.md, \"TP all-reduce\")"
                ),
            ));
        }
        if let Some(v) = self.allreduce_hop_us {
            if !(v.is_finite() && v >= 0.0) {
                return Err(EngineError::invalid(
                    "calibration.allreduce_hop_us",
                    format!("expected a value >= 0, got {v}"),
                ));
            }
        }
        if !(0.0..0.5).contains(&self.step_jitter) {
            return Err(EngineError::invalid(
                "calibration.step_jitter",
                format!("expected 0 <= value < 0.5, got {}", self.step_jitter),
            ));
        }
        Ok(())
    }
}

/// Scheduler options, named as vLLM names its flags.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SchedulerConfig {
    /// Most requests running at once.
    pub max_num_seqs: u32,
    /// Token budget of one step (decodes count one token each).
    pub max_num_batched_tokens: u32,
    /// Split long prompts over steps; off: a prompt is scheduled whole or waits.
    pub chunked_prefill: bool,
    /// Tokens per KV block.
    pub block_size: u32,
    /// Fraction of GPU memory the engine may use (weights + activations + KV); for
    /// `engine: trtllm`, TensorRT-LLM's `free_gpu_memory_fraction`: the share of the memory
    /// left after weights and activations that the KV cache takes.
    pub gpu_memory_utilization: f64,
    /// Reuse cached KV blocks of identical prompt prefixes.
    pub prefix_caching: bool,
    /// Memory per GPU reserved for activations, CUDA graphs and NCCL (GB); default: derived.
    pub activation_reserve_gb: Option<f64>,
    /// Fixes the KV capacity (blocks per worker) instead of deriving it from memory.
    pub num_gpu_blocks: Option<u64>,
    /// Longest request (prompt + output tokens) the engine accepts; longer ones are refused,
    /// as vLLM answers 400. `None`: no limit but the KV capacity.
    pub max_model_len: Option<u32>,
    /// Run every step without CUDA graphs (vLLM's `--enforce-eager`).
    pub enforce_eager: bool,
    /// Largest step captured as a CUDA graph, in tokens (vLLM V1's largest capture size) or
    /// decode sequences (vLLM V0, SGLang's `--cuda-graph-max-bs`, TensorRT-LLM); larger steps
    /// launch their kernels one by one. 0: no graphs.
    pub cuda_graph_max_batch: u32,
    /// Prefill chunks and decodes share a step (vLLM V1, TensorRT-LLM); off: a step is all
    /// prefill (while a waiting request can be admitted) or all decode (vLLM V0, SGLang).
    pub mixed_batches: bool,
    /// A decode-only step within the capture size runs as one full CUDA graph (vLLM's
    /// `cudagraph_mode` `FULL_AND_PIECEWISE`, its default since 0.11; SGLang, TensorRT-LLM
    /// and vLLM V0 too). Off: as piecewise graphs, attention launched between the pieces
    /// (`PIECEWISE`, vLLM V1's default before 0.11), paying
    /// [`Calibration::piecewise_layer_us`] per layer like every step that is not one full
    /// graph.
    pub full_decode_graphs: bool,
    /// vLLM's `--async-scheduling` (on by default from vLLM 0.14): the engine core schedules
    /// step n + 1 while step n runs on the GPU, so a step lasts the longer of its GPU time
    /// and its CPU time (`step_overhead_us` and `per_seq_overhead_us`) instead of their sum,
    /// and a request that reaches the scheduler during a step joins the step after next.
    pub async_scheduling: bool,
    /// SGLang without `--max-running-requests`: the cap on running requests is derived from
    /// the KV pool at start (`model_runner.py`): `tokens / context × 512` clamped to
    /// 2,048–4,096, and at most `tokens / 2`, where `tokens` is the pool's size and `context`
    /// the model's context length; `max_num_seqs` is then only the sizing estimate of the
    /// memory reserves. On by default for `engine: sglang` unless the file sets
    /// `max_num_seqs`.
    pub max_num_seqs_from_kv: bool,
    /// SGLang's `--scheduler-recv-interval` (default 1): the scheduler takes new requests
    /// from its tokenizer only once its counter reaches this, the counter adding 1 for each
    /// decode step and 1,000 for a step with prompt tokens (`SchedulerRecvSkipper`), so while
    /// it decodes a request that has reached it waits for up to this many steps. An idle
    /// scheduler takes it at once. Other families receive every step: only 1.
    pub recv_interval: u32,
}

impl Default for SchedulerConfig {
    /// vLLM V1 defaults for the OpenAI server on a data-centre GPU.
    fn default() -> Self {
        Self {
            max_num_seqs: 256,
            max_num_batched_tokens: 8192,
            chunked_prefill: true,
            block_size: 16,
            gpu_memory_utilization: 0.9,
            prefix_caching: true,
            activation_reserve_gb: None,
            num_gpu_blocks: None,
            max_model_len: None,
            enforce_eager: false,
            cuda_graph_max_batch: 512,
            mixed_batches: true,
            full_decode_graphs: true,
            async_scheduling: false,
            max_num_seqs_from_kv: false,
            recv_interval: 1,
        }
    }
}
