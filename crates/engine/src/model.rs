//! Model spec: the shapes that decide FLOPs and bytes, parsed from a Hugging Face `config.json`.

use serde_json::Value;

use crate::dtype::DType;
use crate::error::{EngineError, Result};

/// Mixture-of-experts part of a model.
#[derive(Debug, Clone, PartialEq)]
pub struct MoeSpec {
    /// Routed experts per MoE layer.
    pub experts: u32,
    /// Routed experts each token goes to (top-k).
    pub experts_per_token: u32,
    /// Intermediate size of one routed expert.
    pub expert_intermediate: u32,
    /// Total intermediate size of the always-on shared expert(s) (0 if none).
    pub shared_intermediate: u32,
    /// Leading layers that keep a dense MLP (`first_k_dense_replace`).
    pub dense_layers: u32,
}

/// Multi-head latent attention (DeepSeek-V2 and V3, and the models built on them): keys and
/// values are cached as one compressed latent per token and layer (`kv_lora_rank` wide, plus
/// a rope key shared by the heads), which the engines keep whole on every TP rank (the heads
/// are split, the latent is not). A prompt's attention decompresses the latent into per-head
/// keys (`qk_nope_head_dim` + `qk_rope_head_dim`) and values (`v_head_dim`) and runs as
/// ordinary attention; a decode folds the up-projections into the query and the output
/// ("weight absorption": vLLM's and SGLang's MLA decode kernels) and attends over the latent
/// itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MlaSpec {
    /// Rank of the query's low-rank projection (`None`: a full query projection).
    pub q_lora_rank: Option<u32>,
    /// Width of the compressed KV latent.
    pub kv_lora_rank: u32,
    /// Per-head query and key width without position encoding.
    pub qk_nope_head_dim: u32,
    /// Per-head (and shared key) rope width.
    pub qk_rope_head_dim: u32,
    /// Per-head value width.
    pub v_head_dim: u32,
}

impl MlaSpec {
    /// Elements one token caches per layer: the latent and the shared rope key.
    pub fn latent(&self) -> u64 {
        u64::from(self.kv_lora_rank) + u64::from(self.qk_rope_head_dim)
    }

    /// Attention weights of one layer with `heads` heads and a `hidden` residual: the query
    /// (through its low rank when it has one), the joint KV down-projection with the rope key,
    /// the KV up-projection into per-head keys and values, and the output projection.
    fn params_per_layer(&self, hidden: u64, heads: u64) -> u64 {
        let qk = u64::from(self.qk_nope_head_dim) + u64::from(self.qk_rope_head_dim);
        let q = match self.q_lora_rank {
            Some(r) => hidden * u64::from(r) + u64::from(r) * heads * qk,
            None => hidden * heads * qk,
        };
        let kv_up = u64::from(self.kv_lora_rank)
            * heads
            * (u64::from(self.qk_nope_head_dim) + u64::from(self.v_head_dim));
        q + hidden * self.latent() + kv_up + heads * u64::from(self.v_head_dim) * hidden
    }
}

/// How a model with sliding-window and full-attention layers uses the KV pool, as vLLM's
/// hybrid allocator does (since 0.10; `kv_cache_utils.py`, `single_type_kv_cache_manager.py`):
/// the layers fall into groups of equal size, one block of the pool holds `block_size`
/// tokens of one group, a full-attention group keeps every token's blocks and a sliding one
/// only the blocks its window reaches (those that fall behind are freed when the request is
/// next scheduled).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hybrid {
    /// The sliding window, tokens.
    pub window: u32,
    /// Groups of full-attention layers (the first one is a request's own blocks).
    pub full_groups: u32,
    /// Groups of sliding-window layers.
    pub sliding_groups: u32,
}

