//! The chart deployments are chosen by: output throughput per GPU against interactivity
//! (output tokens per second one user sees), and the Pareto front of the points no other
//! point beats on both. Public hardware comparisons (SemiAnalysis InferenceMAX, NVIDIA's)
//! publish this chart; docs/metrics.md has the definitions and their source.
//!
//! - **interactivity** = 1000 / mean TPOT (ms), output tokens/s per user after the first
//!   token ([`interactivity`]);
//! - **throughput per GPU** = output throughput / the GPUs serving the deployment
//!   ([`per_gpu`]);
//! - a point is **on the front** when no other point has at least its throughput and at least
//!   its interactivity and more of one ([`pareto_front`]).
//!
//! A deployment is a series of runs of one configuration at several loads (a sweep's
//! points, a prediction, a report's runs of one label). [`frontier`] takes the deployments,
//! leaves out the points it cannot place (saying why), and marks the front across all of
//! them. Per-GPU and per-deployment figures are never mixed on one front: when no point knows
//! its GPU count the front is of per-deployment totals, and when some do, the others are
//! left out.

use std::fmt;

/// Output tokens per second one user sees after the first token: `1000 / tpot_ms`, for a
/// positive, finite TPOT (ms); `None` otherwise (a run of one-token answers has no TPOT).
pub fn interactivity(tpot_ms: f64) -> Option<f64> {
    (tpot_ms.is_finite() && tpot_ms > 0.0).then(|| 1000.0 / tpot_ms)
}

/// `throughput / gpus` for a known, non-zero GPU count and a finite throughput.
pub fn per_gpu(throughput: f64, gpus: Option<u32>) -> Option<f64> {
    let g = gpus.filter(|&g| g > 0)?;
    throughput.is_finite().then(|| throughput / f64::from(g))
}

/// Which points of `(x, y)` are on the Pareto front when both are better higher: point `i`
/// is on it unless some point `j` has `x_j >= x_i` and `y_j >= y_i` with one strictly
/// greater. Equal points (duplicates) do not dominate each other: all are on the front or
/// none. A point with a non-finite coordinate is never on it and dominates nothing.
pub fn pareto_front(points: &[(f64, f64)]) -> Vec<bool> {
    let ok = |p: &(f64, f64)| p.0.is_finite() && p.1.is_finite();
    points
        .iter()
        .map(|a| {
            ok(a)
                && !points
                    .iter()
                    .any(|b| ok(b) && b.0 >= a.0 && b.1 >= a.1 && (b.0 > a.0 || b.1 > a.1))
        })
        .collect()
}

/// The front's points in drawing order: interactivity rising, throughput falling (ties by
/// throughput, highest first), duplicates once.
pub fn front_path(points: &[(f64, f64)]) -> Vec<(f64, f64)> {
    let on = pareto_front(points);
    in_drawing_order(points.iter().zip(&on).filter(|(_, &f)| f).map(|(p, _)| *p).collect())
}

/// Front points sorted as [`front_path`] draws them, duplicates once.
fn in_drawing_order(mut path: Vec<(f64, f64)>) -> Vec<(f64, f64)> {
    path.sort_by(|a, b| a.0.total_cmp(&b.0).then(b.1.total_cmp(&a.1)));
    path.dedup();
    path
}

/// One load level of a deployment, as the front reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct FrontInput {
    /// How the point is labelled: its concurrency (`16`) or rate (`2 req/s`).
    pub label: String,
    /// Output tokens/s of the whole deployment; `None` when unknown.
    pub output_throughput: Option<f64>,
    /// Mean TPOT, ms; `None` when the run had none.
    pub tpot_mean_ms: Option<f64>,
    /// GPUs serving the deployment (`--gpus`); `None` when unknown.
    pub gpus: Option<u32>,
}

/// A deployment: a run series of one configuration at several loads.
#[derive(Debug, Clone, PartialEq)]
pub struct FrontSeries {
    /// Its name (a sweep's label, a report's deployment).
    pub name: String,
    /// Its load levels, lightest first.
    pub points: Vec<FrontInput>,
}

