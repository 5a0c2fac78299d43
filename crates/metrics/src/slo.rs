//! Objectives, in one syntax: `METRIC[_STAT]:MS` terms separated by commas or spaces.
//!
//! * `--goodput ttft:500 tpot:50` (vLLM's syntax) bounds each request: a latency without a
//!   statistic. [`Slo`] counts the requests that meet every term.
//! * `--slo ttft_p99:500,tpot_mean:50` (sweeps, lab objectives) bounds a statistic of a run:
//!   [`SloSpec::check`] says whether a summary meets every term and what it missed.

use serde::{Deserialize, Serialize};

use crate::key::{Metric, MetricKey};
use crate::{RequestRow, Summary};

/// Per-request objectives for goodput, milliseconds; each is optional.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Slo {
    /// Time to first token.
    pub ttft_ms: Option<f64>,
    /// Time per output token.
    pub tpot_ms: Option<f64>,
    /// End-to-end latency.
    pub e2el_ms: Option<f64>,
    /// Reasoning models: time to the first answer token (a response without reasoning: its
    /// TTFT).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttfa_ms: Option<f64>,
    /// Reasoning models: TPOT of the answer phase (without reasoning: the TPOT).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer_tpot_ms: Option<f64>,
    /// Reasoning models: time to the first reasoning token (met by a response without
    /// reasoning).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttfr_ms: Option<f64>,
    /// Reasoning models: TPOT of the reasoning phase (met by a response without reasoning).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_tpot_ms: Option<f64>,
}

impl Slo {
    /// True when the request meets every given objective (`≤`). As in vLLM, a request with
    /// fewer than 2 output tokens has TPOT 0 for this test; one without a first token or an
    /// end fails a TTFT or E2E objective.
    pub fn met_by(&self, r: &RequestRow) -> bool {
        let within = |limit: Option<f64>, v: Option<f64>| match limit {
            None => true,
            Some(l) => v.is_some_and(|v| v <= l),
        };
        // The answer phase of a response without reasoning is the whole response; a phase
        // of fewer than 2 tokens has TPOT 0, as the whole response's does.
        let (ttfa, answer_tpot, ttfr, reasoning_tpot) = match &r.reasoning {
            Some(p) => (
                p.ttfa_ms,
                p.answer_tpot_ms.unwrap_or(0.0),
                p.ttfr_ms,
                p.reasoning_tpot_ms.unwrap_or(0.0),
            ),
            None => (r.ttft_ms, r.tpot_ms.unwrap_or(0.0), Some(0.0), 0.0),
        };
        within(self.ttft_ms, r.ttft_ms)
            && within(self.tpot_ms, Some(r.tpot_ms.unwrap_or(0.0)))
            && within(self.e2el_ms, r.e2el_ms)
            && within(self.ttfa_ms, ttfa)
            && within(self.answer_tpot_ms, Some(answer_tpot))
            && within(self.ttfr_ms, ttfr)
            && within(self.reasoning_tpot_ms, Some(reasoning_tpot))
    }

