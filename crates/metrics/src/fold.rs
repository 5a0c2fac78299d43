//! A long run in bounded memory: its records kept while they fit, folded into a digest past
//! that.
//!
//! A record keeps every chunk of its response until the run ends, so an hour at 1,000
//! requests a second (3.6 M records) would hold gigabytes. Up to [`KEEP_RECORDS`] measured
//! records the summary is computed from the records, exactly. Past it, the records kept so
//! far and then every block of as many are summarized and folded into one [`ShardDigest`]
//! (the form a shard ships, merged with [`ShardDigest::absorb`]) and dropped; the run's
//! summary comes from that digest: counts, token totals, throughput, goodput, means, standard
//! deviations and extremes exact, percentiles within the sketches' relative error, peak
//! concurrency bounded (see [`crate::digest`]). The records themselves went to the store and
//! to `--save-detailed` as they arrived.

use servelab_records::{RequestRecord, RunInfo};

use crate::conduct::Conduct;
use crate::digest::{DigestError, ShardDigest};
use crate::sketch::DEFAULT_ALPHA;
use crate::summary::Summary;
use crate::warning::Warning;
use crate::MetricsConfig;

/// Measured records a run keeps whole (about 40–100 MB for short responses).
pub const KEEP_RECORDS: usize = 100_000;

/// The most distinct warnings kept from the folded blocks' own summaries.
const MAX_BLOCK_WARNINGS: usize = 8;

/// A run's records as they arrive: kept, or folded into a digest once there are too many.
pub struct RecordFold {
    keep: usize,
    info: RunInfo,
    cfg: MetricsConfig,
    /// Warm-ups (always kept: few, and the store's final write wants them) and the measured
    /// records not yet folded.
    records: Vec<RequestRecord>,
    measured: usize,
    folded: Option<ShardDigest>,
    folded_count: u64,
    /// The whole run's stream conduct, counted as records arrive (a block's is partial).
    conduct: Conduct,
    block_warnings: Vec<Warning>,
}

/// What a fold ends with.
pub struct Folded {
    /// Every record when they fit; else the warm-ups only.
    pub records: Vec<RequestRecord>,
    /// The digest of every measured record, when they did not fit.
    pub digest: Option<ShardDigest>,
    /// Measured records folded into the digest.
    pub folded: u64,
    /// The whole run's stream conduct.
    pub conduct: Conduct,
    /// Measured records the run would have kept whole.
    keep: usize,
    block_warnings: Vec<Warning>,
}

impl RecordFold {
    /// A fold that keeps up to `keep` measured records of the run `info` (summarized with
    /// `cfg`) before it folds.
    pub fn new(keep: usize, info: RunInfo, cfg: MetricsConfig) -> RecordFold {
        RecordFold {
            keep: keep.max(1),
            info,
            cfg,
            records: Vec::new(),
            measured: 0,
            folded: None,
            folded_count: 0,
            conduct: Conduct::default(),
            block_warnings: Vec::new(),
        }
    }

    /// Take one finished record. Past the limit, `prepare` is applied to each record of the
    /// block before it is folded (per-chunk token counts need the text it then drops).
    pub fn push(
        &mut self,
        r: RequestRecord,
        prepare: &mut dyn FnMut(&mut RequestRecord),
    ) -> Result<(), DigestError> {
        if !r.warmup {
            self.measured += 1;
            self.conduct.add(&r);
        }
        self.records.push(r);
        if self.measured >= self.keep {
            self.fold_block(prepare)?;
        }
        Ok(())
    }

    /// Fold the measured records held now into the digest.
    fn fold_block(
        &mut self,
        prepare: &mut dyn FnMut(&mut RequestRecord),
    ) -> Result<(), DigestError> {
        let (mut block, warm): (Vec<_>, Vec<_>) =
            std::mem::take(&mut self.records).into_iter().partition(|r| !r.warmup);
        self.records = warm;
        self.measured = 0;
        if block.is_empty() {
            return Ok(());
        }
        block.iter_mut().for_each(prepare);
        let summary = crate::summarize(&block, &self.info, &self.cfg);
        let mut own = Conduct::default();
        block.iter().for_each(|r| own.add(r));
        let theirs = own.warnings(self.info.backend == "openai-chat");
        for w in summary.warnings.iter().filter(|w| !theirs.contains(w)) {
            if self.block_warnings.len() < MAX_BLOCK_WARNINGS && !self.block_warnings.contains(w) {
                self.block_warnings.push(w.clone());
            }
        }
        let digest = ShardDigest::new(&summary, &block, DEFAULT_ALPHA)?;
        self.folded_count += block.len() as u64;
        match &mut self.folded {
            Some(all) => all.absorb(&digest)?,
            None => self.folded = Some(digest),
        }
        Ok(())
    }

