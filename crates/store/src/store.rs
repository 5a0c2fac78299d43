//! [`Store`]: one SQLite file in WAL mode, so a reader never blocks the bench writing and two
//! benches writing at once wait for each other (busy timeout) instead of failing.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{params, Connection, OpenFlags, OptionalExtension, Row, TransactionBehavior};
use servelab_metrics::Summary;
use servelab_records::RequestRecord;

use crate::import::ImportedRun;
use crate::model::{
    Filter, Headline, NewRun, RunId, RunKind, RunRow, RunSetup, RunStatus, StoredRun,
};
use crate::schema::{self, SchemaError};

/// How long a writer waits for another to release the lock before giving up.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// Store errors name the file and say what to do.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// SQLite could not open (or create) the file.
    #[error("cannot open the results store {path}: {source} (pass --db PATH or set SERVELAB_DB to use another file)")]
    Open {
        /// The store file.
        path: PathBuf,
        /// SQLite's error.
        source: rusqlite::Error,
    },
    /// The folder that is to hold a new store could not be created.
    #[error("cannot create the folder of the results store {path}: {source}")]
    CreateDir {
        /// The store file.
        path: PathBuf,
        /// The file system's error.
        source: std::io::Error,
    },
    /// The schema could not be read or brought up to date.
    #[error("results store {path}: {source}")]
    Schema {
        /// The store file.
        path: PathBuf,
        /// What went wrong with the schema.
        source: SchemaError,
    },
    /// A query or write failed.
    #[error("results store {path}: {source}")]
    Sql {
        /// The store file.
        path: PathBuf,
        /// SQLite's error.
        source: rusqlite::Error,
    },
    /// A JSON column of a run does not parse as what servelab wrote.
    #[error("results store {path}: stored {what} of run {id} is not valid JSON ({source}); the store may have been edited by hand")]
    Corrupt {
        /// The store file.
        path: PathBuf,
        /// The run whose data is broken.
        id: RunId,
        /// What was stored: `configuration`, `summary`, `imported file` or `record`.
        what: &'static str,
        /// The JSON parser's error.
        source: serde_json::Error,
    },
    /// No run has this id or label; holds the operand as given.
    #[error("no run '{0}' in the store (see `servelab runs list`)")]
    NoSuchRun(String),
    /// Reading needs an existing store and there is no file.
    #[error("no results store at {path} (pass --db PATH or set SERVELAB_DB to use another file)")]
    Missing {
        /// The file that does not exist.
        path: PathBuf,
    },
    /// A write was asked of a store opened read-only.
    #[error("the results store {path} is read-only here: it can be listed, shown and compared, not written (make it writable, or pass --db PATH or set SERVELAB_DB to use another file)")]
    ReadOnly {
        /// The store file.
        path: PathBuf,
    },
    /// A read-only store needs a migration, which would write.
    #[error("the results store {path} has schema version {found}, older than this servelab's ({}), and is read-only here, so it cannot be upgraded: make it writable and run servelab on it once (or copy it and pass --db with the copy)", schema::CURRENT_VERSION)]
    ReadOnlyOutdated {
        /// The store file.
        path: PathBuf,
        /// Its schema version.
        found: u32,
    },
}

impl StoreError {
    /// True when SQLite refused because it may not write (a read-only file, folder or file
    /// system), or could not open the files it needs to write beside the store.
    fn is_read_only(&self) -> bool {
        let source = match self {
            StoreError::Sql { source, .. } | StoreError::Open { source, .. } => source,
            StoreError::Schema { source: SchemaError::Migration { source, .. }, .. }
            | StoreError::Schema { source: SchemaError::Read(source), .. } => source,
            _ => return false,
        };
        matches!(
            source.sqlite_error_code(),
            Some(rusqlite::ErrorCode::ReadOnly | rusqlite::ErrorCode::CannotOpen)
        )
    }

