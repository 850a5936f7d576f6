package openstack

import (
	"testing"

	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/loadbalancers"
	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/pools"
)

// TestMemberChanges: what a batch update changes, as reported.
func TestMemberChanges(t *testing.T) {
	have := []pools.Member{
		{Name: "a", Address: "10.0.0.1", ProtocolPort: 30080},
		{Name: "b", Address: "10.0.0.2", ProtocolPort: 30080},
		{Name: "c", Address: "10.0.0.3", ProtocolPort: 30080},
	}
	many := make([]memberSpec, 8)
	for i := range many {
		many[i] = memberSpec{name: "n", address: "10.1.0." + string(rune('1'+i)), port: 30080}
	}
	for _, tc := range []struct {
		name string
		want []memberSpec
		says string
	}{
		{"one added", []memberSpec{{name: "a", address: "10.0.0.1", port: 30080}, {name: "b", address: "10.0.0.2", port: 30080},
			{name: "c", address: "10.0.0.3", port: 30080}, {name: "d", address: "10.0.0.4", port: 30080}}, "member 10.0.0.4:30080 added"},
		{"renamed and removed", []memberSpec{{name: "a2", address: "10.0.0.1", port: 30080}}, "member 10.0.0.1:30080 updated, member 10.0.0.2:30080 removed, member 10.0.0.3:30080 removed"},
		{"monitor port", []memberSpec{{name: "a", address: "10.0.0.1", port: 30080, monitorPort: 32000}, {name: "b", address: "10.0.0.2", port: 30080},
			{name: "c", address: "10.0.0.3", port: 30080}}, "member 10.0.0.1:30080 updated"},
		{"capped", many, "member 10.1.0.1:30080 added, member 10.1.0.2:30080 added, member 10.1.0.3:30080 added, member 10.1.0.4:30080 added, member 10.1.0.5:30080 added, 6 more member changes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := memberChanges(have, tc.want); got != tc.says {
				t.Errorf("memberChanges = %q, want %q", got, tc.says)
			}
		})
	}
}

// TestMemberMemory: remembered members serve a pool only while its member
// IDs and updated_at are what they were when the members were read.
func TestMemberMemory(t *testing.T) {
	members := []pools.Member{{ID: "m2", Address: "10.0.0.2"}, {ID: "m1", Address: "10.0.0.1"}}
	row := func(updatedAt string, ids ...string) poolRow {
		r := poolRow{Pool: pools.Pool{ID: "p1"}, updatedAt: updatedAt}
		for _, id := range ids {
			r.Members = append(r.Members, pools.Member{ID: id})
		}
		return r
	}
	var m memberMemory
	if _, ok := m.lookup(row("t1", "m1", "m2")); ok {
		t.Fatal("empty memory served a pool")
	}
	m.store(row("t1", "m1", "m2"), members)
	for _, tc := range []struct {
		name string
		row  poolRow
		ok   bool
	}{
		{"unchanged, IDs in another order", row("t1", "m2", "m1"), true},
		{"member updated (updated_at bumped)", row("t2", "m1", "m2"), false},
		{"member deleted", row("t1", "m1"), false},
		{"member replaced", row("t1", "m1", "m3"), false},
		{"another pool", poolRow{Pool: pools.Pool{ID: "p2", Members: []pools.Member{{ID: "m1"}, {ID: "m2"}}}, updatedAt: "t1"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := m.lookup(tc.row)
			if ok != tc.ok || (ok && len(got) != 2) {
				t.Errorf("lookup = %v, %v; want ok=%v", got, ok, tc.ok)
			}
		})
	}
	m.keep(map[string][]poolRow{"lb": {{Pool: pools.Pool{ID: "p9"}}}})
	if _, ok := m.lookup(row("t1", "m1", "m2")); ok {
		t.Error("a pool no longer listed is still remembered")
	}
}

// TestPassDropsChangedLoadBalancer: a mutating call on a load balancer,
// from any caller, makes every pass under way read it from the cloud;
// an ended pass is no longer touched, and a load balancer not ACTIVE when
// listed is never served from the snapshot.
func TestPassDropsChangedLoadBalancer(t *testing.T) {
	var l LoadBalancer
	newPass := func() *repairPass {
		p := &repairPass{byService: map[string][]loadbalancers.LoadBalancer{}, lbs: map[string]bool{}, dropped: map[string]bool{}}
		p.indexLBs([]loadbalancers.LoadBalancer{
			{ID: "lb1", ProvisioningStatus: lbActive, Tags: []string{"mccm-cluster=c", "mccm-service=ns/a"}},
			{ID: "lb2", ProvisioningStatus: "PENDING_UPDATE", Tags: []string{"mccm-cluster=c", "mccm-service=ns/b"}},
		})
		return p
	}
	a, b := newPass(), newPass()
	l.passes.Add(a)
	endB := l.passes.Add(b)
	if _, ok := a.find("ns/a"); !ok || !a.holds("lb1") {
		t.Fatal("ACTIVE lb1 not served by the pass")
	}
	if _, ok := a.find("ns/b"); ok || a.holds("lb2") {
		t.Fatal("PENDING_UPDATE lb2 served by the pass: it must be read from the cloud")
	}
	endB()
	l.mutating("lb1")
	if _, ok := a.find("ns/a"); ok || a.holds("lb1") {
		t.Error("lb1 still served by a pass under way after a mutating call")
	}
	if !b.holds("lb1") {
		t.Error("an ended pass was changed")
	}
}
