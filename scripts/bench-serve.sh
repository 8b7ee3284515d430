#!/usr/bin/env bash
# `budget-top serve` against `check`: ingest CPU per span under the same `budget-demo load`
# (serve scraped at /metrics every second meanwhile, as Prometheus would, each scrape timed);
# serve's ingest over TLS beside plain, over gRPC and over HTTP, in the same run (certificates
# made here with openssl; the load trusts the CA with --tls-ca); then /metrics' latency (p50/p99
# of 200 scrapes, one at a time) with 10,000 edges known (so three families hold 10,000 label
# sets each at the default --max-series), first with no traffic, then under a `budget-demo load`
# flood that keeps chains being judged. With FORWARD=1 (the default when Go builds Jaeger,
# scripts/jaeger.sh), also `serve --forward` at 1 % sampling to a real Jaeger v2 under the same
# load, beside plain `serve` (spans per CPU-second), and the demo's mixed traffic (`budget-demo
# recording`: one chain in ten resets its budget, one in thirteen gives up on a call) through
# `serve --forward` with the defaults: the spans Jaeger stores per 1,000 received, every broken
# chain kept. Loopback only; a benchmark, not a test: its figures go to docs/performance.md with
# the machine's load beside them.
#
#   scripts/bench-serve.sh                  # 1,000,000 spans per run
#   SPANS=200000 scripts/bench-serve.sh     # a quick run
#   TLS=0 scripts/bench-serve.sh            # without the TLS runs
#   INGEST=0 scripts/bench-serve.sh         # only /metrics' latency
#   TLS=0 METRICS=0 scripts/bench-serve.sh  # serve and serve --forward only, and the mixed traffic
#
# Knobs (environment): SPANS (per run, default 1000000), TRANSPORT (grpc or http, default grpc:
# check beside serve), TLS (1: serve over TLS beside plain, gRPC and HTTP; default 1), BATCH
# (spans per request, 512), DEPTH (hops per chain, 4), EDGES (distinct callers for the /metrics
# run, 10000), SCRAPES (timed scrapes, 200), FLOOD_SPANS (the flood under the timed scrapes,
# 20000000: it is stopped once they are done), PROFILE (release or debug, default release), OUT
# (work folder, target/bench-serve), BT (another budget-top binary to measure, e.g. main's, with
# this tree's load), GZIP (1: every scrape asks for gzip, as Prometheus does, and is timed to
# its last byte, the scraper's own decompression left out; 2: the same, decompressed as curl's
# --compressed does; 0: plain text; default 1), INGEST (0: skip the ingest runs), METRICS (0:
# skip /metrics' latency), FORWARD (0: skip the --forward runs), MIXED_SPANS (the mixed traffic,
# default 200000). Each run is bounded: the load stops after SPANS spans or LOAD_TIMEOUT
# (default 600 s), and a receiver that does not stop is killed.
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
TLS=${TLS:-1}
FLOOD_SPANS=${FLOOD_SPANS:-20000000}
GZIP=${GZIP:-1}
INGEST=${INGEST:-1}
METRICS=${METRICS:-1}
FORWARD=${FORWARD:-1}
MIXED_SPANS=${MIXED_SPANS:-200000}
# As Prometheus scrapes: Accept-Encoding: gzip.
scrape_gzip=()
[[ $GZIP == 1 ]] && scrape_gzip=(-H 'Accept-Encoding: gzip')
[[ $GZIP == 2 ]] && scrape_gzip=(--compressed)
OUT=${OUT:-$ROOT/target/bench-serve}
mkdir -p "$OUT"

log() { echo "bench-serve: $*" >&2; }

if [[ ! -x /usr/bin/time ]]; then
    log "GNU time (/usr/bin/time) is missing: apt-get install time"
    exit 1
fi

if [[ $TLS == 1 ]] && ! command -v openssl >/dev/null; then
    log "openssl is missing (it makes the TLS runs' certificates): apt-get install openssl, or TLS=0"
    exit 1
