package openstack

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/loadbalancers"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// portService is a Service with one TCP port.
func portService(name string, port, nodePort int32, tweaks ...serviceTweak) *corev1.Service {
	svc := newService(name, tweaks...)
	svc.Spec.Ports = []corev1.ServicePort{{Name: "p", Protocol: corev1.ProtocolTCP, Port: port, NodePort: nodePort}}
	return svc
}

// listenersOn lists a load balancer's listeners as sorted "PROTO/port".
func listenersOn(t *testing.T, c *Cloud, lbID string) (string, error) {
	t.Helper()
	ctx := context.Background()
	sc, err := c.lb.clients(ctx)
	if err != nil {
		return "", err
	}
	st, err := readState(ctx, sc.loadBalancer, lbID)
	if err != nil {
		return "", err
	}
	var out []string
	for _, ls := range st.listeners {
		out = append(out, fmt.Sprintf("%s/%d", ls.Protocol, ls.ProtocolPort))
	}
	slices.Sort(out)
	return strings.Join(out, ","), nil
}

// markDeleted sets the Service's deletionTimestamp, as the API server does
// while the service controller's finalizer is on it.
func (e *svcEnv) markDeleted(t *testing.T, name string) {
	t.Helper()
	svc := e.service(t, name)
	now := metav1.Now()
	svc.DeletionTimestamp = &now
	if _, err := e.client.CoreV1().Services(svc.Namespace).Update(e.ctx, svc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestServiceControllerSharedLoadBalancer drives the upstream service
// controller on the real Octavia (Neutron on the mux) through OCCM's
// load-balancer sharing: a Service naming another's load balancer in
// load-balancer-id adds its listener to it and reports the owner's floating
// IP; a third Service beyond maxSharedLB, an internal one, and a port clash
// are Warning events that change nothing; the owner deleted first leaves
// the load balancer, its floating IP and the sharer's listener in place;
// the last Service deleted removes the load balancer and releases the
// floating IP.
func TestServiceControllerSharedLoadBalancer(t *testing.T) {
	t.Parallel()
	f := NewFakeOpenStack(t)
	f.AnyToken = true
	e := newSvcEnv(t, func(s *Settings) {
		s.Endpoints.Network = f.NetworkURL()
		s.LoadBalancer.FloatingNetworkID = floatingNet
	}, readyNode("n1", "10.27.0.1", nil))
	owner := portService("owner", 80, 30080)
	t.Cleanup(func() { deleteConverged(t, e.cloud.lb, owner) })
	e.apply(t, owner)
	lb := e.waitDetail(t, owner, "TCP/80 conn=-1 t=50000/5000/50000/0 xff= pool=TCP:ROUND_ROBIN monitor=TCP:5/3/1/3 members=n1", func(st corev1.LoadBalancerStatus) error {
		if len(st.Ingress) != 1 || !strings.HasPrefix(st.Ingress[0].IP, "172.24.4.") {
			return fmt.Errorf("status %+v: want a floating IP", st)
		}
		return nil
	})
	fip := e.service(t, "owner").Status.LoadBalancer.Ingress[0].IP

	sharer := portService("sharer", 8080, 30081, withAnnotation(AnnotationLoadBalancerID, lb.ID))
	t.Cleanup(func() { deleteConverged(t, e.cloud.lb, sharer) })
	e.apply(t, sharer)
	eventuallyOn(t, 120*time.Second, "the sharer's listener on the owner's load balancer, its status the floating IP", func() error {
		got, err := listenersOn(t, e.cloud, lb.ID)
		if err != nil || got != "TCP/80,TCP/8080" {
			return fmt.Errorf("listeners %s (%w), want TCP/80,TCP/8080; warnings %q", got, err, e.warnings(t, "sharer"))
		}
		if st := e.service(t, "sharer").Status.LoadBalancer; len(st.Ingress) != 1 || st.Ingress[0].IP != fip {
			return fmt.Errorf("sharer status %+v, want %s", st, fip)
		}
		return nil
	})

	before, neutronBefore := len(e.octavia.Writes()), f.Mutates.Load()
	third := portService("third", 9090, 30082, withAnnotation(AnnotationLoadBalancerID, lb.ID))
	internal := portService("internal", 9091, 30083, withAnnotation(AnnotationLoadBalancerID, lb.ID), withAnnotation(AnnotationInternal, "true"))
	for _, svc := range []*corev1.Service{third, internal} {
		t.Cleanup(func() { deleteConverged(t, e.cloud.lb, svc) })
		e.apply(t, svc)
	}
	waitWarning(t, e, "third", reasonShared, "already serves 2 Services", "maxSharedLB is 2")
	waitWarning(t, e, "internal", reasonShared, "an internal Service cannot share")
	e.apply(t, portService("sharer", 80, 30081, withAnnotation(AnnotationLoadBalancerID, lb.ID)))
	waitWarning(t, e, "sharer", reasonShared, "port 80 (TCP) is served by another Service")
	if w := e.octavia.Writes()[before:]; len(w) != 0 || f.Mutates.Load() != neutronBefore {
		t.Errorf("refused sharing changed Octavia %q or Neutron (%d)", w, f.Mutates.Load()-neutronBefore)
	}
	e.apply(t, sharer)

	// The refused Services are deleted before the owner: once the owner
	// has left, the load balancer has room for "third" again
	// (maxSharedLB counts the Services on it now), and its next retry
	// rightly joins.
	for _, name := range []string{"third", "internal"} {
		e.markDeleted(t, name)
	}
	eventuallyOn(t, 60*time.Second, "the refused Services deleted", func() error {
		for _, name := range []string{"third", "internal"} {
			if f := e.service(t, name).Finalizers; len(f) != 0 {
				return fmt.Errorf("%s still has finalizers %q", name, f)
			}
		}
		return nil
	})
	if got, err := listenersOn(t, e.cloud, lb.ID); err != nil || got != "TCP/80,TCP/8080" {
		t.Errorf("after the refused Services' deletes: listeners %s (%v), want TCP/80,TCP/8080", got, err)
	}

	e.markDeleted(t, "owner")
	eventuallyOn(t, 120*time.Second, "the owner's listener gone, the load balancer and floating IP kept", func() error {
		got, err := listenersOn(t, e.cloud, lb.ID)
		if err != nil || got != "TCP/8080" {
			return fmt.Errorf("listeners %s (%w), want TCP/8080", got, err)
		}
		if len(e.service(t, "owner").Finalizers) != 0 {
			return fmt.Errorf("owner still has its finalizer")
		}
		return nil
	})
	if p, ok := f.FloatingIPs()[fip]; !ok || p.PortID != lb.VipPortID {
		t.Fatalf("floating IP %s after the owner left: %+v (present %v), want it on the VIP port", fip, p, ok)
	}
	if st := e.service(t, "sharer").Status.LoadBalancer; len(st.Ingress) != 1 || st.Ingress[0].IP != fip {
		t.Errorf("sharer status %+v after the owner left, want %s", st, fip)
	}

	e.markDeleted(t, "sharer")
	eventuallyOn(t, 120*time.Second, "the load balancer deleted and its floating IP released with the last Service", func() error {
		got, err := loadbalancers.Get(context.Background(), e.sc(t).loadBalancer, lb.ID).Extract()
		if !gophercloud.ResponseCodeIs(err, http.StatusNotFound) {
			if err == nil {
				ls, _ := listenersOn(t, e.cloud, lb.ID)
				return fmt.Errorf("load balancer %s still there (%s, tags %q, listeners %s); warnings %q %q %q", lb.ID, got.ProvisioningStatus, got.Tags, ls, e.warnings(t, "third"), e.warnings(t, "sharer"), e.warnings(t, "internal"))
			}
			return err
		}
		if len(f.FloatingIPs()) != 0 {
			return fmt.Errorf("floating IPs left: %v", f.FloatingIPs())
		}
		return nil
	})
}

func (e *svcEnv) sc(t *testing.T) *serviceClients {
	t.Helper()
	sc, err := e.cloud.lb.clients(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

// TestServiceControllerSharedOwnerKeepsFloatingIP drives the upstream
// service controller on the real Octavia (Neutron on the mux): the owner of
// a shared load balancer asked to keep its floating IP (keep-floatingip)
// and is deleted while another Service shares the load balancer; the
// floating IP is the user's: disassociated and kept (not handed over to
// the load balancer), and still kept after the last Service is deleted
// with the load balancer (#25 item 7: it was released then). The departed
// owner no longer counts towards maxSharedLB (2): a third Service may then
// share (it was refused as a third Service).
func TestServiceControllerSharedOwnerKeepsFloatingIP(t *testing.T) {
	t.Parallel()
	f := NewFakeOpenStack(t)
	f.AnyToken = true
	e := newSvcEnv(t, func(s *Settings) {
		s.Endpoints.Network = f.NetworkURL()
		s.LoadBalancer.FloatingNetworkID = floatingNet
	}, readyNode("n1", "10.27.1.1", nil))
	owner := portService("owner", 80, 30080, withAnnotation(AnnotationKeepFloatingIP, "true"))
	t.Cleanup(func() { deleteConverged(t, e.cloud.lb, owner) })
	e.apply(t, owner)
	lb := e.waitDetail(t, owner, "TCP/80 conn=-1 t=50000/5000/50000/0 xff= pool=TCP:ROUND_ROBIN monitor=TCP:5/3/1/3 members=n1", func(st corev1.LoadBalancerStatus) error {
		if len(st.Ingress) != 1 || !strings.HasPrefix(st.Ingress[0].IP, "172.24.4.") {
			return fmt.Errorf("status %+v: want a floating IP", st)
		}
		return nil
	})
	fip := e.service(t, "owner").Status.LoadBalancer.Ingress[0].IP
	sharer := portService("sharer", 8080, 30081, withAnnotation(AnnotationLoadBalancerID, lb.ID))
	t.Cleanup(func() { deleteConverged(t, e.cloud.lb, sharer) })
	e.apply(t, sharer)
	eventuallyOn(t, 120*time.Second, "the sharer's listener on the owner's load balancer", func() error {
		if got, err := listenersOn(t, e.cloud, lb.ID); err != nil || got != "TCP/80,TCP/8080" {
			return fmt.Errorf("listeners %s (%w), want TCP/80,TCP/8080; warnings %q", got, err, e.warnings(t, "sharer"))
		}
		return nil
	})

	kept := func() error {
		p, ok := f.FloatingIPs()[fip]
		if !ok || p.PortID != "" || !strings.HasPrefix(p.Description, "kept by multicloud-ccm") {
			return fmt.Errorf("floating IP %s: %+v (present %v), want it kept and disassociated", fip, p, ok)
		}
		return nil
	}
	e.markDeleted(t, "owner")
	eventuallyOn(t, 180*time.Second, "the owner gone, its floating IP kept and disassociated", func() error {
		if len(e.service(t, "owner").Finalizers) != 0 {
			return fmt.Errorf("owner still has its finalizer")
		}
		if got, err := listenersOn(t, e.cloud, lb.ID); err != nil || got != "TCP/8080" {
			return fmt.Errorf("listeners %s (%w), want TCP/8080", got, err)
		}
		return kept()
	})
	third := portService("third", 9090, 30082, withAnnotation(AnnotationLoadBalancerID, lb.ID))
	t.Cleanup(func() { deleteConverged(t, e.cloud.lb, third) })
	e.apply(t, third)
	eventuallyOn(t, 120*time.Second, "a third Service sharing once the owner left", func() error {
		if got, err := listenersOn(t, e.cloud, lb.ID); err != nil || got != "TCP/8080,TCP/9090" {
			return fmt.Errorf("listeners %s (%w), want TCP/8080,TCP/9090; warnings %q", got, err, e.warnings(t, "third"))
		}
		return nil
	})
	e.markDeleted(t, "third")
	e.markDeleted(t, "sharer")
	eventuallyOn(t, 180*time.Second, "the load balancer deleted with the last Service, the floating IP still kept", func() error {
		if _, err := loadbalancers.Get(context.Background(), e.sc(t).loadBalancer, lb.ID).Extract(); !gophercloud.ResponseCodeIs(err, http.StatusNotFound) {
			return fmt.Errorf("load balancer %s: %w, want it gone", lb.ID, err)
		}
		return kept()
	})
}

// TestServiceControllerShareLeftByAnnotation drives the upstream service
// controller on the real Octavia: a sharing Service whose load-balancer-id
// annotation is removed leaves the shared load balancer (its listener and
// its mccm-shared tag) and gets a load balancer of its own; the owner
// deleted then deletes the shared load balancer, which its departed sharer's
// tag kept forever before (a leak).
func TestServiceControllerShareLeftByAnnotation(t *testing.T) {
	t.Parallel()
	e := newSvcEnv(t, nil, readyNode("n1", "10.27.2.1", nil))
	owner := portService("owner", 80, 30080)
	t.Cleanup(func() { deleteConverged(t, e.cloud.lb, owner) })
	e.apply(t, owner)
	lb := e.waitDetail(t, owner, "TCP/80 conn=-1 t=50000/5000/50000/0 xff= pool=TCP:ROUND_ROBIN monitor=TCP:5/3/1/3 members=n1", func(corev1.LoadBalancerStatus) error { return nil })
	sharer := portService("sharer", 8080, 30081, withAnnotation(AnnotationLoadBalancerID, lb.ID))
	t.Cleanup(func() { deleteConverged(t, e.cloud.lb, portService("sharer", 8080, 30081)) })
	e.apply(t, sharer)
	eventuallyOn(t, 120*time.Second, "the sharer's listener on the owner's load balancer", func() error {
		if got, err := listenersOn(t, e.cloud, lb.ID); err != nil || got != "TCP/80,TCP/8080" {
			return fmt.Errorf("listeners %s (%w), want TCP/80,TCP/8080; warnings %q", got, err, e.warnings(t, "sharer"))
		}
		return nil
	})

	e.apply(t, portService("sharer", 8080, 30081))
	e.waitDetail(t, sharer, "TCP/8080 conn=-1 t=50000/5000/50000/0 xff= pool=TCP:ROUND_ROBIN monitor=TCP:5/3/1/3 members=n1", func(corev1.LoadBalancerStatus) error {
		got, err := loadbalancers.Get(context.Background(), e.sc(t).loadBalancer, lb.ID).Extract()
		if err != nil {
			return err
		}
		if slices.Contains(got.Tags, e.cloud.lb.sharedTag(sharer)) {
			return fmt.Errorf("shared load balancer %s still tagged %q", lb.ID, got.Tags)
		}
		if ls, err := listenersOn(t, e.cloud, lb.ID); err != nil || ls != "TCP/80" {
			return fmt.Errorf("shared load balancer's listeners %s (%w), want TCP/80", ls, err)
		}
		return nil
	})

	e.markDeleted(t, "owner")
	eventuallyOn(t, 180*time.Second, "the owner's load balancer deleted with it", func() error {
		got, err := loadbalancers.Get(context.Background(), e.sc(t).loadBalancer, lb.ID).Extract()
		if gophercloud.ResponseCodeIs(err, http.StatusNotFound) {
			return nil
		}
		if err == nil {
			return fmt.Errorf("load balancer %s still there (%s, tags %q)", lb.ID, got.ProvisioningStatus, got.Tags)
		}
		return err
	})
}
