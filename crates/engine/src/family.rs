//! Engine families: which serving engine an engine file models, and the defaults each one
//! starts from when the file does not say (scheduler limits, chunked prefill, prefix caching,
//! whether prefill and decode share a step, CUDA-graph capture, per-step CPU time).
//!
//! Scheduler defaults are the engines' own (their argument defaults for an OpenAI server on a
//! data-centre GPU, as of the versions named in docs/predict.md); per-step CPU times are
//! estimates until a table of that engine is fitted, and say so in every prediction's
//! provenance.

use serde::{Deserialize, Serialize};

use crate::gpu::GpuSpec;
use crate::settings::{Calibration, SchedulerConfig};

/// The serving engine an engine file models.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EngineFamily {
    /// vLLM with the V1 engine core (default since 0.8): one token budget shared by decodes
    /// and prefill chunks, prefix caching on, piecewise CUDA graphs up to 512 tokens, and
    /// from 0.11 full graphs of decode-only steps.
    #[default]
    VllmV1,
    /// vLLM's V0 engine: prefill-first steps (a step is all prefill or all decode) without
    /// chunked prefill, prefix caching off, CUDA graphs of decode batches up to 256; its
    /// Python scheduler and input preparation run between steps, and at TP above 1 it hands
    /// each step's inputs to the other ranks ([`V0_TP_STEP_US`]).
    VllmV0,
    /// SGLang: chunked prefill of 8,192 tokens (by GPU memory: 2,048–16,384), radix (prefix)
    /// cache on, prefill batches run apart from decode batches (`--enable-mixed-chunk` off),
    /// CUDA graphs of decode batches up to `cuda_graph_max_bs` (by GPU memory and TP from
    /// 0.5.3, 160 before), the overlap scheduler hiding most CPU time.
    Sglang,
    /// TensorRT-LLM (`trtllm-serve`): in-flight batching mixes context and generation
    /// requests, `max_num_tokens` 8,192, `max_batch_size` 2,048, chunked context off, KV
    /// block reuse on, a C++ runtime.
    Trtllm,
    /// NVIDIA Dynamo's Rust frontend and router in front of vLLM V1 workers (Dynamo 0.4 and
    /// later).
    Dynamo,
    /// NVIDIA Dynamo 0.1 to 0.3: its Python Processor (tokenises once) in front of its own
    /// patch of vLLM on the V0 engine (0.7.2 in Dynamo 0.1, 0.8.4 in 0.2 to 0.3.2): V0's
    /// steps and CPU times; with P/D, chunked prefill off (the patch refuses it with remote
    /// prefill), the decode worker admitting each request in a step of its own first,
    /// prefill workers taking one prompt at a time from a shared queue in eager mode, and a
    /// finished remote prefill joining the decode worker's next decode step. `engine: dynamo`
    /// with an `engine_version` below 0.4 is this family.
    DynamoV0,
}

