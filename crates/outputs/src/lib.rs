//! servelab-outputs: pure renderers from a [`Summary`] to text, JSON, CSV and Markdown.
//!
//! Every function here only formats; all numbers come computed and sorted in the
//! [`Summary`] (see `servelab-metrics`). Numbers print with two decimals like vLLM; an empty
//! sample prints `0.00` like vLLM and is named in servelab's warnings.
//!
//! | renderer | for |
//! |---|---|
//! | [`render_text`] | the terminal block: vLLM's layout byte for byte, then servelab's sections |
//! | [`render_json`], [`json::render`] | `--save-result`: vLLM's keys plus a `"servelab"` object |
//! | [`render_jsonl_records`] | `--save-detailed`: one JSON line per request |
//! | [`render_csv`], [`render_csv_summary`] | one row per request; one row per run |
//! | [`markdown_summary`], [`Table`] | Markdown reports; one table writer for all |

pub mod csv;
mod file;
pub mod fmt;
pub mod json;
pub mod markdown;
pub mod term;
pub mod text;

pub use csv::{render_csv, render_csv_summary, REQUEST_COLUMNS};
pub use file::file_safe;
pub use json::{render_json, render_jsonl_records, result_value, vllm_date, SCHEMA_VERSION};
pub use markdown::{latency_table, markdown_summary, Align, Table};
pub use servelab_metrics::Summary;
pub use text::{notes, render_text, servelab_block, vllm_block};
