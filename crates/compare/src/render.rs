//! The comparison as text: one [`Table`] (servelab-outputs' writer) for the terminal and
//! Markdown, plus notes; or JSON.

use servelab_outputs::fmt::{num, MISSING};
use servelab_outputs::Table;

use crate::compare::{Comparison, Delta, DeltaVerdict, Noise};

/// `+1.23 (+4.5%) better [+0.40, +2.06]`: the difference, its verdict, and the interval it
/// was judged on (so "within noise" and "worse" can be checked by eye).
pub fn delta_cell(d: Option<&Delta>) -> String {
    let Some(d) = d else { return MISSING.into() };
    let word = match d.verdict {
        DeltaVerdict::Better => "better",
        DeltaVerdict::Worse => "worse",
        DeltaVerdict::WithinNoise => "within noise",
        DeltaVerdict::Unknown => "no noise estimate",
    };
    worded(d, word)
}

/// The difference between a prediction and a measurement: `+1.23 (+4.5%) off`, never
/// "better" or "worse" (a prediction's error is not a deployment being faster).
pub fn error_cell(d: Option<&Delta>) -> String {
    d.map_or_else(|| MISSING.into(), |d| worded(d, "off"))
}

fn worded(d: &Delta, word: &str) -> String {
    let pct = d.pct.map(|p| format!(" ({p:+.1}%)")).unwrap_or_default();
    let band = d.interval.map(|i| format!(" [{:+.2}, {:+.2}]", i.lo, i.hi)).unwrap_or_default();
    format!("{:+.2}{pct} {word}{band}", d.abs)
}

/// Metric rows × (baseline, then value and delta for each other subject; the delta carries
/// its interval in brackets). The best value
/// of each metric is marked `*`.
pub fn comparison_table(c: &Comparison) -> Table {
    let mut headers = vec!["Metric".to_string()];
    for (i, s) in c.subjects.iter().enumerate() {
        if i == 0 {
            headers.push(format!("{} (baseline)", s.name));
        } else {
            headers.push(s.name.clone());
            headers.push(format!("Δ {}", s.name));
        }
    }
    let mut t = Table::new(headers);
    // A prediction beside a measurement is not a contest: no best value is marked.
    let mixed = c.mixes_predictions();
    for row in &c.rows {
        let mut cells = vec![row.metric.label()];
        for (i, v) in row.values.iter().enumerate() {
            let star =
                if row.best == Some(i) && c.subjects.len() > 1 && !mixed { " *" } else { "" };
            cells.push(format!("{}{star}", num(*v)));
            if i > 0 {
                let vs_prediction = c.subjects[i].predicted != c.subjects[0].predicted;
                let cell = if vs_prediction { error_cell } else { delta_cell };
                cells.push(cell(row.deltas[i].as_ref()));
            }
        }
        t.push(cells);
    }
    t
}

