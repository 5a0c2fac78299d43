//! The load of a run, as one serializable value: when requests arrive (rate and burstiness)
//! and how many may be in flight, plus the duration limit. Run records embed it, sweeps move
//! it along one axis ([`Level`]), and comparisons use it to tell which runs are comparable.

use std::cmp::Ordering;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::{Arrivals, ScheduleError};

/// How a run is loaded. Serializes as the four fields run records always had
/// (`request_rate`, `burstiness`, `max_concurrency`, `duration_s`), so result files and the
/// store read the same before and after.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LoadSpec {
    /// Requests per second; `None` sends every request at once (`--request-rate inf`).
    pub request_rate: Option<f64>,
    /// Gamma shape of the gaps between arrivals: 1 is Poisson, `inf` constant spacing.
    pub burstiness: f64,
    /// At most this many requests in flight (closed loop); `None`: no cap.
    pub max_concurrency: Option<u64>,
    /// Stop issuing after this many seconds (prompts cycle), then drain.
    pub duration_s: Option<f64>,
}

impl Default for LoadSpec {
    /// Everything at once, Poisson shape, no cap, no duration: `vllm bench serve`'s defaults.
    fn default() -> Self {
        LoadSpec { request_rate: None, burstiness: 1.0, max_concurrency: None, duration_s: None }
    }
}

/// A [`LoadSpec`] value that cannot drive a run; the message names the flag.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LoadError {
    /// A bad rate or burstiness.
    #[error(transparent)]
    Schedule(#[from] ScheduleError),
    /// `--max-concurrency 0`.
    #[error("--max-concurrency must be at least 1")]
    Concurrency,
    /// A duration that is not a positive, finite number of seconds.
    #[error("--duration must be a positive number of seconds (got {0})")]
    Duration(f64),
}

impl LoadSpec {
    /// A checked load: every error names the flag that set the bad value.
    pub fn new(
        request_rate: Option<f64>,
        burstiness: f64,
        max_concurrency: Option<u64>,
        duration_s: Option<f64>,
    ) -> Result<LoadSpec, LoadError> {
        Arrivals::new(request_rate, burstiness)?;
        if max_concurrency == Some(0) {
            return Err(LoadError::Concurrency);
        }
        if let Some(d) = duration_s.filter(|d| !(d.is_finite() && *d > 0.0 && *d < 1e9)) {
            return Err(LoadError::Duration(d));
        }
        let request_rate = request_rate.filter(|r| r.is_finite());
        Ok(LoadSpec { request_rate, burstiness, max_concurrency, duration_s })
    }

    /// Check a spec built field by field (or read from a file).
    pub fn validate(&self) -> Result<(), LoadError> {
        LoadSpec::new(self.request_rate, self.burstiness, self.max_concurrency, self.duration_s)
            .map(|_| ())
    }

    /// The arrival process this spec describes. A spec that would not validate degrades to
    /// sending everything at once rather than failing mid-run.
    pub fn arrivals(&self) -> Arrivals {
        Arrivals::new(self.request_rate, self.burstiness).unwrap_or(Arrivals::Burst)
    }

    /// The concurrency cap as a count of workers.
    pub fn concurrency(&self) -> Option<usize> {
        self.max_concurrency.map(|c| usize::try_from(c).unwrap_or(usize::MAX))
    }

    /// This load moved to `level` on its axis: a concurrency level sets the cap, a rate level
    /// sets the arrival rate (burstiness and the other field stay).
    pub fn at(self, level: Level) -> LoadSpec {
        match level {
            Level::Concurrency(c) => LoadSpec { max_concurrency: Some(c as u64), ..self },
            // All at once is no rate, as `--request-rate inf` is.
            Level::Rate(r) => LoadSpec { request_rate: Some(r).filter(|r| r.is_finite()), ..self },
        }
    }

    /// The level this load sits at when it varies along exactly one axis: a cap with all
    /// requests at once is a concurrency level, a rate with no cap a rate level.
    pub fn level(&self) -> Option<Level> {
        match (self.max_concurrency, self.request_rate) {
            (Some(c), None) => usize::try_from(c).ok().map(Level::Concurrency),
            (None, Some(r)) => Some(Level::Rate(r)),
            _ => None,
        }
    }

