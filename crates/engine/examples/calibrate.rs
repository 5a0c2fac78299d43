//! `servelab predict calibrate` is the command; this example is kept for working on the engine
//! crate alone.
//!
//! Fits the calibration of an engine file to a measured Markdown sweep table and prints the
//! per-cell errors and median absolute % errors before and after.
//!
//! `cargo run --release -p servelab-engine --example calibrate -- [--defaults] ENGINE.yaml
//! TABLE.md [param,param,...] [max_evals]`; `--defaults` starts from the engine family's default
//! calibration instead of the engine file's. (params: eta_gemm, eta_attn, eta_mem, eta_link,
//! step_overhead_us, layer_overhead_us, piecewise_layer_us, per_seq_overhead_us,
//! tp_step_overhead_us, tp_per_seq_overhead_us, frontend_us, allreduce_base_us,
//! allreduce_hop_us; default eta_gemm,layer_overhead_us,per_seq_overhead_us,frontend_us, with
//! piecewise_layer_us for layer_overhead_us on a vLLM V1 before 0.11: `FitOptions::for_engine`).
#![allow(clippy::print_stdout)]

use servelab_engine::{calibrate, load_engine_file, parse_sweep_tables, FitOptions, FitParam};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let all: Vec<String> = std::env::args().skip(1).collect();
    let defaults = all.iter().any(|a| a == "--defaults");
    let args: Vec<String> = all.into_iter().filter(|a| a != "--defaults").collect();
    let engine = args.first().map_or("examples/engines/qwen3-32b-h20-tp4.yaml", String::as_str);
    let table = args
        .get(1)
        .map_or("crates/engine/testdata/calibration-qwen3-32b-h20-vllm-v1.md", String::as_str);
    let mut cfg = load_engine_file(engine)?;
    if defaults {
        cfg.calibration = cfg.engine.calibration_defaults();
    }
    let mut opts = FitOptions::for_engine(&cfg);
    if let Some(list) = args.get(2) {
        opts.params = list
            .split(',')
            .map(|s| FitParam::parse(s.trim()).ok_or_else(|| format!("unknown parameter `{s}`")))
            .collect::<Result<_, _>>()?;
    }
    if let Some(n) = args.get(3) {
        opts.max_evals = n.parse()?;
    }
    let tables = parse_sweep_tables(&std::fs::read_to_string(table)?)?;
    let t0 = std::time::Instant::now();
    let r = calibrate(&cfg, &tables, &opts)?;
    println!(
        "engine {engine}, table {table}: {} evaluations in {:.1} s\n",
        r.evals,
        t0.elapsed().as_secs_f64()
    );
    println!("{}", servelab_engine::calibrate::report_markdown(&r));
    Ok(())
}
