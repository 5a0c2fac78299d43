//! Stage 2 of a run: the measuring loop, with every finished record streamed to the detail
//! file and the store as it arrives and folded for the summary. New work that must watch the
//! run while it goes (another live account, another sink) goes here.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use servelab_client::scrape::{Baseline, Scraper};
use servelab_client::{Progress, RunConfig, StopReason};
use servelab_metrics::fold::{Folded, RecordFold};
use servelab_outputs::term;
use servelab_plan::{NoRecording, Plan, RecordSink, Recording, RunError};
use servelab_records::{RequestRecord, RunInfo, ServerScrape, ShardInfo};
use servelab_workload::Tokenizer;
use tokio::sync::{mpsc, watch};

use crate::clock::{Clocks, Reading};
use crate::prepare::{preconnect_count, Prepared};

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
    pub stop: StopReason,
    /// Where the result goes when saved, and the detail file written during the run.
    pub result_path: PathBuf,
    pub detail_path: Option<PathBuf>,
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
    let sharded = plan.shard.shard.is_some() || plan.shard.start_at.is_some();
    let clock = if sharded {
        let (mut stop, spec, warm) = (interrupt.clone(), &plan.shard, !p.warmups.is_empty());
        clocks.before(&spec.clock, &p.target, &p.base_url, spec.start_at, warm, &mut stop).await
    } else {
        None
    };
    let reading = clock.as_ref().and_then(|c| c.reading());
    let mut info = run_info(plan, p, sharded.then(|| shard_info(plan, reading)));
    // Run, streaming records to the collector (and to disk) as they finish.
    let result_path =
        safe_file_name(plan.result_path(&info.backend, &info.model, &info.started_at));
    let detail_path =
        plan.output.save_detailed.then(|| result_path.with_extension("records.jsonl"));
    let (tx, rx) = mpsc::unbounded_channel();
    // The run is recorded as running before the first request is sent.
    let sink: Box<dyn RecordSink> = match &recording {
        Some(r) => r.begin(&info, &plan.record),
        None => Box::new(NoRecording),
    };
    // A multi-turn session's requests must stay together to be counted; such runs keep all.
    let keep = if p.source.multi_turn() { usize::MAX } else { plan.limits.keep_records };
    let fold = RecordFold::new(keep, info.clone(), plan.metrics.clone());
    // Disk and store writes run on a blocking-pool thread, never on the runtime's workers
    // that are timing streams.
    let (detail, tok) = (detail_path.clone(), p.tokenizer.tokenizer.clone());
    let collector = tokio::task::spawn_blocking(move || collect(rx, detail, sink, fold, tok));
    let progress = Arc::new(Progress::default());
    let total =
        (plan.load.duration_s.is_none() || p.share.send_at.is_some()).then_some(p.share.requests);
    let display = crate::progress::spawn(progress.clone(), total, plan.output.progress);
    let cfg = run_config(plan, p);
    // The engine's own account, scraped before, during and after the run.
    let baseline = Arc::new(Baseline::default());
    let scraper = match plan.limits.server_metrics_interval {
        Some(every) => Scraper::start(&cfg.target, every, baseline.clone()).await,
        None => None,
    };
    let cfg = RunConfig { baseline: scraper.as_ref().map(|_| baseline), ..cfg };
    warn_if_start_passed(plan);
    let run = servelab_client::run(cfg, progress.clone(), tx, interrupt.clone()).await;
    let scrapes = match (&run, scraper) {
        (Ok(end), Some(sc)) => sc.finish(end.origin).await,
        _ => Vec::new(),
    };
    let end =
        run.map_err(|e| RunError::Failed(format!("cannot connect to {}: {e}", p.base_url)))?;
    display.finish().await;
    let (mut folded, sink, detail_error) = collector
        .await
        .map_err(|e| RunError::Failed(format!("record collector failed: {e}")))?
        .map_err(|e| RunError::Failed(format!("cannot write per-request records: {e}")))?;
    let records =
        attribute_tokens(std::mem::take(&mut folded.records), &p.tokenizer.tokenizer).await?;
    info.interrupted = end.stop == StopReason::Interrupted;
    // For a reading taken again after the run, when the start left no time for it.
    if clock.is_some() && !info.interrupted {
        let mut stop = interrupt;
        let again = clocks.after(clock, &plan.shard.clock, &p.target, &mut stop).await;
        info.shard = Some(shard_info(plan, again.as_ref()));
    }
    Ok(Measured {
        prepared,
        info,
        records,
        folded,
        sink,
        scrapes,
        stop: end.stop,
        result_path,
        detail_path,
        detail_error,
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
    }
}

