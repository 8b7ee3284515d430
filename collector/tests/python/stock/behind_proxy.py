"""An app as a Python team runs it behind a proxy (Caddy), knowing nothing of budget-top: a WSGI
app traced by the stock WSGI middleware and requests instrumentation, which calls a
third-party API that has no tracing (a plain stdlib server in a thread of its own, on a free
port). `/slow` works 300 ms, then waits 1,500 ms on the API; `/fast` works 50 ms and waits 50
ms. The app never learns that its caller gave up.

Usage: behind_proxy.py; prints its port, and on SIGTERM what it saw: each request's path and
when it started and ended (Unix ns).
"""

import http.server
import socketserver
import threading
import time
import urllib.parse

import telemetry

provider = telemetry.start()

import requests  # noqa: E402
from opentelemetry.instrumentation.requests import RequestsInstrumentor  # noqa: E402
from opentelemetry.instrumentation.wsgi import OpenTelemetryMiddleware  # noqa: E402

RequestsInstrumentor().instrument()

# (own work s, the API's answer in ms) per path.
WORK = {"/slow": (0.3, 1500), "/fast": (0.05, 50)}

lock = threading.Lock()
requests_seen = []


class Api(http.server.BaseHTTPRequestHandler):
    """The untraced API: answers after `?ms=N` milliseconds."""

    def do_GET(self):  # noqa: N802 (the stdlib's name)
        query = urllib.parse.parse_qs(urllib.parse.urlparse(self.path).query)
        time.sleep(int(query.get("ms", ["0"])[0]) / 1000)
        body = b"ok"
        self.send_response(200)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format, *args):  # noqa: A002 (the stdlib's name)
        pass


class ApiServer(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True


api = ApiServer(("127.0.0.1", 0), Api)
threading.Thread(target=api.serve_forever, daemon=True).start()
API_URL = f"http://127.0.0.1:{api.server_port}/"


def app(environ, start_response):
    started = time.time_ns()
    path = environ.get("PATH_INFO", "")
    work_s, api_ms = WORK.get(path, (0, 0))
    time.sleep(work_s)
    requests.get(API_URL, params={"ms": api_ms}, timeout=10)
    with lock:
        requests_seen.append({"path": path, "start_ns": started, "end_ns": time.time_ns()})
    start_response("200 OK", [("content-type", "text/plain")])
    return [b"done"]


def seen():
    with lock:
        return {"requests": list(requests_seen)}


telemetry.serve(OpenTelemetryMiddleware(app), provider, seen)
