//! Where the store lives: `--db PATH`, else `SERVELAB_DB`, else the user's data dir
//! (`$XDG_DATA_HOME/servelab/servelab.db`, else `~/.local/share/servelab/servelab.db`).

use std::path::PathBuf;

/// The default path from the environment values given (pure, so it is testable): `None`
/// when neither `XDG_DATA_HOME` nor `HOME` is set.
pub fn default_db_path(xdg_data_home: Option<&str>, home: Option<&str>) -> Option<PathBuf> {
    let non_empty = |s: Option<&str>| s.filter(|v| !v.is_empty()).map(PathBuf::from);
    let base =
        non_empty(xdg_data_home).or_else(|| non_empty(home).map(|h| h.join(".local/share")))?;
    Some(base.join("servelab").join("servelab.db"))
}

/// The path to use: an explicit one (flag or `SERVELAB_DB`, which clap already merged), else
/// the default from this process's environment.
pub fn resolve_db_path(explicit: Option<PathBuf>) -> Option<PathBuf> {
    explicit.or_else(|| {
        let xdg = std::env::var("XDG_DATA_HOME").ok();
        let home = std::env::var("HOME").ok();
        default_db_path(xdg.as_deref(), home.as_deref())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xdg_wins_then_home_then_nothing() {
        assert_eq!(
            default_db_path(Some("/x/data"), Some("/home/u")),
            Some(PathBuf::from("/x/data/servelab/servelab.db"))
        );
        assert_eq!(
            default_db_path(Some(""), Some("/home/u")),
            Some(PathBuf::from("/home/u/.local/share/servelab/servelab.db"))
        );
        assert_eq!(default_db_path(None, None), None);
    }

    #[test]
    fn explicit_path_wins() {
        assert_eq!(resolve_db_path(Some("a.db".into())), Some(PathBuf::from("a.db")));
    }
}
