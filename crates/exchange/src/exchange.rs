//! The files one shard writes for the others, and the bounded waits for theirs.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use servelab_plan::time::unix_ms;
use servelab_plan::Shard;
use tokio::sync::watch;

/// How often a wait looks at the folder again.
const POLL: Duration = Duration::from_millis(100);

/// How often a running part looks for another shard's failure of its run: off the runtime's
/// workers (the files may be on NFS), and often enough to save minutes, not milliseconds.
const PEER_POLL: Duration = Duration::from_secs(1);

/// One shard's side of the folder the shards of a run share.
#[derive(Debug, Clone)]
pub struct Exchange {
    dir: PathBuf,
    shard: Shard,
    stamp: u128,
}

/// What a shard's end file says.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum End {
    /// Its part ended at this instant (Unix ms).
    At(u64),
    /// Its part failed, or it did not run one: why.
    Failed(String),
}

impl End {
    /// Its part ended now.
    pub fn now() -> End {
        End::At(u64::try_from(unix_ms(SystemTime::now())).unwrap_or(u64::MAX))
    }
}

/// Why an exchange did not give what was asked for.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ExchangeError {
    /// A file could not be written into the shared folder.
    #[error("{message}")]
    Write {
        /// The file.
        path: PathBuf,
        /// What went wrong, naming the file.
        message: String,
    },
    /// What was waited for was not written in time.
    #[error("{} was not written within {} s", path.display(), waited.as_secs())]
    Timeout {
        /// The file waited for.
        path: PathBuf,
        /// How long the wait was.
        waited: Duration,
    },
    /// A shard did not arrive in time.
    #[error("shard {shard} of {count} did not arrive within {} s", waited.as_secs())]
    NotArrived {
        /// Its arrival file.
        path: PathBuf,
        /// Its index.
        shard: u32,
        /// How many shards.
        count: u32,
        /// How long the wait was.
        waited: Duration,
    },
    /// Shards did not end their parts in time.
    #[error(
        "shards {} of {count} did not finish within {} s (their results go to {}): see their \
         output",
        missing.iter().map(u32::to_string).collect::<Vec<_>>().join(", "),
        waited.as_secs(),
        dir.display()
    )]
    Unfinished {
        /// Their indices.
        missing: Vec<u32>,
        /// How many shards.
        count: u32,
        /// How long the wait was.
        waited: Duration,
        /// The shared folder.
        dir: PathBuf,
    },
    /// A shard's end file says its part failed.
    #[error("shard {shard} failed: {reason}")]
    Failed {
        /// The shard that failed.
        shard: Shard,
        /// Why, in its words.
        reason: String,
    },
}

/// What a shard writes, stamped with the instant (Unix ms) that names the run: a file left
/// in the folder by another run is not this one's.
#[derive(Serialize, Deserialize)]
struct Stamped<T> {
    stamp: u128,
    value: T,
}

impl Exchange {
    /// Shard `shard`'s side of `dir`, for the run named by the instant `stamp` (its start).
    pub fn new(dir: impl Into<PathBuf>, shard: Shard, stamp: SystemTime) -> Exchange {
        Exchange { dir: dir.into(), shard, stamp: unix_ms(stamp) }
    }

    /// The same folder and shard, for the run named by `stamp`.
    pub fn stamped(&self, stamp: SystemTime) -> Exchange {
        Exchange { stamp: unix_ms(stamp), ..self.clone() }
    }

    /// This shard.
    pub fn shard(&self) -> Shard {
        self.shard
    }

    /// The shared folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Whether this shard coordinates the others (shard 0).
    pub fn coordinates(&self) -> bool {
        self.shard.index == 0
    }

    /// The file `name` in the shared folder.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// Shard `k`'s file `STEM-shard-K-of-N.KIND`.
    fn shard_path(&self, stem: &str, k: u32, kind: &str) -> PathBuf {
        self.path(&format!("{stem}-shard-{k}-of-{}.{kind}", self.shard.count))
    }

