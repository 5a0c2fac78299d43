//! The engine's own account of a run, from its `/metrics` scrapes ([`ServerScrape`]): what it
//! counted (prompt and generated tokens, requests, preemptions, prefix-cache hits, accepted
//! draft tokens), how full it was (requests running and waiting, KV-cache usage), and
//! whether it restarted or stopped answering while the run went on.
//!
//! vLLM, llama.cpp and SGLang name the same quantity differently; each figure lists its
//! names in [`names`]. A counter is a series named `*_total`, `*_sum` or `*_count`; its
//! increase is Prometheus' `increase()`: the sum of the rises between consecutive scrapes,
//! where a fall means the engine restarted and the counter began again from zero.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use servelab_records::{ServerScrape, PROCESS_START_SERIES as PROCESS_START};

use crate::warning::Warning;
use crate::Summary;

/// The names each figure is read from, in order of preference (vLLM V1, vLLM V0,
/// llama.cpp, SGLang).
pub mod names {
    /// Requests the engine is running (gauge).
    pub const RUNNING: &[&str] =
        &["vllm:num_requests_running", "llamacpp:requests_processing", "sglang:num_running_reqs"];
    /// Requests queued in the engine, waiting to be scheduled (gauge).
    pub const WAITING: &[&str] =
        &["vllm:num_requests_waiting", "llamacpp:requests_deferred", "sglang:num_queue_reqs"];
    /// Fraction of the KV cache in use, in [0, 1] (gauge).
    pub const KV_CACHE_USAGE: &[&str] = &[
        "vllm:kv_cache_usage_perc",
        "vllm:gpu_cache_usage_perc",
        "llamacpp:kv_cache_usage_ratio",
        "sglang:token_usage",
    ];
    /// Every prompt token the engine took in, computed or from its cache.
    pub const PROMPT_TOKENS: &[&str] = &["vllm:prompt_tokens_total", "sglang:prompt_tokens_total"];
    /// (computed, from cache) prompt-token counters of engines that count them apart
    /// (llama.cpp's `prompt_tokens_total` excludes cached tokens); the sum is the prompt.
    pub const PROMPT_TOKENS_PARTS: &[(&str, &str)] =
        &[("llamacpp:prompt_tokens_total", "llamacpp:prompt_tokens_cached_total")];
    /// Prompt tokens served from the prefix cache.
    pub const CACHED_PROMPT_TOKENS: &[&str] = &[
        "vllm:prefix_cache_hits_total",
        "llamacpp:prompt_tokens_cached_total",
        "sglang:cached_tokens_total",
    ];
    /// Tokens the engine generated.
    pub const GENERATION_TOKENS: &[&str] = &[
        "vllm:generation_tokens_total",
        "llamacpp:tokens_predicted_total",
        "sglang:generation_tokens_total",
    ];
    /// Requests the engine finished successfully.
    pub const REQUESTS: &[&str] = &["vllm:request_success_total", "sglang:num_requests_total"];
    /// Requests the engine preempted to free KV-cache space.
    pub const PREEMPTIONS: &[&str] = &["vllm:num_preemptions_total"];
    /// (hits, queries) counter pairs, in tokens.
    pub const PREFIX_CACHE: &[(&str, &str)] = &[
        ("vllm:prefix_cache_hits_total", "vllm:prefix_cache_queries_total"),
        ("sglang:cached_tokens_total", "sglang:prompt_tokens_total"),
    ];
    /// (hits, misses) counter pairs, in tokens: the rate is hits / (hits + misses).
    pub const PREFIX_CACHE_PARTS: &[(&str, &str)] =
        &[("llamacpp:prompt_tokens_cached_total", "llamacpp:prompt_tokens_total")];
    /// Hit-rate gauges of engines without the counters.
    pub const PREFIX_CACHE_RATE: &[&str] =
        &["vllm:gpu_prefix_cache_hit_rate", "sglang:cache_hit_rate"];
    /// (accepted, drafted) speculative tokens.
    pub const SPEC_DECODE: &[(&str, &str)] = &[
        ("vllm:spec_decode_num_accepted_tokens_total", "vllm:spec_decode_num_draft_tokens_total"),
        (
            "llamacpp:spec_decode_num_accepted_tokens_total",
            "llamacpp:spec_decode_num_draft_tokens_total",
        ),
    ];
    /// Histograms (without `_sum`/`_count`) of the server's own TTFT, in seconds.
    pub const TTFT: &[&str] =
        &["vllm:time_to_first_token_seconds", "sglang:time_to_first_token_seconds"];
    /// Histograms (without `_sum`/`_count`) of the server's own end-to-end request latency,
    /// in seconds.
    pub const E2E: &[&str] =
        &["vllm:e2e_request_latency_seconds", "sglang:e2e_request_latency_seconds"];
}