fi

log "building $PROFILE binaries"
if [[ $PROFILE == release ]]; then
    cargo build --release --quiet -p budget-top -p budget-demo
else
    cargo build --quiet -p budget-top -p budget-demo
fi
TARGET_DIR=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
BUDGET_TOP=${BT:-$TARGET_DIR/$PROFILE/budget-top}
LOAD=$TARGET_DIR/$PROFILE/budget-demo

# free_port, wait_port, cpu_of, rss_of
source "$ROOT/scripts/bench-lib.sh"

JAEGER=
if [[ $FORWARD == 1 ]]; then
    if JAEGER=$("$ROOT/scripts/jaeger.sh"); then
        log "Jaeger v2: $JAEGER"
    else
        log "no Jaeger (scripts/jaeger.sh needs Go): the --forward runs are skipped"
        FORWARD=0
    fi
fi
jaeger_pid=
start_jaeger() { # -> JAEGER_GRPC, JAEGER_QUERY set; a fresh Jaeger (memory storage)
    JAEGER_GRPC=$(free_port)
    JAEGER_QUERY=$(free_port)
    JAEGER_QUERY_HTTP_PORT=$JAEGER_QUERY JAEGER_QUERY_GRPC_PORT=$(free_port) \
        JAEGER_OTLP_GRPC_PORT=$JAEGER_GRPC JAEGER_OTLP_HTTP_PORT=$(free_port) JAEGER_MAX_TRACES=10000000 \
        "$JAEGER" --config "$ROOT/collector/tests/jaeger/config.yaml" >"$OUT/jaeger.log" 2>&1 &
    jaeger_pid=$!
    wait_port "$JAEGER_GRPC"
    wait_port "$JAEGER_QUERY"
}
stop_jaeger() { [[ -n $jaeger_pid ]] && stop "$jaeger_pid"; jaeger_pid=; }

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

# A CA and a certificate for localhost it signed (not a CA itself: rustls refuses that).
make_certificates() {
    local dir=$OUT/tls
    mkdir -p "$dir"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
        -subj /CN=bench-serve-ca -keyout "$dir/ca.key" -out "$dir/ca.pem" 2>/dev/null
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=localhost \
        -keyout "$dir/server.key" -out "$dir/server.csr" 2>/dev/null
    printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=critical,CA:FALSE\nextendedKeyUsage=serverAuth\n' >"$dir/ext"
    openssl x509 -req -in "$dir/server.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" \
        -CAcreateserial -days 2 -extfile "$dir/ext" -out "$dir/server.pem" 2>/dev/null
}

# p50 and p99 in ms of the seconds in FILE, one a line: "p50 p99 count".
percentiles() {
    sort -n "$1" | awk '{a[NR]=$1} END {if (NR==0) {print "- - 0"; exit} i50=int(NR*0.5); if (i50<1) i50=1; i99=int(NR*0.99+0.5); if (i99<1) i99=1; printf "%.1f %.1f %d\n", a[i50]*1000, a[i99]*1000, NR}'
}

