package baremetal

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

// TestReview66RestModel drives the load balancer as TestAllocatorModel
// does (statuses written and cleared, requests appearing and going,
// Ensures, deletes, Service deletions: so addresses are released ahead of
// the cursor all the time), over a pool of two bitmap ranges and over a
// huge IPv6 range (the probing path, no bitmap), and interleaves lone dry
// runs. After every step it checks what docs/baremetal.md and aefd53b
// promise an operator:
//   - a lone dry run (the router's) changes nothing: cursors, resting
//     addresses, bitmaps and counters are as before;
//   - a resting address is free (not taken) and set in its bitmap, every
//     other free address clear; the counters count the taken ones
//     (addresses_in_use_total);
//   - a resting address is handed out automatically only when nothing
//     else in its range is free, and in the probing range (never nearly
//     full) never;
//   - in the probing range every resting address is still ahead of the
//     cursor (the cursor does not pass one without waking it).
func TestReview66RestModel(t *testing.T) {
	for _, tc := range []struct {
		name, section string
		addrs         []string
	}{
		{"two bitmap ranges", "addressPools: [{name: p, addresses: [10.0.0.1-10.0.0.3, 10.0.0.5-10.0.0.6]}]",
			[]string{"10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4", "10.0.0.5", "10.0.0.6", "10.0.0.7"}},
		{"huge IPv6 range", "addressPools: [{name: p, addresses: [\"2001:db8::/64\"]}]",
			[]string{"2001:db8::", "2001:db8::1", "2001:db8::2", "2001:db8::3", "2001:db8::4", "2001:db8::5", "2001:db9::1"}},
	} {
		for seed := range uint64(30) {
			t.Run(fmt.Sprintf("%s/%d", tc.name, seed), func(t *testing.T) {
				m := &model{
					t: t, rng: rand.New(rand.NewPCG(seed, 66)), lb: newTestLB(t, tc.section),
					addrs: tc.addrs, status: map[string]string{}, asks: map[string]string{},
				}
				m.lb.synced = func() bool { return true }
				r := &restModel{m: m, fs: m.famState()}
				for i := range 400 {
					r.step(i)
					r.check(i)
				}
			})
		}
	}
}

type restModel struct {
	m  *model
	fs *famState
}

func (m *model) famState() *famState {
	ps := m.lb.alloc.pools[0]
	if ps.hasFamily("IPv6") {
		return &ps.fams[1]
	}
	return &ps.fams[0]
}

type rangeSnap struct {
	next     uint64
	nextAddr netip.Addr
	used     uint64
	rest     map[netip.Addr]bool
	leased   []uint64
}

type famSnap struct {
	cur    int
	used   uint64
	ranges []rangeSnap
}

func (r *restModel) snap() famSnap {
	s := famSnap{cur: r.fs.cur, used: r.fs.used}
	for _, rs := range r.fs.ranges {
		s.ranges = append(s.ranges, rangeSnap{rs.next, rs.nextAddr, rs.used, maps.Clone(rs.rest), slices.Clone(rs.leased)})
	}
	return s
}

func (s famSnap) equal(o famSnap) bool {
	if s.cur != o.cur || s.used != o.used || len(s.ranges) != len(o.ranges) {
		return false
	}
	for i, a := range s.ranges {
		b := o.ranges[i]
		if a.next != b.next || a.nextAddr != b.nextAddr || a.used != b.used || !maps.Equal(a.rest, b.rest) || !slices.Equal(a.leased, b.leased) {
			return false
		}
	}
	return true
}

// freeUnrested reports whether rs has a free address that does not rest.
func freeUnrested(rs *rangeState, taken func(netip.Addr) bool) bool {
	if rs.leased == nil {
		return true // a huge range always has one
	}
	for off := range rs.size {
		ip := rs.at(off)
		if !taken(ip) && !rs.rest[ip] {
			return true
		}
	}
	return false
}

func (r *restModel) step(i int) {
	m := r.m
	name := fmt.Sprintf("s%d", m.rng.IntN(modelServices))
	switch m.rng.IntN(8) {
	case 0, 1: // a lone dry run changes nothing
		before := r.snap()
		dry, _ := backends.WithDryRun(context.Background())
		_, _ = m.lb.EnsureLoadBalancer(dry, "c1", m.service(name), nil)
		if after := r.snap(); !before.equal(after) {
			m.t.Fatalf("step %d: a lone dry run for %s changed the allocator: %+v -> %+v", i, name, before, after)
		}
	case 2, 3: // a live Ensure
		m.lb.mu.Lock()
		rested := map[netip.Addr]bool{}
		hasFree := map[netip.Addr]bool{}
		for _, rs := range r.fs.ranges {
			f := freeUnrested(rs, m.lb.alloc.taken)
			for ip := range rs.rest {
				rested[ip], hasFree[ip] = true, f
			}
		}
		m.lb.mu.Unlock()
		m.ensure(name)
		if ip, err := netip.ParseAddr(m.status[name]); err == nil && rested[ip] && m.asks[name] != m.status[name] && hasFree[ip] {
			m.t.Fatalf("step %d: %s was handed %s, which rested while its range had another free address", i, name, ip)
		}
	default:
		m.step()
	}
}

func (r *restModel) check(i int) {
	m := r.m
	a := m.lb.alloc
	m.lb.mu.Lock()
	defer m.lb.mu.Unlock()
	var used uint64
	for _, s := range m.addrs {
		ip := netip.MustParseAddr(s)
		rs := r.fs.find(ip)
		if rs == nil {
			continue
		}
		resting := rs.rest[ip]
		if resting && a.taken(ip) {
			m.t.Fatalf("step %d: %s rests but is taken", i, ip)
		}
		if rs.leased != nil {
			off := rs.offset(ip)
			bit := rs.leased[off/64]&(1<<(off%64)) != 0
			if bit != (a.taken(ip) || resting) {
				m.t.Fatalf("step %d: %s: bit=%v taken=%v resting=%v", i, ip, bit, a.taken(ip), resting)
			}
		} else if resting && ip.Less(rs.nextAddr) {
			m.t.Fatalf("step %d: %s rests behind the probing cursor %s", i, ip, rs.nextAddr)
		}
		if a.taken(ip) {
			used++
		}
	}
	if r.fs.used != used {
		m.t.Fatalf("step %d: the pool counts %d addresses used, %d are taken", i, r.fs.used, used)
	}
}