    /// True when SQLite said the database is locked or busy (another process is writing).
    fn is_busy(&self) -> bool {
        let code = match self {
            StoreError::Sql { source, .. } => source.sqlite_error_code(),
            StoreError::Schema { source: SchemaError::Migration { source, .. }, .. }
            | StoreError::Schema { source: SchemaError::Read(source), .. } => {
                source.sqlite_error_code()
            }
            _ => None,
        };
        matches!(
            code,
            Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
        )
    }
}

/// An open results store.
pub struct Store {
    conn: Connection,
    path: PathBuf,
    /// Opened read-only: every write answers [`StoreError::ReadOnly`].
    read_only: bool,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("path", &self.path).finish()
    }
}

const RUN_COLUMNS: &str = "r.id, r.label, r.kind, r.status, r.started_at, r.finished_at, r.model, \
     r.source, r.missing_json, r.predicted, s.request_throughput, s.output_throughput, \
     s.total_token_throughput, s.ttft_mean_ms, s.ttft_p99_ms, s.tpot_mean_ms, s.tpot_p99_ms, \
     s.itl_mean_ms, s.itl_p99_ms, s.e2el_mean_ms, s.e2el_p99_ms, s.completed, s.failed, \
     s.duration_s";

/// How many columns [`RUN_COLUMNS`] selects (the next select list starts here).
const RUN_COLUMN_COUNT: usize = 24;

