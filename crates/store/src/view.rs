//! What `servelab runs` shows: the list table, one run in full, its export, and the summary
//! of a run that never finished (recomputed from its records).

use servelab_metrics::{MetricsConfig, Summary, HEADLINE};
use servelab_outputs::fmt::{num as opt, MISSING};
use servelab_outputs::{Align, RunFormat, Table};
use servelab_records::RequestRecord;

use crate::model::{RunId, RunRow, RunStatus};
use crate::store::{Store, StoreError};

/// A stored-run lookup or read that failed; the message names the run.
#[derive(Debug, thiserror::Error)]
pub enum ViewError {
    /// No run matches, or the operand is malformed.
    #[error("{0}")]
    NotFound(String),
    /// The store could not be read.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A status as shown: a run still `running` after its process is gone is `incomplete`.
pub fn status_word(s: RunStatus) -> &'static str {
    match s {
        RunStatus::Running => "incomplete",
        s => s.as_str(),
    }
}

/// Where a run came from, as `runs list` and `runs show` say it: the source tool, and
/// `predicted` for a run the engine model predicted (nothing was measured).
pub fn source_word(r: &RunRow) -> String {
    if r.kind.is_predicted() {
        format!("{} predicted", r.source)
    } else {
        r.source.clone()
    }
}

/// The table of `runs list`.
pub fn list_table(rows: &[RunRow]) -> Table {
    let mut t = Table::new([
        "id",
        "label",
        "status",
        "started",
        "model",
        "source",
        "tags",
        "req/s",
        "out tok/s",
        "TTFT p99 ms",
        "ok %",
    ])
    .with_align(&[
        Align::Right,
        Align::Left,
        Align::Left,
        Align::Left,
        Align::Left,
        Align::Left,
        Align::Left,
    ]);
    for r in rows {
        let tags: Vec<String> = r.tags.iter().map(|(k, v)| format!("{k}={v}")).collect();
        t.push([
            r.id.to_string(),
            r.label.clone().unwrap_or_default(),
            status_word(r.status).to_string(),
            r.started_at.clone(),
            r.model.clone(),
            source_word(r),
            tags.join(","),
            opt(r.headline.request_throughput),
            opt(r.headline.output_throughput),
            opt(r.headline.ttft_p99_ms),
            r.headline.success_rate().map_or(MISSING.into(), |s| format!("{:.1}", s * 100.0)),
        ]);
    }
    t
}

/// `YYYY-MM-DD` (optionally followed by a time), checked so a typo does not silently match.
pub fn check_date(s: &str) -> Result<String, String> {
    let b = s.as_bytes();
    let digit = |i: usize| b.get(i).is_some_and(u8::is_ascii_digit);
    let ok = b.len() >= 10
        && (0..4).all(digit)
        && b[4] == b'-'
        && digit(5)
        && digit(6)
        && b[7] == b'-'
        && digit(8)
        && digit(9);
    ok.then(|| s.to_string()).ok_or_else(|| format!("expected a date YYYY-MM-DD (got '{s}')"))
}

impl Store {
    /// Import every run of a result file, labelled `label` (else the file's) and with `tags`
    /// added; one line per run for the user.
    pub fn import_into(
        &mut self,
        file: &std::path::Path,
        label: Option<&str>,
        tags: &[(String, String)],
    ) -> Result<Vec<String>, ViewError> {
        let runs = crate::import_file(file).map_err(|e| ViewError::NotFound(e.to_string()))?;
        let mut lines = Vec::new();
        for mut r in runs {
            if let Some(l) = label {
                r.label = Some(l.to_string());
            }
            r.tags.extend(tags.iter().cloned());
            let id = self.import_run(&r)?;
            let missing: Vec<&str> =
                r.missing.iter().map(String::as_str).filter(|m| *m != "records").collect();
            let note = if missing.is_empty() {
                String::new()
            } else {
                format!("; missing: {}", missing.join(", "))
            };
            lines.push(format!(
                "Imported {} ({}) as run #{id}{note}",
                file.display(),
                r.source.as_str()
            ));
        }
        Ok(lines)
    }

