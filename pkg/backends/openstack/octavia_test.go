package openstack

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

// octaviaView is what the real Octavia holds for a Service, flattened.
type octaviaView struct {
	lbs       int
	listeners []string // "TCP/80 cidrs=[..] pool=ROUND_ROBIN monitor=TCP"
	members   map[string][]string
}

func observe(t *testing.T, c *Cloud, svc *corev1.Service) octaviaView {
	t.Helper()
	ctx := context.Background()
	sc, err := c.lb.clients(ctx)
	if err != nil {
		t.Fatal(err)
	}
	found, err := c.lb.find(ctx, sc, svc)
	if err != nil {
		t.Fatal(err)
	}
	v := octaviaView{lbs: len(found), members: map[string][]string{}}
	if len(found) != 1 {
		return v
	}
	st, err := readState(ctx, sc.loadBalancer, found[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, ls := range st.listeners {
		key := fmt.Sprintf("%s/%d", ls.Protocol, ls.ProtocolPort)
		desc := fmt.Sprintf("%s cidrs=%v", key, ls.AllowedCIDRs)
		if p := st.pools[ls.DefaultPoolID]; p != nil {
			desc += " pool=" + p.pool.LBMethod
			if p.monitor != nil {
				desc += " monitor=" + p.monitor.Type + p.monitor.URLPath
			}
			for _, m := range p.members {
				v.members[key] = append(v.members[key], fmt.Sprintf("%s %s:%d mon=%d", m.Name, m.Address, m.ProtocolPort, m.MonitorPort))
			}
			sort.Strings(v.members[key])
		}
		v.listeners = append(v.listeners, desc)
	}
	sort.Strings(v.listeners)
	return v
}

func assertView(t *testing.T, got octaviaView, listeners []string, members map[string][]string) {
	t.Helper()
	if got.lbs != 1 {
		t.Fatalf("load balancers for the Service: got %d, want exactly 1", got.lbs)
	}
	if strings.Join(got.listeners, "\n") != strings.Join(listeners, "\n") {
		t.Errorf("listeners:\n got %q\nwant %q", got.listeners, listeners)
	}
	for k, want := range members {
		if strings.Join(got.members[k], ",") != strings.Join(want, ",") {
			t.Errorf("members of %s:\n got %q\nwant %q", k, got.members[k], want)
		}
	}
}

// TestOctaviaLifecycle drives one Service through its life against the real
// Octavia: create, steady state, node changes, a new port, traffic policy
// and source ranges, a port removed, delete.
func TestOctaviaLifecycle(t *testing.T) {
	t.Parallel()
	s := realOctavia(t)
	c := newRealCloud(t, s, "t"+randomID(t))
	a, b, bm := newNode("vm-a", withInternalIP("10.0.0.11")), newNode("vm-b", withInternalIP("10.0.0.12")), newNode("bm-1", withInternalIP("192.168.7.21"))
	svc := newService("web")

	steps := []struct {
		name      string
		svc       *corev1.Service
		nodes     []*corev1.Node
		listeners []string
		members   map[string][]string
	}{
		{
			name: "create", svc: svc, nodes: []*corev1.Node{a, b},
			listeners: []string{"TCP/80 cidrs=[] pool=ROUND_ROBIN monitor=TCP"},
			members:   map[string][]string{"TCP/80": {"vm-a 10.0.0.11:30080 mon=0", "vm-b 10.0.0.12:30080 mon=0"}},
		},
		{
			name: "bare-metal node added, vm-a removed", svc: svc, nodes: []*corev1.Node{b, bm},
			listeners: []string{"TCP/80 cidrs=[] pool=ROUND_ROBIN monitor=TCP"},
			members:   map[string][]string{"TCP/80": {"bm-1 192.168.7.21:30080 mon=0", "vm-b 10.0.0.12:30080 mon=0"}},
		},
		{
			name: "port added", svc: newService("web", withPort(corev1.ProtocolUDP, 53, 30053)), nodes: []*corev1.Node{b, bm},
			listeners: []string{"TCP/80 cidrs=[] pool=ROUND_ROBIN monitor=TCP", "UDP/53 cidrs=[] pool=ROUND_ROBIN monitor=UDP-CONNECT"},
			members:   map[string][]string{"UDP/53": {"bm-1 192.168.7.21:30053 mon=0", "vm-b 10.0.0.12:30053 mon=0"}},
		},
		{
			name: "local traffic, source ranges, least connections", nodes: []*corev1.Node{b, bm},
			svc: newService("web", withLocalTraffic(32000), withSourceRanges("203.0.113.0/24", "10.0.0.0/8"),
				withAnnotation(AnnotationLBMethod, "LEAST_CONNECTIONS")),
			listeners: []string{"TCP/80 cidrs=[10.0.0.0/8 203.0.113.0/24] pool=LEAST_CONNECTIONS monitor=HTTP/healthz"},
			members:   map[string][]string{"TCP/80": {"bm-1 192.168.7.21:30080 mon=32000", "vm-b 10.0.0.12:30080 mon=32000"}},
		},
		{
			name: "monitor off, ranges removed", nodes: []*corev1.Node{b},
			svc:       newService("web", withAnnotation(AnnotationHealthMonitor, "false")),
			listeners: []string{"TCP/80 cidrs=[] pool=ROUND_ROBIN"},
			members:   map[string][]string{"TCP/80": {"vm-b 10.0.0.12:30080 mon=0"}},
		},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			status, calls := ensureConverged(t, c.lb, st.svc, st.nodes)
			if len(status.Ingress) != 1 || status.Ingress[0].IP == "" {
				t.Errorf("status %+v: want the VIP", status)
			}
			t.Logf("converged in %d calls", calls)
			assertView(t, observe(t, c, st.svc), st.listeners, st.members)
			assertNoMutation(t, c, st.svc, st.nodes)
		})
	}
	t.Run("delete", func(t *testing.T) {
		deleteConverged(t, c.lb, svc)
		if _, exists, err := c.lb.GetLoadBalancer(context.Background(), "kubernetes", svc); err != nil || exists {
			t.Fatalf("GetLoadBalancer after delete: exists=%v err=%v, want false, nil", exists, err)
		}
		if v := observe(t, c, svc); v.lbs != 0 {
			t.Fatalf("%d load balancers left after delete", v.lbs)
		}
		if err := c.lb.EnsureLoadBalancerDeleted(context.Background(), "kubernetes", svc); err != nil {
			t.Fatalf("second delete: %v, want nil (idempotent)", err)
		}
	})
}

