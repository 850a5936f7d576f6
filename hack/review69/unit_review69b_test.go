package review69

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// unitGoWorkspace stands for go in the real Makefile's unit recipe and in the real
// hack/race-workspace.sh (RACE_GOWORK). go test logs "norace ARGS" or
// "race GOWORK=... ARGS" to $FAKE_DIR/log, marks $FAKE_DIR/started-KIND,
// waits $FAKE_DIR/sleep-KIND seconds and exits $FAKE_DIR/rc-KIND (0). As
// the real go command (cmd/go/internal/base/signal.go: it catches SIGINT,
// lets its test binary die of it, prints FAIL and exits 1), it ends with
// exit status 1 on SIGINT, not killed by it. go mod download fails when
// $FAKE_DIR/ws-fail exists; go list -m names a copy of
// k8s.io/cloud-provider that race-workspace.sh can patch.
const unitGoWorkspace = `#!/usr/bin/env bash
case $1 in
mod) [ ! -e "$FAKE_DIR/ws-fail" ] || { echo "go: k8s.io/cloud-provider: no network" >&2; exit 1; }; exit 0 ;;
list) echo "$FAKE_DIR/cp v0.37.0"; exit 0 ;;
test) ;;
*) exit 0 ;;
esac
kind=norace
for a in "$@"; do [ "$a" != -race ] || kind=race; done
echo "$kind GOWORK=${GOWORK:-} CGO_ENABLED=$CGO_ENABLED $*" >> "$FAKE_DIR/log"
touch "$FAKE_DIR/started-$kind"
pid=
trap 'kill $pid 2>/dev/null; echo "FAIL	interrupted ($kind)"; exit 1' INT
if [ -f "$FAKE_DIR/sleep-$kind" ]; then sleep "$(cat "$FAKE_DIR/sleep-$kind")" > /dev/null 2>&1 & pid=$!; wait $pid; fi
rc=0
[ ! -f "$FAKE_DIR/rc-$kind" ] || rc=$(cat "$FAKE_DIR/rc-$kind")
[ "$rc" = 0 ] || printf -- '--- FAIL: TestX (0.01s)\nFAIL\t%s\t0.1s\n' "$kind"
exit "$rc"
`

type unitRun struct {
	fake, out string
}

func newUnitRun(t *testing.T, files map[string]string) unitRun {
	t.Helper()
	dir := t.TempDir()
	fake := filepath.Join(dir, "fake")
	writeExec(t, filepath.Join(fake, "go"), unitGoWorkspace)
	writeExec(t, filepath.Join(fake, "cp/controllers/service/controller.go"), "package service\nfunc f() {\n\tcachedService.state = service\n}\n")
	for k, v := range files {
		writeExec(t, filepath.Join(fake, k), v)
	}
	return unitRun{fake: fake, out: filepath.Join(dir, "out")}
}

func (u unitRun) args(extra ...string) []string {
	pkgs := mod + "/pkg/backends/openstack " + mod + "/pkg/router " + mod + "/pkg/admission " + mod + "/pkg/config"
	return append([]string{"--no-print-directory", "unit", "GO=" + filepath.Join(u.fake, "go"), "OUT=" + u.out, "UNIT_PKGS=" + pkgs}, extra...)
}

func (u unitRun) env() []string { return env("FAKE_DIR=" + u.fake) }

