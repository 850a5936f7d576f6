// Package review69 holds session 69's review probes of issue 44's CI
// rework where its pieces meet: .ci/run's summary of what failed after
// hack/stages.sh's stages, the Makefile's unit recipe (pkg/admission
// without -race, then the rest), which packages each stage of make test
// runs, hack/fuzz.sh's discovery of the fuzz targets, TESTVET=off after
// the vet stage, and NORACE_PKGS. Each probe runs the real script or
// Makefile with stub commands (a fake make, go, git) in a temporary
// directory, or asks the real module with go list (no compile); nothing
// here builds or runs the project. It has no code of its own.
//
// The second review (files *_review69b_test.go) probes the changes of
// commits 6f9382c..5d461a3 where they meet the rest: the tee of the
// foreground stage in hack/stages.sh, .ci/run's per-stage summary, the
// one-line unit recipe and RACE_GOWORK's `|| exit`, BUILD_GOGC.
package review69

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

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// writeExec writes an executable file.
func writeExec(t *testing.T, path, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
}

func copyFile(t *testing.T, dst, src string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	writeExec(t, dst, string(b))
}

// env returns the environment without the variables the scripts and make
// read (a make above this test, GOWORK of a race workspace, GOGC ...),
// plus extra.
func env(extra ...string) []string {
	var out []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "WORK", "TOOLS", "OUT", "MAKE", "MAKEFLAGS", "MAKELEVEL", "MFLAGS", "TESTVET", "GOWORK", "TEST_STAGES", "UNIT_PKGS", "E2E_PKGS", "GOGC", "BUILD_GOGC", "GOFLAGS":
			continue
		}
		out = append(out, kv)
	}
	return append(out, extra...)
}

type result struct {
	out  string
	code int
	dur  time.Duration
	// signaled: the process was killed by a signal (code is then -1).
	signaled bool
}

// proc is a command started in a process group of its own, as a shell
// starts a foreground job: a terminal's Ctrl-C (SIGINT to the group) can
// be imitated with interrupt.
type proc struct {
	cmd   *exec.Cmd
	out   *bytes.Buffer
	done  chan struct{}
	start time.Time
}

func startCmd(t *testing.T, dir string, environ []string, stdin string, name string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = environ
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if stdin != "" {
		f, err := os.Open(stdin)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = f.Close() })
		cmd.Stdin = f
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p := &proc{cmd: cmd, out: &out, done: make(chan struct{}), start: time.Now()}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		// Whatever is left of the group.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	})
	return p
}

// interrupt sends sig to the process group, as a terminal's Ctrl-C does.
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

func runCmd(t *testing.T, dir string, environ []string, timeout time.Duration, name string, args ...string) result {
	t.Helper()
	return startCmd(t, dir, environ, "", name, args...).wait(t, timeout)
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return string(b)
}

// waitFile waits until path exists (a stub's mark that it got somewhere).
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

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func lastLine(s string) string {
	s = strings.TrimRight(s, "\n")
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// goEnv is the environment for the real go command's go list: the
// module as released (not make unit's race workspace), no cgo.
func goEnv() []string {
	return env("GOWORK=off", "CGO_ENABLED=0", "GOFLAGS=-buildvcs=false")
}

// lookGo finds the go command (also where make unit runs this package
// with /usr/local/go/bin only on make's PATH).
func lookGo(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	if _, err := os.Stat("/usr/local/go/bin/go"); err == nil {
		return "/usr/local/go/bin/go"
	}
	t.Fatal("no go command on PATH or at /usr/local/go/bin/go: this probe asks the module with go list")
	return ""
}
