package review68

import (
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// fakeMake stands for make in hack/stages.sh (its MAKE): it logs
// "start TARGET TIME" and "end TARGET TIME" to $FAKE_EVENTS, sleeps
// $FAKE_SLEEP_<target> seconds and exits $FAKE_RC_<target> (- in the
// target's name as _).
const fakeMake = `#!/usr/bin/env bash
t=
for a in "$@"; do case $a in -*|*=*) ;; *) t=$a; break ;; esac; done
v=${t//-/_}
echo "start $t $(date +%s.%N)" >> "$FAKE_EVENTS"
echo "fake make $t"
s=FAKE_SLEEP_$v r=FAKE_RC_$v
sleep "${!s:-0}"
echo "end $t $(date +%s.%N)" >> "$FAKE_EVENTS"
exit "${!r:-0}"
`

type stagesRun struct {
	result
	outDir string // OUT
	events []event
	tsv    string
}

type event struct {
	kind, target string
	at           float64
}

func (r stagesRun) find(kind, target string) (float64, bool) {
	for _, e := range r.events {
		if e.kind == kind && e.target == target {
			return e.at, true
		}
	}
	return 0, false
}

// runStages runs the real hack/stages.sh with the fake make, in a temp OUT.
func runStages(t *testing.T, knobs []string, stages ...string) stagesRun {
	t.Helper()
	root := repoRoot(t)
	dir := t.TempDir()
	mk := filepath.Join(dir, "fake-make")
	writeExec(t, mk, fakeMake)
	out := filepath.Join(dir, "out")
	events := filepath.Join(dir, "events")
	e := env(append([]string{"MAKE=" + mk, "OUT=" + out, "FAKE_EVENTS=" + events}, knobs...)...)
	res := runCmd(t, root, e, 60*time.Second, "bash", append([]string{filepath.Join(root, "hack/stages.sh")}, stages...)...)
	// Let a killed or finished background build write its last event.
	time.Sleep(300 * time.Millisecond)
	r := stagesRun{result: res, outDir: out, tsv: readFile(t, filepath.Join(out, "stages.tsv"))}
	for _, l := range strings.Split(readFile(t, events), "\n") {
		f := strings.Fields(l)
		if len(f) != 3 {
			continue
		}
		at, _ := strconv.ParseFloat(f[2], 64)
		r.events = append(r.events, event{f[0], f[1], at})
	}
	return r
}

// TestReview68LintWaitsForLaterDeps: hack/stages.sh's header says "When
// fuzz, upstream-aws or lint is to come too, the background build goes on
// ... with make later-deps (... golangci-lint for make lint) ...; the first
// of those stages waits for it". With TEST_STAGES's shape (e2e+lint+promrules
// before fuzz) lint is the first of them, but only fuzz and upstream-aws call
// bg2_wait: lint starts while later-deps still runs. Then lint's own make
// installs golangci-lint (under the lock, but at nice 0: only the `run` is
// niced) beside e2e whenever later-deps has not got to it yet, and later-deps
// (upstream-aws's cold compile) competes with e2e and lint.
func TestReview68LintWaitsForLaterDeps(t *testing.T) {
	r := runStages(t, []string{"FAKE_SLEEP_later_deps=3"}, "unit", "e2e+lint+promrules", "fuzz")
	if r.code != 0 {
		t.Fatalf("stages.sh exit %d:\n%s", r.code, r.out)
	}
	lint, ok1 := r.find("start", "lint")
	ld, ok2 := r.find("end", "later-deps")
	if !ok1 || !ok2 {
		t.Fatalf("events %v\n%s", r.events, r.out)
	}
	if lint < ld {
		t.Errorf("the lint stage started %.1f s before the background later-deps (which installs golangci-lint) ended; nothing waits for it before lint (stages.sh's header says the first of those stages waits)", ld-lint)
	}
}

// TestReview68LaterDepsOnlyWhenItsStagesCome: `|| lint` in stages.sh now
// starts make later-deps (fuzz-deps: every fuzz target's instrumented
// binary; upstream-aws-deps: upstream's whole dependency tree and its CCM)
// whenever lint is to come, also when neither fuzz nor upstream-aws is
// (make test TEST_STAGES='unit e2e+lint', or hack/stages.sh unit e2e+lint).
// Nothing waits for it then (bg2_wait is for fuzz and upstream-aws only):
// the run ends, passes, and bg_stop kills the build with "make test ends
// before the stages it builds for"; stages.tsv gets no later-deps row.
func TestReview68LaterDepsOnlyWhenItsStagesCome(t *testing.T) {
	r := runStages(t, []string{"FAKE_SLEEP_later_deps=3"}, "unit", "e2e+lint")
	if r.code != 0 {
		t.Fatalf("stages.sh exit %d:\n%s", r.code, r.out)
	}
	if _, ok := r.find("start", "later-deps"); ok {
		t.Errorf("make later-deps (the fuzz and upstream-aws builds) was started for a run with neither fuzz nor upstream-aws")
	}
	if strings.Contains(r.out, "stopping the background build") {
		t.Errorf("a run whose every stage passed ends by killing its background build:\n%s", r.out)
	}
}

// TestReview68SideStageFailureComesLast (held): lint failing beside a
// passing e2e fails make test, its FAILED line last, the later stages not
// run, each stage its own stages.tsv row.
func TestReview68SideStageFailureComesLast(t *testing.T) {
	r := runStages(t, []string{"FAKE_RC_lint=3", "FAKE_SLEEP_lint=0.5"}, "e2e+lint+promrules", "fuzz")
	if r.code != 3 {
		t.Errorf("exit %d, want lint's 3:\n%s", r.code, r.out)
	}
	if !regexp.MustCompile(`^stage: lint: FAILED \(exit 3\) after \d+ s`).MatchString(lastLine(r.out)) {
		t.Errorf("last line %q:\n%s", lastLine(r.out), r.out)
	}
	if _, ok := r.find("start", "fuzz"); ok {
		t.Errorf("fuzz ran after lint failed")
	}
	// e2e's seconds: 0 or 1, as date +%s's second turned (session 69 saw 1).
	if !regexp.MustCompile(`(?m)^e2e\t[01]\tpassed`).MatchString(r.tsv) {
		t.Errorf("stages.tsv lacks e2e's passed row:\n%s", r.tsv)
	}
	for _, want := range []string{"lint (beside e2e)\t", "promrules (beside e2e)\t"} {
		if !strings.Contains(r.tsv, want) {
			t.Errorf("stages.tsv lacks %q:\n%s", want, r.tsv)
		}
	}
	if !regexp.MustCompile(`(?m)^lint \(beside e2e\)\t\d+\tfailed$`).MatchString(r.tsv) {
		t.Errorf("lint's row is not failed:\n%s", r.tsv)
	}
}

// TestReview68ForegroundFailureStopsSides (held): e2e failing stops lint
// and promrules at once (rows "stopped (e2e failed)"), e2e's FAILED line
// last, exit status e2e's.
func TestReview68ForegroundFailureStopsSides(t *testing.T) {
	r := runStages(t, []string{"FAKE_RC_e2e=2", "FAKE_SLEEP_e2e=0.5", "FAKE_SLEEP_lint=20", "FAKE_SLEEP_promrules=20"}, "e2e+lint+promrules", "fuzz")
	if r.code != 2 {
		t.Errorf("exit %d, want 2:\n%s", r.code, r.out)
	}
	if r.dur > 10*time.Second {
		t.Errorf("took %v: the side stages were not stopped", r.dur)
	}
	if !strings.HasPrefix(lastLine(r.out), "stage: e2e: FAILED (exit 2)") {
		t.Errorf("last line %q", lastLine(r.out))
	}
	for _, s := range []string{"lint", "promrules"} {
		if !regexp.MustCompile(`(?m)^` + s + ` \(beside e2e\)\t\d+\tstopped \(e2e failed\)$`).MatchString(r.tsv) {
			t.Errorf("no stopped row for %s:\n%s", s, r.tsv)
		}
		if _, ok := r.find("end", s); ok {
			t.Errorf("%s ran to its end", s)
		}
	}
}
