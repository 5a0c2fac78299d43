//! Deployments side by side, one scenario at a time: the runs of each deployment (a label, a
//! sweep, a result file) grouped by workload (sweep scenario and dataset) and, within it, by
//! level (concurrency and prompts). One table and one set of overlaid charts per scenario;
//! two scenarios are never in one table or on one chart.

use servelab_metrics::pareto::{frontier, FrontInput, FrontSeries, Frontier};
use servelab_metrics::{Metric, MetricKey, Stat};
use servelab_outputs::chart::{spans, Chart, Series};
use servelab_outputs::fmt::{num, MISSING};
use servelab_outputs::pareto::pareto_chart as draw_front;
use servelab_outputs::{file_safe, Align, Table};
use servelab_records::{LoadSpec, PUBLISHED_COLUMNS};

use crate::compare::{best_index, rejected, CompareOptions};
use crate::data::{RunData, Subject, SCENARIO_TAG};
use crate::rank::point_value;

/// The metrics of a deployment table and its charts, in column order.
pub const DEPLOY_METRICS: [MetricKey; 3] = [
    MetricKey::of(Metric::OutputThroughput),
    MetricKey::stat(Metric::Ttft, Stat::Mean),
    MetricKey::stat(Metric::Tpot, Stat::Mean),
];

/// One deployment's table of a scenario as teams publish it: a row per level it ran, the
/// nine columns of [`PUBLISHED_COLUMNS`] under their published headers; a rejected point's
/// figures are `-`.
pub fn published_table(v: &ScenarioView, e: &Entry, o: &CompareOptions) -> Table {
    let headers: Vec<String> = PUBLISHED_COLUMNS.iter().map(|c| c.header().to_string()).collect();
    let mut t = Table::new(headers).with_align(&[Align::Right; 9]);
    for (i, r) in v.rows.iter().enumerate() {
        if e.cells.get(i).is_none_or(Option::is_none) {
            continue;
        }
        let figures = PUBLISHED_COLUMNS.iter().filter_map(|c| MetricKey::published(*c));
        let mut cells = vec![r.label.clone()];
        cells.extend(figures.map(|m| num(e.value(i, m, o))));
        t.push(cells);
    }
    t
}

/// A run's workload without its load: the sweep scenario it was a point of and its dataset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Workload {
    /// The sweep scenario (`500x100`), if the run was a sweep point.
    pub scenario: Option<String>,
    /// The dataset's label (`random(500:100)`), when known.
    pub dataset: Option<String>,
}

impl Workload {
    /// The workload of a run.
    pub fn of(run: &RunData) -> Workload {
        let id = run.identity();
        Workload { scenario: id.scenario, dataset: id.dataset }
    }

    /// `500x100 (random(500:100))`, `random(512:128)`, or `unknown workload`.
    pub fn name(&self) -> String {
        match (&self.scenario, &self.dataset) {
            (Some(s), Some(d)) => format!("{s} ({d})"),
            (Some(s), None) => s.clone(),
            (None, Some(d)) => d.clone(),
            (None, None) => "unknown workload".into(),
        }
    }

    /// The scenario, else the dataset (`500x100`, `random(512:32)`), else `unknown workload`.
    pub fn short(&self) -> String {
        self.scenario
            .clone()
            .or_else(|| self.dataset.clone())
            .unwrap_or_else(|| "unknown workload".into())
    }

    /// A file-name stem: the scenario, else the dataset (`random(512:32)` → `random-512x32`).
    pub fn stem(&self) -> String {
        let s = self.scenario.clone().or_else(|| {
            self.dataset.as_ref().map(|d| d.replace('(', "-").replace(':', "x").replace(')', ""))
        });
        file_safe(&s.unwrap_or_else(|| "workload".into()))
    }
}

