#!/usr/bin/env bash
# Installs helm (pinned) from the Go module proxy into _output/tools/bin (or
# $TOOLS). Idempotent: does nothing when the binary there already reports the
# pinned version, so rerunning costs well under a second.
#
# helm's own Makefile sets the Kubernetes version helm assumes by default
# (.Capabilities.KubeVersion, and the deprecation checks of `helm lint`) from
# the client-go it was built with; `go install` alone leaves v1.20. We pass
# the same -X flags, computed from helm's go.mod. Tests pass --kube-version
# anyway.
#
# It is built in a scratch module that requires this project's version of
# every module both builds compile (hack/align.sh: helm v3.22.0 asks for
# client-go v0.37.0, this project v0.37.2), so the compiled Kubernetes
# packages are shared with this project's builds instead of compiled twice.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
TOOLS=${TOOLS:-$ROOT/_output/tools/bin}
HELM_VERSION=v3.22.0
# The scratch module below is no workspace's (a go.work above, GOWORK).
export CGO_ENABLED=0 GOFLAGS="$(bash "$ROOT/hack/goflags.sh")" GOWORK=off

mkdir -p "$TOOLS"
# Absolute: the build below runs in the scratch module's folder.
TOOLS=$(cd "$TOOLS" && pwd)
if [ -x "$TOOLS/helm" ] && "$TOOLS/helm" version --template '{{.Version}}' 2>/dev/null | grep -qxF "$HELM_VERSION"; then
  exit 0
fi

modfile=$(go mod download -json "helm.sh/helm/v3@$HELM_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
clientgo=$(awk '$1 == "k8s.io/client-go" {print $2; exit}' "$modfile")
if [ -z "$clientgo" ]; then
  echo "hack/helm/install.sh: no k8s.io/client-go in $modfile" >&2
  exit 1
fi
minor=$(echo "$clientgo" | cut -d. -f2)
major=1
pkg=helm.sh/helm/v3
ldflags="-s -w -X $pkg/internal/version.version=$HELM_VERSION"
ldflags+=" -X $pkg/pkg/lint/rules.k8sVersionMajor=$major -X $pkg/pkg/lint/rules.k8sVersionMinor=$minor"
ldflags+=" -X $pkg/pkg/chartutil.k8sVersionMajor=$major -X $pkg/pkg/chartutil.k8sVersionMinor=$minor"

# shellcheck source=hack/align.sh
source "$ROOT/hack/align.sh"
# A folder of its own for each run (two runs at once share none), removed
# however the run ends.
mkdir -p "$ROOT/_output/tools"
dir=$(mktemp -d "$ROOT/_output/tools/helm-build.XXXXXX")
trap 'rm -rf "$dir"' EXIT
cd "$dir"
printf 'module helmbuild\n\ngo 1.26\n' > go.mod
go get "$pkg@$HELM_VERSION"
align_with_project "$ROOT" "$pkg/cmd/helm"
go build -mod=mod -trimpath -ldflags "$ldflags" -o "$TOOLS/helm" "$pkg/cmd/helm"
cd "$ROOT"
"$TOOLS/helm" version --template '{{.Version}}{{"\n"}}' | grep -qxF "$HELM_VERSION" || {
  echo "hack/helm/install.sh: $TOOLS/helm does not report $HELM_VERSION" >&2
  exit 1
}
