//! servelab-store: the results store. Every bench is recorded in one SQLite file so results
//! last: runs (configuration and status), tags, the summary with indexed headline metrics,
//! and the per-request records. Runs from other tools are imported (headline metrics only).
//!
//! | module | what |
//! |---|---|
//! | `paths` | where the store lives by default |
//! | [`schema`] | versioned migrations (`PRAGMA user_version`) |
//! | [`model`] | the stored types: run rows, configuration, headline metrics, filters |
//! | `store` | [`Store`]: open, begin/append/finish, list, show, delete |
//! | `recorder` | [`Recorder`]: the bench's store writer that warns instead of failing |
//! | `import` | vLLM, SGLang and GuideLLM result files → [`ImportedRun`]s
//! | `import_common` | what importers share: the source tool, an imported run, reading figures |
//! | `import_llmd`, `import_aiperf` | llm-d Benchmark Reports v0.2; AIPerf's summary JSON and per-request JSONL |
//! | `view` | what `servelab runs` shows: the list table, one run, its export |

#![warn(missing_docs)]
#![cfg_attr(not(test), warn(unused_crate_dependencies))]

mod import;
mod import_aiperf;
mod import_common;
mod import_llmd;
mod merge;
pub mod model;
mod paths;
mod recorder;
pub mod schema;
mod store;
mod view;

pub use import::{import_file, parse_result_text, ImportError, ImportedRun, SourceTool};
pub use merge::{read_digests, read_shard_file, shard_result_files};
pub use model::{Filter, Headline, NewRun, RunId, RunKind, RunRow, RunSetup, RunStatus, StoredRun};
pub use paths::{default_db_path, resolve_db_path};
pub use recorder::{Recorder, RecorderWarning, StoreRecording};
pub use store::{Store, StoreError};
pub use view::{check_date, list_table, source_word, status_word, ViewError};
