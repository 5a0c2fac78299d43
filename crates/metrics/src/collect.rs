//! Mergeable collection of per-request samples, and the final reduction to a [`Summary`].
//!
//! A [`Collector`] only appends; [`Collector::merge`] concatenates in order, so workers can
//! each collect their share and the results merge associatively into exactly what one
//! collector fed every record in the same order would hold.

use std::collections::BTreeMap;

use servelab_records::{FailureKind, Nanos, Outcome, RequestRecord, RunInfo};

use crate::request::{self, RequestRow};
use crate::server::{self, ServerSample};
use crate::stats::Distribution;
use crate::summary::{FailureGroup, Summary};
use crate::timeline;
use crate::warning::{Warning, Warnings};
use crate::MetricsConfig;

/// Distinct messages kept per failure kind.
pub const MAX_MESSAGES: usize = 3;
/// Longest failure message kept, in characters.
pub const MAX_MESSAGE_CHARS: usize = 300;

/// Count and first distinct messages of one failure kind.
#[derive(Debug, Clone, Default, PartialEq)]
struct FailureAcc {
    count: u64,
    messages: Vec<String>,
}

impl FailureAcc {
    fn push(&mut self, message: String) {
        if self.messages.len() < MAX_MESSAGES && !self.messages.contains(&message) {
            self.messages.push(message);
        }
    }
}

/// Per-request samples of a run, before reduction.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Collector {
    rows: Vec<RequestRow>,
    /// Per-token ITL samples of completed requests, ms, tagged with the request index so the
    /// reduction sees them in request order whatever the merge order.
    itl_token_ms: Vec<(u64, f64)>,
    /// (arrival, tokens) of completed requests' chunks.
    token_events: Vec<(Nanos, u64)>,
    /// `[sent, end)` of every measured request that ended.
    intervals: Vec<(Nanos, Nanos)>,
    first_intended: Option<Nanos>,
    last_end: Option<Nanos>,
    failures: BTreeMap<FailureKind, FailureAcc>,
    /// Completed requests with at least one chunk of unknown token count.
    unknown_chunk_counts: u64,
    /// Completed requests that carried the engine's own timings.
    server: Vec<ServerSample>,
    /// Re-sends after the server closed an idle kept-alive connection unanswered.
    retries: u64,
    /// What the server's streams did, and whether it generated what was asked.
    conduct: crate::conduct::Conduct,
}

fn min_opt(a: Option<Nanos>, b: Option<Nanos>) -> Option<Nanos> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, None) => x,
        (None, y) => y,
    }
}

fn max_opt(a: Option<Nanos>, b: Option<Nanos>) -> Option<Nanos> {
    a.max(b)
}

fn cut(message: &str) -> String {
    message.chars().take(MAX_MESSAGE_CHARS).collect()
}

impl Collector {
    /// An empty collector.
    pub fn new() -> Collector {
        Collector::default()
    }

    /// Adds one record; warm-ups are ignored.
    pub fn add(&mut self, r: &RequestRecord) {
        if r.warmup {
            return;
        }
        self.retries += u64::from(r.retries);
        self.conduct.add(r);
        self.first_intended = min_opt(self.first_intended, Some(r.intended_ns));
        self.last_end = max_opt(self.last_end, r.end_ns);
        if let Some(end) = r.end_ns {
            self.intervals.push((r.sent_ns, end));
        }
        match &r.outcome {
            Outcome::Success => {
                self.itl_token_ms
                    .extend(request::itl_per_token_ms(r).into_iter().map(|v| (r.index, v)));
                let (events, unknown) = request::token_events(r);
                self.token_events.extend(events);
                self.unknown_chunk_counts += u64::from(unknown);
            }
            Outcome::Failure { kind, message } => {
                let acc = self.failures.entry(*kind).or_default();
                acc.count += 1;
                acc.push(cut(message));
            }
        }
        let row = request::row(r);
        if r.is_success() {
            self.server.extend(server::sample(r, row.ttft_ms));
        }
        self.rows.push(row);
    }

