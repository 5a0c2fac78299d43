//! A shard's digest: what it ships instead of its records when they are too many to move,
//! and the merge of the digests into the whole run's [`Summary`].
//!
//! What merges exactly: counts, token totals, goodput, failures and retries add; the global
//! span is the earliest first intended send to the latest end; mean concurrency is the
//! shards' summed busy time over that span; distributions keep their exact count, mean,
//! standard deviation and extremes. What is approximate, and by how much:
//! - the median and percentiles come from DDSketches, each within relative error `α` of the
//!   exact rank-`⌊q(n − 1)⌋` value of the union ([`crate::sketch`]);
//! - output tokens are counted per grain (a tenth of the throughput window) on the shared
//!   schedule axis, so the windows are exact when the first send falls on a grain boundary
//!   (it does when the schedule's first arrival is at 0, as arrival processes' are), and the
//!   merge says so otherwise;
//! - peak concurrency is not additive: each shard ships its in-flight count at every grain
//!   boundary (which sum to the run's exact count at those instants) and its most within each
//!   grain (which sum to an upper bound), so the merge reports the largest exact count seen
//!   and says how high the peak can be when the two differ.
//!
//! A multi-turn run's session figures and a trace replay's lateness against its trace merge
//! as the distributions do (every session is whole in one shard, so its counts add; every
//! shard reads the whole trace, so its row counts are the run's). The engine's `/metrics`
//! figures are those of the shard that ended last, as in the records' merge. The built-in
//! simulator's truth is in neither merge: it is its account of one shard's requests.

use serde::{Deserialize, Serialize};
use servelab_records::{Nanos, RequestRecord, RunInfo};

use crate::gpu::GpuSummary;
use crate::merge::{engine_of_last, join, MergeError, MergeOptions};
use crate::sessions::SessionDigest;
use crate::sketch::{DdSketch, RunSketch, SketchError};
use crate::summary::{FailureGroup, Summary};
use crate::timeline;
use crate::warning::{Warning, Warnings};
use crate::MetricsConfig;
use crate::{EngineMetrics, TraceRows};

/// The digest format this build writes and reads.
pub const DIGEST_FORMAT: u32 = 2;

/// Grains per throughput window.
const GRAINS_PER_WINDOW: u64 = 10;

/// What one shard ships instead of its records: its counts, a few time series on the shared
/// schedule axis, and a sketch of each distribution (a few kB to tens of kB).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShardDigest {
    /// [`DIGEST_FORMAT`] when written.
    pub format: u32,
    /// How the shard was driven (with [`RunInfo::shard`] set).
    pub info: RunInfo,
    /// The settings it was summarized with.
    pub metrics: MetricsConfig,
    /// Measured requests that succeeded.
    pub completed: u64,
    /// Measured requests that failed.
    pub failed: u64,
    /// Prompt tokens of completed requests.
    pub total_input_tokens: u64,
    /// Output tokens of completed requests.
    pub total_output_tokens: u64,
    /// Sum of per-chunk token counts of completed requests, when all are known.
    pub retokenized_output_tokens: Option<u64>,
    /// Completed requests meeting every goodput objective (`None` without objectives).
    pub good: Option<u64>,
    /// Requests re-sent once after the server closed an idle connection unanswered.
    pub retries: u64,
    /// Failed requests by kind.
    pub failures: Vec<FailureGroup>,
    /// The shard's own warnings.
    pub warnings: Warnings,
    /// Earliest intended send of a measured request, on the shared schedule axis.
    pub first_intended_ns: Option<Nanos>,
    /// Latest end of a measured request, on the same axis.
    pub last_end_ns: Option<Nanos>,
    /// Summed `[sent, end)` lengths of measured requests that ended.
    pub busy_ns: u64,
    /// Width of the grains below (a tenth of the throughput window when it divides by 10).
    pub grain_ns: u64,
    /// Output tokens of completed requests per grain `[k·g, (k+1)·g)` from the axis' 0.
    pub tokens_per_grain: Vec<u64>,
    /// Requests in flight at each instant `k·g`.
    pub concurrency_at_grain: Vec<u64>,
    /// The most requests in flight at any instant within each grain.
    pub concurrency_max_per_grain: Vec<u64>,
    /// The shard's own peak concurrency (exact).
    pub peak_concurrency: u64,
    /// The distributions' sketches.
    pub sketches: RunSketch,
    /// A multi-turn run's session figures, in mergeable form.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sessions: Option<SessionDigest>,
    /// A trace replay's rows (the run's: every shard reads the whole trace) and a sketch of
    /// how far behind its trace instant each request was sent, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay: Option<(TraceRows, DdSketch)>,
    /// What the engine's `/metrics` said over the shard's run, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<EngineMetrics>,
    /// Its GPU energy and cost (with each GPU's readings), when it had them: merged by
    /// [`crate::gpu::merge`], each GPU counted once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<GpuSummary>,
}

