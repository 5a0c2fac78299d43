//! The report: configuration, summary table, comparisons at each shared load level,
//! rankings, the written summary, and charts, as Markdown and as one self-contained HTML
//! file (inline CSS and SVG, no scripts, nothing fetched).

use servelab_load::Level;
use servelab_metrics::engine::EnginePoint;
use servelab_metrics::request::token_events;
use servelab_metrics::timeline::tokens_per_window;
use servelab_outputs::chart::{self, Chart};
use servelab_outputs::fmt::{num, MISSING};
use servelab_outputs::html::{esc, figure, page, table as html_table};
use servelab_outputs::{Align, Table};
use servelab_records::RequestRecord;
use servelab_sweep::charts::scenario_charts;
use servelab_sweep::run::curve;
use servelab_sweep::{find_knee, KneeRule, PointResult, Role, ScenarioResult};

use crate::compare::{compare, CompareOptions, Comparison};
use crate::data::{RunData, Subject};
use crate::deploy::{
    caption, deployment_charts as view_charts, deployment_table, pareto_chart, published_table,
    scenario_views, view_caption, view_frontier, view_notes, ScenarioView,
};
use crate::narrative::{written_summary, Finding};
use crate::rank::{group, identities, point_name, rankings, LevelRanking, Series};
use crate::render::{comparison_table, notes};
use crate::verdict::{verdicts, ModelVerdict, ScenarioVerdicts};
use servelab_metrics::HEADLINE;

/// Everything a report shows, computed once; the renderers only format.
#[derive(Debug, Clone)]
pub struct Report {
    /// The report's heading.
    pub title: String,
    /// The runs, grouped by name into series and by load into points.
    pub series: Vec<Series>,
    /// A comparison at each workload and load two or more series ran, lightest first, named
    /// by what tells it apart (`c=4`, `scenario chat, c=4`, `100 prompts`).
    pub comparisons: Vec<(String, Comparison)>,
    /// Each headline metric ranked at each load level.
    pub rankings: Vec<LevelRanking>,
    /// The written summary's facts, one sentence per rule that applied: rejected points, and
    /// for a scenario without verdicts the R rules (see [`crate::narrative`]).
    pub findings: Vec<Finding>,
    /// The deployments side by side, one view per scenario (workload).
    pub views: Vec<ScenarioView>,
    /// One written verdict per model of each scenario, and its variants.
    pub verdicts: Vec<ScenarioVerdicts>,
    /// The comparison settings used.
    pub options: CompareOptions,
    /// Also one table per deployment and scenario with the nine published columns
    /// ([`crate::deploy::published_table`]); off unless asked for (`--per-deployment`).
    pub per_deployment: bool,
    /// Where the deployment charts' SVG files are, relative to the Markdown file; the
    /// Markdown links them when set (the HTML has them inline).
    pub chart_dir: Option<String>,
    /// At most [`DETAIL_RUNS`] runs: the report also holds each run's configuration, summary
    /// block and charts, the comparisons and the rankings at every point. Beyond, it is the
    /// summary and the per-scenario sections, with a table of every run's figures.
    pub detail: bool,
}

/// Up to this many runs a report holds every run's details. 128 sweep points made 32
/// "Comparison" and 32 "Rankings" sections, 1,700 lines and 89 s; the per-scenario tables
/// already compare them point by point.
pub const DETAIL_RUNS: usize = 32;

/// Up to this many points (workload and load) a report shows a comparison, with noise bands,
/// and a ranking at each (1/10/100 prompts, A vs B at three loads); beyond, the per-scenario
/// tables compare them and the comparisons stay in [`Report::comparisons`] only.
pub const POINT_SECTIONS: usize = 4;

/// Build the report of these runs (grouped by name into series, by load into points).
pub fn build(title: &str, runs: Vec<RunData>, o: &CompareOptions) -> Report {
    let detail = runs.len() <= DETAIL_RUNS;
    let views = scenario_views(&runs);
    let series = group(runs);
    let mut comparisons = Vec::new();
    // One comparison per workload and load: two scenarios (or prompt counts) at one load are
    // never each other's baseline.
    let ids = if detail { identities(&series) } else { Vec::new() };
    for id in &ids {
        let subjects: Vec<Subject> =
            series.iter().filter_map(|s| s.at_identity(id).cloned()).collect();
        if subjects.len() >= 2 {
            comparisons.push((point_name(id, &ids), compare(&subjects, o)));
        }
    }
    let verdicts = verdicts(&views, o);
    Report {
        title: title.to_string(),
        rankings: if detail { rankings(&series, o) } else { Vec::new() },
        findings: written_summary(&views, &verdicts, o),
        series,
        comparisons,
        verdicts,
        views,
        options: *o,
        per_deployment: false,
        chart_dir: None,
        detail,
    }
}

/// Whether the comparisons and rankings per point are written (at most [`POINT_SECTIONS`]
/// points).
fn point_sections(r: &Report) -> bool {
    identities(&r.series).len() <= POINT_SECTIONS
}

