#!/usr/bin/env bash
# Overload at ten times capacity (issue 7). Two phases, each against a fresh `budget-top check`:
#
#   1. capacity: a closed-loop `budget-demo load` (each connection waits for its answer) for
#      CAPACITY_SECONDS; what budget-top accepted per second is its capacity here.
#   2. overload: open-loop `budget-demo load --open-loop` (a fixed rate whatever the answers)
#      at FACTOR x that capacity for SECONDS_, split over LOADERS processes, while budget-top's
#      resident memory is sampled every second.
#
# Prints what was offered, accepted, throttled and failed (the load generators' counts) and
# what budget-top counted (its JSON report's `ingest` object), checks that the spans the
# generators saw accepted are exactly the spans budget-top accepted, and prints RSS low / high
# over the second half of the overload. Exit status 1 when the counts differ. Loopback only;
# every loop is bounded in count and time.
#
#   scripts/overload.sh                            # 10 s capacity, then 60 s at 10x
#   SECONDS_=20 CAPACITY_SECONDS=5 scripts/overload.sh
#   CHECK_ARGS="--max-queued-spans 20000" scripts/overload.sh   # budget-top's own flags
#   PIN=1 scripts/overload.sh    # budget-top on CPU 0, the generators on CPU 1 (taskset), so
#                                # the generators cannot take budget-top's CPU
#   FACTORS="1 2 4 6 8 10" SECONDS_=10 PIN=1 scripts/overload.sh
#                                # the overload curve: one capacity, then a fresh budget-top at
#                                # each factor x capacity; prints offered -> accepted per factor
#   BT=path/to/budget-top scripts/overload.sh   # another build of budget-top (an A/B)
#   LOAD_ARGS="--max-inflight 4096" scripts/overload.sh   # the generators' own flags (here: more
#                                # requests awaiting an answer than budget-top reads at once)
set -euo pipefail
cd "$(dirname "$0")/.."
RUN=${SECONDS_:-60}
CAPACITY_SECONDS=${CAPACITY_SECONDS:-10}
FACTOR=${FACTOR:-10}
CONNECTIONS=${CONNECTIONS:-4}
LOADERS=${LOADERS:-2}
MAX_SPANS=${MAX_SPANS:-1000000}
CHECK_ARGS=${CHECK_ARGS:-}
LOAD_ARGS=${LOAD_ARGS:-}
PIN=${PIN:-0}
ON_BT=()
ON_LOAD=()
if [ "$PIN" = 1 ]; then
    ON_BT=(taskset -c 0)
    ON_LOAD=(taskset -c 1)
fi
OUT=${OUT:-target/overload}
mkdir -p "$OUT"

cargo build --release --quiet -p budget-top -p budget-demo
BIN=${CARGO_TARGET_DIR:-target}/release
BT=${BT:-$BIN/budget-top}
LOAD=$BIN/budget-demo

CHECK=
cleanup() { [ -n "$CHECK" ] && kill "$CHECK" 2>/dev/null || true; }
trap cleanup EXIT

# Starts `budget-top check` writing its JSON report to $1; sets CHECK (pid) and GRPC (address).
start_check() {
    rm -f "$1" "$1.err"
    # shellcheck disable=SC2086 # CHECK_ARGS is a list of flags
    "${ON_BT[@]}" "$BT" --max-spans "$MAX_SPANS" check --grpc 127.0.0.1:0 --http 127.0.0.1:0 --idle 3s \
        --format json $CHECK_ARGS >"$1" 2>"$1.err" &
    CHECK=$!
    for _ in $(seq 100); do
        grep -q "listening" "$1.err" 2>/dev/null && break
        sleep 0.1
    done
    GRPC=$(grep -o 'grpc 127.0.0.1:[0-9]*' "$1.err" | head -1 | cut -d' ' -f2)
    [ -n "$GRPC" ] || { echo "overload: budget-top did not start: $(cat "$1.err")" >&2; exit 2; }
}

