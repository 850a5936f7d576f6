package openstack

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/loadbalancers"
	corev1 "k8s.io/api/core/v1"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

// TestUpdateChangesOnlyMembers (issue #43): on the real Octavia and
// Neutron, UpdateLoadBalancer of a Service whose spec changed since its
// load balancer was made (it now requests an address of another backend,
// its health check and a port changed: the router updates a load
// balancer kept or draining while the Service moves elsewhere) with a new
// node set changes the pool members, and nothing else: the floating IP,
// the listeners, pools and health monitors stay exactly as they were (IDs,
// addresses, settings). The dry run lists exactly those member changes
// (what plan predicts for a kept load balancer). EnsureLoadBalancer then
// applies the new spec as before: the monitor replaced, the new port's
// listener made, the floating IP replaced by the requested one. Before,
// the update was a whole ensure: it replaced the monitor, made the
// listener and released the floating IP "for the requested" address.
func TestUpdateChangesOnlyMembers(t *testing.T) {
	t.Parallel()
	s, nf := realNeutron(t)
	tp := nf.topology("update")
	s.LoadBalancer.FloatingNetworkID = tp.External
	c := newRealCloud(t, s, "t"+randomID(t))
	ctx := context.Background()
	n1, n2, n3 := newNode("n1", withInternalIP("10.4.7.1")), newNode("n2", withInternalIP("10.4.7.2")), newNode("n3", withInternalIP("10.4.7.3"))
	svc := newService("upd")
	onRealPort(t, c, svc, []*corev1.Node{n1, n2}, nf.port(tp, "vip-upd"))
	t.Cleanup(func() { deleteConverged(t, c.lb, svc) })
	st, _ := ensureConverged(t, c.lb, svc, []*corev1.Node{n1, n2})
	fip := st.Ingress[0].IP
	before := lbShape(t, c, svc)
	if before.fip != fip || before.monitors == "" {
		t.Fatalf("before the update: %+v, want floating IP %s and a monitor", before, fip)
	}

	requested := "172.24.4.243" // free on the floating network: Ensure would take it
	moved := svc.DeepCopy()
	moved.Spec.LoadBalancerIP = requested
	withLocalTraffic(32100)(moved)
	moved.Annotations[string(AnnotationHealthMonitorDelay)] = "9"
	withPort(corev1.ProtocolTCP, 8443, 30443)(moved)
	nodes := []*corev1.Node{n2, n3}

	dctx, intents := backends.WithDryRun(ctx)
	if err := c.lb.UpdateLoadBalancer(dctx, "kubernetes", moved.DeepCopy(), nodes); err != nil {
		t.Fatalf("dry-run update: %v", err)
	}
	var planned []string
	for _, in := range intents() {
		planned = append(planned, in.Call+": "+in.What)
	}
	if want := []string{"openstack: octavia: listener TCP:80: member 10.4.7.3:30080 added, member 10.4.7.1:30080 removed"}; !slices.Equal(planned, want) {
		t.Errorf("the dry run of the update lists %q, want only the member change %q", planned, want)
	}

	_, w0 := apiCalls(t, c)
	updateConverged(t, c.lb, moved, nodes)
	if _, w := apiCalls(t, c); w-w0 != 1 {
		t.Errorf("the update made %v mutating calls, want 1 (the pool's members)", w-w0)
	}
	after := lbShape(t, c, svc)
	wantShape := before
	wantShape.members = "n2 10.4.7.2:30080 monitor 0; n3 10.4.7.3:30080 monitor 0"
	if after != wantShape {
		t.Errorf("after the update:\n  %+v\nwant only the members changed:\n  %+v", after, wantShape)
	}
	if fips := nf.floatingIPs(tp); len(fips) != 1 || fips[fip].ID == "" {
		t.Errorf("floating IPs after the update %+v, want %s alone, kept", fips, fip)
	}

	st, _ = ensureConverged(t, c.lb, moved, nodes)
	applied := lbShape(t, c, moved)
	if len(st.Ingress) != 1 || st.Ingress[0].IP != requested || applied.fip != requested {
		t.Errorf("Ensure after the update: status %+v, floating IP %q; want the requested %s", st, applied.fip, requested)
	}
	if !strings.Contains(applied.listeners, "TCP:8443") || !strings.Contains(applied.monitors, "HTTP delay 9") || applied.monitors == before.monitors {
		t.Errorf("Ensure after the update: listeners %q, monitors %q; want the new port's listener and an HTTP monitor with delay 9", applied.listeners, applied.monitors)
	}
	if _, ok := nf.floatingIPs(tp)[fip]; ok {
		t.Errorf("Ensure after the update kept the floating IP %s it allocated, want it released for the requested %s", fip, requested)
	}
}