/// One level of a scenario (a table row, a chart x): a load and a prompt count.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// The load.
    pub load: LoadSpec,
    /// Measured prompts, when known.
    pub prompts: Option<u64>,
    /// Requests in flight at once: the concurrency cap, or, at rate inf without a cap, the
    /// number of prompts (all are sent at once); `None` for a paced (rate) load.
    pub concurrency: Option<u64>,
    /// How the row is shown: `4`, `rate=2`; with ` (40 prompts)` when two rows share it.
    pub label: String,
    /// The load in words as the runs did it (`c=4`, `inf`, `ramp linear 1→10 req/s`).
    pub load_words: String,
}

impl Row {
    fn of(run: &RunData) -> Row {
        let prompts = run.identity().num_prompts;
        let load = run.load;
        // A ramp has no rate field but is paced, never "all at once".
        let paced = load.request_rate.is_some() || run.ramp().is_some();
        let concurrency = match (load.max_concurrency, paced) {
            (Some(c), _) => Some(c),
            (None, false) => prompts,
            (None, true) => None,
        };
        let label = match (concurrency, paced) {
            (Some(c), false) => c.to_string(),
            _ => run.load_words(),
        };
        Row { load, prompts, concurrency, label, load_words: run.load_words() }
    }

    fn same(&self, other: &Row) -> bool {
        self.load_words == other.load_words && self.prompts == other.prompts
    }

    /// The row in a sentence: `100 concurrent`, `rate=2`, `ramp linear 1→10 req/s`.
    pub fn words(&self) -> String {
        // Words that differ from the load spec's: a ramp, said as such even under a cap.
        let ramped = self.load_words != self.load.to_string();
        match (self.concurrency, self.load.request_rate) {
            (Some(c), None) if !ramped => format!("{c} concurrent"),
            _ => self.load_words.clone(),
        }
    }
}

/// One deployment (or model) of a scenario: its runs at each row.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// The deployment's name: its label, without the scenario a sweep point's name carries.
    pub name: String,
    /// The tags of its first run, without the sweep's own (`sweep.*`).
    pub tags: Vec<(String, String)>,
    /// Its runs at each row of the view (repeats of one workload and load), `None` where it
    /// has none.
    pub cells: Vec<Option<Subject>>,
}

impl Entry {
    /// The value of a metric at row `i`; `None` where it has no point or the point is
    /// rejected (success rate below the minimum).
    pub fn value(&self, i: usize, m: MetricKey, o: &CompareOptions) -> Option<f64> {
        let s = self.cells.get(i)?.as_ref()?;
        if rejected(s.success_rate(), o.min_success_rate) {
            return None;
        }
        point_value(s, m)
    }

    /// The value of tag `key`, if it has it.
    pub fn tag(&self, key: &str) -> Option<&str> {
        self.tags.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }
}

/// The deployments of one scenario, level by level.
#[derive(Debug, Clone, PartialEq)]
pub struct ScenarioView {
    /// The scenario.
    pub workload: Workload,
    /// Its levels, lightest first.
    pub rows: Vec<Row>,
    /// The deployments, in the order their runs came.
    pub entries: Vec<Entry>,
}

/// The deployment a run belongs to: its name without the ` [scenario]` a sweep point's name
/// carries (`A [500x100]` and `A [500x100] (predicted)` are `A` and `A (predicted)`).
pub fn deployment_of(run: &RunData) -> String {
    match run.tags.iter().find(|(k, _)| k == SCENARIO_TAG) {
        Some((_, sc)) => run.name.replacen(&format!(" [{sc}]"), "", 1),
        None => run.name.clone(),
    }
}

