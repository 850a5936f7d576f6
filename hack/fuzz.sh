#!/usr/bin/env bash
# fuzz.sh runs every Fuzz target in the module for a short time each
# (default 10s): a smoke run in CI; run one for longer by hand with
#   go test -run '^$' -fuzz '^FuzzName$' -fuzztime 10m ./pkg/...
# A crash fails the run and leaves its input under testdata/fuzz.
#
# Each package's test binary is built once, with the fuzzer's coverage
# instrumentation, by `go test -c -fuzz=.` (what `go test -fuzz` builds:
# the same instrumented packages, so the two share the build cache), and
# each of the package's targets is run from it the way `go test -fuzz` runs
# it: in the package's directory (failing inputs go to its testdata/fuzz),
# with the interesting inputs cached under $GOCACHE/fuzz/<import path>.
# cmd/go's own tests run a fuzz binary so (testdata/script/
# test2json_interrupt.txt). `go test -fuzz` rebuilt and relinked the binary
# for every target.
#
# hack/fuzz.sh --build-only builds each package's instrumented test binary
# and runs nothing (make fuzz-deps: make test builds them in the background
# while other stages run, so the fuzz stage finds them built).
set -euo pipefail
buildonly=
if [ "${1:-}" = --build-only ]; then
  buildonly=1
  shift
fi
fuzztime=${1:-10s}
cd "$(dirname "${BASH_SOURCE[0]}")/.."
tmp=$(mktemp -d)
log=$tmp/log
trap 'rm -rf "$tmp"' EXIT
# The instrumented test binaries are kept here: go test -c relinks one only
# when its build ID changed, so a binary --build-only made (or the last run)
# is reused as it is.
bindir=$PWD/_output/fuzz-bin
mkdir -p "$bindir"
fuzzcache=$(go env GOCACHE)/fuzz

# inputs lists the failing inputs saved for a target.
inputs() { ls "$1/testdata/fuzz/$2" 2>/dev/null || true; }

# run runs one target from its package's binary, as go test -fuzz does.
run() {
  local dir=$1 importpath=$2 exe=$3 name=$4
  # Minimising a new interesting input (60 s by default) stalls every
  # worker (FuzzParse sat at 0 execs/s for 40 s); a smoke run caps it.
  (cd "$dir" && "$exe" -test.paniconexit0 -test.run='^$' -test.fuzz="^${name}\$" \
    -test.fuzztime="$fuzztime" -test.fuzzminimizetime=5s \
    -test.fuzzcachedir="$fuzzcache/$importpath")
}

# fuzz runs one target. Go 1.26's fuzz coordinator can fail a target with a
# bare "context deadline exceeded" when -fuzztime ends while a worker is
# mid-call (go.dev/issue/75804, fixed in Go 1.27). That failure saves no
# input; a crash always does. So a run that failed with that message and
# saved nothing is run once more, and any other failure is final.
fuzz() {
  local dir=$1 name=$4 before attempt
  for attempt in 1 2; do
    before=$(inputs "$dir" "$name")
    if run "$@" 2>&1 | tee "$log"; then
      return 0
    fi
    if [ "$attempt" = 1 ] && [ "$(inputs "$dir" "$name")" = "$before" ] &&
      grep -qx '    context deadline exceeded' "$log"; then
      echo "fuzz: $name stopped on Go's fuzztime race (go.dev/issue/75804) and found no failing input; running it again"
      continue
    fi
    return 1
  done
}

# The targets, as "package-dir target" lines, sorted.
targets=$(git ls-files '*_test.go' | xargs grep -H -o -E '^func Fuzz[A-Za-z0-9_]+' |
  while IFS=: read -r file fn; do echo "./$(dirname "$file") ${fn#func }"; done | sort)
[ -n "$targets" ]

# Each package's wall time is printed: most of a cold run is building the
# test binaries with the fuzzer's coverage instrumentation, which
# recompiles every dependency (the first package of a cloud SDK pays for
# that SDK).
count=0
all=$SECONDS
for pkg in $(cut -d' ' -f1 <<<"$targets" | uniq); do
  t=$SECONDS
  exe=$bindir/$(tr / _ <<<"${pkg#./}").test
  if [ -n "$buildonly" ]; then
    echo "fuzz: building $pkg's test binary with fuzzing instrumentation"
    go test -c -fuzz=. -vet=off -o "$exe" "$pkg"
    echo "fuzz: built $pkg in $((SECONDS - t)) s"
    continue
  fi
  importpath=$(go list -f '{{.ImportPath}}' "$pkg")
  echo "fuzz: building $pkg's test binary with fuzzing instrumentation"
  # TESTVET=off (make test, after its vet stage ran go vet, a superset of
  # go test's checks, on every package and its tests): -vet=off.
  go test -c -fuzz=. ${TESTVET:+-vet=$TESTVET} -o "$exe" "$pkg"
  echo "fuzz: built $pkg in $((SECONDS - t)) s"
  for name in $(awk -v p="$pkg" '$1 == p { print $2 }' <<<"$targets"); do
    echo "fuzz: $pkg $name ($fuzztime)"
    t=$SECONDS
    if ! fuzz "$pkg" "$importpath" "$exe" "$name"; then
      # go test's verdict line, for .ci/run's summary of what failed.
      printf 'FAIL\t%s\t(fuzz target %s)\n' "$importpath" "$name"
      exit 1
    fi
    echo "fuzz: $name passed in $((SECONDS - t)) s"
    count=$((count + 1))
  done
done
if [ -n "$buildonly" ]; then
  echo "fuzz: built every fuzz target's test binary in $((SECONDS - all)) s"
  exit 0
fi
echo "fuzz: $count targets ran without a crash in $((SECONDS - all)) s"
[ "$count" -gt 0 ]
