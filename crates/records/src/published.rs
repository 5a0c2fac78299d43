//! The table teams publish for a sweep, one row per concurrency level, in `vllm bench serve`'s
//! terms: the nine columns, their headers as published, how a header is recognised in a
//! document (published typos such as "Reqeuest" and "Lantency" included), and one row. The
//! engine model predicts rows, calibration reads them from Markdown or from measured
//! summaries, and comparisons print them: all of them through this one definition.

use serde::{Deserialize, Serialize};

/// A column of the published sweep table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PublishedColumn {
    /// Requests in flight at once (closed loop).
    Concurrency,
    /// Completed requests per second.
    RequestThroughput,
    /// Output tokens per second.
    OutputThroughput,
    /// Mean end-to-end latency, ms.
    MeanE2e,
    /// P99 end-to-end latency, ms.
    P99E2e,
    /// Mean time to first token, ms.
    MeanTtft,
    /// P99 time to first token, ms.
    P99Ttft,
    /// Mean time per output token, ms.
    MeanTpot,
    /// P99 time per output token, ms.
    P99Tpot,
}

/// The nine columns in published order.
pub const PUBLISHED_COLUMNS: [PublishedColumn; 9] = [
    PublishedColumn::Concurrency,
    PublishedColumn::RequestThroughput,
    PublishedColumn::OutputThroughput,
    PublishedColumn::MeanE2e,
    PublishedColumn::P99E2e,
    PublishedColumn::MeanTtft,
    PublishedColumn::P99Ttft,
    PublishedColumn::MeanTpot,
    PublishedColumn::P99Tpot,
];

impl PublishedColumn {
    /// The header as servelab writes it (the published one without its typos).
    pub fn header(self) -> &'static str {
        match self {
            PublishedColumn::Concurrency => "Concurrency",
            PublishedColumn::RequestThroughput => "Request Throughput (req/s)",
            PublishedColumn::OutputThroughput => "Output Token Throughput (tok/s)",
            PublishedColumn::MeanE2e => "Mean E2E Latency (ms)",
            PublishedColumn::P99E2e => "P99 E2E Latency (ms)",
            PublishedColumn::MeanTtft => "Mean TTFT (ms)",
            PublishedColumn::P99Ttft => "P99 TTFT (ms)",
            PublishedColumn::MeanTpot => "Mean TPOT (ms)",
            PublishedColumn::P99Tpot => "P99 TPOT (ms)",
        }
    }

    /// The column a header cell names, tolerating case, spacing and the published typos;
    /// `None` for any other column.
    pub fn recognise(header: &str) -> Option<PublishedColumn> {
        use PublishedColumn as C;
        let h: String =
            header.to_ascii_lowercase().chars().filter(|c| !c.is_whitespace()).collect();
        let pick = |mean: C, p99: C| {
            if h.starts_with("mean") {
                Some(mean)
            } else if h.starts_with("p99") {
                Some(p99)
            } else {
                None
            }
        };
        if h.contains("concurrency") {
            Some(C::Concurrency)
        } else if h.contains("throughput") && (h.contains("output") || h.contains("tok/s")) {
            Some(C::OutputThroughput)
        } else if h.contains("throughput") {
            Some(C::RequestThroughput)
        } else if h.contains("ttft") {
            pick(C::MeanTtft, C::P99Ttft)
        } else if h.contains("tpot") {
            pick(C::MeanTpot, C::P99Tpot)
        } else if h.contains("e2e") || h.contains("latency") || h.contains("lantency") {
            pick(C::MeanE2e, C::P99E2e)
        } else {
            None
        }
    }
}

