//! Trace replay: timestamped requests of given input and output lengths, turned into prompts
//! of exactly those lengths and arrival offsets.
//!
//! Prompts are assembled from pieces of text so that a 100,000-line trace fits in memory:
//! a Mooncake trace's hash ids are shared blocks (equal ids give byte-identical text), and the
//! Azure and BurstGPT traces, which carry no content, get a unique head per request followed by
//! filler blocks from a small pool. A prefix cache matches from the first token, so the unique
//! head keeps those requests from sharing any cached prefix. [`TraceWorkload::prompt`]
//! assembles one prompt's text when it is needed.

mod csv;
mod mooncake;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use rand::Rng;
use rayon::prelude::*;

use crate::error::DatasetError;
use crate::prompt::{Prompt, PromptBody};
use crate::synth::{item_rng, Prefix, Synth};
use crate::textgen::TextGen;
use crate::tokenizer::Tokenizer;

/// Mooncake's block size: each hash id stands for this many tokens.
pub const DEFAULT_BLOCK_SIZE: u64 = 512;

/// The trace file formats.
#[derive(Debug, Clone, PartialEq)]
pub enum TraceFormat {
    /// JSONL `{"timestamp": ms, "input_length", "output_length", "hash_ids": [...]}`; each hash
    /// id is one block of `block_size` tokens (the last one partial).
    Mooncake {
        /// Tokens per hash id ([`DEFAULT_BLOCK_SIZE`] in Mooncake's traces).
        block_size: u64,
    },
    /// Azure LLM inference trace CSV: `TIMESTAMP,ContextTokens,GeneratedTokens`, datetimes.
    Azure,
    /// BurstGPT CSV: `Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type`,
    /// seconds; rows can be kept by model and log type (case-insensitive, exact).
    BurstGpt {
        /// Keep only rows of this `Model`; `None`: every model.
        model: Option<String>,
        /// Keep only rows of this `Log Type`; `None`: every type.
        log_type: Option<String>,
    },
}

/// Which part of the trace to replay, and how fast.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceOptions {
    /// Divide every time offset by this (2.0 replays twice as fast). Must be > 0.
    pub speedup: f64,
    /// Replay the rows at offsets `[window_start, window_start + window_duration)` from the
    /// trace's first row (before speedup); arrivals count from `window_start`.
    pub window_start: Duration,
    /// The window's length; `None`: to the end of the trace.
    pub window_duration: Option<Duration>,
    /// Keep at most this many requests (the first ones of the window).
    pub max_requests: Option<usize>,
}

impl Default for TraceOptions {
    fn default() -> Self {
        Self {
            speedup: 1.0,
            window_start: Duration::ZERO,
            window_duration: None,
            max_requests: None,
        }
    }
}

/// A trace file to replay.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceSpec {
    /// The trace file.
    pub path: PathBuf,
    /// Its format.
    pub format: TraceFormat,
    /// Which part of it to replay, and how fast.
    pub options: TraceOptions,
}

/// One parsed row: its time in ns (any origin), lengths, and for Mooncake its hash ids.
#[derive(Debug, Clone)]
pub(crate) struct Row {
    pub line: usize,
    pub time_ns: i64,
    pub input: u64,
    pub output: u64,
    pub hash_ids: Vec<u64>,
}

/// What happened to the trace's rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TraceStats {
    /// Data rows in the file.
    pub rows: usize,
    /// Rows left out by the model / log type filter.
    pub filtered: usize,
    /// Rows outside the window.
    pub outside_window: usize,
    /// Rows with 0 input or 0 output tokens (BurstGPT marks failed requests with 0 response
    /// tokens), skipped.
    pub zero_length: usize,
    /// Rows past `max_requests`.
    pub over_cap: usize,
}

/// A piece of a prompt's text.
#[derive(Debug, Clone)]
enum Piece {
    /// The first `len` bytes of shared block `block`.
    Block {
        block: u32,
        len: u32,
    },
    Own(Box<str>),
}

/// The requests of a trace, ready to replay: `arrivals_ns[i]` is when request `i` is due,
/// counted from the replay's start (non-decreasing).
#[derive(Debug, Clone)]
pub struct TraceWorkload {
    /// When request `i` is due, ns from the replay's start.
    pub arrivals_ns: Vec<u64>,
    /// Exact prompt tokens of request `i` (the trace's input length).
    pub input_tokens: Vec<u64>,
    /// Requested output tokens of request `i` (the trace's output length).
    pub output_tokens: Vec<u64>,
    /// The 1-based file line of request `i`.
    pub lines: Vec<usize>,
    /// What happened to the rows that were not kept.
    pub stats: TraceStats,
    blocks: Arc<Vec<Box<str>>>,
    pieces: Vec<Box<[Piece]>>,
}

