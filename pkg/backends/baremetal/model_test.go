package baremetal

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestAllocatorModel drives the load balancer with random status changes,
// requests (of its own Services and of others'), Ensures, deletes and
// Service deletions, over a small pool that is often full, checking after
// every step that:
//   - an address handed out anew is in no other Service's status and
//     requested by no other Service;
//   - no two Services are assigned the same address (no sharing keys here);
//   - the pool's bitmap and counters mark exactly the taken addresses (the
//     bitmap also the resting ones: released ahead of the cursor).
func TestAllocatorModel(t *testing.T) {
	for seed := range uint64(20) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			m := newModel(t, seed)
			for range 400 {
				m.step()
				m.check()
			}
		})
	}
}

// model is the world the allocator sees: each Service's status and request.
type model struct {
	t      *testing.T
	rng    *rand.Rand
	lb     *LoadBalancer
	addrs  []string
	status map[string]string // Service name -> status address
	asks   map[string]string // Service name -> requested address
}

const modelServices = 8

func newModel(t *testing.T, seed uint64) *model {
	m := &model{
		t: t, rng: rand.New(rand.NewPCG(seed, 1)),
		lb:     newTestLB(t, "addressPools: [{name: p, addresses: [10.0.0.1-10.0.0.5]}]"),
		status: map[string]string{}, asks: map[string]string{},
	}
	// The model reports every status change, as the informer does.
	m.lb.synced = func() bool { return true }
	for i := 1; i <= 6; i++ { // 10.0.0.6 is outside the pool
		m.addrs = append(m.addrs, fmt.Sprintf("10.0.0.%d", i))
	}
	return m
}

func (m *model) service(name string) *corev1.Service {
	var tweaks []svcTweak
	if ip := m.status[name]; ip != "" {
		tweaks = append(tweaks, withStatus(ip))
	}
	if ip := m.asks[name]; ip != "" {
		tweaks = append(tweaks, withIPs(ip))
	}
	return newService(name, tweaks...)
}

func (m *model) step() {
	name := fmt.Sprintf("s%d", m.rng.IntN(modelServices))
	switch m.rng.IntN(6) {
	case 0: // another controller (or the service controller) writes a status
		m.status[name] = m.pick()
		m.lb.onChange(m.service(name))
	case 1: // a request appears, changes or goes
		m.asks[name] = m.pick()
		m.lb.onChange(m.service(name))
	case 2, 3:
		m.ensure(name)
	case 4:
		if err := m.lb.EnsureLoadBalancerDeleted(context.Background(), "c1", m.service(name)); err != nil {
			m.t.Fatal(err)
		}
	case 5:
		m.lb.onDelete(m.service(name))
		delete(m.status, name)
		delete(m.asks, name)
	}
}

// pick returns one of the model's addresses, or "" a third of the time.
func (m *model) pick() string {
	if m.rng.IntN(3) == 0 {
		return ""
	}
	return m.addrs[m.rng.IntN(len(m.addrs))]
}

// ensure syncs the Service and, like the service controller, writes the
// result into its status.
func (m *model) ensure(name string) {
	svc := m.service(name)
	before := m.assigned(name)
	st, err := m.lb.EnsureLoadBalancer(context.Background(), "c1", svc, nil)
	if err != nil {
		return
	}
	ip := ingressIPs(st)
	// An address it was assigned, its status shows, or it requested is not
	// handed out anew: nothing shows it that did not already, or it asked.
	if !slices.Contains(before, netip.MustParseAddr(ip)) && ip != m.status[name] && ip != m.asks[name] {
		for other, shown := range m.status {
			if other != name && shown == ip {
				m.t.Fatalf("%s handed %s, which %s's status shows", name, ip, other)
			}
		}
		for other, asked := range m.asks {
			if other != name && asked == ip {
				m.t.Fatalf("%s handed %s automatically, which %s requests", name, ip, other)
			}
		}
	}
	m.status[name] = ip
	m.lb.onChange(m.service(name))
}

func (m *model) assigned(name string) []netip.Addr {
	m.lb.mu.Lock()
	defer m.lb.mu.Unlock()
	if h := m.lb.alloc.holdingOf("default/" + name); h != nil {
		return slices.Clone(h.addrs)
	}
	return nil
}

func (m *model) check() {
	m.t.Helper()
	a := m.lb.alloc
	m.lb.mu.Lock()
	defer m.lb.mu.Unlock()
	owner := map[netip.Addr]string{}
	for name, h := range a.services {
		for _, ip := range h.addrs {
			if prev, dup := owner[ip]; dup {
				m.t.Fatalf("%s assigned to both %s and %s", ip, prev, name)
			}
			owner[ip] = name
		}
	}
	fs := &a.pools[0].fams[0]
	var used uint64
	for _, s := range m.addrs {
		ip := netip.MustParseAddr(s)
		rs := fs.find(ip)
		if rs == nil {
			continue
		}
		off := rs.offset(ip)
		bit := rs.leased[off/64]&(1<<(off%64)) != 0
		resting := rs.rest[ip]
		if a.taken(ip) != (bit && !resting) || a.marked[ip] != a.taken(ip) || (resting && !bit) {
			m.t.Fatalf("%s: taken=%v marked=%v bit=%v resting=%v", ip, a.taken(ip), a.marked[ip], bit, resting)
		}
		if a.taken(ip) {
			used++
		}
	}
	if fs.used != used {
		m.t.Fatalf("the pool counts %d addresses used, %d are taken", fs.used, used)
	}
}
