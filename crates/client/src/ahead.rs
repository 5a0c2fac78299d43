//! Request bodies written a bounded number of arrivals ahead of their sends.
//!
//! A long trace replay would hold gigabytes of prompt text if every body were written before
//! the clock starts. Instead a thread of its own writes the bodies of the next arrivals, at
//! most [`AHEAD_REQUESTS`] (or [`AHEAD_BYTES`]) ahead, and the loop takes each one ready when
//! its arrival is due: the send path only removes it from a map. The first ones are written
//! before the clock starts. Should the writer fall behind (a burst larger than the window),
//! the due request is written where it is sent, and its schedule lag shows the cost.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use crate::planned::{PlannedRequest, RequestWriter};

/// Most bodies written ahead.
pub const AHEAD_REQUESTS: usize = 512;
/// Most bytes of bodies written ahead (a few large bodies stop the window early).
pub const AHEAD_BYTES: usize = 64 << 20;

/// Which request arrival `j` sends: `units` arrivals cycle (a duration run), and in a shard
/// local request `i` is the global request `ids[i]`.
#[derive(Debug, Clone)]
pub(crate) struct Order {
    /// Arrivals before the sequence repeats (the requests this process sends).
    pub units: usize,
    /// Global index of each local request; `None`: the local index.
    pub ids: Option<Arc<[u64]>>,
    /// Arrivals that will be handed out at most (`u64::MAX` when a duration decides).
    pub end: u64,
}

impl Order {
    /// The source's index of the request arrival `j` sends.
    fn source_index(&self, j: u64, len: usize) -> usize {
        let local = (j % self.units.max(1) as u64) as usize;
        let global = match &self.ids {
            Some(ids) => ids.get(local).copied().unwrap_or(local as u64),
            None => local as u64,
        };
        (global % len.max(1) as u64) as usize
    }
}

#[derive(Debug, Default)]
struct State {
    /// Written and not yet taken, by arrival index.
    ready: HashMap<u64, PlannedRequest>,
    /// Bytes of the bodies in `ready`.
    bytes: usize,
    /// The next arrival the writer takes on.
    next: u64,
    /// The arrival the writer is writing now.
    writing: Option<u64>,
    /// Arrivals sent before the writer got to them (written where they were sent).
    taken_early: HashSet<u64>,
    stop: bool,
}

#[derive(Debug)]
struct Shared {
    source: Arc<dyn RequestWriter>,
    order: Order,
    state: Mutex<State>,
    /// Wakes the writer when a request is taken (room in the window) or on stop.
    room: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self, j: u64) -> PlannedRequest {
        self.source.request(self.order.source_index(j, self.source.len()))
    }
}

/// The bodies of the next arrivals, written ahead on a thread of its own, which stops when
/// this is dropped.
#[derive(Debug)]
pub(crate) struct Ahead {
    shared: Arc<Shared>,
}

impl Ahead {
    /// Start writing ahead; returns once the first window is written (before the clock
    /// starts).
    pub(crate) async fn start(source: Arc<dyn RequestWriter>, order: Order) -> Ahead {
        let shared = Arc::new(Shared {
            source,
            order,
            state: Mutex::new(State::default()),
            room: Condvar::new(),
        });
        let (filled_tx, filled) = tokio::sync::oneshot::channel();
        let writer = shared.clone();
        let spawned = std::thread::Builder::new()
            .name("servelab-ahead".into())
            .spawn(move || write_ahead(&writer, filled_tx));
        match spawned {
            // A writer that dies early only means every request is written where it is sent.
            Ok(_) => {
                let _ = filled.await;
            }
            Err(_) => shared.lock().stop = true,
        }
        Ahead { shared }
    }

    /// The request of arrival `j`: taken from the window when written, else written now.
    pub(crate) fn take(&self, j: u64) -> PlannedRequest {
        let mut st = self.shared.lock();
        if let Some(r) = st.ready.remove(&j) {
            st.bytes -= r.body.len();
            drop(st);
            self.shared.room.notify_one();
            return r;
        }
        // The writer has not got there (or is writing it now): it must skip this one.
        if j >= st.next || st.writing == Some(j) {
            st.taken_early.insert(j);
        }
        drop(st);
        self.shared.write(j)
    }
}

impl Drop for Ahead {
    fn drop(&mut self) {
        self.shared.lock().stop = true;
        self.shared.room.notify_all();
    }
}

