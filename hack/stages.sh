#!/usr/bin/env bash
# make test's driver: runs `make STAGE` for each stage given, in order,
# stopping at the first that fails, and times them.
#
#   hack/stages.sh vet openstack-up unit chaos-slice e2e promrules fuzz upstream-aws
#   hack/stages.sh fuzz+upstream-aws       (side by side: see below)
#
# (make test passes its TEST_STAGES). Each stage prints
#   stage: NAME: start (HH:MM:SS UTC, N s into make test)
# as it starts and
#   stage: NAME: passed in N s      or      stage: NAME: FAILED (exit N) after N s
# as it ends, and appends "NAME<TAB>SECONDS<TAB>passed|failed" to
# _output/stages.tsv (rewritten by each run), which .ci/run turns into a
# table with hack/stages-table.sh.
#
# Two things make test does beyond running the stages in turn:
#
#  - After the vet stage passed (go vet ./..., a superset of go test's own
#    vet checks, on every package and its tests), the later stages get
#    TESTVET=off: their go test runs -vet=off instead of vetting each
#    package again. make unit (e2e, chaos, fuzz...) alone still vets.
#
#  - When the unit stage starts and e2e is still to come, e2e's
#    prerequisites (make e2e-deps: the binary, control plane, helm, the
#    image, the kubelet, MetalLB, GoBGP) are built in the background at
#    nice 10, their output in _output/e2e-deps.log, while the unit tests
#    run (they mostly wait on the OpenStack stack and on timers). The e2e
#    stage first waits for that build and fails, showing the log's tail,
#    if it failed; then make e2e finds everything built (each of those
#    builds is rerun and finds itself up to date in seconds). The
#    background build is recorded in stages.tsv as e2e-deps (background)
#    and the e2e stage's wait for it as e2e (wait). Every one of those
#    builds takes a lock of its own under _output/.locks (the Makefile's
#    LOCK), so two makes never build the same thing in one _output at once:
#    the later waits. The background build is stopped when make test
#    stops before e2e (a failed stage, Ctrl-C).
#
#  - When fuzz or upstream-aws is to come too, the background build goes
#    on, after e2e-deps, with make later-deps (the fuzz targets'
#    instrumented packages, upstream-aws's compile and upstream's CCM,
#    golangci-lint for make lint),
#    log _output/later-deps.log; the first of those stages waits for it
#    (recorded as later-deps (background) and STAGE (wait)), and so does
#    lint when it runs as a side stage (below) before them: it waits in
#    its own process, before its make, so the stage it runs beside does
#    not wait (its log says how long; later-deps's row is recorded when
#    the group has ended). A failure there fails nothing: the stage builds
#    again and shows why.
#
#  - Each stage's line and its stages.tsv status give the share of the
#    machine's CPU that was busy during it (/proc/stat): where it is low,
#    more can be built beside it.
#
#  - A stage given as A+B (+C...) runs its stages side by side: A in the
#    foreground, its output as it comes; B (and C) started with it, each
#    in a process group of its own, its output in _output/stage-B.log,
#    printed when A has ended and B has too. Each keeps its own start,
#    passed/FAILED line, seconds (from the group's start) and stages.tsv
#    row (B's as "B (beside A)", out of the table's total). When A fails, B is stopped (recorded as stopped): make test
#    stops at the first stage that fails, as before; when B fails, A runs
#    to its end. The FAILED line(s) come last.
#
# Under make -n test the stages' commands are printed (make -n STAGE),
# nothing is run, timed or built in the background.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=${OUT:-$ROOT/_output}
# Not handed on: the makes below would export it to their recipes, and
# hack/gobgp/build.sh and hack/metallb/build.sh read OUT as their own
# folder (_output/gobgp, _output/metallb): they would build into _output.
export -n OUT
MAKE=${MAKE:-make}
[ $# -gt 0 ] || { echo "usage: hack/stages.sh STAGE..." >&2; exit 2; }

# make -n puts "n" in MAKEFLAGS' first word (the single-letter flags).
dry=
first=${MAKEFLAGS:-}
first=${first%% *}
case $first in
  -*) ;;
  *n*) dry=1 ;;
