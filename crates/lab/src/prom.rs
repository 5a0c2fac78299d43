//! Prometheus text exposition (what `/metrics` serves), and the engine figures a trial keeps
//! from it: vLLM's prefix-cache hit rate, KV-cache usage, preemptions, speculative-decoding
//! acceptance, and requests running/waiting. Counters are kept as the difference between a
//! scrape before and one after a profile, so each profile gets its own figures.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// One sample line: `name{label="value",...} value [timestamp]`.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub name: String,
    pub labels: Vec<(String, String)>,
    pub value: f64,
}

/// Every well-formed sample of `text`; comments, blank and malformed lines are skipped (a
/// peer's odd line must not stop a benchmark).
pub fn parse(text: &str) -> Vec<Sample> {
    text.lines().filter_map(|l| parse_line(l.trim())).collect()
}

fn parse_line(line: &str) -> Option<Sample> {
    if line.is_empty() || line.starts_with('#') {
        return None;
    }
    let name_end = line.find(|c: char| c == '{' || c.is_whitespace())?;
    let name = &line[..name_end];
    if name.is_empty() {
        return None;
    }
    let (labels, rest) = if line[name_end..].starts_with('{') {
        parse_labels(&line[name_end + 1..])?
    } else {
        (Vec::new(), &line[name_end..])
    };
    let value = parse_value(rest.split_whitespace().next()?)?;
    Some(Sample { name: name.to_string(), labels, value })
}

/// Labels up to the closing `}`, with `\"`, `\\` and `\n` escapes; returns the rest.
fn parse_labels(s: &str) -> Option<(Vec<(String, String)>, &str)> {
    let mut labels = Vec::new();
    let mut rest = s;
    loop {
        rest = rest.trim_start_matches([' ', ',']);
        if let Some(r) = rest.strip_prefix('}') {
            return Some((labels, r));
        }
        let eq = rest.find('=')?;
        let key = rest[..eq].trim().to_string();
        let body = rest[eq + 1..].trim_start().strip_prefix('"')?;
        let mut chars = body.char_indices();
        let mut value = String::new();
        let end = loop {
            let (i, c) = chars.next()?;
            match c {
                '"' => break i,
                '\\' => match chars.next()?.1 {
                    'n' => value.push('\n'),
                    other => value.push(other),
                },
                c => value.push(c),
            }
        };
        labels.push((key, value));
        rest = &body[end + 1..];
    }
}

fn parse_value(s: &str) -> Option<f64> {
    match s {
        "+Inf" | "Inf" => Some(f64::INFINITY),
        "-Inf" => Some(f64::NEG_INFINITY),
        "NaN" => Some(f64::NAN),
        _ => s.parse().ok(),
    }
}

/// The sum of `name` over all its label sets; `None` when absent.
pub fn sum(samples: &[Sample], name: &str) -> Option<f64> {
    samples.iter().filter(|s| s.name == name).map(|s| s.value).reduce(|a, b| a + b)
}

/// The metric names a trial keeps (vLLM V1 names, then older V0 ones).
pub const NAMES: [&str; 13] = [
    "vllm:num_requests_running",
    "vllm:num_requests_waiting",
    "vllm:kv_cache_usage_perc",
    "vllm:gpu_cache_usage_perc",
    "vllm:prefix_cache_queries_total",
    "vllm:prefix_cache_hits_total",
    "vllm:gpu_prefix_cache_hit_rate",
    "vllm:num_preemptions_total",
    "vllm:spec_decode_num_accepted_tokens_total",
    "vllm:spec_decode_num_draft_tokens_total",
    "vllm:prompt_tokens_total",
    "vllm:generation_tokens_total",
    "vllm:request_success_total",
];

/// One scrape, reduced to the sums of [`NAMES`] that were present.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Snapshot(pub BTreeMap<String, f64>);

impl Snapshot {
    pub fn from_text(text: &str) -> Snapshot {
        let samples = parse(text);
        Snapshot(
            NAMES.iter().filter_map(|n| sum(&samples, n).map(|v| (n.to_string(), v))).collect(),
        )
    }

