//! `servelab bench`: resolve the target, build the workload, run the measuring loop, report.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use servelab_client::openai::request_body;
use servelab_client::scrape::{Baseline, Scraper};
use servelab_client::{http, BodyOptions, PlannedRequest, Progress, RunConfig, StopReason, Target};
use servelab_load::Arrivals;
use servelab_metrics::{MetricsConfig, Summary};
use servelab_records::{RequestRecord, RunInfo};
use servelab_workload::{Prompt, Tokenizer};
use tokio::sync::{mpsc, watch};

use crate::cli::ContinuousUsage;
use crate::exit::Failure;
use crate::settings::{BenchSettings, TargetSpec};

/// Everything a finished (or interrupted) bench produced.
#[derive(Debug)]
pub struct BenchOutcome {
    pub summary: Summary,
    pub records: Vec<RequestRecord>,
    pub result_path: Option<PathBuf>,
    pub stop: StopReason,
}

/// Run one benchmark as the settings say. Messages go to stderr; the report is returned for
/// the caller to print.
pub async fn run(
    s: &BenchSettings,
    interrupt: watch::Receiver<bool>,
) -> Result<BenchOutcome, Failure> {
    // 1. Target: the user's, or the built-in simulator started here.
    let mut sim = None;
    let base_url = match &s.target {
        TargetSpec::Url(u) => u.clone(),
        TargetSpec::Simulator => {
            let cfg = servelab_sim::SimConfig { port: 0, ..servelab_sim::SimConfig::default() };
            let handle = servelab_sim::start(cfg).await.map_err(|e| {
                Failure::runtime(format!("cannot start the built-in simulator: {e}"))
            })?;
            let url = handle.base_url();
            eprintln!(
                "No --base-url given: benchmarking the built-in simulator at {url} \
                 (servelab sim defaults: TTFT 50 ms, ITL 10 ms). Pass --base-url to measure a real server."
            );
            sim = Some(handle);
            url
        }
    };
    let result = bench_target(s, &base_url, sim.is_some(), interrupt).await;
    if let Some(h) = sim {
        h.shutdown().await;
    }
    result
}

