#!/usr/bin/env bash
# fuzz.sh runs every Fuzz target in the module for a short time each
# (default 10s): a smoke run in CI; run one for longer by hand with
#   go test -run '^$' -fuzz '^FuzzName$' -fuzztime 10m ./pkg/...
# A crash fails the run and leaves its input under testdata/fuzz.
set -euo pipefail
fuzztime=${1:-10s}
cd "$(dirname "${BASH_SOURCE[0]}")/.."
log=$(mktemp)
trap 'rm -f "$log"' EXIT

# inputs lists the failing inputs saved for a target.
inputs() { ls "$1/testdata/fuzz/$2" 2>/dev/null || true; }

# fuzz runs one target. Go 1.26's fuzz coordinator can fail a target with a
# bare "context deadline exceeded" when -fuzztime ends while a worker is
# mid-call (go.dev/issue/75804, fixed in Go 1.27). That failure saves no
# input; a crash always does. So a run that failed with that message and
# saved nothing is run once more, and any other failure is final.
fuzz() {
  local pkg=$1 name=$2 before attempt
  for attempt in 1 2; do
    before=$(inputs "$pkg" "$name")
    # Minimising a new interesting input (60 s by default) stalls every
    # worker (FuzzParse sat at 0 execs/s for 40 s); a smoke run caps it.
    if go test -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" -fuzzminimizetime 5s "$pkg" 2>&1 | tee "$log"; then
      return 0
    fi
    if [ "$attempt" = 1 ] && [ "$(inputs "$pkg" "$name")" = "$before" ] &&
      grep -qx '    context deadline exceeded' "$log"; then
      echo "fuzz: $name stopped on Go's fuzztime race (go.dev/issue/75804) and found no failing input; running it again"
      continue
    fi
    return 1
  done
}

# Each target's wall time is printed: most of it is building the package's
# test binary with the fuzzer's coverage instrumentation, which recompiles
# its dependencies (the first target of a cloud SDK pays for that SDK).
count=0
all=$SECONDS
while IFS=: read -r file name; do
  pkg=./$(dirname "$file")
  echo "fuzz: $pkg $name ($fuzztime)"
  t=$SECONDS
  fuzz "$pkg" "$name"
  echo "fuzz: $name passed in $((SECONDS - t)) s"
  count=$((count + 1))
done < <(git ls-files '*_test.go' | xargs grep -H -o -E '^func Fuzz[A-Za-z0-9_]+' | sed 's/:func /:/' | sort)
echo "fuzz: $count targets ran without a crash in $((SECONDS - all)) s"
[ "$count" -gt 0 ]