/// What a family fixes beyond its scheduler defaults.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FamilyTraits {
    /// The workers are vLLM (V1, V0, or Dynamo's): they size the KV cache from a profiling
    /// run and hold the weights as vLLM loads them (`WorkerSpec::activation_reserve_bytes`,
    /// `WorkerSpec::loaded_weight_bytes`).
    pub vllm_workers: bool,
    /// CUDA graphs also cover steps that compute prompt tokens (vLLM V1's piecewise graphs);
    /// otherwise only decode-only steps are graphed.
    pub graphs_mixed_steps: bool,
    /// A request is admitted only when the KV blocks of its whole sequence (prompt and every
    /// output token) are free, and they are taken at once, so running requests are never
    /// preempted: TensorRT-LLM's default capacity scheduler (`GUARANTEED_NO_EVICT`). The
    /// others allocate as tokens are computed and preempt when the pool runs out.
    pub reserve_full_kv: bool,
    /// `gpu_memory_utilization` is the fraction of the memory left after the weights and
    /// activations that the KV cache takes: TensorRT-LLM's `free_gpu_memory_fraction` (0.9 by
    /// default). Otherwise (vLLM, SGLang) it is the fraction of the whole memory the engine
    /// uses, weights and activations included.
    pub kv_fraction_of_free_memory: bool,
    /// `gpu_memory_utilization` is the share of the memory that the weights and the KV pool
    /// take, activations and CUDA graphs living in the rest: SGLang's `mem_fraction_static`.
    /// Otherwise (vLLM) the activations the engine profiles come out of it too.
    pub fraction_holds_weights_and_kv: bool,
    /// With P/D, the decode server gets the request only once the prefill server has
    /// answered, and its own API server renders and tokenises the prompt again before its
    /// scheduler takes the request and pulls the KV: vLLM's P/D proxies (prefill with
    /// `max_tokens: 1`, then the decode instance; the NIXL and Mooncake connectors pull once
    /// the decode scheduler has the request) and TensorRT-LLM's disaggregated server (the
    /// context server first, then the generation server with the original request).
    /// SGLang's router sends the request to both servers at once, and Dynamo's frontend
    /// tokenises once for both pools.
    pub pd_decode_server_after_prefill: bool,
    /// With P/D, the decode worker takes the request first: its V0 scheduler admits it
    /// through the prefill path in a step that runs no forward pass and no decode, and hands
    /// the prompt to the prefill workers' queue at that step's end (Dynamo 0.1-0.3's patch:
    /// `remote_prefilling`, the `RemotePrefillRequest` sent before model execution); the KV
    /// comes back to that worker.
    pub pd_decode_admits_first: bool,
}

impl EngineFamily {
    /// Every family, in the order the docs list them.
    pub const ALL: [EngineFamily; 6] = [
        EngineFamily::VllmV1,
        EngineFamily::VllmV0,
        EngineFamily::Sglang,
        EngineFamily::Trtllm,
        EngineFamily::Dynamo,
        EngineFamily::DynamoV0,
    ];

