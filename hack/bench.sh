#!/usr/bin/env bash
# bench.sh runs every benchmark in the module once and prints one table per
# package: router overhead against a direct backend call, address
# allocation cost as a pool fills, and cloud round-trips per node sweep and
# per load-balancer operation beside a naive path measured in the same run.
# Counts (round-trips, calls, allocations) are the numbers to compare; the
# seconds move with the machine's load. Not a pass/fail test.
#
# Usage: hack/bench.sh [go test -bench regexp] (BENCHTIME=3x for more runs)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
pattern=${1:-.}
benchtime=${BENCHTIME:-}
out=${BENCH_OUT:-_output/bench.txt}
mkdir -p "$(dirname "$out")"
# Packages of this module here; a folder with its own go.mod is another
# module: test/upstream-aws (upstream's AWS provider beside ours on one
# fake: sweeps at 50, 1,000 and 5,000 nodes in a VPC of 20,000 instances,
# NLB create calls) runs after them, once per benchmark (-benchtime 1x:
# an iteration is whole sweeps). UPSTREAM_AWS=0 skips it.
nested=$(git ls-files '*/go.mod' | xargs -r -n1 dirname | sed 's|$|/|')
pkgs=$(git ls-files '*_test.go' | xargs grep -l -E '^func Benchmark' | xargs -n1 dirname | sort -u |
  while read -r d; do
    skip=false
    for n in $nested; do case "$d/" in "$n"*) skip=true ;; esac; done
    $skip || echo "./$d"
  done)
: > "$out"
for pkg in $pkgs; do
  echo "bench: $pkg" >&2
  go test -run '^$' -bench "$pattern" -benchmem ${benchtime:+-benchtime "$benchtime"} -timeout 60m "$pkg" | tee -a "$out" >&2
done
if [ "${UPSTREAM_AWS:-1}" != 0 ]; then
  echo "bench: ./test/upstream-aws (upstream's provider beside ours)" >&2
  (cd test/upstream-aws && go test -run '^$' -bench "$pattern" -benchtime 1x -timeout 120m .) | tee -a "$out" >&2
fi
echo
echo "Summary (from $out; per-op numbers, custom metrics as reported):"
awk '
  /^pkg: / { printf "\n%s\n", $2; next }
  /^Benchmark/ {
    name=$1; sub(/-[0-9]+$/, "", name); line=sprintf("  %-60s", name)
    for (i = 3; i < NF; i += 2) line = line sprintf("  %12s %s", $i, $(i+1))
    print line
  }' "$out"
