//! A sweep run as shard k of N: every point is one sharded run of all N shards, merged exactly
//! on every shard, so each shard's sweep takes the same next step (knee, SLO search).
//!
//! Point `j` starts on every shard at one instant. After its part, a shard writes its result
//! (`point-JJJJ-shard-K-of-N.json`, records beside it) and then `...end` holding the instant it
//! ended, into the shared results folder; it waits (bounded) for every shard's `.end` file,
//! merges the N results with the exact merge and goes on with that summary. Point `j + 1`
//! starts at the latest shard's end plus a lead, the same instant on every shard.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use servelab_metrics::merge::{merge_shards, MergeOptions};
use servelab_metrics::Summary;
use servelab_plan::{Plan, RunError, Runner, Shard, ShardSpec};

/// Runs each sweep point as this process's shard of it, then merges all shards' parts.
pub struct ShardedPoints<R> {
    inner: R,
    shard: Shard,
    dir: PathBuf,
    next_start: SystemTime,
    lead: Duration,
    wait: Duration,
    point: usize,
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
        ShardedPoints { inner, shard, dir, next_start: start_at, lead, wait, point: 0 }
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

fn unix_ms(t: SystemTime) -> u128 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis())
}

/// The end file's text: the point's start and the shard's end, Unix ms.
fn end_text(start: SystemTime, end: SystemTime) -> String {
    format!("{} {}", unix_ms(start), unix_ms(end))
}

/// The end instant (Unix ms) in an end file written for the point that started at
/// `start_ms`; `None` for another start (a file left by an earlier sweep in the folder).
fn end_of(text: &str, start_ms: u128) -> Option<u64> {
    let (start, end) = text.trim().split_once(' ')?;
    (start.parse::<u128>().ok()? == start_ms).then_some(())?;
    end.parse().ok()
}

/// Waits until every shard's end file of point `j` (started at `start`) is in `dir`, at most
/// `wait`; the shards' end instants (Unix ms), or which shards did not finish.
async fn wait_for_ends(
    dir: &Path,
    j: usize,
    start: SystemTime,
    count: u32,
    wait: Duration,
) -> Result<Vec<u64>, String> {
    let until = tokio::time::Instant::now() + wait;
    loop {
        let mut ends = Vec::new();
        let mut missing = Vec::new();
        for k in 0..count {
            let path = end_file(dir, j, Shard { index: k, count });
            match std::fs::read_to_string(&path).ok().and_then(|t| end_of(&t, unix_ms(start))) {
                Some(ms) => ends.push(ms),
                None => missing.push(k.to_string()),
            }
        }
        if missing.is_empty() {
            return Ok(ends);
        }
        if tokio::time::Instant::now() >= until {
            return Err(format!(
                "sweep point {j}: shards {} of {count} did not finish within {} s (their results \
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
    async fn run(&mut self, plan: &Plan) -> Result<Summary, RunError> {
        let j = self.point;
        self.point += 1;
        let mut p = plan.clone();
        p.shard = ShardSpec { shard: Some(self.shard), start_at: Some(self.next_start) };
        p.output.save_result = true;
        p.output.save_detailed = true;
        p.output.result_dir = self.dir.clone();
        p.output.result_filename = Some(format!("{}.json", point_stem(j)));
        // A point's cap below the shard count leaves a shard no slot: refused, not hung.
        p.check().map_err(|e| RunError::Usage(e.to_string()))?;
        let own = self.inner.run(&p).await?;
        if own.info.interrupted {
            return Ok(own);
        }
        let end = end_file(&self.dir, j, self.shard);
        let text = end_text(self.next_start, SystemTime::now());
        servelab_plan::write_file(&end, text.as_bytes())?;
        let ends = wait_for_ends(&self.dir, j, self.next_start, self.shard.count, self.wait)
            .await
            .map_err(RunError::Failed)?;
        let files = (0..self.shard.count).map(|k| {
            let s =
                ShardSpec { shard: Some(Shard { index: k, count: self.shard.count }), ..p.shard };
            Plan { shard: s, ..p.clone() }.result_path("", "", "")
        });
        let shards = files
            .map(|f| servelab_store::read_shard_file(&f))
            .collect::<Result<Vec<_>, _>>()
            .map_err(RunError::Failed)?;
        let merged = merge_shards(shards, MergeOptions::default())
            .map_err(|e| RunError::Failed(format!("sweep point {j}: {e}")))?;
        let mut summary =
            servelab_metrics::summarize(&merged.records, &merged.info, &merged.metrics);
        summary.warnings.extend(merged.notes);
        let last = ends.into_iter().max().unwrap_or(0);
        self.next_start = UNIX_EPOCH + Duration::from_millis(last) + self.lead;
        Ok(summary)
    }

    fn settle(&mut self) -> impl std::future::Future<Output = ()> {
        self.inner.settle()
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
        assert_eq!(end_of(&text, 1_795_600_000_000), Some(1_795_600_002_500));
        // Left in the folder by a sweep that started elsewhen: not this point's.
        assert_eq!(end_of(&text, 1_795_600_000_001), None);
        assert_eq!(end_of("1795600002500", 1_795_600_000_000), None);
        assert_eq!(end_of("", 0), None);
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
        assert!(e.starts_with("sweep point 0: shards 1, 2 of 3 did not finish within"), "{e}");
        for k in 1..3 {
            let f = end_file(dir.path(), 0, Shard { index: k, count: 3 });
            std::fs::write(f, end_text(start, start + Duration::from_secs(u64::from(k)))).unwrap();
        }
        let ends = wait_for_ends(dir.path(), 0, start, 3, Duration::ZERO).await.unwrap();
        assert_eq!(ends, vec![101_000, 101_000, 102_000]);
    }
}