impl ShardDigest {
    /// The digest of a shard's `records` (warm-ups left out), summarized as `summary`, with
    /// sketches of relative accuracy `alpha`.
    pub fn new(
        summary: &Summary,
        records: &[RequestRecord],
        alpha: f64,
    ) -> Result<ShardDigest, SketchError> {
        let measured: Vec<&RequestRecord> = records.iter().filter(|r| !r.warmup).collect();
        let cfg = summary.metrics_config();
        let grain_ns = grain(summary.window_ns);
        let intervals: Vec<(Nanos, Nanos)> =
            measured.iter().filter_map(|r| Some((r.sent_ns, r.end_ns?))).collect();
        let events: Vec<(Nanos, u64)> = measured
            .iter()
            .filter(|r| r.is_success())
            .flat_map(|r| crate::request::token_events(r).0)
            .collect();
        let (at, most) = timeline::concurrency_per_grain(&intervals, grain_ns);
        let good = cfg.goodput.map(|slo| {
            summary.requests.iter().filter(|r| r.is_success() && slo.met_by(r)).count() as u64
        });
        Ok(ShardDigest {
            format: DIGEST_FORMAT,
            info: summary.info.clone(),
            metrics: cfg,
            completed: summary.completed,
            failed: summary.failed,
            total_input_tokens: summary.total_input_tokens,
            total_output_tokens: summary.total_output_tokens,
            retokenized_output_tokens: summary.retokenized_output_tokens,
            good,
            retries: summary.retries,
            failures: summary.failures.clone(),
            warnings: summary.warnings.clone(),
            first_intended_ns: measured.iter().map(|r| r.intended_ns).min(),
            last_end_ns: measured.iter().filter_map(|r| r.end_ns).max(),
            busy_ns: u64::try_from(timeline::busy_ns(&intervals)).unwrap_or(u64::MAX),
            grain_ns,
            tokens_per_grain: timeline::tokens_per_window(&events, 0, grain_ns),
            concurrency_at_grain: at,
            concurrency_max_per_grain: most,
            peak_concurrency: timeline::peak_concurrency(&intervals),
            sketches: RunSketch::from_records(records, alpha)?,
            sessions: SessionDigest::of(&summary.requests, alpha)?,
            replay: match &summary.replay {
                Some(r) => {
                    let mut behind = DdSketch::new(alpha)?;
                    summary.requests.iter().for_each(|q| behind.add(crate::replay::behind_ms(q)));
                    Some((r.rows, behind))
                }
                None => None,
            },
            engine: summary.engine.clone(),
            gpu: summary.gpu.clone(),
        })
    }
}

/// The grain for windows of `window_ns`: a tenth of it when it divides evenly, else itself.
fn grain(window_ns: u64) -> u64 {
    let w = window_ns.max(1);
    if w % GRAINS_PER_WINDOW == 0 {
        w / GRAINS_PER_WINDOW
    } else {
        w
    }
}

/// Element-wise sum of series of different lengths.
fn add_series(acc: &mut Vec<u64>, other: &[u64]) {
    if acc.len() < other.len() {
        acc.resize(other.len(), 0);
    }
    for (a, b) in acc.iter_mut().zip(other) {
        *a = a.saturating_add(*b);
    }
}

