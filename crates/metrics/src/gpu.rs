//! What a run's tokens cost in energy and money, from the GPUs' telemetry read while it went
//! on ([`GpuScrape`]s, `--gpu-metrics`) and the price of a GPU hour (`--gpu-hourly-cost`).
//!
//! Every figure covers the **measured window**: from the first measured request's intended
//! send to the end of the last one (the window of [`Summary::duration_s`]); warm-ups before it
//! and the idle time after it are not counted.
//!
//! - A GPU's **energy** is the increase of its energy counter (DCGM's
//!   `DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION`, mJ since the driver loaded) over the window, the
//!   counter read between scrapes by linear interpolation at the window's ends (a fall is a
//!   driver reload: the counter began again from zero). Without the counter, it is the
//!   integral of the power readings over the window, linear between readings and held at
//!   the first (last) reading before (after) them: [`EnergyMethod`] says which.
//! - **Joules per output token** = the energy of every GPU / the run's output tokens.
//! - A GPU's **average watts** = its energy / the window; its **peak** = its highest power
//!   reading in the window (or at its ends, interpolated).
//! - **$ per million output tokens** = hourly cost × GPUs × window hours / output tokens ×
//!   10⁶. The GPU count is `--gpus` (the run's [`RunInfo::gpus`](servelab_records::RunInfo))
//!   when given, else the GPUs the telemetry saw; a warning says when they disagree.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use servelab_records::{GpuReading, GpuScrape};

use crate::warning::Warning;
use crate::Summary;

/// How a GPU's energy over the window was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EnergyMethod {
    /// The increase of the GPU's energy counter.
    Counter,
    /// The integral of its power readings.
    Power,
    /// Some GPUs' by their counter, the others' by their power (the run's total only).
    Mixed,
}

impl EnergyMethod {
    /// Its name in files: `counter`, `power`, `mixed`.
    pub fn name(self) -> &'static str {
        match self {
            EnergyMethod::Counter => "counter",
            EnergyMethod::Power => "power",
            EnergyMethod::Mixed => "mixed",
        }
    }

    /// How it reads in a summary: `energy counter`, `power integrated over time`.
    pub fn words(self) -> &'static str {
        match self {
            EnergyMethod::Counter => "energy counter",
            EnergyMethod::Power => "power integrated over time",
            EnergyMethod::Mixed => "energy counters and integrated power",
        }
    }
}

/// One GPU's figures over the window.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct GpuFigures {
    /// Host and UUID (or index): who it is across scrapes.
    pub id: String,
    /// Its index on its host.
    pub gpu: String,
    /// Its model name, when the source gave it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Energy over the window, J.
    pub energy_j: Option<f64>,
    /// How the energy was found.
    pub energy_method: Option<EnergyMethod>,
    /// Energy / window, W.
    pub mean_w: Option<f64>,
    /// Highest power in the window, W.
    pub peak_w: Option<f64>,
    /// Time-averaged utilisation over the window, %.
    pub mean_util_pct: Option<f64>,
    /// Most frame-buffer memory used in the window, MiB.
    pub peak_fb_used_mib: Option<f64>,
    /// Frame-buffer memory in all (used + free, the last reading), MiB.
    pub fb_total_mib: Option<f64>,
    /// Time-averaged SM clock over the window, MHz.
    pub mean_sm_clock_mhz: Option<f64>,
    /// Time-averaged memory clock over the window, MHz.
    pub mean_mem_clock_mhz: Option<f64>,
    /// The readings its energy came from, `(s since the run origin, value)`: the energy
    /// counter in mJ, or the power in W, as `energy_method` says. Kept by a shard of a sharded
    /// run only, so that the merge finds each GPU's energy over the merged window
    /// ([`merge`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub energy_readings: Vec<(f64, f64)>,
}

/// One point of the GPUs' timeline (a successful scrape).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuPoint {
    /// Seconds since the run origin.
    pub t_s: f64,
    /// Power of every GPU together, W.
    pub watts: Option<f64>,
    /// Mean utilisation of the GPUs, %.
    pub util_pct: Option<f64>,
}

/// A run's GPU energy and cost.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct GpuSummary {
    /// Where the telemetry came from (`nvml`, an exporter's URL); absent for a cost from
    /// `--gpus` and `--gpu-hourly-cost` alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// Scrapes taken, failed ones included.
    pub scrapes: u64,
    /// Scrapes that failed.
    pub failed_scrapes: u64,
    /// Good scrapes inside the window whose readings (any GPU's power or energy) differ from
    /// the good scrape before: how often the source's values moved while the run went on
    /// (dcgm-exporter collects every 30 s unless told otherwise). Fewer than
    /// [`MIN_CHANGED_READINGS`] is a warning.
    #[serde(default)]
    pub changed_readings: u64,
    /// The measured window, s.
    pub window_s: f64,
    /// GPUs the telemetry saw.
    pub gpus_seen: u32,
    /// GPUs the run was told it had (`--gpus`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpus_declared: Option<u32>,
    /// Energy of every GPU over the window, J.
    pub energy_j: Option<f64>,
    /// How it was found.
    pub energy_method: Option<EnergyMethod>,
    /// Energy / output tokens, J/token.
    pub joules_per_output_token: Option<f64>,
    /// The mean of the GPUs' average watts, W.
    pub mean_w_per_gpu: Option<f64>,
    /// The highest any GPU drew, W.
    pub peak_w: Option<f64>,
    /// The mean of the GPUs' time-averaged utilisation, %.
    pub mean_util_pct: Option<f64>,
    /// The price of one GPU hour, USD (`--gpu-hourly-cost`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hourly_cost_usd: Option<f64>,
    /// GPUs the cost counts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_gpus: Option<u32>,
    /// USD per million output tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usd_per_million_output_tokens: Option<f64>,
    /// Each GPU's figures, in host and index order.
    pub per_gpu: Vec<GpuFigures>,
    /// The timeline, one point per successful scrape.
    pub series: Vec<GpuPoint>,
}

