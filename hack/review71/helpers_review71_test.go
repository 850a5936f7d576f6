// Package review71 holds session 71's review probes of the Makefile's
// TESTBIN_GOGC (make unit and make openstack-test compile at BUILD_GOGC
// and run their test binaries through go test -exec with the caller's
// GOGC). Each probe runs the real Makefile with the real go command on a
// one-file package of its own (testdata/gogcprobe), through a wrapper that
// logs the GOGC each go command got. It has no code of its own. Modelled
// on hack/review69's helpers.
package review71

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

const mod = "github.com/multicloud-ccm/multicloud-ccm"

// probePkg is testdata/gogcprobe's import path.
const probePkg = mod + "/hack/review71/testdata/gogcprobe"

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

func writeExec(t *testing.T, path, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
}

// env returns the environment without the variables make and the scripts
// read (a make above this test, GOWORK, GOGC ...), plus extra.
func env(extra ...string) []string {
	var out []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "WORK", "TOOLS", "OUT", "MAKE", "MAKEFLAGS", "MAKELEVEL", "MFLAGS", "TESTVET", "GOWORK", "TEST_STAGES", "UNIT_PKGS", "E2E_PKGS", "GOGC", "BUILD_GOGC", "GOFLAGS", "REVIEW71_OUT", "REVIEW71_MODE", "REVIEW71_CHILD":
			continue
		}
		out = append(out, kv)
	}
	return append(out, extra...)
}

type result struct {
	out      string
	code     int
	dur      time.Duration
	signaled bool
}

type proc struct {
	cmd   *exec.Cmd
	out   *bytes.Buffer
	done  chan struct{}
	start time.Time
}

// startCmd starts a command in a process group of its own, as a shell
// starts a foreground job.
func startCmd(t *testing.T, dir string, environ []string, name string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = environ
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p := &proc{cmd: cmd, out: &out, done: make(chan struct{}), start: time.Now()}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	})
	return p
}

func (p *proc) signalGroup(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := syscall.Kill(-p.cmd.Process.Pid, sig); err != nil {
		t.Fatal(err)
	}
}

func (p *proc) wait(t *testing.T, timeout time.Duration) result {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(timeout):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
		t.Fatalf("%v: no end after %v; output:\n%s", p.cmd.Args, timeout, p.out.String())
	}
	ws := p.cmd.ProcessState.Sys().(syscall.WaitStatus)
	return result{out: p.out.String(), code: p.cmd.ProcessState.ExitCode(), dur: time.Since(p.start), signaled: ws.Signaled()}
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return string(b)
}

func waitFile(t *testing.T, path string, timeout time.Duration) bool {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(path); err == nil {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

// lookGo finds the real go command.
func lookGo(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	if _, err := os.Stat("/usr/local/go/bin/go"); err == nil {
		return "/usr/local/go/bin/go"
	}
	t.Fatal("no go command on PATH or at /usr/local/go/bin/go")
	return ""
}

// goWrapper writes a go command that logs "SUBCOMMAND GOGC=..." (or
// GOGC unset) to dir/golog, then runs the real go.
func goWrapper(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "go")
	writeExec(t, p, `#!/usr/bin/env bash
if [ -z "${GOGC+x}" ]; then g=unset; else g="=$GOGC"; fi
echo "$1 GOGC$g" >> "`+filepath.Join(dir, "golog")+`"
exec `+lookGo(t)+` "$@"
`)
	return p
}