fn warn_if_start_passed(plan: &Plan) {
    let Some(at) = plan.shard.start_at else { return };
    if let Err(late) = at.duration_since(std::time::SystemTime::now()) {
        term::warn(&format!(
            "--start-at was {:.1} s ago: requests due before now are sent late (and counted \
             so); give the shards a later start",
            late.duration().as_secs_f64()
        ));
    }
}

/// After the clock stops: per-chunk token counts, off the runtime's workers.
async fn attribute_tokens(
    mut records: Vec<RequestRecord>,
    tokenizer: &Tokenizer,
) -> Result<Vec<RequestRecord>, RunError> {
    let tok = tokenizer.clone();
    tokio::task::spawn_blocking(move || {
        for r in &mut records {
            servelab_client::tokens::attribute_tokens(r, &tok);
        }
        records
    })
    .await
    .map_err(|e| RunError::Failed(format!("token attribution failed: {e}")))
}

/// `path` with a file name every file system takes: one over 200 bytes (a model name of
/// hundreds of characters) is cut and made unique with a hash of the whole name.
fn safe_file_name(path: PathBuf) -> PathBuf {
    const MAX: usize = 200;
    let Some(name) = path.file_name().and_then(|n| n.to_str()) else { return path };
    if name.len() <= MAX {
        return path;
    }
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    name.hash(&mut h);
    let (stem, ext) = name.rsplit_once('.').unwrap_or((name, "json"));
    let cut = (0..=150).rev().find(|&i| stem.is_char_boundary(i)).unwrap_or(0);
    path.with_file_name(format!("{}-{:016x}.{ext}", &stem[..cut], h.finish()))
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

/// Receive records as requests finish; append each to the detail file at once, and to the
/// recording sink. Blocking: runs on its own thread.
fn collect(
    mut rx: mpsc::UnboundedReceiver<RequestRecord>,
    detail: Option<PathBuf>,
    sink: Box<dyn RecordSink>,
    mut fold: RecordFold,
    tokenizer: Tokenizer,
) -> std::io::Result<(Folded, Box<dyn RecordSink>, Option<String>)> {
    let mut file = match &detail {
        Some(p) => {
            if let Some(dir) = p.parent() {
                std::fs::create_dir_all(dir)?;
            }
            Some(std::io::BufWriter::new(std::fs::File::create(p)?))
        }
        None => None,
    };
    // A write that fails (a full disk) stops the file, not the run: the records still reach
    // the store and the summary.
    let mut detail_error = None;
    let sink = std::cell::RefCell::new(sink);
    // A record folded away gets its token counts now, and the store its final version
    // (stored records are replaced by index).
    let mut prepare = |r: &mut RequestRecord| {
        if r.chunks.iter().any(|c| c.tokens.is_none()) {
            servelab_client::tokens::attribute_tokens(r, &tokenizer);
            sink.borrow_mut().push(r);
        }
    };
    while let Some(r) = rx.blocking_recv() {
        if let Some(f) = file.as_mut() {
            let written = serde_json::to_writer(&mut *f, &r)
                .map_err(std::io::Error::other)
                .and_then(|()| f.write_all(b"\n"))
                // Flushed per record: a crash or kill loses at most the request in flight.
                .and_then(|()| f.flush());
            if let Err(e) = written {
                let path = detail.as_deref().unwrap_or(std::path::Path::new("")).display();
                detail_error = Some(format!(
                    "cannot write {path}: {e}; it stops at the records written before (the \
                     store and the summary have all)"
                ));
                file = None;
            }
        }
        sink.borrow_mut().push(&r);
        fold.push(r, &mut prepare).map_err(std::io::Error::other)?;
    }
    let mut folded = fold.finish(&mut prepare).map_err(std::io::Error::other)?;
    folded.records.sort_by_key(|r| (r.warmup as u8 ^ 1, r.index));
    let mut sink = sink.into_inner();
    sink.flush();
    Ok((folded, sink, detail_error))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_file_names_are_cut_and_made_unique() {
        let short = PathBuf::from("out/openai-infqps-m-20261126-101010.json");
        assert_eq!(safe_file_name(short.clone()), short);
        let long = |m: &str| PathBuf::from(format!("out/openai-infqps-{m}-20261126.json"));
        let a = safe_file_name(long(&"é".repeat(200)));
        let b = safe_file_name(long(&"é".repeat(201)));
        let name = a.file_name().unwrap().to_str().unwrap();
        assert!(name.len() <= 150 + 1 + 16 + 5, "{name}");
        assert!(name.starts_with("openai-infqps-éé") && name.ends_with(".json"), "{name}");
        assert_eq!(a.parent(), Some(std::path::Path::new("out")));
        assert_ne!(a, b);
    }
}