/// Readings that must change inside the measured window for its energy to be trusted: with
/// fewer, the source updated less often than every fifth of the window, and the counter read at
/// each end can be off by that much of the run's energy (a warning says so).
pub const MIN_CHANGED_READINGS: u64 = 5;

/// A series' value at `t`: linear between points, held before the first and after the last.
pub fn value_at(points: &[(f64, f64)], t: f64) -> Option<f64> {
    let (first, last) = (points.first()?, points.last()?);
    if t <= first.0 {
        return Some(first.1);
    }
    if t >= last.0 {
        return Some(last.1);
    }
    let i = points.partition_point(|p| p.0 <= t);
    let ((t0, v0), (t1, v1)) = (points[i - 1], points[i]);
    Some(if t1 > t0 { v0 + (v1 - v0) * (t - t0) / (t1 - t0) } else { v1 })
}

/// The integral of [`value_at`] over `[a, b]` (exact: the function is piecewise linear).
pub fn integral(points: &[(f64, f64)], a: f64, b: f64) -> Option<f64> {
    if points.is_empty() || b < a {
        return None;
    }
    let mut cuts = vec![a];
    cuts.extend(points.iter().map(|p| p.0).filter(|&t| t > a && t < b));
    cuts.push(b);
    let mut sum = 0.0;
    for w in cuts.windows(2) {
        sum += (value_at(points, w[0])? + value_at(points, w[1])?) / 2.0 * (w[1] - w[0]);
    }
    Some(sum)
}

/// A counter's readings made monotone: each rise added, and after a fall (the counter began
/// again from zero) its new value.
pub fn accumulated(points: &[(f64, f64)]) -> Vec<(f64, f64)> {
    let mut out = Vec::with_capacity(points.len());
    let mut total = 0.0;
    for (i, &(t, v)) in points.iter().enumerate() {
        if i > 0 {
            let before = points[i - 1].1;
            total += if v >= before { v - before } else { v };
        }
        out.push((t, total));
    }
    out
}

/// The highest value in `[a, b]`: the points inside, and the series at both ends.
fn peak(points: &[(f64, f64)], a: f64, b: f64) -> Option<f64> {
    let inside = points.iter().filter(|p| p.0 >= a && p.0 <= b).map(|p| p.1);
    [value_at(points, a), value_at(points, b)].into_iter().flatten().chain(inside).reduce(f64::max)
}

/// One GPU's figures over `[a, b]` seconds from its readings `(t_s, reading)`.
pub fn gpu_figures(readings: &[(f64, &GpuReading)], a: f64, b: f64) -> GpuFigures {
    let series = |f: fn(&GpuReading) -> Option<f64>| -> Vec<(f64, f64)> {
        readings.iter().filter_map(|(t, r)| f(r).map(|v| (*t, v))).collect()
    };
    let window = b - a;
    let mean = |points: &[(f64, f64)]| {
        if window > 0.0 {
            integral(points, a, b).map(|i| i / window)
        } else {
            value_at(points, a)
        }
    };
    let energy = series(|r| r.energy_mj);
    let power = series(|r| r.power_w);
    let (method, used) = if energy.len() >= 2 {
        (Some(EnergyMethod::Counter), energy)
    } else if !power.is_empty() {
        (Some(EnergyMethod::Power), power.clone())
    } else {
        (None, Vec::new())
    };
    let energy_j = method.and_then(|m| energy_over(&used, m, a, b));
    let last = readings.last().map(|(_, r)| *r);
    GpuFigures {
        id: last.map(|r| r.id()).unwrap_or_default(),
        gpu: last.map(|r| r.gpu.clone()).unwrap_or_default(),
        model: last.and_then(|r| r.model.clone()),
        energy_j,
        energy_method: method,
        mean_w: energy_j.filter(|_| window > 0.0).map(|e| e / window),
        peak_w: peak(&power, a, b),
        mean_util_pct: mean(&series(|r| r.util_pct)),
        peak_fb_used_mib: peak(&series(|r| r.fb_used_mib), a, b),
        fb_total_mib: last.and_then(|r| Some(r.fb_used_mib? + r.fb_free_mib?)),
        mean_sm_clock_mhz: mean(&series(|r| r.sm_clock_mhz)),
        mean_mem_clock_mhz: mean(&series(|r| r.mem_clock_mhz)),
        energy_readings: used,
    }
}