/// Why a report of many points has no comparison per point, and where to get one.
fn points_note(r: &Report) -> Option<String> {
    let n = identities(&r.series).len();
    (r.detail && !point_sections(r) && !r.comparisons.is_empty()).then(|| {
        format!(
            "The {n} points (workload and load) are compared in the tables by scenario above; \
             a comparison with noise bands at each: `servelab compare A B`."
        )
    })
}

/// What a report of more than [`DETAIL_RUNS`] runs leaves out, and where to find it.
fn brief_note(r: &Report) -> String {
    format!(
        "This report covers {} runs (more than {DETAIL_RUNS}): each run's configuration, summary \
         block and charts, and the comparisons and rankings at each point are left out; the \
         tables above compare the deployments point by point. For one point's noise bands: \
         `servelab compare A B`; for one run's block: `servelab runs show ID`.",
        runs(r).len()
    )
}

/// Each run's summary block as `runs show` prints it (a run known only by its headline, an
/// import, has its figures instead).
fn run_blocks(r: &Report) -> Vec<(String, String)> {
    runs(r)
        .into_iter()
        .map(|(name, d)| {
            let block = match &d.summary {
                // The run's warnings with it: a block is read, and pasted, on its own.
                Some(s) => servelab_outputs::vllm_block(s) + &servelab_outputs::warning_lines(s),
                None => HEADLINE
                    .iter()
                    .map(|m| format!("{:<40} {}\n", m.label(), num(d.headline.get(m))))
                    .collect(),
            };
            (name, block)
        })
        .collect()
}

/// The views worth a deployment section: two or more deployments, or one at two or more
/// levels.
fn shown_views(r: &Report) -> impl Iterator<Item = &ScenarioView> {
    r.views.iter().filter(|v| v.entries.len() >= 2 || v.rows.len() >= 2)
}

/// The overlaid charts of every shown scenario: one per scenario and metric, every
/// deployment a line (`<scenario>-<metric>`, e.g. `500x100-ttft_mean`).
pub fn deployment_charts(r: &Report) -> Vec<Chart> {
    shown_views(r).flat_map(|v| titled_charts(r, v)).collect()
}

/// The title `servelab report` gives a report without `--title`.
pub const DEFAULT_TITLE: &str = "servelab report";

/// Longest chart title, in characters, that fits the chart's width at its caption size.
const CHART_TITLE_MAX: usize = 72;

/// A chart title led by the report's title (`Qwen on H20: 500x100 ...`), so an SVG file
/// shown alone (a slide) still says what it is from; the report's title is shortened with
/// `…` when both do not fit. The default title leads nothing.
pub fn chart_title(report: &str, chart: &str) -> String {
    if report.is_empty() || report == DEFAULT_TITLE {
        return chart.to_string();
    }
    let room = CHART_TITLE_MAX.saturating_sub(chart.chars().count() + 2);
    let lead = if report.chars().count() <= room {
        report.to_string()
    } else if room >= 8 {
        format!("{}…", report.chars().take(room - 1).collect::<String>().trim_end())
    } else {
        return chart.to_string();
    };
    format!("{lead}: {chart}")
}

/// The overlaid charts of one scenario, then its Pareto chart (throughput per GPU vs
/// interactivity), titled after the report.
fn titled_charts(r: &Report, v: &ScenarioView) -> Vec<Chart> {
    let mut charts = view_charts(v, &r.options);
    charts.push(pareto_chart(v, &r.options));
    for c in &mut charts {
        c.title = chart_title(&r.title, &c.title);
    }
    charts
}

/// The heading line of a view's Pareto table.
pub const PARETO_HEADING: &str = "Throughput per GPU vs interactivity (output tokens/s per user \
     = 1000 / mean TPOT; on the Pareto front: no other point, of any deployment, has both more)";

/// A view's Pareto table (per-GPU and per-user columns) and its notes.
fn pareto_parts(r: &Report, v: &ScenarioView) -> (Table, Vec<String>) {
    let f = view_frontier(v, &r.options);
    (servelab_outputs::pareto::pareto_table(&f, "Concurrency"), f.notes())
}

/// A verdict as a Markdown bullet: `- **headline** figures (rule)`.
fn verdict_md(v: &ModelVerdict) -> String {
    let md = servelab_outputs::markdown::escape;
    format!("- **{}** {} ({})\n", md(&v.headline), md(&v.text), v.rule)
}

/// A verdict as an HTML list item.
fn verdict_html(v: &ModelVerdict) -> String {
    format!(
        "<li><strong>{}</strong> {} <small>({})</small></li>\n",
        esc(&v.headline),
        esc(&v.text),
        v.rule
    )
}

/// The heading line of a scenario's verdicts.
fn verdict_scope(s: &ScenarioVerdicts) -> String {
    let (l, h) = &s.levels;
    let between = if l == h {
        format!("at {}", l.words())
    } else {
        format!("between {} and {}", l.words(), h.words())
    };
    format!("{}: judged {between}.", s.workload.name())
}

