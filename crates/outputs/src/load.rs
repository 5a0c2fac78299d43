//! Delivered against configured load, and the steady state, as rows of figures: the terminal
//! block (`text`) and the Markdown summary (`markdown`) lay out the same rows. Every figure is defined in
//! `servelab_metrics::load` and docs/metrics.md ("Delivered load and steady state").

use servelab_metrics::load::{LoadSummary, Steady};
use servelab_metrics::{Distribution, Summary};
use servelab_records::RunInfo;

use crate::fmt::{f2, num, MISSING};

/// `mean / p99 / max`, two decimals each.
fn three(l: &servelab_metrics::load::Lateness) -> String {
    format!("{} / {} / {}", f2(l.mean_ms), f2(l.p99_ms), f2(l.max_ms))
}

/// The configured rate in words: a number, a ramp, or none.
fn configured_rate(l: &LoadSummary, info: &RunInfo) -> String {
    match (l.configured_rate, info.ramp) {
        (Some(r), _) => f2(r),
        (None, Some(r)) => format!("ramp {}→{}", r.start_rps, r.end_rps),
        (None, None) if l.configured_concurrency.is_some() => "none (closed loop)".into(),
        (None, None) => "all at once".into(),
    }
}

/// Whether the steady state was reached, in words.
pub fn steady_words(l: &LoadSummary) -> String {
    match &l.steady {
        Steady::Reached(f) => format!(
            "{} to {} ms ({:.0}% of the run)",
            f2(f.from_ms),
            f2(f.to_ms),
            f.fraction * 100.0,
        ),
        Steady::NotDefined { why } => format!("none by design: {}", why.words()),
        Steady::NotReached(_) => "not reached (see the warnings)".into(),
    }
}

/// Delivered against configured load, and what held it back: one `(label, value)` per
/// figure (configured, delivered, then the client's and the server's hold on it).
pub fn load_rows(s: &Summary) -> Vec<(String, String)> {
    let Some(l) = s.load.as_ref() else { return Vec::new() };
    let unit = l.unit.noun();
    let span = if l.steady_figures().is_some() { "steady window" } else { "first to last send" };
    let mut rows = vec![
        ("Load span (ms)".to_string(), format!("{} to {} ({span})", f2(l.from_ms), f2(l.to_ms))),
        (format!("Configured rate ({unit}/s)"), configured_rate(l, &s.info)),
        (format!("Delivered rate ({unit}/s)"), num(l.delivered_rate)),
        (
            format!("Configured cap / target ({unit})"),
            format!(
                "{} / {}",
                l.configured_concurrency.map_or(MISSING.into(), |c| c.to_string()),
                num(l.target_in_flight)
            ),
        ),
        (format!("Delivered in flight ({unit})"), f2(l.delivered_concurrency)),
        ("Send lag mean/p99/max (ms)".into(), three(&l.send_lag)),
        ("Due, not yet sent (mean)".into(), f2(l.client_backlog)),
    ];
    if let (Some(w), Some(q)) = (&l.slot_wait, l.slot_queue) {
        rows.push(("Slot wait mean/p99/max (ms)".into(), three(w)));
        rows.push(("Waiting for a slot (mean)".into(), f2(q)));
    }
    rows.push((format!("In-flight growth ({unit})"), f2(l.in_flight_growth)));
    rows.push(("TTFT drift (ms/s)".into(), num(l.ttft_drift_ms_per_s)));
    rows.push(("Steady state".into(), steady_words(l)));
    rows
}

/// The steady figures beside the all-requests ones, `(label, steady, all)`; empty without a
/// steady state.
pub fn steady_rows(s: &Summary) -> Vec<(String, String, String)> {
    let Some(f) = s.load.as_ref().and_then(|l| l.steady_figures()) else { return Vec::new() };
    let mut rows = vec![
        ("Requests".to_string(), f.requests.to_string(), s.requests.len().to_string()),
        ("Request throughput (req/s)".into(), f2(f.request_throughput), f2(s.request_throughput)),
        ("Output throughput (tok/s)".into(), f2(f.output_throughput), f2(s.output_throughput)),
    ];
    let p99 = |d: &Distribution| num(d.percentile(99.0));
    let all = [&s.ttft_ms, &s.tpot_ms, &s.itl_ms, &s.e2el_ms];
    for ((name, steady), all) in f.distributions().into_iter().zip(all) {
        let name = name.to_uppercase();
        rows.push((format!("Mean {name} (ms)"), f2(steady.mean), f2(all.mean)));
        if steady.percentile(99.0).is_some() {
            rows.push((format!("P99 {name} (ms)"), p99(steady), p99(all)));
        }
    }
    rows
}