# ingest COMMAND TRANSPORT SECURITY (plain or tls) -> "name spans cpu rss p50 p99 scrapes"
# (COMMAND: check, serve, or forward: serve --forward at 1 % to the Jaeger started before)
ingest() {
    local command=$1 transport=$2 security=$3 grpc_port http_port api_port port pid scraper=
    local name=$command-$transport-$security
    local timing=$OUT/$name.time scrapes=$OUT/$name.scrapes tls_args=() load_tls=() curl_tls=()
    local scheme=http
    grpc_port=$(free_port)
    http_port=$(free_port)
    api_port=$(free_port)
    [[ $transport == grpc ]] && port=$grpc_port || port=$http_port
    if [[ $security == tls ]]; then
        tls_args=(--tls-cert "$OUT/tls/server.pem" --tls-key "$OUT/tls/server.key")
        load_tls=(--tls-ca "$OUT/tls/ca.pem")
        curl_tls=(--cacert "$OUT/tls/ca.pem")
        scheme=https
    fi
    : >"$scrapes"
    case $command in
    check)
        /usr/bin/time -v -o "$timing" "$BUDGET_TOP" check --grpc "127.0.0.1:$grpc_port" \
            --http "127.0.0.1:$http_port" --idle 3s --format json "${tls_args[@]}" \
            >"$OUT/$name.json" 2>"$OUT/$name.log" &
        ;;
    serve | forward)
        local forward_args=()
        [[ $command == forward ]] && forward_args=(--forward "grpc://127.0.0.1:$JAEGER_GRPC" --forward-sample 0.01)
        /usr/bin/time -v -o "$timing" "$BUDGET_TOP" serve --grpc "127.0.0.1:$grpc_port" \
            --http "127.0.0.1:$http_port" --api "127.0.0.1:$api_port" --report "$OUT/$name.json" \
            "${tls_args[@]}" "${forward_args[@]}" >/dev/null 2>"$OUT/$name.log" &
        ;;
    esac
    pid=$!
    wait_port "$port"
    if [[ $command != check ]]; then
        # A scraper every second, as Prometheus (bounded by the load's own bound), each
        # scrape timed.
        (for _ in $(seq "$LOAD_TIMEOUT"); do
            curl -s -o /dev/null -w '%{time_total}\n' "${curl_tls[@]}" "${scrape_gzip[@]}" \
                --resolve "localhost:$api_port:127.0.0.1" "$scheme://localhost:$api_port/metrics" \
                >>"$scrapes" || true
            sleep 1
        done) &
        scraper=$!
    fi
    local load_out
    load_out=$(timeout "$LOAD_TIMEOUT" "$LOAD" load "--$transport" "127.0.0.1:$port" --spans "$SPANS" \
        --batch "$BATCH" --depth "$DEPTH" --connections 2 --for "${LOAD_TIMEOUT}s" "${load_tls[@]}" || true)
    log "$name: $load_out"
    if [[ $command != check ]]; then
        kill "$scraper" 2>/dev/null || true
        wait "$scraper" 2>/dev/null || true
        sleep 3 # as check's --idle 3s: the same wait before the end
        stop "$pid" timed
    else
        for _ in $(seq 600); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        stop "$pid" timed
    fi
    local spans
    spans=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["summary"]["spans"])' "$OUT/$name.json")
    echo "$name $spans $(cpu_of "$timing") $(rss_of "$timing") $(percentiles "$scrapes")"
}

lines=()
[[ $INGEST == 1 ]] && lines=("$(ingest check "$TRANSPORT" plain)" "$(ingest serve "$TRANSPORT" plain)")
if [[ $INGEST == 1 && $FORWARD == 1 ]]; then
    start_jaeger
    lines+=("$(ingest forward "$TRANSPORT" plain)")
    stop_jaeger
fi
if [[ $INGEST == 1 && $TLS == 1 ]]; then
    make_certificates
    [[ $TRANSPORT == grpc ]] && other=http || other=grpc
    lines+=("$(ingest serve "$TRANSPORT" tls)" "$(ingest serve "$other" plain)" "$(ingest serve "$other" tls)")
fi

# The demo's mixed traffic through serve --forward (its defaults: every chain with a warning or
# worse, 1 % of the others) to a fresh Jaeger: what Jaeger stores per 1,000 spans received.
mixed=
if [[ $FORWARD == 1 ]]; then
    "$LOAD" recording --spans "$MIXED_SPANS" --batch "$BATCH" --depth "$DEPTH" --output "$OUT/mixed.jsonl"
    "$BUDGET_TOP" check --input "$OUT/mixed.jsonl" --format json >"$OUT/mixed-check.json" || true
    start_jaeger
    grpc_port=$(free_port)
    http_port=$(free_port)
    api_port=$(free_port)
    "$BUDGET_TOP" serve --grpc "127.0.0.1:$grpc_port" --http "127.0.0.1:$http_port" --api "127.0.0.1:$api_port" \
        --settle 1s --forward "grpc://127.0.0.1:$JAEGER_GRPC" --report "$OUT/mixed-serve.json" \
        >/dev/null 2>"$OUT/mixed-serve.log" &
    mixed_pid=$!
    wait_port "$http_port"
    timeout "$LOAD_TIMEOUT" python3 - "$http_port" "$OUT/mixed.jsonl" <<'PY'
