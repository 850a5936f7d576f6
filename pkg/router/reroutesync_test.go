package router

import (
	"errors"
	"runtime"
	"strings"
	"sync"
	"testing"

	clienttesting "k8s.io/client-go/testing"

	"github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/router/lifecycle"
)

// Issue 40: a reload's re-route of a classless Service under upstream's
// service controller wrote the new target in the Service's record itself
// (reroute: addToRecord), outside any sync, so that the change of the
// Service made upstream's controller sync it. The re-route is now the
// router's own full sync (as a drain's end): the EnsureLoadBalancer that
// controller would call, with its nodes, which records the target, moves
// the load balancer and writes the Service, then the status it answers.

// TestRerouteUnderUpstreamWritesInsideSync drives upstream's service
// controller over a Reloadable: web follows the default a (drainPeriod
// 1m); a reload makes b the default. web moves to b (b's address alone in
// the status, served-by b, the record a and b) and a drains, not deleted;
// every Service write the router made came from inside a sync. Before, the
// re-route's record write was made outside one (1 write).
func TestRerouteUnderUpstreamWritesInsideSync(t *testing.T) {
	ca, cb := t.Name()+"/a", t.Name()+"/b"
	a, b := heldCloudState(ca, "198.51.100.1"), heldCloudState(cb, "198.51.100.2")
	a.reset()
	b.reset()
	bs := []heldBackend{{"a", ca, "198.51.100.1"}, {"b", cb, "198.51.100.2"}}
	c := startReloadCluster(t, heldConfig(t, "defaultBackend: a, drainPeriod: 1m", bs...), newService("web"))
	writes := countServiceWrites(c.fakeCluster)
	c.runServiceController(t)
	eventually(t, "web on a", func() bool { return ingressIPs(c.service(t, "web")) == "198.51.100.1" })

	c.apply(t, heldConfig(t, "defaultBackend: b, drainPeriod: 1m", bs...))
	eventually(t, "web on b, served by b, a draining", func() bool {
		s := c.service(t, "web")
		return ingressIPs(s) == "198.51.100.2" && s.Annotations[string(annotation.LoadBalancerServedBy)] == "b" &&
			strings.HasPrefix(s.Annotations[string(annotation.LoadBalancerDraining)], "a=")
	})
	s := c.service(t, "web")
	if rec := s.Annotations[string(annotation.LoadBalancerBackends)]; rec != "a,b" {
		t.Errorf("record %q, want a,b (a draining)", rec)
	}
	if !a.has(s) || !b.has(s) {
		t.Errorf("a holds %v, b holds %v; want both (a draining, not deleted)", a.has(s), b.has(s))
	}
	if n := a.count(&a.deletes); n != 0 {
		t.Errorf("a's load balancer deleted %d times during its drain", n)
	}
	inside, outside := writes.counts()
	if inside == 0 {
		t.Fatal("no Service write of the router seen: the count is blind")
	}
	if len(outside) > 0 {
		t.Errorf("%d Service writes made outside a sync (want 0; %d inside), the first:\n%s", len(outside), inside, outside[0])
	}
}

// TestRerouteSeveralBackendsUnderUpstream: web names a and c
// (load-balancer-backend: a,c) while only a and b are configured, so the
// router refuses it (Pending). A reload adding c re-routes it: its full
// sync by the router creates both load balancers, records a,c and shows
// both addresses, every write inside a sync. Before, the re-route wrote
// the record outside one.
func TestRerouteSeveralBackendsUnderUpstream(t *testing.T) {
	ca, cb, cc := t.Name()+"/a", t.Name()+"/b", t.Name()+"/c"
	a, b, cs := heldCloudState(ca, "198.51.100.1"), heldCloudState(cb, "198.51.100.2"), heldCloudState(cc, "198.51.100.3")
	a.reset()
	b.reset()
	cs.reset()
	bs := []heldBackend{{"a", ca, "198.51.100.1"}, {"b", cb, "198.51.100.2"}, {"c", cc, "198.51.100.3"}}
	c := startReloadCluster(t, heldConfig(t, "", bs[:2]...), newService("web", withLBBackend("a,c")))
	writes := countServiceWrites(c.fakeCluster)
	c.runServiceController(t)
	eventually(t, "web refused: a Warning UnknownLoadBalancerBackend", func() bool {
		return hasEvent(c.events(t, "web"), lifecycle.ReasonUnknownLBBackend)
	})

	c.apply(t, heldConfig(t, "", bs...))
	eventually(t, "web on a and c", func() bool {
		s := c.service(t, "web")
		return ingressIPs(s) == "198.51.100.1,198.51.100.3" && s.Annotations[string(annotation.LoadBalancerServedBy)] == "a,c"
	})
	s := c.service(t, "web")
	if rec := s.Annotations[string(annotation.LoadBalancerBackends)]; rec != "a,c" {
		t.Errorf("record %q, want a,c", rec)
	}
	if !a.has(s) || !cs.has(s) || b.has(s) {
		t.Errorf("a holds %v, b %v, c %v; want a and c", a.has(s), b.has(s), cs.has(s))
	}
	inside, outside := writes.counts()
	if inside == 0 {
		t.Fatal("no Service write of the router seen: the count is blind")
	}
	if len(outside) > 0 {
		t.Errorf("%d Service writes made outside a sync (want 0; %d inside), the first:\n%s", len(outside), inside, outside[0])
	}
}

