package review69

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// fuzzGo stands for go in hack/fuzz.sh: go env GOCACHE, go list of an
// import path, and go test -c, which writes a stand-in test binary that
// logs where and how it was run ("DIR ARGS" to $FAKE_LOG) and fails as a
// crashing fuzz target does when -test.fuzz names $FAKE_FAIL. Each go
// test -c's arguments go to $FAKE_LOG.build.
const fuzzGo = `#!/usr/bin/env bash
case $1 in
env) echo "$FAKE_DIR/gocache" ;;
list) for a; do p=$a; done; echo "github.com/multicloud-ccm/multicloud-ccm/${p#./}" ;;
test)
  echo "$*" >> "$FAKE_LOG.build"
  o=
  prev=
  for a; do [ "$prev" != -o ] || o=$a; prev=$a; done
  cat > "$o" <<'BIN'
#!/usr/bin/env bash
echo "$PWD $*" >> "$FAKE_LOG"
for a; do
  if [ "$a" = "-test.fuzz=^$FAKE_FAIL\$" ]; then
    printf -- '--- FAIL: %s (0.10s)\n    --- FAIL: %s (0.00s)\n        x_test.go:10: boom\n\n    Failing input written to testdata/fuzz/%s/0123\nFAIL\n' "$FAKE_FAIL" "$FAKE_FAIL" "$FAKE_FAIL"
    exit 1
  fi
done
echo PASS
BIN
  chmod +x "$o" ;;
*) echo "stub go: $*" >&2; exit 99 ;;
esac
`