async fn bench_target(
    s: &BenchSettings,
    base_url: &str,
    simulated: bool,
    interrupt: watch::Receiver<bool>,
) -> Result<BenchOutcome, Failure> {
    // Thousands of streams need thousands of sockets; most systems start with 1,024.
    let _ = servelab_sim::raise_nofile_limit();
    let mut target = Target::resolve(base_url, &s.endpoint).await.map_err(Failure::usage)?;
    for h in &s.headers {
        target.add_header(h).map_err(Failure::usage)?;
    }
    if let Some(key) = &s.api_key {
        target.set_api_key(key).map_err(Failure::usage)?;
    }
    http::wait_ready(&target, s.ready_timeout).await.map_err(|last| {
        Failure::runtime(format!(
            "{base_url} did not become ready within {:.0} s ({last}); is the server running? \
             (raise --ready-timeout for slow starts)",
            s.ready_timeout.as_secs_f64()
        ))
    })?;
    let model = match &s.model {
        Some(m) => m.clone(),
        None => http::first_model(&target).await.map_err(Failure::runtime)?,
    };

    // 2. Workload.
    let tokenizer = resolve_tokenizer(s, &model, simulated)?;
    let prompts = servelab_workload::load(&s.dataset, s.num_prompts, &tokenizer.tokenizer, s.seed)
        .map_err(Failure::usage)?;
    let continuous_usage = match s.continuous_usage {
        ContinuousUsage::On => true,
        ContinuousUsage::Off => false,
        ContinuousUsage::Auto => simulated,
    };
    let opts = BodyOptions {
        api: s.api,
        model: model.clone(),
        ignore_eos: s.ignore_eos,
        continuous_usage,
        extra: s.extra_body.clone(),
    };
    let plan = |p: &Prompt| PlannedRequest {
        body: request_body(&opts, &p.body, p.output_tokens).into(),
        prompt_tokens: Some(p.prompt_tokens),
        max_tokens: p.output_tokens,
    };
    let requests: Vec<PlannedRequest> = prompts.iter().map(plan).collect();
    let warmups: Vec<PlannedRequest> = requests.iter().take(s.num_warmups).cloned().collect();

    let info = RunInfo {
        backend: s.backend_label.to_string(),
        base_url: target.base_url.clone(),
        endpoint: target.path.clone(),
        model: model.clone(),
        tokenizer: Some(tokenizer.tokenizer.name().to_string()),
        dataset: s.dataset_label.clone(),
        num_prompts: requests.len() as u64,
        load: servelab_records::LoadSpec {
            request_rate: s.request_rate,
            burstiness: s.burstiness,
            max_concurrency: s.max_concurrency.map(|c| c as u64),
            duration_s: s.duration.map(|d| d.as_secs_f64()),
        },
        num_warmups: s.num_warmups as u64,
        seed: s.seed,
        simulated,
        started_at: crate::time::now_rfc3339(),
        servelab_version: env!("CARGO_PKG_VERSION").to_string(),
        interrupted: false,
    };

    // 3. Run, streaming records to the collector (and to disk) as they finish.
    let result_path = result_path(s, &info);
    let detail_path =
        if s.save_detailed { Some(result_path.with_extension("records.jsonl")) } else { None };
    let (tx, rx) = mpsc::unbounded_channel();
    // store: the run is recorded as `running` before the first request is sent.
    let recorder = crate::store_cmd::begin_recording(&s.store, &info);
    // Disk and SQLite writes run on a blocking-pool thread, never on the runtime's workers
    // that are timing streams.
    let detail = detail_path.clone();
    let collector = tokio::task::spawn_blocking(move || collect(rx, detail, recorder));
    let progress = Arc::new(Progress::default());
    let total = if s.duration.is_some() { None } else { Some(requests.len() as u64) };
    let display = crate::progress::spawn(progress.clone(), total, s.progress);
    let cfg = RunConfig {
        target,
        requests,
        warmups,
        arrivals: s.arrivals,
        seed: s.seed,
        max_concurrency: s.max_concurrency,
        duration: s.duration,
        request_timeout: s.request_timeout,
        stall_timeout: s.stall_timeout,
        drain_timeout: s.drain_timeout,
        preconnect: preconnect_count(prompts.len(), s.max_concurrency, &s.arrivals),
        baseline: None,
    };
    // The engine's own account, scraped before, during and after the run.
    let baseline = Arc::new(Baseline::default());
    let scraper = match s.server_metrics_interval {
        Some(every) => Scraper::start(&cfg.target, every, baseline.clone()).await,
        None => None,
    };
    let cfg = RunConfig { baseline: scraper.as_ref().map(|_| baseline), ..cfg };
    let run = servelab_client::run(cfg, progress.clone(), tx, interrupt).await;
    let scrapes = match (&run, scraper) {
        (Ok(end), Some(sc)) => sc.finish(end.origin).await,
        _ => Vec::new(),
    };
    let end = run.map_err(|e| Failure::runtime(format!("cannot connect to {base_url}: {e}")))?;
    display.finish().await;
    let (mut records, recorder) = collector
        .await
        .map_err(|e| Failure::runtime(format!("record collector failed: {e}")))?
        .map_err(|e| Failure::runtime(format!("cannot write per-request records: {e}")))?;

    // 4. After the clock stops: per-chunk token counts, then metrics.
    let tok = tokenizer.tokenizer.clone();
    records = tokio::task::spawn_blocking(move || {
        for r in &mut records {
            servelab_client::tokens::attribute_tokens(r, &tok);
        }
        records
    })
    .await
    .map_err(|e| Failure::runtime(format!("token attribution failed: {e}")))?;
    let info = RunInfo { interrupted: end.stop == StopReason::Interrupted, ..info };
    let cfg = MetricsConfig {
        percentiles: s.percentiles.clone(),
        goodput: s.goodput,
        ..MetricsConfig::default()
    };
    let mut summary = servelab_metrics::summarize(&records, &info, &cfg);
    servelab_metrics::engine::attach(&mut summary, &scrapes);
    if let Some(note) = &tokenizer.estimate_note {
        summary.warnings.push(note.clone());
    }
    if end.stop == StopReason::Interrupted {
        summary.warnings.push(format!(
            "interrupted: {} of {} planned requests were issued; this is a partial result",
            end.issued,
            prompts.len()
        ));
    }

    let saved = if s.save_result {
        let json = servelab_outputs::json::render(&summary, &records, s.save_detailed);
        write_file(&result_path, json.as_bytes())?;
        eprintln!("Saved result to {}", result_path.display());
        Some(result_path)
    } else {
        None
    };
    if let Some(p) = detail_path {
        eprintln!("Saved per-request records to {}", p.display());
    }
    // store: final records (with token counts), summary and status.
    let interrupted = end.stop == StopReason::Interrupted;
    crate::store_cmd::finish_recording(recorder, &records, &summary, interrupted);
    Ok(BenchOutcome { summary, records, result_path: saved, stop: end.stop })
}

struct ResolvedTokenizer {
    tokenizer: Tokenizer,
    /// Set when counts come from a tokenizer that is not the model's.
    estimate_note: Option<String>,
}

/// Connections to open before the clock starts. Each one takes a TCP handshake out of a
/// measured request, but an idle one is not free for every server: a thread-per-connection
/// server (llama.cpp's httplib) parks a worker on it until its keep-alive timeout, and 48 idle
/// connections kept llama-server from answering anything, `/metrics` included, for 4.9 s. So
/// open what the run uses at once: the concurrency cap, or at a finite rate the arrivals of
/// its first second (more are opened on demand).
fn preconnect_count(prompts: usize, max_concurrency: Option<usize>, arrivals: &Arrivals) -> usize {
    let at_once = match arrivals {
        Arrivals::Burst => prompts,
        Arrivals::Gamma { rate, .. } | Arrivals::Constant { rate } => rate.ceil().max(1.0) as usize,
    };
    at_once.min(prompts).min(max_concurrency.unwrap_or(usize::MAX)).min(4096)
}

