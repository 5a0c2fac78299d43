//! Deployment description: the YAML engine file, its validation, and the per-worker spec the
//! scheduler and cost model use.

use serde::{Deserialize, Serialize};
use serde_yaml_ng::{Mapping, Value};

pub use crate::carry::FittedOn;
use crate::dtype::DType;
use crate::error::{EngineError, Result};
use crate::family::EngineFamily;
use crate::gpu::{GpuSpec, LinkSpec};
use crate::model::ModelSpec;
pub use crate::settings::{Calibration, SchedulerConfig};

/// How DP replicas share requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Router {
    /// Replica `i mod n` for the i-th request.
    #[default]
    RoundRobin,
    /// The replica with the fewest requests in its API server, waiting, running or in the
    /// step it is computing (lowest index on ties).
    LeastLoaded,
    /// A replica drawn uniformly for each request, from the calibration's `seed`: what a
    /// Kubernetes Service does under kube-proxy's iptables mode, and SGLang's router with its
    /// `random` policy.
    Random,
}

/// A pool of identical workers in a P/D deployment. In the file, scheduler keys may be given
/// in the pool itself (`pd.prefill.max_num_batched_tokens`) and `calibration:` keys too; each
/// replaces the top-level value for this pool ([`EngineFile::parse`] merges them).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PoolFile {
    /// Number of workers.
    pub workers: u32,
    /// TP of each worker.
    pub tp: u32,
    /// This pool's scheduler, when it differs from the top-level one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduler: Option<SchedulerConfig>,
    /// This pool's calibration, when it differs from the top-level one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calibration: Option<Calibration>,
}

/// The `pd:` section of an engine file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PdFile {
    /// Prefill workers.
    pub prefill: PoolFile,
    /// Decode workers.
    pub decode: PoolFile,
    /// Link carrying KV from prefill to decode, per GPU; default: the GPU's network link.
    #[serde(default)]
    pub link: Option<LinkSpec>,
    /// Dynamo 0.1-0.3's `remote-prefill` (its VllmWorker's flag): true, as every P/D file
    /// of that family is; false is an aggregated deployment, written without `pd:`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote_prefill: Option<bool>,
    /// Dynamo 0.1-0.3's `conditional-disagg`: the decode worker prefills a prompt itself when
    /// it is short or the prefill queue is long ([`ConditionalDisagg`]); off (its default,
    /// and the published deployments'): every prompt goes to a prefill worker.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditional_disagg: Option<bool>,
    /// Its `max-local-prefill-length` (default 1,000 tokens).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_local_prefill_length: Option<u32>,
    /// Its `max-prefill-queue-size` (default 3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_prefill_queue_size: Option<u32>,
}

/// Dynamo 0.1-0.3's conditional disaggregation (`components/disagg_router.py`, read at
/// ai-dynamo/dynamo commit 9d9a1d9, the 0.3.0 version bump): the decode worker sends a prompt
/// to the prefill queue only when its length (less the KV router's prefix hits, which the
/// model does not route by) exceeds `max_local_prefill_length` and fewer than
/// `max_prefill_queue_size` prompts wait in the queue; otherwise it prefills the prompt
/// itself, as a whole V0 prefill that pauses its decodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConditionalDisagg {
    /// `--max-local-prefill-length`: prompts of at most this many tokens stay local.
    pub max_local_prefill_length: u32,
    /// `--max-prefill-queue-size`: with this many prompts waiting for a prefill worker, a new
    /// one stays local.
    pub max_prefill_queue_size: u32,
}

impl ConditionalDisagg {
    /// Dynamo's CLI defaults (`examples/llm/utils/vllm.py`).
    pub const DEFAULT: ConditionalDisagg =
        ConditionalDisagg { max_local_prefill_length: 1000, max_prefill_queue_size: 3 };

    /// Whether a prompt of `prompt` tokens goes to a prefill worker while `queued` prompts
    /// wait for one.
    pub fn remote(&self, prompt: u32, queued: usize) -> bool {
        prompt > self.max_local_prefill_length && queued < self.max_prefill_queue_size as usize
    }
}

/// An engine file as written (YAML). [`EngineFile::build`] validates it.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EngineFile {
    /// The serving engine modelled; its defaults fill what the file leaves out.
    #[serde(default)]
    pub engine: EngineFamily,
    /// The engine's version (free text, e.g. `0.9.0.1`), carried into every prediction.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine_version: Option<String>,
    /// The deployment the calibration was fitted on (`None`: not fitted, defaults).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fitted_on: Option<FittedOn>,
    /// A model preset name (see [`crate::model_preset_names`]).
    #[serde(default)]
    pub model: Option<String>,
    /// Path of a Hugging Face `config.json` (relative to the engine file), or a Hub model id
    /// (`org/name`) that servelab fetches from the Hugging Face cache or the Hub.
    #[serde(default)]
    pub model_config: Option<String>,
    /// A GPU preset name.
    pub gpu: String,
    /// Tensor parallelism of each replica (default 1; not with `pd`).
    #[serde(default)]
    pub tp: Option<u32>,
    /// Data-parallel replicas behind the router (default 1; not with `pd`).
    #[serde(default)]
    pub replicas: Option<u32>,
    /// Request router across replicas.
    #[serde(default)]
    pub router: Router,
    /// Overrides the weight format of the model's config (e.g. `fp8` for an FP8 checkpoint).
    #[serde(default)]
    pub weight_dtype: Option<String>,
    /// KV-cache format (default bf16).
    #[serde(default)]
    pub kv_dtype: Option<String>,
    /// Scheduler options.
    #[serde(default)]
    pub scheduler: SchedulerConfig,
    /// Calibration parameters.
    #[serde(default)]
    pub calibration: Calibration,
    /// Disaggregated prefill/decode.
    #[serde(default)]
    pub pd: Option<PdFile>,
}

/// The P/D part of a validated deployment.
#[derive(Debug, Clone, PartialEq)]
pub struct PdConfig {
    /// Prefill workers.
    pub prefill: PoolFile,
    /// Decode workers.
    pub decode: PoolFile,
    /// KV transfer link per GPU.
    pub link: LinkSpec,
    /// Dynamo 0.1-0.3's conditional disaggregation, when on.
    pub conditional: Option<ConditionalDisagg>,
}

/// A validated deployment.
#[derive(Debug, Clone, PartialEq)]
pub struct EngineConfig {
    /// The serving engine modelled.
    pub engine: EngineFamily,
    /// Its version, if the file gave one.
    pub engine_version: Option<String>,
    /// Where the calibration comes from (`None`: the family's defaults, not fitted).
    pub fitted_on: Option<FittedOn>,
    /// The model.
    pub model: ModelSpec,
    /// The GPU of every worker.
    pub gpu: GpuSpec,
    /// KV-cache format.
    pub kv_dtype: DType,
    /// TP of each replica (unused with `pd`).
    pub tp: u32,
    /// DP replicas (unused with `pd`).
    pub replicas: u32,
    /// Router across replicas (and across the workers of each P/D pool).
    pub router: Router,
    /// Scheduler options of every worker.
    pub scheduler: SchedulerConfig,
    /// Calibration parameters.
    pub calibration: Calibration,
    /// Disaggregated prefill/decode, if any.
    pub pd: Option<PdConfig>,
}

impl EngineFile {
    /// Parses YAML text. The `engine` family's defaults fill the scheduler and calibration
    /// keys the file leaves out, and a P/D pool's own scheduler keys and `calibration:` are
    /// merged over the top-level ones, so the result holds every value explicitly.
    pub fn parse(yaml: &str) -> Result<Self> {
        let parse_err = |e: serde_yaml_ng::Error| EngineError::Parse {
            what: "engine file".into(),
            message: e.to_string(),
        };
        let mut v: Value = serde_yaml_ng::from_str(yaml).map_err(parse_err)?;
        let Value::Mapping(m) = &mut v else {
            // Not a mapping: let the typed parse say what it expected.
            return serde_yaml_ng::from_str(yaml).map_err(parse_err);
        };
        fill_defaults(m)?;
        let text = serde_yaml_ng::to_string(&v).map_err(parse_err)?;
        // Positions would point into the merged text, not the user's: paths name the key.
        serde_yaml_ng::from_str(&text).map_err(|e| {
            let msg = e.to_string();
            let msg = msg.split(" at line ").next().unwrap_or(&msg).to_string();
            EngineError::Parse { what: "engine file".into(), message: msg }
        })
    }

    /// The file as YAML text (comments of the text it was parsed from are not kept).
    pub fn to_yaml(&self) -> Result<String> {
        serde_yaml_ng::to_string(self)
            .map_err(|e| EngineError::Parse { what: "engine file".into(), message: e.to_string() })
    }

