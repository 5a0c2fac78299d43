//! `servelab predict`: a [`Runner`] that runs a [`Plan`] in virtual time through the engine
//! model (`servelab-engine`) instead of sending it to a server.
//!
//! The plan's workload gives each request's prompt and output lengths (and the prefix it
//! shares with others), its [`LoadSpec`] the arrival times and the concurrency cap, exactly
//! as the measuring conductor would send them. The engine model decides when every token is
//! produced; each request becomes a real [`RequestRecord`] whose chunks carry the virtual
//! times (ns from the run's start) at which the client would have read them, so every metric,
//! renderer, sweep table, chart, knee and SLO search applies unchanged. The engine's gauges
//! become `/metrics`-like scrapes (`vllm:num_requests_running`, `..._waiting`, KV-cache
//! usage, preemptions), so the summary's engine section reads as a vLLM run's does.
//!
//! A predicted run is filed through the same [`Recording`] as a measured one, with its kind
//! marked predicted ([`servelab_records::RunKind::predicted`]).
//!
//! [`LoadSpec`]: servelab_plan::LoadSpec
//! [`Recording`]: servelab_plan::Recording

#![warn(missing_docs)]
#![cfg_attr(not(test), warn(unused_crate_dependencies))]

pub mod calibrate;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use servelab_engine::{
    Engine, EngineConfig, GaugeSample, GaugeSampling, Provenance, RequestShape, RunOptions,
    VirtualLoad,
};
use servelab_load::{Arrivals, Schedule};
use servelab_metrics::Summary;
use servelab_outputs::term;
use servelab_plan::{Plan, RecordSink, RecordSpec, Recording, RunError, Runner};
use servelab_records::{
    Chunk, ChunkKind, FailureKind, IslOsl, Outcome, RequestRecord, RunInfo, ServerScrape, Usage,
};
use servelab_workload::{DatasetError, RequestLengths, Tokenizer};

/// Runs plans through the engine model, in virtual time.
pub struct Predictor {
    cfg: EngineConfig,
    /// How the engine is named in results (`engine:<name>` is the run's base URL).
    name: String,
    recording: Option<Arc<dyn Recording>>,
    network_ns: u64,
}

/// What one predicted run produced.
#[derive(Debug)]
pub struct Prediction {
    /// Its summary, as a measured run's.
    pub summary: Summary,
    /// Every request, with per-token chunk times in virtual ns.
    pub records: Vec<RequestRecord>,
    /// The engine's `/metrics`-like series.
    pub scrapes: Vec<ServerScrape>,
}

impl Predictor {
    /// A predictor of the deployment `cfg`, named `name` in results (the engine file).
    pub fn new(cfg: EngineConfig, name: impl Into<String>) -> Predictor {
        Predictor { cfg, name: name.into(), recording: None, network_ns: 0 }
    }

    /// A predictor of the engine file at `path`; the error names the file and what is wrong.
    pub fn from_file(path: &Path) -> Result<Predictor, RunError> {
        let hub = servelab_workload::hub::model_config_json;
        let cfg = servelab_engine::load_engine_file_via(path, |_| {}, hub)
            .map_err(|e| RunError::Usage(format!("--engine {}: {e}", path.display())))?;
        Ok(Predictor::new(cfg, path.display().to_string()))
    }

    /// File every predicted run through `recording` (the results store), marked predicted.
    pub fn with_recording(mut self, recording: Arc<dyn Recording>) -> Predictor {
        self.recording = Some(recording);
        self
    }

    /// One-way client↔engine latency added to every request (default 0).
    pub fn with_network_ns(mut self, ns: u64) -> Predictor {
        self.network_ns = ns;
        self
    }

    /// The deployment this predictor models.
    pub fn config(&self) -> &EngineConfig {
        &self.cfg
    }

    /// Where its predictions come from, and how far to trust them.
    pub fn provenance(&self) -> Provenance {
        servelab_engine::provenance(&self.cfg)
    }

