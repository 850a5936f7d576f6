// Package review69 holds session 69's review probes of issue 44's CI
// rework where its pieces meet: .ci/run's summary of what failed after
// hack/stages.sh's stages, the Makefile's unit recipe (pkg/admission
// without -race, then the rest), which packages each stage of make test
// runs, hack/fuzz.sh's discovery of the fuzz targets, TESTVET=off after
// the vet stage, and NORACE_PKGS. Each probe runs the real script or
// Makefile with stub commands (a fake make, go, git) in a temporary
// directory, or asks the real module with go list (no compile); nothing
// here builds or runs the project. It has no code of its own.
package review69

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
// read, so that make unit's own (MAKEFLAGS with TESTVET=off, GOWORK of the
// race workspace, OUT ...) cannot leak in, plus extra.
func env(extra ...string) []string {
	var out []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "WORK", "TOOLS", "OUT", "MAKE", "MAKEFLAGS", "MAKELEVEL", "MFLAGS", "TESTVET", "GOWORK", "TEST_STAGES", "UNIT_PKGS", "E2E_PKGS":
			continue
		}
		out = append(out, kv)
	}
	return append(out, extra...)
}

type result struct {
	out  string
	code int
}

func runCmd(t *testing.T, dir string, environ []string, timeout time.Duration, name string, args ...string) result {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = environ
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		_ = err // the exit status is read from ProcessState
	case <-time.After(timeout):
		_ = cmd.Process.Kill()
		err := <-done
		_ = err
		t.Fatalf("%s %v: no end after %v; output:\n%s", name, args, timeout, out.String())
	}
	return result{out: out.String(), code: cmd.ProcessState.ExitCode()}
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return string(b)
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
	t.Skip("no go command")
	return ""
}
