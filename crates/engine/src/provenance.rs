//! Where a prediction comes from: the engine model, the deployment, and the calibration it
//! extrapolates from, with an uncertainty band that widens when the deployment leaves the
//! calibration's domain. Every artefact of a prediction carries this text.
//!
//! Band: inside the domain, the fit's own median error on its table; with nothing fitted, what
//! the family's defaults measured on every public table ([`MEASURED_UNFITTED`]). Outside it, the error
//! measured where the model was carried outside its fit: the median absolute errors of the
//! public cross-checks (docs/predict.md, "Cross-checks on public tables": every table predicted
//! with the shipped calibration, none fitted), for dense and MoE models apart, and never less
//! than the fit's own. P/D against aggregated (or the reverse) takes at least what the public
//! disaggregated tables measured ([`MEASURED_PD`]).

use crate::config::EngineConfig;
use servelab_records::IslOsl;

/// Band of a fitted calibration that did not record its error.
const FITTED_PCT: f64 = 15.0;
/// TTFT's band against throughput's where nothing measured says otherwise.
const TTFT_FACTOR: f64 = 1.5;
/// No band above this (TTFT's: 1.5 times it): the prediction is then an order of magnitude.
const MAX_PCT: f64 = 100.0;

/// Absolute % errors of predictions carried outside their calibration's domain, pooled over
/// the cells of the public cross-checks (`crates/engine/testdata/public`, the shipped
/// calibration carried by `carry_calibration`): per metric (output throughput, mean TPOT,
/// mean TTFT), the cells, the median and the 80th percentile (linear between ranks). The
/// full cross-check test recomputes them and fails when they drift.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MeasuredError {
    /// Which tables: the kind of model and engine the band is for.
    pub scope: &'static str,
    /// Public tables the cells come from.
    pub tables: usize,
    /// Cells per metric.
    pub cells: [usize; 3],
    /// Median absolute % error per metric.
    pub median: [f64; 3],
    /// 80th percentile of the absolute % errors per metric.
    pub p80: [f64; 3],
}

/// Dense models on the fit's engine family (vLLM V1 for the shipped fit; as of 2026-11-27,
/// late): GPUStack's vLLM tables and Mooncake's P/D one.
pub const MEASURED_DENSE_SAME_ENGINE: MeasuredError = MeasuredError {
    scope: "dense models on the fit's engine family predicted outside the fit",
    tables: 7,
    cells: [20, 20, 29],
    median: [26.5, 14.8, 43.9],
    p80: [70.8, 32.9, 69.0],
};

/// Dense models on another engine family than the fit's (TensorRT-LLM, SGLang, vLLM V0 and
/// Dynamo 0.1-0.3 on V0 workers; as of 2026-11-28, with the `dynamo-v0` family and Dynamo
/// issue 402's table): whose CPU times and kernel latencies the fit does not carry, so TPOT
/// at low load is the widest.
pub const MEASURED_DENSE_OTHER_ENGINE: MeasuredError = MeasuredError {
    scope: "dense models on other engine families predicted outside the fit",
    tables: 19,
    cells: [227, 147, 147],
    median: [19.1, 28.3, 16.8],
    p80: [38.5, 32.1, 29.8],
};

/// MoE models (gpt-oss, Qwen3-30B-A3B, Qwen3-235B-A22B, GLM-4.5-Air, GLM-4.6, DeepSeek-R1; as
/// of 2026-11-28, with vLLM's hybrid allocator for sliding-window layers and its MXFP4 weights
/// as loaded, InferenceX's four DeepSeek-R1 runs under SGLang on H200 and B200 and TensorRT-LLM
/// on B200, and the fused MoE call's fixed time, `moe_layer_us`), every engine family
/// together: the tables on other families than the fit's are too few for a band of their own.
/// One rate for every expert GEMM, so wider on TPOT.
pub const MEASURED_MOE: MeasuredError = MeasuredError {
    scope: "MoE models predicted outside the fit",
    tables: 23,
    cells: [112, 102, 102],
    median: [24.6, 21.3, 42.1],
    p80: [46.0, 36.5, 71.6],
};