    /// Collects every record of a slice.
    pub fn from_records(records: &[RequestRecord]) -> Collector {
        let mut c = Collector::new();
        for r in records {
            c.add(r);
        }
        c
    }

    /// Appends `other`'s samples after `self`'s.
    pub fn merge(mut self, other: Collector) -> Collector {
        self.rows.extend(other.rows);
        self.itl_token_ms.extend(other.itl_token_ms);
        self.token_events.extend(other.token_events);
        self.intervals.extend(other.intervals);
        self.first_intended = min_opt(self.first_intended, other.first_intended);
        self.last_end = max_opt(self.last_end, other.last_end);
        for (kind, acc) in other.failures {
            let mine = self.failures.entry(kind).or_default();
            mine.count += acc.count;
            for m in acc.messages {
                mine.push(m);
            }
        }
        self.unknown_chunk_counts += other.unknown_chunk_counts;
        self.server.extend(other.server);
        self.retries += other.retries;
        self.conduct = self.conduct.merge(other.conduct);
        self
    }

    /// Number of measured requests collected.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// True when no measured request has been collected.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Reduces the samples to a [`Summary`].
    pub fn finish(self, info: &RunInfo, cfg: &MetricsConfig) -> Summary {
        let Collector {
            mut rows,
            mut itl_token_ms,
            token_events,
            intervals,
            first_intended,
            last_end,
            failures,
            unknown_chunk_counts,
            server,
            retries,
            conduct,
        } = self;
        rows.sort_by_key(|r| r.index);
        itl_token_ms.sort_by_key(|(index, _)| *index);
        let pct = &cfg.percentiles;
        let mut warnings = Warnings::new();

        let window_ns = if cfg.window_ns == 0 {
            warnings.push(Warning::ZeroWindow);
            crate::DEFAULT_WINDOW_NS
        } else {
            cfg.window_ns
        };
        let origin = first_intended.unwrap_or(0);
        let duration_ns = last_end.map_or(0, |end| end.saturating_sub(origin));
        let duration_s = duration_ns as f64 / 1e9;
        let per_s = |x: f64| if duration_s > 0.0 { x / duration_s } else { 0.0 };

        let ok: Vec<&RequestRow> = rows.iter().filter(|r| r.is_success()).collect();
        let completed = ok.len() as u64;
        let failed = rows.len() as u64 - completed;
        // Saturating sums: counts come from the server's usage objects.
        let sat = |acc: u64, x: u64| acc.saturating_add(x);
        let total_input = ok.iter().filter_map(|r| r.prompt_tokens).fold(0, sat);
        let total_output = ok.iter().filter_map(|r| r.output_tokens).fold(0, sat);
        let retokenized =
            ok.iter().try_fold(0u64, |acc, r| r.retokenized_tokens.map(|t| sat(acc, t)));

        let missing_input = ok.iter().filter(|r| r.prompt_tokens.is_none()).count();
        if missing_input > 0 {
            warnings.push(Warning::NoPromptCount { requests: missing_input });
        }
        let missing_output = ok.iter().filter(|r| r.output_tokens.is_none()).count();
        if missing_output > 0 {
            warnings.push(Warning::NoOutputCount { requests: missing_output });
        }
        if let Some(retok) = retokenized {
            if retok != total_output {
                let disagree = ok
                    .iter()
                    .filter(|r| r.retokenized_tokens.is_some_and(|t| Some(t) != r.output_tokens))
                    .count();
                warnings.push(Warning::UsageDisagrees {
                    usage: total_output,
                    chunks: retok,
                    requests: disagree,
                    completed,
                });
            }
        }
        if unknown_chunk_counts > 0 {
            warnings.push(Warning::ChunksWithoutCounts { requests: unknown_chunk_counts });
        }
        warnings.extend(conduct.warnings(info.backend == "openai-chat"));
        if completed == 0 && !rows.is_empty() && !info.interrupted {
            warnings.push(Warning::AllFailed);
        }
        if retries > 0 {
            warnings.push(Warning::Resent { requests: retries });
        }

        let dist = |f: &dyn Fn(&RequestRow) -> Option<f64>, rows: &[&RequestRow]| {
            Distribution::from_unsorted(rows.iter().filter_map(|r| f(r)).collect(), pct)
        };
        let ttfc_ms = if ok.iter().any(|r| r.ttfc_ms.is_some()) {
            Some(dist(&|r| r.ttfc_ms, &ok))
        } else {
            None
        };
        let all: Vec<&RequestRow> = rows.iter().collect();
        let itl_chunk: Vec<f64> = ok.iter().flat_map(|r| r.itl_chunk_ms.iter().copied()).collect();

        let request_goodput =
            cfg.goodput.map(|slo| per_s(ok.iter().filter(|r| slo.met_by(r)).count() as f64));

        let windows = timeline::tokens_per_window(&token_events, origin, window_ns);
        let best = windows.iter().copied().max().unwrap_or(0);

        let load = crate::load::summarize(
            &rows,
            crate::load::Events { tokens: &token_events, itl_ms: &itl_token_ms },
            info,
            pct,
        );
        if let Some(w) = load.as_ref().and_then(Warning::no_steady_state) {
            warnings.push(w);
        }
        let mut summary = Summary {
            info: info.clone(),
            percentiles: pct.clone(),
            slo: cfg.goodput,
            window_ns,
            completed,
            failed,
            duration_s,
            total_input_tokens: total_input,
            total_output_tokens: total_output,
            retokenized_output_tokens: retokenized,
            request_throughput: per_s(completed as f64),
            request_goodput,
            input_throughput: per_s(total_input as f64),
            output_throughput: per_s(total_output as f64),
            total_token_throughput: per_s(total_input.saturating_add(total_output) as f64),
            peak_output_throughput: best as f64 / (window_ns as f64 / 1e9),
            output_tokens_per_window: windows,
            peak_concurrency: timeline::peak_concurrency(&intervals),
            mean_concurrency: timeline::mean_concurrency(&intervals, duration_ns),
            ttft_ms: dist(&|r| r.ttft_ms, &ok),
            tpot_ms: dist(&|r| r.tpot_ms, &ok),
            itl_ms: Distribution::from_unsorted(
                itl_token_ms.iter().map(|(_, v)| *v).collect(),
                pct,
            ),
            itl_chunk_ms: Distribution::from_unsorted(itl_chunk, pct),
            e2el_ms: dist(&|r| r.e2el_ms, &ok),
            ttfc_ms,
            schedule_lag_ms: dist(&|r| Some(r.schedule_lag_ms), &all),
            client_queue_ms: dist(&|r| Some(r.client_queue_ms), &all),
            read_lag_ms: all
                .iter()
                .any(|r| r.read_lag_ms.is_some())
                .then(|| dist(&|r| r.read_lag_ms, &all)),
            server: server::split(server, pct),
            engine: None,
            failures: FailureKind::ALL
                .iter()
                .filter_map(|k| {
                    failures.get(k).map(|a| FailureGroup {
                        kind: *k,
                        count: a.count,
                        messages: a.messages.clone(),
                    })
                })
                .collect(),
            retries,
            truth: None,
            sessions: crate::sessions::summarize(&rows, pct),
            replay: None,
            reasoning: crate::reasoning::summarize(
                ok.iter().filter_map(|r| r.reasoning.as_ref()),
                pct,
            ),
            gpu: None,
            load,
            warnings,
            requests: rows,
        };
        let late = crate::truth::overload_warnings(&summary);
        summary.warnings.extend(late);
        summary
    }
}
