package review68

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// ciStubMake: make control-plane (the early build) records its pid, sleeps
// FAKE_CP_SLEEP and exits FAKE_CP_RC; make test writes a stages.tsv row,
// sleeps FAKE_TEST_SLEEP and exits FAKE_TEST_RC.
const ciStubMake = `#!/usr/bin/env bash
t=
for a in "$@"; do case $a in -*|*=*) ;; *) t=$a; break ;; esac; done
case $t in
control-plane)
  echo $$ > "$FAKE_DIR/cp.pid"
  echo "building the control plane"
  sleep "${FAKE_CP_SLEEP:-0}"
  exit "${FAKE_CP_RC:-0}" ;;
test)
  mkdir -p _output
  printf 'vet\t1\tpassed\n' > _output/stages.tsv
  sleep "${FAKE_TEST_SLEEP:-0}"
  [ "${FAKE_TEST_RC:-0}" = 0 ] || echo "stage: vet: FAILED (exit ${FAKE_TEST_RC}) after 1 s"
  exit "${FAKE_TEST_RC:-0}" ;;
*) echo "stub make: unexpected $*" >&2; exit 99 ;;
esac
`

type ciRun struct {
	result
	root, fake string
	tsv        string
}

// runCI runs a copy of the real .ci/run in a temp tree whose hack scripts
// are stubs (hack/stages-table.sh is the real one), with stub make, go and
// python3 first on PATH.
func runCI(t *testing.T, knobs ...string) ciRun {
	t.Helper()
	src := repoRoot(t)
	root := t.TempDir()
	fake := filepath.Join(root, "fakebin")
	copyFile(t, filepath.Join(root, ".ci/run"), filepath.Join(src, ".ci/run"))
	copyFile(t, filepath.Join(root, "hack/stages-table.sh"), filepath.Join(src, "hack/stages-table.sh"))
	writeExec(t, filepath.Join(root, "Makefile"), "GOLANGCI_LINT_VERSION := v2.15.0\n")
	writeExec(t, filepath.Join(root, "hack/openstack/install.sh"), "exit ${FAKE_INSTALL_RC:-0}\n")
	writeExec(t, filepath.Join(root, "hack/openstack/down.sh"), "exit 0\n")
	writeExec(t, filepath.Join(root, "hack/image/install.sh"), "exit 0\n")
	for _, d := range []string{"test/upstream-aws", "test/promrules"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeExec(t, filepath.Join(fake, "make"), ciStubMake)
	writeExec(t, filepath.Join(fake, "go"), "#!/usr/bin/env bash\n[ \"$1\" != version ] || echo 'go version go1.26.8 linux/amd64'\nexit 0\n")
	writeExec(t, filepath.Join(fake, "python3"), "#!/usr/bin/env bash\necho \"$*\" >> \"$FAKE_DIR/python3.log\"\nexit 0\n")
	e := env(append([]string{"PATH=" + fake + ":" + os.Getenv("PATH"), "FAKE_DIR=" + fake}, knobs...)...)
	res := runCmd(t, root, e, 60*time.Second, "bash", ".ci/run")
	r := ciRun{result: res, root: root, fake: fake, tsv: readFile(t, filepath.Join(root, "_output/stages.tsv"))}
	t.Cleanup(func() {
		// The early build's stub, if a probe's failure left it running
		// (a process of this test's own).
		if pid := r.earlyPid(t); pid > 0 {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	return r
}

func (r ciRun) earlyPid(t *testing.T) int {
	s := strings.TrimSpace(readFile(t, filepath.Join(r.fake, "cp.pid")))
	pid, _ := strconv.Atoi(s)
	return pid
}

func alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	// A zombie is not alive.
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	f := strings.Fields(string(b))
	return len(f) > 2 && f[2] != "Z"
}

// TestReview68CIRunStopsEarlyBuildWhenTestFails (held): make test failing
// while the early control-plane build still runs: .ci/run exits with make
// test's status, the EXIT trap stops the early build's process group and
// the process accounting.
func TestReview68CIRunStopsEarlyBuildWhenTestFails(t *testing.T) {
	r := runCI(t, "FAKE_CP_SLEEP=30", "FAKE_TEST_RC=2")
	if r.code != 2 {
		t.Errorf("exit %d, want make test's 2:\n%s", r.code, r.out)
	}
	pid := r.earlyPid(t)
	if pid == 0 {
		t.Fatalf("the early build never started:\n%s", r.out)
	}
	deadline := time.Now().Add(3 * time.Second)
	for alive(pid) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if alive(pid) {
		t.Errorf("the early make control-plane (pid %d) still runs after .ci/run exited", pid)
	}
	if log := readFile(t, filepath.Join(r.fake, "python3.log")); !strings.Contains(log, "hack/cpuacct.py stop") {
		t.Errorf("cpuacct not stopped: %q", log)
	}
	if strings.Contains(r.tsv, "control-plane (early") {
		t.Errorf("a row for an early build that had not ended:\n%s", r.tsv)
	}
	if !strings.Contains(r.out, "stage: vet: FAILED (exit 2)") || !strings.Contains(lastLine(r.out), "done (exit 2)") {
		t.Errorf("what failed / last line:\n%s", r.out)
	}
}

// TestReview68CIRunInstallFailureStopsEarlyBuild (held): set -e leaving
// at the apt installs still stops the early build and keeps the status.
func TestReview68CIRunInstallFailureStopsEarlyBuild(t *testing.T) {
	r := runCI(t, "FAKE_CP_SLEEP=30", "FAKE_INSTALL_RC=5")
	if r.code != 5 {
		t.Errorf("exit %d, want 5:\n%s", r.code, r.out)
	}
	pid := r.earlyPid(t)
	deadline := time.Now().Add(3 * time.Second)
	for alive(pid) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if alive(pid) {
		t.Errorf("the early build (pid %d) survived .ci/run", pid)
	}
}

// TestReview68CIRunEarlyRow (held): the early build's failure fails nothing,
// and its row says failed with its seconds; it stays out of the total.
func TestReview68CIRunEarlyRow(t *testing.T) {
	r := runCI(t, "FAKE_CP_RC=3", "FAKE_TEST_SLEEP=1")
	if r.code != 0 {
		t.Errorf("exit %d:\n%s", r.code, r.out)
	}
	if !regexp.MustCompile(`(?m)^control-plane \(early, background\)\t\d+\tfailed \(log: _output/early-control-plane\.log\)$`).MatchString(r.tsv) {
		t.Errorf("no failed early row:\n%s", r.tsv)
	}
	// The total is the rows' without " (" (vet, installs, the download's
	// wait: their seconds depend on the machine's load), the early row
	// left out.
	want := 0
	for _, m := range regexp.MustCompile(`(?m)^([^\t(]+)\t(\d+)\t`).FindAllStringSubmatch(r.tsv, -1) {
		n, _ := strconv.Atoi(m[2])
		want += n
	}
	if !regexp.MustCompile(`total of the stages +` + strconv.Itoa(want) + ` s`).MatchString(r.out) {
		t.Errorf("the total is not the %d s of the rows without the early build's:\n%s\n%s", want, r.tsv, r.out)
	}
}