/// What the front's throughput axis is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Basis {
    /// Output tokens/s per GPU: every point placed knows its GPU count.
    PerGpu,
    /// Output tokens/s of the whole deployment: no point knows its GPU count.
    PerDeployment,
}

/// A placed point.
#[derive(Debug, Clone, PartialEq)]
pub struct FrontPoint {
    /// Index of its deployment in [`Frontier::deployments`].
    pub deployment: usize,
    /// Its label (concurrency or rate).
    pub label: String,
    /// GPUs of its deployment, when known.
    pub gpus: Option<u32>,
    /// Output tokens/s of the deployment.
    pub output_throughput: f64,
    /// Output tokens/s per GPU, when the GPU count is known.
    pub per_gpu: Option<f64>,
    /// Output tokens/s per user (1000 / mean TPOT).
    pub interactivity: f64,
    /// On the front across every deployment.
    pub on_front: bool,
}

impl FrontPoint {
    /// The throughput the front is drawn with: per GPU, or the deployment's total.
    pub fn throughput(&self, basis: Basis) -> f64 {
        match basis {
            Basis::PerGpu => self.per_gpu.unwrap_or(f64::NAN),
            Basis::PerDeployment => self.output_throughput,
        }
    }
}

/// Why a point is not on the chart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exclusion {
    /// No output throughput, or not a finite number.
    NoThroughput,
    /// No mean TPOT above 0 (every answer was one token, or none completed).
    NoTpot,
    /// Other points know their GPU count and this one does not.
    NoGpus,
}

/// A point left off the chart, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Excluded {
    /// Its deployment's name.
    pub deployment: String,
    /// Its label.
    pub label: String,
    /// Why.
    pub reason: Exclusion,
}

impl fmt::Display for Exclusion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Exclusion::NoThroughput => "no output throughput",
            Exclusion::NoTpot => "no mean TPOT (no request wrote two tokens)",
            Exclusion::NoGpus => {
                "GPU count unknown while others' are known (pass --gpus to every run)"
            }
        })
    }
}

/// The points of every deployment on one throughput basis, the front marked.
#[derive(Debug, Clone, PartialEq)]
pub struct Frontier {
    /// Per GPU, or per deployment when no point knows its GPU count.
    pub basis: Basis,
    /// The deployments' names, in the order given.
    pub deployments: Vec<String>,
    /// Every placed point, deployment by deployment, in the order given.
    pub points: Vec<FrontPoint>,
    /// The points left out, in the order given.
    pub excluded: Vec<Excluded>,
}

/// What the reader must know when the front is not per GPU.
pub const GPUS_UNKNOWN: &str = "per GPU unknown: pass --gpus";

impl Frontier {
    /// The notes under the chart: the basis when it is not per GPU, then each point left out.
    pub fn notes(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.basis == Basis::PerDeployment && !self.points.is_empty() {
            out.push(format!(
                "Throughput is per deployment ({GPUS_UNKNOWN}): no run states its GPU count."
            ));
        }
        // One line per deployment and reason: `tp8 at 1, 4 is left out: ...`.
        let mut groups: Vec<(&str, Exclusion, Vec<&str>)> = Vec::new();
        for e in &self.excluded {
            match groups.iter_mut().find(|g| g.0 == e.deployment && g.1 == e.reason) {
                Some(g) => g.2.push(&e.label),
                None => groups.push((&e.deployment, e.reason, vec![&e.label])),
            }
        }
        out.extend(
            groups
                .into_iter()
                .map(|(d, why, at)| format!("{d} at {} is left out: {why}", at.join(", "))),
        );
        out
    }

    /// The front's points in drawing order (see [`front_path`]).
    pub fn path(&self) -> Vec<(f64, f64)> {
        let pts: Vec<(f64, f64)> = self
            .points
            .iter()
            .filter(|p| p.on_front)
            .map(|p| (p.interactivity, p.throughput(self.basis)))
            .collect();
        // Already the front: only the order is left to do.
        in_drawing_order(pts)
    }
}