// TestRerouteRefusedWriteCreatesNothing: the API server refuses the
// router's Service writes (the leader-election fence of a deposed leader,
// pkg/fence, or any failure) when a reload moves web's default from a to
// b. The re-route's sync fails at its first write, the record, before any
// mutating call in b: b creates nothing, a keeps serving and the status
// is a's. Once writes pass again, the re-sync's retry (its queue, with
// backoff) moves web to b.
func TestRerouteRefusedWriteCreatesNothing(t *testing.T) {
	ca, cb := t.Name()+"/a", t.Name()+"/b"
	a, b := heldCloudState(ca, "198.51.100.1"), heldCloudState(cb, "198.51.100.2")
	a.reset()
	b.reset()
	bs := []heldBackend{{"a", ca, "198.51.100.1"}, {"b", cb, "198.51.100.2"}}
	c := startReloadCluster(t, heldConfig(t, "defaultBackend: a, drainPeriod: 1m", bs...), newService("web"))
	// The reactors before anything uses the client (adding one later
	// races with the calls that read them); they refuse once refusing is
	// set.
	var mu sync.Mutex
	refusing, refused := false, 0
	errRefused := errors.New("refused by the leader-election fence")
	for _, verb := range []string{"update", "patch"} {
		testutil.PrependReactor(c.client, verb, "services", func(clienttesting.Action) (bool, runtimeObject, error) {
			buf := make([]byte, 1<<20)
			if !strings.Contains(string(buf[:runtime.Stack(buf, false)]), "/pkg/router/lifecycle.") {
				return false, nil, nil
			}
			mu.Lock()
			defer mu.Unlock()
			if !refusing {
				return false, nil, nil
			}
			refused++
			return true, nil, errRefused
		})
	}
	c.runServiceController(t)
	eventually(t, "web on a", func() bool { return ingressIPs(c.service(t, "web")) == "198.51.100.1" })
	mu.Lock()
	refusing = true
	mu.Unlock()
	c.apply(t, heldConfig(t, "defaultBackend: b, drainPeriod: 1m", bs...))
	eventually(t, "the re-route's write refused twice (a retry)", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return refused >= 2
	})
	s := c.service(t, "web")
	if b.has(s) || ingressIPs(s) != "198.51.100.1" || !a.has(s) {
		t.Fatalf("with its writes refused the re-route acted: b holds %v, a holds %v, status %q", b.has(s), a.has(s), ingressIPs(s))
	}
	if rec := s.Annotations[string(annotation.LoadBalancerBackends)]; rec != "a" {
		t.Fatalf("record %q, want a", rec)
	}
	mu.Lock()
	refusing = false
	mu.Unlock()
	eventually(t, "web on b once writes pass, a draining", func() bool {
		s := c.service(t, "web")
		return ingressIPs(s) == "198.51.100.2" && strings.HasPrefix(s.Annotations[string(annotation.LoadBalancerDraining)], "a=") && a.has(s) && b.has(s)
	})
}

// TestRerouteFailedEnsureRetried: b fails its ensures (a cloud throttling
// or down) when a reload moves web's default from a to b. The re-route's
// sync fails with a Warning LoadBalancerBackendFailed and breaks nothing
// (make before break): a keeps serving, undrained, its address alone in
// the status, b holding nothing, the record naming b ahead of its create.
// Once b answers, the re-sync's retry (its queue, with backoff) moves web
// to b, a draining.
func TestRerouteFailedEnsureRetried(t *testing.T) {
	ca, cb := t.Name()+"/a", t.Name()+"/b"
	a, b := heldCloudState(ca, "198.51.100.1"), heldCloudState(cb, "198.51.100.2")
	a.reset()
	b.reset()
	bs := []heldBackend{{"a", ca, "198.51.100.1"}, {"b", cb, "198.51.100.2"}}
	c := startReloadCluster(t, heldConfig(t, "defaultBackend: a, drainPeriod: 1m", bs...), newService("web"))
	c.runServiceController(t)
	eventually(t, "web on a", func() bool { return ingressIPs(c.service(t, "web")) == "198.51.100.1" })

	b.setFail(nil, errHeldDown)
	c.apply(t, heldConfig(t, "defaultBackend: b, drainPeriod: 1m", bs...))
	eventually(t, "a Warning LoadBalancerBackendFailed", func() bool {
		return hasEvent(c.events(t, "web"), lifecycle.ReasonBackendFailed)
	})
	s := c.service(t, "web")
	if ingressIPs(s) != "198.51.100.1" || !a.has(s) || b.has(s) || s.Annotations[string(annotation.LoadBalancerDraining)] != "" {
		t.Fatalf("b failing, the re-route broke a: status %q, a holds %v, b holds %v, draining %q",
			ingressIPs(s), a.has(s), b.has(s), s.Annotations[string(annotation.LoadBalancerDraining)])
	}
	b.setFail(nil, nil)
	eventually(t, "web on b once b answers, a draining", func() bool {
		s := c.service(t, "web")
		return ingressIPs(s) == "198.51.100.2" && strings.HasPrefix(s.Annotations[string(annotation.LoadBalancerDraining)], "a=") && a.has(s) && b.has(s)
	})
}