// TestReview69bUnitExitStatus: the one-line unit recipe (commit 6f9382c)
// runs both go tests and fails if either did, and RACE_GOWORK's new
// `|| exit` stops the -race run when hack/race-workspace.sh fails (inside
// `( ... ) || rc=$?` bash's -e is off, so without it the -race run went on
// with GOWORK empty: the module as released, upstream's race unfixed).
// The real Makefile, the real race-workspace.sh, a stub go.
//
// Passed (session 69b): each case's exit status and go test runs are right.
func TestReview69bUnitExitStatus(t *testing.T) {
	cases := []struct {
		name     string
		files    map[string]string
		wantFail bool
		// wantRuns: the go test runs, in order ("norace", "race").
		wantRuns []string
	}{
		{"both pass", nil, false, []string{"norace", "race"}},
		{"only the race run fails", map[string]string{"rc-race": "1"}, true, []string{"norace", "race"}},
		{"only the non-race run fails", map[string]string{"rc-norace": "1"}, true, []string{"norace", "race"}},
		{"both fail", map[string]string{"rc-norace": "1", "rc-race": "2"}, true, []string{"norace", "race"}},
		{"race-workspace.sh fails", map[string]string{"ws-fail": ""}, true, []string{"norace"}},
		{"race-workspace.sh fails, non-race fails", map[string]string{"ws-fail": "", "rc-norace": "1"}, true, []string{"norace"}},
	}
	root := repoRoot(t)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			u := newUnitRun(t, c.files)
			r := runCmd(t, root, u.env(), 60*time.Second, "make", u.args()...)
			if (r.code != 0) != c.wantFail {
				t.Errorf("make unit exit %d (want failure: %v):\n%s", r.code, c.wantFail, r.out)
			}
			var runs []string
			for _, l := range strings.Split(strings.TrimSpace(readFile(t, filepath.Join(u.fake, "log"))), "\n") {
				if l == "" {
					continue
				}
				kind, _, _ := strings.Cut(l, " ")
				runs = append(runs, kind)
				if kind == "race" && (!strings.Contains(l, "GOWORK="+u.out+"/race-workspace/go.work ") || !strings.Contains(l, "CGO_ENABLED=1 ")) {
					t.Errorf("the -race run without the race workspace or cgo: %s", l)
				}
				if kind == "norace" && strings.Contains(l, "/pkg/router") {
					t.Errorf("the non-race run tests pkg/router: %s", l)
				}
			}
			if strings.Join(runs, " ") != strings.Join(c.wantRuns, " ") {
				t.Errorf("go test runs %v, want %v; make's output:\n%s", runs, c.wantRuns, r.out)
			}
		})
	}
}

// TestReview69bUnitCtrlCStopsMakeUnit: Ctrl-C (SIGINT to the terminal's
// process group: make, the recipe's bash, go) while the first go test
// (pkg/admission, no -race) runs must stop make unit. The go command
// catches SIGINT and exits 1 once its test binary died
// (cmd/go/internal/base/signal.go); bash, the recipe's shell, then
// assumes the child handled the interrupt and goes on, and GNU make, on
// SIGINT, waits for its children before it dies. Before 6f9382c the two
// go tests were two recipe lines: make started no second line after the
// interrupt. Now both are one bash line, `... || rc=$?; ( ... -race ... )`:
// the -race run of every other unit package (up to 40 minutes in CI)
// starts after the Ctrl-C, and make unit (make test) waits for it.
//
// Failed before session 69's fix (session 69b, 3 of 3 runs; its control passes): the -race go
// test starts after the interrupt;
// make unit ends only when it has. Makefile, the unit recipe (lines
// 143-146): `|| rc=$$?` swallows the interrupted go test's status and
// bash goes on. Smallest fix: begin the recipe with `trap 'exit 130' INT;
// trap 'exit 143' TERM;` (bash runs the trap once the foreground go test
// has ended, before the next command).
func TestReview69bUnitCtrlCStopsMakeUnit(t *testing.T) {
	root := repoRoot(t)
	u := newUnitRun(t, map[string]string{"sleep-norace": "20", "sleep-race": "4"})
	p := startCmd(t, root, u.env(), "", "make", u.args()...)
	if !waitFile(t, filepath.Join(u.fake, "started-norace"), 20*time.Second) {
		t.Fatalf("the non-race go test never started:\n%s", p.out.String())
	}
	time.Sleep(300 * time.Millisecond)
	p.signalGroup(t, 2) // SIGINT
	r := p.wait(t, 30*time.Second)
	if r.code == 0 && !r.signaled {
		t.Errorf("make unit passed after Ctrl-C:\n%s", r.out)
	}
	if exists(filepath.Join(u.fake, "started-race")) {
		t.Errorf("after Ctrl-C during the non-race go test, make unit went on to the -race go test and waited %v for it to end; go test runs:\n%s\nmake's output:\n%s",
			r.dur.Round(time.Second), readFile(t, filepath.Join(u.fake, "log")), r.out)
	}
}
