#!/usr/bin/env bash
# The live screen's resident memory as a user meets it (issue 20): the real `budget-top` binary
# on a real terminal (a tmux pane), at its default `--max-spans 1000000`, fed by
# `budget-demo load --grpc` (chains of 4 hops, ~10 attributes a span, kept for the detail
# popup). Prints RSS before the first span and once the load is taken in, bytes per span held,
# whether every span listed still has its attributes (the screen's own count of chains whose
# attributes were dropped), then floods at full speed for FLOOD_SECS (retention reached, the
# oldest chains evicted) sampling RSS every second, and prints its lowest and highest.
# Loopback only; every loop is bounded in count and time.
#
#   scripts/screen-memory.sh                   # 2,000,384 spans at 100,000/s, then a 5-minute flood
#   RATE=0 scripts/screen-memory.sh            # as fast as the screen answers
#   FLOOD_SECS=30 scripts/screen-memory.sh     # a shorter flood
#   SPANS=400000 MAX_SPANS=200000 FLOOD_SECS=0 scripts/screen-memory.sh   # a quick look
#   SCREEN_ENV=MALLOC_ARENA_MAX=1 scripts/screen-memory.sh   # the screen with this environment
#   BT=path/to/budget-top scripts/screen-memory.sh            # another build (main's, for a before)
set -euo pipefail
cd "$(dirname "$0")/.."
SPANS=${SPANS:-2000384}
MAX_SPANS=${MAX_SPANS:-1000000}
FLOOD_SECS=${FLOOD_SECS:-300}
# Spans per second offered (the screen refuses what its loop cannot take in yet, and this load
# generator does not retry): 0 sends as fast as the screen answers.
RATE=${RATE:-100000}
OUT=${OUT:-target/screen-memory}
mkdir -p "$OUT"
command -v tmux >/dev/null || { echo "screen-memory: needs tmux (apt-get install tmux)" >&2; exit 2; }

cargo build --release --quiet -p budget-top -p budget-demo
BIN=${CARGO_TARGET_DIR:-target}/release
BT=$(realpath "${BT:-$BIN/budget-top}")
LOAD=$BIN/budget-demo

port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
GRPC=127.0.0.1:$(port)
HTTP=127.0.0.1:$(port)
SOCK=budget-top-screen-memory-$$
tmux -L "$SOCK" -f /dev/null new-session -d -s screen -x 200 -y 50 \
    "exec env ${SCREEN_ENV:-} $BT --max-spans $MAX_SPANS --grpc $GRPC --http $HTTP"
cleanup() { tmux -L "$SOCK" kill-server 2>/dev/null || true; }
trap cleanup EXIT
PID=$(tmux -L "$SOCK" display-message -p -t screen '#{pane_pid}')

rss_kib() { awk '/VmRSS/ {print $2}' "/proc/$PID/status"; }
header() { tmux -L "$SOCK" capture-pane -p -t screen | head -3; }

for _ in $(seq 100); do
    (exec 3<>"/dev/tcp/${GRPC%:*}/${GRPC#*:}") 2>/dev/null && break
    sleep 0.1
done
sleep 1
BEFORE=$(rss_kib)
# The screen refuses what it cannot take in yet (OTLP's throttling answer, which this load
# generator counts as failed and does not retry): what it accepted is what it holds.
RATE_ARGS=()
[ "$RATE" -gt 0 ] && RATE_ARGS=(--rate "$RATE")
"$LOAD" load --grpc "$GRPC" --spans "$SPANS" "${RATE_ARGS[@]}" >"$OUT/load.txt" 2>&1 || true
ACCEPTED=$(grep -o 'spans offered=[0-9]* accepted=[0-9]*' "$OUT/load.txt" | grep -o 'accepted=[0-9]*' | cut -d= -f2)
[ "${ACCEPTED:-0}" -gt 0 ] || { echo "screen-memory: no span accepted:" >&2; cat "$OUT/load.txt" >&2; exit 2; }
# The screen analyses what it took in over the next frames: wait until RSS stops moving.
LAST=0
for _ in $(seq 60); do
    sleep 1
    NOW=$(rss_kib)
    [ "$NOW" = "$LAST" ] && break
    LAST=$NOW
done
FULL=$(rss_kib)
# Where the memory is (the main heap, each thread's malloc arena, large blocks): for a look.
cp "/proc/$PID/smaps" "$OUT/smaps.txt" 2>/dev/null || true
header >"$OUT/header.txt"
HELD=$(( ACCEPTED < MAX_SPANS ? ACCEPTED : MAX_SPANS ))
echo "screen-memory: $(grep -o 'spans/s: [0-9]*' "$OUT/load.txt" | head -1) while loading; $(uptime | sed 's/.*load/load/')"
echo "screen-memory: RSS $((BEFORE / 1024)) MiB before, $((FULL / 1024)) MiB with $ACCEPTED of $SPANS spans accepted ($HELD held): $(( (FULL - BEFORE) * 1024 / HELD )) bytes per span held"
echo "screen-memory: the screen's header:"
sed 's/^/    /' "$OUT/header.txt"

if [ "$FLOOD_SECS" -gt 0 ]; then
    "$LOAD" load --grpc "$GRPC" --spans 1000000000000 --for "${FLOOD_SECS}s" "${RATE_ARGS[@]}" >"$OUT/flood.txt" 2>&1 || true &
    FLOOD=$!
    : >"$OUT/rss.txt"
    for i in $(seq "$FLOOD_SECS"); do
        sleep 1
        echo "$i $(rss_kib)" >>"$OUT/rss.txt"
        kill -0 "$FLOOD" 2>/dev/null || break
    done
    wait "$FLOOD" || true
    cp "/proc/$PID/smaps" "$OUT/smaps-flood.txt" 2>/dev/null || true
    header >"$OUT/header-flood.txt"
    python3 - "$OUT" "$FULL" <<'PY'
import re, sys
out, full = sys.argv[1], int(sys.argv[2])
kib = [int(line.split()[1]) for line in open(f"{out}/rss.txt") if line.strip()]
flood = open(f"{out}/flood.txt").read()
rate = re.search(r"spans/s: ([0-9]+)", flood)
print(f"screen-memory: flood {len(kib)} s at {rate.group(1) if rate else '?'} spans/s: RSS {min(kib) // 1024}..{max(kib) // 1024} MiB, "
      f"highest {(max(kib) / full - 1) * 100:+.1f}% over the RSS once the first load was in")
PY
    echo "screen-memory: the screen's header after the flood:"
    sed 's/^/    /' "$OUT/header-flood.txt"
fi
