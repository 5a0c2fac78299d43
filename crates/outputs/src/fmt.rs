//! Number and line formatting shared by every renderer, and the one rule for a missing
//! value: [`MISSING`]. (The vLLM-compatible terminal block is the exception: it prints an
//! empty sample as `0.00`, as vLLM does, and names it in a warning.)

/// What a table cell shows for a value that was not measured.
pub const MISSING: &str = "-";

/// From this magnitude a figure is written in scientific notation (`1.00e308`): no
/// benchmark measures such a value, and a file that says so should not print 309 digits.
pub const HUGE: f64 = 1e15;

/// `x` as `1.00e308` when it is [`HUGE`] or more in magnitude.
fn huge(x: f64) -> Option<String> {
    (x.abs() >= HUGE).then(|| format!("{x:.2e}"))
}

/// `decimals` decimals, or [`MISSING`].
pub fn fixed(v: Option<f64>, decimals: usize) -> String {
    match v {
        Some(x) if x.is_finite() => huge(x).unwrap_or_else(|| format!("{x:.decimals$}")),
        _ => MISSING.to_string(),
    }
}

/// Two decimals, or [`MISSING`].
pub fn num(v: Option<f64>) -> String {
    fixed(v, 2)
}

/// A number as Python's `round(v, 2)` prints it, the style of published sweep tables: at
/// most two decimals, at least one (`20.2`, `0.27`, `3.0`); [`MISSING`] when non-finite.
pub fn round2(v: f64) -> String {
    if !v.is_finite() {
        return MISSING.into();
    }
    if let Some(h) = huge(v) {
        return h;
    }
    let s = format!("{v:.2}");
    let s = s.trim_end_matches('0');
    if s.ends_with('.') {
        format!("{s}0")
    } else {
        s.to_string()
    }
}