impl TraceWorkload {
    /// How many requests the replay sends.
    pub fn len(&self) -> usize {
        self.arrivals_ns.len()
    }

    /// True when no row was kept.
    pub fn is_empty(&self) -> bool {
        self.arrivals_ns.is_empty()
    }

    /// Append request `i`'s prompt text to `out`.
    pub fn write_text(&self, i: usize, out: &mut String) {
        for piece in self.pieces[i].iter() {
            match piece {
                Piece::Block { block, len } => {
                    out.push_str(&self.blocks[*block as usize][..*len as usize])
                }
                Piece::Own(text) => out.push_str(text),
            }
        }
    }

    /// Request `i`'s prompt text.
    pub fn text(&self, i: usize) -> String {
        let mut out = String::with_capacity(self.input_tokens[i] as usize * 7);
        self.write_text(i, &mut out);
        out
    }

    /// Request `i` as a prompt (a completion text; the chat API sends it as one user message).
    pub fn prompt(&self, i: usize) -> Prompt {
        Prompt {
            body: PromptBody::Text(self.text(i)),
            prompt_tokens: self.input_tokens[i],
            output_tokens: Some(self.output_tokens[i]),
        }
    }

    /// All prompts in order, assembled one at a time.
    pub fn prompts(&self) -> impl Iterator<Item = Prompt> + '_ {
        (0..self.len()).map(|i| self.prompt(i))
    }
}

/// Parse the trace, select its rows, and build prompts of exact lengths, deterministic for
/// `seed`.
pub fn load_trace(
    spec: &TraceSpec,
    tokenizer: &Tokenizer,
    seed: u64,
) -> Result<TraceWorkload, DatasetError> {
    let o = &spec.options;
    if !(o.speedup.is_finite() && o.speedup > 0.0) {
        return Err(DatasetError::Spec(format!(
            "trace speedup must be a positive number, got {}",
            o.speedup
        )));
    }
    let path = spec.path.as_path();
    let (selected, mut stats, total, filtered) = match &spec.format {
        &TraceFormat::Mooncake { block_size } => {
            if block_size == 0 {
                return Err(DatasetError::Spec("trace block size must be at least 1".into()));
            }
            // Read twice, a line at a time: the first instant, then the rows the window and
            // the cap keep (a 740 MB trace capped at 5 requests holds 5 rows, not the file).
            let (mut t0, mut total) = (None::<i64>, 0);
            mooncake::for_each_row(path, block_size, |r| {
                t0 = Some(t0.map_or(r.time_ns, |t| t.min(r.time_ns)));
                total += 1;
            })?;
            let Some(t0) = t0 else {
                return Err(DatasetError::Empty { path: path.into(), expected: "trace rows" });
            };
            let mut sel = Selector::new(t0, o);
            mooncake::for_each_row(path, block_size, |r| sel.push(r))?;
            let (selected, stats) = sel.finish();
            (selected, stats, total, 0)
        }
        format => {
            let text = crate::error::read_text(&spec.path)?;
            let (rows, filtered) = match format {
                TraceFormat::BurstGpt { model, log_type } => {
                    csv::parse_burstgpt(path, &text, model.as_deref(), log_type.as_deref())?
                }
                _ => (csv::parse_azure(path, &text)?, 0),
            };
            let total = rows.len() + filtered;
            if total == 0 {
                return Err(DatasetError::Empty { path: path.into(), expected: "trace rows" });
            }
            let (selected, stats) = select(rows, o);
            (selected, stats, total, filtered)
        }
    };
    stats.rows = total;
    stats.filtered = filtered;
    let block_size = match spec.format {
        TraceFormat::Mooncake { block_size } => Some(block_size),
        _ => None,
    };
    build(selected, stats, block_size, tokenizer, seed)
}

/// Window, zero-length rows and cap, in that order; returns rows with their arrival offsets.
pub(crate) fn select(rows: Vec<Row>, o: &TraceOptions) -> (Vec<(u64, Row)>, TraceStats) {
    let Some(t0) = rows.iter().map(|r| r.time_ns).min() else {
        return (Vec::new(), TraceStats::default());
    };
    let mut sel = Selector::new(t0, o);
    rows.into_iter().for_each(|r| sel.push(r));
    sel.finish()
}

