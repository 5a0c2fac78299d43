//! Numeric formats of weights and KV cache, and the tensor-core rate a GEMM runs at.

use serde::{Deserialize, Serialize};

use crate::error::{EngineError, Result};

/// Storage format of weights or KV cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DType {
    /// 32-bit float.
    F32,
    /// bfloat16.
    Bf16,
    /// IEEE half.
    Fp16,
    /// 8-bit float (E4M3), per-tensor or per-channel scales.
    Fp8,
    /// 8-bit integer (W8A8 SmoothQuant-style).
    Int8,
    /// 4-bit integer weights with fp16 group scales (AWQ/GPTQ, group 128), activations in 16 bit.
    Int4,
    /// NVIDIA FP4 (E2M1) with one FP8 scale per 16 elements.
    Nvfp4,
    /// OCP MX FP4 (E2M1) with one 8-bit scale per 32 elements (gpt-oss experts).
    Mxfp4,
}

/// Which peak FLOP/s figure of a GPU a GEMM on this format uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ComputeClass {
    /// 16-bit tensor cores (also W4A16 kernels, which dequantize to 16 bit).
    Half,
    /// FP8 / INT8 tensor cores.
    Eight,
    /// FP4 tensor cores.
    Four,
}

impl DType {
    /// Bytes per element including quantization scales, e.g. AWQ group 128 with an fp16 scale:
    /// 0.5 + 2/128 = 0.515625.
    pub fn bytes(self) -> f64 {
        match self {
            DType::F32 => 4.0,
            DType::Bf16 | DType::Fp16 => 2.0,
            DType::Fp8 | DType::Int8 => 1.0,
            DType::Int4 => 0.5 + 2.0 / 128.0,
            DType::Nvfp4 => 0.5 + 1.0 / 16.0,
            DType::Mxfp4 => 0.5 + 1.0 / 32.0,
        }
    }

    /// The tensor-core class a GEMM with these weights would like to run at. A GPU without
    /// that class falls back (see [`crate::GpuSpec::flops`]).
    pub fn compute_class(self) -> ComputeClass {
        match self {
            DType::F32 | DType::Bf16 | DType::Fp16 | DType::Int4 => ComputeClass::Half,
            DType::Fp8 | DType::Int8 => ComputeClass::Eight,
            DType::Nvfp4 | DType::Mxfp4 => ComputeClass::Four,
        }
    }

    /// Parses a user-facing name (`bf16`, `fp8`, `awq`, `nvfp4`...), for error messages naming
    /// `key`.
    pub fn parse(key: &str, s: &str) -> Result<Self> {
        let d = match s.trim().to_ascii_lowercase().as_str() {
            "f32" | "fp32" | "float32" => DType::F32,
            "bf16" | "bfloat16" | "auto" => DType::Bf16,
            "fp16" | "f16" | "float16" | "half" => DType::Fp16,
            "fp8" | "fp8_e4m3" | "fp8_e5m2" | "float8" => DType::Fp8,
            "int8" | "w8a8" => DType::Int8,
            "int4" | "awq" | "gptq" | "w4a16" => DType::Int4,
            "nvfp4" | "fp4" => DType::Nvfp4,
            "mxfp4" => DType::Mxfp4,
            other => {
                return Err(EngineError::invalid(
                    key,
                    format!(
                        "unknown dtype `{other}`, expected one of: bf16, fp16, fp32, fp8, int8, \
                         int4 (awq, gptq), nvfp4, mxfp4"
                    ),
                ))
            }
        };
        Ok(d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_include_scales() {
        assert_eq!(DType::Bf16.bytes(), 2.0);
        assert_eq!(DType::Fp8.bytes(), 1.0);
        assert_eq!(DType::Int4.bytes(), 0.515625);
        assert_eq!(DType::Nvfp4.bytes(), 0.5625);
        assert_eq!(DType::Mxfp4.bytes(), 0.53125);
    }

    #[test]
    fn parse_names_the_key() {
        assert_eq!(DType::parse("kv_dtype", "AWQ").unwrap(), DType::Int4);
        let e = DType::parse("kv_dtype", "int3").unwrap_err().to_string();
        assert!(e.starts_with("kv_dtype: unknown dtype `int3`"), "{e}");
    }
}
