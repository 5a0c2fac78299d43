//! A request's time limits, the request timeout and the stall limit, enforced with one timer
//! that is touched only when it fires or must fire sooner: not on every poll of the stream.
//!
//! `tokio::time::timeout` polls its timer (and re-registers the waker) every time the wrapped
//! future is polled, i.e. on every network read of every stream: at 1,000 streams that was
//! ~9 % of the client's CPU. Here each poll costs one clock read; the timer is re-armed when
//! it fired early (output kept coming, so the stall limit moved on), when a limit moved
//! earlier, or when the task's waker changed.

use std::future::{poll_fn, Future};
use std::pin::pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Poll, Waker};
use std::time::Duration;

use tokio::time::Instant;

/// Which limit ended a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expired {
    /// No complete response by the request deadline.
    Timeout,
    /// Output had started, then nothing arrived for the stall limit.
    Stalled,
}

/// The limits of one request.
#[derive(Debug)]
pub struct Limits {
    deadline: Instant,
    /// Where `last_output_ns` counts from.
    origin: Instant,
    stall: Option<Duration>,
    /// Nanoseconds since `origin` of the last data once output started; 0: not started.
    last_output_ns: AtomicU64,
}

impl Limits {
    pub fn new(origin: Instant, deadline: Instant, stall: Option<Duration>) -> Limits {
        Limits { deadline, origin, stall, last_output_ns: AtomicU64::new(0) }
    }

    /// Data arrived at `t_ns` (since the origin) after output started: the stall clock
    /// restarts there.
    pub fn output_at(&self, t_ns: u64) {
        self.last_output_ns.store(t_ns.max(1), Ordering::Relaxed);
    }

    /// The earliest instant a limit expires, or the limit already expired at `now`.
    fn next(&self, now: Instant) -> Result<Instant, Expired> {
        if now >= self.deadline {
            return Err(Expired::Timeout);
        }
        let last = self.last_output_ns.load(Ordering::Relaxed);
        match self.stall {
            Some(stall) if last > 0 => {
                let quiet_until = self.origin + Duration::from_nanos(last) + stall;
                if now >= quiet_until {
                    Err(Expired::Stalled)
                } else {
                    Ok(quiet_until.min(self.deadline))
                }
            }
            _ => Ok(self.deadline),
        }
    }
}

/// Run `fut` within `limits`. `fut` is polled first on every wake-up, so a response that
/// completes exactly at a limit still counts.
pub async fn guarded<F: Future>(limits: &Limits, fut: F) -> Result<F::Output, Expired> {
    let mut fut = pin!(fut);
    let mut timer = Box::pin(tokio::time::sleep_until(limits.deadline));
    let mut armed: Option<(Instant, Waker)> = None;
    poll_fn(move |cx| {
        if let Poll::Ready(v) = fut.as_mut().poll(cx) {
            return Poll::Ready(Ok(v));
        }
        let now = Instant::now();
        let next = match limits.next(now) {
            Ok(next) => next,
            Err(e) => return Poll::Ready(Err(e)),
        };
        let rearm = match &armed {
            None => true,
            Some((at, waker)) => now >= *at || next < *at || !waker.will_wake(cx.waker()),
        };
        if rearm {
            timer.as_mut().reset(next);
            if timer.as_mut().poll(cx).is_ready() {
                // Already due (the clock moved on since `now`): look again at once.
                cx.waker().wake_by_ref();
            }
            armed = Some((next, cx.waker().clone()));
        }
        Poll::Pending
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_silent_request_times_out_at_its_deadline() {
        let start = Instant::now();
        let limits = Limits::new(start, start + Duration::from_secs(5), None);
        let r = guarded(&limits, std::future::pending::<()>()).await;
        assert_eq!(r, Err(Expired::Timeout));
        assert_eq!(start.elapsed(), Duration::from_secs(5));
    }

    #[tokio::test(start_paused = true)]
    async fn a_response_that_finishes_first_is_returned() {
        let start = Instant::now();
        let limits = Limits::new(start, start + Duration::from_secs(5), None);
        let r = guarded(&limits, async {
            tokio::time::sleep(Duration::from_secs(2)).await;
            7
        })
        .await;
        assert_eq!(r, Ok(7));
        assert_eq!(start.elapsed(), Duration::from_secs(2));
    }

    #[tokio::test(start_paused = true)]
    async fn output_restarts_the_stall_clock_until_it_stops() {
        let start = Instant::now();
        let limits =
            Limits::new(start, start + Duration::from_secs(60), Some(Duration::from_secs(1)));
        // Output every 0.5 s for 3 s (the limit never expires), then silence.
        let stream = async {
            for i in 1..=6u64 {
                tokio::time::sleep(Duration::from_millis(500)).await;
                limits.output_at(i * 500_000_000);
            }
            std::future::pending::<()>().await
        };
        let r = guarded(&limits, stream).await;
        assert_eq!(r, Err(Expired::Stalled));
        assert_eq!(start.elapsed(), Duration::from_secs(4));
    }

    #[tokio::test(start_paused = true)]
    async fn before_output_only_the_deadline_counts_and_it_caps_the_stall_limit() {
        let start = Instant::now();
        // No output for 10 s is fine before the first token (a long queue or prefill).
        let limits =
            Limits::new(start, start + Duration::from_secs(10), Some(Duration::from_secs(1)));
        assert_eq!(guarded(&limits, std::future::pending::<()>()).await, Err(Expired::Timeout));
        assert_eq!(start.elapsed(), Duration::from_secs(10));
        // Output at 9.5 s: the deadline at 10 s still comes first.
        let start = Instant::now();
        let limits =
            Limits::new(start, start + Duration::from_secs(10), Some(Duration::from_secs(1)));
        let stream = async {
            tokio::time::sleep(Duration::from_millis(9_500)).await;
            limits.output_at(9_500_000_000);
            std::future::pending::<()>().await
        };
        assert_eq!(guarded(&limits, stream).await, Err(Expired::Timeout));
        assert_eq!(start.elapsed(), Duration::from_secs(10));
    }
}
