//! What a comparison reads about a run: headline numbers, per-request samples when the run
//! has records, its load, and (for reports) the full summary and records.

use servelab_metrics::request::itl_per_token_ms;
use servelab_metrics::{LoadSummary, RequestRow, Summary};
use servelab_records::{RequestRecord, RunInfo};
use servelab_store::{Headline, RunSetup};

use serde::Serialize;
use servelab_metrics::pareto;
use servelab_metrics::{Metric, MetricKey, DEPLOYMENT_KEYS};
use servelab_records::LoadSpec;

/// Per-request samples of one run, one unit per successful measured request.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Samples {
    /// TTFT of each request, ms (one value per unit).
    pub ttft: Vec<Vec<f64>>,
    /// TPOT of each request with at least 2 output tokens, ms (one value per unit).
    pub tpot: Vec<Vec<f64>>,
    /// End-to-end latency of each request, ms (one value per unit).
    pub e2el: Vec<Vec<f64>>,
    /// The per-token inter-token gaps of each request.
    pub itl: Vec<Vec<f64>>,
    /// Reasoning models, per request with reasoning: time to the first reasoning token, ms.
    pub ttfr: Vec<Vec<f64>>,
    /// Time to the first answer token, ms.
    pub ttfa: Vec<Vec<f64>>,
    /// TPOT of the reasoning phase, ms.
    pub reasoning_tpot: Vec<Vec<f64>>,
    /// TPOT of the answer phase, ms.
    pub answer_tpot: Vec<Vec<f64>>,
    /// The steady state's requests (`servelab_metrics::load`): TTFT, ms; empty without one.
    pub steady_ttft: Vec<Vec<f64>>,
    /// Their TPOT, ms.
    pub steady_tpot: Vec<Vec<f64>>,
    /// Their end-to-end latency, ms.
    pub steady_e2el: Vec<Vec<f64>>,
}

impl Samples {
    /// From summary rows (TTFT, TPOT, E2E) and the records (per-token ITL, as the summary
    /// computes it). Without records, ITL falls back to the rows' per-chunk gaps.
    pub fn new(rows: &[RequestRow], records: &[RequestRecord]) -> Samples {
        let ok: Vec<&RequestRow> = rows.iter().filter(|r| r.is_success()).collect();
        let one = |f: fn(&RequestRow) -> Option<f64>| -> Vec<Vec<f64>> {
            ok.iter().filter_map(|r| f(r)).map(|v| vec![v]).collect()
        };
        let measured: Vec<&RequestRecord> =
            records.iter().filter(|r| !r.warmup && r.is_success()).collect();
        let itl = if measured.is_empty() {
            ok.iter().map(|r| r.itl_chunk_ms.clone()).filter(|g| !g.is_empty()).collect()
        } else {
            measured.iter().map(|r| itl_per_token_ms(r)).filter(|g| !g.is_empty()).collect()
        };
        Samples {
            ttft: one(|r| r.ttft_ms),
            tpot: one(|r| r.tpot_ms),
            e2el: one(|r| r.e2el_ms),
            itl,
            ttfr: one(|r| r.reasoning?.ttfr_ms),
            ttfa: one(|r| r.reasoning?.ttfa_ms),
            reasoning_tpot: one(|r| r.reasoning?.reasoning_tpot_ms),
            answer_tpot: one(|r| r.reasoning?.answer_tpot_ms),
            ..Samples::default()
        }
    }

    /// With the steady state's requests' samples, when the run reached one.
    pub fn with_steady(mut self, rows: &[RequestRow], load: Option<&LoadSummary>) -> Samples {
        let Some(f) = load.and_then(|l| l.steady_figures()) else { return self };
        let steady: Vec<&RequestRow> =
            rows.iter().filter(|r| r.is_success() && f.holds(r)).collect();
        let one = |g: fn(&RequestRow) -> Option<f64>| -> Vec<Vec<f64>> {
            steady.iter().filter_map(|r| g(r)).map(|v| vec![v]).collect()
        };
        self.steady_ttft = one(|r| r.ttft_ms);
        self.steady_tpot = one(|r| r.tpot_ms);
        self.steady_e2el = one(|r| r.e2el_ms);
        self
    }

