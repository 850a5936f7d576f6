package router

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/config"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/router/lifecycle"
)

// downCloud is an lbCloud whose every load-balancer call fails while down,
// as a cloud that does not answer.
type downCloud struct {
	*lbCloud
	mu   sync.Mutex
	down bool
}

func (c *downCloud) LoadBalancer() (cloudprovider.LoadBalancer, bool) { return c, true }

func (c *downCloud) setDown(down bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.down = down
}

func (c *downCloud) err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.down {
		return errors.New(c.name + ": connection refused")
	}
	return nil
}

func (c *downCloud) GetLoadBalancer(ctx context.Context, cl string, s *corev1.Service) (*corev1.LoadBalancerStatus, bool, error) {
	if err := c.err(); err != nil {
		return nil, false, err
	}
	return c.lbCloud.GetLoadBalancer(ctx, cl, s)
}

func (c *downCloud) EnsureLoadBalancer(ctx context.Context, cl string, s *corev1.Service, nodes []*corev1.Node) (*corev1.LoadBalancerStatus, error) {
	if err := c.err(); err != nil {
		return nil, err
	}
	return c.lbCloud.EnsureLoadBalancer(ctx, cl, s, nodes)
}

func (c *downCloud) UpdateLoadBalancer(ctx context.Context, cl string, s *corev1.Service, nodes []*corev1.Node) error {
	if err := c.err(); err != nil {
		return err
	}
	return c.lbCloud.UpdateLoadBalancer(ctx, cl, s, nodes)
}

func (c *downCloud) EnsureLoadBalancerDeleted(ctx context.Context, cl string, s *corev1.Service) error {
	if err := c.err(); err != nil {
		return err
	}
	return c.lbCloud.EnsureLoadBalancerDeleted(ctx, cl, s)
}

// drainClouds is a router over two load-balancer backends, a (198.51.100.1)
// and b (203.0.113.2), whose load balancers the test can watch and break.
func drainClouds(t *testing.T, drain time.Duration) (*Router, *downCloud, *downCloud) {
	t.Helper()
	a := &downCloud{lbCloud: newLBCloud("a", "198.51.100.1")}
	b := &downCloud{lbCloud: newLBCloud("b", "203.0.113.2")}
	cfg := testConfig(func(c *config.CloudConfig) { c.LoadBalancer.DrainPeriod = &metav1.Duration{Duration: drain} })
	r := mustRouter(t, cfg, Backend{Name: "a", Type: "aws", Scheme: "aws", Cloud: a}, Backend{Name: "b", Type: "openstack", Scheme: "openstack", Cloud: b})
	return r, a, b
}

func ingressIPs(s *corev1.Service) string {
	var out []string
	for _, in := range s.Status.LoadBalancer.Ingress {
		out = append(out, in.IP)
	}
	return strings.Join(out, ",")
}

