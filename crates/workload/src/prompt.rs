//! What the workload stage hands on: one prompt with its exact token count.

/// One chat message, as OpenAI's chat API takes it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ChatMessage {
    pub role: String,
    pub content: String,
}

/// The text to send: a completion prompt or a chat conversation.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum PromptBody {
    Text(String),
    Chat(Vec<ChatMessage>),
}

/// One request of the workload.
#[derive(Debug, Clone, PartialEq)]
pub struct Prompt {
    pub body: PromptBody,
    /// Tokens of [`Prompt::text`] under the run's tokenizer (content only, no special tokens).
    pub prompt_tokens: u64,
    /// Requested output length (`max_tokens`), if the dataset sets one.
    pub output_tokens: Option<u64>,
}

impl Prompt {
    /// The prompt as one text: `Text` as is; `Chat` contents joined with `"\n"`.
    pub fn text(&self) -> String {
        match &self.body {
            PromptBody::Text(t) => t.clone(),
            PromptBody::Chat(messages) => {
                messages.iter().map(|m| m.content.as_str()).collect::<Vec<_>>().join("\n")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chat_text_joins_contents_with_newlines() {
        let msg =
            |role: &str, content: &str| ChatMessage { role: role.into(), content: content.into() };
        let p = Prompt {
            body: PromptBody::Chat(vec![msg("system", "be brief"), msg("user", "hi")]),
            prompt_tokens: 0,
            output_tokens: None,
        };
        assert_eq!(p.text(), "be brief\nhi");
        let t =
            Prompt { body: PromptBody::Text("x y".into()), prompt_tokens: 2, output_tokens: None };
        assert_eq!(t.text(), "x y");
    }
}
