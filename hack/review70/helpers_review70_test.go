// Package review70 holds session 70's review probes of commits
// 088e4a4..2c1e4d7 where they meet the rest of the project: this module's
// go.mod raised to the versions upstream's aws-cloud-controller-manager
// (test/upstream-aws) and MetalLB need, MetalLB's scratch build aligned
// with it (hack/align.sh's align_with_project), and the kube build
// (hack/build-control-plane.sh) aligned with the raised versions. The
// probes ask the go command for module graphs (go list, go mod; no
// compile) in scratch copies; nothing here builds a binary. It has no code
// of its own.
package review70

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// goEnv is the environment without a caller's workspace (GOWORK), plus
// extra.
func goEnv(extra ...string) []string {
	var out []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if k == "GOWORK" {
			continue
		}
		out = append(out, kv)
	}
	return append(append(out, "GOWORK=off", "GOTOOLCHAIN=local"), extra...)
}

// run runs name in dir with env and returns its stdout; stderr goes to
// the error's text.
func run(t *testing.T, dir string, env []string, name string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = env
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.String(), &runError{err: err, stderr: errb.String()}
	}
	return out.String(), nil
}

type runError struct {
	err    error
	stderr string
}

func (e *runError) Error() string { return e.err.Error() + ": " + e.stderr }

func needGo(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Fatalf("no go command: %v", err)
	}
}

// modFormat lists each package's module (not the main module's, not a
// replaced one's) as "path version".
const modFormat = `{{with .Module}}{{if and (not .Main) (not .Replace)}}{{.Path}} {{.Version}}{{end}}{{end}}`

// modules runs go list -deps with args in dir and returns module → version.
func modules(t *testing.T, dir string, env []string, args ...string) map[string]string {
	t.Helper()
	out, err := run(t, dir, env, "go", append([]string{"list", "-deps", "-f", modFormat}, args...)...)
	if err != nil {
		t.Fatalf("go list -deps %v in %s: %v", args, dir, err)
	}
	m := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) == 2 {
			m[f[0]] = f[1]
		}
	}
	return m
}

// ours is what align_with_project takes as this module's versions.
func ours(t *testing.T, root string) map[string]string {
	t.Helper()
	return modules(t, root, goEnv(), "-test", "./...")
}

// mismatches lists the modules both maps hold at different versions,
// sorted, skipping those in skip.
func mismatches(a, b map[string]string, skip ...string) []string {
	var out []string
	for m, v := range a {
		if w, ok := b[m]; ok && w != v && !contains(skip, m) {
			out = append(out, m)
		}
	}
	sort.Strings(out)
	return out
}

func contains(s []string, x string) bool {
	for _, y := range s {
		if y == x {
			return true
		}
	}
	return false
}

// semverLess reports a < b for module versions (vMAJOR.MINOR.PATCH with
// an optional -prerelease, as pseudo-versions are; build metadata and
// +incompatible ignored).
func semverLess(a, b string) bool {
	pa, pb := splitVersion(a), splitVersion(b)
	for i := 0; i < 3; i++ {
		if pa.num[i] != pb.num[i] {
			return pa.num[i] < pb.num[i]
		}
	}
	switch {
	case pa.pre == pb.pre:
		return false
	case pa.pre == "":
		return false
	case pb.pre == "":
		return true
	}
	ia, ib := strings.Split(pa.pre, "."), strings.Split(pb.pre, ".")
	for i := 0; i < len(ia) && i < len(ib); i++ {
		if ia[i] == ib[i] {
			continue
		}
		na, ea := strconv.Atoi(ia[i])
		nb, eb := strconv.Atoi(ib[i])
		switch {
		case ea == nil && eb == nil:
			return na < nb
		case ea == nil:
			return true
		case eb == nil:
			return false
		}
		return ia[i] < ib[i]
	}
	return len(ia) < len(ib)
}

type version struct {
	num [3]int
	pre string
}

func splitVersion(v string) version {
	v = strings.TrimPrefix(v, "v")
	v, _, _ = strings.Cut(v, "+")
	core, pre, _ := strings.Cut(v, "-")
	var out version
	out.pre = pre
	for i, p := range strings.SplitN(core, ".", 3) {
		out.num[i], _ = strconv.Atoi(p)
	}
	return out
}

// copyTree copies dir src to dst, files writable.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.Walk(src, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if info.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if !info.Mode().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func writeFile(t *testing.T, path, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// align runs this repository's hack/align.sh's align_with_project ROOT
// PKGS... in dir (ROOT: the project to align with).
func align(t *testing.T, root, dir string, env []string, pkgs ...string) {
	t.Helper()
	script := `set -euo pipefail; source "$1/hack/align.sh"; root=$2; shift 2; align_with_project "$root" "$@"`
	if out, err := run(t, dir, env, "bash", append([]string{"-c", script, "align", repoRoot(t), root}, pkgs...)...); err != nil {
		t.Fatalf("align_with_project: %v\n%s", err, out)
	}
}