    /// One id for `spec`: the id itself, or the latest run with that label.
    pub fn one_run(&self, spec: &str) -> Result<RunId, ViewError> {
        let ids = self.resolve(spec).map_err(|e| ViewError::NotFound(e.to_string()))?;
        ids.last().copied().ok_or_else(|| ViewError::NotFound(format!("no run '{spec}'")))
    }

    /// The run's summary and records: the stored summary, or one recomputed from the records
    /// of a run that never finished; `None` when it has neither.
    pub fn summary_of(
        &self,
        id: RunId,
    ) -> Result<Option<(Summary, Vec<RequestRecord>)>, StoreError> {
        let run = self.run(id)?;
        let records = self.records(id)?;
        if let Some(s) = run.summary {
            return Ok(Some((s, records)));
        }
        if records.is_empty() {
            return Ok(None);
        }
        let mut s =
            servelab_metrics::summarize(&records, &run.config.info, &MetricsConfig::default());
        s.warnings.push(format!(
            "run #{id} never finished: this summary is recomputed from the {} records stored",
            records.len()
        ));
        Ok(Some((s, records)))
    }

    /// `runs show`: the run's facts, configuration and summary.
    pub fn show(&self, id: RunId) -> Result<String, StoreError> {
        let run = self.run(id)?;
        let r = &run.row;
        let mut out = format!(
            "run #{}  {}  {} ({})  started {}{}\n",
            r.id,
            r.label.as_deref().unwrap_or("(no label)"),
            status_word(r.status),
            source_word(r),
            r.started_at,
            r.finished_at.as_deref().map(|f| format!(", finished {f}")).unwrap_or_default()
        );
        let tags: Vec<String> = r.tags.iter().map(|(k, v)| format!("{k}={v}")).collect();
        if !tags.is_empty() {
            out.push_str(&format!("tags: {}\n", tags.join(" ")));
        }
        if !r.missing.is_empty() {
            out.push_str(&format!("not in the imported file: {}\n", r.missing.join(", ")));
        }
        out.push_str("configuration:\n");
        out.push_str(&serde_json::to_string_pretty(&run.config).unwrap_or_default());
        out.push('\n');
        match self.summary_of(id)? {
            Some((s, _)) => out.push_str(&servelab_outputs::render_text(&s)),
            None => {
                let mut t = Table::new(["metric", "value"]);
                for k in HEADLINE {
                    t.push([k.label(), opt(r.headline.get(&k))]);
                }
                out.push_str(&t.to_plain());
            }
        }
        Ok(out)
    }

    /// `runs export`: the run in `format`; as JSON, the file it was imported from (as it was)
    /// or its result JSON (per-request arrays with `detailed`).
    pub fn export(
        &self,
        id: RunId,
        detailed: bool,
        format: RunFormat,
    ) -> Result<String, ViewError> {
        let run = self.run(id)?;
        Ok(match (&run.raw, self.summary_of(id)?, format) {
            (Some(raw), _, RunFormat::Json) => format!("{raw}\n"),
            (_, Some((s, records)), RunFormat::Json) => {
                servelab_outputs::json::render(&s, &records, detailed)
            }
            (_, Some((s, records)), f) => servelab_outputs::render_run(&s, &records, f),
            (_, None, _) => {
                return Err(ViewError::NotFound(format!(
                    "run #{id} has no summary and no records to export as {format:?}"
                )))
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_checked() {
        assert_eq!(check_date("2026-11-25").as_deref(), Ok("2026-11-25"));
        assert_eq!(check_date("2026-11-25T10:00").as_deref(), Ok("2026-11-25T10:00"));
        assert_eq!(
            check_date("26-11-25").unwrap_err(),
            "expected a date YYYY-MM-DD (got '26-11-25')"
        );
    }
}
