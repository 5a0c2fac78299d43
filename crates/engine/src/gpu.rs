//! GPU spec: peak dense FLOP/s per tensor-core class, memory, and links.

use serde::{Deserialize, Serialize};

use crate::dtype::ComputeClass;
use crate::error::{EngineError, Result};

/// A point-to-point link: bandwidth per direction and a per-message latency.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkSpec {
    /// Bandwidth per direction, GB/s (10^9 bytes).
    pub bandwidth_gb_s: f64,
    /// Latency per message (one ring hop, or one transfer), µs.
    pub latency_us: f64,
}

/// Peak figures of one GPU. FLOP/s are dense (no 2:4 sparsity), in TFLOP/s.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuSpec {
    /// Preset name.
    pub name: String,
    /// Dense BF16/FP16 tensor TFLOP/s.
    pub bf16_tflops: f64,
    /// Dense FP8 (or INT8) tensor TFLOP/s; `None` if the GPU has no FP8 tensor cores.
    pub fp8_tflops: Option<f64>,
    /// Dense FP4 tensor TFLOP/s; `None` if the GPU has no FP4 tensor cores.
    pub fp4_tflops: Option<f64>,
    /// Memory bandwidth, GB/s.
    pub mem_bw_gb_s: f64,
    /// Memory capacity as the datasheet states it, "GB" that are GiB (2^30 bytes): HBM and
    /// GDDR come in binary sizes (an H100's "80 GB" are five 16 GiB stacks; CUDA reports
    /// 79.6 GiB of them), see [`GpuSpec::mem_bytes`].
    pub mem_gb: f64,
    /// GPU-to-GPU link inside a node (NVLink or PCIe), used by TP all-reduce.
    pub intra: LinkSpec,
    /// Whether every GPU of a node reaches every other in one hop through a switch (NVSwitch
    /// on HGX boards): an all-reduce then takes two exchange steps at any TP, instead of the
    /// 2(n−1) steps of a ring over point-to-point links (PCIe through the host).
    pub intra_switched: bool,
    /// Network link per GPU between nodes, used for the P/D KV transfer.
    pub network: LinkSpec,
    /// Dense BF16 matmul TFLOP/s measured on this GPU (the best of a published sweep of
    /// shapes), `None` where none is published: what the tensor cores sustain at the clock the
    /// GPU holds under that load within its power limit. See [`GpuSpec::sustained_fraction`].
    pub measured_bf16_tflops: Option<f64>,
    /// The same for FP8 matmuls, where published.
    pub measured_fp8_tflops: Option<f64>,
    /// The same for FP4 matmuls, where published.
    pub measured_fp4_tflops: Option<f64>,
}

const fn link(bandwidth_gb_s: f64, latency_us: f64) -> LinkSpec {
    LinkSpec { bandwidth_gb_s, latency_us }
}

// Link latencies are not on datasheets: 2 µs per NVLink ring hop and 5 µs per PCIe hop are
// the usual small-message NCCL figures; 10 µs for an RDMA transfer setup.
const NVLINK_HOP_US: f64 = 2.0;
const PCIE_HOP_US: f64 = 5.0;
const RDMA_US: f64 = 10.0;