    /// Validates into an [`EngineConfig`]; `model_config_json` is the text of the file named by
    /// `model_config` (the caller reads it: the library does no I/O).
    pub fn build(&self, model_config_json: Option<&str>) -> Result<EngineConfig> {
        let mut model = match (&self.model, &self.model_config, model_config_json) {
            (Some(_), Some(_), _) => {
                return Err(EngineError::invalid(
                    "model",
                    "give `model` or `model_config`, not both",
                ))
            }
            (Some(name), None, _) => ModelSpec::preset(name)?,
            (None, Some(path), Some(text)) => ModelSpec::from_hf_config(path, text)?,
            (None, Some(_), None) => {
                return Err(EngineError::invalid(
                    "model_config",
                    "the config.json text was not loaded",
                ))
            }
            (None, None, _) => {
                return Err(EngineError::invalid(
                    "model",
                    "missing: give a preset name (`model: qwen3-32b`) or `model_config: path`",
                ))
            }
        };
        if let Some(w) = &self.weight_dtype {
            let d = DType::parse("weight_dtype", w)?;
            model.weight_dtype = d;
            model.expert_dtype = d;
        }
        let kv_dtype = match &self.kv_dtype {
            Some(s) => DType::parse("kv_dtype", s)?,
            None => DType::Bf16,
        };
        let gpu = GpuSpec::preset(&self.gpu)?;
        self.calibration.validate()?;
        validate_scheduler(&self.scheduler)?;
        let pools = self.pd.iter().flat_map(|p| [&p.prefill, &p.decode]);
        let intervals = pools.filter_map(|f| f.scheduler.map(|s| s.recv_interval));
        if intervals.chain([self.scheduler.recv_interval]).any(|n| n > 1) {
            if self.engine != EngineFamily::Sglang {
                return Err(EngineError::invalid(
                    "scheduler.recv_interval",
                    format!(
                        "SGLang's --scheduler-recv-interval; the {} scheduler takes new \
                         requests every step (remove it)",
                        self.engine
                    ),
                ));
            }
            if self.pd.is_some() {
                return Err(EngineError::invalid(
                    "scheduler.recv_interval",
                    "modelled for aggregated SGLang workers only, not P/D pools (remove it)",
                ));
            }
        }
        let pd = match &self.pd {
            Some(p) => Some(self.build_pd(p, &gpu, &model)?),
            None => None,
        };
        let tp = self.tp.unwrap_or(1);
        let replicas = self.replicas.unwrap_or(1);
        check_count("tp", tp)?;
        check_count("replicas", replicas)?;
        check_tp("tp", tp, &model)?;
        // A calibration fitted on another engine or GPU carries only what carries there
        // (`carry_calibration`): the file's `fitted_on` says where its values came from.
        let calibration = match &self.fitted_on {
            Some(f) if f.engine != self.engine || !f.gpu.eq_ignore_ascii_case(&gpu.name) => {
                crate::carry::carry_calibration(&self.calibration, f, self.engine, &gpu.name)
            }
            _ => self.calibration,
        };
        let cfg = EngineConfig {
            engine: self.engine,
            engine_version: self.engine_version.clone(),
            fitted_on: self.fitted_on.clone(),
            model,
            gpu,
            kv_dtype,
            tp,
            replicas,
            router: self.router,
            scheduler: self.scheduler,
            calibration,
            pd,
        };
        for (key, spec) in cfg.worker_specs() {
            spec.kv_blocks().map_err(|m| EngineError::invalid(key, m))?;
        }
        Ok(cfg)
    }

    fn build_pd(&self, p: &PdFile, gpu: &GpuSpec, model: &ModelSpec) -> Result<PdConfig> {
        if self.tp.is_some() || self.replicas.is_some() {
            return Err(EngineError::invalid(
                if self.tp.is_some() { "tp" } else { "replicas" },
                "not allowed with `pd` (set pd.prefill/pd.decode `workers` and `tp`)",
            ));
        }
        for (pool, f) in [("pd.prefill", p.prefill), ("pd.decode", p.decode)] {
            check_count(&format!("{pool}.workers"), f.workers)?;
            check_count(&format!("{pool}.tp"), f.tp)?;
            check_tp(&format!("{pool}.tp"), f.tp, model)?;
            if let Some(s) = &f.scheduler {
                validate_scheduler(s).map_err(|e| {
                    EngineError::invalid(pool, e.to_string().replace("scheduler.", ""))
                })?;
            }
            if let Some(c) = &f.calibration {
                c.validate().map_err(|e| EngineError::invalid(pool, e.to_string()))?;
                // Requests enter through the prefill workers' API servers and KV leaves from
                // them: the decode pool's values of these would never be read.
                let top = &self.calibration;
                let unread = [
                    ("frontend_us", c.frontend_us != top.frontend_us),
                    ("frontend_per_token_us", c.frontend_per_token_us != top.frontend_per_token_us),
                    ("eta_link", c.eta_link != top.eta_link),
                ];
                if let (true, Some((key, _))) =
                    (pool == "pd.decode", unread.iter().find(|(_, differs)| *differs))
                {
                    return Err(EngineError::invalid(
                        format!("pd.decode.calibration.{key}"),
                        "not read for decode workers (requests enter, and KV leaves, through the \
                         prefill workers): set it on pd.prefill or at the top level",
                    ));
                }
            }
        }
        let link = p.link.unwrap_or(gpu.network);
        if !(link.bandwidth_gb_s > 0.0 && link.latency_us >= 0.0) {
            return Err(EngineError::invalid(
                "pd.link",
                "expected bandwidth_gb_s > 0 and latency_us >= 0",
            ));
        }
        Ok(PdConfig {
            prefill: p.prefill,
            decode: p.decode,
            link,
            conditional: self.conditional_disagg(p)?,
        })
    }

