package openstack

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/listeners"
	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/loadbalancers"
	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/monitors"
	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/pools"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/layer3/floatingips"
	"github.com/gophercloud/gophercloud/v2/pagination"
	"k8s.io/klog/v2"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

// defaultListPageSize is the page size of a repair pass's bulk lists:
// Octavia's default api_settings.pagination_max_limit (a smaller limit
// there only means more pages, which are followed).
const defaultListPageSize = 1000

var _ backends.RepairPasser = (*LoadBalancer)(nil)

// BeginRepairPass reads the cluster's load balancers in bulk: one paginated
// list each of load balancers (by the cluster's tag), and, in the projects
// holding them, listeners, pools (with their member IDs) and health
// monitors, and Neutron floating IPs when Neutron is reachable. Under the
// returned ctx EnsureLoadBalancer reads from that snapshot; members are
// read only for pools whose member IDs or update time differ from what the
// backend last read (see memberMemory).
func (l *LoadBalancer) BeginRepairPass(ctx context.Context, _ string) (context.Context, func(), error) {
	sc, err := l.clients(ctx)
	if err != nil {
		return ctx, func() {}, fmt.Errorf("repair pass: %w", err)
	}
	p, err := l.readPass(ctx, sc)
	if err != nil {
		return ctx, func() {}, fmt.Errorf("repair pass: %w", err)
	}
	klog.FromContext(ctx).V(2).Info("Read load balancers for a repair pass", "loadBalancers", len(p.lbs), "pools", len(p.pools))
	return context.WithValue(ctx, passKey{l}, p), l.passes.Add(p), nil
}

// passKey keys a repair pass's snapshot in a ctx by backend instance.
type passKey struct{ lb *LoadBalancer }

// passFrom returns the repair pass of ctx for this backend, or nil.
func (l *LoadBalancer) passFrom(ctx context.Context) *repairPass {
	p, _ := ctx.Value(passKey{l}).(*repairPass)
	return p
}

// repairPass is the snapshot of one repair pass. Its maps are written only
// while it is read; afterwards only dropped changes.
type repairPass struct {
	byService map[string][]loadbalancers.LoadBalancer // "namespace/name" → ACTIVE load balancers, oldest first
	lbs       map[string]bool
	listeners map[string][]listeners.Listener // load-balancer ID → its listeners
	pools     map[string][]poolRow            // load-balancer ID → its pools
	monitors  map[string]monitors.Monitor
	fips      []floatingips.FloatingIP // nil when Neutron is not used

	mu      sync.Mutex
	dropped map[string]bool // load balancers changed since: read from the cloud
}

// poolRow is a pool with the time Octavia last changed it (any member
// change bumps it), which gophercloud's Pool does not carry.
type poolRow struct {
	pools.Pool
	updatedAt string
}

// readPass lists everything a pass compares.
func (l *LoadBalancer) readPass(ctx context.Context, sc *serviceClients) (*repairPass, error) {
	found, err := l.list(ctx, sc, loadbalancers.ListOpts{Tags: []string{"mccm-cluster=" + l.clusterID}, Limit: l.pageSize})
	if err != nil {
		return nil, err
	}
	p := &repairPass{byService: map[string][]loadbalancers.LoadBalancer{}, lbs: map[string]bool{}, listeners: map[string][]listeners.Listener{},
		pools: map[string][]poolRow{}, monitors: map[string]monitors.Monitor{}, dropped: map[string]bool{}}
	projects := p.indexLBs(found)
	for _, project := range projects {
		if err := l.readProject(ctx, sc, p, project); err != nil {
			return nil, err
		}
	}
	l.members.keep(p.pools)
	return p, nil
}

// indexLBs files the ACTIVE load balancers by Service and returns their
// projects. One not ACTIVE is left out: it is read from the cloud.
func (p *repairPass) indexLBs(found []loadbalancers.LoadBalancer) []string {
	var projects []string
	seen := map[string]bool{}
	for _, lb := range found {
		svc := serviceTag(lb.Tags)
		if svc == "" || lb.ProvisioningStatus != lbActive {
			continue
		}
		p.byService[svc] = append(p.byService[svc], lb)
		p.lbs[lb.ID] = true
		if !seen[lb.ProjectID] {
			seen[lb.ProjectID] = true
			projects = append(projects, lb.ProjectID)
		}
	}
	return projects
}

// serviceTag is the "namespace/name" of a load balancer's mccm-service tag.
func serviceTag(tags []string) string {
	for _, t := range tags {
		if v, ok := strings.CutPrefix(t, "mccm-service="); ok {
			return v
		}
	}
	return ""
}