    /// The name an engine file uses (`vllm-v1`, ...).
    pub fn name(self) -> &'static str {
        match self {
            EngineFamily::VllmV1 => "vllm-v1",
            EngineFamily::VllmV0 => "vllm-v0",
            EngineFamily::Sglang => "sglang",
            EngineFamily::Trtllm => "trtllm",
            EngineFamily::Dynamo => "dynamo",
            EngineFamily::DynamoV0 => "dynamo-v0",
        }
    }

    /// The family's scheduler when the engine file sets nothing.
    pub fn scheduler_defaults(self) -> SchedulerConfig {
        let v1 = SchedulerConfig::default();
        match self {
            EngineFamily::VllmV1 | EngineFamily::Dynamo => v1,
            EngineFamily::VllmV0 | EngineFamily::DynamoV0 => SchedulerConfig {
                chunked_prefill: false,
                prefix_caching: false,
                mixed_batches: false,
                cuda_graph_max_batch: 256,
                ..v1
            },
            EngineFamily::Sglang => SchedulerConfig {
                // `--max-running-requests` is derived from the KV pool at start
                // (`max_num_seqs_from_kv`); 1,024 only sizes the memory reserves.
                max_num_seqs: 1024,
                max_num_seqs_from_kv: true,
                mixed_batches: false,
                cuda_graph_max_batch: 160,
                ..v1
            },
            EngineFamily::Trtllm => SchedulerConfig {
                max_num_seqs: 2048,
                chunked_prefill: false,
                // `CudaGraphConfig`: 128 when no batch size is given.
                cuda_graph_max_batch: 128,
                ..v1
            },
        }
    }

    /// The family's scheduler on `gpu` at `version`: [`Self::scheduler_defaults`] with the
    /// limits the engines size by the GPU, and whether decode steps are full CUDA graphs
    /// ([`Self::full_decode_graphs`]).
    ///
    /// - vLLM V1's API server: [`vllm_v1_batch_defaults`], by version (Dynamo: a current
    ///   vLLM).
    /// - SGLang's `--chunked-prefill-size` (`server_args.py`, `_handle_gpu_memory_settings`):
    ///   2,048 tokens under 35 GiB, 4,096 under 60, 8,192 under 160 (A100 and H100 80 GB,
    ///   H20, H200), 16,384 above (B200).
    pub fn scheduler_defaults_for(
        self,
        gpu: Option<&GpuSpec>,
        version: Option<&str>,
    ) -> SchedulerConfig {
        let mut s = self.scheduler_defaults();
        s.full_decode_graphs = self.full_decode_graphs(version);
        s.async_scheduling = self.async_scheduling(version);
        let Some(g) = gpu else { return s };
        match self {
            EngineFamily::VllmV1 => {
                (s.max_num_seqs, s.max_num_batched_tokens) = vllm_v1_batch_defaults(g, version);
            }
            EngineFamily::Dynamo => {
                (s.max_num_seqs, s.max_num_batched_tokens) = vllm_v1_batch_defaults(g, None);
            }
            EngineFamily::Sglang => {
                s.max_num_batched_tokens = match g.mem_gb {
                    x if x < 35.0 => 2048,
                    x if x < 60.0 => 4096,
                    x if x < 160.0 => 8192,
                    _ => 16384,
                };
            }
            EngineFamily::VllmV0 | EngineFamily::Trtllm | EngineFamily::DynamoV0 => {}
        }
        s
    }

    /// The family's calibration before any fit: per-step CPU time differs by engine (these
    /// are estimates, not fits), the rest is [`Calibration::default`].
    pub fn calibration_defaults(self) -> Calibration {
        let c = Calibration::default();
        match self {
            EngineFamily::VllmV1 => c,
            // The V0 scheduler, input preparation and output processing run in Python between
            // GPU steps; V1 moved them to a separate process overlapping the GPU. With TP above
            // 1 the driver also hands every step's inputs to the other ranks: the TP terms,
            // from a published V0 latency sweep (`V0_TP_STEP_US`).
            // Dynamo 0.1-0.3's workers are this V0 (its Python Processor: the default API
            // server time).
            EngineFamily::VllmV0 | EngineFamily::DynamoV0 => Calibration {
                step_overhead_us: 2500.0,
                tp_step_overhead_us: V0_TP_STEP_US,
                tp_per_seq_overhead_us: V0_TP_PER_SEQ_US,
                piecewise_layer_us: 0.0,
                ..c
            },
            // The overlap scheduler prepares step n + 1 while step n runs.
            EngineFamily::Sglang => {
                Calibration { step_overhead_us: 400.0, piecewise_layer_us: 0.0, ..c }
            }
            EngineFamily::Trtllm => {
                Calibration { step_overhead_us: 400.0, piecewise_layer_us: 0.0, ..c }
            }
            // Rust HTTP and tokenisation in front of the same engine core.
            EngineFamily::Dynamo => Calibration { frontend_us: 500.0, ..c },
        }
    }

    /// Whether decode-only steps run as full CUDA graphs by default at `version`: vLLM V1
    /// before 0.11 captured piecewise graphs only (attention between the pieces); 0.11 made
    /// `FULL_AND_PIECEWISE` the default (vLLM pull request 25444). An unknown or unreadable
    /// version is taken as current. The other families capture whole decode steps. Dynamo's
    /// version is its own, not its vLLM workers': it is taken as running a current vLLM
    /// (model an older worker as `engine: vllm-v1` with that version).
    pub fn full_decode_graphs(self, version: Option<&str>) -> bool {
        match (self, version.and_then(major_minor)) {
            (EngineFamily::VllmV1, Some(v)) => v >= (0, 11),
            _ => true,
        }
    }

    /// Whether the engine core schedules the next step while the GPU runs the current one by
    /// default at `version`: vLLM V1 from 0.14 (release notes: "Async scheduling is now
    /// enabled by default", pull request 27614; `--async-scheduling` before), so an unknown
    /// or unreadable version, and Dynamo's current vLLM workers. SGLang's overlap scheduler
    /// and TensorRT-LLM's are in their per-step CPU estimates instead.
    pub fn async_scheduling(self, version: Option<&str>) -> bool {
        match (self, version.and_then(major_minor)) {
            (EngineFamily::VllmV1, Some(v)) => v >= (0, 14),
            (EngineFamily::VllmV1 | EngineFamily::Dynamo, None) | (EngineFamily::Dynamo, _) => true,
            _ => false,
        }
    }

    /// The family an engine file at `version` is: [`EngineFamily::DynamoV0`] for `dynamo`
    /// before 0.4, which ran its own patch of vLLM on the V0 engine (Dynamo 0.1.0 to 0.3.2:
    /// `container/deps/vllm/vllm_v0.7.2-dynamo-kv-disagg-patch.patch`, then `vllm_v0.8.4-…`
    /// from 0.2.0; 0.4.0 moved to an unpatched vLLM 0.10 on V1); itself otherwise, and for an
    /// unreadable version.
    pub fn at_version(self, version: Option<&str>) -> EngineFamily {
        let v0_workers = version.and_then(major_minor).is_some_and(|v| v < (0, 4));
        if self == EngineFamily::Dynamo && v0_workers {
            EngineFamily::DynamoV0
        } else {
            self
        }
    }

    /// What the family fixes beyond its defaults.
    pub fn traits(self) -> FamilyTraits {
        FamilyTraits {
            vllm_workers: matches!(
                self,
                EngineFamily::VllmV1
                    | EngineFamily::VllmV0
                    | EngineFamily::Dynamo
                    | EngineFamily::DynamoV0
            ),
            graphs_mixed_steps: matches!(self, EngineFamily::VllmV1 | EngineFamily::Dynamo),
            reserve_full_kv: matches!(self, EngineFamily::Trtllm),
            kv_fraction_of_free_memory: matches!(self, EngineFamily::Trtllm),
            fraction_holds_weights_and_kv: matches!(self, EngineFamily::Sglang),
            pd_decode_server_after_prefill: matches!(
                self,
                EngineFamily::VllmV1 | EngineFamily::VllmV0 | EngineFamily::Trtllm
            ),
            // Dynamo 0.1-0.3: the decode worker takes the request first and queues its prompt
            // for the prefill workers.
            pd_decode_admits_first: self == EngineFamily::DynamoV0,
        }
    }
}

