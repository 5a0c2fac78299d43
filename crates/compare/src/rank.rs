//! Rankings per metric at each load level, over series of runs (a label's runs at one or
//! more loads).

use serde::Serialize;

use crate::compare::{rejected, CompareOptions};
use crate::data::{Identity, RunData, Subject};
use servelab_metrics::{MetricKey, HEADLINE};
use servelab_records::LoadSpec;

/// A named set of runs, one [`Subject`] per load level, lightest load first.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// The runs' shared display name.
    pub name: String,
    /// One subject per load level, lightest first.
    pub points: Vec<Subject>,
}

impl Series {
    /// The point of this workload and load, if the series has one.
    pub fn at_identity(&self, id: &Identity) -> Option<&Subject> {
        self.points.iter().find(|p| p.identity().as_ref() == Some(id))
    }
}

/// Group runs into series by name (first appearance order), and within a series into
/// subjects by load (runs of one name at one load are repeats).
///
/// Runs of one name but of different workloads are never one series: a name whose runs
/// differ in scenario or dataset (at any load), or in prompts at one load, becomes one series
/// per workload, named `name [what differs]` (e.g. `vllm [100 prompts]`,
/// `vllm [random(8:8)]`). A name whose prompt count changes only from load to load (a sweep
/// scaling its prompts with the level) stays one series.
pub fn group(mut runs: Vec<RunData>) -> Vec<Series> {
    split_workloads(&mut runs);
    let mut out: Vec<Series> = Vec::new();
    for run in runs {
        let si = match out.iter().position(|s| s.name == run.name) {
            Some(i) => i,
            None => {
                out.push(Series { name: run.name.clone(), points: Vec::new() });
                out.len() - 1
            }
        };
        let key = run.load_words();
        let series = &mut out[si];
        match series.points.iter_mut().find(|p| p.load_words() == key) {
            Some(p) => p.runs.push(run),
            None => series.points.push(Subject::single(run)),
        }
    }
    for s in &mut out {
        s.points.sort_by(|a, b| a.load().cmp_intensity(&b.load()));
    }
    out
}

/// A run's workload without its load; without its prompt count too unless `prompts`.
fn workload_of(r: &RunData, prompts: bool) -> Identity {
    let id = r.identity();
    Identity { load: String::new(), num_prompts: if prompts { id.num_prompts } else { None }, ..id }
}

/// Rename the runs of each name that holds two workloads (see [`group`]).
fn split_workloads(runs: &mut [RunData]) {
    let mut names: Vec<String> = runs.iter().map(|r| r.name.clone()).collect();
    names.dedup();
    for name in names {
        let mine: Vec<usize> = (0..runs.len()).filter(|&i| runs[i].name == name).collect();
        let pairs = || mine.iter().flat_map(|&i| mine.iter().map(move |&j| (i, j)));
        let scenarios =
            pairs().any(|(i, j)| workload_of(&runs[i], false) != workload_of(&runs[j], false));
        let prompts = pairs().any(|(i, j)| {
            runs[i].load_words() == runs[j].load_words()
                && workload_of(&runs[i], true) != workload_of(&runs[j], true)
        });
        if !scenarios && !prompts {
            continue;
        }
        // Prompts name the series only when they tell two workloads at one load apart.
        let all: Vec<Identity> = mine.iter().map(|&i| workload_of(&runs[i], prompts)).collect();
        for (k, &i) in mine.iter().enumerate() {
            runs[i].name = format!("{name} [{}]", all[k].distinguish(&all));
        }
    }
}

/// Every identity (workload and load) of any series' point: lightest load first, then fewer
/// prompts, then first appearance. Comparisons and rankings are made per identity, so two
/// scenarios (or two prompt counts) at one load are never ranked against each other.
pub fn identities(series: &[Series]) -> Vec<Identity> {
    let mut v: Vec<(LoadSpec, Identity)> = Vec::new();
    for p in series.iter().flat_map(|s| &s.points) {
        let Some(id) = p.identity() else { continue };
        if !v.iter().any(|(_, i)| *i == id) {
            v.push((p.load(), id));
        }
    }
    v.sort_by(|(la, a), (lb, b)| la.cmp_intensity(lb).then(a.num_prompts.cmp(&b.num_prompts)));
    v.into_iter().map(|(_, i)| i).collect()
}

