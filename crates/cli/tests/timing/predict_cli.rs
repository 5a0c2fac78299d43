//! The simulator serving an engine file in wall-clock time against `predict` of the same plan.

use std::path::Path;

/// The simulator serving an engine file in wall-clock time reports what the engine model
/// predicts for the same plan: mean TPOT and output throughput within 10 %.
#[test]
fn bench_against_sim_engine_matches_the_prediction() {
    let _serial = crate::serial::one_at_a_time();
    use clap::Parser;
    use servelab::args::{Cli, Command as Cmd};

    let engine =
        format!("{}/../../examples/engines/qwen3-32b-h20-tp4.yaml", env!("CARGO_MANIFEST_DIR"));
    let argv = [
        "servelab",
        "bench",
        "--sim-engine",
        &engine,
        "--num-prompts",
        "16",
        "--random-input-len",
        "512",
        "--random-output-len",
        "48",
        "--ignore-eos",
        "--max-concurrency",
        "8",
        "--no-progress",
        "--no-store",
    ];
    let Cmd::Bench(a) = Cli::try_parse_from(argv).unwrap().command else { unreachable!() };
    let plan = servelab::resolve::bench_plan(&a, None).unwrap();
    let predicted = servelab_predict::Predictor::from_file(Path::new(&engine))
        .unwrap()
        .predict(&plan)
        .unwrap()
        .summary;
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (_tx, rx) = tokio::sync::watch::channel(false);
    let measured = rt.block_on(servelab::bench(&a, rx)).unwrap().summary;
    assert_eq!(measured.completed, 16, "{:?}", measured.warnings);
    let within = |what: &str, m: f64, p: f64| {
        let err = (m - p).abs() / p;
        assert!(err < 0.10, "{what}: measured {m:.3}, predicted {p:.3} ({:.1} % off)", err * 100.0);
    };
    within("mean TPOT (ms)", measured.tpot_ms.mean, predicted.tpot_ms.mean);
    within("output throughput", measured.output_throughput, predicted.output_throughput);
    // The engine's /metrics were scraped during the run, as a vLLM server's.
    let e = measured.engine.expect("engine metrics from the simulator's /metrics");
    assert!(e.peak_requests_running.unwrap_or(0.0) >= 1.0, "{e:?}");
    assert!(e.peak_kv_cache_usage.unwrap_or(0.0) > 0.0, "{e:?}");
}
