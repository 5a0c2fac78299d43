//! One run from its shards: the shards' records combined into the records of one run, after
//! checking that the shards are parts of the same run.
//!
//! Merging is exact because it works on records, not on summaries: percentiles are computed
//! over the union of every shard's requests (never averaged across shards), throughput over
//! the global span (first intended send of any shard to the last end of any shard), and the
//! throughput windows and concurrency peaks on one global time axis. That axis is each
//! shard's schedule origin, which is the shared `--start-at` instant read from each host's
//! clock: the merge is as well aligned as those clocks. Each shard's `Date`-header offset
//! (good to about ±500 ms) is checked against a bound, catching a badly set clock; the
//! milliseconds of ordinary NTP skew are below what it can see.

use std::collections::BTreeSet;

use servelab_records::{RequestRecord, RunInfo};

use crate::MetricsConfig;

/// The default bound on the spread of the shards' clock offsets, ms. Each offset comes from a
/// whole-second `Date` header (±500 ms), so two well-synchronised hosts can differ by up to
/// about 1,000 ms; beyond 1,500 ms a clock is set wrong.
pub const DEFAULT_MAX_CLOCK_SPREAD_MS: f64 = 1_500.0;

/// One shard as it was stored or shipped: how it was driven and its records.
#[derive(Debug, Clone)]
pub struct ShardRun {
    /// Its run information (with [`RunInfo::shard`] set).
    pub info: RunInfo,
    /// Its records (warm-ups may be among them; they are not kept).
    pub records: Vec<RequestRecord>,
    /// The settings it was summarized with (`--metric-percentiles`, `--goodput`): the merged
    /// run is summarized with them too, as one process given those flags would be.
    pub metrics: MetricsConfig,
}

/// How strict the merge is.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MergeOptions {
    /// Largest allowed spread (max − min) of the shards' clock offsets, ms.
    pub max_clock_spread_ms: f64,
    /// Merge anyway, with a warning, when offsets spread wider or shards are missing.
    pub force: bool,
}

impl Default for MergeOptions {
    fn default() -> Self {
        MergeOptions { max_clock_spread_ms: DEFAULT_MAX_CLOCK_SPREAD_MS, force: false }
    }
}

/// Why shards cannot be merged; each message names the shard and what to do.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum MergeError {
    /// Nothing to merge.
    #[error("no shards to merge")]
    Empty,
    /// A run that was not run as a shard.
    #[error("{0} was not run as a shard (no --shard/--start-at): it cannot be merged")]
    NotAShard(String),
    /// A shard without a shared start instant: its timeline cannot be set against the others'.
    #[error(
        "{0} was run without --start-at: the shards of one run must share one time zero to be \
         merged on one timeline (run them again with the same --start-at)"
    )]
    NoStartAt(String),
    /// Two shards describe different runs.
    #[error("{other} and {first} are not shards of one run: {field} differs ('{b}' vs '{a}')")]
    Disagree {
        /// What differs.
        field: &'static str,
        /// The first shard.
        first: String,
        /// Its value.
        a: String,
        /// The disagreeing shard.
        other: String,
        /// Its value.
        b: String,
    },
    /// The same shard index twice.
    #[error("shard {0} is given twice")]
    Duplicate(String),
    /// A record with an index its shard does not own, or an index seen twice.
    #[error("{shard} holds request {index}, which is not its own or is also in another shard")]
    ForeignRecord {
        /// The shard.
        shard: String,
        /// The request index.
        index: u64,
    },
    /// Shards are missing (forceable).
    #[error("shards missing: {missing:?} of {count} (pass --force to merge the rest anyway)")]
    Missing {
        /// The missing indices.
        missing: Vec<u32>,
        /// The shard count.
        count: u32,
    },
    /// Clock offsets spread wider than the bound (forceable).
    #[error(
        "the shards' clock offsets against the target spread over {spread_ms:.0} ms, more than \
         the {bound_ms:.0} ms allowed: a host's clock is set wrong (sync it with NTP, or pass \
         --force to merge anyway)"
    )]
    ClockSpread {
        /// The spread found.
        spread_ms: f64,
        /// The bound.
        bound_ms: f64,
    },
}

/// The merged run: its information, its measured records by index, and notes for the user.
#[derive(Debug, Clone)]
pub struct Merged {
    /// The run as a whole: the shards' common description, no shard, the earliest start.
    pub info: RunInfo,
    /// Every shard's measured records, by global index.
    pub records: Vec<RequestRecord>,
    /// The shards' common metric settings: summarize the merged records with these.
    pub metrics: MetricsConfig,
    /// What the merge did or let through (to add to the summary's warnings).
    pub notes: Vec<String>,
}

