//! Where a prediction comes from: the engine model, the deployment, and the calibration it
//! extrapolates from, with an uncertainty band that widens with each way the deployment
//! leaves the calibration's domain. Every artefact of a prediction carries this text.
//!
//! Band: the fit's own median error on its table (or the default calibration's 75 % on the
//! reference table when nothing was fitted), plus a step per difference. Two steps are
//! measured (issue 24: with the shipped calibration, another vLLM version came out 22.6 %
//! off on throughput, disaggregated deployments 36–48 %); the others are judgement until a
//! table of that kind is measured: TP +20, GPU +30, model +20 points.

use crate::config::EngineConfig;

/// Band of an unfitted calibration: the default calibration's median output-throughput error
/// on the reference table (docs/predict.md, "before") until the piecewise-graph term made it
/// 14.4 %; kept until unfitted defaults are judged on more than that one table.
const UNFITTED_PCT: f64 = 75.0;
/// Band of a fitted calibration that did not record its error.
const FITTED_PCT: f64 = 15.0;
/// Widening per way out of the domain, percentage points.
const ENGINE_PP: f64 = 25.0;
const PD_PP: f64 = 40.0;
const TP_PP: f64 = 20.0;
const GPU_PP: f64 = 30.0;
const MODEL_PP: f64 = 20.0;
/// No band above this: the prediction is then an order of magnitude, and says so.
const MAX_PCT: f64 = 100.0;

/// A prediction's provenance.
#[derive(Debug, Clone, PartialEq)]
pub struct Provenance {
    /// The deployment predicted: engine family and version, model, GPU, layout.
    pub deployment: String,
    /// Where the calibration comes from.
    pub calibration: String,
    /// Ways the deployment differs from the calibration's (empty: inside its domain).
    pub outside: Vec<String>,
    /// Uncertainty band of output throughput and mean TPOT, ± %; TTFT's is 1.5 times wider.
    pub band_pct: f64,
}

impl Provenance {
    /// One line for summaries and warnings.
    pub fn sentence(&self) -> String {
        let domain = if self.outside.is_empty() {
            "inside the calibration's domain".to_string()
        } else {
            format!("outside the calibration's domain ({})", self.outside.join("; "))
        };
        format!(
            "predicted, not measured: {}; calibration {}; {domain}: expect ±{:.0} % on \
             throughput and TPOT, ±{:.0} % on TTFT",
            self.deployment,
            self.calibration,
            self.band_pct,
            self.band_pct * 1.5
        )
    }

    /// Short `KEY=VALUE` tags for tables, CSV rows and the store.
    pub fn tags(&self) -> Vec<(String, String)> {
        vec![
            ("kind".into(), "predicted".into()),
            ("calibration".into(), self.calibration.clone()),
            ("band".into(), format!("±{:.0} %", self.band_pct)),
        ]
    }
}

/// The layout of `cfg`: `TP4 × 4` or `P/D 2×TP4 + 2×TP4`.
fn layout(cfg: &EngineConfig) -> String {
    match &cfg.pd {
        Some(p) => format!(
            "P/D {}×TP{} + {}×TP{}",
            p.prefill.workers, p.prefill.tp, p.decode.workers, p.decode.tp
        ),
        None => format!("TP{} × {}", cfg.tp, cfg.replicas),
    }
}

