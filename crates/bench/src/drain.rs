//! Between points: wait until the server has no request left running, so one point's tail
//! does not load the next. Reads vLLM's Prometheus gauges `vllm:num_requests_running` and
//! `vllm:num_requests_waiting`.

use std::future::Future;
use std::time::Duration;

/// The sum of a gauge over all its label sets in Prometheus text, or `None` when absent.
pub fn gauge_sum(text: &str, name: &str) -> Option<f64> {
    let mut found = None;
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('#') {
            continue;
        }
        let Some(rest) = line.strip_prefix(name) else { continue };
        // The name must end here: `name{...} v` or `name v`, not `name_total v`.
        let value_part = if let Some(labels) = rest.strip_prefix('{') {
            match labels.split_once('}') {
                Some((_, v)) => v,
                None => continue,
            }
        } else if rest.starts_with(' ') || rest.starts_with('\t') {
            rest
        } else {
            continue;
        };
        let Some(v) = value_part.split_whitespace().next().and_then(|v| v.parse::<f64>().ok())
        else {
            continue;
        };
        *found.get_or_insert(0.0) += v;
    }
    found
}

/// Requests the server still holds (running + waiting), when its metrics say.
pub fn requests_in_server(text: &str) -> Option<f64> {
    let running = gauge_sum(text, "vllm:num_requests_running")?;
    Some(running + gauge_sum(text, "vllm:num_requests_waiting").unwrap_or(0.0))
}

/// How the wait ended.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Drain {
    /// The server reported no request in flight.
    Drained,
    /// No `/metrics` or no running gauge: the caller should settle for a fixed time.
    Unknown,
    /// Still this many requests after the timeout.
    TimedOut(f64),
}

/// Poll `fetch` (the `/metrics` body, or `None`) every `poll` until the server holds no
/// request, for at most `timeout`.
pub async fn wait_drained<F, Fut>(mut fetch: F, timeout: Duration, poll: Duration) -> Drain
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<String>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let Some(n) = fetch().await.as_deref().and_then(requests_in_server) else {
            return Drain::Unknown;
        };
        if n <= 0.0 {
            return Drain::Drained;
        }
        if tokio::time::Instant::now() >= deadline {
            return Drain::TimedOut(n);
        }
        tokio::time::sleep(poll).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "\
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name=\"a\"} 2.0
vllm:num_requests_running{model_name=\"b\"} 1.0
vllm:num_requests_running_total 99
vllm:num_requests_waiting{model_name=\"a\"} 3
";

    #[test]
    fn sums_a_gauge_over_labels() {
        assert_eq!(gauge_sum(TEXT, "vllm:num_requests_running"), Some(3.0));
        assert_eq!(gauge_sum(TEXT, "vllm:num_requests_waiting"), Some(3.0));
        assert_eq!(gauge_sum(TEXT, "vllm:absent"), None);
        assert_eq!(gauge_sum("x 1\nx 2", "x"), Some(3.0));
        assert_eq!(requests_in_server(TEXT), Some(6.0));
        assert_eq!(requests_in_server("other 1"), None);
    }

    #[tokio::test]
    async fn waits_until_empty_or_gives_up() {
        let mut left = vec!["vllm:num_requests_running 0", "vllm:num_requests_running 2"];
        let d = wait_drained(
            || {
                let t = left.pop().map(String::from);
                async move { t }
            },
            Duration::from_secs(5),
            Duration::from_millis(1),
        )
        .await;
        assert_eq!(d, Drain::Drained);
        let d = wait_drained(|| async { None }, Duration::from_secs(5), Duration::ZERO).await;
        assert_eq!(d, Drain::Unknown);
        let busy = || async { Some("vllm:num_requests_running 1".to_string()) };
        let d = wait_drained(busy, Duration::from_millis(20), Duration::from_millis(5)).await;
        assert_eq!(d, Drain::TimedOut(1.0));
    }
}