    /// Dynamo 0.1-0.3's disaggregation flags of `p`: `Some` when `conditional_disagg` is on;
    /// refused on another family, and where they would not be read.
    fn conditional_disagg(&self, p: &PdFile) -> Result<Option<ConditionalDisagg>> {
        // The last two are read only with `conditional_disagg: true`.
        let stated = [
            ("remote_prefill", p.remote_prefill.is_some()),
            ("conditional_disagg", p.conditional_disagg.is_some()),
            ("max_local_prefill_length", p.max_local_prefill_length.is_some()),
            ("max_prefill_queue_size", p.max_prefill_queue_size.is_some()),
        ];
        let first = |flags: &[(&'static str, bool)]| flags.iter().find(|f| f.1).map(|f| f.0);
        if let (Some(key), false) = (first(&stated), self.engine == EngineFamily::DynamoV0) {
            return Err(EngineError::invalid(
                format!("pd.{key}"),
                format!(
                    "Dynamo 0.1-0.3's VllmWorker option (engine: dynamo with engine_version \
                     below 0.4); engine {} prefills every prompt of a P/D deployment on its \
                     prefill workers",
                    self.engine
                ),
            ));
        }
        if p.remote_prefill == Some(false) {
            return Err(EngineError::invalid(
                "pd.remote_prefill",
                "false is an aggregated deployment: write it without `pd:` (tp, replicas)",
            ));
        }
        if p.conditional_disagg != Some(true) {
            if let Some(key) = first(&stated[2..]) {
                return Err(EngineError::invalid(
                    format!("pd.{key}"),
                    "read only with conditional_disagg: true (without it every prompt goes to \
                     a prefill worker)",
                ));
            }
            return Ok(None);
        }
        let d = ConditionalDisagg::DEFAULT;
        Ok(Some(ConditionalDisagg {
            max_local_prefill_length: p
                .max_local_prefill_length
                .unwrap_or(d.max_local_prefill_length),
            max_prefill_queue_size: p.max_prefill_queue_size.unwrap_or(d.max_prefill_queue_size),
        }))
    }
}

/// The keys of a serialised struct, with their values (the family's defaults).
fn mapping_of<T: Serialize>(t: &T) -> Result<Mapping> {
    match serde_yaml_ng::to_value(t) {
        Ok(Value::Mapping(m)) => Ok(m),
        _ => Err(EngineError::Parse { what: "engine file".into(), message: "defaults".into() }),
    }
}

/// `base` with every key of `over` replacing its own.
fn overlay(base: &Mapping, over: &Mapping) -> Mapping {
    let mut m = base.clone();
    for (k, v) in over {
        m.insert(k.clone(), v.clone());
    }
    m
}

/// The engines' own names for scheduler keys. The largest CUDA-graph capture: vLLM's
/// `cuda_graph_sizes` and its `compilation_config`'s `cudagraph_capture_sizes` (lists: their
/// largest entry) and `max_cudagraph_capture_size`, SGLang's `cuda_graph_max_bs`, written as
/// `cuda_graph_max_batch`; vLLM's `compilation_config:` mapping itself (`--compilation-config
/// '{...}'` as YAML), whose graph keys are read so and whose others are refused by name
/// (`at`: where the mapping is, for the message); SGLang's `scheduler_recv_interval`, written
/// as `recv_interval`.
fn scheduler_aliases(s: &mut Mapping, at: &str) -> Result<()> {
    if let Some(Value::Mapping(cc)) = s.get("compilation_config").cloned() {
        s.remove("compilation_config");
        for (k, v) in cc {
            let key = k.as_str().unwrap_or_default();
            let known = [
                "cudagraph_capture_sizes",
                "cudagraph_mode",
                "max_cudagraph_capture_size",
                "full_cuda_graph",
            ];
            if !known.contains(&key) {
                return Err(EngineError::invalid(
                    format!("{at}compilation_config.{key}"),
                    "not modelled (remove it): of vLLM's compilation config the model reads \
                     cudagraph_capture_sizes, max_cudagraph_capture_size, cudagraph_mode and \
                     full_cuda_graph",
                ));
            }
            // vLLM 0.9-0.10's `full_cuda_graph: true`: decode steps as one full graph.
            if key == "full_cuda_graph" {
                if let Some(full) = v.as_bool() {
                    s.insert("full_decode_graphs".into(), Value::from(full));
                    continue;
                }
            }
            s.insert(k, v);
        }
    }
    for list in ["cuda_graph_sizes", "cudagraph_capture_sizes"] {
        let Some(v) = s.remove(list) else { continue };
        let max = match &v {
            Value::Sequence(items) => items.iter().filter_map(Value::as_u64).max(),
            other => other.as_u64(),
        };
        // Not a list of sizes: left in place for the typed parse to name.
        match max {
            Some(n) => s.insert("cuda_graph_max_batch".into(), Value::from(n)),
            None => s.insert(list.into(), v),
        };
    }
    // vLLM's `cudagraph_mode`: whether decode-only steps are one full graph. NONE is
    // `enforce_eager`; anything else is left for the typed parse to name.
    if let Some(v) = s.remove("cudagraph_mode") {
        let full = match v.as_str().map(str::to_ascii_uppercase).as_deref() {
            Some("PIECEWISE") => Some(false),
            Some("FULL_AND_PIECEWISE" | "FULL_DECODE_ONLY" | "FULL") => Some(true),
            _ => None,
        };
        match full {
            Some(f) => s.insert("full_decode_graphs".into(), Value::from(f)),
            None => s.insert("cudagraph_mode".into(), v),
        };
    }
    for alias in ["max_cudagraph_capture_size", "cuda_graph_max_bs"] {
        if let Some(v) = s.remove(alias) {
            s.insert("cuda_graph_max_batch".into(), v);
        }
    }
    if let Some(v) = s.remove("scheduler_recv_interval") {
        s.insert("recv_interval".into(), v);
    }
    Ok(())
}

/// Fills the family's defaults into `scheduler:` and `calibration:` where the file left keys
/// out, and merges each P/D pool's own keys over them.
fn fill_defaults(m: &mut Mapping) -> Result<()> {
    if let Some(Value::Number(_) | Value::Bool(_)) = m.get("engine_version") {
        // YAML reads 0.10 as the number 0.1: the version the user meant is already lost.
        return Err(EngineError::invalid(
            "engine_version",
            "write it quoted (engine_version: \"0.10\"): unquoted, YAML reads it as a number",
        ));
    }
    if let Some(Value::Mapping(s)) = m.get_mut("scheduler") {
        scheduler_aliases(s, "scheduler.")?;
    }
    let family = match m.get("engine") {
        Some(f) => serde_yaml_ng::from_value::<EngineFamily>(f.clone())
            .map_err(|e| EngineError::invalid("engine", e.to_string()))?,
        None => EngineFamily::default(),
    };
    let gpu = m.get("gpu").and_then(Value::as_str).and_then(|g| GpuSpec::preset(g).ok());
    let version = m.get("engine_version").and_then(Value::as_str).map(str::to_string);
    let version = version.as_deref();
    // Dynamo before 0.4 ran vLLM V0 workers: its own family, named in what the file says.
    let family = family.at_version(version);
    if family == EngineFamily::DynamoV0 {
        m.insert("engine".into(), Value::from(family.name()));
        dynamo_v0_checks(m)?;
        // Its prefill workers pull from one shared queue, each taking the next prompt when it
        // is free: the least-loaded worker stands for that unless the file routes otherwise.
        if m.contains_key("pd") && !m.contains_key("router") {
            m.insert("router".into(), Value::from("least-loaded"));
        }
    }
    let mut sched = mapping_of(&family.scheduler_defaults_for(gpu.as_ref(), version))?;
    if matches!(family, EngineFamily::VllmV0 | EngineFamily::DynamoV0) {
        // Dynamo's disaggregated workers turn chunked prefill off.
        let no_chunk = family == EngineFamily::DynamoV0 && m.contains_key("pd");
        v0_model_defaults(m, &mut sched, no_chunk);
    }
    let mut calib = mapping_of(&family.calibration_defaults())?;
    let given_top: Mapping = match m.get("scheduler") {
        Some(Value::Mapping(g)) => g.clone(),
        _ => Mapping::new(),
    };
    for (key, defaults) in [("scheduler", &mut sched), ("calibration", &mut calib)] {
        match m.get(key) {
            None | Some(Value::Null) => {}
            Some(Value::Mapping(given)) => *defaults = overlay(defaults, given),
            // A wrong type: the typed parse names it.
            Some(_) => continue,
        }
        m.insert(key.into(), Value::Mapping(defaults.clone()));
    }
    if states_its_cap(&given_top) {
        sched.insert("max_num_seqs_from_kv".into(), Value::from(false));
        m.insert("scheduler".into(), Value::Mapping(sched.clone()));
    }
    let sglang_gpu = gpu.as_ref().filter(|_| family == EngineFamily::Sglang);
    if let Some(g) = sglang_gpu {
        let tp = m.get("tp").and_then(Value::as_u64).unwrap_or(1);
        sglang_memory(&mut sched, &given_top, &Mapping::new(), g, tp, version);
        m.insert("scheduler".into(), Value::Mapping(sched.clone()));
    }
    let sched_keys: Vec<Value> = sched.keys().cloned().collect();
    if let Some(Value::Mapping(pd)) = m.get_mut("pd") {
        for pool in ["prefill", "decode"] {
            let Some(Value::Mapping(p)) = pd.get_mut(pool) else { continue };
            let mut own = match p.remove("scheduler") {
                Some(Value::Mapping(s)) => s,
                Some(other) => {
                    p.insert("scheduler".into(), other);
                    continue;
                }
                None => Mapping::new(),
            };
            scheduler_aliases(&mut own, &format!("pd.{pool}.scheduler."))?;
            scheduler_aliases(p, &format!("pd.{pool}."))?;
            for k in &sched_keys {
                if let Some(v) = p.remove(k) {
                    own.insert(k.clone(), v);
                }
            }
            if states_its_cap(&own) {
                own.insert("max_num_seqs_from_kv".into(), Value::from(false));
            }
            if family == EngineFamily::DynamoV0 && pool == "prefill" {
                // PrefillWorker.prefill_queue_handler dequeues one request and runs it to its
                // one token before the next; prefill_worker.py sets enforce_eager.
                for (k, v) in [("max_num_seqs", Value::from(1)), ("enforce_eager", true.into())] {
                    if !own.contains_key(k) {
                        own.insert(k.into(), v);
                    }
                }
            }
            if !own.is_empty() || sglang_gpu.is_some() {
                let mut pool = overlay(&sched, &own);
                if let Some(g) = sglang_gpu {
                    // The pool's own TP sizes SGLang's graph and memory share.
                    let tp = p.get("tp").and_then(Value::as_u64).unwrap_or(1);
                    sglang_memory(&mut pool, &given_top, &own, g, tp, version);
                }
                p.insert("scheduler".into(), Value::Mapping(pool));
            }
            if let Some(Value::Mapping(c)) = p.get("calibration") {
                let merged = overlay(&calib, c);
                p.insert("calibration".into(), Value::Mapping(merged));
            }
        }
    }
    Ok(())
}

/// SGLang's `cuda_graph_max_bs` and `mem_fraction_static` for a worker at `tp`
/// ([`crate::family::sglang_memory_defaults`]), into `sched` where neither the file's
/// top-level scheduler (`top`) nor the pool's (`pool`) sets them. The fraction depends on the
/// graph size and the chunk size in force.
fn sglang_memory(
    sched: &mut Mapping,
    top: &Mapping,
    pool: &Mapping,
    gpu: &GpuSpec,
    tp: u64,
    version: Option<&str>,
) {
    let set = |k: &str| top.contains_key(k) || pool.contains_key(k);
    let int =
        |k: &str| sched.get(k).and_then(Value::as_u64).map(|n| n.min(u64::from(u32::MAX)) as u32);
    let chunk = int("max_num_batched_tokens").unwrap_or(8192);
    let graph = if set("cuda_graph_max_batch") { int("cuda_graph_max_batch") } else { None };
    let tp = u32::try_from(tp).unwrap_or(u32::MAX);
    let (fraction, graph) = crate::family::sglang_memory_defaults(gpu, tp, chunk, graph, version);
    sched.insert("cuda_graph_max_batch".into(), Value::from(graph));
    if !set("gpu_memory_utilization") {
        sched.insert("gpu_memory_utilization".into(), Value::from(fraction));
    }
}

/// vLLM V0's defaults that follow the model (`_set_default_args_v0` and `SchedulerConfig`):
/// chunked prefill turns itself on for a context of more than 32,768 tokens on a model without
/// sliding-window layers, with a budget of 2,048 tokens and decodes sharing the step with
/// prompt chunks; without it a prompt is scheduled whole and the budget is max(max_model_len,
/// 2,048). The context is the file's `max_model_len`, else the preset model's
/// `max_position_embeddings` (a `model_config` file is not read here: give `max_model_len`).
/// Keys the file sets win over these, as over every default. Dynamo's V0 workers (`no_chunk`)
/// turn chunked prefill off whatever the context.
fn v0_model_defaults(m: &Mapping, sched: &mut Mapping, no_chunk: bool) {
    let given = m.get("scheduler").and_then(Value::as_mapping);
    let model = m.get("model").and_then(Value::as_str).and_then(|n| ModelSpec::preset(n).ok());
    let len = given
        .and_then(|s| s.get("max_model_len"))
        .and_then(Value::as_u64)
        .or_else(|| model.as_ref()?.max_position_embeddings.map(u64::from));
    let Some(len) = len else { return };
    let chunked = match given.and_then(|s| s.get("chunked_prefill")).and_then(Value::as_bool) {
        Some(c) => c,
        None => {
            !no_chunk && len > 32_768 && model.as_ref().is_none_or(|m| m.sliding_window.is_none())
        }
    };
    let budget = if chunked { 2048 } else { len.max(2048) };
    sched.insert("chunked_prefill".into(), Value::from(chunked));
    sched.insert("mixed_batches".into(), Value::from(chunked));
    sched.insert("max_num_batched_tokens".into(), Value::from(budget));
}

/// What Dynamo 0.1-0.3 refuses or forces with P/D (remote prefill): its patch raises an error
/// when remote prefill meets chunked prefill, and `worker.py` / `prefill_worker.py` set
/// `enable_chunked_prefill = False` whatever the command says, so a file that asks for it is
/// told so. Its aggregated workers (no remote prefill) take the command's setting.
fn dynamo_v0_checks(m: &Mapping) -> Result<()> {
    let asks = |s: Option<&Value>| {
        s.and_then(Value::as_mapping)
            .and_then(|s| s.get("chunked_prefill"))
            .and_then(Value::as_bool)
            .unwrap_or(false)
    };
    let Some(pd) = m.get("pd").and_then(Value::as_mapping) else { return Ok(()) };
    // A pool states scheduler keys in itself or under its own `scheduler:`.
    let in_pool = ["prefill", "decode"]
        .into_iter()
        .filter_map(|p| pd.get(p))
        .any(|p| asks(Some(p)) || asks(p.get("scheduler")));
    if asks(m.get("scheduler")) || in_pool {
        return Err(EngineError::invalid(
            "scheduler.chunked_prefill",
            "Dynamo before 0.4 runs its disaggregated vLLM V0 workers without chunked prefill \
             (its workers turn it off, and its patch refuses it with remote prefill): leave it \
             out or set it false",
        ));
    }
    Ok(())
}

/// Whether the scheduler keys `given` state a running cap (`max_num_seqs`, SGLang's
/// `--max-running-requests`) without saying whether to derive it: a stated cap is not derived.
fn states_its_cap(given: &Mapping) -> bool {
    given.contains_key("max_num_seqs") && !given.contains_key("max_num_seqs_from_kv")
}

fn check_count(key: &str, n: u32) -> Result<()> {
    if n == 0 {
        return Err(EngineError::invalid(key, "expected an integer >= 1, got 0"));
    }
    Ok(())
}

fn check_tp(key: &str, tp: u32, model: &ModelSpec) -> Result<()> {
    if model.heads % tp != 0 {
        return Err(EngineError::invalid(
            key,
            format!("{tp} does not divide num_attention_heads {} of {}", model.heads, model.name),
        ));
    }
    Ok(())
}

fn validate_scheduler(s: &SchedulerConfig) -> Result<()> {
    check_count("scheduler.max_num_seqs", s.max_num_seqs)?;
    check_count("scheduler.max_num_batched_tokens", s.max_num_batched_tokens)?;
    check_count("scheduler.block_size", s.block_size)?;
    if !(s.gpu_memory_utilization > 0.0 && s.gpu_memory_utilization <= 1.0) {
        return Err(EngineError::invalid(
            "scheduler.gpu_memory_utilization",
            format!("expected 0 < value <= 1, got {}", s.gpu_memory_utilization),
        ));
    }
    if let Some(r) = s.activation_reserve_gb {
        if !(r.is_finite() && r >= 0.0) {
            return Err(EngineError::invalid(
                "scheduler.activation_reserve_gb",
                format!("expected a value >= 0, got {r}"),
            ));
        }
    }
    if s.num_gpu_blocks == Some(0) {
        return Err(EngineError::invalid("scheduler.num_gpu_blocks", "expected >= 1, got 0"));
    }
    if s.max_model_len == Some(0) {
        return Err(EngineError::invalid("scheduler.max_model_len", "expected >= 1, got 0"));
    }
    check_count("scheduler.recv_interval", s.recv_interval)?;
    Ok(())
}

/// Everything one worker (a TP group running one scheduler) needs.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkerSpec {
    /// The serving engine.
    pub engine: EngineFamily,
    /// The model.
    pub model: ModelSpec,
    /// The GPU.
    pub gpu: GpuSpec,
    /// TP degree.
    pub tp: u32,
    /// KV-cache format.
    pub kv_dtype: DType,
    /// Scheduler options.
    pub scheduler: SchedulerConfig,
    /// Calibration parameters.
    pub calibration: Calibration,
}

impl EngineConfig {
    /// The spec of a worker with TP `tp` and the top-level scheduler and calibration.
    pub fn worker(&self, tp: u32) -> WorkerSpec {
        WorkerSpec {
            engine: self.engine,
            model: self.model.clone(),
            gpu: self.gpu.clone(),
            tp,
            kv_dtype: self.kv_dtype,
            scheduler: self.scheduler,
            calibration: self.calibration,
        }
    }

