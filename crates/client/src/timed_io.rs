//! Socket reads stamped with the time they returned data.
//!
//! hyper decodes a response on the connection's own task and hands body frames to the request
//! task through a channel. Stamping a frame when the request task receives it would add that
//! task's scheduling delay to every measurement, and under thousands of streams that delay is
//! what inflates peers' TTFT. Instead the stream records when each read returned bytes, and the
//! request task uses the time of the read that completed the frame.

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock};
use std::task::{Context, Poll};
use std::time::Instant;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// Process-wide reference for read stamps, so a connection opened before a run's origin can
/// still be compared with it.
static EPOCH: LazyLock<Instant> = LazyLock::new(Instant::now);

/// Nanoseconds from the process epoch to `t` (0 for instants before it).
pub fn since_epoch(t: Instant) -> u64 {
    t.saturating_duration_since(*EPOCH).as_nanos() as u64
}

/// The time of a connection's latest read that returned data, shared with the request task.
#[derive(Debug, Clone, Default)]
pub struct ReadStamp(Arc<AtomicU64>);

impl ReadStamp {
    /// Nanoseconds since the process epoch of the latest data-bearing read, if any.
    pub fn last(&self) -> Option<u64> {
        match self.0.load(Ordering::Acquire) {
            0 => None,
            t => Some(t),
        }
    }
}

/// A TCP stream whose reads are stamped in a [`ReadStamp`].
pub struct TimedStream {
    inner: TcpStream,
    stamp: ReadStamp,
}

impl TimedStream {
    pub fn new(inner: TcpStream) -> (Self, ReadStamp) {
        let _ = *EPOCH;
        let stamp = ReadStamp::default();
        (Self { inner, stamp: stamp.clone() }, stamp)
    }
}

impl AsyncRead for TimedStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let res = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(res, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            // max(1): 0 means "never read".
            let t = since_epoch(Instant::now()).max(1);
            self.stamp.0.store(t, Ordering::Release);
        }
        res
    }
}

impl AsyncWrite for TimedStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        b: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, b)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
