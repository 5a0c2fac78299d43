//! One run: resolve the target, build the workload, run the measuring loop, summarize.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use servelab_client::openai::request_body;
use servelab_client::scrape::{Baseline, Scraper};
use servelab_client::{
    http, BodyOptions, PlannedRequest, Progress, RequestSource, RunConfig, StopReason, Target,
};
use servelab_load::{Arrivals, LoadSpec, Schedule};
use servelab_metrics::digest::ShardDigest;
use servelab_metrics::fold::{Folded, RecordFold};
use servelab_metrics::Summary;
use servelab_outputs::term;
use servelab_plan::{
    DatasetSpec, NoRecording, Plan, RecordSink, Recording, RunError, Runner, SimTarget,
};
use servelab_records::{RequestRecord, RunInfo, ShardInfo};
use servelab_workload::{Prompt, Tokenizer, TraceWorkload};
use tokio::sync::{mpsc, watch};

use crate::clock::Clocks;
use crate::drain::{wait_drained, Drain};

/// Everything a finished (or interrupted) run produced.
#[derive(Debug)]
pub struct BenchOutcome {
    /// What it measured.
    pub summary: Summary,
    /// Every request, warm-ups first, with token counts.
    pub records: Vec<RequestRecord>,
    /// The result JSON, when the plan asked for one.
    pub result_path: Option<PathBuf>,
    /// Why issuing stopped.
    pub stop: StopReason,
    /// Files the run could not write (a full disk, a read-only folder): the summary and the
    /// store have the result; the caller says so after printing it, and fails.
    pub save_errors: Vec<String>,
}

/// Runs plans against real servers or the built-in simulator.
pub struct Conductor {
    interrupt: watch::Receiver<bool>,
    recording: Option<Arc<dyn Recording>>,
    /// The simulator started for simulator plans, kept for the next run with the same setup
    /// (a sweep's points share one, so its drain check sees one server).
    sim: Option<(SimTarget, servelab_sim::SimHandle)>,
    /// Between runs, with no `/metrics` to poll: pause this long.
    pause: Duration,
    /// Between runs: wait at most this long for the server to drain.
    drain_timeout: Duration,
    /// `/metrics` of the last URL target, while it answers with vLLM's gauges.
    metrics: Option<Target>,
    /// The last clock reading of a shard, for the next runs.
    clocks: Clocks,
    /// What each target's preflight found, for the next runs against it.
    preflights: crate::preflight::Preflights,
}

impl Conductor {
    /// A conductor that stops issuing when `interrupt` turns true.
    pub fn new(interrupt: watch::Receiver<bool>) -> Conductor {
        Conductor {
            interrupt,
            recording: None,
            sim: None,
            pause: Duration::from_secs(2),
            drain_timeout: Duration::from_secs(120),
            metrics: None,
            clocks: Clocks::default(),
            preflights: Default::default(),
        }
    }

    /// Record every run through `recording` (the results store).
    pub fn with_recording(mut self, recording: Arc<dyn Recording>) -> Conductor {
        self.recording = Some(recording);
        self
    }

    /// How [`Runner::settle`] waits between runs: poll `/metrics` until the server holds no
    /// request (at most `drain_timeout`), or pause `pause` when it has no such gauges.
    pub fn with_settle(mut self, pause: Duration, drain_timeout: Duration) -> Conductor {
        self.pause = pause;
        self.drain_timeout = drain_timeout;
        self
    }

    /// Stop the simulator this conductor started, if any.
    pub async fn shutdown(mut self) {
        if let Some((_, h)) = self.sim.take() {
            h.shutdown().await;
        }
    }

    /// Run one plan. Messages go to stderr; the summary is returned for the caller to print.
    pub async fn bench(&mut self, plan: &Plan) -> Result<BenchOutcome, RunError> {
        plan.check().map_err(|e| RunError::Usage(e.to_string()))?;
        let (base_url, simulated) = match &plan.target {
            servelab_plan::Target::Url(u) => (u.clone(), false),
            servelab_plan::Target::Simulator(spec) => (self.simulator(spec.clone()).await?, true),
        };
        if !simulated {
            if let Ok(t) = Target::resolve(&base_url, "/metrics").await {
                self.metrics.get_or_insert(t);
            }
        }
        let recording = self.recording.clone();
        let truth = self.sim.as_ref().filter(|_| simulated).map(|(_, h)| (h, h.truth_len()));
        let (clocks, preflights) = (&mut self.clocks, &mut self.preflights);
        run(plan, &base_url, truth, recording, clocks, preflights, self.interrupt.clone()).await
    }

