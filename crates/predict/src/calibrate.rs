//! `servelab predict calibrate`: the measured tables a fit reads (a published Markdown sweep
//! table, or a servelab `sweep.json`), and the fitted engine file it writes.

use std::path::Path;

use serde::Deserialize;
use servelab_engine::{EngineFile, SweepTable};
use servelab_load::Level;
use servelab_metrics::{MetricKey, Summary};
use servelab_records::{IslOsl, PointSummary, PUBLISHED_COLUMNS};

/// The sweep tables of the file at `path`: a servelab `sweep.json` (a JSON object), else
/// Markdown tables as published or as `servelab sweep` writes `summary.md`. Errors name the
/// file and say what was expected.
pub fn read_tables(path: &Path) -> Result<Vec<SweepTable>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read the table {}: {e}", path.display()))?;
    let tables = if text.trim_start().starts_with('{') {
        sweep_json_tables(&text)
    } else {
        servelab_engine::parse_sweep_tables(&text).map_err(|e| e.to_string())
    }
    .map_err(|e| format!("{}: {e}", path.display()))?;
    if tables.iter().all(|t| t.rows.is_empty() || t.scenario.is_none()) {
        return Err(format!(
            "{}: no table with an ISL:OSL scenario and concurrency rows; expected a Markdown \
             sweep table under a heading naming ISL:OSL (e.g. `## Qwen3-32B (ISL:OSL=3000:150)`) \
             or a servelab sweep.json of --scenario ISL:OSL at --concurrency levels",
            path.display()
        ));
    }
    Ok(tables)
}

/// The parts of `sweep.json` a fit reads.
#[derive(Deserialize)]
struct SweepFile {
    scenarios: Vec<ScenarioFile>,
}

#[derive(Deserialize)]
struct ScenarioFile {
    name: String,
    dataset: String,
    points: Vec<PointFile>,
}

#[derive(Deserialize)]
struct PointFile {
    load: Level,
    summary: Summary,
}

/// The grid points of a servelab `sweep.json` as sweep tables: one per scenario, one row per
/// concurrency level. Scenarios of fixed random lengths only (`--scenario ISL:OSL`).
pub fn sweep_json_tables(text: &str) -> Result<Vec<SweepTable>, String> {
    let f: SweepFile =
        serde_json::from_str(text).map_err(|e| format!("not a servelab sweep.json: {e}"))?;
    let points = f.scenarios.into_iter().flat_map(|sc| {
        let (name, dataset) = (sc.name, sc.dataset);
        sc.points.into_iter().map(move |p| (name.clone(), dataset.clone(), p.load, p.summary))
    });
    tables_from_points(points)
}

/// Measured points `(scenario name, dataset label, load, summary)` as sweep tables: one per
/// scenario in first-seen order, one row per concurrency level in the order given. Every
/// point must be a fixed-length random scenario (`random(ISL:OSL)` or a name `ISL:OSL`) at a
/// concurrency level; the error names the first that is not.
pub fn tables_from_points(
    points: impl IntoIterator<Item = (String, String, Level, Summary)>,
) -> Result<Vec<SweepTable>, String> {
    let mut out: Vec<SweepTable> = Vec::new();
    for (name, dataset, load, summary) in points {
        let Some(scenario) = IslOsl::of_label(&dataset).or_else(|| IslOsl::of_label(&name)) else {
            return Err(format!(
                "scenario '{name}' ({dataset}) has no fixed ISL:OSL; calibrate reads \
                 --scenario ISL:OSL sweeps"
            ));
        };
        let Level::Concurrency(c) = load else {
            return Err(format!(
                "scenario '{name}' is a request-rate sweep; calibrate reads concurrency sweeps"
            ));
        };
        let row = row(u32::try_from(c).unwrap_or(u32::MAX), &summary);
        match out.iter_mut().find(|t| t.scenario == Some(scenario)) {
            Some(t) => t.rows.push(row),
            None => out.push(SweepTable { name, scenario: Some(scenario), rows: vec![row] }),
        }
    }
    Ok(out)
}

/// The nine published columns of a measured summary (NaN for a figure it lacks).
fn row(concurrency: u32, s: &Summary) -> PointSummary {
    let mut p = PointSummary::missing(concurrency);
    for c in PUBLISHED_COLUMNS {
        if let Some(v) = MetricKey::published(c).and_then(|k| k.value(s)) {
            p.set(c, v);
        }
    }
    p
}

/// The engine file `original` (YAML text) with its calibration replaced by `fitted` and its
/// domain by `fitted_on` (what predictions from it will say they extrapolate from), headed by
/// `note` as comment lines. The original's own comments are not kept. The engine file's own
/// error when `original` does not parse.
pub fn fitted_engine_yaml(
    original: &str,
    fitted: servelab_engine::Calibration,
    fitted_on: servelab_engine::FittedOn,
    note: &str,
) -> servelab_engine::Result<String> {
    let mut file = EngineFile::parse(original)?;
    file.calibration = fitted;
    file.fitted_on = Some(fitted_on);
    let yaml = file.to_yaml()?;
    let head: String = note.lines().map(|l| format!("# {l}\n")).collect();
    Ok(format!("{head}{yaml}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fitted_file_keeps_the_deployment_and_takes_the_fit() {
        let yaml = "# mine\nmodel: qwen3-8b\ngpu: h100\ntp: 2\nscheduler: {max_num_seqs: 64}\n";
        let c = servelab_engine::Calibration { eta_gemm: 0.61, ..Default::default() };
        let on = servelab_engine::FittedOn {
            engine: servelab_engine::EngineFamily::VllmV1,
            engine_version: None,
            gpu: "h100".into(),
            tp: 2,
            model: "qwen3-8b".into(),
            pd: false,
            source: Some("t.md".into()),
            error_pct: Some(8.5),
            scenarios: vec![servelab_engine::IslOsl { isl: 32, osl: 8 }],
        };
        let out = fitted_engine_yaml(yaml, c, on.clone(), "fitted by servelab\non t.md").unwrap();
        assert!(out.starts_with("# fitted by servelab\n# on t.md\n"), "{out}");
        let back = EngineFile::parse(&out).unwrap();
        assert_eq!(back.calibration.eta_gemm, 0.61);
        assert_eq!((back.tp, back.scheduler.max_num_seqs), (Some(2), 64));
        assert_eq!(back.model.as_deref(), Some("qwen3-8b"));
        assert_eq!(back.fitted_on, Some(on));
    }
}