    /// Predict `plan`: the summary, records and engine series it would produce. Pure: the
    /// same plan gives the same prediction. Records nothing and writes no file.
    pub fn predict(&self, plan: &Plan) -> Result<Prediction, RunError> {
        plan.check().map_err(|e| RunError::Usage(e.to_string()))?;
        if plan.load.duration_s.is_some() {
            return Err(RunError::Usage(
                "--duration: predict runs a fixed number of prompts; give --num-prompts instead"
                    .into(),
            ));
        }
        if plan.ramp.is_some() {
            return Err(RunError::Usage(
                "--ramp-up-strategy: predict models a fixed rate or concurrency; give \
                 --request-rate or --max-concurrency instead"
                    .into(),
            ));
        }
        // The deployment's GPUs are the engine file's: a --gpus that differs would price and
        // divide by GPUs the model does not run on.
        if let Some(n) = plan.record.gpus.filter(|&n| n != self.cfg.gpus()) {
            return Err(RunError::Usage(format!(
                "--gpus {n}: the engine file models {} GPUs (TP × replicas, or the P/D pools); \
                 drop --gpus or change the engine file",
                self.cfg.gpus()
            )));
        }
        let w = &plan.workload;
        let lengths =
            servelab_workload::lengths(&w.dataset, w.num_prompts, || tokenizer(plan), w.seed)
                .map_err(|e| RunError::Usage(e.to_string()))?;
        let shapes =
            lengths.iter().enumerate().map(|(i, l)| shape(i, l)).collect::<Result<Vec<_>, _>>()?;
        let arrivals = plan.load.arrivals();
        let times = Schedule::take_n(arrivals, w.seed, shapes.len());
        let load = match plan.load.concurrency() {
            Some(c) => VirtualLoad::Closed {
                concurrency: u32::try_from(c).unwrap_or(u32::MAX),
                arrivals_ns: (arrivals != Arrivals::Burst).then(|| times.clone()),
            },
            None => VirtualLoad::Open { arrivals_ns: times.clone() },
        };
        let gauges = match plan.limits.server_metrics_interval {
            Some(d) if !d.is_zero() => GaugeSampling::Interval(d.as_nanos() as u64),
            _ => GaugeSampling::Off,
        };
        let mut engine =
            Engine::new(&self.cfg).map_err(|e| RunError::Usage(format!("--engine: {e}")))?;
        let opts = RunOptions { network_ns: self.network_ns, gauges };
        let run = servelab_engine::run(&mut engine, &shapes, &load, opts)
            .map_err(|e| RunError::Failed(format!("the engine model failed: {e}")))?;
        let records: Vec<RequestRecord> =
            run.requests.iter().map(|r| record(r, times[r.index])).collect();
        let info = RunInfo {
            backend: plan.request.api.backend().to_string(),
            base_url: format!("engine:{}", self.name),
            endpoint: plan.request.endpoint.clone(),
            model: plan.request.model.clone().unwrap_or_else(|| self.cfg.model.name.clone()),
            tokenizer: None,
            dataset: w.dataset.label(),
            num_prompts: records.len() as u64,
            load: plan.load,
            ramp: plan.ramp,
            num_warmups: 0,
            seed: w.seed,
            simulated: false,
            started_at: servelab_plan::time::now_rfc3339(),
            servelab_version: env!("CARGO_PKG_VERSION").to_string(),
            interrupted: false,
            shard: None,
            gpus: Some(self.cfg.gpus()),
        };
        // As the conductor's scraper, one last scrape once every request has ended.
        let end_ns = run.requests.iter().filter_map(|r| r.end_ns).max().unwrap_or(0);
        let mut samples = run.gauges.clone();
        if gauges != GaugeSampling::Off {
            samples.push(GaugeSample { t_ns: end_ns, gauges: run.final_gauges });
        }
        let scrapes = scrapes(&samples);
        let mut summary = servelab_metrics::summarize(&records, &info, &plan.metrics);
        servelab_metrics::engine::attach(&mut summary, &scrapes);
        // The cost of the predicted run, as a measured run's with --gpus and --gpu-hourly-cost:
        // the engine file's GPUs over the predicted duration. The model predicts no power, so
        // no energy figure is given.
        if let Some(hourly) = plan.limits.gpu.hourly_cost_usd {
            servelab_metrics::gpu::attach(&mut summary, &[], None, Some(hourly));
            summary.warnings.push(format!(
                "the predicted cost counts the engine file's {} GPUs at {hourly} USD per GPU \
                 hour over the predicted duration; the engine model predicts no power, so the \
                 GPU energy figures are unknown",
                self.cfg.gpus()
            ));
        }
        summary.warnings.push(format!(
            "predicted by the engine model ({}), not measured: {} engine steps in virtual time",
            self.name, run.steps
        ));
        // The provenance at this point's scenario: its mean prompt and output lengths.
        let n = lengths.len().max(1) as u64;
        let mean = |f: fn(&RequestLengths) -> u64| {
            u32::try_from(lengths.iter().map(f).sum::<u64>() / n).unwrap_or(u32::MAX)
        };
        let at =
            IslOsl { isl: mean(|l| l.prompt_tokens), osl: mean(|l| l.output_tokens.unwrap_or(0)) };
        summary.warnings.push(servelab_engine::provenance_at(&self.cfg, Some(at)).sentence());
        if w.num_warmups > 0 {
            summary.warnings.push(format!(
                "{} warm-up requests were not predicted (the model has no cold start)",
                w.num_warmups
            ));
        }
        if !plan.request.ignore_eos {
            summary
                .warnings
                .push("every request generates its full output length, as with --ignore-eos");
        }
        Ok(Prediction { summary, records, scrapes })
    }
}

