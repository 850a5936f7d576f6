package router

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/config"
)

// unreachableUpdateCloud is an lbCloud whose UpdateLoadBalancer cannot
// reach its cloud (an error that is no user error: retried).
type unreachableUpdateCloud struct{ *lbCloud }

func (c unreachableUpdateCloud) LoadBalancer() (cloudprovider.LoadBalancer, bool) { return c, true }

func (c unreachableUpdateCloud) UpdateLoadBalancer(context.Context, string, *corev1.Service, []*corev1.Node) error {
	return errors.New("a: connection refused")
}

// TestProbe59DrainingBackendErrorNamedOnce (review s59 of e46563c, where
// it meets a drain): e46563c stopped the lifecycle naming a backend a
// second time around a failed EnsureLoadBalancer or UpdateLoadBalancer,
// as the member's own error already says "backend a: UpdateLoadBalancer:
// ...". The sync that moves a Service from a to b with a drain period
// hands the draining a its nodes (retargetDraining, an
// UpdateLoadBalancer); when that fails, the sync's error still wraps the
// member's error with "backend a (draining): updating its nodes: ". What
// a user sees (the SyncLoadBalancerFailed event, upstream's error log,
// the Warning's message): "backend a (draining): updating its nodes:
// backend a: UpdateLoadBalancer: a: connection refused", the backend
// named twice, as TestBackendErrorNamedOnce says it no longer is.
func TestProbe59DrainingBackendErrorNamedOnce(t *testing.T) {
	a := unreachableUpdateCloud{newLBCloud("a", "198.51.100.1")}
	b := newLBCloud("b", "203.0.113.2")
	cfg := testConfig(func(c *config.CloudConfig) { c.LoadBalancer.DrainPeriod = &metav1.Duration{Duration: time.Hour} })
	r := mustRouter(t, cfg, Backend{Name: "a", Type: "openstack", Scheme: "openstack", Cloud: a}, Backend{Name: "b", Type: "aws", Scheme: "aws", Cloud: b})
	nodes := []*corev1.Node{newNode("n1", withInternalIP("10.0.0.1"))}
	svc := newService("web", withLBBackend("a"))
	if _, err := r.EnsureLoadBalancer(context.Background(), cluster, svc, nodes); err != nil {
		t.Fatal(err)
	}
	svc.Annotations[string(annotation.LoadBalancerBackend)] = "b"
	_, err := r.EnsureLoadBalancer(context.Background(), cluster, svc, nodes)
	if err == nil {
		t.Fatal("the move's sync succeeded: the draining a was not handed its nodes, the test proves nothing")
	}
	if !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("the move's sync failed otherwise: %v", err)
	}
	if n := strings.Count(err.Error(), "backend a"); n != 1 {
		t.Errorf("the move's error names backend a %d times, want once: %v", n, err)
	}
}
