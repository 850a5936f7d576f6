package baremetal

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

// TestReview67NewRefusesSettingsThatFailedValidation: New validates only
// Settings whose Compiled() is nil. Settings that validated once, were then
// changed and failed their next Validate still carry the old compiled
// form, and New builds a backend from it (pools and all) instead of
// refusing them, as it refuses the same Settings never validated.
func TestReview67NewRefusesSettingsThatFailedValidation(t *testing.T) {
	s := &Settings{AddressPools: []AddressPool{{Name: "p", Addresses: []string{"192.0.2.0/30"}}}}
	if errs := s.Validate(field.NewPath(Type)); len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	s.AddressPools[0].Addresses = []string{"bogus"}
	if errs := s.Validate(field.NewPath(Type)); len(errs) == 0 {
		t.Fatal("Validate accepted bogus")
	}
	if _, err := New(context.Background(), backends.Options{Name: "metal", ClusterID: "c1", Settings: s}); err == nil {
		t.Error("New built a backend from Settings whose last Validate failed (from the previous validation's pools); want their errors")
	}
	fresh := &Settings{AddressPools: []AddressPool{{Name: "p", Addresses: []string{"bogus"}}}}
	if _, err := New(context.Background(), backends.Options{Name: "metal", ClusterID: "c1", Settings: fresh}); err == nil {
		t.Error("New accepted never-validated Settings with address bogus")
	}
}

const review67Before = `
addressPools:
- name: general
  addresses: ["192.0.2.0/29"]
- name: gold
  addresses: ["198.51.100.0/29"]
  priority: 2
`

// TestReview67ReloadReordersByPriority: a live reload that adds a pool of
// a lower priority, listed last, and later removes the pool a Service
// holds an address of. The new pool is tried first (ComparePools, as
// MetalLB); the held address is kept while its pool stays, and replaced
// from the first pool once its pool is gone.
func TestReview67ReloadReordersByPriority(t *testing.T) {
	ctx := context.Background()
	c := newTestCloud(t, review67Before)
	lb := c.lb
	lb.Seed(nil)
	st, err := lb.EnsureLoadBalancer(ctx, "c1", newService("x"), nil)
	if err != nil || ingressIPs(st) != "198.51.100.1" {
		t.Fatalf("before the reload, x got %q, %v; want 198.51.100.1 (gold has a priority)", ingressIPs(st), err)
	}
	reload := func(section string) {
		t.Helper()
		s, errs := parseYAML(t, section)
		if len(errs) > 0 {
			t.Fatal(errs.ToAggregate())
		}
		_, apply, err := c.PrepareReconfigure(ctx, backends.Options{Name: "metal", ClusterID: "c1", Settings: s})
		if err != nil {
			t.Fatal(err)
		}
		apply()
	}
	reload(review67Before + `- name: silver
  addresses: ["203.0.113.0/29"]
  priority: 1
`)
	if st, err := lb.EnsureLoadBalancer(ctx, "c1", newService("x", withStatus("198.51.100.1")), nil); err != nil || ingressIPs(st) != "198.51.100.1" {
		t.Errorf("after adding silver, x re-ensured to %q, %v; want it to keep 198.51.100.1", ingressIPs(st), err)
	}
	if st, err := lb.EnsureLoadBalancer(ctx, "c1", newService("y"), nil); err != nil || ingressIPs(st) != "203.0.113.1" {
		t.Errorf("after adding silver (priority 1), y got %q, %v; want 203.0.113.1", ingressIPs(st), err)
	}
	reload(`
addressPools:
- name: silver
  addresses: ["203.0.113.0/29"]
  priority: 1
- name: general
  addresses: ["192.0.2.0/29"]
`)
	if st, err := lb.EnsureLoadBalancer(ctx, "c1", newService("x", withStatus("198.51.100.1")), nil); err != nil || ingressIPs(st) != "203.0.113.2" {
		t.Errorf("after removing gold, x re-ensured to %q, %v; want 203.0.113.2 (silver's next)", ingressIPs(st), err)
	}
}

// TestReview67TwoBackendsOfOneSettings: two backends built from the same
// parsed Settings (a dry run beside the live backend) share the compiled
// pools (poolState embeds *bmconfig.Pool) but no allocation state.
func TestReview67TwoBackendsOfOneSettings(t *testing.T) {
	ctx := context.Background()
	s, errs := parseYAML(t, review67Before)
	if len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	var lbs [2]*LoadBalancer
	for i := range lbs {
		c, err := New(ctx, backends.Options{Name: "metal", ClusterID: "c1", Settings: s})
		if err != nil {
			t.Fatal(err)
		}
		lbs[i] = c.(*Cloud).lb
		lbs[i].Seed(nil)
	}
	for i, name := range []string{"a", "b"} {
		st, err := lbs[i].EnsureLoadBalancer(ctx, "c1", newService(name), nil)
		if err != nil || ingressIPs(st) != "198.51.100.1" {
			t.Errorf("backend %d: %s got %q, %v; want 198.51.100.1 (its own allocator)", i, name, ingressIPs(st), err)
		}
	}
	if lbs[0].alloc.pools[0].Pool != lbs[1].alloc.pools[0].Pool {
		t.Log("the two backends do not share compiled pools")
	}
}
