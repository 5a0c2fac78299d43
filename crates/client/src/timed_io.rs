//! Socket reads stamped with when their bytes arrived.
//!
//! hyper decodes a response on the connection's own task and hands body frames to the request
//! task through a channel. Stamping a frame when the request task receives it would add that
//! task's scheduling delay to every measurement, and under thousands of streams that delay is
//! what inflates peers' TTFT. Instead the stream records, for each read that returned data,
//! when that data arrived: on Linux the kernel's receive timestamp of the newest packet in the
//! read (`SO_TIMESTAMPNS`), so even a client that is late to read (a loaded machine, a burst
//! of a thousand events due at once) stamps each event when it reached this host, not when
//! this process got around to it. How late the client handled arrived bytes is its own
//! overhead, kept per request (`read_lag_ns`). Elsewhere, or when the kernel gives no
//! timestamp, the read's own return time stands in.

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, LazyLock};
use std::task::{Context, Poll};
use std::time::{Duration, Instant, SystemTime};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// Process-wide reference for read stamps, so a connection opened before a run's origin can
/// still be compared with it.
static EPOCH: LazyLock<Instant> = LazyLock::new(Instant::now);

/// Nanoseconds from the process epoch to `t` (0 for instants before it).
pub fn since_epoch(t: Instant) -> u64 {
    t.saturating_duration_since(*EPOCH).as_nanos() as u64
}

/// The arrival time of a connection's latest data-bearing read, shared with the request task,
/// and how the connection's reads and writes ended, if they did.
#[derive(Debug, Clone, Default)]
pub struct ReadStamp(Arc<Stamps>);

#[derive(Debug, Default)]
struct Stamps {
    /// Nanoseconds since the process epoch; 0: nothing read yet (in this exchange).
    last: AtomicU64,
    /// The stamps are the kernel's receive times, not the reads' return times.
    kernel: AtomicBool,
    /// How reading ended ([`ReadEnd`] as u8). Written only by a read that returned no data,
    /// so the streaming path never touches it.
    end: AtomicU8,
    /// A write failed: the request's bytes were not all accepted by the kernel.
    write_failed: AtomicBool,
}

/// How a connection's read side ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadEnd {
    /// Still open (or never read to its end).
    Open = 0,
    /// A clean end of stream: the peer sent FIN.
    Eof = 1,
    /// ECONNRESET: the peer aborted the connection (RST) while it was established.
    Reset = 2,
    /// Any other read error.
    Error = 3,
}

impl ReadStamp {
    /// Nanoseconds since the process epoch of the arrival of the latest data read, if any.
    pub fn last(&self) -> Option<u64> {
        match self.0.last.load(Ordering::Acquire) {
            0 => None,
            t => Some(t),
        }
    }

    /// True when the stamps are the kernel's receive times, so the time from a stamp to its
    /// handling is the client's own lateness.
    pub fn is_arrival(&self) -> bool {
        self.0.kernel.load(Ordering::Relaxed)
    }

    fn record(&self, arrived: u64) {
        // max(1): 0 means "never read".
        self.0.last.store(arrived.max(1), Ordering::Release);
    }

    /// A new request is about to be sent on this connection: forget the previous exchange's
    /// reads, so [`ReadStamp::last`] is `None` until a byte of the new response arrives.
    pub fn begin_exchange(&self) {
        self.0.last.store(0, Ordering::Release);
    }

    /// How the read side ended, if it did.
    pub fn end(&self) -> ReadEnd {
        match self.0.end.load(Ordering::Acquire) {
            1 => ReadEnd::Eof,
            2 => ReadEnd::Reset,
            3 => ReadEnd::Error,
            _ => ReadEnd::Open,
        }
    }

    /// True when a write on this connection failed.
    pub fn write_failed(&self) -> bool {
        self.0.write_failed.load(Ordering::Acquire)
    }

