//! What the exporters of other tools' standard result files share: the named percentiles
//! each format has a key for, the run's wall-clock start, and a stable short id.
//!
//! Both formats name a fixed set of percentiles (`p50`, `p99`, ...); servelab writes those of
//! its summary's percentiles that have a name there (`--metric-percentiles` chooses them) and
//! leaves the others out rather than computing new ones in a renderer.

use serde_json::{Map, Value};
use servelab_metrics::Distribution;

/// A distribution's figures under a format's key names: `mean` and `std` name those figures
/// (`min` and `max` are the same in both formats), `names` maps a percentile to its key, and
/// `unit` is the key of the unit's name. An empty distribution is `None`: the file then has no
/// statistic at all, never a zero standing in for "no data".
pub(crate) struct StatKeys {
    pub mean: &'static str,
    pub std: &'static str,
    pub unit: &'static str,
    pub names: &'static [(f64, &'static str)],
}

impl StatKeys {
    /// `d`'s figures (milliseconds stay milliseconds) with its unit, `unit`.
    pub(crate) fn with_unit(&self, d: &Distribution, unit: &str) -> Option<Value> {
        if d.count == 0 {
            return None;
        }
        let mut m = Map::new();
        m.insert(self.mean.into(), d.mean.into());
        m.insert(self.std.into(), d.std.into());
        m.insert("min".into(), d.min.into());
        m.insert("max".into(), d.max.into());
        m.insert(self.unit.into(), unit.into());
        let mut put = |p: f64, v: f64| {
            if let Some((_, key)) = self.names.iter().find(|(q, _)| *q == p) {
                m.insert((*key).into(), v.into());
            }
        };
        put(50.0, d.median);
        for &(p, v) in &d.percentiles {
            put(p, v);
        }
        Some(Value::Object(m))
    }
}

/// `YYYY-MM-DDTHH:MM:SS[.fff]Z` (what servelab writes as a run's start) in Unix seconds;
/// `None` for any other text.
pub fn unix_secs(rfc3339: &str) -> Option<f64> {
    let b = rfc3339.as_bytes();
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let s = rfc3339.get(r)?;
        s.bytes().all(|c| c.is_ascii_digit()).then(|| s.parse().ok())?
    };
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') {
        return None;
    }
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, s) = (num(11..13)?, num(14..16)?, num(17..19)?);
    let rest = &rfc3339[19..];
    let (frac, zone) = match rest.strip_prefix('.') {
        Some(r) => {
            let n = r.bytes().take_while(u8::is_ascii_digit).count();
            (format!("0.{}", &r[..n]).parse::<f64>().ok()?, &r[n..])
        }
        None => (0.0, rest),
    };
    if !matches!(zone, "Z" | "z" | "+00:00") || mo == 0 || mo > 12 || d == 0 || d > 31 {
        return None;
    }
    let days = servelab_records::time::days_from_civil(y, mo as u32, d as u32);
    Some((days * 86_400 + h * 3600 + mi * 60 + s) as f64 + frac)
}

/// Unix seconds as `YYYY-MM-DDTHH:MM:SS[.ffffff]Z` (microseconds when not whole).
pub fn rfc3339_secs(secs: f64) -> String {
    let whole = secs.floor();
    let micros = ((secs - whole) * 1e6).round() as i64;
    let (whole, micros) =
        if micros >= 1_000_000 { (whole as i64 + 1, 0) } else { (whole as i64, micros) };
    let (y, m, d) = servelab_records::time::civil_from_days(whole.div_euclid(86_400));
    let t = whole.rem_euclid(86_400);
    let frac = if micros == 0 { String::new() } else { format!(".{micros:06}") };
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}{frac}Z", t / 3600, t / 60 % 60, t % 60)
}

/// FNV-1a of `parts` as 16 hex digits: a report's id that the same run always gets.
pub(crate) fn short_id(parts: &[&str]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for p in parts {
        for b in p.bytes().chain([0u8]) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    format!("{h:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_round_trips_through_unix_seconds() {
        assert_eq!(unix_secs("1970-01-01T00:00:00Z"), Some(0.0));
        assert_eq!(unix_secs("2026-11-21T12:00:00Z"), Some(1_795_262_400.0));
        assert_eq!(unix_secs("2026-11-21T12:00:00.5Z"), Some(1_795_262_400.5));
        assert_eq!(unix_secs("2026-11-21T12:00:00+02:00"), None);
        assert_eq!(unix_secs("yesterday"), None);
        assert_eq!(rfc3339_secs(1_795_262_400.0), "2026-11-21T12:00:00Z");
        assert_eq!(rfc3339_secs(1_795_262_401.25), "2026-11-21T12:00:01.250000Z");
    }

    #[test]
    fn ids_are_stable_and_distinct() {
        assert_eq!(short_id(&["a", "b"]), short_id(&["a", "b"]));
        assert_ne!(short_id(&["ab", ""]), short_id(&["a", "b"]));
    }
}
