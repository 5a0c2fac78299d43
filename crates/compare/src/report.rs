//! The report: configuration, summary table, comparisons at each shared load level,
//! rankings, the written summary, and charts, as Markdown and as one self-contained HTML
//! file (inline CSS and SVG, no scripts, nothing fetched).

use servelab_load::Level;
use servelab_metrics::engine::EnginePoint;
use servelab_metrics::request::token_events;
use servelab_metrics::timeline::tokens_per_window;
use servelab_outputs::{Align, Table};
use servelab_records::RequestRecord;
use servelab_sweep::charts::{render_svg, scenario_charts};
use servelab_sweep::run::curve;
use servelab_sweep::{find_knee, KneeRule, PointResult, Role, ScenarioResult};

use crate::compare::{compare, CompareOptions, Comparison};
use crate::data::{RunData, Subject};
use crate::narrative::{written_summary, Finding};
use crate::rank::{group, levels, rankings, LevelRanking, Series};
use crate::render::{comparison_table, notes, num};
use crate::svg::{esc, histogram, line_chart, Line};
use servelab_metrics::HEADLINE;
use servelab_records::LoadSpec;

/// Everything a report shows, computed once; the renderers only format.
#[derive(Debug, Clone)]
pub struct Report {
    pub title: String,
    pub series: Vec<Series>,
    pub comparisons: Vec<(LoadSpec, Comparison)>,
    pub rankings: Vec<LevelRanking>,
    pub findings: Vec<Finding>,
    pub options: CompareOptions,
}

/// Build the report of these runs (grouped by name into series, by load into points).
pub fn build(title: &str, runs: Vec<RunData>, o: &CompareOptions) -> Report {
    let series = group(runs);
    let mut comparisons = Vec::new();
    for load in levels(&series) {
        let subjects: Vec<Subject> = series.iter().filter_map(|s| s.at(&load).cloned()).collect();
        if subjects.len() >= 2 {
            comparisons.push((load, compare(&subjects, o)));
        }
    }
    Report {
        title: title.to_string(),
        rankings: rankings(&series, o),
        findings: written_summary(&series, o),
        series,
        comparisons,
        options: *o,
    }
}