    /// The base URL of a running simulator set up as `spec`, started on first use.
    async fn simulator(&mut self, spec: SimTarget) -> Result<String, RunError> {
        if let Some((s, h)) = &self.sim {
            if *s == spec {
                return Ok(h.base_url());
            }
        }
        if let Some((_, old)) = self.sim.take() {
            old.shutdown().await;
        }
        let mut cfg = servelab_sim::SimConfig::default();
        if let Some(n) = spec.max_num_seqs {
            cfg = cfg.with_max_num_seqs(n);
        }
        if let Some(path) = &spec.engine {
            let edit = |f: &mut servelab_engine::EngineFile| {
                if let Some(n) = spec.max_num_seqs {
                    f.scheduler.max_num_seqs = u32::try_from(n).unwrap_or(u32::MAX);
                }
            };
            let hub = servelab_workload::hub::model_config_json;
            let e = servelab_engine::load_engine_file_via(path, edit, hub)
                .map_err(|e| RunError::Usage(format!("--sim-engine {}: {e}", path.display())))?;
            cfg = cfg.with_engine(e);
        }
        let handle = servelab_sim::start(cfg)
            .await
            .map_err(|e| RunError::Failed(format!("cannot start the built-in simulator: {e}")))?;
        let url = handle.base_url();
        let slots = spec.max_num_seqs.map_or(String::new(), |n| format!(", {n} sequence slots"));
        let timing = match &spec.engine {
            Some(p) => format!("the engine model of {}{slots}", p.display()),
            // Said plainly: a workload or load flag leaves the zero-setup engine model, and a
            // reader must not take these fixed delays for a modeled server's.
            None => format!(
                "fixed timing, not an engine model: TTFT 50 ms, ITL 10 ms{slots}; \
                 --sim-engine NAME|FILE for a modeled deployment"
            ),
        };
        term::note(&format!(
            "No --base-url given: benchmarking the built-in simulator at {url} ({timing}). \
             Pass --base-url to measure a real server."
        ));
        self.sim = Some((spec, handle));
        Ok(url)
    }
}

impl Runner for Conductor {
    fn target_restarted(&mut self) {
        self.preflights.forget();
    }

    async fn run(&mut self, plan: &Plan) -> Result<Summary, RunError> {
        if *self.interrupt.borrow() {
            return Err(RunError::Interrupted);
        }
        let out = self.bench(plan).await?;
        let mut summary = out.summary;
        summary.warnings.extend(out.save_errors.into_iter().map(|e| format!("not saved: {e}")));
        Ok(summary)
    }

    async fn settle(&mut self) {
        let Some(target) = self.metrics.clone() else {
            tokio::time::sleep(self.pause).await;
            return;
        };
        let fetch = || {
            let t = target.clone();
            async move {
                match tokio::time::timeout(Duration::from_secs(5), http::get(&t, "/metrics")).await
                {
                    Ok(Ok((200, body))) => Some(String::from_utf8_lossy(&body).into_owned()),
                    _ => None,
                }
            }
        };
        match wait_drained(fetch, self.drain_timeout, Duration::from_millis(100)).await {
            Drain::Drained => {}
            Drain::Unknown => {
                // No vLLM gauges: fall back to a fixed pause, once and for all.
                self.metrics = None;
                tokio::time::sleep(self.pause).await;
            }
            Drain::TimedOut(n) => term::warn(&format!(
                "the server still holds {n} requests after {:.0} s; starting the next run \
                 anyway (raise --drain-timeout-secs)",
                self.drain_timeout.as_secs_f64()
            )),
        }
    }
}

