//! Wall-clock arithmetic without a time-zone database: Unix milliseconds of an instant and
//! Howard Hinnant's civil-date conversions (proleptic Gregorian, UTC), for result timestamps,
//! `--start-at`, trace files' dates and a server's `Date` header.

use std::time::{SystemTime, UNIX_EPOCH};

/// `at` in whole Unix milliseconds (0 before 1970): how shards stamp the files they exchange.
pub fn unix_ms(at: SystemTime) -> u128 {
    at.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis())
}

/// `at` in Unix milliseconds to the nanosecond, negative before 1970: for clock offsets.
pub fn unix_ms_exact(at: SystemTime) -> f64 {
    match at.duration_since(UNIX_EPOCH) {
        Ok(d) => d.as_secs_f64() * 1e3,
        Err(e) => -e.duration().as_secs_f64() * 1e3,
    }
}

/// (year, month 1–12, day 1–31) to days since 1970-01-01 (Hinnant's `days_from_civil`).
pub fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = i64::from((m + 9) % 12);
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Days since 1970-01-01 to (year, month, day) (Hinnant's `civil_from_days`).
pub fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn civil_dates_round_trip() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2023, 11, 16), 19_677);
        assert_eq!(days_from_civil(2000, 2, 29), 11_016);
        assert_eq!(days_from_civil(1969, 12, 31), -1);
        for z in [-800_000, -1, 0, 11_016, 19_677, 2_000_000] {
            let (y, m, d) = civil_from_days(z);
            assert_eq!(days_from_civil(y, m, d), z);
        }
    }

    #[test]
    fn unix_milliseconds() {
        let at = UNIX_EPOCH + Duration::from_micros(1_795_600_000_250_900);
        assert_eq!(unix_ms(at), 1_795_600_000_250);
        assert!((unix_ms_exact(at) - 1_795_600_000_250.9).abs() < 1e-3);
        let before = UNIX_EPOCH - Duration::from_millis(1500);
        assert_eq!(unix_ms(before), 0);
        assert_eq!(unix_ms_exact(before), -1500.0);
    }
}
