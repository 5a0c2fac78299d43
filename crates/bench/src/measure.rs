//! Stage 2 of a run: the measuring loop, with every finished record streamed to the detail
//! file and the store as it arrives and folded for the summary (`sinks`). New work
//! that must watch the run while it goes (another live account) goes here.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use servelab_client::gpu::GpuScraper;
use servelab_client::scrape::{Baseline, Scraper};
use servelab_client::{Progress, RunConfig, StopReason};
use servelab_load::Arrivals;
use servelab_metrics::fold::Folded;
use servelab_outputs::term;
use servelab_plan::{NoRecording, Plan, RecordSink, Recording, RunError};
use servelab_records::{GpuScrape, RequestRecord, RunInfo, ServerScrape, ShardInfo};
use tokio::sync::watch;

use crate::clock::{Clocks, Reading};
use crate::prepare::Prepared;
use crate::sinks::{RunFiles, Sinks};

/// What the loop measured, with what the run was prepared with.
pub(crate) struct Measured {
    pub prepared: Prepared,
    /// The run as filed (its clock reading taken again after the run when it had no time
    /// before).
    pub info: RunInfo,
    /// The records kept whole, warm-ups first, with token counts.
    pub records: Vec<RequestRecord>,
    /// The records folded away as they came, and what was kept.
    pub folded: Folded,
    /// The store's sink, to finish with the summary.
    pub sink: Box<dyn RecordSink>,
    /// The engine's own account, scraped during the run.
    pub scrapes: Vec<ServerScrape>,
    /// The GPUs' telemetry, read during the run (`--gpu-metrics`).
    pub gpu_scrapes: Vec<GpuScrape>,
    pub stop: StopReason,
    /// Where the result goes when saved, and the detail file written during the run.
    pub files: RunFiles,
    /// Why the detail file stops early, if it does.
    pub detail_error: Option<String>,
}

/// Run the measuring loop over what `prepared` holds.
pub(crate) async fn measure(
    plan: &Plan,
    prepared: Prepared,
    recording: Option<Arc<dyn Recording>>,
    clocks: &mut Clocks,
    interrupt: watch::Receiver<bool>,
) -> Result<Measured, RunError> {
    let p = &prepared;
    let cfg = run_config(plan, p);
    // The GPUs' telemetry, read from before the warm-ups to after the last request on its own
    // task. A source that does not answer stops the run before anything is recorded: the
    // user asked for its figures.
    let gpu = match &plan.limits.gpu.source {
        Some(source) => Some(
            GpuScraper::start(source, plan.limits.gpu.interval)
                .await
                .map_err(|e| RunError::Usage(e.to_string()))?,
        ),
        None => None,
    };
    let sharded = plan.shard.shard.is_some() || plan.shard.start_at.is_some();
    let clock = if sharded {
        let (mut stop, spec, warm) = (interrupt.clone(), &plan.shard, !p.warmups.is_empty());
        clocks.before(&spec.clock, &p.target, &p.base_url, spec.start_at, warm, &mut stop).await
    } else {
        None
    };
    let reading = clock.as_ref().and_then(|c| c.reading());
    let mut info = run_info(plan, p, sharded.then(|| shard_info(plan, reading)));
    // The run is recorded as running before the first request is sent.
    let sink: Box<dyn RecordSink> = match &recording {
        Some(r) => r.begin(&info, &plan.record),
        None => Box::new(NoRecording),
    };
    // Run, streaming records to the sinks (and to disk) as they finish.
    let (sinks, tx, files) =
        Sinks::start(plan, &info, sink, p.source.multi_turn(), &p.tokenizer.tokenizer);
    let progress = Arc::new(Progress::default());
    let total =
        (plan.load.duration_s.is_none() || p.share.send_at.is_some()).then_some(p.share.requests);
    let display = crate::progress::spawn(progress.clone(), total, plan.output.progress);
    // The engine's own account, scraped before, during and after the run.
    let baseline = Arc::new(Baseline::default());
    let scraper = match plan.limits.server_metrics_interval {
        Some(every) => Scraper::start(&cfg.target, every, baseline.clone()).await,
        None => None,
    };
    let cfg = RunConfig { baseline: scraper.as_ref().map(|_| baseline), ..cfg };
    if let Some(Err(late)) = plan.shard.start_at.map(|at| at.duration_since(SystemTime::now())) {
        term::warn(&format!(
            "--start-at was {:.1} s ago: requests due before now are sent late (and counted \
             so); give the shards a later start",
            late.duration().as_secs_f64()
        ));
    }
    let run = servelab_client::run(cfg, progress.clone(), tx, interrupt.clone()).await;
    let scrapes = match (&run, scraper) {
        (Ok(end), Some(sc)) => sc.finish(end.origin).await,
        _ => Vec::new(),
    };
    let gpu_scrapes = match (&run, gpu) {
        (Ok(end), Some(g)) => g.finish(end.origin).await,
        _ => Vec::new(),
    };
    let end =
        run.map_err(|e| RunError::Failed(format!("cannot connect to {}: {e}", p.base_url)))?;
    display.finish().await;
    let collected = sinks.finish().await?;
    info.interrupted = end.stop == StopReason::Interrupted;
    // A reading taken again after the run, when the start left no time for it.
    if clock.is_some() && !info.interrupted {
        let mut stop = interrupt;
        let again = clocks.after(clock, &plan.shard.clock, &p.target, &mut stop).await;
        info.shard = Some(shard_info(plan, again.as_ref()));
    }
    Ok(Measured {
        prepared,
        info,
        records: collected.records,
        folded: collected.folded,
        sink: collected.sink,
        scrapes,
        gpu_scrapes,
        stop: end.stop,
        files,
        detail_error: collected.detail_error,
    })
}

