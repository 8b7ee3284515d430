//! A cap on open connections per receiver, so many, idle or slow clients cannot lock a good
//! exporter out or exhaust file descriptors.
//!
//! Nothing waits for a slot: every connection is accepted at once. Past the cap, the
//! connection that has gone longest without progress and is not serving a request (an idle
//! keep-alive, a client that never finished its first request) is closed to make room; when
//! every connection is serving a request, the new one is closed instead. Besides:
//!
//! - a connection must start its first request within the header timeout (a client that sends
//!   its headers a byte a second, or nothing at all, gives its slot back);
//! - a connection with no request in progress is closed after the idle timeout, a shorter one
//!   once three quarters of the slots are taken.
//!
//! Progress is a request starting or finishing, told by the receivers through
//! [`ConnectionTag::busy`] (the tag travels in each request's extensions); bytes alone are not
//! progress, so trickling a header does not keep a slot.

use std::collections::HashMap;
use std::future::Future as _;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::{Instant, Sleep};
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};

use crate::ingest::IngestStats;

/// How far ahead a waiting read looks at most: the timeouts that apply can shorten (the cap
/// came near), and a read that sleeps this long rechecks them.
const RECHECK: Duration = Duration::from_secs(1);

/// The timeouts of [`LimitedListener`].
#[derive(Clone, Copy, Debug)]
pub(super) struct Limits {
    /// Connections held open at once.
    pub max: usize,
    /// Time from accepting a connection to its first request starting.
    pub header: Duration,
    /// Time a connection may serve no request.
    pub idle: Duration,
    /// The same once three quarters of `max` are open.
    pub idle_near_cap: Duration,
}

/// A TCP listener that holds at most `max` connections open at once (see the module doc).
#[derive(Debug)]
pub(super) struct LimitedListener {
    listener: TcpListener,
    registry: Arc<Registry>,
}

#[derive(Debug)]
struct Registry {
    limits: Limits,
    epoch: Instant,
    open: Mutex<HashMap<u64, Arc<Connection>>>,
    /// Entries of `open` (including connections told to close that have not gone yet).
    count: AtomicUsize,
    next_id: AtomicU64,
    stats: Arc<IngestStats>,
}

/// One connection, shared by its stream and the requests it serves.
#[derive(Debug)]
struct Connection {
    id: u64,
    epoch: Instant,
    close: CancellationToken,
    /// Requests in progress.
    busy: AtomicUsize,
    /// When it last made progress (accepted, a request started or finished), in ms since
    /// `epoch`.
    progress_ms: AtomicU64,
    /// Whether a request has started on it.
    served: AtomicBool,
}

impl Connection {
    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    fn progressed(&self) {
        self.progress_ms.store(self.now_ms(), Ordering::Relaxed);
    }
}

/// Which connection a request came on: the receivers find it in the request's extensions
/// (tonic puts it there as the stream's connect info; axum as `ConnectInfo`).
#[derive(Clone, Debug)]
pub(super) struct ConnectionTag(Arc<Connection>);

impl ConnectionTag {
    /// Marks a request in progress on the connection until the guard is dropped: a busy
    /// connection is never closed to make room, and its start and end are progress.
    pub(super) fn busy(&self) -> Busy {
        let connection = &self.0;
        connection.busy.fetch_add(1, Ordering::Relaxed);
        connection.served.store(true, Ordering::Relaxed);
        connection.progressed();
        Busy(connection.clone())
    }
}

/// See [`ConnectionTag::busy`].
#[derive(Debug)]
pub(super) struct Busy(Arc<Connection>);

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.progressed();
        self.0.busy.fetch_sub(1, Ordering::Relaxed);
    }
}

impl LimitedListener {
    pub(super) fn new(listener: TcpListener, limits: Limits, stats: Arc<IngestStats>) -> Self {
        let limits = Limits {
            max: limits.max.max(1),
            ..limits
        };
        LimitedListener {
            listener,
            registry: Arc::new(Registry {
                limits,
                epoch: Instant::now(),
                open: Mutex::new(HashMap::new()),
                count: AtomicUsize::new(0),
                next_id: AtomicU64::new(0),
                stats,
            }),
        }
    }

    /// The next connection, with a slot made for it (see the module doc). A connection that
    /// cannot have one is closed here and the next is awaited.
    pub(super) async fn accept(&self) -> io::Result<(LimitedStream, SocketAddr)> {
        loop {
            let (stream, addr) = self.listener.accept().await?;
            let Some(connection) = self.registry.admit() else {
                self.registry
                    .stats
                    .connections_refused
                    .fetch_add(1, Ordering::Relaxed);
                drop(stream);
                continue;
            };
            // Small OTLP responses should not wait for Nagle.
            let _ = stream.set_nodelay(true);
            let closed = Box::pin(connection.close.clone().cancelled_owned());
            return Ok((
                LimitedStream {
                    stream,
                    connection,
                    registry: self.registry.clone(),
                    timer: Box::pin(tokio::time::sleep(Duration::ZERO)),
                    closed,
                },
                addr,
            ));
        }
    }
}

