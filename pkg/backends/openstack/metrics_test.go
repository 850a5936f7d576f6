package openstack

import (
	"context"
	"testing"

	"k8s.io/component-base/metrics/legacyregistry"
	metricstestutil "k8s.io/component-base/metrics/testutil"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

// TestAPIRequestsMetric: every request to Nova is counted under its
// backend, service and kind, and the Keystone login is not.
func TestAPIRequestsMetric(t *testing.T) {
	f := NewFakeOpenStack(t)
	standardServers(f)
	// A backend name of its own: the counters live as long as the process
	// (go test -count=N runs the test N times in one).
	name := "metrics-os-" + randomID(t)
	c, err := New(context.Background(), backends.Options{Name: name, ClusterID: "test", Settings: f.Settings(t)})
	if err != nil {
		t.Fatal(err)
	}
	inst := c.(*Cloud).instances
	for _, n := range []string{"vm-a", "vm-b", "ghost"} {
		if _, err := inst.InstanceExists(context.Background(), newNode(n)); err != nil {
			t.Fatal(err)
		}
	}
	got, err := metricstestutil.GetCounterValuesFromGatherer(legacyregistry.DefaultGatherer, "multicloud_ccm_openstack_api_requests_total",
		map[string]string{"backend": name, "kind": "read"}, "service")
	if err != nil {
		t.Fatal(err)
	}
	want := f.CallsUnder("GET", "/compute/")
	if want == 0 || f.Auths.Load() == 0 {
		t.Fatalf("the fake saw %d Nova reads and %d logins; want some of each", want, f.Auths.Load())
	}
	others := 0.0
	for service, n := range got {
		if service != "compute" {
			others += n
		}
	}
	if got["compute"] != float64(want) || others != 0 {
		t.Errorf("reads by service = %v; want compute: %d (what Nova saw) and nothing else", got, want)
	}
	if r, w := apiCalls(t, c.(*Cloud)); r != float64(want) || w != 0 {
		t.Errorf("apiCalls = %v reads, %v writes; want %d, 0", r, w, want)
	}
}
