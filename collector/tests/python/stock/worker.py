"""A worker service as a Python team writes it: a WSGI app on wsgiref's threading server, 4
workers (a semaphore) and a queue of 20 in front of them; 503 when the queue is full, 504 when an
item leaves the queue too late to finish its work before its deadline (the caller's budget when
it sent one, else 2 s after arrival). Its work (a sleep standing in for a database call) is a
span of its own. Traced by nothing but the stock WSGI middleware.

Usage: worker.py WORK_MS; prints its port, and on SIGTERM what it did.
"""

import select
import socket
import sys
import threading
import time

import telemetry

provider = telemetry.start()

from opentelemetry import trace  # noqa: E402 (after the provider, as the SDK docs do it)
from opentelemetry.instrumentation.wsgi import OpenTelemetryMiddleware  # noqa: E402

WORKERS = 4
QUEUE = 20
DEFAULT_MAX_WAIT_MS = 2000
WORK_S = int(sys.argv[1]) / 1000

tracer = trace.get_tracer("worker")
workers = threading.BoundedSemaphore(WORKERS)
lock = threading.Lock()
waiting = 0
seen = {
    "requests": 0,
    "full": 0,
    "expired": 0,
    "expired_answered": 0,
    "worked": 0,
    "worked_for_nobody": 0,
}


def count(what):
    with lock:
        seen[what] += 1


def caller_gone(environ):
    """Whether the caller closed its connection: readable with nothing to read is its EOF (a
    GET has no body left to read)."""
    conn = environ[telemetry.CONNECTION_ENVIRON]
    try:
        readable, _, _ = select.select([conn], [], [], 0)
        return bool(readable) and conn.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True


def answer(start_response, status, body):
    start_response(status, [("Content-Type", "text/plain")])
    return [body]


def reserve(environ, start_response):
    global waiting
    arrival = time.monotonic()
    deadline = arrival + telemetry.budget_ms(environ, DEFAULT_MAX_WAIT_MS) / 1000
    with lock:
        seen["requests"] += 1
        queued = not workers.acquire(blocking=False)
        if queued:
            if waiting >= QUEUE:
                seen["full"] += 1
                return answer(start_response, "503 Service Unavailable", b"queue full")
            waiting += 1
    try:
        if queued:
            workers.acquire()
            with lock:
                waiting -= 1
            if time.monotonic() + WORK_S > deadline:
                count("expired")
                # The caller may have gone already (its own timeout): then nobody reads the 504.
                if not caller_gone(environ):
                    count("expired_answered")
                return answer(start_response, "504 Gateway Timeout", b"expired in the queue")
        with tracer.start_as_current_span("reserve stock"):
            time.sleep(WORK_S)
        count("worked")
        if caller_gone(environ):
            count("worked_for_nobody")
        return answer(start_response, "200 OK", b"reserved")
    finally:
        workers.release()


telemetry.serve(OpenTelemetryMiddleware(reserve), provider, lambda: seen)
