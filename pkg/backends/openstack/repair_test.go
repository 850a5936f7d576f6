package openstack

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/listeners"
	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/loadbalancers"
	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/pools"
	corev1 "k8s.io/api/core/v1"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

// repairResult is what ensuring one Service under a repair pass did.
type repairResult struct {
	changes        []string
	reads, writes  float64
	calls          int
	statusAfterAll *corev1.LoadBalancerStatus
}

// repairPassOver runs one repair pass as the load-balancer controller
// does: BeginRepairPass, then for each Service EnsureLoadBalancer under
// the pass ctx with a change report; a Service asked to retry is ensured
// again (still under the pass, which then reads it from the cloud) until
// it converges. It returns the pass's own reads and each Service's result.
func repairPassOver(t *testing.T, c *Cloud, svcs []*corev1.Service, nodes []*corev1.Node) (passReads float64, results map[string]*repairResult) {
	t.Helper()
	var r0 float64
	passCtx, end := beginRepairPass(t, c, func() { r0, _ = apiCalls(t, c) })
	defer end()
	r1, _ := apiCalls(t, c)
	results = map[string]*repairResult{}
	for _, svc := range svcs {
		ctx, changes := backends.WithChangeReport(passCtx)
		res := &repairResult{}
		rb, wb := apiCalls(t, c)
		deadline := time.Now().Add(90 * time.Second)
		for {
			res.calls++
			st, err := c.lb.EnsureLoadBalancer(ctx, "kubernetes", svc, nodes)
			if err == nil {
				res.statusAfterAll = st
				break
			}
			if !isRetry(err) && !sqliteLocked(err) {
				t.Fatalf("EnsureLoadBalancer %s under the pass: %v", svc.Name, err)
			}
			if time.Now().After(deadline) {
				t.Fatalf("EnsureLoadBalancer %s still asks to retry after %d calls: %v", svc.Name, res.calls, err)
			}
			time.Sleep(c.lb.retryDelay)
		}
		ra, wa := apiCalls(t, c)
		res.changes, res.reads, res.writes = changes(), ra-rb, wa-wb
		results[svc.Name] = res
	}
	return r1 - r0, results
}

// beginRepairPass begins a repair pass of c, calling before first each
// time. It begins it again (up to five times) when Octavia fails a list
// of the project's objects with its own fault, AttributeError "'NoneType'
// object has no attribute 'to_dict'": the list of health monitors read
// one whose pool another test's delete had just removed (Octavia's API
// builds the list in several queries). The tests share the project; the
// pass would fail the same way in a cluster whose load balancers change
// under it, and the load-balancer controller's next pass reads again.
func beginRepairPass(t *testing.T, c *Cloud, before func()) (context.Context, func()) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		before()
		ctx, end, err := c.BeginRepairPass(context.Background(), "kubernetes")
		if err == nil {
			return ctx, end
		}
		if attempt < 5 && octaviaListRace(err) {
			t.Logf("BeginRepairPass (attempt %d): %v; again", attempt, err)
			time.Sleep(c.lb.retryDelay)
			continue
		}
		t.Fatalf("BeginRepairPass: %v", err)
	}
}

// octaviaListRace reports Octavia's 500 for a list that read an object
// whose parent was deleted while the list was being built.
func octaviaListRace(err error) bool {
	return gophercloud.ResponseCodeIs(err, http.StatusInternalServerError) && strings.Contains(err.Error(), "'NoneType' object has no attribute 'to_dict'")
}

