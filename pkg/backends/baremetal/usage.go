package baremetal

import (
	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

var _ backends.PoolReporter = (*Cloud)(nil)

// PoolUsage returns the usage of the load balancer's pools (none without
// pools), as the addresses metrics report it.
func (c *Cloud) PoolUsage() []backends.PoolUsage {
	if c.lb == nil {
		return nil
	}
	return c.lb.poolUsage()
}

// poolUsage returns the allocator's pools' usage, pools in config order.
func (lb *LoadBalancer) poolUsage() []backends.PoolUsage {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	var out []backends.PoolUsage
	for _, name := range lb.alloc.names {
		ps := lb.alloc.byName[name]
		for i := range ps.fams {
			fs := &ps.fams[i]
			if len(fs.ranges) == 0 {
				continue
			}
			out = append(out, backends.PoolUsage{Pool: name, Family: string(families[i]), Used: fs.used, Size: fs.size})
		}
	}
	return out
}
