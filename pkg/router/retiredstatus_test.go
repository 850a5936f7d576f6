package router

import (
	"context"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/api"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/config"
)

// slowDeleteCloud is an lbCloud whose delete takes a while, as Octavia's:
// the delete is accepted (PENDING_DELETE) and answers "being deleted,
// retry", the load balancer still listed, until the test ends it.
type slowDeleteCloud struct {
	*lbCloud
	mu             sync.Mutex
	deleting, done bool
}

func (c *slowDeleteCloud) LoadBalancer() (cloudprovider.LoadBalancer, bool) { return c, true }

func (c *slowDeleteCloud) EnsureLoadBalancerDeleted(ctx context.Context, cl string, s *corev1.Service) error {
	c.mu.Lock()
	done := c.done
	c.mu.Unlock()
	if done || !c.holds(s) {
		return c.lbCloud.EnsureLoadBalancerDeleted(ctx, cl, s)
	}
	c.mu.Lock()
	c.deleting = true
	c.mu.Unlock()
	return api.NewRetryError("load balancer is being deleted", 20*time.Millisecond)
}

func (c *slowDeleteCloud) isDeleting() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.deleting
}

func (c *slowDeleteCloud) finish() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.done = true
}

// TestRetiredAddressLeavesStatusBeforeDelete (chaos seed 657511868): under
// upstream's service controller, a Service moved from b to a with no
// drain, b's delete taking a while ("being deleted, retry", as Octavia's
// PENDING_DELETE): while b's load balancer is being deleted, the status
// shows a's address and not b's. Before, the retry failed the sync before
// any status was written, and the Service showed b's address, and not
// a's, until b's delete ended.
func TestRetiredAddressLeavesStatusBeforeDelete(t *testing.T) {
	a := newLBCloud("a", "198.51.100.1")
	b := &slowDeleteCloud{lbCloud: newLBCloud("b", "203.0.113.2")}
	cfg := testConfig(func(c *config.CloudConfig) { c.LoadBalancer.DrainPeriod = &metav1.Duration{} })
	r := mustRouter(t, cfg, Backend{Name: "a", Type: "aws", Scheme: "aws", Cloud: a}, Backend{Name: "b", Type: "openstack", Scheme: "openstack", Cloud: b})
	c := startCluster(t, r, newService("web", withLBBackend("b")))
	runServiceController(t, c)
	eventually(t, "b's address", func() bool { return ingressIPs(c.service(t, "web")) == "203.0.113.2" })

	c.edit(t, "web", func(s *corev1.Service) { s.Annotations[string(annotation.LoadBalancerBackend)] = "a" })
	eventually(t, "b's delete accepted", b.isDeleting)
	eventually(t, "a's address alone while b's load balancer is being deleted", func() bool { return ingressIPs(c.service(t, "web")) == "198.51.100.1" })
	s := c.service(t, "web")
	if !b.holds(s) {
		t.Fatal("b's load balancer is gone already: the test no longer shows a delete under way")
	}
	if got := s.Annotations[string(annotation.LoadBalancerBackends)]; got != "a,b" {
		t.Errorf("record while b's delete is under way = %q, want a,b (b leaves it once its delete succeeded)", got)
	}

	b.finish()
	eventually(t, "b's delete over, the record a alone", func() bool {
		s := c.service(t, "web")
		return !b.holds(s) && s.Annotations[string(annotation.LoadBalancerBackends)] == "a" && ingressIPs(s) == "198.51.100.1"
	})
}
