//! Clock readings against real local servers whose clocks are known: the simulator (this
//! host's clock: offset 0), an HTTP server whose `Date` runs a set amount ahead, and an SNTP
//! server likewise. Every reading must hold the true offset within its stated uncertainty,
//! and the narrowed `Date` reading must be far tighter than the one-second bound.

use std::time::{Duration, SystemTime};

use servelab_client::clock::{date_reading, ntp_reading, ClockReading};
use servelab_client::Target;
use servelab_sim::{start, SimConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, UdpSocket};

mod common;
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
    let sim = start(SimConfig::fixed(2.0, 0.5).with_port(0)).await.unwrap();
    let r = read_date(&sim.base_url(), Duration::from_secs(6)).await;
    eprintln!("sim: {r:?}");
    holds(&r, 0.0);
    assert_eq!(r.note, None, "refined: {r:?}");
    // Three rounds take it to the round trip; two busy cores can delay a probe by
    // milliseconds, which widens the bound but never moves it off the truth.
    assert!(r.uncertainty_ms < 25.0, "{r:?}");
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_time_to_refine_a_reading_is_whole_seconds_and_says_so() {
    let sim = start(SimConfig::fixed(2.0, 0.5).with_port(0)).await.unwrap();
    let r = read_date(&sim.base_url(), Duration::ZERO).await;
    holds(&r, 0.0);
    assert!(r.uncertainty_ms >= 500.0, "{r:?}");
    assert!(r.note.as_deref().is_some_and(|n| n.contains("whole seconds")), "{r:?}");
    sim.shutdown().await;
}

/// An HTTP/1.1 server (keep-alive) whose `Date` is its clock `ahead_ms` ahead of this host's,
/// or, with `jump`, a second later on every other answer (two workers that disagree).
async fn date_server(ahead_ms: i64, jump: bool) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let mut n = 0u64;
        loop {
            let Ok((mut s, _)) = listener.accept().await else { return };
            n += 1;
            let odd = jump && n % 2 == 1;
            tokio::spawn(async move {
                let mut buf = vec![0u8; 4096];
                let mut have = Vec::new();
                loop {
                    let Ok(k) = s.read(&mut buf).await else { return };
                    if k == 0 {
                        return;
                    }
                    have.extend_from_slice(&buf[..k]);
                    while let Some(end) = have.windows(4).position(|w| w == b"\r\n\r\n") {
                        have.drain(..end + 4);
                        let shift = ahead_ms + if odd { 1_000 } else { 0 };
                        let now = SystemTime::now();
                        let t = if shift >= 0 {
                            now + Duration::from_millis(shift as u64)
                        } else {
                            now - Duration::from_millis(shift.unsigned_abs())
                        };
                        let resp = format!(
                            "HTTP/1.1 200 OK\r\ndate: {}\r\ncontent-length: 2\r\n\r\n{{}}",
                            httpdate::fmt_http_date(t)
                        );
                        if s.write_all(resp.as_bytes()).await.is_err() {
                            return;
                        }
                    }
                }
            });
        }
    });
    format!("http://{addr}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_ahead_or_behind_reads_as_its_offset() {
    for ahead in [750, -2_300] {
        let url = date_server(ahead, false).await;
        let r = read_date(&url, Duration::from_secs(6)).await;
        eprintln!("{ahead} ms: {r:?}");
        holds(&r, ahead as f64);
        assert!(r.uncertainty_ms < 25.0, "{r:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_date_that_contradicts_itself_falls_back_to_whole_seconds() {
    let url = date_server(0, true).await;
    let r = read_date(&url, Duration::from_secs(6)).await;
    assert!(r.note.as_deref().is_some_and(|n| n.contains("contradicted")), "{r:?}");
    assert!(r.uncertainty_ms >= 500.0, "{r:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ntp_server_ahead_reads_as_its_offset_within_half_the_round_trip() {
    let addr = ntp_server(250).await;
    let r = tokio::time::timeout(BOUND, ntp_reading(&addr.to_string(), Duration::from_secs(2)))
        .await
        .expect("within its bound")
        .expect("the server answers");
    eprintln!("ntp: {r:?}");
    holds(&r, 250.0);
    assert!(r.uncertainty_ms < 25.0, "{r:?}");
    assert_eq!(r.exchanges, 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_ntp_server_is_an_error_that_names_it() {
    // A bound socket that never answers.
    let quiet = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let addr = quiet.local_addr().unwrap().to_string();
    let e = ntp_reading(&addr, Duration::from_millis(200)).await.unwrap_err();
    assert!(e.to_string().contains(&addr), "{e}");
}
