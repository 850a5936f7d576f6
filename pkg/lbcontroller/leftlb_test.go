package lbcontroller

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
)

// throttledCloud is the router whose reads and deletes fail, as a cloud
// that throttles, while down is set.
type throttledCloud struct {
	*hookedCloud
	down  atomic.Bool
	calls atomic.Int32
}

var errThrottled = errors.New("throttling: Rate exceeded")

func (c *throttledCloud) GetLoadBalancer(ctx context.Context, clusterName string, svc *corev1.Service) (*corev1.LoadBalancerStatus, bool, error) {
	if c.down.Load() {
		c.calls.Add(1)
		return nil, false, errThrottled
	}
	return c.hookedCloud.GetLoadBalancer(ctx, clusterName, svc)
}

func (c *throttledCloud) EnsureLoadBalancerDeleted(ctx context.Context, clusterName string, svc *corev1.Service) error {
	if c.down.Load() {
		c.calls.Add(1)
		return errThrottled
	}
	return c.hookedCloud.EnsureLoadBalancerDeleted(ctx, clusterName, svc)
}

// TestClusterIPAfterFailedCreateDropsRecord (chaos seed 700): a classed
// Service created ClusterIP, turned LoadBalancer while its cloud fails
// (the finalizer and the router's record written, the create failed),
// then ClusterIP again while the cloud still fails: its cleanup is
// retried, with backoff, until the cloud answers, and then the record
// leaves the Service with the finalizer. The cleanup found no load
// balancer, skipped the delete, and removed the finalizer alone: the
// record named the backend for good.
func TestClusterIPAfterFailedCreateDropsRecord(t *testing.T) {
	tc := &throttledCloud{}
	s := service("web", ptrTo(ourClass))
	s.Spec.Type = corev1.ServiceTypeClusterIP
	s.Spec.Ports[0].NodePort = 0
	e := startEnv(t, envOptions{doc: cloudConfig, versioned: true, wrap: func(h *hookedCloud) Cloud { tc.hookedCloud = h; return tc }}, s)
	tc.down.Store(true)
	e.cloud.set(errThrottled)
	setType := func(typ corev1.ServiceType) {
		t.Helper()
		s := e.get(t, "web")
		s.Spec.Type = typ
		if _, err := e.client.CoreV1().Services("default").Update(context.Background(), s, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	setType(corev1.ServiceTypeLoadBalancer)
	eventually(t, "three failed creates", func() error {
		if n := e.cloud.ensures.Load(); n < 3 {
			return fmt.Errorf("%d calls", n)
		}
		return nil
	})
	eventually(t, "the record and finalizer written", func() error {
		if s := e.get(t, "web"); s.Annotations[string(annotation.LoadBalancerBackends)] == "" || !hasFinalizer(s, Finalizer) {
			return fmt.Errorf("%v %s", s.Finalizers, state(s))
		}
		return nil
	})
	setType(corev1.ServiceTypeClusterIP)
	eventually(t, "three failed cleanups", func() error {
		if n := tc.calls.Load(); n < 3 {
			return fmt.Errorf("%d calls", n)
		}
		return nil
	})
	tc.down.Store(false)
	e.cloud.set(nil)
	eventually(t, "the record and the finalizer gone", func() error {
		s := e.get(t, "web")
		if hasCleanupFinalizer(s) || s.Annotations[string(annotation.LoadBalancerBackends)] != "" || ingress(s) != "" {
			return fmt.Errorf("finalizers %v, %s", s.Finalizers, state(s))
		}
		return nil
	})
}
