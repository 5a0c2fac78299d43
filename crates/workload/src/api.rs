//! Which OpenAI-compatible API the prompts are sent to: it decides whether a prompt goes out
//! as text or as chat messages.

/// Which OpenAI API a backend speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Api {
    /// `/v1/completions`: `prompt` in, `choices[0].text` out.
    Completions,
    /// `/v1/chat/completions`: `messages` in, `choices[0].delta` out.
    Chat,
}

impl Api {
    /// The path a server of this API answers on.
    pub fn default_endpoint(self) -> &'static str {
        match self {
            Api::Completions => "/v1/completions",
            Api::Chat => "/v1/chat/completions",
        }
    }

    /// The backend name results carry (`vllm bench serve`'s `--backend`): `openai`,
    /// `openai-chat`.
    pub fn backend(self) -> &'static str {
        match self {
            Api::Completions => "openai",
            Api::Chat => "openai-chat",
        }
    }
}

/// Which body field carries the requested output length. OpenAI's chat API deprecated
/// `max_tokens` for `max_completion_tokens`, and servers differ in which they read: vLLM and
/// SGLang read both, `transformers serve` 5.x reads only `max_tokens` and generates its
/// default length when given the other.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum MaxTokensField {
    /// `max_tokens` for completions, `max_completion_tokens` for chat (OpenAI's current API).
    #[default]
    Auto,
    /// `max_tokens` for both APIs.
    MaxTokens,
    /// `max_completion_tokens` for both APIs.
    MaxCompletionTokens,
    /// Both fields, the same value.
    Both,
}

impl MaxTokensField {
    /// The field names a request of `api` carries its output length in.
    pub fn names(self, api: Api) -> &'static [&'static str] {
        match (self, api) {
            (MaxTokensField::Auto, Api::Completions) | (MaxTokensField::MaxTokens, _) => {
                &["max_tokens"]
            }
            (MaxTokensField::Auto, Api::Chat) | (MaxTokensField::MaxCompletionTokens, _) => {
                &["max_completion_tokens"]
            }
            (MaxTokensField::Both, _) => &["max_tokens", "max_completion_tokens"],
        }
    }

    /// The flag value that selects this (`auto`, `max_tokens`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            MaxTokensField::Auto => "auto",
            MaxTokensField::MaxTokens => "max_tokens",
            MaxTokensField::MaxCompletionTokens => "max_completion_tokens",
            MaxTokensField::Both => "both",
        }
    }
}