esac

mkdir -p "$OUT"
tsv=$OUT/stages.tsv
bglog=$OUT/e2e-deps.log
bgstatus=$OUT/e2e-deps.status
bglock=$OUT/.locks/e2e-deps-background
bg2log=$OUT/later-deps.log
bg2status=$OUT/later-deps.status
bg2lock=$OUT/.locks/later-deps-background
bgpid=
e2e_waited=
later_waited=
later_started=
side_waited=
start=$(date +%s)
[ -n "$dry" ] || : > "$tsv"
# Each stage's log is this run's: a stage that never ran (e2e, when its
# background build failed) leaves none for .ci/run's summary to show.
[ -n "$dry" ] || rm -f "$OUT"/stage-*.log "$OUT"/stage-*.status

record() { [ -n "$dry" ] || printf '%s\t%s\t%s\n' "$1" "$2" "$3" >> "$tsv"; }

# bg_start: make e2e-deps in the background, at nice 10, in a process
# group of its own (setsid) so that stopping it stops its builds. The
# bash around make holds the lock bglock (fd 9, inherited; make and its
# builds do not get it, so nothing they leave running holds it) until it
# has written the status; bg_wait takes the lock to wait for it. When the
# fuzz or upstream-aws stage is to come, the same bash then builds what
# they build (make later-deps: the fuzz targets' instrumented test
# binaries, upstream's CCM and the upstream-aws test), holding bg2lock (fd
# 8) until it has written bg2status; bg2_wait waits for that before the
# first of those stages. Each go build started there would otherwise start
# cold in its stage, after the tests, on an idle machine.
bg_start() {
  local later=$1
  mkdir -p "$OUT/.locks"
  rm -f "$bgstatus" "$bg2status"
  exec 9> "$bglock"
  flock 9
  exec 8> "$bg2lock"
  flock 8
  echo "stage: e2e-deps: building e2e's prerequisites in the background (nice 10) while the unit tests run; log: $bglog"
  [ -z "$later" ] || echo "stage: later-deps: then the fuzz, upstream-aws and golangci-lint builds, in the background too; log: $bg2log"
  # shellcheck disable=SC2016 # expanded by the inner bash
  setsid nice -n 10 bash -c '
    log=$1 status=$2 log2=$3 status2=$4 later=$5 make=$6 gogc=$7
    # setsid made a session of its own, and with the kernel'"'"'s autogroup
    # scheduling (sched_autogroup_enabled, on in CI'"'"'s kernel) a session
    # gets as much CPU as the foreground'"'"'s whatever its nice: the nice
    # of its autogroup is what yields (the write fails harmlessly where
    # there is none).
    echo 10 2>/dev/null > /proc/self/autogroup || true
    # Builds only: the compiler at the Makefile'"'"'s BUILD_GOGC.
    [ -z "$gogc" ] || export GOGC=$gogc
    t0=$(date +%s) rc=0
    "$make" --no-print-directory e2e-deps > "$log" 2>&1 < /dev/null 9>&- 8>&- || rc=$?
    echo "$rc $(( $(date +%s) - t0 ))" > "$status"
    exec 9>&-
    if [ -n "$later" ]; then
      t0=$(date +%s) rc=0
      "$make" --no-print-directory later-deps > "$log2" 2>&1 < /dev/null 8>&- || rc=$?
      echo "$rc $(( $(date +%s) - t0 ))" > "$status2"
    fi' bg "$bglog" "$bgstatus" "$bg2log" "$bg2status" "$later" "$MAKE" "${BUILD_GOGC:-}" &
  bgpid=$!
  exec 9>&- 8>&-
}

# side_stop: stops the side stages still running (their process groups).
sidepids=()
side_stop() {
  local p
  for p in "${sidepids[@]}"; do
    if kill -0 "$p" 2>/dev/null; then
      kill -TERM -- "-$p" 2>/dev/null || true
      wait "$p" 2>/dev/null || true
    fi
  done
}

