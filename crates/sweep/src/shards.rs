//! A sweep as shard k of N (docs/scale.md): every point one sharded run of all N shards,
//! merged on every shard through the shard exchange ([`servelab_exchange::ShardedRuns`]), so
//! every shard's knee and SLO search take the same next point. Shard 0 writes the sweep's
//! outputs; the others keep their point files in the shared results folder's `sweep-shard-K`.

use std::time::{Duration, SystemTime};

use servelab_exchange::{ReadPart, ShardedRuns};
use servelab_load::Level;
use servelab_plan::Shard;

use crate::SweepPlan;

/// What a sharded sweep (shard `shard`) cannot do: resume (the shards would disagree on which
/// points are left), or a concurrency level of `loads` below the shard count (a shard would
/// get no slot).
pub fn check_sharded(shard: Shard, loads: &[Level], resume: bool) -> Result<(), String> {
    if resume {
        return Err(format!("--resume: a sharded sweep (shard {shard}) runs from its start"));
    }
    for l in loads {
        if let Level::Concurrency(c) = l {
            if (*c as u64) < u64::from(shard.count) {
                return Err(format!(
                    "--concurrency {c}: a sweep point's cap is shared by {} shards; every level \
                     must be at least the shard count",
                    shard.count
                ));
            }
        }
    }
    Ok(())
}

impl SweepPlan {
    /// `inner` running every point as this shard of it (the first at `start`, each next one
    /// `settle` + `--shard-lead` after the last shard ended the point before), parts exchanged
    /// in the plan's results folder and read with `read_part`. A shard other than 0 writes its
    /// point files into `RESULTS/sweep-shard-K` instead of the output folder.
    pub fn sharded<R>(
        &mut self,
        inner: R,
        start: SystemTime,
        settle: Duration,
        read_part: ReadPart,
    ) -> ShardedRuns<R> {
        let shard = self.base.shard.shard_or_whole();
        let shared = self.base.output.result_dir.clone();
        if shard.index > 0 {
            self.output_dir = shared.join(format!("sweep-shard-{}", shard.index));
        }
        // Time to settle the target, then for every shard to see the last end file and start.
        let lead = settle + self.base.shard.lead;
        // The other shards send the same schedule from the same instant: they end within a
        // request timeout of each other, unless one failed.
        let wait = self.base.limits.request_timeout + Duration::from_secs(600);
        ShardedRuns::new(inner, shard, shared, start, lead, wait, read_part)
            .with_clock(self.base.shard.clock.clone())
    }
}