// fuzzTargets are the module's fuzz targets, from its test files: func
// FuzzXxx(f *testing.F), by package folder (relative to the root).
func fuzzTargets(t *testing.T) []string {
	t.Helper()
	root := repoRoot(t)
	var out []string
	for _, p := range listModule(t) {
		for _, f := range p.files {
			if !strings.HasSuffix(f, "_test.go") {
				continue
			}
			file, err := parser.ParseFile(token.NewFileSet(), f, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range file.Decls {
				fn, ok := d.(*ast.FuncDecl)
				if !ok || fn.Recv != nil || !strings.HasPrefix(fn.Name.Name, "Fuzz") || len(fn.Type.Params.List) != 1 {
					continue
				}
				star, ok := fn.Type.Params.List[0].Type.(*ast.StarExpr)
				if !ok {
					continue
				}
				if sel, ok := star.X.(*ast.SelectorExpr); ok && sel.Sel.Name == "F" {
					rel, _ := filepath.Rel(root, p.dir)
					out = append(out, rel+" "+fn.Name.Name)
				}
			}
		}
	}
	sort.Strings(out)
	return out
}

// runFuzz runs a copy of the real hack/fuzz.sh in a tree whose folders
// are links to the real ones (its _output its own), with the stub go and
// a git that lists the real tree's files.
func runFuzz(t *testing.T, extra ...string) (result, string, string) {
	t.Helper()
	src := repoRoot(t)
	root := t.TempDir()
	fake := filepath.Join(root, "fakebin")
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		switch e.Name() {
		case "hack", "_output", ".git":
			continue
		}
		if err := os.Symlink(filepath.Join(src, e.Name()), filepath.Join(root, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	hents, err := os.ReadDir(filepath.Join(src, "hack"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "hack"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, e := range hents {
		if e.Name() == "fuzz.sh" {
			continue
		}
		if err := os.Symlink(filepath.Join(src, "hack", e.Name()), filepath.Join(root, "hack", e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	copyFile(t, filepath.Join(root, "hack/fuzz.sh"), filepath.Join(src, "hack/fuzz.sh"))
	writeExec(t, filepath.Join(fake, "go"), fuzzGo)
	writeExec(t, filepath.Join(fake, "git"), "#!/usr/bin/env bash\ncd \""+src+"\" && exec \"$REAL_GIT\" \"$@\"\n")
	git := "/usr/bin/git"
	for _, d := range strings.Split(os.Getenv("PATH"), ":") {
		if _, err := os.Stat(filepath.Join(d, "git")); err == nil {
			git = filepath.Join(d, "git")
			break
		}
	}
	log := filepath.Join(fake, "log")
	e := env(append([]string{"PATH=" + fake + ":" + os.Getenv("PATH"), "FAKE_DIR=" + fake, "FAKE_LOG=" + log, "REAL_GIT=" + git}, extra...)...)
	r := runCmd(t, root, e, 60*time.Second, "bash", "hack/fuzz.sh", "1s")
	return r, readFile(t, log), root
}

// TestReview69FuzzRunsEveryTarget: hack/fuzz.sh (the fuzz stage) finds
// every fuzz target of the module (go list's test files, parsed: the
// leaf packages of issue 44 included) and runs each once, from its
// package's folder, fuzzing it alone (-test.fuzz=^Name$, no unit tests),
// for the time given; TESTVET=off (after make test's vet) gives go test
// -c -vet=off, none without it. A crashing target fails the stage with
// go test's FAIL line for it last.
func TestReview69FuzzRunsEveryTarget(t *testing.T) {
	want := fuzzTargets(t)
	if len(want) < 9 {
		t.Fatalf("%d fuzz targets in the module: %v", len(want), want)
	}
	r, log, root := runFuzz(t, "TESTVET=off")
	if r.code != 0 {
		t.Fatalf("hack/fuzz.sh: exit %d\n%s", r.code, r.out)
	}
	var got []string
	for _, l := range strings.Split(strings.TrimSpace(log), "\n") {
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		rel, _ := filepath.Rel(root, f[0])
		name := ""
		var run, fuzztime bool
		for _, a := range f[1:] {
			switch {
			case strings.HasPrefix(a, "-test.fuzz=^"):
				name = strings.TrimSuffix(strings.TrimPrefix(a, "-test.fuzz=^"), "$")
			case a == "-test.run=^$":
				run = true
			case a == "-test.fuzztime=1s":
				fuzztime = true
			}
		}
		if !run || !fuzztime {
			t.Errorf("a fuzz binary run without -test.run=^$ or the fuzz time given: %s", l)
		}
		got = append(got, rel+" "+name)
	}
	sort.Strings(got)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("hack/fuzz.sh ran\n  %s\nthe module's fuzz targets are\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	for _, b := range strings.Split(strings.TrimSpace(readFile(t, filepath.Join(root, "fakebin", "log.build"))), "\n") {
		if !strings.Contains(b, " -vet=off ") {
			t.Errorf("TESTVET=off, and go test -c vets: %s", b)
		}
	}

	// Without TESTVET (make fuzz alone) go test -c vets.
	r2, _, root2 := runFuzz(t)
	if r2.code != 0 {
		t.Fatalf("hack/fuzz.sh without TESTVET: exit %d\n%s", r2.code, r2.out)
	}
	for _, b := range strings.Split(strings.TrimSpace(readFile(t, filepath.Join(root2, "fakebin", "log.build"))), "\n") {
		if strings.Contains(b, "-vet=off") {
			t.Errorf("no TESTVET, and go test -c does not vet: %s", b)
		}
	}

	// One target crashing (the second of the first package) fails the
	// stage, its FAIL line last.
	first := strings.Fields(want[0])
	fail := first[1]
	for _, w := range want[1:] {
		f := strings.Fields(w)
		if f[0] == first[0] {
			fail = f[1]
			break
		}
	}
	r3, log3, _ := runFuzz(t, "FAKE_FAIL="+fail)
	if r3.code == 0 {
		t.Errorf("hack/fuzz.sh passed with %s crashing:\n%s", fail, r3.out)
	}
	lines := strings.Split(strings.TrimRight(r3.out, "\n"), "\n")
	if last := lines[len(lines)-1]; last != "FAIL\t"+mod+"/"+first[0]+"\t(fuzz target "+fail+")" {
		t.Errorf("last line %q:\n%s", last, r3.out)
	}
	if !strings.Contains(r3.out, "Failing input written to") {
		t.Errorf("the crash's output is not shown:\n%s", r3.out)
	}
	if n := strings.Count(log3, "-test.fuzz=^"+fail+"$"); n != 1 {
		t.Errorf("the crashing target ran %d times (a crash is final)", n)
	}
}