/// Disaggregated (P/D) deployments, every engine family (as of 2026-11-28: Mooncake's vLLM
/// 0.11.2 run, TTFT only, Dynamo 0.3.0's three layouts on the reference page and Dynamo
/// 0.1.1's 4 × TP 1 + TP 4 run in its issue 402). Until 2026-11-27, night, a judged 40
/// points (60 on TTFT) were added, from issue 24's 36–48 % at filing, when no public table was
/// disaggregated.
pub const MEASURED_PD: MeasuredError = MeasuredError {
    scope: "disaggregated (P/D) deployments predicted outside the fit",
    tables: 5,
    cells: [97, 97, 106],
    median: [29.5, 28.7, 17.9],
    p80: [45.4, 31.9, 29.9],
};

/// Every public table predicted from its engine family's default calibration, nothing fitted
/// (as of 2026-11-28; the full cross-check with `SERVELAB_PUBLIC_CARRY=defaults` recomputes it
/// and fails when it drifts): the band of a file without `fitted_on`. Until then a judged 75 %
/// (TTFT 112 %), the defaults' error on the reference table alone before the piecewise-graph
/// term; judged on every public table the defaults do about as well as the carried fit.
pub const MEASURED_UNFITTED: MeasuredError = MeasuredError {
    scope: "deployments predicted from their engine family's defaults, nothing fitted",
    tables: 49,
    cells: [359, 269, 278],
    median: [20.2, 28.2, 22.5],
    p80: [39.8, 33.8, 53.7],
};

/// Scenarios a calibration was not fitted on, of the very deployment it was fitted on, when it
/// was fitted on one scenario only (as of 2026-11-28: the reference page's five concurrency
/// sweeps, 4 scenarios × 8 concurrencies each, and InferenceX's SGLang 0.5.9 DeepSeek-R1 sweep
/// on 8 × H200, 3 × 5, fitted on its requests' drawn lengths; each scenario fitted in turn by
/// `calibrate` from the family's defaults and the others predicted; the test
/// `self_calibration_on_one_scenario_predicts_the_others` recomputes it and fails when it
/// drifts). What a short sweep of one's own deployment buys (docs/predict.md, "Calibrating on
/// your own sweep").
pub const MEASURED_ONE_SCENARIO_FIT: MeasuredError = MeasuredError {
    scope: "unseen scenarios of sweeps fitted on one of their own scenarios",
    tables: 6,
    cells: [510, 510, 510],
    median: [8.5, 6.6, 12.8],
    p80: [22.0, 23.4, 27.2],
};

/// How often a predicted saturation knee landed where the measured one did: over every
/// scenario of the public tables swept over three or more concurrencies (the shipped
/// calibration carried, as for the bands), the knee by `servelab sweep`'s rule in the
/// measured throughput and in the predicted. The full cross-check test recomputes it and
/// fails when it drifts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KneeAgreement {
    /// Concurrency sweeps compared.
    pub sweeps: usize,
    /// Of which the predicted knee is within one grid step of the measured.
    pub within_one_step: usize,
    /// Of which at the same level.
    pub same_level: usize,
}

impl KneeAgreement {
    /// Levels a concurrency curve needs before its knee is compared (or qualified).
    pub const MIN_LEVELS: usize = 3;

    /// What was found, as docs/predict.md states it.
    pub fn finding(&self) -> String {
        format!(
            "the predicted knee is within one grid step of the measured one in {} of {} \
             concurrency sweeps ({} at the same level)",
            self.within_one_step, self.sweeps, self.same_level
        )
    }

