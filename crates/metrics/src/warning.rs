//! What a run's reader must know to trust its numbers, one variant per thing that can happen,
//! each with the figures it rests on; the words are in [`Display`](fmt::Display), in one
//! place (hyperfine keeps its warnings the same way).
//!
//! A summary's warnings serialize to the sentences they always were (the result JSON's
//! `warnings`, a list of strings); read back from a file, a warning is its sentence
//! ([`Warning::Note`]). Stages above metrics (the conductor, the predictor, the store) that
//! have a sentence of their own add it as a note.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Schedule lag at the median above which a run warns that the client sent late, ms.
pub const LAG_MEDIAN_WARN_MS: f64 = 1.0;
/// Schedule lag at p99 above which a run warns that the client sent late, ms.
pub const LAG_P99_WARN_MS: f64 = 10.0;
/// Read lag at the median above which a run warns that the client read late, ms.
pub const READ_LAG_MEDIAN_WARN_MS: f64 = 1.0;
/// A replay's lateness behind its trace at the median above which it warns, ms.
pub const BEHIND_MEDIAN_WARN_MS: f64 = 10.0;
/// A replay's lateness behind its trace at p99 above which it warns, ms.
pub const BEHIND_P99_WARN_MS: f64 = 100.0;

/// One warning of a run.
#[derive(Debug, Clone)]
pub enum Warning {
    /// The throughput window was configured as 0; 1 s windows were used.
    ZeroWindow,
    /// Completed requests without a prompt token count.
    NoPromptCount {
        /// How many.
        requests: usize,
    },
    /// Completed requests without an output token count.
    NoOutputCount {
        /// How many.
        requests: usize,
    },
    /// The server's usage and the chunk counts disagree on the generated tokens.
    UsageDisagrees {
        /// Tokens by the server's usage.
        usage: u64,
        /// Tokens by the chunks' own counts.
        chunks: u64,
        /// Requests where the two differ.
        requests: usize,
        /// Completed requests.
        completed: u64,
    },
    /// Completed requests with chunks that carry no token count.
    ChunksWithoutCounts {
        /// How many.
        requests: u64,
    },
    /// Every request failed.
    AllFailed,
    /// Requests re-sent once after the server closed an idle kept-alive connection.
    Resent {
        /// How many.
        requests: u64,
    },
    /// Successful streams that ended without `data: [DONE]`.
    NoDone {
        /// Streams without it.
        streams: u64,
        /// Successful streams.
        of: u64,
    },
    /// The server generated more tokens than asked: it ignores the length field sent.
    IgnoresMaxTokens {
        /// Tokens asked in the example.
        asked: u64,
        /// Tokens generated in the example.
        got: u64,
        /// Requests that got more than asked.
        over: u64,
        /// Requests that asked a length.
        of: u64,
        /// Chat completions (whose length field is `max_completion_tokens`).
        chat: bool,
    },
    /// Departures of the server's streams from OpenAI's that were allowed for.
    StreamQuirks {
        /// Each departure in words with the number of streams that had it.
        found: Vec<(&'static str, u64)>,
        /// Successful streams.
        of: u64,
    },
    /// The summary was merged from shards' digests, not their records.
    MergedFromDigests {
        /// Shards merged.
        shards: usize,
        /// The sketches' relative accuracy, percent.
        alpha_pct: f64,
    },
    /// A shard's own warning.
    Shard {
        /// The shard (`2/4`), empty when unknown.
        shard: String,
        /// Its warning.
        warning: Box<Warning>,
    },
    /// Throughput windows counted from a grain boundary before the first send.
    GrainRounded {
        /// Where the windows start, ms on the schedule.
        from_ms: f64,
        /// The first send, ms on the schedule.
        first_send_ms: f64,
        /// The digests' grain, ms.
        grain_ms: f64,
    },
    /// The peak concurrency is known only within bounds.
    PeakConcurrencyBounds {
        /// In flight at once for certain.
        exact: u64,
        /// At most.
        upper: u64,
    },
    /// More requests than kept whole: the summary was folded from them as they came.
    Folded {
        /// Measured requests.
        requests: u64,
        /// Kept whole (`--keep-records`).
        kept: usize,
        /// The sketches' relative accuracy, percent.
        alpha_pct: f64,
    },
    /// A warning of a block of a folded run.
    InPartOfRun(Box<Warning>),
    /// The engine's `/metrics` counters fell during the run.
    EngineRestarted {
        /// When it was seen, s into the run.
        at_s: f64,
    },
    /// The engine's `/metrics` answered again after failing, with no sign of a restart.
    MetricsGap {
        /// When, s into the run.
        at_s: f64,
    },
    /// The engine's `/metrics` did not answer for a span.
    MetricsUnreachable {
        /// Start, s into the run.
        from_s: f64,
        /// End, s into the run.
        to_s: f64,
        /// Why.
        error: String,
    },
    /// The engine counted other generated tokens than the client received.
    TokenCountMismatch {
        /// By the engine's counter.
        engine: f64,
        /// Received by the client.
        client: f64,
    },
    /// Readings of the GPUs' telemetry failed during the run (`--gpu-metrics`).
    GpuScrapesFailed {
        /// Failed readings.
        failed: u64,
        /// Readings taken.
        scrapes: u64,
        /// The first failure's message.
        error: String,
    },
    /// The GPUs' readings hardly moved during the run: the source collects less often than it
    /// is read.
    GpuReadingsStill {
        /// Readings that differed from the one before.
        changes: u64,
        /// The measured window, s.
        window_s: f64,
    },
    /// `--gpus` is not the number of GPUs the telemetry saw.
    GpuCountMismatch {
        /// GPUs as given (`--gpus`).
        declared: u32,
        /// GPUs the telemetry saw.
        seen: u32,
    },
    /// The built-in simulator sent its tokens late by its own log.
    TargetOverloaded {
        /// Late at the median, ms.
        median_ms: f64,
        /// Late at p99, ms.
        p99_ms: f64,
    },
    /// The client sent late (schedule lag).
    SentLate {
        /// At the median, ms.
        median_ms: f64,
        /// At p99, ms.
        p99_ms: f64,
    },
    /// The client read late (read lag).
    ReadLate {
        /// At the median, ms.
        median_ms: f64,
    },
    /// A trace replay fell behind its trace's instants.
    ReplayBehind {
        /// Behind at the median, ms.
        median_ms: f64,
        /// Behind at p99, ms.
        p99_ms: f64,
        /// Client queue time at the median, ms.
        queue_ms: f64,
        /// Schedule lag at the median, ms.
        lag_ms: f64,
    },
    /// A sweep scenario draws its prompts from a file: points at different loads repeat them.
    PromptsRepeat {
        /// The scenario's name.
        scenario: String,
    },
    /// Every point of a sweep sends the same prompts (`--same-prompts`).
    SamePrompts,
    /// The load has a steady level, and the run did not reach it (`crate::load`).
    NoSteadyState {
        /// Why not, with its figures.
        why: crate::load::NotReached,
        /// What the load counts.
        unit: crate::load::Unit,
        /// With a rate, when in flight rose through the run (its mean over the second half of
        /// the load span above `1 + 1.25 ×` that over the first): the rise and the TTFT
        /// drift, ms/s.
        rose: Option<(f64, Option<f64>)>,
    },
    /// A sentence of its own: from a stage above metrics, or read back from a result file.
    Note(String),
}

impl Warning {
    /// The warning of a run whose load had a steady level it did not reach
    /// (`crate::load`); `None` when it reached it or had none by design.
    pub fn no_steady_state(l: &crate::load::LoadSummary) -> Option<Warning> {
        match l.steady {
            crate::load::Steady::NotReached(why) => {
                // The backlog rule of the steady window, over the load span.
                let (first, growth) = (l.in_flight_first_half, l.in_flight_growth);
                let rising = crate::load::backlog(first, first + growth);
                let rose = (l.configured_rate.is_some() && rising)
                    .then_some((l.in_flight_growth, l.ttft_drift_ms_per_s));
                Some(Warning::NoSteadyState { why, unit: l.unit, rose })
            }
            _ => None,
        }
    }

