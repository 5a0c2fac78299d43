//! The background task of every reader that samples beside a run (the engine's `/metrics`
//! in [`crate::scrape`], the GPUs' telemetry in [`crate::gpu`]), and the handshake that lets
//! the measuring loop ask it for a baseline reading after the warm-ups.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{watch, Notify};
use tokio::task::JoinHandle;

/// The longest the measuring loop waits for a baseline reading (one reading's own bound).
const BASELINE_WAIT: Duration = Duration::from_secs(5);

/// A handshake between the measuring loop and the scraper: after warm-ups, the loop asks for
/// a scrape and waits for it before the measured phase's clock starts, so the engine's
/// counters of the run begin where its requests do and warm-ups are not counted.
#[derive(Debug, Default)]
pub struct Baseline {
    asked: Notify,
    taken: Notify,
}

impl Baseline {
    /// Ask for a reading and wait until it is taken (at most 5 s).
    pub async fn take(&self) {
        self.asked.notify_one();
        let _ = tokio::time::timeout(BASELINE_WAIT, self.taken.notified()).await;
    }
}

/// The task every scraper runs (the engine's `/metrics` here, the GPUs' telemetry in
/// [`crate::gpu`]): one reading at each tick of `every`, one when a [`Baseline`] asks, one
/// last when stopped, each timed as it ends. It runs on its own task, so the measuring loop
/// never waits for it (except for the baseline it asks for).
#[derive(Debug)]
pub(crate) struct Periodic<T> {
    stop: watch::Sender<bool>,
    task: JoinHandle<Vec<(Instant, T)>>,
}

impl<T: Send + 'static> Periodic<T> {
    /// Start after a first reading already `taken`; `read` takes each next one.
    pub(crate) fn spawn<F, Fut>(
        taken: (Instant, T),
        every: Duration,
        baseline: Option<Arc<Baseline>>,
        mut read: F,
    ) -> Periodic<T>
    where
        F: FnMut() -> Fut + Send + 'static,
        Fut: std::future::Future<Output = T> + Send,
    {
        let (stop, mut stopped) = watch::channel(false);
        let every = every.max(Duration::from_millis(10));
        let task = tokio::spawn(async move {
            let mut taken = vec![taken];
            let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                let asked = async {
                    match &baseline {
                        Some(b) => b.asked.notified().await,
                        None => std::future::pending().await,
                    }
                };
                let (last, asked) = tokio::select! {
                    _ = tick.tick() => (false, false),
                    _ = asked => (false, true),
                    _ = stopped.changed() => (true, false),
                };
                let got = read().await;
                taken.push((Instant::now(), got));
                if let (true, Some(b)) = (asked, &baseline) {
                    b.taken.notify_one();
                }
                if last {
                    return taken;
                }
            }
        });
        Periodic { stop, task }
    }

    /// Take one last reading, stop, and return every reading in order.
    pub(crate) async fn finish(self) -> Vec<(Instant, T)> {
        let _ = self.stop.send(true);
        self.task.await.unwrap_or_default()
    }
}

/// Milliseconds from `origin` to `at`, negative before it.
pub(crate) fn ms_since(at: Instant, origin: Instant) -> f64 {
    if at >= origin {
        (at - origin).as_secs_f64() * 1e3
    } else {
        -((origin - at).as_secs_f64() * 1e3)
    }
}
