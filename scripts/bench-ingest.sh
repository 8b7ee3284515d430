#!/usr/bin/env bash
# Ingest speed per CPU-second: budget-top `check` beside rotel (a Rust OTLP collector with its
# blackhole exporter), each fed the same `budget-demo load`, one receiver at a time, over
# OTLP/gRPC and then OTLP/HTTP protobuf. Prints spans per CPU-second (user + system time of the
# receiver process, from /usr/bin/time -v) and peak RSS for both, side by side. Loopback only.
#
#   scripts/bench-ingest.sh                 # 2,000,000 spans per run (docs/performance.md's figure)
#   SPANS=200000 scripts/bench-ingest.sh    # a quick run
#
# Knobs (environment): SPANS (per run, default 2000000), TRANSPORTS ("grpc http"),
# RECEIVERS ("budget-top rotel"), CONNECTIONS (load connections, 2), BATCH (spans per request,
# 512), DEPTH (hops per chain, 4), MAX_SPANS (budget-top --max-spans, 1000000), ROTEL_VERSION
# (pin a rotel release, default: the newest on PyPI), OUT (work folder, target/bench-ingest),
# BT (another budget-top binary, for an A/B), RUNS (repeat the whole comparison, then print
# the spread of the ratios; default 1).
# Each run is bounded: the load stops after SPANS spans or LOAD_TIMEOUT (default 600 s), and a
# receiver that does not stop on its own is killed.
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$PWD
SPANS=${SPANS:-2000000}
TRANSPORTS=${TRANSPORTS:-"grpc http"}
RECEIVERS=${RECEIVERS:-"budget-top rotel"}
CONNECTIONS=${CONNECTIONS:-2}
BATCH=${BATCH:-512}
DEPTH=${DEPTH:-4}
MAX_SPANS=${MAX_SPANS:-1000000}
LOAD_TIMEOUT=${LOAD_TIMEOUT:-600}
RUNS=${RUNS:-1}
OUT=${OUT:-$ROOT/target/bench-ingest}
mkdir -p "$OUT"

log() { echo "bench-ingest: $*" >&2; }

# --- tools -------------------------------------------------------------------------------
if [[ ! -x /usr/bin/time ]]; then
    log "installing GNU time (apt)"
    apt-get install -y time >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get install -y time >/dev/null; }
fi

log "building release binaries"
cargo build --release --quiet -p budget-top -p budget-demo
TARGET_DIR=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
BUDGET_TOP=${BT:-$TARGET_DIR/release/budget-top}
LOAD=$TARGET_DIR/release/budget-demo

ROTEL=$OUT/rotel/rotel/rotel-agent
if [[ " $RECEIVERS " == *" rotel "* && ! -x $ROTEL ]]; then
    log "installing rotel from PyPI into $OUT/venv"
    python3 -m venv "$OUT/venv"
    rm -rf "$OUT/wheel" "$OUT/rotel"
    "$OUT/venv/bin/pip" download --quiet --no-deps --only-binary :all: \
        -d "$OUT/wheel" "rotel${ROTEL_VERSION:+==$ROTEL_VERSION}"
    "$OUT/venv/bin/python" -m zipfile -e "$OUT"/wheel/rotel-*.whl "$OUT/rotel"
    chmod +x "$ROTEL"
fi

# free_port, wait_port, cpu_of, rss_of
source "$ROOT/scripts/bench-lib.sh"

