//! Scrapes the server's `/metrics` at an interval while a run goes on: before the first
//! request, during, and once after the last, so the run keeps the engine's own account
//! (tokens, queue, KV cache, prefix-cache hits, preemptions) beside the client's.
//!
//! One GET on its own connection per interval, parsed on the blocking pool: nothing on the
//! measuring path waits for it, and a server without `/metrics` costs one probe.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use servelab_records::ServerScrape;

use crate::http::{self, Target};
pub use crate::periodic::Baseline;
use crate::periodic::{ms_since, Periodic};
use crate::prom::engine_series;

/// How long one scrape may take before it counts as failed.
const SCRAPE_TIMEOUT: Duration = Duration::from_secs(5);

/// A running scraper; [`Scraper::finish`] takes the last scrape and returns them all.
#[derive(Debug)]
pub struct Scraper {
    periodic: Periodic<Result<BTreeMap<String, f64>, String>>,
}

/// One scrape: the engine's series, or why there are none.
pub(crate) async fn scrape(target: &Target) -> Result<BTreeMap<String, f64>, String> {
    let series = http::get_parsed(target, "/metrics", SCRAPE_TIMEOUT, engine_series).await?;
    if series.keys().all(|k| k == crate::prom::PROCESS_START) {
        return Err("GET /metrics has no vllm:, llamacpp: or sglang: series".into());
    }
    Ok(series)
}

impl Scraper {
    /// Scrape once now; if that gives engine series, keep scraping every `every` until
    /// [`Scraper::finish`]. `None` (after the one probe) when the server has no such
    /// `/metrics`, so servers without one cost nothing more.
    /// `baseline` answers [`Baseline::take`].
    pub async fn start(
        target: &Target,
        every: Duration,
        baseline: Arc<Baseline>,
    ) -> Option<Scraper> {
        let first = scrape(target).await.ok()?;
        let target = target.clone();
        let periodic =
            Periodic::spawn((Instant::now(), Ok(first)), every, Some(baseline), move || {
                let target = target.clone();
                async move { scrape(&target).await }
            });
        Some(Scraper { periodic })
    }

    /// Take one last scrape, stop, and return every scrape with its time relative to
    /// `origin` (the run's), in order.
    pub async fn finish(self, origin: Instant) -> Vec<ServerScrape> {
        let taken = self.periodic.finish().await;
        taken.into_iter().map(|(at, got)| to_record(at, origin, got)).collect()
    }
}

fn to_record(
    at: Instant,
    origin: Instant,
    got: Result<BTreeMap<String, f64>, String>,
) -> ServerScrape {
    let t_ms = ms_since(at, origin);
    match got {
        Ok(values) => ServerScrape { t_ms, values, error: None },
        Err(e) => ServerScrape { t_ms, values: BTreeMap::new(), error: Some(e) },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_before_the_origin_are_negative() {
        let origin = Instant::now() + Duration::from_millis(250);
        let r = to_record(origin - Duration::from_millis(250), origin, Err("x".into()));
        assert_eq!(r.t_ms, -250.0);
        assert_eq!(r.error.as_deref(), Some("x"));
        let r = to_record(origin + Duration::from_millis(2), origin, Ok(BTreeMap::new()));
        assert_eq!(r.t_ms, 2.0);
        assert_eq!(r.error, None);
    }
}