    pub fn get(&self, name: &str) -> Option<f64> {
        self.0.get(name).copied()
    }
}

/// What the engine reported about one profile. Absent figures are `None` (the engine does
/// not export them, or has no `/metrics`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EngineFigures {
    /// Prefix-cache hits / queries over the profile (tokens), in [0, 1].
    pub prefix_cache_hit_rate: Option<f64>,
    /// KV-cache usage, the largest scraped before, during or after the profile, in [0, 1].
    pub kv_cache_usage: Option<f64>,
    /// Preemptions during the profile.
    pub preemptions: Option<f64>,
    /// Accepted / drafted speculative tokens over the profile.
    pub spec_decode_acceptance: Option<f64>,
    /// Gauges at the end of the profile.
    pub requests_running: Option<f64>,
    pub requests_waiting: Option<f64>,
    /// The largest values of those gauges scraped during the profile.
    #[serde(default)]
    pub peak_requests_running: Option<f64>,
    #[serde(default)]
    pub peak_requests_waiting: Option<f64>,
    /// Token counters over the profile (a check against the client's counts).
    pub prompt_tokens: Option<f64>,
    pub generation_tokens: Option<f64>,
    pub requests_succeeded: Option<f64>,
}

/// The largest gauge values seen over several scrapes (taken while a profile runs).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Peaks {
    pub kv_cache_usage: Option<f64>,
    pub requests_running: Option<f64>,
    pub requests_waiting: Option<f64>,
}

fn max_opt(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.max(y)),
        (x, y) => x.or(y),
    }
}

fn kv_usage(s: &Snapshot) -> Option<f64> {
    s.get("vllm:kv_cache_usage_perc").or(s.get("vllm:gpu_cache_usage_perc"))
}

impl Peaks {
    /// Fold one scrape in.
    pub fn observe(&mut self, s: &Snapshot) {
        self.kv_cache_usage = max_opt(self.kv_cache_usage, kv_usage(s));
        self.requests_running = max_opt(self.requests_running, s.get("vllm:num_requests_running"));
        self.requests_waiting = max_opt(self.requests_waiting, s.get("vllm:num_requests_waiting"));
    }
}

fn delta(before: &Snapshot, after: &Snapshot, name: &str) -> Option<f64> {
    // A counter that went down means the engine restarted: the difference means nothing.
    Some(after.get(name)? - before.get(name).unwrap_or(0.0)).filter(|d| *d >= 0.0)
}

fn ratio(num: Option<f64>, den: Option<f64>) -> Option<f64> {
    match (num, den) {
        (Some(n), Some(d)) if d > 0.0 => Some(n / d),
        _ => None,
    }
}

