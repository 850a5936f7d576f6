package review69

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// summaryMake stands for make in the copy of .ci/run and, as MAKE, in the
// real hack/stages.sh that its make test runs: make control-plane (the
// early build) passes at once; make test runs hack/stages.sh with
// $FAKE_STAGES; any other target (a stage) prints $FAKE_DIR/out-TARGET,
// sleeps $FAKE_DIR/sleep-TARGET seconds and, when $FAKE_DIR/rc-TARGET says
// so, fails as a make whose recipe failed does (its "make[1]: ***" line on
// stderr, exit 2).
const summaryMake = `#!/usr/bin/env bash
t=
for a in "$@"; do case $a in -*|*=*) ;; *) t=$a; break ;; esac; done
case $t in
control-plane) exit 0 ;;
test) MAKE="$0" OUT="$PWD/_output" exec bash hack/stages.sh $FAKE_STAGES ;;
esac
[ ! -f "$FAKE_DIR/out-$t" ] || cat "$FAKE_DIR/out-$t"
[ ! -f "$FAKE_DIR/sleep-$t" ] || sleep "$(cat "$FAKE_DIR/sleep-$t")"
rc=0
[ ! -f "$FAKE_DIR/rc-$t" ] || rc=$(cat "$FAKE_DIR/rc-$t")
if [ "$rc" != 0 ]; then
  echo "make[1]: *** [Makefile:100: $t] Error $rc" >&2
  exit 2
fi
`

// summaryPython3 stands for python3 (hack/cpuacct.py): its report prints
// as many lines as the real one's tables (kinds, the OpenStack services,
// the go commands, the test binaries: about 40).
const summaryPython3 = `#!/usr/bin/env bash
case $2 in
report)
  echo "CPU by kind of process (hack/cpuacct.py: process accounting, 2400 s of wall time):"
  for i in $(seq 1 38); do echo "  $((1000 - i)) s  1.0%  kind $i"; done ;;
esac
exit 0
`

const mod = "github.com/multicloud-ccm/multicloud-ccm"

// failure is one way a stage of make test fails: the stages, what each
// stage's make prints (and its exit status and sleep), and the line that
// tells why it failed.
type failure struct {
	name   string
	stages string
	out    map[string]string
	rc     map[string]int
	sleep  map[string]string
	cause  string
	// known: the case's finding, for the failure message.
	known string
}

func okLines(n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "ok  \t%s/pkg/p%d\t%d.%ds\n", mod, i, 3+i, i)
	}
	return b.String()
}

var failures = []failure{
	{
		// The control: a unit test's failure is picked up by the summary's
		// "--- FAIL" and "_test.go:N:" greps.
		name:   "unit test fails (control)",
		stages: "unit",
		out: map[string]string{"unit": okLines(5) +
			"--- FAIL: TestSync (0.02s)\n    sync_test.go:42: want 2 load balancers, got 1\nFAIL\nFAIL\t" + mod + "/pkg/router\t3.1s\n" + okLines(20)},
		rc:    map[string]int{"unit": 1},
		cause: "sync_test.go:42: want 2 load balancers, got 1",
	},
	{
		name:   "vet finding, openstack-up beside vet",
		stages: "vet+openstack-up unit",
		out: map[string]string{
			"vet":          "# " + mod + "/pkg/router\npkg/router/sync.go:120:3: fmt.Sprintf format %d has arg name of wrong type string\n",
			"openstack-up": strings.Repeat("openstack: setting up keystone, neutron, octavia ...\n", 40),
		},
		rc:    map[string]int{"vet": 1},
		sleep: map[string]string{"vet": "1", "openstack-up": "30"},
		cause: "pkg/router/sync.go:120:3: fmt.Sprintf format %d has arg name of wrong type string",
		known: "go vet's finding (no leading white space, not a _test.go line, no FAIL) is printed by stages.sh before openstack-up's whole log (stopped beside it), then .ci/run's table and CPU report; the summary shows only the make and stage lines",
	},
	{
		name:   "lint finding, lint beside e2e",
		stages: "e2e+lint+promrules",
		out: map[string]string{
			"e2e":  okLines(18),
			"lint": "pkg/router/sync.go:120:3: Error return value of `w.Close` is not checked (errcheck)\n\tw.Close()\n\t^\n1 issues:\n* errcheck: 1\n",
		},
		rc:    map[string]int{"lint": 1},
		sleep: map[string]string{"e2e": "1"},
		cause: "pkg/router/sync.go:120:3: Error return value of `w.Close` is not checked (errcheck)",
		known: "before issue 44 make lint ran last in .ci/run, its findings the output's last lines; now they are in make test's log, before the table and the CPU report, and the summary greps none of golangci-lint's lines",
	},
	{
		name:   "a goroutine panics in a unit package",
		stages: "unit",
		out: map[string]string{"unit": okLines(5) +
			"panic: runtime error: invalid memory address or nil pointer dereference\n[signal SIGSEGV: segmentation violation code=0x1 addr=0x0 pc=0x1]\n\ngoroutine 812 [running]:\n" +
			mod + "/pkg/lbcontroller.(*Controller).worker(0x0)\n\t" + mod + "/pkg/lbcontroller/worker.go:88 +0x1d\ncreated by " + mod + "/pkg/lbcontroller.(*Controller).Run in goroutine 7\n\t" + mod + "/pkg/lbcontroller/controller.go:140 +0x8f\nFAIL\t" + mod + "/pkg/lbcontroller\t12.3s\n" + okLines(20)},
		rc:    map[string]int{"unit": 1},
		cause: "panic: runtime error: invalid memory address or nil pointer dereference",
		known: "a panic outside the test's goroutine prints no \"--- FAIL\" line and no \"_test.go:N:\" line: the summary shows \"FAIL pkg 12.3s\" and not the panic",
	},
	{
		name:   "a test binary times out",
		stages: "unit",
		out: map[string]string{"unit": okLines(5) +
			"panic: test timed out after 40m0s\n\trunning tests:\n\t\tTestConformance/ownership (40m0s)\n\ngoroutine 1 [chan receive]:\ntesting.(*T).Run(...)\n\ttesting/testing.go:2000 +0x1\n" +
			"FAIL\t" + mod + "/pkg/backends/openstack\t2400.2s\n" + okLines(20)},
		rc:    map[string]int{"unit": 1},
		cause: "TestConformance/ownership (40m0s)",
		known: "a timeout prints no \"--- FAIL\" line: the summary shows \"FAIL pkg 2400.2s\", not which test hung",
	},
	{
		name:   "openstack-up fails beside vet",
		stages: "vet+openstack-up unit",
		out: map[string]string{
			"vet":          "",
			"openstack-up": strings.Repeat("openstack: setting up ...\n", 30) + "up.sh: neutron-server did not answer on 127.0.0.1:9696 within 120 s\n",
		},
		rc:    map[string]int{"openstack-up": 1},
		sleep: map[string]string{"vet": "1"},
		cause: "up.sh: neutron-server did not answer on 127.0.0.1:9696 within 120 s",
		known: "the stack's error is in openstack-up's log, printed before the table and the CPU report; the summary shows only the make and stage lines",
	},
}

