//! GPU energy and cost in every run format: the text block's section, the run CSV's columns
//! and the JSON's `servelab.gpu` object (checked against the shipped schema), on the fixed
//! run with two GPUs read before, during and after it.

use servelab_outputs::*;
use servelab_records::{GpuReading, GpuScrape};

use crate::render::fixture;

/// The GPU section of servelab's block, to the next section's rule.
fn gpu_section(block: &str) -> String {
    let from = block.find("------GPU Energy").expect("a GPU section");
    let rest = &block[from..];
    let end = rest[1..].find("\n---").map_or(rest.len(), |i| i + 2);
    rest[..end].to_string()
}

/// Readings 1 s before the origin, at 0.5 and 1.5 s in the fixed run's window [0, 2] s, and
/// at 2.5 s: GPU 0 with its energy counter (650 J over the window), GPU 1 power only, twice
/// GPU 0's power (1325 J).
fn scrapes() -> Vec<GpuScrape> {
    let power = [100.0, 400.0, 300.0, 200.0];
    let energy = [1_000_000.0, 1_300_000.0, 1_700_000.0, 2_000_000.0];
    let gpu = |i: usize, power_w: f64, energy_mj: Option<f64>| GpuReading {
        gpu: i.to_string(),
        uuid: Some(format!("GPU-000{i}")),
        model: Some("NVIDIA H100 80GB HBM3".into()),
        host: Some("gpu-node-a".into()),
        power_w: Some(power_w),
        energy_mj,
        util_pct: Some(90.0 - 10.0 * i as f64),
        fb_used_mib: Some(73_238.0),
        fb_free_mib: Some(7_412.0),
        sm_clock_mhz: Some(1980.0),
        mem_clock_mhz: Some(2619.0),
    };
    [-1000.0, 500.0, 1500.0, 2500.0]
        .iter()
        .enumerate()
        .map(|(k, &t_ms)| GpuScrape {
            t_ms,
            gpus: vec![gpu(0, power[k], Some(energy[k])), gpu(1, power[k] * 2.0, None)],
            error: None,
        })
        .collect()
}

#[test]
fn gpu_energy_and_cost_in_text_csv_and_json() {
    let mut s = fixture();
    s.info.gpus = Some(4);
    assert_eq!(s.duration_s, 2.0);
    servelab_metrics::gpu::attach(
        &mut s,
        &scrapes(),
        Some("http://gpu-node-a:9400/metrics"),
        Some(2.5),
    );
    let g = s.gpu.as_ref().unwrap();
    assert_eq!(g.energy_j, Some(1975.0));
    assert_eq!(g.joules_per_output_token, Some(1975.0 / s.total_output_tokens as f64));
    let block = servelab_block(&s);
    insta::assert_snapshot!("text", gpu_section(&block));
    assert!(block.contains(
        "! --gpus says 4 GPUs, the GPU telemetry saw 2: the cost counts 4 and the energy the 2 \
         seen; check which GPUs serve the deployment\n"
    ));
    insta::assert_snapshot!("csv_summary", csv::render_csv_summary(&s));
    let v = result_value(&s, false);
    insta::assert_json_snapshot!("json", v["servelab"]["gpu"]);
    let schema_text = include_str!("../../../../docs/schema/servelab-result-v1.schema.json");
    let schema: serde_json::Value = serde_json::from_str(schema_text).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let errors: Vec<String> = validator.iter_errors(&v).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "{errors:#?}");
    // A price and --gpus alone: the cost, and no telemetry lines.
    let mut s = fixture();
    s.info.gpus = Some(8);
    servelab_metrics::gpu::attach(&mut s, &[], None, Some(2.5));
    insta::assert_snapshot!("text_cost_only", gpu_section(&servelab_block(&s)));
    let v = result_value(&s, false);
    let errors: Vec<String> = validator.iter_errors(&v).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "{errors:#?}");
}