    /// Every objective with its name, for checks and messages.
    pub fn terms(&self) -> [(&'static str, Option<f64>); 7] {
        [
            ("ttft", self.ttft_ms),
            ("tpot", self.tpot_ms),
            ("e2el", self.e2el_ms),
            ("ttfa", self.ttfa_ms),
            ("answer_tpot", self.answer_tpot_ms),
            ("ttfr", self.ttfr_ms),
            ("reasoning_tpot", self.reasoning_tpot_ms),
        ]
    }

    /// `--goodput ttft:500 tpot:50 e2el:10000`; `None` for no terms. Errors start with the
    /// flag and name the bad term.
    pub fn parse(items: &[String]) -> Result<Option<Slo>, String> {
        let terms = parse_terms("--goodput", items.iter().map(String::as_str), "ttft:500")?;
        if terms.is_empty() {
            return Ok(None);
        }
        let mut slo = Slo::default();
        for (text, limit) in terms {
            let slot = match MetricKey::parse(text) {
                Some(MetricKey { metric: Metric::Ttft, stat: None }) => &mut slo.ttft_ms,
                Some(MetricKey { metric: Metric::Tpot, stat: None }) => &mut slo.tpot_ms,
                Some(MetricKey { metric: Metric::E2el, stat: None }) => &mut slo.e2el_ms,
                Some(MetricKey { metric: Metric::Ttfa, stat: None }) => &mut slo.ttfa_ms,
                Some(MetricKey { metric: Metric::AnswerTpot, stat: None }) => {
                    &mut slo.answer_tpot_ms
                }
                Some(MetricKey { metric: Metric::Ttfr, stat: None }) => &mut slo.ttfr_ms,
                Some(MetricKey { metric: Metric::ReasoningTpot, stat: None }) => {
                    &mut slo.reasoning_tpot_ms
                }
                _ => {
                    return Err(format!(
                        "--goodput: unknown metric '{text}': use ttft, tpot, e2el, or for \
                         reasoning models ttfa, answer_tpot, ttfr, reasoning_tpot"
                    ))
                }
            };
            *slot = Some(limit);
        }
        Ok(Some(slo))
    }
}

/// `KEY:MS` terms of `items` (each may hold several, split on commas and spaces), the limit
/// a positive, finite number of milliseconds. Errors start with `flag`.
fn parse_terms<'a>(
    flag: &str,
    items: impl Iterator<Item = &'a str>,
    example: &str,
) -> Result<Vec<(&'a str, f64)>, String> {
    let mut out = Vec::new();
    for item in items.flat_map(|s| s.split([',', ' '])).map(str::trim).filter(|s| !s.is_empty()) {
        let (k, v) = item
            .split_once(':')
            .ok_or_else(|| format!("{flag}: '{item}' is not METRIC:MS (e.g. {example})"))?;
        let limit =
            v.parse().ok().filter(|x: &f64| x.is_finite() && *x > 0.0).ok_or_else(|| {
                format!("{flag}: '{v}' in '{item}' is not a positive number of milliseconds")
            })?;
        out.push((k, limit));
    }
    Ok(out)
}

/// One objective on a run: `key <= limit_ms`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SloTerm {
    /// A latency statistic, e.g. `ttft_p99`.
    pub key: MetricKey,
    /// The largest value that meets the objective, milliseconds.
    pub limit_ms: f64,
}

/// Objectives on a run's latency statistics (`--slo ttft_p99:500,tpot_p99:50`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SloSpec {
    /// Every term must hold.
    pub terms: Vec<SloTerm>,
}

/// Whether one summary meets the objectives, and what it missed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SloCheck {
    /// Every objective met and no request failed.
    pub pass: bool,
    /// One sentence per objective missed.
    pub violations: Vec<String>,
}

impl SloSpec {
    /// `ttft_p99:500,tpot_p99:50` (milliseconds). Errors start with `flag`.
    pub fn parse(flag: &str, s: &str) -> Result<SloSpec, String> {
        let mut terms = Vec::new();
        for (text, limit_ms) in parse_terms(flag, std::iter::once(s), "ttft_p99:500")? {
            let key = MetricKey::parse(text).filter(|k| k.metric.is_latency() && k.stat.is_some());
            let key = key.ok_or_else(|| {
                format!(
                    "{flag}: unknown objective '{text}': use ttft, tpot, itl or e2el with _mean, \
                     _median or _pNN, e.g. ttft_p99:500"
                )
            })?;
            terms.push(SloTerm { key, limit_ms });
        }
        if terms.is_empty() {
            return Err(format!("{flag}: give at least one objective, e.g. ttft_p99:500"));
        }
        Ok(SloSpec { terms })
    }

    /// Percentiles the summaries must carry for these objectives.
    pub fn percentiles(&self) -> Vec<f64> {
        self.terms.iter().filter_map(|t| t.key.percentile()).collect()
    }

    /// Every objective is met, and no request failed (a failed request has no latency, so
    /// it cannot be said to meet one).
    pub fn check(&self, s: &Summary) -> SloCheck {
        let mut violations = Vec::new();
        if s.failed > 0 {
            violations.push(format!("{} requests failed", s.failed));
        }
        if s.completed == 0 {
            violations.push("no request completed".to_string());
        }
        for t in &self.terms {
            match t.key.value(s) {
                Some(v) if v <= t.limit_ms => {}
                Some(v) => violations.push(format!("{} {:.2} ms > {} ms", t.key, v, t.limit_ms)),
                None => violations.push(format!("{} was not measured", t.key)),
            }
        }
        SloCheck { pass: violations.is_empty(), violations }
    }

