//! The one seam every way of running a plan implements.

use std::future::Future;

use servelab_metrics::Summary;

use crate::Plan;

/// Why a run produced no summary.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RunError {
    /// Interrupted (Ctrl-C, SIGTERM) before the run could report anything.
    #[error("interrupted")]
    Interrupted,
    /// The plan cannot run as given (a bad file, a tokenizer that does not load): fix the
    /// input and run again.
    #[error("{0}")]
    Usage(String),
    /// The run failed (target unreachable, disk full).
    #[error("{0}")]
    Failed(String),
}

/// Runs plans: the measuring conductor, a prediction, a shard, or a test's fake.
///
/// A summary whose `info.interrupted` is set is a partial result of an interrupted run; the
/// caller decides whether to keep it and stop.
pub trait Runner {
    /// Run `plan` to its end (or to an interrupt) and say what it measured.
    fn run(&mut self, plan: &Plan) -> impl Future<Output = Result<Summary, RunError>>;

    /// Wait until the target is idle again; a sweep calls it between runs.
    fn settle(&mut self) -> impl Future<Output = ()> {
        async {}
    }
}

/// Write `bytes` to `path`, creating its folder; the error names the path.
pub fn write_file(path: &std::path::Path, bytes: &[u8]) -> Result<(), RunError> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| RunError::Failed(format!("cannot create {}: {e}", dir.display())))?;
    }
    std::fs::write(path, bytes)
        .map_err(|e| RunError::Failed(format!("cannot write {}: {e}", path.display())))
}