/// vLLM V0's per-step CPU time with TP above 1, µs per unit of `1 + log2(TP)`
/// ([`Calibration::tp_step_overhead_us`]), and per sequence ([`V0_TP_PER_SEQ_US`]). From
/// vLLM issue 16300 (2025-04-09): vLLM 0.7.2 (V0), QwQ-32B in BF16 on A100 80 GB,
/// `benchmark_latency` of 1 prompt token and 200 output tokens, batch 1 and 16 at TP 2, 4
/// and 8: 27.50, 19.55 and 15.75 ms a step at batch 1, 30.35, 23.85 and 21.25 at batch 16.
/// The model without these terms (the shipped calibration carried to V0) makes them 23.82,
/// 14.02 and 9.14 ms and 24.57, 14.68 and 9.77: short by 140, 243 and 325 µs a sequence
/// (the batch-16 gap less the batch-1 gap, over 15) and 3.5, 5.3 and 6.3 ms a step beside
/// that, each growing about half its TP-2 figure at each doubling. Least squares over the
/// three TPs of `x × (1 + log2 TP)`: 1,658 µs and 79.6 µs. The issue does
/// not say how the A100s are linked (the a100 preset: NVSwitch); test
/// `vllm_v0_reproduces_a_published_tp_latency_sweep`.
pub const V0_TP_STEP_US: f64 = 1658.0;

/// See [`V0_TP_STEP_US`].
pub const V0_TP_PER_SEQ_US: f64 = 79.6;

