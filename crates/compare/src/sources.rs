//! Where the runs of a comparison or a report come from: result files (servelab, vLLM,
//! SGLang, GuideLLM), or run ids and labels in the results store, opened on first need.

use std::path::{Path, PathBuf};

use servelab_store::Store;

use crate::compare::CompareOptions;
use crate::data::{Identity, RunData, Subject, SCENARIO_TAG};

/// Resolves operands to runs.
pub struct Sources {
    db: Option<PathBuf>,
    store: Option<Store>,
    headline_only: bool,
}

impl Sources {
    /// Operands resolve against the store at `db` (default: the user's data dir).
    pub fn new(db: Option<PathBuf>) -> Sources {
        Sources { db, store: None, headline_only: false }
    }

    fn store(&mut self) -> Result<&Store, String> {
        if self.store.is_none() {
            let path = servelab_store::resolve_db_path(self.db.clone())
                .ok_or("no HOME or XDG_DATA_HOME: pass --db PATH")?;
            self.store = Some(Store::open_existing(&path).map_err(|e| e.to_string())?);
        }
        self.store.as_ref().ok_or_else(|| "results store unavailable".to_string())
    }

    /// The runs an operand names: a result file (a `sweep.json` gives every point), else a
    /// run id or label in the store.
    pub fn runs(&mut self, spec: &str) -> Result<Vec<RunData>, String> {
        let path = Path::new(spec);
        if path.is_file() {
            if let Some(runs) = sweep_file(path, spec)? {
                return Ok(runs);
            }
            let runs = servelab_store::import_file(path).map_err(|e| e.to_string())?;
            return Ok(runs
                .into_iter()
                .map(|r| {
                    let name = r.label.clone().unwrap_or_else(|| spec.to_string());
                    let mut d = RunData::from_headline(&name, &r.config.info, r.headline);
                    d.config = Some(r.config);
                    d.tags = r.tags;
                    d
                })
                .collect());
        }
        let load = if self.headline_only { load_run_headline } else { load_run };
        let store =
            self.store().map_err(|e| format!("no run '{spec}': {e}; and it is not a file"))?;
        let ids = store.resolve(spec).map_err(|e| format!("{e}; '{spec}' is not a file either"))?;
        ids.into_iter().map(|id| load(store, id).map_err(|e| e.to_string())).collect()
    }

    /// Load stored runs by their headline figures and configuration only, without summaries
    /// or records (see [`load_run_headline`]).
    pub fn headline_only(mut self, yes: bool) -> Sources {
        self.headline_only = yes;
        self
    }

    /// The subjects an operand names, for `compare`: one per identity (workload and load)
    /// among its runs, as [`subjects_of`] splits them.
    pub fn subjects(&mut self, spec: &str) -> Result<Vec<Subject>, String> {
        let runs = self.runs(spec)?;
        Ok(subjects_of(spec, runs))
    }
}

/// An operand's runs as subjects: runs of one identity (same scenario, dataset, prompts and
/// load) are repeats of one subject; runs of different identities are never averaged. With
/// one identity the subject is named `spec`; with several, `spec [what differs]`, e.g.
/// `vllm [100 prompts]`. Order: first appearance.
pub fn subjects_of(spec: &str, runs: Vec<RunData>) -> Vec<Subject> {
    let mut groups: Vec<(Identity, Vec<RunData>)> = Vec::new();
    for run in runs {
        let id = run.identity();
        match groups.iter_mut().find(|(g, _)| *g == id) {
            Some((_, rs)) => rs.push(run),
            None => groups.push((id, vec![run])),
        }
    }
    let ids: Vec<Identity> = groups.iter().map(|(id, _)| id.clone()).collect();
    groups
        .into_iter()
        .map(|(id, runs)| {
            let mut name = spec.to_string();
            if ids.len() > 1 {
                name = format!("{name} [{}]", id.distinguish(&ids));
            }
            // A prediction beside a measurement: the delta is the prediction error, so say
            // which is which.
            if runs.iter().all(|r| is_predicted_name(&r.name)) {
                name.push_str(PREDICTED);
            }
            Subject { name, runs }
        })
        .collect()
}