/// A GPU's energy over `[a, b]`, J, from its `readings` as `method` says: the increase of the
/// energy counter (mJ, read at both ends by linear interpolation, a fall being a new start
/// from zero), or the integral of the power (W).
pub fn energy_over(readings: &[(f64, f64)], method: EnergyMethod, a: f64, b: f64) -> Option<f64> {
    match method {
        EnergyMethod::Counter if readings.len() >= 2 => {
            let acc = accumulated(readings);
            value_at(&acc, b).zip(value_at(&acc, a)).map(|(hi, lo)| (hi - lo) / 1e3)
        }
        EnergyMethod::Power => integral(readings, a, b),
        _ => None,
    }
}

/// USD per million output tokens: `hourly × gpus × window hours / tokens × 10⁶` (computed
/// with one division, so round figures stay exact).
pub fn usd_per_million_tokens(hourly: f64, gpus: u32, window_s: f64, tokens: u64) -> Option<f64> {
    (tokens > 0).then(|| hourly * f64::from(gpus) * window_s * 1e6 / (3600.0 * tokens as f64))
}

fn mean(v: impl Iterator<Item = f64>) -> Option<f64> {
    let (n, sum) = v.fold((0usize, 0.0), |(n, s), x| (n + 1, s + x));
    (n > 0).then(|| sum / n as f64)
}

/// What the telemetry, the declared GPU count and the price give over `[a, b]` seconds with
/// `output_tokens`. `None` when there is nothing to say (no scrape, no price).
pub fn summarize(
    scrapes: &[GpuScrape],
    source: Option<&str>,
    (a, b): (f64, f64),
    output_tokens: u64,
    gpus_declared: Option<u32>,
    hourly_cost_usd: Option<f64>,
) -> Option<GpuSummary> {
    if scrapes.is_empty() && hourly_cost_usd.is_none() {
        return None;
    }
    let ok: Vec<&GpuScrape> = scrapes.iter().filter(|s| s.error.is_none()).collect();
    let mut by_gpu: BTreeMap<String, Vec<(f64, &GpuReading)>> = BTreeMap::new();
    for s in &ok {
        for g in &s.gpus {
            by_gpu.entry(g.id()).or_default().push((s.t_ms / 1e3, g));
        }
    }
    let mut per_gpu: Vec<GpuFigures> = by_gpu.values().map(|r| gpu_figures(r, a, b)).collect();
    sort_gpus(&mut per_gpu);
    let window_s = (b - a).max(0.0);
    let moved = |x: &GpuScrape, y: &GpuScrape| {
        x.gpus.len() != y.gpus.len()
            || x.gpus
                .iter()
                .zip(&y.gpus)
                .any(|(p, q)| (p.power_w, p.energy_mj) != (q.power_w, q.energy_mj))
    };
    let inside = |s: &GpuScrape| s.t_ms / 1e3 >= a && s.t_ms / 1e3 <= b;
    let changed_readings =
        ok.windows(2).filter(|w| inside(w[1]) && moved(w[0], w[1])).count() as u64;
    let series = ok
        .iter()
        .map(|s| GpuPoint {
            t_s: s.t_ms / 1e3,
            watts: s.gpus.iter().map(|g| g.power_w).sum::<Option<f64>>(),
            util_pct: mean(s.gpus.iter().filter_map(|g| g.util_pct)),
        })
        .collect();
    let mut g = GpuSummary {
        source: source.map(str::to_string),
        scrapes: scrapes.len() as u64,
        failed_scrapes: (scrapes.len() - ok.len()) as u64,
        changed_readings,
        window_s,
        gpus_declared,
        hourly_cost_usd,
        per_gpu,
        series,
        ..GpuSummary::default()
    };
    totals(&mut g, output_tokens);
    Some(g)
}

/// GPUs in host and index order.
fn sort_gpus(per_gpu: &mut [GpuFigures]) {
    per_gpu.sort_by(|x, y| {
        let n = |g: &GpuFigures| g.gpu.parse::<u64>().unwrap_or(u64::MAX);
        let host = |g: &GpuFigures| g.id.rsplit_once('/').map(|(h, _)| h.to_string());
        (host(x), n(x), &x.id).cmp(&(host(y), n(y), &y.id))
    });
}

/// The run's figures from its GPUs' (`per_gpu`), its window, declared count and price, for
/// `output_tokens`: energy, J/token, watts, utilisation, GPUs seen and the cost.
fn totals(g: &mut GpuSummary, output_tokens: u64) {
    let per_gpu = &g.per_gpu;
    let with_energy = per_gpu.iter().filter(|g| g.energy_j.is_some()).count();
    g.energy_j = (with_energy > 0 && with_energy == per_gpu.len())
        .then(|| per_gpu.iter().filter_map(|g| g.energy_j).sum::<f64>());
    let methods: Vec<EnergyMethod> = per_gpu.iter().filter_map(|g| g.energy_method).collect();
    g.energy_method = match methods.first() {
        Some(m) if methods.iter().all(|x| x == m) => Some(*m),
        Some(_) => Some(EnergyMethod::Mixed),
        None => None,
    };
    g.gpus_seen = per_gpu.len() as u32;
    g.joules_per_output_token =
        g.energy_j.filter(|_| output_tokens > 0).map(|e| e / output_tokens as f64);
    g.mean_w_per_gpu = mean(per_gpu.iter().filter_map(|g| g.mean_w));
    g.peak_w = per_gpu.iter().filter_map(|g| g.peak_w).reduce(f64::max);
    g.mean_util_pct = mean(per_gpu.iter().filter_map(|g| g.mean_util_pct));
    let cost_gpus = g.gpus_declared.or((g.gpus_seen > 0).then_some(g.gpus_seen));
    g.cost_gpus = cost_gpus.filter(|_| g.hourly_cost_usd.is_some());
    g.usd_per_million_output_tokens = g
        .hourly_cost_usd
        .zip(cost_gpus)
        .and_then(|(h, n)| usd_per_million_tokens(h, n, g.window_s, output_tokens));
}