import sys, urllib.request
port, path = int(sys.argv[1]), sys.argv[2]
for line in open(path, 'rb'):
    request = urllib.request.Request(f"http://127.0.0.1:{port}/v1/traces", line.rstrip(b"\n"),
                                     {"content-type": "application/json"})
    urllib.request.urlopen(request, timeout=60).read()
PY
    sleep 3 # a settle period and more: every chain judged and queued
    stop "$mixed_pid"
    sleep 2 # Jaeger's batch processor stores what it was sent
    mixed=$(python3 - "$OUT/mixed-check.json" "$OUT/mixed-serve.json" "$JAEGER_QUERY" <<'PY'
import json, sys, urllib.request
check, serve, query = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), sys.argv[3]
broken = {f["trace_id"] for f in check["findings"] if "count" not in f and f["severity"] != "info"}
received = serve["summary"]["spans"]
forward = serve["forward"]
# Every span Jaeger holds (the recording's chains start at `gateway`, on 2025-12-01).
url = (f"http://127.0.0.1:{query}/api/v3/traces?query.service_name=gateway"
       "&query.start_time_min=2025-11-30T00:00:00Z&query.start_time_max=2025-12-03T00:00:00Z"
       "&query.num_traces=1000000")
body = urllib.request.urlopen(url, timeout=120).read().decode()
decoder, i, stored, traces = json.JSONDecoder(), 0, 0, set()
while i < len(body):
    while i < len(body) and body[i].isspace():
        i += 1
    if i >= len(body):
        break
    answer, i = decoder.raw_decode(body, i)
    for resource in answer.get("result", {}).get("resourceSpans", []):
        for scope in resource.get("scopeSpans", []):
            for span in scope.get("spans", []):
                stored += 1
                traces.add(span["traceId"])
print(received, serve["summary"]["traces"], len(broken),
      forward["chains"]["finding"], forward["chains"]["sample"], forward["spans"]["sent"], stored,
      len(traces), f"{1000 * stored / max(received, 1):.1f}")
PY
)
    stop_jaeger
fi

if [[ $METRICS == 1 ]]; then
# /metrics with EDGES distinct callers: chains posted as OTLP/JSON, then timed scrapes.
api_port=$(free_port)
http_port=$(free_port)
series_grpc=$(free_port)
"$BUDGET_TOP" serve --grpc "127.0.0.1:$series_grpc" --http "127.0.0.1:$http_port" --api "127.0.0.1:$api_port" \
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
# The last publish (at most a second after the judging) encoded: the counts below and the
# quiet scrapes read it, and fall between publishes.
sleep 2
series=$(curl -s "http://127.0.0.1:$api_port/metrics" | grep -c '^budget_top_edge_calls_total{' || true)
bytes=$(curl -s "http://127.0.0.1:$api_port/metrics" | wc -c)
gzip_bytes=$(curl -s -H 'Accept-Encoding: gzip' "http://127.0.0.1:$api_port/metrics" | wc -c)
judged() { curl -s "http://127.0.0.1:$api_port/api/report" | python3 -c 'import json,sys; print(json.load(sys.stdin)["summary"]["traces"])'; }
time_scrapes() { # FILE [PATH]: SCRAPES GETs of PATH (/metrics) one after another, each one's
    # seconds a line
    : >"$1"
    for _ in $(seq "$SCRAPES"); do
        curl -s -o /dev/null -w '%{time_total}\n' "${scrape_gzip[@]}" "http://127.0.0.1:$api_port${2:-/metrics}" >>"$1"
    done
}
time_scrapes "$OUT/scrapes-quiet.txt"
# The same scrapes while a flood keeps chains being judged (a publish every second).
"$LOAD" load --grpc "127.0.0.1:$series_grpc" --spans "$FLOOD_SPANS" --batch "$BATCH" --depth "$DEPTH" \
    --connections 2 --for "${LOAD_TIMEOUT}s" >"$OUT/flood.out" 2>&1 &