// shape is what a test compares of a load balancer: its floating IP, and
// its listeners, pools, monitors and members with their IDs and settings.
type shape struct {
	id, fip, listeners, pools, monitors, members string
}

// lbShape reads the Service's load balancer's shape from Octavia and
// Neutron.
func lbShape(t *testing.T, c *Cloud, svc *corev1.Service) shape {
	t.Helper()
	ctx := context.Background()
	sc, err := c.lb.clients(ctx)
	if err != nil {
		t.Fatal(err)
	}
	lb := theLB(t, c, svc)
	st, err := readState(ctx, sc.loadBalancer, lb.ID)
	if err != nil {
		t.Fatal(err)
	}
	var out shape
	out.id = lb.ID
	if out.fip, err = c.lb.sharedAddress(ctx, sc, lb); err != nil {
		t.Fatal(err)
	}
	var ls, ps, ms, mem []string
	for _, l := range st.listeners {
		ls = append(ls, fmt.Sprintf("%s:%d %s pool %s", l.Protocol, l.ProtocolPort, l.ID, l.DefaultPoolID))
	}
	for id, p := range st.pools {
		ps = append(ps, fmt.Sprintf("%s %s %s", id, p.pool.Protocol, p.pool.LBMethod))
		if m := p.monitor; m != nil {
			ms = append(ms, fmt.Sprintf("%s %s delay %d timeout %d retries %d/%d %s", m.ID, m.Type, m.Delay, m.Timeout, m.MaxRetries, m.MaxRetriesDown, m.URLPath))
		}
		for _, m := range p.members {
			mem = append(mem, fmt.Sprintf("%s %s:%d monitor %d", m.Name, m.Address, m.ProtocolPort, m.MonitorPort))
		}
	}
	for _, s := range [][]string{ls, ps, ms, mem} {
		slices.Sort(s)
	}
	out.listeners, out.pools, out.monitors, out.members = strings.Join(ls, "; "), strings.Join(ps, "; "), strings.Join(ms, "; "), strings.Join(mem, "; ")
	return out
}