/// The measured window of a summary, seconds since the run origin: from the first measured
/// request's intended send (0 when the records were folded away) for its duration.
pub fn window(s: &Summary) -> (f64, f64) {
    let start = s.requests.iter().map(|r| r.intended_ms).reduce(f64::min).unwrap_or(0.0) / 1e3;
    (start, start + s.duration_s)
}

/// Puts the run's GPU figures into its summary (see the module's definitions), with a warning
/// when scrapes failed, when the declared GPU count is not what the telemetry saw, and when a
/// price has no GPU count to multiply.
pub fn attach(
    summary: &mut Summary,
    scrapes: &[GpuScrape],
    source: Option<&str>,
    hourly_cost_usd: Option<f64>,
) {
    let declared = summary.info.gpus;
    let window = window(summary);
    let tokens = summary.total_output_tokens;
    let Some(mut g) = summarize(scrapes, source, window, tokens, declared, hourly_cost_usd) else {
        return;
    };
    if summary.info.shard.is_none() {
        // Only a shard's merge reads them again.
        g.per_gpu.iter_mut().for_each(|p| p.energy_readings.clear());
    }
    if g.failed_scrapes > 0 {
        let error = scrapes.iter().find_map(|s| s.error.clone()).unwrap_or_default();
        let (failed, total) = (g.failed_scrapes, g.scrapes);
        summary.warnings.push(Warning::GpuScrapesFailed { failed, scrapes: total, error });
    }
    // Readings that hardly moved while the run went on: a source that collects less often than
    // it is read (dcgm-exporter's default, every 30 s), or a run short for the interval, leaves
    // the energy coarse.
    if g.scrapes > g.failed_scrapes && g.changed_readings < MIN_CHANGED_READINGS {
        let (changes, window_s) = (g.changed_readings, g.window_s);
        summary.warnings.push(Warning::GpuReadingsStill { changes, window_s });
    }
    summary.warnings.extend(count_mismatch(declared, g.gpus_seen));
    if hourly_cost_usd.is_some() && g.cost_gpus.is_none() {
        summary.warnings.push(Warning::Note(
            "--gpu-hourly-cost has no GPU count to multiply: give --gpus N or --gpu-metrics".into(),
        ));
    }
    summary.gpu = Some(g);
}

