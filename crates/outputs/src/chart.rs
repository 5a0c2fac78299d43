//! Charts: one model ([`Chart`]: titled axes, series drawn as lines or steps, a marked point)
//! and one backend (plotters) that draws it as SVG (inline in reports) or PNG (files).
//!
//! Text is drawn with a font compiled into the binary (a DejaVu Sans subset under `assets/`),
//! so charts render the same on a machine with no fonts installed.

use std::path::Path;
use std::sync::OnceLock;

use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// DejaVu Sans, cut to Latin-1 and a few symbols (license in `assets/LICENSE-DejaVu.txt`).
static FONT: &[u8] = include_bytes!("../assets/DejaVuSans-subset.ttf");
const FAMILY: &str = "sans-serif";
/// Chart size in pixels.
pub const SIZE: (u32, u32) = (960, 600);

/// The Pareto front's line ([`Style::Front`]): dark grey, apart from the series' colours.
const FRONT_INK: RGBColor = RGBColor(60, 60, 60);
/// Opacity of a faded point (off the front).
pub const FADED: f64 = 0.3;
/// Opacity of a faded point's note: lighter than a front point's, still readable.
const FADED_NOTE: f64 = 0.6;

/// Line colours in order: the colour-blind-safe Okabe–Ito palette.
const PALETTE: [RGBColor; 8] = [
    RGBColor(0, 114, 178),
    RGBColor(230, 159, 0),
    RGBColor(0, 158, 115),
    RGBColor(213, 94, 0),
    RGBColor(204, 121, 167),
    RGBColor(86, 180, 233),
    RGBColor(240, 228, 66),
    RGBColor(0, 0, 0),
];

/// How a series is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Style {
    /// Straight segments between points, each point marked.
    #[default]
    Line,
    /// A step line (histograms, per-window series): flat until the next point, unmarked.
    Step,
    /// Markers only, no line (points of a scatter, e.g. the deployments on a Pareto chart).
    Points,
    /// A Pareto front's staircase in dark grey, unmarked: given its points with x rising and
    /// y falling, down from each point to the next one's y, then across to it (the edge of
    /// what the points reach: at an x between two points, the best y is the next point's).
    Front,
}

/// One line of a chart.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// Name shown in the legend.
    pub label: String,
    /// `(x, y)` points in drawing order.
    pub points: Vec<(f64, f64)>,
    /// Text beside each point (e.g. its load when x is not the load), or empty.
    pub notes: Vec<String>,
    /// Lines or steps.
    pub style: Style,
    /// Points drawn faded (lower opacity), e.g. those off a Pareto front; empty: none.
    pub faded: Vec<bool>,
}

impl Series {
    /// A plain line through `points`.
    pub fn line(label: impl Into<String>, points: Vec<(f64, f64)>) -> Series {
        Series {
            label: label.into(),
            points,
            notes: Vec::new(),
            style: Style::Line,
            faded: Vec::new(),
        }
    }

    /// A step line through `points`.
    pub fn steps(label: impl Into<String>, points: Vec<(f64, f64)>) -> Series {
        Series {
            label: label.into(),
            points,
            notes: Vec::new(),
            style: Style::Step,
            faded: Vec::new(),
        }
    }

    /// Markers at `points`, no line.
    pub fn points(label: impl Into<String>, points: Vec<(f64, f64)>) -> Series {
        Series { style: Style::Points, ..Series::line(label, points) }
    }

    /// A Pareto front's staircase through `points` (x rising, y falling).
    pub fn front(label: impl Into<String>, points: Vec<(f64, f64)>) -> Series {
        Series { style: Style::Front, ..Series::line(label, points) }
    }

    /// Whether point `i` is drawn faded.
    pub fn is_faded(&self, i: usize) -> bool {
        self.faded.get(i).copied().unwrap_or(false)
    }
}

/// A point to point out (the knee): drawn as a ring with a label, or as a vertical dashed
/// line when `y` is `None`.
#[derive(Debug, Clone, PartialEq)]
pub struct Mark {
    /// Where it is on the x axis.
    pub x: f64,
    /// Where it is on the y axis; `None` for a vertical line at `x`.
    pub y: Option<f64>,
    /// Text shown with it.
    pub label: String,
}

/// Everything a chart shows; the renderers only draw it.
#[derive(Debug, Clone, PartialEq)]
pub struct Chart {
    /// File stem, e.g. `1000x100-ttft`.
    pub name: String,
    /// Title above the plot.
    pub title: String,
    /// Caption of the x axis (with its unit).
    pub x_label: String,
    /// Caption of the y axis (with its unit).
    pub y_label: String,
    /// The lines drawn, in legend order.
    pub series: Vec<Series>,
    /// Log axes: base 2 for x when it is a load axis, base 10 otherwise.
    pub x_log: Option<f64>,
    /// Log base of the y axis; `None` for a linear axis.
    pub y_log: Option<f64>,
    /// The point to point out, if any.
    pub mark: Option<Mark>,
}