// updateConverged calls UpdateLoadBalancer until it stops asking to retry.
func updateConverged(t *testing.T, lb *LoadBalancer, svc *corev1.Service, nodes []*corev1.Node) {
	t.Helper()
	deadline := time.Now().Add(120 * time.Second)
	for {
		err := lb.UpdateLoadBalancer(context.Background(), "kubernetes", svc.DeepCopy(), nodes)
		if err == nil {
			return
		}
		if !isRetry(err) && !sqliteLocked(err) {
			t.Fatalf("UpdateLoadBalancer: %v", err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("UpdateLoadBalancer still asks to retry: %v", err)
		}
		time.Sleep(lb.retryDelay)
	}
}

// TestUpdateLeavesAdoptionToEnsure: UpdateLoadBalancer of a Service whose
// load balancer cloud-provider-openstack made and this backend has not
// adopted yet changes nothing, members included, and its dry run lists
// nothing: only an Ensure adopts (then converges the members). Before,
// the update adopted it (tagged it as this Service's).
func TestUpdateLeavesAdoptionToEnsure(t *testing.T) {
	t.Parallel()
	s := realOctavia(t)
	c := newRealCloud(t, s, "t"+randomID(t))
	ctx := context.Background()
	sc, err := c.lb.clients(ctx)
	if err != nil {
		t.Fatal(err)
	}
	n1, n2, n3 := newNode("n1", withInternalIP("10.4.8.1")), newNode("n2", withInternalIP("10.4.8.2")), newNode("n3", withInternalIP("10.4.8.3"))
	svc := newService("occm-upd-" + randomID(t))
	made := createLikeOCCM(t, sc.loadBalancer, svc, []*corev1.Node{n1, n2})
	t.Cleanup(func() { deleteConverged(t, c.lb, svc) })
	nodes := []*corev1.Node{n2, n3}

	dctx, intents := backends.WithDryRun(ctx)
	if err := c.lb.UpdateLoadBalancer(dctx, "kubernetes", svc.DeepCopy(), nodes); err != nil || len(intents()) != 0 {
		t.Errorf("dry-run update of a load balancer not adopted: %v, intents %+v; want nil and none", err, intents())
	}
	_, w0 := apiCalls(t, c)
	if err := c.lb.UpdateLoadBalancer(ctx, "kubernetes", svc.DeepCopy(), nodes); err != nil {
		t.Errorf("update of a load balancer not adopted: %v, want nil", err)
	}
	if _, w := apiCalls(t, c); w != w0 {
		t.Errorf("the update of a load balancer not adopted made %v mutating calls, want none", w-w0)
	}
	lb, err := loadbalancers.Get(ctx, sc.loadBalancer, made.ID).Extract()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(lb.Tags, made.Tags) {
		t.Errorf("tags after the update %q, want OCCM's %q alone (not adopted)", lb.Tags, made.Tags)
	}

	ensureConverged(t, c.lb, svc, nodes)
	if got := lbShape(t, c, svc); got.id != made.ID || got.members != "n2 10.4.8.2:30080 monitor 0; n3 10.4.8.3:30080 monitor 0" {
		t.Errorf("after Ensure: load balancer %s, members %q; want OCCM's %s adopted, members n2 and n3", got.id, got.members, made.ID)
	}
}

// TestUpdateSharedChangesOnlyItsMembers: on a load balancer two Services
// share (load-balancer-id), UpdateLoadBalancer of the sharing Service,
// whose health-check annotation changed, with a new node set changes the
// members of its own pool alone: the owner's pool, every monitor and
// listener stay as they were; the owner's update then changes the owner's
// members alone. Before, the sharer's update also updated its monitor.
func TestUpdateSharedChangesOnlyItsMembers(t *testing.T) {
	t.Parallel()
	s := realOctavia(t)
	c := newRealCloud(t, s, "t"+randomID(t))
	n1, n2 := newNode("n1", withInternalIP("10.4.9.1")), newNode("n2", withInternalIP("10.4.9.2"))
	owner := newService("owner")
	t.Cleanup(func() { deleteConverged(t, c.lb, owner) })
	ensureConverged(t, c.lb, owner, []*corev1.Node{n1})
	lb := theLB(t, c, owner)
	sharer := newService("sharer", withAnnotation(AnnotationLoadBalancerID, lb.ID), func(s *corev1.Service) {
		s.Spec.Ports = []corev1.ServicePort{{Name: "alt", Protocol: corev1.ProtocolTCP, Port: 8080, NodePort: 30081}}
	})
	t.Cleanup(func() { deleteConverged(t, c.lb, sharer) })
	ensureConverged(t, c.lb, sharer, []*corev1.Node{n1})
	before := lbShape(t, c, owner)
	if want := "n1 10.4.9.1:30080 monitor 0; n1 10.4.9.1:30081 monitor 0"; before.members != want || strings.Count(before.monitors, ";") != 1 {
		t.Fatalf("shared load balancer before the updates: %+v, want members %q and two monitors", before, want)
	}

	changed := sharer.DeepCopy()
	changed.Annotations[string(AnnotationHealthMonitorDelay)] = "9"
	updateConverged(t, c.lb, changed, []*corev1.Node{n2})
	want := before
	want.members = "n1 10.4.9.1:30080 monitor 0; n2 10.4.9.2:30081 monitor 0"
	if got := lbShape(t, c, owner); got != want {
		t.Errorf("after the sharer's update:\n  %+v\nwant only the sharer's members changed:\n  %+v", got, want)
	}
	updateConverged(t, c.lb, owner, []*corev1.Node{n1, n2})
	want.members = "n1 10.4.9.1:30080 monitor 0; n2 10.4.9.2:30080 monitor 0; n2 10.4.9.2:30081 monitor 0"
	if got := lbShape(t, c, owner); got != want {
		t.Errorf("after the owner's update:\n  %+v\nwant only the owner's members changed:\n  %+v", got, want)
	}
}
