// Package gogcprobe is run by hack/review71's probes through the real
// Makefile's make unit (UNIT_PKGS naming this package): its test reports
// the GOGC its binary ran with, and that of a copy of itself it re-executes
// (os.Args[0], as internal/backendtest and pkg/backends/openstack do), into
// $REVIEW71_OUT. It lives under testdata so that ./... never lists it.
package gogcprobe

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
	"time"
)

func describe() string {
	v, ok := os.LookupEnv("GOGC")
	env := "unset"
	if ok {
		env = "=" + v
	}
	p := debug.SetGCPercent(-1)
	debug.SetGCPercent(p)
	return fmt.Sprintf("env %s percent %d", env, p)
}

func TestGOGC(t *testing.T) {
	out := os.Getenv("REVIEW71_OUT")
	if out == "" {
		t.Skip("run by hack/review71 only")
	}
	if os.Getenv("REVIEW71_CHILD") != "" {
		fmt.Println("CHILD " + describe())
		return
	}
	switch os.Getenv("REVIEW71_MODE") {
	case "panic":
		panic("review71: a panicking test")
	case "sleep":
		if err := os.WriteFile(filepath.Join(out, "pid"), fmt.Appendf(nil, "%d", os.Getpid()), 0o644); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Minute)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestGOGC$", "-test.count=1")
	cmd.Env = append(os.Environ(), "REVIEW71_CHILD=1")
	b, err := cmd.CombinedOutput()
	child := "child failed: " + fmt.Sprint(err)
	if err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "CHILD ") {
				child = strings.TrimPrefix(l, "CHILD ")
			}
		}
	}
	report := fmt.Sprintf("self %s\nchild %s\nargv0 %s\n", describe(), child, os.Args[0])
	if err := os.WriteFile(filepath.Join(out, "report"), []byte(report), 0o644); err != nil {
		t.Fatal(err)
	}
}
