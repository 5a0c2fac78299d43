//! How long `summarize` takes on a large synthetic run.
//!
//! `cargo run --release -p servelab-metrics --example summarize_speed -- 10000 256`
//! (requests, chunks per request; each chunk carries 2 tokens).
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::time::Instant;

use servelab_metrics::{summarize, MetricsConfig};
use servelab_records::{Chunk, ChunkKind, Outcome, RequestRecord, RunInfo};

fn main() {
    let mut args = std::env::args().skip(1).map(|a| a.parse::<u64>().ok());
    let requests = args.next().flatten().unwrap_or(10_000);
    let chunks = args.next().flatten().unwrap_or(256);
    let ms = 1_000_000u64;
    let records: Vec<RequestRecord> = (0..requests)
        .map(|i| {
            let start = i * 10 * ms;
            RequestRecord {
                index: i,
                warmup: false,
                scheduled_ns: start,
                intended_ns: start,
                sent_ns: start + 50_000,
                prompt_tokens: Some(512),
                max_tokens: Some(chunks * 2),
                usage: None,
                chunks: (0..chunks)
                    .map(|c| Chunk {
                        t_ns: start + 100 * ms + c * (20 * ms + (i * 7 + c * 13) % 1_000),
                        kind: ChunkKind::Content,
                        text: "ab".into(),
                        tokens: Some(2),
                    })
                    .collect(),
                end_ns: Some(start + 100 * ms + chunks * 20 * ms + ms),
                status: Some(200),
                outcome: Outcome::Success,
                server: None,
                read_lag_ns: None,
                retries: 0,
                session: None,
                stream: Default::default(),
            }
        })
        .collect();
    let t = Instant::now();
    let s = summarize(&records, &RunInfo::default(), &MetricsConfig::default());
    let took = t.elapsed();
    println!(
        "{requests} requests x {chunks} chunks: summarize took {:.1} ms \
         (itl samples {}, mean ITL {:.3} ms, peak {:.0} tok/s, peak concurrency {})",
        took.as_secs_f64() * 1e3,
        s.itl_ms.count,
        s.itl_ms.mean,
        s.peak_output_throughput,
        s.peak_concurrency
    );
}