// readProject lists one project's listeners, pools, monitors and floating
// IPs into the pass.
func (l *LoadBalancer) readProject(ctx context.Context, sc *serviceClients, p *repairPass, project string) error {
	ls, err := listAll(ctx, listeners.List(sc.loadBalancer, listeners.ListOpts{ProjectID: project, Limit: l.pageSize}), listeners.ExtractListeners)
	if err != nil {
		return fmt.Errorf("listing listeners: %w", err)
	}
	for _, x := range ls {
		for _, lb := range x.Loadbalancers {
			p.listeners[lb.ID] = append(p.listeners[lb.ID], x)
		}
	}
	ps, err := listPools(ctx, sc.loadBalancer, pools.ListOpts{ProjectID: project, Limit: l.pageSize})
	if err != nil {
		return err
	}
	for _, x := range ps {
		for _, lb := range x.Loadbalancers {
			p.pools[lb.ID] = append(p.pools[lb.ID], x)
		}
	}
	ms, err := listAll(ctx, monitors.List(sc.loadBalancer, monitors.ListOpts{ProjectID: project, Limit: l.pageSize}), monitors.ExtractMonitors)
	if err != nil {
		return fmt.Errorf("listing health monitors: %w", err)
	}
	for _, m := range ms {
		p.monitors[m.ID] = m
	}
	return l.readFloatingIPs(ctx, sc, p, project)
}

// readFloatingIPs lists the project's floating IPs when Neutron is used.
func (l *LoadBalancer) readFloatingIPs(ctx context.Context, sc *serviceClients, p *repairPass, project string) error {
	if sc.network == nil {
		return nil
	}
	fips, err := listFloatingIPs(ctx, sc, floatingips.ListOpts{ProjectID: project, Limit: l.pageSize})
	if err != nil {
		return err
	}
	p.fips = append(p.fips, fips...)
	return nil
}

// listAll reads every page of a listing.
func listAll[T any](ctx context.Context, pager interface {
	AllPages(context.Context) (pagination.Page, error)
}, extract func(pagination.Page) ([]T, error)) ([]T, error) {
	page, err := pager.AllPages(ctx)
	if err != nil {
		return nil, err
	}
	return extract(page)
}

// listPools lists pools with the time each last changed.
func listPools(ctx context.Context, c *gophercloud.ServiceClient, opts pools.ListOpts) ([]poolRow, error) {
	page, err := pools.List(c, opts).AllPages(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing pools: %w", err)
	}
	ps, err := pools.ExtractPools(page)
	if err != nil {
		return nil, fmt.Errorf("listing pools: %w", err)
	}
	var times []struct {
		UpdatedAt string `json:"updated_at"`
	}
	if err := page.(pools.PoolPage).ExtractIntoSlicePtr(&times, "pools"); err != nil || len(times) != len(ps) {
		return nil, fmt.Errorf("listing pools: reading updated_at: %w", err)
	}
	rows := make([]poolRow, len(ps))
	for i := range ps {
		rows[i] = poolRow{Pool: ps[i], updatedAt: times[i].UpdatedAt}
	}
	return rows, nil
}

// find returns the Service's load balancers from the snapshot; ok is false
// when the snapshot has none, or one was changed since it was read.
func (p *repairPass) find(service string) (found []loadbalancers.LoadBalancer, ok bool) {
	found = p.byService[service]
	if len(found) == 0 {
		return nil, false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, lb := range found {
		if p.dropped[lb.ID] {
			return nil, false
		}
	}
	return append([]loadbalancers.LoadBalancer(nil), found...), true
}

// holds reports whether the snapshot serves a load balancer.
func (p *repairPass) holds(lbID string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lbs[lbID] && !p.dropped[lbID]
}

// drop makes the pass read a changed load balancer from the cloud again.
func (p *repairPass) drop(lbID string) {
	p.mu.Lock()
	p.dropped[lbID] = true
	p.mu.Unlock()
}

// floatingIPs filters the snapshot's floating IPs as Neutron would by port
// or description (the only filters EnsureLoadBalancer reads with).
func (p *repairPass) floatingIPs(opts floatingips.ListOpts) []floatingips.FloatingIP {
	var out []floatingips.FloatingIP
	for _, f := range p.fips {
		if (opts.PortID == "" || f.PortID == opts.PortID) && (opts.Description == "" || f.Description == opts.Description) {
			out = append(out, f)
		}
	}
	return out
}

// dropFromPasses drops a load balancer from every pass under way.
func (l *LoadBalancer) dropFromPasses(lbID string) {
	l.passes.Each(func(p *repairPass) { p.drop(lbID) })
}