/// The summary of each scenario that has one, in scenario order: its heading line, its
/// verdicts (models, then variants) and its findings. One block per scenario, so the
/// verdicts and the facts about one scenario are read together.
type SummaryBlock<'a> = (String, Vec<&'a ModelVerdict>, Vec<&'a Finding>);

fn summary_blocks(r: &Report) -> Vec<SummaryBlock<'_>> {
    let mut out = Vec::new();
    for v in &r.views {
        let name = v.workload.name();
        let judged = r.verdicts.iter().find(|s| s.workload == v.workload);
        let verdicts: Vec<&ModelVerdict> =
            judged.map(|s| s.models.iter().chain(&s.variants).collect()).unwrap_or_default();
        let findings: Vec<&Finding> = r.findings.iter().filter(|f| f.scenario == name).collect();
        if verdicts.is_empty() && findings.is_empty() {
            continue;
        }
        let scope = judged.map_or_else(|| format!("{name}:"), verdict_scope);
        out.push((scope, verdicts, findings));
    }
    out
}

/// Every run of the report, with its display name `series @ load` (and `#n` for repeats).
fn runs(r: &Report) -> Vec<(String, &RunData)> {
    let mut out = Vec::new();
    for s in &r.series {
        for p in &s.points {
            for (i, run) in p.runs.iter().enumerate() {
                let rep = if p.runs.len() > 1 { format!(" #{}", i + 1) } else { String::new() };
                out.push((format!("{} @ {}{rep}", s.name, p.load_words()), run));
            }
        }
    }
    out
}

/// Configuration: one column per run.
pub fn config_table(r: &Report) -> Table {
    let all = runs(r);
    let mut headers = vec!["".to_string()];
    headers.extend(all.iter().map(|(n, _)| n.clone()));
    let mut t = Table::new(headers);
    t = t.with_align(&vec![Align::Left; all.len() + 1]);
    type Getter = fn(&RunData) -> String;
    let rows: [(&str, Getter); 13] = [
        ("run id", |d| d.id.map_or(MISSING.into(), |i| format!("#{i}"))),
        ("status", |d| d.status.clone()),
        ("model", |d| info(d, |i| i.model.clone())),
        ("backend", |d| info(d, |i| i.backend.clone())),
        ("target", |d| info(d, |i| format!("{}{}", i.base_url, i.endpoint))),
        ("dataset", |d| info(d, |i| i.dataset.clone())),
        ("prompts", |d| info(d, |i| i.num_prompts.to_string())),
        ("load", |d| d.load_words()),
        ("seed", |d| info(d, |i| i.seed.to_string())),
        ("started", |d| info(d, |i| i.started_at.clone())),
        ("servelab", |d| info(d, |i| i.servelab_version.clone())),
        ("engine", |d| {
            d.config.as_ref().and_then(|c| c.engine.clone()).unwrap_or_else(|| MISSING.into())
        }),
        ("tags", |d| d.tags.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" ")),
    ];
    for (name, get) in rows {
        let mut cells = vec![name.to_string()];
        cells.extend(all.iter().map(|(_, d)| get(d)));
        t.push(cells);
    }
    t
}

fn info(d: &RunData, f: impl Fn(&servelab_records::RunInfo) -> String) -> String {
    match (&d.config, &d.summary) {
        (Some(c), _) => f(&c.info),
        (None, Some(s)) => f(&s.info),
        (None, None) => MISSING.into(),
    }
}

/// Headline metrics: one row per run, and the reasoning models' figures
/// ([`servelab_metrics::REASONING_KEYS`]) when a run had reasoning, and the GPU energy and cost
/// ones ([`servelab_metrics::GPU_KEYS`]) when a run had them.
pub fn summary_table(r: &Report) -> Table {
    let all = runs(r);
    let reasoning =
        all.iter().any(|(_, d)| d.summary.as_ref().is_some_and(|s| s.reasoning.is_some()));
    let gpu = all.iter().any(|(_, d)| d.summary.as_ref().is_some_and(|s| s.gpu.is_some()));
    let extra: Vec<servelab_metrics::MetricKey> = [
        if reasoning { &servelab_metrics::REASONING_KEYS[..] } else { &[] },
        if gpu { &servelab_metrics::GPU_KEYS[..] } else { &[] },
    ]
    .concat();
    let mut headers = vec!["run".to_string()];
    headers.extend(HEADLINE.iter().chain(&extra).map(|m| m.label()));
    let mut t = Table::new(headers);
    for (name, d) in all {
        let mut cells = vec![name];
        cells.extend(HEADLINE.iter().map(|m| num(d.headline.get(m))));
        cells.extend(extra.iter().map(|m| num(d.summary.as_ref().and_then(|s| m.value(s)))));
        t.push(cells);
    }
    t
}

