//! The five charts of a sweep scenario (throughput, TTFT and TPOT against load, the
//! trade-off curve with the knee marked, and throughput per GPU against interactivity with
//! the Pareto front), built on the one chart model of
//! [`servelab_outputs::chart`] and written as PNG and SVG.

use std::path::{Path, PathBuf};

use servelab_load::Axis;
use servelab_metrics::pareto::{frontier as front_of, FrontInput, FrontSeries, Frontier};
use servelab_metrics::{Metric, MetricKey, Stat};
use servelab_outputs::chart::{merge_notes, render_png, render_svg, spans, Chart, Mark, Series};
use servelab_outputs::file_safe;
use servelab_outputs::pareto::pareto_chart as draw_front;

use crate::error::SweepError;
use crate::result::ScenarioResult;

fn load_axis_label(axis: Axis) -> String {
    match axis {
        Axis::Concurrency => "Concurrency (requests in flight)".into(),
        Axis::Rate => "Request rate (req/s)".into(),
    }
}

fn knee_label(s: &ScenarioResult, x: f64) -> String {
    let unit = match s.axis {
        Axis::Concurrency => "concurrency",
        Axis::Rate => "rate",
    };
    format!("knee: {unit} {x}")
}

/// The points a load axis can place: an all-at-once level (rate inf) has no x; its figures are
/// in the table.
fn drawn(s: &ScenarioResult) -> impl Iterator<Item = &crate::PointResult> {
    s.points.iter().filter(|p| p.load.value().is_finite())
}

fn x_log(s: &ScenarioResult) -> Option<f64> {
    spans(drawn(s).map(|p| p.load.value()), 8.0).then_some(2.0)
}

fn y_log(series: &[Series]) -> Option<f64> {
    spans(series.iter().flat_map(|s| s.points.iter().map(|p| p.1)), 30.0).then_some(10.0)
}

/// Output and total token throughput against load, knee marked.
pub fn throughput_chart(s: &ScenarioResult) -> Chart {
    let pts = |f: fn(&servelab_metrics::Summary) -> f64| {
        drawn(s).map(|p| (p.load.value(), f(&p.summary))).collect()
    };
    let series = vec![
        Series::line("Output tokens/s", pts(|m| m.output_throughput)),
        Series::line("Total tokens/s (input + output)", pts(|m| m.total_token_throughput)),
    ];
    let mark = s.knee.as_ref().filter(|k| k.reason.is_some()).map(|k| Mark {
        x: k.load,
        y: None,
        label: knee_label(s, k.load),
    });
    Chart {
        name: format!("{}-throughput", file_safe(&s.name)),
        title: format!("{}: throughput vs load", s.name),
        x_label: load_axis_label(s.axis),
        y_label: "Throughput (tokens/s)".into(),
        y_log: y_log(&series),
        series,
        x_log: x_log(s),
        mark,
    }
}

fn latency_chart(
    s: &ScenarioResult,
    what: &str,
    pick: fn(&servelab_metrics::Summary) -> &servelab_metrics::Distribution,
) -> Chart {
    let mean = drawn(s).map(|p| (p.load.value(), pick(&p.summary).mean)).collect();
    let p99 = s
        .points
        .iter()
        .filter(|p| p.load.value().is_finite())
        .filter_map(|p| Some((p.load.value(), pick(&p.summary).percentile(99.0)?)))
        .collect();
    let series =
        vec![Series::line(format!("Mean {what}"), mean), Series::line(format!("P99 {what}"), p99)];
    let mark = s.knee.as_ref().filter(|k| k.reason.is_some()).map(|k| Mark {
        x: k.load,
        y: None,
        label: knee_label(s, k.load),
    });
    Chart {
        name: format!("{}-{}", file_safe(&s.name), what.to_ascii_lowercase()),
        title: format!("{}: {what} vs load", s.name),
        x_label: load_axis_label(s.axis),
        y_label: format!("{what} (ms)"),
        y_log: y_log(&series),
        series,
        x_log: x_log(s),
        mark,
    }
}

/// Mean and P99 time to first token against load.
pub fn ttft_chart(s: &ScenarioResult) -> Chart {
    latency_chart(s, "TTFT", |m| &m.ttft_ms)
}

/// Mean and P99 time per output token against load.
pub fn tpot_chart(s: &ScenarioResult) -> Chart {
    latency_chart(s, "TPOT", |m| &m.tpot_ms)
}