impl Runner for Predictor {
    async fn run(&mut self, plan: &Plan) -> Result<Summary, RunError> {
        let p = self.predict(plan)?;
        if plan.output.save_result {
            let info = &p.summary.info;
            let path = plan.result_path("predict", &info.model, &info.started_at);
            let json =
                servelab_outputs::json::render(&p.summary, &p.records, plan.output.save_detailed);
            servelab_plan::write_file(&path, json.as_bytes())?;
            term::note(&format!("Saved predicted result to {}", path.display()));
        }
        if let Some(r) = &self.recording {
            let spec = RecordSpec { kind: plan.record.kind.predicted(), ..plan.record.clone() };
            let mut sink: Box<dyn RecordSink> = r.begin(&p.summary.info, &spec);
            for rec in &p.records {
                sink.push(rec);
            }
            sink.flush();
            if let Some(line) = sink.finish(&p.records, &p.summary, false) {
                term::note(&line);
            }
        }
        Ok(p.summary)
    }
}

/// The tokenizer of a dataset that is read, not drawn (ShareGPT, JSONL, HF): the plan's, else
/// the built-in default, as the conductor uses for the simulator.
fn tokenizer(plan: &Plan) -> Result<Tokenizer, DatasetError> {
    let t = match &plan.workload.tokenizer {
        Some(spec) => Tokenizer::from_spec(spec),
        None => Tokenizer::builtin(servelab_workload::tokenizer::DEFAULT_ENCODING),
    };
    t.map_err(|e| DatasetError::Spec(format!("--tokenizer: {e}")))
}

/// The engine's view of request `i`: its lengths, and one hash for the prefix it shares.
fn shape(i: usize, l: &RequestLengths) -> Result<RequestShape, RunError> {
    let too_long = |what: &str, n: u64| {
        RunError::Usage(format!("request {i}: {n} {what} tokens is more than the model can take"))
    };
    let prompt_tokens =
        u32::try_from(l.prompt_tokens).map_err(|_| too_long("prompt", l.prompt_tokens))?;
    let Some(out) = l.output_tokens else {
        return Err(RunError::Usage(format!(
            "request {i}: the dataset sets no output length, and predict needs one (give \
             --sharegpt-output-len, or max_tokens in the JSONL file)"
        )));
    };
    let output_tokens = u32::try_from(out).map_err(|_| too_long("output", out))?.max(1);
    let (block_hashes, hash_block_tokens) = match l.shared_prefix {
        // One hash covering exactly the shared tokens: equal ids share those KV blocks.
        Some((id, tokens)) if tokens > 0 && tokens <= u64::from(prompt_tokens) => {
            (vec![id.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0x5EED], tokens as u32)
        }
        _ => (Vec::new(), 0),
    };
    Ok(RequestShape { prompt_tokens, output_tokens, block_hashes, hash_block_tokens })
}