# Waits (at most 120 s) for budget-top to stop on --idle and write its report; stops it
# otherwise (with no span at all, --idle never starts counting).
wait_check() {
    for _ in $(seq 1200); do
        kill -0 "$CHECK" 2>/dev/null || break
        sleep 0.1
    done
    kill "$CHECK" 2>/dev/null || true
    wait "$CHECK" || true
    CHECK=
}

# Phase 1: capacity.
start_check "$OUT/capacity.json"
echo "overload: capacity: closed loop, $CONNECTIONS connections, ${CAPACITY_SECONDS}s, gRPC $GRPC" >&2
"${ON_LOAD[@]}" "$LOAD" load --grpc "$GRPC" --spans 1000000000 --connections "$CONNECTIONS" \
    --for "${CAPACITY_SECONDS}s" >"$OUT/capacity-load.txt" 2>&1 || true
wait_check
CAPACITY=$(grep -o 'spans/s: [0-9]*' "$OUT/capacity-load.txt" | grep -o '[0-9]*' | head -1)
[ "${CAPACITY:-0}" -gt 0 ] || { echo "overload: no capacity measured:" >&2; cat "$OUT/capacity-load.txt" >&2; exit 2; }
RATE=$((CAPACITY * FACTOR))
echo "overload: capacity $CAPACITY spans/s; offering $RATE spans/s ($FACTOR x) for ${RUN}s over $LOADERS open-loop generators" >&2

# The overload curve: every factor against a fresh budget-top, the same capacity.
if [ -n "${FACTORS:-}" ]; then
    echo "factor offered_spans/s sent_spans/s accepted_spans/s accepted_of_capacity budget_top_cpu_s equal_counts"
    status=0
    for factor in $FACTORS; do
        start_check "$OUT/curve-$factor.json"
        cpu0=$(awk '{print $14 + $15}' "/proc/$CHECK/stat")
        pids=()
        for i in $(seq "$LOADERS"); do
            "${ON_LOAD[@]}" "$LOAD" load --grpc "$GRPC" --open-loop --rate $((CAPACITY * factor / LOADERS)) \
                --spans 1000000000000 --connections "$CONNECTIONS" --for "${RUN}s" $LOAD_ARGS >"$OUT/curve-$factor-$i.txt" 2>&1 &
            pids+=($!)
        done
        for p in "${pids[@]}"; do wait "$p" || true; done
        cpu1=$(awk '{print $14 + $15}' "/proc/$CHECK/stat")
        wait_check
        python3 - "$OUT" "$factor" "$LOADERS" "$CAPACITY" "$(( cpu1 - cpu0 ))" "$(getconf CLK_TCK)" <<'PY' || status=1
import json, re, sys
out, factor, loaders, capacity, ticks, tck = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
load, seconds = {}, 0.0
for i in range(1, loaders + 1):
    text = open(f"{out}/curve-{factor}-{i}.txt").read()
    for key, value in re.findall(r"(\w+)=(\d+)", re.search(r"^spans (offered=.*)$", text, re.M).group(1)):
        load[key] = load.get(key, 0) + int(value)
    seconds = max(seconds, float(re.search(r"seconds: ([0-9.]+)", text).group(1)))
ingest = json.load(open(f"{out}/curve-{factor}.json")).get("ingest", {})
sent = load["accepted"] + load["throttled"] + load["failed"]
same = load["accepted"] == ingest.get("spans_accepted") and load["failed"] == 0
print(f"{factor} {load['offered'] / seconds:.0f} {sent / seconds:.0f} {load['accepted'] / seconds:.0f} "
      f"{load['accepted'] / seconds / capacity:.2f} {ticks / tck:.1f} {same}")
sys.exit(0 if same else 1)
PY
    done
    exit "$status"
fi

