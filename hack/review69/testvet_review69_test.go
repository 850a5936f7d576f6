package review69

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// argsMake stands for make in hack/stages.sh (its MAKE): it logs
// "TARGET ARGS" to $FAKE_EVENTS and exits $FAKE_RC_<target> (- as _)
// after $FAKE_SLEEP_<target> seconds.
const argsMake = `#!/usr/bin/env bash
t=
for a in "$@"; do case $a in -*|*=*) ;; *) t=$a; break ;; esac; done
v=${t//-/_}
echo "$t $*" >> "$FAKE_EVENTS"
s=FAKE_SLEEP_$v r=FAKE_RC_$v
sleep "${!s:-0}"
exit "${!r:-0}"
`

func runStagesArgs(t *testing.T, knobs []string, stages ...string) (result, map[string]string) {
	t.Helper()
	root := repoRoot(t)
	dir := t.TempDir()
	mk := filepath.Join(dir, "fake-make")
	writeExec(t, mk, argsMake)
	events := filepath.Join(dir, "events")
	e := env(append([]string{"MAKE=" + mk, "OUT=" + filepath.Join(dir, "out"), "FAKE_EVENTS=" + events}, knobs...)...)
	r := runCmd(t, root, e, 60*time.Second, "bash", append([]string{filepath.Join(root, "hack/stages.sh")}, stages...)...)
	time.Sleep(200 * time.Millisecond)
	runs := map[string]string{}
	for _, l := range strings.Split(readFile(t, events), "\n") {
		if target, args, ok := strings.Cut(l, " "); ok {
			runs[target] = args
		}
	}
	return r, runs
}

// TestReview69TestvetOffOnlyAfterVetPassed: hack/stages.sh gives a stage
// TESTVET=off (go test -vet=off) only after a group with the vet stage
// passed: not without vet in the stages, not to vet's own group (vet
// beside openstack-up, or as a side stage), never when vet (foreground
// or side) or a stage beside it failed, and not to the background builds.
func TestReview69TestvetOffOnlyAfterVetPassed(t *testing.T) {
	t.Run("no vet stage", func(t *testing.T) {
		t.Parallel()
		r, runs := runStagesArgs(t, nil, "unit", "chaos-slice")
		if r.code != 0 {
			t.Fatalf("exit %d\n%s", r.code, r.out)
		}
		for s, a := range runs {
			if strings.Contains(a, "TESTVET") {
				t.Errorf("%s got %q without a vet stage", s, a)
			}
		}
	})
	t.Run("vet passed", func(t *testing.T) {
		t.Parallel()
		r, runs := runStagesArgs(t, nil, "vet+openstack-up", "unit", "chaos-slice", "e2e+lint+promrules")
		if r.code != 0 {
			t.Fatalf("exit %d\n%s", r.code, r.out)
		}
		for _, s := range []string{"vet", "openstack-up", "e2e-deps"} {
			if strings.Contains(runs[s], "TESTVET") {
				t.Errorf("%s got %q", s, runs[s])
			}
		}
		for _, s := range []string{"unit", "chaos-slice", "e2e", "lint", "promrules"} {
			if !strings.Contains(runs[s], "TESTVET=off") {
				t.Errorf("%s after vet passed got %q", s, runs[s])
			}
		}
	})
	for _, c := range []struct {
		name   string
		knobs  []string
		stages []string
	}{
		{"vet fails", []string{"FAKE_RC_vet=1", "FAKE_SLEEP_openstack_up=5"}, []string{"vet+openstack-up", "unit"}},
		{"vet fails beside openstack-up", []string{"FAKE_RC_vet=1", "FAKE_SLEEP_vet=0.5"}, []string{"openstack-up+vet", "unit"}},
		{"openstack-up fails beside vet", []string{"FAKE_RC_openstack_up=1", "FAKE_SLEEP_vet=0.5"}, []string{"vet+openstack-up", "unit"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r, runs := runStagesArgs(t, c.knobs, c.stages...)
			if r.code == 0 {
				t.Errorf("exit 0:\n%s", r.out)
			}
			if a, ok := runs["unit"]; ok {
				t.Errorf("unit ran (%q) after its group failed:\n%s", a, r.out)
			}
		})
	}
}
