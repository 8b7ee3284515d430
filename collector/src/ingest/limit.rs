//! A cap on open connections per receiver, so many (or idle) clients cannot starve the others
//! or exhaust file descriptors: past the cap, new connections wait in the kernel's backlog
//! until one closes. Each accepted stream holds a semaphore permit that it releases on drop,
//! and is closed when the client sends nothing for `idle` (a connection that never finishes
//! its headers, or an idle keep-alive, gives its slot back).

use std::future::Future as _;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::{Instant, Sleep};

/// A TCP listener that holds at most `max` connections open at once.
#[derive(Debug)]
pub(super) struct LimitedListener {
    listener: TcpListener,
    permits: Arc<Semaphore>,
    idle: Duration,
}

impl LimitedListener {
    pub(super) fn new(listener: TcpListener, max: usize, idle: Duration) -> Self {
        LimitedListener {
            listener,
            permits: Arc::new(Semaphore::new(max.max(1))),
            idle,
        }
    }

    /// Waits for a free slot, then for a connection.
    pub(super) async fn accept(&self) -> io::Result<(LimitedStream, SocketAddr)> {
        let permit = self
            .permits
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| io::Error::other("connection limiter closed"))?;
        let (stream, addr) = self.listener.accept().await?;
        // Small OTLP responses should not wait for Nagle.
        let _ = stream.set_nodelay(true);
        Ok((
            LimitedStream {
                stream,
                _permit: permit,
                idle: self.idle,
                deadline: Box::pin(tokio::time::sleep(self.idle)),
            },
            addr,
        ))
    }
}

impl axum::serve::Listener for LimitedListener {
    type Io = LimitedStream;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            match LimitedListener::accept(self).await {
                Ok(accepted) => return accepted,
                // Out of descriptors and the like: wait a little rather than spin.
                Err(error) => {
                    tracing::warn!(%error, "accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
            }
        }
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        self.listener.local_addr()
    }
}

/// An accepted connection that frees its slot when dropped.
#[derive(Debug)]
pub(super) struct LimitedStream {
    stream: TcpStream,
    _permit: OwnedSemaphorePermit,
    idle: Duration,
    /// When a read that is still waiting gives up; pushed back by every byte received.
    deadline: Pin<Box<Sleep>>,
}

impl tonic::transport::server::Connected for LimitedStream {
    type ConnectInfo = tonic::transport::server::TcpConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.stream.connect_info()
    }
}

impl AsyncRead for LimitedStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        match Pin::new(&mut self.stream).poll_read(cx, buf) {
            Poll::Ready(result) => {
                if buf.filled().len() > before {
                    let next = Instant::now() + self.idle;
                    self.deadline.as_mut().reset(next);
                }
                Poll::Ready(result)
            }
            Poll::Pending => match self.deadline.as_mut().poll(cx) {
                Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "client sent nothing for too long",
                ))),
                Poll::Pending => Poll::Pending,
            },
        }
    }
}

impl AsyncWrite for LimitedStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
}
