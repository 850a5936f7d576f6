package lbcontroller

import (
	"context"
	"errors"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
)

// TestClusterIPCleanupMeetsForeignClass (chaos seed 290552101): a
// classless Service served by bare metal under the shared finalizer is
// turned ClusterIP, and our cleanup of that version deletes its load
// balancer; meanwhile the user makes it a LoadBalancer of another
// controller's class, as a user must change a class. Our finalizer
// write conflicts and, on the version re-read, found a LoadBalancer again
// and wrote nothing, leaving it "to its sync"; but the Service was no
// longer ours and its sync, with nothing remembered, handed it over
// without a write. The shared finalizer we had put stayed, so the
// Service's deletion hung forever: nobody cleans up a Service of a class
// nobody serves, and ours saw no record of its own on it. Now the
// cleanup's write on the re-read version does what leaving us does: our
// finalizers go (the shared one too, as we put it on a classless
// Service), and the deletion completes.
func TestClusterIPCleanupMeetsForeignClass(t *testing.T) {
	var rd *racingDeletes
	var e *env
	e = startEnv(t, envOptions{doc: classChangeConfig, classless: true, versioned: true, wrap: func(h *hookedCloud) Cloud {
		rd = &racingDeletes{hookedCloud: h, errs: make(chan error, 1)}
		rd.race = func() error {
			return retryUpdate(e, "web", func(s *corev1.Service) {
				s.Spec.Type = corev1.ServiceTypeLoadBalancer
				s.Spec.LoadBalancerClass = ptrTo("example.com/another-controller")
			})
		}
		return rd
	}})
	svc := service("web", nil)
	svc.Annotations = map[string]string{string(annotation.LoadBalancerBackend): "metal-cc"}
	e.create(t, svc)
	eventually(t, "addressed", addressed(e, t, "web"))
	if s := e.get(t, "web"); !hasFinalizer(s, sharedFinalizer) {
		t.Fatalf("finalizers %v; want the shared one", s.Finalizers)
	}
	rd.armed.Store(true)
	if err := retryUpdate(e, "web", func(s *corev1.Service) {
		s.Spec.Type = corev1.ServiceTypeClusterIP
		s.Status.LoadBalancer = corev1.LoadBalancerStatus{} // as kube-apiserver clears it
	}); err != nil {
		t.Fatal(err)
	}
	if err := receive(t, rd.errs, "the class change during our cleanup"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "our finalizers gone from the Service of another class", func() error {
		s := e.get(t, "web")
		if s.Spec.LoadBalancerClass == nil {
			return errors.New("not yet of the other class")
		}
		if hasFinalizer(s, Finalizer) || hasFinalizer(s, sharedFinalizer) || hasRecord(s) {
			return fmt.Errorf("finalizers %v, %s", s.Finalizers, state(s))
		}
		return nil
	})
	if err := e.client.CoreV1().Services("default").Delete(context.Background(), "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitServiceGone(t, e, "web")
}