    /// The units of a latency metric; `None` for other metrics.
    pub fn get(&self, m: Metric) -> Option<&[Vec<f64>]> {
        Some(match m {
            Metric::Ttft => &self.ttft,
            Metric::Tpot => &self.tpot,
            Metric::Itl => &self.itl,
            Metric::E2el => &self.e2el,
            Metric::Ttfr => &self.ttfr,
            Metric::Ttfa => &self.ttfa,
            Metric::ReasoningTpot => &self.reasoning_tpot,
            Metric::AnswerTpot => &self.answer_tpot,
            Metric::SteadyTtft => &self.steady_ttft,
            Metric::SteadyTpot => &self.steady_tpot,
            Metric::SteadyE2el => &self.steady_e2el,
            _ => return None,
        })
    }
}

/// What the name of a run the engine model predicted ends with.
pub const PREDICTED: &str = " (predicted)";

/// True for the name of a run (or a deployment of runs) the engine model predicted.
pub fn is_predicted_name(name: &str) -> bool {
    name.ends_with(PREDICTED)
}

/// One stored (or imported, or file) run, ready to compare.
#[derive(Debug, Clone, PartialEq)]
pub struct RunData {
    /// Display name: the label, else `#id`, else the file name.
    pub name: String,
    /// The run's id in the results store; `None` for a run read from a file.
    pub id: Option<i64>,
    /// `complete`, `interrupted`, `incomplete`, ... as `runs list` shows it.
    pub status: String,
    /// Rate, burstiness, concurrency cap and duration it ran with.
    pub load: LoadSpec,
    /// Its headline numbers.
    pub headline: Headline,
    /// Per-request samples; `None` for a run known only by its headline (an import).
    pub samples: Option<Samples>,
    /// The full configuration, when the store or the imported file has it.
    pub config: Option<RunSetup>,
    /// `key=value` tags, in stored order.
    pub tags: Vec<(String, String)>,
    /// The full summary; `None` for a run known only by its headline.
    pub summary: Option<Summary>,
    /// Its per-request records; empty when none were kept.
    pub records: Vec<RequestRecord>,
}

impl RunData {
    /// A run servelab measured: everything comes from its summary (and records).
    pub fn from_summary(name: &str, summary: Summary, records: Vec<RequestRecord>) -> RunData {
        // A run merged from shards' digests has no per-request rows: like an import, it is
        // compared by its figures, without resampled confidence intervals.
        let samples = (!summary.requests.is_empty()).then(|| {
            Samples::new(&summary.requests, &records)
                .with_steady(&summary.requests, summary.load.as_ref())
        });
        RunData {
            name: name.to_string(),
            id: None,
            status: if summary.info.interrupted { "interrupted" } else { "complete" }.into(),
            load: summary.info.load,
            headline: Headline::from_summary(&summary),
            samples,
            config: None,
            tags: Vec::new(),
            summary: Some(summary),
            records,
        }
    }

    /// A run known only by its headline numbers (an import).
    pub fn from_headline(name: &str, info: &RunInfo, headline: Headline) -> RunData {
        RunData {
            name: name.to_string(),
            id: None,
            status: "complete".into(),
            load: info.load,
            headline,
            samples: None,
            config: None,
            tags: Vec::new(),
            summary: None,
            records: Vec::new(),
        }
    }
}

impl RunData {
    fn info(&self) -> Option<&RunInfo> {
        self.config.as_ref().map(|c| &c.info).or(self.summary.as_ref().map(|s| &s.info))
    }

    /// The ramped rate the run used instead of a fixed one, if it did.
    pub fn ramp(&self) -> Option<servelab_load::Ramp> {
        self.info()?.ramp
    }