/// One point of the engine's timeline (a successful scrape).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EnginePoint {
    /// Seconds since the run origin.
    pub t_s: f64,
    /// Requests the engine was running.
    pub requests_running: Option<f64>,
    /// Requests queued in the engine, waiting to be scheduled.
    pub requests_waiting: Option<f64>,
    /// In [0, 1].
    pub kv_cache_usage: Option<f64>,
    /// Generated tokens per second since the previous successful scrape (none across a
    /// restart).
    pub generation_tokens_per_s: Option<f64>,
}

/// What the engine's `/metrics` said about a run. Absent figures are `None`: the engine does
/// not export them.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct EngineMetrics {
    /// Whose names the scrapes carried: `vllm`, `llamacpp` or `sglang`.
    pub engine: String,
    /// Scrapes taken, failed ones included.
    pub scrapes: u64,
    /// Scrapes that failed (no answer, an HTTP error, no engine series).
    pub failed_scrapes: u64,
    /// Seconds since the origin of each scrape that found a counter lower than the scrape
    /// before: the engine restarted between the two.
    pub restarts_s: Vec<f64>,
    /// Seconds of each good scrape after failed ones where nothing tells whether the engine
    /// restarted (no `process_start_time_seconds`, no counter fell): its counters are not
    /// summed across the gap, so the counted figures are missing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unknown_gaps_s: Vec<f64>,
    /// `[from, to]` seconds of each run of failed scrapes (to the next good one, if any).
    pub unreachable_s: Vec<[f64; 2]>,
    /// The first failure message of each unreachable span.
    pub unreachable_errors: Vec<String>,

    /// Counter increases from the last scrape at or before the run origin to the last one.
    /// Every prompt token the engine took in (computed, or served from its prefix cache).
    pub prompt_tokens: Option<f64>,
    /// Of those, the ones served from the prefix cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_prompt_tokens: Option<f64>,
    /// Tokens the engine generated.
    pub generation_tokens: Option<f64>,
    /// Requests the engine finished successfully.
    pub requests_finished: Option<f64>,
    /// Requests the engine preempted to free KV-cache space.
    pub preemptions: Option<f64>,
    /// Prefix-cache hits / queries (tokens) over the run, in [0, 1].
    pub prefix_cache_hit_rate: Option<f64>,
    /// Accepted / drafted speculative tokens over the run.
    pub spec_decode_acceptance: Option<f64>,
    /// The server's own mean TTFT and E2E over the run (its histograms' sum / count), ms.
    pub server_mean_ttft_ms: Option<f64>,
    /// The server's own mean end-to-end request latency over the run, ms.
    pub server_mean_e2e_ms: Option<f64>,

    /// Gauges: the largest value of any scrape, and the mean of the scrapes taken while the
    /// run went on (origin to the end of the last request).
    /// Most requests running at once.
    pub peak_requests_running: Option<f64>,
    /// Mean requests running.
    pub mean_requests_running: Option<f64>,
    /// Most requests waiting at once.
    pub peak_requests_waiting: Option<f64>,
    /// Mean requests waiting.
    pub mean_requests_waiting: Option<f64>,
    /// Highest KV-cache usage, in [0, 1].
    pub peak_kv_cache_usage: Option<f64>,
    /// Mean KV-cache usage, in [0, 1].
    pub mean_kv_cache_usage: Option<f64>,

    /// Every counter's increase over the run, by the engine's own name.
    pub increases: BTreeMap<String, f64>,
    /// The timeline of the run, one point per successful scrape.
    pub series: Vec<EnginePoint>,
}