    /// The warning's sentence.
    pub fn sentence(&self) -> String {
        format!("{self}")
    }

    /// Whether the warning's words contain `pat`.
    pub fn contains(&self, pat: &str) -> bool {
        self.sentence().contains(pat)
    }

    /// Whether the warning's words start with `pat`.
    pub fn starts_with(&self, pat: &str) -> bool {
        self.sentence().starts_with(pat)
    }
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Warning::ZeroWindow => f.write_str("window_ns was 0; used 1 s throughput windows"),
            Warning::NoPromptCount { requests } => {
                write!(f, "{requests} completed requests have no prompt token count (counted as 0)")
            }
            Warning::NoOutputCount { requests } => write!(
                f,
                "{requests} completed requests have no output token count (no usage, chunks \
                 not retokenized); counted as 0 and left out of TPOT"
            ),
            Warning::UsageDisagrees { usage, chunks, requests, completed } => write!(
                f,
                "generated tokens: server usage says {usage}, chunk counts sum to {chunks} \
                 (they disagree in {requests} of {completed} requests)"
            ),
            Warning::ChunksWithoutCounts { requests } => write!(
                f,
                "{requests} completed requests have chunks without token counts; ITL and \
                 peak throughput count such a chunk as one token"
            ),
            Warning::AllFailed => {
                f.write_str("all requests failed: check the endpoint and arguments")
            }
            Warning::Resent { requests } => write!(
                f,
                "{requests} requests were sent twice: the server closed an idle kept-alive \
                 connection without answering, and the request was re-sent once on a new \
                 connection (latency counts from the first intended send)"
            ),
            Warning::NoDone { streams, of } => write!(
                f,
                "the server sent no data: [DONE] in {streams} of {of} successful streams; each \
                 ended cleanly after its finish_reason and was counted as complete"
            ),
            Warning::IgnoresMaxTokens { asked, got, over, of, chat } => {
                let field = if *chat { "max_completion_tokens" } else { "max_tokens" };
                let other = if *chat { "max_tokens" } else { "max_completion_tokens" };
                write!(
                    f,
                    "asked {asked}, the server generated {got} (more than asked in {over} of \
                     {of} requests): it ignores {field}; servelab doctor tells which field it \
                     honours, --max-tokens-field {other} sends the other"
                )
            }
            Warning::StreamQuirks { found, of } => {
                let each: Vec<String> =
                    found.iter().map(|(what, n)| format!("{what} in {n} of {of}")).collect();
                write!(f, "the server's streams had {}", each.join("; "))
            }
            Warning::MergedFromDigests { shards, alpha_pct } => write!(
                f,
                "merged from {shards} shards' digests, not their records: percentiles and \
                 medians within {alpha_pct}% of the exact values; counts, throughput, goodput, \
                 means, standard deviations and extremes exact; the simulator's truth not \
                 included"
            ),
            Warning::Shard { shard, warning } => write!(f, "shard {shard}: {warning}"),
            Warning::GrainRounded { from_ms, first_send_ms, grain_ms } => write!(
                f,
                "throughput windows counted from {from_ms:.1} ms on the schedule, the first \
                 send ({first_send_ms:.3} ms) rounded down to the digests' {grain_ms:.0} ms \
                 grains: peak output throughput may differ slightly from summarizing the records"
            ),
            Warning::PeakConcurrencyBounds { exact, upper } => write!(
                f,
                "peak concurrency: {exact} requests were in flight at once for certain; from \
                 the digests the peak is between {exact} and {upper}"
            ),
            Warning::Folded { requests, kept, alpha_pct } => write!(
                f,
                "{requests} measured requests, more than the {kept} kept whole \
                 (--keep-records): the summary was folded from them as they came, percentiles \
                 and medians within {alpha_pct}% of the exact values; counts, throughput, \
                 goodput, means, standard deviations and extremes exact; per-request records \
                 are in the store and the --save-detailed file, not in the result JSON"
            ),
            Warning::InPartOfRun(w) => write!(f, "in part of the run: {w}"),
            Warning::EngineRestarted { at_s } => write!(
                f,
                "the engine restarted during the run: its /metrics counters fell, seen at \
                 {at_s:.2} s (requests in flight then failed; see failures)"
            ),
            Warning::MetricsGap { at_s } => write!(
                f,
                "the engine's /metrics answered again at {at_s:.2} s after failing, and nothing \
                 tells whether it restarted meanwhile (it exports no process_start_time_seconds \
                 and no counter fell): its counted figures are left out rather than summed \
                 across the gap"
            ),
            Warning::MetricsUnreachable { from_s, to_s, error } => write!(
                f,
                "the engine's /metrics did not answer from {from_s:.2} s to {to_s:.2} s: {error}"
            ),
            Warning::TokenCountMismatch { engine, client } => write!(
                f,
                "the engine counted {engine:.0} generated tokens during the run, the client \
                 received {client:.0}: other traffic on the server, or a miscount"
            ),
            Warning::GpuScrapesFailed { failed, scrapes, error } => write!(
                f,
                "{failed} of {scrapes} readings of the GPUs' telemetry failed (first: {error}): \
                 the energy is interpolated across the gaps"
            ),
            Warning::GpuReadingsStill { changes, window_s } => write!(
                f,
                "the GPUs' power and energy readings changed {changes} times in the \
                 {window_s:.1} s measured window (at least 5 needed), so the energy figures \
                 are coarse: run longer, read more often (--gpu-metrics-interval), or have the \
                 source collect more often (dcgm-exporter collects every 30 s unless started \
                 with -c 1000, or DCGM_EXPORTER_INTERVAL=1000)"
            ),
            Warning::GpuCountMismatch { declared, seen } => write!(
                f,
                "--gpus says {declared} GPUs, the GPU telemetry saw {seen}: the cost counts \
                 {declared} and the energy the {seen} seen; check which GPUs serve the \
                 deployment"
            ),
            Warning::TargetOverloaded { median_ms, p99_ms } => write!(
                f,
                "the target was overloaded: it sent its tokens late by {median_ms:.2} ms at \
                 the median and {p99_ms:.2} ms at p99 (its own log). The latencies are true \
                 for the server as it ran, but not what it was set to do; give it more CPU or \
                 less load"
            ),
            Warning::SentLate { median_ms, p99_ms } => write!(
                f,
                "servelab sent late: schedule lag {median_ms:.2} ms at the median, {p99_ms:.2} \
                 ms at p99 (warn above {LAG_MEDIAN_WARN_MS} / {LAG_P99_WARN_MS} ms). Every \
                 latency counts from the intended send, so this lag is in them; this host \
                 cannot issue the load as planned. Lower the rate or concurrency here, or split \
                 the run across hosts"
            ),
            Warning::ReadLate { median_ms } => write!(
                f,
                "servelab read late: bytes waited {median_ms:.2} ms at the median (per request, \
                 longest wait) before the client handled them (warn above \
                 {READ_LAG_MEDIAN_WARN_MS} ms); token times are that much late. The client \
                 host is overloaded"
            ),
            Warning::ReplayBehind { median_ms, p99_ms, queue_ms, lag_ms } => {
                let cause = if queue_ms >= lag_ms {
                    "most of it waiting for a free --max-concurrency slot: raise \
                     --max-concurrency, or replay slower (--trace-speedup below 1)"
                } else {
                    "most of it the client's own lateness: this host cannot issue the trace's \
                     load; replay slower (--trace-speedup below 1) or split the run across hosts"
                };
                write!(
                    f,
                    "the replay fell behind the trace: requests were sent {median_ms:.2} ms \
                     after their trace instants at the median and {p99_ms:.2} ms at p99 (warn \
                     above {BEHIND_MEDIAN_WARN_MS} / {BEHIND_P99_WARN_MS} ms; client queue \
                     {queue_ms:.2} ms and schedule lag {lag_ms:.2} ms at the median), {cause}. \
                     The server saw a slower, smoother load than the trace's"
                )
            }
            Warning::PromptsRepeat { scenario } => write!(
                f,
                "scenario '{scenario}' draws its prompts from a file, so points at different \
                 loads repeat prompts: with a prefix cache on the server, repeats are answered \
                 faster and later points can look better than they are"
            ),
            Warning::SamePrompts => f.write_str(
                "every point sends the same prompts (--same-prompts): a server with a prefix \
                 cache answers repeated prompts faster, so later points can look better than they \
                 are",
            ),
            Warning::NoSteadyState { why, unit, rose } => {
                use crate::load::{NotReached, MIN_STEADY_FRACTION, MIN_STEADY_REQUESTS};
                let unit = unit.noun();
                f.write_str("no steady state: ")?;
                match why {
                    NotReached::LevelNotReached { level, peak } => write!(
                        f,
                        "{unit} in flight never reached the target level of {level} (at most \
                         {peak}), so every figure is of the ramp-up and the drain"
                    )?,
                    NotReached::TooShort { requests, fraction } => write!(
                        f,
                        "the steady window held {requests} requests whole over {:.0}% of the \
                         run (at least {MIN_STEADY_REQUESTS} and {:.0}% needed), so the figures \
                         are mostly the warm-up's and the drain's",
                        fraction * 100.0,
                        MIN_STEADY_FRACTION * 100.0
                    )?,
                    NotReached::Backlog { first_half, second_half } => write!(
                        f,
                        "{unit} in flight kept rising through the steady window (mean \
                         {first_half:.1} over its first half, {second_half:.1} over its second)"
                    )?,
                }
                match rose {
                    Some((growth, drift)) => {
                        let drift =
                            drift.map(|d| format!(", TTFT drift {d:.1} ms/s")).unwrap_or_default();
                        write!(
                            f,
                            ". In flight rose by {growth:.1} {unit} from the first half of the \
                             sends to the second{drift}: the server fell behind the rate, so \
                             latencies grow with the run's length; lower --request-rate or cap it \
                             with --max-concurrency"
                        )
                    }
                    None => f.write_str(
                        "; send more requests (--num-prompts) or run longer (--duration)",
                    ),
                }
            }
            Warning::Note(text) => f.write_str(text),
        }
    }
}

