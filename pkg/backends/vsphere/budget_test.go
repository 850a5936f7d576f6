package vsphere

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/cloudapi"
)

// apiCalls sums multicloud_ccm_cloud_api_calls_total of the test backend's
// vcenter API whose action passes keep.
func apiCalls(t testing.TB, outcome string, keep func(action string) bool) float64 {
	t.Helper()
	mfs, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != "multicloud_ccm_cloud_api_calls_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, lp := range m.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			if l["backend"] == "onprem" && l["api"] == cloudapi.APIVCenter && l["outcome"] == outcome && keep(l["action"]) {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

func action(name string) func(string) bool { return func(a string) bool { return a == name } }

func budgetWaited(t testing.TB) float64 {
	return testutil.CounterSum(t, "multicloud_ccm_cloud_api_budget_wait_seconds_total", map[string]string{"backend": "onprem", "api": cloudapi.APIVCenter})
}

// TestAPIBudgetCountsCalls: every call of a vCenter session is counted in
// multicloud_ccm_cloud_api_calls_total{backend,api="vcenter",action,outcome}
// with its SOAP method (the service content read as the client is made,
// the login, the inventory's view and retrievals, the power-state read
// confirming a VM powered off) or,
// for the tagging service, its vAPI path: all the HTTP requests vcsim saw.
func TestAPIBudgetCountsCalls(t *testing.T) {
	s := startSim(t)
	vms := guestAll(t, s, 1)
	s.powerOff(t, vms[1])
	c := newCloud(t, []*sim{s}, withZones())
	s.tag(t, "k8s-zone", "zone-a", "/DC0")
	s.tag(t, "k8s-region", "region-1", "/DC0")
	all := func(string) bool { return true }
	before := map[string]float64{}
	for _, a := range []string{"RetrieveServiceContent", "Login", "CreateContainerView", "RetrievePropertiesEx", "DestroyView"} {
		before[a] = apiCalls(t, cloudapi.OutcomeSuccess, action(a))
	}
	vapi := func(a string) bool {
		return strings.HasPrefix(a, "POST /rest/com/vmware/cis") || strings.HasPrefix(a, "GET /rest/com/vmware/cis")
	}
	vapiBefore := apiCalls(t, cloudapi.OutcomeSuccess, vapi)
	allBefore := apiCalls(t, cloudapi.OutcomeSuccess, all) + apiCalls(t, cloudapi.OutcomeError, all)
	requests := s.requests.Load()

	node := newNode("a", withVM(vms[0]))
	if md, err := c.InstanceMetadata(context.Background(), node); err != nil || md.Zone != "zone-a" {
		t.Fatalf("InstanceMetadata = %+v, %v", md, err)
	}
	if shut, err := c.InstanceShutdown(context.Background(), newNode("b", withVM(vms[1]))); err != nil || !shut {
		t.Fatalf("InstanceShutdown of a VM powered off = %v, %v", shut, err)
	}
	for a, b := range before {
		if got := apiCalls(t, cloudapi.OutcomeSuccess, action(a)) - b; got < 1 {
			t.Errorf("calls_total{action=%q,outcome=success} grew by %v, want at least 1", a, got)
		}
	}
	if got := apiCalls(t, cloudapi.OutcomeSuccess, vapi) - vapiBefore; got < 2 {
		t.Errorf("the tagging service's calls grew by %v, want its login and reads", got)
	}
	counted := apiCalls(t, cloudapi.OutcomeSuccess, all) + apiCalls(t, cloudapi.OutcomeError, all) - allBefore
	if seen := float64(s.requests.Load() - requests); counted != seen {
		t.Errorf("calls_total grew by %v, but vcsim answered %v requests", counted, seen)
	}
}

// TestAPIBudgetSlowsBurst: with a tiny budget (2 reads a second, a bucket
// of 1), 6 power-state reads at once (InstanceShutdown of a VM powered
// off confirms it with a read) wait for their tokens (counted in
// budget_wait_seconds_total: 0.5 + 1 + ... + 2.5 = 7.5 s in all), and none
// fails; under the
// default budget (10 a second, a bucket of 20) the same burst waits for
// nothing.
func TestAPIBudgetSlowsBurst(t *testing.T) {
	s := startSim(t)
	vms := s.vms(t, "DC0")
	s.powerOff(t, vms[0])
	burst := func(c *Cloud) float64 {
		t.Helper()
		node := newNode("a", withVM(vms[0]))
		if ok, err := c.InstanceExists(context.Background(), node); err != nil || !ok {
			t.Fatalf("InstanceExists = %v, %v", ok, err)
		}
		waited := budgetWaited(t)
		var wg sync.WaitGroup
		errs := make(chan error, 6)
		for range 6 {
			wg.Go(func() {
				off, err := c.InstanceShutdown(context.Background(), node)
				switch {
				case err != nil:
					errs <- err
				case !off:
					errs <- errors.New("InstanceShutdown = false of a VM powered off")
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Errorf("a power-state read failed under the budget: %v", err)
		}
		return budgetWaited(t) - waited
	}
	tiny := newCloud(t, []*sim{s}, func(sj *settingsJSON) {
		sj.RequestTimeout = "30s"
		sj.RateLimits = map[string]any{"vcenter": map[string]any{"qps": 2, "bucket": 1}}
	})
	if waited := burst(tiny); waited < 2 {
		t.Errorf("6 reads at 2 a second waited %.2fs in all, want about 7.5s (each waits for those before it)", waited)
	}
	if waited := burst(newCloud(t, []*sim{s})); waited != 0 {
		t.Errorf("6 reads under the default budget waited %.2fs", waited)
	}
}

// TestStandbyKeepsSession: with the mutation gate closed (a standby, or a
// replica that lost its lease), the vCenter session's logins (SOAP Login,
// the tagging service's session) and reads still pass: Login counts as a
// change for the budget, but only of the session's own state. Not
// parallel: the gate is the process's.
func TestStandbyKeepsSession(t *testing.T) {
	s := startSim(t)
	vms := guestAll(t, s, 1)
	s.tag(t, "k8s-zone", "zone-a", "/DC0")
	s.tag(t, "k8s-region", "region-1", "/DC0")
	old := cloudapi.SetMutationGate(func(context.Context) error { return errors.New("standby") })
	t.Cleanup(func() { cloudapi.SetMutationGate(old) })
	c := newCloud(t, []*sim{s}, withZones())
	if md, err := c.InstanceMetadata(context.Background(), newNode("a", withVM(vms[0]))); err != nil || md.Zone != "zone-a" {
		t.Fatalf("InstanceMetadata with the gate closed = %+v, %v; want the zone read through a session logged in", md, err)
	}
	for _, m := range []string{"Login", "LoginByToken", "Logout", "CloneSession"} {
		if !soapSession(m) {
			t.Errorf("soapSession(%q) = false", m)
		}
	}
	for _, m := range []string{"ReconfigVM_Task", "TerminateSession", "RetrievePropertiesEx"} {
		if soapSession(m) {
			t.Errorf("soapSession(%q) = true", m)
		}
	}
}
