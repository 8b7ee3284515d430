"""Export a span, a metric and a log record with the OpenTelemetry Python SDK's stock OTLP
exporters, all to one endpoint, the way a service configured only with
OTEL_EXPORTER_OTLP_ENDPOINT does (the exporters take it from the environment; the HTTP ones add
/v1/traces, /v1/metrics and /v1/logs to it).

Usage: OTEL_EXPORTER_OTLP_ENDPOINT=http://HOST:PORT export_signals.py grpc|http

Exits 3, printing them, when the SDK logged any warning or error (a failed or retried export);
0 when every signal was exported without one.
"""

import logging
import sys

from opentelemetry.sdk._logs import LoggerProvider, LoggingHandler
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import SpanKind


class Complaints(logging.Handler):
    """Collects what the SDK and its exporters log at WARNING or above."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.records = []

    def emit(self, record):
        self.records.append(f"{record.name}: {record.getMessage()}")


def main():
    transport = sys.argv[1]
    if transport == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter
        from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    else:
        from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    complaints = Complaints()
    logging.getLogger("opentelemetry").addHandler(complaints)

    resource = Resource.create({"service.name": f"py-signals-{transport}"})
    traces = TracerProvider(resource=resource)
    traces.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    reader = PeriodicExportingMetricReader(OTLPMetricExporter(), export_interval_millis=60_000)
    metrics = MeterProvider(resource=resource, metric_readers=[reader])
    logs = LoggerProvider(resource=resource)
    logs.add_log_record_processor(BatchLogRecordProcessor(OTLPLogExporter()))

    app_log = logging.getLogger("app")
    app_log.propagate = False
    app_log.setLevel(logging.INFO)
    app_log.addHandler(LoggingHandler(level=logging.INFO, logger_provider=logs))

    with traces.get_tracer("signals").start_as_current_span("GET /signals", kind=SpanKind.SERVER):
        metrics.get_meter("signals").create_counter("requests").add(1)
        app_log.info("handled a request")

    for provider in (traces, metrics, logs):
        provider.force_flush()
    for provider in (traces, metrics, logs):
        provider.shutdown()

    if complaints.records:
        print("\n".join(complaints.records), file=sys.stderr)
        sys.exit(3)


main()