/// A corner of the plot, for the legend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Corner {
    /// Top left.
    UpperLeft,
    /// Top right.
    UpperRight,
    /// Bottom right.
    LowerRight,
    /// Bottom left.
    LowerLeft,
}

/// True when positive values span at least `ratio` (max/min), i.e. a log axis reads better.
pub fn spans(values: impl IntoIterator<Item = f64>, ratio: f64) -> bool {
    let (lo, hi) = bounds(values);
    lo > 0.0 && hi / lo >= ratio
}

fn bounds(values: impl IntoIterator<Item = f64>) -> (f64, f64) {
    values
        .into_iter()
        .filter(|v| v.is_finite())
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| (lo.min(v), hi.max(v)))
}

/// One label per distinct spot: points within 3% of the axes' spans of an earlier point
/// share its label (`4, 8, 16`), so labels of overlapping points do not print on each other.
pub fn merge_notes(points: &[(f64, f64)], notes: &[String]) -> Vec<String> {
    let (x0, x1) = bounds(points.iter().map(|p| p.0));
    let (y0, y1) = bounds(points.iter().map(|p| p.1));
    let (sx, sy) = ((x1 - x0).abs().max(x1.abs() * 0.05), (y1 - y0).abs().max(y1.abs() * 0.05));
    let mut out: Vec<String> = vec![String::new(); points.len()];
    let mut owner: Vec<usize> = (0..points.len()).collect();
    for i in 0..points.len() {
        for j in 0..i {
            let near = (points[i].0 - points[j].0).abs() <= 0.03 * sx
                && (points[i].1 - points[j].1).abs() <= 0.03 * sy;
            if near {
                owner[i] = owner[j];
                break;
            }
        }
        let o = owner[i];
        let n = notes.get(i).cloned().unwrap_or_default();
        out[o] = if out[o].is_empty() { n } else { format!("{}, {n}", out[o]) };
    }
    out
}

/// Where a point's note goes: its text's anchor `(dx, dy)` pixels from the point, and which
/// side of the text the anchor is on (`left`: the text runs right of it; `below`: the text
/// hangs under it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotePlace {
    /// Horizontal offset from the point, pixels.
    pub dx: i32,
    /// Vertical offset from the point, pixels (down is positive).
    pub dy: i32,
    /// The text starts at the anchor (else it ends there).
    pub left: bool,
    /// The text's top is at the anchor (else its bottom).
    pub below: bool,
}

/// Pixel size of a note's text at the chart's note font (15 px DejaVu Sans, whose digits are
/// 0.64 em wide): generous, so a placement that clears this box clears the drawn text.
fn note_box(text: &str) -> (i32, i32) {
    (10 * text.chars().count() as i32 + 2, 18)
}

/// The candidate places of a note, most preferred first: above right, above left, below right,
/// below left, then the same farther out.
const NOTE_PLACES: [NotePlace; 10] = [
    NotePlace { dx: 10, dy: -10, left: true, below: false },
    NotePlace { dx: -10, dy: -10, left: false, below: false },
    NotePlace { dx: 10, dy: 10, left: true, below: true },
    NotePlace { dx: -10, dy: 10, left: false, below: true },
    NotePlace { dx: 0, dy: -12, left: true, below: false },
    NotePlace { dx: 0, dy: 12, left: false, below: true },
    NotePlace { dx: 12, dy: -30, left: true, below: false },
    NotePlace { dx: -12, dy: -30, left: false, below: false },
    NotePlace { dx: 12, dy: 30, left: true, below: true },
    NotePlace { dx: -12, dy: 30, left: false, below: true },
];

/// The marked point's ring and its label, as lines for [`place_notes`] to keep notes off: the
/// whole area they may cover (a row every 4 pixels), so a note cannot sit inside it unseen.
pub fn mark_obstacle((cx, cy): (i32, i32), label: &str) -> Vec<Vec<(i32, i32)>> {
    let w = note_box(label).0;
    (cy - 14..=cy + 40).step_by(4).map(|y| vec![(cx - w, y), (cx + w, y)]).collect()
}

