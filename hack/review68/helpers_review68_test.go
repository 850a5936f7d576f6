// Package review68 holds session 68's review probes of commit 977df41
// (issue 44, "CI in half the time"): hack/stages.sh's side stages and
// background builds, hack/stages-table.sh's total, .ci/run's early
// control-plane build and hack/helm/install.sh's scratch build. Each probe
// runs the real script with stub commands (a fake make, go, python3) in a
// temporary directory; nothing here builds or runs the project. It has no
// code of its own.
package review68

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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

// writeExec writes an executable script.
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

// env returns the environment without the variables the scripts read, so
// the caller's own WORK, TOOLS, OUT, MAKE or MAKEFLAGS cannot leak in, plus
// extra.
func env(extra ...string) []string {
	var out []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "WORK", "TOOLS", "OUT", "MAKE", "MAKEFLAGS", "MAKELEVEL", "MFLAGS":
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
}

func runCmd(t *testing.T, dir string, environ []string, timeout time.Duration, name string, args ...string) result {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = environ
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	// The command's exit status is read from ProcessState below; Wait's
	// error says the same.
	select {
	case err := <-done:
		_ = err
	case <-time.After(timeout):
		_ = cmd.Process.Kill()
		err := <-done
		_ = err
		t.Fatalf("%s %v: no end after %v; output:\n%s", name, args, timeout, out.String())
	}
	return result{out: out.String(), code: cmd.ProcessState.ExitCode(), dur: time.Since(start)}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return string(b)
}
