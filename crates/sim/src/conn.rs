//! The per-connection socket wrapper: a response sets a switch and the connection acts on it
//! (ends with a TCP RST, or closes after the response without saying so).

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// Per-connection fault switches, set by a response and acted on by the connection.
#[derive(Debug, Default)]
pub struct ConnFlags {
    /// End the connection with RST (SO_LINGER 0) instead of FIN.
    pub reset: AtomicBool,
    /// Close the connection once the current response is written, without having said
    /// `Connection: close` (as llama-server does): a kept-alive connection the client may reuse
    /// is already gone.
    pub close: AtomicBool,
}

/// A TCP stream that obeys [`ConnFlags`].
pub struct ConnIo {
    pub(crate) tcp: TcpStream,
    pub(crate) flags: Arc<ConnFlags>,
}

impl ConnIo {
    fn reset_err(&self) -> Option<io::Error> {
        self.flags
            .reset
            .load(Relaxed)
            .then(|| io::Error::new(io::ErrorKind::ConnectionReset, "servelab-sim injected reset"))
    }
}

impl AsyncRead for ConnIo {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        // Reading end-of-stream makes hyper close the connection after the response.
        if self.flags.close.load(Relaxed) {
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.get_mut().tcp).poll_read(cx, buf)
    }
}

impl AsyncWrite for ConnIo {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, b: &[u8]) -> Poll<io::Result<usize>> {
        if let Some(e) = self.reset_err() {
            return Poll::Ready(Err(e));
        }
        Pin::new(&mut self.get_mut().tcp).poll_write(cx, b)
    }
    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        if let Some(e) = self.reset_err() {
            return Poll::Ready(Err(e));
        }
        Pin::new(&mut self.get_mut().tcp).poll_write_vectored(cx, bufs)
    }
    fn is_write_vectored(&self) -> bool {
        self.tcp.is_write_vectored()
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().tcp).poll_flush(cx)
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        // No FIN on a reset connection: the drop below sends the RST.
        if let Some(e) = self.reset_err() {
            return Poll::Ready(Err(e));
        }
        Pin::new(&mut self.get_mut().tcp).poll_shutdown(cx)
    }
}

impl Drop for ConnIo {
    fn drop(&mut self) {
        if self.flags.reset.load(Relaxed) {
            let _ = self.tcp.set_zero_linger();
        }
    }
}
