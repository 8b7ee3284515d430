//! One OpenTelemetry pipeline per demo service: its own resource (`service.name`), its own
//! `SdkTracerProvider` exporting over OTLP/gRPC, and a tracing subscriber that feeds it.
//!
//! Spans enter through `tracing` on the service's own thread (the subscriber is that thread's
//! default, never the global one, so several services can live in one process), and leave through
//! the batch processor's export thread to the configured OTLP endpoint.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{SpanExporter, WithExportConfig as _};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::SpanData;
use opentelemetry_sdk::trace::{BatchConfigBuilder, BatchSpanProcessor, SdkTracerProvider};
use tracing::level_filters::LevelFilter;
use tracing_subscriber::Layer as _;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::SubscriberExt as _;

use crate::DemoError;

/// How often a service's batch processor exports: short, so the screen follows the traffic.
const EXPORT_DELAY: Duration = Duration::from_millis(200);

/// Where the services export, and the tally of how their exports went (shared by every
/// service of a run).
#[derive(Clone, Debug)]
pub(crate) struct Export {
    /// The OTLP/gRPC endpoint, `http://host:port`.
    pub(crate) endpoint: String,
    pub(crate) counts: ExportCounts,
}

/// How the services' span exports went, counted as each export request is answered: a run
/// against an endpoint where nothing listens says so instead of looking fine.
#[derive(Clone, Debug, Default)]
pub struct ExportCounts(Arc<ExportTally>);

#[derive(Debug, Default)]
struct ExportTally {
    exported: AtomicU64,
    failed: AtomicU64,
    last_error: Mutex<Option<String>>,
}

/// [`ExportCounts`] at one moment.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExportSnapshot {
    /// Spans the endpoint accepted.
    pub exported: u64,
    /// Spans whose export failed (nothing listening, refused, timed out).
    pub failed: u64,
    /// What the last failed export said.
    pub last_error: Option<String>,
}

impl ExportCounts {
    /// The counts so far.
    pub fn snapshot(&self) -> ExportSnapshot {
        ExportSnapshot {
            exported: self.0.exported.load(Ordering::Relaxed),
            failed: self.0.failed.load(Ordering::Relaxed),
            last_error: self
                .0
                .last_error
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .clone(),
        }
    }

    fn count(&self, spans: usize, result: &OTelSdkResult) {
        match result {
            Ok(()) => self.0.exported.fetch_add(spans as u64, Ordering::Relaxed),
            Err(error) => {
                *self
                    .0
                    .last_error
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner()) =
                    Some(said_once(&error.to_string()));
                self.0.failed.fetch_add(spans as u64, Ordering::Relaxed)
            }
        };
    }
}

/// `text` with a cause repeated right after itself said once: the exporter's errors nest
/// tonic's, which nest hyper's, and read `tcp connect error: tcp connect error: Connection
/// refused`.
fn said_once(text: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for part in text.split(": ") {
        if parts.last() != Some(&part) {
            parts.push(part);
        }
    }
    parts.join(": ")
}

/// The OTLP exporter, counting what each export did.
#[derive(Debug)]
struct Counted {
    inner: SpanExporter,
    counts: ExportCounts,
}

impl opentelemetry_sdk::trace::SpanExporter for Counted {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let spans = batch.len();
        let result = self.inner.export(batch).await;
        self.counts.count(spans, &result);
        result
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

/// A service's tracing pipeline: the provider to flush at shutdown and the subscriber to install
/// as the default on the service's thread.
pub(crate) struct Telemetry {
    pub(crate) provider: SdkTracerProvider,
    pub(crate) dispatch: tracing::Dispatch,
    pub(crate) open: OpenSpans,
}

/// Counts the service's spans that have started and not yet ended. Every request holds its
/// SERVER span open until its work ends (even work that outlives its caller, or an item waiting
/// in a queue), so zero open spans means nothing is in flight: the moment to flush.
#[derive(Clone, Debug, Default)]
pub(crate) struct OpenSpans(Arc<AtomicUsize>);

impl OpenSpans {
    pub(crate) fn count(&self) -> usize {
        self.0.load(Ordering::Acquire)
    }
}

impl<S> tracing_subscriber::Layer<S> for OpenSpans
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    fn on_new_span(
        &self,
        _attrs: &tracing::span::Attributes<'_>,
        _id: &tracing::span::Id,
        _ctx: tracing_subscriber::layer::Context<'_, S>,
    ) {
        self.0.fetch_add(1, Ordering::AcqRel);
    }

    fn on_close(&self, _id: tracing::span::Id, _ctx: tracing_subscriber::layer::Context<'_, S>) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Telemetry {
    /// Build the pipeline for `service` exporting to `endpoint` (`http://host:port`).
    ///
    /// Must run inside a tokio runtime that keeps running while spans are exported: the tonic
    /// channel spawns its connection tasks onto it.
    pub(crate) fn new(service: &str, export: &Export) -> Result<Self, DemoError> {
        let exporter = SpanExporter::builder()
            .with_tonic()
            .with_endpoint(export.endpoint.as_str())
            .with_timeout(Duration::from_secs(5))
            .build()
            .map_err(|e| DemoError::Telemetry {
                service: service.to_owned(),
                message: e.to_string(),
            })?;
        let exporter = Counted {
            inner: exporter,
            counts: export.counts.clone(),
        };
        let processor = BatchSpanProcessor::builder(exporter)
            .with_batch_config(
                BatchConfigBuilder::default()
                    .with_scheduled_delay(EXPORT_DELAY)
                    .with_max_queue_size(8192)
                    .build(),
            )
            .build();
        let provider = SdkTracerProvider::builder()
            .with_span_processor(processor)
            .with_resource(
                Resource::builder()
                    .with_service_name(service.to_owned())
                    .build(),
            )
            .build();
        let tracer = provider.tracer(service.to_owned());
        let otel = tracing_opentelemetry::layer()
            .with_tracer(tracer)
            .with_location(false)
            .with_threads(false)
            .with_target(false)
            .with_tracked_inactivity(false);
        // Only the demo's and the library's spans: hyper, h2 and tonic spans would be noise, and
        // the exporter's own spans would feed back into the exporter.
        let filter = Targets::new()
            .with_default(LevelFilter::OFF)
            .with_target("deadline_budget", LevelFilter::INFO)
            .with_target("budget_demo", LevelFilter::INFO);
        let open = OpenSpans::default();
        let subscriber = tracing_subscriber::registry()
            .with(otel.with_filter(filter.clone()))
            .with(open.clone().with_filter(filter));
        Ok(Self {
            provider,
            dispatch: tracing::Dispatch::new(subscriber),
            open,
        })
    }

    /// Flush and stop the exporter. Blocks: call it off the runtime's own thread.
    pub(crate) fn shutdown(self) {
        // An export error at shutdown (collector already gone) loses spans but must not stop
        // the other services from shutting down.
        let _ = self.provider.shutdown();
    }
}

#[cfg(test)]
mod tests {
    use super::said_once;

    #[test]
    fn a_cause_repeated_by_the_layers_below_is_said_once() {
        assert_eq!(
            said_once(
                "Operation failed: TonicTracesClient export failed with gRPC code: Unavailable: transport error: tcp connect error: tcp connect error: Connection refused (os error 111)"
            ),
            "Operation failed: TonicTracesClient export failed with gRPC code: Unavailable: transport error: tcp connect error: Connection refused (os error 111)"
        );
        assert_eq!(said_once("timed out"), "timed out");
    }
}
