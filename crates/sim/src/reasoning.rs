//! The reasoning phase: how many of a response's first tokens are reasoning
//! (`--reasoning-tokens N|MIN-MAX`, drawn per request) and how they are sent
//! (`--reasoning-format`): in the reasoning field as vLLM and SGLang with a reasoning parser
//! send them (`delta.reasoning_content`), or inside the content between `<think>` and
//! `</think>` as a server without one does. The tags ride on the first and last reasoning
//! events' text and are not tokens of their own, so the truth's counts are the phase's tokens
//! whichever the format.

use std::str::FromStr;

use rand::Rng;

use crate::SimError;

/// How the reasoning tokens are sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum ReasoningFormat {
    /// Chat: `delta.reasoning_content` (completions have no such field: plain text).
    #[default]
    Field,
    /// In the content (chat) or text (completions), between `<think>` and `</think>`.
    ThinkTags,
}

/// The reasoning tokens of each request: uniform in `min..=max` (equal for a fixed N; 0: no
/// reasoning), and how they are sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Reasoning {
    /// Fewest reasoning tokens of one request.
    pub min: u64,
    /// Most reasoning tokens of one request (at least `min`).
    pub max: u64,
    /// Field or tags.
    pub format: ReasoningFormat,
}

impl Reasoning {
    /// Exactly `n` reasoning tokens per request, in the field.
    pub fn fixed(n: u64) -> Reasoning {
        Reasoning { min: n, max: n, format: ReasoningFormat::Field }
    }

    /// This request's reasoning tokens. A fixed count draws nothing from `rng`, so a run
    /// without reasoning (or with a fixed count) generates what it did before ranges existed.
    pub fn draw(&self, rng: &mut impl Rng) -> u64 {
        if self.max <= self.min {
            self.min
        } else {
            rng.random_range(self.min..=self.max)
        }
    }

    /// Tags: the text of an event carrying reasoning tokens `from..to` (of a phase of
    /// `phase` tokens), with `<think>` before the phase's first token and `</think>` after its
    /// last.
    pub fn tagged(text: &str, from: u64, to: u64, phase: u64) -> String {
        let open = if from == 0 { "<think>" } else { "" };
        let close = if to >= phase { "</think>" } else { "" };
        format!("{open}{text}{close}")
    }
}

/// How one stream event is sent: its text (tagged, for think-tags) and whether it goes in
/// the reasoning field.
/// `ev`: the event's reasoning flag, its tokens and the tokens sent with it; `phase`: the
/// request's reasoning tokens.
pub(crate) fn sent_as(
    r: &Reasoning,
    phase: u64,
    ev: (bool, u32, u64),
    text: String,
) -> (String, bool) {
    let (reasoning, tokens, cumulative) = ev;
    match (reasoning, r.format) {
        (false, _) => (text, false),
        (true, ReasoningFormat::Field) => (text, true),
        (true, ReasoningFormat::ThinkTags) => {
            let from = cumulative - u64::from(tokens);
            // Only the phase's first and last events carry a tag.
            if from > 0 && cumulative < phase {
                return (text, false);
            }
            (Reasoning::tagged(&text, from, cumulative, phase), false)
        }
    }
}

impl FromStr for Reasoning {
    type Err = SimError;

    /// `N` or `MIN-MAX` (the format is set apart).
    fn from_str(s: &str) -> Result<Self, SimError> {
        let bad = || {
            SimError::Config(format!(
                "--reasoning-tokens '{s}': expected N or MIN-MAX with MIN <= MAX"
            ))
        };
        let (a, b) = match s.split_once('-') {
            Some((a, b)) => (a.trim().parse::<u64>(), b.trim().parse::<u64>()),
            None => (s.trim().parse::<u64>(), s.trim().parse::<u64>()),
        };
        match (a, b) {
            (Ok(min), Ok(max)) if min <= max => {
                Ok(Reasoning { min, max, format: ReasoningFormat::Field })
            }
            _ => Err(bad()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn counts_parse_and_draw_within_their_range() {
        assert_eq!("0".parse::<Reasoning>().ok(), Some(Reasoning::fixed(0)));
        let r: Reasoning = "3-5".parse().unwrap();
        assert_eq!((r.min, r.max), (3, 5));
        assert!("5-3".parse::<Reasoning>().is_err());
        assert!("x".parse::<Reasoning>().is_err());
        let mut rng = rand::rngs::SmallRng::seed_from_u64(7);
        let drawn: Vec<u64> = (0..200).map(|_| r.draw(&mut rng)).collect();
        assert!(drawn.iter().all(|n| (3..=5).contains(n)));
        assert!((3..=5).all(|n| drawn.contains(&n)));
        // A fixed count leaves the generator alone.
        let (mut a, b) = (rand::rngs::SmallRng::seed_from_u64(1), Reasoning::fixed(4));
        assert_eq!(b.draw(&mut a), 4);
        assert_eq!(a.random::<u64>(), rand::rngs::SmallRng::seed_from_u64(1).random::<u64>());
    }

    #[test]
    fn tags_open_and_close_the_phase() {
        assert_eq!(Reasoning::tagged(" a", 0, 1, 3), "<think> a");
        assert_eq!(Reasoning::tagged(" b", 1, 2, 3), " b");
        assert_eq!(Reasoning::tagged(" c", 2, 3, 3), " c</think>");
        assert_eq!(Reasoning::tagged(" d", 0, 1, 1), "<think> d</think>");
    }
}
