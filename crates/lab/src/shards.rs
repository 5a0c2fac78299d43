//! A lab run as shard k of N (docs/scale.md): shard 0 launches each trial's engine and the
//! other shards send their parts of its profiles to it, meeting through the shard exchange
//! ([`servelab_exchange`]).
//!
//! Per launch (a trial, or one round of an interleaved pair), the other shards arrive at it;
//! shard 0, once the engine is ready and every shard has arrived, publishes the launch (its
//! base URL and the instant every shard starts the first profile, a lead from now), or at
//! once when the engine failed, and, after stopping the engine, the trial's result. The other
//! shards wait (bounded) for the launch, run their parts of the profiles (each a sharded run
//! merged on every shard), then wait for the result and keep shard 0's: every shard then
//! holds the same trials, so the strategy takes the same next step everywhere, even when only
//! shard 0 saw the engine die. The arrival keeps a shard still busy with the last launch
//! (sending to a dead engine until its timeout) from starting the next one's first profile
//! late.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use servelab_exchange::{Exchange, ExchangeError, ReadPart, ShardedRuns};
use servelab_plan::time::unix_ms;
use servelab_plan::{Plan, Shard, ShardSpec, Target};
use tokio::sync::watch;

use crate::config::Experiment;
use crate::error::LabError;
use crate::trial::TrialResult;

/// This process's part in a sharded lab.
#[derive(Debug, Clone)]
pub struct LabShard {
    /// Which shard of how many; shard 0 launches the engines.
    pub shard: Shard,
    /// What each shard reads its clock's offset against before a profile run.
    pub clock: servelab_plan::ClockReference,
    /// The folder every shard reads and writes (a shared volume across hosts).
    pub dir: PathBuf,
    /// The lab's shared start instant: tells this lab's files from an earlier one's.
    pub started: SystemTime,
    /// From an engine's readiness to its first profile's start, on every shard.
    pub lead: Duration,
    /// How long a shard waits for shard 0 beyond the engine's own readiness timeout.
    pub wait: Duration,
}

impl LabShard {
    /// This process's part of a sharded lab run with `spec` (`lab run --shard`, else the
    /// scheduler's environment): the shards meet in `dir/shards` (`dir`, the --output-dir, is
    /// shared by all); `None` for a whole lab. Every profile of `exp` (their `plans`, in
    /// profile order) must run as a shard of that many, and a sharded lab cannot resume
    /// (checked before any engine starts).
    pub fn of(
        spec: &ShardSpec,
        dir: &Path,
        exp: &Experiment,
        plans: &[Plan],
        resume: bool,
    ) -> Result<Option<LabShard>, String> {
        if !spec.is_split() {
            return Ok(None);
        }
        let shard = spec.shard_or_whole();
        let Some(started) = spec.start_at else {
            return Err(format!(
                "--start-at: shard {shard} of a lab needs the lab's shared start instant: give \
                 every shard the same --start-at (RFC 3339 or Unix seconds)"
            ));
        };
        if resume {
            return Err(format!("--resume: a sharded lab (shard {shard}) runs from its start"));
        }
        for (p, plan) in exp.profiles.iter().zip(plans) {
            let target = Target::Url("http://engine:8000".into());
            let sharded = Plan { target, shard: spec.clone(), ..plan.clone() };
            sharded.check().map_err(|e| format!("profiles ({}): {e}", p.name))?;
        }
        // The others send the same schedule from the same instant: they end within a request
        // timeout of each other, unless one failed.
        let timeout = plans.iter().map(|p| p.limits.request_timeout).max();
        Ok(Some(LabShard {
            shard,
            clock: spec.clock.clone(),
            dir: dir.join("shards"),
            started,
            lead: spec.lead,
            wait: timeout.unwrap_or_default() + Duration::from_secs(600),
        }))
    }

    /// Shard 0: the one that launches engines.
    pub fn launches(&self) -> bool {
        self.shard.index == 0
    }

    /// The lab's own folder: shard 0 writes it in `shared` (the --output-dir), the others
    /// keep theirs beside the exchanged files.
    pub fn lab_dir(&self, shared: &Path) -> PathBuf {
        match self.launches() {
            true => shared.to_path_buf(),
            false => self.dir.join(format!("shard-{}", self.shard.index)),
        }
    }