    /// The load in words as the run did it: `c=4`, `inf`, `ramp linear 1→10 req/s`.
    pub fn load_words(&self) -> String {
        match self.info().filter(|i| i.ramp.is_some()) {
            Some(i) => i.load_words(),
            None => self.load.to_string(),
        }
    }

    /// This run's value of `metric`: per GPU and per user from its headline and GPU count;
    /// the reasoning, GPU and load figures (not headline columns) from its stored summary;
    /// the rest from its headline.
    pub fn metric(&self, metric: MetricKey) -> Option<f64> {
        if DEPLOYMENT_KEYS.contains(&metric) {
            return self.deployment_value(metric);
        }
        let m = metric.metric;
        if m.is_reasoning() || m.is_gpu() || m.is_load() {
            return metric.value(self.summary.as_ref()?);
        }
        self.headline.get(&metric)
    }

    /// GPUs serving the deployment, as the run states them (`--gpus`, a prediction's).
    pub fn gpus(&self) -> Option<u32> {
        self.info()?.gpus
    }

    /// A deployment figure ([`servelab_metrics::DEPLOYMENT_KEYS`]) from the headline, so
    /// imports have it too: output tokens/s per GPU (with a GPU count), and interactivity,
    /// 1000 / mean TPOT. `None` for other keys.
    pub fn deployment_value(&self, m: MetricKey) -> Option<f64> {
        match m.metric {
            Metric::OutputThroughputPerGpu => {
                pareto::per_gpu(self.headline.output_throughput?, self.gpus())
            }
            Metric::Interactivity => pareto::interactivity(self.headline.tpot_mean_ms?),
            _ => None,
        }
    }

    /// What makes this run comparable with another: its workload and load.
    pub fn identity(&self) -> Identity {
        let info = self.info();
        Identity {
            scenario: self.tags.iter().find(|(k, _)| k == SCENARIO_TAG).map(|(_, v)| v.clone()),
            dataset: info.map(|i| i.dataset.clone()).filter(|d| !d.is_empty()),
            num_prompts: info.map(|i| i.num_prompts).filter(|&n| n > 0),
            // A ramp is its own load, never "inf" (its rate field is empty).
            load: self.load_words(),
        }
    }
}

/// The tag a sweep's points carry with their scenario's name.
pub const SCENARIO_TAG: &str = "sweep.scenario";

/// A run's identity for comparison: its workload (sweep scenario, dataset, measured prompts)
/// and its load. Only runs of one identity are repeats of each other; a part a result file
/// does not record (`None`) is unknown, and equal only to another unknown.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Identity {
    /// The sweep scenario it was a point of, if any.
    pub scenario: Option<String>,
    /// The dataset's label, e.g. `random(1024:128)`.
    pub dataset: Option<String>,
    /// Measured requests planned (warm-ups excluded).
    pub num_prompts: Option<u64>,
    /// The load as [`LoadSpec`] shows it: `inf`, `c=4`, `rate=2`.
    pub load: String,
}

impl Identity {
    /// Each part in words, in order: scenario, dataset, prompts, load (`?` when unknown).
    fn parts(&self) -> [String; 4] {
        let or_unknown = |v: &Option<String>| v.clone().unwrap_or_else(|| "?".into());
        [
            self.scenario.as_ref().map_or("no scenario".into(), |s| format!("scenario {s}")),
            or_unknown(&self.dataset),
            self.num_prompts.map_or("? prompts".into(), prompts),
            self.load.clone(),
        ]
    }

    /// The identity in words: `scenario chat, random(1000:100), 100 prompts, c=4`.
    pub fn describe(&self) -> String {
        let p = self.parts();
        let skip = usize::from(self.scenario.is_none());
        p[skip..].join(", ")
    }