// TestReview69CIRunSummaryShowsCause: .ci/run says "What failed, last: a
// reader of the output's tail alone (CI keeps only that) learns which
// test failed and why", and issue 44 requires that a failure show its
// cause at the end of the output. Since issue 44, make test's end is
// followed by the stage table (hack/stages-table.sh) and, since session 61,
// the CPU report (about 40 lines), so only the summary after "what
// failed" is at the end. For each way a stage fails, the real .ci/run runs
// the real hack/stages.sh with a fake make; the line that says why must be
// in the summary.
//
// Failed (session 69, before .ci/run printed each failed stage's last lines
// and panics) for every case but the control: the summary's greps
// (.ci/run, the block after `stage "what failed ..."`) know go test's
// "--- FAIL", indented "_test.go:N:" lines, data races and fuzz inputs;
// a vet or lint finding, a panic outside a test's goroutine, a test
// binary's timeout and a failed openstack-up (or any build make test runs
// in the foreground) leave only "make[1]: ***", "FAIL pkg" and "stage: X:
// FAILED" lines there, the cause 50-100 lines above.
func TestReview69CIRunSummaryShowsCause(t *testing.T) {
	for _, f := range failures {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			out, code := runCISummary(t, f)
			if code == 0 {
				t.Fatalf(".ci/run passed:\n%s", out)
			}
			i := strings.Index(out, "] what failed (whole output")
			if i < 0 {
				t.Fatalf("no summary of what failed:\n%s", out)
			}
			if !strings.Contains(out[i:], f.cause) {
				lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
				from := -1
				for k := len(lines) - 1; k >= 0; k-- {
					if strings.Contains(lines[k], f.cause) {
						from = len(lines) - k
						break
					}
				}
				t.Errorf("the cause %q is not in .ci/run's summary of what failed (it is %d lines from the end: %s); the summary:\n%s",
					f.cause, from, f.known, out[i:])
			}
		})
	}
}

func runCISummary(t *testing.T, f failure) (string, int) {
	t.Helper()
	src := repoRoot(t)
	root := t.TempDir()
	fake := filepath.Join(root, "fakebin")
	copyFile(t, filepath.Join(root, ".ci/run"), filepath.Join(src, ".ci/run"))
	for _, s := range []string{"hack/stages.sh", "hack/stages-table.sh"} {
		copyFile(t, filepath.Join(root, s), filepath.Join(src, s))
	}
	writeExec(t, filepath.Join(root, "Makefile"), "GOLANGCI_LINT_VERSION := v2.15.0\n")
	writeExec(t, filepath.Join(root, "hack/openstack/install.sh"), "exit 0\n")
	writeExec(t, filepath.Join(root, "hack/openstack/down.sh"), "exit 0\n")
	writeExec(t, filepath.Join(root, "hack/image/install.sh"), "exit 0\n")
	for _, d := range []string{"test/upstream-aws", "test/promrules"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeExec(t, filepath.Join(fake, "make"), summaryMake)
	writeExec(t, filepath.Join(fake, "go"), "#!/usr/bin/env bash\n[ \"$1\" != version ] || echo 'go version go1.26.8 linux/amd64'\nexit 0\n")
	writeExec(t, filepath.Join(fake, "python3"), summaryPython3)
	for k, v := range f.out {
		writeExec(t, filepath.Join(fake, "out-"+k), v)
	}
	for k, v := range f.rc {
		writeExec(t, filepath.Join(fake, "rc-"+k), fmt.Sprint(v))
	}
	for k, v := range f.sleep {
		writeExec(t, filepath.Join(fake, "sleep-"+k), v)
	}
	e := env("PATH="+fake+":"+os.Getenv("PATH"), "FAKE_DIR="+fake, "FAKE_STAGES="+f.stages)
	r := runCmd(t, root, e, 60*time.Second, "bash", ".ci/run")
	return r.out, r.code
}
