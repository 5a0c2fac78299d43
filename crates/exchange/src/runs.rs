//! A sequence of runs (a sweep's points, a lab's profile runs) run as shard k of N: every run
//! is one sharded run of all N shards, merged exactly on every shard, so each shard takes the
//! same next step (knee, SLO search, a lab's keep or reject).
//!
//! Run `j` starts on every shard at one instant. After its part, a shard writes its result
//! (`point-JJJJ-shard-K-of-N.json`, records beside it), then its end file
//! ([`Exchange::end`]); it waits (bounded, and Ctrl-C ends the wait) for every shard's end,
//! merges the N results with the exact merge and goes on with that summary. Run `j + 1`
//! starts at the latest shard's end plus a lead, the same instant on every shard, or at the
//! start its plan names when that is later (a lab's next engine, ready only then). A shard
//! whose part failed, or that forgoes a run, says so in its end file: the others fail that run
//! at once with its reason instead of waiting out the bound; a shard whose own part is still
//! running when another fails the run stops it (through the wrapped runner's interrupt,
//! [`crate::cancellable`]) rather than sending on for nothing. Shard 0, given a recording,
//! stores each merged run as one run (tagged `shards=N`); the parts are not.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use servelab_metrics::merge::{merge_shards, MergeOptions, ShardRun};
use servelab_metrics::Summary;
use servelab_plan::{ClockReference, Plan, Recording, RunError, Runner, Shard, ShardSpec};
use tokio::sync::watch;

use crate::{Cancel, End, Exchange, ExchangeError};

/// Reads one shard's part, as `bench --save-result --save-detailed` wrote it (the result
/// JSON, its records beside it): the results store's reader, `servelab_store::read_shard_file`.
pub type ReadPart = fn(&Path) -> Result<ShardRun, String>;

/// Runs each plan as this process's shard of it, then merges all shards' parts.
pub struct ShardedRuns<R> {
    inner: R,
    exchange: Exchange,
    read_part: ReadPart,
    next_start: SystemTime,
    lead: Duration,
    wait: Duration,
    run: usize,
    recording: Option<Arc<dyn Recording>>,
    cancel: Option<Cancel>,
    clock: ClockReference,
}

impl<R> ShardedRuns<R> {
    /// Shard `shard` of each run, the first starting at `start_at`, later ones `lead` after
    /// the previous run's last shard ended; parts are exchanged in `dir` (shared by all
    /// shards) and read with `read_part`, waiting at most `wait` for the others.
    pub fn new(
        inner: R,
        shard: Shard,
        dir: PathBuf,
        start_at: SystemTime,
        lead: Duration,
        wait: Duration,
        read_part: ReadPart,
    ) -> Self {
        ShardedRuns {
            inner,
            exchange: Exchange::new(dir, shard, start_at),
            read_part,
            next_start: start_at,
            lead,
            wait,
            run: 0,
            recording: None,
            cancel: None,
            clock: ClockReference::default(),
        }
    }

    /// Read each part's clock against `clock` (`--clock-reference`).
    pub fn with_clock(mut self, clock: ClockReference) -> Self {
        self.clock = clock;
        self
    }

    /// Stop a running part when another shard fails its run, through `cancel` (whose
    /// interrupt the wrapped runner must watch); the user's interrupt also ends the wait for
    /// the other shards.
    pub fn with_cancel(mut self, cancel: Cancel) -> Self {
        self.cancel = Some(cancel);
        self
    }

    /// Store every merged run with `recording`, if this is shard 0 (one shard stores the
    /// run, once; the others hold the same merged figures).
    pub fn with_recording(mut self, recording: Option<Arc<dyn Recording>>) -> Self {
        self.recording = recording.filter(|_| self.exchange.coordinates());
        self
    }

    /// The wrapped runner, to shut down.
    pub fn into_inner(self) -> R {
        self.inner
    }

    /// The next run's number and side of the exchange (stamped with its start): the later of
    /// the planned start and the plan's own.
    fn next_run(&mut self, plan: &Plan) -> (usize, SystemTime, Exchange) {
        let j = self.run;
        self.run += 1;
        let start = plan.shard.start_at.map_or(self.next_start, |t| t.max(self.next_start));
        (j, start, self.exchange.stamped(start))
    }
}

/// `point-JJJJ`: the name every shard gives run `j`'s files.
fn run_stem(j: usize) -> String {
    format!("point-{j:04}")
}

/// An exchange's failure as the failure of run `j`.
fn failed(j: usize, e: ExchangeError) -> RunError {
    RunError::Failed(format!("sharded run {j}: {e}"))
}

impl<R: Runner> Runner for ShardedRuns<R> {
    fn target_restarted(&mut self) {
        self.inner.target_restarted();
    }

