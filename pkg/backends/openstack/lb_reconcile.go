package openstack

import (
	"context"
	"fmt"
	"net/http"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/listeners"
	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/loadbalancers"
	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/monitors"
	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/pools"
	corev1 "k8s.io/api/core/v1"
)

// lbState is what Octavia holds under one load balancer.
type lbState struct {
	listeners []listeners.Listener
	pools     map[string]*poolState
}

// poolState is a pool with its members and monitor.
type poolState struct {
	pool    pools.Pool
	members []pools.Member
	monitor *monitors.Monitor
}

// step is one mutating call and what it does, for logs.
type step struct {
	what string
	do   func(ctx context.Context) error
}

// readState reads listeners, pools, members and monitors (reads only).
func readState(ctx context.Context, c *gophercloud.ServiceClient, lbID string) (*lbState, error) {
	lp, err := listeners.List(c, listeners.ListOpts{LoadbalancerID: lbID}).AllPages(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing listeners: %w", err)
	}
	ls, err := listeners.ExtractListeners(lp)
	if err != nil {
		return nil, fmt.Errorf("listing listeners: %w", err)
	}
	pp, err := pools.List(c, pools.ListOpts{LoadbalancerID: lbID}).AllPages(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing pools: %w", err)
	}
	ps, err := pools.ExtractPools(pp)
	if err != nil {
		return nil, fmt.Errorf("listing pools: %w", err)
	}
	st := &lbState{listeners: ls, pools: map[string]*poolState{}}
	for _, p := range ps {
		s, err := readPool(ctx, c, p)
		if err != nil {
			return nil, err
		}
		st.pools[p.ID] = s
	}
	return st, nil
}

func readPool(ctx context.Context, c *gophercloud.ServiceClient, p pools.Pool) (*poolState, error) {
	mp, err := pools.ListMembers(c, p.ID, pools.ListMembersOpts{}).AllPages(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing members of pool %s: %w", p.ID, err)
	}
	ms, err := pools.ExtractMembers(mp)
	if err != nil {
		return nil, fmt.Errorf("listing members of pool %s: %w", p.ID, err)
	}
	s := &poolState{pool: p, members: ms}
	if p.MonitorID != "" {
		m, err := monitors.Get(ctx, c, p.MonitorID).Extract()
		if err != nil {
			return nil, fmt.Errorf("getting monitor %s: %w", p.MonitorID, err)
		}
		s.monitor = m
	}
	return s, nil
}

// converge makes the first change the load balancer needs, if any, and then
// asks to retry; with nothing to change it returns nil having made no
// mutating call.
func (l *LoadBalancer) converge(ctx context.Context, sc *serviceClients, svc *corev1.Service, lb *loadbalancers.LoadBalancer, want []listenerSpec) error {
	st, err := readState(ctx, sc.loadBalancer, lb.ID)
	if err != nil {
		return err
	}
	s := nextStep(sc.loadBalancer, lb.ID, st, want)
	if s == nil {
		return nil
	}
	l.logger(ctx, svc).V(2).Info("Changing load balancer", "loadBalancerID", lb.ID, "change", s.what)
	if err := s.do(ctx); err != nil {
		if gophercloud.ResponseCodeIs(err, http.StatusConflict) {
			// Octavia still applies an earlier change to a child object.
			return l.retry("load balancer %s: %s: busy: %v", lb.ID, s.what, err)
		}
		return fmt.Errorf("%s: %w", s.what, err)
	}
	return l.retry("load balancer %s: %s", lb.ID, s.what)
}

// nextStep returns the first change needed, or nil.
func nextStep(c *gophercloud.ServiceClient, lbID string, st *lbState, want []listenerSpec) *step {
	used := map[string]bool{}
	for i := range want {
		w := &want[i]
		ls := findListener(st, w)
		if ls == nil {
			return createListenerStep(c, lbID, w)
		}
		used[ls.ID] = true
		if s := listenerStep(c, ls, st, w); s != nil {
			return s
		}
	}
	for i := range st.listeners {
		if ls := &st.listeners[i]; !used[ls.ID] {
			return removeListenerStep(c, ls)
		}
	}
	return orphanPoolStep(c, st)
}

func findListener(st *lbState, w *listenerSpec) *listeners.Listener {
	for i := range st.listeners {
		if ls := &st.listeners[i]; ls.Protocol == w.protocol && ls.ProtocolPort == w.port {
			return ls
		}
	}
	return nil
}

// listenerStep converges one listener and its default pool.
func listenerStep(c *gophercloud.ServiceClient, ls *listeners.Listener, st *lbState, w *listenerSpec) *step {
	if !sameCIDRs(ls.AllowedCIDRs, w.cidrs) {
		cidrs := append([]string{}, w.cidrs...)
		return &step{"updating allowed CIDRs of listener " + ls.ID, func(ctx context.Context) error {
			return listeners.Update(ctx, c, ls.ID, listeners.UpdateOpts{AllowedCIDRs: &cidrs}).Err
		}}
	}
	p := st.pools[ls.DefaultPoolID]
	if p == nil {
		return createPoolStep(c, ls.ID, w)
	}
	if p.pool.ProvisioningStatus == lbError {
		// A failed change leaves the pool immutable in ERROR: replace it.
		return &step{"deleting pool " + p.pool.ID + " in ERROR", func(ctx context.Context) error {
			return ignoreNotFound(pools.Delete(ctx, c, p.pool.ID).ExtractErr())
		}}
	}
	if p.pool.LBMethod != w.method {
		return &step{"updating algorithm of pool " + p.pool.ID, func(ctx context.Context) error {
			return pools.Update(ctx, c, p.pool.ID, pools.UpdateOpts{LBMethod: pools.LBMethod(w.method)}).Err
		}}
	}
	if !sameMembers(p.members, w.members) {
		return &step{fmt.Sprintf("updating members of pool %s (%d)", p.pool.ID, len(w.members)), func(ctx context.Context) error {
			return pools.BatchUpdateMembers(ctx, c, p.pool.ID, batchMembers(w.members)).ExtractErr()
		}}
	}
	return monitorStep(c, p, w.monitor)
}

