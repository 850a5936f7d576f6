package router

import (
	"context"
	"maps"
	"testing"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
)

// TestDecisionCarriesTheWrite (issue 40): under DecisionForWrite, the
// controller's context, EnsureLoadBalancer leaves the Service's write to
// the caller and the decision carries it: its Status is the call's, and
// its annotation changes for the copy handed (Changes) are the
// decision's Annotations, the value Decide gives `plan`; the router wrote
// neither itself.
func TestDecisionCarriesTheWrite(t *testing.T) {
	a := newLBCloud("a", "192.0.2.1")
	r := mustRouter(t, testConfig(), lbBackend("a", "baremetal", a))
	c := startCluster(t, r, newService("s", withLBBackend("a")))
	svc := c.service(t, "s")
	ctx, d := DecisionForWrite(context.Background())
	st, err := r.EnsureLoadBalancer(ctx, cluster, svc, nil)
	d.End(st, err)
	if d.Err != nil || d.Status != st {
		t.Fatalf("decision: status %v (call's %v), error %v", d.Status, st, d.Err)
	}
	if d.Write() == nil {
		t.Fatal("the decision carries no write")
	}
	changes := d.Changes(svc)
	want := map[string]*string{}
	for k, v := range d.Annotations {
		want[string(k)] = v
	}
	if v := changes[string(annotation.LoadBalancerServedBy)]; v == nil || *v != "a" {
		t.Errorf("changes %v; want served-by a", changes)
	}
	if !maps.EqualFunc(changes, want, func(x, y *string) bool { return (x == nil) == (y == nil) && (x == nil || *x == *y) }) {
		t.Errorf("changes %v, decision's annotations %v; want the same", changes, want)
	}
	if got := c.service(t, "s").Annotations[string(annotation.LoadBalancerServedBy)]; got != "" {
		t.Errorf("the router wrote served-by %q itself; the write is the caller's", got)
	}
}
