//! servelab-compare: comparisons of stored runs with noise bands, rankings per load level,
//! a rule-based written summary, and report rendering (Markdown and self-contained HTML).
//!
//! | module | what |
//! |---|---|
//! | `data` | [`RunData`], [`Subject`]: what a comparison reads |
//! | [`compare`] | [`compare()`]: deltas against a baseline with noise verdicts |
//! | `rank` | series, rankings per metric per load level |
//! | [`narrative`] | the written summary rules |
//! | [`deploy`] | deployments side by side per scenario: tables and overlaid charts |
//! | [`verdict`] | one written verdict per model, and variants of one model |
//! | [`render`] | the comparison as plain text, Markdown, JSON |
//! | [`report`] | the report: Markdown and HTML with inline SVG charts |
//! | `welch` | Welch's t interval for repeated runs too few to bootstrap |

#![warn(missing_docs)]
#![cfg_attr(not(test), warn(unused_crate_dependencies))]

mod compare;
mod data;
pub mod deploy;
pub mod narrative;
mod rank;
pub mod render;
pub mod report;
mod sources;
pub mod verdict;
mod welch;

pub use compare::{
    compare, pair, CompareOptions, Comparison, Delta, DeltaVerdict, MetricRow, Noise, Pairing,
    Point,
};
pub use data::{Identity, RunData, Samples, Subject, SCENARIO_TAG};
pub use narrative::{written_summary, Finding};
pub use rank::{group, rankings, LevelRanking, Series};
pub use sources::{load_run, load_run_headline, subjects_of, Sources};
