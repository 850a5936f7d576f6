package chart

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestDockerfile checks what can be checked without a container engine:
// a multi-stage build of a static binary onto a distroless non-root base,
// every base pinned by digest,
// and that the folders the build copies (and .dockerignore lets through)
// hold every package of this module the binary imports.
func TestDockerfile(t *testing.T) {
	root := repoRoot(t)
	b, err := os.ReadFile(filepath.Join(root, "Dockerfile")) //nolint:gosec // The repository's Dockerfile.
	if err != nil {
		t.Fatal(err)
	}
	df := string(b)
	froms := regexp.MustCompile(`(?m)^FROM\s+(\S+)(?:\s+AS\s+\S+)?`).FindAllStringSubmatch(strings.ReplaceAll(df, "--platform=$BUILDPLATFORM ", ""), -1)
	if len(froms) != 2 {
		t.Fatalf("want a two-stage build, found %d FROM lines", len(froms))
	}
	// Every base is pinned by digest: a tag alone can change under a build.
	pinned := regexp.MustCompile(`^[^@\s]+:[^@\s]+@sha256:[0-9a-f]{64}$`)
	for _, f := range froms {
		if !pinned.MatchString(f[1]) {
			t.Errorf("base %s: want name:tag@sha256:<64 hex digits>", f[1])
		}
	}
	if final, _, _ := strings.Cut(froms[1][1], "@"); !strings.HasPrefix(final, "gcr.io/distroless/static") || !strings.HasSuffix(final, ":nonroot") {
		t.Errorf("final stage %s: want distroless static, nonroot", final)
	}
	for _, want := range []string{"CGO_ENABLED=0", "USER 65532:65532", `ENTRYPOINT ["/usr/local/bin/multicloud-ccm"]`, "ARG VERSION=v"} {
		if !strings.Contains(df, want) {
			t.Errorf("Dockerfile lacks %q", want)
		}
	}
	copied := regexp.MustCompile(`(?m)^COPY\s+([a-z]+)/\s`).FindAllStringSubmatch(df, -1)
	dirs := map[string]bool{}
	for _, m := range copied {
		dirs[m[1]] = true
	}
	ignore, err := os.ReadFile(filepath.Join(root, ".dockerignore")) //nolint:gosec // The repository's file.
	if err != nil {
		t.Fatal(err)
	}
	for d := range dirs {
		if !strings.Contains(string(ignore), "!"+d+"/") {
			t.Errorf(".dockerignore does not let %s/ through, which the Dockerfile copies", d)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "list", "-deps", "-f", "{{if .Module}}{{if .Module.Main}}{{.Dir}}{{end}}{{end}}", "./cmd/multicloud-ccm")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	pkgs := strings.Fields(string(out))
	if len(pkgs) < 2 {
		t.Fatalf("go list found %d packages of this module behind the binary: %q", len(pkgs), out)
	}
	for _, dir := range pkgs {
		rel, err := filepath.Rel(root, dir)
		if err != nil {
			t.Fatal(err)
		}
		if top := strings.Split(rel, string(filepath.Separator))[0]; !dirs[top] {
			t.Errorf("the binary imports %s, which the Dockerfile does not copy (it copies %v)", rel, dirs)
		}
	}
}
