package review68

import (
	"strings"
	"testing"
	"time"
)

// TestReview68LintStageAllNiced: the docs (testing.md, "The linters beside
// e2e ..., at nice 10"; the Makefile: "At nice 10: make test runs it beside
// e2e") say the lint stage yields to e2e, whose waits have bounds. Only
// golangci-lint's run is niced: the side stage itself runs at make test's
// priority (hack/stages.sh starts side stages with setsid, no nice), so when
// golangci-lint is not installed yet (later-deps not got to it, or its
// build there failed: nothing waits for later-deps before lint), its cold
// build (go install, "a cold golangci-lint build and run take about 8"
// minutes) runs beside e2e at nice 0. make -n lint, OUT in a temp folder.
func TestReview68LintStageAllNiced(t *testing.T) {
	root := repoRoot(t)
	out := t.TempDir()
	r := runCmd(t, root, env(), 30*time.Second, "make", "-n", "--no-print-directory", "lint", "OUT="+out)
	if r.code != 0 {
		t.Fatalf("make -n lint: exit %d\n%s", r.code, r.out)
	}
	for _, l := range strings.Split(r.out, "\n") {
		if strings.Contains(l, "golangci-lint") && !strings.Contains(l, "nice") {
			t.Errorf("make lint (make test's lint stage, beside e2e) runs without nice:\n  %s", l)
		}
	}
}
