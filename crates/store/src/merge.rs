//! `runs merge`: the shards of one run, read from the store or from their result files,
//! merged exactly ([`servelab_metrics::merge`]) and stored as one run.

use std::path::{Path, PathBuf};

use servelab_metrics::digest::{merge_digests, ShardDigest};
use servelab_metrics::merge::{merge_shards, MergeOptions, ShardRun};
use servelab_metrics::{MetricsConfig, Summary};
use servelab_records::{RequestRecord, RunInfo, RunKind};

use crate::model::{NewRun, RunId, RunSetup, RunStatus};
use crate::store::{Store, StoreError};
use crate::view::ViewError;

/// A shard as `bench --shard K/N --save-result --save-detailed` left it: the result JSON (its
/// `servelab.run` holds the run information) and, beside it, `NAME.records.jsonl` with one
/// record per line.
pub fn read_shard_file(path: &Path) -> Result<ShardRun, String> {
    let shown = path.display();
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {shown}: {e}"))?;
    let v: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| format!("{shown}: not JSON: {e}"))?;
    let run = v.get("servelab").and_then(|s| s.get("run")).ok_or_else(|| {
        format!("{shown}: no servelab.run object: not a servelab --save-result file")
    })?;
    let info: RunInfo = serde_json::from_value(run.clone())
        .map_err(|e| format!("{shown}: servelab.run is not a run description: {e}"))?;
    let metrics = shard_metrics(&v["servelab"]);
    let trace_rows = serde_json::from_value(v["servelab"]["replay"]["rows"].clone()).ok();
    let engine = serde_json::from_value(v["servelab"]["engine"].clone()).ok();
    let gpu = serde_json::from_value(v["servelab"]["gpu"].clone()).ok();
    let detail = path.with_extension("records.jsonl");
    let lines = std::fs::read_to_string(&detail).map_err(|e| {
        format!(
            "cannot read {} ({e}): merging needs every shard's records (run the shards with \
             --save-detailed)",
            detail.display()
        )
    })?;
    let records = lines
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(n, l)| {
            serde_json::from_str::<RequestRecord>(l)
                .map_err(|e| format!("{} line {}: {e}", detail.display(), n + 1))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(ShardRun { info, records, metrics, trace_rows, engine, gpu })
}

/// The metric settings a result file's summary was computed with (`servelab.percentiles`,
/// `.slo`, `.window_s`); the defaults for what a file lacks.
fn shard_metrics(servelab: &serde_json::Value) -> MetricsConfig {
    let d = MetricsConfig::default();
    MetricsConfig {
        percentiles: serde_json::from_value(servelab["percentiles"].clone())
            .unwrap_or(d.percentiles),
        goodput: serde_json::from_value(servelab["slo"].clone()).unwrap_or(d.goodput),
        window_ns: servelab["window_s"]
            .as_f64()
            .filter(|w| w.is_finite() && *w > 0.0)
            .map_or(d.window_ns, |w| (w * 1e9).round() as u64),
    }
}

/// The shards' result files in `dir`, sorted: `NAME-shard-K-of-N.json`, not the latency
/// sketches (`.sketch.json`) or records (`.records.jsonl`) beside them. The one filter every
/// merge of a results folder uses (`runs merge DIR`, `scale local`).
pub fn shard_result_files(dir: &Path) -> Result<Vec<PathBuf>, String> {
    shard_files(dir, ".json")
}

/// The files in `dir` named `STEM-shard-K-of-N` + `suffix` (a result's `.json`, a digest's
/// `.digest.json`), sorted.
fn shard_files(dir: &Path, suffix: &str) -> Result<Vec<PathBuf>, String> {
    let entries =
        std::fs::read_dir(dir).map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
    let named = |n: &str| n.strip_suffix(suffix).is_some_and(is_shard_stem);
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(named))
        .collect();
    files.sort();
    Ok(files)
}