    /// Write `value`, stamped, as `name`: whole or not at all (the others poll for it).
    pub fn publish<T: Serialize>(&self, name: &str, value: &T) -> Result<(), ExchangeError> {
        self.write(&self.path(name), value)
    }

    fn write<T: Serialize>(&self, path: &Path, value: &T) -> Result<(), ExchangeError> {
        let failed = |message: String| ExchangeError::Write { path: path.to_path_buf(), message };
        let json = serde_json::to_vec_pretty(&Stamped { stamp: self.stamp, value })
            .map_err(|e| failed(format!("cannot write {}: {e}", path.display())))?;
        servelab_plan::write_file(path, &json).map_err(|e| failed(e.to_string()))
    }

    /// `name` as this run's shard wrote it; `None` when it is missing or another run's.
    pub fn read<T: DeserializeOwned>(&self, name: &str) -> Option<T> {
        self.read_path(&self.path(name))
    }

    fn read_path<T: DeserializeOwned>(&self, path: &Path) -> Option<T> {
        let text = std::fs::read_to_string(path).ok()?;
        let stamped: Stamped<T> = serde_json::from_str(&text).ok()?;
        (stamped.stamp == self.stamp).then_some(stamped.value)
    }

    /// Wait until `name` holds this run's value, at most `wait`; `Ok(None)`: interrupted.
    pub async fn wait_for<T: DeserializeOwned>(
        &self,
        name: &str,
        wait: Duration,
        interrupt: &mut watch::Receiver<bool>,
    ) -> Result<Option<T>, ExchangeError> {
        self.wait_for_path(self.path(name), wait, interrupt).await
    }

    async fn wait_for_path<T: DeserializeOwned>(
        &self,
        path: PathBuf,
        wait: Duration,
        interrupt: &mut watch::Receiver<bool>,
    ) -> Result<Option<T>, ExchangeError> {
        let until = tokio::time::Instant::now() + wait;
        loop {
            if *interrupt.borrow() {
                return Ok(None);
            }
            if let Some(v) = self.read_path(&path) {
                return Ok(Some(v));
            }
            if tokio::time::Instant::now() >= until {
                return Err(ExchangeError::Timeout { path, waited: wait });
            }
            pause(interrupt).await;
        }
    }

    /// This shard has arrived at `stem` (a lab's launch): the coordinator may go on.
    pub fn arrive(&self, stem: &str) -> Result<(), ExchangeError> {
        self.write(&self.shard_path(stem, self.shard.index, "here"), &())
    }

    /// The coordinator: wait until every other shard arrived at `stem`, at most `wait` in
    /// all; `Ok(false)`: interrupted.
    pub async fn arrivals(
        &self,
        stem: &str,
        wait: Duration,
        interrupt: &mut watch::Receiver<bool>,
    ) -> Result<bool, ExchangeError> {
        let until = tokio::time::Instant::now() + wait;
        for k in (0..self.shard.count).filter(|&k| k != self.shard.index) {
            let path = self.shard_path(stem, k, "here");
            let left = until.saturating_duration_since(tokio::time::Instant::now());
            match self.wait_for_path::<()>(path.clone(), left, interrupt).await {
                Ok(Some(())) => {}
                Ok(None) => return Ok(false),
                Err(_) => {
                    let count = self.shard.count;
                    return Err(ExchangeError::NotArrived { path, shard: k, count, waited: wait });
                }
            }
        }
        Ok(true)
    }

    /// This shard's end of `stem` (a sharded run): when its part ended, or why it failed.
    pub fn end(&self, stem: &str, end: &End) -> Result<(), ExchangeError> {
        let end = match end {
            // One line: the reason is read back whole.
            End::Failed(why) => End::Failed(why.replace('\n', " ")),
            at => at.clone(),
        };
        self.write(&self.shard_path(stem, self.shard.index, "end"), &end)
    }