// assertNoMutation checks that Ensure, Update and Get with nothing changed
// make no mutating call.
func assertNoMutation(t *testing.T, c *Cloud, svc *corev1.Service, nodes []*corev1.Node) {
	t.Helper()
	_, before := apiCalls(t, c)
	ctx := context.Background()
	if _, err := c.lb.EnsureLoadBalancer(ctx, "kubernetes", svc, nodes); err != nil {
		t.Fatalf("steady-state Ensure: %v", err)
	}
	if err := c.lb.UpdateLoadBalancer(ctx, "kubernetes", svc, nodes); err != nil {
		t.Fatalf("steady-state Update: %v", err)
	}
	if _, exists, err := c.lb.GetLoadBalancer(ctx, "kubernetes", svc); err != nil || !exists {
		t.Fatalf("GetLoadBalancer: exists=%v err=%v", exists, err)
	}
	if _, w := apiCalls(t, c); w != before {
		t.Errorf("steady state made %v mutating calls, want 0", w-before)
	}
}

// TestOctaviaRestartDuringProvisioning: a controller that restarts while
// Octavia is still creating the load balancer finds it by tag and never
// creates a second one.
func TestOctaviaRestartDuringProvisioning(t *testing.T) {
	t.Parallel()
	s := realOctavia(t)
	cluster := "t" + randomID(t)
	first := newRealCloud(t, s, cluster)
	svc := newService("restart")
	nodes := []*corev1.Node{newNode("n1", withInternalIP("10.1.0.1"))}
	_, err := first.lb.EnsureLoadBalancer(context.Background(), "kubernetes", svc, nodes)
	if !isRetry(err) {
		t.Fatalf("first Ensure: %v, want a RetryError while Octavia provisions", err)
	}
	second := newRealCloud(t, s, cluster) // The restarted controller.
	ensureConverged(t, second.lb, svc, nodes)
	assertView(t, observe(t, second, svc), []string{"TCP/80 cidrs=[] pool=ROUND_ROBIN monitor=TCP"},
		map[string][]string{"TCP/80": {"n1 10.1.0.1:30080 mon=0"}})
	deleteConverged(t, second.lb, svc)
}