/// The shards' digests `specs` names: `NAME-shard-K-of-N.digest.json` files, or folders of
/// them (their other files are left alone).
pub fn read_digests(specs: &[String]) -> Result<Vec<ShardDigest>, String> {
    let mut files = Vec::new();
    for spec in specs {
        let p = Path::new(spec);
        if p.is_dir() {
            let found = shard_files(p, ".digest.json")?;
            if found.is_empty() {
                return Err(format!(
                    "{spec} holds no shard digests (NAME-shard-K-of-N.digest.json, written                      beside each shard's result by bench --shard K/N --save-result)"
                ));
            }
            files.extend(found);
        } else {
            files.push(p.to_path_buf());
        }
    }
    files
        .iter()
        .map(|f| {
            let text = std::fs::read_to_string(f)
                .map_err(|e| format!("cannot read {}: {e}", f.display()))?;
            serde_json::from_str::<ShardDigest>(&text).map_err(|e| {
                format!(
                    "{}: not a shard's digest ({e}); digests are the NAME-shard-K-of-N.digest.json                      files shards write beside their results",
                    f.display()
                )
            })
        })
        .collect()
}

/// `STEM-shard-K-of-N` with digits K and N, as `bench --shard` names its files.
fn is_shard_stem(stem: &str) -> bool {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|c| c.is_ascii_digit());
    let Some((head, count)) = stem.rsplit_once("-of-") else { return false };
    let Some((run, index)) = head.rsplit_once("-shard-") else { return false };
    // A digest is `STEM-shard-K-of-N.digest.json`: as a result's stem, its count is not all
    // digits.
    !run.is_empty() && digits(index) && digits(count)
}

impl Store {
    /// The shard stored as run `id`.
    pub fn shard_run(&self, id: RunId) -> Result<ShardRun, StoreError> {
        let run = self.run(id)?;
        // A shard filed without a summary (it stopped early) was summarized with defaults.
        let metrics = run.summary.as_ref().map(|s| s.metrics_config()).unwrap_or_default();
        let trace_rows = run.summary.as_ref().and_then(|s| s.replay.as_ref().map(|r| r.rows));
        let gpu = run.summary.as_ref().and_then(|s| s.gpu.clone());
        let engine = run.summary.and_then(|s| s.engine);
        let records = self.records(id)?;
        Ok(ShardRun { info: run.config.info, records, metrics, trace_rows, engine, gpu })
    }

    /// The shards `specs` name: result files (`*.json`, with their `.records.jsonl`), folders
    /// of them ([`shard_result_files`]), run ids, or labels (every run with the label: shards
    /// filed under one label merge by it).
    pub fn shards(&self, specs: &[String]) -> Result<Vec<ShardRun>, ViewError> {
        let mut out = Vec::new();
        for spec in specs {
            let p = Path::new(spec);
            if p.is_dir() {
                let files = shard_result_files(p).map_err(ViewError::NotFound)?;
                if files.is_empty() {
                    return Err(ViewError::NotFound(format!(
                        "{spec} holds no shard result files (NAME-shard-K-of-N.json, written by \
                         bench --shard K/N --save-result --save-detailed)"
                    )));
                }
                for f in files {
                    out.push(read_shard_file(&f).map_err(ViewError::NotFound)?);
                }
                continue;
            }
            if p.extension().is_some_and(|e| e == "json") && p.is_file() {
                if spec.ends_with(".digest.json") {
                    return Err(ViewError::NotFound(format!(
                        "{spec} is a shard's digest, not its result: give the result files \
                         (runs merge-digests merges digests)"
                    )));
                }
                out.push(read_shard_file(p).map_err(ViewError::NotFound)?);
                continue;
            }
            let ids = self.resolve(spec).map_err(|e| ViewError::NotFound(e.to_string()))?;
            if ids.is_empty() {
                return Err(ViewError::NotFound(format!(
                    "no run or result file '{spec}' (give run ids, a label, or shards' result \
                     JSON files)"
                )));
            }
            for id in ids {
                out.push(self.shard_run(id)?);
            }
        }
        Ok(out)
    }

