//! Load levels: what a run was driven at, so runs compare and rank at equal load.

use std::cmp::Ordering;
use std::fmt;

use serde::Serialize;
use servelab_records::RunInfo;

/// A load level: closed loop (`max_concurrency`), open loop (`request_rate`), or both.
/// Neither means every request was sent at once.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Default)]
pub struct Load {
    pub concurrency: Option<u64>,
    pub rate: Option<f64>,
}

impl Load {
    pub fn of(info: &RunInfo) -> Load {
        Load {
            concurrency: info.max_concurrency,
            rate: info.request_rate.filter(|r| r.is_finite()),
        }
    }

    /// Lighter loads first: by concurrency, then rate; unbounded sorts last.
    pub fn cmp_intensity(&self, other: &Load) -> Ordering {
        let c = |l: &Load| l.concurrency.unwrap_or(u64::MAX);
        let r = |l: &Load| l.rate.unwrap_or(f64::INFINITY);
        c(self).cmp(&c(other)).then(r(self).total_cmp(&r(other)))
    }
}

impl fmt::Display for Load {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.concurrency, self.rate) {
            (Some(c), Some(r)) => write!(f, "c={c} rate={r}"),
            (Some(c), None) => write!(f, "c={c}"),
            (None, Some(r)) => write!(f, "rate={r}"),
            (None, None) => f.write_str("inf"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_and_order() {
        let c4 = Load { concurrency: Some(4), rate: None };
        let c16 = Load { concurrency: Some(16), rate: None };
        let r2 = Load { concurrency: None, rate: Some(2.0) };
        let inf = Load::default();
        assert_eq!(c4.to_string(), "c=4");
        assert_eq!(r2.to_string(), "rate=2");
        assert_eq!(inf.to_string(), "inf");
        assert_eq!(Load { concurrency: Some(2), rate: Some(0.5) }.to_string(), "c=2 rate=0.5");
        let mut v = vec![inf, c16, r2, c4];
        v.sort_by(|a, b| a.cmp_intensity(b));
        assert_eq!(v, vec![c4, c16, r2, inf]);
    }
}