// waitLBActive waits until Octavia has applied a change to a load balancer.
func waitLBActive(t *testing.T, c *Cloud, id string) {
	t.Helper()
	sc, err := c.lb.clients(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		lb, err := loadbalancers.Get(context.Background(), sc.loadBalancer, id).Extract()
		if err == nil && lb.ProvisioningStatus == lbActive {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("load balancer %s not ACTIVE: %+v, %v", id, lb, err)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// behindOurBack changes a Service's load balancer in Octavia directly, as
// an operator or an incident would, and waits until Octavia applied it.
func behindOurBack(t *testing.T, c *Cloud, svc *corev1.Service, change func(ctx context.Context, sc *serviceClients, st *lbState) error) {
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
	deadline := time.Now().Add(60 * time.Second)
	for err = change(ctx, sc, st); err != nil; err = change(ctx, sc, st) {
		if !sqliteLocked(err) || time.Now().After(deadline) {
			t.Fatalf("changing %s behind the backend's back: %v", svc.Name, err)
		}
		time.Sleep(300 * time.Millisecond)
	}
	waitLBActive(t, c, lb.ID)
}

// onlyPool returns the one pool of a state.
func onlyPool(t *testing.T, st *lbState) *poolState {
	t.Helper()
	if len(st.pools) != 1 {
		t.Fatalf("%d pools, want 1", len(st.pools))
	}
	for _, p := range st.pools {
		return p
	}
	return nil
}

// TestRepairPassOctavia: on the real Octavia, a member deleted, a member
// renamed (same IDs: only the pool's updated_at tells) and a listener
// deleted behind the backend's back are restored by EnsureLoadBalancer
// under a repair pass, which reports each change; a Service left alone is
// not touched. With nothing changed a whole pass makes no mutating call,
// its bulk lists are the only reads, and EnsureLoadBalancer reads nothing.
func TestRepairPassOctavia(t *testing.T) {
	t.Parallel()
	s := realOctavia(t)
	c := newRealCloud(t, s, "t"+randomID(t))
	nodes := []*corev1.Node{newNode("n1", withInternalIP("10.9.1.1")), newNode("n2", withInternalIP("10.9.1.2"))}
	svcs := []*corev1.Service{newService("member-gone"), newService("member-renamed"), newService("listener-gone"), newService("untouched")}
	t.Cleanup(func() {
		roundRobin(t, "delete", svcs, func(svc *corev1.Service) error {
			return c.lb.EnsureLoadBalancerDeleted(context.Background(), "kubernetes", svc)
		})
	})
	roundRobin(t, "ensure", svcs, func(svc *corev1.Service) error {
		_, err := c.lb.EnsureLoadBalancer(context.Background(), "kubernetes", svc, nodes)
		return err
	})
	want := []string{"TCP/80 cidrs=[] pool=ROUND_ROBIN monitor=TCP"}
	wantMembers := map[string][]string{"TCP/80": {"n1 10.9.1.1:30080 mon=0", "n2 10.9.1.2:30080 mon=0"}}

	t.Run("nothing changed", func(t *testing.T) {
		passReads, results := repairPassOver(t, c, svcs, nodes)
		if passReads != 4 {
			t.Errorf("the pass read with %v calls, want 4 (load balancers, listeners, pools, monitors: one page each)", passReads)
		}
		for name, r := range results {
			if r.writes != 0 || r.reads != 0 || len(r.changes) != 0 || r.calls != 1 {
				t.Errorf("%s: %v writes, %v reads, changes %q in %d calls; want none, none, none in 1", name, r.writes, r.reads, r.changes, r.calls)
			}
		}
	})

	behindOurBack(t, c, svcs[0], func(ctx context.Context, sc *serviceClients, st *lbState) error {
		p := onlyPool(t, st)
		return pools.DeleteMember(ctx, sc.loadBalancer, p.pool.ID, memberAt(t, p, "10.9.1.2").ID).ExtractErr()
	})
	behindOurBack(t, c, svcs[1], func(ctx context.Context, sc *serviceClients, st *lbState) error {
		p := onlyPool(t, st)
		_, err := pools.UpdateMember(ctx, sc.loadBalancer, p.pool.ID, memberAt(t, p, "10.9.1.1").ID, pools.UpdateMemberOpts{Name: ptr("renamed-by-hand")}).Extract()
		return err
	})
	behindOurBack(t, c, svcs[2], func(ctx context.Context, sc *serviceClients, st *lbState) error {
		return listeners.Delete(ctx, sc.loadBalancer, st.listeners[0].ID).ExtractErr()
	})

	t.Run("drift repaired", func(t *testing.T) {
		_, results := repairPassOver(t, c, svcs, nodes)
		wantChanges := map[string][]string{
			"member-gone":    {"listener TCP:80: member 10.9.1.2:30080 added"},
			"member-renamed": {"listener TCP:80: member 10.9.1.1:30080 updated"},
			"listener-gone": {"listener TCP:80 re-created", "pool of listener TCP:80 re-created", "listener TCP:80: member 10.9.1.1:30080 added, member 10.9.1.2:30080 added",
				"health monitor of listener TCP:80 re-created"},
			"untouched": nil,
		}
		for _, svc := range svcs {
			r := results[svc.Name]
			got := r.changes
			if svc.Name == "listener-gone" {
				got = withoutOrphanPool(got)
			}
			if !slices.Equal(got, wantChanges[svc.Name]) {
				t.Errorf("%s: changes reported %q, want %q", svc.Name, r.changes, wantChanges[svc.Name])
			}
			if svc.Name == "untouched" && (r.writes != 0 || r.reads != 0) {
				t.Errorf("untouched: %v writes, %v reads under the pass; want none", r.writes, r.reads)
			}
			assertView(t, observe(t, c, svc), want, wantMembers)
		}
	})

	t.Run("nothing changed after the repair", func(t *testing.T) {
		_, results := repairPassOver(t, c, svcs, nodes)
		for name, r := range results {
			if r.writes != 0 || r.reads != 0 || len(r.changes) != 0 {
				t.Errorf("%s: %v writes, %v reads, changes %q; want none", name, r.writes, r.reads, r.changes)
			}
		}
	})
}

// withoutOrphanPool drops the deletion of the pool a deleted listener left
// behind: Octavia versions differ in whether deleting a listener keeps its
// default pool on the load balancer.
func withoutOrphanPool(changes []string) []string {
	return slices.DeleteFunc(slices.Clone(changes), func(c string) bool { return strings.HasPrefix(c, "unused pool ") })
}

// memberAt returns a pool's member at an address.
func memberAt(t *testing.T, p *poolState, addr string) pools.Member {
	t.Helper()
	for _, m := range p.members {
		if m.Address == addr {
			return m
		}
	}
	t.Fatalf("pool %s has no member at %s: %+v", p.pool.ID, addr, p.members)
	return pools.Member{}
}

// TestRepairPassKeyedByBackend: a pass ctx carries the snapshot of the
// backend that began it, never another backend's.
func TestRepairPassKeyedByBackend(t *testing.T) {
	t.Parallel()
	s := realOctavia(t)
	a := newRealCloud(t, s, "t"+randomID(t))
	b := newRealCloud(t, s, "t"+randomID(t))
	ctx, end := beginRepairPass(t, a, func() {})
	defer end()
	if a.lb.passFrom(ctx) == nil {
		t.Fatal("backend a: no pass in its pass ctx")
	}
	if b.lb.passFrom(ctx) != nil {
		t.Fatal("backend b reads backend a's pass: the snapshot must be keyed by backend instance")
	}
}

// TestRepairPassFloatingIP: with Neutron (the fake) beside the real
// Octavia, a pass also lists the floating IPs (one more read), and a
// floating IP disassociated behind the backend's back is associated again
// under a pass: the same address, no second one allocated.
func TestRepairPassFloatingIP(t *testing.T) {
	t.Parallel()
	s := realOctavia(t)
	f := NewFakeOpenStack(t)
	f.AnyToken = true
	s.Endpoints.Network = f.NetworkURL()
	s.LoadBalancer.FloatingNetworkID = floatingNet
	c := newRealCloud(t, s, "t"+randomID(t))
	nodes := []*corev1.Node{newNode("n1", withInternalIP("10.9.2.1"))}
	svc := newService("fip-drift")
	st, _ := ensureConverged(t, c.lb, svc, nodes)
	t.Cleanup(func() { deleteConverged(t, c.lb, svc) })
	addr := st.Ingress[0].IP

	passReads, results := repairPassOver(t, c, []*corev1.Service{svc}, nodes)
	if r := results[svc.Name]; passReads != 5 || r.reads != 0 || r.writes != 0 || len(r.changes) != 0 {
		t.Errorf("nothing changed: the pass read with %v calls (want 5: load balancers, listeners, pools, monitors, floating IPs), Ensure made %v reads, %v writes, changes %q (want none)",
			passReads, r.reads, r.writes, r.changes)
	}

	f.mu.Lock()
	for _, p := range f.fips {
		if p.FloatingIP == addr {
			p.PortID = "" // Disassociated by hand.
		}
	}
	f.mu.Unlock()
	_, results = repairPassOver(t, c, []*corev1.Service{svc}, nodes)
	r := results[svc.Name]
	if want := []string{"floating IP " + addr + " associated"}; !slices.Equal(r.changes, want) {
		t.Errorf("changes %q, want %q", r.changes, want)
	}
	fips := f.FloatingIPs()
	if len(fips) != 1 || fips[addr].PortID != theLB(t, c, svc).VipPortID || r.statusAfterAll.Ingress[0].IP != addr {
		t.Errorf("floating IPs %+v, status %+v: want only %s, on the VIP port again", fips, r.statusAfterAll, addr)
	}
}