/// Runs one plan against `base_url`. With `truth`, the target is the built-in simulator: its
/// log of what it did, from the given mark on, is set next to the measurement.
async fn run(
    plan: &Plan,
    base_url: &str,
    truth: Option<(&servelab_sim::SimHandle, usize)>,
    recording: Option<Arc<dyn Recording>>,
    clocks: &mut Clocks,
    preflights: &mut crate::preflight::Preflights,
    interrupt: watch::Receiver<bool>,
) -> Result<BenchOutcome, RunError> {
    let usage = |e: &dyn std::fmt::Display| RunError::Usage(e.to_string());
    let failed = |e: &dyn std::fmt::Display| RunError::Failed(e.to_string());
    let simulated = truth.is_some();
    let req = &plan.request;
    // Thousands of streams need thousands of sockets; most systems start with 1,024.
    let _ = servelab_sim::raise_nofile_limit();
    let mut target = Target::resolve(base_url, &req.endpoint).await.map_err(|e| usage(&e))?;
    // Messages quote the URL as typed, without its password.
    let base_url = &http::redact_url(base_url);
    for h in &req.headers {
        target.add_header(h).map_err(|e| usage(&e))?;
    }
    if let Some(key) = &req.api_key {
        target.set_api_key(key).map_err(|e| usage(&e))?;
    }
    let limits = &plan.limits;
    // Ctrl-C and SIGTERM end the waits before the run as they end the run itself.
    let mut stop = interrupt.clone();
    let ready =
        http::unless_interrupted(&mut stop, http::wait_ready(&target, limits.ready_timeout));
    ready.await.ok_or(RunError::Interrupted)?.map_err(|last| {
        RunError::Failed(format!(
            "{base_url} did not become ready within {:.0} s ({last}); is the server running? \
             (raise --ready-timeout for slow starts)",
            limits.ready_timeout.as_secs_f64()
        ))
    })?;
    let model = match &req.model {
        Some(m) => m.clone(),
        None => http::unless_interrupted(&mut stop, http::first_model(&target))
            .await
            .ok_or(RunError::Interrupted)?
            .map_err(|e| failed(&e))?,
    };

    // Workload.
    let w = &plan.workload;
    let tokenizer = resolve_tokenizer(w.tokenizer.as_deref(), &model, simulated)?;
    let work = Work::load(&w.dataset, w.num_prompts, &tokenizer.tokenizer, w.seed)
        .map_err(|e| usage(&e))?;
    let mut opts = BodyOptions {
        api: req.api,
        model: model.clone(),
        max_tokens_field: req.max_tokens_field,
        ignore_eos: req.ignore_eos,
        min_tokens: req.ignore_eos,
        stream_usage: req.stream_usage,
        continuous_usage: req.continuous_usage.unwrap_or(simulated),
        extra: req.extra_body.clone(),
    };
    let adaptation = if req.preflight && !simulated {
        http::unless_interrupted(&mut stop, preflights.check(base_url, &target, &mut opts))
            .await
            .ok_or(RunError::Interrupted)?
    } else {
        crate::preflight::Adaptation::default()
    };
    for note in &adaptation.notes {
        term::warn(note);
    }
    let planned = |p: &Prompt| PlannedRequest {
        body: request_body(&opts, &p.body, p.output_tokens).into(),
        prompt_tokens: Some(p.prompt_tokens),
        max_tokens: p.output_tokens,
    };
    let all: Vec<PlannedRequest> = work.prompts.iter().map(planned).collect();
    // Warm-ups that resent the run's first prompts would leave them in the server's prefix
    // cache, and those measured requests' TTFT short: where the dataset draws its prompts
    // from a seed, warm-ups draw their own. (A JSONL file's lines have no other order.)
    let warm_prompts = match &w.dataset {
        DatasetSpec::Random { .. }
        | DatasetSpec::Prefix { .. }
        | DatasetSpec::RandomMultimodal { .. }
        | DatasetSpec::ShareGpt { .. }
            if w.num_warmups > 0 && work.sessions.is_none() =>
        {
            let seed = w.seed ^ WARMUP_SEED;
            let p = servelab_workload::load(&w.dataset, w.num_warmups, &tokenizer.tokenizer, seed)
                .map_err(|e| usage(&e))?;
            Some(p)
        }
        _ => None,
    };
    // Which prompts carry images (empty when none does): their tokens need the server's usage.
    let mut with_images: Vec<bool> = work.prompts.iter().map(|p| p.image_count() > 0).collect();
    if !with_images.contains(&true) {
        with_images = Vec::new();
    }
    drop(work.prompts);
    let trace_rows = work.trace.as_ref().map(|t| servelab_metrics::TraceRows {
        rows: t.stats.rows as u64,
        filtered: t.stats.filtered as u64,
        outside_window: t.stats.outside_window as u64,
        zero_length: t.stats.zero_length as u64,
        over_cap: t.stats.over_cap as u64,
        replayed: t.len() as u64,
    });
    let sessions = work.sessions.map(|s| servelab_client::SessionRun::new(s, opts.clone()));
    // A trace's bodies are written by the loop just ahead of their sends: a long trace's
    // prompt text is never all in memory.
    let source: Option<Arc<dyn RequestSource>> =
        work.trace.map(|t| Arc::new(TraceRequests { trace: t, opts: opts.clone() }) as _);
    // What one arrival starts: a request, or a whole session.
    let units = match (&sessions, &source) {
        (Some(s), _) => s.len(),
        (None, Some(src)) => src.len(),
        (None, None) => all.len(),
    };
    // A shard sends its part of the global schedule under the global indices; warm-ups are
    // shared the same way, so N shards warm the server as much as one process does. Warm-ups
    // are single requests: the first prompts, or the first turns of the first sessions.
    let shard = plan.shard.shard_or_whole();
    let warm: Vec<PlannedRequest> = match (&sessions, &source) {
        (Some(s), _) => (0..s.len().min(w.num_warmups)).filter_map(|i| s.first_turn(i)).collect(),
        (None, Some(src)) => (0..src.len().min(w.num_warmups)).map(|i| src.request(i)).collect(),
        (None, None) => match warm_prompts {
            Some(p) => p.iter().map(planned).collect(),
            None => all.iter().take(w.num_warmups).cloned().collect(),
        },
    };
    let warmups: Vec<PlannedRequest> =
        (0u64..).zip(warm).filter(|(i, _)| shard.owns(*i)).map(|(_, r)| r).collect();
    // Explicit instants: a trace's own, else a ramp's (drawn over every arrival).
    let explicit: Option<Arc<[u64]>> = work
        .send_at
        .or_else(|| plan.ramp.map(|r| r.offsets(plan.load.burstiness, units, w.seed).into()));
    let (requests, ids, send_at): (Vec<PlannedRequest>, Option<Arc<[u64]>>, _) =
        if plan.shard.is_split() {
            let global = match &explicit {
                Some(at) => at.to_vec(),
                None => global_schedule(&plan.load, w.seed, units),
            };
            let (ids, at) = shard.share(&global);
            // Sessions and on-demand requests are looked up by global index in the loop;
            // requests are copied here.
            let reqs = match (&sessions, &source) {
                (None, None) => ids.iter().map(|&i| all[i as usize % all.len()].clone()).collect(),
                _ => Vec::new(),
            };
            (reqs, Some(ids.into()), Some(at.into()))
        } else {
            (all, None, explicit)
        };
    let sharded = plan.shard.shard.is_some() || plan.shard.start_at.is_some();
    let clock = if sharded {
        let mut stop = interrupt.clone();
        let spec = &plan.shard;
        let warm = !warmups.is_empty();
        clocks.before(&spec.clock, &target, base_url, spec.start_at, warm, &mut stop).await
    } else {
        None
    };
    // For a reading taken again after the run, when the start left no time for it.
    let clock_target = clock.as_ref().map(|_| (target.clone(), interrupt.clone()));

    let info = RunInfo {
        backend: req.api.backend().to_string(),
        base_url: target.base_url.clone(),
        endpoint: target.path.clone(),
        model: model.clone(),
        tokenizer: Some(tokenizer.tokenizer.name().to_string()),
        dataset: w.dataset.label(),
        num_prompts: units as u64,
        load: plan.load,
        ramp: plan.ramp,
        num_warmups: w.num_warmups as u64,
        seed: w.seed,
        simulated,
        started_at: servelab_plan::time::now_rfc3339(),
        servelab_version: env!("CARGO_PKG_VERSION").to_string(),
        interrupted: false,
        shard: sharded.then(|| {
            shard_info(shard, plan.shard.start_at, clock.as_ref().and_then(|c| c.reading()))
        }),
    };

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
    // Disk and store writes run on a blocking-pool thread, never on the runtime's workers
    // that are timing streams.
    let detail = detail_path.clone();
    // A multi-turn session's requests must stay together to be counted; such runs keep all.
    let keep = if sessions.is_some() { usize::MAX } else { plan.limits.keep_records };
    let fold = RecordFold::new(keep, info.clone(), plan.metrics.clone());
    let tok = tokenizer.tokenizer.clone();
    let collector = tokio::task::spawn_blocking(move || collect(rx, detail, sink, fold, tok));
    let progress = Arc::new(Progress::default());
    // Requests (or sessions) this process sends, and the requests they make.
    // A shard plans its share of the units; a whole run plans them all.
    let planned_here = ids.as_ref().map_or(units, |ids| ids.len());
    let sent_total: u64 = match (&sessions, &ids) {
        (Some(s), Some(ids)) => {
            ids.iter().map(|&g| s.sessions()[s.session_of(g)].turns.len() as u64).sum()
        }
        (Some(s), None) => s.total_turns(),
        (None, _) => planned_here as u64,
    };
    let total = (plan.load.duration_s.is_none() || send_at.is_some()).then_some(sent_total);
    let display = crate::progress::spawn(progress.clone(), total, plan.output.progress);
    let duration = plan.load.duration_s.map(Duration::from_secs_f64);
    let cfg = RunConfig {
        target,
        requests,
        source,
        warmups,
        arrivals: plan.load.arrivals(),
        send_at,
        ids,
        start_at: plan.shard.start_at,
        seed: w.seed,
        max_concurrency: plan.load.concurrency().map(|c| shard.share_of_cap(c)),
        duration,
        request_timeout: limits.request_timeout,
        stall_timeout: limits.stall_timeout,
        drain_timeout: limits.drain_timeout,
        preconnect: preconnect_count(
            planned_here,
            plan.load.concurrency().map(|c| shard.share_of_cap(c)),
            &plan.load.arrivals(),
        ),
        baseline: None,
        sessions,
    };
    // The engine's own account, scraped before, during and after the run.
    let baseline = Arc::new(Baseline::default());
    let scraper = match limits.server_metrics_interval {
        Some(every) => Scraper::start(&cfg.target, every, baseline.clone()).await,
        None => None,
    };
    let cfg = RunConfig { baseline: scraper.as_ref().map(|_| baseline), ..cfg };
    if let Some(at) = plan.shard.start_at {
        if let Err(late) = at.duration_since(std::time::SystemTime::now()) {
            term::warn(&format!(
                "--start-at was {:.1} s ago: requests due before now are sent late (and counted \
                 so); give the shards a later start",
                late.duration().as_secs_f64()
            ));
        }
    }
    let run = servelab_client::run(cfg, progress.clone(), tx, interrupt).await;
    let scrapes = match (&run, scraper) {
        (Ok(end), Some(sc)) => sc.finish(end.origin).await,
        _ => Vec::new(),
    };
    let end = run.map_err(|e| RunError::Failed(format!("cannot connect to {base_url}: {e}")))?;
    display.finish().await;
    let (mut folded, sink, detail_error) = collector
        .await
        .map_err(|e| RunError::Failed(format!("record collector failed: {e}")))?
        .map_err(|e| RunError::Failed(format!("cannot write per-request records: {e}")))?;
    let mut records = std::mem::take(&mut folded.records);

    // After the clock stops: per-chunk token counts, then metrics.
    let tok = tokenizer.tokenizer.clone();
    records = tokio::task::spawn_blocking(move || {
        for r in &mut records {
            servelab_client::tokens::attribute_tokens(r, &tok);
        }
        records
    })
    .await
    .map_err(|e| RunError::Failed(format!("token attribution failed: {e}")))?;
    let interrupted = end.stop == StopReason::Interrupted;
    let mut info = RunInfo { interrupted, ..info };
    if let (Some((target, mut stop)), false) = (clock_target, interrupted) {
        let again = clocks.after(clock, &plan.shard.clock, &target, &mut stop).await;
        info.shard = Some(shard_info(shard, plan.shard.start_at, again.as_ref()));
    }
    let mut summary = match folded.summary(&info) {
        Some(s) => s,
        None => servelab_metrics::summarize(&records, &info, &plan.metrics),
    };
    let folded_digest = folded.digest.take().map(|d| ShardDigest { info: info.clone(), ..d });
    servelab_metrics::engine::attach(&mut summary, &scrapes);
    if let Some((sim, mark)) = truth {
        if folded_digest.is_some() {
            summary.warnings.push(
                "the simulator's account is not set against the measurement: the records were \
                 folded"
                    .into(),
            );
        } else {
            let truth = crate::truth::server_truth(&sim.truth_since(mark));
            servelab_metrics::truth::attach(&mut summary, &records, &truth);
        }
    }
    if let Some(rows) = trace_rows {
        servelab_metrics::replay::attach(&mut summary, rows);
    }
    summary.warnings.extend(images_without_usage(&records, &with_images));
    summary.warnings.extend(adaptation.notes.iter().cloned());
    if adaptation.dropped_ignore_eos {
        summary.warnings.extend(folded.conduct.ended_early());
    }
    if let Some(note) = &tokenizer.estimate_note {
        summary.warnings.push(note.clone());
    }
    if interrupted {
        // Counted from the records, not from the arrivals handed out: the arrival a request
        // was waiting for when the interrupt came was never sent.
        let sent = records.iter().filter(|r| !r.warmup).count() as u64 + folded.folded;
        summary.warnings.push(format!(
            "interrupted: {sent} of {sent_total} planned requests were sent; this is a partial \
             result"
        ));
    }

    // The store first: a file that cannot be written (a full disk) must not cost the run
    // its stored result, and no write failure costs the summary the caller prints.
    if let Some(line) = sink.finish(&records, &summary, interrupted) {
        term::note(&line);
    }
    let mut save_errors: Vec<String> = detail_error.into_iter().collect();
    let saved = if plan.output.save_result {
        // A shard also ships its digest: counts, time series and sketches in a few kB to
        // tens of kB, which merge into the whole run's summary when its records are too
        // many to move (`runs merge-digests`). Written before the result, so a result
        // file that is there has its digest beside it.
        if plan.shard.shard.is_some() {
            use servelab_metrics::sketch::SHARD_SKETCH_ALPHA;
            let digest = match folded_digest {
                Some(d) => Ok(d),
                None => ShardDigest::new(&summary, &records, SHARD_SKETCH_ALPHA),
            };
            let path = result_path.with_extension("digest.json");
            let written = digest
                .map_err(|e| format!("shard digest: {e}"))
                .and_then(|d| serde_json::to_string(&d).map_err(|e| format!("shard digest: {e}")))
                .and_then(|text| {
                    servelab_plan::write_file(&path, text.as_bytes()).map_err(|e| e.to_string())
                });
            match written {
                Ok(()) => term::note(&format!("Saved the shard's digest to {}", path.display())),
                Err(e) => save_errors.push(e),
            }
        }
        let json = servelab_outputs::json::render(&summary, &records, plan.output.save_detailed);
        match servelab_plan::write_file(&result_path, json.as_bytes()) {
            Ok(()) => {
                term::note(&format!("Saved result to {}", result_path.display()));
                Some(result_path)
            }
            Err(e) => {
                save_errors.push(e.to_string());
                None
            }
        }
    } else {
        None
    };
    if let (Some(p), true) = (detail_path, save_errors.is_empty()) {
        term::note(&format!("Saved per-request records to {}", p.display()));
    }
    Ok(BenchOutcome { summary, records, result_path: saved, stop: end.stop, save_errors })
}