impl Store {
    /// Open (creating it and its folder if needed) and migrate the store at `path`. Opening
    /// a store that is already current writes nothing. A store this process may not write
    /// (a read-only file, folder or file system) is opened read-only instead, as
    /// [`Store::open_read_only`] does: it can be read, and every write is refused with
    /// [`StoreError::ReadOnly`].
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        if path.exists() && !may_write(path) {
            return Store::open_read_only(path);
        }
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|source| StoreError::CreateDir { path: dir.to_path_buf(), source })?;
        }
        let conn = Connection::open(path)
            .map_err(|source| StoreError::Open { path: path.to_path_buf(), source })?;
        match Store::setup(conn, path.to_path_buf()) {
            // The file is writable but its folder is not (SQLite cannot create the WAL and
            // shared-memory files beside it), or the file system is read-only.
            Err(e) if path.exists() && e.is_read_only() => Store::open_read_only(path),
            r => r,
        }
    }

    /// Open the existing store at `path` for a command that reads (`runs list`, `runs show`,
    /// `compare`, `report`): as [`Store::open`] (an outdated writable store is upgraded), but
    /// a missing file is [`StoreError::Missing`] instead of a new empty store.
    pub fn open_existing(path: &Path) -> Result<Store, StoreError> {
        if !path.exists() {
            return Err(StoreError::Missing { path: path.to_path_buf() });
        }
        Store::open(path)
    }

    /// Open an existing store for reading only: nothing is created, migrated or written, and
    /// every write is refused with [`StoreError::ReadOnly`]. For commands that only read
    /// (`runs list`, `runs show`, `compare`): a missing file is [`StoreError::Missing`], not
    /// a new empty store; one that would need a migration is
    /// [`StoreError::ReadOnlyOutdated`].
    pub fn open_read_only(path: &Path) -> Result<Store, StoreError> {
        if !path.exists() {
            return Err(StoreError::Missing { path: path.to_path_buf() });
        }
        let open = |uri: &str| {
            let flags = OpenFlags::SQLITE_OPEN_READ_ONLY
                | OpenFlags::SQLITE_OPEN_URI
                | OpenFlags::SQLITE_OPEN_NO_MUTEX;
            let conn = Connection::open_with_flags(uri, flags)?;
            conn.busy_timeout(BUSY_TIMEOUT)?;
            // A WAL store needs its shared-memory file to be read; the first read says
            // whether it could be opened (or created).
            let version: u32 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
            Ok::<_, rusqlite::Error>((conn, version))
        };
        let (conn, found) = match open(&file_uri(path, false)) {
            Ok(v) => v,
            // No shared-memory file and no right to create one (a read-only folder): read the
            // file as it is, which is exact when no write-ahead log is left beside it (SQLite
            // folds the log into the file when the last writer closes).
            Err(e) if !has_wal(path) => open(&file_uri(path, true))
                .map_err(|_| StoreError::Open { path: path.to_path_buf(), source: e })?,
            Err(source) => return Err(StoreError::Open { path: path.to_path_buf(), source }),
        };
        let path = path.to_path_buf();
        if found > schema::CURRENT_VERSION {
            return Err(StoreError::Schema { path, source: SchemaError::TooNew { found } });
        }
        if found < schema::CURRENT_VERSION {
            return Err(StoreError::ReadOnlyOutdated { path, found });
        }
        Ok(Store { conn, path, read_only: true })
    }

    /// True when this store was opened read-only.
    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    fn writable(&self) -> Result<(), StoreError> {
        if self.read_only {
            return Err(StoreError::ReadOnly { path: self.path.clone() });
        }
        Ok(())
    }

    /// A private in-memory store (tests, dry runs).
    pub fn open_in_memory() -> Result<Store, StoreError> {
        let path = PathBuf::from(":memory:");
        let conn = Connection::open_in_memory()
            .map_err(|source| StoreError::Open { path: path.clone(), source })?;
        Store::setup(conn, path)
    }

    fn setup(mut conn: Connection, path: PathBuf) -> Result<Store, StoreError> {
        let sql = |source| StoreError::Sql { path: path.clone(), source };
        conn.busy_timeout(BUSY_TIMEOUT).map_err(sql)?;
        // Switching a new file to WAL and migrating it need the whole database; SQLite answers
        // "locked" at once (without its busy wait) while another process does the same, so
        // retry for a while: two benches starting together on a new store must both land.
        let deadline = std::time::Instant::now() + BUSY_TIMEOUT;
        loop {
            match Store::prepare(&mut conn, &path) {
                Err(e) if e.is_busy() && std::time::Instant::now() < deadline => {
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                Err(e) => return Err(e),
                Ok(()) => return Ok(Store { conn, path, read_only: false }),
            }
        }
    }

    fn prepare(conn: &mut Connection, path: &Path) -> Result<(), StoreError> {
        let sql = |source| StoreError::Sql { path: path.to_path_buf(), source };
        // WAL: readers never block the writer; NORMAL sync is durable at each checkpoint
        // and never corrupts on a crash, which is what a results log needs. Set only when
        // not yet so: switching writes the file. (The other two are per connection.)
        let mode: String =
            conn.pragma_query_value(None, "journal_mode", |r| r.get(0)).map_err(sql)?;
        if !mode.eq_ignore_ascii_case("wal") {
            conn.pragma_update_and_check(None, "journal_mode", "WAL", |_| Ok(())).map_err(sql)?;
        }
        conn.pragma_update(None, "synchronous", "NORMAL").map_err(sql)?;
        conn.pragma_update(None, "foreign_keys", "ON").map_err(sql)?;
        schema::migrate(conn)
            .map_err(|source| StoreError::Schema { path: path.to_path_buf(), source })?;
        Ok(())
    }

    /// The file this store lives in.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The schema version on disk.
    pub fn schema_version(&self) -> Result<u32, StoreError> {
        schema::version(&self.conn)
            .map_err(|source| StoreError::Schema { path: self.path.clone(), source })
    }

    fn sql(&self, source: rusqlite::Error) -> StoreError {
        StoreError::Sql { path: self.path.clone(), source }
    }

    /// Record a run as `running`, with its configuration and tags; before the first request.
    pub fn begin_run(&mut self, run: &NewRun) -> Result<RunId, StoreError> {
        self.writable()?;
        let config = serde_json::to_string(&run.config).unwrap_or_else(|_| "{}".into());
        let id = self.insert_run(run, RunStatus::Running, &config, "servelab", None, &[])?;
        Ok(id)
    }

    #[allow(clippy::too_many_arguments)]
    fn insert_run(
        &mut self,
        run: &NewRun,
        status: RunStatus,
        config: &str,
        source: &str,
        raw: Option<&str>,
        missing: &[String],
    ) -> Result<RunId, StoreError> {
        self.writable()?;
        let path = self.path.clone();
        let sql = |source| StoreError::Sql { path: path.clone(), source };
        let tx =
            self.conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(sql)?;
        tx.execute(
            "INSERT INTO runs (label, kind, status, started_at, model, config_json, source, \
             raw_json, missing_json, predicted) VALUES (?1, ?2, ?3, \
             COALESCE(NULLIF(?4, ''), strftime('%Y-%m-%dT%H:%M:%SZ', 'now')), ?5, ?6, ?7, ?8, ?9, \
             ?10)",
            params![
                run.label,
                measured_kind(run.kind).as_str(),
                status.as_str(),
                run.config.info.started_at,
                run.config.info.model,
                config,
                source,
                raw,
                serde_json::to_string(missing).unwrap_or_else(|_| "[]".into()),
                run.kind.is_predicted(),
            ],
        )
        .map_err(sql)?;
        let id = tx.last_insert_rowid();
        for (k, v) in &run.tags {
            tx.execute(
                "INSERT OR REPLACE INTO tags (run_id, key, value) VALUES (?1, ?2, ?3)",
                params![id, k, v],
            )
            .map_err(sql)?;
        }
        tx.commit().map_err(sql)?;
        Ok(id)
    }

    /// Append (or replace) per-request records of a run, in one transaction.
    pub fn append_records(
        &mut self,
        id: RunId,
        records: &[RequestRecord],
    ) -> Result<(), StoreError> {
        self.writable()?;
        let path = self.path.clone();
        let sql = |source| StoreError::Sql { path: path.clone(), source };
        let tx =
            self.conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(sql)?;
        {
            let mut stmt = tx
                .prepare_cached(
                    "INSERT OR REPLACE INTO records (run_id, idx, warmup, record_json) \
                     VALUES (?1, ?2, ?3, ?4)",
                )
                .map_err(sql)?;
            for r in records {
                let json = serde_json::to_string(r).unwrap_or_else(|_| "{}".into());
                stmt.execute(params![id, r.index as i64, r.warmup, json]).map_err(sql)?;
            }
        }
        tx.commit().map_err(sql)
    }

    /// Store the summary and its headline columns and set the final status.
    pub fn finish_run(
        &mut self,
        id: RunId,
        summary: &Summary,
        status: RunStatus,
    ) -> Result<(), StoreError> {
        self.writable()?;
        let json = serde_json::to_string(summary).unwrap_or_else(|_| "null".into());
        let path = self.path.clone();
        let sql = |source| StoreError::Sql { path: path.clone(), source };
        let tx =
            self.conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(sql)?;
        write_headline(&tx, id, Some(&json), &Headline::from_summary(summary)).map_err(sql)?;
        let n = tx
            .execute(
                "UPDATE runs SET status = ?2, finished_at = strftime('%Y-%m-%dT%H:%M:%SZ', 'now') \
                 WHERE id = ?1",
                params![id, status.as_str()],
            )
            .map_err(sql)?;
        if n == 0 {
            return Err(StoreError::NoSuchRun(id.to_string()));
        }
        tx.commit().map_err(sql)
    }

    /// Store a run read from another tool's file: complete, with its headline metrics, the
    /// original file, and the list of what it lacked.
    pub fn import_run(&mut self, imported: &ImportedRun) -> Result<RunId, StoreError> {
        self.writable()?;
        let run = NewRun {
            label: imported.label.clone(),
            kind: RunKind::Bench,
            config: imported.config.clone(),
            tags: imported.tags.clone(),
        };
        let config = serde_json::to_string(&imported.config).unwrap_or_else(|_| "{}".into());
        let raw = imported.raw.to_string();
        let id = self.insert_run(
            &run,
            RunStatus::Complete,
            &config,
            imported.source.as_str(),
            Some(&raw),
            &imported.missing,
        )?;
        write_headline(&self.conn, id, None, &imported.headline).map_err(|e| self.sql(e))?;
        self.conn
            .execute("UPDATE runs SET finished_at = started_at WHERE id = ?1", params![id])
            .map_err(|e| self.sql(e))?;
        Ok(id)
    }

    /// Runs matching the filter, newest first.
    pub fn list(&self, filter: &Filter) -> Result<Vec<RunRow>, StoreError> {
        let mut sql = format!(
            "SELECT {RUN_COLUMNS} FROM runs r LEFT JOIN summaries s ON s.run_id = r.id WHERE 1=1"
        );
        let mut args: Vec<String> = Vec::new();
        if let Some(m) = &filter.model {
            args.push(m.clone());
            sql.push_str(&format!(" AND r.model = ?{}", args.len()));
        }
        if let Some(l) = &filter.label {
            args.push(l.clone());
            sql.push_str(&format!(" AND r.label = ?{}", args.len()));
        }
        if let Some(s) = &filter.since {
            args.push(s.clone());
            sql.push_str(&format!(" AND r.started_at >= ?{}", args.len()));
        }
        for (k, v) in &filter.tags {
            args.push(k.clone());
            args.push(v.clone());
            sql.push_str(&format!(
                " AND EXISTS (SELECT 1 FROM tags t WHERE t.run_id = r.id AND t.key = ?{} AND t.value = ?{})",
                args.len() - 1,
                args.len()
            ));
        }
        sql.push_str(" ORDER BY r.started_at DESC, r.id DESC");
        let mut stmt = self.conn.prepare(&sql).map_err(|e| self.sql(e))?;
        let rows = stmt
            .query_map(rusqlite::params_from_iter(args.iter()), read_row)
            .map_err(|e| self.sql(e))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| self.sql(e))?;
        drop(stmt);
        rows.into_iter().map(|r| self.with_tags(r)).collect()
    }

    fn with_tags(&self, mut row: RunRow) -> Result<RunRow, StoreError> {
        let mut stmt = self
            .conn
            .prepare_cached("SELECT key, value FROM tags WHERE run_id = ?1 ORDER BY key")
            .map_err(|e| self.sql(e))?;
        row.tags = stmt
            .query_map(params![row.id], |r| Ok((r.get(0)?, r.get(1)?)))
            .map_err(|e| self.sql(e))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| self.sql(e))?;
        Ok(row)
    }

    /// A run's row and configuration only, without its summary, records or imported file:
    /// what a report of many runs needs (the summary and records of 128 sweep points are
    /// hundreds of MB of JSON to parse).
    pub fn run_config(&self, id: RunId) -> Result<(RunRow, RunSetup), StoreError> {
        let sql = format!(
            "SELECT {RUN_COLUMNS}, r.config_json FROM runs r \
             LEFT JOIN summaries s ON s.run_id = r.id WHERE r.id = ?1"
        );
        let found = self
            .conn
            .query_row(&sql, params![id], |r| {
                let row = read_row(r)?;
                let config: String = r.get(RUN_COLUMN_COUNT)?;
                Ok((row, config))
            })
            .optional()
            .map_err(|e| self.sql(e))?;
        let Some((row, config)) = found else {
            return Err(StoreError::NoSuchRun(id.to_string()));
        };
        let config: RunSetup = serde_json::from_str(&config).map_err(|e| StoreError::Corrupt {
            path: self.path.clone(),
            id,
            what: "configuration",
            source: e,
        })?;
        Ok((self.with_tags(row)?, config))
    }

    /// One run with its configuration, summary and (for imports) original file.
    pub fn run(&self, id: RunId) -> Result<StoredRun, StoreError> {
        let sql = format!(
            "SELECT {RUN_COLUMNS}, r.config_json, s.summary_json, r.raw_json FROM runs r \
             LEFT JOIN summaries s ON s.run_id = r.id WHERE r.id = ?1"
        );
        let found = self
            .conn
            .query_row(&sql, params![id], |r| {
                let row = read_row(r)?;
                let config: String = r.get(RUN_COLUMN_COUNT)?;
                let summary: Option<String> = r.get(RUN_COLUMN_COUNT + 1)?;
                let raw: Option<String> = r.get(RUN_COLUMN_COUNT + 2)?;
                Ok((row, config, summary, raw))
            })
            .optional()
            .map_err(|e| self.sql(e))?;
        let Some((row, config, summary, raw)) = found else {
            return Err(StoreError::NoSuchRun(id.to_string()));
        };
        let corrupt =
            |what, source| StoreError::Corrupt { path: self.path.clone(), id, what, source };
        let config: RunSetup =
            serde_json::from_str(&config).map_err(|e| corrupt("configuration", e))?;
        let summary = match summary {
            Some(s) => serde_json::from_str(&s).map_err(|e| corrupt("summary", e))?,
            None => None,
        };
        let raw = match raw {
            Some(s) => Some(serde_json::from_str(&s).map_err(|e| corrupt("imported file", e))?),
            None => None,
        };
        Ok(StoredRun { row: self.with_tags(row)?, config, summary, raw })
    }

    /// A run's per-request records, warm-ups first, by index.
    pub fn records(&self, id: RunId) -> Result<Vec<RequestRecord>, StoreError> {
        let mut stmt = self
            .conn
            .prepare("SELECT record_json FROM records WHERE run_id = ?1 ORDER BY warmup DESC, idx")
            .map_err(|e| self.sql(e))?;
        let texts = stmt
            .query_map(params![id], |r| r.get::<_, String>(0))
            .map_err(|e| self.sql(e))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| self.sql(e))?;
        texts
            .iter()
            .map(|t| {
                serde_json::from_str(t).map_err(|source| StoreError::Corrupt {
                    path: self.path.clone(),
                    id,
                    what: "record",
                    source,
                })
            })
            .collect()
    }

    /// Number of stored records of a run.
    pub fn record_count(&self, id: RunId) -> Result<u64, StoreError> {
        self.conn
            .query_row("SELECT COUNT(*) FROM records WHERE run_id = ?1", params![id], |r| r.get(0))
            .map_err(|e| self.sql(e))
    }

    /// Delete a run and everything stored with it; false when there was no such run.
    pub fn delete(&mut self, id: RunId) -> Result<bool, StoreError> {
        self.writable()?;
        let n = self
            .conn
            .execute("DELETE FROM runs WHERE id = ?1", params![id])
            .map_err(|e| self.sql(e))?;
        Ok(n > 0)
    }

    /// The runs a user means by `spec`: a run id (`12`, `#12`), else every run with that
    /// label, oldest first (repeated runs of one configuration share a label).
    pub fn resolve(&self, spec: &str) -> Result<Vec<RunId>, StoreError> {
        if let Ok(id) = spec.trim_start_matches('#').parse::<RunId>() {
            let exists: Option<i64> = self
                .conn
                .query_row("SELECT id FROM runs WHERE id = ?1", params![id], |r| r.get(0))
                .optional()
                .map_err(|e| self.sql(e))?;
            if let Some(id) = exists {
                return Ok(vec![id]);
            }
        }
        let mut stmt = self
            .conn
            .prepare("SELECT id FROM runs WHERE label = ?1 ORDER BY started_at, id")
            .map_err(|e| self.sql(e))?;
        let ids = stmt
            .query_map(params![spec], |r| r.get(0))
            .map_err(|e| self.sql(e))?
            .collect::<Result<Vec<RunId>, _>>()
            .map_err(|e| self.sql(e))?;
        if ids.is_empty() {
            return Err(StoreError::NoSuchRun(spec.to_string()));
        }
        Ok(ids)
    }
}

