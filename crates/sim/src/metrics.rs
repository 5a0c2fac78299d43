//! Prometheus metrics under vLLM's names (`vllm:*`), lock-free on the stream path.

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use crate::stepper::Gauges;

/// vLLM's buckets for `vllm:time_to_first_token_seconds`.
pub const TTFT_BUCKETS: &[f64] = &[
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
    20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
];
/// vLLM's buckets for `vllm:inter_token_latency_seconds`.
pub const ITL_BUCKETS: &[f64] = &[
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
    40.0, 80.0,
];
/// vLLM's buckets for `vllm:e2e_request_latency_seconds`.
pub const E2E_BUCKETS: &[f64] = &[
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0,
    480.0, 960.0, 1920.0, 7680.0,
];

/// A fixed-bucket histogram of seconds, observed in nanoseconds.
#[derive(Debug)]
pub struct Histogram {
    bounds: &'static [f64],
    /// Non-cumulative counts per bucket, plus one for +Inf.
    counts: Vec<AtomicU64>,
    sum_ns: AtomicU64,
}

impl Histogram {
    pub fn new(bounds: &'static [f64]) -> Self {
        Self {
            bounds,
            counts: (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect(),
            sum_ns: AtomicU64::new(0),
        }
    }

    pub fn observe_ns(&self, ns: u64) {
        let secs = ns as f64 / 1e9;
        let i = self.bounds.iter().position(|&b| secs <= b).unwrap_or(self.bounds.len());
        self.counts[i].fetch_add(1, Relaxed);
        self.sum_ns.fetch_add(ns, Relaxed);
    }

    fn render(&self, out: &mut String, name: &str, help: &str, labels: &str) {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
        let mut cum = 0u64;
        for (i, c) in self.counts.iter().enumerate() {
            cum += c.load(Relaxed);
            let le = self.bounds.get(i).map_or("+Inf".to_string(), |b| format!("{b:?}"));
            let _ = writeln!(out, "{name}_bucket{{{labels},le=\"{le}\"}} {:?}", cum as f64);
        }
        let sum = self.sum_ns.load(Relaxed) as f64 / 1e9;
        let _ = writeln!(out, "{name}_count{{{labels}}} {:?}", cum as f64);
        let _ = writeln!(out, "{name}_sum{{{labels}}} {sum:?}");
    }
}

/// Every metric the sim exports.
#[derive(Debug)]
pub struct Metrics {
    pub running: AtomicU64,
    pub waiting: AtomicU64,
    pub ttft: Histogram,
    pub itl: Histogram,
    pub e2e: Histogram,
    pub prompt_tokens: AtomicU64,
    pub generation_tokens: AtomicU64,
    pub success_stop: AtomicU64,
    pub success_length: AtomicU64,
    pub success_abort: AtomicU64,
}

impl Default for Metrics {
    fn default() -> Self {
        Self {
            running: AtomicU64::new(0),
            waiting: AtomicU64::new(0),
            ttft: Histogram::new(TTFT_BUCKETS),
            itl: Histogram::new(ITL_BUCKETS),
            e2e: Histogram::new(E2E_BUCKETS),
            prompt_tokens: AtomicU64::new(0),
            generation_tokens: AtomicU64::new(0),
            success_stop: AtomicU64::new(0),
            success_length: AtomicU64::new(0),
            success_abort: AtomicU64::new(0),
        }
    }
}

/// Escape a Prometheus label value.
fn label_value(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

impl Metrics {
    /// The Prometheus text exposition, labelled like vLLM (`model_name`, `engine`). With
    /// `engine` (engine-model mode), running and waiting are the engine's, and its KV-cache
    /// usage, preemptions and prefix-cache counters are added, as vLLM V1 names them.
    pub fn render_with(&self, model: &str, engine: Option<&Gauges>) -> String {
        let labels = format!("model_name=\"{}\",engine=\"0\"", label_value(model));
        let mut out = String::with_capacity(8192);
        let gauge = |out: &mut String, name: &str, help: &str, v: u64| {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge");
            let _ = writeln!(out, "{name}{{{labels}}} {:?}", v as f64);
        };
        let (running, waiting) = match engine {
            Some(g) => (&g.running, &g.waiting),
            None => (&self.running, &self.waiting),
        };
        gauge(
            &mut out,
            "vllm:num_requests_running",
            "Number of requests in model execution batches.",
            running.load(Relaxed),
        );
        gauge(
            &mut out,
            "vllm:num_requests_waiting",
            "Number of requests waiting to be processed.",
            waiting.load(Relaxed),
        );
        if let Some(g) = engine {
            let name = "vllm:kv_cache_usage_perc";
            let _ = writeln!(out, "# HELP {name} KV-cache usage. 1 means 100 percent usage.");
            let _ = writeln!(out, "# TYPE {name} gauge\n{name}{{{labels}}} {:?}", g.kv_usage());
        }
        let counter = |out: &mut String, name: &str, help: &str, v: u64| {
            let _ = writeln!(out, "# HELP {name}_total {help}\n# TYPE {name}_total counter");
            let _ = writeln!(out, "{name}_total{{{labels}}} {:?}", v as f64);
        };
        counter(
            &mut out,
            "vllm:prompt_tokens",
            "Number of prefill tokens processed.",
            self.prompt_tokens.load(Relaxed),
        );
        counter(
            &mut out,
            "vllm:generation_tokens",
            "Number of generation tokens processed.",
            self.generation_tokens.load(Relaxed),
        );
        if let Some(g) = engine {
            counter(
                &mut out,
                "vllm:num_preemptions",
                "Cumulative number of preemption from the engine.",
                g.preemptions.load(Relaxed),
            );
            counter(
                &mut out,
                "vllm:prefix_cache_queries",
                "Prefix cache queries, in terms of number of queried tokens.",
                g.prefix_queries.load(Relaxed),
            );
            counter(
                &mut out,
                "vllm:prefix_cache_hits",
                "Prefix cache hits, in terms of number of cached tokens.",
                g.prefix_hits.load(Relaxed),
            );
            let drafted = g.spec_drafted.load(Relaxed);
            if drafted > 0 {
                counter(
                    &mut out,
                    "vllm:spec_decode_num_draft_tokens",
                    "Number of draft tokens.",
                    drafted,
                );
                counter(
                    &mut out,
                    "vllm:spec_decode_num_accepted_tokens",
                    "Number of accepted tokens.",
                    g.spec_accepted.load(Relaxed),
                );
            }
        }
        let name = "vllm:request_success_total";
        let _ = writeln!(out, "# HELP {name} Count of successfully processed requests.");
        let _ = writeln!(out, "# TYPE {name} counter");
        for (reason, v) in [
            ("stop", &self.success_stop),
            ("length", &self.success_length),
            ("abort", &self.success_abort),
        ] {
            let v = v.load(Relaxed);
            let _ = writeln!(out, "{name}{{{labels},finished_reason=\"{reason}\"}} {:?}", v as f64);
        }
        self.ttft.render(
            &mut out,
            "vllm:time_to_first_token_seconds",
            "Histogram of time to first token in seconds.",
            &labels,
        );
        self.itl.render(
            &mut out,
            "vllm:inter_token_latency_seconds",
            "Histogram of inter-token latency in seconds.",
            &labels,
        );
        self.e2e.render(
            &mut out,
            "vllm:e2e_request_latency_seconds",
            "Histogram of e2e request latency in seconds.",
            &labels,
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_is_cumulative_with_sum_and_count() {
        let h = Histogram::new(&[0.01, 0.1]);
        h.observe_ns(5_000_000);
        h.observe_ns(50_000_000);
        h.observe_ns(500_000_000);
        let mut s = String::new();
        h.render(&mut s, "x", "help", "model_name=\"m\"");
        assert!(s.contains("x_bucket{model_name=\"m\",le=\"0.01\"} 1.0\n"), "{s}");
        assert!(s.contains("x_bucket{model_name=\"m\",le=\"0.1\"} 2.0\n"), "{s}");
        assert!(s.contains("x_bucket{model_name=\"m\",le=\"+Inf\"} 3.0\n"), "{s}");
        assert!(s.contains("x_count{model_name=\"m\"} 3.0\n"), "{s}");
        assert!(s.contains("x_sum{model_name=\"m\"} 0.555\n"), "{s}");
    }

    #[test]
    fn renders_vllm_names() {
        let m = Metrics::default();
        m.running.store(3, Relaxed);
        let s = m.render_with("my\"model", None);
        assert!(
            s.contains("vllm:num_requests_running{model_name=\"my\\\"model\",engine=\"0\"} 3.0")
        );
        for n in [
            "# TYPE vllm:num_requests_waiting gauge",
            "# TYPE vllm:prompt_tokens_total counter",
            "vllm:generation_tokens_total{",
            "vllm:request_success_total{",
            "vllm:time_to_first_token_seconds_bucket{",
            "vllm:inter_token_latency_seconds_sum{",
            "vllm:e2e_request_latency_seconds_count{",
        ] {
            assert!(s.contains(n), "missing {n}");
        }
        assert!(!s.contains("vllm:kv_cache_usage_perc"));
        let g = Gauges::default();
        g.running.store(7, Relaxed);
        g.kv_usage_bits.store(0.25f64.to_bits(), Relaxed);
        g.preemptions.store(2, Relaxed);
        let s = m.render_with("m", Some(&g));
        assert!(s.contains("vllm:num_requests_running{model_name=\"m\",engine=\"0\"} 7.0"), "{s}");
        assert!(s.contains("vllm:kv_cache_usage_perc{model_name=\"m\",engine=\"0\"} 0.25"), "{s}");
        assert!(s.contains("vllm:num_preemptions_total{model_name=\"m\",engine=\"0\"} 2.0"), "{s}");
    }
}