// TestOctaviaBackendSwitch: the router moves a Service away (delete here)
// and back (ensure again); each time exactly one load balancer or none.
func TestOctaviaBackendSwitch(t *testing.T) {
	t.Parallel()
	s := realOctavia(t)
	c := newRealCloud(t, s, "t"+randomID(t))
	svc := newService("switch")
	nodes := []*corev1.Node{newNode("n1", withInternalIP("10.2.0.1"))}
	for round := range 2 {
		ensureConverged(t, c.lb, svc, nodes)
		if v := observe(t, c, svc); v.lbs != 1 {
			t.Fatalf("round %d: %d load balancers, want 1", round, v.lbs)
		}
		deleteConverged(t, c.lb, svc)
		if v := observe(t, c, svc); v.lbs != 0 {
			t.Fatalf("round %d: %d load balancers after moving away, want 0", round, v.lbs)
		}
	}
}

// TestOctaviaBadAnnotationChangesNothing: a bad annotation is a user error
// naming it, and no call reaches OpenStack.
func TestOctaviaBadAnnotationChangesNothing(t *testing.T) {
	t.Parallel()
	s := realOctavia(t)
	c := newRealCloud(t, s, "t"+randomID(t))
	svc := newService("bad", withAnnotation(AnnotationHealthMonitorMaxRetries, "eleven"))
	r0, w0 := apiCalls(t, c)
	_, err := c.lb.EnsureLoadBalancer(context.Background(), "kubernetes", svc, []*corev1.Node{newNode("n", withInternalIP("10.3.0.1"))})
	ue, ok := backends.AsUserError(err)
	if !ok || !strings.Contains(err.Error(), string(AnnotationHealthMonitorMaxRetries)) {
		t.Fatalf("error %v: want a user error naming %s", err, AnnotationHealthMonitorMaxRetries)
	}
	if ue.Reason != annotation.ReasonInvalid {
		t.Errorf("reason %q, want %q", ue.Reason, annotation.ReasonInvalid)
	}
	if r, w := apiCalls(t, c); r != r0 || w != w0 {
		t.Errorf("bad annotation made %v reads and %v writes, want none", r-r0, w-w0)
	}
}

// TestOctaviaErrorIsReplaced: a load balancer Octavia put in ERROR is
// deleted and created again; exactly one is left. ERROR is set in
// Octavia's own database, as a failed amphora would leave it.
func TestOctaviaErrorIsReplaced(t *testing.T) {
	t.Parallel()
	s := realOctavia(t)
	c := newRealCloud(t, s, "t"+randomID(t))
	svc := newService("broken")
	nodes := []*corev1.Node{newNode("n1", withInternalIP("10.7.0.1"))}
	ensureConverged(t, c.lb, svc, nodes)
	first := theLB(t, c, svc).ID
	setError(t, "load_balancer", first)
	if lb := theLB(t, c, svc); lb.ProvisioningStatus != "ERROR" {
		t.Fatalf("load balancer is %s after the update, want ERROR", lb.ProvisioningStatus)
	}
	ensureConverged(t, c.lb, svc, nodes)
	if second := theLB(t, c, svc); second.ID == first || second.ProvisioningStatus != "ACTIVE" {
		t.Fatalf("load balancer %s (%s): want a new ACTIVE one replacing %s", second.ID, second.ProvisioningStatus, first)
	}
	assertView(t, observe(t, c, svc), []string{"TCP/80 cidrs=[] pool=ROUND_ROBIN monitor=TCP"},
		map[string][]string{"TCP/80": {"n1 10.7.0.1:30080 mon=0"}})
	deleteConverged(t, c.lb, svc)
}

