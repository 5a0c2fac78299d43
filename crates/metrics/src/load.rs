//! Was the load what was asked? Delivered against configured load, and the steady state.
//!
//! A setting (`--request-rate`, `--max-concurrency`) is what the client was told to do; what
//! the server saw is what the client delivered, held back by the client's own lateness or by
//! the server's back-pressure. This module states both, from the request records alone, and
//! trims the run to its steady state: the all-requests figures of a run include the warm-up
//! (in flight still rising) and the drain (the last requests finishing alone), which flatter
//! latency and understate throughput at high load.
//!
//! The load counts **units**: requests, or in a multi-turn run sessions (the cap and the rate
//! count sessions; a session holds its slot from its first turn's send to its last turn's end,
//! think times included). Every time is ms since the run origin; a unit is in flight over
//! `[sent, end)`.
//!
//! **The steady window** `[t_s, t_e]`:
//! * the target in-flight level `L`: the cap `c` with no rate (closed loop, at most the
//!   units the run had); `r × W̄` with a rate `r` and no cap (Little's law, `W̄` the mean of
//!   `end − sent` over units that ended); `min(c, r × W̄)` with both;
//! * `t_s`, the end of the warm-up: the first send at which the in-flight count reaches
//!   `max(1, ⌊L⌋)` (a sweep line, ends before starts at equal times);
//! * `t_e`, the start of the drain: the last send (after it in flight can only fall).
//!
//! It is **reached** when `t_s` exists, at least [`MIN_STEADY_REQUESTS`] requests were sent
//! and ended within `[t_s, t_e]`, the window is at least [`MIN_STEADY_FRACTION`] of the
//! run's span (first send to last end), and in flight did not keep rising through it (the
//! time-weighted mean in flight over its second half exceeds that over its first half by more
//! than `1 + 0.25 ×` the first: a backlog, the server not keeping up with the rate). It is
//! **not defined** with no cap and no rate (all at once), for a ramp (the rate moves by
//! design) and for a trace replay (the trace's rate moves): those runs have no steady level.
//!
//! **Delivered**, over the load span `[t_from, t_to)` (the steady window when reached, else
//! first to last send): the achieved rate, unit sends in it over its length (the send at
//! `t_to`, the last, is left out: with distinct sends it is `(k − 1) / (t_to − t_from)` of
//! the `k` sends from `t_from` to `t_to`), and the time-weighted mean units in flight over it.
//!
//! **Held back**, over the same span: by the client, the send lag `sent − intended` (mean,
//! p99, max) and the mean requests due but not yet sent (time-weighted count of
//! `[intended, sent)`); by the server at a cap with a rate, the slot wait
//! `intended − scheduled` and the mean requests waiting for a slot (time-weighted count of
//! `[scheduled, intended)`); by the server behind a rate, the in-flight growth (second half's
//! mean minus the first's) and the TTFT drift (least-squares slope of TTFT on the intended
//! send time, ms per s).
//!
//! **Steady figures**, over the requests sent at or after `t_s` that ended by `t_e` (each
//! lived wholly under the steady load): their TTFT, TPOT, per-token ITL and E2E latency, and
//! the throughputs over the window: ends in it and output tokens arriving in it, per second.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use servelab_records::{Nanos, RunInfo};

use crate::request::RequestRow;
use crate::stats::Distribution;

/// Fewest requests sent and ended within the steady window for a steady state.
pub const MIN_STEADY_REQUESTS: u64 = 10;
/// Shortest steady window, as a fraction of the run's span, for a steady state.
pub const MIN_STEADY_FRACTION: f64 = 0.1;

/// The backlog rule: in flight kept rising when its time-weighted mean over the second half
/// of a span exceeds `1 + 1.25 ×` that over the first (growth above one unit and a quarter).
pub fn backlog(first_half: f64, second_half: f64) -> bool {
    second_half > first_half + 1.0 + 0.25 * first_half
}
/// What the load counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Unit {
    /// Requests (every run but multi-turn sessions).
    Requests,
    /// Sessions: the cap and the rate of a multi-turn run count sessions.
    Sessions,
}

impl Unit {
    /// `requests`, `sessions`.
    pub fn noun(self) -> &'static str {
        match self {
            Unit::Requests => "requests",
            Unit::Sessions => "sessions",
        }
    }
}

/// Why a run has no steady state by design.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NoSteadyLevel {
    /// No rate and no cap: everything sent at once, in flight only falls after.
    AllAtOnce,
    /// A ramped rate moves by design.
    Ramp,
    /// A trace replay follows the trace's own moving rate.
    Trace,
}

