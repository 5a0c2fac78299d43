//! Server-wide quirks of real servers (`--quirk LIST`): deterministic departures from vLLM's
//! behaviour that apply to every request, so clients and `servelab doctor` can be checked
//! against each one. Names are parsed once into [`Quirks`], a set of flags read on the hot
//! path as plain booleans.

use std::fmt;
use std::str::FromStr;

/// One quirk, by its `--quirk` name. [`Quirk::Transformers`] is a preset of several.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Quirk {
    /// `no-done`: streams end after the chunk carrying `finish_reason` (and usage, if any)
    /// without `data: [DONE]`.
    NoDone,
    /// `reject-ignore-eos`: a body with an `ignore_eos` field gets 422 naming it.
    RejectIgnoreEos,
    /// `reject-min-tokens`: a body with a `min_tokens` field gets 422 naming it.
    RejectMinTokens,
    /// `reject-unknown-fields`: a body with top-level fields outside OpenAI's request schema
    /// gets 422 listing them (as `transformers serve` does).
    RejectUnknownFields,
    /// `ignore-max-completion-tokens`: chat ignores `max_completion_tokens`; the output
    /// length is `max_tokens`, else `--default-max-tokens`.
    IgnoreMaxCompletionTokens,
    /// `ignore-stream-options`: `stream_options` is ignored; usage rides on the final
    /// (`finish_reason`) chunk whether asked for or not, never on every chunk.
    IgnoreStreamOptions,
    /// `usage-on-finish-chunk`: usage, when asked for, rides on the `finish_reason` chunk
    /// instead of a separate `choices: []` chunk.
    UsageOnFinishChunk,
    /// `no-usage`: no usage object ever, streaming or not.
    NoUsage,
    /// `models-error`: `GET /v1/models` answers 500.
    ModelsError,
    /// `no-metrics`: `GET /metrics` answers 404.
    NoMetrics,
    /// `no-keep-alive`: every response says `Connection: close` and the connection is closed
    /// after it.
    NoKeepAlive,
    /// `transformers`: what Hugging Face `transformers serve` 5.17.0 does: no-done,
    /// reject-unknown-fields, ignore-max-completion-tokens, ignore-stream-options,
    /// models-error, no-metrics.
    Transformers,
}

impl Quirk {
    /// Every quirk, in the order `--help` lists them.
    pub const ALL: [Quirk; 12] = [
        Quirk::NoDone,
        Quirk::RejectIgnoreEos,
        Quirk::RejectMinTokens,
        Quirk::RejectUnknownFields,
        Quirk::IgnoreMaxCompletionTokens,
        Quirk::IgnoreStreamOptions,
        Quirk::UsageOnFinishChunk,
        Quirk::NoUsage,
        Quirk::ModelsError,
        Quirk::NoMetrics,
        Quirk::NoKeepAlive,
        Quirk::Transformers,
    ];

    /// The `--quirk` name.
    pub fn name(&self) -> &'static str {
        match self {
            Quirk::NoDone => "no-done",
            Quirk::RejectIgnoreEos => "reject-ignore-eos",
            Quirk::RejectMinTokens => "reject-min-tokens",
            Quirk::RejectUnknownFields => "reject-unknown-fields",
            Quirk::IgnoreMaxCompletionTokens => "ignore-max-completion-tokens",
            Quirk::IgnoreStreamOptions => "ignore-stream-options",
            Quirk::UsageOnFinishChunk => "usage-on-finish-chunk",
            Quirk::NoUsage => "no-usage",
            Quirk::ModelsError => "models-error",
            Quirk::NoMetrics => "no-metrics",
            Quirk::NoKeepAlive => "no-keep-alive",
            Quirk::Transformers => "transformers",
        }
    }

    /// The single quirks this one stands for (itself, unless it is a preset).
    pub fn parts(self) -> &'static [Quirk] {
        match self {
            Quirk::Transformers => &[
                Quirk::NoDone,
                Quirk::RejectUnknownFields,
                Quirk::IgnoreMaxCompletionTokens,
                Quirk::IgnoreStreamOptions,
                Quirk::ModelsError,
                Quirk::NoMetrics,
            ],
            Quirk::NoDone => &[Quirk::NoDone],
            Quirk::RejectIgnoreEos => &[Quirk::RejectIgnoreEos],
            Quirk::RejectMinTokens => &[Quirk::RejectMinTokens],
            Quirk::RejectUnknownFields => &[Quirk::RejectUnknownFields],
            Quirk::IgnoreMaxCompletionTokens => &[Quirk::IgnoreMaxCompletionTokens],
            Quirk::IgnoreStreamOptions => &[Quirk::IgnoreStreamOptions],
            Quirk::UsageOnFinishChunk => &[Quirk::UsageOnFinishChunk],
            Quirk::NoUsage => &[Quirk::NoUsage],
            Quirk::ModelsError => &[Quirk::ModelsError],
            Quirk::NoMetrics => &[Quirk::NoMetrics],
            Quirk::NoKeepAlive => &[Quirk::NoKeepAlive],
        }
    }
}