impl Registry {
    fn open(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Arc<Connection>>> {
        match self.open.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// Registers a new connection, closing the least recently useful idle one when the cap is
    /// reached; `None` when every connection is serving a request.
    fn admit(&self) -> Option<Arc<Connection>> {
        let mut open = self.open();
        let live = open.values().filter(|c| !c.close.is_cancelled()).count();
        if live >= self.limits.max {
            let victim = open
                .values()
                .filter(|c| !c.close.is_cancelled() && c.busy.load(Ordering::Relaxed) == 0)
                .min_by_key(|c| (c.progress_ms.load(Ordering::Relaxed), c.id))?;
            victim.close.cancel();
            self.stats
                .connections_evicted
                .fetch_add(1, Ordering::Relaxed);
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let connection = Arc::new(Connection {
            id,
            epoch: self.epoch,
            close: CancellationToken::new(),
            busy: AtomicUsize::new(0),
            progress_ms: AtomicU64::new(0),
            served: AtomicBool::new(false),
        });
        connection.progressed();
        open.insert(id, connection.clone());
        self.count.store(open.len(), Ordering::Relaxed);
        Some(connection)
    }

    fn remove(&self, id: u64) {
        let mut open = self.open();
        open.remove(&id);
        self.count.store(open.len(), Ordering::Relaxed);
    }

    /// When a connection with no request in progress is due to close, from its last progress.
    fn limit(&self, connection: &Connection) -> Duration {
        if !connection.served.load(Ordering::Relaxed) {
            self.limits.header
        } else if self.count.load(Ordering::Relaxed) * 4 >= self.limits.max * 3 {
            self.limits.idle_near_cap.min(self.limits.idle)
        } else {
            self.limits.idle
        }
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
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        self.listener.local_addr()
    }
}

impl axum::extract::connect_info::Connected<axum::serve::IncomingStream<'_, LimitedListener>>
    for ConnectionTag
{
    fn connect_info(stream: axum::serve::IncomingStream<'_, LimitedListener>) -> Self {
        ConnectionTag(stream.io().connection.clone())
    }
}

/// An accepted connection: closed when its slot is given to another, or when it is past its
/// header or idle timeout while waiting for the client; frees its slot when dropped.
#[derive(Debug)]
pub(super) struct LimitedStream {
    stream: TcpStream,
    connection: Arc<Connection>,
    registry: Arc<Registry>,
    /// When a waiting read next looks at the timeouts.
    timer: Pin<Box<Sleep>>,
    /// Completes when the slot is given to another connection.
    closed: Pin<Box<WaitForCancellationFutureOwned>>,
}

impl Drop for LimitedStream {
    fn drop(&mut self) {
        self.registry.remove(self.connection.id);
    }
}

impl tonic::transport::server::Connected for LimitedStream {
    type ConnectInfo = ConnectionTag;

    fn connect_info(&self) -> Self::ConnectInfo {
        ConnectionTag(self.connection.clone())
    }
}

impl LimitedStream {
    /// The connection's tag, for the requests it serves.
    pub(super) fn tag(&self) -> ConnectionTag {
        ConnectionTag(self.connection.clone())
    }

    /// When the waiting read should look again: the connection's timeout, at most
    /// [`RECHECK`] away; `None` when it is already past it.
    fn next_look(&self) -> Option<Instant> {
        let now = Instant::now();
        let c = &self.connection;
        if c.busy.load(Ordering::Relaxed) > 0 {
            return Some(now + RECHECK);
        }
        let due = c.epoch
            + Duration::from_millis(c.progress_ms.load(Ordering::Relaxed))
            + self.registry.limit(c);
        (due > now).then(|| due.min(now + RECHECK))
    }
}

impl AsyncRead for LimitedStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let closed = || {
            Poll::Ready(Err(io::Error::new(
                io::ErrorKind::ConnectionAborted,
                "closed to make room for another connection",
            )))
        };
        if self.connection.close.is_cancelled() {
            return closed();
        }
        if let Poll::Ready(result) = Pin::new(&mut self.stream).poll_read(cx, buf) {
            return Poll::Ready(result);
        }
        if self.closed.as_mut().poll(cx).is_ready() {
            return closed();
        }
        // Bounded: a look that is not due re-arms the timer in the future, which is pending.
        for _ in 0..2 {
            let Some(at) = self.next_look() else {
                return Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "no request started within the header or idle timeout",
                )));
            };
            if self.timer.deadline() != at {
                self.timer.as_mut().reset(at);
            }
            if self.timer.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
        }
        // The timer fired within the same instant twice: look again at the next poll.
        cx.waker().wake_by_ref();
        Poll::Pending
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