impl NoSteadyLevel {
    /// The reason in words.
    pub fn words(self) -> &'static str {
        match self {
            NoSteadyLevel::AllAtOnce => "all at once (no rate, no cap): in flight only falls",
            NoSteadyLevel::Ramp => "a ramp moves its rate by design",
            NoSteadyLevel::Trace => "a trace replay follows the trace's own rate",
        }
    }
}

/// Why a run that has a steady level did not reach it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "why", rename_all = "snake_case")]
pub enum NotReached {
    /// In flight never reached the target level.
    LevelNotReached {
        /// The level, units in flight.
        level: u64,
        /// The most in flight.
        peak: u64,
    },
    /// The window was too short, or held too few whole requests.
    TooShort {
        /// Requests sent and ended within it.
        requests: u64,
        /// Its length over the run's span.
        fraction: f64,
    },
    /// In flight kept rising through the window: the server fell behind the rate.
    Backlog {
        /// Mean in flight over the window's first half.
        first_half: f64,
        /// Over its second half.
        second_half: f64,
    },
}

/// Whether the run reached a steady state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum Steady {
    /// Reached: the window and the figures over it.
    Reached(Box<SteadyFigures>),
    /// The load has a steady level but the run did not reach it.
    NotReached(NotReached),
    /// The load has no steady level.
    NotDefined {
        /// Why.
        why: NoSteadyLevel,
    },
}

/// Figures over the steady window (see the module doc).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SteadyFigures {
    /// The window's start (warm-up end), ms since the origin.
    pub from_ms: f64,
    /// Its end (drain start), ms.
    pub to_ms: f64,
    /// Its length over the run's span (first send to last end).
    pub fraction: f64,
    /// Requests sent at or after the start and ended by the end.
    pub requests: u64,
    /// Of them, completed.
    pub completed: u64,
    /// Completed requests ending in the window, per second of it.
    pub request_throughput: f64,
    /// Output tokens arriving in the window, per second of it.
    pub output_throughput: f64,
    /// TTFT of the steady requests, ms.
    pub ttft_ms: Distribution,
    /// TPOT, ms.
    pub tpot_ms: Distribution,
    /// Per-token ITL, ms.
    pub itl_ms: Distribution,
    /// E2E latency, ms.
    pub e2el_ms: Distribution,
}

/// A lateness in brief.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Lateness {
    /// Mean, ms.
    pub mean_ms: f64,
    /// 99th percentile (numpy's linear), ms.
    pub p99_ms: f64,
    /// Most, ms.
    pub max_ms: f64,
}

impl Lateness {
    fn of(xs: Vec<f64>) -> Lateness {
        let d = Distribution::from_unsorted(xs, &[99.0]);
        Lateness { mean_ms: d.mean, p99_ms: d.percentile(99.0).unwrap_or(d.max), max_ms: d.max }
    }
}

/// Delivered against configured load, and the steady state (see the module doc).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadSummary {
    /// What the load counts.
    pub unit: Unit,
    /// The configured rate, units per second; `None`: no rate (all at once, or a ramp).
    pub configured_rate: Option<f64>,
    /// The configured cap, units in flight.
    pub configured_concurrency: Option<u64>,
    /// The in-flight level the setting aims at (the cap, or Little's law at the rate).
    pub target_in_flight: Option<f64>,
    /// The load span's start, ms: the steady window's, else the first send.
    pub from_ms: f64,
    /// Its end, ms: the last send.
    pub to_ms: f64,
    /// Unit sends in `[from, to)` per second; `None` for a zero-length span.
    pub delivered_rate: Option<f64>,
    /// Time-weighted mean units in flight over the span (at the span's instant if zero).
    pub delivered_concurrency: f64,
    /// Send lag (`sent − intended`) of the requests sent in the span.
    pub send_lag: Lateness,
    /// Time-weighted mean requests due but not yet sent over the span.
    pub client_backlog: f64,
    /// Slot wait (`intended − scheduled`) of the requests sent in the span, with a cap and
    /// a rate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slot_wait: Option<Lateness>,
    /// Time-weighted mean requests waiting for a slot over the span, with a cap and a rate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slot_queue: Option<f64>,
    /// Mean in flight over the span's first half.
    pub in_flight_first_half: f64,
    /// Mean in flight over the span's second half minus its first half.
    pub in_flight_growth: f64,
    /// Least-squares slope of TTFT on the intended send time over the span's completed
    /// requests, ms per s; `None` under 3 requests or a single send instant.
    pub ttft_drift_ms_per_s: Option<f64>,
    /// The steady state.
    pub steady: Steady,
}