    /// True when two runs were driven alike: the same cap and the same rate. (Burstiness and
    /// duration do not change which load level a run stands for.)
    pub fn same_level(&self, other: &LoadSpec) -> bool {
        self.to_string() == other.to_string()
    }

    /// Lighter loads first: by concurrency, then rate; unbounded sorts last.
    pub fn cmp_intensity(&self, other: &LoadSpec) -> Ordering {
        let c = |l: &LoadSpec| l.max_concurrency.unwrap_or(u64::MAX);
        let r = |l: &LoadSpec| l.request_rate.unwrap_or(f64::INFINITY);
        c(self).cmp(&c(other)).then(r(self).total_cmp(&r(other)))
    }
}

impl fmt::Display for LoadSpec {
    /// `c=4`, `rate=2`, `c=2 rate=0.5`, or `inf` (everything at once, no cap).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.max_concurrency, self.request_rate) {
            (Some(c), Some(r)) => write!(f, "c={c} rate={r}"),
            (Some(c), None) => write!(f, "c={c}"),
            (None, Some(r)) => write!(f, "rate={r}"),
            (None, None) => f.write_str("inf"),
        }
    }
}

/// Which load axis a sweep varies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Axis {
    /// Closed loop: at most N requests in flight (`--max-concurrency N`).
    Concurrency,
    /// Open loop: requests arrive at N per second.
    Rate,
}

impl Axis {
    /// Axis title with unit, for tables and charts.
    pub fn title(self) -> &'static str {
        match self {
            Axis::Concurrency => "Concurrency",
            Axis::Rate => "Request Rate (req/s)",
        }
    }

    /// The axis in words, for sentences: `concurrency`, `request rate`.
    pub fn noun(self) -> &'static str {
        match self {
            Axis::Concurrency => "concurrency",
            Axis::Rate => "request rate",
        }
    }
}

/// One level on a load axis: what a sweep varies from point to point.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "value", rename_all = "snake_case")]
pub enum Level {
    /// At most this many requests in flight.
    Concurrency(usize),
    /// Requests per second, positive; infinite for all at once (`inf`, written `"inf"`).
    Rate(#[serde(with = "rate_value")] f64),
}

/// A rate level's value in JSON: a number, or `"inf"` for all at once (JSON has no infinity,
/// and `null` would read back as no rate at all).
mod rate_value {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
        if v.is_infinite() {
            s.serialize_str("inf")
        } else {
            s.serialize_f64(*v)
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum V {
            Number(f64),
            Text(String),
        }
        match V::deserialize(d)? {
            V::Number(x) => Ok(x),
            V::Text(t) if t.eq_ignore_ascii_case("inf") => Ok(f64::INFINITY),
            V::Text(t) => Err(serde::de::Error::custom(format!(
                "rate '{t}' is not a number of requests per second or \"inf\""
            ))),
        }
    }
}

impl Level {
    /// The axis this level lies on.
    pub fn axis(self) -> Axis {
        match self {
            Level::Concurrency(_) => Axis::Concurrency,
            Level::Rate(_) => Axis::Rate,
        }
    }

    /// The level as a number (for sorting, charts and searches).
    pub fn value(self) -> f64 {
        match self {
            Level::Concurrency(c) => c as f64,
            Level::Rate(r) => r,
        }
    }

    /// The level as printed in tables: `4`, `2.5`.
    pub fn label(self) -> String {
        match self {
            Level::Concurrency(c) => c.to_string(),
            Level::Rate(r) => format!("{r}"),
        }
    }

    /// File name stem of this level's result: `concurrency-4`, `rate-2.5`.
    pub fn file_stem(self) -> String {
        match self {
            Level::Concurrency(c) => format!("concurrency-{c}"),
            Level::Rate(r) => format!("rate-{r}"),
        }
    }

