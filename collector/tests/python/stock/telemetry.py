"""The stock OpenTelemetry Python set-up a team writes, knowing nothing of budget-top.

One tracer provider exporting with the stock OTLP/HTTP exporter, configured the stock way by the
environment: `OTEL_SERVICE_NAME`, `OTEL_EXPORTER_OTLP_ENDPOINT` (the exporter appends
`/v1/traces`), `OTEL_BSP_SCHEDULE_DELAY`, and the header capture of the instrumentations
(`OTEL_INSTRUMENTATION_HTTP_CAPTURE_HEADERS_SERVER_REQUEST` for the WSGI middleware,
`OTEL_INSTRUMENTATION_HTTP_CAPTURE_HEADERS_CLIENT_REQUEST` for requests). And the plain stdlib
server the team runs its WSGI app on: wsgiref, a thread per request.
"""

import json
import os
import signal
import socketserver
import sys
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

# The header this team has always used for its budget: milliseconds left.
BUDGET_HEADER = "x-prazo-restante-ms"
# The same header as WSGI hands it to the app.
BUDGET_ENVIRON = "HTTP_X_PRAZO_RESTANTE_MS"
# Where the request handler leaves the connection, so the app can tell whether its caller is
# still there.
CONNECTION_ENVIRON = "team.connection"


def start():
    provider = TracerProvider(resource=Resource.create())
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    return provider


def budget_ms(environ, default):
    """The caller's budget from the team's header, or `default` when absent or not a number."""
    try:
        value = int(environ.get(BUDGET_ENVIRON, ""))
    except ValueError:
        return default
    return value if value >= 0 else default


class ThreadingServer(socketserver.ThreadingMixIn, WSGIServer):
    daemon_threads = True
    # A burst of requests arrives at once: the default backlog of 5 would make the kernel drop
    # connections and the callers retry a second later.
    request_queue_size = 128


class Handler(WSGIRequestHandler):
    def get_environ(self):
        environ = super().get_environ()
        environ[CONNECTION_ENVIRON] = self.connection
        return environ

    def log_message(self, format, *args):  # noqa: A002 (the stdlib's name)
        pass


def serve(app, provider, seen):
    """Serves `app` on a free loopback port and prints the port; on SIGTERM flushes the spans,
    prints what the service saw (`seen()`, as JSON) and exits, as a deployment stops it."""
    server = make_server("127.0.0.1", 0, app, server_class=ThreadingServer, handler_class=Handler)

    def stop(_signum, _frame):
        try:
            provider.force_flush()
            provider.shutdown()
        finally:
            sys.stdout.write(json.dumps(seen()) + "\n")
            sys.stdout.flush()
            os._exit(0)

    signal.signal(signal.SIGTERM, stop)
    print(server.server_port, flush=True)
    server.serve_forever()