/// What the cost model needs to know about a model.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelSpec {
    /// Display name (preset name or `config.json`).
    pub name: String,
    /// Decoder layers.
    pub layers: u32,
    /// Hidden (residual) size.
    pub hidden: u32,
    /// Query heads.
    pub heads: u32,
    /// KV heads (GQA).
    pub kv_heads: u32,
    /// Size of one head.
    pub head_dim: u32,
    /// Intermediate size of a dense (gated) MLP.
    pub intermediate: u32,
    /// Vocabulary size.
    pub vocab: u32,
    /// Input embedding and LM head share one matrix.
    pub tie_embeddings: bool,
    /// MoE layout, if the model has one.
    pub moe: Option<MoeSpec>,
    /// Format of attention and dense MLP weights.
    pub weight_dtype: DType,
    /// Format of routed and shared expert weights.
    pub expert_dtype: DType,
    /// Window of sliding-window attention layers, if any.
    pub sliding_window: Option<u32>,
    /// How many layers use the sliding window.
    pub sliding_layers: u32,
    /// Longest sequence the model was trained for (`max_position_embeddings`), if the config
    /// says: the engines' default `max_model_len`.
    pub max_position_embeddings: Option<u32>,
    /// Multi-head latent attention, if the model has it (`kv_lora_rank` in its config).
    pub mla: Option<MlaSpec>,
}

/// Models shipped with the crate: name, `config.json` text.
const PRESETS: &[(&str, &str)] = &[
    ("qwen3-8b", include_str!("../presets/qwen3-8b.json")),
    ("qwen3-14b", include_str!("../presets/qwen3-14b.json")),
    ("qwen3-32b", include_str!("../presets/qwen3-32b.json")),
    ("qwen3-30b-a3b", include_str!("../presets/qwen3-30b-a3b.json")),
    ("qwen3-235b-a22b", include_str!("../presets/qwen3-235b-a22b.json")),
    ("llama-3.1-8b", include_str!("../presets/llama-3.1-8b.json")),
    ("llama-3.3-70b", include_str!("../presets/llama-3.3-70b.json")),
    ("llama-3.1-405b", include_str!("../presets/llama-3.1-405b.json")),
    ("gpt-oss-20b", include_str!("../presets/gpt-oss-20b.json")),
    ("gpt-oss-120b", include_str!("../presets/gpt-oss-120b.json")),
    ("glm-4.6", include_str!("../presets/glm-4.6.json")),
    ("glm-4.5-air", include_str!("../presets/glm-4.5-air.json")),
    ("deepseek-r1", include_str!("../presets/deepseek-r1.json")),
];

/// Names of the model presets.
pub fn model_preset_names() -> Vec<&'static str> {
    PRESETS.iter().map(|(n, _)| *n).collect()
}

/// Reads an integer under the first of `keys` present (and not null).
fn get_u32(v: &Value, keys: &[&str]) -> Result<Option<u32>> {
    for k in keys {
        match v.get(*k) {
            None | Some(Value::Null) => continue,
            Some(x) => {
                let n = x.as_u64().and_then(|n| u32::try_from(n).ok()).ok_or_else(|| {
                    EngineError::invalid(*k, format!("expected a non-negative integer, got {x}"))
                })?;
                return Ok(Some(n));
            }
        }
    }
    Ok(None)
}

fn require_u32(v: &Value, keys: &[&str]) -> Result<u32> {
    match get_u32(v, keys)? {
        Some(n) if n > 0 => Ok(n),
        Some(_) => Err(EngineError::invalid(keys[0], "must be > 0")),
        None => Err(EngineError::invalid(keys[0], "missing from config.json")),
    }
}

/// Weight formats (dense, experts) from `torch_dtype` and `quantization_config`.
fn weight_dtypes(v: &Value) -> (DType, DType) {
    let base = match v.get("torch_dtype").or_else(|| v.get("dtype")).and_then(Value::as_str) {
        Some("float16") => DType::Fp16,
        Some("float32") => DType::F32,
        _ => DType::Bf16,
    };
    let Some(q) = v.get("quantization_config") else { return (base, base) };
    let method = q.get("quant_method").and_then(Value::as_str).unwrap_or("").to_ascii_lowercase();
    let bits = q.get("bits").and_then(Value::as_u64);
    match method.as_str() {
        "fp8" => (DType::Fp8, DType::Fp8),
        // gpt-oss: only the experts are MXFP4; attention, router and LM head stay 16 bit.
        "mxfp4" => (base, DType::Mxfp4),
        "awq" | "gptq" | "awq_marlin" | "gptq_marlin" => {
            let d = if bits == Some(8) { DType::Int8 } else { DType::Int4 };
            (d, d)
        }
        "modelopt" | "modelopt_fp4" => {
            let algo = q.get("quant_algo").and_then(Value::as_str).unwrap_or("").to_uppercase();
            let d = if algo.contains("FP4") { DType::Nvfp4 } else { DType::Fp8 };
            (d, d)
        }
        "compressed-tensors" => {
            let d = compressed_tensors_dtype(q).unwrap_or(base);
            (d, d)
        }
        _ => (base, base),
    }
}

