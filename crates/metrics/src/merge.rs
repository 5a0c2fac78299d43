//! One run from its shards: the shards' records combined into the records of one run, after
//! checking that the shards are parts of the same run.
//!
//! Merging is exact because it works on records, not on summaries: percentiles are computed
//! over the union of every shard's requests (never averaged across shards), throughput over
//! the global span (first intended send of any shard to the last end of any shard), and the
//! throughput windows and concurrency peaks on one global time axis. That axis is each
//! shard's schedule origin, which is the shared `--start-at` instant read from each host's
//! clock: the merge is as well aligned as those clocks. Each shard reads its clock's offset
//! against one reference (the target's `Date`, narrowed to milliseconds, or an NTP server),
//! with an uncertainty; the merge refuses shards whose clocks certainly differ by more than
//! a bound, and says so when their readings are too coarse to confirm that bound.

use std::collections::BTreeSet;

use servelab_records::{RequestRecord, RunInfo};

use servelab_records::Nanos;

use crate::gpu::GpuSummary;
use crate::{EngineMetrics, MetricsConfig, Summary, TraceRows};

/// The default bound on how far apart the shards' clocks may be, ms. A shard whose clock is
/// this far off sends its part of the schedule this much early or late, and its records sit
/// this far off on the merged timeline: a tenth of a second is already visible in one-second
/// throughput windows. Hosts synchronised by NTP or chrony are within a millisecond or two.
pub const DEFAULT_MAX_CLOCK_SPREAD_MS: f64 = 100.0;

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
    /// The trace's rows, when the run replayed one (every shard reads the whole trace, so
    /// they are the run's).
    pub trace_rows: Option<TraceRows>,
    /// What the engine's `/metrics` said over the shard's run, when it has one.
    pub engine: Option<EngineMetrics>,
    /// Its GPU energy and cost, when it read GPU telemetry or was given a GPU price.
    pub gpu: Option<GpuSummary>,
}

impl ShardRun {
    /// A shard as its own run summarized it, with its records.
    pub fn new(summary: &Summary, records: Vec<RequestRecord>) -> ShardRun {
        ShardRun {
            info: summary.info.clone(),
            records,
            metrics: summary.metrics_config(),
            trace_rows: summary.replay.as_ref().map(|r| r.rows),
            engine: summary.engine.clone(),
            gpu: summary.gpu.clone(),
        }
    }
}

/// How strict the merge is.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MergeOptions {
    /// Largest allowed difference between the shards' clocks, ms: refused when their
    /// readings show a larger one for certain (offsets apart by more than the bound plus both
    /// uncertainties).
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
    /// The shards' clocks differ by more than the bound, for certain (forceable).
    #[error(
        "the shards' clocks differ by at least {at_least_ms:.0} ms (offsets {lo_ms:+.1} to \
         {hi_ms:+.1} ms against {reference}), more than the {bound_ms:.0} ms allowed: a host's \
         clock is off (sync it with NTP or chrony, or pass --force to merge anyway)"
    )]
    ClockSpread {
        /// The least the clocks can differ by, given the readings and their uncertainties.
        at_least_ms: f64,
        /// The smallest offset read.
        lo_ms: f64,
        /// The largest offset read.
        hi_ms: f64,
        /// What the offsets were read against.
        reference: String,
        /// The bound.
        bound_ms: f64,
    },
}

/// How far apart clocks read as `(offset, uncertainty)` pairs (ms) can be: the least and the
/// most the largest true offset minus the smallest can be. `None` for no readings.
pub fn clock_spread(readings: &[(f64, f64)]) -> Option<(f64, f64)> {
    if readings.is_empty() {
        return None;
    }
    let highest = |sign: f64| readings.iter().map(|(o, u)| o + sign * u).fold(f64::MIN, f64::max);
    let lowest = |sign: f64| readings.iter().map(|(o, u)| o + sign * u).fold(f64::MAX, f64::min);
    let least = highest(-1.0) - lowest(1.0);
    let most = highest(1.0) - lowest(-1.0);
    Some((least.max(0.0), most))
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
    /// A trace replay's rows.
    pub trace_rows: Option<TraceRows>,
    /// The engine's `/metrics` figures over the whole run ([`engine_of_last`]).
    pub engine: Option<EngineMetrics>,
    /// The shards' GPU figures by shard index, for the whole run's ([`crate::gpu::merge`]).
    pub gpu: Vec<(u32, GpuSummary)>,
}