    /// One line for a predicted sweep's warnings.
    pub fn sentence(&self) -> String {
        format!(
            "predicted knee: on the public tables {}: read a predicted knee as that close, not \
             exact",
            self.finding()
        )
    }
}

/// The knee agreement of the public cross-checks (as of 2026-11-28: the reference page's four
/// tables, GPUStack's Qwen3-8B ShareGPT run and InferenceX's DeepSeek-R1 run; the one miss is
/// a measured curve that stalls at concurrency 2–4, docs/predict.md, "Where it saturates").
pub const KNEE_AGREEMENT: KneeAgreement =
    KneeAgreement { sweeps: 26, within_one_step: 25, same_level: 22 };

/// The measured band of a kind of model (`moe`) on the fit's engine family (`same_engine`) or
/// another.
pub fn measured_band(moe: bool, same_engine: bool) -> MeasuredError {
    match (moe, same_engine) {
        (true, _) => MEASURED_MOE,
        (false, true) => MEASURED_DENSE_SAME_ENGINE,
        (false, false) => MEASURED_DENSE_OTHER_ENGINE,
    }
}

/// A prediction's provenance.
#[derive(Debug, Clone, PartialEq)]
pub struct Provenance {
    /// The deployment predicted: engine family and version, model, GPU, layout.
    pub deployment: String,
    /// Where the calibration comes from.
    pub calibration: String,
    /// Ways the deployment differs from the calibration's (empty: inside its domain).
    pub outside: Vec<String>,
    /// Uncertainty band of output throughput and mean TPOT, ± %.
    pub band_pct: f64,
    /// Uncertainty band of mean TTFT, ± %.
    pub ttft_band_pct: f64,
    /// The public cross-checks the bands come from, outside the domain.
    pub measured: Option<MeasuredError>,
}

impl Provenance {
    /// One line for summaries and warnings.
    pub fn sentence(&self) -> String {
        let domain = if self.outside.is_empty() {
            "inside the calibration's domain".to_string()
        } else {
            format!("outside the calibration's domain ({})", self.outside.join("; "))
        };
        let basis = self.measured.map_or(String::new(), |m| {
            format!(
                " (median errors of {} public tables of {}; one cell in five beyond ±{:.0} / \
                 {:.0} / {:.0} %)",
                m.tables, m.scope, m.p80[0], m.p80[1], m.p80[2]
            )
        });
        format!(
            "predicted, not measured: {}; calibration {}; {domain}: expect ±{:.0} % on \
             throughput and TPOT, ±{:.0} % on TTFT{basis}",
            self.deployment, self.calibration, self.band_pct, self.ttft_band_pct
        )
    }

    /// Short `KEY=VALUE` tags for tables, CSV rows and the store (`band`: throughput and TPOT;
    /// `ttft_band`: TTFT, which the public tables put apart).
    pub fn tags(&self) -> Vec<(String, String)> {
        vec![
            ("kind".into(), "predicted".into()),
            ("calibration".into(), self.calibration.clone()),
            ("band".into(), format!("±{:.0} %", self.band_pct)),
            ("ttft_band".into(), format!("±{:.0} %", self.ttft_band_pct)),
        ]
    }
}