/// The weight format of the first `config_groups` entry of a compressed-tensors config.
fn compressed_tensors_dtype(q: &Value) -> Option<DType> {
    let groups = q.get("config_groups")?.as_object()?;
    let w = groups.values().next()?.get("weights")?;
    let bits = w.get("num_bits")?.as_u64()?;
    let kind = w.get("type").and_then(Value::as_str).unwrap_or("int");
    Some(match (bits, kind) {
        (8, "float") => DType::Fp8,
        (8, _) => DType::Int8,
        (4, "float") => DType::Nvfp4,
        (4, _) => DType::Int4,
        _ => return None,
    })
}

impl ModelSpec {
    /// A shipped preset by name (see [`model_preset_names`]).
    pub fn preset(name: &str) -> Result<Self> {
        let key = name.trim().to_ascii_lowercase();
        let (n, text) = PRESETS.iter().find(|(n, _)| *n == key).ok_or_else(|| {
            EngineError::invalid(
                "model",
                format!(
                    "unknown preset `{name}`, expected one of: {}",
                    model_preset_names().join(", ")
                ),
            )
        })?;
        Self::from_hf_config(n, text)
    }

    /// Parses the text of a Hugging Face `config.json` (a multimodal config's `text_config` is
    /// used when the top level has no layers).
    pub fn from_hf_config(name: &str, json: &str) -> Result<Self> {
        let root: Value = serde_json::from_str(json).map_err(|e| EngineError::Parse {
            what: "config.json".into(),
            message: e.to_string(),
        })?;
        let v = match root.get("text_config") {
            Some(t) if root.get("num_hidden_layers").is_none() => t,
            _ => &root,
        };
        let layers = require_u32(v, &["num_hidden_layers", "n_layer", "num_layers"])?;
        let hidden = require_u32(v, &["hidden_size", "n_embd", "d_model"])?;
        let heads = require_u32(v, &["num_attention_heads", "n_head"])?;
        let kv_heads = get_u32(v, &["num_key_value_heads"])?.unwrap_or(heads);
        let mla = Self::parse_mla(v)?;
        // With MLA a head's query and key are `qk_nope + qk_rope` wide (DeepSeek's `head_dim`
        // key, where present, is the rope part alone).
        let head_dim = match mla {
            Some(m) => m.qk_nope_head_dim + m.qk_rope_head_dim,
            None => get_u32(v, &["head_dim"])?.unwrap_or(hidden / heads),
        };
        let vocab = require_u32(v, &["vocab_size"])?;
        let experts = get_u32(v, &["num_experts", "num_local_experts", "n_routed_experts"])?;
        let intermediate = match get_u32(v, &["intermediate_size", "ffn_hidden_size"])? {
            Some(n) => n,
            None if experts.is_some() => 0,
            None => return Err(EngineError::invalid("intermediate_size", "missing")),
        };
        let moe = match experts {
            Some(e) if e > 1 => Some(Self::parse_moe(v, e, intermediate)?),
            _ => None,
        };
        let tie_embeddings = v.get("tie_word_embeddings").and_then(Value::as_bool).unwrap_or(false);
        let (weight_dtype, expert_dtype) = weight_dtypes(&root);
        let (sliding_window, sliding_layers) = Self::parse_sliding(v)?;
        let max_position_embeddings =
            get_u32(v, &["max_position_embeddings", "n_positions", "max_sequence_length"])?;
        if kv_heads == 0 || heads % kv_heads != 0 {
            return Err(EngineError::invalid(
                "num_key_value_heads",
                format!("{kv_heads} must divide num_attention_heads {heads}"),
            ));
        }
        Ok(Self {
            name: name.to_string(),
            layers,
            hidden,
            heads,
            kv_heads,
            head_dim,
            intermediate,
            vocab,
            tie_embeddings,
            moe,
            weight_dtype,
            expert_dtype,
            sliding_window,
            sliding_layers,
            max_position_embeddings,
            mla,
        })
    }

