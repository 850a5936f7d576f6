#!/usr/bin/env bash
# Builds etcd, kube-apiserver and kubectl from the Go module proxy into
# _output/bin (or $OUT). A binary is rebuilt only when it is missing or
# reports another version than the one pinned here, so rerunning is cheap
# (well under a second) and bumping a version below rebuilds what changed.
#
# The e2e tests (test/e2e) and the demo (test/e2e/cmd/demo) run these; see
# docs/testing.md.
#
# kube-apiserver lives in k8s.io/kubernetes, which points its staging modules
# (k8s.io/api, k8s.io/client-go, ...) at ./staging paths that Go ignores for a
# dependency. A scratch module replaces each with the published v0.37.2
# release, the same version this project uses, so both builds share a cache.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=${OUT:-$ROOT/_output/bin}
WORK=${WORK:-$ROOT/_output/tools}
KUBE_VERSION=v1.37.1
# What this script builds from k8s.io/kubernetes, and hack/kubelet/build.sh
# from the same scratch module.
KUBE_CMDS=(kube-apiserver kubectl kubelet kube-scheduler kube-controller-manager)
STAGING_VERSION=v0.37.2
ETCD_VERSION=v3.6.16
# The scratch modules are no workspace's (a go.work above, GOWORK).
export CGO_ENABLED=0 GOFLAGS="$(bash "$ROOT/hack/goflags.sh")" GOWORK=off

mkdir -p "$OUT" "$WORK"

# has_version BIN WANT: BIN exists and its version output contains WANT
# (grep reads all of it: with pipefail, grep -q would SIGPIPE the binary).
has_version() {
  [ -x "$1" ] && "$1" --version 2>/dev/null | grep -F -- "$2" >/dev/null
}

build_etcd() {
  has_version "$OUT/etcd" "etcd Version: ${ETCD_VERSION#v}" && return
  local dir=$WORK/etcd
  mkdir -p "$dir"
  cd "$dir"
  [ -f go.mod ] || printf 'module etcdbuild\n\ngo 1.26\n' > go.mod
  go get "go.etcd.io/etcd/server/v3@$ETCD_VERSION" "go.etcd.io/etcd/etcdctl/v3@$ETCD_VERSION"
  go build -trimpath -o "$OUT/etcd" go.etcd.io/etcd/server/v3
}

# align_with_project (hack/align.sh): with k8s.io/kubernetes's own
# requirements four modules (golang.org/x/crypto, x/sync, x/text,
# sigs.k8s.io/json) were older than ours, and that kept 664 of the 1,137
# packages kube-apiserver, kubectl and the kubelet's binaries share with
# this project from being shared.
# shellcheck source=hack/align.sh
source "$ROOT/hack/align.sh"

# build_kube makes the scratch module (again when this module's go.mod
# changed since it was aligned: hack/kubelet/build.sh builds from it too),
# then builds kube-apiserver and kubectl unless they are there at the
# pinned version.
build_kube() {
  local dir=$WORK/kube stamp
  mkdir -p "$dir"
  # (and again when this script changed: how it makes the module)
  stamp="$(cksum < "$ROOT/go.mod") $(cksum < "$ROOT/hack/build-control-plane.sh")"
  cd "$dir"
  if [ ! -f go.mod ] || ! grep -qF "k8s.io/kubernetes $KUBE_VERSION" go.mod ||
    [ "$(cat aligned 2>/dev/null)" != "$stamp" ]; then
    rm -f go.mod go.sum aligned
    printf 'module kubebuild\n\ngo 1.26\n' > go.mod
    local modfile
    go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" > kubernetes.json
    modfile=$(sed -n 's/.*"GoMod": "\(.*\)".*/\1/p' kubernetes.json)
    # Every staging module k8s.io/kubernetes replaces with a ./staging path:
    # it requires them at v0.0.0, which is no release. Required here at
    # their release, v0.0.0 replaced by it (for the go.mod files the module
    # graph reads), so that the build selects the release itself: a
    # compiled package's cache key holds its module's version, and with
    # "m => m@release" (every version replaced) the build selected v0.0.0
    # and compiled k8s.io/api, apimachinery, client-go, apiserver ... again,
    # none shared with what go vet compiled for this module.
    grep -E '^\s*k8s\.io/[a-z0-9-]+ => \./staging/' "$modfile" | awk '{print $1}' |
      grep -v '^k8s.io/sample-' | while read -r m; do
        go mod edit -replace "$m@v0.0.0=$m@$STAGING_VERSION" -require "$m@$STAGING_VERSION"
      done
    cat > tools.go <<'GO'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
GO
    go get "k8s.io/kubernetes@$KUBE_VERSION"
    align_with_project "$ROOT" "${KUBE_CMDS[@]/#/k8s.io/kubernetes/cmd/}"
    echo "$stamp" > aligned
  fi
  has_version "$OUT/kube-apiserver" "Kubernetes $KUBE_VERSION" &&
    [ -x "$OUT/kubectl" ] && "$OUT/kubectl" version --client 2>/dev/null | grep -F "Client Version: $KUBE_VERSION" >/dev/null && return
  local ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$KUBE_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37"
  go build -mod=mod -trimpath -ldflags "$ldflags" -o "$OUT/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver
  go build -mod=mod -trimpath -ldflags "$ldflags" -o "$OUT/kubectl" k8s.io/kubernetes/cmd/kubectl
}

build_etcd
build_kube
echo "control plane binaries in $OUT:"
ls -l "$OUT"