# bg_stop: stops the background build if it still runs (make test ending
# before the e2e stage), and any side stage still running.
bg_stop() {
  side_stop
  if [ -n "$bgpid" ] && kill -0 "$bgpid" 2>/dev/null; then
    echo "stage: e2e-deps: stopping the background build (make test ends before the stages it builds for)"
    kill -TERM -- "-$bgpid" 2>/dev/null || true
    wait "$bgpid" 2>/dev/null || true
  fi
  bgpid=
}
trap bg_stop EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# bg_wait: waits for the background build, records it, and fails, with the
# log's tail, if it failed.
bg_wait() {
  local t0 rc secs
  t0=$(date +%s)
  exec 9> "$bglock"
  flock 9
  exec 9>&-
  e2e_waited=1
  if ! read -r rc secs < "$bgstatus"; then
    echo "stage: e2e: the background build of e2e's prerequisites left no status ($bgstatus); its log's tail:" >&2
    tail -n 40 "$bglog" >&2 || true
    return 1
  fi
  record "e2e-deps (background)" "$secs" "$([ "$rc" = 0 ] && echo passed || echo failed)"
  record "e2e (wait)" "$(( $(date +%s) - t0 ))" "$([ "$rc" = 0 ] && echo passed || echo failed)"
  if [ "$rc" != 0 ]; then
    echo "stage: e2e: the background build of e2e's prerequisites (make e2e-deps) FAILED (exit $rc) after $secs s; the last 40 lines of $bglog:" >&2
    tail -n 40 "$bglog" >&2
    # In the form .ci/run's summary of what failed picks up.
    echo "make: *** [e2e-deps] Error $rc (background build; log: $bglog)" >&2
    return 1
  fi
  echo "stage: e2e: the background build of e2e's prerequisites had passed in $secs s; waited $(( $(date +%s) - t0 )) s for it"
}

# bg2_wait: waits for the background build of the fuzz and upstream-aws
# stages' binaries and records it. It never fails the stage: a build that
# failed there fails again, with its own output, in the stage that needs
# it. It reaps the background bash.
bg2_wait() {
  local t0 rc secs
  t0=$(date +%s)
  exec 8> "$bg2lock"
  flock 8
  exec 8>&-
  wait "$bgpid" 2>/dev/null || true
  bgpid=
  later_waited=1
  if read -r rc secs < "$bg2status"; then
    record "later-deps (background)" "$secs" "$([ "$rc" = 0 ] && echo passed || echo failed)"
    [ "$rc" = 0 ] || echo "stage: later-deps: the background build FAILED (exit $rc) after $secs s (log: $bg2log); the stage builds again and shows why"
  fi
  record "$1 (wait)" "$(( $(date +%s) - t0 ))" passed
  echo "stage: $1: waited $(( $(date +%s) - t0 )) s for the background build of the fuzz and upstream-aws binaries"
}

# cpu_ticks prints the machine's busy and total CPU ticks since boot
# (/proc/stat's first line; idle and iowait are not busy): a stage's busy
# share tells whether background builds beside it would find idle cores.
cpu_ticks() {
  awk '/^cpu / { t = 0; for (i = 2; i <= NF; i++) t += $i; print t - $5 - $6, t; exit }' /proc/stat 2>/dev/null || echo "0 0"
}

