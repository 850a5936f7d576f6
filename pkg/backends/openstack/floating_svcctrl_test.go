package openstack

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
)

// TestServiceControllerInternalAndKeepFloatingIP drives the upstream
// service controller on the real Octavia (Neutron on the mux): a Service
// gets a floating IP from floating-network-id; the internal annotation set
// releases it (status: the VIP), a bad value is an event changing nothing,
// removed it allocates one again, all on the same load balancer; with
// keep-floatingip the Service's delete leaves the floating IP allocated and
// disassociated.
func TestServiceControllerInternalAndKeepFloatingIP(t *testing.T) {
	t.Parallel()
	f := NewFakeOpenStack(t)
	f.AnyToken = true
	e := newSvcEnv(t, func(s *Settings) { s.Endpoints.Network = f.NetworkURL() }, readyNode("n1", "10.30.0.1", nil))
	const want = "TCP/80 conn=-1 t=50000/5000/50000/0 xff= pool=TCP:ROUND_ROBIN monitor=TCP:5/3/1/3 members=n1"
	ext := map[annotation.Name]string{AnnotationFloatingNetworkID: floatingNet}
	svc := newService("fip")
	svc.Annotations = annotations(ext)
	t.Cleanup(func() { deleteConverged(t, e.cloud.lb, newService("fip")) })
	e.apply(t, svc)
	floating := func(st corev1.LoadBalancerStatus) error {
		if len(st.Ingress) != 1 || !strings.HasPrefix(st.Ingress[0].IP, "172.24.4.") {
			return fmt.Errorf("status %+v: want a floating IP", st)
		}
		if p := f.FloatingIPs()[st.Ingress[0].IP]; p.NetworkID != floatingNet {
			return fmt.Errorf("floating IP %+v: want it from %s", p, floatingNet)
		}
		return nil
	}
	lb := e.waitDetail(t, svc, want, floating)

	internal := newService("fip")
	internal.Annotations = annotations(map[annotation.Name]string{AnnotationFloatingNetworkID: floatingNet, AnnotationInternal: "true"})
	e.apply(t, internal)
	e.waitDetail(t, svc, want, func(st corev1.LoadBalancerStatus) error {
		if len(st.Ingress) != 1 || st.Ingress[0].IP != lb.VipAddress || len(f.FloatingIPs()) != 0 {
			return fmt.Errorf("status %+v, floating IPs %v: want the VIP %s and none", st, f.FloatingIPs(), lb.VipAddress)
		}
		return nil
	})

	neutronBefore, octaviaBefore := f.Mutates.Load(), len(e.octavia.Writes())
	bad := newService("fip")
	bad.Annotations = annotations(map[annotation.Name]string{AnnotationFloatingNetworkID: floatingNet, AnnotationInternal: "yes"})
	e.apply(t, bad)
	waitWarning(t, e, "fip", annotation.ReasonInvalid, string(AnnotationInternal)+`="yes"`)
	if w := e.octavia.Writes()[octaviaBefore:]; len(w) != 0 || f.Mutates.Load() != neutronBefore {
		t.Errorf("a bad internal value changed Octavia %q or Neutron (%d)", w, f.Mutates.Load()-neutronBefore)
	}

	kept := newService("fip")
	kept.Annotations = annotations(map[annotation.Name]string{AnnotationFloatingNetworkID: floatingNet, AnnotationKeepFloatingIP: "true"})
	e.apply(t, kept)
	got := e.waitDetail(t, svc, want, floating)
	if got.ID != lb.ID {
		t.Errorf("load balancer %s after internal on and off, want %s", got.ID, lb.ID)
	}
	addr := e.service(t, "fip").Status.LoadBalancer.Ingress[0].IP
	e.markDeleted(t, "fip")
	eventuallyOn(t, 120*time.Second, "the load balancer deleted, the floating IP kept", func() error {
		if len(e.service(t, "fip").Finalizers) != 0 {
			return fmt.Errorf("finalizer still there")
		}
		p, ok := f.FloatingIPs()[addr]
		if !ok || p.PortID != "" || !strings.HasPrefix(p.Description, "kept by multicloud-ccm") {
			return fmt.Errorf("floating IP %s: %+v (present %v), want it kept and disassociated", addr, p, ok)
		}
		return nil
	})
}