/// Places the notes `notes` (pixel point, text) so that none sits on a plotted line, a marked
/// point or another note where a free place exists, and none leaves the plot `area` (pixel
/// `(x0, y0), (x1, y1)`): each takes the first of ten places around its point (above right,
/// above left, below right, below left, above, below, then the four corners farther out)
/// whose text box covers the fewest samples of `lines` (pixel polylines) and overlaps no
/// earlier note, preferring to stay inside the plot. Returns one place per note, in order.
pub fn place_notes(
    lines: &[Vec<(i32, i32)>],
    notes: &[((i32, i32), String)],
    area: ((i32, i32), (i32, i32)),
) -> Vec<NotePlace> {
    // Every line sampled every few pixels, so a segment crossing a box is seen.
    let mut samples: Vec<(i32, i32)> = Vec::new();
    for l in lines {
        samples.extend(l.iter().copied());
        for seg in l.windows(2) {
            let (a, b) = (seg[0], seg[1]);
            let len = (b.0 - a.0).abs().max((b.1 - a.1).abs());
            let n = (len / 3).clamp(1, 2000);
            for i in 1..n {
                let t = f64::from(i) / f64::from(n);
                let lerp = |u: i32, v: i32| u + (f64::from(v - u) * t).round() as i32;
                samples.push((lerp(a.0, b.0), lerp(a.1, b.1)));
            }
        }
    }
    let rect = |(px, py): (i32, i32), text: &str, p: NotePlace| {
        let (w, h) = note_box(text);
        let (ax, ay) = (px + p.dx, py + p.dy);
        let x0 = if p.left { ax } else { ax - w };
        let y0 = if p.below { ay } else { ay - h };
        (x0, y0, x0 + w, y0 + h)
    };
    let overlap = |a: (i32, i32, i32, i32), b: (i32, i32, i32, i32)| {
        a.0 < b.2 && b.0 < a.2 && a.1 < b.3 && b.1 < a.3
    };
    let ((ax0, ay0), (ax1, ay1)) = area;
    let mut placed: Vec<(i32, i32, i32, i32)> = Vec::new();
    let mut out = Vec::with_capacity(notes.len());
    for (point, text) in notes {
        if text.is_empty() {
            out.push(NOTE_PLACES[0]);
            continue;
        }
        let cost = |p: NotePlace| {
            let r = rect(*point, text, p);
            let on_lines =
                samples.iter().filter(|&&(x, y)| x >= r.0 && x <= r.2 && y >= r.1 && y <= r.3);
            let on_notes = placed.iter().filter(|&&q| overlap(r, q)).count();
            let outside = r.0 < ax0 || r.2 > ax1 || r.1 < ay0 || r.3 > ay1;
            (usize::from(outside), on_notes, on_lines.count())
        };
        let best = NOTE_PLACES
            .iter()
            .copied()
            .enumerate()
            .min_by_key(|&(i, p)| {
                let (outside, on_notes, on_lines) = cost(p);
                // Off the plot is worst, then on another note, then on a line; then order.
                (outside, on_notes + on_lines, i)
            })
            .map_or(NOTE_PLACES[0], |(_, p)| p);
        placed.push(rect(*point, text, best));
        out.push(best);
    }
    out
}

fn register_font() -> Result<(), String> {
    static DONE: OnceLock<Result<(), String>> = OnceLock::new();
    DONE.get_or_init(|| {
        plotters::style::register_font(FAMILY, FontStyle::Normal, FONT)
            .map_err(|_| "the embedded font is not a valid TrueType font".to_string())
    })
    .clone()
}

/// Axis range with a margin; positive for log axes; never empty.
fn range(values: impl IntoIterator<Item = f64>, log: bool, from_zero: bool) -> (f64, f64) {
    let (lo, hi) = bounds(values);
    if !(lo.is_finite() && hi.is_finite()) {
        return (0.0, 1.0);
    }
    if log {
        let lo = if lo > 0.0 { lo } else { hi.max(1.0) / 1000.0 };
        return (lo / 1.3, hi.max(lo) * 1.3);
    }
    let lo = if from_zero { lo.min(0.0) } else { lo };
    let span = (hi - lo).abs().max(hi.abs() * 0.1).max(1e-9);
    let lo = if from_zero { lo } else { lo - span * 0.08 };
    (lo, hi + span * 0.12)
}

/// Position of `v` in `[lo, hi]` as a fraction, on a log or linear axis.
fn frac(v: f64, lo: f64, hi: f64, log: bool) -> f64 {
    if log && v > 0.0 && lo > 0.0 {
        (v.ln() - lo.ln()) / (hi.ln() - lo.ln())
    } else {
        (v - lo) / (hi - lo)
    }
}

