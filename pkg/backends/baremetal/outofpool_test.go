package baremetal

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
)

// TestRestartKeepsOwnOutOfPoolAddress: after a restart, a Service whose
// status shows an address outside every pool (a reload shrank the pool
// under it) and whose router record names this backend alone still has its
// load balancer here, as it has in a process that ran through the reload
// (withPools keeps it): GetLoadBalancer reports it, the next Ensure
// replaces it with a pool address, and a delete releases it. A Service the
// record does not name this backend alone for (another backend's, several,
// none), one of a class (another controller's may carry our old record
// beside its own address) or one still under our classes' finalizer
// (turned classless behind our back) shows an address this backend cannot
// tell for its own: it is not claimed.
func TestRestartKeepsOwnOutOfPoolAddress(t *testing.T) {
	record := func(v string) svcTweak { return withAnnotation(string(annotation.LoadBalancerBackends), v) }
	const outside = "192.0.2.9" // the auto pool is 192.0.2.0/30
	tests := []struct {
		name string
		tw   []svcTweak
		ours bool
	}{
		{"recorded here alone", []svcTweak{record("metal"), withStatus(outside)}, true},
		{"recorded in another backend", []svcTweak{record("metal2"), withStatus(outside)}, false},
		{"recorded here and in another backend", []svcTweak{record("metal,metal2"), withStatus(outside)}, false},
		{"no record", []svcTweak{withStatus(outside)}, false},
		{"of a class (another controller's, a record of ours left on it)", []svcTweak{record("metal"), withStatus(outside), withClass("example.com/theirs")}, false},
		{"still under the finalizer of our classes", []svcTweak{record("metal"), withStatus(outside), withFinalizers(classedFinalizer, "service.kubernetes.io/load-balancer-cleanup")}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newTestCloud(t, lbSection)
			l, _ := c.LoadBalancer()
			lb := l.(*LoadBalancer)
			svc := newService("a", tt.tw...)
			lb.Seed([]*corev1.Service{svc})
			st, exists, err := lb.GetLoadBalancer(context.Background(), "c1", svc)
			if err != nil || exists != tt.ours {
				t.Fatalf("GetLoadBalancer = %v, %v, %v; want exists %v", st, exists, err, tt.ours)
			}
			if !tt.ours {
				return
			}
			if got := ingressIPs(st); got != outside {
				t.Errorf("GetLoadBalancer shows %q; want %s", got, outside)
			}
			st, err = lb.EnsureLoadBalancer(context.Background(), "c1", newService("a", record("metal")), nil)
			if err != nil || ingressIPs(st) == outside {
				t.Errorf("Ensure = %q, %v; want a pool address in place of %s", ingressIPs(st), err, outside)
			}
			if err := lb.EnsureLoadBalancerDeleted(context.Background(), "c1", svc); err != nil {
				t.Fatal(err)
			}
			if _, exists, _ := lb.GetLoadBalancer(context.Background(), "c1", svc); exists {
				t.Error("still held after the delete")
			}
		})
	}
}

func withClass(c string) svcTweak { return func(s *corev1.Service) { s.Spec.LoadBalancerClass = &c } }

func withFinalizers(f ...string) svcTweak { return func(s *corev1.Service) { s.Finalizers = f } }
