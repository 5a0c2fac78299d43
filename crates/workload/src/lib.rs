//! Workload: what to send. Tokenizers and datasets, turned into a list of prompts with exact
//! token lengths.
//!
//! [`load`] is the entry point: a [`DatasetSpec`], a prompt count, a [`Tokenizer`] and a seed
//! give the same prompts every time. `docs/datasets.md` describes each dataset and how it
//! differs from `vllm bench serve`.
//!
//! Workloads that are not a flat list of prompts have their own entry points:
//! [`load_sessions`] (multi-turn sessions; [`Session::turn_messages`] builds turn `k` from the
//! server's replies) and [`load_trace`] (timestamped replay with `arrivals_ns`).
//! [`Workload::load`] is what a run asks for: whichever of the three its dataset is, with the
//! warm-ups' own prompts.

#![warn(missing_docs)]
#![cfg_attr(not(test), warn(unused_crate_dependencies))]

mod api;
mod bounded;
mod error;
pub mod hf;
pub mod hub;
mod image;
mod jsonl;
mod label;
mod multimodal;
mod prompt;
mod random;
mod range;
mod session;
mod sharegpt;
mod synth;
mod textgen;
pub mod tokenizer;
mod trace;
mod wordcount;
mod work;

use std::path::PathBuf;

pub use api::{Api, MaxTokensField};
pub use error::DatasetError;
pub use hf::HfDatasetSpec;
pub use image::{random_image_data_url, ImageFormat, ImageSize};
pub use label::random_spec_of_label;
pub use multimodal::ImageOptions;
pub use prompt::{ChatMessage, ContentPart, ImageUrl, MessageContent, Prompt, PromptBody};
pub use range::LengthRange;
pub use session::{
    load_sessions, HistoryError, Session, SessionSource, SessionSpec, SessionWorkload,
    SyntheticSessions, SystemPrompt, ThinkTime, Turn,
};
pub use tokenizer::{Tokenizer, TokenizerError};
pub use trace::{
    load_trace, TraceFormat, TraceOptions, TraceSpec, TraceStats, TraceWorkload, DEFAULT_BLOCK_SIZE,
};
pub use work::{RunTokenizer, Workload};

/// Which prompts to generate or read.
#[derive(Debug, Clone)]
pub enum DatasetSpec {
    /// Random text: a shared prefix of `prefix_len` tokens, then a number of tokens drawn
    /// from `range` around `input_len` (`vllm bench serve`'s or SGLang's convention); output
    /// length drawn the same way.
    Random {
        /// Prompt length after the prefix, tokens (the mean of vLLM's range, the top of
        /// SGLang's).
        input_len: u64,
        /// Requested output length, tokens, drawn the same way (at least 1 is asked for).
        output_len: u64,
        /// How lengths spread; [`LengthRange::EXACT`] fixes them.
        range: LengthRange,
        /// Tokens of one prefix shared by every prompt; 0 for none.
        prefix_len: u64,
    },
    /// A ShareGPT JSON file: each conversation's first turn is the prompt.
    ShareGpt {
        /// The JSON file.
        path: PathBuf,
        /// Requested output length for every prompt; `None`: the length of the
        /// conversation's second turn.
        output_len: Option<u64>,
    },
    /// One `{"prompt"}` or `{"messages"}` request per line.
    Jsonl {
        /// The JSON lines file.
        path: PathBuf,
    },
    /// `num_prefixes` shared prefixes, used round-robin, each followed by a unique suffix.
    Prefix {
        /// How many distinct prefixes.
        num_prefixes: u64,
        /// Tokens of each prefix.
        prefix_len: u64,
        /// Tokens of each prompt's unique suffix.
        suffix_len: u64,
        /// Requested output length of every prompt, tokens.
        output_len: u64,
    },
    /// `Random` text (no prefix) followed by random images, as one chat user message of
    /// content parts. `prompt_tokens` counts the text only.
    RandomMultimodal {
        /// Text length, tokens, as for `Random`.
        input_len: u64,
        /// Requested output length, tokens.
        output_len: u64,
        /// How lengths spread, as for `Random`.
        range: LengthRange,
        /// How many images, of what size and format.
        images: ImageOptions,
    },
    /// A Hugging Face dataset (`--dataset-name hf --hf-name ORG/NAME`): a local directory, the
    /// local HF cache, or a download (see [`hf`]). The hub settings come from the environment
    /// (`HF_HUB_CACHE`/`HF_HOME`, `HF_ENDPOINT`, `HF_TOKEN`, `HF_HUB_OFFLINE`).
    Hf(HfDatasetSpec),
    /// Multi-turn sessions: not a flat prompt list ([`load`] refuses it); the runner prepares
    /// them with [`load_sessions`] and sends each session's turns in order.
    Sessions(SessionSpec),
    /// A timestamped trace to replay: [`load`] gives its prompts; [`load_trace`] also gives
    /// when each is due.
    Trace(TraceSpec),
}