/// Delivered against configured load, and the steady state, per run (only runs summarized
/// from their records): the figures of `servelab_metrics::load`, all-requests TTFT p99 beside
/// the steady one.
pub fn load_table(r: &Report) -> Table {
    let mut t = Table::new([
        "run",
        "configured",
        "delivered rate (/s)",
        "delivered in flight",
        "send lag p99 (ms)",
        "slot wait p99 (ms)",
        "steady state",
        "steady output (tok/s)",
        "steady TTFT p99 (ms)",
        "all TTFT p99 (ms)",
    ])
    .with_align(
        &[[Align::Left; 2].as_slice(), &[Align::Right; 4], &[Align::Left], &[Align::Right; 3]]
            .concat(),
    );
    for (name, d) in runs(r) {
        let Some(s) = d.summary.as_ref() else { continue };
        let Some(l) = s.load.as_ref() else { continue };
        let f = l.steady_figures();
        t.push([
            name,
            s.info.load_words(),
            num(l.delivered_rate),
            num(Some(l.delivered_concurrency)),
            num(Some(l.send_lag.p99_ms)),
            num(l.slot_wait.map(|w| w.p99_ms)),
            servelab_outputs::load::steady_words(l),
            num(f.map(|f| f.output_throughput)),
            num(f.and_then(|f| f.ttft_ms.percentile(99.0))),
            num(s.ttft_ms.percentile(99.0)),
        ]);
    }
    t
}

/// What each run's engine said on its `/metrics` (only runs that have it).
pub fn engine_table(r: &Report) -> Table {
    let mut t = Table::new([
        "run",
        "engine",
        "generated tokens",
        "prompt tokens",
        "peak running",
        "peak waiting",
        "peak KV-cache",
        "prefix-cache hit",
        "preemptions",
        "restarts",
    ])
    .with_align(&[[Align::Left; 2].as_slice(), &[Align::Right; 8]].concat());
    let count = |v: Option<f64>| servelab_outputs::fmt::fixed(v, 0);
    let pct = servelab_outputs::fmt::percent;
    for (name, d) in runs(r) {
        let Some(e) = d.summary.as_ref().and_then(|s| s.engine.as_ref()) else { continue };
        t.push([
            name,
            e.engine.clone(),
            count(e.generation_tokens),
            count(e.prompt_tokens),
            count(e.peak_requests_running),
            count(e.peak_requests_waiting),
            pct(e.peak_kv_cache_usage),
            pct(e.prefix_cache_hit_rate),
            count(e.preemptions),
            e.restarts_s.len().to_string(),
        ]);
    }
    t
}

/// What each run's GPUs drew and cost (only runs with `--gpu-metrics` or `--gpu-hourly-cost`).
pub fn gpu_table(r: &Report) -> Table {
    let mut t = Table::new([
        "run",
        "GPUs",
        "energy (J)",
        "energy from",
        "J per output token",
        "mean W per GPU",
        "peak W",
        "mean util (%)",
        "$ per GPU hour",
        "$ per 1M output tokens",
    ])
    .with_align(&[&[Align::Left, Align::Right][..], &[Align::Right; 8]].concat());
    let fixed = servelab_outputs::fmt::fixed;
    for (name, d) in runs(r) {
        let Some(g) = d.summary.as_ref().and_then(|s| s.gpu.as_ref()) else { continue };
        let gpus = match (g.gpus_seen, g.gpus_declared) {
            (0, Some(n)) => n.to_string(),
            (seen, Some(n)) if n != seen => format!("{n} ({seen} seen)"),
            (seen, _) => seen.to_string(),
        };
        t.push([
            name,
            gpus,
            fixed(g.energy_j, 0),
            g.energy_method.map_or(MISSING.into(), |m| m.words().to_string()),
            fixed(g.joules_per_output_token, 3),
            fixed(g.mean_w_per_gpu, 1),
            fixed(g.peak_w, 1),
            fixed(g.mean_util_pct, 1),
            fixed(g.hourly_cost_usd, 2),
            fixed(g.usd_per_million_output_tokens, 3),
        ]);
    }
    t
}

/// Rankings at one workload and load (`point`, as [`LevelRanking::point`] names it): metric
/// → `1. best (value), 2. next (value) ...`.
pub fn ranking_table(r: &Report, point: &str) -> Table {
    let mut t =
        Table::new(["metric", "ranking (best first)"]).with_align(&[Align::Left, Align::Left]);
    for lr in r.rankings.iter().filter(|l| l.point == point) {
        if lr.entries.is_empty() {
            continue;
        }
        let order: Vec<String> =
            lr.entries.iter().map(|e| format!("{}. {} ({:.2})", e.rank, e.name, e.value)).collect();
        t.push([lr.metric.label(), order.join(", ")]);
    }
    t
}

/// The points rankings were made at, in ranking order, each once.
fn ranking_points(r: &Report) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    for lr in &r.rankings {
        if !v.contains(&lr.point) {
            v.push(lr.point.clone());
        }
    }
    v
}

