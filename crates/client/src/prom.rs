//! Prometheus text exposition (what an engine's `/metrics` serves), parsed, and reduced to
//! the engine's own series: what a run keeps of each scrape (see [`engine_series`]).

use std::collections::BTreeMap;

/// One sample line: `name{label="value",...} value [timestamp]`.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// The metric name, e.g. `vllm:num_requests_running`.
    pub name: String,
    /// The label pairs in the order written, values unescaped.
    pub labels: Vec<(String, String)>,
    /// The sample value (the timestamp, if any, is dropped).
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
#[cfg(test)]
pub(crate) fn sum(samples: &[Sample], name: &str) -> Option<f64> {
    samples.iter().filter(|s| s.name == name).map(|s| s.value).reduce(|a, b| a + b)
}

/// Name prefixes of the engines whose series a run keeps: vLLM, llama.cpp, SGLang.
pub(crate) const ENGINE_PREFIXES: [&str; 3] = ["vllm:", "llamacpp:", "sglang:"];

/// True for a gauge that is a fraction of a whole (KV-cache usage, a hit rate): over several
/// label sets (data-parallel engines, ranks) the largest is kept, since a sum means nothing.
pub(crate) fn is_fraction(name: &str) -> bool {
    ["usage", "_perc", "_ratio", "_rate"].iter().any(|k| name.contains(k))
}

pub use servelab_records::PROCESS_START_SERIES as PROCESS_START;

/// The engine's series of one scrape: every sample whose name starts with `vllm:`,
/// `llamacpp:` or `sglang:`, histogram buckets dropped, summed over label sets (the largest
/// for a fraction of a whole, such as KV-cache usage), and [`PROCESS_START`] (the latest of
/// several processes'). Non-finite values are dropped.
pub fn engine_series(text: &str) -> BTreeMap<String, f64> {
    let mut out: BTreeMap<String, f64> = BTreeMap::new();
    for s in parse(text) {
        let start = s.name == PROCESS_START;
        if !(start || ENGINE_PREFIXES.iter().any(|p| s.name.starts_with(p)))
            || s.name.ends_with("_bucket")
            || !s.value.is_finite()
        {
            continue;
        }
        let fraction = start || is_fraction(&s.name);
        out.entry(s.name)
            .and_modify(|v| *v = if fraction { v.max(s.value) } else { *v + s.value })
            .or_insert(s.value);
    }
    out
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
    fn engine_series_keeps_engine_names_sums_counters_and_maxes_fractions() {
        let text = "vllm:num_requests_running{engine=\"0\"} 3\n\
                    vllm:num_requests_running{engine=\"1\"} 2\n\
                    vllm:kv_cache_usage_perc{engine=\"0\"} 0.25\n\
                    vllm:kv_cache_usage_perc{engine=\"1\"} 0.75\n\
                    vllm:time_to_first_token_seconds_bucket{le=\"0.1\"} 4\n\
                    vllm:time_to_first_token_seconds_sum 1.5\n\
                    vllm:time_to_first_token_seconds_count 4\n\
                    llamacpp:tokens_predicted_total 640\n\
                    sglang:token_usage 0.5\n\
                    process_cpu_seconds_total 9\n\
                    vllm:odd NaN\n";
        let s = engine_series(text);
        let want: BTreeMap<String, f64> = [
            ("llamacpp:tokens_predicted_total", 640.0),
            ("sglang:token_usage", 0.5),
            ("vllm:kv_cache_usage_perc", 0.75),
            ("vllm:num_requests_running", 5.0),
            ("vllm:time_to_first_token_seconds_count", 4.0),
            ("vllm:time_to_first_token_seconds_sum", 1.5),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        assert_eq!(s, want);
        assert!(engine_series("# only comments\n").is_empty());
    }
}