    fn ended(&self, how: ReadEnd) {
        // The first end wins: a reset after a FIN does not rewrite history.
        let _ = self.0.end.compare_exchange(0, how as u8, Ordering::AcqRel, Ordering::Acquire);
    }

    fn read_failed(&self, e: &io::Error) {
        let how = match e.kind() {
            io::ErrorKind::ConnectionReset => ReadEnd::Reset,
            _ => ReadEnd::Error,
        };
        self.ended(how);
    }
}

/// How far back a kernel timestamp may lie before it is taken for a clock step, not a late
/// read (a read that late would be a client stalled for seconds).
const MAX_LAG: Duration = Duration::from_secs(10);

/// Where a read's data arrived, as nanoseconds since the process epoch, and how long before
/// the read that was:
/// `received` is the kernel's wall-clock receive time, turned into the monotonic clock by its
/// age at `now_wall`. A receive time in the future or too far back (the wall clock stepped)
/// falls back to the read time.
pub fn arrival(now: Instant, now_wall: SystemTime, received: Option<SystemTime>) -> (u64, u64) {
    let read = since_epoch(now);
    let age = received.and_then(|r| now_wall.duration_since(r).ok()).filter(|a| *a <= MAX_LAG);
    match age {
        Some(age) => {
            let age_ns = age.as_nanos() as u64;
            (read.saturating_sub(age_ns), age_ns)
        }
        None => (read, 0),
    }
}

/// A TCP stream whose reads are stamped in a [`ReadStamp`].
pub struct TimedStream {
    inner: TcpStream,
    stamp: ReadStamp,
    /// The kernel was asked for receive timestamps and accepted.
    kernel_stamps: bool,
}

impl TimedStream {
    pub fn new(inner: TcpStream) -> (Self, ReadStamp) {
        let _ = *EPOCH;
        let stamp = ReadStamp::default();
        let kernel_stamps = kernel::enable(&inner);
        stamp.0.kernel.store(kernel_stamps, Ordering::Relaxed);
        (Self { inner, stamp: stamp.clone(), kernel_stamps }, stamp)
    }
}

impl AsyncRead for TimedStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if self.kernel_stamps {
            return kernel::poll_read(&mut self, cx, buf);
        }
        let before = buf.filled().len();
        let room = buf.remaining() > 0;
        let res = Pin::new(&mut self.inner).poll_read(cx, buf);
        match &res {
            Poll::Ready(Ok(())) if buf.filled().len() > before => {
                self.stamp.record(since_epoch(Instant::now()))
            }
            Poll::Ready(Ok(())) if room => self.stamp.ended(ReadEnd::Eof),
            Poll::Ready(Err(e)) => self.stamp.read_failed(e),
            _ => {}
        }
        res
    }
}

/// True when the peer has closed or reset the connection, or sent bytes nobody asked for:
/// a kept-alive connection that must not carry another request. Looks at the socket itself
/// (a non-blocking peek), not at the runtime's readiness, which can lag the kernel.
pub fn peer_gone(fd: RawSocket) -> bool {
    kernel::peer_gone(fd)
}

/// The OS handle [`peer_gone`] takes.
#[cfg(unix)]
pub type RawSocket = std::os::fd::RawFd;
#[cfg(not(unix))]
pub type RawSocket = ();

/// The OS handle of `s`, for [`peer_gone`].
pub fn raw_socket(s: &TcpStream) -> RawSocket {
    #[cfg(unix)]
    {
        std::os::fd::AsRawFd::as_raw_fd(s)
    }
    #[cfg(not(unix))]
    {
        let _ = s;
    }
}

#[cfg(target_os = "linux")]
mod kernel {
    use std::io::{self, IoSliceMut};
    use std::os::fd::AsRawFd;
    use std::task::{ready, Context, Poll};
    use std::time::{Duration, Instant, SystemTime};

    use nix::sys::socket::{recvmsg, setsockopt, sockopt, ControlMessageOwned, MsgFlags};
    use nix::sys::time::TimeSpec;
    use tokio::io::{Interest, ReadBuf};
    use tokio::net::TcpStream;