/// `(max_num_seqs, max_num_batched_tokens)` that vLLM V1's OpenAI API server takes on `gpu`
/// when the command sets neither (`EngineArgs._set_default_args_v1`, later
/// `get_batch_defaults`), at `version` (`None` or unreadable: current). The rule moved four
/// times; each step is the pull request that moved it, placed by its merge date between
/// releases:
///
/// - before 0.8.4: 1,024 sequences everywhere; 8,192 tokens on an H100 or H200 (by device
///   name), 2,048 on the others (#12369, January 2025);
/// - 0.8.4: 256 sequences except on an H100 or H200 (#16158);
/// - 0.8.5: by memory instead of name, 1,024 and 8,192 on 70 GiB or more (#17073), so an H20
///   and an A100 80 GB too;
/// - 0.9: not on an A100, whose throughput the larger budget lowered (#17885);
/// - 0.28: 16,384 tokens on 160 GiB or more (a B200; #51726).
///
/// A GB10 shares its memory with the CPU, NVML reports no device memory, and vLLM falls back
/// to 0: the small defaults.
pub fn vllm_v1_batch_defaults(gpu: &GpuSpec, version: Option<&str>) -> (u32, u32) {
    const SMALL: (u32, u32) = (256, 2048);
    const LARGE: (u32, u32) = (1024, 8192);
    let v = version.and_then(version_triple).unwrap_or((u32::MAX, 0, 0));
    let by_name = gpu.name.starts_with("h100") || gpu.name == "h200";
    let gib = if gpu.name == "gb10" { 0.0 } else { gpu.mem_gb };
    if v < (0, 8, 4) {
        (1024, if by_name { 8192 } else { 2048 })
    } else if v < (0, 8, 5) {
        if by_name {
            LARGE
        } else {
            SMALL
        }
    } else if v < (0, 9, 0) {
        if gib >= 70.0 {
            LARGE
        } else {
            SMALL
        }
    } else if v >= (0, 28, 0) && gib >= 160.0 {
        (1024, 16384)
    } else if gib >= 70.0 && gpu.name != "a100" {
        LARGE
    } else {
        SMALL
    }
}

/// SGLang's derived cap on running requests for a KV pool of `tokens` and a context of
/// `context` tokens (`None`: unknown, the 2,048 floor): see
/// [`crate::SchedulerConfig::max_num_seqs_from_kv`].
pub fn sglang_max_running_requests(tokens: u64, context: Option<u32>) -> u64 {
    let estimated = context.map_or(2048, |c| (tokens as f64 / f64::from(c.max(1)) * 512.0) as u64);
    estimated.clamp(2048, 4096).min(tokens / 2).max(1)
}

/// `(mem_fraction_static, cuda_graph_max_bs)` that SGLang derives on `gpu` at `tp` when the
/// command sets neither, for a chunked-prefill size of `chunk` tokens and the graph size
/// `graph` if the command sets that one, at `version` (`None` or unreadable: current).
/// `mem_fraction_static` is the share of the GPU's memory that the weights and the KV pool
/// take; activations and CUDA graphs live in the rest.
///
/// - From 0.5.3 (`_handle_gpu_memory_settings` in `server_args.py`, pull requests #10975 and
///   #11076, September 2025): the graph's largest batch by memory, 8 under 20 GiB, 24 (80 at
///   TP ≥ 4) under 35, 32 (160) under 60, 256 (512) under 160 and 512 above; the fraction
///   leaves `512 + 1.5 × max(chunk, 2048) + 2 × graph batch + 1024 × TP / 8` MiB, at least
///   10 GiB on a GPU of more than 60 GiB. An H100 at TP 1 with 8,192-token chunks: 13,440
///   MiB of the preset's 81,920, 0.836 (of the 81,559 a real one reports, 0.835).
/// - Before: 0.88 at TP 1, 0.87 at TP 2, 0.85 at TP 4, 0.81 at TP 8, 0.79 at TP 16, and a
///   graph of 160.
pub fn sglang_memory_defaults(
    gpu: &GpuSpec,
    tp: u32,
    chunk: u32,
    graph: Option<u32>,
    version: Option<&str>,
) -> (f64, u32) {
    let v = version.and_then(version_triple).unwrap_or((u32::MAX, 0, 0));
    if v < (0, 5, 3) {
        let fraction = match tp {
            16.. => 0.79,
            8.. => 0.81,
            4.. => 0.85,
            2.. => 0.87,
            _ => 0.88,
        };
        return (fraction, graph.unwrap_or(160));
    }
    let mib = gpu.mem_gb * 1024.0;
    // (TP below 4, TP 4 and above)
    let (narrow, wide) = match gpu.mem_gb {
        x if x < 20.0 => (8, 8),
        x if x < 35.0 => (24, 80),
        x if x < 60.0 => (32, 160),
        x if x < 160.0 => (256, 512),
        _ => (512, 512),
    };
    let derived = if tp < 4 { narrow } else { wide };
    let graph = graph.unwrap_or(derived);
    let mut reserved = 512.0
        + 1.5 * f64::from(chunk.max(2048))
        + 2.0 * f64::from(graph)
        + 1024.0 * f64::from(tp) / 8.0;
    if gpu.mem_gb > 60.0 {
        reserved = reserved.max(10.0 * 1024.0);
    }
    let fraction = ((mib - reserved) / mib * 1000.0).round() / 1000.0;
    (fraction, graph)
}