/// What each subject is, which are rejected, and how noise was judged.
pub fn notes(c: &Comparison) -> Vec<String> {
    let mut out = Vec::new();
    for s in &c.subjects {
        let sr = s.success_rate.map_or("unknown".into(), |r| format!("{:.1}%", r * 100.0));
        let runs = if s.runs > 1 { format!(", {} repeated runs", s.runs) } else { String::new() };
        let rej = if s.rejected {
            format!(
                " - REJECTED: below the minimum success rate {:.1}%, never the winner",
                c.options.min_success_rate * 100.0
            )
        } else {
            String::new()
        };
        let load = s.identity.as_ref().map_or_else(|| s.load.to_string(), |i| i.load.clone());
        out.push(format!("{}: load {load}{runs}, success rate {sr}{rej}", s.name));
    }
    if let Some(base) = c.subjects.first() {
        for s in c.subjects.iter().skip(1).filter(|s| s.predicted != base.predicted) {
            let (p, m) = if s.predicted { (&s.name, &base.name) } else { (&base.name, &s.name) };
            out.push(format!(
                "{p} is a prediction and {m} a measurement: their differences are the \
                 prediction's error (\"off\"), not one being better or worse"
            ));
        }
    }
    if !c.differences.is_empty() {
        out.push("warning: NOT THE SAME WORKLOAD AND LOAD as the baseline; differences include their effect:".into());
        for d in &c.differences {
            out.push(format!("  {d}"));
        }
    }
    let uses = |f: fn(&Noise) -> bool| {
        c.rows.iter().flat_map(|r| r.deltas.iter().flatten()).any(|d| f(&d.noise))
    };
    let level = c.options.level * 100.0;
    let how = format!("{} resamples, seed {}", c.options.resamples, c.options.seed);
    if uses(|n| matches!(n, Noise::FewRepeats { .. })) {
        out.push(format!(
            "noise: {level:.0}% Welch t interval over repeated runs (fewer than 5 a side: a \
             bootstrap of so few runs would understate it)"
        ));
    }
    if uses(|n| matches!(n, Noise::Repeats { .. })) {
        out.push(format!("noise: {level:.0}% bootstrap interval over repeated runs ({how})"));
    }
    if uses(|n| matches!(n, Noise::Requests { .. })) {
        out.push(format!("noise: {level:.0}% bootstrap interval over per-request samples ({how})"));
    }
    if uses(|n| matches!(n, Noise::Unknown)) {
        out.push("no noise estimate: a run-level metric of single runs (repeat runs under one label to get one), or a run without per-request records".into());
    }
    let mixed = c.mixes_predictions();
    if !mixed {
        out.push("* best value among runs that are not rejected".into());
    }
    out
}

/// Terminal output.
pub fn render_plain(c: &Comparison) -> String {
    let mut out = comparison_table(c).to_plain();
    out.push('\n');
    for n in notes(c) {
        out.push_str(&n);
        out.push('\n');
    }
    out
}

/// Markdown output.
pub fn render_markdown(c: &Comparison) -> String {
    let mut out = comparison_table(c).to_markdown();
    out.push('\n');
    for n in notes(c) {
        out.push_str(&format!("- {}\n", n.replace('*', "\\*")));
    }
    out
}

/// JSON output (every value, delta, interval and verdict).
pub fn render_json(c: &Comparison) -> String {
    let mut s = serde_json::to_string_pretty(c).unwrap_or_default();
    s.push('\n');
    s
}

/// Several comparisons, one per workload and load (see [`crate::pair`]), as text: each
/// under its heading (`## ...` in Markdown), then the subjects left unmatched. One
/// comparison without a heading renders as `one` renders it.
pub fn render_points(
    points: &[(Option<String>, Comparison)],
    unmatched: &[String],
    markdown: bool,
) -> String {
    let one = if markdown { render_markdown } else { render_plain };
    let mut out = String::new();
    for (i, (heading, c)) in points.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        if let Some(h) = heading {
            out.push_str(&if markdown { format!("## {h}\n\n") } else { format!("== {h} ==\n") });
        }
        out.push_str(&one(c));
    }
    if !unmatched.is_empty() {
        let bullet = if markdown { "- " } else { "  " };
        out.push_str("\nnot compared (no run of the same workload and load in every operand):\n");
        for u in unmatched {
            out.push_str(&format!("{bullet}{u}\n"));
        }
    }
    out
}

/// Several comparisons as JSON: one comparison without a heading as [`render_json`] gives
/// it; otherwise `{"points": [{"point": heading, "comparison": ...}], "unmatched": [...]}`.
pub fn render_points_json(points: &[(Option<String>, Comparison)], unmatched: &[String]) -> String {
    if let [(None, c)] = points {
        if unmatched.is_empty() {
            return render_json(c);
        }
    }
    let v = serde_json::json!({
        "points": points
            .iter()
            .map(|(h, c)| serde_json::json!({ "point": h, "comparison": c }))
            .collect::<Vec<_>>(),
        "unmatched": unmatched,
    });
    let mut s = serde_json::to_string_pretty(&v).unwrap_or_default();
    s.push('\n');
    s
}