fn preset_table() -> Vec<GpuSpec> {
    let g = |name: &str, bf16, fp8, fp4, bw, gb, intra, network| GpuSpec {
        name: name.to_string(),
        bf16_tflops: bf16,
        fp8_tflops: fp8,
        fp4_tflops: fp4,
        mem_bw_gb_s: bw,
        mem_gb: gb,
        intra,
        // HGX boards (A100, H100, H200, H20, B200) connect their GPUs through NVSwitch; an
        // L40S node is a PCIe ring, and GB10 has one GPU. Set below.
        intra_switched: false,
        network,
        measured_bf16_tflops: None,
        measured_fp8_tflops: None,
        measured_fp4_tflops: None,
    };
    vec![
        // A100 SXM4 80 GB datasheet: BF16 312 TFLOPS dense, no FP8; HBM2e 2,039 GB/s; NVLink 3
        // 600 GB/s total (300 per direction); HDR InfiniBand 200 Gb/s per GPU.
        g("a100", 312.0, None, None, 2039.0, 80.0, link(300.0, NVLINK_HOP_US), link(25.0, RDMA_US)),
        // H100 SXM5 datasheet: BF16 989 / FP8 1,979 TFLOPS dense (half the sparse figures);
        // HBM3 3.35 TB/s, 80 GB; NVLink 4 900 GB/s total; ConnectX-7 400 Gb/s per GPU.
        g(
            "h100",
            989.0,
            Some(1979.0),
            None,
            3350.0,
            80.0,
            link(450.0, NVLINK_HOP_US),
            link(50.0, RDMA_US),
        ),
        // H800 SXM5 datasheet: the H100 SXM5's tensor cores and memory (BF16 989 / FP8 1,979
        // TFLOPS dense, HBM3 3.35 TB/s, 80 GB, 700 W), its NVLink cut to 400 GB/s total (200 per
        // direction) and its FP64 to 1 TFLOPS; ConnectX-7 400 Gb/s per GPU, as HGX H100.
        g(
            "h800",
            989.0,
            Some(1979.0),
            None,
            3350.0,
            80.0,
            link(200.0, NVLINK_HOP_US),
            link(50.0, RDMA_US),
        ),
        // H100 NVL datasheet: BF16 835 / FP8 1,671 TFLOPS dense (half the sparse figures), at
        // 350–400 W; HBM3 3.9 TB/s, 94 GB; PCIe cards joined in pairs by an NVLink bridge of
        // 600 GB/s total; 400 Gb/s NIC assumed.
        g(
            "h100-nvl",
            835.0,
            Some(1671.0),
            None,
            3900.0,
            94.0,
            link(300.0, NVLINK_HOP_US),
            link(50.0, RDMA_US),
        ),
        // H100 PCIe datasheet: BF16 756 / FP8 1,513 TFLOPS dense (half the sparse figures), at
        // 300–350 W; HBM2e 2.0 TB/s, 80 GB; cards joined in pairs by an NVLink bridge of 600
        // GB/s total; 400 Gb/s NIC assumed.
        g(
            "h100-pcie",
            756.0,
            Some(1513.0),
            None,
            2000.0,
            80.0,
            link(300.0, NVLINK_HOP_US),
            link(50.0, RDMA_US),
        ),
        // H200 SXM datasheet: same tensor cores as H100; HBM3e 4.8 TB/s, 141 GB.
        g(
            "h200",
            989.0,
            Some(1979.0),
            None,
            4800.0,
            141.0,
            link(450.0, NVLINK_HOP_US),
            link(50.0, RDMA_US),
        ),
        // H20 datasheet: BF16 148 / FP8 296 TFLOPS dense; HBM3 4.0 TB/s, 96 GB; NVLink 900 GB/s.
        g(
            "h20",
            148.0,
            Some(296.0),
            None,
            4000.0,
            96.0,
            link(450.0, NVLINK_HOP_US),
            link(50.0, RDMA_US),
        ),
        // L40S datasheet: BF16 362 / FP8 733 TFLOPS dense (733 / 1,466 with sparsity); GDDR6
        // 864 GB/s, 48 GB; no NVLink: PCIe Gen4 x16 64 GB/s total; 200 Gb/s NIC assumed.
        g(
            "l40s",
            362.0,
            Some(733.0),
            None,
            864.0,
            48.0,
            link(32.0, PCIE_HOP_US),
            link(25.0, RDMA_US),
        ),
        // HGX B200 datasheet: FP4 9 / FP8 4.5 / BF16 2.25 PFLOPS dense per GPU; HBM3e 8 TB/s,
        // 180 GB; NVLink 5 1.8 TB/s total; ConnectX-7/8 400 Gb/s per GPU.
        g(
            "b200",
            2250.0,
            Some(4500.0),
            Some(9000.0),
            8000.0,
            180.0,
            link(900.0, NVLINK_HOP_US),
            link(50.0, RDMA_US),
        ),
        // GB10 (DGX Spark): NVIDIA states only "1 PFLOP FP4" with sparsity; dense FP4 500, FP8
        // 250 and BF16 125 TFLOPS follow Blackwell's 2:1 ratios (an estimate). 128 GB LPDDR5x
        // unified memory at 273 GB/s; one GPU, so no intra link; ConnectX-7 200 Gb/s.
        g(
            "gb10",
            125.0,
            Some(250.0),
            Some(500.0),
            273.0,
            128.0,
            link(25.0, PCIE_HOP_US),
            link(25.0, RDMA_US),
        ),
    ]
    .into_iter()
    .map(|mut g| {
        g.intra_switched = !matches!(g.name.as_str(), "l40s" | "gb10" | "h100-nvl" | "h100-pcie");
        (g.measured_bf16_tflops, g.measured_fp8_tflops, g.measured_fp4_tflops) =
            measured_matmul_tflops(&g.name);
        g
    })
    .collect()
}