# A+B counts as A and B where the stages to come are looked at.
stages=" ${*//+/ } "
vetted=
nstages=0
for group in "$@"; do
  IFS=+ read -ra members <<< "$group"
  nstages=$(( nstages + ${#members[@]} ))
  args=()
  [ -z "$vetted" ] || args+=(TESTVET=off)
  if [ -n "$dry" ]; then
    [ ${#members[@]} -eq 1 ] || echo "stage: $group: side by side:"
    for stage in "${members[@]}"; do
      echo "stage: $stage${args[*]:+ (${args[*]})}"
      if [ "$stage" = unit ] && [[ $stages == *" e2e "* ]]; then
        echo "stage: e2e-deps: in the background (nice 10) while unit runs:"
        "$MAKE" --no-print-directory e2e-deps
        if [[ $stages == *" fuzz "* || $stages == *" upstream-aws "* ]]; then
          echo "stage: later-deps: then, in the background too:"
          "$MAKE" --no-print-directory later-deps
        fi
      fi
      "$MAKE" --no-print-directory "$stage" "${args[@]}"
    done
    [[ " ${members[*]} " != *" vet "* ]] || vetted=1
    continue
  fi
  t0=$(date +%s)
  [ ${#members[@]} -eq 1 ] || echo "stage: $group: ${members[0]} with ${members[*]:1} beside it ($(date -u +%H:%M:%S) UTC, $(( t0 - start )) s into make test); the others' output when they end"
  for stage in "${members[@]}"; do
    beside=
    [ "$stage" = "${members[0]}" ] || beside=" beside ${members[0]}"
    echo "stage: $stage: start$beside ($(date -u +%H:%M:%S) UTC, $(( t0 - start )) s into make test)"
    if [ "$stage" = unit ] && [[ $stages == *" e2e "* ]] && [ -z "$bgpid" ]; then
      later=
      [[ $stages != *" fuzz "* && $stages != *" upstream-aws "* ]] || later=1
      later_started=$later
      bg_start "$later"
    fi
  done
  read -r busy0 total0 < <(cpu_ticks)
  rc=0 failed=
  for stage in "${members[@]}"; do
    if [ "$stage" = e2e ] && [ -n "$bgpid" ] && [ -z "$e2e_waited" ]; then
      bg_wait || { rc=$?; failed=e2e; }
    fi
    if { [ "$stage" = fuzz ] || [ "$stage" = upstream-aws ]; } && [ -n "$bgpid" ] && [ -n "$e2e_waited" ] && [ -z "$later_waited" ]; then
      bg2_wait "$stage"
    fi
  done
  # The side stages: each in a process group of its own (setsid), its
  # output in its log, its exit status, end time and CPU ticks in its
  # status file when it ends.
  sidepids=()
  if [ "$rc" = 0 ]; then
    for stage in "${members[@]:1}"; do
      : > "$OUT/stage-$stage.log"
      rm -f "$OUT/stage-$stage.status"
      # A side stage that needs the background later-deps (golangci-lint
      # for lint) waits for it in its own process.
      waitlock=
      if [ -n "$bgpid" ] && [ -n "$later_started" ] && [ -z "$later_waited" ] && [[ " fuzz upstream-aws lint " == *" $stage "* ]]; then
        waitlock=$bg2lock
        side_waited=1
      fi
      # shellcheck disable=SC2016 # expanded by the inner bash
      setsid bash -c '
        make=$1 stage=$2 log=$3 status=$4 waitlock=$5; shift 5
        rc=0
        # lint yields to the stage it runs beside (e2e): its session'"'"'s
        # autogroup at nice 10, as the background builds'"'"' (bg_start).
        # Not the others: openstack-up'"'"'s daemons live on in its session.
        [ "$stage" != lint ] || echo 10 2>/dev/null > /proc/self/autogroup || true
        if [ -n "$waitlock" ]; then
          w0=$(date +%s)
          flock "$waitlock" true
          echo "stage: $stage: waited $(( $(date +%s) - w0 )) s for the background build of the fuzz, upstream-aws and golangci-lint binaries" >> "$log"
        fi
        "$make" --no-print-directory "$stage" "$@" >> "$log" 2>&1 < /dev/null || rc=$?
        echo "$rc $(date +%s) $(awk '"'"'/^cpu / { t = 0; for (i = 2; i <= NF; i++) t += $i; print t - $5 - $6, t; exit }'"'"' /proc/stat)" > "$status"
      ' side "$MAKE" "$stage" "$OUT/stage-$stage.log" "$OUT/stage-$stage.status" "$waitlock" "${args[@]}" &
      sidepids+=($!)
    done
    # The foreground stage's output as it comes, and in its log too: .ci/run's
    # summary of what failed ends with each failed stage's last lines (a vet
    # finding, a failed build), whichever stage it was.
    fg=${members[0]}
    : > "$OUT/stage-$fg.log"
    frc=0
    # tee ignores Ctrl-C and SIGTERM (a group's signal): it stays to pass
    # on what the stage prints as it stops (go's FAIL line, make's ***), and
    # the stage is not killed by SIGPIPE before its exit handlers run.
    "$MAKE" --no-print-directory "$fg" "${args[@]}" 2>&1 | (trap '' INT TERM; exec tee -a "$OUT/stage-$fg.log") || frc=${PIPESTATUS[0]}
    [ "$frc" = 0 ] || { rc=$frc; failed=$fg; }
  fi
  secs=$(( $(date +%s) - t0 ))
  read -r busy1 total1 < <(cpu_ticks)
  lines=()
  line() { # stage rc secs busy1 total1
    local cpu= name=$1
    # A side stage's row names the stage it ran beside (hack/stages-table.sh
    # leaves rows with " (" out of the total: their time was A's too).
    [ "$1" = "${members[0]}" ] || name="$1 (beside ${members[0]})"
    [ $(( $5 - total0 )) -le 0 ] || cpu=", CPU $(( 100 * ($4 - busy0) / ($5 - total0) ))% busy"
    if [ "$2" = stopped ]; then
      record "$name" "$3" "stopped (${members[0]} failed)"
      lines+=("stage: $1: stopped after $3 s (${members[0]} beside it failed)")
    elif [ "$2" != 0 ]; then
      record "$name" "$3" failed
      lines+=("stage: $1: FAILED (exit $2) after $3 s$cpu")
    else
      record "$name" "$3" "passed$cpu"
      lines+=("stage: $1: passed in $3 s$cpu")
    fi
  }
  if [ -n "$failed" ]; then line "$failed" "$rc" "$secs" "$busy1" "$total1"; else line "${members[0]}" 0 "$secs" "$busy1" "$total1"; fi
  # The foreground stage's line first, as soon as it ended.
  echo "${lines[0]}"
  [ "$rc" = 0 ] || side_stop
  k=0
  for stage in "${members[@]:1}"; do
    p=${sidepids[$k]:-}
    k=$(( k + 1 ))
    [ -n "$p" ] || continue
    wait "$p" 2>/dev/null || true
    echo "stage: $stage: its output (it ran beside ${members[0]}; log: $OUT/stage-$stage.log):"
    cat "$OUT/stage-$stage.log"
    if [ -s "$OUT/stage-$stage.status" ] && read -r src send sbusy stotal < "$OUT/stage-$stage.status"; then
      line "$stage" "$src" "$(( send - t0 ))" "$sbusy" "$stotal"
      if [ "$src" != 0 ] && [ "$rc" = 0 ]; then rc=$src; failed=$stage; fi
    elif [ "$rc" = 0 ]; then
      # The foreground stage passed and did not stop this one: a side
      # stage that left no status died without a verdict (killed, its
      # wrapper failed). That is no pass: before, it read "stopped" and
      # the run passed without it.
      echo "stage: $stage: ended without a status (its wrapper killed?): counted as failed"
      line "$stage" 1 "$(( $(date +%s) - t0 ))" 0 0
      rc=1
      failed=$stage
    else
      line "$stage" stopped "$(( $(date +%s) - t0 ))" 0 0
    fi
    echo "${lines[-1]}"
  done
  sidepids=()
  # A side stage waited for the background later-deps: record it (as
  # bg2_wait does) now that the group has ended.
  if [ -n "$side_waited" ] && [ -z "$later_waited" ] && [ -s "$bg2status" ] && read -r lrc lsecs < "$bg2status"; then
    wait "$bgpid" 2>/dev/null || true
    bgpid=
    later_waited=1
    record "later-deps (background)" "$lsecs" "$([ "$lrc" = 0 ] && echo passed || echo failed)"
    [ "$lrc" = 0 ] || echo "stage: later-deps: the background build FAILED (exit $lrc) after $lsecs s (log: $bg2log); the stages build again and show why"
  fi
  if [ "$rc" != 0 ]; then
    # What failed, last (each FAILED line again when there were several stages).
    if [ ${#members[@]} -gt 1 ]; then
      for l in "${lines[@]}"; do
        [[ $l != *": FAILED "* ]] || echo "$l"
      done
    fi
    exit "$rc"
  fi
  [[ " ${members[*]} " != *" vet "* ]] || vetted=1
done
[ -n "$dry" ] || echo "stage: all $nstages stages passed in $(( $(date +%s) - start )) s"
