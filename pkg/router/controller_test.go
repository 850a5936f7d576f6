package router

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stesting "k8s.io/client-go/testing"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
)

// serviceWrites counts the clientset's mutating requests on Services.
// Events are left out: the recorder sends them from its own goroutine, so
// an event of an earlier step can land after ClearActions.
func serviceWrites(actions []k8stesting.Action) int {
	n := 0
	for _, a := range actions {
		if a.GetResource().Resource != "services" {
			continue
		}
		switch a.GetVerb() {
		case "create", "update", "patch", "delete":
			n++
		}
	}
	return n
}

// TestPreparedServiceCostsNoRouterWrites: a controller that writes
// PrepareLoadBalancer's record itself and ensures under
// DeferServedAnnotations makes the router write nothing to the API server,
// and receives the served annotations to send with its status.
func TestPreparedServiceCostsNoRouterWrites(t *testing.T) {
	r, a, _ := twoClouds(t)
	c := startCluster(t, r, newService("s", withLBBackend("a")))
	svc := c.service(t, "s")

	prep := r.PrepareLoadBalancer(svc)
	rec := prep[string(annotation.LoadBalancerBackends)]
	class := prep[string(annotation.LoadBalancerRecordClass)]
	if len(prep) != 2 || rec == nil || *rec != "a" || class == nil || *class != "" {
		t.Fatalf("PrepareLoadBalancer = %v, want the record naming a and its class, none", prep)
	}
	svc.Annotations[string(annotation.LoadBalancerBackends)] = *rec
	svc.Annotations[string(annotation.LoadBalancerRecordClass)] = *class
	if got := r.PrepareLoadBalancer(svc); got != nil {
		t.Errorf("PrepareLoadBalancer on a recorded Service = %v, want nil", got)
	}

	c.client.ClearActions()
	ctx, served := DeferServedAnnotations(context.Background())
	if _, err := r.EnsureLoadBalancer(ctx, cluster, svc, nil); err != nil {
		t.Fatal(err)
	}
	if n := serviceWrites(c.client.Actions()); n != 0 {
		t.Errorf("the router wrote to the Service %d times, want 0: %v", n, c.client.Actions())
	}
	if !a.holds(svc) {
		t.Error("a holds no load balancer")
	}
	got := served().Changes(svc)
	if by := got[string(annotation.LoadBalancerServedBy)]; by == nil || *by != "a" {
		t.Errorf("deferred served-by = %v, want a (all: %v)", by, got)
	}

	// Without the deferral the router writes them itself, as for the
	// upstream service controller.
	if _, err := r.EnsureLoadBalancer(context.Background(), cluster, svc, nil); err != nil {
		t.Fatal(err)
	}
	if by := c.service(t, "s").Annotations[string(annotation.LoadBalancerServedBy)]; by != "a" {
		t.Errorf("served-by = %q, want a", by)
	}
}

// TestRecordCarriesItsClass: the router writes, with each backend it adds
// to a Service's record, the class the record is made for (present and
// empty for a classless Service, the class for a classed one), and
// removes it with the record: the load-balancer controller reads from it,
// after a restart too, that the Service left us for another class.
func TestRecordCarriesItsClass(t *testing.T) {
	const ours = "multicloud-ccm.io/b"
	r, _, _ := twoClouds(t, withClass(ours, "b"))
	c := startCluster(t, r, newService("plain", withLBBackend("a")), newService("classed", classed(ours)))
	for name, want := range map[string]string{"plain": "", "classed": ours} {
		if _, err := r.EnsureLoadBalancer(context.Background(), cluster, c.service(t, name), nil); err != nil {
			t.Fatal(err)
		}
		svc := c.service(t, name)
		if got, ok := svc.Annotations[string(annotation.LoadBalancerRecordClass)]; !ok || got != want || !hasRecordOf(svc) {
			t.Errorf("%s: %s = %q (set: %v), record %q; want %q beside the record", name, annotation.LoadBalancerRecordClass, got, ok,
				svc.Annotations[string(annotation.LoadBalancerBackends)], want)
		}
		if err := r.EnsureLoadBalancerDeleted(context.Background(), cluster, svc); err != nil {
			t.Fatal(err)
		}
		svc = c.service(t, name)
		if got, ok := svc.Annotations[string(annotation.LoadBalancerRecordClass)]; ok || hasRecordOf(svc) {
			t.Errorf("%s after the delete: %s = %q, record %q; want both gone", name, annotation.LoadBalancerRecordClass, got,
				svc.Annotations[string(annotation.LoadBalancerBackends)])
		}
	}
}

func hasRecordOf(svc *corev1.Service) bool {
	return svc.Annotations[string(annotation.LoadBalancerBackends)] != ""
}