/// Measured dense matmul TFLOP/s (BF16, FP8, FP4) of a preset, from published measurements,
/// `None` where none has the GPU:
///
/// - S. Bekman, *Machine Learning Engineering*, "Maximum Achievable Matmul FLOPS comparison
///   table" (github.com/stas00/ml-engineering, compute/accelerator/README.md, read at commit
///   744d01e, 2026-08): `torch.matmul`, best of a brute-force search over shapes, mean of 100
///   iterations. BF16: A100 SXM 271.2, H100 SXM 794.5 ("H200 is the same"), B200 1745.0;
///   FP8: H100 SXM 1402.6, H200 SXM 1453.4, B200 3432.5.
/// - zzc0721/torch-performance-test-data, `database.md` (read at commit 9d82827, 2026-01): one
///   script, `torch.matmul` of square matrices of 1,024–10,240, the best size. BF16: H20 142.25
///   (issue 77; another H20 141.86), H100 PCIe 495.93, L40S 269.15. It agrees with the first
///   table where both measured: H100 SXM 797.51 and 783.66, H200 790.29, B200 1696.03.
/// - B200 NVFP4: cuBLAS 5,589.8 TFLOP/s at 8192³ (4,313.6 at 16384³, 4,933.4 at 32768³;
///   triton-lang/triton pull request 9697, 2026-03, its cuBLAS column); torchao's matmul
///   benchmark 5,500 at 6144³ (pytorch/ao pull request 2427, 2025-06).
///
/// The H100 NVL and GB10 are in none: their datasheet peaks stand.
fn measured_matmul_tflops(name: &str) -> (Option<f64>, Option<f64>, Option<f64>) {
    match name {
        "a100" => (Some(271.2), None, None),
        // The H800 is the H100 SXM's die at its clocks and power limit (only NVLink and FP64
        // differ), and no matmul sweep of its own is published: the H100 SXM's figures.
        "h100" | "h800" => (Some(794.5), Some(1402.6), None),
        "h200" => (Some(794.5), Some(1453.4), None),
        "b200" => (Some(1745.0), Some(3432.5), Some(5589.8)),
        "h20" => (Some(142.25), None, None),
        "h100-pcie" => (Some(495.93), None, None),
        "l40s" => (Some(269.15), None, None),
        _ => (None, None, None),
    }
}

/// Names of the GPU presets.
pub fn gpu_preset_names() -> Vec<String> {
    preset_table().into_iter().map(|g| g.name).collect()
}

impl GpuSpec {
    /// A preset by name (`a100`, `h100`, `h800`, `h100-nvl`, `h100-pcie`, `h200`, `h20`, `l40s`, `b200`, `gb10`).
    pub fn preset(name: &str) -> Result<Self> {
        let key = name.trim().to_ascii_lowercase();
        preset_table().into_iter().find(|g| g.name == key).ok_or_else(|| {
            EngineError::invalid(
                "gpu",
                format!(
                    "unknown preset `{name}`, expected one of: {}",
                    gpu_preset_names().join(", ")
                ),
            )
        })
    }

    /// Peak dense FLOP/s of a GEMM of this class, at the rate of the tensor cores it runs on
    /// ([`GpuSpec::rate_class`]).
    pub fn flops(&self, class: ComputeClass) -> f64 {
        let t = match self.rate_class(class) {
            ComputeClass::Half => self.bf16_tflops,
            ComputeClass::Eight => self.fp8_tflops.unwrap_or(self.bf16_tflops),
            ComputeClass::Four => self.fp4_tflops.unwrap_or(self.bf16_tflops),
        };
        t * 1e12
    }

