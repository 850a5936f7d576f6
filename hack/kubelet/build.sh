#!/usr/bin/env bash
# Builds what a real node needs into _output/bin (or $OUT), from the same
# scratch module and Kubernetes version as hack/build-control-plane.sh (run
# it first: `make kubelet` does), so the builds share their cache:
#
#   kubelet, kube-scheduler, kube-controller-manager   k8s.io/kubernetes v1.37.1
#   pause                                               hack/kubelet/pause, static
#
# Debian has no kubelet; containerd and runc come from Debian
# (hack/kubelet/install.sh). A binary is rebuilt only when missing or
# reporting another version, so rerunning costs well under a second.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
OUT=${OUT:-$ROOT/_output/bin}
WORK=${WORK:-$ROOT/_output/tools}
KUBE_VERSION=v1.37.1
export CGO_ENABLED=0 GOFLAGS="$(bash "$ROOT/hack/goflags.sh")"

dir=$WORK/kube
if [ ! -f "$dir/go.mod" ] || ! grep -qF "k8s.io/kubernetes $KUBE_VERSION" "$dir/go.mod"; then
  echo "hack/kubelet/build.sh: no scratch module for k8s.io/kubernetes $KUBE_VERSION in $dir; run hack/build-control-plane.sh (make control-plane) first" >&2
  exit 1
fi
mkdir -p "$OUT"
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$KUBE_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37"
for cmd in kubelet kube-scheduler kube-controller-manager; do
  if [ -x "$OUT/$cmd" ] && "$OUT/$cmd" --version 2>/dev/null | grep -F "Kubernetes $KUBE_VERSION" > /dev/null; then
    continue
  fi
  (cd "$dir" && go build -mod=mod -trimpath -ldflags "$ldflags" -o "$OUT/$cmd" "k8s.io/kubernetes/cmd/$cmd")
done
(cd "$ROOT" && go build -trimpath -ldflags "-s -w" -o "$OUT/pause" ./hack/kubelet/pause)
ls -l "$OUT/kubelet" "$OUT/kube-scheduler" "$OUT/kube-controller-manager" "$OUT/pause"