    /// Every record has come: fold the last block if folding began.
    pub fn finish(
        mut self,
        prepare: &mut dyn FnMut(&mut RequestRecord),
    ) -> Result<Folded, DigestError> {
        if self.folded.is_some() {
            self.fold_block(prepare)?;
        }
        Ok(Folded {
            records: self.records,
            digest: self.folded,
            folded: self.folded_count,
            conduct: self.conduct,
            keep: self.keep,
            block_warnings: self.block_warnings,
        })
    }
}

impl Folded {
    /// The summary of a folded run as `info` (`None` when the records fit: summarize them).
    pub fn summary(&self, info: &RunInfo) -> Option<Summary> {
        let digest = self.digest.as_ref()?;
        let alpha_pct = digest.sketches.ttft_ms.alpha() * 100.0;
        let mut warnings =
            vec![Warning::Folded { requests: self.folded, kept: self.keep, alpha_pct }];
        warnings.extend(self.conduct.warnings(info.backend == "openai-chat"));
        let in_part = self.block_warnings.iter().map(|w| Warning::InPartOfRun(Box::new(w.clone())));
        warnings.extend(in_part);
        if digest.completed == 0 && digest.failed > 0 && !info.interrupted {
            warnings.push(Warning::AllFailed);
        }
        let mut summary = digest.summary(info.clone(), None, warnings);
        let late = crate::truth::overload_warnings(&summary);
        summary.warnings.extend(late);
        Some(summary)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::digest::ExactFigures;
    use crate::request::tests::{content, record};

    fn info() -> RunInfo {
        RunInfo {
            model: "m".into(),
            dataset: "random(8:4)".into(),
            backend: "openai".into(),
            ..RunInfo::default()
        }
    }

    /// 25 requests, one every 10 ms, each 3 chunks; the 7th fails.
    fn records() -> Vec<RequestRecord> {
        (0..25u64)
            .map(|i| {
                let t = i * 10;
                let chunks = vec![content(t + 20, 1), content(t + 30, 1), content(t + 35, 2)];
                let mut r = record(i, t, t + 40, chunks);
                if i == 6 {
                    r.outcome = servelab_records::Outcome::Failure {
                        kind: servelab_records::FailureKind::Reset,
                        message: "reset".into(),
                    };
                }
                r
            })
            .collect()
    }

    fn fold(keep: usize, records: Vec<RequestRecord>) -> (Folded, u64) {
        let mut prepared = 0;
        let mut count = |_: &mut RequestRecord| prepared += 1;
        let mut f = RecordFold::new(keep, info(), MetricsConfig::default());
        for r in records {
            f.push(r, &mut count).unwrap();
        }
        let folded = f.finish(&mut count).unwrap();
        (folded, prepared)
    }

    #[test]
    fn records_that_fit_are_kept_whole() {
        let (f, prepared) = fold(100, records());
        assert_eq!((f.records.len(), f.folded, prepared), (25, 0, 0));
        assert!(f.digest.is_none() && f.summary(&info()).is_none());
    }

    #[test]
    fn past_the_limit_the_folded_summary_has_the_exact_figures_of_the_records() {
        let all = records();
        let exact = crate::summarize(&all, &info(), &MetricsConfig::default());
        // Blocks of 4, 4, ... and a last one of 1: every record prepared once, none kept.
        let (f, prepared) = fold(4, all);
        assert_eq!((f.records.len(), f.folded, prepared), (0, 25, 25));
        let s = f.summary(&info()).unwrap();
        assert_eq!(ExactFigures::of(&s), ExactFigures::of(&exact));
        assert_eq!((s.completed, s.failed), (24, 1));
        assert_eq!(s.ttft_ms.mean, exact.ttft_ms.mean);
        assert_eq!(s.failures, exact.failures);
        assert!(
            s.warnings[0].starts_with("25 measured requests, more than the 4 kept whole"),
            "{:?}",
            s.warnings
        );
        // Percentiles within the sketch's relative error.
        let (a, b) = (s.ttft_ms.median, exact.ttft_ms.median);
        assert!((a - b).abs() <= b * DEFAULT_ALPHA * 1.0001, "{a} vs {b}");
    }

    #[test]
    fn warm_ups_are_kept_and_never_folded() {
        let mut all = records();
        all[0].warmup = true;
        let (f, _) = fold(4, all);
        assert_eq!(f.records.len(), 1);
        assert!(f.records[0].warmup);
        assert_eq!(f.folded, 24);
    }
}
