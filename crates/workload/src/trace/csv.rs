//! The CSV traces: Azure's LLM inference trace and BurstGPT. Columns are found by their header
//! names (case-insensitive), so extra or reordered columns are fine. Fields are plain (these
//! traces quote nothing); surrounding spaces and double quotes are trimmed.

use std::path::Path;

use servelab_records::time::days_from_civil;

use super::Row;
use crate::error::DatasetError;

/// A CSV file's header and data lines (1-based line numbers), blank lines skipped.
struct Table<'a> {
    path: &'a Path,
    header: Vec<String>,
    rows: Vec<(usize, Vec<&'a str>)>,
}

fn clean(field: &str) -> &str {
    field.trim().trim_matches('"').trim()
}

fn table<'a>(path: &'a Path, text: &'a str, expected: &str) -> Result<Table<'a>, DatasetError> {
    let mut lines =
        text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()).map(|(i, l)| (i + 1, l));
    let Some((_, head)) = lines.next() else {
        return Err(DatasetError::Empty { path: path.into(), expected: "a CSV header and rows" });
    };
    let header: Vec<String> = head
        .trim_start_matches('\u{feff}')
        .split(',')
        .map(|h| clean(h).to_ascii_lowercase())
        .collect();
    let mut rows = Vec::new();
    for (n, line) in lines {
        let fields: Vec<&str> = line.split(',').map(clean).collect();
        if fields.len() != header.len() {
            return Err(DatasetError::Shape {
                path: path.into(),
                line: n,
                problem: format!(
                    "has {} fields but the header has {}; expected {expected}",
                    fields.len(),
                    header.len()
                ),
            });
        }
        rows.push((n, fields));
    }
    Ok(Table { path, header, rows })
}

impl Table<'_> {
    fn column(&self, name: &str, expected: &str) -> Result<usize, DatasetError> {
        self.header.iter().position(|h| h == &name.to_ascii_lowercase()).ok_or_else(|| {
            DatasetError::Shape {
                path: self.path.into(),
                line: 1,
                problem: format!("the header has no column \"{name}\"; expected {expected}"),
            }
        })
    }

    fn error(&self, line: usize, field: &str, problem: String) -> DatasetError {
        DatasetError::Field {
            path: self.path.into(),
            line,
            column: None,
            field: field.into(),
            problem,
        }
    }

    fn count(&self, line: usize, field: &str, value: &str) -> Result<u64, DatasetError> {
        // Some exports write counts as floats ("12.0").
        value
            .parse::<u64>()
            .ok()
            .or_else(|| {
                value
                    .parse::<f64>()
                    .ok()
                    .filter(|f| *f >= 0.0 && f.fract() == 0.0 && *f < 1e15)
                    .map(|f| f as u64)
            })
            .ok_or_else(|| {
                self.error(line, field, format!("must be a non-negative integer (got \"{value}\")"))
            })
    }
}

const AZURE: &str = "the Azure LLM inference trace header TIMESTAMP,ContextTokens,GeneratedTokens";

pub(crate) fn parse_azure(path: &Path, text: &str) -> Result<Vec<Row>, DatasetError> {
    let t = table(path, text, AZURE)?;
    let (ts, ctx, gen) = (
        t.column("TIMESTAMP", AZURE)?,
        t.column("ContextTokens", AZURE)?,
        t.column("GeneratedTokens", AZURE)?,
    );
    t.rows
        .iter()
        .map(|(n, f)| {
            let time_ns = parse_datetime(f[ts]).ok_or_else(|| {
                t.error(
                    *n,
                    "TIMESTAMP",
                    format!(
                        "must be a date and time like 2023-11-16 18:15:46.6805900 (got \"{}\")",
                        f[ts]
                    ),
                )
            })?;
            Ok(Row {
                line: *n,
                time_ns,
                input: t.count(*n, "ContextTokens", f[ctx])?,
                output: t.count(*n, "GeneratedTokens", f[gen])?,
                hash_ids: Vec::new(),
            })
        })
        .collect()
}

const BURSTGPT: &str =
    "the BurstGPT header Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type";

