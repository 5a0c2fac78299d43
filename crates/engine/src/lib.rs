//! servelab-engine: a pure, deterministic what-if model of LLM serving engines.
//!
//! A deployment ([`EngineConfig`], from a YAML [`EngineFile`]) is a model ([`ModelSpec`]) on
//! GPUs ([`GpuSpec`]) with TP, DP replicas or disaggregated prefill/decode pools. Each worker
//! runs a vLLM-V1-like scheduler whose steps are priced by a roofline cost model
//! ([`CostModel`]). The [`Engine`] is a step machine in nanoseconds, driven either in virtual
//! time by [`run`] (predictions, calibration) or by a wall-clock server. [`calibrate()`] fits the
//! few efficiency/overhead parameters to a measured sweep table. See docs/predict.md.

#![cfg_attr(not(test), warn(unused_crate_dependencies))]
#![warn(missing_docs)]

pub mod calibrate;
pub mod carry;
pub mod config;
pub mod cost;
pub mod driver;
pub mod dtype;
pub mod engine;
pub mod error;
pub mod family;
pub mod gpu;
mod io;
pub mod kv;
pub mod model;
pub mod provenance;
pub mod replica;
pub mod settings;
pub mod summary;
pub mod sweep;
pub mod table;

pub use calibrate::{
    calibrate, identifiability, leave_one_scenario_out, CalibrationReport, CellError, FitOptions,
    FitParam, Holdout, Identifiability,
};
pub use config::{
    Calibration, ConditionalDisagg, EngineConfig, EngineFile, FittedOn, PdConfig, PdFile, PoolFile,
    Router, SchedulerConfig, WorkerSpec,
};
pub use cost::{BatchShape, CostModel, StepCost};
pub use driver::{
    run, GaugeSample, GaugeSampling, RunOptions, RunResult, VirtualLoad, VirtualRecord,
};
pub use dtype::DType;
pub use engine::{Engine, EngineGauges, RequestShape, StepOutcome};
pub use error::{EngineError, Result};
pub use family::EngineFamily;
pub use gpu::{gpu_preset_names, GpuSpec, LinkSpec};
pub use io::{
    engine_preset_names, load_engine_file, load_engine_file_via, load_engine_file_with,
    read_engine_file,
};
pub use model::{model_preset_names, ModelSpec, MoeSpec};
pub use provenance::{provenance, provenance_at, KneeAgreement, Provenance, KNEE_AGREEMENT};
pub use replica::RequestId;
pub use summary::{summarize, PointSummary};
pub use sweep::{predict_point, predict_shapes, IslOsl, Scenario};
pub use table::{parse_sweep_tables, SweepTable};
