use std::sync::Mutex;

use servelab_engine::{EngineFile, IslOsl};
use servelab_plan::{
    Api, DatasetSpec, LoadSpec, MetricsConfig, OutputSpec, RequestSpec, RunKind, SimTarget, Target,
    WorkloadSpec,
};

use super::*;

fn cfg(yaml: &str) -> EngineConfig {
    EngineFile::parse(yaml).unwrap().build(None).unwrap()
}

fn plan(isl: u64, osl: u64, prompts: usize, concurrency: Option<u64>) -> Plan {
    Plan {
        target: Target::Simulator(SimTarget::default()),
        request: RequestSpec { ignore_eos: true, ..RequestSpec::new(Api::Completions) },
        workload: WorkloadSpec {
            tokenizer: None,
            dataset: DatasetSpec::Random {
                input_len: isl,
                output_len: osl,
                range: servelab_plan::LengthRange::EXACT,
                prefix_len: 0,
            },
            num_prompts: prompts,
            seed: 0,
            num_warmups: 0,
        },
        load: LoadSpec { max_concurrency: concurrency, ..LoadSpec::default() },
        ramp: None,
        limits: servelab_plan::Limits::default(),
        metrics: MetricsConfig::default(),
        output: OutputSpec::default(),
        record: RecordSpec::default(),
        shard: servelab_plan::ShardSpec::default(),
    }
}

#[test]
fn a_closed_loop_plan_predicts_what_the_engine_model_says() {
    let c = cfg("model: qwen3-8b\ngpu: h100\n");
    let p = Predictor::new(c.clone(), "t.yaml").predict(&plan(1000, 50, 40, Some(8))).unwrap();
    let s = &p.summary;
    assert_eq!((s.completed, s.failed), (40, 0));
    assert_eq!(s.total_output_tokens, 40 * 50);
    assert_eq!(s.total_input_tokens, 40 * 1000);
    // The same closed loop run by the engine crate's own sweep point: same numbers.
    let point = servelab_engine::predict_point(&c, IslOsl { isl: 1000, osl: 50 }, 8, 40).unwrap();
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * b.abs().max(1.0);
    assert!(close(s.output_throughput, point.output_throughput), "{s:?} {point:?}");
    assert!(close(s.tpot_ms.mean, point.mean_tpot_ms), "{} {}", s.tpot_ms.mean, point.mean_tpot_ms);
    assert!(close(s.ttft_ms.mean, point.mean_ttft_ms));
    assert_eq!(s.info.base_url, "engine:t.yaml");
    assert_eq!(s.info.model, "qwen3-8b");
    assert_eq!(s.info.gpus, Some(1), "the modelled deployment's GPUs are filed with the run");
    assert!(s.warnings.iter().any(|w| w.contains("predicted by the engine model")));
    assert!(
        s.warnings.iter().any(|w| w.contains("calibration vllm-v1 defaults, not fitted")
            && w.contains("expect ±28 % on throughput and TPOT, ±22 % on TTFT")),
        "{:?}",
        s.warnings
    );
    // The engine's series reads as a vLLM server's.
    let e = s.engine.as_ref().expect("engine metrics from the predicted /metrics");
    assert_eq!(e.engine, "vllm");
    assert_eq!(e.peak_requests_running, Some(8.0));
    assert_eq!(e.generation_tokens, Some(2000.0));
}

#[test]
fn predictions_are_deterministic_and_tpot_rises_with_concurrency() {
    let pr = Predictor::new(cfg("model: qwen3-8b\ngpu: h100\n"), "e");
    let a = pr.predict(&plan(500, 100, 64, Some(32))).unwrap();
    let b = pr.predict(&plan(500, 100, 64, Some(32))).unwrap();
    assert_eq!(a.records, b.records);
    let low = pr.predict(&plan(500, 100, 16, Some(1))).unwrap().summary;
    assert!(a.summary.tpot_ms.mean > low.tpot_ms.mean);
    assert!(a.summary.output_throughput > 4.0 * low.output_throughput);
}

