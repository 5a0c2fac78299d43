//! The sweep driver: every scenario × level as one run (through a [`Runner`]), stored as it
//! completes, then the knee, the SLO search and the output files.

use std::path::{Path, PathBuf};

use servelab_plan::{Plan, RunError, Runner};

use servelab_metrics::{SloSpec, Warning, Warnings};

use crate::error::SweepError;
use servelab_load::{Axis, Level};

use crate::grid::{point_seed, PromptPolicy, Scenario};
use crate::render::{csv, summary_markdown, Column};
use crate::result::{PointResult, Role, ScenarioResult, SloOutcome, SweepResult};
use crate::slo::{bracket, next_probe, Bracket};
use crate::store::{point_path, read_complete_point, write_atomic, write_point};
use servelab_metrics::knee::{find_knee, CurvePoint, KneeRule};

/// One bench run to make.
#[derive(Debug, Clone, PartialEq)]
pub struct PointSpec {
    /// The load level to run at.
    pub load: Level,
    /// Prompts to send.
    pub num_prompts: usize,
    /// Seed for its prompts and arrivals.
    pub seed: u64,
    /// Why it is run.
    pub role: Role,
}

/// What to run and how to judge it.
#[derive(Debug, Clone)]
pub struct SweepPlan {
    /// The plan every point derives from (its dataset, load, seed and tags change per point).
    pub base: Plan,
    /// `--dataset-path`: the file of scenarios that read one and name none.
    pub dataset_path: Option<PathBuf>,
    /// The scenarios to sweep, in order.
    pub scenarios: Vec<Scenario>,
    /// Levels for scenarios that do not list their own.
    pub loads: Vec<Level>,
    /// How many prompts each point sends, unless its scenario says otherwise.
    pub prompts: PromptPolicy,
    /// Draw new prompts for every point (a seed per point); false reuses one seed.
    pub fresh_prompts: bool,
    /// When throughput counts as saturated.
    pub knee: KneeRule,
    /// The objectives to search the highest passing load for; `None` skips the search.
    pub slo: Option<SloSpec>,
    /// Rate searches stop when the bracket is narrower than this factor (0.1 = 10%).
    pub slo_resolution: f64,
    /// At most this many probe runs per scenario.
    pub slo_max_probes: usize,
    /// Where point files, tables and charts are written.
    pub output_dir: PathBuf,
    /// Reuse complete point files found in `output_dir`.
    pub resume: bool,
    /// The table's columns (their percentiles are computed at every point).
    pub columns: Vec<Column>,
}

struct Driver<'a, R> {
    plan: &'a SweepPlan,
    runner: &'a mut R,
    runs: usize,
    interrupted: bool,
}

