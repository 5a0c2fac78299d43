//! A mergeable quantile summary with a relative-error guarantee: DDSketch (Masson, Rim and
//! Lee, "DDSketch: a fast and fully-mergeable quantile sketch with relative-error
//! guarantees", VLDB 2019), logarithmic mapping, unbounded bins.
//!
//! For a very large sharded run, each shard can ship a sketch of a few kilobytes per latency
//! instead of every record. A positive value `x` goes to bin `i = ceil(log_γ x)` with
//! `γ = (1 + α) / (1 − α)`; the bin answers `2γ^i / (γ + 1)`, within relative error `α` of
//! every value in it. So the sketch's `q`-quantile is within `α` (relative) of the exact
//! rank-`⌊q(n − 1)⌋` value of the same data, however it was split and merged: merging adds bin
//! counts, which is exact, associative and commutative.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use servelab_records::RequestRecord;

use crate::stats::Distribution;

/// The relative accuracy servelab's shard sketches use: 0.5 %.
pub const DEFAULT_ALPHA: f64 = 0.005;

/// Values at or below this are counted as zero (latencies in ms: a nanosecond).
const MIN_POSITIVE: f64 = 1e-6;

/// A DDSketch of non-negative values.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DdSketch {
    /// The relative accuracy `α`.
    alpha: f64,
    /// Values at or below [`MIN_POSITIVE`].
    zeros: u64,
    /// Bin index → count.
    bins: BTreeMap<i32, u64>,
    /// Values added (zeros included).
    count: u64,
    /// The exact smallest and largest values added (±∞ while empty, `null` in JSON, which
    /// has no infinity).
    #[serde(serialize_with = "finite_or_null", deserialize_with = "null_is_plus_infinity")]
    min: f64,
    #[serde(serialize_with = "finite_or_null", deserialize_with = "null_is_minus_infinity")]
    max: f64,
    /// Mean of the values added and the sum of their squared deviations from it (Welford's
    /// running pair, merged by Chan et al.'s rule): the mean and standard deviation are not
    /// approximated by the bins.
    mean: f64,
    m2: f64,
}

fn finite_or_null<S: serde::Serializer>(x: &f64, s: S) -> Result<S::Ok, S::Error> {
    x.is_finite().then_some(*x).serialize(s)
}

fn null_is_plus_infinity<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::INFINITY))
}

fn null_is_minus_infinity<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NEG_INFINITY))
}

/// A sketch that cannot be built or merged.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SketchError {
    /// `α` outside (0, 1).
    #[error("a sketch's relative accuracy must be between 0 and 1 (got {0})")]
    Alpha(f64),
    /// Sketches of different accuracy have different bins.
    #[error("cannot merge sketches of relative accuracy {0} and {1}")]
    Mismatch(f64, f64),
}

impl DdSketch {
    /// An empty sketch of relative accuracy `alpha`.
    pub fn new(alpha: f64) -> Result<DdSketch, SketchError> {
        if alpha.is_nan() || alpha <= 0.0 || alpha >= 1.0 {
            return Err(SketchError::Alpha(alpha));
        }
        Ok(DdSketch {
            alpha,
            zeros: 0,
            bins: BTreeMap::new(),
            count: 0,
            min: f64::INFINITY,
            max: f64::NEG_INFINITY,
            mean: 0.0,
            m2: 0.0,
        })
    }

    fn gamma(&self) -> f64 {
        (1.0 + self.alpha) / (1.0 - self.alpha)
    }

    /// Add one value. Negative values and NaN are not latencies and are ignored.
    pub fn add(&mut self, x: f64) {
        if x.is_nan() || x < 0.0 || x.is_infinite() {
            return;
        }
        self.count += 1;
        self.min = self.min.min(x);
        self.max = self.max.max(x);
        let delta = x - self.mean;
        self.mean += delta / self.count as f64;
        self.m2 += delta * (x - self.mean);
        if x <= MIN_POSITIVE {
            self.zeros += 1;
        } else {
            let i = (x.ln() / self.gamma().ln()).ceil() as i32;
            *self.bins.entry(i).or_insert(0) += 1;
        }
    }

