#!/usr/bin/env bash
# Builds etcd, kube-apiserver and kubectl from the Go module proxy into
# _output/bin (or $OUT). Each binary is built once; rerunning is cheap.
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
STAGING_VERSION=v0.37.2
ETCD_VERSION=v3.6.16
export CGO_ENABLED=0 GOFLAGS=-buildvcs=false

mkdir -p "$OUT" "$WORK"

build_etcd() {
  [ -x "$OUT/etcd" ] && return
  local dir=$WORK/etcd
  mkdir -p "$dir"
  cd "$dir"
  [ -f go.mod ] || printf 'module etcdbuild\n\ngo 1.26\n' > go.mod
  go get "go.etcd.io/etcd/server/v3@$ETCD_VERSION" "go.etcd.io/etcd/etcdctl/v3@$ETCD_VERSION"
  go build -trimpath -o "$OUT/etcd" go.etcd.io/etcd/server/v3
}

build_kube() {
  [ -x "$OUT/kube-apiserver" ] && [ -x "$OUT/kubectl" ] && return
  local dir=$WORK/kube
  mkdir -p "$dir"
  cd "$dir"
  if [ ! -f go.mod ]; then
    printf 'module kubebuild\n\ngo 1.26\n' > go.mod
    local modfile
    go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" > kubernetes.json
    modfile=$(sed -n 's/.*"GoMod": "\(.*\)".*/\1/p' kubernetes.json)
    # Every staging module k8s.io/kubernetes replaces with a ./staging path.
    grep -E '^\s*k8s\.io/[a-z0-9-]+ => \./staging/' "$modfile" | awk '{print $1}' |
      grep -v '^k8s.io/sample-' | while read -r m; do
        go mod edit -replace "$m=$m@$STAGING_VERSION"
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
  fi
  local ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$KUBE_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37"
  go build -mod=mod -trimpath -ldflags "$ldflags" -o "$OUT/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver
  go build -mod=mod -trimpath -ldflags "$ldflags" -o "$OUT/kubectl" k8s.io/kubernetes/cmd/kubectl
}

build_etcd
build_kube
echo "control plane binaries in $OUT:"
ls -l "$OUT"