/// The band a measured error sets on throughput and TPOT: the wider median of the two.
fn wider(m: &MeasuredError) -> f64 {
    m.median[0].max(m.median[1])
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

/// The provenance of predictions of `cfg`, whatever the scenario.
pub fn provenance(cfg: &EngineConfig) -> Provenance {
    provenance_at(cfg, None)
}

/// Whether two scenarios are one for the fit: prompt and output lengths each within 25 %.
fn near(a: IslOsl, b: IslOsl) -> bool {
    let ratio = |x: u32, y: u32| f64::from(x.max(y).max(1)) / f64::from(x.min(y).max(1));
    ratio(a.isl, b.isl) <= 1.25 && ratio(a.osl, b.osl) <= 1.25
}

/// The provenance of predictions of `cfg` at `scenario` (mean prompt and output lengths):
/// a scenario the fit did not measure (its `fitted_on.scenarios`, when recorded) is outside
/// the domain, with at least the band one-scenario fits measured on the unseen scenarios of
/// public sweeps ([`MEASURED_ONE_SCENARIO_FIT`]).
pub fn provenance_at(cfg: &EngineConfig, scenario: Option<IslOsl>) -> Provenance {
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
            band_pct: wider(&MEASURED_UNFITTED),
            ttft_band_pct: MEASURED_UNFITTED.median[2],
            measured: Some(MEASURED_UNFITTED),
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
    if f.engine != cfg.engine {
        outside.push(format!("engine {} ≠ {}", cfg.engine, f.engine));
    } else if let Some(b) = &f.engine_version {
        // `v0.9.0.1` and `0.9.0.1` name one release; a file without a version is taken as the
        // engine's current release (its defaults follow), which the fit was not.
        let bare = |v: &str| v.trim().trim_start_matches('v').to_string();
        match &cfg.engine_version {
            Some(a) if bare(a) == bare(b) => {}
            Some(a) => outside.push(format!("version {a} ≠ {b}")),
            None => outside.push(format!("no version (taken as current) ≠ {b}")),
        }
    }
    let tps: Vec<u32> = match &cfg.pd {
        Some(p) => vec![p.prefill.tp, p.decode.tp],
        None => vec![cfg.tp],
    };
    if let Some(tp) = tps.iter().find(|&&t| t != f.tp) {
        outside.push(format!("TP{tp} ≠ TP{}", f.tp));
    }
    if !cfg.gpu.name.eq_ignore_ascii_case(&f.gpu) {
        outside.push(format!("GPU {} ≠ {}", cfg.gpu.name, f.gpu));
    }
    if !cfg.model.name.eq_ignore_ascii_case(&f.model) {
        outside.push(format!("model {} ≠ {}", cfg.model.name, f.model));
    }
    let fit = f.error_pct.unwrap_or(FITTED_PCT);
    let (mut band, mut ttft) = (fit, fit * TTFT_FACTOR);
    // Any way out of the domain but P/D: what the public tables measured for this kind of
    // model, carried out of the same fit (each differs from it in several ways at once, so no
    // one difference has a figure of its own).
    let mut measured = (!outside.is_empty())
        .then(|| measured_band(cfg.model.moe.is_some(), f.engine == cfg.engine));
    if let Some(m) = measured {
        band = band.max(wider(&m));
        ttft = ttft.max(m.median[2]);
    }
    if cfg.pd.is_some() != f.pd {
        outside
            .push(if f.pd { "aggregated, fitted on P/D" } else { "P/D, fitted aggregated" }.into());
        band = band.max(wider(&MEASURED_PD));
        ttft = ttft.max(MEASURED_PD.median[2]);
        // The sentence names the measured band that sets the figure.
        if measured.is_none_or(|m| wider(&MEASURED_PD) > wider(&m)) {
            measured = Some(MEASURED_PD);
        }
    }
    // Another scenario of the same deployment is not another deployment: it adds its own band
    // after the others, never theirs.
    let unseen =
        scenario.filter(|s| !f.scenarios.is_empty() && !f.scenarios.iter().any(|m| near(*m, *s)));
    if let Some(s) = unseen {
        let fitted: Vec<String> = f.scenarios.iter().map(ToString::to_string).collect();
        outside.push(format!("scenario {s}, fitted on {}", fitted.join(", ")));
        let m = MEASURED_ONE_SCENARIO_FIT;
        // Named as the basis only where it sets a figure: a fit whose own error is wider
        // (fitted on several scenarios, loosely) keeps its own.
        let sets = wider(&m) > band || m.median[2] > ttft;
        band = band.max(wider(&m));
        ttft = ttft.max(m.median[2]);
        if sets && measured.is_none_or(|x| wider(&m) > wider(&x)) {
            measured = Some(m);
        }
    }
    Provenance {
        deployment,
        calibration,
        outside,
        band_pct: band.min(MAX_PCT),
        ttft_band_pct: ttft.min(MAX_PCT * TTFT_FACTOR),
        measured,
    }
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
    fn outside_the_domain_the_band_is_the_public_tables_error() {
        // Another version, GPU or TP of a dense model on the fit's engine: those tables'
        // medians.
        let dense = provenance(&cfg(&format!(
            "engine: vllm-v1\nengine_version: 0.11.0\nmodel: qwen3-32b\ngpu: a100\ntp: 1\n{FIT}"
        )));
        assert_eq!(dense.outside, ["version 0.11.0 ≠ 0.9.0.1", "TP1 ≠ TP4", "GPU a100 ≠ h20"]);
        assert_eq!(dense.band_pct, 26.5, "the larger of throughput's 26.5 and TPOT's 14.8");
        assert_eq!(dense.ttft_band_pct, 43.9);
        assert_eq!(
            dense.sentence(),
            "predicted, not measured: vllm-v1 0.11.0, qwen3-32b on a100, TP1 × 1; calibration \
             fitted on vllm-v1 0.9.0.1, qwen3-32b on h20, TP4 (carried: its efficiencies and CPU \
             times; kernel latencies at defaults); outside the calibration's domain (version \
             0.11.0 ≠ 0.9.0.1; TP1 ≠ TP4; GPU a100 ≠ h20): expect ±26 % on throughput and TPOT, \
             ±44 % on TTFT (median errors of 7 public tables of dense models on the fit's engine \
             family predicted outside the fit; one cell in five beyond ±71 / 33 / 69 %)"
        );
        // An MoE model: the MoE tables' medians.
        let moe = provenance(&cfg(&format!("model: gpt-oss-120b\ngpu: h100\ntp: 1\n{FIT}")));
        assert_eq!((moe.band_pct, moe.ttft_band_pct), (24.6, 42.1));
        assert_eq!(moe.measured, Some(MEASURED_MOE));
        // Never narrower than the fit's own error.
        let loose = FIT.replace("error_pct: 12", "error_pct: 60");
        let wide = provenance(&cfg(&format!("model: qwen3-32b\ngpu: h20\ntp: 4\n{loose}")));
        assert_eq!((wide.band_pct, wide.ttft_band_pct), (60.0, 90.0));
        assert_eq!(wide.outside, ["no version (taken as current) ≠ 0.9.0.1"]);
    }

    #[test]
    fn p_d_against_aggregated_takes_the_disaggregated_tables_band() {
        let p = provenance(&cfg(&format!(
            "engine: vllm-v1\nengine_version: 0.9.0.1\nmodel: qwen3-32b\ngpu: h20\n{FIT}\
             pd: {{prefill: {{workers: 2, tp: 4}}, decode: {{workers: 1, tp: 4}}}}\n"
        )));
        assert_eq!(p.outside, ["P/D, fitted aggregated"]);
        // The disaggregated tables' median on throughput, 29.5; on TTFT theirs (17.9) is below
        // 1.5 times the fit's own error, which holds.
        assert_eq!((p.band_pct, p.ttft_band_pct), (29.5, 18.0));
        assert_eq!(p.measured, Some(MEASURED_PD));
        let also_tp = provenance(&cfg(&format!(
            "engine: vllm-v1\nengine_version: 0.10.1\nmodel: qwen3-32b\ngpu: h20\n{FIT}\
             pd: {{prefill: {{workers: 2, tp: 2}}, decode: {{workers: 1, tp: 4}}}}\n"
        )));
        assert_eq!(
            also_tp.outside,
            ["version 0.10.1 ≠ 0.9.0.1", "TP2 ≠ TP4", "P/D, fitted aggregated"]
        );
        // The wider of the two measured bands sets the figure and is named; TTFT's from both.
        assert_eq!((also_tp.band_pct, also_tp.ttft_band_pct), (29.5, 43.9));
        assert_eq!(also_tp.measured, Some(MEASURED_PD));
    }

    #[test]
    fn unfitted_and_far_calibrations() {
        let unfitted = provenance(&cfg("model: qwen3-8b\ngpu: h100\n"));
        assert_eq!(unfitted.calibration, "vllm-v1 defaults, not fitted");
        assert_eq!((unfitted.band_pct, unfitted.ttft_band_pct), (28.2, 22.5));
        assert_eq!(unfitted.measured, Some(MEASURED_UNFITTED));
        let far = provenance(&cfg(&format!(
            "engine: sglang\nmodel: qwen3-8b\ngpu: h100\n{FIT}pd: {{prefill: {{workers: 1, tp: \
             1}}, decode: {{workers: 1, tp: 1}}}}\n"
        )));
        assert_eq!((far.band_pct, far.ttft_band_pct), (29.5, 18.0));
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

    /// A scenario the fit measured (or within 25 % of one) is inside the domain; another is
    /// outside it, named, with at least the band one-scenario fits measured; a fit that did
    /// not record its scenarios, or a prediction without one, is judged as before.
    #[test]
    fn a_scenario_the_fit_did_not_measure_is_outside_its_domain() {
        let at = |isl, osl, error: u32| {
            let yaml = format!(
                "engine: vllm-v1\nengine_version: 0.9.0.1\nmodel: qwen3-32b\ngpu: h20\ntp: 4\n\
                 fitted_on: {{engine: vllm-v1, engine_version: 0.9.0.1, gpu: h20, tp: 4, model: \
                 qwen3-32b, error_pct: {error}, scenarios: [{{isl: 1000, osl: 1000}}]}}\n"
            );
            provenance_at(&cfg(&yaml), Some(IslOsl { isl, osl }))
        };
        let same = at(1000, 1000, 5);
        assert!(same.outside.is_empty(), "{:?}", same.outside);
        assert_eq!((same.band_pct, same.ttft_band_pct, same.measured), (5.0, 7.5, None));
        assert!(at(1200, 850, 5).outside.is_empty(), "within 25 % is the fitted scenario");
        let other = at(3000, 150, 5);
        assert_eq!(other.outside, ["scenario 3000:150, fitted on 1000:1000"]);
        let m = MEASURED_ONE_SCENARIO_FIT;
        assert_eq!((other.band_pct, other.ttft_band_pct), (m.median[0], m.median[2]));
        assert_eq!(other.measured, Some(m));
        assert!(other.sentence().contains("outside the calibration's domain (scenario 3000:150"));
        // A fit's own wider error stands, and the sentence cites no other basis for it.
        let loose = at(3000, 150, 20);
        assert_eq!((loose.band_pct, loose.ttft_band_pct, loose.measured), (20.0, 30.0, None));
        assert!(!loose.sentence().contains("median errors of"), "{}", loose.sentence());
        // Nothing recorded, or no scenario given: as before.
        let unrecorded = provenance_at(
            &cfg(&format!("engine: vllm-v1\nengine_version: 0.9.0.1\nmodel: qwen3-32b\ngpu: h20\ntp: 4\n{FIT}")),
            Some(IslOsl { isl: 3000, osl: 150 }),
        );
        assert!(unrecorded.outside.is_empty());
        let yaml = "engine: vllm-v1\nengine_version: 0.9.0.1\nmodel: qwen3-32b\ngpu: h20\ntp: 4\n\
                    fitted_on: {engine: vllm-v1, engine_version: 0.9.0.1, gpu: h20, tp: 4, model: \
                    qwen3-32b, error_pct: 5, scenarios: [{isl: 1000, osl: 1000}]}\n";
        assert!(provenance(&cfg(yaml)).outside.is_empty());
    }
}