/// Group runs into one view per workload (first appearance order), each with one entry per
/// deployment and one row per load and prompt count. Runs of one deployment, workload, load
/// and prompt count are repeats (one cell).
pub fn scenario_views(runs: &[RunData]) -> Vec<ScenarioView> {
    let mut views: Vec<ScenarioView> = Vec::new();
    for run in runs {
        let w = Workload::of(run);
        let vi = match views.iter().position(|v| v.workload == w) {
            Some(i) => i,
            None => {
                views.push(ScenarioView { workload: w, rows: Vec::new(), entries: Vec::new() });
                views.len() - 1
            }
        };
        let v = &mut views[vi];
        let row = Row::of(run);
        let ri = match v.rows.iter().position(|r| r.same(&row)) {
            Some(i) => i,
            None => {
                v.rows.push(row);
                for e in &mut v.entries {
                    e.cells.push(None);
                }
                v.rows.len() - 1
            }
        };
        let name = deployment_of(run);
        let ei = match v.entries.iter().position(|e| e.name == name) {
            Some(i) => i,
            None => {
                let tags =
                    run.tags.iter().filter(|(k, _)| !k.starts_with("sweep.")).cloned().collect();
                v.entries.push(Entry { name: name.clone(), tags, cells: vec![None; v.rows.len()] });
                v.entries.len() - 1
            }
        };
        match &mut v.entries[ei].cells[ri] {
            Some(s) => s.runs.push(run.clone()),
            cell => *cell = Some(Subject { name, runs: vec![run.clone()] }),
        }
    }
    for v in &mut views {
        sort_rows(v);
    }
    views
}

/// Rows lightest first (concurrency, then paced rows by rate, then prompts), cells along;
/// a label shared by two rows gets their prompt counts.
fn sort_rows(v: &mut ScenarioView) {
    let key = |r: &Row| {
        (r.concurrency.unwrap_or(u64::MAX), r.load.request_rate.unwrap_or(f64::INFINITY), r.prompts)
    };
    let mut order: Vec<usize> = (0..v.rows.len()).collect();
    order.sort_by(|&a, &b| {
        let (ka, kb) = (key(&v.rows[a]), key(&v.rows[b]));
        ka.0.cmp(&kb.0).then(ka.1.total_cmp(&kb.1)).then(ka.2.cmp(&kb.2))
    });
    v.rows = order.iter().map(|&i| v.rows[i].clone()).collect();
    for e in &mut v.entries {
        e.cells = order.iter().map(|&i| e.cells[i].clone()).collect();
    }
    let labels: Vec<String> = v.rows.iter().map(|r| r.label.clone()).collect();
    for r in &mut v.rows {
        if labels.iter().filter(|l| **l == r.label).count() > 1 {
            if let Some(n) = r.prompts {
                r.label = format!("{} ({n} prompts)", r.label);
            }
        }
    }
}

/// `+5.3%` of `v` against `base`; empty when either is missing or the base is 0.
fn pct(v: Option<f64>, base: Option<f64>) -> String {
    match (v, base) {
        (Some(v), Some(b)) if b != 0.0 => format!(" ({:+.1}%)", (v - b) / b * 100.0),
        _ => String::new(),
    }
}

/// Tags every entry of the view shares (shown once, under the heading).
pub fn shared_tags(v: &ScenarioView) -> Vec<(String, String)> {
    let Some(first) = v.entries.first() else { return Vec::new() };
    first.tags.iter().filter(|t| v.entries.iter().all(|e| e.tags.contains(t))).cloned().collect()
}

/// An entry's name as a legend or column shows it: with the tags that tell it apart from the
/// other entries (`A (layout=3P1D)`).
pub fn caption(v: &ScenarioView, e: &Entry) -> String {
    let shared = shared_tags(v);
    let own: Vec<String> =
        e.tags.iter().filter(|t| !shared.contains(t)).map(|(k, x)| format!("{k}={x}")).collect();
    if own.is_empty() {
        e.name.clone()
    } else {
        format!("{} ({})", e.name, own.join(", "))
    }
}