/// Mixed into the run's seed for the warm-ups' own prompts.
const WARMUP_SEED: u64 = 0x5741_524d_5550;

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
fn shard_info(
    shard: servelab_load::Shard,
    start_at: Option<std::time::SystemTime>,
    clock: Option<&crate::clock::Reading>,
) -> ShardInfo {
    ShardInfo {
        shard,
        start_at: start_at.map(servelab_plan::time::rfc3339_millis),
        clock_offset_ms: clock.map(|c| c.reading.offset_ms),
        clock_uncertainty_ms: clock.map(|c| c.reading.uncertainty_ms),
        clock_reference: clock.map(|c| c.reference.clone()),
    }
}

/// What a plan's dataset gives the loop: prompts, a trace (with its due instants), or
/// sessions.
struct Work {
    prompts: Vec<Prompt>,
    /// A replay: request `i` is due `send_at[i]` ns after the start.
    send_at: Option<Arc<[u64]>>,
    trace: Option<TraceWorkload>,
    sessions: Option<Vec<servelab_workload::Session>>,
}

/// A trace's requests, each written when the loop asks for it (a bounded number ahead of
/// its send).
#[derive(Debug)]
struct TraceRequests {
    trace: TraceWorkload,
    opts: BodyOptions,
}

impl RequestSource for TraceRequests {
    fn len(&self) -> usize {
        self.trace.len()
    }

