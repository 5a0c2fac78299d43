//! A concurrency cap that remembers when each slot was freed.

use tokio::sync::mpsc;

/// At most `n` requests in flight. A finished request returns its slot with the time it ended
/// ([`Slots::release`]); the dispatcher's [`Slots::acquire`] yields that time, so the next
/// request's intended send time is `max(arrival, freed_at)` exactly, independent of how quickly
/// the runtime scheduled the dispatcher.
pub struct Slots {
    tx: mpsc::UnboundedSender<u64>,
    rx: mpsc::UnboundedReceiver<u64>,
}

/// The handle a request uses to free its slot.
#[derive(Clone)]
pub struct SlotReleaser(mpsc::UnboundedSender<u64>);

impl Slots {
    /// `n` slots, all free since time zero.
    pub fn new(n: usize) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        for _ in 0..n {
            // The receiver is alive: sending cannot fail.
            let _ = tx.send(0);
        }
        Self { tx, rx }
    }

    /// Wait for a free slot; returns when (ns since origin) it became free.
    pub async fn acquire(&mut self) -> u64 {
        // `self.tx` keeps the channel open, so `recv` only returns `None` if that changed.
        self.rx.recv().await.unwrap_or(0)
    }

    pub fn releaser(&self) -> SlotReleaser {
        SlotReleaser(self.tx.clone())
    }
}

impl SlotReleaser {
    /// Free the slot as of `at_ns` (ns since origin).
    pub fn release(&self, at_ns: u64) {
        let _ = self.0.send(at_ns);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn acquire_yields_release_times_in_order() {
        let mut slots = Slots::new(2);
        assert_eq!(slots.acquire().await, 0);
        assert_eq!(slots.acquire().await, 0);
        let r = slots.releaser();
        let waiter = tokio::spawn(async move { slots.acquire().await });
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        assert!(!waiter.is_finished(), "no slot was free");
        r.release(1_234);
        assert_eq!(waiter.await.unwrap(), 1_234);
    }
}