/// A merged run's GPU figures from its shards' (`(shard index, figures)`), over the merged
/// window `[a, b]` seconds with `output_tokens`, and what the merge must say.
///
/// GPU telemetry belongs to the GPUs' hosts, not to the client shards: shards that read the
/// same exporter saw the same GPUs. So a GPU (its host and UUID) is counted once however many
/// shards read it, and shards that read different GPUs add theirs: the merged run's GPUs are
/// the union. A GPU read by several shards takes one shard's readings, those that cover most
/// of the merged window (the lowest shard index among equals), and its energy is found from
/// them over the merged window, as for one run. Its peak, utilisation, clocks and memory are
/// that shard's, over the shard's own window. The cost is recomputed for the merged window and
/// output tokens, counting `gpus_declared` (else the GPUs in the union).
pub fn merge(
    shards: &[(u32, &GpuSummary)],
    (a, b): (f64, f64),
    output_tokens: u64,
    gpus_declared: Option<u32>,
) -> Option<(GpuSummary, Vec<String>)> {
    let mut shards = shards.to_vec();
    shards.sort_by_key(|s| s.0);
    let hourly_cost_usd = shards.iter().find_map(|s| s.1.hourly_cost_usd);
    let mut notes = Vec::new();
    let prices: BTreeSet<String> =
        shards.iter().filter_map(|s| s.1.hourly_cost_usd).map(|h| h.to_string()).collect();
    if prices.len() > 1 {
        let list = prices.into_iter().collect::<Vec<_>>().join(", ");
        notes.push(format!(
            "the shards were given different --gpu-hourly-cost ({list}): the merged cost uses the \
             first shard's"
        ));
    }
    let mut by_id: BTreeMap<&str, Vec<(u32, &GpuFigures)>> = BTreeMap::new();
    for (k, g) in &shards {
        for p in &g.per_gpu {
            by_id.entry(p.id.as_str()).or_default().push((*k, p));
        }
    }
    let covered = |p: &GpuFigures| match (p.energy_readings.first(), p.energy_readings.last()) {
        (Some(first), Some(last)) => b.min(last.0) - a.max(first.0),
        _ => f64::NEG_INFINITY,
    };
    let (mut used, mut shared, mut own_window) = (BTreeSet::new(), 0, Vec::new());
    let mut per_gpu = Vec::new();
    for (id, candidates) in by_id {
        let mut chosen = candidates[0];
        for &c in &candidates[1..] {
            if covered(c.1) > covered(chosen.1) {
                chosen = c;
            }
        }
        shared += usize::from(candidates.len() > 1);
        let mut f = chosen.1.clone();
        match f.energy_method.filter(|_| !f.energy_readings.is_empty()) {
            Some(m) => {
                f.energy_j = energy_over(&f.energy_readings, m, a, b);
                f.mean_w = f.energy_j.filter(|_| b > a).map(|e| e / (b - a));
            }
            None if f.energy_j.is_some() => own_window.push(format!("{id} (shard {})", chosen.0)),
            None => {}
        }
        f.energy_readings.clear();
        used.insert(chosen.0);
        per_gpu.push(f);
    }
    sort_gpus(&mut per_gpu);
    let parts: Vec<&GpuSummary> =
        shards.iter().filter(|s| used.contains(&s.0)).map(|s| s.1).collect();
    if per_gpu.is_empty() && hourly_cost_usd.is_none() {
        return None;
    }
    if shared > 0 {
        notes.push(format!(
            "GPU telemetry: {shared} GPUs were read by more than one shard and are counted once, \
             each from one shard's readings over the merged {:.1} s window",
            (b - a).max(0.0)
        ));
    }
    if parts.len() > 1 {
        notes.push(format!(
            "GPU telemetry: the GPUs of {} shards' sources are summed; the GPUs' power over time \
             is not kept for the merged run",
            parts.len()
        ));
    }
    if !own_window.is_empty() {
        notes.push(format!(
            "GPU telemetry: the energy of {} covers its shard's own window, not the merged one \
             (the shard kept no readings)",
            own_window.join(", ")
        ));
    }
    let sources: BTreeSet<&str> = parts.iter().filter_map(|g| g.source.as_deref()).collect();
    let mut g = GpuSummary {
        source: (!sources.is_empty()).then(|| sources.into_iter().collect::<Vec<_>>().join(", ")),
        scrapes: parts.iter().map(|g| g.scrapes).sum(),
        failed_scrapes: parts.iter().map(|g| g.failed_scrapes).sum(),
        changed_readings: parts.iter().map(|g| g.changed_readings).min().unwrap_or(0),
        window_s: (b - a).max(0.0),
        gpus_declared,
        hourly_cost_usd,
        per_gpu,
        series: match parts.as_slice() {
            [one] => one.series.clone(),
            _ => Vec::new(),
        },
        ..GpuSummary::default()
    };
    totals(&mut g, output_tokens);
    Some((g, notes))
}

/// The warning when the declared GPU count (`--gpus`) is not the GPUs the telemetry saw.
fn count_mismatch(declared: Option<u32>, seen: u32) -> Option<Warning> {
    let declared = declared?;
    (seen > 0 && seen != declared).then_some(Warning::GpuCountMismatch { declared, seen })
}