    /// Add every value of `other` (same accuracy).
    pub fn merge(&mut self, other: &DdSketch) -> Result<(), SketchError> {
        if self.alpha != other.alpha {
            return Err(SketchError::Mismatch(self.alpha, other.alpha));
        }
        for (i, n) in &other.bins {
            *self.bins.entry(*i).or_insert(0) += n;
        }
        if other.count > 0 {
            let (na, nb) = (self.count as f64, other.count as f64);
            let n = na + nb;
            let delta = other.mean - self.mean;
            self.mean += delta * nb / n;
            self.m2 += other.m2 + delta * delta * na * nb / n;
        }
        self.zeros += other.zeros;
        self.count += other.count;
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
        Ok(())
    }

    /// The relative accuracy `α` it was built with.
    pub fn alpha(&self) -> f64 {
        self.alpha
    }

    /// Values added.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// The mean of the values added (exact up to floating-point rounding); 0 when empty.
    pub fn mean(&self) -> f64 {
        self.mean
    }

    /// Their population standard deviation (`ddof=0`, as the summaries report); 0 when empty.
    pub fn std(&self) -> f64 {
        if self.count == 0 {
            return 0.0;
        }
        (self.m2 / self.count as f64).max(0.0).sqrt()
    }

    /// The values as a [`Distribution`]: count, mean, standard deviation and extremes exact,
    /// the median and `percentiles` within `α` (each the sketch's answer for the rank
    /// `⌊q(n − 1)⌋`). An empty sketch gives the empty distribution.
    pub fn distribution(&self, percentiles: &[f64]) -> Distribution {
        if self.count == 0 {
            return Distribution::from_sorted(&[], percentiles);
        }
        let q = |p: f64| self.quantile(p / 100.0).unwrap_or(0.0);
        Distribution {
            count: self.count,
            mean: self.mean,
            median: q(50.0),
            std: self.std(),
            min: self.min,
            max: self.max,
            percentiles: percentiles.iter().map(|&p| (p, q(p))).collect(),
        }
    }

    /// Occupied bins (the sketch's size is about 12 bytes each).
    pub fn bins(&self) -> usize {
        self.bins.len()
    }

    /// The `q`-quantile (`q` in 0..=1) within relative error `α` of the rank-`⌊q(n − 1)⌋`
    /// value; the exact extremes at 0 and 1; `None` when empty or `q` is out of range.
    pub fn quantile(&self, q: f64) -> Option<f64> {
        if self.count == 0 || !(0.0..=1.0).contains(&q) {
            return None;
        }
        if q == 0.0 {
            return Some(self.min);
        }
        if q == 1.0 {
            return Some(self.max);
        }
        let rank = (q * (self.count - 1) as f64).floor() as u64;
        if rank < self.zeros {
            return Some(0.0);
        }
        let gamma = self.gamma();
        let mut seen = self.zeros;
        for (i, n) in &self.bins {
            seen += n;
            if seen > rank {
                let v = 2.0 * gamma.powi(*i) / (gamma + 1.0);
                // The bin's answer never leaves the range of what was added.
                return Some(v.clamp(self.min, self.max));
            }
        }
        Some(self.max)
    }
}

/// The relative accuracy of the sketches shards write (0.5 %: a p99 of 200 ms is read as
/// 199–201 ms).
pub const SHARD_SKETCH_ALPHA: f64 = 0.005;