/// The writer: keep the window full until stopped or every arrival is written. `filled` is
/// sent once the first window is written.
fn write_ahead(shared: &Shared, filled: tokio::sync::oneshot::Sender<()>) {
    let mut filled = Some(filled);
    loop {
        let j = {
            let mut st = shared.lock();
            loop {
                if st.stop || st.next >= shared.order.end {
                    if let Some(f) = filled.take() {
                        let _ = f.send(());
                    }
                    return;
                }
                let next = st.next;
                if st.taken_early.remove(&next) {
                    st.next += 1;
                    continue;
                }
                if st.ready.len() < AHEAD_REQUESTS && st.bytes < AHEAD_BYTES {
                    break;
                }
                if let Some(f) = filled.take() {
                    let _ = f.send(());
                }
                st = shared.room.wait(st).unwrap_or_else(|e| e.into_inner());
            }
            let j = st.next;
            st.next += 1;
            st.writing = Some(j);
            j
        };
        let r = shared.write(j);
        let mut st = shared.lock();
        st.writing = None;
        if !st.taken_early.remove(&j) {
            st.bytes += r.body.len();
            st.ready.insert(j, r);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Request `i`'s body is its index; counts the writes.
    #[derive(Debug, Default)]
    struct Numbers {
        len: usize,
        writes: AtomicUsize,
    }

    impl RequestWriter for Numbers {
        fn len(&self) -> usize {
            self.len
        }
        fn request(&self, i: usize) -> PlannedRequest {
            self.writes.fetch_add(1, Ordering::Relaxed);
            PlannedRequest {
                body: Bytes::from(i.to_string()),
                prompt_tokens: Some(i as u64),
                max_tokens: None,
            }
        }
    }

    fn body(r: &PlannedRequest) -> String {
        String::from_utf8(r.body.to_vec()).unwrap()
    }

    #[test]
    fn arrivals_map_to_requests_through_cycles_and_shard_ids() {
        let plain = Order { units: 3, ids: None, end: u64::MAX };
        assert_eq!(
            (0..7).map(|j| plain.source_index(j, 3)).collect::<Vec<_>>(),
            [0, 1, 2, 0, 1, 2, 0]
        );
        // A shard sends global requests 4 and 9 of a 10-request source.
        let shard = Order { units: 2, ids: Some(vec![4, 9].into()), end: 2 };
        assert_eq!(shard.source_index(0, 10), 4);
        assert_eq!(shard.source_index(1, 10), 9);
        assert_eq!(shard.source_index(2, 10), 4);
    }

    #[tokio::test]
    async fn the_first_window_is_written_before_start_returns() {
        let source = Arc::new(Numbers { len: AHEAD_REQUESTS * 2, ..Numbers::default() });
        let order = Order { units: source.len, ids: None, end: source.len as u64 };
        let ahead = Ahead::start(source.clone(), order).await;
        assert_eq!(ahead.shared.lock().ready.len(), AHEAD_REQUESTS);
        assert_eq!(source.writes.load(Ordering::Relaxed), AHEAD_REQUESTS);
        // Taking every request gives each once, in any order of taking, each written once.
        for j in (0..source.len as u64).rev() {
            assert_eq!(body(&ahead.take(j)), j.to_string());
        }
        drop(ahead);
        // The writer may be writing one more when stopped; never more than the source holds.
        let writes = source.writes.load(Ordering::Relaxed);
        assert!((source.len..=source.len + 1).contains(&writes), "{writes}");
    }

    #[tokio::test]
    async fn a_short_source_fills_and_stops() {
        let source = Arc::new(Numbers { len: 5, ..Numbers::default() });
        let ahead = Ahead::start(source.clone(), Order { units: 5, ids: None, end: 5 }).await;
        let taken: Vec<String> = (0..5).map(|j| body(&ahead.take(j))).collect();
        assert_eq!(taken, ["0", "1", "2", "3", "4"]);
        assert_eq!(source.writes.load(Ordering::Relaxed), 5);
        assert!(ahead.shared.lock().ready.is_empty());
    }

    #[tokio::test]
    async fn a_request_taken_before_the_writer_got_there_is_skipped_by_it() {
        let len = AHEAD_REQUESTS * 3;
        let source = Arc::new(Numbers { len, ..Numbers::default() });
        let ahead =
            Ahead::start(source.clone(), Order { units: len, ids: None, end: len as u64 }).await;
        // Beyond the window: written where it is taken, and never again by the writer.
        let far = (AHEAD_REQUESTS * 2) as u64;
        assert_eq!(body(&ahead.take(far)), far.to_string());
        for j in 0..len as u64 {
            if j != far {
                assert_eq!(body(&ahead.take(j)), j.to_string());
            }
        }
        // Wait for the writer to finish its last write, then check nothing is left over.
        for _ in 0..200 {
            if ahead.shared.lock().next >= len as u64 && ahead.shared.lock().writing.is_none() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let st = ahead.shared.lock();
        assert!(st.ready.is_empty(), "{:?}", st.ready.keys().collect::<Vec<_>>());
        assert!(st.taken_early.is_empty());
        // Each request written at least once; twice only when taken while being written.
        assert!(source.writes.load(Ordering::Relaxed) >= len);
    }
}