/// Puts a merged run's GPU figures ([`merge`] of its shards', `(shard index, figures)`) into
/// its summary, over `window` (seconds since the shared origin), with the merge's notes and a
/// warning when the declared GPU count is not the union's.
pub fn attach_merged(summary: &mut Summary, shards: &[(u32, &GpuSummary)], window: (f64, f64)) {
    let (tokens, declared) = (summary.total_output_tokens, summary.info.gpus);
    let Some((g, notes)) = merge(shards, window, tokens, declared) else { return };
    summary.warnings.extend(notes.into_iter().map(Warning::Note));
    summary.warnings.extend(count_mismatch(declared, g.gpus_seen));
    summary.gpu = Some(g);
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A reading of GPU `gpu` on host `h` with power (W) and, if given, the energy counter (mJ).
    fn reading(gpu: &str, power_w: f64, energy_mj: Option<f64>) -> GpuReading {
        GpuReading {
            gpu: gpu.into(),
            uuid: Some(format!("GPU-{gpu}")),
            host: Some("h".into()),
            power_w: Some(power_w),
            energy_mj,
            util_pct: Some(50.0),
            fb_used_mib: Some(1000.0),
            fb_free_mib: Some(80_000.0),
            ..GpuReading::default()
        }
    }

    /// Scrapes 1 s before the origin, inside the window [0, 2] s at 0.5 and 1.5 s, and after
    /// it at 2.5 s. GPU 0 has its energy counter; GPU 1 power only, at twice GPU 0's.
    pub(crate) fn scrapes() -> Vec<GpuScrape> {
        let power = [100.0, 400.0, 300.0, 200.0];
        let energy = [1_000_000.0, 1_300_000.0, 1_700_000.0, 2_000_000.0];
        [-1000.0, 500.0, 1500.0, 2500.0]
            .iter()
            .enumerate()
            .map(|(i, &t_ms)| GpuScrape {
                t_ms,
                gpus: vec![
                    reading("0", power[i], Some(energy[i])),
                    reading("1", power[i] * 2.0, None),
                ],
                error: None,
            })
            .collect()
    }

    #[test]
    fn series_are_linear_between_points_and_held_outside() {
        let p = [(-1.0, 100.0), (0.5, 400.0), (1.5, 300.0), (2.5, 200.0)];
        assert_eq!(value_at(&p, -5.0), Some(100.0));
        assert_eq!(value_at(&p, 0.0), Some(300.0));
        assert_eq!(value_at(&p, 2.0), Some(250.0));
        assert_eq!(value_at(&p, 9.0), Some(200.0));
        assert_eq!(value_at(&[], 0.0), None);
        // (300+400)/2 × 0.5 + (400+300)/2 × 1 + (300+250)/2 × 0.5
        assert_eq!(integral(&p, 0.0, 2.0), Some(175.0 + 350.0 + 137.5));
        // Before the first reading the first is held: 100 W for 2 s.
        assert_eq!(integral(&p, -3.0, -1.0), Some(200.0));
        assert_eq!(integral(&p, 1.0, 0.0), None);
    }

    #[test]
    fn a_counter_that_falls_began_again_from_zero() {
        let acc = accumulated(&[(0.0, 100.0), (1.0, 150.0), (2.0, 20.0), (3.0, 50.0)]);
        assert_eq!(acc, vec![(0.0, 0.0), (1.0, 50.0), (2.0, 70.0), (3.0, 100.0)]);
    }

    #[test]
    fn energy_from_the_counter_difference_and_from_integrated_power() {
        let s = scrapes();
        let of = |gpu: usize| -> Vec<(f64, &GpuReading)> {
            s.iter().map(|x| (x.t_ms / 1e3, &x.gpus[gpu])).collect()
        };
        // The counter read at 0 s: 1.0e6 + 0.3e6 × 1/1.5 = 1.2e6 mJ; at 2 s: 1.85e6 mJ.
        let g0 = gpu_figures(&of(0), 0.0, 2.0);
        assert_eq!((g0.energy_j, g0.energy_method), (Some(650.0), Some(EnergyMethod::Counter)));
        assert_eq!((g0.mean_w, g0.peak_w), (Some(325.0), Some(400.0)));
        assert_eq!((g0.id.as_str(), g0.gpu.as_str()), ("h/GPU-0", "0"));
        assert_eq!((g0.mean_util_pct, g0.peak_fb_used_mib), (Some(50.0), Some(1000.0)));
        assert_eq!(g0.fb_total_mib, Some(81_000.0));
        // Power only: twice GPU 0's power integrated, 2 × 662.5 J.
        let g1 = gpu_figures(&of(1), 0.0, 2.0);
        assert_eq!((g1.energy_j, g1.energy_method), (Some(1325.0), Some(EnergyMethod::Power)));
        assert_eq!((g1.mean_w, g1.peak_w), (Some(662.5), Some(800.0)));
    }

    #[test]
    fn joules_per_token_watts_and_cost_of_a_run() {
        let g = summarize(&scrapes(), Some("nvml"), (0.0, 2.0), 3950, None, Some(2.5)).unwrap();
        assert_eq!((g.scrapes, g.failed_scrapes, g.gpus_seen), (4, 0, 2));
        // Inside [0, 2] s: the readings at 0.5 and 1.5 s, each unlike the one before.
        assert_eq!(g.changed_readings, 2);
        assert_eq!((g.energy_j, g.energy_method), (Some(1975.0), Some(EnergyMethod::Mixed)));
        assert_eq!(g.joules_per_output_token, Some(0.5));
        assert_eq!((g.mean_w_per_gpu, g.peak_w), (Some(493.75), Some(800.0)));
        // 2.5 $/h × 2 GPUs × 2 s / 3950 tokens × 1e6.
        assert_eq!(g.cost_gpus, Some(2));
        assert_eq!(g.usd_per_million_output_tokens, Some(1e7 / (3600.0 * 3950.0)));
        assert_eq!(g.series.len(), 4);
        assert_eq!(g.series[1], GpuPoint { t_s: 0.5, watts: Some(1200.0), util_pct: Some(50.0) });
        // A declared count is what the cost counts.
        let g = summarize(&scrapes(), None, (0.0, 2.0), 3950, Some(8), Some(2.5)).unwrap();
        assert_eq!(g.cost_gpus, Some(8));
        // A price and a count alone give the cost, no energy.
        let g = summarize(&[], None, (0.0, 1800.0), 1_000_000, Some(8), Some(2.0)).unwrap();
        assert_eq!(g.usd_per_million_output_tokens, Some(8.0));
        assert_eq!((g.energy_j, g.joules_per_output_token, g.gpus_seen), (None, None, 0));
        assert_eq!(summarize(&[], None, (0.0, 1.0), 10, Some(8), None), None);
    }

    #[test]
    fn cost_per_million_tokens_is_exact_for_round_figures() {
        assert_eq!(usd_per_million_tokens(2.0, 8, 1800.0, 1_000_000), Some(8.0));
        assert_eq!(usd_per_million_tokens(3.0, 1, 3600.0, 500_000), Some(6.0));
        assert_eq!(usd_per_million_tokens(3.0, 1, 3600.0, 0), None);
    }

    #[test]
    fn attach_warns_of_failed_scrapes_and_a_count_that_disagrees() {
        let info = servelab_records::RunInfo { gpus: Some(4), ..Default::default() };
        let mut summary = crate::summarize(&[], &info, &Default::default());
        summary.total_output_tokens = 3950;
        summary.duration_s = 2.0;
        let mut s = scrapes();
        s.insert(2, GpuScrape { t_ms: 1000.0, gpus: vec![], error: Some("refused".into()) });
        attach(&mut summary, &s, Some("http://h:9400/metrics"), None);
        let w: Vec<String> = summary.warnings.iter().map(|w| w.to_string()).collect();
        assert_eq!(
            w,
            [
                "1 of 5 readings of the GPUs' telemetry failed (first: refused): the energy is \
                 interpolated across the gaps",
                "the GPUs' power and energy readings changed 2 times in the 2.0 s measured \
                 window (at least 5 needed), so the energy figures are coarse: run longer, read \
                 more often (--gpu-metrics-interval), or have the source collect more often \
                 (dcgm-exporter collects every 30 s unless started with -c 1000, or \
                 DCGM_EXPORTER_INTERVAL=1000)",
                "--gpus says 4 GPUs, the GPU telemetry saw 2: the cost counts 4 and the energy \
                 the 2 seen; check which GPUs serve the deployment"
            ]
        );
        let g = summary.gpu.as_ref().unwrap();
        assert_eq!((g.gpus_declared, g.joules_per_output_token), (Some(4), Some(0.5)));
        assert_eq!(g.usd_per_million_output_tokens, None);
        // Readings that never moved (an exporter collecting every 30 s): said.
        let mut summary = crate::summarize(&[], &info, &Default::default());
        summary.duration_s = 2.0;
        let still: Vec<GpuScrape> = (0..4)
            .map(|k| GpuScrape { t_ms: 500.0 * f64::from(k), ..scrapes()[1].clone() })
            .collect();
        attach(&mut summary, &still, None, None);
        assert_eq!(summary.gpu.as_ref().map(|g| g.changed_readings), Some(0));
        assert!(summary.warnings.iter().any(|w| w.to_string().starts_with(
            "the GPUs' power and energy readings changed 0 times in the 2.0 s measured window"
        )));
        // Readings every 0.25 s, each unlike the one before: 9 inside [0, 2] s (0 to 2 s), no
        // warning.
        let mut summary = crate::summarize(&[], &info, &Default::default());
        summary.duration_s = 2.0;
        let moving: Vec<GpuScrape> = (0..12)
            .map(|k| {
                let mut s = scrapes()[1].clone();
                s.t_ms = 250.0 * f64::from(k) - 500.0;
                s.gpus[0].power_w = Some(300.0 + f64::from(k % 2));
                s
            })
            .collect();
        attach(&mut summary, &moving, None, None);
        assert_eq!(summary.gpu.as_ref().map(|g| g.changed_readings), Some(9));
        assert!(!summary.warnings.iter().any(|w| w.to_string().contains("readings changed")));
        // Nothing to say: nothing attached.
        let mut summary = crate::summarize(&[], &info, &Default::default());
        attach(&mut summary, &[], None, None);
        assert_eq!(summary.gpu, None);
    }

    /// The fixture's scrapes with every GPU on host `host`, the first `n` of them.
    pub(crate) fn on_host(host: &str, n: usize) -> Vec<GpuScrape> {
        let mut s = scrapes();
        s.truncate(n);
        s.iter_mut().flat_map(|x| x.gpus.iter_mut()).for_each(|g| g.host = Some(host.into()));
        s
    }

    const URL: &str = "http://h:9400/metrics";

    #[test]
    fn shards_reading_the_same_gpus_count_each_once_over_the_merged_window() {
        // Shard 0 measured [0, 1.8] s and stopped reading at 1.5 s; shard 1 measured
        // [0.2, 2] s and read to 2.5 s. Both read the same two GPUs of host h.
        let s0 = summarize(&on_host("h", 3), Some(URL), (0.0, 1.8), 2000, None, Some(2.5));
        let s1 = summarize(&on_host("h", 4), Some(URL), (0.2, 2.0), 1950, None, Some(2.5));
        let (s0, s1) = (s0.unwrap(), s1.unwrap());
        assert_eq!(s1.per_gpu[0].energy_readings.len(), 4, "a summary keeps the readings");
        let (g, notes) = merge(&[(1, &s1), (0, &s0)], (0.0, 2.0), 3950, None).unwrap();
        // What one run reading those GPUs over [0, 2] s finds (see the test above): 650 J by
        // GPU 0's counter, 1325 J by GPU 1's power, from shard 1's readings, which cover the
        // merged window.
        let one = summarize(&scrapes(), Some(URL), (0.0, 2.0), 3950, None, Some(2.5)).unwrap();
        assert_eq!((g.energy_j, one.energy_j), (Some(1975.0), Some(1975.0)));
        assert_eq!(
            g.per_gpu.iter().map(|p| p.energy_j).collect::<Vec<_>>(),
            [Some(650.0), Some(1325.0)]
        );
        assert_eq!((g.per_gpu[0].mean_w, g.per_gpu[1].mean_w), (Some(325.0), Some(662.5)));
        assert!(g.per_gpu.iter().all(|p| p.energy_readings.is_empty()));
        assert_eq!(
            (g.energy_method, g.joules_per_output_token),
            (Some(EnergyMethod::Mixed), Some(0.5))
        );
        assert_eq!((g.gpus_seen, g.cost_gpus, g.window_s), (2, Some(2), 2.0));
        assert_eq!(g.usd_per_million_output_tokens, Some(1e7 / (3600.0 * 3950.0)));
        assert_eq!(g.usd_per_million_output_tokens, one.usd_per_million_output_tokens);
        // One shard's source: its readings and timeline.
        assert_eq!((g.source.as_deref(), g.scrapes, g.series.len()), (Some(URL), 4, 4));
        assert_eq!(
            notes,
            ["GPU telemetry: 2 GPUs were read by more than one shard and are counted once, \
              each from one shard's readings over the merged 2.0 s window"]
        );
        // Shard 0's readings alone hold the counter and the power after 1.5 s: less energy.
        let (g0, _) = merge(&[(0, &s0)], (0.0, 2.0), 3950, None).unwrap();
        assert!(g0.energy_j.unwrap() < 1975.0, "{g0:?}");
        // Shards whose readings cover the window alike: the lowest index's, same energy.
        let s0 = summarize(&on_host("h", 4), Some(URL), (0.0, 1.8), 2000, None, None).unwrap();
        let (g, _) = merge(&[(1, &s1), (0, &s0)], (0.0, 2.0), 3950, Some(8)).unwrap();
        assert_eq!((g.energy_j, g.scrapes, g.cost_gpus), (Some(1975.0), 4, Some(8)));
        assert_eq!(g.usd_per_million_output_tokens, Some(4e7 / (3600.0 * 3950.0)));
    }

    #[test]
    fn shards_reading_different_gpus_add_them() {
        let a = summarize(
            &on_host("a", 4),
            Some("http://a:9400/metrics"),
            (0.0, 2.0),
            2000,
            None,
            Some(2.5),
        );
        let b = summarize(
            &on_host("b", 4),
            Some("http://b:9400/metrics"),
            (0.0, 1.9),
            1950,
            None,
            Some(2.5),
        );
        let (a, b) = (a.unwrap(), b.unwrap());
        let (g, notes) = merge(&[(0, &a), (1, &b)], (0.0, 2.0), 3950, None).unwrap();
        // Each host's two GPUs over [0, 2] s: 650 + 1325 J, twice.
        assert_eq!(g.energy_j, Some(3950.0));
        assert_eq!(g.joules_per_output_token, Some(1.0));
        let ids: Vec<&str> = g.per_gpu.iter().map(|p| p.id.as_str()).collect();
        assert_eq!(ids, ["a/GPU-0", "a/GPU-1", "b/GPU-0", "b/GPU-1"]);
        // 2.5 $/h × 4 GPUs × 2 s / 3950 tokens × 1e6.
        assert_eq!((g.gpus_seen, g.cost_gpus), (4, Some(4)));
        assert_eq!(g.usd_per_million_output_tokens, Some(2e7 / (3600.0 * 3950.0)));
        assert_eq!(g.source.as_deref(), Some("http://a:9400/metrics, http://b:9400/metrics"));
        assert_eq!((g.scrapes, g.series.len()), (8, 0));
        assert_eq!(
            notes,
            ["GPU telemetry: the GPUs of 2 shards' sources are summed; the GPUs' power over time \
              is not kept for the merged run"]
        );
    }

    #[test]
    fn a_merge_without_readings_or_telemetry_says_what_it_covers() {
        // A shard from before the readings were kept: its own window's energy, said.
        let mut a = summarize(&on_host("a", 4), None, (0.0, 1.0), 2000, None, None).unwrap();
        a.per_gpu.iter_mut().for_each(|p| p.energy_readings.clear());
        let own = a.energy_j;
        let (g, notes) = merge(&[(0, &a)], (0.0, 2.0), 3950, None).unwrap();
        assert_eq!((g.energy_j, g.window_s), (own, 2.0));
        assert_eq!(
            notes,
            ["GPU telemetry: the energy of a/GPU-0 (shard 0), a/GPU-1 (shard 0) covers its \
              shard's own window, not the merged one (the shard kept no readings)"]
        );
        // A price and a count alone: the cost over the merged window.
        let c0 = summarize(&[], None, (0.0, 1700.0), 500_000, Some(8), Some(2.0)).unwrap();
        let c1 = summarize(&[], None, (0.0, 1800.0), 500_000, Some(8), Some(2.0)).unwrap();
        let (g, notes) = merge(&[(0, &c0), (1, &c1)], (0.0, 1800.0), 1_000_000, Some(8)).unwrap();
        assert_eq!((g.usd_per_million_output_tokens, g.energy_j), (Some(8.0), None));
        assert!(notes.is_empty(), "{notes:?}");
        assert_eq!(merge(&[], (0.0, 1.0), 1, None), None);
    }

    #[test]
    fn only_a_shard_keeps_its_gpus_readings() {
        let mut whole = crate::summarize(&[], &Default::default(), &Default::default());
        whole.duration_s = 2.0;
        let mut shard = whole.clone();
        shard.info.shard = Some(servelab_records::ShardInfo {
            shard: servelab_records::Shard::new(0, 2).unwrap(),
            start_at: None,
            clock_offset_ms: None,
            clock_uncertainty_ms: None,
            clock_reference: None,
        });
        attach(&mut whole, &scrapes(), None, None);
        attach(&mut shard, &scrapes(), None, None);
        let kept = |s: &Summary| s.gpu.as_ref().unwrap().per_gpu[0].energy_readings.len();
        assert_eq!((kept(&whole), kept(&shard)), (0, 4));
    }
}
