//! Inline SVG line charts: no scripts, no external resources, so a report opens anywhere.

/// One line of a chart.
#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

/// Colours for lines, in order (colour-blind-safe Okabe–Ito palette).
pub const PALETTE: [&str; 8] =
    ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000"];

const W: f64 = 720.0;
const H: f64 = 320.0;
const LEFT: f64 = 64.0;
const RIGHT: f64 = 16.0;
const TOP: f64 = 60.0;
const BOTTOM: f64 = 48.0;

/// Escape text for XML/HTML.
pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// A 1-2-5 step giving about `n` intervals over `span`.
pub fn nice_step(span: f64, n: usize) -> f64 {
    if !(span.is_finite() && span > 0.0) || n == 0 {
        return 1.0;
    }
    let raw = span / n as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let f = raw / mag;
    let nice = if f <= 1.0 {
        1.0
    } else if f <= 2.0 {
        2.0
    } else if f <= 5.0 {
        5.0
    } else {
        10.0
    };
    nice * mag
}

/// Tick values from 0 (or the floor of `lo`) through `hi`.
pub fn ticks(lo: f64, hi: f64, n: usize) -> Vec<f64> {
    let step = nice_step(hi - lo, n);
    let start = (lo / step).floor() * step;
    let mut out = Vec::new();
    let mut k = 0;
    loop {
        let v = start + step * k as f64;
        if v > hi + step * 1e-9 || k > 100 {
            break;
        }
        out.push(v);
        k += 1;
    }
    out
}

