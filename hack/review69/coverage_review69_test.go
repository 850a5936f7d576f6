package review69

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// memo keeps go list's and make -n's answers for the probes of this file
// (each costs seconds of a loaded machine's wall time, little CPU).
var (
	memoMu sync.Mutex
	memo   = map[string]string{}
)

// pkgInfo is what go list says of one package of the module.
type pkgInfo struct {
	path  string
	dir   string
	files []string // every .go file, tests included
	tests bool
}

// listModule lists the module's packages (go list, no compile).
func listModule(t *testing.T) []pkgInfo {
	t.Helper()
	memoMu.Lock()
	defer memoMu.Unlock()
	listed, ok := memo["go list"]
	if !ok {
		goCmd := lookGo(t)
		r := runCmd(t, repoRoot(t), goEnv(), 180*time.Second, goCmd, "list", "-f",
			`{{.ImportPath}}|{{.Dir}}|{{join .GoFiles ","}}|{{join .TestGoFiles ","}}|{{join .XTestGoFiles ","}}`, "./...")
		if r.code != 0 {
			t.Fatalf("go list ./...: exit %d\n%s", r.code, r.out)
		}
		listed = r.out
		memo["go list"] = listed
	}
	var out []pkgInfo
	for _, l := range strings.Split(strings.TrimSpace(listed), "\n") {
		f := strings.Split(l, "|")
		if len(f) != 5 {
			continue
		}
		p := pkgInfo{path: f[0], dir: f[1], tests: f[3] != "" || f[4] != ""}
		for _, list := range f[2:] {
			for _, name := range strings.Split(list, ",") {
				if name != "" {
					p.files = append(p.files, filepath.Join(f[1], name))
				}
			}
		}
		out = append(out, p)
	}
	if len(out) < 20 {
		t.Fatalf("go list listed %d packages:\n%s", len(out), listed)
	}
	return out
}

// makeDry runs make -n TARGET on the real Makefile, nothing executed.
func makeDry(t *testing.T, target string, vars ...string) string {
	t.Helper()
	memoMu.Lock()
	defer memoMu.Unlock()
	key := "make -n " + target + " " + strings.Join(vars, " ")
	if out, ok := memo[key]; ok {
		return out
	}
	goCmd := lookGo(t)
	args := append([]string{"-n", "--no-print-directory", target, "GO=" + goCmd, "OUT=" + t.TempDir()}, vars...)
	r := runCmd(t, repoRoot(t), env("GOWORK=off"), 300*time.Second, "make", args...)
	if r.code != 0 {
		t.Fatalf("make %v: exit %d\n%s", args, r.code, r.out)
	}
	memo[key] = r.out
	return r.out
}

// goTestPackages returns the module's import paths on the go test lines
// of a make -n output, by line.
func goTestPackages(out string) [][]string {
	var lines [][]string
	for _, l := range strings.Split(out, "\n") {
		if !strings.Contains(l, " test ") {
			continue
		}
		var pkgs []string
		for _, w := range strings.Fields(l) {
			if w == mod || strings.HasPrefix(w, mod+"/") {
				pkgs = append(pkgs, w)
			}
		}
		if len(pkgs) > 0 {
			lines = append(lines, pkgs)
		}
	}
	return lines
}

// TestReview69EveryTestPackageInAStage: every package of the module with
// a test file is run by exactly one of make test's stages, as make
// evaluates them: make unit's two go test runs (pkg/admission without
// -race, the rest with it), make e2e's (E2E_PKGS) and hack/chaos.sh's
// (./test/chaos/, the chaos-slice stage), and those stages, with
// upstream-aws's and promrules's (their own modules, ./...), are in
// TEST_STAGES. UNIT_PKGS's grep -v '/test/e2e' -e '/test/chaos' must drop
// only what the other two run.
func TestReview69EveryTestPackageInAStage(t *testing.T) {
	root := repoRoot(t)
	pkgs := listModule(t)

	stageOf := map[string][]string{}
	unit := goTestPackages(makeDry(t, "unit", "RACE_GOWORK="))
	if len(unit) != 2 {
		t.Fatalf("make -n unit: %d go test lines, want 2 (without and with -race)", len(unit))
	}
	for i, name := range []string{"unit (no -race)", "unit (-race)"} {
		for _, p := range unit[i] {
			stageOf[p] = append(stageOf[p], name)
		}
	}
	e2e := goTestPackages(makeDry(t, "e2e"))
	if len(e2e) != 1 {
		t.Fatalf("make -n e2e: %d go test lines of this module's packages, want 1", len(e2e))
	}
	for _, p := range e2e[0] {
		stageOf[p] = append(stageOf[p], "e2e")
	}
	chaos := readFile(t, filepath.Join(root, "hack/chaos.sh"))
	m := regexp.MustCompile(`(?m)^go test .* \./(test/chaos)/? `).FindStringSubmatch(chaos)
	if m == nil {
		t.Fatalf("hack/chaos.sh: no go test line of ./test/chaos/")
	}
	stageOf[mod+"/"+m[1]] = append(stageOf[mod+"/"+m[1]], "chaos-slice")

	for _, p := range pkgs {
		if !p.tests {
			continue
		}
		switch n := len(stageOf[p.path]); {
		case n == 0:
			t.Errorf("%s has tests and no stage of make test runs them", p.path)
		case n > 1:
			t.Errorf("%s runs in %v", p.path, stageOf[p.path])
		}
	}

	mk := readFile(t, filepath.Join(root, "Makefile"))
	ts := regexp.MustCompile(`(?m)^TEST_STAGES := (.*)$`).FindStringSubmatch(mk)
	if ts == nil {
		t.Fatal("Makefile: no TEST_STAGES")
	}
	have := map[string]bool{}
	for _, g := range strings.Fields(ts[1]) {
		for _, s := range strings.Split(g, "+") {
			have[s] = true
		}
	}
	for _, s := range []string{"vet", "openstack-up", "unit", "chaos-slice", "e2e", "promrules", "fuzz", "upstream-aws", "lint"} {
		if !have[s] {
			t.Errorf("TEST_STAGES lacks %s: %s", s, ts[1])
		}
	}
	// The other modules: their recipes test ./... of their folder.
	for _, s := range []string{"upstream-aws", "promrules"} {
		out := makeDry(t, s)
		if !regexp.MustCompile(`cd test/` + s + ` && .* test -vet=off -count=1 .*\./\.\.\.`).MatchString(out) {
			t.Errorf("make -n %s runs no go test of test/%s/...:\n%s", s, s, out)
		}
	}
}

