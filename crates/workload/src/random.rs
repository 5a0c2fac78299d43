//! The `random` and `prefix` datasets: synthetic prompts of exact token lengths.

use rand::Rng;
use rayon::prelude::*;

use crate::error::DatasetError;
use crate::prompt::{Prompt, PromptBody};
use crate::range::LengthRange;
use crate::synth::{item_rng, Prefix, Synth};
use crate::tokenizer::Tokenizer;

/// Stream index reserved for shared prefixes (items use 0..num_prompts).
const PREFIX_STREAM: u64 = 1 << 62;

/// Parameters of the `random` dataset (see [`crate::DatasetSpec::Random`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct RandomParams {
    pub input_len: u64,
    pub output_len: u64,
    pub range: LengthRange,
    pub prefix_len: u64,
}

/// Per-prompt (input, output) lengths, drawn in order from one seeded stream.
pub(crate) fn draw_lengths(
    p: &RandomParams,
    num: usize,
    seed: u64,
) -> Result<Vec<(u64, u64)>, DatasetError> {
    p.range.check()?;
    let (in_lo, in_hi) = p.range.bounds(p.input_len);
    let (out_lo, out_hi) = p.range.bounds(p.output_len);
    // As vLLM: never ask for 0 output tokens.
    let (out_lo, out_hi) = (out_lo.max(1), out_hi.max(1));
    if in_lo.saturating_add(p.prefix_len) < 1 {
        return Err(DatasetError::Spec(format!(
            "the shortest prompt (prefix_len {} + floor(input_len {} × (1 − range_ratio {}))) \
             must have at least 1 token; raise input_len",
            p.prefix_len,
            p.input_len,
            p.range.ratio()
        )));
    }
    let mut rng = item_rng(seed, PREFIX_STREAM + 1);
    let inputs: Vec<u64> = (0..num).map(|_| rng.random_range(in_lo..=in_hi)).collect();
    let outputs: Vec<u64> = (0..num).map(|_| rng.random_range(out_lo..=out_hi)).collect();
    Ok(inputs.into_iter().zip(outputs).collect())
}

/// `num` prompts: a shared prefix of `prefix_len` tokens followed by a drawn number of
/// random tokens, so a prompt has `prefix_len + drawn` tokens, as in `vllm bench serve`.
pub(crate) fn random(
    p: &RandomParams,
    num: usize,
    tok: &Tokenizer,
    seed: u64,
) -> Result<Vec<Prompt>, DatasetError> {
    let lengths = draw_lengths(p, num, seed)?;
    if num == 0 {
        return Ok(Vec::new());
    }
    let synth = Synth::new(tok)?;
    let prefix = match p.prefix_len {
        0 => Prefix::default(),
        n => synth.prefix(&mut item_rng(seed, PREFIX_STREAM), to_usize(n)?)?,
    };
    lengths
        .par_iter()
        .enumerate()
        .map(|(i, &(input, output))| {
            let total = input.saturating_add(p.prefix_len);
            let text = synth.text(&mut item_rng(seed, i as u64), &prefix, to_usize(total)?)?;
            Ok(Prompt {
                body: PromptBody::Text(text),
                prompt_tokens: total,
                output_tokens: Some(output),
            })
        })
        .collect()
}

/// Parameters of the `prefix` dataset (see [`crate::DatasetSpec::Prefix`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct PrefixParams {
    pub num_prefixes: u64,
    pub prefix_len: u64,
    pub suffix_len: u64,
    pub output_len: u64,
}

/// Prompt `i` = prefix `i mod num_prefixes` + its own random suffix, exact total length.
pub(crate) fn prefix(
    p: &PrefixParams,
    num: usize,
    tok: &Tokenizer,
    seed: u64,
) -> Result<Vec<Prompt>, DatasetError> {
    if p.num_prefixes == 0 {
        return Err(DatasetError::Spec("num_prefixes must be at least 1".into()));
    }
    if p.prefix_len.saturating_add(p.suffix_len) == 0 {
        return Err(DatasetError::Spec("prefix_len + suffix_len must be at least 1".into()));
    }
    if num == 0 {
        return Ok(Vec::new());
    }
    let synth = Synth::new(tok)?;
    // Prefixes nobody uses are not generated.
    let used = p.num_prefixes.min(num as u64);
    let prefixes: Vec<Prefix> = (0..used)
        .into_par_iter()
        .map(|k| synth.prefix(&mut item_rng(seed, PREFIX_STREAM + 2 + k), to_usize(p.prefix_len)?))
        .collect::<Result<_, DatasetError>>()?;
    let total = p.prefix_len.saturating_add(p.suffix_len);
    to_usize(total)?;
    (0..num)
        .into_par_iter()
        .map(|i| {
            let shared = &prefixes[i % prefixes.len()];
            let text = synth.text(&mut item_rng(seed, i as u64), shared, to_usize(total)?)?;
            Ok(Prompt {
                body: PromptBody::Text(text),
                prompt_tokens: total,
                output_tokens: Some(p.output_len),
            })
        })
        .collect()
}

/// Longest synthetic prompt generated (far above any model's context; guards allocation).
const MAX_SYNTH_TOKENS: u64 = 10_000_000;

fn to_usize(n: u64) -> Result<usize, DatasetError> {
    if n > MAX_SYNTH_TOKENS {
        return Err(DatasetError::Spec(format!(
            "a prompt of {n} tokens is too long; at most {MAX_SYNTH_TOKENS} are generated"
        )));
    }
    usize::try_from(n).map_err(|_| DatasetError::Spec(format!("length {n} is too large")))
}
