//! A sequence of runs (a sweep's points, a lab's profile runs) run as shard k of N: every
//! point is one sharded run of all N shards, merged exactly on every shard, so each shard takes
//! the same next step (knee, SLO search, a lab's keep or reject).
//!
//! Point `j` starts on every shard at one instant. After its part, a shard writes its result
//! (`point-JJJJ-shard-K-of-N.json`, records beside it) and then `...end` holding the instant it
//! ended, into the shared results folder; it waits (bounded) for every shard's `.end` file,
//! merges the N results with the exact merge and goes on with that summary. Point `j + 1`
//! starts at the latest shard's end plus a lead, the same instant on every shard, or at the
//! start its plan names when that is later (a lab's next engine, ready only then). A shard
//! whose part failed, or that forgoes a point, says so in its end file: the others fail that
//! point at once with its reason instead of waiting out the bound; a shard whose own part is
//! still running when another fails the point stops it (through the wrapped runner's
//! interrupt, [`cancellable`]) rather than sending on for nothing. Shard 0, given a recording,
//! stores each merged point as one run (tagged `shards=N`); the parts are not.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use servelab_metrics::merge::{merge_shards, MergeOptions};
use servelab_metrics::Summary;
use servelab_plan::time::unix_ms;
use servelab_plan::{ClockReference, Plan, Recording, RunError, Runner, Shard, ShardSpec};
use tokio::sync::watch;

/// How often a running part looks for another shard's failure of its point: off the
/// runtime's workers (the files may be on NFS), and often enough to save minutes, not
/// milliseconds.
const PEER_POLL: Duration = Duration::from_secs(1);

/// Stops this shard's running part when another shard failed its point: it owns the interrupt
/// the wrapped runner watches, which also follows the user's.
pub struct Cancel {
    tx: watch::Sender<bool>,
    user: watch::Receiver<bool>,
}

/// An interrupt for the wrapped runner that turns true with the user's `interrupt`, or when
/// [`ShardedPoints`] cancels a part with the returned [`Cancel`].
pub fn cancellable(interrupt: watch::Receiver<bool>) -> (Cancel, watch::Receiver<bool>) {
    let (tx, rx) = watch::channel(*interrupt.borrow());
    let (forward, mut user) = (tx.clone(), interrupt.clone());
    tokio::spawn(async move {
        while user.changed().await.is_ok() {
            if *user.borrow_and_update() {
                let _ = forward.send(true);
            }
        }
    });
    (Cancel { tx, user: interrupt }, rx)
}

/// Resolves when another shard's end file of point `j` says it failed: why.
async fn peer_failure(dir: PathBuf, j: usize, start: SystemTime, count: u32) -> String {
    loop {
        tokio::time::sleep(PEER_POLL).await;
        let d = dir.clone();
        let now = tokio::task::spawn_blocking(move || ends_now(&d, j, start, count)).await;
        if let Ok(Err(why)) = now {
            return why;
        }
    }
}

/// Runs each sweep point as this process's shard of it, then merges all shards' parts.
pub struct ShardedPoints<R> {
    inner: R,
    shard: Shard,
    dir: PathBuf,
    next_start: SystemTime,
    lead: Duration,
    wait: Duration,
    point: usize,
    recording: Option<Arc<dyn Recording>>,
    cancel: Option<Cancel>,
    clock: ClockReference,
}

