//! Number and line formatting shared by the text-like renderers.

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

/// A percentile's name as vLLM writes it: `99` for integral values, else `99.9`.
pub fn pct_word(p: f64) -> String {
    if p.fract() == 0.0 && p.abs() < 1e15 {
        format!("{}", p as i64)
    } else {
        format!("{p}")
    }
}

#[cfg(test)]
mod tests {
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
    }
}