    use super::{arrival, ReadEnd, TimedStream};

    pub fn enable(s: &TcpStream) -> bool {
        setsockopt(s, sockopt::ReceiveTimestampns, &true).is_ok()
    }

    pub fn peer_gone(fd: i32) -> bool {
        let mut byte = [0u8; 1];
        match nix::sys::socket::recv(fd, &mut byte, MsgFlags::MSG_PEEK | MsgFlags::MSG_DONTWAIT) {
            // Nothing to read and no FIN: open and idle, as a kept-alive connection should be.
            Err(nix::errno::Errno::EAGAIN) => false,
            // 0: FIN. >0: stray bytes that would be taken for the next response. Err: reset.
            _ => true,
        }
    }

    /// One `recvmsg` into the unfilled part of `buf`: bytes read and the receive time of the
    /// newest packet among them.
    fn recv(fd: i32, buf: &mut [u8]) -> io::Result<(usize, Option<SystemTime>)> {
        let mut iov = [IoSliceMut::new(buf)];
        let mut space = nix::cmsg_space!(TimeSpec);
        let msg = recvmsg::<()>(fd, &mut iov, Some(&mut space), MsgFlags::MSG_DONTWAIT)
            .map_err(io::Error::from)?;
        let mut received = None;
        if let Ok(cmsgs) = msg.cmsgs() {
            for c in cmsgs {
                if let ControlMessageOwned::ScmTimestampns(ts) = c {
                    let since = Duration::new(ts.tv_sec() as u64, ts.tv_nsec() as u32);
                    received = SystemTime::UNIX_EPOCH.checked_add(since);
                }
            }
        }
        Ok((msg.bytes, received))
    }

    pub fn poll_read(
        s: &mut TimedStream,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let fd = s.inner.as_raw_fd();
        loop {
            ready!(s.inner.poll_read_ready(cx))?;
            let unfilled = buf.initialize_unfilled();
            let room = !unfilled.is_empty();
            match s.inner.try_io(Interest::READABLE, || recv(fd, unfilled)) {
                Ok((n, received)) => {
                    if n > 0 {
                        let (at, _) = arrival(Instant::now(), SystemTime::now(), received);
                        s.stamp.record(at);
                    } else if room {
                        s.stamp.ended(ReadEnd::Eof);
                    }
                    buf.advance(n);
                    return Poll::Ready(Ok(()));
                }
                // Readiness was stale; try_io cleared it, so wait for the next.
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => {
                    s.stamp.read_failed(&e);
                    return Poll::Ready(Err(e));
                }
            }
        }
    }
}

#[cfg(not(target_os = "linux"))]
mod kernel {
    use std::io;
    use std::task::{Context, Poll};

    use tokio::io::ReadBuf;
    use tokio::net::TcpStream;

    use super::TimedStream;

    pub fn enable(_: &TcpStream) -> bool {
        false
    }

    /// Without a portable peek, a closed connection is noticed by hyper when it is reused.
    pub fn peer_gone(_: super::RawSocket) -> bool {
        false
    }

    pub fn poll_read(
        _: &mut TimedStream,
        _: &mut Context<'_>,
        _: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        unreachable!("kernel stamps are never enabled here")
    }
}

