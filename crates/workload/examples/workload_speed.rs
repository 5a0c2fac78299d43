//! Time the preparation of a synthetic multi-turn workload and of a Mooncake trace (used by
//! `scripts/workload-speed.sh`).
//!
//! ```text
//! workload_speed gen-mooncake OUT.jsonl LINES [SEED]
//! workload_speed sessions TOKENIZER NUM_SESSIONS
//! workload_speed trace mooncake|azure|burstgpt PATH TOKENIZER
//! ```
//!
//! The generated trace has the shape of Mooncake's conversation trace: 2,000 "documents" of
//! up to 16 shared 512-token blocks; each request reuses the first 1 to 16 blocks of one
//! document and ends with its own partial block (1 to 512 tokens); arrivals ~10 ms apart.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use servelab_workload::{
    load_sessions, load_trace, SessionSource, SessionSpec, SyntheticSessions, ThinkTime, Tokenizer,
    TraceFormat, TraceOptions, TraceSpec, DEFAULT_BLOCK_SIZE,
};

const DOCUMENTS: u64 = 2000;
const DOC_BLOCKS: u64 = 16;

fn gen_mooncake(out: &PathBuf, lines: u64, seed: u64) -> std::io::Result<()> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut w = std::io::BufWriter::new(std::fs::File::create(out)?);
    let mut t_ms = 0u64;
    for line in 0..lines {
        let unique = DOCUMENTS * DOC_BLOCKS + line;
        let doc = rng.random_range(0..DOCUMENTS);
        let shared = rng.random_range(1..=DOC_BLOCKS);
        let last = rng.random_range(1..=DEFAULT_BLOCK_SIZE);
        let mut ids: Vec<String> =
            (0..shared).map(|b| (doc * DOC_BLOCKS + b).to_string()).collect();
        ids.push(unique.to_string());
        let input = shared * DEFAULT_BLOCK_SIZE + last;
        let output = rng.random_range(1..=1000);
        writeln!(
            w,
            "{{\"timestamp\": {t_ms}, \"input_length\": {input}, \"output_length\": {output}, \
             \"hash_ids\": [{}]}}",
            ids.join(", ")
        )?;
        t_ms += rng.random_range(0..=20);
    }
    w.flush()
}

fn tokenizer(spec: &str) -> Result<(Tokenizer, Duration), String> {
    let start = Instant::now();
    let tok = Tokenizer::from_spec(spec).map_err(|e| e.to_string())?;
    Ok((tok, start.elapsed()))
}

fn run(args: &[String]) -> Result<(), String> {
    match args {
        [cmd, out, lines, rest @ ..] if cmd == "gen-mooncake" => {
            let lines = lines.parse().map_err(|_| format!("bad line count {lines}"))?;
            let seed = rest.first().and_then(|s| s.parse().ok()).unwrap_or(0);
            gen_mooncake(&PathBuf::from(out), lines, seed).map_err(|e| e.to_string())
        }
        [cmd, tok, n] if cmd == "sessions" => {
            let n: usize = n.parse().map_err(|_| format!("bad session count {n}"))?;
            let (tok, load_time) = tokenizer(tok)?;
            let spec = SessionSpec {
                source: SessionSource::Synthetic(SyntheticSessions {
                    turns_min: 2,
                    turns_max: 8,
                    input_len: 256,
                    output_len: 128,
                    range_ratio: 0.5,
                    system_prompt_len: 1024,
                }),
                think_time: ThinkTime::Exponential { mean: Duration::from_secs(2) },
            };
            let start = Instant::now();
            let w = load_sessions(&spec, n, &tok, 0).map_err(|e| e.to_string())?;
            let took = start.elapsed();
            let tokens: u64 = w.sessions.iter().flat_map(|s| &s.turns).map(|t| t.user_tokens).sum();
            println!(
                "sessions  {n} sessions, {} turns, {:.1} M user tokens (2-8 turns of 128-384 \
                 tokens, shared 1,024-token system prompt), {}: prepare {:.3} s (tokenizer load \
                 {:.3} s)",
                w.total_turns(),
                tokens as f64 / 1e6,
                tok.name(),
                took.as_secs_f64(),
                load_time.as_secs_f64()
            );
            Ok(())
        }
        [cmd, format, path, tok] if cmd == "trace" => {
            let format = match format.as_str() {
                "mooncake" => TraceFormat::Mooncake { block_size: DEFAULT_BLOCK_SIZE },
                "azure" => TraceFormat::Azure,
                "burstgpt" => TraceFormat::BurstGpt { model: None, log_type: None },
                other => return Err(format!("unknown trace format {other}")),
            };
            let (tok, load_time) = tokenizer(tok)?;
            let spec =
                TraceSpec { path: PathBuf::from(path), format, options: TraceOptions::default() };
            let start = Instant::now();
            let w = load_trace(&spec, &tok, 0).map_err(|e| e.to_string())?;
            let took = start.elapsed();
            let tokens: u64 = w.input_tokens.iter().sum();
            // Assembling every prompt once, one at a time (the text the runner writes into
            // bodies, a bounded window ahead of its sends).
            let start = Instant::now();
            let mut buf = String::new();
            let mut bytes = 0usize;
            for i in 0..w.len() {
                buf.clear();
                w.write_text(i, &mut buf);
                bytes += buf.len();
            }
            let assemble = start.elapsed();
            println!(
                "trace     {} requests, {:.1} M prompt tokens, {}: prepare {:.3} s (tokenizer \
                 load {:.3} s); assembling all prompt texts ({:.1} GB) {:.3} s",
                w.len(),
                tokens as f64 / 1e6,
                tok.name(),
                took.as_secs_f64(),
                load_time.as_secs_f64(),
                bytes as f64 / 1e9,
                assemble.as_secs_f64()
            );
            Ok(())
        }
        _ => Err("usage: workload_speed gen-mooncake OUT LINES [SEED] | sessions TOKENIZER N | \
                  trace FORMAT PATH TOKENIZER"
            .into()),
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Err(e) = run(&args) {
        eprintln!("workload_speed: {e}");
        std::process::exit(2);
    }
}
