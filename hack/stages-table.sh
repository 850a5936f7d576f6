#!/usr/bin/env bash
# Prints make test's times as one table: each stage's seconds from
# hack/stages.sh's _output/stages.tsv, then the 5 slowest packages of the
# unit and of the e2e stage, from go test's "ok <pkg> <secs>s" (and
# "FAIL <pkg> <secs>s") lines in make test's output, each assigned to the
# stage whose "stage: NAME: start" line came last before it.
#
#   hack/stages-table.sh [STAGES_TSV [LOG]]   (defaults: _output/stages.tsv, _output/ci-test.log)
#
# .ci/run prints it after make test, before what failed. A missing file
# leaves its part out; the script itself never fails.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tsv=${1:-$ROOT/_output/stages.tsv}
log=${2:-$ROOT/_output/ci-test.log}
module=github.com/multicloud-ccm/multicloud-ccm/

if [ -s "$tsv" ]; then
  echo "stage times (hack/stages.sh, $tsv):"
  awk -F'\t' '
    { printf "  %-34s %6d s  %s\n", $1, $2, $3 }
    # The background build ran beside unit, the wait is part of e2e.
    $1 !~ / \(/ { total += $2; secs[$1] = $2 }
    # Side stages (hack/stages.sh A+B+C) count only for what the longest
    # of them ran past A.
    $1 ~ / \(beside [^)]*\)$/ {
      a = $1; sub(/.* \(beside /, "", a); sub(/\)$/, "", a)
      if ($2 > side[a]) side[a] = $2
    }
    END {
      for (a in side) if (side[a] > secs[a]) total += side[a] - secs[a]
      printf "  %-34s %6d s\n", "total of the stages", total
    }
  ' "$tsv"
fi

if [ -s "$log" ]; then
  for stage in unit e2e; do
    top=$(awk -v want="$stage" -v module="$module" '
      # A side stage (hack/stages.sh A+B) starts "beside A", its output
      # printed after A ended, after "stage: B: its output".
      /^stage: [^ ]+: start \(/ || /^stage: [^ ]+: its output / { st = $2; sub(/:$/, "", st); next }
      st == want && ($1 == "ok" || $1 == "FAIL") && $3 ~ /^[0-9.]+s$/ {
        secs = $3; sub(/s$/, "", secs)
        pkg = $2; sub("^" module, "", pkg)
        printf "%s\t%s\t%s\n", secs, pkg, ($1 == "FAIL" ? "FAIL" : "")
      }
    ' "$log" | sort -t$'\t' -k1,1 -g -r | head -n 5)
    if [ -n "$top" ]; then
      echo "slowest $stage packages (go test's own times):"
      awk -F'\t' '{ printf "  %8.1f s  %s%s\n", $1, $2, ($3 == "" ? "" : "  (" $3 ")") }' <<<"$top"
    fi
  done
fi
exit 0