/// The trade-off: per-user speed (1000 / mean TPOT, output tokens/s per request) against
/// total token throughput, one point per load, knee marked.
pub fn tradeoff_chart(s: &ScenarioResult) -> Chart {
    let pt = |m: &servelab_metrics::Summary| {
        (m.tpot_ms.mean > 0.0).then(|| (m.total_token_throughput, 1000.0 / m.tpot_ms.mean))
    };
    let (points, notes): (Vec<(f64, f64)>, Vec<String>) =
        drawn(s).filter_map(|p| Some((pt(&p.summary)?, p.load.label()))).unzip();
    let mark = s.knee.as_ref().and_then(|k| {
        let (x, y) = pt(&s.points.get(k.index)?.summary)?;
        Some(Mark { x, y: Some(y), label: knee_label(s, k.load) })
    });
    let label = match s.axis {
        Axis::Concurrency => "Measured points, labelled with their concurrency",
        Axis::Rate => "Measured points, labelled with their request rate (req/s)",
    };
    let notes = merge_notes(&points, &notes);
    let series = vec![Series { notes, ..Series::line(label, points) }];
    Chart {
        name: format!("{}-tradeoff", file_safe(&s.name)),
        title: format!("{}: per-user speed vs total throughput", s.name),
        x_label: "Total throughput (tokens/s)".into(),
        y_label: "Output tokens/s per user (1000 / mean TPOT)".into(),
        x_log: spans(series[0].points.iter().map(|p| p.0), 30.0).then_some(10.0),
        y_log: y_log(&series),
        series,
        mark,
    }
}

/// The name of a sweep's one deployment on its Pareto chart: its points, labelled by load.
fn points_name(axis: Axis) -> &'static str {
    match axis {
        Axis::Concurrency => "Points, labelled with their concurrency",
        Axis::Rate => "Points, labelled with their request rate (req/s)",
    }
}

/// The scenario's grid points as one deployment for the Pareto front: output throughput,
/// mean TPOT and GPU count (`--gpus`, or the prediction's) of each.
pub fn frontier(s: &ScenarioResult) -> Frontier {
    let tpot = MetricKey::stat(Metric::Tpot, Stat::Mean);
    let points = s
        .points
        .iter()
        .map(|p| FrontInput {
            label: p.load.label(),
            output_throughput: Some(p.summary.output_throughput),
            tpot_mean_ms: tpot.value(&p.summary),
            gpus: p.summary.info.gpus,
        })
        .collect();
    front_of(&[FrontSeries { name: points_name(s.axis).into(), points }])
}

/// Output tokens/s per GPU against interactivity (output tokens/s per user), the Pareto
/// front marked and the points off it faded, each point labelled by its load: the chart
/// public hardware comparisons publish (per deployment when no run states `--gpus`).
pub fn pareto_chart(s: &ScenarioResult) -> Chart {
    draw_front(
        &frontier(s),
        &format!("{}-pareto", file_safe(&s.name)),
        &format!("{}: throughput per GPU vs interactivity", s.name),
    )
}

/// The five charts of a scenario.
///
/// None when no level has a place on a load axis (every level sends all its prompts at once,
/// as a scripted suite's cases do): five charts saying "no data" would only be noise; the
/// table has the figures.
pub fn scenario_charts(s: &ScenarioResult) -> Vec<Chart> {
    if !has_charts(s) {
        return Vec::new();
    }
    vec![throughput_chart(s), ttft_chart(s), tpot_chart(s), tradeoff_chart(s), pareto_chart(s)]
}

/// Whether some level of `s` can be drawn against load (a finite concurrency or rate).
pub fn has_charts(s: &ScenarioResult) -> bool {
    drawn(s).next().is_some()
}

/// Write every chart of a scenario as `DIR/<name>.png` and `.svg`.
pub fn write_charts(dir: &Path, s: &ScenarioResult) -> Result<Vec<PathBuf>, SweepError> {
    if !has_charts(s) {
        return Ok(Vec::new());
    }
    std::fs::create_dir_all(dir)
        .map_err(|e| SweepError::Write { path: dir.to_path_buf(), message: e.to_string() })?;
    let mut out = Vec::new();
    for c in scenario_charts(s) {
        let svg = dir.join(format!("{}.svg", c.name));
        let chart = |e: servelab_outputs::chart::ChartError| SweepError::Chart {
            name: e.name,
            message: e.message,
        };
        crate::store::write_atomic(&svg, render_svg(&c).map_err(chart)?.as_bytes())?;
        let png = dir.join(format!("{}.png", c.name));
        render_png(&c, &png).map_err(chart)?;
        out.extend([png, svg]);
    }
    Ok(out)
}