/// `(x, y)` points of a chart line.
pub type Points = Vec<(f64, f64)>;

/// Requests in flight (time-weighted mean per window) and output tokens/s per window, in
/// seconds from the first intended send. `windows` windows over the run.
pub fn timeline(records: &[RequestRecord], windows: usize) -> (Points, Points) {
    let measured: Vec<&RequestRecord> = records.iter().filter(|r| !r.warmup).collect();
    let Some(origin) = measured.iter().map(|r| r.intended_ns).min() else {
        return (Vec::new(), Vec::new());
    };
    let end = measured.iter().filter_map(|r| r.end_ns).max().unwrap_or(origin);
    let span = end.saturating_sub(origin).max(1);
    // At least 100 ms per window: shorter windows show token bursts, not throughput.
    let w = (span / windows.max(1) as u64).max(100_000_000);
    let n = usize::try_from(span.div_ceil(w)).unwrap_or(0).max(1);
    let mut busy = vec![0f64; n];
    for r in &measured {
        let (Some(e), s) = (r.end_ns, r.sent_ns) else { continue };
        if e <= s {
            continue;
        }
        let (a, b) = (s.saturating_sub(origin), e.saturating_sub(origin));
        let first = (a / w) as usize;
        let last = (((b - 1) / w) as usize).min(n - 1);
        for (k, slot) in busy.iter_mut().enumerate().take(last + 1).skip(first) {
            let (w0, w1) = (k as u64 * w, (k as u64 + 1) * w);
            *slot += (b.min(w1).saturating_sub(a.max(w0))) as f64 / w as f64;
        }
    }
    let events: Vec<(u64, u64)> = measured.iter().flat_map(|r| token_events(r).0).collect();
    let tokens = tokens_per_window(&events, origin, w);
    let secs = |k: usize| (k as u64 * w) as f64 / 1e9;
    let conc = busy.iter().enumerate().map(|(k, c)| (secs(k), *c)).collect();
    let tps =
        (0..n).map(|k| (secs(k), *tokens.get(k).unwrap_or(&0) as f64 / (w as f64 / 1e9))).collect();
    (conc, tps)
}

/// A series measured at two or more loads on one axis (a sweep, or runs at several
/// concurrencies), as the sweep's own result: its curve, knee and the sweep's four charts.
/// The first run at each load stands for it.
pub fn as_sweep(series: &Series) -> Option<ScenarioResult> {
    let points: Vec<PointResult> = series
        .points
        .iter()
        .filter_map(|p| {
            let run = p.runs.first()?;
            let summary = run.summary.clone()?;
            let load = run.load.level()?;
            Some(PointResult {
                scenario: series.name.clone(),
                load,
                role: Role::Grid,
                num_prompts: summary.info.num_prompts as usize,
                seed: summary.info.seed,
                complete: !summary.info.interrupted,
                summary,
            })
        })
        .collect();
    let axis = points.first()?.load.axis();
    if points.len() < 2 || points.iter().any(|p| p.load.axis() != axis) {
        return None;
    }
    let knee = find_knee(&curve(&points), &KneeRule::default());
    let dataset = points[0].summary.info.dataset.clone();
    Some(ScenarioResult {
        name: series.name.clone(),
        axis,
        dataset,
        points,
        probes: Vec::new(),
        knee,
        slo: None,
    })
}

/// The sweep charts (throughput, TTFT and TPOT against load, and the trade-off curve with
/// the knee marked) of every series that has a curve.
pub fn sweep_charts(r: &Report) -> Vec<Chart> {
    r.series.iter().filter_map(as_sweep).flat_map(|s| scenario_charts(&s)).collect()
}

/// A chart of the report: its stem, title and axes, and the lines.
fn chart(name: &str, title: &str, x: &str, y: &str, series: Vec<chart::Series>) -> Chart {
    Chart {
        name: name.into(),
        title: title.into(),
        x_label: x.into(),
        y_label: y.into(),
        series,
        x_log: None,
        y_log: None,
        mark: None,
    }
}

/// Percent of values per bin over `[lo, hi]` in `bins` equal bins (values outside are
/// clamped into the end bins), as points at bin starts plus a closing point, for step lines.
pub fn histogram(values: &[f64], lo: f64, hi: f64, bins: usize) -> Vec<(f64, f64)> {
    if values.is_empty() || bins == 0 || hi.partial_cmp(&lo) != Some(std::cmp::Ordering::Greater) {
        return Vec::new();
    }
    let width = (hi - lo) / bins as f64;
    let mut counts = vec![0u64; bins];
    for v in values {
        let i = (((v - lo) / width).floor().max(0.0) as usize).min(bins - 1);
        counts[i] += 1;
    }
    let n = values.len() as f64;
    let mut pts: Vec<(f64, f64)> = counts
        .iter()
        .enumerate()
        .map(|(i, c)| (lo + width * i as f64, *c as f64 / n * 100.0))
        .collect();
    if let Some(&(_, last)) = pts.last() {
        pts.push((hi, last));
    }
    pts
}