impl fmt::Display for Quirk {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A quirk name that is not one of [`Quirk::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown quirk '{name}'; expected one of {valid}", name = .0, valid = valid_names())]
pub struct QuirkParseError(pub String);

fn valid_names() -> String {
    Quirk::ALL.iter().map(Quirk::name).collect::<Vec<_>>().join(", ")
}

impl FromStr for Quirk {
    type Err = QuirkParseError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        Quirk::ALL
            .into_iter()
            .find(|q| q.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| QuirkParseError(s.to_string()))
    }
}

/// The quirks a sim has, resolved into flags (presets expanded). `Default`: none, the
/// simulator's usual vLLM behaviour.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Quirks {
    /// [`Quirk::NoDone`].
    pub no_done: bool,
    /// [`Quirk::RejectIgnoreEos`].
    pub reject_ignore_eos: bool,
    /// [`Quirk::RejectMinTokens`].
    pub reject_min_tokens: bool,
    /// [`Quirk::RejectUnknownFields`].
    pub reject_unknown_fields: bool,
    /// [`Quirk::IgnoreMaxCompletionTokens`].
    pub ignore_max_completion_tokens: bool,
    /// [`Quirk::IgnoreStreamOptions`].
    pub ignore_stream_options: bool,
    /// [`Quirk::UsageOnFinishChunk`].
    pub usage_on_finish_chunk: bool,
    /// [`Quirk::NoUsage`].
    pub no_usage: bool,
    /// [`Quirk::ModelsError`].
    pub models_error: bool,
    /// [`Quirk::NoMetrics`].
    pub no_metrics: bool,
    /// [`Quirk::NoKeepAlive`].
    pub no_keep_alive: bool,
}

impl Quirks {
    /// No quirks.
    pub const NONE: Quirks = Quirks {
        no_done: false,
        reject_ignore_eos: false,
        reject_min_tokens: false,
        reject_unknown_fields: false,
        ignore_max_completion_tokens: false,
        ignore_stream_options: false,
        usage_on_finish_chunk: false,
        no_usage: false,
        models_error: false,
        no_metrics: false,
        no_keep_alive: false,
    };

    fn flag(&mut self, q: Quirk) -> Option<&mut bool> {
        Some(match q {
            Quirk::NoDone => &mut self.no_done,
            Quirk::RejectIgnoreEos => &mut self.reject_ignore_eos,
            Quirk::RejectMinTokens => &mut self.reject_min_tokens,
            Quirk::RejectUnknownFields => &mut self.reject_unknown_fields,
            Quirk::IgnoreMaxCompletionTokens => &mut self.ignore_max_completion_tokens,
            Quirk::IgnoreStreamOptions => &mut self.ignore_stream_options,
            Quirk::UsageOnFinishChunk => &mut self.usage_on_finish_chunk,
            Quirk::NoUsage => &mut self.no_usage,
            Quirk::ModelsError => &mut self.models_error,
            Quirk::NoMetrics => &mut self.no_metrics,
            Quirk::NoKeepAlive => &mut self.no_keep_alive,
            Quirk::Transformers => return None,
        })
    }

    /// Add `q` (all of a preset's parts).
    pub fn insert(&mut self, q: Quirk) {
        for &p in q.parts() {
            if let Some(f) = self.flag(p) {
                *f = true;
            }
        }
    }

    /// Whether `q` is on (for a preset: all of its parts).
    pub fn contains(&self, q: Quirk) -> bool {
        let mut me = *self;
        q.parts().iter().all(|&p| me.flag(p).is_some_and(|f| *f))
    }

    /// No quirk is on.
    pub fn is_empty(&self) -> bool {
        *self == Quirks::NONE
    }

    /// The single quirks that are on, in [`Quirk::ALL`] order (presets not named).
    pub fn names(&self) -> Vec<&'static str> {
        Quirk::ALL
            .iter()
            .filter(|q| q.parts() == [**q] && self.contains(**q))
            .map(Quirk::name)
            .collect()
    }

    /// Parse a comma-separated list of quirk names (blanks between commas are skipped).
    pub fn parse_list(list: &str) -> Result<Quirks, QuirkParseError> {
        let mut q = Quirks::NONE;
        q.add_list(list)?;
        Ok(q)
    }

    /// Add the quirks of a comma-separated list.
    pub fn add_list(&mut self, list: &str) -> Result<(), QuirkParseError> {
        for name in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            self.insert(name.parse()?);
        }
        Ok(())
    }
}

impl FromIterator<Quirk> for Quirks {
    fn from_iter<I: IntoIterator<Item = Quirk>>(iter: I) -> Self {
        let mut q = Quirks::NONE;
        for x in iter {
            q.insert(x);
        }
        q
    }
}

/// Top-level fields of OpenAI's own completions request schema.
const OPENAI_COMPLETIONS_FIELDS: &[&str] = &[
    "model",
    "prompt",
    "best_of",
    "echo",
    "frequency_penalty",
    "logit_bias",
    "logprobs",
    "max_tokens",
    "n",
    "presence_penalty",
    "seed",
    "stop",
    "stream",
    "stream_options",
    "suffix",
    "temperature",
    "top_p",
    "user",
];

/// Top-level fields of OpenAI's own chat completions request schema.
const OPENAI_CHAT_FIELDS: &[&str] = &[
    "messages",
    "model",
    "audio",
    "frequency_penalty",
    "function_call",
    "functions",
    "logit_bias",
    "logprobs",
    "max_completion_tokens",
    "max_tokens",
    "metadata",
    "modalities",
    "n",
    "parallel_tool_calls",
    "prediction",
    "presence_penalty",
    "prompt_cache_key",
    "prompt_cache_retention",
    "reasoning_effort",
    "response_format",
    "safety_identifier",
    "seed",
    "service_tier",
    "stop",
    "store",
    "stream",
    "stream_options",
    "temperature",
    "tool_choice",
    "tools",
    "top_logprobs",
    "top_p",
    "user",
    "verbosity",
    "web_search_options",
];

/// Whether `field` is a top-level field of OpenAI's request schema for `chat` (else
/// completions).
pub(crate) fn is_openai_field(chat: bool, field: &str) -> bool {
    let known = if chat { OPENAI_CHAT_FIELDS } else { OPENAI_COMPLETIONS_FIELDS };
    known.contains(&field)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_presets_expand() {
        for q in Quirk::ALL {
            assert_eq!(q.name().parse::<Quirk>(), Ok(q));
        }
        let t = Quirks::parse_list("transformers").unwrap();
        assert_eq!(
            t.names(),
            [
                "no-done",
                "reject-unknown-fields",
                "ignore-max-completion-tokens",
                "ignore-stream-options",
                "models-error",
                "no-metrics"
            ]
        );
        assert!(t.contains(Quirk::Transformers) && !t.contains(Quirk::NoUsage));
        let q = Quirks::parse_list(" no-usage, ,NO-DONE,").unwrap();
        assert!(q.no_usage && q.no_done && !q.contains(Quirk::Transformers));
        assert!(Quirks::parse_list("").unwrap().is_empty());
        let e = Quirks::parse_list("no-done,nope").unwrap_err().to_string();
        assert!(e.contains("'nope'") && e.contains("no-keep-alive, transformers"), "{e}");
    }

    #[test]
    fn openai_fields_per_endpoint() {
        assert!(is_openai_field(true, "max_completion_tokens"));
        assert!(!is_openai_field(false, "max_completion_tokens"));
        assert!(is_openai_field(false, "echo"));
        assert!(!is_openai_field(true, "ignore_eos") && !is_openai_field(false, "min_tokens"));
    }
}