/// The corner whose legend box would cover the fewest samples of the plotted lines (first
/// in the order upper left, upper right, lower right, lower left on a tie).
pub fn legend_corner(c: &Chart, (x0, x1): (f64, f64), (y0, y1): (f64, f64)) -> Corner {
    let entries = c.series.len() + usize::from(c.mark.as_ref().is_some_and(|m| m.y.is_none()));
    let (w, h) = (0.45, 0.05 + 0.065 * entries as f64);
    let mut samples = Vec::new();
    for s in &c.series {
        let pts: Vec<(f64, f64)> = s
            .points
            .iter()
            .map(|&(x, y)| (frac(x, x0, x1, c.x_log.is_some()), frac(y, y0, y1, c.y_log.is_some())))
            .collect();
        samples.extend(pts.iter().copied());
        for seg in pts.windows(2) {
            for i in 1..10 {
                let t = f64::from(i) / 10.0;
                let (a, b) = (seg[0], seg[1]);
                samples.push((a.0 + (b.0 - a.0) * t, a.1 + (b.1 - a.1) * t));
            }
        }
    }
    let inside = |corner: Corner| {
        let (left, top) = match corner {
            Corner::UpperLeft => (true, true),
            Corner::UpperRight => (false, true),
            Corner::LowerRight => (false, false),
            Corner::LowerLeft => (true, false),
        };
        samples
            .iter()
            .filter(|&&(x, y)| {
                let in_x = if left { x <= w } else { x >= 1.0 - w };
                let in_y = if top { y >= 1.0 - h } else { y <= h };
                in_x && in_y
            })
            .count()
    };
    let order = [Corner::UpperLeft, Corner::UpperRight, Corner::LowerRight, Corner::LowerLeft];
    order.into_iter().min_by_key(|&k| inside(k)).unwrap_or(Corner::UpperLeft)
}

/// Labelled ticks of a log axis over `[lo, hi]`: powers of two for base 2, and 1-2-5 steps
/// (…, 100, 200, 500, 1000, …) otherwise, so a two-decade axis still has several labels.
pub fn log_ticks(lo: f64, hi: f64, base: f64) -> Vec<f64> {
    if !(lo > 0.0 && hi > lo && hi.is_finite()) {
        return Vec::new();
    }
    let steps: &[f64] = if base == 2.0 { &[1.0] } else { &[1.0, 2.0, 5.0] };
    let step: f64 = if base == 2.0 { 2.0 } else { 10.0 };
    let mut decade = step.powf((lo.ln() / step.ln()).floor());
    let mut out = Vec::new();
    while decade <= hi {
        for m in steps {
            let v = decade * m;
            if v >= lo && v <= hi {
                out.push(v);
            }
        }
        decade *= step;
    }
    out
}

/// How many labels a linear x axis over `[lo, hi]` gets: 12, or when every value is a whole
/// number (steps, runs) no more than the whole numbers in it, so that no label falls between
/// two of them (a step 2.5 means nothing).
pub fn x_label_count(lo: f64, hi: f64, whole: bool) -> usize {
    if !(whole && lo.is_finite() && hi.is_finite()) {
        return 12;
    }
    let n = (hi.floor() - lo.ceil() + 1.0).max(1.0);
    (n as usize).min(12)
}

/// Short tick labels: `2`, `1.5`, `250`, `2k`, `12.5k`, `0.05`.
pub fn tick(v: f64) -> String {
    let a = v.abs();
    if a >= 1000.0 {
        format!("{}k", trim(v / 1000.0, 1))
    } else if a >= 100.0 || a == 0.0 {
        format!("{v:.0}")
    } else if a >= 1.0 {
        trim(v, 1)
    } else {
        trim(v, 3)
    }
}