/// Two warnings are the same when they say the same (a warning read back from a file is its
/// sentence).
impl PartialEq for Warning {
    fn eq(&self, other: &Warning) -> bool {
        self.sentence() == other.sentence()
    }
}

/// A warning equals the sentence it says.
impl PartialEq<str> for Warning {
    fn eq(&self, other: &str) -> bool {
        self.sentence() == other
    }
}

impl PartialEq<&str> for Warning {
    fn eq(&self, other: &&str) -> bool {
        self.sentence() == *other
    }
}

impl PartialEq<String> for Warning {
    fn eq(&self, other: &String) -> bool {
        self.sentence() == *other
    }
}

impl From<String> for Warning {
    fn from(text: String) -> Warning {
        Warning::Note(text)
    }
}

impl From<&str> for Warning {
    fn from(text: &str) -> Warning {
        Warning::Note(text.to_string())
    }
}

impl Serialize for Warning {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Warning {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Warning, D::Error> {
        String::deserialize(d).map(Warning::Note)
    }
}

/// A run's warnings in the order they were found. Anything that converts to a [`Warning`]
/// (a sentence becomes a [`Warning::Note`]) can be pushed or extended in.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Warnings(Vec<Warning>);

impl Warnings {
    /// No warnings.
    pub fn new() -> Warnings {
        Warnings(Vec::new())
    }

