//! Accepting a connection under its listener's cap, and bounding it in time.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::{Instant, Sleep};

use super::ConnectionLimits;
use super::limits::ACCEPT_BACKOFF;

/// The next connection, once one of `permits` is free: the cap waits, and the kernel's backlog
/// holds the connections that come meanwhile.
pub(super) async fn accept(
    listener: &TcpListener,
    permits: &Arc<Semaphore>,
    limits: ConnectionLimits,
    first_bytes: usize,
) -> Bounded<TcpStream> {
    // The semaphore is never closed.
    let Ok(permit) = permits.clone().acquire_owned().await else {
        return std::future::pending().await;
    };
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                let _ = stream.set_nodelay(true);
                return Bounded::new(stream, permit, limits, first_bytes);
            }
            // One connection's failure: the next may be fine.
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::ConnectionAborted
                        | io::ErrorKind::ConnectionReset
                        | io::ErrorKind::ConnectionRefused
                        | io::ErrorKind::Interrupted
                ) => {}
            Err(e) => {
                tracing::warn!("cannot accept a connection: {e}; retrying");
                tokio::time::sleep(ACCEPT_BACKOFF).await;
            }
        }
    }
}

/// A connection with its bounds: it holds one of its listener's permits until it is dropped,
/// must send its first bytes ([`GRPC_FIRST_BYTES`], [`HTTP_FIRST_BYTES`]) within the header
/// read timeout, and is closed (an
/// error `TimedOut`) when no byte moves either way for the idle timeout.
pub(super) struct Bounded<S> {
    io: S,
    _permit: OwnedSemaphorePermit,
    /// The first bytes still due before the first deadline.
    first_bytes: usize,
    /// The first bytes' deadline, then the idle one from the last byte moved.
    first_deadline: Instant,
    last_moved: Instant,
    idle: Duration,
    timer: Pin<Box<Sleep>>,
}

impl<S> Bounded<S> {
    fn new(
        io: S,
        permit: OwnedSemaphorePermit,
        limits: ConnectionLimits,
        first_bytes: usize,
    ) -> Bounded<S> {
        let now = Instant::now();
        let first_deadline = now + limits.header_read_timeout;
        Bounded {
            io,
            _permit: permit,
            first_bytes,
            first_deadline,
            last_moved: now,
            idle: limits.idle_timeout,
            timer: Box::pin(tokio::time::sleep_until(first_deadline)),
        }
    }

    fn deadline(&self) -> Instant {
        if self.first_bytes > 0 {
            self.first_deadline
        } else {
            self.last_moved + self.idle
        }
    }

    fn moved(&mut self, read: usize, written: usize) {
        if read + written > 0 {
            self.first_bytes = self.first_bytes.saturating_sub(read);
            self.last_moved = Instant::now();
        }
    }

    /// Whether the deadline has passed; if not, the timer is set to wake this task at it.
    fn poll_expired(&mut self, cx: &mut Context<'_>) -> bool {
        // The timer is moved to the deadline only here, when the I/O waits, not on each byte.
        let deadline = self.deadline();
        if self.timer.deadline() != deadline {
            self.timer.as_mut().reset(deadline);
        }
        self.timer.as_mut().poll(cx).is_ready()
    }

    fn expired(&self) -> io::Error {
        let what = if self.first_bytes > 0 {
            "the connection's first bytes did not arrive within the header read timeout"
        } else {
            "no byte moved within the idle timeout"
        };
        io::Error::new(io::ErrorKind::TimedOut, what)
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Bounded<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        match Pin::new(&mut this.io).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                this.moved(buf.filled().len() - before, 0);
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending if this.poll_expired(cx) => Poll::Ready(Err(this.expired())),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<S> Bounded<S> {
    /// A write's outcome: bytes that moved keep the connection alive; a write that waits past
    /// the deadline fails.
    fn wrote(
        &mut self,
        cx: &mut Context<'_>,
        polled: Poll<io::Result<usize>>,
    ) -> Poll<io::Result<usize>> {
        match polled {
            Poll::Ready(Ok(n)) => {
                self.moved(0, n);
                Poll::Ready(Ok(n))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending if self.poll_expired(cx) => Poll::Ready(Err(self.expired())),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Bounded<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.io).poll_write(cx, buf);
        this.wrote(cx, polled)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.io).poll_write_vectored(cx, bufs);
        this.wrote(cx, polled)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}
