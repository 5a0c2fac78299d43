//! Versioned schema: migration `i` (1-based) takes `PRAGMA user_version` from `i-1` to `i`.
//! Migrations only ever append; a store written by a newer servelab is refused, not guessed.

use rusqlite::{Connection, TransactionBehavior};

/// Migration scripts in order; the store's version is how many have run.
pub const MIGRATIONS: &[&str] =
    &[include_str!("schema_v1.sql"), include_str!("schema_v2.sql"), include_str!("schema_v3.sql")];

/// The schema version this build writes.
pub(crate) const CURRENT_VERSION: u32 = MIGRATIONS.len() as u32;

/// Why the schema could not be brought up to date.
#[derive(Debug, thiserror::Error)]
pub enum SchemaError {
    /// The store was written by a newer servelab with more migrations than this build has.
    #[error(
        "the store has schema version {found}, newer than this servelab knows ({CURRENT_VERSION}); \
         upgrade servelab or pass --db for another file"
    )]
    TooNew {
        /// The store's `user_version`.
        found: u32,
    },
    /// A migration script failed; its transaction was rolled back.
    #[error("migration to schema version {version} failed: {source}")]
    Migration {
        /// The version the failed migration leads to.
        version: u32,
        /// SQLite's error.
        source: rusqlite::Error,
    },
    /// `PRAGMA user_version` could not be read (not an SQLite file, or unreadable).
    #[error("cannot read the schema version: {0}")]
    Read(rusqlite::Error),
}

/// The store's schema version (0 for an empty file).
pub(crate) fn version(conn: &Connection) -> Result<u32, SchemaError> {
    conn.query_row("PRAGMA user_version", [], |r| r.get(0)).map_err(SchemaError::Read)
}

/// Runs every migration the store lacks, each in its own transaction with its version bump,
/// so a crash between two leaves a consistent older version. Returns the final version.
pub(crate) fn migrate(conn: &mut Connection) -> Result<u32, SchemaError> {
    let found = version(conn)?;
    if found > CURRENT_VERSION {
        return Err(SchemaError::TooNew { found });
    }
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(found as usize) {
        let v = i as u32 + 1;
        let fail = |source| SchemaError::Migration { version: v, source };
        // IMMEDIATE takes the write lock first, and the version is re-read under it: two
        // processes opening a new store at once would otherwise both run migration 1.
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(fail)?;
        if version(&tx)? >= v {
            continue;
        }
        tx.execute_batch(sql).map_err(fail)?;
        tx.pragma_update(None, "user_version", v).map_err(fail)?;
        tx.commit().map_err(fail)?;
    }
    Ok(CURRENT_VERSION)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_db_migrates_to_current_and_again_is_a_no_op() {
        let mut c = Connection::open_in_memory().unwrap();
        assert_eq!(version(&c).unwrap(), 0);
        assert_eq!(migrate(&mut c).unwrap(), CURRENT_VERSION);
        assert_eq!(version(&c).unwrap(), 3);
        assert_eq!(migrate(&mut c).unwrap(), 3);
    }

    #[test]
    fn too_new_is_refused() {
        let mut c = Connection::open_in_memory().unwrap();
        c.pragma_update(None, "user_version", 99).unwrap();
        let e = migrate(&mut c).unwrap_err();
        assert!(e.to_string().contains("schema version 99"), "{e}");
    }
}