/// The report's own charts: latency distributions, and requests in flight, throughput,
/// (with `/metrics`) KV-cache usage and (with `--gpu-metrics`) the GPUs' power over each run.
pub fn charts(r: &Report) -> Vec<Chart> {
    let all = runs(r);
    let dist = |name: &str, title: &str, pick: fn(&crate::data::Samples) -> Vec<f64>| {
        let sets: Vec<(String, Vec<f64>)> = all
            .iter()
            .filter_map(|(n, d)| Some((n.clone(), pick(d.samples.as_ref()?))))
            .filter(|(_, v)| !v.is_empty())
            .collect();
        let mut pooled: Vec<f64> = sets.iter().flat_map(|(_, v)| v.iter().copied()).collect();
        pooled.sort_by(f64::total_cmp);
        let lo = pooled.first().copied().unwrap_or(0.0);
        // Up to the 99.5th percentile, so one outlier does not flatten the shape.
        let hi = servelab_metrics::stats::percentile(&pooled, 99.5).max(lo + 1e-3);
        let series = sets
            .iter()
            .map(|(n, v)| chart::Series::steps(n.clone(), histogram(v, lo, hi, 40)))
            .collect();
        chart(name, title, "milliseconds", "% of samples", series)
    };
    let mut out = vec![
        dist("ttft-distribution", "TTFT distribution", |s| {
            s.ttft.iter().flatten().copied().collect()
        }),
        dist("itl-distribution", "ITL distribution (per token)", |s| {
            s.itl.iter().flatten().copied().collect()
        }),
    ];
    let mut conc = Vec::new();
    let mut tps = Vec::new();
    let mut kv = Vec::new();
    let mut watts = Vec::new();
    for (n, d) in &all {
        if d.records.is_empty() {
            continue;
        }
        let (c, t) = timeline(&d.records, 40);
        conc.push(chart::Series::steps(n.clone(), c));
        tps.push(chart::Series::steps(n.clone(), t));
        let origin_s = d.records.iter().filter(|r| !r.warmup).map(|r| r.intended_ns).min();
        let origin_s = origin_s.unwrap_or(0) as f64 / 1e9;
        // The GPUs' power together, read between the scrapes' instants.
        if let Some(g) = d.summary.as_ref().and_then(|s| s.gpu.as_ref()) {
            let pts = g.series.iter().filter_map(|p| Some((p.t_s - origin_s, p.watts?))).collect();
            watts.push(chart::Series::line(n.clone(), pts));
        }
        // The engine's own view on the same time axis (seconds from the first send).
        let Some(e) = d.summary.as_ref().and_then(|s| s.engine.as_ref()) else { continue };
        let series = |f: fn(&EnginePoint) -> Option<f64>, scale: f64| -> Points {
            e.series.iter().filter_map(|p| Some((p.t_s - origin_s, f(p)? * scale))).collect()
        };
        let named = |what: &str| format!("{n} (engine {what})");
        conc.push(chart::Series::steps(named("running"), series(|p| p.requests_running, 1.0)));
        conc.push(chart::Series::steps(named("waiting"), series(|p| p.requests_waiting, 1.0)));
        tps.push(chart::Series::steps(
            named("/metrics"),
            series(|p| p.generation_tokens_per_s, 1.0),
        ));
        kv.push(chart::Series::steps(n.clone(), series(|p| p.kv_cache_usage, 100.0)));
    }
    conc.retain(|l| !l.points.is_empty());
    tps.retain(|l| !l.points.is_empty());
    kv.retain(|l| !l.points.is_empty());
    out.push(chart("in-flight", "Requests in flight over the run", "seconds", "requests", conc));
    out.push(chart(
        "throughput-over-time",
        "Output token throughput over the run",
        "seconds",
        "tokens/s",
        tps,
    ));
    if !kv.is_empty() {
        out.push(chart("kv-cache", "Engine KV-cache usage over the run", "seconds", "% used", kv));
    }
    watts.retain(|l| !l.points.is_empty());
    if !watts.is_empty() {
        let title = "GPU power over the run (all GPUs)";
        out.push(chart("gpu-power", title, "seconds", "watts", watts));
    }
    out
}

