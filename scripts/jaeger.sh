#!/usr/bin/env bash
# Builds Jaeger v2 (github.com/jaegertracing/jaeger cmd/jaeger, pinned in scripts/jaeger/go.mod)
# and prints the binary's path: the trace backend the Jaeger source and --forward are tested
# against. Cached like scripts/otelcol.sh: it builds again only when the pin or Go changes.
#
#   scripts/jaeger.sh                       # build if needed, print the path
#   "$(scripts/jaeger.sh)" --config my-jaeger.yaml
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
src="$repo/scripts/jaeger"
out="${CARGO_TARGET_DIR:-$repo/target}/jaeger"
bin="$out/jaeger"

if ! command -v go >/dev/null 2>&1; then
  echo "jaeger.sh: Go is not installed (Jaeger is built from its Go module)" >&2
  exit 1
fi
mkdir -p "$out"
stamp="$( (go version; cat "$src/go.mod" "$src/go.sum") | sha256sum | cut -d' ' -f1)"
# One build at a time: concurrent callers wait for it, then reuse it.
exec 9>"$out/.lock"
flock 9
if [[ -x "$bin" && "$(cat "$out/stamp" 2>/dev/null)" == "$stamp" ]]; then
  echo "$bin"
  exit 0
fi
echo "jaeger.sh: building Jaeger v2 into $bin (about 5 min cold on 2 cores)" >&2
(cd "$src" && GOFLAGS=-mod=readonly go build -trimpath -o "$bin.tmp" github.com/jaegertracing/jaeger/cmd/jaeger)
mv "$bin.tmp" "$bin"
echo "$stamp" > "$out/stamp"
echo "$bin"