/// The run as it is filed before it starts.
fn run_info(plan: &Plan, p: &Prepared, shard: Option<ShardInfo>) -> RunInfo {
    let w = &plan.workload;
    RunInfo {
        backend: plan.request.api.backend().to_string(),
        base_url: p.target.base_url.clone(),
        endpoint: p.target.path.clone(),
        model: p.model.clone(),
        tokenizer: Some(p.tokenizer.tokenizer.name().to_string()),
        dataset: w.dataset.label(),
        num_prompts: p.share.units as u64,
        load: plan.load,
        ramp: plan.ramp,
        num_warmups: w.num_warmups as u64,
        seed: w.seed,
        simulated: p.simulated,
        started_at: servelab_plan::time::now_rfc3339(),
        servelab_version: env!("CARGO_PKG_VERSION").to_string(),
        interrupted: false,
        shard,
        gpus: plan.record.gpus,
    }
}

/// What the measuring loop is given.
fn run_config(plan: &Plan, p: &Prepared) -> RunConfig {
    let limits = &plan.limits;
    let shard = plan.shard.shard_or_whole();
    let cap = plan.load.concurrency().map(|c| shard.share_of_cap(c));
    RunConfig {
        target: p.target.clone(),
        source: p.source.clone(),
        warmups: p.warmups.clone(),
        arrivals: plan.load.arrivals(),
        send_at: p.share.send_at.clone(),
        ids: p.share.ids.clone(),
        start_at: plan.shard.start_at,
        seed: plan.workload.seed,
        max_concurrency: cap,
        duration: plan.load.duration_s.map(Duration::from_secs_f64),
        request_timeout: limits.request_timeout,
        stall_timeout: limits.stall_timeout,
        drain_timeout: limits.drain_timeout,
        preconnect: preconnect_count(p.share.units_here(), cap, &plan.load.arrivals()),
        baseline: None,
        reasoning_parser: plan.request.reasoning_parser,
    }
}

/// Connections to open before the clock starts. Each one takes a TCP handshake out of a
/// measured request, but an idle one is not free for every server: a thread-per-connection
/// server (llama.cpp's httplib) parks a worker on it until its keep-alive timeout, and 48 idle
/// connections kept llama-server from answering anything, `/metrics` included, for 4.9 s. So
/// open what the run uses at once: the concurrency cap, or at a finite rate the arrivals of
/// its first second (more are opened on demand).
pub fn preconnect_count(
    prompts: usize,
    max_concurrency: Option<usize>,
    arrivals: &Arrivals,
) -> usize {
    let at_once = match arrivals {
        Arrivals::Burst => prompts,
        Arrivals::Gamma { rate, .. } | Arrivals::Constant { rate } => rate.ceil().max(1.0) as usize,
    };
    at_once.min(prompts).min(max_concurrency.unwrap_or(usize::MAX)).min(4096)
}

/// What a shard records of itself: which shard, its start, its clock reading.
fn shard_info(plan: &Plan, clock: Option<&Reading>) -> ShardInfo {
    ShardInfo {
        shard: plan.shard.shard_or_whole(),
        start_at: plan.shard.start_at.map(servelab_plan::time::rfc3339_millis),
        clock_offset_ms: clock.map(|c| c.reading.offset_ms),
        clock_uncertainty_ms: clock.map(|c| c.reading.uncertainty_ms),
        clock_reference: clock.map(|c| c.reference.clone()),
    }
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
