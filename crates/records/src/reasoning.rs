//! How a response's reasoning is told from its answer: the choice a run is made with (the
//! client applies it; see `servelab_client::reasoning`).

use std::fmt;
use std::str::FromStr;

/// How a response's reasoning is told from its answer (`--reasoning-parser`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ReasoningParser {
    /// Per response: the reasoning fields when the server sends them; else, in the content,
    /// what comes before `</think>` (from a `<think>` at its start, or from its start when the
    /// opening tag was in the prompt, as DeepSeek-R1's template puts it), or everything after
    /// an opening `<think>` that never closed; else all content is answer.
    #[default]
    Auto,
    /// Only the reasoning fields (`reasoning_content`, `reasoning`); content is all answer.
    Field,
    /// As `Auto`, but the content's tags are read even when the server also sent reasoning
    /// fields.
    ThinkTags,
    /// No reasoning: every output, the reasoning fields' included, is answer.
    None,
}

impl ReasoningParser {
    /// Every parser, as the flag spells them.
    pub const ALL: [ReasoningParser; 4] = [
        ReasoningParser::Auto,
        ReasoningParser::Field,
        ReasoningParser::ThinkTags,
        ReasoningParser::None,
    ];

    /// The flag's spelling: `auto`, `field`, `think-tags`, `none`.
    pub fn as_str(self) -> &'static str {
        match self {
            ReasoningParser::Auto => "auto",
            ReasoningParser::Field => "field",
            ReasoningParser::ThinkTags => "think-tags",
            ReasoningParser::None => "none",
        }
    }
}

impl fmt::Display for ReasoningParser {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ReasoningParser {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        ReasoningParser::ALL.into_iter().find(|p| p.as_str() == s).ok_or_else(|| {
            format!("unknown reasoning parser '{s}' (expected auto, field, think-tags or none)")
        })
    }
}
