//! The crate's integration tests, one binary (one link of the workspace) for all of them.

mod bench_sim;
mod cli;
#[path = "../common/mod.rs"]
mod common;
mod conformance;
#[path = "../../../../testdata/dcgm.rs"]
mod dcgm;
mod doctor;
mod engine_metrics;
mod gpu_metrics;
mod lab_sim;
mod predict_cli;
mod real_engine;
mod scale_local;
mod scale_scripts;
mod secrets;
mod sglang_backend;
mod store_bench;
mod store_cli;
mod sweep_sim;
mod workloads;
