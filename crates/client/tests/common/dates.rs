//! An HTTP/1.1 server whose `Date` header is written as a test says: a set offset ahead of
//! this host's clock, two clocks that disagree, or a cached value refreshed on a timer.

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// How a test server writes its `Date`.
#[derive(Clone, Copy)]
pub enum Dates {
    /// Stamped per response from a clock this many ms ahead of this host's.
    Ahead(i64),
    /// Stamped per response, a second ahead on every other connection (workers that
    /// disagree).
    Jumping,
    /// As uvicorn: this host's clock, cached and refreshed every this many ms.
    Cached(u64),
}

/// `now` moved by `ms` (either way).
fn shifted(now: SystemTime, ms: i64) -> SystemTime {
    match ms >= 0 {
        true => now + Duration::from_millis(ms as u64),
        false => now - Duration::from_millis(ms.unsigned_abs()),
    }
}

/// An HTTP/1.1 server on 127.0.0.1 whose `Date` is written as `dates` says; keep-alive, or
/// with `close` one answer a connection (`Connection: close`).
pub async fn date_server(dates: Dates, close: bool) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let cached = Arc::new(Mutex::new(httpdate::fmt_http_date(SystemTime::now())));
    if let Dates::Cached(period) = dates {
        let cached = cached.clone();
        tokio::spawn(async move {
            let mut every = tokio::time::interval(Duration::from_millis(period));
            loop {
                every.tick().await;
                *cached.lock().unwrap() = httpdate::fmt_http_date(SystemTime::now());
            }
        });
    }
    tokio::spawn(async move {
        let mut n = 0u64;
        loop {
            let Ok((mut s, _)) = listener.accept().await else { return };
            n += 1;
            let cached = cached.clone();
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
                        let now = SystemTime::now();
                        let date = match dates {
                            Dates::Ahead(ms) => httpdate::fmt_http_date(shifted(now, ms)),
                            Dates::Jumping => {
                                httpdate::fmt_http_date(shifted(now, 1_000 * (n % 2) as i64))
                            }
                            Dates::Cached(_) => cached.lock().unwrap().clone(),
                        };
                        let connection = if close { "connection: close\r\n" } else { "" };
                        let resp = format!(
                            "HTTP/1.1 200 OK\r\ndate: {date}\r\n{connection}content-length: \
                             2\r\n\r\n{{}}"
                        );
                        if s.write_all(resp.as_bytes()).await.is_err() || close {
                            return;
                        }
                    }
                }
            });
        }
    });
    format!("http://{addr}")
}