fn fmt_tick(v: f64) -> String {
    if v.abs() >= 100.0 || v == v.trunc() {
        format!("{v:.0}")
    } else if v.abs() >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// A line chart. With `step`, lines are drawn as steps (histograms, per-window series).
/// An empty chart says "no data" instead of drawing axes over nothing.
pub fn line_chart(title: &str, x_label: &str, y_label: &str, lines: &[Line], step: bool) -> String {
    let pts = || {
        lines.iter().flat_map(|l| l.points.iter()).filter(|(x, y)| x.is_finite() && y.is_finite())
    };
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart\" viewBox=\"0 0 {W} {H}\" \
         width=\"{W}\" height=\"{H}\" role=\"img\" aria-label=\"{t}\">\n<title>{t}</title>\n\
         <text x=\"{LEFT}\" y=\"18\" class=\"chart-title\">{t}</text>\n",
        t = esc(title)
    );
    if pts().next().is_none() {
        svg.push_str(&format!(
            "<text x=\"{}\" y=\"{}\" class=\"empty\">no data</text>\n</svg>\n",
            W / 2.0 - 30.0,
            H / 2.0
        ));
        return svg;
    }
    let (x0, x1) = pts().fold((f64::MAX, f64::MIN), |(a, b), (x, _)| (a.min(*x), b.max(*x)));
    let y1 = pts().fold(0.0f64, |a, (_, y)| a.max(*y));
    let xt = ticks(x0, if x1 > x0 { x1 } else { x0 + 1.0 }, 6);
    let yt = ticks(0.0, if y1 > 0.0 { y1 } else { 1.0 }, 5);
    let (xa, xb) = (xt.first().copied().unwrap_or(0.0), xt.last().copied().unwrap_or(1.0).max(x1));
    let yb = yt.last().copied().unwrap_or(1.0).max(y1);
    let px = |x: f64| LEFT + (x - xa) / (xb - xa).max(f64::MIN_POSITIVE) * (W - LEFT - RIGHT);
    let py = |y: f64| H - BOTTOM - y / yb.max(f64::MIN_POSITIVE) * (H - TOP - BOTTOM);
    // Axes and grid.
    for &v in &yt {
        svg.push_str(&format!(
            "<line x1=\"{LEFT}\" x2=\"{}\" y1=\"{y:.1}\" y2=\"{y:.1}\" class=\"grid\"/>\
             <text x=\"{}\" y=\"{:.1}\" class=\"tick\" text-anchor=\"end\">{}</text>\n",
            W - RIGHT,
            LEFT - 6.0,
            py(v) + 4.0,
            fmt_tick(v),
            y = py(v)
        ));
    }
    for &v in &xt {
        svg.push_str(&format!(
            "<text x=\"{:.1}\" y=\"{}\" class=\"tick\" text-anchor=\"middle\">{}</text>\n",
            px(v),
            H - BOTTOM + 16.0,
            fmt_tick(v)
        ));
    }
    svg.push_str(&format!(
        "<line x1=\"{LEFT}\" x2=\"{LEFT}\" y1=\"{TOP}\" y2=\"{b}\" class=\"axis\"/>\
         <line x1=\"{LEFT}\" x2=\"{}\" y1=\"{b}\" y2=\"{b}\" class=\"axis\"/>\n\
         <text x=\"{}\" y=\"{}\" class=\"label\" text-anchor=\"middle\">{}</text>\n\
         <text x=\"14\" y=\"{}\" class=\"label\" text-anchor=\"middle\" transform=\"rotate(-90 14 {})\">{}</text>\n",
        W - RIGHT,
        (LEFT + W - RIGHT) / 2.0,
        H - 10.0,
        esc(x_label),
        (TOP + H - BOTTOM) / 2.0,
        (TOP + H - BOTTOM) / 2.0,
        esc(y_label),
        b = H - BOTTOM
    ));
    // Lines and legend.
    for (i, l) in lines.iter().enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        let mut d = String::new();
        let mut prev: Option<(f64, f64)> = None;
        for &(x, y) in l.points.iter().filter(|(x, y)| x.is_finite() && y.is_finite()) {
            match prev {
                None => d.push_str(&format!("M{:.1},{:.1}", px(x), py(y))),
                Some((_, py0)) if step => {
                    d.push_str(&format!(" L{:.1},{py0:.1} L{:.1},{:.1}", px(x), px(x), py(y)))
                }
                Some(_) => d.push_str(&format!(" L{:.1},{:.1}", px(x), py(y))),
            }
            prev = Some((x, py(y)));
        }
        svg.push_str(&format!(
            "<path d=\"{d}\" fill=\"none\" stroke=\"{color}\" stroke-width=\"1.8\" class=\"series\"><title>{}</title></path>\n",
            esc(&l.name)
        ));
        // Two legend rows of three above the plot; more lines keep their hover titles.
        if i < 6 {
            let lx = LEFT + 8.0 + (i % 3) as f64 * 210.0;
            let ly = 32.0 + (i / 3) as f64 * 13.0;
            svg.push_str(&format!(
                "<rect x=\"{lx:.1}\" y=\"{:.1}\" width=\"12\" height=\"4\" fill=\"{color}\"/>\
                 <text x=\"{:.1}\" y=\"{ly:.1}\" class=\"legend\">{}</text>\n",
                ly - 4.0,
                lx + 16.0,
                esc(&truncate(&l.name, 28))
            ));
        }
    }
    svg.push_str("</svg>\n");
    svg
}

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        format!("{}…", s.chars().take(n - 1).collect::<String>())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nice_steps_and_ticks() {
        assert_eq!(nice_step(100.0, 5), 20.0);
        assert_eq!(nice_step(7.0, 5), 2.0);
        assert_eq!(nice_step(0.3, 6), 0.05);
        assert_eq!(ticks(0.0, 100.0, 5), vec![0.0, 20.0, 40.0, 60.0, 80.0, 100.0]);
    }

    #[test]
    fn histogram_counts_percent_and_clamps() {
        let h = histogram(&[0.0, 1.0, 1.5, 9.0, 20.0], 0.0, 10.0, 2);
        assert_eq!(h, vec![(0.0, 60.0), (5.0, 40.0), (10.0, 40.0)]);
        assert!(histogram(&[], 0.0, 1.0, 3).is_empty());
        assert!(histogram(&[1.0], 1.0, 1.0, 3).is_empty());
    }

    #[test]
    fn charts_are_svg_with_one_path_per_line_and_escaped_names() {
        let l = vec![
            Line { name: "a<b".into(), points: vec![(0.0, 1.0), (1.0, 2.0)] },
            Line { name: "c".into(), points: vec![(0.0, 2.0), (1.0, 1.0)] },
        ];
        let s = line_chart("T", "x", "y", &l, true);
        assert!(s.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
        assert_eq!(s.matches("<path ").count(), 2);
        assert!(s.contains("a&lt;b"));
        assert!(line_chart("T", "x", "y", &[], false).contains("no data"));
    }
}
