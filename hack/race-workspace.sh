#!/usr/bin/env bash
# Writes the Go workspace that make unit and make openstack-test hand to
# go test -race (GOWORK), and prints its path. It is this module with one
# replacement: k8s.io/cloud-provider, copied from the module cache with one
# upstream data race fixed.
#
# The race: upstream's service controller (k8s.io/cloud-provider
# controllers/service, v0.37 and master alike) stores a Service into its
# cache entry (cachedService.state = service, in
# processServiceCreateOrUpdate) without the cache's lock, while its node
# worker reads every entry under that lock (serviceCache.allServices, from
# syncNodes). A word-sized pointer store: harmless in the binary, but -race
# reports it whenever a Node changes while a Service syncs, and fails
# whichever test is running then (stop 37's cold CI failed pkg/router so).
# The copy takes the lock around that one store, in race test builds only:
# the tests still drive upstream's controller, its behaviour unchanged, and
# -race still reports every race of ours. Go's build overlays may not
# replace files in the module cache, hence a workspace.
#
# The edit is checked: the script fails, naming the line, when the module
# no longer has that store exactly once (a new k8s.io/cloud-provider: see
# whether upstream took the lock, then drop this workspace or update it).
set -euo pipefail

out=${1:?usage: race-workspace.sh OUTDIR}
go=${GO:-go}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
# The module as released, also when called from within this workspace.
export GOWORK=off
"$go" mod download k8s.io/cloud-provider
read -r dir version < <("$go" list -m -f '{{.Dir}} {{.Version}}' k8s.io/cloud-provider)
src=$dir/controllers/service/controller.go
if [ ! -f "$src" ]; then
	echo "race-workspace: $src not found (go mod download k8s.io/cloud-provider)" >&2
	exit 1
fi
store=$'\tcachedService.state = service'
if [ "$(grep -cxF "$store" "$src")" != 1 ]; then
	echo "race-workspace: $src does not hold the line '${store#$'\t'}' exactly once; see hack/race-workspace.sh" >&2
	exit 1
fi

mkdir -p "$out"
ws=$(cd "$out" && pwd)/race-workspace
copy=$ws/cloud-provider-$version
stamp=$(cksum < "$0")
if [ "$(cat "$copy/.patched" 2>/dev/null)" != "$stamp" ]; then
	rm -rf "$ws"
	mkdir -p "$ws"
	cp -R "$dir" "$copy"
	chmod -R u+w "$copy"
	awk -v store="$store" '
		$0 == store {
			print "\tc.cache.mu.Lock() // multicloud-ccm hack/race-workspace.sh: the node worker reads it under the lock"
			print
			print "\tc.cache.mu.Unlock()"
			next
		}
		{ print }
	' "$src" > "$copy/controllers/service/controller.go"
	echo "$stamp" > "$copy/.patched"
fi
goline=$(sed -n 's/^go \([0-9.]*\)$/\1/p' go.mod)
cat > "$ws/go.work" <<EOF
go $goline

use $root

replace k8s.io/cloud-provider $version => $copy
EOF
echo "$ws/go.work"
