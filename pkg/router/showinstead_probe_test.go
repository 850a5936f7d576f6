package router

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
	cloudprovider "k8s.io/cloud-provider"

	mcctestutil "github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/config"
)

// Review probes (session 56) of showInstead (7514778): before a sync
// deletes a retired backend's load balancer, the status drops that load
// balancer's addresses and shows the serving ones, in one write.

// noAddressCloud is an lbCloud whose load balancer has no address yet: its
// EnsureLoadBalancer succeeds with an empty status.
type noAddressCloud struct{ *lbCloud }

func (c *noAddressCloud) LoadBalancer() (cloudprovider.LoadBalancer, bool) { return c, true }

func (c *noAddressCloud) GetLoadBalancer(ctx context.Context, cl string, s *corev1.Service) (*corev1.LoadBalancerStatus, bool, error) {
	_, ok, err := c.lbCloud.GetLoadBalancer(ctx, cl, s)
	return &corev1.LoadBalancerStatus{}, ok, err
}

func (c *noAddressCloud) EnsureLoadBalancer(ctx context.Context, cl string, s *corev1.Service, nodes []*corev1.Node) (*corev1.LoadBalancerStatus, error) {
	if _, err := c.lbCloud.EnsureLoadBalancer(ctx, cl, s, nodes); err != nil {
		return nil, err
	}
	return &corev1.LoadBalancerStatus{}, nil
}

// TestProbeRetiredAddressWithTargetWithoutAddress: a Service moved with no
// drain from b (a delete that takes a while, as Octavia's PENDING_DELETE)
// to a, whose load balancer has no address yet (its EnsureLoadBalancer
// succeeds with an empty status). showInstead wrote nothing: the status
// would be empty, and it "never emptied the status" (fixed: it empties
// it, as the passing sync would). b's delete then failed the sync ("being deleted, retry") before the controller writes
// the (empty) status, and the Service showed the address of b's load
// balancer while it is being deleted, for as long as the delete takes:
// the case of chaos seed 657511868 that 7514778 fixes when the target has
// an address. Either is right: the status emptied (what the sync writes
// once it passes anyway: an empty answer from the targets), or b's load
// balancer kept (not deleted) until a target shows an address (make
// before break). What is wrong is both at once: b being deleted while
// the Service shows its address.
func TestProbeRetiredAddressWithTargetWithoutAddress(t *testing.T) {
	a := &noAddressCloud{newLBCloud("a", "198.51.100.1")}
	b := &slowDeleteCloud{lbCloud: newLBCloud("b", "203.0.113.2")}
	cfg := testConfig(func(c *config.CloudConfig) { c.LoadBalancer.DrainPeriod = &metav1.Duration{} })
	r := mustRouter(t, cfg, Backend{Name: "a", Type: "aws", Scheme: "aws", Cloud: a}, Backend{Name: "b", Type: "openstack", Scheme: "openstack", Cloud: b})
	c := startCluster(t, r, newService("web", withLBBackend("b")))
	runServiceController(t, c)
	eventually(t, "b's address", func() bool { return ingressIPs(c.service(t, "web")) == "203.0.113.2" })

	c.edit(t, "web", func(s *corev1.Service) { s.Annotations[string(annotation.LoadBalancerBackend)] = "a" })
	eventually(t, "b's delete accepted", b.isDeleting)
	// Over 3 s of b's delete under way (the sync retried every 20 ms and
	// more, with the controller's backoff), the status must not show b's
	// address.
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		s := c.service(t, "web")
		if b.holds(s) && strings.Contains(ingressIPs(s), "203.0.113.2") {
			t.Fatalf("status %q (record %q) while b's load balancer is being deleted: it shows the address of a load balancer being deleted",
				ingressIPs(s), s.Annotations[string(annotation.LoadBalancerBackends)])
		}
	}
}

