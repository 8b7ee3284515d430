"""The budget contract for a Python HTTP service (docs/instrumenting.md quotes this file).

A hop reads the caller's budget, computes its deadline, forwards min(sla, remaining - margin)
on every outgoing call, refuses a call when nothing is left, and records the contract's span
attributes (CONVENTIONS.md section 2). Standard library HTTP plus the OpenTelemetry API.
"""

import re
import socket
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler

from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

MARGIN_MS = 10  # kept back for our own reply on every call
PROPAGATOR = TraceContextTextMapPropagator()
GRPC_UNIT_MS = {"H": 3_600_000, "M": 60_000, "S": 1000, "m": 1, "u": 0.001, "n": 0.000001}


def _x_budget_ms(value):
    return int(value) if re.fullmatch(r"\d{1,10}", value) and int(value) <= 2**31 else None


def _grpc_timeout(value):
    m = re.fullmatch(r"(\d{1,8})([HMSmun])", value)
    return int(int(m.group(1)) * GRPC_UNIT_MS[m.group(2)]) if m else None


CARRIERS = [("x-budget-ms", _x_budget_ms), ("grpc-timeout", _grpc_timeout)]


def read_budget(headers):
    """The first present and valid carrier as (ms, source, None); else (None, "invalid", value)
    or (None, "none", None)."""
    invalid = None
    for name, parse in CARRIERS:
        value = headers.get(name)
        if value is None:
            continue
        ms = parse(value.strip())
        if ms is not None:
            return ms, name, None
        invalid = invalid if invalid is not None else value
    return None, ("none" if invalid is None else "invalid"), invalid


class BudgetExhausted(Exception):
    """Raised by `call` when no budget is left to make it."""


class Hop:
    """One request being handled: its span's context and its deadline (monotonic seconds)."""

    def __init__(self, tracer, context, deadline):
        self.tracer, self.context, self.deadline = tracer, context, deadline

    def remaining_ms(self):
        return int((self.deadline - time.monotonic()) * 1000)


def budget_handler(tracer, handle, default_ms=None):
    """An HTTP handler class whose every GET is a hop; `handle(path, hop)` returns (status, body)."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            arrival = time.monotonic()
            # header names arrive in the sender's case (urllib sends "X-budget-ms")
            headers = {k.lower(): v for k, v in self.headers.items()}
            parent = PROPAGATOR.extract(headers)
            received, source, invalid = read_budget(headers)
            attributes = {"budget.source": source}
            budget_ms = received
            if received is not None:
                attributes["budget.received_ms"] = received
            if invalid is not None:
                attributes["budget.invalid_value"] = invalid
            if source == "none" and default_ms is not None:
                budget_ms = default_ms
                attributes.update({"budget.source": "default", "budget.default_ms": default_ms})
            deadline = None if budget_ms is None else arrival + budget_ms / 1000
            span = tracer.start_span(f"GET {self.path.split('?')[0]}", context=parent,
                                     kind=SpanKind.SERVER, attributes=attributes)
            hop = Hop(tracer, trace.set_span_in_context(span, parent), deadline)
            if deadline is not None and hop.remaining_ms() <= 0:
                return self.reply(span, 504, "shed_expired", b"budget expired before work started")
            if deadline is not None:
                span.set_attribute("budget.remaining_at_start_ms", hop.remaining_ms())
            try:
                status, body = handle(self.path, hop)
                self.reply(span, status, "ok", body)
            except (BudgetExhausted, TimeoutError):
                self.reply(span, 504, "deadline_exceeded", b"out of budget")
            except Exception as err:  # noqa: BLE001 - the reply says what went wrong
                self.reply(span, 500, "error", str(err).encode())

        def reply(self, span, status, outcome, body):
            span.set_attributes({"budget.outcome": outcome, "http.response.status_code": status})
            if status >= 500:
                span.set_status(Status(StatusCode.ERROR))
            span.end()  # before replying: the caller's span must not end before ours
            self.send_response(status)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    return Handler


def call(hop, name, url, sla_ms=None):
    """GET `url` from inside `hop` with min(sla_ms, remaining - margin) as timeout and budget."""
    attributes = {}
    timeout_ms = sla_ms
    if sla_ms is not None:
        attributes["budget.sla_ms"] = sla_ms
    if hop.deadline is not None:
        remaining = hop.remaining_ms()
        attributes["budget.remaining_ms"] = remaining
        timeout_ms = remaining - MARGIN_MS if sla_ms is None else min(sla_ms, remaining - MARGIN_MS)
    if timeout_ms is not None:
        attributes["budget.timeout_ms"] = timeout_ms
    with hop.tracer.start_as_current_span(name, context=hop.context, kind=SpanKind.CLIENT,
                                          attributes=attributes) as span:
        if timeout_ms is not None and timeout_ms <= 0:
            span.set_attribute("budget.outcome", "refused")  # the call is not made
            raise BudgetExhausted(f"no budget left for {name}")
        headers = {}
        if timeout_ms is not None:
            headers["x-budget-ms"] = str(timeout_ms)
            span.set_attribute("budget.forwarded_ms", timeout_ms)
        PROPAGATOR.inject(headers, context=trace.set_span_in_context(span, hop.context))
        request = urllib.request.Request(url, headers=headers)
        timeout = None if timeout_ms is None else timeout_ms / 1000
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                span.set_attribute("http.response.status_code", response.status)
                return response.status, response.read()
        except urllib.error.HTTPError as err:
            span.set_attribute("http.response.status_code", err.code)
            outcome = {503: "shed_full", 504: "deadline_exceeded"}.get(err.code, "error")
            span.set_attribute("budget.outcome", outcome)
            return err.code, err.read()
        except (TimeoutError, socket.timeout, urllib.error.URLError) as err:
            timed_out = isinstance(err, (TimeoutError, socket.timeout)) or isinstance(
                getattr(err, "reason", None), (TimeoutError, socket.timeout))
            span.set_attribute("budget.outcome", "deadline_exceeded" if timed_out else "error")
            raise TimeoutError(str(err)) if timed_out else err
