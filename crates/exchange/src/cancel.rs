//! An interrupt a shard can raise for itself: its running part stops when another shard
//! failed the run, as it stops on Ctrl-C.

use tokio::sync::watch;

/// Stops this shard's running part when another shard failed its run: it owns the interrupt
/// the wrapped runner watches, which also follows the user's.
pub struct Cancel {
    tx: watch::Sender<bool>,
    user: watch::Receiver<bool>,
}

/// An interrupt for the wrapped runner that turns true with the user's `interrupt`, or when
/// [`Cancel::stop`] is called (by [`crate::ShardedRuns`], when a peer failed the run).
pub fn cancellable(interrupt: watch::Receiver<bool>) -> (Cancel, watch::Receiver<bool>) {
    let (tx, rx) = watch::channel(*interrupt.borrow());
    let (forward, mut user) = (tx.clone(), interrupt.clone());
    tokio::spawn(async move {
        while user.changed().await.is_ok() {
            if *user.borrow_and_update() {
                let _ = forward.send(true);
            }
        }
    });
    (Cancel { tx, user: interrupt }, rx)
}

impl Cancel {
    /// Stop the running part (no new sends; what is in flight drains).
    pub fn stop(&self) {
        let _ = self.tx.send(true);
    }

    /// Clear the stop for the next part, unless the user interrupted.
    pub fn resume(&self) {
        if !*self.user.borrow() {
            let _ = self.tx.send(false);
        }
    }

    /// The user's own interrupt (Ctrl-C, SIGTERM).
    pub fn user(&self) -> watch::Receiver<bool> {
        self.user.clone()
    }
}
