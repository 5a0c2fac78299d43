//! A precise async timer, shared by the simulator (token due times) and the client (arrival
//! pacing): one dedicated thread, a binary heap of (deadline, waker), and a condvar
//! timed wait with 1 ns timer slack.
//!
//! Why not `tokio::time`: its wheel has 1 ms granularity, so a token due at t fires anywhere in
//! [t, t + 1 ms). Here the thread sleeps until the earliest deadline with a futex timed wait
//! (hrtimer-backed; the 1 ns slack stops the kernel from coalescing it up to 50 µs late), then
//! wakes every future whose deadline has passed in one batch. No busy spinning: an idle timer
//! costs nothing, a busy one costs one wakeup per distinct deadline batch.

#![warn(missing_docs)]
#![cfg_attr(not(test), warn(unused_crate_dependencies))]

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::task::{Context, Poll, Waker};
use std::thread::JoinHandle;
use std::time::Instant;

struct Entry {
    deadline: Instant,
    id: u64,
    waker: Waker,
}

impl PartialEq for Entry {
    fn eq(&self, o: &Self) -> bool {
        self.deadline == o.deadline && self.id == o.id
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Entry {
    // Reversed: BinaryHeap is a max-heap and we want the earliest deadline on top.
    fn cmp(&self, o: &Self) -> Ordering {
        (o.deadline, o.id).cmp(&(self.deadline, self.id))
    }
}

#[derive(Default)]
struct State {
    heap: BinaryHeap<Entry>,
    next_id: u64,
    stop: bool,
}

#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    cv: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave the heap inconsistent: keep going.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn register(&self, deadline: Instant, waker: Waker) {
        let mut st = self.lock();
        let earliest = st.heap.peek().is_none_or(|top| deadline < top.deadline);
        let id = st.next_id;
        st.next_id += 1;
        st.heap.push(Entry { deadline, id, waker });
        drop(st);
        // Only a new earliest deadline changes how long the thread must sleep.
        if earliest {
            self.cv.notify_one();
        }
    }
}

/// Handle to the timer thread; stops it when dropped.
pub struct PreciseTimer {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for PreciseTimer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PreciseTimer").finish_non_exhaustive()
    }
}

impl PreciseTimer {
    /// Start the timer thread.
    pub fn start() -> std::io::Result<Self> {
        let shared = Arc::new(Shared::default());
        let s = shared.clone();
        let thread =
            std::thread::Builder::new().name("servelab-timer".into()).spawn(move || run(&s))?;
        Ok(Self { shared, thread: Some(thread) })
    }

    /// A future that completes at `deadline` (immediately if it has passed).
    pub fn sleep_until(&self, deadline: Instant) -> Sleep {
        Sleep { shared: self.shared.clone(), deadline, waker: None }
    }
}

impl Drop for PreciseTimer {
    fn drop(&mut self) {
        self.shared.lock().stop = true;
        self.shared.cv.notify_one();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The timer thread: wake everything due, then sleep precisely until the next deadline.
fn run(shared: &Shared) {
    set_thread_timer_slack_1ns();
    let mut due: Vec<Waker> = Vec::new();
    let mut st = shared.lock();
    loop {
        if st.stop {
            return;
        }
        let now = Instant::now();
        while st.heap.peek().is_some_and(|top| top.deadline <= now) {
            if let Some(e) = st.heap.pop() {
                due.push(e.waker);
            }
        }
        if !due.is_empty() {
            // Wake outside the lock so registrations from woken tasks never wait on us.
            drop(st);
            due.drain(..).for_each(Waker::wake);
            st = shared.lock();
            continue;
        }
        st = match st.heap.peek().map(|top| top.deadline - now) {
            Some(wait) => {
                shared.cv.wait_timeout(st, wait).map(|r| r.0).unwrap_or_else(|e| e.into_inner().0)
            }
            None => shared.cv.wait(st).unwrap_or_else(|e| e.into_inner()),
        };
    }
}

/// The process-wide timer, started on first use; `None` if its thread could not be spawned
/// (callers then fall back to a coarser timer). Its thread lives as long as the process.
pub fn global() -> Option<&'static PreciseTimer> {
    static GLOBAL: OnceLock<Option<PreciseTimer>> = OnceLock::new();
    GLOBAL.get_or_init(|| PreciseTimer::start().ok()).as_ref()
}

/// Ask the kernel to wake this thread within 1 ns of a timed wait's deadline instead of the
/// default 50 µs slack (Linux only; elsewhere a no-op).
#[allow(unsafe_code)]
fn set_thread_timer_slack_1ns() {
    #[cfg(target_os = "linux")]
    // SAFETY: PR_SET_TIMERSLACK takes an integer argument and only affects the calling thread.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0);
    }
}

/// Completes at its deadline; cheap (no allocation until first pending poll).
pub struct Sleep {
    shared: Arc<Shared>,
    deadline: Instant,
    /// The waker registered with the timer, to avoid re-registering on spurious polls.
    waker: Option<Waker>,
}

impl Sleep {
    /// The instant this sleep completes at.
    pub fn deadline(&self) -> Instant {
        self.deadline
    }
}

impl Future for Sleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if Instant::now() >= self.deadline {
            return Poll::Ready(());
        }
        if self.waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
            return Poll::Pending;
        }
        let w = cx.waker().clone();
        self.shared.register(self.deadline, w.clone());
        self.waker = Some(w);
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn wakes_on_time_and_in_order() {
        let timer = PreciseTimer::start().unwrap();
        let t0 = Instant::now();
        let mut late = Vec::new();
        for i in 1..=20u64 {
            let d = t0 + Duration::from_micros(i * 1500);
            timer.sleep_until(d).await;
            let now = Instant::now();
            assert!(now >= d);
            late.push((now - d).as_micros() as u64);
        }
        late.sort_unstable();
        // Median lateness well under tokio's 1 ms granularity even on a busy CI box.
        assert!(late[late.len() / 2] < 1000, "{late:?}");
    }

    #[tokio::test]
    async fn past_deadline_is_ready_at_once() {
        let timer = PreciseTimer::start().unwrap();
        timer.sleep_until(Instant::now() - Duration::from_millis(1)).await;
    }
}