    /// `inner` running each profile run as this shard of it, merged on every shard (parts
    /// read with `read_part`): the runner a sharded lab takes.
    pub fn runner<R>(&self, inner: R, read_part: ReadPart) -> ShardedRuns<R> {
        ShardedRuns::new(
            inner,
            self.shard,
            self.dir.clone(),
            self.started,
            self.lead,
            self.wait,
            read_part,
        )
        .with_clock(self.clock.clone())
    }
}

/// What shard 0 tells the others about one launch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Launch {
    /// The engine's base URL, as the trial's `base_url` rendered on shard 0's host (empty
    /// when it never became ready).
    pub base_url: String,
    /// The engine's command, as shard 0 launched it.
    pub command: String,
    /// When every shard starts the first profile, Unix ms; `None`: the engine never became
    /// ready (the trial failed; its result follows).
    pub start_ms: Option<u64>,
}

impl Launch {
    /// The first profile's start instant, when the engine is ready.
    pub fn start(&self) -> Option<SystemTime> {
        self.start_ms.map(|ms| UNIX_EPOCH + Duration::from_millis(ms))
    }
}

/// The stem of one launch's files: the trial and the first round it runs.
fn stem(trial: &str, round: u32) -> String {
    format!("launch-{}-round-{round}", servelab_outputs::file_safe(trial))
}

impl LabShard {
    /// This shard's side of the exchange, stamped with the lab's start.
    fn exchange(&self) -> Exchange {
        Exchange::new(&self.dir, self.shard, self.started)
    }

    /// An exchange's failure as the lab says it.
    fn error(&self, e: ExchangeError) -> LabError {
        match e {
            ExchangeError::Write { path, message } => LabError::Write { path, message },
            ExchangeError::NotArrived { path, shard, count, waited } => LabError::Shard {
                path,
                message: format!(
                    "shard {shard} of {count} did not arrive at this launch within {} s; see \
                     its output",
                    waited.as_secs()
                ),
            },
            ExchangeError::Timeout { path, waited } => LabError::Shard {
                path,
                message: format!(
                    "shard {}: shard 0 did not write this within {} s; see its output (it \
                     launches the engines of a sharded lab)",
                    self.shard,
                    waited.as_secs()
                ),
            },
            other => LabError::Shard { path: self.dir.clone(), message: other.to_string() },
        }
    }

    /// Shard 0: the engine of `trial` (round `round`), launched with `command`, answers at
    /// the base URL `ready` names, and every shard starts its first profile at the instant
    /// beside it (`None`: it never became ready).
    pub fn publish_launch(
        &self,
        trial: &str,
        round: u32,
        command: &str,
        ready: Option<(&str, SystemTime)>,
    ) -> Result<(), LabError> {
        let start_ms = ready.map(|(_, t)| u64::try_from(unix_ms(t)).unwrap_or(u64::MAX));
        let launch = Launch {
            base_url: ready.map(|(u, _)| u.to_string()).unwrap_or_default(),
            command: command.into(),
            start_ms,
        };
        let name = format!("{}.json", stem(trial, round));
        self.exchange().publish(&name, &launch).map_err(|e| self.error(e))
    }

    /// Shard 0: the launch's trial result, after its engine stopped.
    pub fn publish_result(&self, round: u32, t: &TrialResult) -> Result<(), LabError> {
        let name = format!("{}.result.json", stem(&t.spec.id, round));
        self.exchange().publish(&name, t).map_err(|e| self.error(e))
    }

    /// Shard 0: wait (bounded) until every other shard arrived at the launch; `Ok(false)`:
    /// interrupted.
    pub async fn arrivals(
        &self,
        trial: &str,
        round: u32,
        interrupt: &mut watch::Receiver<bool>,
    ) -> Result<bool, LabError> {
        let here = self.exchange().arrivals(&stem(trial, round), self.wait, interrupt).await;
        here.map_err(|e| self.error(e))
    }

    /// The other shards: arrive at shard 0's launch of `trial` (round `round`) and wait for
    /// it, at most `ready_timeout` plus the bound; `Ok(None)`: interrupted.
    pub async fn launch(
        &self,
        trial: &str,
        round: u32,
        ready_timeout: Duration,
        interrupt: &mut watch::Receiver<bool>,
    ) -> Result<Option<Launch>, LabError> {
        let ex = self.exchange();
        let stem = stem(trial, round);
        ex.arrive(&stem).map_err(|e| self.error(e))?;
        let wait = ready_timeout + self.wait;
        ex.wait_for(&format!("{stem}.json"), wait, interrupt).await.map_err(|e| self.error(e))
    }