    fn parse_mla(v: &Value) -> Result<Option<MlaSpec>> {
        let Some(kv_lora_rank) = get_u32(v, &["kv_lora_rank"])? else { return Ok(None) };
        let spec = MlaSpec {
            q_lora_rank: get_u32(v, &["q_lora_rank"])?,
            kv_lora_rank,
            qk_nope_head_dim: require_u32(v, &["qk_nope_head_dim"])?,
            qk_rope_head_dim: require_u32(v, &["qk_rope_head_dim"])?,
            v_head_dim: require_u32(v, &["v_head_dim"])?,
        };
        Ok(Some(spec))
    }

    fn parse_moe(v: &Value, experts: u32, intermediate: u32) -> Result<MoeSpec> {
        let k = require_u32(v, &["num_experts_per_tok", "experts_per_token", "moe_topk"])?;
        if k > experts {
            return Err(EngineError::invalid(
                "num_experts_per_tok",
                format!("{k} exceeds the number of experts {experts}"),
            ));
        }
        let expert_intermediate = get_u32(v, &["moe_intermediate_size"])?.unwrap_or(intermediate);
        let shared = match get_u32(v, &["shared_expert_intermediate_size"])? {
            Some(s) => s,
            None => get_u32(v, &["n_shared_experts"])?.unwrap_or(0) * expert_intermediate,
        };
        let dense_layers = get_u32(v, &["first_k_dense_replace"])?.unwrap_or(0);
        if expert_intermediate == 0 {
            return Err(EngineError::invalid("moe_intermediate_size", "missing or 0"));
        }
        Ok(MoeSpec {
            experts,
            experts_per_token: k,
            expert_intermediate,
            shared_intermediate: shared,
            dense_layers,
        })
    }

