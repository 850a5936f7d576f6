package review70

import (
	"archive/zip"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestReview70UpstreamAWSSharesVersions: every module whose packages both
// this module's build (go list -deps -test ./..., as align_with_project
// takes it) and test/upstream-aws's compile is at one version in both, so
// that upstream-aws's compiles reuse ours (the point of 088e4a4). It fails
// when one side drifts (a cloud-provider-aws bump, a go.mod edit here)
// and says which go.mod to raise. cel-go is no exception in practice:
// upstream-aws compiles none of its packages.
func TestReview70UpstreamAWSSharesVersions(t *testing.T) {
	needGo(t)
	root := repoRoot(t)
	o := ours(t, root)
	aws := modules(t, filepath.Join(root, "test/upstream-aws"), goEnv(), "-test", "./...")
	if _, ok := aws["github.com/google/cel-go"]; ok {
		t.Logf("test/upstream-aws compiles cel-go %s (ours %s)", aws["github.com/google/cel-go"], o["github.com/google/cel-go"])
	}
	for _, m := range mismatches(o, aws, "github.com/google/cel-go") {
		hi, where := aws[m], "go.mod"
		if semverLess(aws[m], o[m]) {
			hi, where = o[m], "test/upstream-aws/go.mod"
		}
		t.Errorf("%s: ours %s, test/upstream-aws %s: raise it to %s in %s", m, o[m], aws[m], hi, where)
	}
}

// kubeScratch makes hack/build-control-plane.sh's scratch module (its
// KUBE_VERSION, STAGING_VERSION and KUBE_CMDS read from the script) in a
// temporary directory, without aligning it, and returns the directory and
// the command packages. It skips when k8s.io/kubernetes is not in the
// module cache and cannot be downloaded.
func kubeScratch(t *testing.T, root string, env []string) (string, []string) {
	t.Helper()
	dir := t.TempDir()
	script := `set -euo pipefail
eval "$(grep -E '^(KUBE_VERSION|STAGING_VERSION|KUBE_CMDS)=' "$1/hack/build-control-plane.sh")"
printf 'module kubebuild\n\ngo 1.26\n' > go.mod
go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" > kubernetes.json || { echo SKIP; exit 0; }
modfile=$(sed -n 's/.*"GoMod": "\(.*\)".*/\1/p' kubernetes.json)
grep -E '^\s*k8s\.io/[a-z0-9-]+ => \./staging/' "$modfile" | awk '{print $1}' |
  grep -v '^k8s.io/sample-' | while read -r m; do go mod edit -replace "$m@v0.0.0=$m@$STAGING_VERSION" -require "$m@$STAGING_VERSION"; done
printf '//go:build tools\n\npackage tools\n\nimport (\n\t_ "k8s.io/kubernetes/cmd/kube-apiserver"\n\t_ "k8s.io/kubernetes/cmd/kubectl"\n)\n' > tools.go
go get "k8s.io/kubernetes@$KUBE_VERSION" >&2
echo "$modfile"
echo "${KUBE_CMDS[@]/#/k8s.io/kubernetes/cmd/}"
`
	out, err := run(t, dir, env, "bash", "-c", script, "kube", root)
	if err != nil {
		t.Fatalf("the kube scratch module: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if lines[0] == "SKIP" || len(lines) != 2 {
		t.Skipf("k8s.io/kubernetes is not in the module cache: %s", out)
	}
	return dir, append([]string{lines[0]}, strings.Fields(lines[1])...)
}

// TestReview70KubeBuildAligned: the kube build's scratch module, aligned,
// has this module's version of every module both compile (no package of
// theirs left unshared by a version), never a version lower than
// Kubernetes's own requirements selected, and cel-go at the version
// k8s.io/kubernetes requires: the kube-apiserver of the e2e tests (the
// admission policy's CEL cost estimates) still runs the released CEL.
func TestReview70KubeBuildAligned(t *testing.T) {
	needGo(t)
	root := repoRoot(t)
	env := goEnv()
	dir, args := kubeScratch(t, root, env)
	modfile, cmds := args[0], args[1:]
	mod, err := os.ReadFile(modfile)
	if err != nil {
		t.Fatal(err)
	}
	released := regexp.MustCompile(`(?m)^\s*github\.com/google/cel-go (v\S+)`).FindSubmatch(mod)
	if released == nil {
		t.Fatalf("%s requires no cel-go", modfile)
	}
	before := modules(t, dir, env, append([]string{"-mod=mod"}, cmds...)...)
	align(t, root, dir, env, cmds...)
	after := modules(t, dir, env, append([]string{"-mod=mod"}, cmds...)...)
	if got := after["github.com/google/cel-go"]; got != string(released[1]) {
		t.Errorf("the aligned kube build compiles cel-go %s, Kubernetes's own %s: the kube-apiserver's CEL is not the released one", got, released[1])
	}
	t.Logf("CEL modules: cel-go %s (released %s), cel.dev/expr %s (before alignment %s)", after["github.com/google/cel-go"], released[1], after["cel.dev/expr"], before["cel.dev/expr"])
	checkAligned(t, "the kube build", ours(t, root), before, after)
}

// TestReview70MetalLBAligned: hack/metallb/build.sh's scratch copy of
// MetalLB (its version read from the script, frr-k8s replaced with
// hack/metallb/frr-k8s-api), aligned, compiles every module it shares with
// this module at our version, and no module lower than MetalLB's own
// requirements selected. REVIEW70_METALLB_DIR names an unpacked
// go.universe.tf/metallb to use instead of the module cache's; without
// either the probe skips.
func TestReview70MetalLBAligned(t *testing.T) {
	needGo(t)
	root := repoRoot(t)
	env := goEnv()
	b, err := os.ReadFile(filepath.Join(root, "hack/metallb/build.sh"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "align_with_project") {
		t.Fatal("hack/metallb/build.sh no longer aligns MetalLB with this module")
	}
	if !strings.Contains(string(b), "GOWORK=off") {
		t.Error("hack/metallb/build.sh does not set GOWORK=off: a caller's workspace (the race workspace) would take its go commands")
	}
	ver := regexp.MustCompile(`METALLB_VERSION=\$\{METALLB_VERSION:-(v[^}]+)\}`).FindSubmatch(b)
	if ver == nil {
		t.Fatal("no METALLB_VERSION in hack/metallb/build.sh")
	}
	src := os.Getenv("REVIEW70_METALLB_DIR")
	if src == "" {
		out, err := run(t, root, env, "go", "mod", "download", "-json", "go.universe.tf/metallb@"+string(ver[1]))
		m := regexp.MustCompile(`"Dir": "([^"]+)"`).FindStringSubmatch(out)
		if err != nil || m == nil {
			t.Skipf("go.universe.tf/metallb@%s is not in the module cache: %v", ver[1], err)
		}
		src = m[1]
	}
	dir := t.TempDir()
	copyTree(t, src, filepath.Join(dir, "metallb"))
	copyTree(t, filepath.Join(root, "hack/metallb/frr-k8s-api"), filepath.Join(dir, "frr-k8s"))
	mdir := filepath.Join(dir, "metallb")
	if out, err := run(t, mdir, env, "go", "mod", "edit", "-replace", "github.com/metallb/frr-k8s=../frr-k8s"); err != nil {
		t.Fatalf("go mod edit: %v\n%s", err, out)
	}
	pkgs := []string{"./controller", "./speaker"}
	before := modules(t, mdir, env, append([]string{"-mod=mod"}, pkgs...)...)
	align(t, root, mdir, env, pkgs...)
	after := modules(t, mdir, env, append([]string{"-mod=mod"}, pkgs...)...)
	o := ours(t, root)
	checkAligned(t, "MetalLB", o, before, after)
	n := 0
	for m := range after {
		if _, ok := o[m]; ok {
			n++
		}
	}
	t.Logf("MetalLB %s: %d modules shared with this module, all at our versions", ver[1], n)
}

// TestReview70AlignNeverLowers: hack/align.sh says "A requirement only
// raises a version (Go takes the highest one required), so a module the
// tool needs newer stays as the tool needs it". That holds for a module
// the tool's dependencies require, not for one the aligned module itself
// requires: go mod edit -require replaces its own requirement. The
// scratch module is MetalLB's own module (hack/metallb/build.sh), whose
// go.mod lists every module it compiles. Here: a module proxy (a
// directory) with example.com/dep v1.0.0 and v1.1.0, a project requiring
// v1.0.0, a tool requiring v1.1.0 directly; after align_with_project the
// tool must still get v1.1.0.
func TestReview70AlignNeverLowers(t *testing.T) {
	needGo(t)
	tmp := t.TempDir()
	proxy := filepath.Join(tmp, "proxy")
	for _, v := range []string{"v1.0.0", "v1.1.0"} {
		writeModule(t, proxy, "example.com/dep", v, map[string]string{
			"go.mod": "module example.com/dep\n\ngo 1.21\n",
			"dep.go": fmt.Sprintf("package dep\n\nconst Version = %q\n", v),
		})
	}
	writeFile(t, filepath.Join(proxy, "example.com/dep/@v/list"), "v1.0.0\nv1.1.0\n")
	env := goEnv("GOPROXY=file://"+filepath.ToSlash(proxy), "GOSUMDB=off", "GONOSUMDB=*", "GOFLAGS=-mod=mod -modcacherw",
		"GOMODCACHE="+filepath.Join(tmp, "modcache"))

	project := filepath.Join(tmp, "project")
	writeFile(t, filepath.Join(project, "go.mod"), "module example.com/project\n\ngo 1.21\n\nrequire example.com/dep v1.0.0\n")
	writeFile(t, filepath.Join(project, "p.go"), "package p\n\nimport _ \"example.com/dep\"\n")
	tool := filepath.Join(tmp, "tool")
	writeFile(t, filepath.Join(tool, "go.mod"), "module example.com/tool\n\ngo 1.21\n\nrequire example.com/dep v1.1.0\n")
	writeFile(t, filepath.Join(tool, "main.go"), "package main\n\nimport \"example.com/dep\"\n\nfunc main() { println(dep.Version) }\n")
	for _, d := range []string{project, tool} {
		if out, err := run(t, d, env, "go", "mod", "tidy"); err != nil {
			t.Fatalf("go mod tidy in %s: %v\n%s", d, err, out)
		}
	}
	align(t, project, tool, env, ".")
	out, err := run(t, tool, env, "go", "list", "-m", "example.com/dep")
	if err != nil {
		t.Fatalf("go list -m: %v", err)
	}
	if got := strings.TrimSpace(out); got != "example.com/dep v1.1.0" {
		b, _ := os.ReadFile(filepath.Join(tool, "go.mod"))
		t.Errorf("the tool requires example.com/dep v1.1.0 itself; after align_with_project it compiles %q (lowered to the project's):\n%s", got, b)
	}
}

// writeModule writes module path@v to a GOPROXY directory.
func writeModule(t *testing.T, proxy, path, v string, files map[string]string) {
	t.Helper()
	dir := filepath.Join(proxy, path, "@v")
	writeFile(t, filepath.Join(dir, v+".info"), fmt.Sprintf(`{"Version":%q,"Time":"2026-01-01T00:00:00Z"}`, v))
	writeFile(t, filepath.Join(dir, v+".mod"), files["go.mod"])
	f, err := os.Create(filepath.Join(dir, v+".zip"))
	if err != nil {
		t.Fatal(err)
	}
	zw := zip.NewWriter(f)
	for name, body := range files {
		w, err := zw.Create(path + "@" + v + "/" + name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// checkAligned fails for every module a tool's aligned build (after)
// compiles at another version than ours (its packages over it compiled
// twice), and for every one align_with_project lowered from before.
func checkAligned(t *testing.T, tool string, o, before, after map[string]string) {
	t.Helper()
	for _, m := range mismatches(o, after) {
		t.Errorf("%s: ours %s, aligned %s's %s: its packages over it are compiled twice", m, o[m], tool, after[m])
	}
	for m, v := range before {
		if w, ok := after[m]; ok && semverLess(w, v) {
			t.Errorf("%s: align_with_project lowered it from %s to %s in %s", m, v, w, tool)
		}
	}
}