/// The scenario's table: one row per level; for each metric of [`DEPLOY_METRICS`], one
/// column per deployment (`B: Mean TTFT (ms)`), the others' cells with their change against
/// the first deployment (`12.30 (+5.3%)`). The best value of a metric at a level is marked
/// `*` (rejected points never are; they show `-`).
pub fn deployment_table(v: &ScenarioView, o: &CompareOptions) -> Table {
    let mut headers = vec!["Concurrency".to_string()];
    for m in DEPLOY_METRICS {
        for e in &v.entries {
            headers.push(format!("{}: {}", e.name, m.header()));
        }
    }
    let n = headers.len();
    let mut t = Table::new(headers).with_align(&vec![Align::Right; n]);
    for (i, r) in v.rows.iter().enumerate() {
        let mut cells = vec![r.label.clone()];
        for m in DEPLOY_METRICS {
            let vals: Vec<Option<f64>> = v.entries.iter().map(|e| e.value(i, m, o)).collect();
            let best = (v.entries.len() > 1)
                .then(|| best_index(m, &vals, &vec![false; vals.len()]))
                .flatten();
            for (k, val) in vals.iter().enumerate() {
                let star = if best == Some(k) { " *" } else { "" };
                let change = if k == 0 { String::new() } else { pct(*val, vals[0]) };
                cells.push(match val {
                    Some(_) => format!("{}{change}{star}", num(*val)),
                    None => MISSING.to_string(),
                });
            }
        }
        t.push(cells);
    }
    t
}

/// What the reader must know about a view: rejected points, and deployments missing levels.
pub fn view_notes(v: &ScenarioView, o: &CompareOptions) -> Vec<String> {
    let mut out = Vec::new();
    for e in &v.entries {
        for (r, c) in v.rows.iter().zip(&e.cells) {
            let Some(s) = c else { continue };
            if let (true, Some(sr)) =
                (rejected(s.success_rate(), o.min_success_rate), s.success_rate())
            {
                out.push(format!(
                    "{} at {} is left out: success rate {:.1}% is below {:.1}%",
                    e.name,
                    r.label,
                    sr * 100.0,
                    o.min_success_rate * 100.0
                ));
            }
        }
        let missing: Vec<&str> = v
            .rows
            .iter()
            .zip(&e.cells)
            .filter(|(_, c)| c.is_none())
            .map(|(r, _)| r.label.as_str())
            .collect();
        if !missing.is_empty() && v.entries.len() > 1 {
            out.push(format!("{} has no run at {}", e.name, missing.join(", ")));
        }
    }
    out
}

/// The lines under a scenario's heading: its deployments (with the tags that tell them
/// apart) and the one the changes are against, then the tags they all share.
pub fn view_caption(v: &ScenarioView) -> Vec<String> {
    let names: Vec<String> = v.entries.iter().map(|e| caption(v, e)).collect();
    let first = v.entries.first().map_or(MISSING, |e| e.name.as_str());
    let mut lines = vec![format!("Deployments: {} (% against {first}).", names.join(", "))];
    let tags: Vec<String> = shared_tags(v).iter().map(|(k, x)| format!("{k}={x}")).collect();
    if !tags.is_empty() {
        lines.push(format!("Shared by every deployment: {}.", tags.join(", ")));
    }
    lines
}

/// Every view with its heading, caption, table and notes, as text for the terminal
/// (`markdown` false) or Markdown: what `servelab compare --by-scenario` prints; with
/// `per_deployment`, then each deployment's [`published_table`].
pub fn render_views(
    views: &[ScenarioView],
    o: &CompareOptions,
    markdown: bool,
    per_deployment: bool,
) -> String {
    let md = servelab_outputs::markdown::escape;
    let mut out = String::new();
    for (i, v) in views.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let name = v.workload.name();
        out.push_str(&if markdown {
            format!("## {}\n\n", md(&name))
        } else {
            format!("== {name} ==\n")
        });
        for l in view_caption(v) {
            out.push_str(&if markdown { format!("{}\n", md(&l)) } else { format!("{l}\n") });
        }
        let t = deployment_table(v, o);
        if markdown {
            out.push('\n');
            out.push_str(&t.to_markdown());
            out.push('\n');
        } else {
            out.push_str(&t.to_plain());
        }
        let mut notes = view_notes(v, o);
        notes.push("* best value at that concurrency".into());
        for n in notes {
            out.push_str(&if markdown { format!("- {}\n", md(&n)) } else { format!("{n}\n") });
        }
        if !per_deployment {
            continue;
        }
        for e in &v.entries {
            let heading = format!("{}: {}", caption(v, e), v.workload.name());
            let t = published_table(v, e, o);
            out.push_str(&if markdown {
                format!("\n### {}\n\n{}", md(&heading), t.to_markdown())
            } else {
                format!("\n-- {heading} --\n{}", t.to_plain())
            });
        }
    }
    out
}