impl AsyncWrite for TimedStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        b: &[u8],
    ) -> Poll<io::Result<usize>> {
        let res = Pin::new(&mut self.inner).poll_write(cx, b);
        if matches!(res, Poll::Ready(Err(_))) {
            self.stamp.0.write_failed.store(true, Ordering::Release);
        }
        res
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let res = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if matches!(res, Poll::Ready(Err(_))) {
            self.stamp.0.write_failed.store(true, Ordering::Release);
        }
        res
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arrival_is_the_read_time_minus_the_packets_age() {
        let now = *EPOCH + Duration::from_millis(500);
        let wall = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let read = since_epoch(now);
        // Arrived 3 ms before the read: stamped 3 ms earlier, lag 3 ms.
        let (at, lag) = arrival(now, wall, Some(wall - Duration::from_millis(3)));
        assert_eq!((read - at, lag), (3_000_000, 3_000_000));
        // No kernel time, one from the future, or one too old (a clock step): the read time.
        assert_eq!(arrival(now, wall, None), (read, 0));
        assert_eq!(arrival(now, wall, Some(wall + Duration::from_millis(1))), (read, 0));
        assert_eq!(arrival(now, wall, Some(wall - Duration::from_secs(11))), (read, 0));
    }

    #[tokio::test]
    async fn reads_carry_the_kernels_receive_time() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let client = TcpStream::connect(addr).await.unwrap();
        let (mut server, _) = listener.accept().await.unwrap();
        let (mut timed, stamp) = TimedStream::new(client);
        // The kernel turns receive timestamping on for the whole host with deferred work when
        // the first socket asks; a packet received before that has none. Let it take effect
        // (a run's connections are opened before its clock starts, for the same reason).
        tokio::time::sleep(Duration::from_millis(200)).await;
        server.write_all(b"data: x\n\n").await.unwrap();
        let sent = since_epoch(Instant::now());
        // The reader comes 30 ms late: the stamp must still say when the bytes arrived.
        std::thread::sleep(Duration::from_millis(30));
        let mut buf = [0u8; 64];
        let n = timed.read(&mut buf).await.unwrap();
        assert_eq!(&buf[..n], b"data: x\n\n");
        let at = stamp.last().unwrap();
        if cfg!(target_os = "linux") {
            assert!(stamp.is_arrival());
            assert!(
                at <= sent + 5_000_000,
                "stamped {} ms after the send",
                (at - sent) / 1_000_000
            );
        } else {
            assert!(at >= sent + 30_000_000);
        }
    }

    async fn pair() -> (TimedStream, ReadStamp, TcpStream, RawSocket) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap()).await.unwrap();
        let (server, _) = listener.accept().await.unwrap();
        let socket = raw_socket(&client);
        let (timed, stamp) = TimedStream::new(client);
        (timed, stamp, server, socket)
    }

    #[tokio::test]
    async fn a_fin_is_an_eof_and_is_seen_by_a_peek_before_any_read() {
        use tokio::io::AsyncReadExt;
        let (mut timed, stamp, server, socket) = pair().await;
        assert!(!peer_gone(socket), "an open idle connection");
        drop(server);
        tokio::time::sleep(Duration::from_millis(50)).await;
        if cfg!(target_os = "linux") {
            assert!(peer_gone(socket));
        }
        assert_eq!(stamp.end(), ReadEnd::Open);
        let mut buf = [0u8; 8];
        assert_eq!(timed.read(&mut buf).await.unwrap(), 0);
        assert_eq!(stamp.end(), ReadEnd::Eof);
        assert_eq!(stamp.last(), None);
        assert!(!stamp.write_failed());
    }

    #[tokio::test]
    async fn an_rst_is_a_reset_and_stray_bytes_make_a_connection_stale() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let (mut timed, stamp, mut server, socket) = pair().await;
        server.write_all(b"x").await.unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        if cfg!(target_os = "linux") {
            assert!(peer_gone(socket), "unasked-for bytes");
        }
        let mut buf = [0u8; 8];
        assert_eq!(timed.read(&mut buf).await.unwrap(), 1);
        assert!(stamp.last().is_some());
        stamp.begin_exchange();
        assert_eq!(stamp.last(), None);
        server.set_zero_linger().unwrap();
        drop(server);
        let e = timed.read(&mut buf).await.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::ConnectionReset);
        assert_eq!(stamp.end(), ReadEnd::Reset);
        // Writing to a reset connection fails, and that is recorded.
        let _ = timed.write_all(b"POST / HTTP/1.1\r\n\r\n").await;
        let _ = timed.write_all(b"more").await;
        assert!(stamp.write_failed());
    }
}
