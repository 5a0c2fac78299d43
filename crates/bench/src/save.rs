//! The end of a run: the store's record of it first, then the files the plan asks for (a
//! shard's digest, the result JSON). A new output file of a run goes here.

use std::path::PathBuf;

use servelab_client::StopReason;
use servelab_metrics::digest::ShardDigest;
use servelab_metrics::Summary;
use servelab_outputs::term;
use servelab_plan::Plan;
use servelab_records::RequestRecord;

use crate::measure::Measured;

/// Everything a finished (or interrupted) run produced.
#[derive(Debug)]
pub struct BenchOutcome {
    /// What it measured.
    pub summary: Summary,
    /// Every request, warm-ups first, with token counts.
    pub records: Vec<RequestRecord>,
    /// The result JSON, when the plan asked for one.
    pub result_path: Option<PathBuf>,
    /// Why issuing stopped.
    pub stop: StopReason,
    /// Files the run could not write (a full disk, a read-only folder): the summary and the
    /// store have the result; the caller says so after printing it, and fails.
    pub save_errors: Vec<String>,
}

/// The store first: a file that cannot be written (a full disk) must not cost the run its
/// stored result, and no write failure costs the summary the caller prints.
pub(crate) fn save(
    plan: &Plan,
    m: Measured,
    summary: Summary,
    digest: Option<ShardDigest>,
) -> BenchOutcome {
    let Measured { sink, records, info, files, detail_error, stop, .. } = m;
    let (result_path, detail_path) = (files.result, files.detail);
    if let Some(line) = sink.finish(&records, &summary, info.interrupted) {
        term::note(&line);
    }
    let mut save_errors: Vec<String> = detail_error.into_iter().collect();
    let saved = if plan.output.save_result {
        if plan.shard.shard.is_some() {
            let digest = match digest {
                Some(d) => Ok(d),
                None => ShardDigest::new(
                    &summary,
                    &records,
                    servelab_metrics::sketch::SHARD_SKETCH_ALPHA,
                ),
            };
            save_errors.extend(save_digest(digest, &result_path).err());
        }
        let json = servelab_outputs::json::render(&summary, &records, plan.output.save_detailed);
        match servelab_plan::write_file(&result_path, json.as_bytes()) {
            Ok(()) => {
                term::note(&format!("Saved result to {}", result_path.display()));
                Some(result_path)
            }
            Err(e) => {
                save_errors.push(e.to_string());
                None
            }
        }
    } else {
        None
    };
    if let (Some(p), true) = (detail_path, save_errors.is_empty()) {
        term::note(&format!("Saved per-request records to {}", p.display()));
    }
    BenchOutcome { summary, records, result_path: saved, stop, save_errors }
}

/// A shard also ships its digest: counts, time series and sketches in a few kB to tens of kB,
/// which merge into the whole run's summary when its records are too many to move
/// (`runs merge-digests`). Written before the result, so a result file that is there has its
/// digest beside it.
fn save_digest(
    digest: Result<ShardDigest, impl std::fmt::Display>,
    result_path: &std::path::Path,
) -> Result<(), String> {
    let path: PathBuf = result_path.with_extension("digest.json");
    digest
        .map_err(|e| format!("shard digest: {e}"))
        .and_then(|d| serde_json::to_string(&d).map_err(|e| format!("shard digest: {e}")))
        .and_then(|text| {
            servelab_plan::write_file(&path, text.as_bytes()).map_err(|e| e.to_string())
        })?;
    term::note(&format!("Saved the shard's digest to {}", path.display()));
    Ok(())
}