/// `decimals` decimals with thousands grouped by commas, as published reports write figures
/// in sentences (`4,636.35`), or [`MISSING`].
pub fn grouped(v: Option<f64>, decimals: usize) -> String {
    let Some(x) = v.filter(|x| x.is_finite()) else { return MISSING.to_string() };
    if let Some(h) = huge(x) {
        return h;
    }
    let s = format!("{:.decimals$}", x.abs());
    let (int, frac) = s.split_once('.').map_or((s.as_str(), None), |(i, f)| (i, Some(f)));
    let mut out = String::new();
    for (i, c) in int.chars().enumerate() {
        if i > 0 && (int.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    if let Some(f) = frac {
        out.push('.');
        out.push_str(f);
    }
    // `-0.00` reads as a sign error: only a value that prints non-zero keeps its minus.
    if x < 0.0 && out.chars().any(|c| c.is_ascii_digit() && c != '0') {
        out.insert(0, '-');
    }
    out
}

/// A fraction as a percentage with one decimal (`0.123` → `12.3%`), or [`MISSING`].
pub fn percent(v: Option<f64>) -> String {
    v.filter(|x| x.is_finite()).map_or(MISSING.to_string(), |x| format!("{:.1}%", x * 100.0))
}

/// Two decimals, as vLLM's `{:.2f}`; a non-finite value (which a [`Summary`] never holds)
/// prints as `0.00` rather than `NaN`.
///
/// [`Summary`]: servelab_metrics::Summary
pub fn f2(v: f64) -> String {
    format!("{:.2}", if v.is_finite() { v } else { 0.0 })
}

/// One `label value` line exactly as vLLM prints it: `"{:<40} {:<10}"`.
pub fn kv(out: &mut String, label: &str, value: impl std::fmt::Display) {
    out.push_str(&format!("{label:<40} {:<10}\n", value.to_string()));
}

/// A 50-wide rule with a centred title (`"{s:{c}^{n}}"` in Python; the extra pad goes right).
pub fn rule(out: &mut String, title: &str, fill: char) {
    let width = 50usize;
    let len = title.chars().count();
    let pad = width.saturating_sub(len);
    let left = pad / 2;
    let fill_s = |n: usize| std::iter::repeat_n(fill, n).collect::<String>();
    out.push_str(&fill_s(left));
    out.push_str(title);
    out.push_str(&fill_s(pad - left));
    out.push('\n');
}

pub use servelab_metrics::pct_word;

/// `decimals` decimals with commas between thousands (`4,636.35`), as published reports write
/// figures in sentences; [`MISSING`] when non-finite.
pub fn thousands(v: f64, decimals: usize) -> String {
    if !v.is_finite() {
        return MISSING.into();
    }
    if let Some(h) = huge(v) {
        return h;
    }
    let s = format!("{:.decimals$}", v.abs());
    let (int, frac) = s.split_once('.').map_or((s.as_str(), None), |(i, f)| (i, Some(f)));
    let mut grouped = String::new();
    for (i, c) in int.chars().enumerate() {
        if i > 0 && (int.len() - i) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(c);
    }
    // A value that rounds to zero prints without a sign (`-0.001` → `0.00`).
    let negative = v < 0.0 && s.bytes().any(|b| (b'1'..=b'9').contains(&b));
    let sign = if negative { "-" } else { "" };
    match frac {
        Some(f) => format!("{sign}{grouped}.{f}"),
        None => format!("{sign}{grouped}"),
    }
}

#[cfg(test)]
mod tests {

    /// Issue 28 item 10: an imported 1e308 printed as 309 digits.
    #[test]
    fn huge_figures_are_scientific() {
        assert_eq!(fixed(Some(1e308), 2), "1.00e308");
        assert_eq!(grouped(Some(-2.5e300), 2), "-2.50e300");
        assert_eq!(round2(1e15), "1.00e15");
        assert_eq!(thousands(1e20, 0), "1.00e20");
        assert_eq!(grouped(Some(999_999_999_999_999.0), 0), "999,999,999,999,999");
        assert_eq!(fixed(Some(12.345), 2), "12.35");
    }

    use super::*;

    #[test]
    fn formats_like_python() {
        assert_eq!(f2(0.125), "0.12");
        assert_eq!(f2(2.675), "2.67");
        assert_eq!(f2(f64::NAN), "0.00");
        let mut s = String::new();
        kv(&mut s, "Successful requests:", 1);
        assert_eq!(s, format!("Successful requests:{}1{}\n", " ".repeat(21), " ".repeat(9)));
        let mut s = String::new();
        rule(&mut s, "Time to First Token", '-');
        assert_eq!(s, "---------------Time to First Token----------------\n");
        assert_eq!(pct_word(99.0), "99");
        assert_eq!(pct_word(99.9), "99.9");
        assert_eq!(num(None), "-");
        assert_eq!(fixed(Some(2.345), 1), "2.3");
        assert_eq!(percent(Some(0.1234)), "12.3%");
        assert_eq!(round2(20.2), "20.2");
        assert_eq!(round2(0.2749), "0.27");
        assert_eq!(round2(3.0), "3.0");
        assert_eq!(round2(4628.256), "4628.26");
        assert_eq!(round2(f64::NAN), "-");
        assert_eq!(thousands(4636.349, 2), "4,636.35");
        assert_eq!(thousands(999.999, 2), "1,000.00");
        assert_eq!(thousands(-1234567.0, 0), "-1,234,567");
        assert_eq!(thousands(12.5, 1), "12.5");
        assert_eq!(thousands(-0.001, 2), "0.00");
        assert_eq!(thousands(f64::INFINITY, 2), "-");
    }

    #[test]
    fn groups_thousands() {
        assert_eq!(grouped(Some(4636.354), 2), "4,636.35");
        assert_eq!(grouped(Some(1234567.0), 0), "1,234,567");
        assert_eq!(grouped(Some(999.5), 1), "999.5");
        assert_eq!(grouped(Some(100.0), 0), "100");
        assert_eq!(grouped(Some(-154.84), 2), "-154.84");
        assert_eq!(grouped(Some(-0.001), 2), "0.00");
        assert_eq!(grouped(Some(12.0), 2), "12.00");
        assert_eq!(grouped(None, 2), "-");
        assert_eq!(grouped(Some(f64::INFINITY), 2), "-");
    }
}