    /// What tells this identity apart among `all`: the parts that vary, in words, e.g.
    /// `100 prompts` or `scenario chat, c=4`. Empty when none varies.
    pub fn distinguish(&self, all: &[Identity]) -> String {
        let mine = self.parts();
        let varies: Vec<bool> =
            (0..4).map(|i| all.iter().any(|o| o.parts()[i] != mine[i])).collect();
        (0..4).filter(|&i| varies[i]).map(|i| mine[i].clone()).collect::<Vec<_>>().join(", ")
    }

    /// The parts in which `self` differs from `other`, as `what: mine vs theirs`.
    pub fn differences(&self, other: &Identity) -> Vec<String> {
        const WHAT: [&str; 4] = ["scenario", "dataset", "prompts", "load"];
        let (a, b) = (self.parts(), other.parts());
        (0..4)
            .filter(|&i| a[i] != b[i])
            .map(|i| format!("{}: {} vs {}", WHAT[i], a[i], b[i]))
            .collect()
    }
}

/// `1 prompt`, `100 prompts`.
fn prompts(n: u64) -> String {
    if n == 1 {
        "1 prompt".into()
    } else {
        format!("{n} prompts")
    }
}

/// Runs of one configuration at one load: a single run, or repeats of it.
#[derive(Debug, Clone, PartialEq)]
pub struct Subject {
    /// Display name: the operand as given, or the single run's name.
    pub name: String,
    /// The runs: one, or repeats of the same configuration.
    pub runs: Vec<RunData>,
}

impl Subject {
    /// The value shown for it: mean over repeats of the headline value (per GPU and per user
    /// from each run's headline and GPU count; reasoning, GPU and load figures from the
    /// stored summaries). With per-request samples the headline is what the run's summary
    /// computed from them. One reading for comparisons, deployment views and verdicts.
    pub fn metric_value(&self, metric: MetricKey) -> Option<f64> {
        if metric.metric == Metric::SuccessRate {
            return self.success_rate().map(|r| r * 100.0);
        }
        let vals: Vec<f64> = self.runs.iter().filter_map(|r| r.metric(metric)).collect();
        (!vals.is_empty()).then(|| vals.iter().sum::<f64>() / vals.len() as f64)
    }

    /// A subject of one run, named after it.
    pub fn single(run: RunData) -> Subject {
        Subject { name: run.name.clone(), runs: vec![run] }
    }

    /// The identity of its first run (all its runs share one); `None` when it has no runs.
    pub fn identity(&self) -> Option<Identity> {
        self.runs.first().map(RunData::identity)
    }

    /// The load of its first run (all its runs share one); the default when it has none.
    pub fn load(&self) -> LoadSpec {
        self.runs.first().map(|r| r.load).unwrap_or_default()
    }

    /// The load of its first run in words (a ramp as a ramp); `inf` when it has none.
    pub fn load_words(&self) -> String {
        self.runs.first().map_or_else(|| LoadSpec::default().to_string(), RunData::load_words)
    }

    /// Mean over the repeats that have the metric; `None` when none has it.
    pub fn value(&self, f: impl Fn(&Headline) -> Option<f64>) -> Option<f64> {
        let vals: Vec<f64> = self.runs.iter().filter_map(|r| f(&r.headline)).collect();
        (!vals.is_empty()).then(|| vals.iter().sum::<f64>() / vals.len() as f64)
    }

    /// Success rate over all repeats: completed / (completed + failed), pooled.
    pub fn success_rate(&self) -> Option<f64> {
        let mut c = 0u64;
        let mut f = 0u64;
        for r in &self.runs {
            c += r.headline.completed?;
            f += r.headline.failed?;
        }
        (c + f > 0).then(|| c as f64 / (c + f) as f64)
    }

    /// The per-request units of every repeat, pooled; `None` unless every repeat has them.
    pub fn units(&self, m: Metric) -> Option<Vec<Vec<f64>>> {
        let mut all = Vec::new();
        for r in &self.runs {
            all.extend(r.samples.as_ref()?.get(m)?.iter().cloned());
        }
        Some(all)
    }
}
