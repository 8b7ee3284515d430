"""An app as a Python team writes it, in front of PostgreSQL: a WSGI app whose queries go
through psycopg2, traced by nothing but the stock WSGI middleware and the stock DB-API
instrumentation, set up as opentelemetry-instrumentation-psycopg2 sets it up (its spans are
named by the SQL verb, `SELECT`, `SET`, and say `db.system` and `net.peer.name`). A new
connection per request, as a small app without a pool has. MODE:

- `slow`: `SELECT pg_sleep(SECONDS)`, however long its caller waits;
- `cancel`: `SET statement_timeout` to TIMEOUT_MS (what the app keeps for itself), then a
  query that would take 5 s: PostgreSQL cancels it (`QueryCanceled`) and the app answers 500;
- `unique`: an INSERT of a row that exists: `UniqueViolation` at once, the app answers 500.

Usage: db_app.py DSN MODE SECONDS TIMEOUT_MS; prints its port, and on SIGTERM what each
request logged (its arrival and its query's start and end, Unix ns, and what the query did).
"""

import sys
import threading
import time

import telemetry

provider = telemetry.start()

import psycopg2  # noqa: E402
from opentelemetry.instrumentation import dbapi  # noqa: E402
from opentelemetry.instrumentation.wsgi import OpenTelemetryMiddleware  # noqa: E402

DSN, MODE, SECONDS, TIMEOUT_MS = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4])

# The table the `unique` requests collide in, made before anything is traced.
with psycopg2.connect(DSN) as setup, setup.cursor() as cursor:
    cursor.execute("CREATE TABLE IF NOT EXISTS items (id integer PRIMARY KEY)")
    cursor.execute("INSERT INTO items VALUES (1) ON CONFLICT DO NOTHING")
setup.close()

# What opentelemetry-instrumentation-psycopg2 does on instrument().
dbapi.trace_integration(
    psycopg2,
    "connect",
    "postgresql",
    connection_attributes={
        "database": "info.dbname",
        "port": "info.port",
        "host": "info.host",
        "user": "info.user",
    },
)

lock = threading.Lock()
requests = []


def app(environ, start_response):
    arrival = time.time_ns()
    status, what = "200 OK", "answered"
    connection = psycopg2.connect(DSN)
    cursor = connection.cursor()
    start = time.time_ns()
    try:
        if MODE == "slow":
            cursor.execute("SELECT pg_sleep(%s)", (SECONDS,))
        elif MODE == "cancel":
            cursor.execute(f"SET statement_timeout = {TIMEOUT_MS}")
            start = time.time_ns()
            cursor.execute("SELECT pg_sleep(5)")
        else:
            cursor.execute("INSERT INTO items VALUES (1)")
        connection.commit()
    except psycopg2.Error as error:
        status, what = "500 Internal Server Error", type(error).__name__
    end = time.time_ns()
    cursor.close()
    connection.close()
    with lock:
        requests.append({"arrival": arrival, "query": [start, end], "what": what})
    start_response(status, [("Content-Type", "text/plain")])
    return [b""]


telemetry.serve(OpenTelemetryMiddleware(app), provider, lambda: {"requests": requests})
