//! After the run: per-chunk token counts for servers that do not send them.
//!
//! The whole output of a request is tokenized once and each token is attributed to the chunk
//! in which its last byte arrived. Tokenizing chunk by chunk would be wrong (BPE merges across
//! chunk boundaries) and, on the hot path, slow.

use servelab_records::RequestRecord;
use servelab_workload::Tokenizer;

/// Fill `tokens` on every chunk of `rec` that lacks it. Chunks that already have counts (from
/// continuous usage stats) are left alone, as is a record whose chunks all have them.
pub fn attribute_tokens(rec: &mut RequestRecord, tokenizer: &Tokenizer) {
    if rec.chunks.iter().all(|c| c.tokens.is_some()) {
        return;
    }
    let text = rec.output_text();
    let ends = tokenizer.token_end_offsets(&text);
    let counts = tokens_per_chunk(rec.chunks.iter().map(|c| c.text.len()), &ends);
    for (chunk, n) in rec.chunks.iter_mut().zip(counts) {
        chunk.tokens.get_or_insert(n);
    }
    crate::reasoning::mixed_tokens(rec, &ends);
}

/// Given each chunk's byte length and the end offsets of the tokens of their concatenation,
/// the number of tokens that end inside each chunk.
pub(crate) fn tokens_per_chunk(
    chunk_lens: impl Iterator<Item = usize>,
    token_ends: &[usize],
) -> Vec<u32> {
    let mut out = Vec::new();
    let mut chunk_end = 0usize;
    let mut t = 0usize;
    for len in chunk_lens {
        chunk_end += len;
        let start = t;
        while t < token_ends.len() && token_ends[t] <= chunk_end {
            t += 1;
        }
        out.push((t - start) as u32);
    }
    // Tokens ending past the last chunk (cannot happen for offsets of the same text) go last.
    if let Some(last) = out.last_mut() {
        *last += (token_ends.len() - t) as u32;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_go_to_the_chunk_holding_their_last_byte() {
        // "he" "llo wor" "ld": tokens "hello"(ends 5), " world"(ends 11).
        assert_eq!(tokens_per_chunk([2, 7, 2].into_iter(), &[5, 11]), vec![0, 1, 1]);
        assert_eq!(tokens_per_chunk([5, 6].into_iter(), &[5, 11]), vec![1, 1]);
        assert_eq!(tokens_per_chunk([11].into_iter(), &[1, 2, 3, 11]), vec![4]);
        assert_eq!(tokens_per_chunk(std::iter::empty(), &[]), Vec::<u32>::new());
    }

    #[test]
    fn attribution_sums_to_the_retokenized_count() {
        use servelab_records::{Chunk, ChunkKind, Outcome};
        let tok = Tokenizer::builtin("cl100k_base").unwrap();
        let parts = ["Hel", "lo, wo", "rld! How", " are you?"];
        let mut rec = RequestRecord {
            index: 0,
            warmup: false,
            scheduled_ns: 0,
            intended_ns: 0,
            sent_ns: 0,
            prompt_tokens: None,
            max_tokens: None,
            usage: None,
            chunks: parts
                .iter()
                .enumerate()
                .map(|(i, p)| Chunk {
                    t_ns: i as u64,
                    kind: ChunkKind::Content,
                    text: (*p).into(),
                    tokens: None,
                })
                .collect(),
            end_ns: Some(9),
            status: Some(200),
            outcome: Outcome::Success,
            server: None,
            read_lag_ns: None,
            retries: 0,
            session: None,
            stream: Default::default(),
        };
        attribute_tokens(&mut rec, &tok);
        let total: u32 = rec.chunks.iter().map(|c| c.tokens.unwrap()).sum();
        assert_eq!(total as usize, tok.count("Hello, world! How are you?"));
        assert_eq!(rec.output_tokens(), Some(total as u64));
    }
}
