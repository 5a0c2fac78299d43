//! Generate a synthetic ShareGPT file and time `load()` on it (used by
//! `scripts/dataset-load.sh`).
//!
//! ```text
//! dataset_load gen-sharegpt OUT.json N [SEED]
//! dataset_load time SPEC TOKENIZER NUM_PROMPTS
//!     SPEC: sharegpt:PATH | jsonl:PATH | random:INPUT_LEN | prefix:NUM_PREFIXES
//! ```
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use servelab_workload::{load, DatasetSpec, Tokenizer};

/// Common English words, most frequent first.
const COMMON: &[&str] = &[
    "the",
    "of",
    "and",
    "to",
    "in",
    "a",
    "is",
    "that",
    "for",
    "it",
    "as",
    "was",
    "with",
    "be",
    "by",
    "on",
    "not",
    "he",
    "this",
    "are",
    "or",
    "his",
    "from",
    "at",
    "which",
    "but",
    "have",
    "an",
    "had",
    "they",
    "you",
    "were",
    "their",
    "one",
    "all",
    "we",
    "can",
    "her",
    "has",
    "there",
    "been",
    "if",
    "more",
    "when",
    "will",
    "would",
    "who",
    "so",
    "no",
    "model",
    "function",
    "return",
    "value",
    "data",
    "server",
    "request",
    "latency",
    "throughput",
    "explain",
    "write",
    "code",
    "python",
    "example",
    "question",
    "answer",
    "summary",
    "list",
    "because",
    "however",
    "therefore",
    "important",
    "different",
    "system",
    "performance",
    "memory",
    "token",
    "batch",
    "cache",
    "prefix",
    "benchmark",
    "result",
    "error",
    "string",
];

const SYLLABLES: &[&str] = &[
    "ka", "lo", "mi", "ter", "ban", "sun", "ri", "pol", "den", "ax", "vo", "el", "qui", "stra",
    "om", "pe", "tha", "gra", "ny", "ud", "fen", "cor", "li", "mar", "ste", "io", "bre", "zu",
];

/// A vocabulary shaped like prose: the common words, then 20,000 made-up words of 1 to 4
/// syllables (so that, as in real text, many words are rare and not yet counted).
fn vocabulary() -> Vec<String> {
    let mut words: Vec<String> = COMMON.iter().map(|w| w.to_string()).collect();
    let mut rng = StdRng::seed_from_u64(7);
    while words.len() < COMMON.len() + 20_000 {
        let n = rng.random_range(1..=4);
        let w: String = (0..n).map(|_| SYLLABLES[rng.random_range(0..SYLLABLES.len())]).collect();
        words.push(w);
    }
    words
}

/// Zipf-like word choice (weight 1/rank): cumulative weights for a binary search.
fn zipf_cdf(n: usize) -> Vec<f64> {
    let mut acc = 0.0;
    (1..=n)
        .map(|r| {
            acc += 1.0 / r as f64;
            acc
        })
        .collect()
}

/// A log-normal length with the given median, clamped to `[1, max]`.
fn lognormal(rng: &mut StdRng, median: f64, sigma: f64, max: u64) -> u64 {
    // Box-Muller: one standard normal from two uniforms.
    let (u1, u2): (f64, f64) = (rng.random::<f64>().max(1e-12), rng.random());
    let z = (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
    ((median * (sigma * z).exp()) as u64).clamp(1, max)
}

fn sentence(rng: &mut StdRng, vocab: &[String], cdf: &[f64], words: u64) -> String {
    let total = cdf[cdf.len() - 1];
    let mut s = String::with_capacity(words as usize * 7);
    for i in 0..words {
        if i > 0 {
            s.push(if i % 13 == 0 { '\n' } else { ' ' });
        }
        let x = rng.random::<f64>() * total;
        let k = cdf.partition_point(|&c| c < x).min(vocab.len() - 1);
        s.push_str(&vocab[k]);
        if i % 11 == 10 {
            s.push(if i % 3 == 0 { ',' } else { '.' });
        }
    }
    s
}

/// ShareGPT-like lengths: prompts median ~60 words (long tail), answers median ~200 words;
/// some single-turn conversations, as in the real file.
fn gen_sharegpt(out: &PathBuf, n: usize, seed: u64) -> std::io::Result<()> {
    let mut rng = StdRng::seed_from_u64(seed);
    let vocab = vocabulary();
    let cdf = zipf_cdf(vocab.len());
    let mut f = std::io::BufWriter::new(std::fs::File::create(out)?);
    f.write_all(b"[\n")?;
    for i in 0..n {
        let turns = if rng.random_range(0..20) == 0 { 1 } else { 2 * rng.random_range(1..=3) };
        let conv: Vec<serde_json::Value> = (0..turns)
            .map(|t| {
                let (from, words) = if t % 2 == 0 {
                    ("human", lognormal(&mut rng, 60.0, 1.2, 3000))
                } else {
                    ("gpt", lognormal(&mut rng, 200.0, 0.8, 2000))
                };
                serde_json::json!({"from": from, "value": sentence(&mut rng, &vocab, &cdf, words)})
            })
            .collect();
        let entry = serde_json::json!({"id": format!("synthetic-{i}"), "conversations": conv});
        if i > 0 {
            f.write_all(b",\n")?;
        }
        serde_json::to_writer(&mut f, &entry)?;
    }
    f.write_all(b"\n]\n")?;
    f.flush()
}

fn spec(arg: &str) -> Option<DatasetSpec> {
    let (kind, value) = arg.split_once(':')?;
    Some(match kind {
        "sharegpt" => DatasetSpec::ShareGpt { path: value.into(), output_len: None },
        "jsonl" => DatasetSpec::Jsonl { path: value.into() },
        "random" => DatasetSpec::Random {
            input_len: value.parse().ok()?,
            output_len: 128,
            range: servelab_workload::LengthRange::EXACT,
            prefix_len: 0,
        },
        "prefix" => DatasetSpec::Prefix {
            num_prefixes: value.parse().ok()?,
            prefix_len: 256,
            suffix_len: 256,
            output_len: 128,
        },
        _ => return None,
    })
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
        ["gen-sharegpt", out, n, rest @ ..] => {
            let seed = rest.first().map(|s| s.parse()).transpose()?.unwrap_or(0);
            gen_sharegpt(&PathBuf::from(out), n.parse()?, seed)?;
            println!("wrote {n} conversations to {out}");
        }
        ["time", spec_arg, tokenizer, num] => {
            let spec = spec(spec_arg)
                .ok_or("SPEC must be sharegpt:PATH, jsonl:PATH, random:LEN or prefix:N")?;
            let tok = Tokenizer::from_spec(tokenizer)?;
            let num: usize = num.parse()?;
            let start = Instant::now();
            let prompts = load(&spec, num, &tok, 0)?;
            let secs = start.elapsed().as_secs_f64();
            let tokens: u64 = prompts.iter().map(|p| p.prompt_tokens).sum();
            let outputs: u64 = prompts.iter().filter_map(|p| p.output_tokens).sum();
            println!(
                "load({spec_arg}) with {tokenizer}: {} prompts, {tokens} prompt + {outputs} output \
                 tokens in {secs:.3} s ({} threads)",
                prompts.len(),
                rayon::current_num_threads()
            );
        }
        _ => {
            return Err(
                "usage: dataset_load gen-sharegpt OUT N [SEED] | time SPEC TOKENIZER NUM".into()
            )
        }
    }
    Ok(())
}
