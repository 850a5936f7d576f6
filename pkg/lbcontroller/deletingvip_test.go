package lbcontroller

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/api"
	fakecloud "k8s.io/cloud-provider/fake"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/config"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/router"
)

// slowDeleteLB is a load-balancer backend whose delete takes a while, as
// Octavia's: EnsureLoadBalancerDeleted is accepted (the load balancer
// goes PENDING_DELETE) and answers "being deleted, retry"
// (pkg/backends/openstack deleteOne), and GetLoadBalancer still lists the
// load balancer, with its VIP, until the test lets the delete end.
type slowDeleteLB struct {
	*fakecloud.Cloud
	mu       sync.Mutex
	held     map[types.UID]bool
	deleting map[types.UID]bool
	done     bool
}

const slowVIP = "203.0.113.7"

func (c *slowDeleteLB) LoadBalancer() (cloudprovider.LoadBalancer, bool) { return c, true }

func (c *slowDeleteLB) vip() *corev1.LoadBalancerStatus {
	return &corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: slowVIP}}}
}

func (c *slowDeleteLB) GetLoadBalancer(_ context.Context, _ string, s *corev1.Service) (*corev1.LoadBalancerStatus, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.vip(), c.held[s.UID], nil
}

func (c *slowDeleteLB) EnsureLoadBalancer(_ context.Context, _ string, s *corev1.Service, _ []*corev1.Node) (*corev1.LoadBalancerStatus, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.held[s.UID] = true
	return c.vip(), nil
}

func (c *slowDeleteLB) UpdateLoadBalancer(context.Context, string, *corev1.Service, []*corev1.Node) error {
	return nil
}

func (c *slowDeleteLB) EnsureLoadBalancerDeleted(_ context.Context, _ string, s *corev1.Service) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.held[s.UID] {
		return nil
	}
	if c.done {
		delete(c.held, s.UID)
		delete(c.deleting, s.UID)
		return nil
	}
	c.deleting[s.UID] = true
	return api.NewRetryError("load balancer is being deleted", 20*time.Millisecond)
}

func (c *slowDeleteLB) isDeleting(uid types.UID) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.deleting[uid]
}

func (c *slowDeleteLB) holds(uid types.UID) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.held[uid]
}

func (c *slowDeleteLB) finish() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.done = true
}

func withSlowDelete(slow *slowDeleteLB) func(*config.CloudConfig) (routerCloud, error) {
	return beside(router.Backend{Name: "os", Type: "openstack", Scheme: "openstack", Cloud: slow})
}

// TestMovedOffKeepsNoAddressOfLoadBalancerBeingDeleted (chaos seed
// 657511868, test/chaos/testdata/new-octavia-vip-twice-657511868.json): a
// Service moved off a backend whose delete takes a while (Octavia: the
// load balancer goes PENDING_DELETE, the backend answers "being deleted,
// retry") with no drain period must not show that load balancer's
// address while it is being deleted: the
// address is on its way back to the cloud (Octavia's noop driver gives
// every load balancer the same VIP, so another Service showed it too),
// and the backend it moved to serves it already (make before break).
// Before, the retry failed the sync before the status was written, so the
// status kept the deleted load balancer's VIP (and not the new backend's
// address) until the delete had ended and a retry passed.
func TestMovedOffKeepsNoAddressOfLoadBalancerBeingDeleted(t *testing.T) {
	slow := &slowDeleteLB{Cloud: &fakecloud.Cloud{DisableInstances: true, DisableRoutes: true}, held: map[types.UID]bool{}, deleting: map[types.UID]bool{}}
	e := startEnv(t, envOptions{doc: metals(""), classless: true, versioned: true, build: withSlowDelete(slow)})
	if got := webOn(t, e, "os", "0s"); got != slowVIP {
		t.Fatalf("web on os shows %q, want %s", got, slowVIP)
	}
	uid := e.get(t, "web").UID
	e.moveTo(t, "web", "metal")
	eventually(t, "os's delete accepted", func() error {
		if !slow.isDeleting(uid) {
			return fmt.Errorf("%s", state(e.get(t, "web")))
		}
		return nil
	})
	eventually(t, "metal's address shown, os's VIP out of the status while its load balancer is being deleted", func() error {
		s := e.get(t, "web")
		if got := ingresses(s); !strings.HasPrefix(got, "192.0.2.") || strings.Contains(got, slowVIP) {
			return fmt.Errorf("%s", state(s))
		}
		return nil
	})
	if !slow.holds(uid) {
		t.Fatal("os's load balancer is gone already: the test no longer shows a delete under way")
	}
	slow.finish()
	eventually(t, "os's delete over, the record metal alone", func() error {
		s := e.get(t, "web")
		if slow.holds(uid) || s.Annotations[string(annotation.LoadBalancerBackends)] != "metal" || strings.Contains(ingresses(s), slowVIP) ||
			s.Annotations[string(annotation.LoadBalancerServedBy)] != "metal" {
			return fmt.Errorf("%s, served by %q, os holds %v", state(s), s.Annotations[string(annotation.LoadBalancerServedBy)], slow.holds(uid))
		}
		return nil
	})
}
