//! Shards of one run: which part of the global schedule this process sends.
//!
//! Every shard generates the same global workload and arrival schedule from the seed; shard
//! `k` of `N` then sends only the requests (or, for multi-turn workloads, the sessions) that
//! [`Shard::owns`] gives it, at their global intended times. The share is round-robin by
//! index (`i mod N == k`), so it needs no coordination, covers every request exactly once,
//! and keeps each shard's share of a Poisson schedule itself evenly spread in time.

/// Shard `index` of `count` (0-based, as Kubernetes' `JOB_COMPLETION_INDEX` and Slurm's
/// `SLURM_PROCID` are).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Shard {
    /// This shard, `0..count`.
    pub index: u32,
    /// How many shards the run has (at least 1).
    pub count: u32,
}

/// An invalid shard given on the command line or by the scheduler's environment.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum ShardError {
    /// Not of the form `k/N`.
    #[error("--shard takes K/N with 0 <= K < N, e.g. 0/4 (got '{0}')")]
    Syntax(String),
    /// `k` is not below `N`, or `N` is zero.
    #[error("shard {index}/{count} is out of range: the index must be below the count, which must be at least 1")]
    Range {
        /// The given index.
        index: u32,
        /// The given count.
        count: u32,
    },
    /// An environment variable holds something other than a non-negative integer.
    #[error("environment variable {name} must be a non-negative integer (got '{value}')")]
    Env {
        /// The variable.
        name: &'static str,
        /// What it held.
        value: String,
    },
    /// Kubernetes' index is set but no shard count was given.
    #[error(
        "JOB_COMPLETION_INDEX is set (a Kubernetes Indexed Job) but the shard count is \
         unknown: set SERVELAB_SHARDS to the Job's completions to run this pod as a shard, or \
         pass --shard 0/1 to run the whole benchmark here"
    )]
    MissingCount,
}

/// The variable carrying the shard count next to Kubernetes' `JOB_COMPLETION_INDEX`.
pub const SHARDS_ENV: &str = "SERVELAB_SHARDS";

impl Shard {
    /// The whole run in one process.
    pub const WHOLE: Shard = Shard { index: 0, count: 1 };

    /// Shard `index` of `count`, checked.
    pub fn new(index: u32, count: u32) -> Result<Self, ShardError> {
        if count == 0 || index >= count {
            return Err(ShardError::Range { index, count });
        }
        Ok(Shard { index, count })
    }

    /// Parse `--shard K/N`.
    pub fn parse(text: &str) -> Result<Self, ShardError> {
        let syntax = || ShardError::Syntax(text.to_string());
        let (k, n) = text.trim().split_once('/').ok_or_else(syntax)?;
        let k = k.trim().parse().map_err(|_| syntax())?;
        let n = n.trim().parse().map_err(|_| syntax())?;
        Shard::new(k, n)
    }

    /// The shard a scheduler assigned through the environment, if any: Kubernetes Indexed
    /// Jobs (`JOB_COMPLETION_INDEX`, with the count in [`SHARDS_ENV`]) first, then Slurm
    /// (`SLURM_PROCID` of `SLURM_NTASKS`). `lookup` reads a variable (`std::env::var(..).ok()`
    /// in the binary, a map in tests).
    pub fn from_env(lookup: impl Fn(&str) -> Option<String>) -> Result<Option<Self>, ShardError> {
        let number = |name: &'static str| -> Result<Option<u32>, ShardError> {
            match lookup(name) {
                None => Ok(None),
                Some(value) => {
                    value.trim().parse().map(Some).map_err(|_| ShardError::Env { name, value })
                }
            }
        };
        if let Some(index) = number("JOB_COMPLETION_INDEX")? {
            let count = number(SHARDS_ENV)?.ok_or(ShardError::MissingCount)?;
            return Shard::new(index, count).map(Some);
        }
        match (number("SLURM_PROCID")?, number("SLURM_NTASKS")?) {
            (Some(index), Some(count)) => Shard::new(index, count).map(Some),
            _ => Ok(None),
        }
    }

    /// Whether this shard sends the request (or session) with global index `id`.
    pub fn owns(&self, id: u64) -> bool {
        id % u64::from(self.count.max(1)) == u64::from(self.index)
    }

    /// This shard's part of a global schedule of instants (request `i` due at `global[i]`):
    /// the global indices it owns and their instants, in order.
    pub fn share(&self, global: &[u64]) -> (Vec<u64>, Vec<u64>) {
        (0u64..).zip(global).filter(|(i, _)| self.owns(*i)).map(|(i, t)| (i, *t)).unzip()
    }

    /// This shard's part of a global concurrency cap: `cap / N`, the first `cap mod N` shards
    /// one more, so the parts add up to `cap`. Zero when the cap is below the shard count (a
    /// plan refuses that).
    pub fn share_of_cap(&self, cap: usize) -> usize {
        let n = self.count.max(1) as usize;
        cap / n + usize::from((self.index as usize) < cap % n)
    }

    /// Whether this is the whole run (one shard).
    pub fn is_whole(&self) -> bool {
        self.count <= 1
    }
}