/// Grains regrouped into windows of `per` grains starting at grain `first`, up to the last
/// window holding a token.
fn windows_from_grains(grains: &[u64], first: usize, per: usize) -> Vec<u64> {
    let tail = grains.get(first..).unwrap_or(&[]);
    let mut windows: Vec<u64> =
        tail.chunks(per.max(1)).map(|c| c.iter().fold(0u64, |a, b| a.saturating_add(*b))).collect();
    while windows.last() == Some(&0) {
        windows.pop();
    }
    windows
}

/// The figures a digest merge reports exactly as the merge of the records does: compare
/// `ExactFigures::of` both summaries to check it.
#[derive(Debug, Clone, PartialEq)]
pub struct ExactFigures {
    /// Completed and failed requests.
    pub requests: (u64, u64),
    /// Prompt and output tokens, and the retokenized output count.
    pub tokens: (u64, u64, Option<u64>),
    /// The global span, seconds.
    pub duration_s: f64,
    /// Request, output and total token throughput, and goodput.
    pub throughput: (f64, f64, f64, Option<f64>),
    /// Output tokens per window and the peak window's rate.
    pub windows: (Vec<u64>, f64),
}

impl ExactFigures {
    /// `s`'s exact figures.
    pub fn of(s: &Summary) -> ExactFigures {
        ExactFigures {
            requests: (s.completed, s.failed),
            tokens: (s.total_input_tokens, s.total_output_tokens, s.retokenized_output_tokens),
            duration_s: s.duration_s,
            throughput: (
                s.request_throughput,
                s.output_throughput,
                s.total_token_throughput,
                s.request_goodput,
            ),
            windows: (s.output_tokens_per_window.clone(), s.peak_output_throughput),
        }
    }
}