/// The figures of a profile from the scrapes before and after it, and the peaks of those
/// taken while it ran.
pub fn figures(before: &Snapshot, after: &Snapshot, during: &Peaks) -> EngineFigures {
    let d = |n: &str| delta(before, after, n);
    let mut peaks = *during;
    peaks.observe(before);
    peaks.observe(after);
    EngineFigures {
        prefix_cache_hit_rate: ratio(
            d("vllm:prefix_cache_hits_total"),
            d("vllm:prefix_cache_queries_total"),
        )
        .or(after.get("vllm:gpu_prefix_cache_hit_rate")),
        kv_cache_usage: peaks.kv_cache_usage,
        preemptions: d("vllm:num_preemptions_total"),
        spec_decode_acceptance: ratio(
            d("vllm:spec_decode_num_accepted_tokens_total"),
            d("vllm:spec_decode_num_draft_tokens_total"),
        ),
        requests_running: after.get("vllm:num_requests_running"),
        requests_waiting: after.get("vllm:num_requests_waiting"),
        peak_requests_running: peaks.requests_running,
        peak_requests_waiting: peaks.requests_waiting,
        prompt_tokens: d("vllm:prompt_tokens_total"),
        generation_tokens: d("vllm:generation_tokens_total"),
        requests_succeeded: d("vllm:request_success_total"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = r#"# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="m",engine="0"} 3.0
vllm:num_requests_running{model_name="m",engine="1"} 2
vllm:num_requests_waiting{model_name="m"} 0
vllm:prefix_cache_queries_total{model_name="m"} 1000
vllm:prefix_cache_hits_total{model_name="m"} 250
vllm:request_success_total{finished_reason="length",model_name="m"} 7
vllm:request_success_total{finished_reason="stop",model_name="m"} 3
vllm:time_to_first_token_seconds_bucket{le="+Inf",model_name="m"} 10
odd{a="x \"quoted\", y",b="back\\slash"} 1.5e3 1700000000000
no_labels 42
broken{a="x" 1
 
"#;

    #[test]
    fn parses_names_labels_values_and_escapes() {
        let s = parse(TEXT);
        assert_eq!(s.len(), 10);
        assert_eq!(s[0].name, "vllm:num_requests_running");
        assert_eq!(
            s[0].labels,
            vec![("model_name".to_string(), "m".to_string()), ("engine".into(), "0".into())]
        );
        assert_eq!(s[0].value, 3.0);
        let odd = &s[8];
        assert_eq!(odd.name, "odd");
        assert_eq!(odd.labels[0].1, "x \"quoted\", y");
        assert_eq!(odd.labels[1].1, "back\\slash");
        assert_eq!(odd.value, 1500.0);
        assert_eq!(s[9], Sample { name: "no_labels".into(), labels: vec![], value: 42.0 });
        assert_eq!(s[7].labels[0].1, "+Inf");
        assert_eq!(parse_value("+Inf"), Some(f64::INFINITY));
        assert!(parse_value("NaN").unwrap().is_nan());
        assert_eq!(parse_value("x"), None);
    }

    #[test]
    fn sums_over_label_sets_and_never_matches_a_longer_name() {
        let s = parse(TEXT);
        assert_eq!(sum(&s, "vllm:num_requests_running"), Some(5.0));
        assert_eq!(sum(&s, "vllm:request_success_total"), Some(10.0));
        assert_eq!(sum(&s, "vllm:time_to_first_token_seconds"), None);
        assert_eq!(sum(&s, "absent"), None);
    }

    #[test]
    fn figures_are_deltas_between_scrapes() {
        let before = Snapshot::from_text(TEXT);
        let after = Snapshot::from_text(
            "vllm:prefix_cache_queries_total 3000\nvllm:prefix_cache_hits_total 1250\n\
             vllm:num_preemptions_total 4\nvllm:kv_cache_usage_perc 0.5\n\
             vllm:spec_decode_num_accepted_tokens_total 30\n\
             vllm:spec_decode_num_draft_tokens_total 40\nvllm:num_requests_running 0\n\
             vllm:request_success_total 6\n",
        );
        let mut during = Peaks::default();
        during.observe(&Snapshot::from_text(
            "vllm:num_requests_running 16\nvllm:num_requests_waiting 9\nvllm:kv_cache_usage_perc 0.75\n",
        ));
        during.observe(&Snapshot::from_text("vllm:num_requests_running 4\n"));
        let f = figures(&before, &after, &during);
        assert_eq!(f.prefix_cache_hit_rate, Some(0.5));
        assert_eq!(f.preemptions, Some(4.0));
        assert_eq!(f.kv_cache_usage, Some(0.75));
        assert_eq!(f.peak_requests_running, Some(16.0));
        assert_eq!(f.peak_requests_waiting, Some(9.0));
        assert_eq!(f.spec_decode_acceptance, Some(0.75));
        assert_eq!(f.requests_running, Some(0.0));
        assert_eq!(f.requests_waiting, None);
        // Went down from 10 to 6: the engine restarted, no delta.
        assert_eq!(f.requests_succeeded, None);
        let none = figures(&Snapshot::default(), &Snapshot::default(), &Peaks::default());
        assert_eq!(none, EngineFigures::default());
    }
}