    /// Adds `w` at the end.
    pub fn push(&mut self, w: impl Into<Warning>) {
        self.0.push(w.into());
    }

    /// Adds `w` at `index`.
    pub fn insert(&mut self, index: usize, w: impl Into<Warning>) {
        self.0.insert(index, w.into());
    }

    /// The warnings, in order.
    pub fn iter(&self) -> std::slice::Iter<'_, Warning> {
        self.0.iter()
    }

    /// How many.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The last one.
    pub fn last(&self) -> Option<&Warning> {
        self.0.last()
    }

    /// Whether one of them says the same as `w`.
    pub fn contains(&self, w: &Warning) -> bool {
        self.0.contains(w)
    }

    /// Keeps only the warnings `keep` says yes to.
    pub fn retain(&mut self, keep: impl FnMut(&Warning) -> bool) {
        self.0.retain(keep);
    }
}

impl<T: Into<Warning>> Extend<T> for Warnings {
    fn extend<I: IntoIterator<Item = T>>(&mut self, iter: I) {
        self.0.extend(iter.into_iter().map(Into::into));
    }
}

impl<T: Into<Warning>> FromIterator<T> for Warnings {
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Warnings {
        Warnings(iter.into_iter().map(Into::into).collect())
    }
}

impl From<Vec<Warning>> for Warnings {
    fn from(v: Vec<Warning>) -> Warnings {
        Warnings(v)
    }
}