flood_pid=$!
sleep 2 # under way, its first chains judged
before=$(judged)
time_scrapes "$OUT/scrapes-flood.txt"
after=$(judged)
# The same number of /healthz (a few bytes, no metrics): what the flood and the machine cost
# any request.
time_scrapes "$OUT/healthz-flood.txt" /healthz
kill -TERM "$flood_pid" 2>/dev/null || true
wait "$flood_pid" 2>/dev/null || true
stop "$series_pid"
read -r q50 q99 _ < <(percentiles "$OUT/scrapes-quiet.txt")
read -r f50 f99 _ < <(percentiles "$OUT/scrapes-flood.txt")
read -r h50 h99 _ < <(percentiles "$OUT/healthz-flood.txt")
fi

echo
echo "profile $PROFILE, $SPANS spans a run (batch $BATCH, depth $DEPTH); load average: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-18s %10s %10s %14s %12s %22s\n' run spans cpu_s spans/cpu_s peak_rss_kB "scrapes p50/p99 ms (n)"
for line in "${lines[@]}"; do
    read -r name spans cpu rss p50 p99 n <<<"$line"
    [[ $name == check-* ]] && scraped=- || scraped="$p50 / $p99 ($n)"
    printf '%-18s %10s %10s %14.0f %12s %22s\n' "$name" "$spans" "$cpu" "$(python3 -c "print($spans/max($cpu,0.001))")" "$rss" "$scraped"
done
rate_of() { # NAME: its spans per CPU-second
    for line in "${lines[@]}"; do
        read -r name spans cpu _ <<<"$line"
        if [[ $name == "$1" ]]; then python3 -c "print($spans/max($cpu,0.001))"; fi
    done
}
if [[ $INGEST == 1 && $FORWARD == 1 ]]; then
    plain=$(rate_of "serve-$TRANSPORT-plain")
    forwarding=$(rate_of "forward-$TRANSPORT-plain")
    python3 -c "print(f'serve --forward at 1 %: {$forwarding/$plain:.3f} of plain serve\'s spans per CPU-second ({100*($forwarding/$plain-1):+.1f} %; aim: within 15 %)')"
    python3 - "$OUT/forward-$TRANSPORT-plain.json" <<'PY'
import json, sys
f = json.load(open(sys.argv[1]))["forward"]
print(f"  forwarded {f['chains']['sample']} sampled chains, {f['spans']['sent']} of {f['spans']['kept']} spans kept sent")
PY
fi
if [[ -n $mixed ]]; then
    read -r received chains broken finding sample sent stored traces per_1000 <<<"$mixed"
    echo "mixed traffic (budget-demo recording, $received spans in $chains chains, $broken with a warning or worse):"
    echo "  serve --forward kept $finding for a finding (every broken one: $([[ $finding == "$broken" ]] && echo yes || echo NO)) and $sample sampled; sent $sent spans"
    echo "  Jaeger stores $stored spans in $traces traces: $per_1000 per 1,000 spans received (the Collector's fan-out: 1,000)"
fi
[[ $METRICS == 1 ]] || exit 0
echo "/metrics with $series edge_calls series ($bytes bytes, $gzip_bytes gzip-compressed), $SCRAPES scrapes one after another (GZIP=$GZIP):"
echo "  no traffic:            p50 ${q50} ms, p99 ${q99} ms"
echo "  under a gRPC flood:    p50 ${f50} ms, p99 ${f99} ms ($((after - before)) chains judged meanwhile)"
echo "  /healthz, same flood:  p50 ${h50} ms, p99 ${h99} ms"
