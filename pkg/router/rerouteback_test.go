package router

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/router/lifecycle"
)

// TestReloadDefaultBackDuringDrain (issue 40, defect 5) drives upstream's
// service controller over a Reloadable: a reload moves defaultBackend from
// a to b (web moves, a drains for a minute), and a second reload moves it
// back to a while a still drains. web is served by a again (its address
// back in the status) and b drains in its turn. a, still in the record,
// was not "new": the re-route wrote nothing, so upstream never synced web,
// which stayed on b, and a's drain entry was skipped for ever.
func TestReloadDefaultBackDuringDrain(t *testing.T) {
	ca, cb := t.Name()+"/a", t.Name()+"/b"
	a, b := heldCloudState(ca, "198.51.100.1"), heldCloudState(cb, "198.51.100.2")
	a.reset()
	b.reset()
	bs := []heldBackend{{"a", ca, "198.51.100.1"}, {"b", cb, "198.51.100.2"}}
	c := startReloadCluster(t, heldConfig(t, "defaultBackend: a, drainPeriod: 1m", bs...), newService("web"))
	c.runServiceController(t)
	eventually(t, "web on a", func() bool { return ingressIPs(c.service(t, "web")) == "198.51.100.1" })

	c.apply(t, heldConfig(t, "defaultBackend: b, drainPeriod: 1m", bs...))
	eventually(t, "web on b, a draining", func() bool {
		s := c.service(t, "web")
		return ingressIPs(s) == "198.51.100.2" && strings.HasPrefix(s.Annotations[string(annotation.LoadBalancerDraining)], "a=")
	})

	c.apply(t, heldConfig(t, "defaultBackend: a, drainPeriod: 1m", bs...))
	eventually(t, "web on a again, b draining", func() bool {
		s := c.service(t, "web")
		return ingressIPs(s) == "198.51.100.1" && strings.HasPrefix(s.Annotations[string(annotation.LoadBalancerDraining)], "b=") &&
			s.Annotations[string(annotation.LoadBalancerServedBy)] == "a"
	})
	if !a.has(c.service(t, "web")) || !b.has(c.service(t, "web")) {
		t.Errorf("a holds %v, b holds %v; want both (b draining)", a.has(c.service(t, "web")), b.has(c.service(t, "web")))
	}
}

// TestReloadRemovingDrainingBackendWarnsUpstream (issue 40, defect 7)
// drives upstream's service controller over a Reloadable: a reload moves
// the default from a to b (a drains for a minute), a second one removes a;
// web gets a Warning UnknownLoadBalancerBackend at that reload, and keeps
// its drain pending (a's entry stays). There was no Warning at all: the
// drain timer, at the drain's end, only logged.
func TestReloadRemovingDrainingBackendWarnsUpstream(t *testing.T) {
	ca, cb := t.Name()+"/a", t.Name()+"/b"
	a, b := heldCloudState(ca, "198.51.100.1"), heldCloudState(cb, "198.51.100.2")
	a.reset()
	b.reset()
	bs := []heldBackend{{"a", ca, "198.51.100.1"}, {"b", cb, "198.51.100.2"}}
	c := startReloadCluster(t, heldConfig(t, "defaultBackend: a, drainPeriod: 1m", bs...), newService("web"))
	c.runServiceController(t)
	eventually(t, "web on a", func() bool { return ingressIPs(c.service(t, "web")) == "198.51.100.1" })
	c.apply(t, heldConfig(t, "defaultBackend: b, drainPeriod: 1m", bs...))
	eventually(t, "web on b, a draining", func() bool {
		return strings.HasPrefix(c.service(t, "web").Annotations[string(annotation.LoadBalancerDraining)], "a=")
	})
	c.apply(t, heldConfig(t, "defaultBackend: b, drainPeriod: 1m", bs[1]))
	// At the reload, not at the drain's end a minute later: polled with a
	// bound well inside the drain.
	testutil.Eventually(t, 30*time.Second, "a Warning UnknownLoadBalancerBackend before the drain's end", func() error {
		if !hasEvent(c.events(t, "web"), lifecycle.ReasonUnknownLBBackend) {
			return fmt.Errorf("events %v", c.events(t, "web"))
		}
		return nil
	})
	if s := c.service(t, "web"); !strings.HasPrefix(s.Annotations[string(annotation.LoadBalancerDraining)], "a=") {
		t.Errorf("the drain was dropped: %v", s.Annotations)
	}
}

// TestReloadMovingDefaultOffRemovedBackendUpstream (chaos seed 529377690,
// through upstream's service controller): web is served by the default b
// (with a drain period); a reload removes b and makes a the default. web
// is served by a: a's address alone in the status, served-by a, b kept in
// the record (its load balancer cannot be reached, so nothing there is
// forgotten) with a Warning UnknownLoadBalancerBackend naming b. Every
// sync failed on the record's b, and a's address was never published.
func TestReloadMovingDefaultOffRemovedBackendUpstream(t *testing.T) {
	ca, cb := t.Name()+"/a", t.Name()+"/b"
	a, b := heldCloudState(ca, "198.51.100.1"), heldCloudState(cb, "198.51.100.2")
	a.reset()
	b.reset()
	bs := []heldBackend{{"a", ca, "198.51.100.1"}, {"b", cb, "198.51.100.2"}}
	c := startReloadCluster(t, heldConfig(t, "defaultBackend: b, drainPeriod: 1m", bs...), newService("web"))
	c.runServiceController(t)
	eventually(t, "web on b", func() bool { return ingressIPs(c.service(t, "web")) == "198.51.100.2" })

	c.apply(t, heldConfig(t, "defaultBackend: a, drainPeriod: 1m", bs[0]))
	testutil.Eventually(t, 30*time.Second, "web on a alone, b kept in the record", func() error {
		s := c.service(t, "web")
		if ingressIPs(s) != "198.51.100.1" || s.Annotations[string(annotation.LoadBalancerServedBy)] != "a" ||
			!strings.Contains(s.Annotations[string(annotation.LoadBalancerBackends)], "b") {
			return fmt.Errorf("status %q, annotations %v", ingressIPs(s), s.Annotations)
		}
		return nil
	})
	if !hasEvent(c.events(t, "web"), lifecycle.ReasonUnknownLBBackend) {
		t.Errorf("no Warning %s: %v", lifecycle.ReasonUnknownLBBackend, c.events(t, "web"))
	}
	if !b.has(c.service(t, "web")) {
		t.Error("b's load balancer was deleted, though b is not configured")
	}
}