    /// The spec of a worker of P/D pool `pool`: its own scheduler and calibration if it has
    /// them.
    pub fn pool_worker(&self, pool: &PoolFile) -> WorkerSpec {
        let mut w = self.worker(pool.tp);
        if let Some(s) = pool.scheduler {
            w.scheduler = s;
        }
        if let Some(c) = pool.calibration {
            w.calibration = c;
        }
        w
    }

    /// (key, spec) of each kind of worker, for messages.
    pub fn worker_specs(&self) -> Vec<(&'static str, WorkerSpec)> {
        match &self.pd {
            Some(p) => vec![
                ("pd.prefill.tp", self.pool_worker(&p.prefill)),
                ("pd.decode.tp", self.pool_worker(&p.decode)),
            ],
            None => vec![("tp", self.worker(self.tp))],
        }
    }

    /// GPUs the deployment uses.
    pub fn gpus(&self) -> u32 {
        match &self.pd {
            Some(p) => p.prefill.workers * p.prefill.tp + p.decode.workers * p.decode.tp,
            None => self.replicas * self.tp,
        }
    }
}

impl WorkerSpec {
    /// KV heads held by one GPU: heads are split over TP, and replicated when TP exceeds them.
    pub fn kv_heads_per_gpu(&self) -> u32 {
        self.model.kv_heads.div_ceil(self.tp)
    }

    /// KV bytes of one token on one GPU: its share of the KV heads, or with MLA the whole
    /// latent (every TP rank caches it).
    pub fn kv_bytes_per_token_per_gpu(&self) -> f64 {
        if self.model.mla.is_some() {
            return self.model.kv_bytes_per_token(self.kv_dtype);
        }
        2.0 * f64::from(self.model.layers)
            * f64::from(self.kv_heads_per_gpu())
            * f64::from(self.model.head_dim)
            * self.kv_dtype.bytes()
    }

