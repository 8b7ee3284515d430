//! What the library's layer benches share: criterion's settings, and spans recorded the way a
//! service exports them.

use std::time::Duration;

use criterion::Criterion;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider};
use tracing_subscriber::layer::SubscriberExt as _;

/// Short runs: each bench measures one layer's few microseconds.
pub fn criterion() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
}

/// Spans recorded through tracing-opentelemetry into an in-memory exporter, while this lives.
pub struct Exporting {
    // Dropped in this order: the subscriber first, then the provider it exports through.
    _guard: tracing::subscriber::DefaultGuard,
    _provider: SdkTracerProvider,
    /// Every span exported: the bench clears it so memory stays flat.
    pub exporter: InMemorySpanExporter,
}

/// Makes this thread's spans recorded and exported, as a service's are, until the result drops.
pub fn exporting() -> Exporting {
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    let subscriber = tracing_subscriber::registry().with(
        tracing_opentelemetry::layer()
            .with_tracer(provider.tracer("bench"))
            .with_location(false)
            .with_threads(false)
            .with_target(false)
            .with_tracked_inactivity(false),
    );
    let guard = tracing::subscriber::set_default(subscriber);
    Exporting {
        _guard: guard,
        _provider: provider,
        exporter,
    }
}
