#!/usr/bin/env bash
# Overload: several `budget-demo load` floods at once against one `budget-top check` for
# SECONDS (default 60), while its resident memory is sampled every second. Prints what the load
# generators had accepted, what budget-top counted as accepted and refused (its JSON report's
# `ingest` object), and the lowest / highest RSS once retention was reached. Loopback only; every
# loop is bounded in time.
#
#   scripts/overload.sh                       # 60 s, 4 floods of 4 connections each
#   SECONDS_=20 FLOODS=2 scripts/overload.sh  # a quick run
set -euo pipefail
cd "$(dirname "$0")/.."
RUN=${SECONDS_:-60}
FLOODS=${FLOODS:-4}
CONNECTIONS=${CONNECTIONS:-4}
MAX_SPANS=${MAX_SPANS:-1000000}
OUT=${OUT:-target/overload}
mkdir -p "$OUT"

cargo build --release --quiet -p budget-top -p budget-demo
BT=target/release/budget-top
LOAD=target/release/budget-demo

"$BT" --max-spans "$MAX_SPANS" check --grpc 127.0.0.1:0 --http 127.0.0.1:0 --idle 3s \
    --format json >"$OUT/report.json" 2>"$OUT/check.err" &
CHECK=$!
trap 'kill $CHECK 2>/dev/null || true' EXIT
for _ in $(seq 100); do
    grep -q "listening" "$OUT/check.err" 2>/dev/null && break
    sleep 0.1
done
GRPC=$(grep -o 'grpc 127.0.0.1:[0-9]*' "$OUT/check.err" | head -1 | cut -d' ' -f2)
echo "overload: budget-top check (pid $CHECK) on gRPC $GRPC; $FLOODS floods x $CONNECTIONS connections for ${RUN}s" >&2

# RSS once a second while the floods run.
: >"$OUT/rss.txt"
(
    for _ in $(seq $((RUN + 5))); do
        awk '/VmRSS/ {print $2}' "/proc/$CHECK/status" 2>/dev/null >>"$OUT/rss.txt" || break
        sleep 1
    done
) &
SAMPLER=$!

pids=()
for i in $(seq "$FLOODS"); do
    "$LOAD" load --grpc "$GRPC" --spans 1000000000 --connections "$CONNECTIONS" --for "${RUN}s" \
        >"$OUT/load-$i.txt" 2>&1 &
    pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || true; done
kill "$SAMPLER" 2>/dev/null || true
wait "$CHECK" || true
trap - EXIT

sent=0
for i in $(seq "$FLOODS"); do
    n=$(grep -o 'spans sent: [0-9]*' "$OUT/load-$i.txt" | grep -o '[0-9]*' | head -1)
    sent=$((sent + ${n:-0}))
done
python3 - "$OUT" "$sent" <<'PY'
import json, sys
out, sent = sys.argv[1], int(sys.argv[2])
report = json.load(open(f"{out}/report.json"))
ingest = report.get("ingest", {})
rss = [int(x) for x in open(f"{out}/rss.txt") if x.strip()]
half = rss[len(rss) // 2:] or rss
print(f"load generators: {sent:,} spans answered with success")
print(f"budget-top: {ingest.get('spans_accepted', 0):,} spans accepted, "
      f"{ingest.get('spans_refused', 0):,} refused (RESOURCE_EXHAUSTED), "
      f"{ingest.get('requests_refused', 0):,} requests refused")
print(f"accepted == answered with success: {sent == ingest.get('spans_accepted')}")
print(f"RSS: peak {max(rss) / 1024:.0f} MiB; second half of the run {min(half) / 1024:.0f}-{max(half) / 1024:.0f} MiB")
PY
