package review70

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// metallbStubGo stands for go in hack/metallb/build.sh and hack/align.sh:
// it logs each call with its GOWORK, answers `mod download -json` with a
// fake MetalLB directory, `list` with nothing, and `build -o OUT` by
// writing OUT.
const metallbStubGo = `#!/usr/bin/env bash
echo "GOWORK=${GOWORK-unset} $*" >> "$STUB_LOG"
case "$1 $2" in
"mod download") printf '{\n\t"Dir": "%s"\n}\n' "$STUB_METALLB" ;;
"mod edit") ;;
list*) ;;
build*) while [ $# -gt 0 ]; do if [ "$1" = -o ]; then printf '#!/bin/sh\n' > "$2"; chmod +x "$2"; fi; shift; done ;;
*) echo "stub go: $*" >&2 ;;
esac
`

// TestReview70MetalLBBuildCaching runs hack/metallb/build.sh (a copy, with
// hack/align.sh and hack/goflags.sh, in a fake root) with a stub go and a
// caller's GOWORK (as the race workspace sets it): every go call has
// GOWORK=off, the aligned build runs once, a rerun makes no go call, and
// a changed frr-k8s-api types.go rebuilds.
func TestReview70MetalLBBuildCaching(t *testing.T) {
	root := repoRoot(t)
	tmp := t.TempDir()
	fake := filepath.Join(tmp, "root")
	for _, f := range []string{"hack/metallb/build.sh", "hack/align.sh", "hack/goflags.sh"} {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(fake, f), string(b))
	}
	types := filepath.Join(fake, "hack/metallb/frr-k8s-api/api/v1beta1/types.go")
	writeFile(t, types, "package v1beta1\n")
	mlb := filepath.Join(tmp, "metallb")
	writeFile(t, filepath.Join(mlb, "go.mod"), "module go.universe.tf/metallb\n")
	writeFile(t, filepath.Join(mlb, "config/crd/bases/metallb.io_ipaddresspools.yaml"), "kind: CustomResourceDefinition\n")
	bin := filepath.Join(tmp, "bin")
	writeFile(t, filepath.Join(bin, "go"), metallbStubGo)
	if err := os.Chmod(filepath.Join(bin, "go"), 0o755); err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(tmp, "go.log")
	env := append(goEnv(), "PATH="+bin+":"+os.Getenv("PATH"), "GOWORK="+filepath.Join(tmp, "go.work"),
		"STUB_LOG="+log, "STUB_METALLB="+mlb, "OUT="+filepath.Join(tmp, "out"))
	calls := func() []string {
		b, _ := os.ReadFile(log)
		_ = os.Remove(log) // absent when nothing ran go
		return strings.Split(strings.TrimSpace(string(b)), "\n")
	}
	build := func(what string) []string {
		t.Helper()
		if out, err := run(t, tmp, env, "bash", filepath.Join(fake, "hack/metallb/build.sh")); err != nil {
			t.Fatalf("%s: build.sh: %v\n%s", what, err, out)
		}
		return calls()
	}

	first := build("first run")
	var builds, lists int
	for _, c := range first {
		if !strings.HasPrefix(c, "GOWORK=off ") {
			t.Errorf("first run: go called without GOWORK=off: %q", c)
		}
		if strings.Contains(c, " build ") {
			builds++
		}
		if strings.Contains(c, " list ") {
			lists++
		}
	}
	if builds != 2 || lists < 2 {
		t.Errorf("first run: %d builds, %d go lists (align_with_project), want 2 and 2:\n%s", builds, lists, strings.Join(first, "\n"))
	}
	if again := build("rerun"); len(again) != 1 || again[0] != "" {
		t.Errorf("rerun with the stamp in place called go:\n%s", strings.Join(again, "\n"))
	}
	writeFile(t, types, "package v1beta1\n\n// changed\n")
	n := 0
	for _, c := range build("after a types.go change") {
		if strings.Contains(c, " build ") {
			n++
		}
	}
	if n != 2 {
		t.Errorf("after a types.go change: %d builds, want 2", n)
	}
}
