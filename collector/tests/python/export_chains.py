"""Export budget chains with the OpenTelemetry Python SDK's stock OTLP exporters.

Usage: export_chains.py grpc HOST:PORT | http HOST:PORT

Builds the contract's chain frontend -> orders -> inventory, where orders forwards 3000 ms
with only 700 ms left (a budget_reset), with explicit times so the result does not depend on
how fast this machine is, and a second chain where the budget travels only as captured
headers (`http.request.header.x-budget-ms`) and the callee received more than its caller
forwarded (also a budget_reset).
"""

import sys
import time

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import SpanKind


def provider(service, transport, addr):
    if transport == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        exporter = OTLPSpanExporter(endpoint=f"http://{addr}", insecure=True)
    else:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        exporter = OTLPSpanExporter(endpoint=f"http://{addr}/v1/traces")
    p = TracerProvider(resource=Resource.create({"service.name": service}))
    p.add_span_processor(SimpleSpanProcessor(exporter))
    return p


def main():
    transport, addr = sys.argv[1], sys.argv[2]
    services = ["py-frontend", "py-orders", "py-inventory", "py-edge", "py-backend"]
    providers = {s: provider(s, transport, addr) for s in services}
    t0 = time.time_ns() - 2_000_000_000
    ms = 1_000_000

    def start(service, name, kind, at, parent, attrs):
        tracer = providers[service].get_tracer("python-e2e")
        ctx = None
        if parent is not None:
            ctx = trace.set_span_in_context(trace.NonRecordingSpan(parent.get_span_context()))
        return tracer.start_span(name, context=ctx, kind=kind, start_time=t0 + at * ms, attributes=attrs)

    front = start("py-frontend", "GET /checkout", SpanKind.SERVER, 0, None, {
        "budget.source": "default", "budget.default_ms": 1000,
        "budget.remaining_at_start_ms": 1000, "budget.outcome": "ok"})
    call_orders = start("py-frontend", "GET orders", SpanKind.CLIENT, 5, front, {
        "budget.remaining_ms": 995, "budget.forwarded_ms": 995, "budget.timeout_ms": 995})
    orders = start("py-orders", "GET /orders", SpanKind.SERVER, 10, call_orders, {
        "budget.received_ms": 995, "budget.source": "x-budget-ms",
        "budget.remaining_at_start_ms": 990, "budget.outcome": "ok"})
    call_inv = start("py-orders", "GET inventory", SpanKind.CLIENT, 20, orders, {
        "budget.remaining_ms": 700, "budget.forwarded_ms": 3000, "budget.timeout_ms": 3000})
    inv = start("py-inventory", "GET /stock", SpanKind.SERVER, 25, call_inv, {
        "budget.received_ms": 3000, "budget.source": "x-budget-ms",
        "budget.remaining_at_start_ms": 2995, "budget.outcome": "ok"})
    for span, end in [(inv, 75), (call_inv, 80), (orders, 90), (call_orders, 95), (front, 100)]:
        span.end(end_time=t0 + end * ms)

    # Only captured headers on the callee: it received 5000 ms where 400 ms were forwarded.
    edge = start("py-edge", "GET /api", SpanKind.SERVER, 0, None, {
        "budget.source": "default", "budget.default_ms": 500,
        "budget.remaining_at_start_ms": 500, "budget.outcome": "ok"})
    call = start("py-edge", "GET backend", SpanKind.CLIENT, 5, edge, {
        "budget.remaining_ms": 495, "budget.forwarded_ms": 400, "budget.timeout_ms": 400})
    backend = start("py-backend", "GET /data", SpanKind.SERVER, 10, call, {
        "http.request.header.x-budget-ms": ["5000"], "http.response.status_code": 200})
    for span, end in [(backend, 50), (call, 60), (edge, 70)]:
        span.end(end_time=t0 + end * ms)

    for p in providers.values():
        p.force_flush()
        p.shutdown()


if __name__ == "__main__":
    main()