// TestProbeRetiredAmongSeveralBackends (passes; pins down the serving
// addresses written with several targets): a Service served by a and b
// moved to a and c with no drain, b's delete taking a while: while it is
// under way the status shows a's and c's addresses, in the order listed,
// and not b's; the record keeps b until its delete succeeded.
func TestProbeRetiredAmongSeveralBackends(t *testing.T) {
	a := newLBCloud("a", "198.51.100.1")
	b := &slowDeleteCloud{lbCloud: newLBCloud("b", "203.0.113.2")}
	cc := newLBCloud("c", "192.0.2.3")
	cfg := testConfig(func(c *config.CloudConfig) { c.LoadBalancer.DrainPeriod = &metav1.Duration{} })
	r := mustRouter(t, cfg,
		Backend{Name: "a", Type: "aws", Scheme: "aws", Cloud: a},
		Backend{Name: "b", Type: "openstack", Scheme: "openstack", Cloud: b},
		Backend{Name: "c", Type: "vsphere", Scheme: "vsphere", Cloud: cc})
	c := startCluster(t, r, newService("web", withLBBackend("b,a")))
	runServiceController(t, c)
	eventually(t, "b's and a's addresses", func() bool { return ingressIPs(c.service(t, "web")) == "203.0.113.2,198.51.100.1" })

	c.edit(t, "web", func(s *corev1.Service) { s.Annotations[string(annotation.LoadBalancerBackend)] = "c,a" })
	eventually(t, "b's delete accepted", b.isDeleting)
	eventually(t, "c's and a's addresses, in that order, without b's, while b's delete is under way", func() bool {
		return ingressIPs(c.service(t, "web")) == "192.0.2.3,198.51.100.1"
	})
	s := c.service(t, "web")
	if !b.holds(s) {
		t.Fatal("b's load balancer is gone already: the probe no longer shows a delete under way")
	}
	if got := s.Annotations[string(annotation.LoadBalancerBackends)]; !strings.Contains(got, "b") {
		t.Errorf("record while b's delete is under way = %q; want b kept until its delete succeeded", got)
	}
	b.finish()
	eventually(t, "b's delete over, b out of the record", func() bool {
		s := c.service(t, "web")
		return !b.holds(s) && !strings.Contains(s.Annotations[string(annotation.LoadBalancerBackends)], "b") &&
			ingressIPs(s) == "192.0.2.3,198.51.100.1"
	})
}

// TestProbeRetiredStatusWriteConflicts (passes; pins down the guarded
// write): the status write before the delete conflicting (another writer
// changed the Service) is read again and retried; while the status write
// keeps failing, b's load balancer is never deleted (the address would be
// shown while released), and once it passes, b is deleted with its address
// out of the status.
func TestProbeRetiredStatusWriteConflicts(t *testing.T) {
	a := newLBCloud("a", "198.51.100.1")
	b := newLBCloud("b", "203.0.113.2")
	cfg := testConfig(func(c *config.CloudConfig) { c.LoadBalancer.DrainPeriod = &metav1.Duration{} })
	r := mustRouter(t, cfg, Backend{Name: "a", Type: "aws", Scheme: "aws", Cloud: a}, Backend{Name: "b", Type: "openstack", Scheme: "openstack", Cloud: b})
	c := startCluster(t, r, newService("web", withLBBackend("b")))
	runServiceController(t, c)
	eventually(t, "b's address", func() bool { return ingressIPs(c.service(t, "web")) == "203.0.113.2" })

	// From now on every status write conflicts, until allowed.
	var allow atomic.Bool
	var conflicts atomic.Int32
	mcctestutil.PrependReactor(c.client, "patch", "services", func(action k8stesting.Action) (bool, runtime.Object, error) {
		if action.GetSubresource() != "status" || allow.Load() {
			return false, nil, nil
		}
		conflicts.Add(1)
		return true, nil, apierrors.NewConflict(corev1.Resource("services"), "web", errConflictProbe)
	})
	c.edit(t, "web", func(s *corev1.Service) { s.Annotations[string(annotation.LoadBalancerBackend)] = "a" })
	eventually(t, "a status write refused", func() bool { return conflicts.Load() > 0 })
	consistently(t, time.Second, "b's load balancer kept while its address cannot leave the status", func() bool {
		return b.holds(c.service(t, "web"))
	})
	allow.Store(true)
	eventually(t, "b deleted, a's address alone", func() bool {
		s := c.service(t, "web")
		return !b.holds(s) && ingressIPs(s) == "198.51.100.1"
	})
}

var errConflictProbe = errors.New("probe: the object has been modified")