    /// Memory per GPU kept out of the KV cache besides the weights, bytes. vLLM (V1, V0 and
    /// Dynamo's vLLM workers) sizes its KV cache from a profiling run
    /// ([`vllm_profile_reserve_bytes`]); the other families keep 1.5 GB (CUDA graphs, NCCL,
    /// allocator) plus the 16-bit activations of a full step (8 hidden-wide and 4
    /// intermediate-wide tensors per token, TP-split where the weights are) plus FP32 logits
    /// of `max_num_seqs` rows. `scheduler.activation_reserve_gb` overrides both.
    pub fn activation_reserve_bytes(&self) -> f64 {
        if let Some(gb) = self.scheduler.activation_reserve_gb {
            return gb * 1e9;
        }
        let m = &self.model;
        let tp = f64::from(self.tp);
        let inter = self.token_intermediate();
        let t = f64::from(self.scheduler.max_num_batched_tokens);
        let seqs = f64::from(self.scheduler.max_num_seqs);
        if self.engine.traits().vllm_workers {
            return vllm_profile_reserve_bytes(
                t,
                seqs,
                f64::from(m.hidden),
                inter / tp,
                f64::from(m.vocab),
                self.tp,
            );
        }
        let act = t * (8.0 * f64::from(m.hidden) + 4.0 * inter / tp) * 2.0;
        let logits = seqs * f64::from(m.vocab) / tp * 4.0;
        1.5e9 + act + logits
    }

    /// Intermediate width one token computes in an MLP block: the dense MLP's, or the
    /// experts it is routed to plus the shared ones, whichever is wider.
    fn token_intermediate(&self) -> f64 {
        let m = &self.model;
        match &m.moe {
            Some(moe) => f64::from(
                (moe.experts_per_token * moe.expert_intermediate + moe.shared_intermediate)
                    .max(m.intermediate),
            ),
            None => f64::from(m.intermediate),
        }
    }

    /// Weight bytes one GPU holds once the engine has loaded them: the checkpoint's share,
    /// plus what the engine keeps beside it. vLLM's MXFP4 MoE without FP4 tensor cores
    /// (Triton's `matmul_ogs` on Hopper, Marlin elsewhere) rewrites the experts into
    /// swizzled or repacked tensors and frees the originals' values but not their block
    /// scales (`Mxfp4MoEMethod.process_weights_after_loading` deletes `w13_weight` and
    /// `w2_weight` only), so the scales, 1 byte per 32 parameters, are held twice. Published
    /// logs agree: gpt-oss-120b (60.8 GiB of weights, 3.3 GiB of them expert scales) on one
    /// H100 "Model loading took 64.38 GiB" with the Triton backend (vLLM 0.14.1, vLLM issue
    /// 33155) and 65.97 GiB with Marlin (issue 23278).
    pub fn loaded_weight_bytes(&self) -> f64 {
        let m = &self.model;
        let mut bytes = m.weight_bytes();
        if self.engine.traits().vllm_workers
            && m.expert_dtype == DType::Mxfp4
            && self.gpu.fp4_tflops.is_none()
        {
            let experts = u64::from(m.moe.as_ref().map_or(0, |e| e.experts));
            bytes += f64::from(m.moe_layers()) * (experts * m.expert_params()) as f64 / 32.0;
        }
        bytes / f64::from(self.tp)
    }

    /// KV capacity in blocks: `(memory × utilization − weights/TP − activation reserve) / KV
    /// bytes per block per GPU`, or an error saying what does not fit.
    pub fn kv_blocks(&self) -> std::result::Result<u64, String> {
        if let Some(n) = self.scheduler.num_gpu_blocks {
            return Ok(n);
        }
        let mem = self.gpu.mem_bytes();
        let fraction = self.scheduler.gpu_memory_utilization;
        let weights = self.loaded_weight_bytes();
        let reserve = self.activation_reserve_bytes();
        let traits = self.engine.traits();
        let (budget, free) = if traits.kv_fraction_of_free_memory {
            // TensorRT-LLM: `free_gpu_memory_fraction` of what the weights and activations leave.
            let left = mem - weights - reserve;
            (mem, fraction * left)
        } else if traits.fraction_holds_weights_and_kv {
            // SGLang: `mem_fraction_static` holds the weights and the KV pool; activations and
            // CUDA graphs use the rest (a reserve the file sets is taken out all the same).
            let budget = mem * fraction;
            let set = self.scheduler.activation_reserve_gb.map_or(0.0, |gb| gb * 1e9);
            (budget, budget - weights - set)
        } else {
            // vLLM: a fraction of the whole memory, weights and activations inside it.
            let budget = mem * fraction;
            (budget, budget - weights - reserve)
        };
        let bs = f64::from(self.scheduler.block_size);
        let m = &self.model;
        // A block holds `block_size` tokens of one group of layers: all of them, or with
        // sliding-window layers one of the hybrid allocator's groups (vLLM's since 0.10),
        // whose sliding groups hold only the window (`model::Hybrid`).
        let per_layer = self.kv_bytes_per_token_per_gpu() / f64::from(m.layers);
        let per_block = per_layer * f64::from(m.block_group_layers()) * bs;
        let blocks = (free / per_block).floor();
        if blocks < 1.0 {
            return Err(format!(
                "{} weights ({:.1} GB per GPU at TP {}) leave no room for KV cache in {:.1} GB \
                 ({} × {:.2}): raise TP or use a smaller weight dtype",
                self.model.name,
                weights / 1e9,
                self.tp,
                budget / 1e9,
                self.gpu.name,
                self.scheduler.gpu_memory_utilization
            ));
        }
        Ok(blocks as u64)
    }
}

/// Memory outside the weights that vLLM keeps out of its KV cache, bytes per GPU: what its
/// profiling run measures (`determine_available_memory` in `vllm/v1/worker/gpu_worker.py`,
/// `memory_profiling` in vLLM's utilities): the KV cache gets `total × gpu_memory_utilization −
/// weights − peak activation − non-torch memory`, where the peak is that of a dummy forward
/// pass of `max_num_batched_tokens` tokens followed by a dummy sampler run of `max_num_seqs`
/// rows. CUDA graphs are captured after the KV cache is allocated and are not subtracted (up
/// to vLLM 0.11; they come out of the `1 − utilization` headroom, as does the CUDA context).
///
/// Estimated, per GPU: the forward pass peaks inside an MLP block, with the gate/up output
/// (2 × intermediate wide) and its activation (1 ×) alive beside 4 hidden-wide tensors
/// (residual, normed input, attention output, block output), 16-bit: `tokens × (3 × inter + 4
/// × hidden) × 2 B`; the sampler holds FP32 logits and probabilities over the whole vocabulary
/// (gathered on every TP rank): `seqs × vocab × 8 B`; the peak is the larger of the two. Non-torch
/// memory (cuBLAS workspaces; NCCL and custom all-reduce buffers past TP 1): 0.25 GB at TP 1,
/// 0.75 GB above. `inter` is already TP-split.
pub fn vllm_profile_reserve_bytes(
    tokens: f64,
    seqs: f64,
    hidden: f64,
    inter: f64,
    vocab: f64,
    tp: u32,
) -> f64 {
    let forward = tokens * (3.0 * inter + 4.0 * hidden) * 2.0;
    let sampler = seqs * vocab * 8.0;
    let non_torch = if tp > 1 { 0.75e9 } else { 0.25e9 };
    forward.max(sampler) + non_torch
}

#[cfg(test)]
mod tests {
    use super::*;

    const TABLE_DEPLOYMENT: &str = "
model: qwen3-32b
gpu: h20
tp: 4
replicas: 4
scheduler:
  chunked_prefill: true
";

    /// vLLM V0 chunks prompts by itself only for a context over 32K tokens (Qwen3's 40,960 by
    /// default), with 2,048 tokens a step; otherwise a prompt goes whole, its budget the
    /// context. A file's own keys win.
    #[test]
    fn v0_chunked_prefill_follows_the_context() {
        let sched = |extra: &str| {
            let f =
                EngineFile::parse(&format!("engine: vllm-v0\nmodel: qwen3-32b\ngpu: h20\n{extra}"));
            let s = f.unwrap().build(None).unwrap().scheduler;
            (s.chunked_prefill, s.mixed_batches, s.max_num_batched_tokens)
        };
        assert_eq!(sched(""), (true, true, 2048));
        assert_eq!(sched("scheduler: {max_model_len: 32768}\n"), (false, false, 32768));
        assert_eq!(sched("scheduler: {max_model_len: 1024}\n"), (false, false, 2048));
        assert_eq!(sched("scheduler: {chunked_prefill: false}\n"), (false, false, 40960));
        assert_eq!(sched("scheduler: {max_num_batched_tokens: 4096}\n"), (true, true, 4096));
        // gpt-oss has sliding-window layers: V0 leaves chunked prefill off.
        let f = EngineFile::parse("engine: vllm-v0\nmodel: gpt-oss-20b\ngpu: h100\n").unwrap();
        assert_eq!(
            (f.scheduler.chunked_prefill, f.scheduler.max_num_batched_tokens),
            (false, 131072)
        );
    }

