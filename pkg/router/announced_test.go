package router

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"

	"github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/router/lifecycle"
)

// A move off bare metal (its load balancer announced from the status,
// backends.StatusAnnounced) with a drain keeps the bare-metal address in
// the status until the drain ends, steering external-dns with its target
// annotation instead (dns.go).

const (
	otherIP    = "198.51.100.7" // metalAndOther's other backend
	dnsTarget0 = "external-dns.alpha.kubernetes.io/target"
	dnsTarget1 = "external-dns.kubernetes.io/target"
)

func withDrain(d string) func(*corev1.Service) {
	return func(s *corev1.Service) { s.Annotations[string(annotation.LoadBalancerDrain)] = d }
}

// withRequestedIP asks the bare-metal backend for ip.
func withRequestedIP(ip string) func(*corev1.Service) {
	return func(s *corev1.Service) { s.Annotations[string(annotation.LoadBalancerIPs)] = ip }
}

// metalHolds reports whether the bare-metal backend holds an address for
// the Service.
func metalHolds(t *testing.T, r *Router, s *corev1.Service) bool {
	t.Helper()
	_, ok, err := r.ByName["metal"].LB.GetLoadBalancer(context.Background(), cluster, s)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// dnsOf is the Service's external-dns target annotations and the router's
// mark, "|"-separated ("-" for an absent one).
func dnsOf(s *corev1.Service) string {
	var out []string
	for _, k := range []string{dnsTarget0, dnsTarget1, string(annotation.LoadBalancerDNSTarget)} {
		v, ok := s.Annotations[k]
		if !ok {
			v = "-"
		}
		out = append(out, v)
	}
	return strings.Join(out, "|")
}

// drainEndOf parses the Service's draining record for backend, or fails.
func drainEndOf(t *testing.T, s *corev1.Service, backend string) time.Time {
	t.Helper()
	end, err := time.Parse(time.RFC3339, strings.TrimPrefix(s.Annotations[string(annotation.LoadBalancerDraining)], backend+"="))
	if err != nil {
		t.Fatalf("draining record %q: %v", s.Annotations[string(annotation.LoadBalancerDraining)], err)
	}
	return end
}

// createService creates a Service in the cluster's API server.
func (c *fakeCluster) createService(t *testing.T, s *corev1.Service) {
	t.Helper()
	if _, err := c.client.CoreV1().Services(s.Namespace).Create(context.Background(), s, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// watchDrain polls the Service every 10 ms from the move until its
// bare-metal address ip left the status, checking on each poll that the
// status is never empty, that while the address is shown during the drain
// the status lists the other backend's address first, and that the
// bare-metal backend never released the address while the status showed
// it; check sees every poll during the drain. It returns when the address
// left the status and the drain's recorded end.
func watchDrain(t *testing.T, c *fakeCluster, r *Router, ip string, check func(*corev1.Service)) (left, end time.Time) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		held := metalHolds(t, r, c.service(t, "web"))
		s := c.service(t, "web")
		ips := ingressIPs(s)
		shown := slices.Contains(strings.Split(ips, ","), ip)
		switch {
		case ips == "":
			t.Fatal("the status was empty during the move")
		case shown && !held:
			t.Fatalf("the bare-metal address %s was released while the status showed it (%s)", ip, ips)
		case !shown:
			if end.IsZero() {
				t.Fatalf("the bare-metal address left the status (%s) before its drain was recorded", ips)
			}
			return time.Now(), end
		}
		if _, draining := s.Annotations[string(annotation.LoadBalancerDraining)]; !draining {
			continue
		}
		if end.IsZero() {
			end = drainEndOf(t, s, "metal")
		}
		if ips != ip && ips != otherIP+","+ip {
			t.Fatalf("status during the drain = %s, want %s,%s (serving, then draining)", ips, otherIP, ip)
		}
		check(s)
	}
	t.Fatal("the bare-metal address never left the status")
	return left, end
}

// TestMoveOffBareMetalKeepsAddressUntilDrainEnd drives the upstream
// service controller through a move from bare metal to another backend
// with a 3 s drain, polled every 10 ms: the bare-metal address stays in
// the status (after the new address) until the drain's end, while
// external-dns's target annotation (both prefixes) lists only the new
// address; the address stays reserved (a Service requesting it is
// refused); at the end it leaves the status, then is released (the Service
// asking for it gets it), and the target annotation goes; every Service
// write of the router was made inside a sync.
func TestMoveOffBareMetalKeepsAddressUntilDrainEnd(t *testing.T) {
	r, other := metalAndOther(t)
	c := startCluster(t, r, newService("web", withLBBackend("metal"), withDrain("3s")))
	writes := countServiceWrites(c)
	runServiceController(t, c)
	eventually(t, "a bare-metal address", func() bool { return strings.HasPrefix(ingressIP(c.service(t, "web")), "192.0.2.") })
	ip := ingressIP(c.service(t, "web"))

	c.edit(t, "web", func(s *corev1.Service) { s.Annotations[string(annotation.LoadBalancerBackend)] = "other" })
	probed := false
	left, end := watchDrain(t, c, r, ip, func(s *corev1.Service) {
		if got, want := dnsOf(s), otherIP+"|"+otherIP+"|"+otherIP; got != want {
			t.Fatalf("external-dns targets|mark during the drain = %s, want %s", got, want)
		}
		if !probed {
			probed = true
			c.createService(t, newService("probe", withLBBackend("metal"), withRequestedIP(ip)))
		} else if ingressIP(c.service(t, "probe")) == ip {
			t.Fatalf("the draining address %s was handed to another Service", ip)
		}
	})
	if left.Before(end) {
		t.Errorf("the bare-metal address left the status %v before the drain's end", end.Sub(left))
	}
	if !probed {
		t.Fatal("the drain was never seen")
	}
	eventually(t, "the Service requesting the draining address refused (LoadBalancerIPInUse)", func() bool {
		return hasEvent(c.events(t, "probe"), "LoadBalancerIPInUse")
	})
	eventually(t, "the drain over: other alone, record other, no target annotation", func() bool {
		s := c.service(t, "web")
		_, draining := s.Annotations[string(annotation.LoadBalancerDraining)]
		return ingressIPs(s) == otherIP && !draining && dnsOf(s) == "-|-|-" && c.record(t, "web") == "other" && !metalHolds(t, r, s)
	})
	c.edit(t, "probe", func(s *corev1.Service) { s.Annotations["retry"] = "now" })
	eventually(t, "the released address handed to the Service asking for it", func() bool { return ingressIP(c.service(t, "probe")) == ip })
	if !other.holds(c.service(t, "web")) {
		t.Error("the other backend does not hold the load balancer")
	}
	for _, want := range []string{lifecycle.ReasonDraining, lifecycle.ReasonDrained} {
		eventually(t, "a "+want+" event", func() bool { return hasEvent(c.events(t, "web"), want) })
	}
	// The drain's end (the address withdrawn from the status, the record)
	// is written by a sync, not by the drain timer (issue 40).
	if inside, outside := writes.counts(); len(outside) > 0 {
		t.Errorf("%d Service writes made outside a sync (want 0; %d inside), the first:\n%s", len(outside), inside, outside[0])
	}
}

// TestMoveOffBareMetalLeavesUsersDNSTarget: a target annotation the user
// set is never changed or removed, during the drain or at its end; the
// bare-metal address still stays in the status until the drain ends.
func TestMoveOffBareMetalLeavesUsersDNSTarget(t *testing.T) {
	r, _ := metalAndOther(t)
	c := startCluster(t, r, newService("web", withLBBackend("metal"), withDrain("2s"), func(s *corev1.Service) {
		s.Annotations[dnsTarget0] = "web.example.com"
	}))
	runServiceController(t, c)
	eventually(t, "a bare-metal address", func() bool { return strings.HasPrefix(ingressIP(c.service(t, "web")), "192.0.2.") })
	ip := ingressIP(c.service(t, "web"))
	c.edit(t, "web", func(s *corev1.Service) { s.Annotations[string(annotation.LoadBalancerBackend)] = "other" })
	const users = "web.example.com|-|-"
	left, end := watchDrain(t, c, r, ip, func(s *corev1.Service) {
		if got := dnsOf(s); got != users {
			t.Fatalf("external-dns targets|mark during the drain = %s, want the user's %s untouched", got, users)
		}
	})
	if left.Before(end) {
		t.Errorf("the bare-metal address left the status %v before the drain's end", end.Sub(left))
	}
	eventually(t, "the drain over", func() bool {
		s := c.service(t, "web")
		_, draining := s.Annotations[string(annotation.LoadBalancerDraining)]
		return !draining && c.record(t, "web") == "other"
	})
	if got := dnsOf(c.service(t, "web")); got != users {
		t.Errorf("external-dns targets|mark after the drain = %s, want the user's %s untouched", got, users)
	}
}

// TestMoveBackOntoBareMetalEndsDNSSteering: putting bare metal back during
// its drain ends it: the router's target annotation goes, the bare-metal
// address is served again (first), and the other backend, which is not
// announced from the status, drains with its address out of the status.
func TestMoveBackOntoBareMetalEndsDNSSteering(t *testing.T) {
	r, other := metalAndOther(t)
	c := startCluster(t, r, newService("web", withLBBackend("metal"), withDrain("2s")))
	runServiceController(t, c)
	eventually(t, "a bare-metal address", func() bool { return strings.HasPrefix(ingressIP(c.service(t, "web")), "192.0.2.") })
	ip := ingressIP(c.service(t, "web"))
	c.edit(t, "web", func(s *corev1.Service) { s.Annotations[string(annotation.LoadBalancerBackend)] = "other" })
	eventually(t, "metal draining, DNS steered", func() bool { return dnsOf(c.service(t, "web")) == otherIP+"|"+otherIP+"|"+otherIP })
	c.edit(t, "web", func(s *corev1.Service) { s.Annotations[string(annotation.LoadBalancerBackend)] = "metal" })
	eventually(t, "metal serving again, other draining, no target annotation", func() bool {
		s := c.service(t, "web")
		return ingressIPs(s) == ip && strings.HasPrefix(s.Annotations[string(annotation.LoadBalancerDraining)], "other=") && dnsOf(s) == "-|-|-"
	})
	eventually(t, "other drained", func() bool { return !other.holds(c.service(t, "web")) && c.record(t, "web") == "metal" })
	if s := c.service(t, "web"); ingressIPs(s) != ip || !metalHolds(t, r, s) {
		t.Errorf("status %s, metal holds %v; want %s held", ingressIPs(s), metalHolds(t, r, s), ip)
	}
}

// startStoppable is startCluster over an API server (a new one of objs
// when c is nil) whose router stops, with its informers, drain timer and
// service controller, when stop is called: a crash.
func startStoppable(t *testing.T, c *fakeCluster, r *Router, objs ...runtimeObject) (*fakeCluster, func()) {
	t.Helper()
	if c == nil {
		c = &fakeCluster{client: testutil.NewClientset(objs...)}
	}
	c2 := &fakeCluster{client: c.client, router: r, factory: informers.NewSharedInformerFactory(c.client, 0)}
	done := make(chan struct{})
	r.Initialize(clientBuilder{c.client}, done)
	r.SetInformers(c2.factory)
	stopController := runServiceController(t, c2)
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			stopController()
			close(done)
		}
	}
	t.Cleanup(stop)
	return c2, stop
}

