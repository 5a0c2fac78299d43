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

/// The starts (+1) and ends (−1) of non-empty intervals in time order; at equal times ends
/// sort before starts, so back-to-back requests on one slot count once.
fn changes(intervals: &[(Nanos, Nanos)]) -> Vec<(Nanos, i64)> {
    let mut events: Vec<(Nanos, i64)> = Vec::with_capacity(intervals.len() * 2);
    for &(start, end) in intervals.iter().filter(|(s, e)| e > s) {
        events.push((start, 1));
        events.push((end, -1));
    }
    events.sort_unstable();
    events
}

/// Peak number of requests in flight over half-open intervals `[start, end)`: an exact sweep
/// line where, at equal times, an end is processed before a start (so back-to-back requests
/// on one slot count once).
pub fn peak_concurrency(intervals: &[(Nanos, Nanos)]) -> u64 {
    let events = changes(intervals);
    let (mut now, mut peak) = (0i64, 0i64);
    for (_, d) in events {
        now += d;
        peak = peak.max(now);
    }
    peak as u64
}

/// Requests in flight over half-open intervals `[start, end)`, on the grid of instants
/// `k·grain` (k = 0, 1, … up to the grain of the last end): per grain, the count at its start
/// instant and the most at any instant within `[k·grain, (k+1)·grain)`. Summed over the
/// shards of one run, the first is the run's exact count at those instants and the second
/// bounds the run's count within each grain from above. Grains past [`MAX_WINDOWS`] are left
/// out; a `grain_ns` of 0 is taken as 1.
pub fn concurrency_per_grain(intervals: &[(Nanos, Nanos)], grain_ns: u64) -> (Vec<u64>, Vec<u64>) {
    let g = grain_ns.max(1);
    let events = changes(intervals);
    let Some(&(last, _)) = events.last() else { return (Vec::new(), Vec::new()) };
    let n = usize::try_from(last / g).map_or(MAX_WINDOWS, |k| (k + 1).min(MAX_WINDOWS));
    let (mut at, mut most) = (vec![0u64; n], vec![0u64; n]);
    let (mut now, mut next) = (0i64, 0usize);
    let mut i = 0;
    while i < events.len() {
        let t = events[i].0;
        // Grains starting before `t` see the count as it stood since the previous instant.
        while next < n && (next as u64) * g < t {
            at[next] = now as u64;
            most[next] = most[next].max(now as u64);
            next += 1;
        }
        while i < events.len() && events[i].0 == t {
            now += events[i].1;
            i += 1;
        }
        if let Some(m) = usize::try_from(t / g).ok().and_then(|k| most.get_mut(k)) {
            *m = (*m).max(now as u64);
        }
    }
    at[next..].fill(now as u64);
    (at, most)
}

/// Time-weighted mean number of requests in flight over a span of `span_ns`: the sum of the
/// interval lengths divided by the span (0 for an empty span).
pub fn mean_concurrency(intervals: &[(Nanos, Nanos)], span_ns: u64) -> f64 {
    if span_ns == 0 {
        return 0.0;
    }
    busy_ns(intervals) as f64 / span_ns as f64
}

/// The summed lengths of the intervals, ns (what [`mean_concurrency`] divides by the span).
pub fn busy_ns(intervals: &[(Nanos, Nanos)]) -> u128 {
    intervals.iter().map(|&(s, e)| u128::from(e.saturating_sub(s))).sum()
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
    fn concurrency_on_a_grid_is_exact_at_its_instants_and_bounded_between() {
        // [0, 25) and [5, 12) and [12, 30): two at once from 5 to 25 (12 hands over).
        let iv = [(0, 25), (5, 12), (12, 30), (7, 7)];
        let (at, most) = concurrency_per_grain(&iv, 10);
        // At 0: one; at 10: two; at 20: two; at 30 all have ended.
        assert_eq!(at, vec![1, 2, 2, 0]);
        assert_eq!(most, vec![2, 2, 2, 0]);
        // A request inside one grain shows in its maximum, not at the grid's instants.
        let (at, most) = concurrency_per_grain(&[(0, 100), (31, 38)], 10);
        assert_eq!(at, vec![1; 10].into_iter().chain([0]).collect::<Vec<_>>());
        assert_eq!(most[3], 2);
        assert_eq!(most.iter().max(), Some(&2));
        assert_eq!(concurrency_per_grain(&[], 10), (vec![], vec![]));
        // Back to back on one slot at a grid instant: one in flight, as the sweep line says.
        assert_eq!(concurrency_per_grain(&[(0, 10), (10, 20)], 10), (vec![1, 1, 0], vec![1, 1, 0]));
    }

    #[test]
    fn mean_concurrency_is_busy_time_over_span() {
        assert_eq!(mean_concurrency(&[(0, 10), (5, 20)], 20), 1.25);
        assert_eq!(mean_concurrency(&[(0, 10)], 0), 0.0);
    }
}
