//! servelab-outputs: the one rendering stage. Pure renderers from a [`Summary`] to text,
//! JSON, CSV and Markdown, and the pieces every other report is made of: one table writer
//! ([`Table`]), one chart model and backend ([`chart`]), one HTML page shell ([`html`]), one
//! number formatter and missing-value rule ([`fmt`]), and the terminal ([`term`]).
//!
//! Every function here only formats; all numbers come computed and sorted in the
//! [`Summary`] (see `servelab-metrics`). Numbers print with two decimals like vLLM; a missing
//! value prints [`fmt::MISSING`], except in vLLM's own block, where an empty sample prints
//! `0.00` like vLLM and is named in servelab's warnings.
//!
//! | renderer | for |
//! |---|---|
//! | [`render_run`] | one run in any [`RunFormat`] (`bench --format`, `runs export --format`) |
//! | [`render_text`] | the terminal block: vLLM's layout byte for byte, then servelab's sections |
//! | [`sglang_block`] | SGLang's `bench_serving` block (`--format sglang`) |
//! | [`render_json`], [`json::render`] | `--save-result`: vLLM's keys plus a `"servelab"` object |
//! | [`render_jsonl_records`] | one JSON line per request |
//! | [`render_csv`], [`render_csv_summary`] | one row per request; one row per run |
//! | [`markdown_summary`], [`Table`] | Markdown reports; one table writer for all |
//! | [`render_llmd_report`] | llm-d-benchmark's Benchmark Report v0.2 (`--format llmd-report`) |
//! | [`render_aiperf_summary`], [`render_aiperf_records`] | AIPerf's `profile_export_aiperf.json` and `profile_export.jsonl` |
//! | [`load::load_rows`], [`load::steady_rows`] | delivered against configured load; steady-state beside all-requests figures ([`load_text_section`], [`markdown::load_section`]) |
//! | [`pareto::pareto_chart`], [`pareto::pareto_table`] | throughput per GPU vs interactivity across deployments, the Pareto front marked |

#![warn(missing_docs)]
#![cfg_attr(not(test), warn(unused_crate_dependencies))]

pub mod aiperf;
#[cfg(feature = "browser-check")]
pub mod browser;
pub mod chart;
pub mod csv;
mod file;
pub mod fmt;
pub mod html;
pub mod json;
pub mod llmd;
pub mod load;
pub mod markdown;
pub mod pareto;
pub mod standard;
pub mod term;
mod text;

pub use aiperf::{render_aiperf_records, render_aiperf_summary};
pub use csv::{render_csv, render_csv_summary, REQUEST_COLUMNS};
pub use file::file_safe;
pub use json::{render_json, render_jsonl_records, result_value, vllm_date, SCHEMA_VERSION};
pub use llmd::render_llmd_report;
pub use markdown::{latency_table, markdown_summary, Align, Table};
pub use servelab_metrics::Summary;
pub use text::{
    load_section as load_text_section, notes, render_text, render_text_with, servelab_block,
    sglang_block, sglang_block_as, vllm_block, vllm_block_with, warning_lines, LatencySection,
};

use servelab_records::RequestRecord;

/// The shapes one run can be written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunFormat {
    /// vLLM's summary block, then servelab's sections.
    Text,
    /// The run as a Markdown report.
    Markdown,
    /// The result JSON (`--save-result`'s shape, with per-request arrays).
    Json,
    /// One CSV row for the run.
    Csv,
    /// One CSV row per measured request.
    RequestsCsv,
    /// One JSON line per measured request.
    RequestsJsonl,
    /// SGLang's `bench_serving` summary block ([`sglang_block`]).
    Sglang,
    /// llm-d-benchmark's Benchmark Report v0.2 ([`render_llmd_report`]).
    LlmdReport,
    /// AIPerf's summary JSON, `profile_export_aiperf.json` ([`render_aiperf_summary`]).
    Aiperf,
    /// AIPerf's per-request records, `profile_export.jsonl` ([`render_aiperf_records`]).
    AiperfJsonl,
}

/// `s` (with its `records`, for the JSON's generated texts) in format `f`.
pub fn render_run(s: &Summary, records: &[RequestRecord], f: RunFormat) -> String {
    match f {
        RunFormat::Text => render_text(s),
        RunFormat::Markdown => markdown_summary(s),
        RunFormat::Json => json::render(s, records, true),
        RunFormat::Csv => render_csv_summary(s),
        RunFormat::RequestsCsv => render_csv(s),
        RunFormat::RequestsJsonl => render_jsonl_records(s),
        RunFormat::Sglang => sglang_block(s),
        RunFormat::LlmdReport => render_llmd_report(s),
        RunFormat::Aiperf => render_aiperf_summary(s),
        RunFormat::AiperfJsonl => render_aiperf_records(s),
    }
}
