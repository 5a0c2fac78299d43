//! From the sweep's base plan to the plan of each point: the scenario's dataset, the level,
//! the prompt count and seed, and the store tags that find the point again.

use std::path::PathBuf;

use servelab_load::{parse_concurrency_list, parse_rate_list, Level};
use servelab_metrics::Warning;
use servelab_plan::{DatasetSpec, LengthRange, Plan, RunKind, SessionSource};

use crate::error::{invalid, SweepError};
use crate::grid::{DatasetChoice, Scenario};
use crate::run::{PointSpec, SweepPlan};

/// The default grid when neither `--concurrency` nor a rate list is given.
pub const DEFAULT_CONCURRENCY: &str = "1,2,4,8,16,32,64";

/// The swept levels: `concurrency`, else `rates` (a list or a single rate), else the default
/// concurrency grid. A single rate beside `concurrency` applies to every level (it stays in
/// the base plan); a rate list beside it is refused: one axis at a time.
pub fn grid_levels(
    concurrency: Option<&str>,
    rates: Option<&str>,
) -> Result<Vec<Level>, SweepError> {
    match (concurrency, rates) {
        (Some(_), Some(r)) if r.contains(',') => {
            Err(invalid("--concurrency", "with a --request-rate list: sweep one axis at a time"))
        }
        (Some(c), _) => parse_concurrency_list(c).map_err(|e| invalid("--concurrency", e)),
        (None, Some(r)) => parse_rate_list(r).map_err(|e| invalid("--request-rate", e)),
        (None, None) => {
            parse_concurrency_list(DEFAULT_CONCURRENCY).map_err(|e| invalid("--concurrency", e))
        }
    }
}

/// The one scenario of a sweep given neither `--scenario` nor `--suite`: the base plan's
/// own dataset.
pub fn default_scenario(dataset: &DatasetSpec) -> Scenario {
    let name = match dataset {
        DatasetSpec::Random { input_len, output_len, .. } => {
            format!("random-{input_len}x{output_len}")
        }
        DatasetSpec::ShareGpt { .. } => "sharegpt".into(),
        DatasetSpec::Jsonl { .. } => "jsonl".into(),
        DatasetSpec::Prefix { .. } => "prefix".into(),
        DatasetSpec::RandomMultimodal { input_len, output_len, .. } => {
            format!("random-mm-{input_len}x{output_len}")
        }
        DatasetSpec::Hf(h) => format!("hf-{}", h.name),
        DatasetSpec::Sessions(_) => "sessions".into(),
        DatasetSpec::Trace(_) => "trace".into(),
    };
    Scenario::new(name, DatasetChoice::FromArgs)
}

/// The dataset a scenario sends and whether it forces `ignore_eos`; `None` keeps the base
/// plan's. File scenarios without a path of their own read `path` (`--dataset-path`); an
/// `ISL:OSL` scenario draws its lengths with `range` (`--random-range-ratio` and its style, as
/// the base plan's random dataset would: a sweep of InferenceX's scenarios draws as its client
/// did).
pub fn scenario_dataset(
    sc: &Scenario,
    path: Option<&PathBuf>,
    range: LengthRange,
) -> Result<Option<(DatasetSpec, bool)>, SweepError> {
    let need = |p: &Option<PathBuf>, what: &str| {
        p.clone().or_else(|| path.cloned()).ok_or_else(|| {
            invalid(
                "--dataset-path",
                format!("scenario '{}' needs --dataset-path FILE (the {what} file)", sc.name),
            )
        })
    };
    Ok(match &sc.dataset {
        DatasetChoice::FromArgs => None,
        &DatasetChoice::Random { input_len, output_len } => {
            Some((DatasetSpec::Random { input_len, output_len, range, prefix_len: 0 }, true))
        }
        DatasetChoice::Sharegpt { path: p, output_len } => Some((
            DatasetSpec::ShareGpt { path: need(p, "ShareGPT JSON")?, output_len: *output_len },
            false,
        )),
        DatasetChoice::Jsonl { path: p } => {
            Some((DatasetSpec::Jsonl { path: need(p, "JSONL")? }, false))
        }
    })
}

/// How the base plan's random dataset spreads lengths; exact for any other dataset.
fn range_of(d: &DatasetSpec) -> LengthRange {
    match d {
        DatasetSpec::Random { range, .. } | DatasetSpec::RandomMultimodal { range, .. } => *range,
        _ => LengthRange::EXACT,
    }
}

/// True when the base plan reads its prompts from a file.
fn reads_file(d: &DatasetSpec) -> bool {
    matches!(
        d,
        DatasetSpec::ShareGpt { .. }
            | DatasetSpec::Jsonl { .. }
            | DatasetSpec::Hf(_)
            | DatasetSpec::Trace(_)
    ) || matches!(d, DatasetSpec::Sessions(s) if !matches!(s.source, SessionSource::Synthetic(_)))
}

impl SweepPlan {
    /// The length range `ISL:OSL` scenarios draw with: the base plan's.
    fn base_range(&self) -> LengthRange {
        range_of(&self.base.workload.dataset)
    }