func (c *fakeCluster) edit(t *testing.T, name string, change func(*corev1.Service)) {
	t.Helper()
	s := c.service(t, name)
	change(s)
	if _, err := c.client.CoreV1().Services("default").Update(context.Background(), s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func hasEvent(events []string, reason string) bool {
	return slices.ContainsFunc(events, func(e string) bool { return strings.HasSuffix(e, "/"+reason) })
}

// TestServiceControllerSeveralBackends drives the upstream service
// controller: a Service annotated b,a is served by both, its status lists
// b's address then a's, the record and load-balancer-served-by name both;
// one backend going down keeps the other's address, and the Service's
// deletion waits for the down one, then leaves nothing in either.
func TestServiceControllerSeveralBackends(t *testing.T) {
	r, a, b := drainClouds(t, 0)
	svc := newService("web", withLBBackend("b,a"))
	c := startCluster(t, r, svc)
	runServiceController(t, c)

	eventually(t, "both addresses, in the order listed", func() bool { return ingressIPs(c.service(t, "web")) == "203.0.113.2,198.51.100.1" })
	s := c.service(t, "web")
	if got := s.Annotations[string(annotation.LoadBalancerBackends)]; got != "a,b" {
		t.Errorf("record = %q, want a,b", got)
	}
	eventually(t, "served by b,a", func() bool {
		return c.service(t, "web").Annotations[string(annotation.LoadBalancerServedBy)] == "b,a"
	})
	if !a.holds(s) || !b.holds(s) {
		t.Fatalf("a holds %v, b holds %v; want both", a.holds(s), b.holds(s))
	}

	// a down, then a port added: b's address stays, a's too (its load
	// balancer may still serve), and a's failure is a Warning event.
	a.setDown(true)
	c.edit(t, "web", func(s *corev1.Service) {
		s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "x", Port: 8443})
	})
	eventually(t, "a LoadBalancerBackendFailed event", func() bool { return hasEvent(c.events(t, "web"), lifecycle.ReasonBackendFailed) })
	if got := ingressIPs(c.service(t, "web")); got != "203.0.113.2,198.51.100.1" {
		t.Errorf("status with a down = %q, want both addresses kept", got)
	}

	// Deleted while a is down: the finalizer stays until a answers.
	c.markDeleted(t, "web")
	eventually(t, "b's load balancer deleted", func() bool { return !b.holds(s) })
	consistently(t, 500*time.Millisecond, "the Service kept while a is down", func() bool { return !c.serviceGone(t, "web") })
	a.setDown(false)
	eventually(t, "the Service gone", func() bool { return c.serviceGone(t, "web") })
	if a.holds(s) || b.holds(s) {
		t.Errorf("left after delete: a %v, b %v", a.holds(s), b.holds(s))
	}
}

// TestServiceControllerNewServiceOneBackendDown: a new Service of two
// backends, one down, shows the other's address at once.
func TestServiceControllerNewServiceOneBackendDown(t *testing.T) {
	r, a, _ := drainClouds(t, 0)
	a.setDown(true)
	c := startCluster(t, r, newService("web", withLBBackend("a,b")))
	runServiceController(t, c)
	eventually(t, "b's address while a is down", func() bool { return ingressIPs(c.service(t, "web")) == "203.0.113.2" })
	a.setDown(false)
	eventually(t, "both addresses once a answers", func() bool { return ingressIPs(c.service(t, "web")) == "198.51.100.1,203.0.113.2" })
}

// TestServiceControllerMoveDrains drives the upstream service controller
// through a move from a to b with a 2 s drain, polling every 10 ms: the
// status is never empty; b's address enters the status as a's leaves it;
// a's load balancer is deleted only after the drain's end, recorded on the
// Service before its address left the status; the events say each step;
// nothing is left in a.
func TestServiceControllerMoveDrains(t *testing.T) {
	r, a, b := drainClouds(t, 2*time.Second)
	c := startCluster(t, r, newService("web", withLBBackend("a")))
	runServiceController(t, c)
	eventually(t, "a's address", func() bool { return ingressIPs(c.service(t, "web")) == "198.51.100.1" })
	s := c.service(t, "web")

	moved := time.Now()
	c.edit(t, "web", func(s *corev1.Service) { s.Annotations[string(annotation.LoadBalancerBackend)] = "b" })
	var leftStatus, deleted time.Time
	var end string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline) && deleted.IsZero(); time.Sleep(10 * time.Millisecond) {
		cur := c.service(t, "web")
		ips := ingressIPs(cur)
		switch {
		case ips == "":
			t.Fatal("the status was empty during the move")
		case ips == "203.0.113.2" && leftStatus.IsZero():
			leftStatus = time.Now()
			end = cur.Annotations[string(annotation.LoadBalancerDraining)]
			if !a.holds(s) {
				t.Fatal("a's load balancer was deleted before its address left the status")
			}
		case ips != "203.0.113.2" && ips != "198.51.100.1":
			t.Fatalf("status %q during the move", ips)
		}
		if !leftStatus.IsZero() && !a.holds(s) {
			deleted = time.Now()
		}
	}
	if deleted.IsZero() {
		t.Fatal("a's load balancer never deleted")
	}
	if !strings.HasPrefix(end, "a=") {
		t.Fatalf("draining record when a's address left the status = %q, want a=<end>", end)
	}
	at, err := time.Parse(time.RFC3339, strings.TrimPrefix(end, "a="))
	if err != nil {
		t.Fatal(err)
	}
	// The polls may see the status late under load: the drain is checked
	// against its recorded end and the edit, which came before it began.
	if deleted.Before(at) || deleted.Sub(moved) < 2*time.Second {
		t.Errorf("deleted %v after the move (%v after the address was seen leaving the status), before the drain's end %v",
			deleted.Sub(moved), deleted.Sub(leftStatus), at)
	}
	if !b.holds(s) {
		t.Error("b does not hold the load balancer")
	}
	eventually(t, "the record and draining annotation settled", func() bool {
		cur := c.service(t, "web")
		_, draining := cur.Annotations[string(annotation.LoadBalancerDraining)]
		return cur.Annotations[string(annotation.LoadBalancerBackends)] == "b" && !draining
	})
	for _, want := range []string{lifecycle.ReasonAdded, lifecycle.ReasonDraining, lifecycle.ReasonDrained} {
		eventually(t, "a "+want+" event", func() bool { return hasEvent(c.events(t, "web"), want) })
	}
}