/// The prompts of `spec`: exactly `num_prompts` of them, deterministic for a given `seed`.
pub fn load(
    spec: &DatasetSpec,
    num_prompts: usize,
    tokenizer: &Tokenizer,
    seed: u64,
) -> Result<Vec<Prompt>, DatasetError> {
    match spec {
        &DatasetSpec::Random { input_len, output_len, range, prefix_len } => {
            let params = random::RandomParams { input_len, output_len, range, prefix_len };
            random::random(&params, num_prompts, tokenizer, seed)
        }
        DatasetSpec::ShareGpt { path, output_len } => {
            sharegpt::load(path, *output_len, num_prompts, tokenizer, seed)
        }
        DatasetSpec::Jsonl { path } => jsonl::load(path, num_prompts, tokenizer),
        &DatasetSpec::Prefix { num_prefixes, prefix_len, suffix_len, output_len } => {
            let params = random::PrefixParams { num_prefixes, prefix_len, suffix_len, output_len };
            random::prefix(&params, num_prompts, tokenizer, seed)
        }
        DatasetSpec::RandomMultimodal { input_len, output_len, range, images } => {
            let params = random::RandomParams {
                input_len: *input_len,
                output_len: *output_len,
                range: *range,
                prefix_len: 0,
            };
            multimodal::random_multimodal(&params, images, num_prompts, tokenizer, seed)
        }
        DatasetSpec::Hf(hf_spec) => {
            let config = hub::HubConfig::from_env();
            hf::load_hf(hf_spec, config.as_ref(), num_prompts, tokenizer, seed)
        }
        DatasetSpec::Sessions(_) => Err(DatasetError::Spec(
            "multi-turn sessions are not a list of single prompts; this command cannot run \
             them (bench, sweep and lab can)"
                .into(),
        )),
        DatasetSpec::Trace(t) => {
            Ok(load_trace(t, tokenizer, seed)?.prompts().take(num_prompts).collect())
        }
    }
}

/// The token lengths of one request of a workload, and the shared prefix it starts with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestLengths {
    /// Prompt tokens.
    pub prompt_tokens: u64,
    /// Requested output length, if the dataset sets one.
    pub output_tokens: Option<u64>,
    /// `(prefix id, tokens)` of the prefix this prompt shares with others, if any: prompts with
    /// the same id begin with the same `tokens` tokens.
    pub shared_prefix: Option<(u64, u64)>,
}

/// The lengths of the prompts [`load`] gives for the same arguments, in the same order. The
/// synthetic datasets (`random`, `prefix`) draw them without generating text; the others load
/// their prompts with the tokenizer `tokenizer` builds (called only then).
pub fn lengths(
    spec: &DatasetSpec,
    num_prompts: usize,
    tokenizer: impl FnOnce() -> Result<Tokenizer, DatasetError>,
    seed: u64,
) -> Result<Vec<RequestLengths>, DatasetError> {
    match *spec {
        DatasetSpec::Random { input_len, output_len, range, prefix_len } => {
            let params = random::RandomParams { input_len, output_len, range, prefix_len };
            let shared = (prefix_len > 0).then_some((0, prefix_len));
            Ok(random::draw_lengths(&params, num_prompts, seed)?
                .into_iter()
                .map(|(input, output)| RequestLengths {
                    prompt_tokens: input.saturating_add(prefix_len),
                    output_tokens: Some(output),
                    shared_prefix: shared,
                })
                .collect())
        }
        DatasetSpec::Prefix { num_prefixes, prefix_len, suffix_len, output_len } => {
            if num_prefixes == 0 {
                return Err(DatasetError::Spec("num_prefixes must be at least 1".into()));
            }
            if prefix_len.saturating_add(suffix_len) == 0 {
                return Err(DatasetError::Spec(
                    "prefix_len + suffix_len must be at least 1".into(),
                ));
            }
            Ok((0..num_prompts as u64)
                .map(|i| RequestLengths {
                    prompt_tokens: prefix_len.saturating_add(suffix_len),
                    output_tokens: Some(output_len),
                    shared_prefix: (prefix_len > 0).then_some((i % num_prefixes, prefix_len)),
                })
                .collect())
        }
        _ => Ok(load(spec, num_prompts, &tokenizer()?, seed)?
            .into_iter()
            .map(|p| RequestLengths {
                prompt_tokens: p.prompt_tokens,
                output_tokens: p.output_tokens,
                shared_prefix: None,
            })
            .collect()),
    }
}

/// Repeat `items` in order until there are `n` (callers guarantee `items` is non-empty
/// when `n > 0`).
fn cycle<T: Clone>(items: Vec<T>, n: usize) -> Vec<T> {
    if items.len() >= n || items.is_empty() {
        let mut items = items;
        items.truncate(n);
        return items;
    }
    items.iter().cycle().take(n).cloned().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_match_the_prompts_load_gives() {
        let tok = Tokenizer::builtin(tokenizer::DEFAULT_ENCODING).unwrap();
        let spec = DatasetSpec::Random {
            input_len: 40,
            output_len: 8,
            range: crate::LengthRange::Around(0.5),
            prefix_len: 6,
        };
        let prompts = load(&spec, 12, &tok, 3).unwrap();
        let lens = lengths(&spec, 12, || unreachable!("synthetic: no tokenizer"), 3).unwrap();
        for (p, l) in prompts.iter().zip(&lens) {
            assert_eq!((p.prompt_tokens, p.output_tokens), (l.prompt_tokens, l.output_tokens));
            assert_eq!(l.shared_prefix, Some((0, 6)));
        }
        let spec =
            DatasetSpec::Prefix { num_prefixes: 3, prefix_len: 16, suffix_len: 4, output_len: 5 };
        let prompts = load(&spec, 7, &tok, 1).unwrap();
        let lens = lengths(&spec, 7, || unreachable!(), 1).unwrap();
        assert_eq!(lens.len(), 7);
        for (i, (p, l)) in prompts.iter().zip(&lens).enumerate() {
            assert_eq!((p.prompt_tokens, p.output_tokens), (l.prompt_tokens, l.output_tokens));
            assert_eq!(l.shared_prefix, Some((i as u64 % 3, 16)));
        }
    }

    #[test]
    fn cycle_repeats_in_order() {
        assert_eq!(cycle(vec![1, 2, 3], 7), vec![1, 2, 3, 1, 2, 3, 1]);
        assert_eq!(cycle(vec![1, 2, 3], 2), vec![1, 2]);
        assert_eq!(cycle(Vec::<u8>::new(), 2), Vec::<u8>::new());
    }
}