impl<R> ShardedPoints<R> {
    /// Shard `shard` of each point, the first starting at `start_at`, later ones `lead` after
    /// the previous point's last shard ended; parts are exchanged in `dir` (shared by all
    /// shards), waiting at most `wait` for the others.
    pub fn new(
        inner: R,
        shard: Shard,
        dir: PathBuf,
        start_at: SystemTime,
        lead: Duration,
        wait: Duration,
    ) -> Self {
        ShardedPoints {
            inner,
            shard,
            dir,
            next_start: start_at,
            lead,
            wait,
            point: 0,
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

    /// Stop a running part when another shard fails its point, through `cancel` (whose
    /// interrupt the wrapped runner must watch).
    pub fn with_cancel(mut self, cancel: Cancel) -> Self {
        self.cancel = Some(cancel);
        self
    }

    /// Store every merged point with `recording`, if this is shard 0 (one shard stores the
    /// run, once; the others hold the same merged figures).
    pub fn with_recording(mut self, recording: Option<Arc<dyn Recording>>) -> Self {
        self.recording = recording.filter(|_| self.shard.index == 0);
        self
    }

    /// The wrapped runner, to shut down.
    pub fn into_inner(self) -> R {
        self.inner
    }
}

/// `point-JJJJ`: the name every shard gives point `j`'s files.
fn point_stem(j: usize) -> String {
    format!("point-{j:04}")
}

/// Shard `k`'s end-instant file of point `j`: written after its result file.
fn end_file(dir: &Path, j: usize, shard: Shard) -> PathBuf {
    dir.join(format!("{}-shard-{}-of-{}.end", point_stem(j), shard.index, shard.count))
}

/// The end file's text: the point's start and the shard's end, Unix ms.
fn end_text(start: SystemTime, end: SystemTime) -> String {
    format!("{} {}", unix_ms(start), unix_ms(end))
}

/// The end file of a shard whose part of the point failed or was not run: why.
fn failed_text(start: SystemTime, reason: &str) -> String {
    // One line: the reason is read back whole.
    format!("{} failed {}", unix_ms(start), reason.replace('\n', " "))
}

/// What a shard's end file says.
#[derive(Debug, Clone, PartialEq)]
enum End {
    /// Its part ended at this instant (Unix ms).
    At(u64),
    /// Its part failed, or it did not run one: why.
    Failed(String),
}

/// What an end file written for the point that started at `start_ms` says; `None` for another
/// start (a file left by an earlier run in the folder).
fn end_of(text: &str, start_ms: u128) -> Option<End> {
    let (start, rest) = text.trim().split_once(' ')?;
    (start.parse::<u128>().ok()? == start_ms).then_some(())?;
    match rest.strip_prefix("failed") {
        Some(reason) => Some(End::Failed(reason.trim().to_string())),
        None => rest.parse().ok().map(End::At),
    }
}

/// Every shard's end of point `j` (started at `start`) as `dir` holds it now: the end
/// instant (Unix ms) of each shard, `None` for one not finished; or why a shard failed it.
fn ends_now(
    dir: &Path,
    j: usize,
    start: SystemTime,
    count: u32,
) -> Result<Vec<Option<u64>>, String> {
    (0..count)
        .map(|k| {
            let path = end_file(dir, j, Shard { index: k, count });
            match std::fs::read_to_string(&path).ok().and_then(|t| end_of(&t, unix_ms(start))) {
                Some(End::At(ms)) => Ok(Some(ms)),
                Some(End::Failed(why)) => {
                    Err(format!("sharded run {j}: shard {k}/{count} failed: {why}"))
                }
                None => Ok(None),
            }
        })
        .collect()
}

/// Waits until every shard's end file of point `j` (started at `start`) is in `dir`, at most
/// `wait`; the shards' end instants (Unix ms), or which shard failed or which did not finish.
async fn wait_for_ends(
    dir: &Path,
    j: usize,
    start: SystemTime,
    count: u32,
    wait: Duration,
) -> Result<Vec<u64>, String> {
    let until = tokio::time::Instant::now() + wait;
    loop {
        let ends = ends_now(dir, j, start, count)?;
        let missing: Vec<String> =
            (0..count).filter(|&k| ends[k as usize].is_none()).map(|k| k.to_string()).collect();
        if missing.is_empty() {
            return Ok(ends.into_iter().flatten().collect());
        }
        if tokio::time::Instant::now() >= until {
            return Err(format!(
                "sharded run {j}: shards {} of {count} did not finish within {} s (their results \
                 go to {}): see their output",
                missing.join(", "),
                wait.as_secs(),
                dir.display()
            ));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

impl<R: Runner> Runner for ShardedPoints<R> {
    fn target_restarted(&mut self) {
        self.inner.target_restarted();
    }

    async fn run(&mut self, plan: &Plan) -> Result<Summary, RunError> {
        let (j, start) = self.next_point(plan);
        let mut p = plan.clone();
        p.shard =
            ShardSpec { shard: Some(self.shard), start_at: Some(start), clock: self.clock.clone() };
        p.output.save_result = true;
        p.output.save_detailed = true;
        p.output.result_dir = self.dir.clone();
        p.output.result_filename = Some(format!("{}.json", point_stem(j)));
        // A point's cap below the shard count leaves a shard no slot: refused, not hung.
        // Every shard refuses it alike: no end file needed.
        p.check().map_err(|e| RunError::Usage(e.to_string()))?;
        // Forgone by a shard already (its trial's engine died): nothing to measure.
        ends_now(&self.dir, j, start, self.shard.count).map_err(RunError::Failed)?;
        let end = end_file(&self.dir, j, self.shard);
        // A part that failed, or was interrupted or stopped, is no part: the others fail the
        // point at once with why, rather than wait out the bound for it.
        let say_failed =
            |why: &str| servelab_plan::write_file(&end, failed_text(start, why).as_bytes());
        let interrupted = format!("interrupted on shard {}", self.shard);
        let peer = peer_failure(self.dir.clone(), j, start, self.shard.count);
        let run = self.inner.run(&p);
        tokio::pin!(run);
        let ran = match &self.cancel {
            None => run.await,
            Some(cancel) => tokio::select! {
                ran = &mut run => ran,
                why = peer => {
                    // Its part is of no use now: stop sending, let what is in flight drain
                    // (the runner's interrupt), then take up the next point as a new one.
                    let _ = cancel.tx.send(true);
                    let _ = run.await;
                    if !*cancel.user.borrow() {
                        let _ = cancel.tx.send(false);
                    }
                    say_failed(&format!("stopped on shard {}: {why}", self.shard))?;
                    return Err(RunError::Failed(why));
                }
            },
        };
        let own = match ran {
            Ok(own) => own,
            Err(RunError::Interrupted) => {
                say_failed(&interrupted)?;
                return Err(RunError::Interrupted);
            }
            Err(e) => {
                say_failed(&e.to_string())?;
                return Err(e);
            }
        };
        if own.info.interrupted {
            say_failed(&interrupted)?;
            return Ok(own);
        }
        let text = end_text(start, SystemTime::now());
        servelab_plan::write_file(&end, text.as_bytes())?;
        let ends = wait_for_ends(&self.dir, j, start, self.shard.count, self.wait)
            .await
            .map_err(RunError::Failed)?;
        let files: Vec<PathBuf> = (0..self.shard.count)
            .map(|k| {
                let shard = Some(Shard { index: k, count: self.shard.count });
                Plan { shard: ShardSpec { shard, ..p.shard.clone() }, ..p.clone() }
                    .result_path("", "", "")
            })
            .collect();
        let shards = files
            .iter()
            .map(|f| servelab_store::read_shard_file(f))
            .collect::<Result<Vec<_>, _>>()
            .map_err(RunError::Failed)?;
        let merged = merge_shards(shards, MergeOptions::default())
            .map_err(|e| RunError::Failed(format!("sharded run {j}: {e}")))?;
        // With the engine's figures of the shard that ended last: they span the whole point.
        let summary = merged.summary();
        if let Some(r) = self.recording.clone() {
            let mut spec = p.record.clone();
            spec.tags.push(("shards".to_string(), self.shard.count.to_string()));
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
        let (j, start) = self.next_point(plan);
        let end = end_file(&self.dir, j, self.shard);
        // The others then fail the point at once; if even this write fails they wait out
        // the bound, and say which shard never finished.
        if let Err(e) = servelab_plan::write_file(&end, failed_text(start, reason).as_bytes()) {
            servelab_outputs::term::warn(&e.to_string());
        }
    }
}

impl<R> ShardedPoints<R> {
    /// The next point's number and start: the later of the planned start and the plan's own.
    fn next_point(&mut self, plan: &Plan) -> (usize, SystemTime) {
        let j = self.point;
        self.point += 1;
        let start = plan.shard.start_at.map_or(self.next_start, |t| t.max(self.next_start));
        (j, start)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_end_file_counts_for_its_own_point_only() {
        let start = UNIX_EPOCH + Duration::from_millis(1_795_600_000_000);
        let end = start + Duration::from_millis(2_500);
        let text = end_text(start, end);
        assert_eq!(text, "1795600000000 1795600002500");
        assert_eq!(end_of(&text, 1_795_600_000_000), Some(End::At(1_795_600_002_500)));
        // Left in the folder by a sweep that started elsewhen: not this point's.
        assert_eq!(end_of(&text, 1_795_600_000_001), None);
        assert_eq!(end_of("1795600002500", 1_795_600_000_000), None);
        assert_eq!(end_of("", 0), None);
        let failed = failed_text(start, "engine exited (signal 9)\nduring profile tiny");
        assert_eq!(failed, "1795600000000 failed engine exited (signal 9) during profile tiny");
        assert_eq!(
            end_of(&failed, 1_795_600_000_000),
            Some(End::Failed("engine exited (signal 9) during profile tiny".into()))
        );
        assert_eq!(end_of(&failed, 1), None);
        assert_eq!(
            end_file(Path::new("/r"), 3, Shard { index: 1, count: 2 }),
            PathBuf::from("/r/point-0003-shard-1-of-2.end")
        );
    }

    #[tokio::test]
    async fn the_wait_for_the_other_shards_is_bounded_and_names_them() {
        let dir = tempfile::tempdir().unwrap();
        let start = UNIX_EPOCH + Duration::from_secs(100);
        let own = end_file(dir.path(), 0, Shard { index: 0, count: 3 });
        std::fs::write(&own, end_text(start, start + Duration::from_secs(1))).unwrap();
        let wait = Duration::from_millis(250);
        let e = wait_for_ends(dir.path(), 0, start, 3, wait).await.unwrap_err();
        assert!(e.starts_with("sharded run 0: shards 1, 2 of 3 did not finish within"), "{e}");
        for k in 1..3 {
            let f = end_file(dir.path(), 0, Shard { index: k, count: 3 });
            std::fs::write(f, end_text(start, start + Duration::from_secs(u64::from(k)))).unwrap();
        }
        let ends = wait_for_ends(dir.path(), 0, start, 3, Duration::ZERO).await.unwrap();
        assert_eq!(ends, vec![101_000, 101_000, 102_000]);
    }

    #[tokio::test]
    async fn a_failed_shard_fails_the_point_at_once_with_its_reason() {
        let dir = tempfile::tempdir().unwrap();
        let start = UNIX_EPOCH + Duration::from_secs(100);
        let own = end_file(dir.path(), 2, Shard { index: 0, count: 3 });
        std::fs::write(&own, end_text(start, start + Duration::from_secs(1))).unwrap();
        let other = end_file(dir.path(), 2, Shard { index: 2, count: 3 });
        std::fs::write(&other, failed_text(start, "cannot connect")).unwrap();
        // Shard 1 never wrote: the failure is reported without waiting out the hour.
        let wait = Duration::from_secs(3600);
        let e = tokio::time::timeout(
            Duration::from_secs(5),
            wait_for_ends(dir.path(), 2, start, 3, wait),
        )
        .await
        .expect("no wait for the missing shard")
        .unwrap_err();
        assert_eq!(e, "sharded run 2: shard 2/3 failed: cannot connect");
    }

    /// A runner that counts the plans it ran, and fails them (interrupted, or refused).
    struct Count(usize, bool);

    impl Runner for Count {
        async fn run(&mut self, plan: &Plan) -> Result<Summary, RunError> {
            self.0 += 1;
            let _ = plan;
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

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_running_part_stops_when_another_shard_fails_the_point() {
        let dir = tempfile::tempdir().unwrap();
        let shard = Shard { index: 1, count: 2 };
        let first = UNIX_EPOCH + Duration::from_secs(100);
        let (user_tx, user) = watch::channel(false);
        let (cancel, stop) = cancellable(user);
        let lead = Duration::from_secs(2);
        let inner = UntilInterrupted(stop.clone());
        let mut r = ShardedPoints::new(inner, shard, dir.path().into(), first, lead, lead)
            .with_cancel(cancel);
        let url = ["--base-url", "http://127.0.0.1:9"].map(String::from).to_vec();
        let plan = crate::resolve::profile_plan(url).unwrap();
        let peer = end_file(dir.path(), 0, Shard { index: 0, count: 2 });
        let fail = async {
            tokio::time::sleep(Duration::from_millis(300)).await;
            std::fs::write(&peer, failed_text(first, "engine exited (signal 9)")).unwrap();
        };
        let (ran, ()) = tokio::time::timeout(Duration::from_secs(10), async {
            tokio::join!(r.run(&plan), fail)
        })
        .await
        .expect("the part stopped instead of running on");
        let why = "sharded run 0: shard 0/2 failed: engine exited (signal 9)";
        assert_eq!(ran.unwrap_err(), RunError::Failed(why.into()));
        let own = std::fs::read_to_string(end_file(dir.path(), 0, shard)).unwrap();
        assert_eq!(
            end_of(&own, unix_ms(first)),
            Some(End::Failed(format!("stopped on shard 1/2: {why}")))
        );
        // The next point starts with the runner's interrupt clear; the user's still reaches it.
        assert!(!*stop.borrow());
        user_tx.send(true).unwrap();
        let mut stop = stop;
        tokio::time::timeout(Duration::from_secs(5), stop.wait_for(|s| *s)).await.unwrap().unwrap();
    }

    #[tokio::test]
    async fn an_interrupted_part_fails_the_point_for_the_others() {
        let dir = tempfile::tempdir().unwrap();
        let shard = Shard { index: 1, count: 2 };
        let first = UNIX_EPOCH + Duration::from_secs(100);
        let lead = Duration::from_secs(2);
        let mut r = ShardedPoints::new(Count(0, true), shard, dir.path().into(), first, lead, lead);
        let url = ["--base-url", "http://127.0.0.1:9"].map(String::from).to_vec();
        let plan = crate::resolve::profile_plan(url).unwrap();
        assert_eq!(r.run(&plan).await.unwrap_err(), RunError::Interrupted);
        let e = ends_now(dir.path(), 0, first, 2).unwrap_err();
        assert_eq!(e, "sharded run 0: shard 1/2 failed: interrupted on shard 1/2");
    }

    #[tokio::test]
    async fn a_forgone_point_is_numbered_and_started_as_the_others_run_it() {
        let dir = tempfile::tempdir().unwrap();
        let shard = Shard { index: 0, count: 2 };
        let first = UNIX_EPOCH + Duration::from_secs(100);
        let lead = Duration::from_secs(2);
        let mut r =
            ShardedPoints::new(Count(0, false), shard, dir.path().into(), first, lead, lead);
        let url = ["--base-url", "http://127.0.0.1:9"].map(String::from).to_vec();
        let mut plan = crate::resolve::profile_plan(url).unwrap();
        // The plan's later start wins over the planned one.
        let later = first + Duration::from_secs(50);
        plan.shard.start_at = Some(later);
        r.forgo(&plan, "engine exited (exit code 1) during profile a").await;
        let text = std::fs::read_to_string(end_file(dir.path(), 0, shard)).unwrap();
        assert_eq!(
            end_of(&text, unix_ms(later)),
            Some(End::Failed("engine exited (exit code 1) during profile a".into()))
        );
        // The next run is point 1; its own failure is written for the others too.
        plan.shard.start_at = None;
        let e = r.run(&plan).await.unwrap_err();
        assert_eq!(e, RunError::Failed("refused".into()));
        let text = std::fs::read_to_string(end_file(dir.path(), 1, shard)).unwrap();
        assert_eq!(end_of(&text, unix_ms(first)), Some(End::Failed("refused".into())));
        assert_eq!(r.into_inner().0, 1);
    }
}
