#!/usr/bin/env bash
# Builds the OpenTelemetry Collector of scripts/otelcol/ (the components docs/scale.md's tier 1
# needs, every module at one pinned release) and prints the binary's path. The build is cached:
# it runs again only when scripts/otelcol/ or the Go version changes. Modules come from the Go
# module proxy into Go's own cache (GOMODCACHE); the binary goes under the cargo target dir.
#
#   scripts/otelcol.sh                      # build if needed, print the path
#   otelcol="$(scripts/otelcol.sh)" && "$otelcol" --config docs/otelcol-tier1.yaml
#
# It needs Go (go.mod's `go` line says which release). When it fails it prints nothing on
# stdout, so `"$(scripts/otelcol.sh)" --config ...` would then run an empty command; the form
# above stops at the failure, after its message.
#
# Cold: about 1.5 min of downloads and 2 min of compiling on 2 cores; warm: instant.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
src="$repo/scripts/otelcol"
out="${CARGO_TARGET_DIR:-$repo/target}/otelcol"
bin="$out/otelcol-budget-top"

if ! command -v go >/dev/null 2>&1; then
  go_line="$(grep -m1 '^go ' "$src/go.mod" | cut -d' ' -f2)"
  cat >&2 <<EOF
otelcol.sh: cannot build the OpenTelemetry Collector: Go is not installed (no go on PATH).
  The Collector is built from its Go modules: install Go $go_line or later (https://go.dev/dl/,
  or your distribution's golang package), put go on PATH, and run scripts/otelcol.sh again.
  Or run a Collector you already have (otelcol-contrib, for one): it reads the same
  configuration. Nothing was built, and nothing is printed on stdout.
EOF
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
