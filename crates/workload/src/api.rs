//! Which OpenAI-compatible API the prompts are sent to: it decides whether a prompt goes out
//! as text or as chat messages.

/// Which OpenAI API a backend speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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
