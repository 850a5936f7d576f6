package openstack

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/monitors"
	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/pools"
)

// memberMemory is what the backend last read of each pool's members, with
// the pool's updated_at listed before that read. Octavia has no bulk read
// of members (only GET /pools/{id}/members), but its pool listing gives
// each pool's member IDs and updated_at, which Octavia bumps on every
// member create, update or delete (the pool goes PENDING_UPDATE and back).
// While both are what they were, the members are too, and a repair pass
// reuses them instead of reading them again.
type memberMemory struct {
	mu    sync.Mutex
	pools map[string]memberEntry
}

// memberEntry is one pool's members as last read.
type memberEntry struct {
	updatedAt string
	ids       string
	members   []pools.Member
}

// memberIDs is the sorted, joined member IDs.
func memberIDs(ms []pools.Member) string {
	ids := make([]string, len(ms))
	for i, m := range ms {
		ids[i] = m.ID
	}
	slices.Sort(ids)
	return strings.Join(ids, ",")
}

// store remembers the members read after the pool row was listed.
func (m *memberMemory) store(row poolRow, members []pools.Member) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.pools == nil {
		m.pools = map[string]memberEntry{}
	}
	m.pools[row.ID] = memberEntry{updatedAt: row.updatedAt, ids: memberIDs(members), members: members}
}

// lookup returns the remembered members when the pool row says they did
// not change.
func (m *memberMemory) lookup(row poolRow) ([]pools.Member, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.pools[row.ID]
	if !ok || e.updatedAt != row.updatedAt || e.ids != memberIDs(row.Members) {
		return nil, false
	}
	return e.members, true
}

// keep forgets the pools not listed (deleted ones).
func (m *memberMemory) keep(listed map[string][]poolRow) {
	ids := map[string]bool{}
	for _, rows := range listed {
		for _, r := range rows {
			ids[r.ID] = true
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for id := range m.pools {
		if !ids[id] {
			delete(m.pools, id)
		}
	}
}

// members returns a pool's members: remembered, or read and remembered.
func (m *memberMemory) members(ctx context.Context, c *gophercloud.ServiceClient, row poolRow) ([]pools.Member, error) {
	if ms, ok := m.lookup(row); ok {
		return ms, nil
	}
	ms, err := readMembers(ctx, c, row.ID)
	if err != nil {
		return nil, err
	}
	m.store(row, ms)
	return ms, nil
}

// readMembers lists a pool's members.
func readMembers(ctx context.Context, c *gophercloud.ServiceClient, poolID string) ([]pools.Member, error) {
	mp, err := pools.ListMembers(c, poolID, pools.ListMembersOpts{}).AllPages(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing members of pool %s: %w", poolID, err)
	}
	ms, err := pools.ExtractMembers(mp)
	if err != nil {
		return nil, fmt.Errorf("listing members of pool %s: %w", poolID, err)
	}
	return ms, nil
}

// state is what Octavia holds under a load balancer: from the ctx's repair
// pass when it holds the load balancer, else read from Octavia (and the
// members remembered).
func (l *LoadBalancer) state(ctx context.Context, sc *serviceClients, lbID string) (*lbState, error) {
	if p := l.passFrom(ctx); p != nil && p.holds(lbID) {
		return l.passState(ctx, sc.loadBalancer, p, lbID)
	}
	return readStateWith(ctx, sc.loadBalancer, lbID, &l.members)
}

// passState builds a load balancer's state from a repair pass.
func (l *LoadBalancer) passState(ctx context.Context, c *gophercloud.ServiceClient, p *repairPass, lbID string) (*lbState, error) {
	st := &lbState{listeners: slices.Clone(p.listeners[lbID]), pools: map[string]*poolState{}}
	for _, row := range p.pools[lbID] {
		ms, err := l.members.members(ctx, c, row)
		if err != nil {
			return nil, err
		}
		s := &poolState{pool: row.Pool, updatedAt: row.updatedAt, members: ms}
		if s.monitor, err = passMonitor(ctx, c, p, row.MonitorID); err != nil {
			return nil, err
		}
		st.pools[row.ID] = s
	}
	return st, nil
}

// passMonitor is a pool's monitor from the pass, or from Octavia when it
// is newer than the pass.
func passMonitor(ctx context.Context, c *gophercloud.ServiceClient, p *repairPass, id string) (*monitors.Monitor, error) {
	if id == "" {
		return nil, nil
	}
	if m, ok := p.monitors[id]; ok {
		return &m, nil
	}
	m, err := monitors.Get(ctx, c, id).Extract()
	if err != nil {
		return nil, fmt.Errorf("getting monitor %s: %w", id, err)
	}
	return m, nil
}
