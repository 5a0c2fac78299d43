//! Wall-clock timestamps for result metadata (UTC, no time-zone database needed).

use std::time::{SystemTime, UNIX_EPOCH};

pub use servelab_records::time::unix_ms;
use servelab_records::time::{civil_from_days, days_from_civil};

/// Now as `YYYY-MM-DDTHH:MM:SSZ`.
pub fn now_rfc3339() -> String {
    let secs = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    rfc3339(secs)
}

/// Seconds since the Unix epoch as `YYYY-MM-DDTHH:MM:SSZ`.
pub fn rfc3339(secs: u64) -> String {
    let (y, m, d) = civil_from_days((secs / 86_400) as i64);
    let t = secs % 86_400;
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z", t / 3600, t / 60 % 60, t % 60)
}

/// `2026-11-21T12:34:56Z` → `20261121-123456`, vLLM's file-name stamp.
pub fn compact(rfc: &str) -> String {
    let digits: String = rfc.chars().filter(char::is_ascii_digit).collect();
    if digits.len() >= 14 {
        format!("{}-{}", &digits[..8], &digits[8..14])
    } else {
        digits
    }
}

/// A wall-clock instant from the user (`--start-at`): RFC 3339
/// (`2026-11-25T12:00:00Z`, `2026-11-25T13:00:00.250+01:00`) or Unix seconds (`1795600000`,
/// `1795600000.5`). Errors say what was expected.
pub fn parse_instant(text: &str) -> Result<SystemTime, String> {
    let t = text.trim();
    let bad = || {
        format!(
            "expected an RFC 3339 instant (2026-11-25T12:00:00Z) or Unix seconds (got '{text}')"
        )
    };
    if let Ok(secs) = t.parse::<f64>() {
        if secs.is_finite() && (0.0..1e11).contains(&secs) {
            return Ok(UNIX_EPOCH + std::time::Duration::from_secs_f64(secs));
        }
        return Err(bad());
    }
    let b = t.as_bytes();
    let num = |from: usize, len: usize| -> Option<i64> {
        let s = t.get(from..from + len)?;
        s.bytes().all(|c| c.is_ascii_digit()).then(|| s.parse().ok())?
    };
    let at = |i: usize, c: u8| b.get(i).is_some_and(|x| x.eq_ignore_ascii_case(&c));
    if !(at(4, b'-')
        && at(7, b'-')
        && (at(10, b'T') || at(10, b' '))
        && at(13, b':')
        && at(16, b':'))
    {
        return Err(bad());
    }
    let (y, mo, d) =
        (num(0, 4).ok_or_else(bad)?, num(5, 2).ok_or_else(bad)?, num(8, 2).ok_or_else(bad)?);
    let (h, mi, s) =
        (num(11, 2).ok_or_else(bad)?, num(14, 2).ok_or_else(bad)?, num(17, 2).ok_or_else(bad)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || s > 60 {
        return Err(bad());
    }
    let mut i = 19;
    let mut nanos = 0u64;
    if at(i, b'.') {
        let digits: String = t[i + 1..].chars().take_while(char::is_ascii_digit).collect();
        if digits.is_empty() {
            return Err(bad());
        }
        i += 1 + digits.len();
        let padded = format!("{:0<9}", &digits[..digits.len().min(9)]);
        nanos = padded.parse().map_err(|_| bad())?;
    }
    let zone = &t[i..];
    let offset_s = if zone.eq_ignore_ascii_case("z") {
        0
    } else {
        let sign = match zone.as_bytes().first() {
            Some(b'+') => 1,
            Some(b'-') => -1,
            _ => return Err(bad()),
        };
        let zb = zone.as_bytes();
        if zone.len() != 6 || zb[3] != b':' {
            return Err(bad());
        }
        let zh: i64 = zone[1..3].parse().map_err(|_| bad())?;
        let zm: i64 = zone[4..6].parse().map_err(|_| bad())?;
        sign * (zh * 3600 + zm * 60)
    };
    let secs = days_from_civil(y, mo as u32, d as u32) * 86_400 + h * 3600 + mi * 60 + s - offset_s;
    let secs = u64::try_from(secs).map_err(|_| bad())?;
    Ok(UNIX_EPOCH + std::time::Duration::new(secs, nanos as u32))
}

/// `at` as `YYYY-MM-DDTHH:MM:SS.mmmZ` (milliseconds: a shared start instant needs them).
pub fn rfc3339_millis(at: SystemTime) -> String {
    let d = at.duration_since(UNIX_EPOCH).unwrap_or_default();
    let whole = rfc3339(d.as_secs());
    format!("{}.{:03}Z", whole.trim_end_matches('Z'), d.subsec_millis())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_known_instants() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(1_795_264_496), "2026-11-21T12:34:56Z");
        assert_eq!(compact("2026-11-21T11:54:56Z"), "20261121-115456");
        let at = UNIX_EPOCH + std::time::Duration::from_micros(1_795_600_000_250_900);
        assert_eq!(unix_ms(at), 1_795_600_000_250);
        assert_eq!(unix_ms(UNIX_EPOCH - std::time::Duration::from_secs(1)), 0);
    }

    #[test]
    fn parses_start_instants() {
        let secs = |t: &str| {
            parse_instant(t).map(|at| at.duration_since(UNIX_EPOCH).unwrap().as_secs_f64())
        };
        assert_eq!(secs("1795264496"), Ok(1_795_264_496.0));
        assert_eq!(secs("1795264496.25"), Ok(1_795_264_496.25));
        assert_eq!(secs("2026-11-21T12:34:56Z"), Ok(1_795_264_496.0));
        assert_eq!(secs("2026-11-21t12:34:56.5z"), Ok(1_795_264_496.5));
        assert_eq!(secs("2026-11-21T13:34:56+01:00"), Ok(1_795_264_496.0));
        assert_eq!(secs("2000-02-29T00:00:00Z"), Ok(951_782_400.0));
        assert_eq!(secs("1970-01-01T00:00:00Z"), Ok(0.0));
        for bad in [
            "",
            "tomorrow",
            "2026-11-21",
            "2026-13-01T00:00:00Z",
            "2026-11-21T12:34:56",
            "2026-11-21T12:34:56+0100",
            "-5",
            "2026-11-21T12:34:56.Z",
        ] {
            assert!(parse_instant(bad).unwrap_err().contains("RFC 3339"), "{bad}");
        }
        let at = UNIX_EPOCH + std::time::Duration::from_millis(1_795_264_496_250);
        assert_eq!(rfc3339_millis(at), "2026-11-21T12:34:56.250Z");
        assert_eq!(parse_instant(&rfc3339_millis(at)), Ok(at));
    }
}