    /// The level on `axis` nearest to `v` (concurrency rounds down, never below 1).
    pub fn on_axis(axis: Axis, v: f64) -> Level {
        match axis {
            Axis::Concurrency => Level::Concurrency((v.floor() as usize).max(1)),
            Axis::Rate => Level::Rate(v),
        }
    }
}

impl fmt::Display for Level {
    /// `concurrency 4`, `rate 2.5 req/s`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Level::Concurrency(c) => write!(f, "concurrency {c}"),
            Level::Rate(r) if r.is_infinite() => write!(f, "rate inf (all at once)"),
            Level::Rate(r) => write!(f, "rate {r} req/s"),
        }
    }
}

/// `1,2,4,8` → concurrency levels (sorted, deduplicated, each ≥ 1).
pub fn parse_concurrency_list(s: &str) -> Result<Vec<Level>, String> {
    let mut v = Vec::new();
    for item in s.split(',').map(str::trim).filter(|t| !t.is_empty()) {
        match item.parse::<usize>() {
            Ok(c) if c >= 1 => v.push(c),
            _ => {
                return Err(format!("'{item}' is not a whole number >= 1 (expected e.g. 1,2,4,8)"))
            }
        }
    }
    if v.is_empty() {
        return Err("give at least one level, e.g. 1,2,4,8".to_string());
    }
    v.sort_unstable();
    v.dedup();
    Ok(v.into_iter().map(Level::Concurrency).collect())
}

/// `0.5,1,2,inf` → request-rate levels (sorted, deduplicated, positive; `inf` sends a
/// point's prompts all at once).
pub fn parse_rate_list(s: &str) -> Result<Vec<Level>, String> {
    let mut v: Vec<f64> = Vec::new();
    for item in s.split(',').map(str::trim).filter(|t| !t.is_empty()) {
        match parse_positive_or_inf(item) {
            Ok(r) => v.push(r),
            _ => {
                return Err(format!(
                    "'{item}' is not a positive number of requests per second or inf; e.g. \
                     1,2,4,inf (sweep --concurrency for closed loop)"
                ))
            }
        }
    }
    if v.is_empty() {
        return Err("give at least one rate, e.g. 1,2,4".to_string());
    }
    v.sort_by(f64::total_cmp);
    v.dedup();
    Ok(v.into_iter().map(Level::Rate).collect())
}