fn trim(v: f64, decimals: usize) -> String {
    let s = format!("{v:.decimals$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

fn draw<DB, X, Y>(
    root: &DrawingArea<DB, Shift>,
    c: &Chart,
    legend: Corner,
    x_labels: usize,
    x: X,
    y: Y,
) -> Result<(), String>
where
    DB: DrawingBackend,
    X: AsRangedCoord<Value = f64>,
    Y: AsRangedCoord<Value = f64>,
    X::CoordDescType: ValueFormatter<f64>,
    Y::CoordDescType: ValueFormatter<f64>,
{
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    root.fill(&WHITE).map_err(e)?;
    let empty = c.series.iter().all(|s| s.points.is_empty());
    let title = if empty { format!("{} (no data)", c.title) } else { c.title.clone() };
    let mut chart = ChartBuilder::on(root)
        .caption(&title, (FAMILY, 26))
        .margin(18)
        .x_label_area_size(56)
        .y_label_area_size(84)
        .build_cartesian_2d(x, y)
        .map_err(e)?;
    let (xr, yr) = (chart.x_range(), chart.y_range());
    chart
        .configure_mesh()
        .x_desc(&c.x_label)
        .y_desc(&c.y_label)
        .axis_desc_style((FAMILY, 19))
        .label_style((FAMILY, 16))
        .x_labels(x_labels)
        .y_labels(12)
        .x_label_formatter(&|v| tick(*v))
        .y_label_formatter(&|v| tick(*v))
        .light_line_style(RGBColor(236, 236, 236))
        .bold_line_style(RGBColor(210, 210, 210))
        .draw()
        .map_err(e)?;
    // Every note's place, chosen off the plotted lines and the other notes (in pixels).
    let px = |p: &(f64, f64)| chart.backend_coord(p);
    let mut lines: Vec<Vec<(i32, i32)>> = c
        .series
        .iter()
        .flat_map(|s| match s.style {
            // Each marker on its own, so a note keeps off the other points.
            Style::Points => s.points.iter().map(|p| vec![px(p)]).collect(),
            _ => vec![drawn_path(s).iter().map(px).collect()],
        })
        .collect();
    if let Some(Mark { x, y: Some(y), label }) = &c.mark {
        lines.extend(mark_obstacle(px(&(*x, *y)), label));
    }
    let notes: Vec<((i32, i32), String)> = c
        .series
        .iter()
        .flat_map(|s| s.points.iter().zip(&s.notes).map(|(p, n)| (px(p), n.clone())))
        .collect();
    let area = chart.plotting_area().get_pixel_range();
    let area = ((area.0.start, area.1.start), (area.0.end, area.1.end));
    let all_places = place_notes(&lines, &notes, area);
    // Where each series' notes start among the places (they were placed in series order).
    let starts: Vec<usize> = c
        .series
        .iter()
        .scan(0, |k, s| {
            let at = *k;
            *k += s.points.len().min(s.notes.len());
            Some(at)
        })
        .collect();
    // A front goes under the points it joins: drawn (and listed in the legend) first. The
    // other series keep the palette's order among themselves.
    let (fronts, rest): (Vec<usize>, Vec<usize>) =
        (0..c.series.len()).partition(|&i| c.series[i].style == Style::Front);
    for i in fronts.into_iter().chain(rest) {
        let s = &c.series[i];
        let mut places = all_places.get(starts[i]..).unwrap_or_default().iter().copied();
        let nth = c.series[..i].iter().filter(|x| x.style != Style::Front).count();
        let color = match s.style {
            Style::Front => FRONT_INK,
            _ => PALETTE[nth % PALETTE.len()],
        };
        let style = ShapeStyle::from(color).stroke_width(3);
        let path = drawn_path(s);
        // A faded point is drawn at lower opacity, its note too (still readable).
        let alpha = |k: usize| if s.is_faded(k) { FADED } else { 1.0 };
        let marker = |k: usize, p: (f64, f64)| Circle::new(p, 5, color.mix(alpha(k)).filled());
        if s.style == Style::Points {
            chart
                .draw_series(s.points.iter().enumerate().map(|(k, &p)| marker(k, p)))
                .map_err(e)?
                .label(s.label.as_str())
                .legend(move |(x, y)| Circle::new((x + 12, y), 5, color.filled()));
        } else {
            chart
                .draw_series(LineSeries::new(path, style))
                .map_err(e)?
                .label(s.label.as_str())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 24, y)], style));
        }
        if s.style == Style::Line {
            chart
                .draw_series(s.points.iter().enumerate().map(|(k, &p)| marker(k, p)))
                .map_err(e)?;
        }
        let (ink, faded_ink) = (color.mix(1.0), color.mix(FADED_NOTE));
        let note = TextStyle::from((FAMILY, 15)).color(&ink);
        let faded_note = TextStyle::from((FAMILY, 15)).color(&faded_ink);
        // Each note where `place_notes` found room: off the lines, the other notes and the
        // plot's edges.
        let texts: Vec<_> = s
            .points
            .iter()
            .zip(&s.notes)
            .enumerate()
            .map(|(k, (&p, n))| {
                let at = places.next().unwrap_or(NOTE_PLACES[0]);
                let h = if at.left { HPos::Left } else { HPos::Right };
                let v = if at.below { VPos::Top } else { VPos::Bottom };
                let note_style = if s.is_faded(k) { &faded_note } else { &note };
                EmptyElement::at(p)
                    + Text::new(n.clone(), (at.dx, at.dy), note_style.pos(Pos::new(h, v)))
            })
            .collect();
        chart.draw_series(texts).map_err(e)?;
    }
    if let Some(m) = &c.mark {
        let ink = RGBColor(90, 90, 90);
        let text = TextStyle::from((FAMILY, 17)).color(&ink);
        match m.y {
            Some(yv) => {
                chart.draw_series([Circle::new((m.x, yv), 12, ink.stroke_width(3))]).map_err(e)?;
                // Label on the side with room: left of a mark in the right half.
                // Below the ring, on the side with room: left of a mark in the right half.
                let right_half = m.x > (xr.start + xr.end) / 2.0;
                let (dx, text) = if right_half {
                    (6, text.pos(Pos::new(HPos::Right, VPos::Top)))
                } else {
                    (-6, text.pos(Pos::new(HPos::Left, VPos::Top)))
                };
                chart
                    .draw_series([
                        EmptyElement::at((m.x, yv)) + Text::new(m.label.clone(), (dx, 18), text)
                    ])
                    .map_err(e)?;
            }
            None => {
                let line = [(m.x, yr.start), (m.x, yr.end)];
                chart
                    .draw_series(DashedLineSeries::new(line, 8, 6, ink.stroke_width(2)))
                    .map_err(e)?
                    .label(m.label.as_str())
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 24, y)], ink.stroke_width(2))
                    });
            }
        }
    }
    chart
        .configure_series_labels()
        .position(match legend {
            Corner::UpperLeft => SeriesLabelPosition::UpperLeft,
            Corner::UpperRight => SeriesLabelPosition::UpperRight,
            Corner::LowerRight => SeriesLabelPosition::LowerRight,
            Corner::LowerLeft => SeriesLabelPosition::LowerLeft,
        })
        .label_font((FAMILY, 16))
        .background_style(WHITE.mix(0.9))
        .border_style(RGBColor(180, 180, 180))
        .draw()
        .map_err(e)?;
    root.present().map_err(e)?;
    Ok(())
}