/// True for a counter (`*_total`, and a histogram's or summary's `*_sum` and `*_count`).
pub fn is_counter(name: &str) -> bool {
    name.ends_with("_total") || name.ends_with("_sum") || name.ends_with("_count")
}

/// What happened to the engine between two consecutive good scrapes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Between {
    /// The same process, counting on.
    Same,
    /// It restarted: its start instant changed, or a counter fell.
    Restarted,
    /// Scrapes failed in between and nothing says whether it restarted: a new process may
    /// already have counted past the old one's totals.
    Unknown,
}

/// What happened between each good scrape and the one before (`[0]` is for the first).
fn between(scrapes: &[ServerScrape], ok: &[&ServerScrape], counters: &[Vec<f64>]) -> Vec<Between> {
    let mut out = vec![Between::Same];
    for i in 1..ok.len() {
        let start = |s: &ServerScrape| s.values.get(PROCESS_START).copied();
        let (a, b) = (ok[i - 1], ok[i]);
        let fell = counters.iter().any(|v| v[i] < v[i - 1]);
        let gap = scrapes.iter().any(|s| s.error.is_some() && s.t_ms > a.t_ms && s.t_ms < b.t_ms);
        out.push(match (start(a), start(b)) {
            // A second's tolerance: the value is a float some exporters round.
            (Some(x), Some(y)) if (x - y).abs() > 1.0 => Between::Restarted,
            _ if fell => Between::Restarted,
            (Some(_), Some(_)) => Between::Same,
            _ if gap => Between::Unknown,
            _ => Between::Same,
        });
    }
    out
}

/// A counter's increase over consecutive values, knowing what happened between them: after a
/// restart the value is the rise (the counter began again from zero); `None` across an
/// unknown gap (the sum could be off by the old process's whole count).
fn increase_between(values: &[f64], between: &[Between]) -> Option<f64> {
    if values.len() < 2 {
        return None;
    }
    let mut sum = 0.0;
    for i in 1..values.len() {
        sum += match between[i] {
            Between::Same if values[i] >= values[i - 1] => values[i] - values[i - 1],
            Between::Same | Between::Restarted => values[i],
            Between::Unknown => return None,
        };
    }
    Some(sum)
}

/// A counter's value in each scrape. A labelled counter appears at its first event, so
/// before it appears it is 0; a scrape that lacks it later keeps the value before (a
/// partial answer is not a restart; a restart shows as a fall where it is present).
fn counter_values(scrapes: &[&ServerScrape], name: &str) -> Vec<f64> {
    let mut last = 0.0;
    scrapes
        .iter()
        .map(|s| {
            last = s.values.get(name).copied().unwrap_or(last);
            last
        })
        .collect()
}

/// The first of `names` present in `s`.
fn first<'a>(s: &'a ServerScrape, names: &[&str]) -> Option<(&'a str, f64)> {
    names.iter().find_map(|n| s.values.get_key_value(*n)).map(|(k, v)| (k.as_str(), *v))
}

