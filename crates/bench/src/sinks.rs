//! Where records go as requests finish: appended to the detail file at once, pushed to the
//! store's sink, and folded for the summary, on a blocking thread of their own (never on the
//! runtime's workers that are timing streams). After the clock stops they get their per-chunk
//! token counts. A new place for live records (another sink) goes here.

use std::io::Write;
use std::path::PathBuf;

use servelab_metrics::fold::{Folded, RecordFold};
use servelab_plan::{Plan, RecordSink, RunError};
use servelab_records::{RequestRecord, RunInfo};
use servelab_workload::Tokenizer;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// What the collector hands back: the fold, the store's sink, why the detail file stopped.
type Collected = (Folded, Box<dyn RecordSink>, Option<String>);

/// The files a run writes: its result, and the per-request records written as they come.
pub(crate) struct RunFiles {
    pub result: PathBuf,
    pub detail: Option<PathBuf>,
}

/// The records of a run on their way to the detail file, the store and the fold.
pub(crate) struct Sinks {
    task: JoinHandle<std::io::Result<Collected>>,
    tokenizer: Tokenizer,
}

/// The records collected once the run ended.
pub(crate) struct Records {
    /// The records kept whole, warm-ups first, with token counts.
    pub records: Vec<RequestRecord>,
    /// The records folded away as they came.
    pub folded: Folded,
    /// The store's sink, to finish with the summary.
    pub sink: Box<dyn RecordSink>,
    /// Why the detail file stops early, if it does.
    pub detail_error: Option<String>,
}

impl Sinks {
    /// Start collecting the records of run `info` into `sink` (the store's, begun before the
    /// first request is sent), the detail file and the fold. A multi-turn run (`keep_all`)
    /// keeps every record: a session's requests must stay together to be counted.
    pub fn start(
        plan: &Plan,
        info: &RunInfo,
        sink: Box<dyn RecordSink>,
        keep_all: bool,
        tokenizer: &Tokenizer,
    ) -> (Sinks, mpsc::UnboundedSender<RequestRecord>, RunFiles) {
        let result = safe_file_name(plan.result_path(&info.backend, &info.model, &info.started_at));
        let detail = plan.output.save_detailed.then(|| result.with_extension("records.jsonl"));
        let keep = if keep_all { usize::MAX } else { plan.limits.keep_records };
        let fold = RecordFold::new(keep, info.clone(), plan.metrics.clone());
        let (tx, rx) = mpsc::unbounded_channel();
        let (path, tok) = (detail.clone(), tokenizer.clone());
        let task = tokio::task::spawn_blocking(move || collect(rx, path, sink, fold, tok));
        (Sinks { task, tokenizer: tokenizer.clone() }, tx, RunFiles { result, detail })
    }

    /// Once every record was sent: the records, with their per-chunk token counts (counted
    /// after the clock stopped, off the runtime's workers).
    pub async fn finish(self) -> Result<Records, RunError> {
        let (mut folded, sink, detail_error) = self
            .task
            .await
            .map_err(|e| RunError::Failed(format!("record collector failed: {e}")))?
            .map_err(|e| RunError::Failed(format!("cannot write per-request records: {e}")))?;
        let mut records = std::mem::take(&mut folded.records);
        let tok = self.tokenizer;
        records = tokio::task::spawn_blocking(move || {
            for r in &mut records {
                servelab_client::tokens::attribute_tokens(r, &tok);
            }
            records
        })
        .await
        .map_err(|e| RunError::Failed(format!("token attribution failed: {e}")))?;
        Ok(Records { records, folded, sink, detail_error })
    }
}

/// `path` with a file name every file system takes: one over 200 bytes (a model name of
/// hundreds of characters) is cut and made unique with a hash of the whole name.
fn safe_file_name(path: PathBuf) -> PathBuf {
    const MAX: usize = 200;
    let Some(name) = path.file_name().and_then(|n| n.to_str()) else { return path };
    if name.len() <= MAX {
        return path;
    }
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    name.hash(&mut h);
    let (stem, ext) = name.rsplit_once('.').unwrap_or((name, "json"));
    let cut = (0..=150).rev().find(|&i| stem.is_char_boundary(i)).unwrap_or(0);
    path.with_file_name(format!("{}-{:016x}.{ext}", &stem[..cut], h.finish()))
}

/// Receive records as requests finish; append each to the detail file at once, and to the
/// recording sink. Blocking: runs on its own thread.
fn collect(
    mut rx: mpsc::UnboundedReceiver<RequestRecord>,
    detail: Option<PathBuf>,
    sink: Box<dyn RecordSink>,
    mut fold: RecordFold,
    tokenizer: Tokenizer,
) -> std::io::Result<Collected> {
    let mut file = match &detail {
        Some(p) => {
            if let Some(dir) = p.parent() {
                std::fs::create_dir_all(dir)?;
            }
            Some(std::io::BufWriter::new(std::fs::File::create(p)?))
        }
        None => None,
    };
    // A write that fails (a full disk) stops the file, not the run: the records still reach
    // the store and the summary.
    let mut detail_error = None;
    let sink = std::cell::RefCell::new(sink);
    // A record folded away gets its token counts now, and the store its final version
    // (stored records are replaced by index).
    let mut prepare = |r: &mut RequestRecord| {
        if r.chunks.iter().any(|c| c.tokens.is_none()) {
            servelab_client::tokens::attribute_tokens(r, &tokenizer);
            sink.borrow_mut().push(r);
        }
    };
    while let Some(r) = rx.blocking_recv() {
        if let Some(f) = file.as_mut() {
            let written = serde_json::to_writer(&mut *f, &r)
                .map_err(std::io::Error::other)
                .and_then(|()| f.write_all(b"\n"))
                // Flushed per record: a crash or kill loses at most the request in flight.
                .and_then(|()| f.flush());
            if let Err(e) = written {
                let path = detail.as_deref().unwrap_or(std::path::Path::new("")).display();
                detail_error = Some(format!(
                    "cannot write {path}: {e}; it stops at the records written before (the \
                     store and the summary have all)"
                ));
                file = None;
            }
        }
        sink.borrow_mut().push(&r);
        fold.push(r, &mut prepare).map_err(std::io::Error::other)?;
    }
    let mut folded = fold.finish(&mut prepare).map_err(std::io::Error::other)?;
    folded.records.sort_by_key(|r| (r.warmup as u8 ^ 1, r.index));
    let mut sink = sink.into_inner();
    sink.flush();
    Ok((folded, sink, detail_error))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_file_names_are_cut_and_made_unique() {
        let short = PathBuf::from("out/openai-infqps-m-20261126-101010.json");
        assert_eq!(safe_file_name(short.clone()), short);
        let long = |m: &str| PathBuf::from(format!("out/openai-infqps-{m}-20261126.json"));
        let a = safe_file_name(long(&"é".repeat(200)));
        let b = safe_file_name(long(&"é".repeat(201)));
        let name = a.file_name().unwrap().to_str().unwrap();
        assert!(name.len() <= 150 + 1 + 16 + 5, "{name}");
        assert!(name.starts_with("openai-infqps-éé") && name.ends_with(".json"), "{name}");
        assert_eq!(a.parent(), Some(std::path::Path::new("out")));
        assert_ne!(a, b);
    }
}