// TestRestartDuringBareMetalDrain: the CCM restarts (a new router and
// bare-metal backend, knowing only the API objects) in the middle of a
// move off bare metal with an 8 s drain: the new process keeps the
// draining address reserved (a Service created after the restart
// requesting it is refused), keeps it in the status and the target
// annotation on the new address until the drain's end, not before, then
// takes it out of the status, releases it and removes the annotation.
func TestRestartDuringBareMetalDrain(t *testing.T) {
	_, other := metalAndOther(t)
	metal := func() *Router {
		return metalRouter(t, "error", Backend{Name: "other", Type: "aws", Scheme: "aws", Cloud: other})
	}
	r1 := metal()
	c1, crash := startStoppable(t, nil, r1, newService("web", withLBBackend("metal"), withDrain("8s")))
	eventually(t, "a bare-metal address", func() bool { return strings.HasPrefix(ingressIP(c1.service(t, "web")), "192.0.2.") })
	ip := ingressIP(c1.service(t, "web"))
	c1.edit(t, "web", func(s *corev1.Service) { s.Annotations[string(annotation.LoadBalancerBackend)] = "other" })
	eventually(t, "the drain under way, the new address in the status", func() bool {
		s := c1.service(t, "web")
		_, draining := s.Annotations[string(annotation.LoadBalancerDraining)]
		return draining && strings.HasPrefix(ingressIPs(s), otherIP)
	})
	end := drainEndOf(t, c1.service(t, "web"), "metal")

	crash()
	r2 := metal()
	c2, _ := startStoppable(t, c1, r2)
	c2.createService(t, newService("probe", withLBBackend("metal"), withRequestedIP(ip)))
	eventually(t, "the restarted CCM refusing the draining address to another Service", func() bool {
		if ingressIP(c2.service(t, "probe")) == ip {
			t.Fatalf("the restarted CCM handed the draining address %s to another Service", ip)
		}
		return hasEvent(c2.events(t, "probe"), "LoadBalancerIPInUse")
	})
	if time.Now().After(end) {
		t.Fatalf("the restarted CCM was checked %v after the drain's end; the machine is too slow for this test", time.Since(end))
	}
	left, _ := watchDrain(t, c2, r2, ip, func(s *corev1.Service) {
		if got, want := dnsOf(s), otherIP+"|"+otherIP+"|"+otherIP; got != want {
			t.Fatalf("external-dns targets|mark during the drain after the restart = %s, want %s", got, want)
		}
		if got := ingressIP(c2.service(t, "probe")); got == ip {
			t.Fatalf("the draining address %s was handed to another Service after the restart", ip)
		}
	})
	if left.Before(end) {
		t.Errorf("the bare-metal address left the status %v before the drain's end", end.Sub(left))
	}
	eventually(t, "the drain over after the restart", func() bool {
		s := c2.service(t, "web")
		_, draining := s.Annotations[string(annotation.LoadBalancerDraining)]
		return ingressIPs(s) == otherIP && !draining && dnsOf(s) == "-|-|-" && c2.record(t, "web") == "other" && !metalHolds(t, r2, s)
	})
	c2.edit(t, "probe", func(s *corev1.Service) { s.Annotations["retry"] = "now" })
	eventually(t, "the released address handed to the Service asking for it", func() bool { return ingressIP(c2.service(t, "probe")) == ip })
}

