#!/usr/bin/env bash
# `budget-top serve` against `check`: ingest CPU per span under the same `budget-demo load`
# (serve scraped at /metrics every second meanwhile, as Prometheus would), then /metrics'
# latency (p50/p99 of 200 scrapes, one at a time) with 10,000 edges known (so three families
# hold 10,000 label sets each at the default --max-series). Loopback only; a benchmark, not a
# test: its figures go to docs/performance.md with the machine's load beside them.
#
#   scripts/bench-serve.sh                  # 1,000,000 spans per run
#   SPANS=200000 scripts/bench-serve.sh     # a quick run
#
# Knobs (environment): SPANS (per run, default 1000000), TRANSPORT (grpc or http, default grpc),
# BATCH (spans per request, 512), DEPTH (hops per chain, 4), EDGES (distinct callers for the
# /metrics run, 10000), SCRAPES (timed scrapes, 200), PROFILE (release or debug, default
# release), OUT (work folder, target/bench-serve). Each run is bounded: the load stops after
# SPANS spans or LOAD_TIMEOUT (default 600 s), and a receiver that does not stop is killed.
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$PWD
SPANS=${SPANS:-1000000}
TRANSPORT=${TRANSPORT:-grpc}
BATCH=${BATCH:-512}
DEPTH=${DEPTH:-4}
EDGES=${EDGES:-10000}
SCRAPES=${SCRAPES:-200}
PROFILE=${PROFILE:-release}
LOAD_TIMEOUT=${LOAD_TIMEOUT:-600}
OUT=${OUT:-$ROOT/target/bench-serve}
mkdir -p "$OUT"

log() { echo "bench-serve: $*" >&2; }

if [[ ! -x /usr/bin/time ]]; then
    log "GNU time (/usr/bin/time) is missing: apt-get install time"
    exit 1
fi

log "building $PROFILE binaries"
if [[ $PROFILE == release ]]; then
    cargo build --release --quiet -p budget-top -p budget-demo
else
    cargo build --quiet -p budget-top -p budget-demo
fi
TARGET_DIR=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
BUDGET_TOP=$TARGET_DIR/$PROFILE/budget-top
LOAD=$TARGET_DIR/$PROFILE/budget-demo

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

wait_port() { # PORT: until something listens (at most 20 s)
    for _ in $(seq 200); do
        if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
        sleep 0.1
    done
    log "nothing listens on 127.0.0.1:$1"
    return 1
}

cpu_of() { awk -F': ' '/User time/ {u=$2} /System time/ {s=$2} END {printf "%.3f", u+s}' "$1"; }
rss_of() { awk -F': ' '/Maximum resident set size/ {print $2}' "$1"; }

stop() { # PID [timed]: SIGTERM (to the process /usr/bin/time runs, when timed), at most 60 s,
    # then SIGKILL
    local pid=$1
    if [[ ${2:-} == timed ]]; then
        pkill -TERM -P "$pid" 2>/dev/null || true
    else
        kill -TERM "$pid" 2>/dev/null || true
    fi
    for _ in $(seq 600); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then
        log "pid $pid did not stop: killing it"
        pkill -KILL -P "$pid" 2>/dev/null || true
        kill -KILL "$pid" 2>/dev/null || true
    fi
    wait "$pid" 2>/dev/null || true
}

# ingest COMMAND -> "command spans cpu rss"
ingest() {
    local command=$1 grpc_port http_port api_port port timing=$OUT/$1.time pid scraper=
    grpc_port=$(free_port)
    http_port=$(free_port)
    api_port=$(free_port)
    [[ $TRANSPORT == grpc ]] && port=$grpc_port || port=$http_port
    case $command in
    check)
        /usr/bin/time -v -o "$timing" "$BUDGET_TOP" check --grpc "127.0.0.1:$grpc_port" \
            --http "127.0.0.1:$http_port" --idle 3s --format json \
            >"$OUT/check.json" 2>"$OUT/check.log" &
        ;;
    serve)
        /usr/bin/time -v -o "$timing" "$BUDGET_TOP" serve --grpc "127.0.0.1:$grpc_port" \
            --http "127.0.0.1:$http_port" --api "127.0.0.1:$api_port" --report "$OUT/serve.json" \
            >/dev/null 2>"$OUT/serve.log" &
        ;;
    esac
    pid=$!
    wait_port "$port"
    if [[ $command == serve ]]; then
        # A scraper every second, as Prometheus (bounded by the load's own bound).
        (for _ in $(seq "$LOAD_TIMEOUT"); do
            curl -s -o /dev/null "http://127.0.0.1:$api_port/metrics" || true
            sleep 1
        done) &
        scraper=$!
    fi
    local load_out
    load_out=$(timeout "$LOAD_TIMEOUT" "$LOAD" load "--$TRANSPORT" "127.0.0.1:$port" --spans "$SPANS" \
        --batch "$BATCH" --depth "$DEPTH" --connections 2 --for "${LOAD_TIMEOUT}s" || true)
    log "$command: $load_out"
    if [[ $command == serve ]]; then
        kill "$scraper" 2>/dev/null || true
        wait "$scraper" 2>/dev/null || true
        sleep 3 # as check's --idle 3s: the same wait before the end
        stop "$pid" timed
    else
        for _ in $(seq 600); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        stop "$pid" timed
    fi
    local spans
    spans=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["summary"]["spans"])' "$OUT/$command.json")
    echo "$command $spans $(cpu_of "$timing") $(rss_of "$timing")"
}