impl LoadSummary {
    /// The steady figures, when the run reached a steady state.
    pub fn steady_figures(&self) -> Option<&SteadyFigures> {
        match &self.steady {
            Steady::Reached(f) => Some(f.as_ref()),
            _ => None,
        }
    }

    /// This run replayed a trace: the steady state is not defined.
    pub fn mark_trace(&mut self) {
        self.steady = Steady::NotDefined { why: NoSteadyLevel::Trace };
    }
}

/// One unit of load: its first send and its last end (`None`: never ended).
#[derive(Debug, Clone, Copy, PartialEq)]
struct LoadUnit {
    sent: f64,
    end: Option<f64>,
}

/// The units of the rows: each request, or each session's turns joined.
fn units(rows: &[RequestRow]) -> (Unit, Vec<LoadUnit>) {
    if !rows.iter().any(|r| r.session.is_some()) {
        let u = rows.iter().map(|r| LoadUnit { sent: r.sent_ms, end: r.end_ms }).collect();
        return (Unit::Requests, u);
    }
    let mut by: BTreeMap<u64, LoadUnit> = BTreeMap::new();
    for r in rows {
        let key = r.session.map_or(u64::MAX - r.index, |s| s.session);
        let u = by.entry(key).or_insert(LoadUnit { sent: r.sent_ms, end: r.end_ms });
        u.sent = u.sent.min(r.sent_ms);
        u.end = match (u.end, r.end_ms) {
            (Some(a), Some(b)) => Some(a.max(b)),
            _ => None,
        };
    }
    (Unit::Sessions, by.into_values().collect())
}

/// Time-weighted mean count of intervals `[a, b)` over `[from, to]`: the summed overlaps
/// over the length; at a zero-length span, the count of intervals holding the instant.
pub fn mean_count(intervals: &[(f64, f64)], from: f64, to: f64) -> f64 {
    if to <= from {
        return intervals.iter().filter(|(a, b)| *a <= from && from < *b).count() as f64;
    }
    let busy: f64 = intervals.iter().map(|&(a, b)| (b.min(to) - a.max(from)).max(0.0)).sum();
    busy / (to - from)
}

/// The first start at which the count of intervals `[a, b)` reaches `level` (ends before
/// starts at equal times), and the most at once.
pub fn first_reaching(intervals: &[(f64, f64)], level: u64) -> (Option<f64>, u64) {
    let mut events: Vec<(f64, i64)> = Vec::with_capacity(intervals.len() * 2);
    for &(a, b) in intervals.iter().filter(|(a, b)| b > a) {
        events.push((a, 1));
        events.push((b, -1));
    }
    events.sort_by(|x, y| x.0.total_cmp(&y.0).then(x.1.cmp(&y.1)));
    let (mut now, mut peak, mut at) = (0i64, 0i64, None);
    for (t, d) in events {
        now += d;
        peak = peak.max(now);
        if at.is_none() && now >= i64::try_from(level).unwrap_or(i64::MAX) {
            at = Some(t);
        }
    }
    (at, peak as u64)
}

/// Least-squares slope of `y` on `x`; `None` under 3 points or with every `x` equal.
pub fn slope(points: &[(f64, f64)]) -> Option<f64> {
    if points.len() < 3 {
        return None;
    }
    let n = points.len() as f64;
    let mx = points.iter().map(|p| p.0).sum::<f64>() / n;
    let my = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    (sxx > 0.0).then(|| sxy / sxx)
}

/// The run's events the steady figures need besides its rows.
#[derive(Debug, Clone, Copy, Default)]
pub struct Events<'a> {
    /// (arrival ns, tokens) of completed requests' chunks.
    pub tokens: &'a [(Nanos, u64)],
    /// (request index, per-token ITL ms) of completed requests.
    pub itl_ms: &'a [(u64, f64)],
}

