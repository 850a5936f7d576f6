#!/usr/bin/env bash
# Builds MetalLB's controller and speaker (go.universe.tf/metallb, pinned
# below) from the Go module proxy into _output/metallb (or $OUT), with its
# CRDs under crds/, for the
# throughput comparison (issue 14) and the bare-metal speaker tests (issue 15).
# Cached: a binary is rebuilt only when missing or built from another version
# (a stamp file records it), so a rerun takes well under a second.
#
# MetalLB needs github.com/metallb/frr-k8s, whose zip the module proxy refuses
# (403). The controller and speaker import only its api/v1beta1 types, so the
# scratch build replaces the module with hack/metallb/frr-k8s-api, our own
# declaration of the types MetalLB uses. MetalLB's code is never committed: it
# is unpacked into a scratch module under _output/metallb/src.
#
# Running v0.16's controller needs its own Pod to exist (it looks it up at
# start; an unscheduled Pod is enough) and --webhook-mode=disabled.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
OUT=${OUT:-$ROOT/_output/metallb}
METALLB_VERSION=${METALLB_VERSION:-v0.16.2}
# MetalLB's go.mod names a newer patch toolchain; ours builds it.
export CGO_ENABLED=0 GOFLAGS="$(bash "$ROOT/hack/goflags.sh")" GOTOOLCHAIN=local GOWORK=off

stamp="$OUT/.version"
if [ -x "$OUT/controller" ] && [ -x "$OUT/speaker" ] && [ -f "$OUT/crds/metallb.io_ipaddresspools.yaml" ] &&
  [ "$(cat "$stamp" 2>/dev/null)" = "$METALLB_VERSION $(sha256sum "$ROOT/hack/metallb/frr-k8s-api/api/v1beta1/types.go" | cut -c1-16)" ]; then
  exit 0
fi

src=$OUT/src
rm -rf "$src"
mkdir -p "$src"
dir=$(go mod download -json "go.universe.tf/metallb@$METALLB_VERSION" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
[ -d "$dir" ] || { echo "hack/metallb: go mod download go.universe.tf/metallb@$METALLB_VERSION failed" >&2; exit 1; }
cp -r "$dir" "$src/metallb"
rm -rf "$OUT/crds"
mkdir -p "$OUT/crds"
cp "$dir"/config/crd/bases/*.yaml "$OUT/crds/"
chmod u+w "$OUT"/crds/*.yaml
cp -r "$ROOT/hack/metallb/frr-k8s-api" "$src/frr-k8s"
chmod -R u+w "$src"
cd "$src/metallb"
go mod edit -replace github.com/metallb/frr-k8s=../frr-k8s
# This module's versions of every module both builds compile (client-go,
# apimachinery, grpc, x/sys, ...: hack/align.sh), so that the compiles of
# the packages MetalLB shares with this module are shared too: v0.16.2 asks
# for k8s.io v0.37.1 and older x/net, x/sys and x/crypto, and with those
# none of its Kubernetes packages was.
# shellcheck source=hack/align.sh
source "$ROOT/hack/align.sh"
align_with_project "$ROOT" ./controller ./speaker
go build -mod=mod -trimpath -ldflags "-s -w" -o "$OUT/controller" ./controller
go build -mod=mod -trimpath -ldflags "-s -w" -o "$OUT/speaker" ./speaker
echo "$METALLB_VERSION $(sha256sum "$ROOT/hack/metallb/frr-k8s-api/api/v1beta1/types.go" | cut -c1-16)" > "$stamp"
rm -rf "$src"
echo "hack/metallb: built $OUT/controller and $OUT/speaker ($METALLB_VERSION), CRDs in $OUT/crds"