/// The selection of rows fed one at a time in any order, once the trace's first instant
/// `t0` is known: the window and zero-length rows are counted as they come, and with a cap
/// only the earliest rows are held (at most about twice the cap).
pub(crate) struct Selector<'o> {
    o: &'o TraceOptions,
    t0: i64,
    start: u64,
    end: Option<u64>,
    stats: TraceStats,
    kept: Vec<Row>,
}

impl<'o> Selector<'o> {
    pub(crate) fn new(t0: i64, o: &'o TraceOptions) -> Selector<'o> {
        let start = u64::try_from(o.window_start.as_nanos()).unwrap_or(u64::MAX);
        let end = o
            .window_duration
            .map(|d| start.saturating_add(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)));
        Selector { o, t0, start, end, stats: TraceStats::default(), kept: Vec::new() }
    }

    pub(crate) fn push(&mut self, row: Row) {
        let offset = row.time_ns.abs_diff(self.t0);
        if offset < self.start || self.end.is_some_and(|e| offset >= e) {
            self.stats.outside_window += 1;
        } else if row.input == 0 || row.output == 0 {
            self.stats.zero_length += 1;
        } else {
            self.kept.push(row);
            if let Some(m) = self.o.max_requests {
                if self.kept.len() >= 2 * m + 1024 {
                    self.trim(m);
                }
            }
        }
    }

    /// Keep the `m` earliest rows (file order among equal instants); the rest are over cap.
    fn trim(&mut self, m: usize) {
        self.kept.sort_by_key(|r| (r.time_ns, r.line));
        self.stats.over_cap += self.kept.len().saturating_sub(m);
        self.kept.truncate(m);
    }

    pub(crate) fn finish(mut self) -> (Vec<(u64, Row)>, TraceStats) {
        match self.o.max_requests {
            Some(m) => self.trim(m),
            None => self.kept.sort_by_key(|r| (r.time_ns, r.line)),
        }
        let (t0, start, speedup) = (self.t0, self.start, self.o.speedup);
        let out = self
            .kept
            .into_iter()
            .map(|row| {
                let delta = row.time_ns.abs_diff(t0) - start;
                let arrival =
                    if speedup == 1.0 { delta } else { (delta as f64 / speedup).round() as u64 };
                (arrival, row)
            })
            .collect();
        (out, self.stats)
    }
}

/// Shared block texts, and each request's pieces.
type Assembly = (Vec<Box<str>>, Vec<Box<[Piece]>>);

/// Filler blocks for traces without content.
const FILLER_BLOCKS: u64 = 64;
const FILLER_TOKENS: u64 = 512;
/// Unique tokens at the start of every content-less request.
const HEAD_TOKENS: u64 = 32;
/// Stream bases, far from the per-request streams (file line numbers).
const BLOCK_STREAM: u64 = 1 << 60;
const FILLER_STREAM: u64 = 1 << 59;

/// Longest prompt a trace may ask for (guards allocation).
const MAX_INPUT: u64 = 10_000_000;

fn build(
    selected: Vec<(u64, Row)>,
    stats: TraceStats,
    block_size: Option<u64>,
    tok: &Tokenizer,
    seed: u64,
) -> Result<TraceWorkload, DatasetError> {
    if let Some((_, r)) = selected.iter().find(|(_, r)| r.input > MAX_INPUT) {
        return Err(DatasetError::Spec(format!(
            "trace line {}: input length {} is too long; at most {MAX_INPUT} tokens are generated",
            r.line, r.input
        )));
    }
    let gen = TextGen::new(tok)?;
    let (blocks, pieces) = match block_size {
        Some(bs) => mooncake_pieces(&selected, bs, &gen, seed)?,
        None => filler_pieces(&selected, &gen, seed)?,
    };
    let mut w = TraceWorkload {
        arrivals_ns: selected.iter().map(|(a, _)| *a).collect(),
        input_tokens: selected.iter().map(|(_, r)| r.input).collect(),
        output_tokens: selected.iter().map(|(_, r)| r.output).collect(),
        lines: selected.iter().map(|(_, r)| r.line).collect(),
        stats,
        blocks: Arc::new(blocks),
        pieces,
    };
    if !gen.composes() {
        repair(&mut w, tok, seed)?;
    }
    Ok(w)
}