    async fn run(&mut self, plan: &Plan) -> Result<Summary, RunError> {
        let (j, start, ex) = self.next_run(plan);
        let (shard, stem) = (ex.shard(), run_stem(j));
        let mut p = plan.clone();
        let (start_at, clock) = (Some(start), self.clock.clone());
        p.shard = ShardSpec { shard: Some(shard), start_at, clock, lead: self.lead };
        p.output.save_result = true;
        p.output.save_detailed = true;
        p.output.result_dir = ex.dir().to_path_buf();
        p.output.result_filename = Some(format!("{stem}.json"));
        // A run's cap below the shard count leaves a shard no slot: refused, not hung.
        // Every shard refuses it alike: no end file needed.
        p.check().map_err(|e| RunError::Usage(e.to_string()))?;
        // Forgone by a shard already (its trial's engine died): nothing to measure.
        ex.ends(&stem).map_err(|e| failed(j, e))?;
        // A part that failed, or was interrupted or stopped, is no part: the others fail the
        // run at once with why, rather than wait out the bound for it.
        let say_failed = |why: String| {
            ex.end(&stem, &End::Failed(why)).map_err(|e| RunError::Failed(e.to_string()))
        };
        let interrupted = format!("interrupted on shard {shard}");
        let peer = ex.peer_failure(&stem);
        let run = self.inner.run(&p);
        tokio::pin!(run);
        let ran = match &self.cancel {
            None => run.await,
            Some(cancel) => tokio::select! {
                ran = &mut run => ran,
                e = peer => {
                    // Its part is of no use now: stop sending, let what is in flight drain
                    // (the runner's interrupt), then take up the next run as a new one.
                    cancel.stop();
                    let _ = run.await;
                    cancel.resume();
                    let why = failed(j, e).to_string();
                    say_failed(format!("stopped on shard {shard}: {why}"))?;
                    return Err(RunError::Failed(why));
                }
            },
        };
        let own = match ran {
            Ok(own) => own,
            Err(RunError::Interrupted) => {
                say_failed(interrupted)?;
                return Err(RunError::Interrupted);
            }
            Err(e) => {
                say_failed(e.to_string())?;
                return Err(e);
            }
        };
        if own.info.interrupted {
            say_failed(interrupted)?;
            return Ok(own);
        }
        ex.end(&stem, &End::now()).map_err(|e| RunError::Failed(e.to_string()))?;
        // The user's interrupt ends the wait (a closed channel when there is none).
        let (_never, none) = watch::channel(false);
        let mut interrupt = self.cancel.as_ref().map_or(none, Cancel::user);
        let ends = match ex.wait_for_ends(&stem, self.wait, &mut interrupt).await {
            Ok(Some(ends)) => ends,
            Ok(None) => return Err(RunError::Interrupted),
            Err(e) => return Err(failed(j, e)),
        };
        let parts = (0..shard.count)
            .map(|k| {
                let shard = Some(Shard { index: k, count: shard.count });
                let part = Plan { shard: ShardSpec { shard, ..p.shard.clone() }, ..p.clone() };
                (self.read_part)(&part.result_path("", "", ""))
            })
            .collect::<Result<Vec<_>, _>>()
            .map_err(RunError::Failed)?;
        let merged = merge_shards(parts, MergeOptions::default())
            .map_err(|e| RunError::Failed(format!("sharded run {j}: {e}")))?;
        // With the engine's figures of the shard that ended last: they span the whole run.
        let summary = merged.summary();
        if let Some(r) = self.recording.clone() {
            let mut spec = p.record.clone();
            spec.tags.push(("shards".to_string(), shard.count.to_string()));
            let (records, s) = (merged.records, summary.clone());
            // Store writes off the runtime's workers, as a measured run's are.
            let line = tokio::task::spawn_blocking(move || {
                r.begin(&s.info, &spec).finish(&records, &s, false)
            })
            .await
            .ok()
            .flatten();
            if let Some(line) = line {
                servelab_outputs::term::note(&format!("sharded run {j}, merged: {line}"));
            }
        }
        let last = ends.into_iter().max().unwrap_or(0);
        self.next_start = UNIX_EPOCH + Duration::from_millis(last) + self.lead;
        Ok(summary)
    }

    fn settle(&mut self) -> impl std::future::Future<Output = ()> {
        self.inner.settle()
    }

