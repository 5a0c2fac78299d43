//! `runs merge`: the shards of one run, read from the store or from their result files,
//! merged exactly ([`servelab_metrics::merge`]) and stored as one run.

use std::path::Path;

use servelab_metrics::merge::{merge_shards, MergeOptions, ShardRun};
use servelab_metrics::{MetricsConfig, Summary};
use servelab_records::{RequestRecord, RunInfo, RunKind};

use crate::model::{NewRun, RunConfig, RunId, RunStatus};
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
    Ok(ShardRun { info, records })
}

impl Store {
    /// The shard stored as run `id`.
    pub fn shard_run(&self, id: RunId) -> Result<ShardRun, StoreError> {
        Ok(ShardRun { info: self.run(id)?.config.info, records: self.records(id)? })
    }

    /// The shards `specs` name: result files (`*.json`, with their `.records.jsonl`), run
    /// ids, or labels (every run with the label: shards filed under one label merge by it).
    pub fn shards(&self, specs: &[String]) -> Result<Vec<ShardRun>, ViewError> {
        let mut out = Vec::new();
        for spec in specs {
            let p = Path::new(spec);
            if p.extension().is_some_and(|e| e == "json") && p.is_file() {
                if spec.ends_with(".sketch.json") {
                    return Err(ViewError::NotFound(format!(
                        "{spec} is a shard's latency sketch, not its result: give the \
                         result files (runs merge-sketches merges sketches)"
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
    /// the summary computed over all of them. Returns its id and summary.
    pub fn merge_into(
        &mut self,
        specs: &[String],
        label: &str,
        tags: &[(String, String)],
        opts: MergeOptions,
        metrics: &MetricsConfig,
    ) -> Result<(RunId, Summary), ViewError> {
        let shards = self.shards(specs)?;
        let count = shards.len();
        let merged = merge_shards(shards, opts).map_err(|e| ViewError::NotFound(e.to_string()))?;
        let mut summary = servelab_metrics::summarize(&merged.records, &merged.info, metrics);
        summary.warnings.extend(merged.notes);
        let mut tags = tags.to_vec();
        tags.push(("shards".to_string(), count.to_string()));
        let run = NewRun {
            label: Some(label.to_string()),
            kind: RunKind::Bench,
            config: RunConfig::new(merged.info, &tags),
            tags,
        };
        let id = self.begin_run(&run)?;
        self.append_records(id, &merged.records)?;
        let status =
            if summary.info.interrupted { RunStatus::Interrupted } else { RunStatus::Complete };
        self.finish_run(id, &summary, status)?;
        Ok((id, summary))
    }
}
