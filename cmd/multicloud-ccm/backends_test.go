package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/config"
)

// TestCompiledInBackends: backends.go compiles in every backend package of
// the tree (a folder of pkg/backends whose code calls backends.Register,
// named after the type it registers), each registered with the router's
// registry and the config parser alike, and "config validate --help" lists
// them from the registry. A new backend package needs only its import line
// in backends.go for this test to pass.
func TestCompiledInBackends(t *testing.T) {
	want := backendPackages(t)
	if len(want) == 0 {
		t.Fatal("no backend package found under pkg/backends")
	}
	if got := backends.Types(); !slices.Equal(got, want) {
		t.Errorf("backends.Types() = %v, want %v", got, want)
	}
	if got := config.RegisteredTypes(); !slices.Equal(got, want) {
		t.Errorf("config.RegisteredTypes() = %v, want %v", got, want)
	}
	out, _, err := run(t, "validate", "--help")
	if err != nil {
		t.Fatal(err)
	}
	if line := "Backend types compiled in: " + strings.Join(want, ", ") + "."; !strings.Contains(out, line) {
		t.Errorf("help does not say %q:\n%s", line, out)
	}
}

// backendPackages lists the folders of pkg/backends whose non-test code
// calls backends.Register, sorted.
func backendPackages(t *testing.T) []string {
	t.Helper()
	root := filepath.Join("..", "..", "pkg", "backends")
	dirs, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, d := range dirs {
		if !d.IsDir() {
			continue
		}
		files, err := filepath.Glob(filepath.Join(root, d.Name(), "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			src, err := os.ReadFile(f) //nolint:gosec // The repository's own sources.
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(src), "backends.Register(") {
				out = append(out, d.Name())
				break
			}
		}
	}
	slices.Sort(out)
	return out
}
