//! The chart deployments are chosen by, drawn from a computed [`Frontier`]: output
//! tokens/s per GPU against interactivity (output tokens/s per user), every deployment's
//! points in its colour, those off the Pareto front faded, the front a dark staircase, each
//! point labelled by its load; and its table, with the per-GPU and per-user columns.

use servelab_metrics::pareto::{Basis, Frontier, GPUS_UNKNOWN};

use crate::chart::{merge_notes, Chart, Series};
use crate::fmt::{num, MISSING};
use crate::markdown::{Align, Table};

/// The x axis: interactivity, and how it is computed.
pub const X_LABEL: &str = "Interactivity: output tokens/s per user (1000 / mean TPOT)";

/// The y axis for a basis.
pub fn y_label(basis: Basis) -> String {
    match basis {
        Basis::PerGpu => "Output tokens/s per GPU".into(),
        Basis::PerDeployment => format!("Output tokens/s per deployment ({GPUS_UNKNOWN})"),
    }
}

/// The legend entry of the front.
pub const FRONT_LABEL: &str = "Pareto front (points off it faded)";

/// The chart of `f`: one series of markers per deployment with points (labelled by their
/// load, e.g. concurrency; off the front faded), then the front. Both axes are linear, as
/// the public charts draw them (on a log axis the many high-load points crowd the top and
/// squeeze their labels together).
pub fn pareto_chart(f: &Frontier, name: &str, title: &str) -> Chart {
    let mut series: Vec<Series> = Vec::new();
    for (d, dep) in f.deployments.iter().enumerate() {
        let pts: Vec<_> = f.points.iter().filter(|p| p.deployment == d).collect();
        if pts.is_empty() {
            continue;
        }
        let points: Vec<(f64, f64)> =
            pts.iter().map(|p| (p.interactivity, p.throughput(f.basis))).collect();
        let labels: Vec<String> = pts.iter().map(|p| p.label.clone()).collect();
        let notes = merge_notes(&points, &labels);
        let faded = pts.iter().map(|p| !p.on_front).collect();
        series.push(Series { notes, faded, ..Series::points(dep.clone(), points) });
    }
    let path = f.path();
    if !path.is_empty() {
        series.push(Series::front(FRONT_LABEL, path));
    }
    Chart {
        name: name.into(),
        title: title.into(),
        x_label: X_LABEL.into(),
        y_label: y_label(f.basis),
        x_log: None,
        y_log: None,
        series,
        mark: None,
    }
}

/// The table of `f`: one row per placed point, with the deployment (when there are two or
/// more), its load under `load_header`, GPUs, output tokens/s of the deployment, per GPU and
/// per user, and whether it is on the front. Points left out are in [`Frontier::notes`].
pub fn pareto_table(f: &Frontier, load_header: &str) -> Table {
    let many = f.deployments.len() > 1;
    let mut headers: Vec<String> = Vec::new();
    if many {
        headers.push("Deployment".into());
    }
    headers.extend(
        [
            load_header,
            "GPUs",
            "Output tok/s",
            "Output tok/s per GPU",
            "Output tok/s per user",
            "Pareto front",
        ]
        .map(String::from),
    );
    let mut align = vec![Align::Right; headers.len()];
    if many {
        align[0] = Align::Left;
    }
    let last = align.len() - 1;
    align[last] = Align::Center;
    let mut t = Table::new(headers).with_align(&align);
    for p in &f.points {
        let mut row = Vec::new();
        if many {
            row.push(f.deployments.get(p.deployment).cloned().unwrap_or_default());
        }
        row.extend([
            p.label.clone(),
            p.gpus.map_or(MISSING.to_string(), |g| g.to_string()),
            num(Some(p.output_throughput)),
            num(p.per_gpu),
            num(Some(p.interactivity)),
            if p.on_front { "yes" } else { "" }.to_string(),
        ]);
        t.push(row);
    }
    t
}