impl std::ops::Index<usize> for Warnings {
    type Output = Warning;

    fn index(&self, i: usize) -> &Warning {
        &self.0[i]
    }
}

impl<'a> IntoIterator for &'a Warnings {
    type Item = &'a Warning;
    type IntoIter = std::slice::Iter<'a, Warning>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

impl IntoIterator for Warnings {
    type Item = Warning;
    type IntoIter = std::vec::IntoIter<Warning>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warnings_serialize_to_their_sentences_and_read_back_as_notes() {
        let mut w = Warnings::new();
        w.push(Warning::AllFailed);
        w.push(Warning::Shard {
            shard: "1/2".into(),
            warning: Box::new(Warning::NoPromptCount { requests: 3 }),
        });
        w.push("a sentence of the conductor's".to_string());
        let json = serde_json::to_string(&w).unwrap();
        assert_eq!(
            json,
            "[\"all requests failed: check the endpoint and arguments\",\"shard 1/2: 3 \
             completed requests have no prompt token count (counted as 0)\",\"a sentence of \
             the conductor's\"]"
        );
        let back: Warnings = serde_json::from_str(&json).unwrap();
        assert_eq!(back, w);
        assert!(matches!(back[0], Warning::Note(_)));
        assert!(back[1].starts_with("shard 1/2: 3 completed"));
    }
}
