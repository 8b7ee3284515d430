//! Hosting one demo service: its own thread, its own current-thread tokio runtime, its own
//! listener on 127.0.0.1:0 and its own telemetry pipeline.
//!
//! A service is started with an axum `Router` factory, or a tonic `Routes` factory for a gRPC
//! service (called on the service's thread, inside its runtime, with the thread's tracing
//! subscriber installed) and stopped with
//! [`ServiceHost::shutdown`], which stops the listener, waits a bounded time for in-flight
//! requests, flushes the exporter and joins the thread: no port or thread is left over.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use axum::Router;
use deadline_budget::BudgetLayer;
use tokio_util::sync::CancellationToken;

use crate::DemoError;
use crate::telemetry::{Export, Telemetry};

/// How long a stopping service waits for requests still in flight (and work that outlived its
/// caller) before dropping them.
const DRAIN: Duration = Duration::from_secs(5);

/// The longest a stopping service waits for work in flight before flushing its spans: the
/// drain of its requests, then of work that outlived its caller (slow-dependency's lesson).
pub const STOP_WAIT: Duration = DRAIN.saturating_mul(2);

/// A service serving its listener until the stop token is cancelled.
type Serving = Pin<Box<dyn Future<Output = std::io::Result<()>>>>;

/// A running service.
#[derive(Debug)]
pub(crate) struct ServiceHost {
    name: &'static str,
    addr: SocketAddr,
    stop: CancellationToken,
    thread: Option<thread::JoinHandle<()>>,
}

impl ServiceHost {
    /// Start `name` exporting to `endpoint`; returns once it listens (or failed to start).
    ///
    /// `stop` is also given to the router factory so background work (queue workers) stops
    /// with the service.
    pub(crate) fn start<F>(
        name: &'static str,
        endpoint: &Export,
        make_router: F,
    ) -> Result<Self, DemoError>
    where
        F: FnOnce(CancellationToken) -> Router + Send + 'static,
    {
        Self::start_serving(name, endpoint, move |listener, stop| {
            let router = make_router(stop.clone());
            Box::pin(async move {
                axum::serve(listener, router)
                    .with_graceful_shutdown(stop.cancelled_owned())
                    .await
            })
        })
    }

    /// Start `name` as a gRPC service: tonic's server with `layer` in front of the routes
    /// `make_routes` builds (the two lines a tonic service adds: `.layer(BudgetLayer::new())`
    /// on the server builder, and the handler reads `Deadline::current()`).
    pub(crate) fn start_grpc<F>(
        name: &'static str,
        endpoint: &Export,
        layer: BudgetLayer,
        make_routes: F,
    ) -> Result<Self, DemoError>
    where
        F: FnOnce() -> tonic::service::Routes + Send + 'static,
    {
        Self::start_serving(name, endpoint, move |listener, stop| {
            let mut builder = tonic::transport::Server::builder().layer(layer);
            let server = builder.add_routes(make_routes());
            let incoming = tonic::transport::server::TcpIncoming::from(listener);
            Box::pin(async move {
                server
                    .serve_with_incoming_shutdown(incoming, stop.cancelled_owned())
                    .await
                    .map_err(std::io::Error::other)
            })
        })
    }

    fn start_serving<F>(name: &'static str, endpoint: &Export, serve: F) -> Result<Self, DemoError>
    where
        F: FnOnce(tokio::net::TcpListener, CancellationToken) -> Serving + Send + 'static,
    {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").map_err(DemoError::Io)?;
        listener.set_nonblocking(true).map_err(DemoError::Io)?;
        let addr = listener.local_addr().map_err(DemoError::Io)?;
        let stop = CancellationToken::new();
        let (ready_tx, ready_rx) = mpsc::channel::<Result<(), DemoError>>();
        let endpoint = endpoint.clone();
        let thread_stop = stop.clone();
        let thread = thread::Builder::new()
            .name(format!("svc-{name}"))
            .spawn(move || run(name, &endpoint, listener, thread_stop, serve, ready_tx))
            .map_err(DemoError::Io)?;
        match ready_rx.recv() {
            Ok(Ok(())) => Ok(Self {
                name,
                addr,
                stop,
                thread: Some(thread),
            }),
            Ok(Err(e)) => {
                let _ = thread.join();
                Err(e)
            }
            Err(_) => {
                let _ = thread.join();
                Err(DemoError::ServiceDied(name))
            }
        }
    }

    /// The service's name (its `service.name`).
    pub(crate) fn name(&self) -> &'static str {
        self.name
    }

    /// Where it listens.
    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The base URL of the service.
    pub(crate) fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Signal the service to stop without waiting (all services can drain at once).
    pub(crate) fn signal_stop(&self) {
        self.stop.cancel();
    }

    /// Stop the service and wait for its thread (listener closed, spans flushed). Blocks.
    pub(crate) fn join(mut self) {
        self.stop.cancel();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for ServiceHost {
    fn drop(&mut self) {
        // Dropped without `join` (an error path): still stop the service; its thread ends alone.
        self.stop.cancel();
    }
}

fn run<F>(
    name: &'static str,
    endpoint: &Export,
    listener: std::net::TcpListener,
    stop: CancellationToken,
    serve: F,
    ready: mpsc::Sender<Result<(), DemoError>>,
) where
    F: FnOnce(tokio::net::TcpListener, CancellationToken) -> Serving,
{
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            let _ = ready.send(Err(DemoError::Io(e)));
            return;
        }
    };
    // The exporter is built inside the runtime (its tonic channel spawns onto it).
    let telemetry = match runtime.block_on(async { Telemetry::new(name, endpoint) }) {
        Ok(t) => t,
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    let dispatch = telemetry.dispatch.clone();
    let open = telemetry.open.clone();
    let served = tracing::dispatcher::with_default(&dispatch, || {
        runtime.block_on(async {
            let listener = tokio::net::TcpListener::from_std(listener).map_err(DemoError::Io)?;
            let mut server = serve(listener, stop.clone());
            let _ = ready.send(Ok(()));
            tokio::select! {
                done = &mut server => done.map_err(DemoError::Io)?,
                () = async { stop.cancelled().await; tokio::time::sleep(DRAIN).await } => {}
            }
            // The listener is closed; work that outlived its caller may still run, and its spans
            // are the lesson: let it end (bounded) before flushing.
            let until = tokio::time::Instant::now() + DRAIN;
            while open.count() > 0 && tokio::time::Instant::now() < until {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            Ok::<(), DemoError>(())
        })
    });
    if let Err(e) = served {
        crate::stderr_line!("budget-demo: service {name} stopped with an error: {e}");
    }
    // Flush while the runtime still drives the exporter's channel: the blocking shutdown runs
    // on a blocking thread, this thread keeps the runtime turning. Tasks still finishing record
    // into the same pipeline, so the subscriber stays installed.
    tracing::dispatcher::with_default(&dispatch, || {
        runtime.block_on(async {
            let _ = tokio::task::spawn_blocking(move || telemetry.shutdown()).await;
        });
    });
    runtime.shutdown_timeout(Duration::from_secs(1));
}