    /// The class whose tensor cores a GEMM of `class` runs on. A class the GPU lacks runs at the
    /// 16-bit rate: the engines dequantize such weights to BF16 in the kernel and multiply in
    /// BF16 (W8A16 for FP8 weights on an A100; W4A16 for FP4 weights on a GPU without FP4
    /// tensor cores, as vLLM's MXFP4 MoE backends on Hopper, Triton `matmul_ogs`, Marlin and
    /// FlashInfer's `SM90_FI_MXFP4_BF16`, all do: `Mxfp4Config` takes BF16 activations only).
    /// Before 2026-11-27 FP4 fell back to FP8, which put gpt-oss's experts on an H100 at twice
    /// the rate they run at.
    pub fn rate_class(&self, class: ComputeClass) -> ComputeClass {
        match class {
            ComputeClass::Four if self.fp4_tflops.is_some() => ComputeClass::Four,
            ComputeClass::Eight if self.fp8_tflops.is_some() => ComputeClass::Eight,
            _ => ComputeClass::Half,
        }
    }

    /// The fraction of the datasheet peak of `class` that the GPU sustains in a dense matmul:
    /// the measured TFLOP/s over the datasheet's. Datasheet peaks are at the boost clock; under
    /// dense tensor load a power-limited part holds a lower one (an H100 SXM at 700 W: 0.80 of
    /// its BF16 peak, 0.71 of its FP8 one), a part whose tensor cores were cut for its power
    /// nearly its peak (H20: 0.96). A class without a measurement of its own takes the fraction
    /// of the next wider measured class (FP4 that of FP8, FP8 that of BF16: the same clock); a
    /// GPU with no measurement at all, 1 (its datasheet peak).
    pub fn sustained_fraction(&self, class: ComputeClass) -> f64 {
        let half = self.measured_bf16_tflops.map_or(1.0, |m| m / self.bf16_tflops);
        let eight = match (self.measured_fp8_tflops, self.fp8_tflops) {
            (Some(m), Some(peak)) => m / peak,
            _ => half,
        };
        let four = match (self.measured_fp4_tflops, self.fp4_tflops) {
            (Some(m), Some(peak)) => m / peak,
            _ => eight,
        };
        match self.rate_class(class) {
            ComputeClass::Half => half,
            ComputeClass::Eight => eight,
            ComputeClass::Four => four,
        }
    }

    /// FLOP/s a GEMM of this class reaches at best: [`GpuSpec::flops`] ×
    /// [`GpuSpec::sustained_fraction`]. The calibration's efficiencies (`eta_gemm`, `eta_attn`)
    /// are fractions of this, so that they carry between GPUs that sustain different shares of
    /// their datasheet peaks.
    pub fn sustained_flops(&self, class: ComputeClass) -> f64 {
        self.flops(class) * self.sustained_fraction(class)
    }

    /// Memory bandwidth in bytes/s.
    pub fn mem_bw(&self) -> f64 {
        self.mem_bw_gb_s * 1e9
    }

