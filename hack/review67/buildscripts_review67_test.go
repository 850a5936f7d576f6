// Package review67 holds session 67's review probes of the build scripts
// (hack/build-control-plane.sh, hack/kubelet/build.sh) and of the fuzz
// targets' dependencies. It has no code of its own.
package review67

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
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

func run(t *testing.T, dir string, env []string, name string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// TestReview67FuzzTargetsStayLight: docs/testing.md says no fuzz target's
// test binary depends on client-go, cloud-provider, component-base,
// govmomi or a cloud SDK any more (what hack/fuzz.sh compiles
// instrumented). Every package with a Fuzz target is checked.
func TestReview67FuzzTargetsStayLight(t *testing.T) {
	root := repoRoot(t)
	files, err := run(t, root, nil, "git", "grep", "-l", "-E", "^func Fuzz", "--", "*_test.go")
	if err != nil {
		t.Skipf("git grep: %v %s", err, files)
	}
	dirs := map[string]bool{}
	for _, f := range strings.Fields(files) {
		dirs["./"+filepath.Dir(f)] = true
	}
	heavy := []string{"k8s.io/client-go/", "k8s.io/cloud-provider", "k8s.io/component-base/", "github.com/vmware/govmomi", "github.com/aws/aws-sdk-go", "github.com/gophercloud/"}
	for d := range dirs {
		out, err := run(t, root, nil, "go", "list", "-deps", "-test", d)
		if err != nil {
			t.Fatalf("go list %s: %v\n%s", d, err, out)
		}
		for _, p := range strings.Fields(out) {
			for _, h := range heavy {
				if strings.HasPrefix(p, h) {
					t.Errorf("fuzz package %s depends on %s", d, p)
				}
			}
		}
	}
}

// TestReview67ControlPlaneAlignsAnExistingScratchModule: the aligned stamp
// is meant to re-align the scratch module whenever this module's go.mod
// changes (and to align scratch modules made before align_with_project
// existed). build_kube returns before looking at the stamp whenever
// kube-apiserver and kubectl of the pinned version are in OUT, so a
// checkout whose control plane was built before (or before go.mod last
// changed) keeps an unaligned scratch module, and hack/kubelet/build.sh,
// which never looks at the stamp, builds the kubelet, kube-scheduler and
// kube-controller-manager from it. Nothing is built here: the binaries
// are stand-ins that report the pinned versions.
//
// It runs the real script, which makes the scratch module from the module
// cache (GOPROXY=off): run by hand with MCCM_SCRIPT_PROBES=1 once
// k8s.io/kubernetes is in the module cache (make control-plane). In make
// unit the cache is being filled by the background build beside it.
func TestReview67ControlPlaneAlignsAnExistingScratchModule(t *testing.T) {
	if os.Getenv("MCCM_SCRIPT_PROBES") == "" {
		t.Skip("runs hack/build-control-plane.sh on the module cache: MCCM_SCRIPT_PROBES=1 to run it")
	}
	root := repoRoot(t)
	tmp := t.TempDir()
	out, work := filepath.Join(tmp, "bin"), filepath.Join(tmp, "tools")
	for _, d := range []string{out, filepath.Join(work, "kube")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	fakes := map[string]string{
		"etcd":           "etcd Version: 3.6.16",
		"kube-apiserver": "Kubernetes v1.37.1",
		"kubectl":        "Client Version: v1.37.1",
	}
	for name, says := range fakes {
		if err := os.WriteFile(filepath.Join(out, name), []byte("#!/bin/sh\necho '"+says+"'\n"), 0o755); err != nil { //nolint:gosec // Test stand-ins.
			t.Fatal(err)
		}
	}
	// A scratch module as an earlier build-control-plane.sh left it.
	mod := "module kubebuild\n\ngo 1.26.0\n\nreplace k8s.io/api => k8s.io/api v0.37.2\n\nrequire k8s.io/kubernetes v1.37.1 // indirect\n"
	if err := os.WriteFile(filepath.Join(work, "kube", "go.mod"), []byte(mod), 0o600); err != nil {
		t.Fatal(err)
	}
	if o, err := run(t, root, []string{"OUT=" + out, "WORK=" + work, "GOPROXY=off"}, "bash", "hack/build-control-plane.sh"); err != nil {
		t.Fatalf("build-control-plane.sh: %v\n%s", err, o)
	}
	// The stamp: cksum of this go.mod, then (session 71) of the script.
	var stamp []string
	for _, f := range []string{"go.mod", "hack/build-control-plane.sh"} {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("cksum")
		cmd.Stdin = bytes.NewReader(b)
		sum, err := cmd.Output()
		if err != nil {
			t.Fatal(err)
		}
		stamp = append(stamp, strings.TrimSpace(string(sum)))
	}
	want := strings.Join(stamp, " ")
	got, _ := os.ReadFile(filepath.Join(work, "kube", "aligned"))
	if strings.TrimSpace(string(got)) != want {
		t.Errorf("after make control-plane, the scratch module hack/kubelet/build.sh builds from has aligned stamp %q, want %q (this go.mod's and the script's): it was never aligned with this module's versions", strings.TrimSpace(string(got)), want)
	}
}

// TestReview67AlignNeverLowersKube: align_with_project writes this
// module's version of every shared module into the scratch go.mod, lower
// ones included. Its comment says a requirement only raises a version.
// With a stand-in project that requires an older pflag than Kubernetes,
// the version kubectl's build then selects must still be Kubernetes's.
// Needs a scratch module (MCCM_KUBE_SCRATCH=_output/tools/kube, not read
// by default: in make unit the background build is writing it) and the
// module cache warm for it; runs offline.
func TestReview67AlignNeverLowersKube(t *testing.T) {
	root := repoRoot(t)
	src := os.Getenv("MCCM_KUBE_SCRATCH")
	if src == "" {
		t.Skip("needs a scratch module: MCCM_KUBE_SCRATCH=_output/tools/kube")
	}
	if _, err := os.Stat(filepath.Join(src, "go.mod")); err != nil {
		t.Skipf("no scratch module at %s (set MCCM_KUBE_SCRATCH)", src)
	}
	tmp := t.TempDir()
	scratch := filepath.Join(tmp, "kube")
	if o, err := run(t, tmp, nil, "cp", "-r", src, scratch); err != nil {
		t.Fatalf("%v %s", err, o)
	}
	fake := filepath.Join(tmp, "fake")
	if err := os.MkdirAll(fake, 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"go.mod":  "module example.com/fake\n\ngo 1.26.0\n\nrequire github.com/spf13/pflag v1.0.5\n",
		"go.sum":  "github.com/spf13/pflag v1.0.5 h1:iy+VFUOCP1a+8yFto/drg2CJ5u0yRoB7fZw3DKv/JXA=\ngithub.com/spf13/pflag v1.0.5/go.mod h1:McXfInJRrz4CZXVZOBLb0bTZqETkiAhM9Iw0y3An2Bg=\n",
		"fake.go": "package fake\n\nimport _ \"github.com/spf13/pflag\"\n",
	}
	for n, c := range files {
		if err := os.WriteFile(filepath.Join(fake, n), []byte(c), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	env := []string{"GOPROXY=off", "GOFLAGS=-buildvcs=false -trimpath"}
	theirs := func() string {
		// What kubectl's build compiles (go build -mod=mod loads the
		// same graph; go list of pflag alone would read the scratch
		// go.mod's requirement lazily, without Kubernetes's).
		o, err := run(t, scratch, env, "go", "list", "-mod=mod", "-deps", "-f", "{{with .Module}}{{.Path}} {{.Version}}{{end}}", "k8s.io/kubernetes/cmd/kubectl")
		if err != nil {
			t.Skipf("scratch module not usable offline: %v %s", err, o)
		}
		for _, l := range strings.Split(o, "\n") {
			if v, ok := strings.CutPrefix(l, "github.com/spf13/pflag "); ok {
				return v
			}
		}
		t.Fatal("kubectl does not use pflag")
		return ""
	}
	before := theirs()
	script := `set -euo pipefail
ROOT=$1
KUBE_CMDS=(kube-apiserver kubectl kubelet kube-scheduler kube-controller-manager)
source "$2/hack/align.sh"
align_with_project "$ROOT" "${KUBE_CMDS[@]/#/k8s.io/kubernetes/cmd/}"`
	if o, err := run(t, scratch, env, "bash", "-c", script, "align", fake, root); err != nil {
		t.Skipf("align_with_project offline: %v\n%s", err, o)
	}
	if after := theirs(); after != before {
		t.Errorf("after aligning with a project on pflag v1.0.5, the kube build selects pflag %s, before %s", after, before)
	}
}