    fn request(&self, i: usize) -> PlannedRequest {
        let p = self.trace.prompt(i);
        PlannedRequest {
            body: request_body(&self.opts, &p.body, p.output_tokens).into(),
            prompt_tokens: Some(p.prompt_tokens),
            max_tokens: p.output_tokens,
        }
    }
}

impl Work {
    fn load(
        spec: &DatasetSpec,
        num_prompts: usize,
        tokenizer: &Tokenizer,
        seed: u64,
    ) -> Result<Work, servelab_workload::DatasetError> {
        Ok(match spec {
            DatasetSpec::Sessions(s) => {
                let w = servelab_workload::load_sessions(s, num_prompts, tokenizer, seed)?;
                Work { prompts: Vec::new(), send_at: None, trace: None, sessions: Some(w.sessions) }
            }
            // A trace is replayed whole (its own window and cap choose the rows), at its
            // timestamps.
            DatasetSpec::Trace(t) => {
                let trace = servelab_workload::load_trace(t, tokenizer, seed)?;
                Work {
                    prompts: Vec::new(),
                    send_at: Some(trace.arrivals_ns.clone().into()),
                    trace: Some(trace),
                    sessions: None,
                }
            }
            _ => Work {
                prompts: servelab_workload::load(spec, num_prompts, tokenizer, seed)?,
                send_at: None,
                trace: None,
                sessions: None,
            },
        })
    }
}