    /// Memory capacity in bytes: the datasheet's "GB" are binary (80 GB = 80 × 2^30 bytes,
    /// what the engines' `gpu_memory_utilization` is a fraction of, less well under 1 % the
    /// driver keeps). Read as 10^9 bytes they were 7 % short, which on a tight deployment
    /// (Qwen3-32B in BF16 on one H100) halved the KV cache.
    pub fn mem_bytes(&self) -> f64 {
        self.mem_gb * (1u64 << 30) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_and_fallbacks() {
        assert_eq!(gpu_preset_names().len(), 10);
        // An H800 is an H100 SXM with 400 GB/s of NVLink instead of 900: same rates.
        let (h800, h100) = (GpuSpec::preset("h800").unwrap(), GpuSpec::preset("h100").unwrap());
        assert_eq!(
            h800.sustained_flops(ComputeClass::Half),
            h100.sustained_flops(ComputeClass::Half)
        );
        assert_eq!((h800.mem_bw(), h800.intra.bandwidth_gb_s), (h100.mem_bw(), 200.0));
        assert!(h800.intra_switched);
        let pcie = GpuSpec::preset("h100-pcie").unwrap();
        assert_eq!((pcie.flops(ComputeClass::Half), pcie.mem_bw()), (756e12, 2.0e12));
        assert!(!pcie.intra_switched);
        let a100 = GpuSpec::preset("A100").unwrap();
        assert_eq!(a100.flops(ComputeClass::Eight), 312e12);
        let h20 = GpuSpec::preset("h20").unwrap();
        // FP4 weights on a GPU without FP4 tensor cores run at the 16-bit rate (W4A16).
        assert_eq!(h20.flops(ComputeClass::Four), 148e12);
        assert_eq!(h20.flops(ComputeClass::Eight), 296e12);
        let b200 = GpuSpec::preset("b200").unwrap();
        assert_eq!(b200.flops(ComputeClass::Four), 9000e12);
        assert_eq!(h20.mem_bw(), 4.0e12);
        let e = GpuSpec::preset("v100").unwrap_err().to_string();
        assert!(e.starts_with("gpu: unknown preset `v100`, expected one of: a100"), "{e}");
    }

    /// A GEMM runs on the tensor cores of its class where the GPU has them, and at the 16-bit
    /// rate where it does not: FP4 on Hopper, Ada and Ampere (W4A16, as vLLM's MXFP4 MoE
    /// backends run it), FP8 on an A100 (W8A16).
    #[test]
    fn rate_class_without_tensor_cores_is_16_bit() {
        use ComputeClass::{Eight, Four, Half};
        for (name, four, eight) in [
            ("a100", Half, Half),
            ("h100", Half, Eight),
            ("h100-pcie", Half, Eight),
            ("h200", Half, Eight),
            ("h20", Half, Eight),
            ("l40s", Half, Eight),
            ("b200", Four, Eight),
            ("gb10", Four, Eight),
        ] {
            let g = GpuSpec::preset(name).unwrap();
            assert_eq!(g.rate_class(Four), four, "{name}");
            assert_eq!(g.rate_class(Eight), eight, "{name}");
            assert_eq!(g.rate_class(Half), Half, "{name}");
        }
        let h100 = GpuSpec::preset("h100").unwrap();
        assert_eq!(h100.flops(Four), 989e12);
        assert_eq!(GpuSpec::preset("a100").unwrap().flops(Four), 312e12);
        assert_eq!(GpuSpec::preset("gb10").unwrap().flops(Four), 500e12);
    }

    fn close(got: f64, want: f64) {
        assert!((got - want).abs() <= 1e-12 * want.abs(), "got {got}, want {want}");
    }

    /// The sustained fraction is the measured matmul TFLOP/s over the datasheet's, per class;
    /// a class without its own measurement takes the next wider measured class's, and a GPU
    /// without any keeps its datasheet peak.
    #[test]
    fn sustained_fraction_by_gpu_and_class() {
        let h20 = GpuSpec::preset("h20").unwrap();
        close(h20.sustained_fraction(ComputeClass::Half), 142.25 / 148.0);
        close(h20.sustained_fraction(ComputeClass::Eight), 142.25 / 148.0);
        close(h20.sustained_fraction(ComputeClass::Four), 142.25 / 148.0);
        close(h20.sustained_flops(ComputeClass::Half), 142.25e12);
        close(h20.sustained_flops(ComputeClass::Eight), 296e12 * 142.25 / 148.0);
        let h100 = GpuSpec::preset("h100").unwrap();
        close(h100.sustained_fraction(ComputeClass::Half), 794.5 / 989.0);
        close(h100.sustained_fraction(ComputeClass::Eight), 1402.6 / 1979.0);
        close(h100.sustained_fraction(ComputeClass::Four), 794.5 / 989.0);
        close(h100.sustained_flops(ComputeClass::Four), 794.5e12);
        close(h100.sustained_flops(ComputeClass::Half), 794.5e12);
        close(h100.sustained_flops(ComputeClass::Eight), 1402.6e12);
        let b200 = GpuSpec::preset("b200").unwrap();
        close(b200.sustained_flops(ComputeClass::Eight), 3432.5e12);
        close(b200.sustained_flops(ComputeClass::Four), 5589.8e12);
        // FP8 on an A100 runs at the BF16 rate, and so at the BF16 fraction.
        let a100 = GpuSpec::preset("a100").unwrap();
        close(a100.sustained_flops(ComputeClass::Eight), 271.2e12);
        let pcie = GpuSpec::preset("h100-pcie").unwrap();
        close(pcie.sustained_flops(ComputeClass::Eight), 1513e12 * 495.93 / 756.0);
        for name in ["h100-nvl", "gb10"] {
            let g = GpuSpec::preset(name).unwrap();
            for class in [ComputeClass::Half, ComputeClass::Eight, ComputeClass::Four] {
                assert_eq!(g.sustained_fraction(class), 1.0, "{name}");
                assert_eq!(g.sustained_flops(class), g.flops(class), "{name}");
            }
        }
    }
}