    async fn forgo(&mut self, plan: &Plan, reason: &str) {
        let (j, _, ex) = self.next_run(plan);
        // The others then fail the run at once; if even this write fails they wait out
        // the bound, and say which shard never finished.
        if let Err(e) = ex.end(&run_stem(j), &End::Failed(reason.to_string())) {
            servelab_outputs::term::warn(&e.to_string());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use servelab_plan::{
        Api, DatasetSpec, Limits, LoadSpec, MetricsConfig, OutputSpec, RecordSpec, RequestSpec,
        Target, WorkloadSpec,
    };

    fn plan() -> Plan {
        Plan {
            target: Target::Url("http://127.0.0.1:9".into()),
            request: RequestSpec::new(Api::Completions),
            workload: WorkloadSpec {
                tokenizer: None,
                dataset: DatasetSpec::Random {
                    input_len: 8,
                    output_len: 4,
                    range: servelab_plan::LengthRange::EXACT,
                    prefix_len: 0,
                },
                num_prompts: 4,
                seed: 0,
                num_warmups: 0,
            },
            load: LoadSpec::default(),
            ramp: None,
            limits: Limits::default(),
            metrics: MetricsConfig::default(),
            output: OutputSpec::default(),
            record: RecordSpec::default(),
            shard: ShardSpec::default(),
        }
    }

    fn no_parts(path: &Path) -> Result<ShardRun, String> {
        Err(format!("no part at {}", path.display()))
    }

    fn sharded<R>(inner: R, dir: &Path, index: u32, first: SystemTime) -> ShardedRuns<R> {
        let (shard, lead) = (Shard { index, count: 2 }, Duration::from_secs(2));
        ShardedRuns::new(inner, shard, dir.into(), first, lead, lead, no_parts)
    }

    /// What shard `index` of 2 said of run `j` (started at `start`) in its end file.
    fn end_of(dir: &Path, j: usize, index: u32, start: SystemTime) -> Option<End> {
        let ex = Exchange::new(dir, Shard { index, count: 2 }, start);
        ex.read(&format!("{}-shard-{index}-of-2.end", run_stem(j)))
    }

    /// A runner that counts the plans it ran, and fails them (interrupted, or refused).
    struct Count(usize, bool);

    impl Runner for Count {
        async fn run(&mut self, _: &Plan) -> Result<Summary, RunError> {
            self.0 += 1;
            Err(if self.1 { RunError::Interrupted } else { RunError::Failed("refused".into()) })
        }
    }

    /// A runner whose part runs until its interrupt turns true, then ends interrupted.
    struct UntilInterrupted(watch::Receiver<bool>);

    impl Runner for UntilInterrupted {
        async fn run(&mut self, _: &Plan) -> Result<Summary, RunError> {
            let _ = self.0.wait_for(|stop| *stop).await;
            Err(RunError::Interrupted)
        }
    }

    /// On the paused clock: the peer's 300 ms and the watcher's polls are virtual.
    #[tokio::test(start_paused = true)]
    async fn a_running_part_stops_when_another_shard_fails_the_run() {
        let dir = tempfile::tempdir().unwrap();
        let first = UNIX_EPOCH + Duration::from_secs(100);
        let (user_tx, user) = watch::channel(false);
        let (cancel, stop) = crate::cancellable(user);
        let inner = UntilInterrupted(stop.clone());
        let mut r = sharded(inner, dir.path(), 1, first).with_cancel(cancel);
        let plan = plan();
        let peer = Exchange::new(dir.path(), Shard { index: 0, count: 2 }, first);
        let fail = async {
            tokio::time::sleep(Duration::from_millis(300)).await;
            peer.end(&run_stem(0), &End::Failed("engine exited (signal 9)".into())).unwrap();
        };
        let (ran, ()) = tokio::time::timeout(Duration::from_secs(10), async {
            tokio::join!(r.run(&plan), fail)
        })
        .await
        .expect("the part stopped instead of running on");
        let why = "sharded run 0: shard 0/2 failed: engine exited (signal 9)";
        assert_eq!(ran.unwrap_err(), RunError::Failed(why.into()));
        assert_eq!(
            end_of(dir.path(), 0, 1, first),
            Some(End::Failed(format!("stopped on shard 1/2: {why}")))
        );
        // The next run starts with the runner's interrupt clear; the user's still reaches it.
        assert!(!*stop.borrow());
        user_tx.send(true).unwrap();
        let mut stop = stop;
        tokio::time::timeout(Duration::from_secs(5), stop.wait_for(|s| *s)).await.unwrap().unwrap();
    }

    #[tokio::test]
    async fn an_interrupted_part_fails_the_run_for_the_others() {
        let dir = tempfile::tempdir().unwrap();
        let first = UNIX_EPOCH + Duration::from_secs(100);
        let mut r = sharded(Count(0, true), dir.path(), 1, first);
        assert_eq!(r.run(&plan()).await.unwrap_err(), RunError::Interrupted);
        let e = Exchange::new(dir.path(), Shard { index: 0, count: 2 }, first).ends(&run_stem(0));
        assert_eq!(e.unwrap_err().to_string(), "shard 1/2 failed: interrupted on shard 1/2");
    }

    #[tokio::test]
    async fn a_forgone_run_is_numbered_and_started_as_the_others_run_it() {
        let dir = tempfile::tempdir().unwrap();
        let first = UNIX_EPOCH + Duration::from_secs(100);
        let mut r = sharded(Count(0, false), dir.path(), 0, first);
        let mut plan = plan();
        // The plan's later start wins over the planned one.
        let later = first + Duration::from_secs(50);
        plan.shard.start_at = Some(later);
        r.forgo(&plan, "engine exited (exit code 1) during profile a").await;
        assert_eq!(
            end_of(dir.path(), 0, 0, later),
            Some(End::Failed("engine exited (exit code 1) during profile a".into()))
        );
        // The next run is run 1; its own failure is written for the others too.
        plan.shard.start_at = None;
        let e = r.run(&plan).await.unwrap_err();
        assert_eq!(e, RunError::Failed("refused".into()));
        assert_eq!(end_of(dir.path(), 1, 0, first), Some(End::Failed("refused".into())));
        assert_eq!(r.into_inner().0, 1);
    }
}
