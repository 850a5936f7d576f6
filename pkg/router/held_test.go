package router

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
)

// heldIPs lists the addresses' IPs, comma-separated.
func heldIPs(ins []corev1.LoadBalancerIngress) string {
	var out []string
	for _, in := range ins {
		out = append(out, in.IP+in.Hostname)
	}
	return strings.Join(out, ",")
}

// TestHeldAddressesFromTheRecord (issue 40): HeldAddresses answers from
// the Service's record and every backend it names, whatever the spec says
// now: a Service of another controller's class (no target of ours) whose
// record names a and b, both holding its load balancer (b draining), gets
// both addresses, where GetLoadBalancer's status is one backend's. A
// backend of the record that holds nothing adds nothing; a recorded
// backend that is not configured is named in the error, the others'
// addresses returned all the same. A Service with neither record nor
// target asks nobody.
func TestHeldAddressesFromTheRecord(t *testing.T) {
	r, a, b := twoClouds(t)
	ctx := context.Background()
	svc := newService("web")
	svc.Spec.LoadBalancerClass = ptr.To("example.com/theirs")
	svc.Annotations[string(annotation.LoadBalancerBackends)] = "a,b"
	svc.Annotations[string(annotation.LoadBalancerDraining)] = "b=2099-01-01T00:00:00Z"
	for _, c := range []*lbCloud{a, b} {
		if _, err := c.EnsureLoadBalancer(ctx, cluster, svc, nil); err != nil {
			t.Fatal(err)
		}
	}
	held, err := r.HeldAddresses(ctx, cluster, svc)
	if err != nil || heldIPs(held) != "192.0.2.1,198.51.100.1" {
		t.Errorf("HeldAddresses = %q, %v; want both backends' addresses", heldIPs(held), err)
	}
	if st, _, err := r.GetLoadBalancer(ctx, cluster, svc); err != nil || heldIPs(st.Ingress) != "192.0.2.1" {
		t.Errorf("GetLoadBalancer = %v, %v (the comparison above assumes one backend's status)", st, err)
	}

	if err := a.EnsureLoadBalancerDeleted(ctx, cluster, svc); err != nil {
		t.Fatal(err)
	}
	if held, err := r.HeldAddresses(ctx, cluster, svc); err != nil || heldIPs(held) != "198.51.100.1" {
		t.Errorf("a deleted: HeldAddresses = %q, %v; want b's alone", heldIPs(held), err)
	}

	gone := svc.DeepCopy()
	gone.Annotations[string(annotation.LoadBalancerBackends)] = "a,b,gone"
	held, err = r.HeldAddresses(ctx, cluster, gone)
	if heldIPs(held) != "198.51.100.1" || err == nil || !strings.Contains(err.Error(), `"gone"`) {
		t.Errorf("record naming an unconfigured backend: HeldAddresses = %q, %v; want b's address and an error naming gone", heldIPs(held), err)
	}

	other := newService("other")
	other.Spec.LoadBalancerClass = ptr.To("example.com/theirs")
	other.UID = svc.UID // held by b, but nothing of ours is recorded on it
	gets := b.gets
	if held, err := r.HeldAddresses(ctx, cluster, other); err != nil || len(held) > 0 || b.gets != gets {
		t.Errorf("no record, no target: HeldAddresses = %q, %v, %d calls; want nothing asked", heldIPs(held), err, b.gets-gets)
	}
}