/// `inf` (or `infinity`) or a positive, finite number; `inf` is `f64::INFINITY`. The error
/// says what was expected.
pub fn parse_positive_or_inf(s: &str) -> Result<f64, String> {
    let t = s.trim().to_ascii_lowercase();
    if t == "inf" || t == "infinity" {
        return Ok(f64::INFINITY);
    }
    match t.parse::<f64>() {
        Ok(v) if v > 0.0 && v.is_finite() => Ok(v),
        _ => Err(format!("expected a positive number or 'inf' (got '{s}')")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serializes_as_the_run_record_fields() {
        let l = LoadSpec::new(Some(2.5), 1.0, Some(8), None).unwrap();
        let j = serde_json::to_string(&l).unwrap();
        assert_eq!(
            j,
            r#"{"request_rate":2.5,"burstiness":1.0,"max_concurrency":8,"duration_s":null}"#
        );
        assert_eq!(serde_json::from_str::<LoadSpec>(&j).unwrap(), l);
    }

    #[test]
    fn validation_names_the_flag() {
        let e = LoadSpec::new(Some(0.0), 1.0, None, None).unwrap_err().to_string();
        assert!(e.starts_with("--request-rate"), "{e}");
        let e = LoadSpec::new(None, 0.0, None, None).unwrap_err().to_string();
        assert!(e.starts_with("--burstiness"), "{e}");
        assert_eq!(LoadSpec::new(None, 1.0, Some(0), None), Err(LoadError::Concurrency));
        assert_eq!(LoadSpec::new(None, 1.0, None, Some(-1.0)), Err(LoadError::Duration(-1.0)));
        assert_eq!(LoadSpec::new(None, 1.0, None, Some(1e20)), Err(LoadError::Duration(1e20)));
        // An infinite rate is the same as none.
        assert_eq!(LoadSpec::new(Some(f64::INFINITY), 1.0, None, None).unwrap().request_rate, None);
    }

    #[test]
    fn arrivals_follow_rate_and_burstiness() {
        let l =
            LoadSpec { request_rate: Some(4.0), burstiness: f64::INFINITY, ..LoadSpec::default() };
        assert_eq!(l.arrivals(), Arrivals::Constant { rate: 4.0 });
        let l = LoadSpec { request_rate: Some(4.0), ..LoadSpec::default() };
        assert_eq!(l.arrivals(), Arrivals::Gamma { rate: 4.0, shape: 1.0 });
        assert_eq!(LoadSpec::default().arrivals(), Arrivals::Burst);
    }

    #[test]
    fn levels_move_one_axis() {
        let base = LoadSpec { max_concurrency: Some(64), ..LoadSpec::default() };
        let r = base.at(Level::Rate(2.0));
        assert_eq!((r.request_rate, r.max_concurrency), (Some(2.0), Some(64)));
        assert_eq!(r.level(), None);
        let c = LoadSpec::default().at(Level::Concurrency(4));
        assert_eq!(c.level(), Some(Level::Concurrency(4)));
        assert_eq!(c.to_string(), "c=4");
        assert_eq!(r.to_string(), "c=64 rate=2");
        assert_eq!(LoadSpec::default().to_string(), "inf");
    }

    #[test]
    fn intensity_orders_lighter_first() {
        let c = |n| LoadSpec { max_concurrency: Some(n), ..LoadSpec::default() };
        let r2 = LoadSpec { request_rate: Some(2.0), ..LoadSpec::default() };
        let mut v = vec![LoadSpec::default(), c(16), r2, c(4)];
        v.sort_by(|a, b| a.cmp_intensity(b));
        assert_eq!(v, vec![c(4), c(16), r2, LoadSpec::default()]);
    }

    #[test]
    fn level_lists_sort_and_reject_bad_items() {
        let v = parse_concurrency_list("8, 1,2,2").unwrap();
        assert_eq!(v, vec![Level::Concurrency(1), Level::Concurrency(2), Level::Concurrency(8)]);
        let e = parse_concurrency_list("1,0").unwrap_err();
        assert_eq!(e, "'0' is not a whole number >= 1 (expected e.g. 1,2,4,8)");
        assert!(parse_concurrency_list(" , ").is_err());
        assert_eq!(parse_rate_list("2,0.5").unwrap(), vec![Level::Rate(0.5), Level::Rate(2.0)]);
        assert_eq!(
            parse_rate_list("inf,1").unwrap(),
            vec![Level::Rate(1.0), Level::Rate(f64::INFINITY)]
        );
        // JSON has no infinity: an all-at-once level is written "inf" and read back.
        let json = serde_json::to_string(&Level::Rate(f64::INFINITY)).unwrap();
        assert_eq!(json, r#"{"kind":"rate","value":"inf"}"#);
        assert_eq!(serde_json::from_str::<Level>(&json).unwrap(), Level::Rate(f64::INFINITY));
        assert_eq!(LoadSpec::default().at(Level::Rate(f64::INFINITY)).request_rate, None);
        assert!(parse_rate_list("-1").is_err());
    }

    #[test]
    fn level_labels_and_stems() {
        assert_eq!(Level::Concurrency(4).file_stem(), "concurrency-4");
        assert_eq!(Level::Rate(2.5).file_stem(), "rate-2.5");
        assert_eq!(Level::Rate(3.0).label(), "3");
        assert_eq!(Level::on_axis(Axis::Concurrency, 5.7), Level::Concurrency(5));
        assert_eq!(Level::Rate(2.5).to_string(), "rate 2.5 req/s");
    }

    #[test]
    fn positive_or_inf() {
        assert_eq!(parse_positive_or_inf("inf"), Ok(f64::INFINITY));
        assert_eq!(parse_positive_or_inf(" 2.5"), Ok(2.5));
        assert_eq!(
            parse_positive_or_inf("0").unwrap_err(),
            "expected a positive number or 'inf' (got '0')"
        );
    }
}