/// Place every point of `series` and mark the front across all of them.
pub fn frontier(series: &[FrontSeries]) -> Frontier {
    let mut excluded = Vec::new();
    let mut placed = Vec::new();
    for (d, s) in series.iter().enumerate() {
        for p in &s.points {
            let out =
                |reason| Excluded { deployment: s.name.clone(), label: p.label.clone(), reason };
            let Some(tput) = p.output_throughput.filter(|t| t.is_finite()) else {
                excluded.push(out(Exclusion::NoThroughput));
                continue;
            };
            let Some(inter) = p.tpot_mean_ms.and_then(interactivity) else {
                excluded.push(out(Exclusion::NoTpot));
                continue;
            };
            placed.push(FrontPoint {
                deployment: d,
                label: p.label.clone(),
                gpus: p.gpus.filter(|&g| g > 0),
                output_throughput: tput,
                per_gpu: per_gpu(tput, p.gpus),
                interactivity: inter,
                on_front: false,
            });
        }
    }
    let basis = if placed.iter().any(|p| p.per_gpu.is_some()) {
        Basis::PerGpu
    } else {
        Basis::PerDeployment
    };
    if basis == Basis::PerGpu {
        for p in placed.iter().filter(|p| p.per_gpu.is_none()) {
            excluded.push(Excluded {
                deployment: series[p.deployment].name.clone(),
                label: p.label.clone(),
                reason: Exclusion::NoGpus,
            });
        }
        placed.retain(|p| p.per_gpu.is_some());
    }
    let xy: Vec<(f64, f64)> =
        placed.iter().map(|p| (p.interactivity, p.throughput(basis))).collect();
    for (p, on) in placed.iter_mut().zip(pareto_front(&xy)) {
        p.on_front = on;
    }
    Frontier {
        basis,
        deployments: series.iter().map(|s| s.name.clone()).collect(),
        points: placed,
        excluded,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interactivity_is_1000_over_tpot() {
        assert_eq!(interactivity(8.0), Some(125.0));
        assert_eq!(interactivity(40.0), Some(25.0));
        assert_eq!(interactivity(0.0), None);
        assert_eq!(interactivity(-1.0), None);
        assert_eq!(interactivity(f64::NAN), None);
        assert_eq!(interactivity(f64::INFINITY), None);
    }

    #[test]
    fn per_gpu_divides_by_a_known_count() {
        assert_eq!(per_gpu(1000.0, Some(4)), Some(250.0));
        assert_eq!(per_gpu(1000.0, Some(1)), Some(1000.0));
        assert_eq!(per_gpu(1000.0, Some(0)), None);
        assert_eq!(per_gpu(1000.0, None), None);
        assert_eq!(per_gpu(f64::NAN, Some(2)), None);
    }

    #[test]
    fn the_front_is_the_points_nothing_beats_on_both() {
        // (interactivity, throughput): 1 beats 3 on both; 0, 1, 2 trade one for the other.
        let pts = [(100.0, 10.0), (50.0, 40.0), (10.0, 60.0), (40.0, 30.0)];
        assert_eq!(pareto_front(&pts), [true, true, true, false]);
        assert_eq!(front_path(&pts), [(10.0, 60.0), (50.0, 40.0), (100.0, 10.0)]);
    }

    #[test]
    fn single_empty_ties_and_duplicates() {
        assert_eq!(pareto_front(&[(1.0, 1.0)]), [true]);
        assert!(pareto_front(&[]).is_empty());
        // Equal on one axis, better on the other: dominated.
        assert_eq!(pareto_front(&[(10.0, 5.0), (10.0, 6.0)]), [false, true]);
        assert_eq!(pareto_front(&[(10.0, 5.0), (11.0, 5.0)]), [false, true]);
        // Duplicates neither dominate each other: both on, drawn once.
        let dup = [(10.0, 5.0), (10.0, 5.0), (2.0, 1.0)];
        assert_eq!(pareto_front(&dup), [true, true, false]);
        assert_eq!(front_path(&dup), [(10.0, 5.0)]);
    }

    #[test]
    fn non_finite_points_are_neither_on_nor_dominating() {
        let pts = [(f64::NAN, 100.0), (5.0, 5.0), (f64::INFINITY, 100.0), (1.0, f64::NAN)];
        assert_eq!(pareto_front(&pts), [false, true, false, false]);
    }

    fn input(label: &str, tput: Option<f64>, tpot: Option<f64>, gpus: Option<u32>) -> FrontInput {
        FrontInput { label: label.into(), output_throughput: tput, tpot_mean_ms: tpot, gpus }
    }

    #[test]
    fn a_frontier_across_deployments_per_gpu() {
        let a = FrontSeries {
            name: "tp4".into(),
            points: vec![
                input("1", Some(50.0), Some(10.0), Some(4)),
                input("8", Some(800.0), Some(16.0), Some(4)),
            ],
        };
        let b = FrontSeries {
            name: "tp8".into(),
            points: vec![
                input("1", Some(120.0), Some(8.0), Some(8)),
                input("8", Some(1200.0), Some(12.5), Some(8)),
                input("16", Some(1000.0), None, Some(8)),
            ],
        };
        let f = frontier(&[a, b]);
        assert_eq!(f.basis, Basis::PerGpu);
        let got: Vec<(usize, &str, f64, f64, bool)> = f
            .points
            .iter()
            .map(|p| {
                (p.deployment, p.label.as_str(), p.interactivity, p.per_gpu.unwrap(), p.on_front)
            })
            .collect();
        // tp4: 12.5 and 200 tok/s/GPU at 100 and 62.5 tok/s/user; tp8: 15 and 150 at 125
        // and 80. tp8 at 1 (125, 15) beats tp4 at 1 (100, 12.5) on both; the rest trade.
        assert_eq!(
            got,
            [
                (0, "1", 100.0, 12.5, false),
                (0, "8", 62.5, 200.0, true),
                (1, "1", 125.0, 15.0, true),
                (1, "8", 80.0, 150.0, true),
            ]
        );
        assert_eq!(
            f.notes(),
            ["tp8 at 16 is left out: no mean TPOT (no request wrote two tokens)"]
        );
        assert_eq!(f.path(), [(62.5, 200.0), (80.0, 150.0), (125.0, 15.0)]);
    }

    #[test]
    fn a_dominated_deployment_is_faded_whole() {
        let s = |name: &str, k: f64| FrontSeries {
            name: name.into(),
            points: vec![
                input("1", Some(100.0 * k), Some(10.0 / k), Some(1)),
                input("4", Some(300.0 * k), Some(20.0 / k), Some(1)),
            ],
        };
        let f = frontier(&[s("slow", 1.0), s("fast", 2.0)]);
        let on: Vec<bool> = f.points.iter().map(|p| p.on_front).collect();
        assert_eq!(on, [false, false, true, true]);
        assert!(f.notes().is_empty());
    }

    #[test]
    fn without_any_gpu_count_the_front_is_per_deployment() {
        let a = FrontSeries {
            name: "a".into(),
            points: vec![
                input("1", Some(100.0), Some(10.0), None),
                input("2", None, Some(10.0), None),
            ],
        };
        let f = frontier(&[a]);
        assert_eq!(f.basis, Basis::PerDeployment);
        assert_eq!(f.points[0].throughput(f.basis), 100.0);
        assert_eq!(f.points[0].per_gpu, None);
        assert_eq!(
            f.notes(),
            [
                "Throughput is per deployment (per GPU unknown: pass --gpus): no run states its GPU count.",
                "a at 2 is left out: no output throughput",
            ]
        );
    }

    #[test]
    fn per_gpu_and_per_deployment_never_mix() {
        let a = FrontSeries {
            name: "a".into(),
            points: vec![input("1", Some(100.0), Some(10.0), Some(2))],
        };
        let b = FrontSeries {
            name: "b".into(),
            points: vec![input("1", Some(900.0), Some(5.0), None)],
        };
        let f = frontier(&[a, b]);
        assert_eq!(f.basis, Basis::PerGpu);
        assert_eq!(f.points.len(), 1);
        assert_eq!((f.points[0].per_gpu, f.points[0].on_front), (Some(50.0), true));
        assert_eq!(
            f.notes(),
            ["b at 1 is left out: GPU count unknown while others' are known (pass --gpus to every run)"]
        );
    }
}