    fn parse_sliding(v: &Value) -> Result<(Option<u32>, u32)> {
        let window = get_u32(v, &["sliding_window"])?;
        let sliding = v
            .get("layer_types")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter(|t| t.as_str() == Some("sliding_attention")).count())
            .unwrap_or(0);
        match window {
            Some(w) if sliding > 0 && w > 0 => Ok((Some(w), sliding as u32)),
            _ => Ok((None, 0)),
        }
    }

    /// Query width `heads × head_dim` (not always `hidden`, e.g. GLM-4.6, Qwen3-32B).
    pub fn q_dim(&self) -> u64 {
        u64::from(self.heads) * u64::from(self.head_dim)
    }

    /// KV width `kv_heads × head_dim`.
    pub fn kv_dim(&self) -> u64 {
        u64::from(self.kv_heads) * u64::from(self.head_dim)
    }

    /// Q, K, V and O projection weights of one layer ([`MlaSpec`]'s own with MLA).
    pub fn attn_params_per_layer(&self) -> u64 {
        let h = u64::from(self.hidden);
        match &self.mla {
            Some(m) => m.params_per_layer(h, u64::from(self.heads)),
            None => 2 * h * self.q_dim() + 2 * h * self.kv_dim(),
        }
    }

    /// Attention FLOPs of one (query, key) pair over all heads and one layer: QK and AV.
    /// With MLA, a prompt's (`decode` false) attends per head over decompressed keys and
    /// values, `2 × heads × (qk + v)`; a decode attends over the latent with the
    /// up-projections folded in, `2 × heads × (latent + kv_lora_rank)`. Otherwise `4 × q_dim`.
    pub fn attn_pair_flops(&self, decode: bool) -> f64 {
        let heads = f64::from(self.heads);
        match &self.mla {
            Some(m) if decode => 2.0 * heads * (m.latent() + u64::from(m.kv_lora_rank)) as f64,
            Some(m) => 2.0 * heads * f64::from(self.head_dim + m.v_head_dim),
            None => 4.0 * self.q_dim() as f64,
        }
    }

    /// Gated (SwiGLU) MLP weights of one dense layer: gate, up and down.
    pub fn dense_mlp_params(&self) -> u64 {
        3 * u64::from(self.hidden) * u64::from(self.intermediate)
    }

    /// Layers with a dense MLP (all of them for a dense model).
    pub fn dense_layers(&self) -> u32 {
        self.moe.as_ref().map_or(self.layers, |m| m.dense_layers.min(self.layers))
    }

    /// The hybrid allocator's grouping of the layers ([`Hybrid`]), `None` unless the model has
    /// both kinds: groups as large as the smaller kind's layer count.
    pub fn hybrid(&self) -> Option<Hybrid> {
        let group = self.hybrid_group()?;
        Some(Hybrid {
            window: self.sliding_window?,
            full_groups: (self.layers - self.sliding_layers).div_ceil(group),
            sliding_groups: self.sliding_layers.div_ceil(group),
        })
    }

    /// Layers one KV block holds: one [`Hybrid`] group, or every layer.
    pub fn block_group_layers(&self) -> u32 {
        self.hybrid_group().unwrap_or(self.layers)
    }

    /// Layers of a [`Hybrid`] group, `None` without both kinds of layer.
    fn hybrid_group(&self) -> Option<u32> {
        self.sliding_window?;
        let full = self.layers.saturating_sub(self.sliding_layers);
        Some(full.min(self.sliding_layers)).filter(|&g| g > 0)
    }

    /// Layers with a MoE block.
    pub fn moe_layers(&self) -> u32 {
        self.layers - self.dense_layers()
    }

    /// Weights of one routed expert.
    pub fn expert_params(&self) -> u64 {
        let m = self.moe.as_ref().map_or(0, |m| m.expert_intermediate);
        3 * u64::from(self.hidden) * u64::from(m)
    }

    /// Weights of the shared expert(s) of one MoE layer.
    pub fn shared_expert_params(&self) -> u64 {
        let s = self.moe.as_ref().map_or(0, |m| m.shared_intermediate);
        3 * u64::from(self.hidden) * u64::from(s)
    }

    /// Router weights of one MoE layer.
    pub fn router_params(&self) -> u64 {
        u64::from(self.hidden) * u64::from(self.moe.as_ref().map_or(0, |m| m.experts))
    }

    /// One embedding matrix (`vocab × hidden`).
    pub fn embedding_params(&self) -> u64 {
        u64::from(self.vocab) * u64::from(self.hidden)
    }

    /// Norm weights: two per layer plus the final one (QK-norms are negligible and ignored).
    fn norm_params(&self) -> u64 {
        (2 * u64::from(self.layers) + 1) * u64::from(self.hidden)
    }

    fn moe_block_params(&self, experts: u64) -> u64 {
        experts * self.expert_params() + self.shared_expert_params() + self.router_params()
    }

    /// All parameters (biases ignored: they are < 0.01 % of any preset).
    pub fn total_params(&self) -> u64 {
        let experts = u64::from(self.moe.as_ref().map_or(0, |m| m.experts));
        self.params_with(experts) + self.embedding_params()
    }

    /// Parameters a token multiplies with: everything but the input embedding table (a lookup)
    /// and with only `experts_per_token` routed experts. Qwen's "activated" figures include
    /// the embedding; OpenAI's gpt-oss figures do not: add [`Self::embedding_params`] to compare
    /// with the former.
    pub fn active_params(&self) -> u64 {
        let k = u64::from(self.moe.as_ref().map_or(0, |m| m.experts_per_token));
        self.params_with(k)
    }

    fn params_with(&self, experts: u64) -> u64 {
        let layers = u64::from(self.layers);
        let dense = u64::from(self.dense_layers()) * self.dense_mlp_params();
        let moe = u64::from(self.moe_layers()) * self.moe_block_params(experts);
        let head = if self.tie_embeddings { 0 } else { self.embedding_params() };
        layers * self.attn_params_per_layer() + dense + moe + head + self.norm_params()
    }

    /// KV-cache bytes of one token over all layers and KV heads: `2 × layers × kv_heads ×
    /// head_dim × bytes` (sliding-window layers are counted in full: a conservative allocator);
    /// with MLA, `layers × latent × bytes`.
    pub fn kv_bytes_per_token(&self, kv: DType) -> f64 {
        let per_layer = match &self.mla {
            Some(m) => m.latent() as f64,
            None => 2.0 * self.kv_dim() as f64,
        };
        f64::from(self.layers) * per_layer * kv.bytes()
    }

    /// Bytes of all weights: 16-bit embedding and LM head (quantizers keep them so), attention
    /// and dense MLP in `weight_dtype`, experts in `expert_dtype`.
    pub fn weight_bytes(&self) -> f64 {
        let experts = u64::from(self.moe.as_ref().map_or(0, |m| m.experts));
        let l = f64::from(self.layers);
        let lin = l * self.attn_params_per_layer() as f64
            + f64::from(self.dense_layers()) * self.dense_mlp_params() as f64;
        let exp = f64::from(self.moe_layers())
            * ((experts * self.expert_params() + self.shared_expert_params()) as f64);
        let router = f64::from(self.moe_layers()) * self.router_params() as f64;
        let emb = self.embedding_params() as f64 * if self.tie_embeddings { 1.0 } else { 2.0 };
        lin * self.weight_dtype.bytes()
            + exp * self.expert_dtype.bytes()
            + (router + emb + self.norm_params() as f64) * 2.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Relative error of `got` against `want`.
    fn rel(got: u64, want: f64) -> f64 {
        (got as f64 - want).abs() / want
    }

    // Published sizes are rounded to 0.1 B (or 1 B above 100 B): a 1.5 % tolerance covers the
    // rounding and the ignored biases, and still catches a wrong layer or head count (>= 3 %).
    const TOL: f64 = 0.015;

    #[test]
    fn dense_presets_match_published_sizes() {
        for (name, billions) in [
            ("qwen3-8b", 8.2),
            ("qwen3-14b", 14.8),
            ("qwen3-32b", 32.8),
            ("llama-3.1-8b", 8.03),
            ("llama-3.3-70b", 70.6),
            ("llama-3.1-405b", 405.0),
        ] {
            let m = ModelSpec::preset(name).unwrap();
            let got = m.total_params();
            assert!(rel(got, billions * 1e9) < TOL, "{name}: {got}");
        }
    }

    #[test]
    fn qwen3_32b_exact_count() {
        // embed 151936×5120 = 777,912,320, twice (untied) = 1,555,824,640.
        // per layer: q,o 2×5120×8192 = 83,886,080; k,v 2×5120×1024 = 10,485,760;
        // MLP 3×5120×25600 = 393,216,000; norms 2×5120 → 487,598,080 × 64 = 31,206,277,120.
        // final norm 5120 → 32,762,106,880.
        let m = ModelSpec::preset("qwen3-32b").unwrap();
        assert_eq!(m.total_params(), 32_762_106_880);
        assert_eq!(m.kv_bytes_per_token(DType::Bf16), 262_144.0);
    }

    #[test]
    fn moe_presets_match_published_sizes() {
        // (name, total B, active B, published active includes the input embedding)
        let cases = [
            ("qwen3-30b-a3b", 30.5, 3.3, true),
            ("qwen3-235b-a22b", 235.0, 22.0, true),
            ("gpt-oss-20b", 20.9, 3.6, false),
            ("gpt-oss-120b", 116.8, 5.1, false),
            // GLM-4.6's 355 B includes its MTP layer (~3.9 B), which is not modelled here.
            ("glm-4.6", 355.0 - 3.9, 32.0, false),
            // GLM-4.5-Air: 106 B total and 12 B active as published (without its MTP layer);
            // its 12 B count no output head (151,552 × 4,096 = 0.62 B), which a step runs.
            ("glm-4.5-air", 106.0, 12.0 + 0.62, false),
            // DeepSeek-R1 (V3's architecture): 671 B total and 37 B activated as published
            // (the 685 B of its checkpoint hold the 14 B multi-token-prediction module).
            ("deepseek-r1", 671.0, 37.0, true),
        ];
        for (name, total, active, with_emb) in cases {
            let m = ModelSpec::preset(name).unwrap();
            assert!(rel(m.total_params(), total * 1e9) < TOL, "{name} total {}", m.total_params());
            let a = m.active_params() + if with_emb { m.embedding_params() } else { 0 };
            // Active figures are rounded to 0.1 B on a few B: 4 % covers that rounding.
            assert!(rel(a, active * 1e9) < 0.04, "{name} active {a}");
        }
    }

    #[test]
    fn gpt_oss_parses_quantization_and_window() {
        let m = ModelSpec::preset("gpt-oss-20b").unwrap();
        assert_eq!(m.expert_dtype, DType::Mxfp4);
        assert_eq!(m.weight_dtype, DType::Bf16);
        assert_eq!((m.sliding_window, m.sliding_layers), (Some(128), 12));
        let moe = m.moe.unwrap();
        assert_eq!((moe.experts, moe.experts_per_token, moe.expert_intermediate), (32, 4, 2880));
    }

    /// DeepSeek-R1's multi-head latent attention, from its config.json: a query of rank
    /// 1,536, a KV latent of 512 plus a 64-wide rope key cached per token and layer (61 × 576
    /// × 2 B = 70,272 B a token in BF16, the "70 KB" DeepSeek-V3's KV cache is cited at), and
    /// per-head keys of 128 + 64 and values of 128.
    #[test]
    fn deepseek_r1_has_multi_head_latent_attention() {
        let m = ModelSpec::preset("deepseek-r1").unwrap();
        let mla = m.mla.unwrap();
        assert_eq!((mla.q_lora_rank, mla.kv_lora_rank, mla.latent()), (Some(1536), 512, 576));
        assert_eq!((m.head_dim, m.q_dim()), (192, 128 * 192));
        assert_eq!(m.kv_bytes_per_token(DType::Bf16), 70_272.0);
        assert_eq!(m.kv_bytes_per_token(DType::Fp8), 35_136.0);
        // q_a 7168×1536 + q_b 1536×128×192 + kv_a 7168×576 + kv_b 512×128×256 + o 128×128×7168.
        let attn = 7168 * 1536 + 1536 * 128 * 192 + 7168 * 576 + 512 * 128 * 256 + 128 * 128 * 7168;
        assert_eq!(m.attn_params_per_layer(), attn);
        // A prompt's attention per head over keys of 192 and values of 128; a decode's over the
        // latent (576 for scores, 512 for values).
        assert_eq!(m.attn_pair_flops(false), 2.0 * 128.0 * 320.0);
        assert_eq!(m.attn_pair_flops(true), 2.0 * 128.0 * 1088.0);
        assert_eq!((m.weight_dtype, m.expert_dtype), (DType::Fp8, DType::Fp8));
        assert_eq!((m.dense_layers(), m.moe_layers()), (3, 58));
        // Without MLA both kinds of pair cost 4 × q_dim.
        let q = ModelSpec::preset("qwen3-8b").unwrap();
        assert_eq!(q.attn_pair_flops(true), q.attn_pair_flops(false));
        assert_eq!(q.attn_pair_flops(false), 4.0 * q.q_dim() as f64);
    }

    #[test]
    fn glm_has_shared_expert_and_dense_layers() {
        let m = ModelSpec::preset("glm-4.6").unwrap();
        assert_eq!(m.dense_layers(), 3);
        assert_eq!(m.moe_layers(), 89);
        assert_eq!(m.shared_expert_params(), 3 * 5120 * 1536);
        assert_eq!(m.q_dim(), 12288);
    }

    #[test]
    fn quantization_configs_are_recognised() {
        let base = r#"{"num_hidden_layers":2,"hidden_size":64,"num_attention_heads":4,
            "intermediate_size":128,"vocab_size":100,"quantization_config":QC}"#;
        let cases = [
            (r#"{"quant_method":"fp8"}"#, DType::Fp8),
            (r#"{"quant_method":"awq","bits":4}"#, DType::Int4),
            (r#"{"quant_method":"modelopt","quant_algo":"NVFP4"}"#, DType::Nvfp4),
            (
                r#"{"quant_method":"compressed-tensors","config_groups":{"g":{"weights":
                {"num_bits":8,"type":"float"}}}}"#,
                DType::Fp8,
            ),
        ];
        for (qc, want) in cases {
            let m = ModelSpec::from_hf_config("t", &base.replace("QC", qc)).unwrap();
            assert_eq!(m.weight_dtype, want, "{qc}");
            assert_eq!(m.head_dim, 16);
            assert_eq!(m.kv_heads, 4);
        }
    }

    #[test]
    fn bad_configs_name_the_key() {
        let e = ModelSpec::from_hf_config("t", r#"{"hidden_size":64}"#).unwrap_err();
        assert_eq!(e.to_string(), "num_hidden_layers: missing from config.json");
        let e = ModelSpec::from_hf_config("t", r#"{"num_hidden_layers":-1}"#).unwrap_err();
        assert!(e.to_string().starts_with("num_hidden_layers: expected a non-negative"), "{e}");
        let e = ModelSpec::from_hf_config("t", "{").unwrap_err();
        assert!(matches!(e, EngineError::Parse { .. }));
        let e = ModelSpec::preset("qwen9").unwrap_err().to_string();
        assert!(e.contains("expected one of: qwen3-8b"), "{e}");
    }
}