/// The deployments of a view as the Pareto front reads them: each deployment's levels with
/// their output throughput, mean TPOT and GPU count (of the level's first run). Rejected
/// points are left out here as in the table ([`view_notes`] says so).
pub fn view_frontier(v: &ScenarioView, o: &CompareOptions) -> Frontier {
    let out = MetricKey::of(Metric::OutputThroughput);
    let tpot = MetricKey::stat(Metric::Tpot, Stat::Mean);
    let series: Vec<FrontSeries> = v
        .entries
        .iter()
        .map(|e| FrontSeries {
            // The name alone: the tags that tell deployments apart are under the heading.
            name: e.name.clone(),
            points: v
                .rows
                .iter()
                .enumerate()
                .filter_map(|(i, r)| {
                    let s = e.cells.get(i)?.as_ref()?;
                    if rejected(s.success_rate(), o.min_success_rate) {
                        return None;
                    }
                    Some(FrontInput {
                        label: r.label.clone(),
                        output_throughput: point_value(s, out),
                        tpot_mean_ms: point_value(s, tpot),
                        gpus: s.runs.first().and_then(RunData::gpus),
                    })
                })
                .collect(),
        })
        .collect();
    frontier(&series)
}

/// The view's Pareto chart: output tokens/s per GPU against interactivity (output tokens/s
/// per user), every deployment's levels labelled by their concurrency, those off the front
/// faded. Named `<scenario>-pareto`.
pub fn pareto_chart(v: &ScenarioView, o: &CompareOptions) -> Chart {
    draw_front(
        &view_frontier(v, o),
        &format!("{}-pareto", v.workload.stem()),
        &format!("{}: throughput per GPU vs interactivity", v.workload.short()),
    )
}

/// The x of a row on a chart: its concurrency, else its rate.
fn x_of(r: &Row) -> Option<f64> {
    r.concurrency.map(|c| c as f64).or(r.load.request_rate)
}

