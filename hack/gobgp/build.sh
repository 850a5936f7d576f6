#!/usr/bin/env bash
# Builds GoBGP's daemon and CLI (github.com/osrg/gobgp/v3, pinned below)
# from the Go module proxy into _output/gobgp (or $OUT), for the bare-metal
# BGP wire test (test/e2e/wire): a "router" network namespace peers with
# MetalLB's speaker and shows the routes it receives. Cached: rebuilt only
# when missing or built from another version (a stamp file records it).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
OUT=${OUT:-$ROOT/_output/gobgp}
GOBGP_VERSION=${GOBGP_VERSION:-v3.37.0}
export CGO_ENABLED=0 GOFLAGS="$(bash "$ROOT/hack/goflags.sh")" GOTOOLCHAIN=local

stamp="$OUT/.version"
if [ -x "$OUT/gobgpd" ] && [ -x "$OUT/gobgp" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$GOBGP_VERSION" ]; then
  exit 0
fi
mkdir -p "$OUT"
# Outside any module: go install pkg@version builds with GoBGP's own go.mod.
cd "$OUT"
GOBIN=$OUT go install -trimpath -ldflags "-s -w" \
  "github.com/osrg/gobgp/v3/cmd/gobgpd@$GOBGP_VERSION" "github.com/osrg/gobgp/v3/cmd/gobgp@$GOBGP_VERSION"
echo "$GOBGP_VERSION" > "$stamp"
echo "hack/gobgp: built $OUT/gobgpd and $OUT/gobgp ($GOBGP_VERSION)"
