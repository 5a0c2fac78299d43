//! Stage 1 of a run, everything before the clock: reach the target, load the workload, write
//! the requests and decide which of them this process sends. New work that must be done
//! before the first request (a check of the server, another workload's setup) goes here.

use servelab_client::{http, BodyOptions, PlannedRequest, RequestSource, Share, Target};
use servelab_metrics::TraceRows;
use servelab_outputs::term;
use servelab_plan::{Plan, RunError};
use servelab_workload::{RunTokenizer, Workload};
use tokio::sync::watch;

use crate::preflight::{Adaptation, Preflights};

/// A run ready to measure.
pub(crate) struct Prepared {
    /// Where requests go, headers and key set, ready.
    pub target: Target,
    /// The base URL as typed, without its password, for messages.
    pub base_url: String,
    /// The model asked for (the plan's, else the server's first).
    pub model: String,
    /// The target is the built-in simulator.
    pub simulated: bool,
    pub tokenizer: RunTokenizer,
    /// The measured requests, by unit.
    pub source: RequestSource,
    /// The warm-ups this process sends.
    pub warmups: Vec<PlannedRequest>,
    /// Which units this process sends, and when.
    pub share: Share,
    /// What the preflight changed in the bodies.
    pub adaptation: Adaptation,
    /// Which prompts carry images (empty when none does).
    pub with_images: Vec<bool>,
    /// A replay's account of its trace's rows.
    pub trace_rows: Option<TraceRows>,
}

/// Everything before the clock starts. With `simulated`, the target is the built-in simulator
/// (whose tokenizer is known and which needs no preflight).
pub(crate) async fn prepare(
    plan: &Plan,
    base_url: &str,
    simulated: bool,
    preflights: &mut Preflights,
    interrupt: &watch::Receiver<bool>,
) -> Result<Prepared, RunError> {
    let (target, model) = reach(plan, base_url, interrupt).await?;
    // Messages quote the URL as typed, without its password.
    let base_url = http::redact_url(base_url);
    let (w, req) = (&plan.workload, &plan.request);
    // An error is the --tokenizer given, or else the built-in encoding's.
    let tokenizer =
        RunTokenizer::choose(w.tokenizer.as_deref(), &model, simulated).map_err(|e| {
            let m = e.to_string();
            if w.tokenizer.is_some() {
                RunError::Usage(m)
            } else {
                RunError::Failed(m)
            }
        })?;
    if let Some(note) = &tokenizer.estimate_note {
        term::warn(note);
    }
    let workload =
        Workload::load(&w.dataset, w.num_prompts, w.num_warmups, &tokenizer.tokenizer, w.seed)
            .map_err(|e| RunError::Usage(e.to_string()))?;
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
        let mut stop = interrupt.clone();
        http::unless_interrupted(&mut stop, preflights.check(&base_url, &target, &mut opts))
            .await
            .ok_or(RunError::Interrupted)?
    } else {
        Adaptation::default()
    };
    for note in &adaptation.notes {
        term::warn(note);
    }
    let (with_images, trace_rows) = (workload.with_images(), trace_rows(&workload));
    // Explicit instants: a trace's own, else a ramp's (drawn over every arrival).
    let replay_at = match &workload {
        Workload::Trace(t) => Some(t.arrivals_ns.clone().into()),
        _ => None,
    };
    let source = RequestSource::new(workload, &opts);
    let explicit = replay_at.or_else(|| {
        plan.ramp.map(|r| r.offsets(plan.load.burstiness, source.units(), w.seed).into())
    });
    let shard = plan.shard.shard_or_whole();
    let warmups = source.warmups(w.num_warmups, shard);
    let share = source.share(shard, explicit, &plan.load, w.seed);
    Ok(Prepared {
        target,
        base_url,
        model,
        simulated,
        tokenizer,
        source,
        warmups,
        share,
        adaptation,
        with_images,
        trace_rows,
    })
}

/// The target, with the plan's headers and key, once it answers; and the model to ask for.
async fn reach(
    plan: &Plan,
    base_url: &str,
    interrupt: &watch::Receiver<bool>,
) -> Result<(Target, String), RunError> {
    let usage = |e: &dyn std::fmt::Display| RunError::Usage(e.to_string());
    let req = &plan.request;
    // Thousands of streams need thousands of sockets; most systems start with 1,024.
    let _ = servelab_sim::raise_nofile_limit();
    let mut target = Target::resolve(base_url, &req.endpoint).await.map_err(|e| usage(&e))?;
    for h in &req.headers {
        target.add_header(h).map_err(|e| usage(&e))?;
    }
    if let Some(key) = &req.api_key {
        target.set_api_key(key).map_err(|e| usage(&e))?;
    }
    let ready_timeout = plan.limits.ready_timeout;
    // Ctrl-C and SIGTERM end the waits before the run as they end the run itself.
    let mut stop = interrupt.clone();
    let ready = http::unless_interrupted(&mut stop, http::wait_ready(&target, ready_timeout));
    ready.await.ok_or(RunError::Interrupted)?.map_err(|last| {
        RunError::Failed(format!(
            "{} did not become ready within {:.0} s ({last}); is the server running? \
             (raise --ready-timeout for slow starts)",
            http::redact_url(base_url),
            ready_timeout.as_secs_f64()
        ))
    })?;
    let model = match &req.model {
        Some(m) => m.clone(),
        None => http::unless_interrupted(&mut stop, http::first_model(&target))
            .await
            .ok_or(RunError::Interrupted)?
            .map_err(|e| RunError::Failed(e.to_string()))?,
    };
    Ok((target, model))
}

/// A trace's rows as the summary accounts for them.
fn trace_rows(workload: &Workload) -> Option<TraceRows> {
    let Workload::Trace(t) = workload else { return None };
    Some(TraceRows {
        rows: t.stats.rows as u64,
        filtered: t.stats.filtered as u64,
        outside_window: t.stats.outside_window as u64,
        zero_length: t.stats.zero_length as u64,
        over_cap: t.stats.over_cap as u64,
        replayed: t.len() as u64,
    })
}