/// How a report names the point of `id` among `all`: what tells it apart (`c=4`,
/// `scenario chat, c=4`), or the whole identity when nothing does.
pub fn point_name(id: &Identity, all: &[Identity]) -> String {
    let d = id.distinguish(all);
    if d.is_empty() {
        id.describe()
    } else {
        d
    }
}

/// One series' place in a ranking.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RankEntry {
    /// The series' name.
    pub name: String,
    /// Its value of the metric at this level (success rate in percent).
    pub value: f64,
    /// 1-based; equal values share a rank (1, 1, 3).
    pub rank: usize,
}

/// The ranking of one metric at one load level.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LevelRanking {
    /// The load level.
    pub load: LoadSpec,
    /// The workload and load ranked at, as `point_name` names it.
    pub point: String,
    /// The metric ranked.
    pub metric: MetricKey,
    /// Best first; rejected series and series without the metric are left out.
    pub entries: Vec<RankEntry>,
}

/// Rank `(name, value)` pairs for a metric's direction: best first, ties share a rank, and
/// equal values keep their input order.
pub fn rank_values(metric: MetricKey, values: &[(String, f64)]) -> Vec<RankEntry> {
    let mut v: Vec<(String, f64)> = values.to_vec();
    v.sort_by(|a, b| {
        let o = a.1.total_cmp(&b.1);
        if metric.higher_is_better() {
            o.reverse()
        } else {
            o
        }
    });
    let mut out: Vec<RankEntry> = Vec::with_capacity(v.len());
    for (i, (name, value)) in v.into_iter().enumerate() {
        let rank = match out.last() {
            Some(prev) if prev.value == value => prev.rank,
            _ => i + 1,
        };
        out.push(RankEntry { name, value, rank });
    }
    out
}

/// Rankings of every metric at every workload and load (`identities`): only series with
/// a point of that very workload and load are ranked together.
pub fn rankings(series: &[Series], o: &CompareOptions) -> Vec<LevelRanking> {
    let mut out = Vec::new();
    let ids = identities(series);
    for id in &ids {
        let Some(load) = series.iter().find_map(|s| s.at_identity(id)).map(Subject::load) else {
            continue;
        };
        let point = point_name(id, &ids);
        for metric in HEADLINE {
            let values: Vec<(String, f64)> = series
                .iter()
                .filter_map(|s| {
                    let p = s.at_identity(id)?;
                    if rejected(p.success_rate(), o.min_success_rate) {
                        return None;
                    }
                    Some((s.name.clone(), point_value(p, metric)?))
                })
                .collect();
            let entries = rank_values(metric, &values);
            out.push(LevelRanking { load, point: point.clone(), metric, entries });
        }
    }
    out
}

/// A point's value of a metric (success rate in percent).
pub fn point_value(p: &Subject, metric: MetricKey) -> Option<f64> {
    p.metric_value(metric)
}

#[cfg(test)]
mod tests {
    use super::*;
    use servelab_metrics::Metric;

    fn pairs(v: &[(&str, f64)]) -> Vec<(String, f64)> {
        v.iter().map(|(n, x)| (n.to_string(), *x)).collect()
    }

    #[test]
    fn ranks_follow_direction_and_ties_share() {
        let r = rank_values(
            MetricKey::of(Metric::OutputThroughput),
            &pairs(&[("a", 10.0), ("b", 30.0), ("c", 30.0), ("d", 5.0)]),
        );
        let got: Vec<(&str, usize)> = r.iter().map(|e| (e.name.as_str(), e.rank)).collect();
        assert_eq!(got, vec![("b", 1), ("c", 1), ("a", 3), ("d", 4)]);
        let r = rank_values(
            MetricKey::stat(Metric::Ttft, servelab_metrics::Stat::P(99.0)),
            &pairs(&[("a", 10.0), ("b", 30.0)]),
        );
        assert_eq!(r[0].name, "a");
    }
}