/// Delivered against configured load and the steady state of a run's measured `rows` (see
/// the module doc); `None` when no request was sent. A shard's own run is judged against its
/// share of the load: `1/N` of the rate and its part of the cap.
pub fn summarize(
    rows: &[RequestRow],
    events: Events<'_>,
    info: &RunInfo,
    percentiles: &[f64],
) -> Option<LoadSummary> {
    let (unit, units) = units(rows);
    let first_send = units.iter().map(|u| u.sent).min_by(f64::total_cmp)?;
    let last_send = units.iter().map(|u| u.sent).max_by(f64::total_cmp)?;
    let last_end = units.iter().filter_map(|u| u.end).max_by(f64::total_cmp).unwrap_or(last_send);
    let spans: Vec<(f64, f64)> = units.iter().filter_map(|u| Some((u.sent, u.end?))).collect();
    // A shard of a larger run sends every N-th arrival under its share of the global cap
    // (docs/scale.md); the merged run (no shard) has the whole load.
    let shard = info.shard.as_ref().map(|s| s.shard).filter(|s| !s.is_whole());
    let rate = if info.ramp.is_some() { None } else { info.load.request_rate };
    let rate = rate.map(|r| shard.map_or(r, |s| r / f64::from(s.count)));
    let cap = info.load.max_concurrency.map(|c| {
        shard.map_or(c, |s| s.share_of_cap(usize::try_from(c).unwrap_or(usize::MAX)) as u64)
    });
    let w_bar_s = if spans.is_empty() {
        0.0
    } else {
        spans.iter().map(|(a, b)| b - a).sum::<f64>() / spans.len() as f64 / 1e3
    };
    let target = match (cap, rate) {
        (Some(c), None) => Some(c.min(units.len() as u64) as f64),
        (None, Some(r)) => Some(r * w_bar_s),
        (Some(c), Some(r)) => Some((c as f64).min(r * w_bar_s)),
        (None, None) => None,
    };
    let no_level = if info.ramp.is_some() {
        Some(NoSteadyLevel::Ramp)
    } else if target.is_none() {
        Some(NoSteadyLevel::AllAtOnce)
    } else {
        None
    };

    let halves = |from: f64, to: f64| {
        let mid = from + (to - from) / 2.0;
        (mean_count(&spans, from, mid), mean_count(&spans, mid, to))
    };
    let steady = match (no_level, target) {
        (Some(why), _) => Steady::NotDefined { why },
        (None, Some(l)) => {
            let level = (l.floor() as u64).max(1);
            match first_reaching(&spans, level) {
                (None, peak) => Steady::NotReached(NotReached::LevelNotReached { level, peak }),
                (Some(t_s), _) => steady_over(
                    rows,
                    events,
                    t_s,
                    last_send,
                    last_end - first_send,
                    percentiles,
                    halves,
                ),
            }
        }
        (None, None) => Steady::NotDefined { why: NoSteadyLevel::AllAtOnce },
    };
    let (from, to) = match &steady {
        Steady::Reached(f) => (f.from_ms, f.to_ms),
        _ => (first_send, last_send),
    };

    let sends = units.iter().filter(|u| from <= u.sent && u.sent < to).count();
    let delivered_rate = (to > from).then(|| sends as f64 / ((to - from) / 1e3));
    let in_span: Vec<&RequestRow> =
        rows.iter().filter(|r| from <= r.sent_ms && r.sent_ms <= to).collect();
    let due: Vec<(f64, f64)> = rows.iter().map(|r| (r.intended_ms, r.sent_ms)).collect();
    let waiting: Vec<(f64, f64)> = rows.iter().map(|r| (r.scheduled_ms, r.intended_ms)).collect();
    let with_cap_and_rate = cap.is_some() && rate.is_some();
    let (first_half, second_half) = halves(from, to);
    let drift: Vec<(f64, f64)> = in_span
        .iter()
        .filter(|r| r.is_success())
        .filter_map(|r| Some((r.intended_ms / 1e3, r.ttft_ms?)))
        .collect();
    Some(LoadSummary {
        unit,
        configured_rate: rate,
        configured_concurrency: cap,
        target_in_flight: target,
        from_ms: from,
        to_ms: to,
        delivered_rate,
        delivered_concurrency: mean_count(&spans, from, to),
        send_lag: Lateness::of(in_span.iter().map(|r| r.schedule_lag_ms).collect()),
        client_backlog: mean_count(&due, from, to),
        slot_wait: with_cap_and_rate
            .then(|| Lateness::of(in_span.iter().map(|r| r.client_queue_ms).collect())),
        slot_queue: with_cap_and_rate.then(|| mean_count(&waiting, from, to)),
        in_flight_first_half: first_half,
        in_flight_growth: second_half - first_half,
        ttft_drift_ms_per_s: slope(&drift),
        steady,
    })
}

