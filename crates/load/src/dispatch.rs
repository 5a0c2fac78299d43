//! What to issue next: the arrival schedule, the request count and the duration limit, in one
//! place shared by everything that issues requests.

use std::sync::Arc;

use crate::{Arrivals, Schedule};

/// One arrival to issue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arrival {
    /// Position among issued requests (0-based).
    pub index: u64,
    /// Position in the request list (cycles in duration mode).
    pub request: usize,
    /// When the schedule says it arrives (ns since the run origin).
    pub scheduled_ns: u64,
}

/// Why issuing stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exhausted {
    /// Every planned request was handed out.
    Requests,
    /// The next arrival (or the next send) falls after the duration limit.
    Duration,
}

/// Hands out arrivals in schedule order until the requests (or the duration) run out.
///
/// Callers that wait for a free concurrency slot check [`Dispatch::past_duration`] with the
/// moment the slot freed: a request that could only start after the limit is not issued.
pub struct Dispatch {
    /// What the schedule draws from (`Burst` for explicit instants).
    arrivals: Arrivals,
    schedule: Schedule,
    requests: usize,
    /// `Some(limit)`: duration mode, requests cycle until the limit.
    duration_ns: Option<u64>,
    issued: u64,
    stopped: Option<Exhausted>,
}

impl Dispatch {
    /// Issue `requests` requests on the given schedule; with `duration_ns` (ns since the run
    /// origin), cycle through them until that limit instead.
    pub fn new(arrivals: Arrivals, seed: u64, requests: usize, duration_ns: Option<u64>) -> Self {
        Self {
            arrivals,
            schedule: Schedule::new(arrivals, seed),
            requests,
            duration_ns,
            issued: 0,
            stopped: if requests == 0 { Some(Exhausted::Requests) } else { None },
        }
    }

    /// Issue one request per instant of `offsets` (ns since the run origin, e.g. a trace's
    /// timestamps), request `i` at `offsets[i]`; with `duration_ns`, stop at that limit.
    pub fn at_offsets(offsets: Arc<[u64]>, duration_ns: Option<u64>) -> Self {
        let requests = offsets.len();
        Self {
            arrivals: Arrivals::Burst,
            schedule: Schedule::at_offsets(offsets),
            requests,
            duration_ns,
            issued: 0,
            stopped: if requests == 0 { Some(Exhausted::Requests) } else { None },
        }
    }

    /// The next arrival, or `None` once issuing is over (see [`Dispatch::stopped`]).
    pub fn next_arrival(&mut self) -> Option<Arrival> {
        if self.stopped.is_some() {
            return None;
        }
        let index = self.issued;
        if self.duration_ns.is_none() && index as usize >= self.requests {
            self.stopped = Some(Exhausted::Requests);
            return None;
        }
        let Some(scheduled_ns) = self.schedule.next() else {
            // A replay's instants ran out (in duration mode too: a trace does not cycle).
            self.stopped = Some(Exhausted::Requests);
            return None;
        };
        if self.past_duration(scheduled_ns) {
            self.stopped = Some(Exhausted::Duration);
            return None;
        }
        self.issued += 1;
        Some(Arrival { index, request: index as usize % self.requests, scheduled_ns })
    }

    /// How many of a cap of `cap` requests in flight can ever be used: no more than the
    /// arrivals there will be. A cap's workers are spawned up front, so a cap far above the
    /// run's size (`--max-concurrency 1000000` for 5 prompts) must not cost a million tasks.
    /// Without a duration the arrivals are the requests (or the instants); with one, a finite
    /// rate bounds them by twice the expected count (a gamma count beyond that has negligible
    /// probability, and even then only a cap that every arrival fills would bind); an endless
    /// burst leaves the cap as it is (`Plan::check` refuses a burst duration without one).
    pub fn most_in_flight(&self, cap: usize) -> usize {
        let arrivals = match (self.duration_ns, self.arrivals) {
            (None, _) => self.requests as f64,
            (Some(_), Arrivals::Burst) => {
                return if self.schedule.is_explicit() { cap.min(self.requests) } else { cap };
            }
            (Some(d), Arrivals::Gamma { rate, .. } | Arrivals::Constant { rate }) => {
                2.0 * rate * d as f64 / 1e9 + 64.0
            }
        };
        // `as` saturates: an absurd rate × duration leaves the cap.
        cap.min(arrivals.ceil() as usize).max(1)
    }

    /// True when `t_ns` is at or after the duration limit (never without one).
    pub fn past_duration(&self, t_ns: u64) -> bool {
        self.duration_ns.is_some_and(|d| t_ns >= d)
    }

