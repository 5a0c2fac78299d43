//! The output directory: per-point files written as each point completes, so an interrupted
//! sweep loses at most the point in flight, and read back on `--resume`.

use std::path::{Path, PathBuf};

use crate::error::SweepError;
use servelab_load::Level;

use crate::result::{PointResult, Role};
use servelab_outputs::file_safe;

/// `DIR/points/<scenario>/<load>[-probe|-confirm].json`.
pub fn point_path(dir: &Path, scenario: &str, load: Level, role: Role) -> PathBuf {
    let stem = load.file_stem();
    let name = match role {
        Role::Grid => format!("{stem}.json"),
        Role::Probe => format!("{stem}-probe.json"),
        Role::Confirm => format!("{stem}-confirm.json"),
    };
    dir.join("points").join(file_safe(scenario)).join(name)
}

/// Write `bytes` to `path` through a temporary file and a rename, so a reader never sees a
/// half-written file.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), SweepError> {
    let err =
        |e: std::io::Error| SweepError::Write { path: path.to_path_buf(), message: e.to_string() };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(err)?;
    }
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    std::fs::write(&tmp, bytes).map_err(err)?;
    std::fs::rename(&tmp, path).map_err(err)
}

/// Store one point's result, as compact JSON: a point holds every request's row with its gaps
/// between chunks (half a million numbers for 500 long requests), which indented JSON puts one
/// to a line, more than doubling the bytes to format and write (`jq .` indents it to read).
pub fn write_point(path: &Path, point: &PointResult) -> Result<(), SweepError> {
    let json = serde_json::to_vec(point)
        .map_err(|e| SweepError::Write { path: path.to_path_buf(), message: e.to_string() })?;
    write_atomic(path, &json)
}

/// A stored point that can stand in for a new run: it parses, is marked complete, was not
/// interrupted, accounts for every planned prompt, and matches the expected plan.
pub fn read_complete_point(
    path: &Path,
    scenario: &str,
    load: Level,
    role: Role,
) -> Option<PointResult> {
    let text = std::fs::read(path).ok()?;
    let p: PointResult = serde_json::from_slice(&text).ok()?;
    let s = &p.summary;
    let whole = p.complete
        && !s.info.interrupted
        && s.completed + s.failed == p.num_prompts as u64
        && p.scenario == scenario
        && p.load == load
        && p.role == role;
    whole.then_some(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_name_scenario_load_and_role() {
        let d = Path::new("/out");
        assert_eq!(
            point_path(d, "1000x100", Level::Concurrency(4), Role::Grid),
            PathBuf::from("/out/points/1000x100/concurrency-4.json")
        );
        assert_eq!(
            point_path(d, "a b", Level::Rate(2.5), Role::Probe),
            PathBuf::from("/out/points/a_b/rate-2.5-probe.json")
        );
    }

    #[test]
    fn atomic_write_leaves_no_temp_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x/y.json");
        write_atomic(&p, b"{}").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"{}");
        assert!(!dir.path().join("x/y.json.tmp").exists());
    }
}