    /// Every shard's end of `stem` as the folder holds it now: each one's end instant (Unix
    /// ms), `None` for one not finished; or the first shard that failed, and why.
    pub fn ends(&self, stem: &str) -> Result<Vec<Option<u64>>, ExchangeError> {
        (0..self.shard.count)
            .map(|k| match self.read_path(&self.shard_path(stem, k, "end")) {
                Some(End::At(ms)) => Ok(Some(ms)),
                Some(End::Failed(reason)) => Err(ExchangeError::Failed {
                    shard: Shard { index: k, count: self.shard.count },
                    reason,
                }),
                None => Ok(None),
            })
            .collect()
    }

    /// Wait until every shard ended `stem`, at most `wait`: their end instants (Unix ms);
    /// at once the first failure any shard reports; `Ok(None)`: interrupted.
    pub async fn wait_for_ends(
        &self,
        stem: &str,
        wait: Duration,
        interrupt: &mut watch::Receiver<bool>,
    ) -> Result<Option<Vec<u64>>, ExchangeError> {
        let until = tokio::time::Instant::now() + wait;
        loop {
            let ends = self.ends(stem)?;
            let missing: Vec<u32> =
                (0..self.shard.count).filter(|&k| ends[k as usize].is_none()).collect();
            if missing.is_empty() {
                return Ok(Some(ends.into_iter().flatten().collect()));
            }
            if *interrupt.borrow() {
                return Ok(None);
            }
            if tokio::time::Instant::now() >= until {
                let (count, dir) = (self.shard.count, self.dir.clone());
                return Err(ExchangeError::Unfinished { missing, count, waited: wait, dir });
            }
            pause(interrupt).await;
        }
    }

    /// Resolves when another shard's end file of `stem` says it failed: the failure. Reads
    /// the folder off the runtime's workers, once a second.
    pub async fn peer_failure(&self, stem: &str) -> ExchangeError {
        loop {
            tokio::time::sleep(PEER_POLL).await;
            let (me, stem) = (self.clone(), stem.to_string());
            if let Ok(Err(e)) = tokio::task::spawn_blocking(move || me.ends(&stem)).await {
                return e;
            }
        }
    }
}