/// One row of a published sweep table (times in ms). NaN marks a figure the source did not
/// give.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct PointSummary {
    /// Concurrency (closed loop) of the row.
    pub concurrency: u32,
    /// Completed requests per second.
    pub request_throughput: f64,
    /// Output tokens per second.
    pub output_throughput: f64,
    /// Mean end-to-end latency.
    pub mean_e2e_ms: f64,
    /// P99 end-to-end latency.
    pub p99_e2e_ms: f64,
    /// Mean time to first token.
    pub mean_ttft_ms: f64,
    /// P99 time to first token.
    pub p99_ttft_ms: f64,
    /// Mean time per output token.
    pub mean_tpot_ms: f64,
    /// P99 time per output token.
    pub p99_tpot_ms: f64,
}

impl PointSummary {
    /// A row at `concurrency` with every figure missing (NaN).
    pub fn missing(concurrency: u32) -> PointSummary {
        let mut p = PointSummary { concurrency, ..Default::default() };
        for c in &PUBLISHED_COLUMNS[1..] {
            p.set(*c, f64::NAN);
        }
        p
    }

    /// The row's figure in column `c` (the concurrency as a number).
    pub fn get(&self, c: PublishedColumn) -> f64 {
        match c {
            PublishedColumn::Concurrency => f64::from(self.concurrency),
            PublishedColumn::RequestThroughput => self.request_throughput,
            PublishedColumn::OutputThroughput => self.output_throughput,
            PublishedColumn::MeanE2e => self.mean_e2e_ms,
            PublishedColumn::P99E2e => self.p99_e2e_ms,
            PublishedColumn::MeanTtft => self.mean_ttft_ms,
            PublishedColumn::P99Ttft => self.p99_ttft_ms,
            PublishedColumn::MeanTpot => self.mean_tpot_ms,
            PublishedColumn::P99Tpot => self.p99_tpot_ms,
        }
    }

    /// Sets column `c` to `x`; the concurrency only to a whole number in `1..=u32::MAX`
    /// (returns whether the value was taken).
    pub fn set(&mut self, c: PublishedColumn, x: f64) -> bool {
        let slot = match c {
            PublishedColumn::Concurrency => {
                let whole = x.is_finite() && x >= 1.0 && x.fract() == 0.0;
                if !(whole && x <= f64::from(u32::MAX)) {
                    return false;
                }
                self.concurrency = x as u32;
                return true;
            }
            PublishedColumn::RequestThroughput => &mut self.request_throughput,
            PublishedColumn::OutputThroughput => &mut self.output_throughput,
            PublishedColumn::MeanE2e => &mut self.mean_e2e_ms,
            PublishedColumn::P99E2e => &mut self.p99_e2e_ms,
            PublishedColumn::MeanTtft => &mut self.mean_ttft_ms,
            PublishedColumn::P99Ttft => &mut self.p99_ttft_ms,
            PublishedColumn::MeanTpot => &mut self.mean_tpot_ms,
            PublishedColumn::P99Tpot => &mut self.p99_tpot_ms,
        };
        *slot = x;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_are_recognised_with_the_published_typos() {
        for c in PUBLISHED_COLUMNS {
            assert_eq!(PublishedColumn::recognise(c.header()), Some(c), "{c:?}");
        }
        let r = PublishedColumn::recognise;
        assert_eq!(r("Reqeuest Throughput (req/s)"), Some(PublishedColumn::RequestThroughput));
        assert_eq!(r("P99 E2E Lantency (ms)"), Some(PublishedColumn::P99E2e));
        assert_eq!(r("Median TTFT (ms)"), None);
        assert_eq!(r("Dataset"), None);
    }

    #[test]
    fn a_row_reads_and_writes_each_column() {
        let mut p = PointSummary::missing(4);
        assert!(p.p99_tpot_ms.is_nan());
        for (i, c) in PUBLISHED_COLUMNS.iter().enumerate() {
            assert!(p.set(*c, i as f64 + 1.0));
            assert_eq!(p.get(*c), i as f64 + 1.0);
        }
        assert!(!p.set(PublishedColumn::Concurrency, 2.5));
        assert!(!p.set(PublishedColumn::Concurrency, 0.0));
        assert_eq!(p.concurrency, 1);
    }
}