impl Merged {
    /// The whole run's summary: computed once over every record with the shards' settings,
    /// with the merge's notes, and a replay's figures against its trace's instants.
    pub fn summary(&self) -> Summary {
        let mut summary = crate::summarize(&self.records, &self.info, &self.metrics);
        summary.warnings.extend(self.notes.iter().cloned());
        if let Some(rows) = self.trace_rows {
            crate::replay::attach(&mut summary, rows);
        }
        summary.engine = self.engine.clone();
        let gpu: Vec<(u32, &GpuSummary)> = self.gpu.iter().map(|(k, g)| (*k, g)).collect();
        let window = crate::gpu::window(&summary);
        crate::gpu::attach_merged(&mut summary, &gpu, window);
        summary
    }
}

/// The engine's `/metrics` figures for a merged run, from `shards` as (last response end on
/// the shared origin, engine figures). The engine counts every shard's requests, and every
/// shard's scrapes start at the run's start and end after its last response, so those of the
/// shard whose last response ended last span the whole run (the first such shard, so every
/// reader picks the same). `None` when that shard has none: another's would miss the end.
pub fn engine_of_last<'a>(
    shards: impl IntoIterator<Item = (Option<Nanos>, Option<&'a EngineMetrics>)>,
) -> Option<EngineMetrics> {
    let mut best: Option<(Nanos, Option<&EngineMetrics>)> = None;
    for (end, engine) in shards {
        let Some(end) = end else { continue };
        if best.is_none_or(|(b, _)| end > b) {
            best = Some((end, engine));
        }
    }
    best.and_then(|(_, e)| e.cloned())
}

/// Merge `shards` into one run; see the module documentation.
pub fn merge_shards(shards: Vec<ShardRun>, opts: MergeOptions) -> Result<Merged, MergeError> {
    let parts: Vec<(&RunInfo, &MetricsConfig)> =
        shards.iter().map(|s| (&s.info, &s.metrics)).collect();
    let (info, mut notes) = join(&parts, opts)?;
    let metrics = shards[0].metrics.clone();
    let trace_rows = shards.iter().find_map(|s| s.trace_rows);
    // Measured requests' ends, as a shard's digest counts them.
    let last_end =
        |s: &ShardRun| s.records.iter().filter(|r| !r.warmup).filter_map(|r| r.end_ns).max();
    let engine = engine_of_last(shards.iter().map(|s| (last_end(s), s.engine.as_ref())));
    let warmups: usize = shards.iter().map(|s| s.records.iter().filter(|r| r.warmup).count()).sum();
    if warmups > 0 {
        notes.push(format!("{warmups} warm-up records of the shards are not kept"));
    }
    let gpu = shards
        .iter()
        .filter_map(|s| Some((s.info.shard.as_ref().map_or(0, |x| x.shard.index), s.gpu.clone()?)))
        .collect();
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
    Ok(Merged { info, records, metrics, notes, trace_rows, engine, gpu })
}