    /// Record that a caller stopped for the duration limit after taking an arrival.
    pub fn stop_for_duration(&mut self) {
        self.stopped.get_or_insert(Exhausted::Duration);
    }

    /// Why issuing ended, once it has.
    pub fn stopped(&self) -> Option<Exhausted> {
        self.stopped
    }

    /// Arrivals handed out so far.
    pub fn issued(&self) -> u64 {
        self.issued
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cap_never_spawns_more_workers_than_arrivals() {
        let burst = |n, d| Dispatch::new(Arrivals::Burst, 0, n, d);
        assert_eq!(burst(5, None).most_in_flight(1_000_000), 5);
        assert_eq!(burst(5, None).most_in_flight(usize::MAX), 5);
        assert_eq!(burst(500, None).most_in_flight(8), 8);
        // A burst that cycles for a duration uses the whole cap.
        assert_eq!(burst(5, Some(1_000_000_000)).most_in_flight(300), 300);
        // 4/s for 10 s: at most 2 × 40 + 64 arrivals.
        let paced = Dispatch::new(Arrivals::Constant { rate: 4.0 }, 0, 3, Some(10_000_000_000));
        assert_eq!(paced.most_in_flight(usize::MAX), 144);
        assert_eq!(paced.most_in_flight(16), 16);
        let replay = Dispatch::at_offsets(vec![0, 5, 9].into(), Some(1_000));
        assert_eq!(replay.most_in_flight(usize::MAX), 3);
    }

    fn all(d: &mut Dispatch) -> Vec<(u64, usize, u64)> {
        std::iter::from_fn(|| d.next_arrival())
            .map(|a| (a.index, a.request, a.scheduled_ns))
            .collect()
    }

    #[test]
    fn hands_out_each_request_once_in_schedule_order() {
        let mut d = Dispatch::new(Arrivals::Constant { rate: 10.0 }, 0, 3, None);
        assert_eq!(all(&mut d), vec![(0, 0, 0), (1, 1, 100_000_000), (2, 2, 200_000_000)]);
        assert_eq!(d.stopped(), Some(Exhausted::Requests));
        assert_eq!(d.issued(), 3);
        assert_eq!(d.next_arrival(), None);
    }

    #[test]
    fn duration_mode_cycles_requests_until_the_limit() {
        let mut d = Dispatch::new(Arrivals::Constant { rate: 10.0 }, 0, 2, Some(350_000_000));
        let got = all(&mut d);
        assert_eq!(got.iter().map(|a| a.1).collect::<Vec<_>>(), vec![0, 1, 0, 1]);
        assert_eq!(got.last().unwrap().2, 300_000_000);
        assert_eq!(d.stopped(), Some(Exhausted::Duration));
        assert!(d.past_duration(350_000_000) && !d.past_duration(349_999_999));
    }

    #[test]
    fn a_replay_sends_each_request_at_its_offset_and_never_cycles() {
        let offsets: Arc<[u64]> = Arc::from(vec![0, 40, 40, 900]);
        let mut d = Dispatch::at_offsets(offsets.clone(), None);
        assert_eq!(all(&mut d), vec![(0, 0, 0), (1, 1, 40), (2, 2, 40), (3, 3, 900)]);
        assert_eq!(d.stopped(), Some(Exhausted::Requests));
        let mut d = Dispatch::at_offsets(offsets.clone(), Some(10_000));
        assert_eq!(all(&mut d).len(), 4);
        assert_eq!(d.stopped(), Some(Exhausted::Requests));
        let mut d = Dispatch::at_offsets(offsets, Some(500));
        assert_eq!(all(&mut d).len(), 3);
        assert_eq!(d.stopped(), Some(Exhausted::Duration));
        let mut empty = Dispatch::at_offsets(Arc::from(Vec::new()), None);
        assert_eq!(empty.next_arrival(), None);
    }

    #[test]
    fn a_caller_can_stop_for_the_duration_and_no_requests_is_done_at_once() {
        let mut d = Dispatch::new(Arrivals::Burst, 0, 5, Some(1_000));
        assert!(d.next_arrival().is_some());
        d.stop_for_duration();
        assert_eq!(d.next_arrival(), None);
        assert_eq!(d.stopped(), Some(Exhausted::Duration));
        let mut empty = Dispatch::new(Arrivals::Burst, 0, 0, None);
        assert_eq!(empty.next_arrival(), None);
        assert_eq!(empty.stopped(), Some(Exhausted::Requests));
    }
}
