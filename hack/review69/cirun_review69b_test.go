package review69

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// ciMake stands for make in a copy of .ci/run and, as MAKE, in the real
// hack/stages.sh its make test runs: make control-plane passes at once;
// make test runs hack/stages.sh with $FAKE_STAGES; any other target
// prints $FAKE_DIR/out-TARGET (and $FAKE_DIR/err-TARGET on stderr),
// sleeps $FAKE_DIR/sleep-TARGET and, when $FAKE_DIR/rc-TARGET says so,
// fails as make does ("make[1]: ***" on stderr, exit 2).
const ciMake = `#!/usr/bin/env bash
t=
for a in "$@"; do case $a in -*|*=*) ;; *) t=$a; break ;; esac; done
case $t in
control-plane) exit 0 ;;
test) MAKE="$0" OUT="$PWD/_output" BUILD_GOGC=400 exec bash hack/stages.sh $FAKE_STAGES ;;
esac
[ ! -f "$FAKE_DIR/out-$t" ] || cat "$FAKE_DIR/out-$t"
[ ! -f "$FAKE_DIR/err-$t" ] || cat "$FAKE_DIR/err-$t" >&2
[ ! -f "$FAKE_DIR/sleep-$t" ] || sleep "$(cat "$FAKE_DIR/sleep-$t")"
rc=0
[ ! -f "$FAKE_DIR/rc-$t" ] || rc=$(cat "$FAKE_DIR/rc-$t")
if [ "$rc" != 0 ]; then
  echo "make[1]: *** [Makefile:100: $t] Error $rc" >&2
  exit 2
fi
`

// ciPython3 stands for python3 (hack/cpuacct.py): its report prints 40
// lines, as the real one's tables do.
const ciPython3 = `#!/usr/bin/env bash
case $2 in
report) for i in $(seq 1 40); do echo "  $((1000 - i)) s  kind $i"; done ;;
esac
exit 0
`

type ciCase struct {
	stages string
	// files in the fake directory (out-T, err-T, rc-T, sleep-T) and, with
	// the prefix "_output/", in the copy's _output before the run.
	files map[string]string
	// environ: more of .ci/run's environment.
	environ []string
}