impl<R: Runner> Driver<'_, R> {
    /// The point from disk (on resume) or from a new run; `None` once interrupted.
    async fn point(
        &mut self,
        scenario: &Scenario,
        load: Level,
        role: Role,
    ) -> Result<Option<PointResult>, SweepError> {
        let seed = if self.plan.fresh_prompts {
            point_seed(self.plan.base.workload.seed, &scenario.name, load, role.as_str())
        } else {
            self.plan.base.workload.seed
        };
        let num_prompts = scenario.prompts_for(self.plan.prompts, load);
        let spec = PointSpec { load, num_prompts, seed, role };
        let path = point_path(&self.plan.output_dir, &scenario.name, load, role);
        if self.plan.resume {
            if let Some(p) = read_complete_point(&path, &scenario.name, load, role) {
                note(&format!(
                    "{} {} {}: already measured ({}), skipped",
                    scenario.name,
                    load,
                    role.as_str(),
                    path.display()
                ));
                return Ok(Some(p));
            }
        }
        if self.runs > 0 {
            self.runner.settle().await;
        }
        self.runs += 1;
        note(&format!(
            "{} {} {}: {} prompts",
            scenario.name,
            load,
            role.as_str(),
            spec.num_prompts
        ));
        let plan = self.plan.point_plan(scenario, &spec)?;
        let summary = match self.runner.run(&plan).await {
            Ok(s) => s,
            Err(RunError::Interrupted) => {
                self.interrupted = true;
                return Ok(None);
            }
            Err(RunError::Usage(message) | RunError::Failed(message)) => {
                return Err(SweepError::Point {
                    scenario: scenario.name.clone(),
                    load: load.to_string(),
                    message,
                })
            }
        };
        let complete = !summary.info.interrupted;
        let p = PointResult {
            scenario: scenario.name.clone(),
            load,
            role,
            num_prompts: spec.num_prompts,
            seed,
            complete,
            summary,
        };
        write_point(&path, &p)?;
        if !complete {
            self.interrupted = true;
            return Ok(None);
        }
        Ok(Some(p))
    }

    async fn scenario(&mut self, sc: &Scenario) -> Result<ScenarioResult, SweepError> {
        let loads = sc.loads.clone().unwrap_or_else(|| self.plan.loads.clone());
        let axis = loads.first().map_or(Axis::Concurrency, |l| l.axis());
        let mut points = Vec::new();
        for &load in &loads {
            match self.point(sc, load, Role::Grid).await? {
                Some(p) => points.push(p),
                None => break,
            }
        }
        points.sort_by(|a, b| a.load.value().total_cmp(&b.load.value()));
        let knee = find_knee(&curve(&points), &self.plan.knee);
        let mut probes = Vec::new();
        let slo = match &self.plan.slo {
            Some(spec) if !self.interrupted && !points.is_empty() => {
                Some(self.search(sc, axis, spec, &points, &mut probes).await?)
            }
            _ => None,
        };
        let dataset = points.first().map_or_else(String::new, |p| p.summary.info.dataset.clone());
        Ok(ScenarioResult { name: sc.name.clone(), axis, dataset, points, probes, knee, slo })
    }

    /// Bisect between the measured levels that bracket the SLO limit, then repeat the best.
    async fn search(
        &mut self,
        sc: &Scenario,
        axis: Axis,
        spec: &SloSpec,
        grid: &[PointResult],
        probes: &mut Vec<PointResult>,
    ) -> Result<SloOutcome, SweepError> {
        // The search bisects between finite levels; an all-at-once level is not bracketed.
        let mut measured: Vec<(f64, bool, Vec<String>)> = grid
            .iter()
            .filter(|p| p.load.value().is_finite())
            .map(|p| {
                let c = spec.check(&p.summary);
                (p.load.value(), c.pass, c.violations)
            })
            .collect();
        let pairs = |m: &[(f64, bool, Vec<String>)]| -> Vec<(f64, bool)> {
            m.iter().map(|(l, ok, _)| (*l, *ok)).collect()
        };
        for _ in 0..self.plan.slo_max_probes {
            let Bracket::Between { pass, fail } = bracket(&pairs(&measured)) else { break };
            let Some(mid) = next_probe(axis, pass, fail, self.plan.slo_resolution) else { break };
            let Some(p) = self.point(sc, Level::on_axis(axis, mid), Role::Probe).await? else {
                break;
            };
            let c = spec.check(&p.summary);
            measured.push((p.load.value(), c.pass, c.violations));
            measured.sort_by(|a, b| a.0.total_cmp(&b.0));
            probes.push(p);
        }
        let b = bracket(&pairs(&measured));
        let best = match b {
            Bracket::NonePass => None,
            Bracket::AllPass { pass } | Bracket::Between { pass, .. } => Some(pass),
        };
        let mut confirmed = None;
        if let (Some(v), false) = (best, self.interrupted) {
            if let Some(p) = self.point(sc, Level::on_axis(axis, v), Role::Confirm).await? {
                confirmed = Some(spec.check(&p.summary).pass);
                probes.push(p);
            }
        }
        let why = |load: f64| {
            measured
                .iter()
                .find(|(l, _, _)| *l == load)
                .map(|(_, _, v)| v.join("; "))
                .unwrap_or_default()
        };
        let unit = axis.noun();
        let slo_text = spec.text("<=");
        let confirm_text = match confirmed {
            Some(true) => " and a confirming run met it too",
            Some(false) => "; the confirming run missed it, so treat the limit as lower",
            None => "",
        };
        let verdict = match b {
            Bracket::NonePass => {
                let lowest = measured.first().map_or(0.0, |m| m.0);
                format!(
                    "no measured {unit} meets {slo_text}: even {lowest} misses it ({}).",
                    why(lowest)
                )
            }
            Bracket::AllPass { pass } => format!(
                "every measured {unit} meets {slo_text}; the limit is above {pass} (extend the \
                 grid to find it){confirm_text}."
            ),
            Bracket::Between { pass, fail } => format!(
                "the highest {unit} that meets {slo_text} is {pass} ({fail} misses it: {}){confirm_text}.",
                why(fail)
            ),
        };
        Ok(SloOutcome { spec: spec.clone(), bracket: b, best, confirmed, verdict })
    }
}

