#!/usr/bin/env bash
# Whether two builds write the same reports: records every scenario of the demo, broken and
# cured, with OLD's budget-demo and budget-top, then writes each recording's text, JSON and HTML
# reports (with and without --trace-url) with both builds and compares them byte for byte.
# Usage: scripts/same-reports.sh OLD_BIN_DIR NEW_BIN_DIR [WORK_DIR]   (each a target/debug)
# Exit 0 when every report is identical, 1 with the first differences otherwise.
set -u
old=$1 new=$2 work=${3:-$(mktemp -d)}
recs=$work/recordings
mkdir -p "$recs"
scenarios=$("$old/budget-demo" list | awk '/^[a-z]/{print $1}')
[ -n "$scenarios" ] || scenarios="propagate slow-dependency fixed-timeout drop-header absolute-deadline proxy-timeouts no-cancel no-dequeue-check burst message-deadline retry-storm retry-layers"
for s in $scenarios; do
  for mode in broken cured; do
    name=$s-$mode
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    "$old/budget-top" record -o "$recs/$name.jsonl" --grpc "127.0.0.1:$port" --http 127.0.0.1:0 \
      2>"$recs/$name.record.err" &
    rec=$!
    for _ in $(seq 50); do grep -q listening "$recs/$name.record.err" && break; sleep 0.2; done
    cure=(); [ "$mode" = cured ] && cure=(--cure)
    timeout 120 "$old/budget-demo" --scenario "$s" "${cure[@]}" --requests 8 \
      --endpoint "http://127.0.0.1:$port" >/dev/null 2>&1 || echo "$name: the demo failed" >&2
    sleep 1
    kill -TERM "$rec"; wait "$rec"
  done
done
render() { # BIN OUT
  mkdir -p "$2"
  for r in "$recs"/*.jsonl; do
    n=$(basename "$r" .jsonl)
    link=(--trace-url "http://127.0.0.1:16686/trace/{trace_id}")
    "$1/budget-top" check --input "$r" --format text >"$2/$n.txt" 2>&1; echo "exit $?" >>"$2/$n.txt"
    "$1/budget-top" check --input "$r" --format json >"$2/$n.json" 2>&1; echo "exit $?" >>"$2/$n.json"
    "$1/budget-top" check --input "$r" --html "$2/$n.html" >/dev/null 2>&1
    "$1/budget-top" check --input "$r" "${link[@]}" --html "$2/$n.linked.html" >"$2/$n.linked.txt" 2>&1
    "$1/budget-top" check --input "$r" "${link[@]}" --format json >"$2/$n.linked.json" 2>&1
  done
}
render "$old" "$work/old"
render "$new" "$work/new"
echo "$(ls "$recs"/*.jsonl | wc -l) recordings, $(ls "$work/old" | wc -l) reports each, in $work"
if diff -r "$work/old" "$work/new" >"$work/diff.txt"; then
  echo "every report identical"
else
  head -40 "$work/diff.txt"; exit 1
fi