    /// The plan of one point of scenario `sc`.
    pub fn point_plan(&self, sc: &Scenario, p: &PointSpec) -> Result<Plan, SweepError> {
        let mut plan = self.base.clone();
        plan.load = match p.load {
            Level::Concurrency(_) => plan.load.at(p.load),
            Level::Rate(_) => {
                let cap = sc.max_concurrency.map(|c| c as u64).or(plan.load.max_concurrency);
                servelab_load::LoadSpec { max_concurrency: cap, ..plan.load.at(p.load) }
            }
        };
        if let Some((dataset, ignore_eos)) =
            scenario_dataset(sc, self.dataset_path.as_ref(), self.base_range())?
        {
            plan.workload.dataset = dataset;
            plan.request.ignore_eos |= ignore_eos;
        }
        plan.workload.num_prompts = p.num_prompts;
        plan.workload.seed = p.seed;
        plan.output.save_result = false;
        plan.output.save_detailed = false;
        // In the results store, a sweep's points are findable by scenario and level.
        plan.record.kind = RunKind::SweepPoint;
        plan.record.tags.extend([
            ("sweep.scenario".to_string(), sc.name.clone()),
            ("sweep.load".to_string(), p.load.file_stem()),
            ("sweep.role".to_string(), p.role.as_str().to_string()),
        ]);
        let extra = crate::render::column_percentiles(&self.columns)
            .into_iter()
            .chain([99.0])
            .chain(self.slo.as_ref().map(|s| s.percentiles()).unwrap_or_default());
        Ok(plan.with_percentiles(extra))
    }

    /// Check every scenario before the first run, not halfway through; and the warnings the
    /// reader must see (repeated prompts from files meet prefix caches).
    pub fn check(&self) -> Result<Vec<Warning>, SweepError> {
        let mut warnings = Vec::new();
        for sc in &self.scenarios {
            let own = scenario_dataset(sc, self.dataset_path.as_ref(), self.base_range())?;
            let from_file =
                sc.dataset.is_file() || (own.is_none() && reads_file(&self.base.workload.dataset));
            // One level sends its prompts once: nothing for a later point to repeat.
            let levels = sc.loads.as_ref().map_or(self.loads.len(), Vec::len);
            if from_file && self.fresh_prompts && levels > 1 {
                warnings.push(Warning::PromptsRepeat { scenario: sc.name.clone() });
            }
        }
        Ok(warnings)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_axis_at_a_time() {
        let c = |v: &[usize]| v.iter().map(|&n| Level::Concurrency(n)).collect::<Vec<_>>();
        assert_eq!(grid_levels(Some("4,1"), None).unwrap(), c(&[1, 4]));
        assert_eq!(grid_levels(Some("2"), Some("5")).unwrap(), c(&[2]));
        assert_eq!(grid_levels(None, None).unwrap(), c(&[1, 2, 4, 8, 16, 32, 64]));
        assert_eq!(
            grid_levels(None, Some("2,1")).unwrap(),
            vec![Level::Rate(1.0), Level::Rate(2.0)]
        );
        assert_eq!(grid_levels(None, Some("3")).unwrap(), vec![Level::Rate(3.0)]);
        let e = grid_levels(Some("1"), Some("1,2")).unwrap_err().to_string();
        assert_eq!(e, "--concurrency: with a --request-rate list: sweep one axis at a time");
        // An all-at-once level ends a rate grid (its point is in the table, not on the curve).
        assert_eq!(
            grid_levels(None, Some("1,inf")).unwrap(),
            vec![Level::Rate(1.0), Level::Rate(f64::INFINITY)]
        );
        assert!(grid_levels(None, Some("1,0")).is_err());
    }

    /// An ISL:OSL scenario draws with the base plan's range; ShareGPT is untouched by it.
    #[test]
    fn isl_osl_scenarios_draw_with_the_range_asked_for() {
        let sc = crate::grid::parse_scenario("1024:1024").unwrap();
        let below = LengthRange::Below(0.8);
        let (d, ignore_eos) = scenario_dataset(&sc, None, below).unwrap().unwrap();
        assert!(ignore_eos);
        assert!(matches!(
            d,
            DatasetSpec::Random { input_len: 1024, output_len: 1024, range, prefix_len: 0 }
                if range == below
        ));
        let base = DatasetSpec::Random {
            input_len: 5,
            output_len: 2,
            range: LengthRange::Around(0.5),
            prefix_len: 0,
        };
        assert_eq!(range_of(&base), LengthRange::Around(0.5));
        assert_eq!(range_of(&DatasetSpec::Jsonl { path: "x".into() }), LengthRange::EXACT);
    }

    #[test]
    fn default_scenarios_are_named_by_dataset() {
        let d = DatasetSpec::Random {
            input_len: 5,
            output_len: 2,
            range: LengthRange::EXACT,
            prefix_len: 0,
        };
        assert_eq!(default_scenario(&d).name, "random-5x2");
        let j = DatasetSpec::Jsonl { path: "x".into() };
        assert_eq!(default_scenario(&j).name, "jsonl");
    }
}