fn resolve_tokenizer(
    s: &BenchSettings,
    model: &str,
    simulated: bool,
) -> Result<ResolvedTokenizer, Failure> {
    if let Some(spec) = &s.tokenizer {
        let tokenizer = Tokenizer::from_spec(spec).map_err(Failure::usage)?;
        return Ok(ResolvedTokenizer { tokenizer, estimate_note: None });
    }
    if simulated {
        // The simulator's default tokenizer: counts are exact.
        let tokenizer = Tokenizer::builtin(servelab_workload::tokenizer::DEFAULT_ENCODING)
            .map_err(Failure::runtime)?;
        return Ok(ResolvedTokenizer { tokenizer, estimate_note: None });
    }
    if model.contains('/') {
        if let Ok(tokenizer) = Tokenizer::from_spec(model) {
            return Ok(ResolvedTokenizer { tokenizer, estimate_note: None });
        }
    }
    let name = servelab_workload::tokenizer::DEFAULT_ENCODING;
    let tokenizer = Tokenizer::builtin(name).map_err(Failure::runtime)?;
    let note = format!(
        "no tokenizer for model '{model}': prompt lengths and per-chunk token counts are \
         estimates from {name}; output totals come from the server's usage when it sends it. \
         Pass --tokenizer for exact counts."
    );
    eprintln!("warning: {note}");
    Ok(ResolvedTokenizer { tokenizer, estimate_note: Some(note) })
}

/// Receive records as requests finish; append each to the detail file at once, and to the
/// results store in batches. Blocking: runs on its own thread.
fn collect(
    mut rx: mpsc::UnboundedReceiver<RequestRecord>,
    detail: Option<PathBuf>,
    mut recorder: servelab_store::Recorder,
) -> std::io::Result<(Vec<RequestRecord>, servelab_store::Recorder)> {
    let mut file = match &detail {
        Some(p) => {
            if let Some(dir) = p.parent() {
                std::fs::create_dir_all(dir)?;
            }
            Some(std::io::BufWriter::new(std::fs::File::create(p)?))
        }
        None => None,
    };
    let mut records = Vec::new();
    while let Some(r) = rx.blocking_recv() {
        if let Some(f) = file.as_mut() {
            serde_json::to_writer(&mut *f, &r)?;
            f.write_all(b"\n")?;
            // Flushed per record: a crash or kill loses at most the request in flight.
            f.flush()?;
        }
        recorder.push(&r);
        records.push(r);
    }
    recorder.flush();
    records.sort_by_key(|r| (r.warmup as u8 ^ 1, r.index));
    Ok((records, recorder))
}

/// vLLM's default file name: `{backend}-{rate}qps-{model}-{YYYYmmdd-HHMMSS}.json`.
fn result_path(s: &BenchSettings, info: &RunInfo) -> PathBuf {
    let name = s.result_filename.clone().unwrap_or_else(|| {
        let rate = s.request_rate.map_or("inf".to_string(), |r| format!("{r}"));
        let model = info.model.rsplit('/').next().unwrap_or(&info.model);
        let concurrency = s.max_concurrency.map_or(String::new(), |c| format!("-concurrency{c}"));
        format!(
            "{}-{rate}qps{concurrency}-{model}-{}.json",
            info.backend,
            crate::time::compact(&info.started_at)
        )
    });
    s.result_dir.join(name)
}

fn write_file(path: &PathBuf, bytes: &[u8]) -> Result<(), Failure> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| Failure::runtime(format!("cannot create {}: {e}", dir.display())))?;
    }
    std::fs::write(path, bytes)
        .map_err(|e| Failure::runtime(format!("cannot write {}: {e}", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preconnect_opens_what_the_first_second_uses() {
        // A burst sends everything at once, capped by the concurrency limit.
        assert_eq!(preconnect_count(48, None, &Arrivals::Burst), 48);
        assert_eq!(preconnect_count(48, Some(8), &Arrivals::Burst), 8);
        assert_eq!(preconnect_count(10_000, None, &Arrivals::Burst), 4096);
        // At 4 req/s only four requests start in the first second.
        assert_eq!(preconnect_count(48, None, &Arrivals::Constant { rate: 4.0 }), 4);
        assert_eq!(preconnect_count(48, None, &Arrivals::Gamma { rate: 2.5, shape: 1.0 }), 3);
        assert_eq!(preconnect_count(48, None, &Arrivals::Gamma { rate: 0.1, shape: 1.0 }), 1);
        assert_eq!(preconnect_count(2, Some(8), &Arrivals::Constant { rate: 100.0 }), 2);
        assert_eq!(preconnect_count(500, Some(64), &Arrivals::Constant { rate: 100.0 }), 64);
    }
}