    /// vLLM V1's batch defaults follow its version: an H20 took 2,048 tokens before 0.8.5.
    #[test]
    fn vllm_batch_defaults_follow_the_version() {
        let sched = |v: &str| {
            let f = EngineFile::parse(&format!(
                "model: qwen3-32b\ngpu: h20\nengine_version: \"{v}\"\n"
            ));
            let s = f.unwrap().scheduler;
            (s.max_num_seqs, s.max_num_batched_tokens)
        };
        assert_eq!(sched("0.8.4"), (256, 2048));
        assert_eq!(sched("0.9.0.1"), (1024, 8192));
    }

    /// SGLang's memory share and graph size follow the worker's TP (each P/D pool its own);
    /// the share holds weights and KV only, so no activation reserve comes out of the KV.
    #[test]
    fn sglang_memory_share_follows_each_pool() {
        let f = EngineFile::parse(
            "engine: sglang\nengine_version: \"0.5.5\"\nmodel: qwen3-32b\ngpu: h20\n\
             pd: {prefill: {workers: 2, tp: 1}, decode: {workers: 1, tp: 4}}\n",
        )
        .unwrap();
        let cfg = f.build(None).unwrap();
        let pd = cfg.pd.as_ref().unwrap();
        let (p, d) = (cfg.pool_worker(&pd.prefill), cfg.pool_worker(&pd.decode));
        let pick = |s: &SchedulerConfig| (s.gpu_memory_utilization, s.cuda_graph_max_batch);
        // H20 (98,304 MiB): TP 1 leaves 512 + 12,288 + 512 + 128 MiB, TP 4 14,336.
        assert_eq!(pick(&p.scheduler), (0.863, 256));
        assert_eq!(pick(&d.scheduler), (0.854, 512));
        // The file's own values win, at the top level or in a pool.
        let f = EngineFile::parse(
            "engine: sglang\nmodel: qwen3-8b\ngpu: h100\nscheduler: {gpu_memory_utilization: 0.8}\n",
        )
        .unwrap();
        assert_eq!(pick(&f.scheduler), (0.8, 256));
        let f = EngineFile::parse(
            "engine: sglang\nmodel: qwen3-8b\ngpu: h100\nscheduler: {cuda_graph_max_bs: 128}\n",
        )
        .unwrap();
        assert_eq!(pick(&f.scheduler), (0.839, 128));
        // Qwen3-8B on one H100: KV = 0.836 × 80 GiB − weights, at 147,456 bytes a token
        // (36 layers × 8 KV heads × 128 × 2 × 2 B), 2,359,296 a 16-token block.
        let cfg = EngineFile::parse("engine: sglang\nmodel: qwen3-8b\ngpu: h100\n")
            .unwrap()
            .build(None)
            .unwrap();
        let w = cfg.worker(1);
        let want = ((80.0 * f64::from(1u32 << 30) * 0.836 - cfg.model.weight_bytes()) / 2_359_296.0)
            .floor() as u64;
        assert_eq!(w.kv_blocks().unwrap(), want);
    }

    /// SGLang's chunk size follows the GPU's memory; a file's own value wins.
    #[test]
    fn sglang_chunk_size_follows_gpu_memory() {
        let budget = |yaml: &str| {
            EngineFile::parse(yaml).unwrap().build(None).unwrap().scheduler.max_num_batched_tokens
        };
        for (gpu, want) in [("l40s", 4096), ("h100", 8192), ("h20", 8192), ("b200", 16384)] {
            assert_eq!(budget(&format!("engine: sglang\nmodel: qwen3-8b\ngpu: {gpu}\n")), want);
        }
        assert_eq!(
            budget("engine: sglang\nmodel: qwen3-8b\ngpu: b200\nscheduler: {max_num_batched_tokens: 4096}\n"),
            4096
        );
    }

    #[test]
    fn builds_the_table_deployment() {
        let cfg = EngineFile::parse(TABLE_DEPLOYMENT).unwrap().build(None).unwrap();
        assert_eq!((cfg.tp, cfg.replicas, cfg.gpus()), (4, 4, 16));
        let w = cfg.worker(4);
        // 2 KV heads per GPU: 2 × 64 layers × 2 × 128 × 2 bytes = 65,536 bytes per token.
        assert_eq!(w.kv_bytes_per_token_per_gpu(), 65_536.0);
        // 96 GiB × 0.9 = 92,771,293,593.6 B; weights 65.5 GB / 4 = 16,381,053,440 B; vLLM's
        // profiled reserve: the sampler's 1,024 rows × 151,936 × 8 B = 1,244,659,712 B (more
        // than the forward pass's 650 MB) + 0.75 GB → 74.4 GB / 1 MiB per block = 70,949
        // blocks ≈ 1.14 M tokens per replica.
        let blocks = w.kv_blocks().unwrap();
        assert_eq!(blocks, 70_949);
    }

    #[test]
    fn errors_name_the_key() {
        let cases = [
            ("model: qwen3-32b\ngpu: h20\ntp: 3\n", "tp: 3 does not divide"),
            ("model: qwen3-32b\ngpu: h20\nscheduler: {max_num_seqs: 0}\n", "scheduler.max_num_seqs:"),
            ("model: qwen3-32b\ngpu: h20\nbogus: 1\n", "unknown field `bogus`, expected one of"),
            ("model: qwen3-32b\ngpu: h20\ncalibration: {eta_mem: 1.5}\n", "calibration.eta_mem:"),
            (
                "model: qwen3-32b\ngpu: h20\ncalibration: {allreduce_us: 59.85}\n",
                "calibration.allreduce_us: no longer read",
            ),
            ("model: llama-3.3-70b\ngpu: l40s\n", "tp: llama-3.3-70b weights"),
            ("gpu: h20\n", "model: missing"),
            (
                "model: qwen3-8b\ngpu: h100\ntp: 2\npd: {prefill: {workers: 1, tp: 1}, decode: {workers: 1, tp: 1}}\n",
                "tp: not allowed with `pd`",
            ),
            (
                "model: qwen3-8b\ngpu: h100\npd: {prefill: {workers: 0, tp: 1}, decode: {workers: 1, tp: 1}}\n",
                "pd.prefill.workers:",
            ),
        ];
        for (yaml, want) in cases {
            let e = EngineFile::parse(yaml).and_then(|f| f.build(None)).unwrap_err().to_string();
            assert!(e.contains(want), "{yaml}: {e}");
        }
    }

    /// SGLang's running cap is derived from its KV pool unless the file, or a P/D pool, states
    /// `max_num_seqs` (its `--max-running-requests`).
    #[test]
    fn sglang_derives_its_cap_unless_a_pool_or_the_file_states_one() {
        let cfg = EngineFile::parse(
            "engine: sglang\nmodel: qwen3-8b\ngpu: h100\n\
             pd: {prefill: {workers: 1, tp: 1, max_num_seqs: 32}, decode: {workers: 1, tp: 1}}\n",
        )
        .unwrap()
        .build(None)
        .unwrap();
        assert!(cfg.scheduler.max_num_seqs_from_kv);
        let pd = cfg.pd.as_ref().unwrap();
        let (p, d) = (cfg.pool_worker(&pd.prefill), cfg.pool_worker(&pd.decode));
        assert_eq!((p.scheduler.max_num_seqs, p.scheduler.max_num_seqs_from_kv), (32, false));
        assert!(d.scheduler.max_num_seqs_from_kv);
        let vllm = EngineFile::parse("model: qwen3-8b\ngpu: h100\n").unwrap().build(None).unwrap();
        assert!(!vllm.scheduler.max_num_seqs_from_kv);
    }