# Phase 2: overload.
start_check "$OUT/report.json"
: >"$OUT/rss.txt"
(
    # One sample a second: seconds since the start, RSS in KiB, CPU time used so far in clock
    # ticks (user + system). Bounded by the run's length.
    for i in $(seq 0 $((RUN + 10))); do
        rss=$(awk '/VmRSS/ {print $2}' "/proc/$CHECK/status" 2>/dev/null) || break
        cpu=$(awk '{print $14 + $15}' "/proc/$CHECK/stat" 2>/dev/null) || break
        [ -n "$rss" ] || break
        echo "$i $rss $cpu" >>"$OUT/rss.txt"
        sleep 1
    done
) &
SAMPLER=$!
pids=()
for i in $(seq "$LOADERS"); do
    "${ON_LOAD[@]}" "$LOAD" load --grpc "$GRPC" --open-loop --rate $((RATE / LOADERS)) --spans 1000000000000 \
        --connections "$CONNECTIONS" --for "${RUN}s" $LOAD_ARGS >"$OUT/load-$i.txt" 2>&1 &
    pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || true; done
kill "$SAMPLER" 2>/dev/null || true
wait_check

python3 - "$OUT" "$LOADERS" "$RUN" "$CAPACITY" "$RATE" "$(getconf CLK_TCK)" <<'PY'
import json, re, sys
out, loaders, run, capacity, rate, tck = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
load = {}
seconds = 0.0
for i in range(1, loaders + 1):
    text = open(f"{out}/load-{i}.txt").read()
    m = re.search(r"^spans (offered=.*)$", text, re.M)
    if not m:
        sys.exit(f"overload: generator {i} printed no counts:\n{text}")
    for key, value in re.findall(r"(\w+)=(\d+)", m.group(1)):
        load[key] = load.get(key, 0) + int(value)
    seconds = max(seconds, float(re.search(r"seconds: ([0-9.]+)", text).group(1)))
ingest = json.load(open(f"{out}/report.json")).get("ingest", {})
rss = [tuple(map(int, line.split())) for line in open(f"{out}/rss.txt") if line.strip()]
half = [kib for t, kib, _ in rss if run / 2 <= t <= run] or [kib for _, kib, _ in rss]
during = [(t, cpu) for t, _, cpu in rss if t <= run]
cpu_seconds = (during[-1][1] - during[0][1]) / tck if len(during) > 1 else 0.0
sent = load["accepted"] + load["throttled"] + load["failed"]
print(f"capacity (closed loop): {capacity:,} spans/s; offered {rate:,} spans/s for {run} s")
print(f"load generators: offered {load['offered']:,} spans ({load['offered'] / seconds:,.0f}/s over {seconds:.1f} s), "
      f"of which sent {sent:,} ({sent / seconds:,.0f}/s, {sent / seconds / capacity:.1f} x capacity) and "
      f"unsent {load['unsent']:,} (the generators' in-flight cap was reached)")
print(f"answers: accepted {load['accepted']:,} spans ({load['accepted'] / seconds:,.0f}/s), "
      f"throttled {load['throttled']:,}, failed {load['failed']:,}")
print(f"budget-top: accepted {ingest.get('spans_accepted', 0):,} spans in {ingest.get('requests_accepted', 0):,} requests; "
      f"refused {ingest.get('requests_refused', 0):,} requests ({ingest.get('requests_refused_unread', 0):,} before reading them, "
      f"{ingest.get('spans_refused', 0):,} spans in the others)")
same = load["accepted"] == ingest.get("spans_accepted")
print(f"accepted by the generators == accepted by budget-top: {same}")
print(f"budget-top CPU during the overload: {cpu_seconds:.1f} s in {during[-1][0] if during else 0} s")
print(f"RSS: peak {max(kib for _, kib, _ in rss) / 1024:.0f} MiB; second half of the overload "
      f"{min(half) / 1024:.0f}-{max(half) / 1024:.0f} MiB ({len(half)} samples)")
sys.exit(0 if same else 1)
PY