/// Texts of every distinct hash id, each as long as its longest use, and each request's
/// pieces: full blocks, then a prefix of the last block.
fn mooncake_pieces(
    selected: &[(u64, Row)],
    bs: u64,
    gen: &TextGen<'_>,
    seed: u64,
) -> Result<Assembly, DatasetError> {
    use std::collections::HashMap;
    // Distinct ids in order of first use, with the most tokens any use needs.
    let mut index: HashMap<u64, u32> = HashMap::new();
    let mut need: Vec<(u64, u64)> = Vec::new();
    for (_, r) in selected {
        let n = r.hash_ids.len() as u64;
        for (k, &h) in r.hash_ids.iter().enumerate() {
            let len = if (k as u64) + 1 < n { bs } else { r.input - (n - 1) * bs };
            let slot = *index.entry(h).or_insert_with(|| {
                need.push((h, 0));
                (need.len() - 1) as u32
            });
            let e = &mut need[slot as usize].1;
            *e = (*e).max(len);
        }
    }
    let blocks: Vec<Box<str>> = need
        .par_iter()
        .map(|&(h, len)| {
            gen.text(&mut item_rng(seed, BLOCK_STREAM ^ h), len as usize)
                .map(String::into_boxed_str)
        })
        .collect::<Result<_, _>>()?;
    let pieces = selected
        .par_iter()
        .map(|(_, r)| {
            let n = r.hash_ids.len() as u64;
            r.hash_ids
                .iter()
                .enumerate()
                .map(|(k, h)| {
                    let block = index[h];
                    let text = &blocks[block as usize];
                    let tokens = if (k as u64) + 1 < n { bs } else { r.input - (n - 1) * bs };
                    let len = if tokens == need[block as usize].1 {
                        text.len()
                    } else if gen.composes() {
                        TextGen::prefix(text, tokens as usize).len()
                    } else {
                        // Checked path: a partial use gets its own exact text of that length,
                        // the same for every use of (id, length).
                        let own = gen.text(
                            &mut item_rng(seed, BLOCK_STREAM ^ h ^ (tokens << 40)),
                            tokens as usize,
                        );
                        return own.map(|t| Piece::Own(t.into_boxed_str()));
                    };
                    Ok(Piece::Block { block, len: len as u32 })
                })
                .collect::<Result<Box<[Piece]>, DatasetError>>()
        })
        .collect::<Result<_, _>>()?;
    Ok((blocks, pieces))
}

/// A unique head of up to [`HEAD_TOKENS`] tokens, then filler blocks drawn from a pool, the
/// last one cut to reach the exact length.
fn filler_pieces(
    selected: &[(u64, Row)],
    gen: &TextGen<'_>,
    seed: u64,
) -> Result<Assembly, DatasetError> {
    let longest = selected.iter().map(|(_, r)| r.input).max().unwrap_or(0);
    let pool = if longest > HEAD_TOKENS { FILLER_BLOCKS } else { 0 };
    let blocks: Vec<Box<str>> = (0..pool)
        .into_par_iter()
        .map(|b| {
            gen.text(&mut item_rng(seed, FILLER_STREAM + b), FILLER_TOKENS as usize)
                .map(String::into_boxed_str)
        })
        .collect::<Result<_, _>>()?;
    let pieces = selected
        .par_iter()
        .map(|(_, r)| {
            // The request's own stream, keyed by its file line: a window does not change it.
            let mut rng = item_rng(seed, r.line as u64);
            let head = r.input.min(HEAD_TOKENS);
            let mut pieces = vec![Piece::Own(gen.text(&mut rng, head as usize)?.into_boxed_str())];
            let mut left = r.input - head;
            while left > 0 {
                let block = rng.random_range(0..pool) as u32;
                let tokens = left.min(FILLER_TOKENS);
                let text = &blocks[block as usize];
                if tokens == FILLER_TOKENS {
                    pieces.push(Piece::Block { block, len: text.len() as u32 });
                } else if gen.composes() {
                    let len = TextGen::prefix(text, tokens as usize).len() as u32;
                    pieces.push(Piece::Block { block, len });
                } else {
                    pieces.push(Piece::Own(gen.text(&mut rng, tokens as usize)?.into_boxed_str()));
                }
                left -= tokens;
            }
            Ok(pieces.into_boxed_slice())
        })
        .collect::<Result<_, DatasetError>>()?;
    Ok((blocks, pieces))
}