    /// The family's defaults fill what the file leaves out; the file's keys win; a P/D pool's
    /// own scheduler keys and calibration replace the top-level ones for that pool only.
    #[test]
    fn families_pools_and_new_scheduler_keys() {
        let cfg = EngineFile::parse(
            "engine: sglang\nengine_version: 0.4.9\nmodel: qwen3-32b\ngpu: h20\n\
             scheduler: {max_num_seqs: 64, max_model_len: 4096, enforce_eager: true}\n\
             calibration: {eta_gemm: 0.8}\n\
             pd: {prefill: {workers: 2, tp: 4, max_num_batched_tokens: 16384, \
             calibration: {step_overhead_us: 50}}, decode: {workers: 1, tp: 4}}\n",
        )
        .unwrap()
        .build(None)
        .unwrap();
        assert_eq!(
            (cfg.engine, cfg.engine_version.as_deref()),
            (EngineFamily::Sglang, Some("0.4.9"))
        );
        let s = cfg.scheduler;
        assert_eq!((s.max_num_seqs, s.max_model_len, s.enforce_eager), (64, Some(4096), true));
        assert_eq!((s.mixed_batches, s.cuda_graph_max_batch), (false, 160), "sglang's defaults");
        assert_eq!(cfg.calibration.step_overhead_us, 400.0, "sglang's per-step CPU time");
        let pd = cfg.pd.as_ref().unwrap();
        let p = cfg.pool_worker(&pd.prefill);
        assert_eq!(p.scheduler.max_num_batched_tokens, 16384);
        assert_eq!(p.scheduler.max_num_seqs, 64, "the rest from the top level");
        assert!(!s.max_num_seqs_from_kv && !p.scheduler.max_num_seqs_from_kv, "a stated cap");
        assert_eq!((p.calibration.step_overhead_us, p.calibration.eta_gemm), (50.0, 0.8));
        let d = cfg.pool_worker(&pd.decode);
        assert_eq!(
            (d.scheduler.max_num_batched_tokens, d.calibration.step_overhead_us),
            (8192, 400.0)
        );
        // Written back, the file means the same.
        let again = EngineFile::parse(
            &EngineFile::parse("engine: vllm-v0\nmodel: qwen3-8b\ngpu: h100\n")
                .unwrap()
                .to_yaml()
                .unwrap(),
        )
        .unwrap();
        assert_eq!(again.engine, EngineFamily::VllmV0);
        let s = again.scheduler;
        assert_eq!(
            (s.chunked_prefill, s.mixed_batches, s.max_num_batched_tokens),
            (true, true, 2048)
        );
        assert_eq!(again.calibration.step_overhead_us, 2500.0);
        // The engines' own spellings of the largest CUDA-graph capture.
        for (given, want) in [
            ("cuda_graph_sizes: [1, 2, 4, 96, 8]", 96),
            ("cudagraph_capture_sizes: [1, 2, 4, 8, 16, 24, 32, 120, 128]", 128),
            ("compilation_config: {cudagraph_capture_sizes: [1, 2, 4, 8, 48]}", 48),
            ("compilation_config: {full_cuda_graph: true, cudagraph_capture_sizes: [1, 64]}", 64),
            ("max_cudagraph_capture_size: 256", 256),
            ("cuda_graph_max_bs: 160", 160),
        ] {
            let f =
                EngineFile::parse(&format!("model: qwen3-8b\ngpu: h100\nscheduler: {{{given}}}\n"));
            assert_eq!(f.unwrap().scheduler.cuda_graph_max_batch, want, "{given}");
        }
        let full = EngineFile::parse(
            "engine: vllm-v1\nengine_version: \"0.9.2\"\nmodel: qwen3-8b\ngpu: h100\n\
             scheduler: {compilation_config: {full_cuda_graph: true}}\n",
        );
        assert!(full.unwrap().scheduler.full_decode_graphs, "vLLM 0.9's full_cuda_graph");
        // A P/D pool reads them beside its keys and in its own `scheduler:`, as the reference
        // page's Dynamo decode worker states its capture (`compilation-config`).
        let pd = EngineFile::parse(
            "engine: dynamo\nengine_version: \"0.3.0\"\nmodel: qwen3-32b\ngpu: h20\npd: \
             {prefill: {workers: 3, tp: 4, enforce_eager: true}, decode: {workers: 1, tp: 4, \
             compilation_config: {cudagraph_capture_sizes: [1, 2, 4, 8, 16, 128]}}}\n",
        )
        .unwrap()
        .build(None)
        .unwrap();
        let p = pd.pd.as_ref().unwrap();
        let graphs = |pool: &PoolFile| pool.scheduler.map(|s| s.cuda_graph_max_batch);
        assert_eq!(graphs(&p.decode), Some(128));
        let own = EngineFile::parse(
            "model: qwen3-8b\ngpu: h100\npd: {prefill: {workers: 1, tp: 1}, decode: {workers: 1, \
             tp: 1, scheduler: {cudagraph_capture_sizes: [1, 2, 64]}}}\n",
        )
        .unwrap()
        .build(None)
        .unwrap();
        assert_eq!(graphs(&own.pd.as_ref().unwrap().decode), Some(64));
        let bad = [
            ("engine: tgi\nmodel: qwen3-8b\ngpu: h100\n", "engine: unknown variant `tgi`"),
            (
                "model: qwen3-8b\ngpu: h100\nscheduler: {compilation_config: {level: 3}}\n",
                "scheduler.compilation_config.level: not modelled",
            ),
            // Dynamo 0.1-0.3's disaggregation flags: that family only, and only where read.
            (
                "model: qwen3-8b\ngpu: h100\npd: {prefill: {workers: 1, tp: 1}, decode: {workers: 1, tp: 1}, conditional_disagg: true}\n",
                "pd.conditional_disagg: Dynamo 0.1-0.3's VllmWorker option",
            ),
            (
                "engine: dynamo-v0\nmodel: qwen3-8b\ngpu: h100\npd: {prefill: {workers: 1, tp: 1}, decode: {workers: 1, tp: 1}, max_prefill_queue_size: 2}\n",
                "pd.max_prefill_queue_size: read only with conditional_disagg: true",
            ),
            (
                "engine: dynamo-v0\nmodel: qwen3-8b\ngpu: h100\npd: {prefill: {workers: 1, tp: 1}, decode: {workers: 1, tp: 1}, remote_prefill: false}\n",
                "pd.remote_prefill: false is an aggregated deployment",
            ),
            (
                "model: qwen3-8b\ngpu: h100\npd: {prefill: {workers: 1, tp: 1, bogus: 2}, decode: {workers: 1, tp: 1}}\n",
                "unknown field `bogus`",
            ),
            (
                "model: qwen3-8b\ngpu: h100\npd: {prefill: {workers: 1, tp: 1, max_num_seqs: 0}, decode: {workers: 1, tp: 1}}\n",
                "pd.prefill: max_num_seqs: expected an integer >= 1",
            ),
            (
                "model: qwen3-8b\ngpu: h100\npd: {prefill: {workers: 1, tp: 1}, decode: {workers: 1, tp: 1, calibration: {frontend_us: 5}}}\n",
                "pd.decode.calibration.frontend_us: not read for decode workers",
            ),
            ("engine_version: 0.10\nmodel: qwen3-8b\ngpu: h100\n", "engine_version: write it quoted"),
            (
                "engine: dynamo\nengine_version: \"0.3.0\"\nmodel: qwen3-8b\ngpu: h100\nscheduler: {chunked_prefill: true}\npd: {prefill: {workers: 1, tp: 1}, decode: {workers: 1, tp: 1}}\n",
                "scheduler.chunked_prefill: Dynamo before 0.4 runs its disaggregated vLLM V0",
            ),
            (
                "engine: dynamo-v0\nmodel: qwen3-8b\ngpu: h100\npd: {prefill: {workers: 1, tp: 1, chunked_prefill: true}, decode: {workers: 1, tp: 1}}\n",
                "scheduler.chunked_prefill: Dynamo before 0.4",
            ),
            (
                "model: qwen3-8b\ngpu: h100\nscheduler: {cuda_graph_size: 8}\n",
                "unknown field `cuda_graph_size`",
            ),
        ];
        for (yaml, want) in bad {
            let e = EngineFile::parse(yaml).and_then(|f| f.build(None)).unwrap_err().to_string();
            assert!(e.contains(want), "{yaml}: {e}");
        }
    }

    /// An MLA latent is cached whole on every TP rank (vLLM and SGLang split the heads, not the
    /// latent): DeepSeek-R1's 70,272 B a token in BF16 at TP 1 and at TP 8 alike, where a GQA
    /// model's share falls with TP.
    #[test]
    fn an_mla_latent_is_whole_on_every_rank() {
        let cfg = EngineFile::parse("model: deepseek-r1\ngpu: h200\ntp: 8\n")
            .unwrap()
            .build(None)
            .unwrap();
        assert_eq!(cfg.worker(1).kv_bytes_per_token_per_gpu(), 70_272.0);
        assert_eq!(cfg.worker(8).kv_bytes_per_token_per_gpu(), 70_272.0);
        let gqa = EngineFile::parse("model: qwen3-32b\ngpu: h200\n").unwrap().build(None).unwrap();
        assert_eq!(
            gqa.worker(8).kv_bytes_per_token_per_gpu() * 8.0,
            gqa.worker(1).kv_bytes_per_token_per_gpu()
        );
    }

