//! Clock readings against real local servers whose clocks are known: the simulator (this
//! host's clock: offset 0), an HTTP server whose `Date` runs a set amount ahead, and an SNTP
//! server likewise. Every reading must hold the true offset within its stated uncertainty,
//! and the narrowed `Date` reading must be far tighter than the one-second bound. The readings
//! run beside each other: a probe that another delays widens a bound, never moves it. (Readings
//! that end in a decision, not an offset, are the `it` binary's `clock`.)

use std::time::Duration;

use servelab_client::clock::{date_reading, ntp_reading, ClockReading};
use servelab_client::Target;
use servelab_sim::{start, SimConfig};

use crate::common;
use common::dates::{date_server, Dates};
use common::ntp::ntp_server;
use tokio::time::Instant;

/// Every reading here is bounded by this.
const BOUND: Duration = Duration::from_secs(20);

fn holds(r: &ClockReading, truth_ms: f64) {
    assert!(
        (r.offset_ms - truth_ms).abs() <= r.uncertainty_ms,
        "true offset {truth_ms} ms outside {:.3} ± {:.3} ms",
        r.offset_ms,
        r.uncertainty_ms
    );
}

async fn read_date(url: &str, budget: Duration) -> ClockReading {
    let target = Target::resolve(url, "/v1/models").await.unwrap();
    let deadline = Instant::now() + budget;
    tokio::time::timeout(BOUND, date_reading(&target, "/v1/models", deadline))
        .await
        .expect("a reading within its bound")
        .expect("the server answers")
        .expect("the server sends Date")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_simulators_date_reads_as_this_hosts_clock_to_milliseconds() {
    let _serial = crate::serial::beside_each_other();
    let sim = start(SimConfig::fixed(2.0, 0.5).with_port(0)).await.unwrap();
    let r = read_date(&sim.base_url(), Duration::from_secs(8)).await;
    eprintln!("sim: {r:?}");
    holds(&r, 0.0);
    assert_eq!(r.coarse, None, "refined: {r:?}");
    // Four rounds take it to the round trip (well under a millisecond here: the figures are
    // scripts/clock-reading.sh's); two busy cores can delay a round's probes by tens of
    // milliseconds, which widens the bound but never moves it off the truth. Under 100 ms
    // tells a refined reading from a whole-second one (±750 ms).
    assert!(r.uncertainty_ms < 100.0, "{r:?}");
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_time_to_refine_a_reading_is_whole_seconds_and_says_so() {
    let _serial = crate::serial::beside_each_other();
    let sim = start(SimConfig::fixed(2.0, 0.5).with_port(0)).await.unwrap();
    let r = read_date(&sim.base_url(), Duration::ZERO).await;
    holds(&r, 0.0);
    assert!(r.uncertainty_ms >= 500.0, "{r:?}");
    assert!(r.note().is_some_and(|n| n.contains("no time for the four")), "{r:?}");
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_ahead_or_behind_reads_as_its_offset() {
    let _serial = crate::serial::beside_each_other();
    // Both readings at once: each waits for its server's second boundaries, which is most of
    // a reading's time, not work that competes with the other.
    let read = |ahead: i64| async move {
        let url = date_server(Dates::Ahead(ahead), false).await;
        (ahead, read_date(&url, Duration::from_secs(8)).await)
    };
    let (a, b) = tokio::join!(read(750), read(-2_300));
    for (ahead, r) in [a, b] {
        eprintln!("{ahead} ms: {r:?}");
        holds(&r, ahead as f64);
        assert!(r.uncertainty_ms < 100.0, "{r:?}");
    }
}

/// A server that closes every connection after one answer: the reading opens new ones.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_closes_each_connection_is_read_as_well() {
    let _serial = crate::serial::beside_each_other();
    let url = date_server(Dates::Ahead(-420), true).await;
    let r = read_date(&url, Duration::from_secs(8)).await;
    holds(&r, -420.0);
    assert_eq!(r.coarse, None, "{r:?}");
}

/// uvicorn (vLLM's and SGLang's server) refreshes its `Date` every ~1,006 ms (measured here):
/// the rounds catch it, and the whole-second reading that allows for a stale `Date` holds the
/// truth (this host's clock).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_date_refreshed_on_a_timer_is_caught_and_read_as_whole_seconds() {
    let _serial = crate::serial::beside_each_other();
    let url = date_server(Dates::Cached(1_006), false).await;
    let r = read_date(&url, Duration::from_secs(8)).await;
    eprintln!("cached: {r:?}");
    assert!(r.note().is_some_and(|n| n.contains("not stamped per response")), "{r:?}");
    holds(&r, 0.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ntp_server_ahead_reads_as_its_offset_within_half_the_round_trip() {
    let _serial = crate::serial::beside_each_other();
    let addr = ntp_server(250).await;
    let r = tokio::time::timeout(BOUND, ntp_reading(&addr.to_string(), Duration::from_secs(2)))
        .await
        .expect("within its bound")
        .expect("the server answers");
    eprintln!("ntp: {r:?}");
    holds(&r, 250.0);
    assert!(r.uncertainty_ms < 100.0, "{r:?}");
    assert_eq!(r.exchanges, 3);
}
