//! Clock readings whose outcome is a decision, not a measured offset: a `Date` that jumps
//! between workers is not read to milliseconds, and a silent NTP server is an error naming
//! it. (Readings held against a known offset are the timing binary's `clock`.)

use std::time::Duration;

use servelab_client::clock::{date_reading, ntp_reading};
use servelab_client::Target;
use tokio::net::{TcpListener, UdpSocket};
use tokio::time::Instant;

use crate::common::dates::{date_server, Dates};

/// Every reading here is bounded by this.
const BOUND: Duration = Duration::from_secs(20);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_date_that_jumps_between_workers_is_not_read_to_milliseconds() {
    let url = date_server(Dates::Jumping, false).await;
    let target = Target::resolve(&url, "/").await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(8);
    match tokio::time::timeout(BOUND, date_reading(&target, "/", deadline)).await.unwrap() {
        // Two clocks a second apart: no one offset is true; the reading says it is coarse.
        Ok(Some(r)) => {
            assert!(r.note().is_some_and(|n| n.contains("not stamped")), "{r:?}");
        }
        Err(e) => assert!(e.to_string().contains("jumps"), "{e}"),
        Ok(None) => panic!("the server sends Date"),
    }
}

/// On the paused clock: the exchanges' timeouts are virtual.
#[tokio::test(start_paused = true)]
async fn a_silent_ntp_server_is_an_error_that_names_it() {
    // A bound socket that never answers.
    let quiet = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let addr = quiet.local_addr().unwrap().to_string();
    let e = ntp_reading(&addr, Duration::from_millis(200)).await.unwrap_err();
    assert!(e.to_string().contains(&addr), "{e}");
}

/// A server that accepts and never answers: the reading gives up within its bound (on the
/// paused clock: the bound is logic, virtual time here).
#[tokio::test(start_paused = true)]
async fn a_silent_server_is_an_error_in_bounded_time() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let held = tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((s, _)) = listener.accept().await {
            open.push(s);
        }
    });
    let target = Target::resolve(&url, "/").await.unwrap();
    let started = Instant::now();
    let deadline = Instant::now() + Duration::from_secs(8);
    let e = date_reading(&target, "/", deadline).await.unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::TimedOut, "{e}");
    assert!(started.elapsed() < Duration::from_secs(4), "{:?}", started.elapsed());
    held.abort();
}
