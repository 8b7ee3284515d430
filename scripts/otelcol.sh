#!/usr/bin/env bash
# Builds the OpenTelemetry Collector of scripts/otelcol/ (the components docs/scale.md's tier 1
# needs, every module at one pinned release) and prints the binary's path. The build is cached:
# it runs again only when scripts/otelcol/ or the Go version changes. Modules come from the Go
# module proxy into Go's own cache (GOMODCACHE); the binary goes under the cargo target dir.
#
#   scripts/otelcol.sh                      # build if needed, print the path
#   "$(scripts/otelcol.sh)" --config docs/otelcol-tier1.yaml
#
# Cold: about 1.5 min of downloads and 2 min of compiling on 2 cores; warm: instant.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
src="$repo/scripts/otelcol"
out="${CARGO_TARGET_DIR:-$repo/target}/otelcol"
bin="$out/otelcol-budget-top"

if ! command -v go >/dev/null 2>&1; then
  echo "otelcol.sh: Go is not installed (the Collector is built from its Go modules)" >&2
  exit 1
fi
mkdir -p "$out"
stamp="$( (go version; cat "$src/go.mod" "$src/go.sum" "$src"/*.go) | sha256sum | cut -d' ' -f1)"
# One build at a time: concurrent callers wait for it, then reuse it.
exec 9>"$out/.lock"
flock 9
if [[ -x "$bin" && "$(cat "$out/stamp" 2>/dev/null)" == "$stamp" ]]; then
  echo "$bin"
  exit 0
fi
echo "otelcol.sh: building the Collector into $bin" >&2
(cd "$src" && GOFLAGS=-mod=readonly go build -trimpath -o "$bin.tmp" .)
mv "$bin.tmp" "$bin"
echo "$stamp" > "$out/stamp"
echo "$bin"
