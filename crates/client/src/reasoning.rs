//! Which output is reasoning and which is the answer.
//!
//! Reasoning models send their thinking before the answer, in one of two ways: a separate
//! delta field (vLLM and SGLang with a reasoning parser: `delta.reasoning_content`, or
//! `delta.reasoning` in newer vLLM), which `openai::parse_event` labels as it reads; or inside
//! the content, between `<think>` and `</think>` (a server started without a reasoning parser).
//! This module reads the second kind, once per response after its last byte (never per event
//! on the hot path), over the whole content text, so a tag split across chunks is found as
//! any other.
//!
//! It only relabels: a chunk wholly inside the reasoning becomes [`ChunkKind::Reasoning`], and
//! the one chunk holding both the reasoning's end and the answer's start stays
//! [`ChunkKind::Content`] and is described in [`StreamNotes::think`] (how many of its bytes,
//! and then tokens, are reasoning). Texts, times and chunks are never changed, so TTFT, the
//! per-token ITL and every count are exactly what they are without the parser. The tags
//! themselves are the model's output and count as reasoning tokens.
//!
//! [`StreamNotes::think`]: servelab_records::StreamNotes::think

pub use servelab_records::ReasoningParser;
use servelab_records::{ChunkKind, RequestRecord, ThinkTags};

/// The tag that opens the reasoning inside the content.
pub const THINK_OPEN: &str = "<think>";
/// The tag that ends it.
pub const THINK_CLOSE: &str = "</think>";

/// Label `rec`'s chunks as reasoning or answer with `parser` (see the module doc). Called once,
/// when the response has ended.
pub fn label(rec: &mut RequestRecord, parser: ReasoningParser) {
    match parser {
        ReasoningParser::Field => {}
        ReasoningParser::None => {
            for c in &mut rec.chunks {
                c.kind = ChunkKind::Content;
            }
        }
        ReasoningParser::Auto | ReasoningParser::ThinkTags => think_tags(rec, parser),
    }
}

fn think_tags(rec: &mut RequestRecord, parser: ReasoningParser) {
    let fields = rec.chunks.iter().any(|c| c.kind == ChunkKind::Reasoning && !c.text.is_empty());
    if fields && parser == ReasoningParser::Auto {
        // The server parsed the reasoning out already.
        return;
    }
    // Either tag, split however, leaves its `<` in some chunk: without one there is nothing to
    // read, and nothing is copied (the answer of a model that does not think).
    let content = |c: &&servelab_records::Chunk| c.kind == ChunkKind::Content;
    if !rec.chunks.iter().filter(content).any(|c| c.text.contains('<')) {
        return;
    }
    // The content's text, and where each content chunk starts in it.
    let mut all = String::new();
    let mut starts = Vec::new();
    for (i, c) in rec.chunks.iter().enumerate() {
        if c.kind == ChunkKind::Content {
            starts.push((i, all.len()));
            all.push_str(&c.text);
        }
    }
    let lead = all.len() - all.trim_start().len();
    let opened = all[lead..].starts_with(THINK_OPEN);
    let from = if opened { lead + THINK_OPEN.len() } else { 0 };
    let close = all[from..].find(THINK_CLOSE).map(|at| from + at + THINK_CLOSE.len());
    let end = match (opened, close) {
        // A closing tag with or without the opening one (templates that end the prompt with
        // `<think>`, as DeepSeek-R1's and QwQ's do, leave only `</think>` in the output).
        (_, Some(end)) => end,
        // Opened and never closed: the answer never came (cut off by max_tokens).
        (true, None) => all.len(),
        (false, None) => return,
    };
    let mut think = ThinkTags::default();
    for (n, &(i, start)) in starts.iter().enumerate() {
        let stop = starts.get(n + 1).map_or(all.len(), |&(_, s)| s);
        let chunk = &mut rec.chunks[i];
        if chunk.text.is_empty() {
            continue;
        }
        if stop <= end {
            chunk.kind = ChunkKind::Reasoning;
        } else if start < end {
            let bytes = end - start;
            think.mixed_chunk = Some(i as u32);
            think.reasoning_bytes = bytes as u32;
            think.reasoning_tokens = chunk.tokens.map(|k| share(k, bytes, chunk.text.len()));
        }
    }
    rec.stream.think = Some(think);
}

/// `k` tokens of a text of `len` bytes, shared by bytes: those of its first `bytes` bytes
/// (rounded to the nearest token).
fn share(k: u32, bytes: usize, len: usize) -> u32 {
    if len == 0 {
        return 0;
    }
    let n = (u64::from(k) * bytes as u64 * 2 + len as u64) / (2 * len as u64);
    n.min(u64::from(k)) as u32
}

/// After retokenizing: the tokens of the mixed chunk that end within its reasoning bytes,
/// given the end offsets of the tokens of the whole output text.
pub(crate) fn mixed_tokens(rec: &mut RequestRecord, token_ends: &[usize]) {
    let Some(think) = rec.stream.think.as_mut() else { return };
    let (Some(i), None) = (think.mixed_chunk, think.reasoning_tokens) else { return };
    let i = i as usize;
    if i >= rec.chunks.len() {
        return;
    }
    let start: usize = rec.chunks[..i].iter().map(|c| c.text.len()).sum();
    let split = start + think.reasoning_bytes as usize;
    let before = token_ends.partition_point(|&e| e <= start);
    let within = token_ends.partition_point(|&e| e <= split);
    think.reasoning_tokens = Some((within - before) as u32);
}