    /// Merge the shards `specs` names and store the whole run as `label`: its records, and
    /// the summary computed over all of them with the shards' metric settings (percentiles,
    /// goodput objectives). Returns its id and summary.
    pub fn merge_into(
        &mut self,
        specs: &[String],
        label: &str,
        tags: &[(String, String)],
        opts: MergeOptions,
    ) -> Result<(RunId, Summary), ViewError> {
        let shards = self.shards(specs)?;
        let count = shards.len();
        let merged = merge_shards(shards, opts).map_err(|e| ViewError::NotFound(e.to_string()))?;
        let summary = merged.summary();
        let mut tags = tags.to_vec();
        tags.push(("shards".to_string(), count.to_string()));
        let run = NewRun {
            label: Some(label.to_string()),
            kind: RunKind::Bench,
            config: RunSetup::new(merged.info, &tags),
            tags,
        };
        let id = self.begin_run(&run)?;
        self.append_records(id, &merged.records)?;
        let status =
            if summary.info.interrupted { RunStatus::Interrupted } else { RunStatus::Complete };
        self.finish_run(id, &summary, status)?;
        Ok((id, summary))
    }

    /// Merge the shards' digests `specs` names ([`read_digests`]) and store the whole run as
    /// `label`: its summary only (no records), its percentiles within the sketches' accuracy
    /// (`percentiles` overrides the shards' list). Returns its id and summary.
    pub fn merge_digests_into(
        &mut self,
        specs: &[String],
        label: &str,
        tags: &[(String, String)],
        opts: MergeOptions,
        percentiles: Option<&[f64]>,
    ) -> Result<(RunId, Summary), ViewError> {
        let digests = read_digests(specs).map_err(ViewError::NotFound)?;
        let summary = merge_digests(&digests, opts, percentiles)
            .map_err(|e| ViewError::NotFound(e.to_string()))?;
        let mut tags = tags.to_vec();
        tags.push(("shards".to_string(), digests.len().to_string()));
        tags.push(("merged-from".to_string(), "digests".to_string()));
        let run = NewRun {
            label: Some(label.to_string()),
            kind: RunKind::Bench,
            config: RunSetup::new(summary.info.clone(), &tags),
            tags,
        };
        let id = self.begin_run(&run)?;
        let status =
            if summary.info.interrupted { RunStatus::Interrupted } else { RunStatus::Complete };
        self.finish_run(id, &summary, status)?;
        Ok((id, summary))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_folder_gives_its_shards_result_files_only() {
        let dir = tempfile::tempdir().unwrap();
        for f in [
            "run-shard-1-of-2.json",
            "run-shard-0-of-2.json",
            "run-shard-0-of-2.records.jsonl",
            "run-shard-0-of-2.digest.json",
            "run-shard-0-of-2.json.tmp",
            "run.json",
            "-shard-0-of-2.json",
            "run-shard-x-of-2.json",
            "shard-0.log",
        ] {
            std::fs::write(dir.path().join(f), "").unwrap();
        }
        let names: Vec<String> = shard_result_files(dir.path())
            .unwrap()
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, vec!["run-shard-0-of-2.json", "run-shard-1-of-2.json"]);
        let e = shard_result_files(&dir.path().join("none")).unwrap_err();
        assert!(e.starts_with("cannot read "), "{e}");
    }

    #[test]
    fn a_result_file_gives_the_metric_settings_it_was_summarized_with() {
        let v = serde_json::json!({"percentiles": [50.0, 99.9], "slo": {"ttft_ms": 20.0,
            "tpot_ms": null, "e2el_ms": null}, "window_s": 0.5});
        let m = shard_metrics(&v);
        assert_eq!(m.percentiles, vec![50.0, 99.9]);
        assert_eq!(m.goodput.and_then(|s| s.ttft_ms), Some(20.0));
        assert_eq!(m.window_ns, 500_000_000);
        assert_eq!(shard_metrics(&serde_json::json!({})), MetricsConfig::default());
    }
}