fn draw_any<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, c: &Chart) -> Result<(), String> {
    let xs = || {
        c.series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.0))
            .chain(c.mark.as_ref().map(|m| m.x))
    };
    let ys = || {
        c.series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.1))
            .chain(c.mark.as_ref().and_then(|m| m.y))
    };
    let (x0, x1) = range(xs(), c.x_log.is_some(), false);
    let (y0, y1) = range(ys(), c.y_log.is_some(), true);
    let legend = legend_corner(c, (x0, x1), (y0, y1));
    let log = |lo: f64, hi: f64, base: f64| {
        (lo..hi).log_scale().base(base).with_key_points(log_ticks(lo, hi, base))
    };
    // A linear x of whole numbers only (steps, runs) is labelled at whole numbers only.
    let whole = xs().next().is_some() && xs().all(|x| x.fract() == 0.0);
    let n = if c.x_log.is_some() { 12 } else { x_label_count(x0, x1, whole) };
    match (c.x_log, c.y_log) {
        (Some(bx), Some(by)) => draw(root, c, legend, n, log(x0, x1, bx), log(y0, y1, by)),
        (Some(bx), None) => draw(root, c, legend, n, log(x0, x1, bx), y0..y1),
        (None, Some(by)) => draw(root, c, legend, n, x0..x1, log(y0, y1, by)),
        (None, None) => draw(root, c, legend, n, x0..x1, y0..y1),
    }
}

/// A chart that could not be drawn.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("chart {name}: {message}")]
pub struct ChartError {
    /// The chart's file stem.
    pub name: String,
    /// What went wrong.
    pub message: String,
}

/// The line a series draws through its points, by its style.
fn drawn_path(s: &Series) -> Vec<(f64, f64)> {
    match s.style {
        Style::Line | Style::Points => s.points.clone(),
        Style::Step => step_path(&s.points),
        Style::Front => front_steps(&s.points),
    }
}

/// `(x0, y0), (x1, y1)` → `(x0, y0), (x1, y0), (x1, y1)`: each value holds until the next.
fn step_path(points: &[(f64, f64)]) -> Vec<(f64, f64)> {
    stairs(points, |(_, y0), (x1, _)| (x1, y0))
}

/// `(x0, y0), (x1, y1)` → `(x0, y0), (x0, y1), (x1, y1)`: a Pareto front's staircase, down
/// from each point to the next one's y, then across to it.
pub fn front_steps(points: &[(f64, f64)]) -> Vec<(f64, f64)> {
    stairs(points, |(x0, _), (_, y1)| (x0, y1))
}

/// A point of a chart, `(x, y)`.
type Xy = (f64, f64);

