//! The `random-mm` dataset: random text of an exact token length followed by random images,
//! as one chat user message of content parts.

use rand::Rng;
use rayon::prelude::*;

use crate::error::DatasetError;
use crate::image::{random_image_data_url, ImageFormat, ImageSize};
use crate::prompt::{ChatMessage, ContentPart, MessageContent, Prompt, PromptBody};
use crate::random::{random, RandomParams};
use crate::synth::item_rng;
use crate::tokenizer::Tokenizer;

/// Images attached to every prompt.
#[derive(Debug, Clone, PartialEq)]
pub struct ImageOptions {
    /// Images per prompt.
    pub per_prompt: u32,
    /// Each image's size is drawn uniformly from these.
    pub sizes: Vec<ImageSize>,
    /// How they are encoded.
    pub format: ImageFormat,
}

/// Stream base of images (texts use `0..num_prompts`).
const IMAGE_STREAM: u64 = 1 << 58;
/// Guard against a typo asking for gigabytes of images per request.
const MAX_IMAGES_PER_PROMPT: u32 = 64;

pub(crate) fn random_multimodal(
    text: &RandomParams,
    images: &ImageOptions,
    num: usize,
    tok: &Tokenizer,
    seed: u64,
) -> Result<Vec<Prompt>, DatasetError> {
    if images.per_prompt > MAX_IMAGES_PER_PROMPT {
        return Err(DatasetError::Spec(format!(
            "{} images per prompt is too many; at most {MAX_IMAGES_PER_PROMPT}",
            images.per_prompt
        )));
    }
    if images.per_prompt > 0 && images.sizes.is_empty() {
        return Err(DatasetError::Spec("give at least one image size, like 512x512".into()));
    }
    let prompts = random(text, num, tok, seed)?;
    prompts
        .into_par_iter()
        .enumerate()
        .map(|(i, p)| {
            let mut rng = item_rng(seed, IMAGE_STREAM + i as u64);
            let mut parts = vec![ContentPart::text(p.text())];
            for _ in 0..images.per_prompt {
                let size = images.sizes[rng.random_range(0..images.sizes.len())];
                parts.push(ContentPart::image(random_image_data_url(
                    size,
                    images.format,
                    &mut rng,
                )?));
            }
            let message =
                ChatMessage { role: "user".into(), content: MessageContent::Parts(parts) };
            Ok(Prompt { body: PromptBody::Chat(vec![message]), ..p })
        })
        .collect()
}
