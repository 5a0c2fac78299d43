//! Times a 16-point sweep (3000:150 and 1000:1000 × concurrency 1..128, 500 requests per
//! point) of an engine file, default `examples/engines/qwen3-32b-h20-tp4.yaml`.
//!
//! `cargo run --release -p servelab-engine --example predict_speed [ENGINE.yaml]`
#![allow(clippy::print_stdout)]

use std::time::Instant;

use servelab_engine::{load_engine_file, predict_point, IslOsl};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "examples/engines/qwen3-32b-h20-tp4.yaml".to_string());
    let cfg = load_engine_file(&path)?;
    let scenarios = [IslOsl { isl: 3000, osl: 150 }, IslOsl { isl: 1000, osl: 1000 }];
    let total = Instant::now();
    println!("engine: {path}");
    println!("| ISL:OSL | Conc | req/s | out tok/s | mean TTFT ms | mean TPOT ms | wall ms |");
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for sc in scenarios {
        for c in [1u32, 2, 4, 8, 16, 32, 64, 128] {
            let t = Instant::now();
            let p = predict_point(&cfg, sc, c, 500)?;
            println!(
                "| {sc} | {c} | {:.2} | {:.1} | {:.1} | {:.2} | {:.0} |",
                p.request_throughput,
                p.output_throughput,
                p.mean_ttft_ms,
                p.mean_tpot_ms,
                t.elapsed().as_secs_f64() * 1e3
            );
        }
    }
    println!("16 points, 500 requests each: {:.2} s", total.elapsed().as_secs_f64());
    Ok(())
}