#[test]
fn a_rate_plan_sends_on_the_schedule() {
    let pr = Predictor::new(cfg("model: qwen3-8b\ngpu: h100\n"), "e");
    let mut p = plan(200, 20, 20, None);
    p.load.request_rate = Some(10.0);
    p.load.burstiness = f64::INFINITY;
    let out = pr.predict(&p).unwrap();
    let sent: Vec<u64> = out.records.iter().map(|r| r.intended_ns).collect();
    assert_eq!(sent, (0..20).map(|i| i * 100_000_000).collect::<Vec<_>>());
    assert!(out.records.iter().all(|r| r.scheduled_ns == r.intended_ns));
}

#[test]
fn a_shared_prefix_hits_the_prefix_cache() {
    let pr = Predictor::new(cfg("model: qwen3-8b\ngpu: h100\n"), "e");
    let mut p = plan(100, 10, 20, Some(1));
    p.workload.dataset = DatasetSpec::Random {
        input_len: 100,
        output_len: 10,
        range: servelab_plan::LengthRange::EXACT,
        prefix_len: 512,
    };
    let e = pr.predict(&p).unwrap().summary.engine.unwrap();
    // 19 of 20 requests find the 32 blocks of the shared prefix cached.
    assert_eq!(e.cached_prompt_tokens, Some(19.0 * 512.0));
}

#[test]
fn chunks_group_the_tokens_of_one_step() {
    let r = servelab_engine::VirtualRecord {
        index: 3,
        intended_ns: 10,
        first_token_ns: Some(50),
        token_ns: vec![50, 50, 70],
        end_ns: Some(70),
        prompt_tokens: 8,
        output_tokens: 3,
        ..Default::default()
    };
    let rec = record(&r, 0);
    assert_eq!(rec.chunks.len(), 2);
    assert_eq!((rec.chunks[0].t_ns, rec.chunks[0].tokens), (50, Some(2)));
    assert_eq!((rec.chunks[1].t_ns, rec.chunks[1].tokens), (70, Some(1)));
    assert_eq!(rec.first_token_ns(), Some(50));
    assert_eq!(rec.output_tokens(), Some(3));
    assert!(rec.is_success());
    let refused =
        servelab_engine::VirtualRecord { error: Some("too long".into()), ..Default::default() };
    let rec = record(&refused, 0);
    assert_eq!(rec.status, Some(400));
    assert!(!rec.is_success());
}

#[test]
fn what_predict_cannot_do_is_a_usage_error() {
    let pr = Predictor::new(cfg("model: qwen3-8b\ngpu: h100\n"), "e");
    let mut p = plan(10, 10, 5, None);
    p.load.duration_s = Some(5.0);
    let e = pr.predict(&p).unwrap_err();
    assert!(matches!(&e, RunError::Usage(m) if m.starts_with("--duration")), "{e:?}");
    let e = Predictor::from_file(Path::new("/nonexistent/engine.yaml")).err().unwrap();
    assert!(matches!(&e, RunError::Usage(m) if m.contains("/nonexistent/engine.yaml")), "{e:?}");
}

#[derive(Default)]
struct Spy(Mutex<Vec<(RunKind, usize)>>);

struct SpySink<'a>(&'a Spy, RunKind, usize);

impl Recording for &'static Spy {
    fn begin(&self, _: &RunInfo, spec: &RecordSpec) -> Box<dyn RecordSink> {
        Box::new(SpySink(self, spec.kind, 0))
    }
}

impl RecordSink for SpySink<'static> {
    fn push(&mut self, _: &RequestRecord) {
        self.2 += 1;
    }

    fn finish(self: Box<Self>, _: &[RequestRecord], _: &Summary, _: bool) -> Option<String> {
        self.0 .0.lock().unwrap().push((self.1, self.2));
        None
    }
}

#[tokio::test]
async fn runs_are_recorded_as_predicted() {
    let spy: &'static Spy = Box::leak(Box::default());
    let mut pr = Predictor::new(cfg("model: qwen3-8b\ngpu: h100\n"), "e")
        .with_recording(Arc::new(spy) as Arc<dyn Recording>);
    let mut p = plan(100, 10, 6, Some(2));
    pr.run(&p).await.unwrap();
    p.record.kind = RunKind::SweepPoint;
    pr.run(&p).await.unwrap();
    assert_eq!(
        *spy.0.lock().unwrap(),
        vec![(RunKind::Predicted, 6), (RunKind::PredictedSweepPoint, 6)]
    );
}