/// Every point of a `sweep.json` file, named `label [scenario]` as a sweep's stored points
/// are; `None` when the file is not a sweep result.
fn sweep_file(path: &Path, spec: &str) -> Result<Option<Vec<RunData>>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {spec}: {e}"))?;
    let Ok(sweep) = serde_json::from_str::<servelab_sweep::SweepResult>(&text) else {
        return Ok(None);
    };
    let label = sweep.label.clone().unwrap_or_else(|| spec.to_string());
    let mut runs = Vec::new();
    for sc in &sweep.scenarios {
        for p in sc.points.iter().filter(|p| p.complete) {
            let name = format!("{label} [{}]", sc.name);
            let mut d = RunData::from_summary(&name, p.summary.clone(), Vec::new());
            // The file keeps no per-request rows: no per-request samples to bootstrap.
            d.samples = None;
            d.tags = sweep.tags.clone();
            d.tags.push((SCENARIO_TAG.to_string(), sc.name.clone()));
            runs.push(d);
        }
    }
    if runs.is_empty() {
        return Err(format!("{spec}: the sweep result has no completed point"));
    }
    Ok(Some(runs))
}

use crate::data::{is_predicted_name, PREDICTED};

/// The display name of a stored run: its label (else `#id`), its sweep scenario, and
/// whether it was predicted.
fn stored_name(row: &servelab_store::RunRow, id: i64) -> String {
    let mut name = row.label.clone().unwrap_or_else(|| format!("#{id}"));
    // A sweep's points share its label; each scenario is its own series, so a report never
    // takes two scenarios at one load for repeats of each other.
    if let Some((_, scenario)) = row.tags.iter().find(|(k, _)| k == "sweep.scenario") {
        name = format!("{name} [{scenario}]");
    }
    if row.kind.is_predicted() {
        name.push_str(PREDICTED);
    }
    name
}

/// A stored run by its headline figures, configuration and tags, without its summary and
/// records: no per-request samples, per-run charts or summary block, but a report of 128
/// runs reads a few kB per run instead of megabytes.
pub fn load_run_headline(store: &Store, id: i64) -> Result<RunData, servelab_store::StoreError> {
    let (row, config) = store.run_config(id)?;
    let mut data = RunData::from_headline(&stored_name(&row, id), &config.info, row.headline);
    data.id = Some(id);
    data.status = servelab_store::status_word(row.status).into();
    data.config = Some(config);
    data.tags = row.tags;
    Ok(data)
}

/// A stored run as comparison data; a run that never finished is summarized from its records.
pub fn load_run(store: &Store, id: i64) -> Result<RunData, servelab_store::StoreError> {
    let run = store.run(id)?;
    let name = stored_name(&run.row, id);
    let mut data = match store.summary_of(id)? {
        Some((s, records)) => RunData::from_summary(&name, s, records),
        None => RunData::from_headline(&name, &run.config.info, run.row.headline),
    };
    data.id = Some(id);
    data.status = servelab_store::status_word(run.row.status).into();
    // A summary recomputed from the records of an unfinished run gives the headline; else the
    // stored row's does.
    if run.summary.is_some() || data.summary.is_none() {
        data.headline = run.row.headline;
    }
    data.config = Some(run.config);
    data.tags = run.row.tags;
    Ok(data)
}

impl CompareOptions {
    /// Options from the flags: a minimum success rate in percent, resamples and a seed.
    pub fn from_flags(min_success_pct: f64, resamples: usize, seed: u64) -> Result<Self, String> {
        if !(0.0..=100.0).contains(&min_success_pct) {
            return Err(format!(
                "--min-success-rate: expected a percentage in [0, 100] (got {min_success_pct})"
            ));
        }
        Ok(CompareOptions {
            min_success_rate: min_success_pct / 100.0,
            resamples,
            seed,
            level: 0.95,
        })
    }
}