/// `points` with a corner, `corner(previous, next)`, before each point after the first.
fn stairs(points: &[Xy], corner: fn(Xy, Xy) -> Xy) -> Vec<Xy> {
    let mut out = Vec::with_capacity(points.len() * 2);
    for (i, &p) in points.iter().enumerate() {
        if i > 0 {
            out.push(corner(points[i - 1], p));
        }
        out.push(p);
    }
    out
}

/// The chart as an SVG document.
pub fn render_svg(c: &Chart) -> Result<String, ChartError> {
    let err = |message: String| ChartError { name: c.name.clone(), message };
    register_font().map_err(err)?;
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, SIZE).into_drawing_area();
        draw_any(&root, c).map_err(err)?;
    }
    Ok(out)
}

/// The chart as an SVG element to put inside an HTML page (no XML prolog).
pub fn inline_svg(c: &Chart) -> Result<String, ChartError> {
    let svg = render_svg(c)?;
    Ok(match svg.strip_prefix("<?xml") {
        Some(rest) => {
            rest.split_once("?>").map_or(svg.clone(), |(_, body)| body.trim_start().to_string())
        }
        None => svg,
    })
}

/// The chart as a PNG file at `path`.
pub fn render_png(c: &Chart, path: &Path) -> Result<(), ChartError> {
    let err = |message: String| ChartError { name: c.name.clone(), message };
    register_font().map_err(err)?;
    let root = BitMapBackend::new(path, SIZE).into_drawing_area();
    draw_any(&root, c).map_err(err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlapping_point_labels_merge() {
        let pts = [(100.0, 50.0), (200.0, 50.0), (3000.0, 10.0), (3010.0, 10.0), (3020.0, 10.1)];
        let notes: Vec<String> = ["1", "2", "4", "8", "16"].map(String::from).to_vec();
        assert_eq!(merge_notes(&pts, &notes), ["1", "2", "4, 8, 16", "", ""]);
    }

    /// Issue 25: a note never sits on a plotted line when a free place exists, nor on another
    /// note, nor past the plot's edge.
    #[test]
    fn notes_are_placed_off_the_lines() {
        let area = ((0, 0), (800, 500));
        let note = |x: i32, y: i32, t: &str| ((x, y), t.to_string());
        // Nothing in the way: above right of the point.
        let free = place_notes(&[], &[note(100, 300, "16")], area);
        assert_eq!(free, [NotePlace { dx: 10, dy: -10, left: true, below: false }]);
        // A line just above the point, where that note would go: below right instead.
        let above = vec![(0, 285), (800, 285)];
        let p = place_notes(std::slice::from_ref(&above), &[note(100, 300, "16")], area);
        assert_eq!(p, [NotePlace { dx: 10, dy: 10, left: true, below: true }]);
        // The line itself through the point, rising to the right: under it on the right (above
        // left would leave the plot).
        let rising = vec![(0, 400), (100, 300), (200, 200)];
        let p =
            place_notes(std::slice::from_ref(&rising), &[note(100, 300, "concurrency 16")], area);
        assert_eq!(p, [NotePlace { dx: 10, dy: 10, left: true, below: true }]);
        let p = place_notes(&[rising], &[note(400, 300, "16")], area);
        assert_eq!(p, [NotePlace { dx: 10, dy: -10, left: true, below: false }], "clear of it");
        // At the right edge: the text ends at the point rather than leave the plot.
        let p = place_notes(&[], &[note(795, 300, "64")], area);
        assert!(!p[0].left, "{p:?}");
        // Two notes on one point do not print on each other.
        let p = place_notes(&[], &[note(100, 300, "4"), note(100, 300, "8")], area);
        assert_ne!(p[0], p[1]);
        // A note at the marked point (the knee's ring and label) goes clear of both.
        let mark = mark_obstacle((700, 300), "knee: concurrency 64");
        let p = place_notes(&mark, &[note(700, 300, "64")], area);
        let (w, h) = note_box("64");
        let x0 = 700 + p[0].dx - if p[0].left { 0 } else { w };
        let y0 = 300 + p[0].dy - if p[0].below { 0 } else { h };
        let covered =
            mark.iter().flatten().any(|&(x, y)| x >= x0 && x <= x0 + w && y >= y0 && y <= y0 + h);
        assert!(!covered && (y0 + h < 286 || y0 > 340), "{p:?}");
        // Lines everywhere around: the least covered place, still inside the plot.
        let band: Vec<Vec<(i32, i32)>> =
            (250..=350).step_by(4).map(|y| vec![(0, y), (800, y)]).collect();
        let p = place_notes(&band, &[note(400, 300, "2")], area);
        assert_eq!(p.len(), 1);
    }

    /// A chart whose notes have to move still renders (the places reach the SVG text).
    #[test]
    fn a_chart_with_crowded_notes_renders() {
        let pts = vec![(1.0, 10.0), (2.0, 11.0), (4.0, 11.5), (8.0, 30.0)];
        let notes = ["c=1", "c=2", "c=4", "c=8"].map(String::from).to_vec();
        let flat = vec![(1.0, 11.2), (8.0, 11.2)];
        let c = Chart {
            name: "t".into(),
            title: "t".into(),
            x_label: "x".into(),
            y_label: "y".into(),
            series: vec![Series { notes, ..Series::line("a", pts) }, Series::line("b", flat)],
            x_log: Some(2.0),
            y_log: None,
            mark: None,
        };
        let svg = render_svg(&c).unwrap();
        for n in ["c=1", "c=2", "c=4", "c=8"] {
            assert!(svg.contains(n), "{n}");
        }
    }

    #[test]
    fn legend_avoids_the_data() {
        let chart = |points: Vec<(f64, f64)>| Chart {
            name: "t".into(),
            title: String::new(),
            x_label: String::new(),
            y_label: String::new(),
            series: vec![Series::line("s", points)],
            x_log: None,
            y_log: None,
            mark: None,
        };
        let rising = chart(vec![(0.0, 0.0), (1.0, 1.0)]);
        assert_eq!(legend_corner(&rising, (0.0, 1.0), (0.0, 1.0)), Corner::UpperLeft);
        let flat_high = chart(vec![(0.0, 0.95), (1.0, 0.95)]);
        assert_eq!(legend_corner(&flat_high, (0.0, 1.0), (0.0, 1.0)), Corner::LowerRight);
        let falling = chart(vec![(0.0, 1.0), (1.0, 0.0)]);
        assert_eq!(legend_corner(&falling, (0.0, 1.0), (0.0, 1.0)), Corner::UpperRight);
    }

    #[test]
    fn log_ticks_step_by_powers_or_1_2_5() {
        assert_eq!(log_ticks(0.8, 70.0, 2.0), [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0]);
        assert_eq!(log_ticks(150.0, 2100.0, 10.0), [200.0, 500.0, 1000.0, 2000.0]);
        assert!(log_ticks(0.0, 10.0, 10.0).is_empty());
    }

    #[test]
    fn whole_number_axes_get_no_labels_between_whole_numbers() {
        assert_eq!(x_label_count(-0.4, 5.6, true), 6);
        assert_eq!(x_label_count(-0.16, 2.24, true), 3);
        assert_eq!(x_label_count(0.0, 30.0, true), 12);
        assert_eq!(x_label_count(-0.4, 5.6, false), 12);
        assert_eq!(x_label_count(0.2, 0.8, true), 1);
        assert_eq!(x_label_count(f64::NAN, 1.0, true), 12);
    }

    #[test]
    fn ticks_are_short() {
        assert_eq!(tick(2.0), "2");
        assert_eq!(tick(1.5), "1.5");
        assert_eq!(tick(0.05), "0.05");
        assert_eq!(tick(250.4), "250");
        assert_eq!(tick(12_345.0), "12.3k");
        assert_eq!(tick(2000.0), "2k");
    }

    #[test]
    fn log_axes_only_across_wide_spans() {
        assert!(spans([1.0, 2.0, 64.0], 8.0));
        assert!(!spans([1.0, 2.0, 4.0], 8.0));
        assert!(!spans([0.0, 100.0], 8.0));
    }

    #[test]
    fn ranges_have_margins_and_stay_positive_on_log() {
        assert_eq!(range([0.0, 100.0], false, true), (0.0, 112.0));
        let (lo, hi) = range([1.0, 64.0], true, false);
        assert!(lo > 0.0 && lo < 1.0 && hi > 64.0);
        assert_eq!(range(std::iter::empty(), false, true), (0.0, 1.0));
    }

    #[test]
    fn a_front_steps_down_then_across() {
        let p = front_steps(&[(10.0, 60.0), (50.0, 40.0), (100.0, 10.0)]);
        assert_eq!(p, [(10.0, 60.0), (10.0, 40.0), (50.0, 40.0), (50.0, 10.0), (100.0, 10.0)]);
        assert_eq!(front_steps(&[(1.0, 2.0)]), [(1.0, 2.0)]);
        assert!(front_steps(&[]).is_empty());
    }

    #[test]
    fn steps_hold_each_value_until_the_next() {
        let p = step_path(&[(0.0, 1.0), (1.0, 3.0), (2.0, 2.0)]);
        assert_eq!(p, [(0.0, 1.0), (1.0, 1.0), (1.0, 3.0), (2.0, 3.0), (2.0, 2.0)]);
        assert!(step_path(&[]).is_empty());
    }
}