/// One chart per metric of [`DEPLOY_METRICS`]: every deployment's line on one chart, against
/// concurrency (or rate, for a paced scenario). Named `<scenario>-<metric>`, e.g.
/// `500x100-ttft_mean`.
pub fn deployment_charts(v: &ScenarioView, o: &CompareOptions) -> Vec<Chart> {
    let paced = v.rows.iter().all(|r| r.concurrency.is_none());
    let x_label = if paced { "Request rate (req/s)" } else { "Concurrency (requests in flight)" };
    DEPLOY_METRICS
        .iter()
        .map(|&m| {
            let series: Vec<Series> = v
                .entries
                .iter()
                .map(|e| {
                    let pts = (0..v.rows.len())
                        .filter(|&i| v.rows[i].concurrency.is_none() == paced)
                        .filter_map(|i| Some((x_of(&v.rows[i])?, e.value(i, m, o)?)))
                        .collect();
                    Series::line(caption(v, e), pts)
                })
                .collect();
            let xs = series.iter().flat_map(|s| s.points.iter().map(|p| p.0));
            let ys = series.iter().flat_map(|s| s.points.iter().map(|p| p.1));
            let x_log = spans(xs, 8.0).then_some(2.0);
            let y_log = spans(ys, 30.0).then_some(10.0);
            Chart {
                name: format!("{}-{}", v.workload.stem(), m.key()),
                // Short, so the report's title can lead it (see report::chart_title).
                title: format!("{}: {}", v.workload.short(), m.label()),
                x_label: x_label.into(),
                y_label: m.label(),
                series,
                x_log,
                y_log,
                mark: None,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use servelab_records::RunInfo;
    use servelab_store::Headline;

    fn run(name: &str, scenario: Option<&str>, c: Option<u64>, prompts: u64) -> RunData {
        let info = RunInfo {
            dataset: "random(8:8)".into(),
            num_prompts: prompts,
            load: LoadSpec { max_concurrency: c, ..LoadSpec::default() },
            ..RunInfo::default()
        };
        let mut d = RunData::from_headline(name, &info, Headline::default());
        d.config = Some(servelab_store::RunSetup { info, ..Default::default() });
        if let Some(s) = scenario {
            d.tags.push((SCENARIO_TAG.into(), s.into()));
        }
        d
    }

    #[test]
    fn sweep_point_names_lose_their_scenario() {
        assert_eq!(deployment_of(&run("A [chat]", Some("chat"), Some(1), 1)), "A");
        assert_eq!(
            deployment_of(&run("A [chat] (predicted)", Some("chat"), Some(1), 1)),
            "A (predicted)"
        );
        assert_eq!(deployment_of(&run("A [chat]", None, Some(1), 1)), "A [chat]");
    }

    #[test]
    fn rows_are_concurrency_or_prompts_at_rate_inf_and_sorted() {
        let v = scenario_views(&[
            run("m", None, None, 100),
            run("m", None, None, 1),
            run("n", None, None, 10),
            run("m", None, Some(4), 40),
        ]);
        assert_eq!(v.len(), 1);
        let labels: Vec<&str> = v[0].rows.iter().map(|r| r.label.as_str()).collect();
        assert_eq!(labels, ["1", "4", "10", "100"]);
        assert_eq!(v[0].rows[3].words(), "100 concurrent");
        assert_eq!(v[0].workload.stem(), "random-8x8");
        let has: Vec<bool> = v[0].entries[1].cells.iter().map(Option::is_some).collect();
        assert_eq!(has, [false, false, true, false]);
        // Two rows of one concurrency (4 capped and 4 prompts at once) name their prompts.
        let v = scenario_views(&[run("m", None, Some(4), 40), run("m", None, None, 4)]);
        let labels: Vec<&str> = v[0].rows.iter().map(|r| r.label.as_str()).collect();
        assert_eq!(labels, ["4 (4 prompts)", "4 (40 prompts)"]);
    }

    #[test]
    fn missing_levels_and_rejected_points_are_said() {
        let mut bad = run("B", None, Some(2), 10);
        bad.headline.completed = Some(5);
        bad.headline.failed = Some(5);
        bad.headline.output_throughput = Some(99.0);
        let mut good = run("A", None, Some(2), 10);
        good.headline.output_throughput = Some(10.0);
        let v = scenario_views(&[run("A", None, Some(1), 10), good, bad]);
        let o = CompareOptions::default();
        assert_eq!(
            view_notes(&v[0], &o),
            ["B at 2 is left out: success rate 50.0% is below 99.0%", "B has no run at 1"]
        );
        let t = deployment_table(&v[0], &o);
        assert_eq!(t.rows[1][1..3], ["10.00 *".to_string(), "-".to_string()]);
    }

    #[test]
    fn scenarios_are_separate_views() {
        let v = scenario_views(&[
            run("A [chat]", Some("chat"), Some(1), 10),
            run("A [long]", Some("long"), Some(1), 10),
            run("B [chat]", Some("chat"), Some(1), 10),
        ]);
        let names: Vec<(String, Vec<&str>)> = v
            .iter()
            .map(|v| (v.workload.name(), v.entries.iter().map(|e| e.name.as_str()).collect()))
            .collect();
        assert_eq!(
            names,
            [
                ("chat (random(8:8))".to_string(), vec!["A", "B"]),
                ("long (random(8:8))".to_string(), vec!["A"])
            ]
        );
    }
}