// setError puts an Octavia object in ERROR in Octavia's database.
func setError(t *testing.T, table, id string) {
	t.Helper()
	octaviaSQL(t, fmt.Sprintf("UPDATE %s SET provisioning_status='ERROR' WHERE id='%s';", table, id))
}

// TestOctaviaPoolErrorIsReplaced: a pool a failed change left in ERROR
// (its members lost) is deleted and created again with its members.
func TestOctaviaPoolErrorIsReplaced(t *testing.T) {
	t.Parallel()
	s := realOctavia(t)
	c := newRealCloud(t, s, "t"+randomID(t))
	svc := newService("pool-broken")
	nodes := []*corev1.Node{newNode("n1", withInternalIP("10.7.1.1"))}
	ensureConverged(t, c.lb, svc, nodes)
	ctx := context.Background()
	sc, err := c.lb.clients(ctx)
	if err != nil {
		t.Fatal(err)
	}
	st, err := readState(ctx, sc.loadBalancer, theLB(t, c, svc).ID)
	if err != nil || len(st.pools) != 1 {
		t.Fatalf("state %+v, %v: want one pool", st, err)
	}
	var pool string
	for id := range st.pools {
		pool = id
	}
	setError(t, "pool", pool)
	ensureConverged(t, c.lb, svc, nodes)
	st, err = readState(ctx, sc.loadBalancer, theLB(t, c, svc).ID)
	if err != nil {
		t.Fatal(err)
	}
	for id, p := range st.pools {
		if id == pool || p.pool.ProvisioningStatus != "ACTIVE" {
			t.Errorf("pool %s is %s: want a new ACTIVE pool replacing %s", id, p.pool.ProvisioningStatus, pool)
		}
	}
	assertView(t, observe(t, c, svc), []string{"TCP/80 cidrs=[] pool=ROUND_ROBIN monitor=TCP"},
		map[string][]string{"TCP/80": {"n1 10.7.1.1:30080 mon=0"}})
	deleteConverged(t, c.lb, svc)
}

// TestOctaviaBadAnnotationDoesNotBlockDelete: a Service whose annotation
// went bad after creation is still deleted completely.
func TestOctaviaBadAnnotationDoesNotBlockDelete(t *testing.T) {
	t.Parallel()
	s := realOctavia(t)
	c := newRealCloud(t, s, "t"+randomID(t))
	nodes := []*corev1.Node{newNode("n1", withInternalIP("10.8.0.1"))}
	ensureConverged(t, c.lb, newService("later-bad"), nodes)
	bad := newService("later-bad", withAnnotation(AnnotationLBMethod, "FASTEST"))
	if _, err := c.lb.EnsureLoadBalancer(context.Background(), "kubernetes", bad, nodes); err == nil || !strings.Contains(err.Error(), string(AnnotationLBMethod)) {
		t.Fatalf("Ensure with a bad annotation: %v, want an error naming %s", err, AnnotationLBMethod)
	}
	if _, exists, err := c.lb.GetLoadBalancer(context.Background(), "kubernetes", bad); err != nil || !exists {
		t.Fatalf("GetLoadBalancer with a bad annotation: exists=%v err=%v, want true, nil", exists, err)
	}
	deleteConverged(t, c.lb, bad)
	if v := observe(t, c, bad); v.lbs != 0 {
		t.Fatalf("%d load balancers left", v.lbs)
	}
}
