"""The users: a burst of N requests at once to the edge, each with BUDGET ms in the team's
header and giving up after PATIENCE ms (default: the same time). Not instrumented. Prints how
many saw each status, or gave up; a patient user that reads an answer after BUDGET ms counts it
as "late STATUS".

Usage: client.py EDGE_URL N BUDGET_MS [PATIENCE_MS]
"""

import json
import socket
import sys
import threading
import time
import urllib.error
import urllib.request

edge_url, n, budget = sys.argv[1], int(sys.argv[2]), sys.argv[3]
patience = int(sys.argv[4]) if len(sys.argv) > 4 else int(budget)
start = threading.Barrier(n)
lock = threading.Lock()
counts = {}


def one():
    request = urllib.request.Request(edge_url, headers={"x-prazo-restante-ms": budget})
    start.wait(timeout=30)
    sent = time.monotonic()
    try:
        with urllib.request.urlopen(request, timeout=patience / 1000) as answer:
            answer.read()
            what = str(answer.status)
    except urllib.error.HTTPError as error:
        what = str(error.code)
    except (TimeoutError, socket.timeout):
        what = "gave up"
    except urllib.error.URLError as error:
        what = "gave up" if isinstance(error.reason, (TimeoutError, socket.timeout)) else "failed"
    except OSError:
        what = "failed"
    waited_ms = (time.monotonic() - sent) * 1000
    if patience > int(budget) and what not in ("gave up", "failed") and waited_ms > int(budget):
        what = "late " + what
    with lock:
        counts[what] = counts.get(what, 0) + 1


threads = [threading.Thread(target=one) for _ in range(n)]
for t in threads:
    t.start()
for t in threads:
    t.join(timeout=60)
print(json.dumps(counts), flush=True)
