//! Stage 1 of a run, everything before the clock: reach the target, load the workload, write
//! the requests and decide which of them this process sends. New work that must be done
//! before the first request (a check of the server, another workload's setup) goes here.

use std::sync::Arc;

use servelab_client::{http, BodyOptions, PlannedRequest, RequestSource, Target};
use servelab_load::{Arrivals, LoadSpec, Schedule};
use servelab_metrics::TraceRows;
use servelab_outputs::term;
use servelab_plan::{Plan, RunError};
use servelab_workload::{Tokenizer, Workload};
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
    pub tokenizer: ResolvedTokenizer,
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

/// The units of a run this process sends, and when.
pub(crate) struct Share {
    /// What the whole run's arrivals start (requests or sessions).
    pub units: usize,
    /// The global index of each unit sent here; `None`: all of them, in order.
    pub ids: Option<Arc<[u64]>>,
    /// When each is due (ns from time zero); `None`: the arrival process decides.
    pub send_at: Option<Arc<[u64]>>,
    /// The requests those units make (a session makes one per turn).
    pub requests: u64,
}

impl Share {
    /// Units sent by this process.
    pub fn units_here(&self) -> usize {
        self.ids.as_ref().map_or(self.units, |ids| ids.len())
    }
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
    let w = &plan.workload;
    let tokenizer = resolve_tokenizer(w.tokenizer.as_deref(), &model, simulated)?;
    let workload =
        Workload::load(&w.dataset, w.num_prompts, w.num_warmups, &tokenizer.tokenizer, w.seed)
            .map_err(|e| RunError::Usage(e.to_string()))?;
    let mut opts = body_options(plan, &model, simulated);
    let adaptation = if plan.request.preflight && !simulated {
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
    // A trace is replayed at its own instants.
    let replay_at = match &workload {
        Workload::Trace(t) => Some(t.arrivals_ns.clone().into()),
        _ => None,
    };
    let source = RequestSource::new(workload, &opts);
    let warmups = source.warmups(w.num_warmups, plan.shard.shard_or_whole());
    let share = share(plan, &source, replay_at);
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

/// How the plan's requests are written for `model`.
fn body_options(plan: &Plan, model: &str, simulated: bool) -> BodyOptions {
    let req = &plan.request;
    BodyOptions {
        api: req.api,
        model: model.to_string(),
        max_tokens_field: req.max_tokens_field,
        ignore_eos: req.ignore_eos,
        min_tokens: req.ignore_eos,
        stream_usage: req.stream_usage,
        continuous_usage: req.continuous_usage.unwrap_or(simulated),
        extra: req.extra_body.clone(),
    }
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

/// The units this process sends. A shard sends its part of the global schedule under the
/// global indices; explicit instants are a trace's own (`replay_at`), else a ramp's (drawn
/// over every arrival).
fn share(plan: &Plan, source: &RequestSource, replay_at: Option<Arc<[u64]>>) -> Share {
    let (w, units) = (&plan.workload, source.units());
    let explicit = replay_at
        .or_else(|| plan.ramp.map(|r| r.offsets(plan.load.burstiness, units, w.seed).into()));
    let (ids, send_at): (Option<Arc<[u64]>>, _) = if plan.shard.is_split() {
        let global = match &explicit {
            Some(at) => at.to_vec(),
            None => global_schedule(&plan.load, w.seed, units),
        };
        let (ids, at) = plan.shard.shard_or_whole().share(&global);
        (Some(ids.into()), Some(at.into()))
    } else {
        (None, explicit)
    };
    let requests = source.requests_of(ids.as_deref());
    Share { units, ids, send_at, requests }
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

/// A tokenizer, and the warning that it is not the model's (counts are then estimates).
pub(crate) struct ResolvedTokenizer {
    pub tokenizer: Tokenizer,
    /// Set when counts come from a tokenizer that is not the model's.
    pub estimate_note: Option<String>,
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