/// `(major, minor)` of a version such as `0.9.0.1`, `v0.11.0` or `0.10.1rc1`.
fn major_minor(v: &str) -> Option<(u32, u32)> {
    version_triple(v).map(|(major, minor, _)| (major, minor))
}

/// `(major, minor, patch)` of a version such as `0.9.0.1`, `v0.11.0` or `0.8.5.post1`; a
/// missing patch is 0.
fn version_triple(v: &str) -> Option<(u32, u32, u32)> {
    let mut parts = v.trim().trim_start_matches('v').split('.');
    let major = parts.next()?.parse().ok()?;
    let number = |p: &str| -> Option<u32> {
        let digits: String = p.chars().take_while(char::is_ascii_digit).collect();
        digits.parse().ok()
    };
    let minor = number(parts.next()?)?;
    let patch = parts.next().and_then(number).unwrap_or(0);
    Some((major, minor, patch))
}

impl std::fmt::Display for EngineFamily {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_through_yaml() {
        for f in EngineFamily::ALL {
            let back: EngineFamily = serde_yaml_ng::from_str(f.name()).unwrap();
            assert_eq!(back, f);
        }
    }

    /// The defaults that follow the engine's version: (family, version, full decode graphs,
    /// async scheduling).
    #[test]
    fn graph_and_async_defaults_by_version() {
        use EngineFamily::{Dynamo, DynamoV0, Sglang, VllmV0, VllmV1};
        let cases = [
            (VllmV1, Some("0.9.0.1"), false, false),
            (VllmV1, Some("v0.10.2"), false, false),
            (VllmV1, Some("0.11.0"), true, false),
            (VllmV1, Some("0.11.1rc2"), true, false),
            (VllmV1, Some("0.13.1"), true, false),
            (VllmV1, Some("0.14.0"), true, true),
            (VllmV1, Some("1.0"), true, true),
            (VllmV1, None, true, true),
            (VllmV1, Some("nightly"), true, true),
            (Dynamo, Some("0.4.1"), true, true),
            (Sglang, Some("0.4.9"), true, false),
            (Sglang, None, true, false),
            (VllmV0, None, true, false),
            (DynamoV0, Some("0.3.0"), true, false),
        ];
        for (f, v, full, async_on) in cases {
            assert_eq!(
                (f.full_decode_graphs(v), f.async_scheduling(v)),
                (full, async_on),
                "{f} {v:?}"
            );
        }
        assert_eq!(major_minor("0.10.1rc1"), Some((0, 10)));
        // Dynamo by its own version: V0 workers before 0.4.
        for (v, f) in
            [(Some("0.1.1"), DynamoV0), (Some("0.3.2"), DynamoV0), (Some("0.4.0"), Dynamo)]
        {
            assert_eq!(Dynamo.at_version(v), f, "{v:?}");
        }
        assert_eq!((Dynamo.at_version(None), VllmV0.at_version(Some("0.3.0"))), (Dynamo, VllmV0));
        let t = DynamoV0.traits();
        assert!(t.pd_decode_admits_first && !t.pd_decode_server_after_prefill);
        assert!(!t.graphs_mixed_steps);
    }

