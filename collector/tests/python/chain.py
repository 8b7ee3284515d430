"""A small Python HTTP chain built on budget.py, exported with the stock OTLP exporters to
budget-top. Usage: chain.py grpc|http HOST:PORT

py-frontend (edge, 1000 ms default) -> py-orders (SLA 800) -> py-inventory (SLA 300), plus the
mistakes budget-top exists to find:
- py-reports forwards its own SLA (3000 ms) instead of what remains: budget_reset;
- py-search is a stock service that ignores budgets and works 600 ms while its caller gives up
  after 100 ms: orphaned_work;
- py-batch gets 200 ms and spends 250 ms on its own work: its call is refused, and its 504
  comes 50 ms after its budget ran out: the deadline enforced a moment late, no finding;
- a request that arrives with 0 ms is shed before work starts: shed_expired (info).
"""

import json
import os
import sys
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import SpanKind

from budget import PROPAGATOR, budget_handler, call


def exporter(transport, addr):
    """Points the stock exporter at budget-top (gRPC port 4317, HTTP port 4318 by default)."""
    if transport == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        return OTLPSpanExporter(endpoint=f"http://{addr}", insecure=True)
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter(endpoint=f"http://{addr}/v1/traces")


def serve(handler):
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def url(server, path):
    return f"http://127.0.0.1:{server.server_address[1]}{path}"


def main():
    transport, addr = sys.argv[1], sys.argv[2]
    watchdog = threading.Timer(60, lambda: os._exit(3))  # a test never hangs on this script
    watchdog.daemon = True
    watchdog.start()
    providers = {}

    def tracer(service):
        if service not in providers:
            p = TracerProvider(resource=Resource.create({"service.name": service}))
            p.add_span_processor(BatchSpanProcessor(exporter(transport, addr)))
            providers[service] = p
        return providers[service].get_tracer("budget-top-python-e2e")

    def stock(path, hop):
        time.sleep(0.005)
        return 200, b"in stock"

    inventory = serve(budget_handler(tracer("py-inventory"), stock))
    orders = serve(budget_handler(tracer("py-orders"),
                                  lambda path, hop: call(hop, "GET inventory", url(inventory, "/stock"), 300)))

    def report(path, hop):  # the mistake: the SLA forwarded as if it were the budget
        with hop.tracer.start_as_current_span("GET inventory", context=hop.context, kind=SpanKind.CLIENT,
                                              attributes={"budget.remaining_ms": hop.remaining_ms(),
                                                          "budget.forwarded_ms": 3000,
                                                          "budget.timeout_ms": 3000}) as span:
            headers = {"x-budget-ms": "3000"}
            PROPAGATOR.inject(headers, context=trace.set_span_in_context(span, hop.context))
            request = urllib.request.Request(url(inventory, "/stock"), headers=headers)
            with urllib.request.urlopen(request, timeout=3) as r:
                return r.status, r.read()

    reports = serve(budget_handler(tracer("py-reports"), report))

    def batch_work(path, hop):
        time.sleep(0.25)  # local work that uses up the budget
        return call(hop, "GET inventory", url(inventory, "/stock"), 300)

    batch = serve(budget_handler(tracer("py-batch"), batch_work))

    search_tracer = tracer("py-search")
    search_finished = threading.Event()

    class Search(BaseHTTPRequestHandler):  # a stock service: traced, budgets ignored
        def do_GET(self):
            parent = PROPAGATOR.extract({k.lower(): v for k, v in self.headers.items()})
            span = search_tracer.start_span("GET /search", context=parent, kind=SpanKind.SERVER)
            time.sleep(0.6)
            span.end()
            try:
                self.send_response(200)
                self.end_headers()
            except OSError:
                pass  # the caller is long gone
            search_finished.set()

        def log_message(self, *args):
            pass

    search = serve(Search)

    def front(path, hop):
        if path == "/checkout":
            return call(hop, "GET orders", url(orders, "/orders"), 800)
        if path == "/report":
            return call(hop, "GET reports", url(reports, "/reports"), 2000)
        if path == "/search":
            return call(hop, "GET search", url(search, "/search"), 100)
        return 404, b"no such page"

    frontend = serve(budget_handler(tracer("py-frontend"), front, default_ms=1000))

    def get(server, path, budget=None):
        headers = {} if budget is None else {"x-budget-ms": budget}
        try:
            with urllib.request.urlopen(urllib.request.Request(url(server, path), headers=headers), timeout=10) as r:
                return r.status
        except urllib.error.HTTPError as err:
            return err.code

    statuses = {
        "checkout": get(frontend, "/checkout"),
        "report": get(frontend, "/report"),
        "search": get(frontend, "/search"),
        "refused": get(batch, "/batch", "200"),
        "expired": get(orders, "/orders", "0"),
    }
    search_finished.wait(10)  # py-search finishes the work nobody waits for
    print(json.dumps(statuses))
    for server in [inventory, orders, reports, batch, search, frontend]:
        server.shutdown()
    for p in providers.values():
        p.shutdown()


if __name__ == "__main__":
    main()
