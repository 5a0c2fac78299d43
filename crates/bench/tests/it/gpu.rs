//! A run beside a fake DCGM exporter (`testdata/dcgm.rs`, serving recorded exporter text whose
//! values move on at each scrape): the GPU telemetry comes into the summary with the energy,
//! watts and cost of the measured window. The exporter's counter rises with its own clock, so
//! the energy is checked against its rate within the scrapes' timing; every other figure is
//! exact.

use std::time::Duration;

use servelab_bench::Conductor;
use servelab_metrics::gpu::EnergyMethod;
use servelab_plan::{GpuSource, GpuSpec, RunError};
use servelab_sim::{start, SimConfig};
use tokio::sync::watch;

use crate::common::plan;
use crate::dcgm::{FakeDcgm, ENERGY_RATE_W, IDS};

/// `a` within `rel` of `b`.
fn near(a: f64, b: f64, rel: f64) -> bool {
    (a - b).abs() <= b.abs() * rel
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_reads_a_dcgm_exporter_and_reports_energy_and_cost() {
    let dcgm = FakeDcgm::start(true).await;
    let sim = start(SimConfig::fixed(5.0, 1.0).with_port(0)).await.unwrap();
    let (_stop, interrupt) = watch::channel(false);
    let mut p = plan(&sim.base_url());
    p.limits.gpu = GpuSpec {
        source: Some(GpuSource::Dcgm(dcgm.url.clone())),
        interval: Duration::from_millis(100),
        hourly_cost_usd: Some(2.5),
    };
    p.record.gpus = Some(2);
    let s = Conductor::new(interrupt.clone()).bench(&p).await.unwrap().summary;
    let g = s.gpu.as_ref().expect("the run has GPU figures");
    assert_eq!(g.source.as_deref(), Some(dcgm.url.as_str()));
    assert_eq!((g.scrapes, g.failed_scrapes), (dcgm.scrapes(), 0));
    assert!(g.scrapes >= 10, "a reading every 100 ms over about 2 s: {}", g.scrapes);
    assert_eq!((g.gpus_seen, g.gpus_declared, g.cost_gpus), (2, Some(2), Some(2)));
    let w: Vec<String> = s.warnings.iter().map(|w| w.to_string()).collect();
    assert!(!w.iter().any(|w| w.contains("GPU")), "{w:?}");
    assert!(near(g.window_s, s.duration_s, 1e-9), "{} vs {}", g.window_s, s.duration_s);

    let ids: Vec<&str> = g.per_gpu.iter().map(|x| x.id.as_str()).collect();
    assert_eq!(ids, IDS);
    for (x, rate) in g.per_gpu.iter().zip(ENERGY_RATE_W) {
        assert_eq!(x.model.as_deref(), Some("NVIDIA H100 80GB HBM3"));
        assert_eq!(x.energy_method, Some(EnergyMethod::Counter));
        // The counter's rate, within the few ms between the exporter's clock and the scrape's.
        let mean_w = x.mean_w.unwrap();
        assert!(near(mean_w, rate, 0.03), "{} mean {mean_w} W, counter at {rate} W", x.id);
    }
    // The recorded memory and the alternating power: every GPU's higher reading is seen.
    let peaks: Vec<Option<f64>> = g.per_gpu.iter().map(|x| x.peak_w).collect();
    assert_eq!(peaks, [Some(420.0), Some(320.0)]);
    assert_eq!(g.peak_w, Some(420.0));
    assert_eq!(g.per_gpu[0].peak_fb_used_mib, Some(73238.0));
    assert_eq!(g.per_gpu[0].fb_total_mib, Some(73238.0 + 7412.0));
    let util = g.mean_util_pct.unwrap();
    assert!((util - (97.0 + 88.0) / 2.0).abs() < 1e-9, "{util}");
    let sm = g.per_gpu[0].mean_sm_clock_mhz.unwrap();
    assert!((sm - 1980.0).abs() < 1e-9, "{sm}");

    // The run's figures from the GPUs' ones, exactly.
    let energy = g.energy_j.unwrap();
    let sum: f64 = g.per_gpu.iter().map(|x| x.energy_j.unwrap()).sum();
    assert_eq!(energy, sum);
    assert!(near(energy, 720.0 * g.window_s, 0.03), "{energy} J over {} s", g.window_s);
    let tokens = s.total_output_tokens;
    assert_eq!(tokens, 120 * 8);
    assert_eq!(g.joules_per_output_token, Some(energy / tokens as f64));
    let usd = 2.5 * 2.0 * g.window_s * 1e6 / (3600.0 * tokens as f64);
    assert_eq!(g.usd_per_million_output_tokens, Some(usd));
    assert_eq!(g.energy_method, Some(EnergyMethod::Counter));

    // An exporter without the energy counter: the power readings integrated, and a --gpus
    // that disagrees with the GPUs seen is said.
    let no_counter = FakeDcgm::start(false).await;
    p.limits.gpu.source = Some(GpuSource::Dcgm(no_counter.url.clone()));
    p.record.gpus = Some(8);
    let s = Conductor::new(interrupt.clone()).bench(&p).await.unwrap().summary;
    let g = s.gpu.as_ref().unwrap();
    assert_eq!(g.energy_method, Some(EnergyMethod::Power));
    assert!(near(g.energy_j.unwrap(), 720.0 * g.window_s, 0.03), "{:?}", g.energy_j);
    assert_eq!(g.cost_gpus, Some(8));
    let w: Vec<String> = s.warnings.iter().map(|w| w.to_string()).collect();
    assert!(
        w.iter().any(|w| w.starts_with("--gpus says 8 GPUs, the GPU telemetry saw 2")),
        "{w:?}"
    );

    // An exporter that does not answer stops the run before it sends, as a usage error.
    drop(no_counter);
    let gone = dcgm.url.clone();
    drop(dcgm);
    p.limits.gpu.source = Some(GpuSource::Dcgm(gone.clone()));
    let mark = sim.truth_len();
    match Conductor::new(interrupt).bench(&p).await {
        Err(RunError::Usage(m)) => {
            assert!(m.starts_with(&format!("--gpu-metrics {gone}: GET /metrics")), "{m}")
        }
        other => panic!("expected a usage error, got {:?}", other.map(|o| o.summary.completed)),
    }
    assert_eq!(sim.truth_len(), mark, "nothing was sent");
}