// TestNoRecreateAfterDelete: a call queued behind a Service's deletion with
// an older copy of the Service (a node sync, a drift repair) cannot create
// its load balancer again.
func TestNoRecreateAfterDelete(t *testing.T) {
	r, a, _ := twoClouds(t)
	svc := newService("s", withLBBackend("a"))
	ensure(t, r, svc)
	old := svc.DeepCopy()

	deleting := svc.DeepCopy()
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	if err := r.EnsureLoadBalancerDeleted(context.Background(), cluster, deleting); err != nil {
		t.Fatal(err)
	}
	if a.holds(svc) {
		t.Fatal("the load balancer survived its deletion")
	}
	_, err := r.EnsureLoadBalancer(context.Background(), cluster, old, nil)
	if err == nil || !strings.Contains(err.Error(), "deleted with the Service") {
		t.Errorf("EnsureLoadBalancer after the delete: err = %v, want a refusal", err)
	}
	if a.holds(svc) {
		t.Error("the load balancer was created again")
	}

	// A Service of the same name is a new UID: served as usual.
	again := newService("s", withLBBackend("a"))
	again.UID = "another"
	ensure(t, r, again)
	if !a.holds(again) {
		t.Error("a new Service of the same name got no load balancer")
	}
}

// TestNoRecreateAfterUpstreamDelete drives the upstream service controller:
// once it deleted a Service's load balancer and the Service is gone, a call
// still holding the Service as it was (a drift-repair pass or node sync
// queued behind the delete) creates nothing.
func TestNoRecreateAfterUpstreamDelete(t *testing.T) {
	r, _ := metalAndOther(t)
	c, _ := ensuredServiceWhere(t, r, "web", "metal", func(ip string) bool { return strings.HasPrefix(ip, "192.0.2.") })
	stale := c.service(t, "web")
	c.markDeleted(t, "web")
	eventually(t, "the Service gone", func() bool { return c.serviceGone(t, "web") })
	// Bare metal keeps a deleted Service's address until its informer has
	// seen the deletion (it never hands out an address a Service may still
	// show); wait for that, so what follows tests the refusal alone.
	eventually(t, "bare metal to release the deleted Service's address", func() bool {
		_, exists, err := r.ByName["metal"].LB.GetLoadBalancer(context.Background(), cluster, stale)
		return err == nil && !exists
	})

	if _, err := r.EnsureLoadBalancer(context.Background(), cluster, stale, nil); err == nil || !strings.Contains(err.Error(), "deleted with the Service") {
		t.Errorf("EnsureLoadBalancer with the stale copy: err = %v, want a refusal", err)
	}
	if _, exists, err := r.ByName["metal"].LB.GetLoadBalancer(context.Background(), cluster, stale); err != nil || exists {
		t.Errorf("bare metal holds the deleted Service's address again (exists=%v, err=%v)", exists, err)
	}
}

// TestDeleteOfDeletedServiceWritesNothing: the delete of the load balancer
// of a Service being deleted writes nothing to the Service once every
// recorded backend reports it gone. A write there (the emptied record)
// re-queued upstream's service controller, whose next sync, from a cache
// that had not yet seen the Service go, failed to remove the finalizer
// (NotFound) with a Warning. A Service that stays (no longer a
// LoadBalancer) has the backends dropped from its record, and a partial
// delete drops the ones done.
func TestDeleteOfDeletedServiceWritesNothing(t *testing.T) {
	r, a, b := twoClouds(t)
	c := startCluster(t, r, newService("going", withLBBackend("a")), newService("staying", withLBBackend("a,b")))
	going, staying := c.service(t, "going"), c.service(t, "staying")
	ensure(t, r, going)
	ensure(t, r, staying)

	going = c.service(t, "going")
	now := metav1.Now()
	going.DeletionTimestamp = &now
	c.client.ClearActions()
	if err := r.EnsureLoadBalancerDeleted(context.Background(), cluster, going); err != nil {
		t.Fatal(err)
	}
	if n := serviceWrites(c.client.Actions()); n != 0 {
		t.Errorf("the router wrote %d times to a Service being deleted, want 0: %v", n, c.client.Actions())
	}
	if a.holds(going) {
		t.Error("a still holds the load balancer")
	}
	if _, exists, err := r.GetLoadBalancer(context.Background(), cluster, going); err != nil || exists {
		t.Errorf("GetLoadBalancer after the delete = exists %v, %v; want gone", exists, err)
	}
	// After a restart, the kept record asks a, which answers gone.
	r2 := mustRouter(t, testConfig(), lbBackend("a", "baremetal", a), lbBackend("b", "aws", b))
	restart(t, c, r2)
	if _, exists, err := r2.GetLoadBalancer(context.Background(), cluster, going); err != nil || exists {
		t.Errorf("GetLoadBalancer after a restart = exists %v, %v; want gone", exists, err)
	}

	// Staying: a partial delete (b down) drops a, then the rest.
	b.setFail(errCloudDown)
	staying = c.service(t, "staying")
	if err := r.EnsureLoadBalancerDeleted(context.Background(), cluster, staying); err == nil {
		t.Fatal("the delete succeeded with b down")
	}
	if rec := c.record(t, "staying"); rec != "b" {
		t.Errorf("record after a partial delete = %q, want b", rec)
	}
	b.setFail(nil)
	if err := r.EnsureLoadBalancerDeleted(context.Background(), cluster, c.service(t, "staying")); err != nil {
		t.Fatal(err)
	}
	if rec := c.record(t, "staying"); rec != "" {
		t.Errorf("record after the delete = %q, want empty", rec)
	}
}