#[test]
fn a_predicted_csv_says_so_on_every_row() {
    let p = crate::Predictor::new(cfg("model: qwen3-8b\ngpu: h100\n"), "e").provenance();
    let csv = "scenario,load\n1000:50,8\n1000:50,16\n";
    assert_eq!(
        crate::mark_csv(csv, &p),
        "scenario,load,kind,calibration,band_pct,ttft_band_pct\n\
         1000:50,8,predicted,vllm-v1 defaults,28,22\n\
         1000:50,16,predicted,vllm-v1 defaults,28,22\n"
            .replace("vllm-v1 defaults", "\"vllm-v1 defaults, not fitted\"")
    );
}

/// A scenario's CSV is judged at its requests' mean lengths: pooled over its points, whole
/// tokens, and nothing when no request completed.
#[test]
fn a_scenario_is_its_completed_requests_mean_lengths() {
    let pr = Predictor::new(cfg("model: qwen3-8b\ngpu: h100\n"), "e");
    let a = pr.predict(&plan(1000, 50, 40, Some(8))).unwrap().summary;
    let b = pr.predict(&plan(1000, 50, 24, Some(16))).unwrap().summary;
    assert_eq!(crate::scenario_of([&a, &b]), Some(IslOsl { isl: 1000, osl: 50 }));
    // Lengths that vary (a ShareGPT-like scenario): 64 requests, 70,000 prompt and 6,500
    // output tokens in all.
    let mut c = a.clone();
    (c.completed, c.total_input_tokens, c.total_output_tokens) = (24, 30_000, 4_500);
    assert_eq!(crate::scenario_of([&a, &c]), Some(IslOsl { isl: 1093, osl: 101 }));
    c.completed = 0;
    assert_eq!(crate::scenario_of([&c]), None);
    assert_eq!(crate::scenario_of([]), None);
}

/// Issue 27: `--gpu-hourly-cost` prices a prediction as it prices a measured run, with the
/// engine file's GPU count and the predicted duration; no energy is invented.
#[test]
fn a_priced_prediction_costs_its_gpus_over_its_duration() {
    let c = cfg("model: qwen3-8b\ngpu: h100\ntp: 2\n");
    let mut p = plan(1000, 50, 40, Some(8));
    p.limits.gpu.hourly_cost_usd = Some(2.0);
    let s = Predictor::new(c.clone(), "t.yaml").predict(&p).unwrap().summary;
    let g = s.gpu.as_ref().expect("a priced prediction has a GPU section");
    let (h, n, d, tokens) = (2.0, 2u32, s.duration_s, s.total_output_tokens);
    assert_eq!((n, tokens), (c.gpus(), 2000));
    assert!(d > 0.0);
    assert_eq!((g.hourly_cost_usd, g.cost_gpus, g.gpus_declared), (Some(h), Some(n), Some(n)));
    assert_eq!(g.window_s, d);
    // H × G × D / 3600 / N × 1e6, as the measured run's formula computes it.
    assert_eq!(
        g.usd_per_million_output_tokens,
        Some(h * f64::from(n) * d * 1e6 / (3600.0 * tokens as f64))
    );
    assert!(
        (g.usd_per_million_output_tokens.unwrap() - h * 2.0 * d / 3600.0 / 2000.0 * 1e6).abs()
            < 1e-9
    );
    // No power is predicted: the energy figures stay unknown, and the run says so.
    assert_eq!((g.energy_j, g.joules_per_output_token, g.mean_w_per_gpu), (None, None, None));
    assert_eq!((g.source.as_deref(), g.scrapes, g.gpus_seen), (None, 0, 0));
    assert!(s.warnings.iter().any(|w| w.contains(
        "the predicted cost counts the engine file's 2 GPUs at 2 USD per GPU hour over the \
         predicted duration; the engine model predicts no power, so the GPU energy figures are \
         unknown"
    )));
    // --gpus is the engine file's count or nothing.
    let mut q = p.clone();
    q.record.gpus = Some(2);
    assert!(Predictor::new(c.clone(), "t.yaml").predict(&q).is_ok());
    q.record.gpus = Some(8);
    let e = Predictor::new(c.clone(), "t.yaml").predict(&q).unwrap_err().to_string();
    assert!(e.contains("--gpus 8: the engine file models 2 GPUs"), "{e}");
    // Without a price: no GPU section.
    let s = Predictor::new(c, "t.yaml").predict(&plan(1000, 50, 40, Some(8))).unwrap().summary;
    assert_eq!(s.gpu, None);
}
