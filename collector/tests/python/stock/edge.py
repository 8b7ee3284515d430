"""The edge service as a Python team writes it: a WSGI app that reads the team's budget header
(default 1000 ms) and calls the worker with requests. VARIANT `fixed`: a fixed 2 s timeout and
no header (the budget stops here); `propagated`: what remains, minus a 50 ms margin, as both the
timeout and the header. The margin keeps back time for the edge's own answer. Traced by nothing
but the stock WSGI middleware and requests instrumentation.

Usage: edge.py WORKER_URL VARIANT; prints its port, and on SIGTERM what it saw.
"""

import os
import sys
import threading
import time

import telemetry

provider = telemetry.start()

import requests  # noqa: E402
from opentelemetry.instrumentation.requests import RequestsInstrumentor  # noqa: E402
from opentelemetry.instrumentation.wsgi import OpenTelemetryMiddleware  # noqa: E402

RequestsInstrumentor().instrument()

WORKER_URL, VARIANT = sys.argv[1], sys.argv[2]
DEFAULT_BUDGET_MS = 1000
# A fixed 2 s, or what EDGE_FIXED_TIMEOUT_S says (the database test's gateway gives up at 1 s).
FIXED_TIMEOUT_S = float(os.environ.get("EDGE_FIXED_TIMEOUT_S", "2.0"))
MARGIN_MS = 50
REASONS = {200: "OK", 503: "Service Unavailable", 504: "Gateway Timeout"}

lock = threading.Lock()
seen = {"requests": 0, "answered": {}, "timed_out": 0, "not_called": 0}


def call_worker(budget_ms, arrival):
    """The worker's status, or None when no budget was left to call it."""
    if VARIANT == "fixed":
        return requests.get(WORKER_URL, timeout=FIXED_TIMEOUT_S).status_code
    left_ms = int(budget_ms - (time.monotonic() - arrival) * 1000 - MARGIN_MS)
    if left_ms <= 0:
        return None
    answer = requests.get(
        WORKER_URL,
        headers={telemetry.BUDGET_HEADER: str(left_ms)},
        timeout=left_ms / 1000,
    )
    return answer.status_code


def order(environ, start_response):
    arrival = time.monotonic()
    budget_ms = telemetry.budget_ms(environ, DEFAULT_BUDGET_MS)
    with lock:
        seen["requests"] += 1
    try:
        status = call_worker(budget_ms, arrival)
        if status is None:
            with lock:
                seen["not_called"] += 1
            status = 504
    except requests.RequestException:
        with lock:
            seen["timed_out"] += 1
        status = 504
    with lock:
        seen["answered"][str(status)] = seen["answered"].get(str(status), 0) + 1
    start_response(f"{status} {REASONS.get(status, 'Error')}", [("Content-Type", "text/plain")])
    return [b""]


telemetry.serve(OpenTelemetryMiddleware(order), provider, lambda: seen)