// TestDrainTimerEndsDrainWithoutSync: the drain's end recorded on a
// Service is carried out with no sync of the service controller: a new
// router (a restart) over a Service whose drain is recorded deletes the
// old load balancer when the drain ends, not before, without the service
// controller running (the drain timer queues the Service for the router's
// re-sync, whose full sync ends the drain).
func TestDrainTimerEndsDrainWithoutSync(t *testing.T) {
	r, a, b := drainClouds(t, 0)
	end := time.Now().Add(1500 * time.Millisecond).UTC().Truncate(time.Second).Add(time.Second)
	svc := newService("web", withLBBackend("b"))
	svc.Annotations[string(annotation.LoadBalancerBackends)] = "a,b"
	svc.Annotations[string(annotation.LoadBalancerServedBy)] = "b"
	svc.Annotations[string(annotation.LoadBalancerDraining)] = "a=" + end.Format(time.RFC3339)
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "203.0.113.2"}}
	if _, err := a.EnsureLoadBalancer(context.Background(), cluster, svc, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := b.EnsureLoadBalancer(context.Background(), cluster, svc, nil); err != nil {
		t.Fatal(err)
	}
	r.st.ClusterName.Store(cluster)
	c := startCluster(t, r, svc)
	c.run(t, func(context.Context) {})
	for time.Now().Before(end) {
		if !a.holds(svc) {
			t.Fatalf("a's load balancer deleted %v before the drain's end", time.Until(end))
		}
		time.Sleep(10 * time.Millisecond)
	}
	eventually(t, "a's load balancer deleted after the drain", func() bool { return !a.holds(svc) })
	eventually(t, "a out of the record, the drain over", func() bool {
		cur := c.service(t, "web")
		_, draining := cur.Annotations[string(annotation.LoadBalancerDraining)]
		return cur.Annotations[string(annotation.LoadBalancerBackends)] == "b" && !draining
	})
	if !b.holds(svc) {
		t.Error("b's load balancer was touched")
	}
	eventually(t, "a LoadBalancerDrained event", func() bool { return hasEvent(c.events(t, "web"), lifecycle.ReasonDrained) })
}

// TestInvalidDrainAnnotation: a drain period that is not a duration is a
// Warning event naming the annotation, and nothing is created.
func TestInvalidDrainAnnotation(t *testing.T) {
	r, a, _ := drainClouds(t, 0)
	svc := newService("web", withLBBackend("a"))
	svc.Annotations[string(annotation.LoadBalancerDrain)] = "five minutes"
	c := startCluster(t, r, svc)
	runServiceController(t, c)
	eventually(t, "an InvalidLoadBalancerDrain event", func() bool { return hasEvent(c.events(t, "web"), lifecycle.ReasonInvalidDrain) })
	if a.holds(svc) {
		t.Error("a load balancer was created for a Service with an invalid drain")
	}
}