    /// The other shards: shard 0's result of the launch; `Ok(None)`: interrupted.
    pub async fn result(
        &self,
        trial: &str,
        round: u32,
        stop_grace: Duration,
        interrupt: &mut watch::Receiver<bool>,
    ) -> Result<Option<TrialResult>, LabError> {
        let name = format!("{}.result.json", stem(trial, round));
        let wait = stop_grace + self.wait;
        self.exchange().wait_for(&name, wait, interrupt).await.map_err(|e| self.error(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trial::{TrialSpec, TrialStatus};

    fn shard(dir: &Path, index: u32, started: u64) -> LabShard {
        LabShard {
            shard: Shard { index, count: 2 },
            clock: servelab_plan::ClockReference::default(),
            dir: dir.to_path_buf(),
            started: UNIX_EPOCH + Duration::from_secs(started),
            lead: Duration::from_secs(2),
            wait: Duration::from_millis(300),
        }
    }

    fn trial(id: &str) -> TrialResult {
        TrialResult {
            spec: TrialSpec { id: id.into(), ..TrialSpec::new("sim", &[]) },
            command: "sim serve".into(),
            command_template: "sim serve".into(),
            status: TrialStatus::Failed { reason: "engine exited".into(), log_tail: "x".into() },
            startup_secs: None,
            profiles: vec![],
        }
    }

    #[tokio::test(start_paused = true)]
    async fn the_other_shards_read_shard_zeros_launch_and_result() {
        let dir = tempfile::tempdir().unwrap();
        let (zero, one) = (shard(dir.path(), 0, 100), shard(dir.path(), 1, 100));
        assert!(zero.launches() && !one.launches());
        let (_tx, mut rx) = watch::channel(false);
        // Shard 1 has not arrived: shard 0 would wait; it arrives when it asks for the launch.
        let e = zero.arrivals("sim+a", 1, &mut rx).await.unwrap_err().to_string();
        assert!(e.contains("shard 1 of 2 did not arrive at this launch within 0 s"), "{e}");
        let e = one.launch("sim+a", 1, Duration::ZERO, &mut rx).await.unwrap_err();
        assert!(e.to_string().contains("launch-sim_a-round-1.json"), "{e}");
        assert!(zero.arrivals("sim+a", 1, &mut rx).await.unwrap());
        let start = UNIX_EPOCH + Duration::from_millis(105_250);
        zero.publish_launch("sim+a", 1, "sim serve", Some(("http://10.0.0.5:8000", start)))
            .unwrap();
        let got = one.launch("sim+a", 1, Duration::ZERO, &mut rx).await.unwrap().unwrap();
        assert_eq!(got.base_url, "http://10.0.0.5:8000");
        assert_eq!(got.start(), Some(start));
        assert!(dir.path().join("launch-sim_a-round-1.json").is_file());
        zero.publish_result(1, &trial("sim+a")).unwrap();
        let t = one.result("sim+a", 1, Duration::ZERO, &mut rx).await.unwrap().unwrap();
        assert_eq!(t, trial("sim+a"));
        // A failed launch has no start.
        zero.publish_launch("sim", 0, "sim serve", None).unwrap();
        let got = one.launch("sim", 0, Duration::ZERO, &mut rx).await.unwrap().unwrap();
        assert_eq!(
            (got.start(), got.base_url.as_str(), got.command.as_str()),
            (None, "", "sim serve")
        );
    }

    #[tokio::test(start_paused = true)]
    async fn an_earlier_labs_files_do_not_count_and_the_wait_is_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let earlier = shard(dir.path(), 0, 50);
        earlier.publish_launch("sim", 0, "sim serve", None).unwrap();
        let one = shard(dir.path(), 1, 100);
        let (tx, mut rx) = watch::channel(false);
        let e = one.launch("sim", 0, Duration::ZERO, &mut rx).await.unwrap_err().to_string();
        assert!(e.contains("launch-sim-round-0.json"), "{e}");
        assert!(e.contains("shard 1/2: shard 0 did not write this within 0 s"), "{e}");
        // An interrupt ends the wait at once.
        tx.send(true).unwrap();
        let wait = Duration::from_secs(3600);
        let got = one.result("sim", 0, wait, &mut rx).await.unwrap();
        assert_eq!(got, None);
    }
}