/// True when this process may open `path` for writing (opening does not change it).
fn may_write(path: &Path) -> bool {
    match std::fs::OpenOptions::new().write(true).open(path) {
        Ok(_) => true,
        Err(e) => !matches!(
            e.kind(),
            std::io::ErrorKind::PermissionDenied | std::io::ErrorKind::ReadOnlyFilesystem
        ),
    }
}

/// A non-empty write-ahead log beside the store: changes not yet folded into the file.
fn has_wal(path: &Path) -> bool {
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    std::fs::metadata(PathBuf::from(wal)).is_ok_and(|m| m.len() > 0)
}

/// `path` as an SQLite `file:` URI (`immutable=1`: read the file as it stands, with no
/// locks or shared memory).
fn file_uri(path: &Path, immutable: bool) -> String {
    let mut uri = String::from("file:");
    for c in path.to_string_lossy().chars() {
        match c {
            '?' | '#' | '%' => uri.push_str(&format!("%{:02X}", c as u32)),
            _ => uri.push(c),
        }
    }
    if immutable {
        uri.push_str("?immutable=1");
    }
    uri
}

fn write_headline(
    conn: &Connection,
    id: RunId,
    json: Option<&str>,
    h: &Headline,
) -> Result<(), rusqlite::Error> {
    conn.execute(
        "INSERT OR REPLACE INTO summaries (run_id, summary_json, request_throughput, \
         output_throughput, total_token_throughput, ttft_mean_ms, ttft_p99_ms, tpot_mean_ms, \
         tpot_p99_ms, itl_mean_ms, itl_p99_ms, e2el_mean_ms, e2el_p99_ms, completed, failed, \
         duration_s) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)",
        params![
            id,
            json,
            h.request_throughput,
            h.output_throughput,
            h.total_token_throughput,
            h.ttft_mean_ms,
            h.ttft_p99_ms,
            h.tpot_mean_ms,
            h.tpot_p99_ms,
            h.itl_mean_ms,
            h.itl_p99_ms,
            h.e2el_mean_ms,
            h.e2el_p99_ms,
            h.completed.map(|c| c as i64),
            h.failed.map(|c| c as i64),
            h.duration_s,
        ],
    )?;
    Ok(())
}

