//! Synthetic sessions: random user messages of exact token lengths, one shared system prompt.

use rand::Rng;
use rayon::prelude::*;

use super::{Session, SessionWorkload, SystemPrompt, ThinkTime, Turn};
use crate::error::DatasetError;
use crate::range::LengthRange;
use crate::synth::item_rng;
use crate::textgen::TextGen;
use crate::tokenizer::Tokenizer;

/// Stream index of the shared system prompt (sessions use `0..num_sessions`).
const SYSTEM_STREAM: u64 = 1 << 62;
/// Longest synthetic message generated (guards allocation).
const MAX_TOKENS: u64 = 10_000_000;

/// Parameters of synthetic sessions.
#[derive(Debug, Clone, PartialEq)]
pub struct SyntheticSessions {
    /// Turns per session, drawn uniformly in `[turns_min, turns_max]` (equal: fixed).
    pub turns_min: u32,
    /// The most turns a session has.
    pub turns_max: u32,
    /// Each new user message's length, drawn in `[input_len·(1−r), input_len·(1+r)]` (as the
    /// `random` dataset draws, floor and ceil).
    pub input_len: u64,
    /// Each turn's requested output length, drawn the same way (at least 1).
    pub output_len: u64,
    /// `r`: how far lengths spread around their means, in `[0, 1)`; 0 fixes them.
    pub range_ratio: f64,
    /// Length of the system prompt, identical in every session (0: none).
    pub system_prompt_len: u64,
}

impl SyntheticSessions {
    fn check(&self) -> Result<(), DatasetError> {
        let spec = |m: String| Err(DatasetError::Spec(m));
        if self.turns_min == 0 || self.turns_min > self.turns_max {
            return spec(format!(
                "turns per session must satisfy 1 ≤ min ≤ max, got {}..={}",
                self.turns_min, self.turns_max
            ));
        }
        let range = LengthRange::Around(self.range_ratio);
        range.check()?;
        if range.bounds(self.input_len).0 == 0 {
            return spec(format!(
                "the shortest user message (floor(input_len {} × (1 − range_ratio {}))) must \
                 have at least 1 token; raise input_len",
                self.input_len, self.range_ratio
            ));
        }
        for (name, n) in [
            ("input_len", range.bounds(self.input_len).1),
            ("system_prompt_len", self.system_prompt_len),
        ] {
            if n > MAX_TOKENS {
                return spec(format!("{name} {n} is too long; at most {MAX_TOKENS} tokens"));
            }
        }
        Ok(())
    }
}

pub(crate) fn generate(
    p: &SyntheticSessions,
    think: &ThinkTime,
    num: usize,
    tok: &Tokenizer,
    seed: u64,
) -> Result<SessionWorkload, DatasetError> {
    p.check()?;
    think.check()?;
    if num == 0 {
        return Ok(SessionWorkload::default());
    }
    let gen = TextGen::new(tok)?;
    let system = match p.system_prompt_len {
        0 => None,
        n => {
            let text = gen.text(&mut item_rng(seed, SYSTEM_STREAM), n as usize)?;
            Some(SystemPrompt { text: text.into(), tokens: n })
        }
    };
    let range = LengthRange::Around(p.range_ratio);
    let (in_lo, in_hi) = range.bounds(p.input_len);
    let (out_lo, out_hi) = range.bounds(p.output_len);
    let (out_lo, out_hi) = (out_lo.max(1), out_hi.max(1));
    let sessions = (0..num)
        .into_par_iter()
        .map(|i| {
            // One stream per session: lengths and think times first, then the texts.
            let mut rng = item_rng(seed, i as u64);
            let turns = rng.random_range(p.turns_min..=p.turns_max) as usize;
            let plan: Vec<(u64, u64, u64)> = (0..turns)
                .map(|k| {
                    let input = rng.random_range(in_lo..=in_hi);
                    let output = rng.random_range(out_lo..=out_hi);
                    let think_ns = think.draw(&mut rng);
                    (input, output, if k == 0 { 0 } else { think_ns })
                })
                .collect();
            let turns = plan
                .into_iter()
                .map(|(input, output, think_time_ns)| {
                    Ok(Turn {
                        user: gen.text(&mut rng, input as usize)?,
                        user_tokens: input,
                        output_tokens: Some(output),
                        think_time_ns,
                    })
                })
                .collect::<Result<_, DatasetError>>()?;
            Ok(Session { id: format!("session-{i}"), system: system.clone(), turns })
        })
        .collect::<Result<_, DatasetError>>()?;
    Ok(SessionWorkload { sessions })
}