/// A progress line for the user.
fn note(message: &str) {
    servelab_outputs::term::note(&format!("sweep: {message}"));
}

/// The knee rule's view of grid points.
pub fn curve(points: &[PointResult]) -> Vec<CurvePoint> {
    // An all-at-once level (rate inf) is no point on the curve.
    points
        .iter()
        .filter(|p| p.load.value().is_finite())
        .map(|p| CurvePoint {
            load: p.load.value(),
            throughput: p.summary.output_throughput,
            ttft_p99_ms: p.summary.ttft_ms.percentile(99.0).unwrap_or(p.summary.ttft_ms.max),
        })
        .collect()
}

/// Run every scenario of `plan`. Stops early (with `interrupted` set) on Ctrl-C.
pub async fn run_sweep<R: Runner>(
    plan: &SweepPlan,
    runner: &mut R,
) -> Result<SweepResult, SweepError> {
    let mut warnings: Warnings = plan.check()?.into_iter().collect();
    if !plan.fresh_prompts {
        warnings.push(Warning::SamePrompts);
    }
    let mut d = Driver { plan, runner, runs: 0, interrupted: false };
    let mut scenarios = Vec::new();
    for sc in &plan.scenarios {
        let r = d.scenario(sc).await?;
        if !r.points.is_empty() {
            scenarios.push(r);
        }
        if d.interrupted {
            break;
        }
    }
    Ok(SweepResult {
        label: plan.base.record.label.clone(),
        tags: plan.base.record.tags.clone(),
        scenarios,
        knee_rule: plan.knee,
        warnings,
        interrupted: d.interrupted,
    })
}

/// The result with every summary's per-request rows dropped: `sweep.json` stays small
/// enough to read and diff, and the rows remain in the per-point files.
pub fn without_request_rows(r: &SweepResult) -> SweepResult {
    let mut r = r.clone();
    for s in &mut r.scenarios {
        for p in s.points.iter_mut().chain(s.probes.iter_mut()) {
            p.summary.requests = Vec::new();
        }
    }
    r
}

/// Write `summary.md`, `blocks.txt` (each point's summary block), `<scenario>.csv`,
/// `sweep.json` and the charts; returns the paths.
pub fn write_outputs(
    dir: &Path,
    r: &SweepResult,
    cols: &[Column],
) -> Result<Vec<PathBuf>, SweepError> {
    let mut written = Vec::new();
    let mut put = |name: String, bytes: &[u8]| -> Result<(), SweepError> {
        let p = dir.join(name);
        write_atomic(&p, bytes)?;
        written.push(p);
        Ok(())
    };
    put("summary.md".into(), summary_markdown(r, cols).as_bytes())?;
    // One block per case, as the scripted suites publish them.
    put("blocks.txt".into(), crate::render::point_blocks(r, None).as_bytes())?;
    for s in &r.scenarios {
        let all: Vec<PointResult> = s.points.iter().chain(&s.probes).cloned().collect();
        put(format!("{}.csv", servelab_outputs::file_safe(&s.name)), csv(&all).as_bytes())?;
    }
    let json = serde_json::to_vec_pretty(&without_request_rows(r))
        .map_err(|e| SweepError::Write { path: dir.join("sweep.json"), message: e.to_string() })?;
    put("sweep.json".into(), &json)?;
    for s in &r.scenarios {
        written.extend(crate::charts::write_charts(&dir.join("charts"), s)?);
    }
    Ok(written)
}
