"""The users: a burst of N requests at once to the edge, each with BUDGET ms in the team's
header and giving up after the same time. Not instrumented. Prints how many saw each status, or
gave up.

Usage: client.py EDGE_URL N BUDGET_MS
"""

import json
import socket
import sys
import threading
import urllib.error
import urllib.request

edge_url, n, budget = sys.argv[1], int(sys.argv[2]), sys.argv[3]
start = threading.Barrier(n)
lock = threading.Lock()
counts = {}


def one():
    request = urllib.request.Request(edge_url, headers={"x-prazo-restante-ms": budget})
    start.wait(timeout=30)
    try:
        with urllib.request.urlopen(request, timeout=int(budget) / 1000) as answer:
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
    with lock:
        counts[what] = counts.get(what, 0) + 1


threads = [threading.Thread(target=one) for _ in range(n)]
for t in threads:
    t.start()
for t in threads:
    t.join(timeout=60)
print(json.dumps(counts), flush=True)