/// Merge `shards` into one run; see the module documentation.
pub fn merge_shards(shards: Vec<ShardRun>, opts: MergeOptions) -> Result<Merged, MergeError> {
    let first = shards.first().ok_or(MergeError::Empty)?;
    let name = |i: &RunInfo| match &i.shard {
        Some(s) => format!("shard {}", s.shard),
        None => format!("the run started {}", i.started_at),
    };
    let first_shard =
        first.info.shard.clone().ok_or_else(|| MergeError::NotAShard(name(&first.info)))?;
    let count = first_shard.shard.count;
    let same = |info: &RunInfo| -> Result<(), MergeError> {
        let s = info.shard.as_ref().ok_or_else(|| MergeError::NotAShard(name(info)))?;
        if s.start_at.is_none() {
            return Err(MergeError::NoStartAt(name(info)));
        }
        let fields: [(&'static str, String, String); 9] = [
            ("the shard count", first_shard.shard.count.to_string(), s.shard.count.to_string()),
            ("the seed", first.info.seed.to_string(), info.seed.to_string()),
            ("the dataset", first.info.dataset.clone(), info.dataset.clone()),
            ("the prompt count", first.info.num_prompts.to_string(), info.num_prompts.to_string()),
            ("the load", format!("{:?}", first.info.load), format!("{:?}", info.load)),
            ("the model", first.info.model.clone(), info.model.clone()),
            ("the endpoint", first.info.endpoint.clone(), info.endpoint.clone()),
            ("the warm-up count", first.info.num_warmups.to_string(), info.num_warmups.to_string()),
            (
                "--start-at",
                first_shard.start_at.clone().unwrap_or_default(),
                s.start_at.clone().unwrap_or_default(),
            ),
        ];
        match fields.into_iter().find(|(_, a, b)| a != b) {
            Some((field, a, b)) => Err(MergeError::Disagree {
                field,
                first: name(&first.info),
                a,
                other: name(info),
                b,
            }),
            None => Ok(()),
        }
    };
    let mut notes = Vec::new();
    let mut seen_shards = BTreeSet::new();
    for s in &shards {
        same(&s.info)?;
        if s.metrics != first.metrics {
            return Err(MergeError::Disagree {
                field: "the metric settings (--metric-percentiles, --goodput)",
                first: name(&first.info),
                a: format!("{:?}", first.metrics),
                other: name(&s.info),
                b: format!("{:?}", s.metrics),
            });
        }
        let index = s.info.shard.as_ref().map_or(0, |x| x.shard.index);
        if !seen_shards.insert(index) {
            return Err(MergeError::Duplicate(name(&s.info)));
        }
    }
    let missing: Vec<u32> = (0..count).filter(|k| !seen_shards.contains(k)).collect();
    if !missing.is_empty() {
        let e = MergeError::Missing { missing, count };
        if !opts.force {
            return Err(e);
        }
        notes.push(format!("merged with --force: {e}; this run is missing their requests"));
    }
    let offsets: Vec<f64> =
        shards.iter().filter_map(|s| s.info.shard.as_ref()?.clock_offset_ms).collect();
    if let (Some(lo), Some(hi)) =
        (offsets.iter().copied().reduce(f64::min), offsets.iter().copied().reduce(f64::max))
    {
        let spread = hi - lo;
        if spread > opts.max_clock_spread_ms {
            let e =
                MergeError::ClockSpread { spread_ms: spread, bound_ms: opts.max_clock_spread_ms };
            if !opts.force {
                return Err(e);
            }
            notes.push(format!("merged with --force: {e}"));
        }
        notes.push(format!(
            "merged from {} shards; clock offsets against the target {lo:.0} to {hi:.0} ms \
             (from Date headers, each good to about ±500 ms)",
            shards.len()
        ));
    } else {
        notes.push(format!(
            "merged from {} shards; their clock offsets are unknown (no Date header)",
            shards.len()
        ));
    }
    if offsets.len() < shards.len() && !offsets.is_empty() {
        notes.push(format!(
            "{} of {} shards have no clock offset",
            shards.len() - offsets.len(),
            shards.len()
        ));
    }

    let metrics = first.metrics.clone();
    let mut info = first.info.clone();
    info.shard = None;
    info.interrupted = shards.iter().any(|s| s.info.interrupted);
    info.simulated = shards.iter().all(|s| s.info.simulated);
    info.started_at = shards.iter().map(|s| s.info.started_at.clone()).min().unwrap_or_default();
    let urls: BTreeSet<&str> = shards.iter().map(|s| s.info.base_url.as_str()).collect();
    if urls.len() > 1 {
        notes.push(format!(
            "the shards sent to {} addresses: {}",
            urls.len(),
            urls.iter().copied().collect::<Vec<_>>().join(", ")
        ));
    }
    let warmups: usize = shards.iter().map(|s| s.records.iter().filter(|r| r.warmup).count()).sum();
    if warmups > 0 {
        notes.push(format!("{warmups} warm-up records of the shards are not kept"));
    }
    let mut seen = BTreeSet::new();
    let mut records = Vec::new();
    for s in shards {
        let Some(shard) = s.info.shard.as_ref().map(|x| x.shard) else { continue };
        for r in s.records.into_iter().filter(|r| !r.warmup) {
            // Multi-turn runs are split by session: every turn goes with its session.
            let unit = r.session.map_or(r.index, |st| st.session);
            if !shard.owns(unit) || !seen.insert(r.index) {
                return Err(MergeError::ForeignRecord {
                    shard: format!("shard {shard}"),
                    index: r.index,
                });
            }
            records.push(r);
        }
    }
    records.sort_by_key(|r| r.index);
    Ok(Merged { info, records, metrics, notes })
}

#[cfg(test)]
mod tests {
    use super::*;
    use servelab_records::{Shard, ShardInfo};

    fn info(k: u32, n: u32, offset: Option<f64>) -> RunInfo {
        RunInfo {
            model: "m".into(),
            dataset: "random(8:4)".into(),
            num_prompts: 8,
            seed: 3,
            started_at: format!("2026-11-25T10:00:0{k}Z"),
            shard: Some(ShardInfo {
                shard: Shard::new(k, n).unwrap(),
                start_at: Some("2026-11-25T10:00:10.000Z".into()),
                clock_offset_ms: offset,
            }),
            ..RunInfo::default()
        }
    }

    /// Request `index`, due at `index` ms, its one token 5 ms later.
    fn record(index: u64, warmup: bool) -> RequestRecord {
        let chunks = vec![crate::request::tests::content(index + 5, 1)];
        let mut r = crate::request::tests::record(index, index, index + 6, chunks);
        r.warmup = warmup;
        r
    }

    fn shard(k: u32, n: u32, offset: Option<f64>) -> ShardRun {
        let mut records: Vec<RequestRecord> =
            (0..8).filter(|i| i % u64::from(n) == u64::from(k)).map(|i| record(i, false)).collect();
        records.push(record(k.into(), true));
        ShardRun { info: info(k, n, offset), records, metrics: crate::MetricsConfig::default() }
    }

    #[test]
    fn merges_every_measured_record_once_in_index_order() {
        let m = merge_shards(
            vec![shard(1, 2, Some(-400.0)), shard(0, 2, Some(300.0))],
            MergeOptions::default(),
        )
        .unwrap();
        assert_eq!(
            m.records.iter().map(|r| r.index).collect::<Vec<_>>(),
            (0..8).collect::<Vec<_>>()
        );
        assert_eq!(m.info.shard, None);
        assert_eq!(m.info.started_at, "2026-11-25T10:00:00Z");
        assert_eq!(
            m.notes,
            vec![
                "merged from 2 shards; clock offsets against the target -400 to 300 ms (from \
                 Date headers, each good to about ±500 ms)"
                    .to_string(),
                "2 warm-up records of the shards are not kept".to_string(),
            ]
        );
    }

    #[test]
    fn percentiles_are_over_the_union_not_averaged_across_shards() {
        // Shard 0 of 2 is fast (TTFT 1..5 ms), shard 1 slow (100 ms): their medians are 3 and
        // 100 ms, their mean 51.5 ms; the median of the nine requests is 5 ms.
        let ttft = |r: &mut RequestRecord, ms: u64| {
            r.chunks[0].t_ns = r.intended_ns + ms * 1_000_000;
            r.end_ns = Some(r.chunks[0].t_ns);
        };
        let mut fast = shard(0, 2, None);
        let mut slow = shard(1, 2, None);
        fast.records.retain(|r| !r.warmup);
        slow.records.retain(|r| !r.warmup);
        fast.records.push(record(8, false));
        for (r, ms) in fast.records.iter_mut().zip(1..) {
            ttft(r, ms);
        }
        for r in &mut slow.records {
            ttft(r, 100);
        }
        let cfg = crate::MetricsConfig::default();
        let median = |records: &[RequestRecord], info: &RunInfo| {
            crate::summarize(records, info, &cfg).ttft_ms.median
        };
        assert_eq!(median(&fast.records, &fast.info), 3.0);
        assert_eq!(median(&slow.records, &slow.info), 100.0);
        let mut info9 = info(0, 2, None);
        info9.num_prompts = 9;
        fast.info = info9.clone();
        slow.info = RunInfo { shard: info(1, 2, None).shard, ..info9 };
        let m = merge_shards(vec![fast, slow], MergeOptions::default()).unwrap();
        assert_eq!(m.records.len(), 9);
        assert_eq!(median(&m.records, &m.info), 5.0);
    }

    #[test]
    fn refuses_what_is_not_one_run() {
        let o = MergeOptions::default();
        let mut other = shard(1, 2, None);
        other.info.seed = 4;
        assert_eq!(
            merge_shards(vec![shard(0, 2, None), other], o).unwrap_err().to_string(),
            "shard 1/2 and shard 0/2 are not shards of one run: the seed differs ('4' vs '3')"
        );
        let e = merge_shards(vec![shard(0, 2, None), shard(0, 2, None)], o).unwrap_err();
        assert_eq!(e, MergeError::Duplicate("shard 0/2".into()));
        let mut plain = shard(0, 2, None);
        plain.info.shard = None;
        assert!(matches!(merge_shards(vec![plain], o), Err(MergeError::NotAShard(_))));
        let mut stray = shard(1, 2, None);
        stray.records.push(record(2, false));
        assert_eq!(
            merge_shards(vec![shard(0, 2, None), stray], o).unwrap_err(),
            MergeError::ForeignRecord { shard: "shard 1/2".into(), index: 2 }
        );
        assert_eq!(merge_shards(Vec::new(), o).unwrap_err(), MergeError::Empty);
        // Two missing start instants are not one shared time zero.
        let unaligned = || {
            let mut s = shard(1, 2, None);
            s.info.shard.as_mut().unwrap().start_at = None;
            s
        };
        assert_eq!(
            merge_shards(vec![shard(0, 2, None), unaligned()], o).unwrap_err(),
            MergeError::NoStartAt("shard 1/2".into())
        );
        let mut p99 = shard(1, 2, None);
        p99.metrics.percentiles = vec![99.0];
        let e = merge_shards(vec![shard(0, 2, None), p99], o).unwrap_err().to_string();
        assert!(
            e.starts_with("shard 1/2 and shard 0/2 are not shards of one run: the metric"),
            "{e}"
        );
    }

    #[test]
    fn the_merged_run_keeps_the_shards_metric_settings() {
        let cfg = crate::MetricsConfig {
            percentiles: vec![50.0, 99.9],
            goodput: Some(crate::Slo { ttft_ms: Some(20.0), ..crate::Slo::default() }),
            ..crate::MetricsConfig::default()
        };
        let shards = (0..2).map(|k| ShardRun { metrics: cfg.clone(), ..shard(k, 2, None) });
        let m = merge_shards(shards.collect(), MergeOptions::default()).unwrap();
        assert_eq!(m.metrics, cfg);
    }

    #[test]
    fn missing_shards_and_wide_clocks_need_force() {
        let strict = MergeOptions::default();
        let forced = MergeOptions { force: true, ..strict };
        let e = merge_shards(vec![shard(0, 3, None), shard(2, 3, None)], strict).unwrap_err();
        assert_eq!(e, MergeError::Missing { missing: vec![1], count: 3 });
        let m = merge_shards(vec![shard(0, 3, None), shard(2, 3, None)], forced).unwrap();
        assert_eq!(m.records.len(), 5);
        assert!(m.notes[0].starts_with("merged with --force: shards missing: [1] of 3"));
        let wide = || vec![shard(0, 2, Some(0.0)), shard(1, 2, Some(1_600.0))];
        assert_eq!(
            merge_shards(wide(), strict).unwrap_err(),
            MergeError::ClockSpread { spread_ms: 1_600.0, bound_ms: 1_500.0 }
        );
        assert_eq!(merge_shards(wide(), forced).unwrap().records.len(), 8);
        let loose = MergeOptions { max_clock_spread_ms: 2_000.0, force: false };
        assert!(merge_shards(wide(), loose).is_ok());
    }
}