/// The provenance of predictions of `cfg`.
pub fn provenance(cfg: &EngineConfig) -> Provenance {
    let engine = match &cfg.engine_version {
        Some(v) => format!("{} {v}", cfg.engine),
        None => cfg.engine.to_string(),
    };
    let deployment = format!("{engine}, {} on {}, {}", cfg.model.name, cfg.gpu.name, layout(cfg));
    let Some(f) = &cfg.fitted_on else {
        return Provenance {
            deployment,
            calibration: format!("{} defaults, not fitted", cfg.engine),
            outside: vec!["no measured table".into()],
            band_pct: UNFITTED_PCT,
        };
    };
    let fit_engine = match &f.engine_version {
        Some(v) => format!("{} {v}", f.engine),
        None => f.engine.to_string(),
    };
    let calibration = format!(
        "fitted on {fit_engine}, {} on {}, TP{}{}",
        f.model,
        f.gpu,
        f.tp,
        if f.pd { ", P/D" } else { "" }
    );
    // What `EngineFile::build` carried of the fit (`carry_calibration`).
    let calibration = if f.engine != cfg.engine {
        format!(
            "{calibration} (carried: its efficiencies; latencies and CPU times at {} defaults)",
            cfg.engine
        )
    } else if !cfg.gpu.name.eq_ignore_ascii_case(&f.gpu) {
        format!(
            "{calibration} (carried: its efficiencies and CPU times; kernel latencies at defaults)"
        )
    } else {
        calibration
    };
    let mut outside = Vec::new();
    let mut band = f.error_pct.unwrap_or(FITTED_PCT);
    let mut differ = |what: String, pp: f64| {
        outside.push(what);
        band += pp;
    };
    if f.engine != cfg.engine {
        differ(format!("engine {} ≠ {}", cfg.engine, f.engine), ENGINE_PP);
    } else if let Some(b) = &f.engine_version {
        // `v0.9.0.1` and `0.9.0.1` name one release; a file without a version is taken as the
        // engine's current release (its defaults follow), which the fit was not.
        let bare = |v: &str| v.trim().trim_start_matches('v').to_string();
        match &cfg.engine_version {
            Some(a) if bare(a) == bare(b) => {}
            Some(a) => differ(format!("version {a} ≠ {b}"), ENGINE_PP),
            None => differ(format!("no version (taken as current) ≠ {b}"), ENGINE_PP),
        }
    }
    if cfg.pd.is_some() != f.pd {
        let what = if f.pd { "aggregated, fitted on P/D" } else { "P/D, fitted aggregated" };
        differ(what.into(), PD_PP);
    }
    let tps: Vec<u32> = match &cfg.pd {
        Some(p) => vec![p.prefill.tp, p.decode.tp],
        None => vec![cfg.tp],
    };
    if let Some(tp) = tps.iter().find(|&&t| t != f.tp) {
        differ(format!("TP{tp} ≠ TP{}", f.tp), TP_PP);
    }
    if !cfg.gpu.name.eq_ignore_ascii_case(&f.gpu) {
        differ(format!("GPU {} ≠ {}", cfg.gpu.name, f.gpu), GPU_PP);
    }
    if !cfg.model.name.eq_ignore_ascii_case(&f.model) {
        differ(format!("model {} ≠ {}", cfg.model.name, f.model), MODEL_PP);
    }
    Provenance { deployment, calibration, outside, band_pct: band.min(MAX_PCT) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::EngineFile;

    fn cfg(yaml: &str) -> EngineConfig {
        EngineFile::parse(yaml).unwrap().build(None).unwrap()
    }

    const FIT: &str = "fitted_on: {engine: vllm-v1, engine_version: 0.9.0.1, gpu: h20, tp: 4, \
                       model: qwen3-32b, error_pct: 12}\n";

    #[test]
    fn inside_the_domain_the_band_is_the_fit_error() {
        let p = provenance(&cfg(&format!(
            "engine: vllm-v1\nengine_version: 0.9.0.1\nmodel: qwen3-32b\ngpu: h20\ntp: 4\nreplicas: 4\n{FIT}"
        )));
        assert!(p.outside.is_empty());
        assert_eq!(p.band_pct, 12.0);
        assert_eq!(
            p.sentence(),
            "predicted, not measured: vllm-v1 0.9.0.1, qwen3-32b on h20, TP4 × 4; calibration \
             fitted on vllm-v1 0.9.0.1, qwen3-32b on h20, TP4; inside the calibration's domain: \
             expect ±12 % on throughput and TPOT, ±18 % on TTFT"
        );
    }

    #[test]
    fn a_leading_v_names_the_same_version() {
        let p = provenance(&cfg(&format!(
            "engine: vllm-v1\nengine_version: v0.9.0.1\nmodel: qwen3-32b\ngpu: h20\ntp: 4\n{FIT}"
        )));
        assert!(p.outside.is_empty(), "{:?}", p.outside);
    }

    #[test]
    fn each_way_out_of_the_domain_widens_the_band() {
        let p = provenance(&cfg(&format!(
            "engine: vllm-v1\nengine_version: 0.10.1\nmodel: qwen3-32b\ngpu: h20\n{FIT}\
             pd: {{prefill: {{workers: 2, tp: 2}}, decode: {{workers: 1, tp: 4}}}}\n"
        )));
        assert_eq!(p.outside, ["version 0.10.1 ≠ 0.9.0.1", "P/D, fitted aggregated", "TP2 ≠ TP4"]);
        assert_eq!(p.band_pct, 12.0 + 25.0 + 40.0 + 20.0);
        let unfitted = provenance(&cfg("model: qwen3-8b\ngpu: h100\n"));
        assert_eq!(unfitted.calibration, "vllm-v1 defaults, not fitted");
        assert_eq!(unfitted.band_pct, 75.0);
        let far = provenance(&cfg(&format!("engine: sglang\nmodel: qwen3-8b\ngpu: h100\n{FIT}")));
        assert_eq!(far.band_pct, 100.0, "capped");
        assert_eq!(
            far.calibration,
            "fitted on vllm-v1 0.9.0.1, qwen3-32b on h20, TP4 (carried: its efficiencies; \
             latencies and CPU times at sglang defaults)"
        );
        let current = provenance(&cfg(&format!("model: qwen3-32b\ngpu: h20\ntp: 4\n{FIT}")));
        assert_eq!(current.outside, ["no version (taken as current) ≠ 0.9.0.1"]);
        let gpu = provenance(&cfg(&format!("model: qwen3-32b\ngpu: h100\ntp: 4\n{FIT}")));
        assert!(
            gpu.calibration.ends_with(
                "(carried: its efficiencies and CPU times; kernel latencies at defaults)"
            ),
            "{}",
            gpu.calibration
        );
    }
}