// TestReview69NoRacePackagesStartNoGoroutine: the Makefile runs
// NORACE_PKGS (pkg/admission) without -race because "its code starts no
// goroutine", and names the only parallel subtests its tests run
// (TestAdmissionDifferential, TestPolicyAgreesWithReaders). Every file of
// those packages, tests included, is parsed: no go statement, no
// time.AfterFunc, no errgroup or WaitGroup, and t.Parallel only in those
// two tests. Any package of the module with a go statement must be in
// the -race run (or be one of e2e's and chaos's, never raced).
func TestReview69NoRacePackagesStartNoGoroutine(t *testing.T) {
	root := repoRoot(t)
	mk := readFile(t, filepath.Join(root, "Makefile"))
	m := regexp.MustCompile(`(?m)^NORACE_PKGS := (.*)$`).FindStringSubmatch(mk)
	if m == nil {
		t.Fatal("Makefile: no NORACE_PKGS")
	}
	norace := map[string]bool{}
	for _, p := range strings.Fields(m[1]) {
		norace[p] = true
	}
	allowedParallel := map[string]bool{"TestAdmissionDifferential": true, "TestPolicyAgreesWithReaders": true}
	race := map[string]bool{}
	unit := goTestPackages(makeDry(t, "unit", "RACE_GOWORK="))
	if len(unit) == 2 {
		for _, p := range unit[1] {
			race[p] = true
		}
	}
	for _, p := range listModule(t) {
		var goStmts []string
		for _, f := range p.files {
			fset := token.NewFileSet()
			file, err := parser.ParseFile(fset, f, nil, 0)
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			for _, d := range file.Decls {
				fn, _ := d.(*ast.FuncDecl)
				ast.Inspect(d, func(n ast.Node) bool {
					switch x := n.(type) {
					case *ast.GoStmt:
						goStmts = append(goStmts, fset.Position(x.Pos()).String())
					case *ast.SelectorExpr:
						if !norace[p.path] {
							break
						}
						if id, ok := x.X.(*ast.Ident); ok {
							s := id.Name + "." + x.Sel.Name
							if s == "time.AfterFunc" || s == "sync.WaitGroup" || s == "errgroup.Group" {
								t.Errorf("%s (run without -race): %s at %s", p.path, s, fset.Position(x.Pos()))
							}
						}
						if x.Sel.Name == "Parallel" && (fn == nil || !allowedParallel[fn.Name.Name]) {
							name := "?"
							if fn != nil {
								name = fn.Name.Name
							}
							t.Errorf("%s (run without -race): a parallel test the Makefile does not name, in %s at %s", p.path, name, fset.Position(x.Pos()))
						}
					}
					return true
				})
			}
		}
		if len(goStmts) == 0 {
			continue
		}
		switch {
		case norace[p.path]:
			t.Errorf("%s runs without -race (NORACE_PKGS) and starts goroutines: %v", p.path, goStmts)
		case race[p.path], strings.HasPrefix(p.path, mod+"/test/e2e"), p.path == mod+"/test/chaos":
		case !p.tests:
			// No tests of its own: its goroutines run in its importers'
			// tests.
		default:
			t.Errorf("%s starts goroutines (%s) and is not in make unit's -race run", p.path, goStmts[0])
		}
	}
	if len(norace) == 0 {
		t.Fatal("NORACE_PKGS is empty")
	}
}
