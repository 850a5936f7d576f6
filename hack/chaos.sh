#!/usr/bin/env bash
# The chaos judge (test/chaos, docs/testing.md#the-chaos-judge): seeded
# random operations on Services, Nodes, the live configuration and the
# clouds, with faults, against the built binary (two replicas under leader
# election) on a real kube-apiserver + etcd; invariants checked after every
# step and at quiescence; a violation shrunk to a replay file.
#
#   hack/chaos.sh                 one sequence, fresh seed, 40 steps
#   SEED=42 STEPS=60 hack/chaos.sh
#   DURATION=60m hack/chaos.sh    fresh sequences (seed, seed+1, ...) for an hour
#   REPLAY=_output/chaos/replay-seed-42-5-steps.json hack/chaos.sh
#   SLICE=1 hack/chaos.sh         the slice make test runs: fixed seeds and one fresh seed
#                                 drawn from the tree under test (CHAOS_FRESH_SEED=N sets it,
#                                 CHAOS_FRESH=0 leaves it out), printed with its replay command
#
# With the OpenStack stack up (make chaos sources _output/openstack.env),
# make chaos adds the backend os on the real Keystone/Octavia/Nova;
# CHAOS_OS=0 leaves it out, CHAOS_OS=1 requires it (the slice leaves it
# out unless CHAOS_OS=1). A seed draws another sequence with os: the
# replay commands printed say which.
#
# CHAOS_SHARE=1 adds the share stream (Services sharing bare-metal
# addresses by allow-shared-ip keys, drawn from a second random stream),
# CHAOS_SHARE=0 leaves it out; by default fresh seeds (no SEED, the
# slice's fresh seed) draw it and a seed given draws as before.
#
# SHRINK bounds the shrinker (default 20m; 0: none), SETTLE the wait for
# convergence at quiescence (default 330s), IGNORE lists violation classes
# only logged (a known defect, while hunting others), KEEP=1 keeps the
# folders of passing runs too. Everything a run needs is under
# _output/chaos (logs of failing runs kept, replay files); the output is
# also in _output/chaos/last.log.
#
# TESTVET=off (make test, after its vet stage) runs go test -vet=off.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=${CHAOS_OUT:-$ROOT/_output/chaos}
mkdir -p "$OUT"
export CHAOS_OUT=$OUT
export CHAOS_SEED=${SEED:-} CHAOS_STEPS=${STEPS:-} CHAOS_DURATION=${DURATION:-}
export CHAOS_REPLAY=${REPLAY:-} CHAOS_SHRINK=${SHRINK:-} CHAOS_SETTLE=${SETTLE:-} CHAOS_IGNORE=${IGNORE:-} CHAOS_KEEP=${KEEP:-}
if [ -n "$CHAOS_REPLAY" ]; then
  CHAOS_REPLAY=$(cd "$(dirname "$CHAOS_REPLAY")" && pwd)/$(basename "$CHAOS_REPLAY")
fi

# The test binary's own deadline: the run (DURATION, or one sequence),
# the shrinker's budget and margin.
to_seconds() {
  local d=${1:-0}
  case $d in
    *h) echo $(( ${d%h} * 3600 )) ;;
    *m) echo $(( ${d%m} * 60 )) ;;
    *s) echo "${d%s}" ;;
    *) echo "$d" ;;
  esac
}
timeout=$(( $(to_seconds "${DURATION:-0}") + $(to_seconds "${SHRINK:-20m}") + 1800 ))

cd "$ROOT"
# Every test of the package runs (the judge's own unit tests: the
# generator, the model, the invariants' checkers), but the one run of
# the other kind: a new unit test needs no entry here.
if [ -n "${SLICE:-}" ]; then
  skip=TestChaos
  timeout=900
else
  skip=TestChaosSlice
  export CHAOS_RUN=1
fi
go test ${TESTVET:+-vet=$TESTVET} -count=1 -timeout "${timeout}s" -v -skip "^${skip}\$" ./test/chaos/ 2>&1 | tee "$OUT/last.log"