// runCI runs a copy of the real .ci/run with the real hack/stages.sh and
// hack/stages-table.sh; returns its output and exit status.
func runCI(t *testing.T, c ciCase) result {
	t.Helper()
	src := repoRoot(t)
	root := t.TempDir()
	fake := filepath.Join(root, "fakebin")
	copyFile(t, filepath.Join(root, ".ci/run"), filepath.Join(src, ".ci/run"))
	for _, s := range []string{"hack/stages.sh", "hack/stages-table.sh"} {
		copyFile(t, filepath.Join(root, s), filepath.Join(src, s))
	}
	writeExec(t, filepath.Join(root, "Makefile"), "GOLANGCI_LINT_VERSION := v2.15.0\n")
	for _, s := range []string{"hack/openstack/install.sh", "hack/openstack/down.sh", "hack/image/install.sh"} {
		writeExec(t, filepath.Join(root, s), "exit 0\n")
	}
	for _, d := range []string{"test/upstream-aws", "test/promrules"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeExec(t, filepath.Join(fake, "make"), ciMake)
	writeExec(t, filepath.Join(fake, "go"), "#!/usr/bin/env bash\n[ \"$1\" != version ] || echo 'go version go1.26.8 linux/amd64'\nexit 0\n")
	writeExec(t, filepath.Join(fake, "python3"), ciPython3)
	for k, v := range c.files {
		if strings.HasPrefix(k, "_output/") {
			writeExec(t, filepath.Join(root, k), v)
		} else {
			writeExec(t, filepath.Join(fake, k), v)
		}
	}
	e := env(append([]string{"PATH=" + fake + ":" + os.Getenv("PATH"), "FAKE_DIR=" + fake, "FAKE_STAGES=" + c.stages}, c.environ...)...)
	return runCmd(t, root, e, 60*time.Second, "bash", ".ci/run")
}

func summary(t *testing.T, r result) string {
	t.Helper()
	i := strings.Index(r.out, "] what failed (whole output")
	if i < 0 {
		t.Fatalf("no summary of what failed (exit %d):\n%s", r.code, r.out)
	}
	return r.out[i:]
}

// TestReview69bSummaryNoStaleStageLog: .ci/run's new summary prints the
// last lines of _output/stage-NAME.log for every "stage: NAME: FAILED"
// line of this run. hack/stages.sh empties a stage's log only when it
// starts the stage's make. The e2e stage fails without a make of its
// own when the background build of its prerequisites (e2e-deps) failed
// (bg_wait, `bg_wait || { rc=$?; failed=e2e; }`, and the stage's make
// skipped by `if [ "$rc" = 0 ]`): its log is then whatever an earlier
// run left there, and the summary shows that earlier run's e2e failure
// as "the end of e2e's output", the last lines a reader of CI's tail
// sees. (A fresh CI machine has no _output; any second .ci/run on a
// machine, or a developer's, has.)
//
// Failed before session 69's fix (session 69b): the summary shows "the end of e2e's output
// (_output/stage-e2e.log):" with the earlier run's TestPlanSwitch failure.
// hack/stages.sh, the group loop: the `: > "$OUT/stage-$fg.log"` (line
// 315, and the side stages') come after bg_wait (line 272); .ci/run:136-141
// trusts any non-empty log. Smallest fix: empty every
// member's log where its "stage: NAME: start" line is printed (or
// `rm -f "$OUT"/stage-*.log` where stages.tsv is emptied).
func TestReview69bSummaryNoStaleStageLog(t *testing.T) {
	r := runCI(t, ciCase{
		stages: "unit e2e",
		files: map[string]string{
			"out-unit":              okLines(3),
			"out-e2e-deps":          "hack/image/build.sh: crane: no space left on device\n",
			"rc-e2e-deps":           "1",
			"_output/stage-e2e.log": okLines(2) + "--- FAIL: TestPlanSwitch (301.00s)\n    planswitch_test.go:88: an earlier run's failure\nFAIL\n",
		},
	})
	if r.code == 0 {
		t.Fatalf(".ci/run passed:\n%s", r.out)
	}
	s := summary(t, r)
	if !strings.Contains(s, "crane: no space left on device") {
		t.Errorf("the background build's cause is not in the summary:\n%s", s)
	}
	if strings.Contains(s, "an earlier run's failure") {
		t.Errorf("the summary of what failed shows a stage log an earlier run left (the e2e stage's make never ran in this one):\n%s", s)
	}
}

// TestReview69bSummaryBinaryStageLog: a failed stage whose output holds
// a NUL byte (a test that prints a body or a buffer with %s) before the
// line that says why. GNU grep (3.8 here) then takes the file for binary:
// it prints no line after that byte, only "binary file matches" on
// stderr. .ci/run's new tail (`grep -v -E ... "_output/stage-$s.log" |
// tail -n 15`) is empty; so is every grep of ci-test.log after the byte,
// the "FAIL pkg", "make: ***" and "stage: NAME: FAILED" lines included
// (those greps had the flaw before 6f9382c; the tail was to be the
// catch-all for what they miss). Bytes that are not UTF-8 (Latin-1, under
// LANG=C.UTF-8) are no trouble: that case passes.
//
// Failed before session 69's fix (session 69b), the NUL case: the summary holds only "the end of
// vet's output" and nothing under it; grep's "binary file matches" went
// to stderr. .ci/run:139 (the `grep -v -E` line), and the greps of
// "$log" around it (lines 121-128, 143-144). Smallest fix: `grep -a`
// there (all the summary's greps).
func TestReview69bSummaryBinaryStageLog(t *testing.T) {
	for name, junk := range map[string]string{
		"NUL byte":            "a test's HTTP body: \x00\x00\x01\x02\n",
		"not UTF-8 (Latin-1)": "octavia says: r\xe9seau indisponible\n",
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r := runCI(t, ciCase{
				stages: "vet+openstack-up unit",
				files: map[string]string{
					"out-vet":   junk + "# " + mod + "/pkg/router\npkg/router/sync.go:120:3: fmt.Sprintf format %d has arg name of wrong type string\n",
					"rc-vet":    "1",
					"sleep-vet": "0.5",
				},
				environ: []string{"LANG=C.UTF-8", "LC_ALL="},
			})
			if r.code == 0 {
				t.Fatalf(".ci/run passed:\n%s", r.out)
			}
			s := summary(t, r)
			if !strings.Contains(s, "fmt.Sprintf format %d has arg name of wrong type string") {
				t.Errorf("the cause is not in the summary of what failed (grep takes the stage log for binary):\n%s", s)
			}
		})
	}
}
