package scale

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestUpdatesLogged: the node-sync phase counts a load balancer updated by
// our controller's line, upstream's, or the AWS backend's deregistration
// (which a drift-repair pass's reconcile logs too: at 5,000 NLBs a pass
// began during the node sync and made most of the updates, which the
// phase did not count, so it waited for its timeout); a Service of
// another namespace, or a line before the offset, does not count.
func TestUpdatesLogged(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ccm.log")
	before := `I1127 18:20:50.000000 1 sync.go:1] "Updated the load balancer's targets" service="scale/s00000"` + "\n"
	lines := []string{
		`I1127 18:20:52.072129 1 lb_targets.go:267] "Deregistered targets" controller="multicloud-load-balancer" service="scale/s01936" backend="aws" operation="EnsureLoadBalancer" count=1`,
		`I1127 18:20:53.000000 1 sync.go:231] "Updated the load balancer's targets" controller="multicloud-load-balancer" service="scale/s00001"`,
		`I1127 18:20:54.000000 1 controller.go:1] Updating backends for load balancer scale/s00002 with 999 nodes: [n1]`,
		`I1127 18:20:55.000000 1 lb_targets.go:267] "Deregistered targets" service="other/s00003" backend="aws"`,
		`I1127 18:20:56.000000 1 lb_targets.go:267] "Registered targets" service="scale/s00004" backend="aws"`,
	}
	if err := os.WriteFile(path, []byte(before+strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	logged := map[string]bool{}
	updatesLogged(path, int64(len(before)), logged)
	var got []string
	for n := range logged {
		got = append(got, n)
	}
	slices.Sort(got)
	if want := []string{"s00001", "s00002", "s01936"}; !slices.Equal(got, want) {
		t.Errorf("updated %v, want %v", got, want)
	}
}