/// Rows kept by the filters, and the number left out.
pub(crate) fn parse_burstgpt(
    path: &Path,
    text: &str,
    model: Option<&str>,
    log_type: Option<&str>,
) -> Result<(Vec<Row>, usize), DatasetError> {
    let t = table(path, text, BURSTGPT)?;
    let (ts, m, req, resp, log) = (
        t.column("Timestamp", BURSTGPT)?,
        t.column("Model", BURSTGPT)?,
        t.column("Request tokens", BURSTGPT)?,
        t.column("Response tokens", BURSTGPT)?,
        t.column("Log Type", BURSTGPT)?,
    );
    let mut rows = Vec::with_capacity(t.rows.len());
    let mut filtered = 0;
    for (n, f) in &t.rows {
        let keep = model.is_none_or(|want| f[m].eq_ignore_ascii_case(want.trim()))
            && log_type.is_none_or(|want| f[log].eq_ignore_ascii_case(want.trim()));
        if !keep {
            filtered += 1;
            continue;
        }
        let seconds = f[ts].parse::<f64>().ok().filter(|s| s.is_finite() && s.abs() < 9.0e9);
        let time_ns = seconds.map(|s| (s * 1e9).round() as i64).ok_or_else(|| {
            t.error(*n, "Timestamp", format!("must be a number of seconds (got \"{}\")", f[ts]))
        })?;
        rows.push(Row {
            line: *n,
            time_ns,
            input: t.count(*n, "Request tokens", f[req])?,
            output: t.count(*n, "Response tokens", f[resp])?,
            hash_ids: Vec::new(),
        });
    }
    Ok((rows, filtered))
}

/// `YYYY-MM-DD[ T]HH:MM:SS[.fraction][Z|±HH:MM]` as ns since the Unix epoch (UTC when no
/// offset is given). Up to 9 fraction digits are used.
pub(crate) fn parse_datetime(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let part = s.get(r)?;
        (!part.is_empty() && part.bytes().all(|c| c.is_ascii_digit())).then(|| part.parse().ok())?
    };
    if b.len() < 19
        || b[4] != b'-'
        || b[7] != b'-'
        || !matches!(b[10], b' ' | b'T')
        || b[13] != b':'
        || b[16] != b':'
    {
        return None;
    }
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, sec) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || sec > 60 {
        return None;
    }
    let mut rest = &s[19..];
    let mut frac_ns = 0i64;
    if let Some(f) = rest.strip_prefix('.') {
        let digits = f.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        let used = &f[..digits.min(9)];
        frac_ns = used.parse::<i64>().ok()? * 10i64.pow(9 - used.len() as u32);
        rest = &f[digits..];
    }
    let offset_s = match rest {
        "" | "Z" | "z" => 0,
        _ => {
            let sign = match rest.as_bytes()[0] {
                b'+' => 1,
                b'-' => -1,
                _ => return None,
            };
            let hm = rest[1..].replace(':', "");
            if hm.len() != 4 || !hm.bytes().all(|c| c.is_ascii_digit()) {
                return None;
            }
            sign * (hm[..2].parse::<i64>().ok()? * 3600 + hm[2..].parse::<i64>().ok()? * 60)
        }
    };
    // mo and d were checked to be 1..=12 and 1..=31 above.
    let days = days_from_civil(y, mo as u32, d as u32);
    let secs = days * 86_400 + h * 3600 + mi * 60 + sec - offset_s;
    secs.checked_mul(1_000_000_000)?.checked_add(frac_ns)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn datetimes_parse_to_epoch_ns() {
        assert_eq!(parse_datetime("1970-01-01 00:00:00"), Some(0));
        assert_eq!(parse_datetime("1970-01-02T00:00:01.5"), Some(86_401_500_000_000));
        // 2023-11-16 is day 19677 since the epoch.
        assert_eq!(
            parse_datetime("2023-11-16 18:15:46.6805900"),
            Some((19_677 * 86_400 + 18 * 3600 + 15 * 60 + 46) * 1_000_000_000 + 680_590_000)
        );
        assert_eq!(
            parse_datetime("2024-05-10 00:00:00.009930+00:00"),
            parse_datetime("2024-05-10 00:00:00.00993")
        );
        assert_eq!(
            parse_datetime("2024-05-10 02:00:00+02:00"),
            parse_datetime("2024-05-10 00:00:00Z")
        );
        for bad in [
            "",
            "2023-11-16",
            "2023/11/16 18:15:46",
            "2023-13-16 18:15:46",
            "2023-11-16 18:15:46.",
            "2023-11-16 18:15:46 x",
        ] {
            assert_eq!(parse_datetime(bad), None, "{bad}");
        }
    }
}