/// The warning for completed requests whose prompt carried images (`with_images[i]`: prompt
/// `i` does; records cycle through the prompts by index) but whose server sent no usage: their
/// prompt tokens are the text's alone, since only the server knows what an image costs.
fn images_without_usage(records: &[RequestRecord], with_images: &[bool]) -> Option<String> {
    if with_images.is_empty() {
        return None;
    }
    let n = records
        .iter()
        .filter(|r| !r.warmup && r.is_success() && r.usage.is_none())
        .filter(|r| with_images[(r.index % with_images.len() as u64) as usize])
        .count();
    (n > 0).then(|| {
        format!(
            "{n} completed requests carried images but the server sent no usage: their prompt \
             tokens (and the input totals) count the text only; what the images cost in tokens \
             is unknown"
        )
    })
}

struct ResolvedTokenizer {
    tokenizer: Tokenizer,
    /// Set when counts come from a tokenizer that is not the model's.
    estimate_note: Option<String>,
}

/// The whole run's intended send instants (ns from time zero), as one process would draw
/// them: `prompts` of them, or in duration mode every one before the end (prompts cycled).
/// Every shard draws the same from the seed. A duration with no rate would be endless; a plan
/// with shards refuses that (`Plan::check`), and it yields nothing here.
pub fn global_schedule(load: &LoadSpec, seed: u64, prompts: usize) -> Vec<u64> {
    let schedule = Schedule::new(load.arrivals(), seed);
    match load.duration_s {
        None => schedule.take(prompts).collect(),
        Some(_) if load.request_rate.is_none() => Vec::new(),
        Some(d) => {
            let end = (d * 1e9) as u64;
            schedule.take_while(|t| *t < end).collect()
        }
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

fn resolve_tokenizer(
    spec: Option<&str>,
    model: &str,
    simulated: bool,
) -> Result<ResolvedTokenizer, RunError> {
    if let Some(spec) = spec {
        let tokenizer = Tokenizer::from_spec(spec).map_err(|e| RunError::Usage(e.to_string()))?;
        return Ok(ResolvedTokenizer { tokenizer, estimate_note: None });
    }
    let builtin = || {
        Tokenizer::builtin(servelab_workload::tokenizer::DEFAULT_ENCODING)
            .map_err(|e| RunError::Failed(e.to_string()))
    };
    if simulated {
        // The simulator's default tokenizer: counts are exact.
        return Ok(ResolvedTokenizer { tokenizer: builtin()?, estimate_note: None });
    }
    if model.contains('/') {
        if let Ok(tokenizer) = Tokenizer::from_spec(model) {
            return Ok(ResolvedTokenizer { tokenizer, estimate_note: None });
        }
    }
    let name = servelab_workload::tokenizer::DEFAULT_ENCODING;
    let note = format!(
        "no tokenizer for model '{model}': prompt lengths and per-chunk token counts are \
         estimates from {name}; output totals come from the server's usage when it sends it. \
         Pass --tokenizer for exact counts."
    );
    term::warn(&note);
    Ok(ResolvedTokenizer { tokenizer: builtin()?, estimate_note: Some(note) })
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
    fn the_global_schedule_is_the_one_process_schedule() {
        let load = LoadSpec { request_rate: Some(4.0), ..LoadSpec::default() };
        let global = global_schedule(&load, 7, 5);
        assert_eq!(global, Schedule::take_n(load.arrivals(), 7, 5));
        assert_eq!(global.len(), 5);
        // Duration mode: every instant before the end, prompts cycled (a constant 4/s for
        // 1 s is 0, 250, 500 and 750 ms).
        let timed = LoadSpec {
            request_rate: Some(4.0),
            burstiness: f64::INFINITY,
            duration_s: Some(1.0),
            ..LoadSpec::default()
        };
        assert_eq!(global_schedule(&timed, 7, 2), vec![0, 250_000_000, 500_000_000, 750_000_000]);
        let endless = LoadSpec { duration_s: Some(1.0), ..LoadSpec::default() };
        assert_eq!(global_schedule(&endless, 7, 2), Vec::<u64>::new());
    }

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

    #[test]
    fn images_without_usage_are_counted_and_named() {
        let rec = |index: u64, usage: bool, warmup: bool| RequestRecord {
            index,
            warmup,
            usage: usage.then(|| servelab_records::Usage {
                prompt_tokens: 10,
                completion_tokens: 2,
                ..Default::default()
            }),
            scheduled_ns: 0,
            intended_ns: 0,
            sent_ns: 0,
            prompt_tokens: Some(8),
            max_tokens: Some(2),
            chunks: Vec::new(),
            end_ns: Some(1),
            status: Some(200),
            outcome: servelab_records::Outcome::Success,
            server: None,
            read_lag_ns: None,
            retries: 0,
            session: None,
            stream: Default::default(),
        };
        // Prompts 0 and 2 of 3 carry images; request 3 cycles back to prompt 0.
        let with_images = [true, false, true];
        let records = [
            rec(0, false, true),
            rec(0, false, false),
            rec(1, false, false),
            rec(2, true, false),
            rec(3, false, false),
        ];
        assert_eq!(
            images_without_usage(&records, &with_images).as_deref(),
            Some(
                "2 completed requests carried images but the server sent no usage: their prompt \
                 tokens (and the input totals) count the text only; what the images cost in \
                 tokens is unknown"
            )
        );
        assert_eq!(images_without_usage(&records[..4], &[false, false, false, false]), None);
        assert_eq!(images_without_usage(&records, &[]), None);
        assert_eq!(images_without_usage(&[rec(2, true, false)], &with_images), None);
    }

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