/// A sketch of each of a run's distributions, as the summary takes them: TTFT, TPOT, ITL
/// (per token), per-chunk ITL, E2EL and TTFC over measured, successful requests; schedule
/// lag, client queue and read lag over every measured request. Merged, the sketches of all shards answer the
/// whole run's distributions within the accuracy they were built with.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunSketch {
    /// Time to first token, ms.
    pub ttft_ms: DdSketch,
    /// Time per output token after the first, ms.
    pub tpot_ms: DdSketch,
    /// Per-token inter-token latency, ms.
    pub itl_ms: DdSketch,
    /// Per-chunk gaps, ms.
    pub itl_chunk_ms: DdSketch,
    /// End-to-end latency, ms.
    pub e2el_ms: DdSketch,
    /// Sent minus intended send, ms.
    pub schedule_lag_ms: DdSketch,
    /// Intended send minus scheduled arrival, ms.
    pub client_queue_ms: DdSketch,
    /// Time to first answer content, ms, of requests that carried reasoning text.
    pub ttfc_ms: DdSketch,
    /// The longest the client took to handle arrived bytes, ms, where the platform gives
    /// kernel receive times.
    pub read_lag_ms: DdSketch,
    /// Reasoning models: the phases of the successful requests that had reasoning; absent
    /// when none had (and in older digests).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<ReasoningSketch>,
}

/// The sketches of the reasoning figures (`crate::reasoning`), and their exact totals.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReasoningSketch {
    /// Successful requests that had reasoning.
    pub requests: u64,
    /// Their reasoning tokens (known counts).
    pub total_reasoning_tokens: u64,
    /// Their answer tokens (known counts).
    pub total_answer_tokens: u64,
    /// Time to the first reasoning token, ms.
    pub ttfr_ms: DdSketch,
    /// Time to the first answer token, ms.
    pub ttfa_ms: DdSketch,
    /// Reasoning tokens per request.
    pub reasoning_tokens: DdSketch,
    /// Answer tokens per request.
    pub answer_tokens: DdSketch,
    /// TPOT of the reasoning phase, ms.
    pub reasoning_tpot_ms: DdSketch,
    /// TPOT of the answer phase, ms.
    pub answer_tpot_ms: DdSketch,
}

impl ReasoningSketch {
    fn new(empty: &DdSketch) -> ReasoningSketch {
        ReasoningSketch {
            requests: 0,
            total_reasoning_tokens: 0,
            total_answer_tokens: 0,
            ttfr_ms: empty.clone(),
            ttfa_ms: empty.clone(),
            reasoning_tokens: empty.clone(),
            answer_tokens: empty.clone(),
            reasoning_tpot_ms: empty.clone(),
            answer_tpot_ms: empty.clone(),
        }
    }

    fn add(&mut self, p: &crate::reasoning::PhaseRow) {
        let add = |sk: &mut DdSketch, v: Option<f64>| v.into_iter().for_each(|v| sk.add(v));
        self.requests += 1;
        self.total_reasoning_tokens =
            self.total_reasoning_tokens.saturating_add(p.reasoning_tokens.unwrap_or(0));
        self.total_answer_tokens =
            self.total_answer_tokens.saturating_add(p.answer_tokens.unwrap_or(0));
        add(&mut self.ttfr_ms, p.ttfr_ms);
        add(&mut self.ttfa_ms, p.ttfa_ms);
        add(&mut self.reasoning_tokens, p.reasoning_tokens.map(|n| n as f64));
        add(&mut self.answer_tokens, p.answer_tokens.map(|n| n as f64));
        add(&mut self.reasoning_tpot_ms, p.reasoning_tpot_ms);
        add(&mut self.answer_tpot_ms, p.answer_tpot_ms);
    }

    fn merge(&mut self, other: &ReasoningSketch) -> Result<(), SketchError> {
        self.requests += other.requests;
        self.total_reasoning_tokens =
            self.total_reasoning_tokens.saturating_add(other.total_reasoning_tokens);
        self.total_answer_tokens =
            self.total_answer_tokens.saturating_add(other.total_answer_tokens);
        self.ttfr_ms.merge(&other.ttfr_ms)?;
        self.ttfa_ms.merge(&other.ttfa_ms)?;
        self.reasoning_tokens.merge(&other.reasoning_tokens)?;
        self.answer_tokens.merge(&other.answer_tokens)?;
        self.reasoning_tpot_ms.merge(&other.reasoning_tpot_ms)?;
        self.answer_tpot_ms.merge(&other.answer_tpot_ms)
    }