/// Checked path (a tokenizer whose counts do not add up over joined texts): count every
/// assembled prompt, and where it is off, replace its last piece by text generated to make the
/// whole exactly the trace's length (the earlier pieces, and so the shared prefix, are kept).
fn repair(w: &mut TraceWorkload, tok: &Tokenizer, seed: u64) -> Result<(), DatasetError> {
    let synth = Synth::new(tok)?;
    let fixes: Vec<Option<Box<str>>> = (0..w.len())
        .into_par_iter()
        .map(|i| {
            let want = w.input_tokens[i] as usize;
            if tok.count(&w.text(i)) == want {
                return Ok(None);
            }
            let pieces = &w.pieces[i];
            let mut head = String::new();
            let keep = &pieces[..pieces.len() - 1];
            for piece in keep {
                match piece {
                    Piece::Block { block, len } => {
                        head.push_str(&w.blocks[*block as usize][..*len as usize])
                    }
                    Piece::Own(t) => head.push_str(t),
                }
            }
            let ids = tok.encode(&head);
            let prefix = Prefix { text: head, ids };
            let mut rng = item_rng(seed, BLOCK_STREAM + 1 + w.lines[i] as u64);
            let full = synth.text(&mut rng, &prefix, want.max(prefix.ids.len()))?;
            if tok.count(&full) != want {
                return Err(DatasetError::ExactLength {
                    target: want,
                    tokenizer: tok.name().to_string(),
                    rounds: 1,
                });
            }
            Ok(Some(full[prefix.text.len()..].into()))
        })
        .collect::<Result<_, DatasetError>>()?;
    for (i, fix) in fixes.into_iter().enumerate() {
        if let Some(tail) = fix {
            let mut pieces = w.pieces[i].to_vec();
            pieces.pop();
            pieces.push(Piece::Own(tail));
            w.pieces[i] = pieces.into_boxed_slice();
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(line: usize, t_ms: i64, input: u64, output: u64) -> Row {
        Row { line, time_ns: t_ms * 1_000_000, input, output, hash_ids: vec![] }
    }

    fn arrivals(rows: Vec<Row>, o: &TraceOptions) -> (Vec<(u64, usize)>, TraceStats) {
        let (sel, stats) = select(rows, o);
        (sel.into_iter().map(|(a, r)| (a, r.line)).collect(), stats)
    }

    #[test]
    fn window_speedup_and_cap_arithmetic() {
        let rows = || {
            vec![
                row(1, 1000, 5, 5),
                row(2, 1500, 5, 5),
                row(3, 3000, 5, 0),
                row(4, 2500, 5, 5),
                row(5, 4000, 5, 5),
                row(6, 6000, 5, 5),
            ]
        };
        let (a, s) = arrivals(rows(), &TraceOptions::default());
        assert_eq!(
            a,
            vec![
                (0, 1),
                (500_000_000, 2),
                (1_500_000_000, 4),
                (3_000_000_000, 5),
                (5_000_000_000, 6)
            ]
        );
        assert_eq!(s.zero_length, 1);
        let o = TraceOptions {
            speedup: 2.0,
            window_start: Duration::from_millis(500),
            window_duration: Some(Duration::from_millis(3000)),
            max_requests: Some(2),
        };
        // Window [500, 3500) ms from the first row: lines 2 (500), 4 (1500), 3 (2000, zero
        // output), 5 (3000); capped at 2; arrivals (offset − 500) / 2.
        let (a, s) = arrivals(rows(), &o);
        assert_eq!(a, vec![(0, 2), (500_000_000, 4)]);
        assert_eq!(
            s,
            TraceStats { rows: 0, filtered: 0, outside_window: 2, zero_length: 1, over_cap: 1 }
        );
    }

    #[test]
    fn a_capped_selection_holds_the_earliest_rows_whatever_their_order() {
        // 5,000 rows out of order (times repeat), cap 7: the 7 earliest by time, then line,
        // as a sort of the whole would give; everything else over the cap.
        let rows: Vec<Row> =
            (0..5000usize).map(|i| row(i + 1, ((i * 7919) % 4999) as i64 / 3, 5, 5)).collect();
        let mut sorted = rows.clone();
        sorted.sort_by_key(|r| (r.time_ns, r.line));
        let want: Vec<usize> = sorted.iter().take(7).map(|r| r.line).collect();
        let o = TraceOptions { max_requests: Some(7), ..TraceOptions::default() };
        let (a, s) = arrivals(rows, &o);
        assert_eq!(a.iter().map(|(_, l)| *l).collect::<Vec<_>>(), want);
        assert_eq!(s.over_cap, 4993);
    }
}
