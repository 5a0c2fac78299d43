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

    /// The target was launched anew (a lab trial's engine): what the runner learnt about
    /// the server before (its preflight findings) no longer holds.
    fn target_restarted(&mut self) {}

    /// This process will not run `plan`, the run it was due to run next (a lab trial whose
    /// engine died ends early here): a runner whose peers run their parts of the same runs
    /// tells them why, so they do not wait for this part. Runners alone need do nothing.
    fn forgo(&mut self, plan: &Plan, reason: &str) -> impl Future<Output = ()> {
        let _ = (plan, reason);
        async {}
    }
}

/// Write `bytes` to `path`, creating its folder; the error names the path.
///
/// The bytes go to a hidden temporary file in the same folder, which is then renamed to
/// `path`: whoever watches the folder (a merge waiting on a shared volume for the shards'
/// results) sees the whole file or none of it.
pub fn write_file(path: &std::path::Path, bytes: &[u8]) -> Result<(), RunError> {
    use std::io::Write;
    let failed =
        |e: std::io::Error| RunError::Failed(format!("cannot write {}: {e}", path.display()));
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
    if let Some(dir) = dir {
        std::fs::create_dir_all(dir)
            .map_err(|e| RunError::Failed(format!("cannot create {}: {e}", dir.display())))?;
    }
    let name = path.file_name().ok_or_else(|| {
        RunError::Failed(format!("cannot write {}: not a file name", path.display()))
    })?;
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(name);
    tmp_name.push(format!(".{}.tmp", std::process::id()));
    let tmp = path.with_file_name(tmp_name);
    let written = std::fs::File::create(&tmp)
        .and_then(|mut f| f.write_all(bytes).and_then(|()| f.sync_all()))
        .and_then(|()| std::fs::rename(&tmp, path));
    if let Err(e) = written {
        // Best effort: the temporary file is hidden and named for this process.
        let _ = std::fs::remove_file(&tmp);
        return Err(failed(e));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_whole_files_through_a_rename_in_the_same_folder() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub").join("run-shard-0-of-2.json");
        write_file(&path, b"{}").unwrap();
        write_file(&path, b"{\"a\":1}").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "{\"a\":1}");
        let names: Vec<_> = std::fs::read_dir(path.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec!["run-shard-0-of-2.json"], "no temporary file is left");
        let e = write_file(&dir.path().join("sub"), b"x").unwrap_err().to_string();
        assert!(e.starts_with("cannot write "), "{e}");
    }
}