    /// The run's reasoning figures, percentiles from the sketches (within their accuracy;
    /// counts, totals and means exact only where the sketch keeps them).
    pub fn summary(&self, percentiles: &[f64]) -> crate::reasoning::ReasoningSummary {
        crate::reasoning::ReasoningSummary {
            requests: self.requests,
            total_reasoning_tokens: self.total_reasoning_tokens,
            total_answer_tokens: self.total_answer_tokens,
            ttfr_ms: self.ttfr_ms.distribution(percentiles),
            ttfa_ms: self.ttfa_ms.distribution(percentiles),
            reasoning_tokens: self.reasoning_tokens.distribution(percentiles),
            answer_tokens: self.answer_tokens.distribution(percentiles),
            reasoning_tpot_ms: self.reasoning_tpot_ms.distribution(percentiles),
            answer_tpot_ms: self.answer_tpot_ms.distribution(percentiles),
        }
    }
}

impl RunSketch {
    /// The sketches of `records` (warm-ups left out) at relative accuracy `alpha`.
    pub fn from_records(records: &[RequestRecord], alpha: f64) -> Result<RunSketch, SketchError> {
        let empty = DdSketch::new(alpha)?;
        let mut s = RunSketch {
            ttft_ms: empty.clone(),
            tpot_ms: empty.clone(),
            itl_ms: empty.clone(),
            itl_chunk_ms: empty.clone(),
            e2el_ms: empty.clone(),
            schedule_lag_ms: empty.clone(),
            client_queue_ms: empty.clone(),
            ttfc_ms: empty.clone(),
            read_lag_ms: empty.clone(),
            reasoning: None,
        };
        for r in records.iter().filter(|r| !r.warmup) {
            let row = crate::request::row(r);
            s.schedule_lag_ms.add(row.schedule_lag_ms);
            s.client_queue_ms.add(row.client_queue_ms);
            let add = |sk: &mut DdSketch, v: Option<f64>| v.into_iter().for_each(|v| sk.add(v));
            add(&mut s.read_lag_ms, row.read_lag_ms);
            if !row.is_success() {
                continue;
            }
            add(&mut s.ttfc_ms, row.ttfc_ms);
            if let Some(p) = &row.reasoning {
                s.reasoning.get_or_insert_with(|| ReasoningSketch::new(&empty)).add(p);
            }
            add(&mut s.ttft_ms, row.ttft_ms);
            add(&mut s.tpot_ms, row.tpot_ms);
            add(&mut s.e2el_ms, row.e2el_ms);
            row.itl_chunk_ms.iter().for_each(|v| s.itl_chunk_ms.add(*v));
            crate::request::itl_per_token_ms(r).into_iter().for_each(|v| s.itl_ms.add(v));
        }
        Ok(s)
    }