/// One poll's pause, cut short by the interrupt (a closed one no longer can).
async fn pause(interrupt: &mut watch::Receiver<bool>) {
    tokio::select! {
        _ = tokio::time::sleep(POLL) => {}
        changed = interrupt.changed() => {
            if changed.is_err() {
                tokio::time::sleep(POLL).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::UNIX_EPOCH;

    fn at(secs: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(secs)
    }

    fn side(dir: &Path, index: u32, count: u32, stamp: u64) -> Exchange {
        Exchange::new(dir, Shard { index, count }, at(stamp))
    }

    #[test]
    fn an_end_file_counts_for_its_own_run_only() {
        let dir = tempfile::tempdir().unwrap();
        let one = side(dir.path(), 1, 2, 100);
        one.end("point-0003", &End::At(101_500)).unwrap();
        assert!(dir.path().join("point-0003-shard-1-of-2.end").is_file());
        assert_eq!(one.ends("point-0003"), Ok(vec![None, Some(101_500)]));
        // Left in the folder by a run that started elsewhen: not this run's.
        assert_eq!(one.stamped(at(101)).ends("point-0003"), Ok(vec![None, None]));
        one.end("point-0003", &End::Failed("engine exited (signal 9)\nduring tiny".into()))
            .unwrap();
        let e = side(dir.path(), 0, 2, 100).ends("point-0003").unwrap_err();
        assert_eq!(e.to_string(), "shard 1/2 failed: engine exited (signal 9) during tiny");
    }

    #[tokio::test(start_paused = true)]
    async fn the_wait_for_the_other_shards_is_bounded_and_names_them() {
        let dir = tempfile::tempdir().unwrap();
        let (_tx, mut rx) = watch::channel(false);
        let zero = side(dir.path(), 0, 3, 100);
        zero.end("p", &End::At(101_000)).unwrap();
        let wait = Duration::from_millis(250);
        let e = zero.wait_for_ends("p", wait, &mut rx).await.unwrap_err().to_string();
        assert!(e.starts_with("shards 1, 2 of 3 did not finish within 0 s (their results"), "{e}");
        for k in 1..3 {
            side(dir.path(), k, 3, 100).end("p", &End::At(101_000 + u64::from(k) * 1000)).unwrap();
        }
        let ends = zero.wait_for_ends("p", Duration::ZERO, &mut rx).await.unwrap();
        assert_eq!(ends, Some(vec![101_000, 102_000, 103_000]));
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_shard_ends_the_wait_at_once_and_so_does_an_interrupt() {
        let dir = tempfile::tempdir().unwrap();
        let (tx, mut rx) = watch::channel(false);
        let zero = side(dir.path(), 0, 3, 100);
        zero.end("p", &End::At(101_000)).unwrap();
        side(dir.path(), 2, 3, 100).end("p", &End::Failed("cannot connect".into())).unwrap();
        // Shard 1 never wrote: the failure is reported without waiting out the hour.
        let hour = Duration::from_secs(3600);
        let e =
            tokio::time::timeout(Duration::from_secs(5), zero.wait_for_ends("p", hour, &mut rx))
                .await
                .expect("no wait for the missing shard")
                .unwrap_err();
        assert_eq!(e.to_string(), "shard 2/3 failed: cannot connect");
        let q = "q";
        zero.end(q, &End::At(101_000)).unwrap();
        let waiting = zero.wait_for_ends(q, hour, &mut rx);
        let stop = async {
            tokio::time::sleep(Duration::from_millis(200)).await;
            tx.send(true).unwrap();
        };
        let (ends, ()) =
            tokio::time::timeout(Duration::from_secs(5), async { tokio::join!(waiting, stop) })
                .await
                .expect("Ctrl-C ends the wait");
        assert_eq!(ends, Ok(None));
    }

    #[tokio::test(start_paused = true)]
    async fn the_coordinator_waits_for_arrivals_and_the_others_for_what_it_publishes() {
        let dir = tempfile::tempdir().unwrap();
        let (tx, mut rx) = watch::channel(false);
        let (zero, one) = (side(dir.path(), 0, 2, 100), side(dir.path(), 1, 2, 100));
        assert!(zero.coordinates() && !one.coordinates());
        let e = zero.arrivals("launch-a", Duration::ZERO, &mut rx).await.unwrap_err();
        assert_eq!(e.to_string(), "shard 1 of 2 did not arrive within 0 s");
        one.arrive("launch-a").unwrap();
        assert!(dir.path().join("launch-a-shard-1-of-2.here").is_file());
        assert_eq!(zero.arrivals("launch-a", Duration::ZERO, &mut rx).await, Ok(true));
        let e = one.wait_for::<String>("launch-a.json", Duration::ZERO, &mut rx).await;
        assert!(matches!(e, Err(ExchangeError::Timeout { .. })), "{e:?}");
        // An earlier run's file is not this one's.
        side(dir.path(), 0, 2, 50).publish("launch-a.json", &"old").unwrap();
        assert_eq!(one.read::<String>("launch-a.json"), None);
        zero.publish("launch-a.json", &"http://10.0.0.5:8000").unwrap();
        let got = one.wait_for::<String>("launch-a.json", Duration::ZERO, &mut rx).await;
        assert_eq!(got, Ok(Some("http://10.0.0.5:8000".into())));
        tx.send(true).unwrap();
        let hour = Duration::from_secs(3600);
        assert_eq!(one.wait_for::<String>("never.json", hour, &mut rx).await, Ok(None));
        assert_eq!(zero.arrivals("launch-b", hour, &mut rx).await, Ok(false));
    }
}
