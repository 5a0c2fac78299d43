//! A run's workload, loaded whole: what each arrival of the measuring loop starts (a prompt, a
//! trace row or a session) and the prompts of its warm-ups. This is where a plan's dataset
//! becomes what to send; `servelab-client`'s `RequestSource` turns it into request bodies.

use crate::{
    load, load_sessions, load_trace, DatasetError, DatasetSpec, Prompt, Session, Tokenizer,
    TraceWorkload,
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
    fn seeded_datasets_draw_their_own_warmups() {
        let tok = Tokenizer::builtin(crate::tokenizer::DEFAULT_ENCODING).unwrap();
        let spec =
            DatasetSpec::Random { input_len: 30, output_len: 4, range_ratio: 0.5, prefix_len: 0 };
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
