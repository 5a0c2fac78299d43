//! Workload: what to send. Tokenizers and datasets, turned into a list of prompts with exact
//! token lengths.

pub mod hub;
pub mod tokenizer;

pub use tokenizer::{Tokenizer, TokenizerError};