/// The checks every merge makes of its shards, on their run information and metric settings
/// alone (so the records' merge and the sketches' merge make the same ones): they are parts of
/// one run, each once, all there (or `--force`), with clocks that agree. Returns the whole
/// run's information and what the merge must say.
pub(crate) fn join(
    parts: &[(&RunInfo, &MetricsConfig)],
    opts: MergeOptions,
) -> Result<(RunInfo, Vec<String>), MergeError> {
    let &(first, first_metrics) = parts.first().ok_or(MergeError::Empty)?;
    let name = |i: &RunInfo| match &i.shard {
        Some(s) => format!("shard {}", s.shard),
        None => format!("the run started {}", i.started_at),
    };
    let first_shard = first.shard.clone().ok_or_else(|| MergeError::NotAShard(name(first)))?;
    let count = first_shard.shard.count;
    let same = |info: &RunInfo| -> Result<(), MergeError> {
        let s = info.shard.as_ref().ok_or_else(|| MergeError::NotAShard(name(info)))?;
        if s.start_at.is_none() {
            return Err(MergeError::NoStartAt(name(info)));
        }
        let fields: [(&'static str, String, String); 9] = [
            ("the shard count", first_shard.shard.count.to_string(), s.shard.count.to_string()),
            ("the seed", first.seed.to_string(), info.seed.to_string()),
            ("the dataset", first.dataset.clone(), info.dataset.clone()),
            ("the prompt count", first.num_prompts.to_string(), info.num_prompts.to_string()),
            ("the load", format!("{:?}", first.load), format!("{:?}", info.load)),
            ("the model", first.model.clone(), info.model.clone()),
            ("the endpoint", first.endpoint.clone(), info.endpoint.clone()),
            ("the warm-up count", first.num_warmups.to_string(), info.num_warmups.to_string()),
            (
                "--start-at",
                first_shard.start_at.clone().unwrap_or_default(),
                s.start_at.clone().unwrap_or_default(),
            ),
        ];
        match fields.into_iter().find(|(_, a, b)| a != b) {
            Some((field, a, b)) => {
                Err(MergeError::Disagree { field, first: name(first), a, other: name(info), b })
            }
            None => Ok(()),
        }
    };
    let mut notes = Vec::new();
    let mut seen_shards = BTreeSet::new();
    for &(info, metrics) in parts {
        same(info)?;
        if metrics != first_metrics {
            return Err(MergeError::Disagree {
                field: "the metric settings (--metric-percentiles, --goodput)",
                first: name(first),
                a: format!("{first_metrics:?}"),
                other: name(info),
                b: format!("{metrics:?}"),
            });
        }
        let index = info.shard.as_ref().map_or(0, |x| x.shard.index);
        if !seen_shards.insert(index) {
            return Err(MergeError::Duplicate(name(info)));
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
    let infos: Vec<&RunInfo> = parts.iter().map(|p| p.0).collect();
    notes.extend(check_clocks(&infos, opts)?);
    if let Some(n) = unread_clocks(&infos) {
        notes.push(n);
    }

    let mut info = first.clone();
    info.shard = None;
    info.interrupted = infos.iter().any(|i| i.interrupted);
    info.simulated = infos.iter().all(|i| i.simulated);
    info.started_at = infos.iter().map(|i| i.started_at.clone()).min().unwrap_or_default();
    let urls: BTreeSet<&str> = infos.iter().map(|i| i.base_url.as_str()).collect();
    if urls.len() > 1 {
        notes.push(format!(
            "the shards sent to {} addresses: {}",
            urls.len(),
            urls.iter().copied().collect::<Vec<_>>().join(", ")
        ));
    }
    Ok((info, notes))
}

/// What the shards' clock readings say, or why they refuse the merge.
fn check_clocks(shards: &[&RunInfo], opts: MergeOptions) -> Result<Vec<String>, MergeError> {
    let read: Vec<&servelab_records::ShardInfo> = shards
        .iter()
        .filter_map(|s| s.shard.as_ref())
        .filter(|s| s.clock_offset_ms.is_some())
        .collect();
    // Runs of servelab before references were named read the target's Date.
    let reference = |s: &servelab_records::ShardInfo| {
        s.clock_reference.clone().unwrap_or_else(|| "the target's Date header".into())
    };
    let refs: BTreeSet<String> = read.iter().map(|s| reference(s)).collect();
    if refs.len() > 1 {
        let list = refs.into_iter().collect::<Vec<_>>().join(", ");
        return Ok(vec![format!(
            "merged from {} shards; they read their clocks against different references \
             ({list}): their offsets are not compared",
            shards.len()
        )]);
    }
    let pairs: Vec<(f64, f64)> = read
        .iter()
        .filter_map(|s| Some((s.clock_offset_ms?, s.clock_uncertainty_or_whole_second())))
        .collect();
    let Some((least, most)) = clock_spread(&pairs) else {
        return Ok(vec![format!(
            "merged from {} shards; their clock offsets are unknown (no reading)",
            shards.len()
        )]);
    };
    let reference = refs.into_iter().next().unwrap_or_default();
    let lo = pairs.iter().map(|p| p.0).fold(f64::INFINITY, f64::min);
    let hi = pairs.iter().map(|p| p.0).fold(f64::NEG_INFINITY, f64::max);
    let widest = pairs.iter().map(|p| p.1).fold(0.0, f64::max);
    let bound = opts.max_clock_spread_ms;
    let mut notes = Vec::new();
    if least > bound {
        let e = MergeError::ClockSpread {
            at_least_ms: least,
            lo_ms: lo,
            hi_ms: hi,
            reference: reference.clone(),
            bound_ms: bound,
        };
        if !opts.force {
            return Err(e);
        }
        notes.push(format!("merged with --force: {e}"));
    }
    let read_as =
        format!("offsets {lo:+.1} to {hi:+.1} ms against {reference}, each within ±{widest:.1} ms");
    if most <= bound {
        notes.push(format!(
            "merged from {} shards; their clocks agree within {most:.1} ms ({read_as})",
            shards.len()
        ));
    } else if least <= bound {
        notes.push(format!(
            "merged from {} shards; their clock readings cannot confirm they agree within \
             {bound:.0} ms: they differ by {least:.0} to {most:.0} ms ({read_as}). Give the \
             shards time to refine them (--start-at further ahead) or read an NTP server \
             (--clock-reference ntp://HOST)",
            shards.len()
        ));
    }
    Ok(notes)
}

/// A note when some shards, not all, have no clock reading.
fn unread_clocks(shards: &[&RunInfo]) -> Option<String> {
    let read = shards
        .iter()
        .filter(|s| s.shard.as_ref().is_some_and(|x| x.clock_offset_ms.is_some()))
        .count();
    (read > 0 && read < shards.len())
        .then(|| format!("{} of {} shards have no clock offset", shards.len() - read, shards.len()))
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
                clock_uncertainty_ms: None,
                clock_reference: None,
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
        ShardRun {
            info: info(k, n, offset),
            records,
            metrics: crate::MetricsConfig::default(),
            trace_rows: None,
            engine: None,
            gpu: None,
        }
    }

    #[test]
    fn the_engine_figures_are_those_of_the_shard_that_ended_last() {
        let engine =
            |scrapes| EngineMetrics { engine: "vllm".into(), scrapes, ..Default::default() };
        let (a, b, c) = (engine(1), engine(2), engine(3));
        // The last responses of the second and third shards ended together, last: the first
        // of them.
        let e = engine_of_last([
            (Some(5_000), Some(&a)),
            (Some(7_000), Some(&b)),
            (Some(7_000), Some(&c)),
        ]);
        assert_eq!(e.map(|e| e.scrapes), Some(2));
        // That shard scraped nothing: none, not another shard's shorter account.
        assert_eq!(engine_of_last([(Some(5_000), Some(&a)), (Some(7_000), None)]), None);
        // A shard with no response ended is not the last.
        assert_eq!(
            engine_of_last([(None, Some(&c)), (Some(1), Some(&a))]).map(|e| e.scrapes),
            Some(1)
        );
        assert_eq!(engine_of_last([]), None);
    }

    /// Issue 27: the shards' GPU figures merge as the digests' do: each GPU once over the
    /// merged window, different GPUs added.
    #[test]
    fn the_merged_run_counts_each_gpu_once_and_adds_different_ones() {
        use crate::gpu::tests::on_host;
        let merged = |hosts: [&str; 2]| {
            let shards = (0..2u32).map(|k| {
                let mut s = shard(k, 2, None);
                let mut summary = crate::summarize(&s.records, &s.info, &s.metrics);
                crate::gpu::attach(&mut summary, &on_host(hosts[k as usize], 4), None, Some(2.5));
                s.gpu = summary.gpu;
                s
            });
            merge_shards(shards.collect(), MergeOptions::default()).unwrap().summary()
        };
        let whole =
            merge_shards(vec![shard(0, 2, None), shard(1, 2, None)], MergeOptions::default())
                .unwrap();
        let mut one = whole.summary();
        assert_eq!(one.gpu, None);
        crate::gpu::attach(&mut one, &on_host("h", 4), None, Some(2.5));
        let one = one.gpu.unwrap();
        // The merged window: the first intended send (0 ms) to the last end (13 ms).
        assert_eq!(one.window_s, 0.013);
        let same = merged(["h", "h"]);
        let g = same.gpu.as_ref().unwrap();
        assert_eq!((g.gpus_seen, g.window_s, g.energy_j), (2, 0.013, one.energy_j));
        assert!(g.per_gpu.iter().all(|p| p.energy_readings.is_empty()));
        assert_eq!(g.usd_per_million_output_tokens, one.usd_per_million_output_tokens);
        let apart = merged(["a", "b"]);
        let g = apart.gpu.as_ref().unwrap();
        assert_eq!((g.gpus_seen, g.energy_j), (4, one.energy_j.map(|e| 2.0 * e)));
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
                "merged from 2 shards; their clock readings cannot confirm they agree within \
                 100 ms: they differ by 0 to 1700 ms (offsets -400.0 to +300.0 ms against the \
                 target's Date header, each within ±500.0 ms). Give the shards time to refine \
                 them (--start-at further ahead) or read an NTP server (--clock-reference \
                 ntp://HOST)"
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
        // Whole-second readings (no uncertainty stated: ±500 ms each) 1,600 ms apart differ
        // by at least 600 ms.
        let wide = || vec![shard(0, 2, Some(0.0)), shard(1, 2, Some(1_600.0))];
        let e = merge_shards(wide(), strict).unwrap_err();
        assert_eq!(
            e,
            MergeError::ClockSpread {
                at_least_ms: 600.0,
                lo_ms: 0.0,
                hi_ms: 1_600.0,
                reference: "the target's Date header".into(),
                bound_ms: 100.0
            }
        );
        assert!(e.to_string().starts_with("the shards' clocks differ by at least 600 ms"), "{e}");
        assert_eq!(merge_shards(wide(), forced).unwrap().records.len(), 8);
        let loose = MergeOptions { max_clock_spread_ms: 600.0, force: false };
        assert!(merge_shards(wide(), loose).is_ok());
    }

    #[test]
    fn the_clock_spread_is_bounded_by_the_readings_uncertainties() {
        assert_eq!(clock_spread(&[]), None);
        assert_eq!(clock_spread(&[(5.0, 1.0)]), Some((0.0, 2.0)));
        // 0 ± 2 and 30 ± 3: at least 30 − 3 − 2 = 25, at most 33 + 2 = 35.
        assert_eq!(clock_spread(&[(0.0, 2.0), (30.0, 3.0)]), Some((25.0, 35.0)));
        // Overlapping readings may be the same clock.
        assert_eq!(clock_spread(&[(0.0, 500.0), (300.0, 500.0)]), Some((0.0, 1_300.0)));
    }

    /// Shard `k` of 2 whose clock read `offset ± unc` against `reference`.
    fn read(k: u32, offset: f64, unc: f64, reference: &str) -> ShardRun {
        let mut s = shard(k, 2, Some(offset));
        let info = s.info.shard.as_mut().unwrap();
        info.clock_uncertainty_ms = Some(unc);
        info.clock_reference = Some(reference.into());
        s
    }

    #[test]
    fn precise_readings_refuse_clocks_apart_and_confirm_clocks_together() {
        let opts = MergeOptions::default();
        let r = "ntp 10.0.0.1:123";
        // 180 ms apart, each ±1 ms: at least 178 ms, over the 100 ms bound.
        let e = merge_shards(vec![read(0, 0.0, 1.0, r), read(1, 180.0, 1.0, r)], opts);
        assert!(
            matches!(e, Err(MergeError::ClockSpread { at_least_ms, .. }) if at_least_ms == 178.0)
        );
        // 3 ms apart, each ±1 ms: they agree within 5 ms.
        let m = merge_shards(vec![read(0, 0.0, 1.0, r), read(1, 3.0, 1.0, r)], opts).unwrap();
        assert!(
            m.notes.iter().any(|n| n.contains("their clocks agree within 5.0 ms")),
            "{:?}",
            m.notes
        );
        // The same 180 ms apart read from whole seconds cannot be told from agreement.
        let m = merge_shards(vec![read(0, 0.0, 500.0, r), read(1, 180.0, 500.0, r)], opts).unwrap();
        assert!(
            m.notes.iter().any(|n| n
                .contains("cannot confirm they agree within 100 ms: they differ by 0 to 1180 ms")),
            "{:?}",
            m.notes
        );
        // Different references are not compared.
        let m =
            merge_shards(vec![read(0, 0.0, 1.0, r), read(1, 900.0, 1.0, "ntp other:123")], opts)
                .unwrap();
        assert!(m.notes.iter().any(|n| n.contains("not compared")), "{:?}", m.notes);
    }
}
