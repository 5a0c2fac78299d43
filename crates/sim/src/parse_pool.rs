//! A few long-lived threads for CPU-heavy request parsing (JSON + prompt tokenization).
//!
//! Off the async workers, so a long prompt never delays reading other requests; and few,
//! long-lived threads rather than tokio's blocking pool, because the tokenizer's per-thread
//! caches only pay off on warm threads.

use std::sync::mpsc;
use std::sync::{Arc, Mutex};

type Job = Box<dyn FnOnce() + Send>;

/// A fixed pool of parsing threads; they exit when the pool is dropped.
pub struct ParsePool {
    tx: Mutex<Option<mpsc::Sender<Job>>>,
}

impl std::fmt::Debug for ParsePool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ParsePool").finish_non_exhaustive()
    }
}

impl ParsePool {
    /// One thread per available core.
    pub fn start() -> std::io::Result<Self> {
        let n = std::thread::available_parallelism().map_or(2, |n| n.get());
        let (tx, rx) = mpsc::channel::<Job>();
        let rx = Arc::new(Mutex::new(rx));
        for i in 0..n {
            let rx = rx.clone();
            std::thread::Builder::new().name(format!("servelab-sim-parse-{i}")).spawn(
                move || {
                    loop {
                        // Hold the lock only to take one job.
                        let job = match rx.lock() {
                            Ok(r) => r.recv(),
                            Err(_) => return,
                        };
                        match job {
                            Ok(job) => job(),
                            Err(_) => return,
                        }
                    }
                },
            )?;
        }
        Ok(Self { tx: Mutex::new(Some(tx)) })
    }

    /// Run `f` on a pool thread and await its result; `None` if the pool is gone.
    pub async fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> Option<T> {
        let (done, result) = tokio::sync::oneshot::channel();
        let job: Job = Box::new(move || {
            let _ = done.send(f());
        });
        let sent = match self.tx.lock() {
            Ok(tx) => tx.as_ref().is_some_and(|tx| tx.send(job).is_ok()),
            Err(_) => false,
        };
        if !sent {
            return None;
        }
        result.await.ok()
    }
}

impl Drop for ParsePool {
    fn drop(&mut self) {
        // Closing the channel ends every thread after its current job.
        if let Ok(mut tx) = self.tx.lock() {
            tx.take();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn runs_jobs_and_returns_results() {
        let pool = ParsePool::start().unwrap();
        let mut results = Vec::new();
        for i in 0..10u64 {
            results.push(pool.run(move || i * i).await);
        }
        assert_eq!(results, (0..10u64).map(|i| Some(i * i)).collect::<Vec<_>>());
    }
}