/// The Markdown report (charts are in the HTML twin).
pub fn markdown(r: &Report) -> String {
    let md = servelab_outputs::markdown::escape;
    let mut out = format!("# {}\n\n", md(&r.title));
    out.push_str("## Summary of results\n\n");
    let blocks = summary_blocks(r);
    if blocks.is_empty() {
        out.push_str("No finding: no run has the metrics the rules need.\n\n");
    }
    for (scope, verdicts, findings) in blocks {
        out.push_str(&format!("{}\n\n", md(&scope)));
        for v in verdicts {
            out.push_str(&verdict_md(v));
        }
        for f in findings {
            out.push_str(&format!("- {} ({})\n", md(&f.text), f.rule));
        }
        out.push('\n');
    }
    let views: Vec<&ScenarioView> = shown_views(r).collect();
    if !views.is_empty() {
        out.push_str("## Deployments by scenario\n\n");
    }
    for v in views {
        out.push_str(&format!("### {}\n\n", md(&v.workload.name())));
        for line in view_caption(v) {
            out.push_str(&format!("{}\n", md(&line)));
        }
        out.push('\n');
        out.push_str(&deployment_table(v, &r.options).to_markdown());
        out.push('\n');
        for n in view_notes(v, &r.options) {
            out.push_str(&format!("- {}\n", md(&n)));
        }
        out.push_str("- \\* best value at that concurrency\n");
        let (t, notes) = pareto_parts(r, v);
        out.push_str(&format!("\n{}:\n\n{}", md(PARETO_HEADING), t.to_markdown()));
        if !notes.is_empty() {
            out.push('\n');
        }
        for n in notes {
            out.push_str(&format!("- {}\n", md(&n)));
        }
        if r.per_deployment {
            for e in &v.entries {
                out.push_str(&format!("\n#### {}\n\n", md(&caption(v, e))));
                out.push_str(&published_table(v, e, &r.options).to_markdown());
            }
        }
        if let Some(dir) = &r.chart_dir {
            out.push('\n');
            for c in titled_charts(r, v) {
                out.push_str(&format!("![{}]({dir}/{}.svg)\n", md(&c.title), c.name));
            }
        }
        out.push('\n');
    }
    if !r.detail {
        out.push_str("## Results\n\n");
        out.push_str(&summary_table(r).to_markdown());
        out.push_str(&format!("\n{}\n", md(&brief_note(r))));
        return servelab_outputs::term::sanitize(&out).into_owned();
    }
    out.push_str("## Configuration\n\n");
    out.push_str(&config_table(r).to_markdown());
    out.push_str("\n## Results\n\n");
    out.push_str(&summary_table(r).to_markdown());
    let engines = engine_table(r);
    if !engines.rows.is_empty() {
        out.push_str("\n## Engine (/metrics)\n\n");
        out.push_str(&engines.to_markdown());
    }
    let gpus = gpu_table(r);
    if !gpus.rows.is_empty() {
        out.push_str("\n## GPU energy and cost (measured window)\n\n");
        out.push_str(&gpus.to_markdown());
    }
    let load = load_table(r);
    if !load.rows.is_empty() {
        out.push_str("\n## Load (delivered vs configured, steady state)\n\n");
        out.push_str(&load.to_markdown());
    }
    if let Some(n) = points_note(r) {
        out.push_str(&format!("\n{}\n", md(&n)));
    }
    for (point, c) in r.comparisons.iter().filter(|_| point_sections(r)) {
        out.push_str(&format!("\n## Comparison at {}\n\n", md(point)));
        out.push_str(&comparison_table(c).to_markdown());
        out.push('\n');
        for n in notes(c) {
            out.push_str(&format!("- {}\n", n.replace('*', "\\*")));
        }
    }
    for point in ranking_points(r).into_iter().filter(|_| point_sections(r)) {
        let t = ranking_table(r, &point);
        if t.rows.is_empty() {
            continue;
        }
        out.push_str(&format!("\n## Rankings at {}\n\n", md(&point)));
        out.push_str(&t.to_markdown());
    }
    let knees: Vec<String> = r
        .series
        .iter()
        .filter_map(as_sweep)
        .map(|s| {
            let load = |v: f64| Level::on_axis(s.axis, v).label();
            match &s.knee {
                Some(k) => match &k.reason {
                    Some(why) => {
                        format!("- {}: throughput stops rising at {} ({why})", s.name, load(k.load))
                    }
                    None => format!(
                        "- {}: still rising at {}, the highest load measured",
                        s.name,
                        load(k.load)
                    ),
                },
                None => format!("- {}: no knee found", s.name),
            }
        })
        .collect();
    if !knees.is_empty() {
        out.push_str("\n## Curves\n\n");
        out.push_str(&knees.join("\n"));
        out.push('\n');
    }
    out.push_str("\nCharts (TTFT and ITL distributions, requests in flight and output token throughput over each run, with the engine's own series where it has /metrics, and each series' curves against load) are in the HTML twin of this report.\n");
    out.push_str("\n## Runs\n");
    for (name, block) in run_blocks(r) {
        out.push_str(&format!("\n### {}\n\n```\n{block}```\n", md(&name)));
    }
    // No raw control character (an imported model name's escape sequence) reaches the file.
    servelab_outputs::term::sanitize(&out).into_owned()
}