    /// vLLM V1's batch defaults by version and GPU, each step of the rule's history.
    #[test]
    fn vllm_v1_batch_defaults_by_version() {
        let at =
            |gpu: &str, v: Option<&str>| vllm_v1_batch_defaults(&GpuSpec::preset(gpu).unwrap(), v);
        let (small, large) = ((256, 2048), (1024, 8192));
        assert_eq!(at("h20", Some("0.8.3")), (1024, 2048));
        assert_eq!(at("h100", Some("0.8.3")), large);
        assert_eq!(at("h20", Some("0.8.4")), small);
        assert_eq!(at("h100-pcie", Some("0.8.4")), large);
        assert_eq!(at("h20", Some("0.8.5.post1")), large);
        assert_eq!(at("a100", Some("0.8.5")), large);
        assert_eq!(at("a100", Some("0.9.0.1")), small);
        assert_eq!(at("h20", Some("0.9.0.1")), large);
        assert_eq!(at("l40s", Some("0.11.0")), small);
        assert_eq!(at("b200", Some("0.27.1")), large);
        assert_eq!(at("b200", Some("0.28.0")), (1024, 16384));
        assert_eq!(at("b200", None), (1024, 16384));
        assert_eq!(at("h200", None), large);
        assert_eq!(at("gb10", None), small);
        assert_eq!(version_triple("v0.10.1rc1"), Some((0, 10, 1)));
        assert_eq!(version_triple("0.9"), Some((0, 9, 0)));
        assert_eq!(version_triple("nightly"), None);
    }

    /// SGLang's graph size and memory share by GPU memory and TP (from 0.5.3), and its
    /// TP ladder before.
    #[test]
    fn sglang_memory_defaults_by_gpu_tp_and_version() {
        let at = |gpu: &str, tp, chunk, graph, v| {
            sglang_memory_defaults(&GpuSpec::preset(gpu).unwrap(), tp, chunk, graph, v)
        };
        // H100, TP 1, 8,192-token chunks: 512 + 12,288 + 512 + 128 = 13,440 MiB of 81,920.
        assert_eq!(at("h100", 1, 8192, None, None), (0.836, 256));
        // H20, TP 4: 512 + 12,288 + 1,024 + 512 = 14,336 MiB of 98,304.
        assert_eq!(at("h20", 4, 8192, None, Some("0.5.5.post1")), (0.854, 512));
        // L40S, TP 1, 4,096-token chunks: 512 + 6,144 + 64 + 128 = 6,848 MiB of 49,152.
        assert_eq!(at("l40s", 1, 4096, None, Some("0.5.3")), (0.861, 32));
        // B200: 512 + 24,576 + 1,024 + 128 = 26,240 MiB of 184,320.
        assert_eq!(at("b200", 1, 16384, None, None), (0.858, 512));
        // A graph the command sets is the one reserved for: 13,440 − 512 + 256.
        assert_eq!(at("h100", 1, 8192, Some(128), None), (0.839, 128));
        // Small chunks on a large GPU still leave 10 GiB.
        assert_eq!(at("h100", 1, 2048, None, None), (0.875, 256));
        assert_eq!(at("h20", 4, 8192, None, Some("0.4.9")), (0.85, 160));
        assert_eq!(at("h100", 1, 8192, None, Some("0.5.2")), (0.88, 160));
    }

    /// vLLM V1 is the default family, and its defaults are the crate's defaults, so engine
    /// files written before families existed mean what they meant.
    #[test]
    fn vllm_v1_is_the_crate_default() {
        assert_eq!(EngineFamily::default(), EngineFamily::VllmV1);
        assert_eq!(EngineFamily::VllmV1.scheduler_defaults(), SchedulerConfig::default());
        assert_eq!(EngineFamily::VllmV1.calibration_defaults(), Calibration::default());
        let v0 = EngineFamily::VllmV0.scheduler_defaults();
        assert_eq!(
            (v0.chunked_prefill, v0.prefix_caching, v0.mixed_batches),
            (false, false, false)
        );
    }
}
