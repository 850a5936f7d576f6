package router

import (
	"context"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	servicehelper "k8s.io/cloud-provider/service/helpers"
)

// withFinalizerAndClass gives a Service a class and upstream's cleanup
// finalizer, as a load-balancer controller serving that class writes it.
func withFinalizerAndClass(class string) func(*corev1.Service) {
	return func(s *corev1.Service) {
		s.Spec.LoadBalancerClass = &class
		s.Finalizers = append(s.Finalizers, servicehelper.LoadBalancerCleanupFinalizer)
	}
}

// TestServiceControllerLeavesClassedServicesAlone drives upstream's service
// controller, which acts on any Service being deleted with the finalizer
// service.kubernetes.io/load-balancer-cleanup, whatever its class (#24,
// "Also check"):
//   - a foreign class: nothing of ours is called, no event of ours is
//     recorded (upstream removes the finalizer: its own doing);
//   - one of our classes: upstream neither deletes the load balancer nor
//     removes the finalizer (our load-balancer controller does both), so
//     the two never clean up at once.
func TestServiceControllerLeavesClassedServicesAlone(t *testing.T) {
	other := newLBCloud("other", "198.51.100.7")
	r := mustRouter(t, testConfig(withClass("example.com/ours", "other")), lbBackend("other", "aws", other))
	foreign := newService("foreign", withFinalizerAndClass("example.com/theirs"))
	ours := newService("ours", withFinalizerAndClass("example.com/ours"))
	c := startCluster(t, r, foreign, ours)
	ensure(t, r, c.service(t, "ours")) // as our controller did
	c.markDeleted(t, "foreign")
	c.markDeleted(t, "ours")
	gets := func() int { other.mu.Lock(); defer other.mu.Unlock(); return other.gets }
	before := gets()
	runServiceController(t, c)

	eventually(t, "upstream to finish with the foreign Service", func() bool { return c.serviceGone(t, "foreign") })
	eventually(t, "upstream to try the Service of our class", func() bool {
		return slices.Contains(c.events(t, "ours"), "Warning/SyncLoadBalancerFailed")
	})
	if n := gets() - before; n != 0 {
		t.Errorf("the backend was asked %d times", n)
	}
	for _, e := range c.events(t, "foreign") {
		if strings.HasPrefix(e, "Warning/") {
			t.Errorf("event %s on the foreign Service", e)
		}
	}
	s := c.service(t, "ours")
	if !servicehelper.HasLBFinalizer(s) || !other.holds(s) {
		t.Fatalf("upstream cleaned up a Service of our class: finalizer %v, load balancer %v", s.Finalizers, other.holds(s))
	}
	// Our controller's part, done by hand: delete, then drop the finalizer.
	if err := r.EnsureLoadBalancerDeleted(context.Background(), cluster, s); err != nil {
		t.Fatal(err)
	}
	s.Finalizers = nil
	if _, err := c.client.CoreV1().Services("default").Update(context.Background(), s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the Service of our class gone", func() bool { return c.serviceGone(t, "ours") })
}