/// The self-contained HTML report.
pub fn html(r: &Report) -> String {
    let mut out = String::from("<h2 id=\"verdicts\">Summary of results</h2>\n");
    let blocks = summary_blocks(r);
    if blocks.is_empty() {
        out.push_str("<p>No finding: no run has the metrics the rules need.</p>\n");
    }
    for (scope, verdicts, findings) in blocks {
        out.push_str(&format!("<p>{}</p>\n<ul class=\"findings\">\n", esc(&scope)));
        for v in verdicts {
            out.push_str(&verdict_html(v));
        }
        for f in findings {
            out.push_str(&format!("<li>{} <small>({})</small></li>\n", esc(&f.text), f.rule));
        }
        out.push_str("</ul>\n");
    }
    let views: Vec<&ScenarioView> = shown_views(r).collect();
    if !views.is_empty() {
        out.push_str("<h2 id=\"deployments\">Deployments by scenario</h2>\n");
    }
    for v in views {
        out.push_str(&format!("<h3>{}</h3>\n", esc(&v.workload.name())));
        for line in view_caption(v) {
            out.push_str(&format!("<p>{}</p>\n", esc(&line)));
        }
        out.push_str(&html_table(&deployment_table(v, &r.options)));
        out.push_str("<ul class=\"notes\">\n");
        for n in view_notes(v, &r.options) {
            out.push_str(&format!("<li>{}</li>\n", esc(&n)));
        }
        out.push_str("<li>* best value at that concurrency</li>\n</ul>\n");
        let (t, notes) = pareto_parts(r, v);
        out.push_str(&format!("<p>{}:</p>\n{}", esc(PARETO_HEADING), html_table(&t)));
        if !notes.is_empty() {
            out.push_str("<ul class=\"notes\">\n");
            for n in notes {
                out.push_str(&format!("<li>{}</li>\n", esc(&n)));
            }
            out.push_str("</ul>\n");
        }
        if r.per_deployment {
            for e in &v.entries {
                out.push_str(&format!("<h4>{}</h4>\n", esc(&caption(v, e))));
                out.push_str(&html_table(&published_table(v, e, &r.options)));
            }
        }
        out.push_str("<div class=\"deployment-charts\">\n");
        for c in titled_charts(r, v) {
            out.push_str(&figure(&c));
        }
        out.push_str("</div>\n");
    }
    if !r.detail {
        out.push_str("<h2 id=\"results\">Results</h2>\n");
        out.push_str(&html_table(&summary_table(r)));
        out.push_str(&format!("<p class=\"notes\">{}</p>\n", esc(&brief_note(r))));
        return page(&r.title, &out);
    }
    out.push_str("<h2 id=\"charts\">Charts</h2>\n");
    for c in charts(r) {
        out.push_str(&figure(&c));
    }
    let curves = sweep_charts(r);
    if !curves.is_empty() {
        out.push_str("<h2 id=\"curves\">Curves (each series against load, knee marked)</h2>\n");
        for c in curves {
            out.push_str(&figure(&c));
        }
    }
    out.push_str("<h2 id=\"configuration\">Configuration</h2>\n");
    out.push_str(&html_table(&config_table(r)));
    out.push_str("<h2 id=\"results\">Results</h2>\n");
    out.push_str(&html_table(&summary_table(r)));
    let engines = engine_table(r);
    if !engines.rows.is_empty() {
        out.push_str("<h2 id=\"engine\">Engine (/metrics)</h2>\n");
        out.push_str(&html_table(&engines));
    }
    let gpus = gpu_table(r);
    if !gpus.rows.is_empty() {
        out.push_str("<h2 id=\"gpu\">GPU energy and cost (measured window)</h2>\n");
        out.push_str(&html_table(&gpus));
    }
    let load = load_table(r);
    if !load.rows.is_empty() {
        out.push_str("<h2 id=\"load\">Load (delivered vs configured, steady state)</h2>\n");
        out.push_str(&html_table(&load));
    }
    if let Some(n) = points_note(r) {
        out.push_str(&format!("<p class=\"notes\">{}</p>\n", esc(&n)));
    }
    for (point, c) in r.comparisons.iter().filter(|_| point_sections(r)) {
        out.push_str(&format!("<h2>Comparison at {}</h2>\n", esc(point)));
        out.push_str(&html_table(&comparison_table(c)));
        out.push_str("<ul class=\"notes\">\n");
        for n in notes(c) {
            out.push_str(&format!("<li>{}</li>\n", esc(&n)));
        }
        out.push_str("</ul>\n");
    }
    for point in ranking_points(r).into_iter().filter(|_| point_sections(r)) {
        let t = ranking_table(r, &point);
        if !t.rows.is_empty() {
            out.push_str(&format!("<h2>Rankings at {}</h2>\n", esc(&point)));
            out.push_str(&html_table(&t));
        }
    }
    out.push_str("<h2 id=\"runs\">Runs</h2>\n");
    for (name, block) in run_blocks(r) {
        out.push_str(&format!("<h3>{}</h3>\n<pre>{}</pre>\n", esc(&name), esc(&block)));
    }
    out.push_str("<p class=\"notes\">Generated by servelab report. Verdict and summary rules: docs/store.md.</p>\n");
    page(&r.title, &out)
}
