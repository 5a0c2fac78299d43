//! What the workload stage hands on: one prompt with its exact token count.

use std::borrow::Cow;

/// One chat message, as OpenAI's chat API takes it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ChatMessage {
    /// Who speaks: `system`, `user` or `assistant`.
    pub role: String,
    /// What is said.
    pub content: MessageContent,
}

impl ChatMessage {
    /// A text-only message.
    pub fn new(role: impl Into<String>, content: impl Into<String>) -> Self {
        Self { role: role.into(), content: MessageContent::Text(content.into()) }
    }

    /// The message's text (see [`MessageContent::text`]).
    pub fn text(&self) -> Cow<'_, str> {
        self.content.text()
    }
}

/// A message's content: a plain string, or OpenAI content parts (text and images).
///
/// Serialized as OpenAI takes it: `"content": "..."` for text, `"content": [{"type": "text",
/// ...}, {"type": "image_url", ...}]` for parts, so text-only bodies are unchanged.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(untagged)]
pub enum MessageContent {
    /// A plain string.
    Text(String),
    /// Content parts, in order.
    Parts(Vec<ContentPart>),
}

impl MessageContent {
    /// The text the run's tokenizer counts: the string, or the text parts joined with `"\n"`.
    /// Images are never counted (their tokens are only known from the server's usage).
    pub fn text(&self) -> Cow<'_, str> {
        match self {
            Self::Text(t) => Cow::Borrowed(t),
            Self::Parts(parts) => {
                let mut texts = parts.iter().filter_map(|p| match p {
                    ContentPart::Text { text } => Some(text.as_str()),
                    ContentPart::ImageUrl { .. } => None,
                });
                match (texts.next(), texts.next()) {
                    (None, _) => Cow::Borrowed(""),
                    (Some(one), None) => Cow::Borrowed(one),
                    (Some(a), Some(b)) => {
                        let mut all = vec![a, b];
                        all.extend(texts);
                        Cow::Owned(all.join("\n"))
                    }
                }
            }
        }
    }

    /// The image URLs (`data:` URLs or remote URLs), in order.
    pub fn image_urls(&self) -> impl Iterator<Item = &str> {
        let parts: &[ContentPart] = match self {
            Self::Text(_) => &[],
            Self::Parts(parts) => parts,
        };
        parts.iter().filter_map(|p| match p {
            ContentPart::ImageUrl { image_url } => Some(image_url.url.as_str()),
            ContentPart::Text { .. } => None,
        })
    }
}

impl From<String> for MessageContent {
    fn from(text: String) -> Self {
        Self::Text(text)
    }
}

impl From<&str> for MessageContent {
    fn from(text: &str) -> Self {
        Self::Text(text.to_string())
    }
}

/// One OpenAI content part.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentPart {
    /// `{"type": "text", "text": ...}`.
    Text {
        /// The text.
        text: String,
    },
    /// `{"type": "image_url", "image_url": {"url": ...}}`.
    ImageUrl {
        /// The image.
        image_url: ImageUrl,
    },
}

impl ContentPart {
    /// A text part.
    pub fn text(text: impl Into<String>) -> Self {
        Self::Text { text: text.into() }
    }

    /// An image part referring to `url` (a `data:` URL or a remote one).
    pub fn image(url: impl Into<String>) -> Self {
        Self::ImageUrl { image_url: ImageUrl { url: url.into() } }
    }
}

/// An image reference: a `data:image/...;base64,...` URL or a remote URL.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ImageUrl {
    /// The URL, sent as given.
    pub url: String,
}

/// The text to send: a completion prompt or a chat conversation.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum PromptBody {
    /// A completion prompt (`/v1/completions`).
    Text(String),
    /// Chat messages (`/v1/chat/completions`).
    Chat(Vec<ChatMessage>),
}

/// One request of the workload.
#[derive(Debug, Clone, PartialEq)]
pub struct Prompt {
    /// What is sent.
    pub body: PromptBody,
    /// Tokens of [`Prompt::text`] under the run's tokenizer (content only, no special tokens;
    /// images not included).
    pub prompt_tokens: u64,
    /// Requested output length (`max_tokens`), if the dataset sets one.
    pub output_tokens: Option<u64>,
}

impl Prompt {
    /// The prompt as one text: `Text` as is; `Chat` message texts joined with `"\n"`.
    pub fn text(&self) -> String {
        match &self.body {
            PromptBody::Text(t) => t.clone(),
            PromptBody::Chat(messages) => {
                messages.iter().map(|m| m.text()).collect::<Vec<_>>().join("\n")
            }
        }
    }

    /// Number of images the prompt carries.
    pub fn image_count(&self) -> usize {
        match &self.body {
            PromptBody::Text(_) => 0,
            PromptBody::Chat(messages) => {
                messages.iter().map(|m| m.content.image_urls().count()).sum()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chat_text_joins_contents_with_newlines() {
        let p = Prompt {
            body: PromptBody::Chat(vec![
                ChatMessage::new("system", "be brief"),
                ChatMessage::new("user", "hi"),
            ]),
            prompt_tokens: 0,
            output_tokens: None,
        };
        assert_eq!(p.text(), "be brief\nhi");
        let t =
            Prompt { body: PromptBody::Text("x y".into()), prompt_tokens: 2, output_tokens: None };
        assert_eq!(t.text(), "x y");
    }

    #[test]
    fn parts_serialize_in_openai_form_and_count_text_only() {
        let m = ChatMessage {
            role: "user".into(),
            content: MessageContent::Parts(vec![
                ContentPart::text("look"),
                ContentPart::image("data:image/png;base64,AAAA"),
                ContentPart::text("and this"),
            ]),
        };
        assert_eq!(
            serde_json::to_string(&m).unwrap(),
            r#"{"role":"user","content":[{"type":"text","text":"look"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}},{"type":"text","text":"and this"}]}"#
        );
        assert_eq!(
            serde_json::to_string(&ChatMessage::new("user", "hi")).unwrap(),
            r#"{"role":"user","content":"hi"}"#
        );
        assert_eq!(m.text(), "look\nand this");
        assert_eq!(m.content.image_urls().collect::<Vec<_>>(), ["data:image/png;base64,AAAA"]);
        let back: ChatMessage = serde_json::from_str(&serde_json::to_string(&m).unwrap()).unwrap();
        assert_eq!(back, m);
        let p = Prompt { body: PromptBody::Chat(vec![m]), prompt_tokens: 0, output_tokens: None };
        assert_eq!(p.image_count(), 1);
    }
}
