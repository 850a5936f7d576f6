package review68

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// helmStubGo stands for go in hack/helm/install.sh (and hack/align.sh): it
// logs each call; `mod download -json` names a helm go.mod requiring
// client-go v0.37.0; `get` needs the scratch go.mod in its directory before
// and after FAKE_GET_SLEEP seconds and appends to it (as the real go get
// writes go.mod in the current directory); `list` prints nothing (nothing
// to align); `build -o OUT` needs go.mod too and writes a helm reporting
// v3.22.0 at OUT, relative to its directory as go build's -o is.
const helmStubGo = `#!/usr/bin/env bash
echo "go $* (in $PWD)" >> "$FAKE_DIR/go.log"
case $1 in
mod)
  if [ "$2" = download ]; then printf '{\n\t"GoMod": "%s"\n}\n' "$FAKE_DIR/helm.mod"; fi
  exit 0 ;;
get)
  [ -f go.mod ] || { echo "go: go.mod not found in the current directory" >&2; exit 1; }
  sleep "${FAKE_GET_SLEEP:-0}"
  [ -f go.mod ] || { echo "go: go.mod not found in the current directory (removed while go get ran)" >&2; exit 1; }
  echo "require helm.sh/helm/v3 v3.22.0" >> go.mod || exit 1
  exit 0 ;;
list) exit 0 ;;
build)
  out=
  while [ $# -gt 0 ]; do [ "$1" = -o ] && out=$2; shift; done
  [ -f go.mod ] || { echo "go: cannot find main module" >&2; exit 1; }
  mkdir -p "$(dirname "$out")"
  printf '#!/bin/sh\necho v3.22.0\n' > "$out" && chmod +x "$out"
  exit 0 ;;
esac
exit 0
`

type helmTree struct{ root, fake string }

func newHelmTree(t *testing.T) helmTree {
	t.Helper()
	src := repoRoot(t)
	root := t.TempDir()
	fake := filepath.Join(root, "fakebin")
	for _, f := range []string{"hack/helm/install.sh", "hack/align.sh", "hack/goflags.sh"} {
		copyFile(t, filepath.Join(root, f), filepath.Join(src, f))
	}
	writeExec(t, filepath.Join(root, "go.mod"), "module example.com/project\n\ngo 1.26\n")
	writeExec(t, filepath.Join(fake, "go"), helmStubGo)
	writeExec(t, filepath.Join(fake, "helm.mod"), "module helm.sh/helm/v3\n\nrequire (\n\tk8s.io/client-go v0.37.0\n)\n")
	return helmTree{root, fake}
}

func (h helmTree) run(t *testing.T, dir string, knobs ...string) result {
	t.Helper()
	e := env(append([]string{"PATH=" + h.fake + ":" + os.Getenv("PATH"), "FAKE_DIR=" + h.fake}, knobs...)...)
	return runCmd(t, dir, e, 30*time.Second, "bash", filepath.Join(h.root, "hack/helm/install.sh"))
}

// TestReview68HelmIdempotent (held): a second run with helm there at the
// pinned version calls no go command; the scratch module is removed.
func TestReview68HelmIdempotent(t *testing.T) {
	h := newHelmTree(t)
	if r := h.run(t, h.root); r.code != 0 {
		t.Fatalf("first run: exit %d\n%s", r.code, r.out)
	}
	if _, err := os.Stat(filepath.Join(h.root, "_output/tools/helm")); !os.IsNotExist(err) {
		t.Errorf("scratch module left: %v", err)
	}
	log := readFile(t, filepath.Join(h.fake, "go.log"))
	if !strings.Contains(log, "-ldflags -s -w -X helm.sh/helm/v3/internal/version.version=v3.22.0") ||
		!strings.Contains(log, "k8sVersionMinor=37") || !strings.Contains(log, "build -mod=mod") {
		t.Errorf("go build's flags:\n%s", log)
	}
	_ = os.Remove(filepath.Join(h.fake, "go.log"))
	if r := h.run(t, h.root); r.code != 0 {
		t.Fatalf("second run: exit %d\n%s", r.code, r.out)
	}
	if log := readFile(t, filepath.Join(h.fake, "go.log")); log != "" {
		t.Errorf("the second run ran go:\n%s", log)
	}
}

// TestReview68HelmWorkRemovesCallersDirectory: install.sh takes its scratch
// root from $WORK, a name common enough to be in an operator's environment
// (make hands the environment on to its recipes: make helm, make e2e), and
// runs rm -rf "$WORK/helm" before and after the build. Whatever was there
// is gone. hack/build-control-plane.sh reads the same WORK but never
// removes a folder of it.
func TestReview68HelmWorkRemovesCallersDirectory(t *testing.T) {
	h := newHelmTree(t)
	work := t.TempDir()
	precious := filepath.Join(work, "helm", "charts", "mine.yaml")
	writeExec(t, precious, "apiVersion: v2\n")
	r := h.run(t, h.root, "WORK="+work)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.out)
	}
	if _, err := os.Stat(precious); err != nil {
		t.Errorf("with WORK=%s in the environment, install.sh removed %s (%v)", work, precious, err)
	}
}

// TestReview68HelmConcurrentRuns: two runs of hack/helm/install.sh at once
// (make helm's lock serialises only makes; the script is documented to be
// run by hand: "hack/helm/install.sh builds it") share one scratch folder,
// and each begins with rm -rf of it: the second removes the first's module
// under its go get. `go install helm@version` had no shared folder.
func TestReview68HelmConcurrentRuns(t *testing.T) {
	h := newHelmTree(t)
	var wg sync.WaitGroup
	res := make([]result, 2)
	for i := range res {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			time.Sleep(time.Duration(i) * 400 * time.Millisecond)
			res[i] = h.run(t, h.root, "FAKE_GET_SLEEP=1.5")
		}(i)
	}
	wg.Wait()
	for i, r := range res {
		if r.code != 0 {
			t.Errorf("run %d of 2 run side by side failed (exit %d):\n%s", i+1, r.code, r.out)
		}
	}
}

// TestReview68HelmRelativeTools: with a relative TOOLS the binary is built
// relative to the scratch folder (go build -o after cd "$dir"), removed with
// it, and the final check looks relative to ROOT: a full build, then
// "does not report v3.22.0". go install refused at once before (GOBIN must
// be an absolute path).
func TestReview68HelmRelativeTools(t *testing.T) {
	h := newHelmTree(t)
	r := h.run(t, h.root, "TOOLS=rel/bin")
	_, err := os.Stat(filepath.Join(h.root, "rel/bin/helm"))
	switch {
	case r.code == 0 && err != nil:
		t.Errorf("exit 0 without %s/rel/bin/helm", h.root)
	case r.code != 0 && !strings.Contains(r.out, "absolute"):
		t.Errorf("TOOLS=rel/bin: after a build, exit %d with:\n%s", r.code, r.out)
	}
}
