package baremetal

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"

	"k8s.io/apimachinery/pkg/util/validation/field"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends/baremetal/addrpool"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends/baremetal/bmconfig"
)

// PrepareReconfigure takes new settings without a restart (see
// router.Reconfigurer). The returned backend has the new inventory and
// pools; it shares this backend's allocator, so every address assigned or
// shown in a status stays taken. apply gives the allocator the new pools:
//
//   - an address of a removed (or shrunk) pool stays with the Service that
//     holds it until that Service changes; it is then replaced, with a
//     Warning event, like any address outside every pool;
//   - an added pool is used by the next allocation;
//   - a removed inventory entry answers as a machine the inventory does not
//     list: its Node is deleted once NotReady, as after a restart.
//
// A backend that had no pools and gets some gets a new allocator, which
// learns the assigned addresses from the Service informer before it
// allocates; one whose pools all go offers no load balancers, as after a
// restart.
func (c *Cloud) PrepareReconfigure(_ context.Context, o backends.Options) (cloudprovider.Interface, func(), error) {
	s, ok := o.Settings.(*Settings)
	if !ok || s == nil {
		return nil, nil, fmt.Errorf("settings are %T, want *baremetal.Settings", o.Settings)
	}
	if s.Compiled() == nil {
		if errs := s.Validate(field.NewPath(Type)); len(errs) > 0 {
			return nil, nil, errs.ToAggregate()
		}
	}
	cs := s.Compiled()
	next := &Cloud{name: c.name}
	if len(cs.Inventory) > 0 {
		next.instances = &Instances{backend: c.name, inventory: cs.Inventory}
	}
	apply := func() {}
	switch {
	case len(cs.Pools) == 0:
	case c.lb != nil:
		next.lb = c.lb
		apply = func() {
			c.lb.setPools(cs.Pools)
			c.lb.kubeVIP.Store(cs.KubeVIP)
		}
	default:
		next.lb = newLoadBalancer(c.name, cs.Pools)
		next.lb.kubeVIP.Store(cs.KubeVIP)
	}
	return next, apply, nil
}

// setPools replaces the allocator's pools, carrying every holding and
// request over.
func (lb *LoadBalancer) setPools(pools []*bmconfig.Pool) {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	na := lb.alloc.withPools(pools)
	unpublish(lb.backend, lb.alloc.pools, na.pools)
	na.publish(lb.backend)
	lb.alloc = na
}

// withPools returns an allocator over pools holding what a holds: the
// addresses assigned stay assigned (those outside every new pool are not
// counted in any pool and are replaced on the Service's next Ensure), the
// status addresses and requests are kept where a new pool covers them.
func (a *allocator) withPools(pools []*bmconfig.Pool) *allocator {
	na := newAllocator(pools)
	na.probes, na.changes = a.probes, a.changes
	for _, name := range slices.Sorted(maps.Keys(a.services)) {
		old := a.services[name]
		h := &holding{name: name, uid: old.uid, share: old.share}
		na.change(h, func() {
			h.addrs = slices.Clone(old.addrs)
			h.status = na.covered(old.status)
		})
	}
	for _, name := range slices.Sorted(maps.Keys(a.requests)) {
		na.reserve(name, a.requester[name], a.requests[name])
	}
	na.carryCursors(a)
	return na
}

// carryCursors keeps across a reload where allocation resumes and which
// addresses rest: a range kept as it was keeps its cursor, a pool family
// whose ranges are all kept the range it resumes in, and an address that
// rested rests again wherever a new range covers it ahead of its cursor
// (a new range's cursor is at its start), free and usable; one a
// reservation keeps taken after its lease rests when freed, as before.
func (a *allocator) carryCursors(old *allocator) {
	ranges := map[addrpool.Range]*rangeState{}
	var resting []netip.Addr
	for _, ps := range old.pools {
		for i := range ps.fams {
			for _, rs := range ps.fams[i].ranges {
				ranges[rs.Range] = rs
				resting = append(resting, slices.Collect(maps.Keys(rs.rest))...)
			}
		}
	}
	for _, ps := range a.pools {
		ops := old.byName[ps.Name]
		for i := range ps.fams {
			fs := &ps.fams[i]
			kept := ops != nil && len(ops.fams[i].ranges) == len(fs.ranges)
			for j, rs := range fs.ranges {
				if o := ranges[rs.Range]; o != nil {
					rs.next, rs.nextAddr = o.next, o.nextAddr
				}
				kept = kept && ops.fams[i].ranges[j].Range == rs.Range
			}
			if kept {
				fs.cur = ops.fams[i].cur
			}
		}
	}
	for ip := range old.recent {
		if a.taken(ip) {
			a.recent[ip] = true
		}
	}
	slices.SortFunc(resting, netip.Addr.Compare)
	for _, ip := range resting {
		ps := a.poolCovering(ip)
		if ps == nil || !ps.usable(ip) || a.taken(ip) {
			continue
		}
		rs := ps.fams[familyIndex(familyOf(ip))].find(ip)
		if rs == nil || !rs.ahead(ip) {
			continue
		}
		rs.addRest(ip)
		if key := old.restKey[ip]; key != "" {
			a.restShare(ip, key)
		}
	}
}

// covered returns the addresses some pool covers.
func (a *allocator) covered(ips []netip.Addr) []netip.Addr {
	var out []netip.Addr
	for _, ip := range ips {
		if a.poolCovering(ip) != nil {
			out = append(out, ip)
		}
	}
	return out
}