    /// The objectives in words, with `sep` between the key and the limit:
    /// `ttft_p99 <= 500 ms, tpot_p99 <= 50 ms`.
    pub fn text(&self, sep: &str) -> String {
        let terms: Vec<String> =
            self.terms.iter().map(|t| format!("{} {sep} {} ms", t.key, t.limit_ms)).collect();
        terms.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::Stat;

    #[test]
    fn answer_objectives_bound_the_answer_phase_or_the_whole_response_without_reasoning() {
        use crate::reasoning::PhaseRow;
        let slo = Slo::parse(&["ttfa:2000,answer_tpot:20".into()]).unwrap().unwrap();
        assert_eq!((slo.ttfa_ms, slo.answer_tpot_ms), (Some(2000.0), Some(20.0)));
        let mut r = crate::request::row(&crate::request::tests::record(0, 0, 3000, vec![]));
        r.ttft_ms = Some(100.0);
        r.tpot_ms = Some(30.0);
        // Without reasoning, TTFA is the TTFT and the answer TPOT the TPOT (30 > 20).
        assert!(!slo.met_by(&r));
        r.tpot_ms = Some(20.0);
        assert!(slo.met_by(&r));
        let phases = |ttfa: f64, tpot: Option<f64>| PhaseRow {
            ttfr_ms: Some(100.0),
            ttfa_ms: Some(ttfa),
            answer_tpot_ms: tpot,
            ..PhaseRow::default()
        };
        r.reasoning = Some(phases(2000.0, Some(20.0)));
        assert!(slo.met_by(&r));
        r.reasoning = Some(phases(2000.5, Some(20.0)));
        assert!(!slo.met_by(&r));
        // One answer token: answer TPOT 0, met; no answer at all: TTFA missed.
        r.reasoning = Some(phases(1500.0, None));
        assert!(slo.met_by(&r));
        r.reasoning = Some(PhaseRow { ttfa_ms: None, ..phases(0.0, None) });
        assert!(!slo.met_by(&r));
        // Reasoning objectives are met by a response without reasoning.
        let slo = Slo::parse(&["ttfr:1,reasoning_tpot:1".into()]).unwrap().unwrap();
        r.reasoning = None;
        assert!(slo.met_by(&r));
    }

    #[test]
    fn goodput_syntax() {
        let slo = Slo::parse(&["ttft:500".into(), "tpot:50".into()]).unwrap().unwrap();
        assert_eq!((slo.ttft_ms, slo.tpot_ms, slo.e2el_ms), (Some(500.0), Some(50.0), None));
        assert_eq!(Slo::parse(&[]).unwrap(), None);
        let e = Slo::parse(&["itl:5".into()]).unwrap_err();
        assert_eq!(
            e,
            "--goodput: unknown metric 'itl': use ttft, tpot, e2el, or for reasoning models \
             ttfa, answer_tpot, ttfr, reasoning_tpot"
        );
        assert!(Slo::parse(&["ttft".into()]).is_err());
        assert!(Slo::parse(&["ttft:-1".into()]).is_err());
        assert!(Slo::parse(&["ttft_p99:5".into()]).is_err());
    }

    #[test]
    fn parses_run_objectives() {
        let s = SloSpec::parse("--slo", "ttft_p99:500,tpot_mean:50 e2el_median:9000").unwrap();
        let keys: Vec<String> = s.terms.iter().map(|t| t.key.key()).collect();
        assert_eq!(keys, ["ttft_p99", "tpot_mean", "e2el_median"]);
        assert_eq!(s.terms[0].key, MetricKey::stat(Metric::Ttft, Stat::P(99.0)));
        assert_eq!(s.percentiles(), vec![99.0]);
        assert_eq!(s.text("<="), "ttft_p99 <= 500 ms, tpot_mean <= 50 ms, e2el_median <= 9000 ms");
        let e = SloSpec::parse("--slo", "ttft_p999:5").unwrap_err();
        assert!(e.starts_with("--slo: unknown objective 'ttft_p999'"), "{e}");
        assert!(SloSpec::parse("--slo", "ttft_p99").is_err());
        assert!(SloSpec::parse("--slo", "ttft_p99:-3").is_err());
        assert!(SloSpec::parse("--slo", "").is_err());
        assert!(SloSpec::parse("--slo", "foo_p99:3").is_err());
        assert!(SloSpec::parse("--slo", "output_throughput:3").is_err());
    }
}
