#!/usr/bin/env bash
# The fetch rate of `check --jaeger` (docs/performance.md): a real Jaeger v2 (scripts/jaeger.sh,
# memory storage, loopback ports) is sent TRACES generated chains of 4 services (budget-demo
# recording, 8 spans each) over OTLP/HTTP, then `budget-top check --jaeger` reads them back from
# its query API RUNS times: once searching the root service alone (one search of every trace),
# once every service (four searches, each answering every trace, read once). Prints each run's
# summary line (traces, spans, seconds) and the rates. Everything it starts ends with it.
#
#   scripts/jaeger-fetch-rate.sh                 # 10,000 traces, 3 runs, target/release/budget-top
#   TRACES=2000 RUNS=1 BIN=target/debug scripts/jaeger-fetch-rate.sh
# budget-demo (which only writes the chains) is taken from BIN, else from target/debug.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
traces="${TRACES:-10000}"
runs="${RUNS:-3}"
bin="${BIN:-$repo/target/release}"
demo="$bin/budget-demo"
[[ -x "$demo" ]] || demo="$repo/target/debug/budget-demo"
for tool in "$bin/budget-top" "$demo"; do
  if [[ ! -x "$tool" ]]; then
    echo "jaeger-fetch-rate.sh: no $tool: cargo build --release -p budget-top (or BIN=...), cargo build -p budget-demo" >&2
    exit 1
  fi
done
jaeger="$(bash "$repo/scripts/jaeger.sh")"
work="$(mktemp -d)"
pid=""
cleanup() {
  if [[ -n "$pid" ]]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
export JAEGER_QUERY_HTTP_PORT="$(port)" JAEGER_QUERY_GRPC_PORT="$(port)"
export JAEGER_OTLP_GRPC_PORT="$(port)" JAEGER_OTLP_HTTP_PORT="$(port)" JAEGER_MAX_TRACES=1000000
"$jaeger" --config "$repo/collector/tests/jaeger/config.yaml" > "$work/jaeger.log" 2>&1 &
pid=$!
query="http://127.0.0.1:$JAEGER_QUERY_HTTP_PORT"
for _ in $(seq 100); do
  grep -q "Everything is ready" "$work/jaeger.log" && break
  sleep 0.2
done

# 8 spans a chain; lines of 512 spans, each one OTLP/HTTP request.
"$demo" recording --spans $((traces * 8)) --depth 4 --output "$work/chains.jsonl" >&2
while IFS= read -r line; do
  printf '%s' "$line" | curl -sf -o /dev/null -H 'content-type: application/json' \
    --data-binary @- "http://127.0.0.1:$JAEGER_OTLP_HTTP_PORT/v1/traces"
done < "$work/chains.jsonl"
# The recording's chains start at 2025-12-01T00:00:00Z, a few ms apart.
window=(--from 2025-12-01T00:00:00Z --to 2025-12-01T01:00:00Z --limit $((traces * 2)))
# Stored a batch after they were sent: wait until a search sees them all.
want="$(python3 -c "import json,sys; print(len({s['traceId'] for l in open(sys.argv[1]) for r in json.loads(l)['resourceSpans'] for c in r['scopeSpans'] for s in c['spans']}))" "$work/chains.jsonl")"
for _ in $(seq 300); do
  got="$("$bin/budget-top" check --jaeger "$query" --service gateway "${window[@]}" --format json 2>/dev/null \
    | python3 -c 'import json,sys; print(json.load(sys.stdin)["summary"]["traces"])' || echo 0)"
  [[ "$got" == "$want" ]] && break
  sleep 1
done
echo "Jaeger holds $want traces; reading them back $runs time(s)" >&2

rate() {
  local label="$1"; shift
  for _ in $(seq "$runs"); do
    "$bin/budget-top" check --jaeger "$query" "$@" "${window[@]}" --format json 2>"$work/stderr" >"$work/report.json" || true
    python3 - "$label" "$work/report.json" <<'EOF'
import json, sys
s = json.load(open(sys.argv[2]))["source"]
print(f"{sys.argv[1]}: {s['traces']} traces, {s['spans']} spans ({s['traces_answered']} answered) in {s['seconds']:.2f} s: "
      f"{s['traces'] / s['seconds']:,.0f} traces/s, {s['spans'] / s['seconds']:,.0f} spans/s")
EOF
  done
}
rate "root service alone" --service gateway
rate "every service"
# Jaeger's side alone: the root service's search, answered whole to curl (read and dropped).
search="$query/api/v3/traces?query.service_name=gateway&query.start_time_min=2025-12-01T00:00:00Z&query.start_time_max=2025-12-01T01:00:00Z&query.num_traces=$((traces * 2 + 1))&query.raw_traces=true"
for _ in $(seq "$runs"); do
  curl -s -o /dev/null -w "Jaeger's answer alone (curl): %{size_download} bytes in %{time_total} s\n" "$search"
done
# budget-top's own CPU for one read of the root service (user + system, /usr/bin/time).
/usr/bin/time -f "budget-top check --jaeger, root service: %U s user, %S s system, %e s wall, %M KB peak RSS" \
  "$bin/budget-top" check --jaeger "$query" --service gateway "${window[@]}" --format json >/dev/null 2>"$work/time" || true
tail -1 "$work/time"
