//! A run's workload, loaded whole: what each arrival of the measuring loop starts (a prompt, a
//! trace row or a session) and the prompts of its warm-ups. This is where a plan's dataset
//! becomes what to send; `servelab-client`'s `RequestSource` turns it into request bodies.

use crate::tokenizer::DEFAULT_ENCODING;
use crate::{
    load, load_sessions, load_trace, DatasetError, DatasetSpec, Prompt, Session, Tokenizer,
    TokenizerError, TraceWorkload,
};

/// Mixed into the run's seed for the warm-ups' own prompts.
const WARMUP_SEED: u64 = 0x5741_524d_5550;

/// What a plan's dataset gives the measuring loop.
#[derive(Debug)]
pub enum Workload {
    /// Single prompts, cycled in duration mode.
    Prompts {
        /// The measured prompts.
        prompts: Vec<Prompt>,
        /// Prompts drawn for the warm-ups alone; `None`: warm-ups resend the first prompts.
        warmups: Option<Vec<Prompt>>,
    },
    /// A trace, replayed whole (its own window and cap choose the rows) at its timestamps.
    Trace(TraceWorkload),
    /// Multi-turn sessions: each arrival starts one.
    Sessions(Vec<Session>),
}

impl Workload {
    /// The workload of `spec`: `num_prompts` prompts or sessions (a trace keeps its own
    /// count), and for `num_warmups` warm-ups their own prompts where the dataset draws from a
    /// seed. Deterministic for a given `seed`.
    pub fn load(
        spec: &DatasetSpec,
        num_prompts: usize,
        num_warmups: usize,
        tokenizer: &Tokenizer,
        seed: u64,
    ) -> Result<Workload, DatasetError> {
        Ok(match spec {
            DatasetSpec::Sessions(s) => {
                Workload::Sessions(load_sessions(s, num_prompts, tokenizer, seed)?.sessions)
            }
            DatasetSpec::Trace(t) => Workload::Trace(load_trace(t, tokenizer, seed)?),
            _ => Workload::Prompts {
                prompts: load(spec, num_prompts, tokenizer, seed)?,
                warmups: warmup_prompts(spec, num_warmups, tokenizer, seed)?,
            },
        })
    }

    /// Which measured prompts carry images (`with_images[i]`: prompt `i` does); empty when
    /// none does. Their tokens need the server's usage: only the server knows an image's cost.
    pub fn with_images(&self) -> Vec<bool> {
        let Workload::Prompts { prompts, .. } = self else { return Vec::new() };
        let with_images: Vec<bool> = prompts.iter().map(|p| p.image_count() > 0).collect();
        if with_images.contains(&true) {
            with_images
        } else {
            Vec::new()
        }
    }
}

/// The tokenizer a run counts with, and why its counts are estimates when they are.
#[derive(Debug)]
pub struct RunTokenizer {
    /// The tokenizer.
    pub tokenizer: Tokenizer,
    /// Set when counts come from a tokenizer that is not the model's: the run's warning.
    pub estimate_note: Option<String>,
}

impl RunTokenizer {
    /// `spec` when given (an error is then the spec's); for the built-in simulator
    /// (`simulated`) its own tokenizer, exact; the model's when its name finds one; else the
    /// default encoding, an estimate said in [`RunTokenizer::estimate_note`].
    pub fn choose(
        spec: Option<&str>,
        model: &str,
        simulated: bool,
    ) -> Result<RunTokenizer, TokenizerError> {
        if let Some(spec) = spec {
            return Ok(RunTokenizer {
                tokenizer: Tokenizer::from_spec(spec)?,
                estimate_note: None,
            });
        }
        if simulated {
            // The simulator's default tokenizer: counts are exact.
            let tokenizer = Tokenizer::builtin(DEFAULT_ENCODING)?;
            return Ok(RunTokenizer { tokenizer, estimate_note: None });
        }
        if model.contains('/') {
            if let Ok(tokenizer) = Tokenizer::from_spec(model) {
                return Ok(RunTokenizer { tokenizer, estimate_note: None });
            }
        }
        let note = format!(
            "no tokenizer for model '{model}': prompt lengths and per-chunk token counts are \
             estimates from {DEFAULT_ENCODING}; output totals come from the server's usage when \
             it sends it. Pass --tokenizer for exact counts."
        );
        let tokenizer = Tokenizer::builtin(DEFAULT_ENCODING)?;
        Ok(RunTokenizer { tokenizer, estimate_note: Some(note) })
    }
}

/// Warm-ups that resent the run's first prompts would leave them in the server's prefix
/// cache, and those measured requests' TTFT short: where the dataset draws its prompts from a
/// seed, warm-ups draw their own. (A JSONL file's lines have no other order.)
fn warmup_prompts(
    spec: &DatasetSpec,
    num_warmups: usize,
    tokenizer: &Tokenizer,
    seed: u64,
) -> Result<Option<Vec<Prompt>>, DatasetError> {
    match spec {
        DatasetSpec::Random { .. }
        | DatasetSpec::Prefix { .. }
        | DatasetSpec::RandomMultimodal { .. }
        | DatasetSpec::ShareGpt { .. }
            if num_warmups > 0 =>
        {
            Ok(Some(load(spec, num_warmups, tokenizer, seed ^ WARMUP_SEED)?))
        }
        _ => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_model_without_a_tokenizer_counts_with_an_estimate_and_says_so() {
        let exact = RunTokenizer::choose(None, "any", true).unwrap();
        assert!(exact.estimate_note.is_none());
        let guess = RunTokenizer::choose(None, "no-such-model", false).unwrap();
        let note = guess.estimate_note.unwrap();
        assert!(note.starts_with("no tokenizer for model 'no-such-model'"), "{note}");
        assert!(RunTokenizer::choose(Some("no/such/file.json"), "m", false).is_err());
    }

    #[test]
    fn seeded_datasets_draw_their_own_warmups() {
        let tok = Tokenizer::builtin(crate::tokenizer::DEFAULT_ENCODING).unwrap();
        let spec = DatasetSpec::Random {
            input_len: 30,
            output_len: 4,
            range: crate::LengthRange::Around(0.5),
            prefix_len: 0,
        };
        let Workload::Prompts { prompts, warmups } = Workload::load(&spec, 5, 2, &tok, 9).unwrap()
        else {
            panic!("random is single prompts")
        };
        assert_eq!(prompts.len(), 5);
        let warmups = warmups.expect("random warm-ups draw their own prompts");
        assert_eq!(warmups.len(), 2);
        assert_ne!(warmups[0].body, prompts[0].body);
        let none = Workload::load(&spec, 5, 0, &tok, 9).unwrap();
        assert!(matches!(none, Workload::Prompts { warmups: None, .. }));
        assert!(none.with_images().is_empty());
    }
}
