package lbcontroller

import (
	"context"
	"errors"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	utilt "github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
)

// classChangeConfig serves classless Services from one bare-metal backend
// of its own name (its addresses_in_use series is this test's alone).
const classChangeConfig = `apiVersion: multicloud-ccm.io/v1alpha1
kind: CloudConfig
clusterID: test
loadBalancer:
  drainPeriod: 0s
backends:
- name: metal-cc
  type: baremetal
  baremetal:
    inventory: [{name: worker-0, addresses: [{type: InternalIP, address: 10.0.0.10}]}]
    addressPools: [{name: lan, addresses: ["192.0.2.0/28"]}]
`

// TestClassChangedUnseenReleases (chaos seed 857543738): a classless
// Service served by bare metal is changed, as a user must, to ClusterIP
// (kube-apiserver clears its status) and at once to a LoadBalancer of a
// class this CCM does not serve; the controller, busy with the Service,
// sees only the end state. The change to ClusterIP ends our load balancer
// (needsCleanup would have deleted it had the controller seen it): its
// address goes back to the pool, its record and our finalizers go. The
// controller took it for a Service of a class a reload removed and left
// it all: addresses_in_use counted an address no status showed, held by
// a Service of another controller.
func TestClassChangedUnseenReleases(t *testing.T) {
	e := startEnv(t, envOptions{doc: classChangeConfig, classless: true, versioned: true})
	inUse := func() float64 {
		return utilt.GaugeValue(t, "multicloud_ccm_baremetal_addresses_in_use_total", map[string]string{"backend": "metal-cc"})
	}
	svc := service("web", nil)
	svc.Annotations = map[string]string{string(annotation.LoadBalancerBackend): "metal-cc"}
	e.create(t, svc)
	eventually(t, "addressed", addressed(e, t, "web"))
	if n := inUse(); n != 1 {
		t.Fatalf("addresses_in_use %v after the first address", n)
	}
	old := e.get(t, "web")

	// An edit's ensure holds the controller while the Service goes
	// through ClusterIP to another class: the next sync sees only that.
	entered, gate := make(chan struct{}), make(chan struct{})
	e.cloud.mu.Lock()
	e.cloud.during = func(*corev1.Service) { close(entered); <-gate }
	e.cloud.mu.Unlock()
	services := e.client.CoreV1().Services("default")
	old.Annotations["edited"] = "1"
	cur, err := services.Update(context.Background(), old, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	<-entered
	cur.Spec.Type = corev1.ServiceTypeClusterIP
	cur.Status.LoadBalancer = corev1.LoadBalancerStatus{} // as kube-apiserver clears it
	if cur, err = services.Update(context.Background(), cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	cur.Spec.Type = corev1.ServiceTypeLoadBalancer
	cur.Spec.LoadBalancerClass = ptrTo("example.com/another-controller")
	if _, err = services.Update(context.Background(), cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the controller's cache holding the new class", func() error {
		if s, err := e.ctrl.services.Services("default").Get("web"); err != nil || s.Spec.LoadBalancerClass == nil {
			return fmt.Errorf("cached %v %w", s, err)
		}
		return nil
	})
	close(gate)

	eventually(t, "our load balancer gone, its address back in the pool", func() error {
		s := e.get(t, "web")
		if e.cloud.held()[old.UID] {
			return errors.New("the router still holds its load balancer")
		}
		if n := inUse(); n != 0 {
			return fmt.Errorf("addresses_in_use %v, the status shows %q", n, ingresses(s))
		}
		if rec := s.Annotations[string(annotation.LoadBalancerBackends)]; rec != "" || hasFinalizer(s, Finalizer) || hasFinalizer(s, sharedFinalizer) {
			return fmt.Errorf("record %q, finalizers %v", rec, s.Finalizers)
		}
		return nil
	})
}