impl Default for Shard {
    fn default() -> Self {
        Shard::WHOLE
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> =
            pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        move |name| map.get(name).cloned()
    }

    #[test]
    fn parses_and_rejects() {
        assert_eq!(Shard::parse("2/4"), Ok(Shard { index: 2, count: 4 }));
        assert_eq!(Shard::parse(" 0 / 1 "), Ok(Shard::WHOLE));
        assert_eq!(Shard::parse("4/4"), Err(ShardError::Range { index: 4, count: 4 }));
        assert_eq!(Shard::parse("0/0"), Err(ShardError::Range { index: 0, count: 0 }));
        assert_eq!(Shard::parse("1"), Err(ShardError::Syntax("1".into())));
        assert_eq!(Shard::parse("-1/4"), Err(ShardError::Syntax("-1/4".into())));
        assert_eq!(Shard::parse("2/4").unwrap().to_string(), "2/4");
    }

    #[test]
    fn every_index_has_exactly_one_owner() {
        let shards: Vec<Shard> = (0..4).map(|k| Shard::new(k, 4).unwrap()).collect();
        for id in 0..1000u64 {
            assert_eq!(shards.iter().filter(|s| s.owns(id)).count(), 1, "id {id}");
        }
        let first: Vec<u64> = (0..10).filter(|&i| shards[1].owns(i)).collect();
        assert_eq!(first, vec![1, 5, 9]);
        assert!((0..100).all(|i| Shard::WHOLE.owns(i)));
    }

    #[test]
    fn shares_split_a_schedule_and_a_cap_exactly() {
        let global = [0, 10, 20, 30, 40, 50, 60];
        let s = Shard::new(1, 3).unwrap();
        assert_eq!(s.share(&global), (vec![1, 4], vec![10, 40]));
        assert_eq!(Shard::WHOLE.share(&global).0, (0..7).collect::<Vec<u64>>());
        let caps: Vec<usize> = (0..4).map(|k| Shard::new(k, 4).unwrap().share_of_cap(10)).collect();
        assert_eq!(caps, vec![3, 3, 2, 2]);
        assert_eq!(Shard::new(3, 4).unwrap().share_of_cap(3), 0);
        assert_eq!(Shard::WHOLE.share_of_cap(7), 7);
    }

    #[test]
    fn reads_kubernetes_then_slurm() {
        let k8s = env(&[("JOB_COMPLETION_INDEX", "3"), ("SERVELAB_SHARDS", "16")]);
        assert_eq!(Shard::from_env(k8s), Ok(Some(Shard { index: 3, count: 16 })));
        let slurm = env(&[("SLURM_PROCID", "1"), ("SLURM_NTASKS", "2")]);
        assert_eq!(Shard::from_env(slurm), Ok(Some(Shard { index: 1, count: 2 })));
        assert_eq!(Shard::from_env(env(&[])), Ok(None));
        assert_eq!(
            Shard::from_env(env(&[("JOB_COMPLETION_INDEX", "0")])),
            Err(ShardError::MissingCount)
        );
        assert_eq!(
            Shard::from_env(env(&[("SLURM_PROCID", "x"), ("SLURM_NTASKS", "2")])),
            Err(ShardError::Env { name: "SLURM_PROCID", value: "x".into() })
        );
        assert_eq!(
            Shard::from_env(env(&[("SLURM_PROCID", "2"), ("SLURM_NTASKS", "2")])),
            Err(ShardError::Range { index: 2, count: 2 })
        );
    }
}
