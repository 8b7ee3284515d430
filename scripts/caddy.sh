#!/usr/bin/env bash
# Builds Caddy (github.com/caddyserver/caddy/v2 with its standard modules, pinned in
# scripts/caddy/go.mod) and prints the binary's path: a real proxy that records one span
# (its `tracing` directive), for the tests. Cached like scripts/otelcol.sh: it builds again only
# when the pin or Go changes.
#
#   caddy="$(scripts/caddy.sh)" && "$caddy" run --config Caddyfile --adapter caddyfile
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
src="$repo/scripts/caddy"
out="${CARGO_TARGET_DIR:-$repo/target}/caddy"
bin="$out/caddy"

if ! command -v go >/dev/null 2>&1; then
  echo "caddy.sh: Go is not installed (Caddy is built from its Go modules); nothing printed" >&2
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
echo "caddy.sh: building Caddy into $bin (about 2 min cold on 2 cores)" >&2
(cd "$src" && GOFLAGS=-mod=readonly go build -trimpath -o "$bin.tmp" .)
mv "$bin.tmp" "$bin"
echo "$stamp" > "$out/stamp"
echo "$bin"