fn mean(v: &[f64]) -> Option<f64> {
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

fn ratio(num: Option<f64>, den: Option<f64>) -> Option<f64> {
    match (num, den) {
        (Some(n), Some(d)) if d > 0.0 => Some(n / d),
        _ => None,
    }
}

/// Reduces a run's scrapes (in time order) to its engine figures. `span_ms` is how long the
/// run lasted from its origin (the gauges' means cover `[0, span_ms]`). `None` when no
/// scrape succeeded.
pub fn summarize(scrapes: &[ServerScrape], span_ms: f64) -> Option<EngineMetrics> {
    let ok: Vec<&ServerScrape> = scrapes.iter().filter(|s| s.error.is_none()).collect();
    if ok.is_empty() {
        return None;
    }
    // Counters count from the last good scrape at or before the origin (warm-ups before it
    // are not the run's).
    let base = ok.iter().rposition(|s| s.t_ms <= 0.0).unwrap_or(0);
    let counter_names: Vec<&String> = {
        let mut v: Vec<&String> =
            ok.iter().flat_map(|s| s.values.keys()).filter(|n| is_counter(n)).collect();
        v.sort();
        v.dedup();
        v
    };
    let all: Vec<Vec<f64>> = counter_names.iter().map(|n| counter_values(&ok, n)).collect();
    let between = between(scrapes, &ok, &all);
    let increases: BTreeMap<String, f64> = counter_names
        .iter()
        .zip(&all)
        .filter_map(|(n, v)| {
            increase_between(&v[base..], &between[base..]).map(|d| ((*n).clone(), d))
        })
        .collect();
    let unknown_gaps_s: Vec<f64> = (base + 1..ok.len())
        .filter(|&i| between[i] == Between::Unknown)
        .map(|i| ok[i].t_ms / 1e3)
        .collect();
    let inc = |names: &[&str]| names.iter().find_map(|n| increases.get(*n).copied());
    let pair = |pairs: &[(&str, &str)]| {
        pairs
            .iter()
            .find_map(|(a, b)| ratio(increases.get(*a).copied(), increases.get(*b).copied()))
    };
    // Both parts, or the one present (an engine may export a counter only once it moved).
    let sum_parts = |pairs: &[(&str, &str)]| {
        pairs.iter().find_map(|(a, b)| {
            let (a, b) = (increases.get(*a).copied(), increases.get(*b).copied());
            a.or(b).map(|_| a.unwrap_or(0.0) + b.unwrap_or(0.0))
        })
    };
    let hist_mean_ms = |names: &[&str]| {
        names.iter().find_map(|n| {
            let sum = increases.get(&format!("{n}_sum")).copied();
            let count = increases.get(&format!("{n}_count")).copied();
            ratio(sum, count).map(|s| s * 1e3)
        })
    };

    let restarts_s: Vec<f64> = (1..ok.len())
        .filter(|&i| between[i] == Between::Restarted)
        .map(|i| ok[i].t_ms / 1e3)
        .collect();
    let (unreachable_s, unreachable_errors) = unreachable(scrapes);

    let series = timeline(&ok);
    let during: Vec<&EnginePoint> =
        series.iter().filter(|p| p.t_s >= 0.0 && p.t_s * 1e3 <= span_ms).collect();
    // Gauges over the run only: a scrape before it shows the previous load, one after it the
    // drained engine. A run shorter than the scrape interval has no scrape inside it, and its
    // peak is unknown (shown as missing), not the 0 of an idle engine.
    let gauge = |f: fn(&EnginePoint) -> Option<f64>| {
        let peak = during.iter().filter_map(|p| f(p)).reduce(f64::max);
        let m = mean(&during.iter().filter_map(|p| f(p)).collect::<Vec<_>>());
        (peak, m)
    };
    let (peak_running, mean_running) = gauge(|p| p.requests_running);
    let (peak_waiting, mean_waiting) = gauge(|p| p.requests_waiting);
    let (peak_kv, mean_kv) = gauge(|p| p.kv_cache_usage);

    let last = ok[ok.len() - 1];
    Some(EngineMetrics {
        engine: engine_of(&ok),
        scrapes: scrapes.len() as u64,
        failed_scrapes: (scrapes.len() - ok.len()) as u64,
        restarts_s,
        unknown_gaps_s,
        unreachable_s,
        unreachable_errors,
        prompt_tokens: inc(names::PROMPT_TOKENS).or_else(|| sum_parts(names::PROMPT_TOKENS_PARTS)),
        cached_prompt_tokens: inc(names::CACHED_PROMPT_TOKENS),
        generation_tokens: inc(names::GENERATION_TOKENS),
        requests_finished: inc(names::REQUESTS),
        preemptions: inc(names::PREEMPTIONS),
        prefix_cache_hit_rate: pair(names::PREFIX_CACHE)
            .or_else(|| {
                names::PREFIX_CACHE_PARTS.iter().find_map(|(hits, misses)| {
                    let h = increases.get(*hits).copied();
                    ratio(h, Some(h? + increases.get(*misses).copied().unwrap_or(0.0)))
                })
            })
            .or_else(|| first(last, names::PREFIX_CACHE_RATE).map(|(_, v)| v)),
        spec_decode_acceptance: pair(names::SPEC_DECODE),
        server_mean_ttft_ms: hist_mean_ms(names::TTFT),
        server_mean_e2e_ms: hist_mean_ms(names::E2E),
        peak_requests_running: peak_running,
        mean_requests_running: mean_running,
        peak_requests_waiting: peak_waiting,
        mean_requests_waiting: mean_waiting,
        peak_kv_cache_usage: peak_kv,
        mean_kv_cache_usage: mean_kv,
        increases,
        series,
    })
}

/// Puts the engine's figures of a run into its summary, with a warning for each thing they
/// show that the reader must know: the engine restarted, `/metrics` stopped answering, or
/// the engine generated a different number of tokens than a run without failures received
/// (other traffic on the server, or a client or server miscount).
pub fn attach(summary: &mut Summary, scrapes: &[ServerScrape]) {
    let span_ms = summary.duration_s * 1e3;
    let Some(m) = summarize(scrapes, span_ms) else {
        return;
    };
    for t in &m.restarts_s {
        summary.warnings.push(Warning::EngineRestarted { at_s: *t });
    }
    for t in &m.unknown_gaps_s {
        summary.warnings.push(Warning::MetricsGap { at_s: *t });
    }
    for (span, e) in m.unreachable_s.iter().zip(&m.unreachable_errors) {
        let (from_s, to_s, error) = (span[0], span[1], e.clone());
        summary.warnings.push(Warning::MetricsUnreachable { from_s, to_s, error });
    }
    if let Some(g) = m.generation_tokens {
        let client = summary.total_output_tokens as f64;
        if summary.failed == 0 && m.restarts_s.is_empty() && (g - client).abs() > client * 0.01 {
            summary.warnings.push(Warning::TokenCountMismatch { engine: g, client });
        }
    }
    summary.engine = Some(m);
}

/// The engine whose prefix most series carry.
fn engine_of(ok: &[&ServerScrape]) -> String {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for name in ok.iter().flat_map(|s| s.values.keys()) {
        if let Some((prefix, _)) = name.split_once(':') {
            *counts.entry(prefix).or_default() += 1;
        }
    }
    counts.into_iter().max_by_key(|(_, n)| *n).map(|(p, _)| p.to_string()).unwrap_or_default()
}

/// Runs of failed scrapes: `[first failed, next good or last failed]` seconds, and the first
/// message of each.
fn unreachable(scrapes: &[ServerScrape]) -> (Vec<[f64; 2]>, Vec<String>) {
    let (mut spans, mut errors) = (Vec::new(), Vec::new());
    let mut i = 0;
    while i < scrapes.len() {
        let Some(e) = &scrapes[i].error else {
            i += 1;
            continue;
        };
        let from = scrapes[i].t_ms / 1e3;
        let mut j = i;
        while j + 1 < scrapes.len() && scrapes[j + 1].error.is_some() {
            j += 1;
        }
        let to = scrapes.get(j + 1).unwrap_or(&scrapes[j]).t_ms / 1e3;
        spans.push([from, to]);
        errors.push(e.clone());
        i = j + 1;
    }
    (spans, errors)
}

/// One point per good scrape, with the generation rate since the one before.
fn timeline(ok: &[&ServerScrape]) -> Vec<EnginePoint> {
    let mut out = Vec::with_capacity(ok.len());
    for (i, s) in ok.iter().enumerate() {
        let rate = i.checked_sub(1).and_then(|j| {
            let prev = ok[j];
            let (name, now) = first(s, names::GENERATION_TOKENS)?;
            let before = prev.values.get(name).copied().unwrap_or(0.0);
            let dt = (s.t_ms - prev.t_ms) / 1e3;
            (now >= before && dt > 0.0).then(|| (now - before) / dt)
        });
        out.push(EnginePoint {
            t_s: s.t_ms / 1e3,
            requests_running: first(s, names::RUNNING).map(|(_, v)| v),
            requests_waiting: first(s, names::WAITING).map(|(_, v)| v),
            kv_cache_usage: first(s, names::KV_CACHE_USAGE).map(|(_, v)| v),
            generation_tokens_per_s: rate,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scrape(t_ms: f64, kv: &[(&str, f64)]) -> ServerScrape {
        ServerScrape {
            t_ms,
            values: kv.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
            error: None,
        }
    }

    fn failed(t_ms: f64, e: &str) -> ServerScrape {
        ServerScrape { t_ms, values: BTreeMap::new(), error: Some(e.into()) }
    }

    #[test]
    fn increase_adds_rises_and_restarts_from_zero() {
        use Between::{Restarted as R, Same as S, Unknown as U};
        assert_eq!(increase_between(&[], &[]), None);
        assert_eq!(increase_between(&[5.0], &[S]), None);
        assert_eq!(increase_between(&[5.0, 7.0, 10.0], &[S, S, S]), Some(5.0));
        // 10 -> 4: restarted, so 4 were counted after it.
        assert_eq!(increase_between(&[5.0, 10.0, 4.0, 6.0], &[S, S, S, S]), Some(11.0));
        // A restart its start instant told of, though the new count already passed the old.
        assert_eq!(increase_between(&[5.0, 10.0, 12.0], &[S, S, R]), Some(17.0));
        // Across an unknown gap the sum is not known.
        assert_eq!(increase_between(&[5.0, 10.0, 12.0], &[S, S, U]), None);
    }

    #[test]
    fn a_restart_is_told_by_the_start_instant_when_no_counter_fell() {
        // The real-engine case: down for under a second, the scrape during it failed, and by
        // the next one the new process had generated more than the old one in all.
        let g = "vllm:generation_tokens_total";
        let p = PROCESS_START;
        let s = vec![
            scrape(0.0, &[(g, 0.0), (p, 1000.0)]),
            scrape(1000.0, &[(g, 300.0), (p, 1000.0)]),
            failed(2000.0, "refused"),
            scrape(3000.0, &[(g, 340.0), (p, 1002.5)]),
            scrape(4000.0, &[(g, 400.0), (p, 1002.5)]),
        ];
        let m = summarize(&s, 4000.0).unwrap();
        assert_eq!(m.restarts_s, vec![3.0]);
        assert!(m.unknown_gaps_s.is_empty());
        // 300 before, 340 by the new process, 60 more: not 300 + 40 + 60.
        assert_eq!(m.generation_tokens, Some(700.0));
        // Without the start instant the same scrapes are an unknown gap: not summed.
        let bare: Vec<ServerScrape> = s
            .iter()
            .map(|x| {
                let mut y = x.clone();
                y.values.remove(p);
                y
            })
            .collect();
        let m = summarize(&bare, 4000.0).unwrap();
        assert!(m.restarts_s.is_empty());
        assert_eq!(m.unknown_gaps_s, vec![3.0]);
        assert_eq!(m.generation_tokens, None);
        // Same process across a failed scrape: summed.
        let mut same = s.clone();
        same[3].values.insert(p.into(), 1000.0);
        same[4].values.insert(p.into(), 1000.0);
        let m = summarize(&same, 4000.0).unwrap();
        assert!(m.restarts_s.is_empty() && m.unknown_gaps_s.is_empty());
        assert_eq!(m.generation_tokens, Some(400.0));
    }

    #[test]
    fn counters_count_from_the_origin_and_gauges_peak_and_average() {
        let g = "vllm:generation_tokens_total";
        let s = vec![
            // Before warm-ups, then at the origin: the run counts from the second.
            scrape(-900.0, &[(g, 0.0), ("vllm:num_requests_running", 0.0)]),
            scrape(0.0, &[(g, 100.0), ("vllm:num_requests_running", 0.0)]),
            scrape(
                1000.0,
                &[
                    (g, 300.0),
                    ("vllm:num_requests_running", 8.0),
                    ("vllm:num_requests_waiting", 2.0),
                    ("vllm:kv_cache_usage_perc", 0.5),
                    ("vllm:prefix_cache_queries_total", 400.0),
                    ("vllm:prefix_cache_hits_total", 100.0),
                    ("vllm:time_to_first_token_seconds_sum", 0.5),
                    ("vllm:time_to_first_token_seconds_count", 10.0),
                ],
            ),
            scrape(
                2000.0,
                &[
                    (g, 700.0),
                    ("vllm:num_requests_running", 4.0),
                    ("vllm:num_requests_waiting", 0.0),
                    ("vllm:kv_cache_usage_perc", 0.25),
                    ("vllm:prefix_cache_queries_total", 800.0),
                    ("vllm:prefix_cache_hits_total", 300.0),
                    ("vllm:time_to_first_token_seconds_sum", 1.0),
                    ("vllm:time_to_first_token_seconds_count", 20.0),
                ],
            ),
            // After the run: idle, outside the gauges' means.
            scrape(2600.0, &[(g, 700.0), ("vllm:num_requests_running", 0.0)]),
        ];
        let m = summarize(&s, 2000.0).unwrap();
        assert_eq!(m.engine, "vllm");
        assert_eq!((m.scrapes, m.failed_scrapes), (5, 0));
        assert_eq!(m.generation_tokens, Some(600.0));
        assert_eq!(m.prompt_tokens, None);
        // Absent before their first event: counted from 0.
        assert_eq!(m.prefix_cache_hit_rate, Some(300.0 / 800.0));
        assert_eq!(m.server_mean_ttft_ms, Some(50.0));
        assert_eq!(m.peak_requests_running, Some(8.0));
        assert_eq!(m.mean_requests_running, Some(4.0));
        assert_eq!(m.peak_requests_waiting, Some(2.0));
        assert_eq!(m.mean_requests_waiting, Some(1.0));
        assert_eq!(m.peak_kv_cache_usage, Some(0.5));
        assert_eq!(m.mean_kv_cache_usage, Some(0.375));
        assert!(m.restarts_s.is_empty());
        assert!(m.unreachable_s.is_empty());
        let rates: Vec<Option<f64>> = m.series.iter().map(|p| p.generation_tokens_per_s).collect();
        assert_eq!(rates, vec![None, Some(100.0 / 0.9), Some(200.0), Some(400.0), Some(0.0)]);
        assert_eq!(m.series[3].t_s, 2.0);
    }

    #[test]
    fn a_run_shorter_than_the_scrape_interval_has_no_peak() {
        // Scrapes before (the previous load still running) and after (drained), none inside.
        let r = "vllm:num_requests_running";
        let s = vec![scrape(-500.0, &[(r, 6.0)]), scrape(900.0, &[(r, 0.0)])];
        let m = summarize(&s, 300.0).unwrap();
        assert_eq!(m.peak_requests_running, None);
        assert_eq!(m.mean_requests_running, None);
    }

    #[test]
    fn a_restart_and_an_outage_are_found_and_counting_goes_on() {
        let g = "llamacpp:tokens_predicted_total";
        let s = vec![
            scrape(0.0, &[(g, 1000.0), ("llamacpp:requests_processing", 0.0)]),
            scrape(1000.0, &[(g, 1064.0), ("llamacpp:requests_processing", 4.0)]),
            failed(2000.0, "GET /metrics: connection refused"),
            failed(3000.0, "GET /metrics: connection refused again"),
            scrape(4000.0, &[(g, 32.0), ("llamacpp:requests_processing", 2.0)]),
            scrape(5000.0, &[(g, 96.0), ("llamacpp:requests_processing", 0.0)]),
        ];
        let m = summarize(&s, 5000.0).unwrap();
        assert_eq!(m.engine, "llamacpp");
        assert_eq!((m.scrapes, m.failed_scrapes), (6, 2));
        assert_eq!(m.restarts_s, vec![4.0]);
        assert_eq!(m.unreachable_s, vec![[2.0, 4.0]]);
        assert_eq!(m.unreachable_errors, vec!["GET /metrics: connection refused".to_string()]);
        assert_eq!(m.generation_tokens, Some(64.0 + 32.0 + 64.0));
        assert_eq!(m.peak_requests_running, Some(4.0));
        // No rate across the restart.
        assert_eq!(m.series[2].generation_tokens_per_s, None);
        assert_eq!(m.series[3].generation_tokens_per_s, Some(64.0));
    }

    #[test]
    fn llamacpp_counts_cached_prompt_tokens_apart() {
        // llama.cpp's prompt_tokens_total excludes the tokens its prompt cache served.
        let (p, c) = ("llamacpp:prompt_tokens_total", "llamacpp:prompt_tokens_cached_total");
        let (a, d) = (
            "llamacpp:spec_decode_num_accepted_tokens_total",
            "llamacpp:spec_decode_num_draft_tokens_total",
        );
        let s = vec![
            scrape(0.0, &[(p, 100.0), (c, 10.0), (a, 0.0), (d, 0.0)]),
            scrape(1000.0, &[(p, 400.0), (c, 110.0), (a, 30.0), (d, 40.0)]),
        ];
        let m = summarize(&s, 1000.0).unwrap();
        assert_eq!(m.prompt_tokens, Some(400.0));
        assert_eq!(m.cached_prompt_tokens, Some(100.0));
        assert_eq!(m.prefix_cache_hit_rate, Some(0.25));
        assert_eq!(m.spec_decode_acceptance, Some(0.75));
        // A cache that never hit: its counter may be absent, the prompt is all computed.
        let s = vec![scrape(0.0, &[(p, 0.0)]), scrape(1000.0, &[(p, 64.0)])];
        let m = summarize(&s, 1000.0).unwrap();
        assert_eq!(m.prompt_tokens, Some(64.0));
        assert_eq!(m.cached_prompt_tokens, None);
        assert_eq!(m.prefix_cache_hit_rate, None);
    }

    #[test]
    fn no_good_scrape_is_no_figures() {
        assert_eq!(summarize(&[], 1.0), None);
        assert_eq!(summarize(&[failed(0.0, "x")], 1.0), None);
        let one = summarize(&[scrape(0.0, &[("sglang:num_running_reqs", 3.0)])], 1.0).unwrap();
        assert_eq!(one.engine, "sglang");
        assert_eq!(one.generation_tokens, None);
        assert_eq!(one.mean_requests_running, Some(3.0));
    }

    #[test]
    fn an_unreachable_span_that_lasts_to_the_end_ends_at_its_last_failure() {
        let s = vec![
            scrape(0.0, &[("vllm:num_requests_running", 1.0)]),
            failed(1.0, "a"),
            failed(2.0, "b"),
        ];
        let m = summarize(&s, 2.0).unwrap();
        assert_eq!(m.unreachable_s, vec![[0.001, 0.002]]);
    }

    #[test]
    fn attach_warns_of_restarts_outages_and_token_disagreement() {
        let mut summary =
            crate::summarize(&[], &servelab_records::RunInfo::default(), &Default::default());
        summary.duration_s = 5.0;
        summary.total_output_tokens = 100;
        let g = "vllm:generation_tokens_total";
        let s = vec![
            scrape(0.0, &[(g, 0.0)]),
            failed(1000.0, "refused"),
            scrape(2000.0, &[(g, 50.0)]),
            scrape(3000.0, &[(g, 10.0)]),
        ];
        attach(&mut summary, &s);
        assert_eq!(summary.warnings.len(), 3, "{:?}", summary.warnings);
        assert!(
            summary.warnings[0].contains("restarted")
                && summary.warnings[0].contains("seen at 3.00 s")
        );
        assert!(summary.warnings[1].contains("answered again at 2.00 s after failing"));
        assert!(summary.warnings[2].contains("from 1.00 s to 2.00 s: refused"));
        // The gap leaves the counted figures out.
        assert_eq!(summary.engine.as_ref().unwrap().generation_tokens, None);

        let mut summary =
            crate::summarize(&[], &servelab_records::RunInfo::default(), &Default::default());
        summary.total_output_tokens = 100;
        attach(&mut summary, &[scrape(0.0, &[(g, 0.0)]), scrape(1.0, &[(g, 150.0)])]);
        assert_eq!(summary.warnings.len(), 1);
        assert!(
            summary.warnings[0].contains("counted 150 generated tokens"),
            "{:?}",
            summary.warnings
        );
        // Agreement within 1 %: no warning; no scrapes: nothing attached.
        let mut summary =
            crate::summarize(&[], &servelab_records::RunInfo::default(), &Default::default());
        summary.total_output_tokens = 100;
        attach(&mut summary, &[scrape(0.0, &[(g, 0.0)]), scrape(1.0, &[(g, 100.0)])]);
        assert!(summary.warnings.is_empty());
        attach(&mut summary, &[]);
        assert!(summary.engine.is_some());
    }
}
