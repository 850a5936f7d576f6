package lbcontroller

import (
	"fmt"

	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestOutOfPoolAddressDeletedAfterRestart (chaos seed 631642375): a
// classless Service bare metal served (the shared finalizer, the router's
// record, its address) is deleted while no replica leads, and the
// leader that takes over starts with a configuration whose pool no
// longer covers that address (a pool shrunk by a reload). The address is
// still the one bare metal gave it: its deletion is cleaned up and the
// Service goes. Bare metal's allocator, rebuilt from the statuses, left
// out the address outside every pool: GetLoadBalancer said none existed,
// cleanup took the address for another controller's and kept the shared
// finalizer, and the Service stayed Terminating with nobody to remove it.
func TestOutOfPoolAddressDeletedAfterRestart(t *testing.T) {
	s := service("web", nil)
	s.Finalizers = []string{sharedFinalizer}
	s.Annotations = metalRecord()
	// metal's pool is 192.0.2.0/28: .33 was in the pool before it shrank.
	s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.0.2.33"}}
	now := metav1.Now()
	s.DeletionTimestamp = &now
	e := startEnv(t, envOptions{doc: metals(""), classless: true, versioned: true}, s)
	eventually(t, "the Service deleted", func() error {
		if s := getOrGone(t, e, "web"); s != nil {
			return fmt.Errorf("still there: finalizers %v, status %q", s.Finalizers, ingresses(s))
		}
		return nil
	})
}

// TestOutOfPoolAddressClearedWhenUnroutedAfterRestart (chaos seed
// 857543755): a classless Service bare metal served by default (the
// shared finalizer, the router's record, its address, our conditions);
// a reload removes the default backend and shrinks the pool below its
// address, and the leader that takes over after it (a restart: the
// Service's next sync) removes its load balancer, as docs/routing.md says
// for a Service with no target any more: its address leaves the status,
// and its record, our conditions and the finalizer go. Bare metal's
// allocator, rebuilt from the statuses, left out the address outside
// every pool: the router found no load balancer to release and cleared
// nothing, and the Service kept the address and LoadBalancerReady=True.
func TestOutOfPoolAddressClearedWhenUnroutedAfterRestart(t *testing.T) {
	s := service("web", nil)
	s.Finalizers = []string{sharedFinalizer}
	s.Annotations = metalRecord()
	s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.0.2.33"}}
	s.Status.Conditions = []metav1.Condition{
		{Type: ConditionReady, Status: metav1.ConditionTrue, Reason: reasonReady, Message: conditionsMessage, LastTransitionTime: metav1.Now()},
		{Type: ConditionBackendPrefix + "metal", Status: metav1.ConditionTrue, Reason: reasonServing, Message: "The load balancer in backend \"metal\" serves the Service", LastTransitionTime: metav1.Now()},
	}
	e := startEnv(t, envOptions{doc: metals(""), classless: true, versioned: true}, s)
	eventually(t, "the Service let go", func() error {
		s := e.get(t, "web")
		if len(s.Status.LoadBalancer.Ingress) > 0 || len(s.Finalizers) > 0 || hasRecord(s) || len(s.Status.Conditions) > 0 {
			return fmt.Errorf("status %q, finalizers %v, annotations %v, conditions %v", ingresses(s), s.Finalizers, s.Annotations, s.Status.Conditions)
		}
		return nil
	})
}
