//! The conductor: the measuring [`Runner`]. One run is [`prepare`] → [`measure`] → [`finish`].

use std::sync::Arc;
use std::time::Duration;

use servelab_client::{http, Target};
use servelab_metrics::Summary;
use servelab_outputs::term;
use servelab_plan::{Plan, Recording, RunError, Runner, SimTarget};
use tokio::sync::watch;

use crate::clock::Clocks;
use crate::drain::{wait_drained, Drain};
use crate::finish::finish;
use crate::measure::measure;
use crate::preflight::Preflights;
use crate::prepare::prepare;
use crate::save::BenchOutcome;

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
    preflights: Preflights,
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

/// Runs one plan against `base_url`, in three stages: [`prepare`] everything before the clock
/// (the target, the workload, the requests), [`measure`] with the one measuring loop (records
/// streamed to disk and to the store as they finish), [`finish`] the summary and the saved
/// files. With `truth`, the target is the built-in simulator: its log of what it did, from the
/// given mark on, is set next to the measurement.
async fn run(
    plan: &Plan,
    base_url: &str,
    truth: Option<(&servelab_sim::SimHandle, usize)>,
    recording: Option<Arc<dyn Recording>>,
    clocks: &mut Clocks,
    preflights: &mut Preflights,
    interrupt: watch::Receiver<bool>,
) -> Result<BenchOutcome, RunError> {
    let prepared = prepare(plan, base_url, truth.is_some(), preflights, &interrupt).await?;
    let measured = measure(plan, prepared, recording, clocks, interrupt).await?;
    finish(plan, measured, truth)
}