// TestDeleteDuringBareMetalDrain: a Service deleted while its bare-metal
// address drains is deleted from both backends at once, not at the
// drain's end: the address is released (a Service requesting it gets it)
// and nothing is left in the other backend.
func TestDeleteDuringBareMetalDrain(t *testing.T) {
	r, other := metalAndOther(t)
	c := startCluster(t, r, newService("web", withLBBackend("metal"), withDrain("1h")))
	runServiceController(t, c)
	eventually(t, "a bare-metal address", func() bool { return strings.HasPrefix(ingressIP(c.service(t, "web")), "192.0.2.") })
	ip := ingressIP(c.service(t, "web"))
	c.edit(t, "web", func(s *corev1.Service) { s.Annotations[string(annotation.LoadBalancerBackend)] = "other" })
	eventually(t, "metal draining, DNS steered", func() bool {
		s := c.service(t, "web")
		return ingressIPs(s) == otherIP+","+ip && dnsOf(s) == otherIP+"|"+otherIP+"|"+otherIP
	})
	web := c.service(t, "web")
	c.markDeleted(t, "web")
	eventually(t, "the Service gone", func() bool { return c.serviceGone(t, "web") })
	if other.holds(web) {
		t.Error("other still holds a load balancer after the delete")
	}
	// The bare-metal backend keeps an address the Service's status showed
	// until its informer sees the Service gone (no address shown in a
	// status is handed out again), a moment after the API server does.
	eventually(t, "metal's address released", func() bool { return !metalHolds(t, r, web) })
	c.createService(t, newService("probe", withLBBackend("metal"), withRequestedIP(ip)))
	eventually(t, "the released address handed to the Service asking for it", func() bool { return ingressIP(c.service(t, "probe")) == ip })
}
