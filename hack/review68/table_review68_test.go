package review68

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"
)

// TestReview68TableTotalTwoSideStages: hack/stages-table.sh counts a side
// stage "only for what it ran past A" — but per side stage. The e2e group
// is the first with two side stages (e2e+lint+promrules): both excesses are
// added, so the group counts for more than its wall time (the group's time
// is the longest of its stages). Here e2e 100 s, lint 300 s and promrules
// 250 s beside it: the group took 300 s; the table adds 100+200+150.
func TestReview68TableTotalTwoSideStages(t *testing.T) {
	root := repoRoot(t)
	tsv := filepath.Join(t.TempDir(), "stages.tsv")
	rows := "e2e\t100\tpassed, CPU 50% busy\n" +
		"lint (beside e2e)\t300\tpassed, CPU 60% busy\n" +
		"promrules (beside e2e)\t250\tpassed, CPU 60% busy\n" +
		"control-plane (early, background)\t120\tpassed\n"
	if err := os.WriteFile(tsv, []byte(rows), 0o644); err != nil {
		t.Fatal(err)
	}
	r := runCmd(t, root, env(), 10*time.Second, "bash", "hack/stages-table.sh", tsv, "/nonexistent")
	m := regexp.MustCompile(`total of the stages +(\d+) s`).FindStringSubmatch(r.out)
	if m == nil {
		t.Fatalf("no total:\n%s", r.out)
	}
	if m[1] != "300" {
		t.Errorf("total %s s for a group whose longest stage took 300 s (the early control-plane row left out):\n%s", m[1], r.out)
	}
}

// TestReview68TableSlowestE2EPackages: hack/stages-table.sh assigns each
// go test "ok PKG SECS" line to the stage whose "stage: NAME: start" line
// came last before it, and prints the slowest unit and e2e packages. A
// group A+B+C prints all its start lines first (stages.sh: "for stage in
// members: echo stage: $stage: start"), so with e2e+lint+promrules every
// e2e package's line follows "stage: promrules: start": .ci/run's table
// loses its "slowest e2e packages" part (e2e's packages count as
// promrules'). Run here through the real hack/stages.sh with a fake make
// whose e2e prints go test's lines.
func TestReview68TableSlowestE2EPackages(t *testing.T) {
	root := repoRoot(t)
	dir := t.TempDir()
	mk := filepath.Join(dir, "fake-make")
	writeExec(t, mk, `#!/usr/bin/env bash
t=
for a in "$@"; do case $a in -*|*=*) ;; *) t=$a; break ;; esac; done
case $t in
e2e) echo "ok  	github.com/multicloud-ccm/multicloud-ccm/test/e2e/multi	210.5s"
     echo "ok  	github.com/multicloud-ccm/multicloud-ccm/test/e2e/chart	119.0s" ;;
promrules) echo "ok  	github.com/multicloud-ccm/multicloud-ccm/test/promrules	1.2s" ;;
esac
exit 0
`)
	out := filepath.Join(dir, "out")
	r := runCmd(t, root, env("MAKE="+mk, "OUT="+out), 30*time.Second, "bash", "hack/stages.sh", "e2e+lint+promrules")
	if r.code != 0 {
		t.Fatalf("stages.sh: exit %d\n%s", r.code, r.out)
	}
	log := filepath.Join(dir, "ci-test.log")
	if err := os.WriteFile(log, []byte(r.out), 0o644); err != nil {
		t.Fatal(err)
	}
	tab := runCmd(t, root, env(), 10*time.Second, "bash", "hack/stages-table.sh", filepath.Join(out, "stages.tsv"), log)
	if !regexp.MustCompile(`(?s)slowest e2e packages.*test/e2e/multi`).MatchString(tab.out) {
		t.Errorf("no slowest e2e packages in the table:\n%s\n(make test's output:\n%s)", tab.out, r.out)
	}
}