/// True when request `r` was sent at or after `from` and ended by `to` (ms): it lived wholly
/// within the window. [`SteadyFigures::holds`] asks it of a steady window.
pub fn whole_within(r: &RequestRow, from: f64, to: f64) -> bool {
    from <= r.sent_ms && r.end_ms.is_some_and(|e| e <= to)
}

impl SteadyFigures {
    /// True when request `r` is one of the steady requests (sent at or after the window's
    /// start, ended by its end); the steady latencies are over those that completed.
    pub fn holds(&self, r: &RequestRow) -> bool {
        whole_within(r, self.from_ms, self.to_ms)
    }

    /// The steady latency distributions in report order, named as [`STEADY_LATENCIES`].
    pub fn distributions(&self) -> [(&'static str, &Distribution); 4] {
        let [ttft, tpot, itl, e2el] = STEADY_LATENCIES;
        [(ttft, &self.ttft_ms), (tpot, &self.tpot_ms), (itl, &self.itl_ms), (e2el, &self.e2el_ms)]
    }
}

/// The names of the steady latency distributions, in report order.
pub const STEADY_LATENCIES: [&str; 4] = ["ttft", "tpot", "itl", "e2el"];

/// The steady state over `[t_s, t_e]` of a run whose span is `run_ms`, with `halves` the
/// mean in flight over a window's two halves.
fn steady_over(
    rows: &[RequestRow],
    events: Events<'_>,
    t_s: f64,
    t_e: f64,
    run_ms: f64,
    percentiles: &[f64],
    halves: impl Fn(f64, f64) -> (f64, f64),
) -> Steady {
    let whole: Vec<&RequestRow> = rows.iter().filter(|r| whole_within(r, t_s, t_e)).collect();
    let len = t_e - t_s;
    let fraction = if run_ms > 0.0 { len / run_ms } else { 0.0 };
    let requests = whole.len() as u64;
    if len <= 0.0 || requests < MIN_STEADY_REQUESTS || fraction < MIN_STEADY_FRACTION {
        return Steady::NotReached(NotReached::TooShort { requests, fraction });
    }
    let (first_half, second_half) = halves(t_s, t_e);
    if backlog(first_half, second_half) {
        return Steady::NotReached(NotReached::Backlog { first_half, second_half });
    }
    let ok: Vec<&RequestRow> = whole.iter().copied().filter(|r| r.is_success()).collect();
    let per_s = |x: f64| x / (len / 1e3);
    let ends = rows
        .iter()
        .filter(|r| r.is_success() && r.end_ms.is_some_and(|e| t_s <= e && e <= t_e))
        .count();
    let (s_ns, e_ns) = ((t_s * 1e6).round() as u64, (t_e * 1e6).round() as u64);
    let tokens: u64 = events
        .tokens
        .iter()
        .filter(|(t, _)| s_ns <= *t && *t < e_ns)
        .fold(0u64, |a, (_, k)| a.saturating_add(*k));
    // One hashed look-up per sample: there may be millions of per-token samples.
    let steady: std::collections::HashSet<u64> = ok.iter().map(|r| r.index).collect();
    let is_steady = |i: u64| steady.contains(&i);
    let itl: Vec<f64> =
        events.itl_ms.iter().filter(|(i, _)| is_steady(*i)).map(|(_, v)| *v).collect();
    let dist = |f: &dyn Fn(&RequestRow) -> Option<f64>| {
        Distribution::from_unsorted(ok.iter().filter_map(|r| f(r)).collect(), percentiles)
    };
    Steady::Reached(Box::new(SteadyFigures {
        from_ms: t_s,
        to_ms: t_e,
        fraction,
        requests,
        completed: ok.len() as u64,
        request_throughput: per_s(ends as f64),
        output_throughput: per_s(tokens as f64),
        ttft_ms: dist(&|r| r.ttft_ms),
        tpot_ms: dist(&|r| r.tpot_ms),
        itl_ms: Distribution::from_unsorted(itl, percentiles),
        e2el_ms: dist(&|r| r.e2el_ms),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::tests::{content, record};
    use crate::{summarize as summarize_run, MetricsConfig, Summary};
    use servelab_records::{LoadSpec, Ramp, RampStrategy, RequestRecord, SessionTurn};

    const MS: u64 = 1_000_000;

    /// Equal within 1e-9 relative: sums of interval overlaps round differently by an ulp.
    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-9 * b.abs().max(1.0)
    }

    /// A request scheduled at `scheduled`, due at `intended`, sent at `sent`, with a token at
    /// `sent + 20`, `sent + 60` and `sent + len` (its end), all ms.
    fn req(index: u64, scheduled: u64, intended: u64, sent: u64, len: u64) -> RequestRecord {
        let chunks = vec![content(sent + 20, 1), content(sent + 60, 1), content(sent + len, 1)];
        let mut r = record(index, intended, sent + len, chunks);
        r.scheduled_ns = scheduled * MS;
        r.sent_ns = sent * MS;
        r
    }

    fn info(rate: Option<f64>, cap: Option<u64>) -> RunInfo {
        RunInfo {
            load: LoadSpec { request_rate: rate, max_concurrency: cap, ..LoadSpec::default() },
            ..RunInfo::default()
        }
    }

    fn run(records: &[RequestRecord], info: &RunInfo) -> Summary {
        summarize_run(records, info, &MetricsConfig::default())
    }

    /// Two slots, each request 100 ms long and sent 1 ms after its slot freed: request `k` of
    /// a slot is due at `101 k`, sent at `101 k + 1`, ends at `101 (k + 1)`.
    fn closed_loop(per_slot: u64) -> Vec<RequestRecord> {
        let mut v = Vec::new();
        for k in 0..per_slot {
            for slot in 0..2 {
                v.push(req(2 * k + slot, 0, 101 * k, 101 * k + 1, 100));
            }
        }
        v
    }

    #[test]
    fn interval_helpers_are_exact() {
        let iv = [(0.0, 10.0), (5.0, 15.0), (10.0, 20.0)];
        // Busy 10 + 10 + 10 over [0, 20]; over [5, 10] two in flight throughout.
        assert_eq!(mean_count(&iv, 0.0, 20.0), 1.5);
        assert_eq!(mean_count(&iv, 5.0, 10.0), 2.0);
        // At an instant: [0, 10) and [5, 15) hold 7.
        assert_eq!(mean_count(&iv, 7.0, 7.0), 2.0);
        // 2 at 5; at 10 one ends as one starts (ends first), so never 3.
        assert_eq!(first_reaching(&iv, 2), (Some(5.0), 2));
        assert_eq!(first_reaching(&iv, 3), (None, 2));
        assert_eq!(slope(&[(0.0, 1.0), (1.0, 3.0), (2.0, 5.0)]), Some(2.0));
        assert_eq!(slope(&[(1.0, 1.0), (1.0, 3.0), (1.0, 5.0)]), None);
        assert_eq!(slope(&[(0.0, 1.0), (1.0, 3.0)]), None);
    }

    #[test]
    fn a_closed_loop_delivers_its_cap_less_the_clients_turnaround() {
        let s = run(&closed_loop(12), &info(None, Some(2)));
        let l = s.load.clone().unwrap();
        assert_eq!(
            (l.unit, l.configured_rate, l.configured_concurrency),
            (Unit::Requests, None, Some(2))
        );
        assert_eq!(l.target_in_flight, Some(2.0));
        // Warm-up ends at the first send (both slots at 1 ms), drain starts at the last (1112).
        assert_eq!((l.from_ms, l.to_ms), (1.0, 1112.0));
        // 22 sends in [1, 1112): 19.8 /s, where the slots alone would give 20.
        assert_eq!(l.delivered_rate, Some(22.0 / 1.111));
        // Each slot busy 11 × 100 ms of 1111: the 1 ms turnaround is the shortfall.
        assert!(close(l.delivered_concurrency, 2200.0 / 1111.0));
        assert!(close(l.client_backlog, 22.0 / 1111.0));
        assert!(close(l.delivered_concurrency + l.client_backlog, 2.0));
        assert_eq!(l.send_lag, Lateness { mean_ms: 1.0, p99_ms: 1.0, max_ms: 1.0 });
        assert_eq!((l.slot_wait, l.slot_queue), (None, None));
        // Halves of [1, 1112]: 5 and 6 turnarounds of 1 ms per slot.
        assert!(close(l.in_flight_growth, 1099.0 / 555.5 - 1101.0 / 555.5));
        assert_eq!(l.ttft_drift_ms_per_s, Some(0.0));
        let f = l.steady_figures().unwrap();
        assert_eq!((f.from_ms, f.to_ms, f.requests, f.completed), (1.0, 1112.0, 22, 22));
        assert_eq!(f.fraction, 1111.0 / 1211.0);
        assert_eq!(f.request_throughput, 22.0 / 1.111);
        assert_eq!(f.output_throughput, 66.0 / 1.111);
        // TTFT 20 + 1 ms of lag, TPOT (101 − 21) / 2, E2E 101.
        assert_eq!((f.ttft_ms.mean, f.tpot_ms.mean, f.e2el_ms.mean), (21.0, 40.0, 101.0));
        assert_eq!((f.itl_ms.count, f.itl_ms.mean), (44, 40.0));
        assert!(!s.warnings.iter().any(|w| w.starts_with("no steady state")));
        // The metric keys read them.
        let key = |k: &str| crate::MetricKey::parse(k).unwrap().value(&s);
        assert_eq!(key("steady_ttft_p99"), Some(21.0));
        assert_eq!(key("delivered_rate"), Some(22.0 / 1.111));
        assert_eq!(key("steady_output_throughput"), Some(66.0 / 1.111));
    }

    #[test]
    fn a_rate_under_a_cap_is_held_back_by_the_slot_wait() {
        // 10 /s under a cap of 1, each request 150 ms: request k is due at 100 k, its slot
        // frees at 151 k, it is sent at 151 k + 1 and ends at 151 (k + 1).
        let recs: Vec<RequestRecord> =
            (0..30).map(|k| req(k, 100 * k, 151 * k, 151 * k + 1, 150)).collect();
        let l = run(&recs, &info(Some(10.0), Some(1))).load.unwrap();
        // min(1, 10 /s × 150 ms).
        assert_eq!(l.target_in_flight, Some(1.0));
        assert_eq!((l.from_ms, l.to_ms), (1.0, 4380.0));
        assert_eq!(l.delivered_rate, Some(29.0 / 4.379));
        assert!(close(l.delivered_concurrency, 4350.0 / 4379.0));
        // Waits 51 k ms, k = 0..29: mean 739.5, p99 at rank 28.71, max 1479.
        let w = l.slot_wait.unwrap();
        assert_eq!((w.mean_ms, w.max_ms), (739.5, 1479.0));
        assert!(close(w.p99_ms, 51.0 * 28.71));
        assert!(close(l.slot_queue.unwrap(), 22185.0 / 4379.0));
        assert!(close(l.client_backlog, 29.0 / 4379.0));
        let f = l.steady_figures().unwrap();
        assert_eq!((f.requests, f.fraction), (29, 4379.0 / 4529.0));
        // TTFT counts from the intended send (the freed slot): 21 ms.
        assert_eq!(f.ttft_ms.mean, 21.0);
    }

    #[test]
    fn a_rate_whose_level_is_never_reached_warns() {
        // 10 /s, 40 requests that all end at 10 s: W̄ = 8049 ms, so L = 80.49 but at most 40.
        let recs: Vec<RequestRecord> =
            (0..40).map(|k| req(k, 100 * k, 100 * k, 100 * k + 1, 10_000 - 100 * k - 1)).collect();
        let s = run(&recs, &info(Some(10.0), None));
        let l = s.load.clone().unwrap();
        assert!(close(l.target_in_flight.unwrap(), 80.49));
        assert_eq!(
            l.steady,
            Steady::NotReached(NotReached::LevelNotReached { level: 80, peak: 40 })
        );
        // Over the send span [1, 3901): 39 sends in 3.9 s.
        assert_eq!((l.from_ms, l.to_ms, l.delivered_rate), (1.0, 3901.0, Some(10.0)));
        let w = s.warnings.iter().find(|w| w.starts_with("no steady state")).unwrap();
        assert!(
            w.contains("requests in flight never reached the target level of 80 (at most 40)"),
            "{w}"
        );
        // Halves of [1, 3901]: 20,000 and 58,000 request-ms over 1,950 ms each.
        assert!(close(l.in_flight_growth, 38000.0 / 1950.0));
        assert!(
            w.contains(". In flight rose by 19.5 requests from the first half of the sends"),
            "{w}"
        );
        assert!(w.contains("TTFT drift 0.0 ms/s: the server fell behind the rate"), "{w}");
    }

    #[test]
    fn a_short_run_has_no_steady_state() {
        // 3 requests per slot: 2 whole requests per slot in [1, 203].
        let s = run(&closed_loop(3), &info(None, Some(2)));
        let l = s.load.unwrap();
        assert_eq!(
            l.steady,
            Steady::NotReached(NotReached::TooShort { requests: 4, fraction: 202.0 / 302.0 })
        );
        assert_eq!(
            s.warnings.iter().find(|w| w.starts_with("no steady state")).unwrap().sentence(),
            "no steady state: the steady window held 4 requests whole over 67% of the run (at \
             least 10 and 10% needed), so the figures are mostly the warm-up's and the drain's; \
             send more requests (--num-prompts) or run longer (--duration)"
        );
    }

    #[test]
    fn a_rising_backlog_is_no_steady_state() {
        // 10 /s; requests 0..99 take 1 s, then each 40 ms longer than the one before: in
        // flight reaches ⌊10 /s × 1990 ms⌋ = 19 at request 139 and rises to 36.
        let len = |k: u64| if k < 100 { 1000 } else { 1000 + 40 * (k - 100) };
        let recs: Vec<RequestRecord> =
            (0..200).map(|k| req(k, 100 * k, 100 * k, 100 * k + 1, len(k))).collect();
        let l = run(&recs, &info(Some(10.0), None)).load.unwrap();
        let spans: Vec<(f64, f64)> =
            (0..200).map(|k| ((100 * k + 1) as f64, (100 * k + 1 + len(k)) as f64)).collect();
        let (first, second) =
            (mean_count(&spans, 13901.0, 16901.0), mean_count(&spans, 16901.0, 19901.0));
        assert!(second > 1.25 * first + 1.0);
        assert_eq!(
            l.steady,
            Steady::NotReached(NotReached::Backlog { first_half: first, second_half: second })
        );
        // TTFT is 21 ms throughout here: the backlog shows in flight, not (yet) in TTFT.
        assert_eq!(l.ttft_drift_ms_per_s, Some(0.0));
        assert!(l.in_flight_growth > 0.0);
    }

    #[test]
    fn a_shard_is_judged_against_its_share_of_the_load() {
        // Shard 1 of 2 of a run capped at 5 in all: 2 slots, as `closed_loop` has.
        let mut i = info(Some(30.0), Some(5));
        i.shard = Some(servelab_records::ShardInfo {
            shard: servelab_records::Shard::new(1, 2).unwrap(),
            start_at: None,
            clock_offset_ms: None,
            clock_uncertainty_ms: None,
            clock_reference: None,
        });
        let l = run(&closed_loop(12), &i).load.unwrap();
        assert_eq!((l.configured_rate, l.configured_concurrency), (Some(15.0), Some(2)));
    }

    #[test]
    fn loads_without_a_steady_level_say_why() {
        let recs = closed_loop(12);
        let l = run(&recs, &info(None, None)).load.unwrap();
        assert_eq!(l.steady, Steady::NotDefined { why: NoSteadyLevel::AllAtOnce });
        let mut ramp = info(None, None);
        ramp.ramp = Some(Ramp { strategy: RampStrategy::Linear, start_rps: 1.0, end_rps: 9.0 });
        let s = run(&recs, &ramp);
        assert_eq!(s.load.unwrap().steady, Steady::NotDefined { why: NoSteadyLevel::Ramp });
        assert!(!s.warnings.iter().any(|w| w.starts_with("no steady state")));
        assert_eq!(run(&[], &info(None, Some(2))).load, None);
    }

    #[test]
    fn sessions_count_as_the_units_of_load() {
        // One session slot; each session: turn 0 sent at 27 s + 1 (10 ms), a 5 ms think time,
        // turn 1 due 5 ms after turn 0 ended and sent 1 ms later (10 ms): 26 ms in flight.
        let mut recs = Vec::new();
        for s in 0..12u64 {
            let at = 27 * s;
            let mut t0 = req(2 * s, 0, at, at + 1, 10);
            let mut t1 = req(2 * s + 1, at + 16, at + 16, at + 17, 10);
            t0.session = Some(SessionTurn { session: s, turn: 0 });
            t1.session = Some(SessionTurn { session: s, turn: 1 });
            recs.extend([t0, t1]);
        }
        let l = run(&recs, &info(None, Some(1))).load.unwrap();
        assert_eq!((l.unit, l.from_ms, l.to_ms), (Unit::Sessions, 1.0, 298.0));
        assert_eq!(l.delivered_rate, Some(11.0 / 0.297));
        assert!(close(l.delivered_concurrency, 286.0 / 297.0));
        let f = l.steady_figures().unwrap();
        assert_eq!((f.requests, f.fraction), (22, 297.0 / 323.0));
    }
}