/// The `kind` column of a run: what produced it, predicted or not (the `predicted` column says
/// which).
fn measured_kind(k: RunKind) -> RunKind {
    match k {
        RunKind::Predicted => RunKind::Bench,
        RunKind::PredictedSweepPoint => RunKind::SweepPoint,
        k => k,
    }
}

fn read_row(r: &Row<'_>) -> Result<RunRow, rusqlite::Error> {
    let kind: String = r.get(2)?;
    let status: String = r.get(3)?;
    let missing: String = r.get(8)?;
    let predicted: bool = r.get(9)?;
    let count = |i: usize| -> Result<Option<u64>, rusqlite::Error> {
        Ok(r.get::<_, Option<i64>>(i)?.map(|v| v.max(0) as u64))
    };
    Ok(RunRow {
        id: r.get(0)?,
        label: r.get(1)?,
        // The CHECK constraints admit only known values; a hand-edited store falls back.
        kind: RunKind::parse(&kind)
            .map(|k| if predicted { k.predicted() } else { k })
            .unwrap_or(RunKind::Bench),
        status: RunStatus::parse(&status).unwrap_or(RunStatus::Running),
        started_at: r.get(4)?,
        finished_at: r.get(5)?,
        model: r.get(6)?,
        source: r.get(7)?,
        tags: Vec::new(),
        missing: serde_json::from_str(&missing).unwrap_or_default(),
        headline: Headline {
            request_throughput: r.get(10)?,
            output_throughput: r.get(11)?,
            total_token_throughput: r.get(12)?,
            ttft_mean_ms: r.get(13)?,
            ttft_p99_ms: r.get(14)?,
            tpot_mean_ms: r.get(15)?,
            tpot_p99_ms: r.get(16)?,
            itl_mean_ms: r.get(17)?,
            itl_p99_ms: r.get(18)?,
            e2el_mean_ms: r.get(19)?,
            e2el_p99_ms: r.get(20)?,
            completed: count(21)?,
            failed: count(22)?,
            duration_s: r.get(23)?,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_column_count_matches_the_column_list() {
        assert_eq!(RUN_COLUMNS.split(',').count(), RUN_COLUMN_COUNT);
    }
}
