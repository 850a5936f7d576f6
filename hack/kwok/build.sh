#!/usr/bin/env bash
# Builds kwok (sigs.k8s.io/kwok, pinned below) from the Go module proxy into
# _output/tools/bin (or $OUT), for the scale benchmark (test/scale, make
# bench-scale): kwok keeps thousands of Node objects Ready on the real
# kube-apiserver without a kubelet. Built outside this module (go install
# pkg@version uses kwok's own go.mod), so kwok's dependencies never enter
# ours. Cached: rebuilt only when missing or built from another version (a
# stamp file records it).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
OUT=${OUT:-$ROOT/_output/tools/bin}
KWOK_VERSION=${KWOK_VERSION:-v0.8.0}
export CGO_ENABLED=0 GOTOOLCHAIN=local

stamp="$OUT/.kwok-version"
if [ -x "$OUT/kwok" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$KWOK_VERSION" ]; then
  exit 0
fi
mkdir -p "$OUT"
# Outside any module, with -mod=mod: kwok's go.mod has no vendor folder in
# the module zip, and the caller's GOFLAGS may say otherwise.
cd "$OUT"
GOFLAGS=-mod=mod GOBIN=$OUT go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
echo "$KWOK_VERSION" > "$stamp"
echo "hack/kwok: built $OUT/kwok ($KWOK_VERSION)"
