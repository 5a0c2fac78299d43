//! Where a calibration was fitted ([`FittedOn`]) and what of it carries to another
//! deployment ([`carry_calibration`]). Below the engine file (`config`), which applies it at
//! load, and the fit (`calibrate`), which writes it.

use serde::{Deserialize, Serialize};

use crate::family::EngineFamily;
use crate::settings::Calibration;
use servelab_records::IslOsl;

/// The deployment a calibration was fitted on: what a prediction of another deployment is
/// extrapolating from. Written by `predict calibrate`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FittedOn {
    /// Engine family.
    pub engine: EngineFamily,
    /// Engine version, if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine_version: Option<String>,
    /// GPU preset.
    pub gpu: String,
    /// TP of the measured workers.
    pub tp: u32,
    /// Model (preset or config name).
    pub model: String,
    /// Whether the measured deployment was disaggregated (P/D).
    #[serde(default)]
    pub pd: bool,
    /// The measured tables or runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// The fit's own median absolute error on all its cells, %: the larger of output
    /// throughput's and mean TPOT's. The band of a prediction inside the domain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_pct: Option<f64>,
    /// The `ISL:OSL` scenarios of the measured tables (empty: not recorded). A prediction of
    /// another scenario says so ([`crate::provenance::provenance_at`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scenarios: Vec<IslOsl>,
}

/// A fitted calibration as it carries to another deployment, by what each parameter is.
///
/// - The efficiencies (`eta_*`) are fractions of a GPU's own peaks, meant to carry to any
///   engine, GPU and model, and do.
/// - The kernel and collective latencies (`layer_overhead_us`, `moe_layer_us`,
///   `allreduce_base_us`, `allreduce_hop_us`, `eager_layer_us`) are GPU-side times of one
///   engine's kernels on one GPU (its SM count, clocks, links): they carry only to the same
///   engine on the same GPU.
/// - The CPU times (`step_overhead_us`, `tp_step_overhead_us`, `piecewise_layer_us`,
///   `per_seq_overhead_us`, `tp_per_seq_overhead_us`, `frontend_us`, `frontend_per_token_us`)
///   are the engine's own scheduler, graph launches, sampling and API server: they carry to
///   the same engine family only.
///
/// What does not carry takes the target family's defaults. Issue 24's cross-checks: the
/// reference fit's 113.7 µs per layer (H20, vLLM V1, TP 4) made a TP-1 H100 decode 40–50 %
/// too slow for vLLM, SGLang and TensorRT-LLM alike, and its 41 µs per sequence per step cost
/// TensorRT-LLM's batches of 2,048 80 ms a step (docs/predict.md, "Cross-checks on public
/// tables").
pub fn carry_calibration(
    fitted: &Calibration,
    from: &FittedOn,
    engine: EngineFamily,
    gpu: &str,
) -> Calibration {
    let mut c = engine.calibration_defaults();
    c.eta_gemm = fitted.eta_gemm;
    c.eta_attn = fitted.eta_attn;
    c.eta_moe = fitted.eta_moe;
    c.eta_mem = fitted.eta_mem;
    c.eta_link = fitted.eta_link;
    c.step_jitter = fitted.step_jitter;
    c.seed = fitted.seed;
    if from.engine == engine && from.gpu.eq_ignore_ascii_case(gpu) {
        c.layer_overhead_us = fitted.layer_overhead_us;
        c.moe_layer_us = fitted.moe_layer_us;
        c.allreduce_base_us = fitted.allreduce_base_us;
        c.allreduce_hop_us = fitted.allreduce_hop_us;
        c.eager_layer_us = fitted.eager_layer_us;
    }
    if from.engine == engine {
        c.step_overhead_us = fitted.step_overhead_us;
        c.piecewise_layer_us = fitted.piecewise_layer_us;
        c.per_seq_overhead_us = fitted.per_seq_overhead_us;
        c.tp_step_overhead_us = fitted.tp_step_overhead_us;
        c.tp_per_seq_overhead_us = fitted.tp_per_seq_overhead_us;
        c.frontend_us = fitted.frontend_us;
        c.frontend_per_token_us = fitted.frontend_per_token_us;
    }
    c
}