#[cfg(test)]
mod tests {
    use super::*;
    use servelab_records::{Chunk, Outcome};

    fn rec(parts: &[(ChunkKind, &str, Option<u32>)]) -> RequestRecord {
        RequestRecord {
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
                .map(|(i, (kind, text, tokens))| Chunk {
                    t_ns: i as u64,
                    kind: *kind,
                    text: (*text).into(),
                    tokens: *tokens,
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
        }
    }

    const C: ChunkKind = ChunkKind::Content;
    const R: ChunkKind = ChunkKind::Reasoning;

    fn kinds(r: &RequestRecord) -> Vec<ChunkKind> {
        r.chunks.iter().map(|c| c.kind).collect()
    }

    #[test]
    fn tags_split_across_chunks_are_found_and_the_mixed_chunk_is_described() {
        let mut r = rec(&[
            (C, "\n<th", Some(1)),
            (C, "ink>hm", Some(2)),
            (C, " ok</thi", Some(2)),
            (C, "nk>\n\nYes", Some(4)),
            (C, " sure", Some(1)),
        ]);
        let text = r.output_text();
        label(&mut r, ReasoningParser::Auto);
        assert_eq!(kinds(&r), [R, R, R, C, C]);
        // "nk>" is 3 of the 8 bytes of chunk 3: 4 tokens shared by bytes give 2 (1.5 rounded up).
        assert_eq!(
            r.stream.think,
            Some(ThinkTags { mixed_chunk: Some(3), reasoning_bytes: 3, reasoning_tokens: Some(2) })
        );
        assert_eq!(r.output_text(), text, "text is never changed");
    }

    #[test]
    fn a_tag_ending_a_chunk_leaves_no_mixed_chunk_and_an_unclosed_one_is_all_reasoning() {
        let mut r = rec(&[(C, "<think>a", Some(1)), (C, "b</think>", Some(1)), (C, "c", Some(1))]);
        label(&mut r, ReasoningParser::Auto);
        assert_eq!(kinds(&r), [R, R, C]);
        assert_eq!(r.stream.think, Some(ThinkTags::default()));
        let mut r = rec(&[(C, "<think>a", None), (C, "b", None)]);
        label(&mut r, ReasoningParser::ThinkTags);
        assert_eq!(kinds(&r), [R, R]);
    }

    #[test]
    fn a_closing_tag_alone_ends_reasoning_and_auto_leaves_a_parsed_stream_alone() {
        // A closing tag with no opening one: the opening tag was in the prompt.
        for parser in [ReasoningParser::Auto, ReasoningParser::ThinkTags] {
            let mut r = rec(&[(C, "x</think>", None), (C, "y", None)]);
            label(&mut r, parser);
            assert_eq!(kinds(&r), [R, C]);
        }
        // An opening tag later than the start is answer text.
        let mut r = rec(&[(C, "a <think> b", None)]);
        label(&mut r, ReasoningParser::Auto);
        assert_eq!((kinds(&r), r.stream.think), (vec![C], None));
        // The server parsed it: for auto, fields win and content is left alone; think-tags
        // reads the tags in the content too.
        let parts = [(R, "hm", None), (C, "<think>x</think>", None), (C, "y", None)];
        let mut r = rec(&parts);
        label(&mut r, ReasoningParser::Auto);
        assert_eq!((kinds(&r), r.stream.think), (vec![R, C, C], None));
        let mut r = rec(&parts);
        label(&mut r, ReasoningParser::ThinkTags);
        assert_eq!(kinds(&r), [R, R, C]);
        // field ignores tags; none makes everything answer.
        let mut r = rec(&[(C, "<think>x</think>", None), (C, "y", None)]);
        label(&mut r, ReasoningParser::Field);
        assert_eq!(kinds(&r), [C, C]);
        let mut r = rec(&[(R, "hm", None), (C, "y", None)]);
        label(&mut r, ReasoningParser::None);
        assert_eq!(kinds(&r), [C, C]);
    }

    #[test]
    fn retokenized_mixed_chunk_counts_the_tokens_ending_in_its_reasoning_bytes() {
        let mut r = rec(&[(C, "<think>ab", None), (C, "c</think>de", None)]);
        label(&mut r, ReasoningParser::Auto);
        assert_eq!(r.stream.think.unwrap().reasoning_bytes, 9);
        // Tokens ending at 7 ("<think>"), 9 ("ab"), 10 ("c"), 18 ("</think>"), 20 ("de").
        mixed_tokens(&mut r, &[7, 9, 10, 18, 20]);
        assert_eq!(r.stream.think.unwrap().reasoning_tokens, Some(2));
    }

    #[test]
    fn parsers_round_trip_their_names() {
        for p in ReasoningParser::ALL {
            assert_eq!(p.as_str().parse::<ReasoningParser>(), Ok(p));
        }
        assert!("tags".parse::<ReasoningParser>().is_err());
    }
}