check_line=$(ingest check)
serve_line=$(ingest serve)

# /metrics with EDGES distinct callers: chains posted as OTLP/JSON, then timed scrapes.
api_port=$(free_port)
http_port=$(free_port)
"$BUDGET_TOP" serve --grpc 127.0.0.1:0 --http "127.0.0.1:$http_port" --api "127.0.0.1:$api_port" \
    --settle 200ms >/dev/null 2>"$OUT/serve-series.log" &
series_pid=$!
wait_port "$api_port"
python3 - "$http_port" "$EDGES" <<'PY'
import json, sys, urllib.request
port, edges = int(sys.argv[1]), int(sys.argv[2])
t0 = 1_764_374_400_000_000_000
def span(trace, sid, parent, kind, start, end):
    return {"traceId": trace, "spanId": sid, "parentSpanId": parent, "name": "op", "kind": kind,
            "startTimeUnixNano": str(t0 + start * 1_000_000), "endTimeUnixNano": str(t0 + end * 1_000_000)}
def resource(service, spans):
    return {"resource": {"attributes": [{"key": "service.name", "value": {"stringValue": service}}]},
            "scopeSpans": [{"spans": spans}]}
for first in range(0, edges, 200):
    resources = []
    for i in range(first, min(first + 200, edges)):
        trace = f"{i + 1:032x}"
        resources.append(resource(f"caller-{i:05d}", [span(trace, "01" * 8, "", 2, 0, 100),
                                                      span(trace, "02" * 8, "01" * 8, 3, 5, 95)]))
        resources.append(resource("callee", [span(trace, "03" * 8, "02" * 8, 2, 10, 90)]))
    body = json.dumps({"resourceSpans": resources}).encode()
    request = urllib.request.Request(f"http://127.0.0.1:{port}/v1/traces", body,
                                     {"content-type": "application/json"})
    urllib.request.urlopen(request, timeout=60).read()
PY
# Until every chain is judged.
for _ in $(seq 600); do
    judged=$(curl -s "http://127.0.0.1:$api_port/api/report" | python3 -c 'import json,sys; print(json.load(sys.stdin)["summary"]["traces"])')
    [[ $judged -ge $EDGES ]] && break
    sleep 0.1
done
series=$(curl -s "http://127.0.0.1:$api_port/metrics" | grep -c '^budget_top_edge_calls_total{' || true)
bytes=$(curl -s "http://127.0.0.1:$api_port/metrics" | wc -c)
times=$OUT/scrapes.txt
: >"$times"
for _ in $(seq "$SCRAPES"); do
    curl -s -o /dev/null -w '%{time_total}\n' "http://127.0.0.1:$api_port/metrics" >>"$times"
done
stop "$series_pid"
read -r p50 p99 < <(sort -n "$times" | awk '{a[NR]=$1} END {i50=int(NR*0.5); if (i50<1) i50=1; i99=int(NR*0.99+0.5); if (i99<1) i99=1; printf "%.1f %.1f\n", a[i50]*1000, a[i99]*1000}')

echo
echo "profile $PROFILE, $SPANS spans over $TRANSPORT (batch $BATCH, depth $DEPTH); load average: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-8s %10s %10s %14s %12s\n' command spans cpu_s spans/cpu_s peak_rss_kB
for line in "$check_line" "$serve_line"; do
    read -r command spans cpu rss <<<"$line"
    printf '%-8s %10s %10s %14.0f %12s\n' "$command" "$spans" "$cpu" "$(python3 -c "print($spans/max($cpu,0.001))")" "$rss"
done
echo "/metrics with $series edge_calls series ($bytes bytes): p50 ${p50} ms, p99 ${p99} ms over $SCRAPES scrapes"