    /// Dynamo before 0.4 is its V0 family whichever name the file uses: V0's scheduler and CPU
    /// times, chunked prefill off even where V0 would turn it on (a 40,960-token context),
    /// prefill workers one prompt at a time in eager mode unless the file says otherwise, the
    /// decode workers untouched; Dynamo 0.4 stays `dynamo`.
    #[test]
    fn dynamo_before_0_4_runs_v0_workers() {
        let pd = "pd: {prefill: {workers: 4, tp: 1}, decode: {workers: 1, tp: 4}}\n";
        for head in ["engine: dynamo\nengine_version: \"0.3.0\"\n", "engine: dynamo-v0\n"] {
            let yaml = format!("{head}model: qwen3-8b\ngpu: h100\n{pd}");
            let c = EngineFile::parse(&yaml).unwrap().build(None).unwrap();
            assert_eq!(c.engine, EngineFamily::DynamoV0, "{yaml}");
            assert!(!c.scheduler.chunked_prefill && !c.scheduler.mixed_batches);
            assert_eq!(c.scheduler.max_num_batched_tokens, 40_960);
            assert_eq!(c.calibration.tp_step_overhead_us, crate::family::V0_TP_STEP_US);
            let p = c.pd.as_ref().unwrap();
            let (prefill, decode) = (c.pool_worker(&p.prefill), c.pool_worker(&p.decode));
            assert_eq!(
                (prefill.scheduler.max_num_seqs, prefill.scheduler.enforce_eager),
                (1, true)
            );
            assert_eq!(decode.scheduler, c.scheduler);
            assert_eq!(c.router, Router::LeastLoaded);
        }
        let own = "engine: dynamo\nengine_version: \"0.3.2\"\nmodel: qwen3-8b\ngpu: h100\npd: \
                   {prefill: {workers: 1, tp: 1, scheduler: {max_num_seqs: 2}}, decode: {workers: \
                   1, tp: 1}}\n";
        let own = format!("{own}router: random\n");
        let c = EngineFile::parse(&own).unwrap().build(None).unwrap();
        assert_eq!(c.pool_worker(&c.pd.as_ref().unwrap().prefill).scheduler.max_num_seqs, 2);
        assert_eq!(c.router, Router::Random, "a router the file names");
        // Aggregated (no remote prefill), its workers take V0's own rule: chunked for the
        // 40,960-token context, or whatever the file says.
        let agg = "engine: dynamo-v0\nmodel: qwen3-8b\ngpu: h100\n";
        let c = EngineFile::parse(agg).unwrap().build(None).unwrap();
        assert_eq!((c.scheduler.chunked_prefill, c.scheduler.max_num_batched_tokens), (true, 2048));
        let off = format!("{agg}scheduler: {{chunked_prefill: false}}\n");
        assert!(!EngineFile::parse(&off).unwrap().build(None).unwrap().scheduler.chunked_prefill);
        let v04 = "engine: dynamo\nengine_version: \"0.4.0\"\nmodel: qwen3-8b\ngpu: h100\n";
        let c = EngineFile::parse(v04).unwrap().build(None).unwrap();
        assert_eq!(c.engine, EngineFamily::Dynamo);
    }

    #[test]
    fn model_config_text_is_used() {
        let f = EngineFile::parse("model_config: c.json\ngpu: h100\nkv_dtype: fp8\n").unwrap();
        let json = r#"{"num_hidden_layers":2,"hidden_size":64,"num_attention_heads":4,
            "intermediate_size":128,"vocab_size":100}"#;
        let cfg = f.build(Some(json)).unwrap();
        assert_eq!(cfg.model.layers, 2);
        assert_eq!(cfg.kv_dtype, DType::Fp8);
        assert!(f.build(None).is_err());
    }

    /// gpt-oss-120b on two B200s: 18 of its 36 layers slide over 128 tokens. A block of the
    /// pool holds 16 tokens of one group of 18 layers (vLLM's hybrid allocator), so the pool
    /// has twice the blocks of counting every layer in a block; the sliding groups' share is
    /// taken per request as its window moves (`replica::tests::a_sliding_window_holds_only_its_blocks`).
    #[test]
    fn sliding_window_layers_hold_only_the_window() {
        let cfg = EngineFile::parse(
            "model: gpt-oss-120b\ngpu: b200\ntp: 2\nscheduler: {max_num_seqs: 256}\n",
        )
        .unwrap()
        .build(None)
        .unwrap();
        let w = cfg.worker(2);
        assert_eq!(
            (w.model.layers, w.model.sliding_layers, w.model.sliding_window),
            (36, 18, Some(128))
        );
        let blocks = w.kv_blocks().unwrap() as f64;
        let per_layer = w.kv_bytes_per_token_per_gpu() / 36.0;
        let budget =
            180.0 * 2f64.powi(30) * 0.9 - w.loaded_weight_bytes() - w.activation_reserve_bytes();
        assert_eq!(w.loaded_weight_bytes(), w.model.weight_bytes() / 2.0, "FP4 tensor cores");
        let in_full = (budget / (per_layer * 36.0 * 16.0)).floor();
        assert_eq!(blocks, (budget / (per_layer * 18.0 * 16.0)).floor());
        assert!((blocks - 2.0 * in_full).abs() <= 1.0, "{blocks} {in_full}");
    }

    /// A file whose calibration was fitted elsewhere (`fitted_on`) is carried by
    /// `carry_calibration`: efficiencies always; kernel latencies only on the same engine and
    /// GPU; CPU times only on the same engine; the rest are the family's defaults. On its own
    /// deployment the calibration is as written.
    #[test]
    fn a_calibration_fitted_elsewhere_is_carried_at_load() {
        let fit = "calibration: {eta_gemm: 0.8, layer_overhead_us: 113, per_seq_overhead_us: 45, \
                   frontend_us: 286}\nfitted_on: {engine: vllm-v1, gpu: h20, tp: 4, model: qwen3-32b}\n";
        let c = |head: &str| {
            EngineFile::parse(&format!("{head}{fit}")).unwrap().build(None).unwrap().calibration
        };
        let same = c("model: qwen3-32b\ngpu: h20\ntp: 4\n");
        assert_eq!(
            (same.eta_gemm, same.layer_overhead_us, same.per_seq_overhead_us, same.frontend_us),
            (0.8, 113.0, 45.0, 286.0)
        );
        let gpu = c("model: qwen3-8b\ngpu: h100\n");
        assert_eq!(
            (gpu.eta_gemm, gpu.layer_overhead_us, gpu.per_seq_overhead_us, gpu.frontend_us),
            (0.8, 10.0, 45.0, 286.0)
        );
        let engine = c("engine: sglang\nmodel: qwen3-32b\ngpu: h20\ntp: 4\n");
        assert_eq!(
            (
                engine.eta_gemm,
                engine.layer_overhead_us,
                engine.step_overhead_us,
                engine.frontend_us
            ),
            (0.8, 10.0, 400.0, 1000.0)
        );
    }

    /// vLLM's KV budget: the larger of a dummy forward pass's MLP peak and the sampler's FP32
    /// logits and probabilities, plus non-torch memory; no CUDA-graph reserve.
    /// Qwen3-32B on one H100, 8,192 tokens, 1,024 sequences: forward 8192 × (3 × 25,600 + 4 ×
    /// 5,120) × 2 B = 1,593,835,520 B; sampler 1024 × 151,936 × 8 B = 1,244,659,712 B; + 0.25
    /// GB. The KV cache then holds 80 GiB × 0.9 − 65,524,213,760 B of weights − that, / 262,144 B
    /// a token: 37,920 tokens (2,370 blocks), room for one 32,000-token prompt as vLLM has
    /// (its default `max_model_len` of 40,960 needs 10 GiB and it starts).
    #[test]
    fn vllm_kv_budget_is_its_profiling_run() {
        assert_eq!(
            vllm_profile_reserve_bytes(8192.0, 1024.0, 5120.0, 25_600.0, 151_936.0, 1),
            1_593_835_520.0 + 0.25e9
        );
        assert_eq!(
            vllm_profile_reserve_bytes(2048.0, 1024.0, 5120.0, 25_600.0, 151_936.0, 2),
            1_244_659_712.0 + 0.75e9
        );
        let cfg = EngineFile::parse("model: qwen3-32b\ngpu: h100\n").unwrap().build(None).unwrap();
        let w = cfg.worker(1);
        assert_eq!(w.model.weight_bytes(), 65_524_213_760.0);
        assert_eq!(w.activation_reserve_bytes(), 1_843_835_520.0);
        assert_eq!(w.kv_blocks().unwrap(), 2370);
    }

    #[test]
    fn kv_heads_replicate_past_tp() {
        let cfg = EngineFile::parse("model: qwen3-30b-a3b\ngpu: h100\ntp: 8\n")
            .unwrap()
            .build(None)
            .unwrap();
        // 4 KV heads over 8 GPUs: each GPU keeps a copy of one head.
        assert_eq!(cfg.worker(8).kv_heads_per_gpu(), 1);
    }
}