/// A predicted request as the client would have recorded it: one chunk per engine step that
/// emitted tokens to it, at the virtual time the client read it.
fn record(r: &servelab_engine::VirtualRecord, scheduled_ns: u64) -> RequestRecord {
    let mut chunks: Vec<Chunk> = Vec::new();
    for &t in &r.token_ns {
        match chunks.last_mut() {
            Some(c) if c.t_ns == t => {
                c.text.push('t');
                c.tokens = c.tokens.map(|n| n + 1);
            }
            _ => chunks.push(Chunk {
                t_ns: t,
                kind: ChunkKind::Content,
                text: "t".into(),
                tokens: Some(1),
            }),
        }
    }
    let outcome = match &r.error {
        None => Outcome::Success,
        Some(m) => Outcome::Failure { kind: FailureKind::HttpStatus, message: m.clone() },
    };
    let completion = r.token_ns.len() as u64;
    RequestRecord {
        sent_ns: r.intended_ns,
        prompt_tokens: Some(u64::from(r.prompt_tokens)),
        max_tokens: Some(u64::from(r.output_tokens)),
        usage: r.error.is_none().then_some(Usage {
            prompt_tokens: u64::from(r.prompt_tokens),
            completion_tokens: completion,
            reasoning_tokens: None,
        }),
        chunks,
        end_ns: r.end_ns.or(r.error.as_ref().map(|_| r.intended_ns)),
        status: Some(if r.error.is_some() { 400 } else { 200 }),
        outcome,
        ..RequestRecord::due(r.index as u64, scheduled_ns.min(r.intended_ns), r.intended_ns)
    }
}

/// The scenario a predicted scenario's points ran, for its CSV's provenance: the mean prompt
/// and output lengths of their completed requests, as each point's own sentence judges its
/// point (a ShareGPT or JSONL scenario has no lengths in its label); `None` when none
/// completed.
pub fn scenario_of<'a>(summaries: impl IntoIterator<Item = &'a Summary>) -> Option<IslOsl> {
    let (mut n, mut prompt, mut output) = (0u64, 0u64, 0u64);
    for s in summaries {
        n += s.completed;
        prompt += s.total_input_tokens;
        output += s.total_output_tokens;
    }
    let mean = |total: u64| u32::try_from(total / n).unwrap_or(u32::MAX);
    (n > 0).then(|| IslOsl { isl: mean(prompt), osl: mean(output) })
}

/// A predicted sweep's CSV with the provenance in four more columns on every row (`kind`
/// = predicted, `calibration`, `band_pct` for throughput and TPOT, `ttft_band_pct`), so a
/// table copied out of its folder still says what it is. Appended last: readers that take
/// columns by position are unaffected.
pub fn mark_csv(csv: &str, p: &Provenance) -> String {
    let quote = |s: &str| {
        if s.contains([',', '"', '\n']) {
            format!("\"{}\"", s.replace('"', "\"\""))
        } else {
            s.to_string()
        }
    };
    let extra =
        format!("predicted,{},{:.0},{:.0}", quote(&p.calibration), p.band_pct, p.ttft_band_pct);
    let mut out = String::with_capacity(csv.len() + 64);
    for (i, line) in csv.lines().enumerate() {
        out.push_str(line);
        out.push(',');
        out.push_str(if i == 0 { "kind,calibration,band_pct,ttft_band_pct" } else { &extra });
        out.push('\n');
    }
    out
}

/// The engine's gauges as the `/metrics` scrapes of a vLLM V1 server.
pub fn scrapes(samples: &[GaugeSample]) -> Vec<ServerScrape> {
    samples
        .iter()
        .map(|s| {
            let g = &s.gauges;
            let values: BTreeMap<String, f64> = [
                ("vllm:num_requests_running", f64::from(g.running)),
                ("vllm:num_requests_waiting", f64::from(g.waiting)),
                ("vllm:kv_cache_usage_perc", g.kv_usage),
                ("vllm:num_preemptions_total", g.preemptions_total as f64),
                ("vllm:prompt_tokens_total", g.prompt_tokens_total as f64),
                ("vllm:generation_tokens_total", g.generation_tokens_total as f64),
                ("vllm:prefix_cache_queries_total", g.prefix_cache_queries as f64),
                ("vllm:prefix_cache_hits_total", g.prefix_cache_hits as f64),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
            ServerScrape { t_ms: s.t_ns as f64 / 1e6, values, error: None }
        })
        .collect()
}

#[cfg(test)]
mod tests;