func createListenerStep(c *gophercloud.ServiceClient, lbID string, w *listenerSpec) *step {
	return &step{fmt.Sprintf("creating listener %s/%d", w.protocol, w.port), func(ctx context.Context) error {
		opts := listenerCreateOpts(w)
		opts.LoadbalancerID = lbID
		return listeners.Create(ctx, c, opts).Err
	}}
}

func createPoolStep(c *gophercloud.ServiceClient, listenerID string, w *listenerSpec) *step {
	return &step{"creating pool of listener " + listenerID, func(ctx context.Context) error {
		return pools.Create(ctx, c, pools.CreateOpts{
			Name: w.name, Protocol: pools.Protocol(w.protocol), LBMethod: pools.LBMethod(w.method), ListenerID: listenerID,
		}).Err
	}}
}

// removeListenerStep deletes a listener no port asks for: its pool first
// (members and monitor go with it), then the listener.
func removeListenerStep(c *gophercloud.ServiceClient, ls *listeners.Listener) *step {
	if ls.DefaultPoolID != "" {
		return &step{"deleting pool " + ls.DefaultPoolID + " of unused listener " + ls.ID, func(ctx context.Context) error {
			return ignoreNotFound(pools.Delete(ctx, c, ls.DefaultPoolID).ExtractErr())
		}}
	}
	return &step{"deleting unused listener " + ls.ID, func(ctx context.Context) error {
		return ignoreNotFound(listeners.Delete(ctx, c, ls.ID).ExtractErr())
	}}
}

// orphanPoolStep deletes a pool no listener uses.
func orphanPoolStep(c *gophercloud.ServiceClient, st *lbState) *step {
	used := map[string]bool{}
	for _, ls := range st.listeners {
		used[ls.DefaultPoolID] = true
	}
	for id := range st.pools {
		if !used[id] {
			return &step{"deleting unused pool " + id, func(ctx context.Context) error {
				return ignoreNotFound(pools.Delete(ctx, c, id).ExtractErr())
			}}
		}
	}
	return nil
}

// monitorStep creates, updates or deletes a pool's health monitor.
func monitorStep(c *gophercloud.ServiceClient, p *poolState, want *monitorSpec) *step {
	have := p.monitor
	switch {
	case have == nil && want == nil:
		return nil
	case have != nil && (want == nil || have.Type != want.typ):
		return &step{"deleting monitor " + have.ID, func(ctx context.Context) error {
			return ignoreNotFound(monitors.Delete(ctx, c, have.ID).ExtractErr())
		}}
	case have == nil:
		return &step{"creating monitor of pool " + p.pool.ID, func(ctx context.Context) error {
			opts := monitorCreateOpts(want)
			opts.PoolID = p.pool.ID
			return monitors.Create(ctx, c, opts).Err
		}}
	case have.Delay != want.delay || have.Timeout != want.timeout || have.MaxRetries != want.retries || (want.urlPath != "" && have.URLPath != want.urlPath):
		return &step{"updating monitor " + have.ID, func(ctx context.Context) error {
			return monitors.Update(ctx, c, have.ID, monitors.UpdateOpts{Delay: want.delay, Timeout: want.timeout, MaxRetries: want.retries, URLPath: want.urlPath}).Err
		}}
	}
	return nil
}

// sameMembers compares members by address, port, monitor port and name.
func sameMembers(have []pools.Member, want []memberSpec) bool {
	if len(have) != len(want) {
		return false
	}
	idx := map[string]pools.Member{}
	for _, m := range have {
		idx[fmt.Sprintf("%s:%d", m.Address, m.ProtocolPort)] = m
	}
	for _, w := range want {
		m, ok := idx[w.key()]
		if !ok || m.MonitorPort != w.monitorPort || m.Name != w.name || (w.subnetID != "" && m.SubnetID != w.subnetID) {
			return false
		}
	}
	return true
}

func batchMembers(want []memberSpec) []pools.BatchUpdateMemberOpts {
	out := make([]pools.BatchUpdateMemberOpts, 0, len(want))
	for _, w := range want {
		m := pools.BatchUpdateMemberOpts{Address: w.address, ProtocolPort: w.port, Name: ptr(w.name)}
		if w.subnetID != "" {
			m.SubnetID = ptr(w.subnetID)
		}
		if w.monitorPort != 0 {
			m.MonitorPort = ptr(w.monitorPort)
		}
		out = append(out, m)
	}
	return out
}

// listenerCreateOpts builds a listener without its pool.
func listenerCreateOpts(w *listenerSpec) listeners.CreateOpts {
	return listeners.CreateOpts{Name: w.name, Protocol: listeners.Protocol(w.protocol), ProtocolPort: w.port, AllowedCIDRs: w.cidrs}
}

func monitorCreateOpts(m *monitorSpec) monitors.CreateOpts {
	return monitors.CreateOpts{Type: m.typ, Delay: m.delay, Timeout: m.timeout, MaxRetries: m.retries, URLPath: m.urlPath}
}

func ignoreNotFound(err error) error {
	if gophercloud.ResponseCodeIs(err, 404) {
		return nil
	}
	return err
}

func ptr[T any](v T) *T { return &v }
