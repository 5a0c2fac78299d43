//! Run-level time series: output tokens per window and concurrent requests.

use servelab_records::Nanos;

/// Most windows a series holds (115 days of 1 s windows): a record with a corrupt timestamp
/// must not make the series allocate without bound.
pub const MAX_WINDOWS: usize = 10_000_000;

/// Output tokens per window `[origin + k·w, origin + (k+1)·w)`, from window 0 to the last
/// window that holds an event. Events before `origin` or past [`MAX_WINDOWS`] are ignored.
/// A `window_ns` of 0 is taken as 1.
pub fn tokens_per_window(events: &[(Nanos, u64)], origin: Nanos, window_ns: u64) -> Vec<u64> {
    let window_ns = window_ns.max(1);
    let index = |t: Nanos| usize::try_from((t - origin) / window_ns).unwrap_or(usize::MAX);
    let in_range = |t: Nanos| t >= origin && index(t) < MAX_WINDOWS;
    let Some(last) = events.iter().filter(|(t, _)| in_range(*t)).map(|(t, _)| index(*t)).max()
    else {
        return Vec::new();
    };
    let mut windows = vec![0u64; last + 1];
    for &(t, k) in events.iter().filter(|(t, _)| in_range(*t)) {
        windows[index(t)] = windows[index(t)].saturating_add(k);
    }
    windows
}

/// Peak number of requests in flight over half-open intervals `[start, end)`: an exact sweep
/// line where, at equal times, an end is processed before a start (so back-to-back requests
/// on one slot count once).
pub fn peak_concurrency(intervals: &[(Nanos, Nanos)]) -> u64 {
    let mut events: Vec<(Nanos, i8)> = Vec::with_capacity(intervals.len() * 2);
    for &(start, end) in intervals.iter().filter(|(s, e)| e > s) {
        events.push((start, 1));
        events.push((end, -1));
    }
    events.sort_unstable();
    let (mut now, mut peak) = (0i64, 0i64);
    for (_, d) in events {
        now += i64::from(d);
        peak = peak.max(now);
    }
    peak as u64
}

/// Time-weighted mean number of requests in flight over a span of `span_ns`: the sum of the
/// interval lengths divided by the span (0 for an empty span).
pub fn mean_concurrency(intervals: &[(Nanos, Nanos)], span_ns: u64) -> f64 {
    if span_ns == 0 {
        return 0.0;
    }
    let busy: u128 = intervals.iter().map(|&(s, e)| u128::from(e.saturating_sub(s))).sum();
    busy as f64 / span_ns as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    #[test]
    fn windows_count_tokens_from_the_origin() {
        let events = [(S / 2, 3), (S + S / 2, 2), (S + 10, 5), (3 * S, 1), (10, 9)];
        // Origin 100 ns: the event at 10 ns is before it and ignored; S + 10 and 3 S fall just
        // short of the next boundary (origin + k·S).
        assert_eq!(tokens_per_window(&events, 100, S), vec![8, 2, 1]);
        // Boundaries are half-open: 100 + 1 s falls in window 1.
        assert_eq!(tokens_per_window(&[(100 + S, 4)], 100, S), vec![0, 4]);
        assert_eq!(tokens_per_window(&[], 0, S), Vec::<u64>::new());
        // A corrupt timestamp far in the future is dropped instead of allocating.
        assert_eq!(tokens_per_window(&[(S, 1), (u64::MAX, 1)], 0, S), vec![0, 1]);
    }

    #[test]
    fn sweep_line_counts_back_to_back_requests_once() {
        assert_eq!(peak_concurrency(&[(0, 10), (10, 20), (20, 30)]), 1);
        assert_eq!(peak_concurrency(&[(0, 10), (5, 20), (9, 12), (12, 13)]), 3);
        assert_eq!(peak_concurrency(&[]), 0);
        assert_eq!(peak_concurrency(&[(5, 5)]), 0);
    }

    #[test]
    fn mean_concurrency_is_busy_time_over_span() {
        assert_eq!(mean_concurrency(&[(0, 10), (5, 20)], 20), 1.25);
        assert_eq!(mean_concurrency(&[(0, 10)], 0), 0.0);
    }
}