/// Every run of the report, with its display name `series @ load` (and `#n` for repeats).
fn runs(r: &Report) -> Vec<(String, &RunData)> {
    let mut out = Vec::new();
    for s in &r.series {
        for p in &s.points {
            for (i, run) in p.runs.iter().enumerate() {
                let rep = if p.runs.len() > 1 { format!(" #{}", i + 1) } else { String::new() };
                out.push((format!("{} @ {}{rep}", s.name, p.load()), run));
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
        ("run id", |d| d.id.map_or("-".into(), |i| format!("#{i}"))),
        ("status", |d| d.status.clone()),
        ("model", |d| info(d, |i| i.model.clone())),
        ("backend", |d| info(d, |i| i.backend.clone())),
        ("target", |d| info(d, |i| format!("{}{}", i.base_url, i.endpoint))),
        ("dataset", |d| info(d, |i| i.dataset.clone())),
        ("prompts", |d| info(d, |i| i.num_prompts.to_string())),
        ("load", |d| d.load.to_string()),
        ("seed", |d| info(d, |i| i.seed.to_string())),
        ("started", |d| info(d, |i| i.started_at.clone())),
        ("servelab", |d| info(d, |i| i.servelab_version.clone())),
        ("engine", |d| {
            d.config.as_ref().and_then(|c| c.engine.clone()).unwrap_or_else(|| "-".into())
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
        (None, None) => "-".into(),
    }
}

/// Headline metrics: one row per run.
pub fn summary_table(r: &Report) -> Table {
    let mut headers = vec!["run".to_string()];
    headers.extend(HEADLINE.iter().map(|m| m.label()));
    let mut t = Table::new(headers);
    for (name, d) in runs(r) {
        let mut cells = vec![name];
        cells.extend(HEADLINE.iter().map(|m| num(d.headline.get(m))));
        t.push(cells);
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
    let count = |v: Option<f64>| v.map_or("-".to_string(), |x| format!("{x:.0}"));
    let pct = |v: Option<f64>| v.map_or("-".to_string(), |x| format!("{:.1}%", x * 100.0));
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

/// Rankings at one load level: metric → `best (value) > next (value) ...`.
pub fn ranking_table(r: &Report, load: &LoadSpec) -> Table {
    let mut t =
        Table::new(["metric", "ranking (best first)"]).with_align(&[Align::Left, Align::Left]);
    for lr in r.rankings.iter().filter(|l| l.load.to_string() == load.to_string()) {
        if lr.entries.is_empty() {
            continue;
        }
        let order: Vec<String> =
            lr.entries.iter().map(|e| format!("{}. {} ({:.2})", e.rank, e.name, e.value)).collect();
        t.push([lr.metric.label(), order.join(", ")]);
    }
    t
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
/// the knee marked) of every series that has a curve, as SVG.
pub fn sweep_charts(r: &Report) -> Vec<String> {
    r.series
        .iter()
        .filter_map(as_sweep)
        .flat_map(|s| scenario_charts(&s))
        .filter_map(|c| render_svg(&c).ok())
        .map(|svg| format!("<div class=\"sweep-chart\">{}</div>\n", strip_xml_prolog(&svg)))
        .collect()
}

/// An SVG document as an inline element: without the `<?xml ...?>` line HTML does not want.
fn strip_xml_prolog(svg: &str) -> &str {
    match svg.strip_prefix("<?xml") {
        Some(rest) => rest.split_once("?>").map_or(svg, |(_, body)| body.trim_start()),
        None => svg,
    }
}

/// The report's charts, as SVG strings with their titles.
pub fn charts(r: &Report) -> Vec<String> {
    let all = runs(r);
    let dist = |title: &str, pick: fn(&crate::data::Samples) -> Vec<f64>| {
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
        let lines: Vec<Line> = sets
            .iter()
            .map(|(n, v)| Line { name: n.clone(), points: histogram(v, lo, hi, 40) })
            .collect();
        line_chart(title, "milliseconds", "% of samples", &lines, true)
    };
    let mut out = vec![
        dist("TTFT distribution", |s| s.ttft.iter().flatten().copied().collect()),
        dist("ITL distribution (per token)", |s| s.itl.iter().flatten().copied().collect()),
    ];
    let mut conc = Vec::new();
    let mut tps = Vec::new();
    let mut kv = Vec::new();
    for (n, d) in &all {
        if d.records.is_empty() {
            continue;
        }
        let (c, t) = timeline(&d.records, 40);
        conc.push(Line { name: n.clone(), points: c });
        tps.push(Line { name: n.clone(), points: t });
        // The engine's own view on the same time axis (seconds from the first send).
        let Some(e) = d.summary.as_ref().and_then(|s| s.engine.as_ref()) else { continue };
        let origin_s = d.records.iter().filter(|r| !r.warmup).map(|r| r.intended_ns).min();
        let origin_s = origin_s.unwrap_or(0) as f64 / 1e9;
        let series = |f: fn(&EnginePoint) -> Option<f64>, scale: f64| -> Points {
            e.series.iter().filter_map(|p| Some((p.t_s - origin_s, f(p)? * scale))).collect()
        };
        let named = |what: &str| format!("{n} (engine {what})");
        conc.push(Line { name: named("running"), points: series(|p| p.requests_running, 1.0) });
        conc.push(Line { name: named("waiting"), points: series(|p| p.requests_waiting, 1.0) });
        tps.push(Line {
            name: named("/metrics"),
            points: series(|p| p.generation_tokens_per_s, 1.0),
        });
        kv.push(Line { name: n.clone(), points: series(|p| p.kv_cache_usage, 100.0) });
    }
    conc.retain(|l| !l.points.is_empty());
    tps.retain(|l| !l.points.is_empty());
    kv.retain(|l| !l.points.is_empty());
    out.push(line_chart("Requests in flight over the run", "seconds", "requests", &conc, true));
    out.push(line_chart("Output token throughput over the run", "seconds", "tokens/s", &tps, true));
    if !kv.is_empty() {
        out.push(line_chart("Engine KV-cache usage over the run", "seconds", "% used", &kv, true));
    }
    out
}

/// The Markdown report (charts are in the HTML twin).
pub fn markdown(r: &Report) -> String {
    let mut out = format!("# {}\n\n", r.title);
    out.push_str("## Summary\n\n");
    if r.findings.is_empty() {
        out.push_str("No finding: no run has the metrics the rules need.\n");
    }
    for f in &r.findings {
        out.push_str(&format!("- {} ({})\n", f.text, f.rule));
    }
    out.push_str("\n## Configuration\n\n");
    out.push_str(&config_table(r).to_markdown());
    out.push_str("\n## Results\n\n");
    out.push_str(&summary_table(r).to_markdown());
    let engines = engine_table(r);
    if !engines.rows.is_empty() {
        out.push_str("\n## Engine (/metrics)\n\n");
        out.push_str(&engines.to_markdown());
    }
    for (load, c) in &r.comparisons {
        out.push_str(&format!("\n## Comparison at {load}\n\n"));
        out.push_str(&comparison_table(c).to_markdown());
        out.push('\n');
        for n in notes(c) {
            out.push_str(&format!("- {}\n", n.replace('*', "\\*")));
        }
    }
    for load in levels(&r.series) {
        let t = ranking_table(r, &load);
        if t.rows.is_empty() {
            continue;
        }
        out.push_str(&format!("\n## Rankings at {load}\n\n"));
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
    out
}

/// A [`Table`] as an HTML table (the same cells and alignment as its Markdown).
pub fn html_table(t: &Table) -> String {
    let align = |i: usize| match t.align.get(i) {
        Some(Align::Right) => " class=\"num\"",
        Some(Align::Center) => " class=\"mid\"",
        _ => "",
    };
    let mut s = String::from("<table>\n<thead><tr>");
    for (i, h) in t.headers.iter().enumerate() {
        s.push_str(&format!("<th{}>{}</th>", align(i), esc(h)));
    }
    s.push_str("</tr></thead>\n<tbody>\n");
    for row in &t.rows {
        s.push_str("<tr>");
        for (i, c) in row.iter().enumerate() {
            s.push_str(&format!("<td{}>{}</td>", align(i), esc(c)));
        }
        s.push_str("</tr>\n");
    }
    s.push_str("</tbody>\n</table>\n");
    s
}

const CSS: &str = "body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem auto;max-width:1100px;padding:0 1rem;color:#222}\
h1{font-size:1.6rem}h2{font-size:1.2rem;margin-top:2rem;border-bottom:1px solid #ddd;padding-bottom:.2rem}\
table{border-collapse:collapse;font-size:.85rem;margin:.5rem 0;display:block;overflow-x:auto}\
th,td{border:1px solid #ddd;padding:.25rem .5rem;white-space:nowrap}th{background:#f4f4f4}\
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}\
ul.findings li{margin:.3rem 0}.notes{color:#555;font-size:.85rem}\
svg.chart{display:block;margin:1rem 0;max-width:100%;height:auto}\
.sweep-chart svg{display:block;margin:1rem 0;max-width:100%;height:auto}\
svg .grid{stroke:#eee}svg .axis{stroke:#888}svg .tick,svg .legend{font-size:11px;fill:#444}\
svg .label{font-size:12px;fill:#333}svg .chart-title{font-size:14px;font-weight:600;fill:#222}";

/// The self-contained HTML report.
pub fn html(r: &Report) -> String {
    let mut out = format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{t}</title>\n<style>{CSS}</style>\n</head>\n<body>\n<h1>{t}</h1>\n",
        t = esc(&r.title)
    );
    out.push_str("<h2 id=\"summary\">Summary</h2>\n<ul class=\"findings\">\n");
    for f in &r.findings {
        out.push_str(&format!("<li>{} <small>({})</small></li>\n", esc(&f.text), f.rule));
    }
    out.push_str("</ul>\n<h2 id=\"charts\">Charts</h2>\n");
    for c in charts(r) {
        out.push_str(&c);
    }
    let curves = sweep_charts(r);
    if !curves.is_empty() {
        out.push_str("<h2 id=\"curves\">Curves (each series against load, knee marked)</h2>\n");
        for c in curves {
            out.push_str(&c);
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
    for (load, c) in &r.comparisons {
        out.push_str(&format!("<h2>Comparison at {}</h2>\n", esc(&load.to_string())));
        out.push_str(&html_table(&comparison_table(c)));
        out.push_str("<ul class=\"notes\">\n");
        for n in notes(c) {
            out.push_str(&format!("<li>{}</li>\n", esc(&n)));
        }
        out.push_str("</ul>\n");
    }
    for load in levels(&r.series) {
        let t = ranking_table(r, &load);
        if !t.rows.is_empty() {
            out.push_str(&format!("<h2>Rankings at {}</h2>\n", esc(&load.to_string())));
            out.push_str(&html_table(&t));
        }
    }
    out.push_str("<p class=\"notes\">Generated by servelab report. Written summary rules: docs/store.md.</p>\n</body>\n</html>\n");
    out
}