/// Why digests cannot be merged.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DigestError {
    /// The shards are not parts of one run, or their clocks disagree.
    #[error(transparent)]
    Merge(#[from] MergeError),
    /// Sketches of different accuracy.
    #[error(transparent)]
    Sketch(#[from] SketchError),
    /// A digest of another format or of different grains.
    #[error("{0}")]
    Format(String),
}

/// The whole run's summary from its shards' digests, checked as [`crate::merge::merge_shards`]
/// checks shards; `percentiles` overrides the shards' own list. See the module documentation
/// for what is exact and what is within a stated error.
pub fn merge_digests(
    digests: &[ShardDigest],
    opts: MergeOptions,
    percentiles: Option<&[f64]>,
) -> Result<Summary, DigestError> {
    for d in digests {
        if d.format != DIGEST_FORMAT {
            return Err(DigestError::Format(format!(
                "a digest of format {} (this servelab reads format {DIGEST_FORMAT}): run the \
                 shards and the merge with one servelab version",
                d.format
            )));
        }
    }
    let parts: Vec<(&RunInfo, &MetricsConfig)> =
        digests.iter().map(|d| (&d.info, &d.metrics)).collect();
    let (info, notes) = join(&parts, opts)?;
    let first = &digests[0];
    if let Some(d) = digests.iter().find(|d| d.grain_ns != first.grain_ns) {
        return Err(DigestError::Format(format!(
            "digests counted in grains of {} and {} ns: not one run's",
            first.grain_ns, d.grain_ns
        )));
    }
    let mut all = first.clone();
    for d in &digests[1..] {
        all.absorb(d)?;
    }
    let alpha_pct = all.sketches.ttft_ms.alpha() * 100.0;
    let mut warnings = vec![Warning::MergedFromDigests { shards: digests.len(), alpha_pct }];
    warnings.extend(notes.into_iter().map(Warning::Note));
    for d in digests {
        let k = d.info.shard.as_ref().map(|s| s.shard.to_string()).unwrap_or_default();
        let shard = |w: &Warning| Warning::Shard { shard: k.clone(), warning: Box::new(w.clone()) };
        warnings.extend(d.warnings.iter().map(shard));
    }
    let mut summary = all.summary(info, percentiles, warnings);
    let gpu: Vec<(u32, &GpuSummary)> = digests
        .iter()
        .filter_map(|d| Some((d.info.shard.as_ref().map_or(0, |s| s.shard.index), d.gpu.as_ref()?)))
        .collect();
    let start = all.first_intended_ns.unwrap_or(0) as f64 / 1e9;
    let window = (start, start + summary.duration_s);
    crate::gpu::attach_merged(&mut summary, &gpu, window);
    Ok(summary)
}

impl ShardDigest {
    /// Add the requests `other` counted to this digest, as if one digest had counted both
    /// (see the module documentation for what stays exact). `other` must count in the same
    /// grains with sketches of the same accuracy. The warnings stay this digest's: how to
    /// name another's is the caller's choice.
    pub fn absorb(&mut self, other: &ShardDigest) -> Result<(), DigestError> {
        if other.grain_ns != self.grain_ns {
            return Err(DigestError::Format(format!(
                "digests counted in grains of {} and {} ns: not one run's",
                self.grain_ns, other.grain_ns
            )));
        }
        self.sketches.merge(&other.sketches)?;
        // A shard that started no session has none to add.
        match (&mut self.sessions, &other.sessions) {
            (Some(all), Some(s)) => all.merge(s)?,
            (None, Some(s)) => self.sessions = Some(s.clone()),
            _ => {}
        }
        match (&mut self.replay, &other.replay) {
            (Some((_, all)), Some((_, behind))) => all.merge(behind)?,
            (None, Some(r)) => self.replay = Some(r.clone()),
            _ => {}
        }
        let add = |a: &mut u64, b: u64| *a = a.saturating_add(b);
        add(&mut self.completed, other.completed);
        add(&mut self.failed, other.failed);
        add(&mut self.total_input_tokens, other.total_input_tokens);
        add(&mut self.total_output_tokens, other.total_output_tokens);
        add(&mut self.retries, other.retries);
        add(&mut self.busy_ns, other.busy_ns);
        // Known only when known on both sides.
        let both = |a: Option<u64>, b: Option<u64>| Some(a?.saturating_add(b?));
        self.retokenized_output_tokens =
            both(self.retokenized_output_tokens, other.retokenized_output_tokens);
        self.good = both(self.good, other.good);
        for f in &other.failures {
            match self.failures.iter_mut().find(|g| g.kind == f.kind) {
                Some(g) => {
                    g.count += f.count;
                    for m in &f.messages {
                        if g.messages.len() < crate::MAX_MESSAGES && !g.messages.contains(m) {
                            g.messages.push(m.clone());
                        }
                    }
                }
                None => self.failures.push(f.clone()),
            }
        }
        self.failures
            .sort_by_key(|f| servelab_records::FailureKind::ALL.iter().position(|k| *k == f.kind));
        self.engine = engine_of_last([
            (self.last_end_ns, self.engine.as_ref()),
            (other.last_end_ns, other.engine.as_ref()),
        ]);
        self.first_intended_ns = match (self.first_intended_ns, other.first_intended_ns) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.last_end_ns = self.last_end_ns.max(other.last_end_ns);
        add_series(&mut self.tokens_per_grain, &other.tokens_per_grain);
        add_series(&mut self.concurrency_at_grain, &other.concurrency_at_grain);
        add_series(&mut self.concurrency_max_per_grain, &other.concurrency_max_per_grain);
        // Each side's exact peak is a floor of the union's; the series above bound it.
        self.peak_concurrency = self.peak_concurrency.max(other.peak_concurrency);
        Ok(())
    }

    /// Output tokens per throughput window, from the grains of the window that holds the
    /// first send on (a first send between grains is said in `warnings`).
    fn windows(&self, origin: u64, warnings: &mut Warnings) -> Vec<u64> {
        let g = self.grain_ns.max(1);
        let window_ns = self.metrics.window_ns.max(1);
        let first_grain = usize::try_from(origin / g).unwrap_or(usize::MAX);
        if origin % g != 0 {
            warnings.push(Warning::GrainRounded {
                from_ms: (first_grain as u64 * g) as f64 / 1e6,
                first_send_ms: origin as f64 / 1e6,
                grain_ms: g as f64 / 1e6,
            });
        }
        windows_from_grains(
            &self.tokens_per_grain,
            first_grain,
            usize::try_from(window_ns / g).unwrap_or(1),
        )
    }

    /// The peak concurrency known for certain; where the grains allow a higher one (requests
    /// overlapping between grid instants), the bounds are said in `warnings`.
    fn peak(&self, warnings: &mut Warnings) -> u64 {
        let exact_peak =
            self.concurrency_at_grain.iter().copied().max().unwrap_or(0).max(self.peak_concurrency);
        let upper_peak =
            self.concurrency_max_per_grain.iter().copied().max().unwrap_or(0).max(exact_peak);
        if upper_peak > exact_peak {
            warnings.push(Warning::PeakConcurrencyBounds { exact: exact_peak, upper: upper_peak });
        }
        exact_peak
    }

    /// The summary of everything this digest counted, as run `info`, with `percentiles`
    /// (default: the digest's own) and these `warnings` (the summary's only ones, and any the
    /// windows or the peak add).
    pub fn summary(
        &self,
        info: RunInfo,
        percentiles: Option<&[f64]>,
        warnings: impl IntoIterator<Item = impl Into<Warning>>,
    ) -> Summary {
        let mut warnings: Warnings = warnings.into_iter().collect();
        let origin = self.first_intended_ns.unwrap_or(0);
        let duration_ns = self.last_end_ns.map_or(0, |e| e.saturating_sub(origin));
        let duration_s = duration_ns as f64 / 1e9;
        let per_s = |x: f64| if duration_s > 0.0 { x / duration_s } else { 0.0 };
        let window_ns = self.metrics.window_ns.max(1);
        let windows = self.windows(origin, &mut warnings);
        let best = windows.iter().copied().max().unwrap_or(0);
        let exact_peak = self.peak(&mut warnings);
        let pct: Vec<f64> =
            percentiles.map_or_else(|| self.metrics.percentiles.clone(), <[f64]>::to_vec);
        let sk = &self.sketches;
        let (total_input, total_output) = (self.total_input_tokens, self.total_output_tokens);
        let mut summary = Summary {
            info,
            percentiles: pct.clone(),
            slo: self.metrics.goodput,
            window_ns,
            completed: self.completed,
            failed: self.failed,
            duration_s,
            total_input_tokens: total_input,
            total_output_tokens: total_output,
            retokenized_output_tokens: self.retokenized_output_tokens,
            request_throughput: per_s(self.completed as f64),
            request_goodput: self.good.map(|g| per_s(g as f64)),
            input_throughput: per_s(total_input as f64),
            output_throughput: per_s(total_output as f64),
            total_token_throughput: per_s(total_input.saturating_add(total_output) as f64),
            peak_output_throughput: best as f64 / (window_ns as f64 / 1e9),
            output_tokens_per_window: windows,
            peak_concurrency: exact_peak,
            mean_concurrency: if duration_ns == 0 {
                0.0
            } else {
                self.busy_ns as f64 / duration_ns as f64
            },
            ttft_ms: sk.ttft_ms.distribution(&pct),
            tpot_ms: sk.tpot_ms.distribution(&pct),
            itl_ms: sk.itl_ms.distribution(&pct),
            itl_chunk_ms: sk.itl_chunk_ms.distribution(&pct),
            e2el_ms: sk.e2el_ms.distribution(&pct),
            ttfc_ms: (sk.ttfc_ms.count() > 0).then(|| sk.ttfc_ms.distribution(&pct)),
            schedule_lag_ms: sk.schedule_lag_ms.distribution(&pct),
            client_queue_ms: sk.client_queue_ms.distribution(&pct),
            read_lag_ms: (sk.read_lag_ms.count() > 0).then(|| sk.read_lag_ms.distribution(&pct)),
            server: None,
            engine: self.engine.clone(),
            retries: self.retries,
            truth: None,
            sessions: self.sessions.as_ref().map(|s| s.summary(&pct)),
            replay: None,
            reasoning: sk.reasoning.as_ref().map(|r| r.summary(&pct)),
            gpu: None,
            // The steady window needs every request's times, which a digest does not keep.
            load: None,
            failures: self.failures.clone(),
            warnings,
            requests: Vec::new(),
        };
        if let Some((rows, behind)) = &self.replay {
            let behind_ms = behind.distribution(&crate::replay::with_p99(&pct));
            crate::replay::set(
                &mut summary,
                crate::replay::ReplaySummary { rows: *rows, behind_ms },
            );
        }
        summary
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::tests::{content, record};
    use crate::sketch::DEFAULT_ALPHA;
    use servelab_records::{Outcome, Shard, ShardInfo};

    fn info(k: u32, n: u32) -> RunInfo {
        RunInfo {
            model: "m".into(),
            dataset: "random(8:4)".into(),
            num_prompts: 40,
            seed: 3,
            started_at: format!("2026-11-26T10:00:0{k}Z"),
            shard: Some(ShardInfo {
                shard: Shard::new(k, n).unwrap(),
                start_at: Some("2026-11-26T10:00:10.000Z".into()),
                clock_offset_ms: Some(0.2 * f64::from(k)),
                clock_uncertainty_ms: Some(0.5),
                clock_reference: None,
            }),
            ..RunInfo::default()
        }
    }

    /// Request `i` of a 2-shard run, intended at `start + 37·i` ms: shard 1's (odd) requests
    /// are slow, one in seven fails, and every one streams 1 + (i mod 4) one-token chunks.
    fn request(i: u64, start: u64) -> RequestRecord {
        let t0 = start + 37 * i;
        let ttft = if i % 2 == 0 { 5 + i % 9 } else { 150 + 7 * i };
        let n = 1 + i % 4;
        let chunks = (0..n).map(|j| content(t0 + ttft + 3 * j, 1)).collect();
        let mut r = record(i, t0, t0 + ttft + 3 * n, chunks);
        if i % 7 == 3 {
            r.outcome = Outcome::Failure {
                kind: servelab_records::FailureKind::HttpStatus,
                message: format!("HTTP 500 #{}", i % 2),
            };
            r.status = Some(500);
        }
        r
    }

    /// The two shards' records and the digests of each.
    fn run(start: u64, cfg: &MetricsConfig) -> (Vec<RequestRecord>, RunInfo, Vec<ShardDigest>) {
        let mut all = Vec::new();
        let mut digests = Vec::new();
        for k in 0..2u32 {
            let records: Vec<RequestRecord> =
                (0..40).filter(|i| i % 2 == u64::from(k)).map(|i| request(i, start)).collect();
            let summary = crate::summarize(&records, &info(k, 2), cfg);
            digests.push(ShardDigest::new(&summary, &records, DEFAULT_ALPHA).unwrap());
            all.extend(records);
        }
        all.sort_by_key(|r| r.index);
        let mut whole = info(0, 2);
        whole.shard = None;
        (all, whole, digests)
    }

    fn cfg() -> MetricsConfig {
        MetricsConfig {
            percentiles: vec![50.0, 90.0, 99.0],
            goodput: Some(crate::Slo { ttft_ms: Some(100.0), ..Default::default() }),
            window_ns: 100_000_000,
        }
    }

    #[test]
    fn digests_merge_to_the_exact_summary_of_the_union() {
        let (records, info, digests) = run(0, &cfg());
        // As shipped: through JSON and back, unchanged (empty sketches too: no TTFC here).
        for d in &digests {
            let text = serde_json::to_string(d).unwrap();
            assert_eq!(&serde_json::from_str::<ShardDigest>(&text).unwrap(), d);
        }
        let exact = crate::summarize(&records, &info, &cfg());
        let got = merge_digests(&digests, MergeOptions::default(), None).unwrap();
        assert_eq!(got.info, exact.info);
        assert_eq!(ExactFigures::of(&got), ExactFigures::of(&exact));
        assert_eq!(got.completed, 34);
        assert!(got.request_goodput.is_some_and(|g| g > 0.0));
        assert!((got.mean_concurrency - exact.mean_concurrency).abs() < 1e-12);
        // The same kinds and counts; messages in shard order, not arrival order.
        assert_eq!(got.failures.len(), 1);
        assert_eq!((got.failures[0].kind, got.failures[0].count), (exact.failures[0].kind, 6));
        assert_eq!(got.failures[0].messages, vec!["HTTP 500 #0", "HTTP 500 #1"]);
        for (g, e) in [(&got.ttft_ms, &exact.ttft_ms), (&got.e2el_ms, &exact.e2el_ms)] {
            assert_eq!((g.count, g.min, g.max), (e.count, e.min, e.max));
            assert!((g.mean - e.mean).abs() < 1e-9 && (g.std - e.std).abs() < 1e-9);
        }
        // The union's median TTFT is neither shard's: within α of the exact rank value.
        let mut ttft: Vec<f64> =
            exact.requests.iter().filter(|r| r.is_success()).filter_map(|r| r.ttft_ms).collect();
        ttft.sort_by(f64::total_cmp);
        for (p, v) in &got.ttft_ms.percentiles {
            let want = ttft[((p / 100.0) * (ttft.len() - 1) as f64).floor() as usize];
            assert!((v - want).abs() <= DEFAULT_ALPHA * want, "p{p}: {v} vs {want}");
        }
        // Requests 37 ms apart lasting up to ~430 ms overlap; the grid sees the peak or says
        // how high it can be.
        assert!(got.peak_concurrency <= exact.peak_concurrency);
        let bound = got.warnings.iter().find(|w| w.starts_with("peak concurrency"));
        if got.peak_concurrency < exact.peak_concurrency {
            let w = bound.expect("a peak below the exact one is said to be a lower bound");
            let upper: u64 = w.to_string().rsplit(' ').next().unwrap().parse().unwrap();
            assert!(upper >= exact.peak_concurrency, "{w}");
        }
        assert!(got.warnings[0].starts_with("merged from 2 shards' digests"));
        assert!(got.warnings[1].contains("their clocks agree within"), "{:?}", got.warnings);
        assert!(got.requests.is_empty());
        // Another list of percentiles answers from the same sketches.
        let other = merge_digests(&digests, MergeOptions::default(), Some(&[99.9])).unwrap();
        let want = ttft[(0.999 * (ttft.len() - 1) as f64).floor() as usize];
        let (p, v) = other.ttft_ms.percentiles[0];
        assert_eq!((other.ttft_ms.percentiles.len(), p), (1, 99.9));
        assert!((v - want).abs() <= DEFAULT_ALPHA * want, "p99.9: {v} vs {want}");
    }

    /// Issue 27: GPU telemetry is the GPUs' hosts', not the shards': two shards reading the
    /// same exporter give the energy of one run reading it; reading different GPUs, the sum.
    #[test]
    fn digests_count_each_gpu_once_and_add_different_ones() {
        use crate::gpu::tests::on_host;
        let url = "http://h:9400/metrics";
        let digests = |hosts: [&str; 2]| -> Vec<ShardDigest> {
            (0..2u32)
                .map(|k| {
                    let records: Vec<RequestRecord> =
                        (0..40).filter(|i| i % 2 == u64::from(k)).map(|i| request(i, 0)).collect();
                    let mut summary = crate::summarize(&records, &info(k, 2), &cfg());
                    let scrapes = on_host(hosts[k as usize], 4);
                    crate::gpu::attach(&mut summary, &scrapes, Some(url), Some(2.5));
                    ShardDigest::new(&summary, &records, DEFAULT_ALPHA).unwrap()
                })
                .collect()
        };
        let (records, info, _) = run(0, &cfg());
        let mut one = crate::summarize(&records, &info, &cfg());
        crate::gpu::attach(&mut one, &on_host("h", 4), Some(url), Some(2.5));
        let one = one.gpu.unwrap();
        assert!(one.energy_j.is_some_and(|e| e > 0.0));
        let same = merge_digests(&digests(["h", "h"]), MergeOptions::default(), None).unwrap();
        let g = same.gpu.as_ref().unwrap();
        assert_eq!((g.window_s, g.gpus_seen), (one.window_s, 2));
        assert_eq!(
            (g.energy_j, g.joules_per_output_token),
            (one.energy_j, one.joules_per_output_token)
        );
        assert_eq!(g.usd_per_million_output_tokens, one.usd_per_million_output_tokens);
        assert!(same.warnings.iter().any(|w| w.to_string().starts_with(
            "GPU telemetry: 2 GPUs were read by more than one shard and are counted once"
        )));
        let apart = merge_digests(&digests(["a", "b"]), MergeOptions::default(), None).unwrap();
        let g = apart.gpu.as_ref().unwrap();
        assert_eq!((g.gpus_seen, g.cost_gpus), (4, Some(4)));
        assert_eq!(g.energy_j, one.energy_j.map(|e| 2.0 * e));
        let twice = one.usd_per_million_output_tokens.map(|u| 2.0 * u);
        assert!((g.usd_per_million_output_tokens.unwrap() - twice.unwrap()).abs() < 1e-12);
    }

    #[test]
    fn a_first_send_off_the_grain_is_said_and_counted_from_the_grain_before() {
        // The first request is intended 25 ms into the schedule: 10 ms grains put the
        // windows at 20 ms, not 25 ms.
        let (records, info, digests) = run(25, &cfg());
        let exact = crate::summarize(&records, &info, &cfg());
        let got = merge_digests(&digests, MergeOptions::default(), None).unwrap();
        assert_eq!(got.duration_s, exact.duration_s);
        let note = got.warnings.iter().find(|w| w.contains("rounded down")).unwrap();
        assert!(note.starts_with("throughput windows counted from 20.0 ms"), "{note}");
        let tokens: u64 = got.output_tokens_per_window.iter().sum();
        assert_eq!(tokens, exact.output_tokens_per_window.iter().sum::<u64>());
    }

    #[test]
    fn overlap_between_grid_instants_bounds_the_peak() {
        // Each shard has one request, [1, 5) and [2, 6) ms: together two in flight, but
        // never at a 10 ms grid instant.
        let cfg = MetricsConfig { window_ns: 100_000_000, ..MetricsConfig::default() };
        let digests: Vec<ShardDigest> = (0..2u32)
            .map(|k| {
                let i = u64::from(k);
                let r = record(i, i, 5 + i, vec![content(3 + i, 1)]);
                let s = crate::summarize(std::slice::from_ref(&r), &info(k, 2), &cfg);
                ShardDigest::new(&s, &[r], DEFAULT_ALPHA).unwrap()
            })
            .collect();
        let got = merge_digests(&digests, MergeOptions::default(), None).unwrap();
        assert_eq!(got.peak_concurrency, 1);
        assert!(got.warnings.iter().any(|w| w
            == "peak concurrency: 1 requests were in flight at once for certain; from the \
                digests the peak is between 1 and 2"));
    }

    #[test]
    fn digests_of_another_format_or_accuracy_are_refused() {
        let (_, _, mut digests) = run(0, &cfg());
        let mut old = digests.clone();
        old[1].format = 1;
        let e = merge_digests(&old, MergeOptions::default(), None).unwrap_err();
        assert!(e.to_string().contains("format 1"), "{e}");
        digests[1].sketches = RunSketch::from_records(&[], 0.02).unwrap();
        let e = merge_digests(&digests, MergeOptions::default(), None).unwrap_err();
        assert_eq!(e, DigestError::Sketch(SketchError::Mismatch(DEFAULT_ALPHA, 0.02)));
    }
}