# run RECEIVER TRANSPORT -> one result line "receiver transport spans cpu rss wall load_rate"
run() {
    local receiver=$1 transport=$2
    local grpc_port http_port port timing=$OUT/$receiver-$transport.time pid load_out
    grpc_port=$(free_port)
    http_port=$(free_port)
    [[ $transport == grpc ]] && port=$grpc_port || port=$http_port
    case $receiver in
    budget-top)
        /usr/bin/time -v -o "$timing" "$BUDGET_TOP" --max-spans "$MAX_SPANS" check \
            --grpc "127.0.0.1:$grpc_port" --http "127.0.0.1:$http_port" --idle 3s --format json \
            >"$OUT/$receiver-$transport.json" 2>"$OUT/$receiver-$transport.log" &
        ;;
    rotel)
        /usr/bin/time -v -o "$timing" "$ROTEL" start --exporter blackhole \
            --otlp-grpc-endpoint "127.0.0.1:$grpc_port" --otlp-http-endpoint "127.0.0.1:$http_port" \
            >"$OUT/$receiver-$transport.log" 2>&1 &
        ;;
    esac
    pid=$!
    wait_port "$port"
    load_out=$(timeout "$LOAD_TIMEOUT" "$LOAD" load "--$transport" "127.0.0.1:$port" --spans "$SPANS" \
        --batch "$BATCH" --depth "$DEPTH" --connections "$CONNECTIONS" --for "${LOAD_TIMEOUT}s" || true)
    log "$receiver over $transport: $load_out"
    case $receiver in
    budget-top)
        # Stops by itself 3 s after the last span (--idle), after writing its report.
        for _ in $(seq 600); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        ;;
    rotel)
        sleep 2 # let it finish what it received
        pkill -TERM -P "$pid" 2>/dev/null || true
        for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        ;;
    esac
    kill -0 "$pid" 2>/dev/null && { log "$receiver did not stop: killing it"; pkill -KILL -P "$pid" || true; }
    wait "$pid" || true
    local sent wall rate
    sent=$(sed -n 's/.*spans sent: \([0-9]*\).*/\1/p' <<<"$load_out")
    wall=$(sed -n 's/.*seconds: \([0-9.]*\).*/\1/p' <<<"$load_out")
    rate=$(sed -n 's/.*spans\/s: \([0-9]*\).*/\1/p' <<<"$load_out")
    if [[ $receiver == budget-top ]]; then
        local held
        held=$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["summary"]["spans"], r["ingest"]["spans_accepted"])' \
            "$OUT/$receiver-$transport.json" 2>/dev/null || echo "? ?")
        log "budget-top report: spans held / accepted: $held"
    fi
    echo "$receiver $transport ${sent:-0} $(cpu_of "$timing") $(rss_of "$timing") ${wall:-0} ${rate:-0}"
}

# One run: every receiver over every transport, one after the other; its table and ratios.
one_run() {
    local results=() line receiver transport sent cpu rss wall rate ours theirs
    for transport in $TRANSPORTS; do
        for receiver in $RECEIVERS; do
            results+=("$(run "$receiver" "$transport")")
        done
    done
    echo
    printf '%-11s %-5s %10s %9s %14s %10s %12s\n' receiver wire spans cpu_s spans/cpu_s rss_MiB load_spans/s
    for line in "${results[@]}"; do
        read -r receiver transport sent cpu rss wall rate <<<"$line"
        awk -v r="$receiver" -v t="$transport" -v n="$sent" -v c="$cpu" -v m="$rss" -v l="$rate" \
            'BEGIN { printf "%-11s %-5s %10d %9.2f %14.0f %10.1f %12d\n", r, t, n, c, (c > 0 ? n / c : 0), m / 1024, l }'
    done
    echo
    for transport in $TRANSPORTS; do
        ours=$(printf '%s\n' "${results[@]}" | awk -v t="$transport" '$1 == "budget-top" && $2 == t && $4 > 0 { print $3 / $4 }')
        theirs=$(printf '%s\n' "${results[@]}" | awk -v t="$transport" '$1 == "rotel" && $2 == t && $4 > 0 { print $3 / $4 }')
        if [[ -n $ours && -n $theirs ]]; then
            awk -v t="$transport" -v a="$ours" -v b="$theirs" 'BEGIN { printf "%s: budget-top / rotel spans per CPU-second = %.2f\n", t, a / b }'
        fi
    done
}

# RUNS > 1: each run whole, then the spread of the ratios over the runs (this call's only).
rm -f "$OUT"/run-*.txt
for i in $(seq "$RUNS"); do
    [[ $RUNS -gt 1 ]] && echo && echo "run $i of $RUNS ($(date +%H:%M:%S), load average $(cut -d' ' -f1 /proc/loadavg))"
    one_run | tee "$OUT/run-$i.txt"
done
if [[ $RUNS -gt 1 ]]; then
    echo
    for transport in $TRANSPORTS; do
        cat "$OUT"/run-*.txt | awk -v t="$transport:" '$1 == t { r = $NF; if (n == 0 || r < lo) lo = r; if (n == 0 || r > hi) hi = r; n++; all = all " " r }
            END { if (n) printf "%s ratios over %d runs:%s (spread %.2f-%.2f)\n", t, n, all, lo, hi }'
    done
fi