    fn named(&self) -> [(&'static str, &DdSketch); 9] {
        [
            ("TTFT", &self.ttft_ms),
            ("TPOT", &self.tpot_ms),
            ("ITL", &self.itl_ms),
            ("E2EL", &self.e2el_ms),
            ("ITL per chunk", &self.itl_chunk_ms),
            ("Schedule lag", &self.schedule_lag_ms),
            ("Client queue", &self.client_queue_ms),
            ("TTFC", &self.ttfc_ms),
            ("Read lag", &self.read_lag_ms),
        ]
    }

    /// Per metric (`TTFT`, `TPOT`, `ITL`, `E2EL`, then per-chunk ITL, schedule lag, client
    /// queue, TTFC and read lag): samples and the value at each of `percentiles` (`None` when the metric has no
    /// sample).
    pub fn quantiles(&self, percentiles: &[f64]) -> Vec<(&'static str, u64, Vec<Option<f64>>)> {
        self.named()
            .into_iter()
            .map(|(name, sk)| {
                (name, sk.count(), percentiles.iter().map(|p| sk.quantile(p / 100.0)).collect())
            })
            .collect()
    }

    /// Add another shard's sketches (same accuracy).
    pub fn merge(&mut self, other: &RunSketch) -> Result<(), SketchError> {
        self.ttft_ms.merge(&other.ttft_ms)?;
        self.tpot_ms.merge(&other.tpot_ms)?;
        self.itl_ms.merge(&other.itl_ms)?;
        self.itl_chunk_ms.merge(&other.itl_chunk_ms)?;
        self.e2el_ms.merge(&other.e2el_ms)?;
        self.schedule_lag_ms.merge(&other.schedule_lag_ms)?;
        self.client_queue_ms.merge(&other.client_queue_ms)?;
        self.ttfc_ms.merge(&other.ttfc_ms)?;
        match (&mut self.reasoning, &other.reasoning) {
            (Some(a), Some(b)) => a.merge(b)?,
            (None, Some(b)) => self.reasoning = Some(b.clone()),
            _ => {}
        }
        self.read_lag_ms.merge(&other.read_lag_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::tests::content;

    /// A successful request due at 0 with first token at `ttft` ms and one more 4 ms later.
    fn record(index: u64, ttft_ms: u64) -> RequestRecord {
        let chunks = vec![content(ttft_ms, 1), content(ttft_ms + 4, 1)];
        crate::request::tests::record(index, 0, ttft_ms + 4, chunks)
    }

    #[test]
    fn reasoning_sketches_merge_to_the_union_counts_and_totals() {
        use servelab_records::ChunkKind;
        // Request i: reasoning tokens i + 1 (one chunk each, 2 ms apart from 10 ms), then 3
        // answer tokens.
        let rec = |i: u64| {
            let mut chunks: Vec<_> = (0..=i)
                .map(|k| {
                    crate::request::tests::chunk(10 + 2 * k, ChunkKind::Reasoning, "r", Some(1))
                })
                .collect();
            let at = 12 + 2 * i;
            chunks.extend((0..3).map(|k| crate::request::tests::content(at + 2 * k, 1)));
            crate::request::tests::record(i, 0, at + 4, chunks)
        };
        let records: Vec<RequestRecord> = (0..6).map(rec).collect();
        let mut a = RunSketch::from_records(&records[..2], 0.01).unwrap();
        let b = RunSketch::from_records(&records[2..], 0.01).unwrap();
        let none = RunSketch::from_records(&[record(9, 5)], 0.01).unwrap();
        assert_eq!(none.reasoning, None);
        a.merge(&none).unwrap();
        a.merge(&b).unwrap();
        let r = a.reasoning.unwrap().summary(&[50.0]);
        // 1 + 2 + ... + 6 reasoning tokens, 6 × 3 answer tokens.
        assert_eq!((r.requests, r.total_reasoning_tokens, r.total_answer_tokens), (6, 21, 18));
        assert_eq!((r.ttfr_ms.count, r.ttfr_ms.min, r.ttfr_ms.max), (6, 10.0, 10.0));
        // TTFA 12 + 2i ms: 12 to 22; each phase decodes at 2 ms per token.
        assert_eq!((r.ttfa_ms.min, r.ttfa_ms.max), (12.0, 22.0));
        assert!((r.answer_tpot_ms.mean - 2.0).abs() < 1e-9);
        assert_eq!(r.reasoning_tpot_ms.count, 5, "the first request has one reasoning token");
    }

    #[test]
    fn shards_sketches_answer_the_union_percentiles_within_alpha() {
        // Two shards of very different speed; the union's exact summary is the reference.
        let fast: Vec<RequestRecord> = (0..300).map(|i| record(2 * i, 10 + i % 37)).collect();
        let slow: Vec<RequestRecord> = (0..200).map(|i| record(2 * i + 1, 200 + 3 * i)).collect();
        let mut merged = RunSketch::from_records(&fast, 0.01).unwrap();
        merged.merge(&RunSketch::from_records(&slow, 0.01).unwrap()).unwrap();
        let all: Vec<RequestRecord> = fast.into_iter().chain(slow).collect();
        let exact = crate::summarize(&all, &Default::default(), &crate::MetricsConfig::default());
        assert_eq!(merged.ttft_ms.count(), 500);
        let mut ttfts: Vec<f64> = all.iter().map(|r| r.chunks[0].t_ns as f64 / 1e6).collect();
        ttfts.sort_by(f64::total_cmp);
        for q in [0.5, 0.9, 0.99] {
            let want = ttfts[(q * 499.0) as usize];
            let got = merged.ttft_ms.quantile(q).unwrap();
            assert!((got - want).abs() <= 0.01 * want, "ttft q{q}: {got} vs {want}");
        }
        // The summary's median (interpolated) sits between the two middle values, which the
        // sketch's answer is within 1 % of.
        let median = merged.ttft_ms.quantile(0.5).unwrap();
        assert!((median - exact.ttft_ms.median).abs() <= 0.01 * exact.ttft_ms.median + 1.0);
        assert_eq!(merged.itl_ms.quantile(0.5), Some(4.0));
        let e2el = merged.e2el_ms.quantile(1.0).unwrap();
        assert_eq!(e2el, exact.e2el_ms.max);
    }

    /// The exact rank-⌊q(n−1)⌋ value of sorted data.
    fn exact(sorted: &[f64], q: f64) -> f64 {
        sorted[(q * (sorted.len() - 1) as f64).floor() as usize]
    }

    #[test]
    fn quantiles_stay_within_alpha_of_the_exact_ones_after_merging() {
        // Three shards of different shapes: their union's quantiles are not any shard's.
        let mut data = Vec::new();
        let mut shards = Vec::new();
        for (k, (base, step)) in [(1.0, 0.37), (40.0, 1.9), (900.0, 13.0)].into_iter().enumerate() {
            let mut s = DdSketch::new(0.01).unwrap();
            for j in 0..2_000 + 500 * k {
                let x = base + step * ((j * 7919) % 1_000) as f64;
                s.add(x);
                data.push(x);
            }
            shards.push(s);
        }
        let mut merged = DdSketch::new(0.01).unwrap();
        for s in &shards {
            merged.merge(s).unwrap();
        }
        data.sort_by(f64::total_cmp);
        assert_eq!(merged.count(), data.len() as u64);
        for q in [0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 0.999] {
            let (got, want) = (merged.quantile(q).unwrap(), exact(&data, q));
            assert!((got - want).abs() <= 0.01 * want, "q {q}: {got} vs {want}");
        }
        assert_eq!(merged.quantile(0.0), Some(1.0));
        assert_eq!(merged.quantile(1.0), Some(data[data.len() - 1]));
    }

    #[test]
    fn merging_is_associative_and_commutative() {
        let sketch = |xs: &[f64]| {
            let mut s = DdSketch::new(0.02).unwrap();
            xs.iter().for_each(|x| s.add(*x));
            s
        };
        let (a, b, c) = (sketch(&[1.0, 2.0, 0.0]), sketch(&[30.0, 4.5]), sketch(&[7.0, 1e4]));
        let mut ab_c = a.clone();
        ab_c.merge(&b).unwrap();
        ab_c.merge(&c).unwrap();
        let mut bc = b.clone();
        bc.merge(&c).unwrap();
        let mut a_bc = a.clone();
        a_bc.merge(&bc).unwrap();
        let mut cba = c.clone();
        cba.merge(&b).unwrap();
        cba.merge(&a).unwrap();
        // Bins, counts and extremes merge exactly; the mean and the squared deviations to
        // within floating-point rounding (their sums are not associative bit for bit).
        let same = |x: &DdSketch, y: &DdSketch| {
            assert_eq!(
                (&x.bins, x.zeros, x.count, x.min, x.max),
                (&y.bins, y.zeros, y.count, y.min, y.max)
            );
            assert!(
                (x.mean - y.mean).abs() <= 1e-12 * y.mean && (x.m2 - y.m2).abs() <= 1e-12 * y.m2
            );
        };
        let all = [1.0, 2.0, 0.0, 30.0, 4.5, 7.0, 1e4];
        same(&ab_c, &a_bc);
        same(&ab_c, &cba);
        same(&ab_c, &sketch(&all));
        // The mean and the population standard deviation of the union.
        let mean = all.iter().sum::<f64>() / 7.0;
        let var = all.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / 7.0;
        assert!((cba.mean() - mean).abs() < 1e-9 && (cba.std() - var.sqrt()).abs() < 1e-9);
        let d = cba.distribution(&[50.0, 100.0]);
        assert_eq!((d.count, d.min, d.max, d.percentiles[1]), (7, 0.0, 1e4, (100.0, 1e4)));
        // The median is the bin of 4.5 (rank 3), answered within 2 %.
        assert!((d.median - 4.5).abs() <= 0.02 * 4.5, "{}", d.median);
        assert_eq!(
            DdSketch::new(0.02).unwrap().distribution(&[50.0]),
            Distribution::from_sorted(&[], &[50.0])
        );
    }

    #[test]
    fn edges_are_exact_or_refused() {
        assert_eq!(DdSketch::new(0.0), Err(SketchError::Alpha(0.0)));
        assert_eq!(DdSketch::new(1.0), Err(SketchError::Alpha(1.0)));
        let mut s = DdSketch::new(0.01).unwrap();
        assert_eq!(s.quantile(0.5), None);
        for x in [f64::NAN, -1.0, f64::INFINITY] {
            s.add(x);
        }
        assert_eq!(s.count(), 0);
        s.add(0.0);
        s.add(0.0);
        s.add(8.0);
        assert_eq!(s.quantile(0.5), Some(0.0));
        assert_eq!(s.quantile(2.0), None);
        // One value: every quantile is that value (clamped to the exact extremes).
        let mut one = DdSketch::new(0.01).unwrap();
        one.add(12.5);
        assert_eq!(one.quantile(0.5), Some(12.5));
        let other = DdSketch::new(0.02).unwrap();
        assert_eq!(one.merge(&other), Err(SketchError::Mismatch(0.01, 0.02)));
        // It ships as a few numbers per bin; an empty one too (JSON has no infinity).
        let json = serde_json::to_string(&one).unwrap();
        assert_eq!(serde_json::from_str::<DdSketch>(&json).unwrap(), one);
        let json = serde_json::to_string(&other).unwrap();
        assert!(json.contains(r#""min":null,"max":null"#), "{json}");
        let back = serde_json::from_str::<DdSketch>(&json).unwrap();
        assert_eq!(back, other);
        one.merge(&DdSketch::new(0.01).unwrap()).unwrap();
        assert_eq!(one.distribution(&[50.0]).min, 12.5);
    }

    /// A shard's digest read back gives the exact extremes and mean it was written with: this
    /// TPOT of a sharded test run read back one ulp low (…856) before serde_json's
    /// float_roundtrip was on for every crate, not only where the store pulled it in.
    #[test]
    fn extremes_read_back_from_json_exactly() {
        let mut s = DdSketch::new(0.01).unwrap();
        for x in [0.961_986_285_714_285_7, 1.028_514, 1.0 + 1.0 / 3.0] {
            s.add(x);
        }
        let back: DdSketch = serde_json::from_str(&serde_json::to_string(&s).unwrap()).unwrap();
        assert_eq!(back.distribution(&[]).min.to_bits(), 0.961_986_285_714_285_7_f64.to_bits());
        assert_eq!(
            (back.mean().to_bits(), back.std().to_bits()),
            (s.mean().to_bits(), s.std().to_bits())
        );
        assert_eq!(back, s);
    }
}