// TestReloadKeepsDrain: a drain in progress survives reloads: a reload
// moves web from a to b (defaultBackend) with a 2 s drain, a second
// reload comes mid-drain, and a's load balancer is still deleted at the
// drain's end, not before, by the process's drain timer.
func TestReloadKeepsDrain(t *testing.T) {
	c, a, b, reload := reloadFixture(t)
	web := c.service(t, "web")
	reload("defaultBackend: b, drainPeriod: 2s", true)
	eventually(t, "b's address alone in the status", func() bool { return ingressIPs(c.service(t, "web")) == "198.51.100.2" })
	// The drain's end as recorded, not a clock of the test's: reading the
	// status may come well after the move under load.
	draining := c.service(t, "web").Annotations[string(annotation.LoadBalancerDraining)]
	end, err := time.Parse(time.RFC3339, strings.TrimPrefix(draining, "a="))
	if err != nil {
		t.Fatalf("draining record %q right after the move: %v", draining, err)
	}
	if !a.has(web) || !b.has(web) {
		t.Fatalf("a holds %v, b holds %v right after the move; want both (a drains)", a.has(web), b.has(web))
	}
	reload("defaultBackend: b, drainPeriod: 1h", true)
	if got := c.service(t, "web").Annotations[string(annotation.LoadBalancerDraining)]; got != draining {
		t.Errorf("draining record after the second reload = %q, want %q (kept)", got, draining)
	}
	for time.Until(end) > 100*time.Millisecond {
		if !a.has(web) {
			t.Fatalf("a's load balancer deleted %v before the drain's end", time.Until(end))
		}
		time.Sleep(10 * time.Millisecond)
	}
	eventually(t, "a's load balancer deleted at the drain's end", func() bool { return !a.has(web) })
	eventually(t, "the record names b alone", func() bool { return c.record(t, "web") == "b" })
}

// TestMoveBackDuringDrain: putting a draining backend back in the list ends
// its drain: its load balancer (still there) is ensured again and its
// address returns to the status, its drain entry goes, and it is not
// deleted at the drain's original end; the backend left in its place
// drains instead.
func TestMoveBackDuringDrain(t *testing.T) {
	r, a, b := drainClouds(t, 2*time.Second)
	c := startCluster(t, r, newService("web", withLBBackend("a")))
	runServiceController(t, c)
	eventually(t, "a's address", func() bool { return ingressIPs(c.service(t, "web")) == "198.51.100.1" })
	s := c.service(t, "web")
	c.edit(t, "web", func(s *corev1.Service) { s.Annotations[string(annotation.LoadBalancerBackend)] = "b" })
	eventually(t, "a draining", func() bool {
		return strings.HasPrefix(c.service(t, "web").Annotations[string(annotation.LoadBalancerDraining)], "a=")
	})
	end, err := time.Parse(time.RFC3339, strings.TrimPrefix(c.service(t, "web").Annotations[string(annotation.LoadBalancerDraining)], "a="))
	if err != nil {
		t.Fatal(err)
	}
	c.edit(t, "web", func(s *corev1.Service) { s.Annotations[string(annotation.LoadBalancerBackend)] = "a" })
	eventually(t, "a's address back, b draining", func() bool {
		cur := c.service(t, "web")
		return ingressIPs(cur) == "198.51.100.1" && strings.HasPrefix(cur.Annotations[string(annotation.LoadBalancerDraining)], "b=")
	})
	for time.Now().Before(end.Add(500 * time.Millisecond)) {
		if !a.holds(s) {
			t.Fatal("a's load balancer deleted although a serves again")
		}
		time.Sleep(20 * time.Millisecond)
	}
	eventually(t, "b drained, a alone recorded", func() bool {
		cur := c.service(t, "web")
		_, draining := cur.Annotations[string(annotation.LoadBalancerDraining)]
		return !b.holds(s) && !draining && cur.Annotations[string(annotation.LoadBalancerBackends)] == "a"
	})
	if !a.holds(s) {
		t.Error("a's load balancer is gone")
	}
}
