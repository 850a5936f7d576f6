package openstack

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/listeners"
	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/loadbalancers"
	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/monitors"
	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/pools"
	corev1 "k8s.io/api/core/v1"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

// lbState is what Octavia holds under one load balancer.
type lbState struct {
	listeners []listeners.Listener
	pools     map[string]*poolState
	// others are the listeners of other Services sharing the load
	// balancer: never changed, their ports not taken, their pools kept.
	others []listeners.Listener
}

// poolState is a pool with its members and monitor.
type poolState struct {
	pool pools.Pool
	// updatedAt is the pool's updated_at, listed before its members.
	updatedAt string
	members   []pools.Member
	monitor   *monitors.Monitor
}

// step is one mutating call and what it changes, for logs and change
// reports: object ("listener TCP:80") and change ("created", "updated
// (connection limit)").
type step struct {
	object, change string
	do             func(ctx context.Context) error
	// cause names the annotations that shape the change: Octavia refusing
	// it (400) is then a user error naming them.
	cause string
	// tlsRef is the TLS container the change puts in use, checked first.
	tlsRef string
}

// changeCreated is the change of a step creating a missing object.
const changeCreated = "created"

// what says what the step changes; in a repair pass a missing object is
// one that was there before, so it is re-created.
func (s *step) what(repair bool) string {
	if repair && s.change == changeCreated {
		return s.object + " re-created"
	}
	return s.object + " " + s.change
}

// listenerName names a listener for logs and change reports.
func listenerName(protocol string, port int) string {
	return fmt.Sprintf("listener %s:%d", protocol, port)
}

// readState reads listeners, pools, members and monitors (reads only).
func readState(ctx context.Context, c *gophercloud.ServiceClient, lbID string) (*lbState, error) {
	return readStateWith(ctx, c, lbID, nil)
}

// readStateWith reads what Octavia holds under a load balancer. With mem
// it reads as little as it can: no pool listing while the load balancer
// has no listener (the backend makes pools only under a listener; a pool
// left without one is found and deleted once a listener exists), no
// member listing for a pool without members, and remembered members while
// the pool's member IDs and updated_at say they did not change.
func readStateWith(ctx context.Context, c *gophercloud.ServiceClient, lbID string, mem *memberMemory) (*lbState, error) {
	lp, err := listeners.List(c, listeners.ListOpts{LoadbalancerID: lbID}).AllPages(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing listeners: %w", err)
	}
	ls, err := listeners.ExtractListeners(lp)
	if err != nil {
		return nil, fmt.Errorf("listing listeners: %w", err)
	}
	st := &lbState{listeners: ls, pools: map[string]*poolState{}}
	if mem != nil && len(ls) == 0 {
		return st, nil
	}
	ps, err := listPools(ctx, c, pools.ListOpts{LoadbalancerID: lbID})
	if err != nil {
		return nil, err
	}
	for _, p := range ps {
		s, err := readPool(ctx, c, p, mem)
		if err != nil {
			return nil, err
		}
		st.pools[p.ID] = s
	}
	return st, nil
}

// readPool reads a listed pool's members (through mem when set) and
// monitor.
func readPool(ctx context.Context, c *gophercloud.ServiceClient, p poolRow, mem *memberMemory) (*poolState, error) {
	var ms []pools.Member
	var err error
	switch {
	case mem == nil:
		ms, err = readMembers(ctx, c, p.ID)
	case len(p.Members) > 0:
		ms, err = mem.members(ctx, c, p)
	}
	if err != nil {
		return nil, err
	}
	s := &poolState{pool: p.Pool, updatedAt: p.updatedAt, members: ms}
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
//
// owns says which listeners are the Service's; the others belong to
// Services sharing the load balancer, and a port of theirs is an error.
func (l *LoadBalancer) converge(ctx context.Context, sc *serviceClients, svc *corev1.Service, lb *loadbalancers.LoadBalancer, want []listenerSpec, owns func(*listeners.Listener) bool) error {
	st, err := l.state(ctx, sc, lb.ID)
	if err != nil {
		return err
	}
	if err := splitShared(st, want, owns, lb.ID); err != nil {
		return err
	}
	if backends.DryRun(ctx) {
		for _, s := range everyStep(sc.loadBalancer, lb, st, want) {
			dryRun(ctx, backends.IntentChange, "octavia", s.what(false))
		}
		return nil
	}
	return l.makeStep(ctx, sc, svc, lb, nextStep(sc.loadBalancer, lb, st, want))
}

// makeStep makes one change to the load balancer and asks to retry while
// Octavia applies it; nil makes none and returns nil.
func (l *LoadBalancer) makeStep(ctx context.Context, sc *serviceClients, svc *corev1.Service, lb *loadbalancers.LoadBalancer, s *step) error {
	if s == nil {
		return nil
	}
	what := s.what(l.passFrom(ctx) != nil)
	if s.tlsRef != "" {
		if err := l.checkTLSRef(ctx, sc, s.tlsRef); err != nil {
			return err
		}
	}
	l.logger(ctx, svc).V(2).Info("Changing load balancer", "loadBalancerID", lb.ID, "change", what)
	l.dropFromPasses(lb.ID)
	if err := s.do(ctx); err != nil {
		if gophercloud.ResponseCodeIs(err, http.StatusConflict) {
			// Octavia still applies an earlier change to a child object.
			return l.retry("load balancer %s: %s: busy: %v", lb.ID, what, err)
		}
		if gophercloud.ResponseCodeIs(err, http.StatusBadRequest) && s.cause != "" {
			return backends.NewUserError(reasonOctaviaRefused, fmt.Errorf("octavia refused the change (%s), set by %s: %w; change or remove the annotation", what, s.cause, err))
		}
		return fmt.Errorf("%s: %w", what, err)
	}
	l.reportChange(ctx, lb.ID, what)
	return l.retry("load balancer %s: %s", lb.ID, what)
}

// splitShared moves other Services' listeners to st.others and refuses a
// wanted port one of them serves.
func splitShared(st *lbState, want []listenerSpec, owns func(*listeners.Listener) bool, lbID string) error {
	var mine []listeners.Listener
	for _, ls := range st.listeners {
		if owns(&ls) {
			mine = append(mine, ls)
		} else {
			st.others = append(st.others, ls)
		}
	}
	st.listeners = mine
	for _, w := range want {
		for _, o := range st.others {
			if o.ProtocolPort == w.port && (o.Protocol == w.protocol || (tcpFamily[o.Protocol] && tcpFamily[w.protocol])) {
				return backends.NewUserError(reasonShared, fmt.Errorf("port %d (%s) is served by another Service sharing load balancer %s, or by a listener made outside this cluster (listener %s): use another port", w.port, w.protocol, lbID, o.ID))
			}
		}
	}
	return nil
}

// nextStep returns the first change needed, or nil.
func nextStep(c *gophercloud.ServiceClient, lb *loadbalancers.LoadBalancer, st *lbState, want []listenerSpec) *step {
	lbID := lb.ID
	used := map[string]bool{}
	for i := range want {
		w := &want[i]
		ls := findListener(st, w)
		if ls == nil {
			s := createListenerStep(c, lbID, w)
			if old := portTaken(st, w); old != nil {
				// Octavia keeps one TCP-family listener per port: a
				// protocol change (X-Forwarded-For, TLS) replaces it.
				s = removeListenerStep(c, old)
			}
			s.tlsRef = w.tlsRef
			return s
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
	return orphanPoolStep(c, lb, st)
}

// everyStep is the read-only mode's (backends.WithDryRun) view of
// nextStep: every change each wanted listener needs, then each unused
// listener's removal and an orphan pool's, in the order converge makes
// them one per call.
func everyStep(c *gophercloud.ServiceClient, lb *loadbalancers.LoadBalancer, st *lbState, want []listenerSpec) []*step {
	var out []*step
	used := map[string]bool{}
	for i := range want {
		w := &want[i]
		ls := findListener(st, w)
		switch {
		case ls == nil && portTaken(st, w) != nil:
			out = append(out, removeListenerSteps(c, portTaken(st, w))...)
			out = append(out, newListenerStep(c, lb.ID, w))
		case ls == nil:
			out = append(out, newListenerStep(c, lb.ID, w))
		default:
			used[ls.ID] = true
			out = append(out, listenerSteps(c, ls, st, w)...)
		}
	}
	for i := range st.listeners {
		if ls := &st.listeners[i]; !used[ls.ID] && !slices.ContainsFunc(want, func(w listenerSpec) bool { p := portTaken(st, &w); return p != nil && p.ID == ls.ID }) {
			out = append(out, removeListenerSteps(c, ls)...)
		}
	}
	if s := orphanPoolStep(c, lb, st); s != nil {
		out = append(out, s)
	}
	return out
}

// newListenerStep is a new listener as the read-only mode lists it: one
// change standing for the listener and what converge then makes under it,
// its pool, members and monitor (as dryRunCreate lists them).
func newListenerStep(c *gophercloud.ServiceClient, lbID string, w *listenerSpec) *step {
	s := createListenerStep(c, lbID, w)
	s.change = createdWithPool(w)
	return s
}

// createdWithPool says what a new listener comes with.
func createdWithPool(w *listenerSpec) string {
	what := fmt.Sprintf("%s with its pool and %d members", changeCreated, len(w.members))
	if w.monitor != nil {
		what += " and a health monitor"
	}
	return what
}

// removeListenerSteps are the changes removing a listener, as converge
// makes them one per call: its pool (members and monitor go with it),
// then the listener.
func removeListenerSteps(c *gophercloud.ServiceClient, ls *listeners.Listener) []*step {
	out := []*step{removeListenerStep(c, ls)}
	if ls.DefaultPoolID != "" {
		bare := *ls
		bare.DefaultPoolID = ""
		out = append(out, removeListenerStep(c, &bare))
	}
	return out
}

// dryRunCreate records, under a dry run, the create of a load balancer
// named name with a listener, pool and members per port (and a floating
// IP when the Service wants one), and returns the status it would have
// once made: its hostname annotation's, else an address Octavia (or
// Neutron) has yet to give, shown as a made-up name (the load balancer's,
// under dryRunHost) as the aws backend's dry run shows a new NLB's.
func dryRunCreate(ctx context.Context, kind backends.IntentKind, name string, want []listenerSpec, o *lbOptions) *corev1.LoadBalancerStatus {
	backends.RecordIntentOf(ctx, kind, "openstack: POST load balancer", "load balancer "+name+" created")
	for i := range want {
		w := &want[i]
		dryRun(ctx, backends.IntentChange, "octavia", listenerName(w.protocol, w.port)+" "+createdWithPool(w))
	}
	if wantsFloatingIP(o) {
		dryRun(ctx, backends.IntentChange, "POST floating IP", "floating IP allocated on network "+o.floatingNetworkID)
	}
	if o.hostname != "" {
		return status(nil, o)
	}
	return &corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{Hostname: strings.ReplaceAll(name, "_", "-") + dryRunHost}}}
}

// dryRunHost ends the made-up name of a load balancer's address the dry
// run has yet to be given.
const dryRunHost = ".new-address.dry-run.invalid"

func findListener(st *lbState, w *listenerSpec) *listeners.Listener {
	for i := range st.listeners {
		if ls := &st.listeners[i]; ls.Protocol == w.protocol && ls.ProtocolPort == w.port {
			return ls
		}
	}
	return nil
}

// tcpFamily are the listener protocols that share a port's TCP socket.
var tcpFamily = map[string]bool{"TCP": true, "HTTP": true, "HTTPS": true, "TERMINATED_HTTPS": true}

// portTaken returns a listener of another protocol of the same transport
// on the wanted port.
func portTaken(st *lbState, w *listenerSpec) *listeners.Listener {
	for i := range st.listeners {
		ls := &st.listeners[i]
		if ls.ProtocolPort == w.port && ls.Protocol != w.protocol && tcpFamily[ls.Protocol] && tcpFamily[w.protocol] {
			return ls
		}
	}
	return nil
}

// listenerUpdate returns the update a listener needs and the fields it
// changes, or nil.
func listenerUpdate(ls *listeners.Listener, w *listenerSpec) (*listeners.UpdateOpts, []string) {
	var u listeners.UpdateOpts
	var fields []string
	if !sameCIDRs(ls.AllowedCIDRs, w.cidrs) {
		cidrs := append([]string{}, w.cidrs...)
		u.AllowedCIDRs, fields = &cidrs, append(fields, "allowed CIDRs")
	}
	if ls.ConnLimit != w.connLimit {
		u.ConnLimit, fields = ptr(w.connLimit), append(fields, "connection limit")
	}
	t := w.timeouts
	if ls.TimeoutClientData != t.clientData || ls.TimeoutMemberConnect != t.memberConnect || ls.TimeoutMemberData != t.memberData || ls.TimeoutTCPInspect != t.tcpInspect {
		u.TimeoutClientData, u.TimeoutMemberConnect, u.TimeoutMemberData, u.TimeoutTCPInspect = ptr(t.clientData), ptr(t.memberConnect), ptr(t.memberData), ptr(t.tcpInspect)
		fields = append(fields, "timeouts")
	}
	if w.xForwardedFor && ls.InsertHeaders[headerXForwardedFor] != "true" {
		u.InsertHeaders, fields = &map[string]string{headerXForwardedFor: "true"}, append(fields, headerXForwardedFor)
	}
	if w.tlsRef != "" && ls.DefaultTlsContainerRef != w.tlsRef {
		u.DefaultTlsContainerRef, fields = ptr(w.tlsRef), append(fields, "TLS container")
	}
	if len(fields) == 0 {
		return nil, nil
	}
	return &u, fields
}

// headerXForwardedFor is Octavia's insert_headers key for the client address.
const headerXForwardedFor = "X-Forwarded-For"

// reasonOctaviaRefused is the event reason when Octavia rejects what the
// annotations ask for.
const reasonOctaviaRefused = "OctaviaRefusedAnnotation"

// listenerStep converges one listener and its default pool.
func listenerStep(c *gophercloud.ServiceClient, ls *listeners.Listener, st *lbState, w *listenerSpec) *step {
	if steps := listenerSteps(c, ls, st, w); len(steps) > 0 {
		return steps[0]
	}
	return nil
}

// listenerSteps returns every change the listener, its pool, members and
// monitor need, in the order converge makes them. A pool to create or
// replace ends the list: what it holds is made with it.
func listenerSteps(c *gophercloud.ServiceClient, ls *listeners.Listener, st *lbState, w *listenerSpec) []*step {
	var out []*step
	name := listenerName(ls.Protocol, ls.ProtocolPort)
	if u, fields := listenerUpdate(ls, w); u != nil {
		s := &step{object: name, change: "updated (" + strings.Join(fields, ", ") + ")", do: func(ctx context.Context) error {
			return listeners.Update(ctx, c, ls.ID, *u).Err
		}, cause: listenerCause}
		if u.DefaultTlsContainerRef != nil {
			s.tlsRef = w.tlsRef
		}
		out = append(out, s)
	}
	p := st.pools[ls.DefaultPoolID]
	if p == nil {
		return append(out, createPoolStep(c, ls, w))
	}
	if p.pool.ProvisioningStatus == lbError || p.pool.Protocol != w.poolProtocol {
		// A failed change leaves the pool immutable in ERROR, and a pool's
		// protocol (PROXY protocol) cannot change: replace it.
		return append(out, &step{"pool " + p.pool.ID + " of " + name, "deleted to be replaced (" + p.pool.ProvisioningStatus + ", " + p.pool.Protocol + ")", func(ctx context.Context) error {
			return ignoreNotFound(pools.Delete(ctx, c, p.pool.ID).ExtractErr())
		}, "", ""})
	}
	if p.pool.LBMethod != w.method {
		out = append(out, &step{name + ":", "pool algorithm changed from " + p.pool.LBMethod + " to " + w.method, func(ctx context.Context) error {
			return pools.Update(ctx, c, p.pool.ID, pools.UpdateOpts{LBMethod: pools.LBMethod(w.method)}).Err
		}, string(AnnotationLBMethod), ""})
	}
	if p.pool.Persistence.Type != w.persistence {
		out = append(out, &step{name + ":", "pool session persistence changed from " + orNone(p.pool.Persistence.Type) + " to " + orNone(w.persistence), func(ctx context.Context) error {
			return pools.Update(ctx, c, p.pool.ID, pools.UpdateOpts{Persistence: &pools.SessionPersistence{Type: w.persistence}}).Err
		}, "spec.sessionAffinity", ""})
	}
	if s := membersStep(c, name, p, w.members); s != nil {
		out = append(out, s)
	}
	if s := monitorStep(c, p, name, w.monitor); s != nil {
		out = append(out, s)
		if p.monitor != nil && w.monitor != nil && p.monitor.Type != w.monitor.typ {
			// A monitor's type cannot change: the new one is created
			// once the old is gone.
			out = append(out, monitorStep(c, &poolState{pool: p.pool}, name, w.monitor))
		}
	}
	return out
}

// membersStep sets a pool's members to want, or is nil when they are.
func membersStep(c *gophercloud.ServiceClient, listener string, p *poolState, want []memberSpec) *step {
	if sameMembers(p.members, want) {
		return nil
	}
	return &step{listener + ":", memberChanges(p.members, want), func(ctx context.Context) error {
		return pools.BatchUpdateMembers(ctx, c, p.pool.ID, batchMembers(want)).ExtractErr()
	}, string(AnnotationMemberSubnetID), ""}
}

func createListenerStep(c *gophercloud.ServiceClient, lbID string, w *listenerSpec) *step {
	return &step{listenerName(w.protocol, w.port), changeCreated, func(ctx context.Context) error {
		opts := listenerCreateOpts(w)
		opts.LoadbalancerID = lbID
		return listeners.Create(ctx, c, opts).Err
	}, listenerCause, ""}
}

// orNone names an empty setting.
func orNone(v string) string {
	if v == "" {
		return "none"
	}
	return v
}

func createPoolStep(c *gophercloud.ServiceClient, ls *listeners.Listener, w *listenerSpec) *step {
	return &step{"pool of " + listenerName(ls.Protocol, ls.ProtocolPort), changeCreated, func(ctx context.Context) error {
		opts := pools.CreateOpts{
			Name: w.name, Protocol: pools.Protocol(w.poolProtocol), LBMethod: pools.LBMethod(w.method), ListenerID: ls.ID,
		}
		if w.persistence != "" {
			opts.Persistence = &pools.SessionPersistence{Type: w.persistence}
		}
		return pools.Create(ctx, c, opts).Err
	}, string(AnnotationLBMethod + ", " + AnnotationProxyProtocol), ""}
}

// removeListenerStep deletes a listener no port asks for: its pool first
// (members and monitor go with it), then the listener.
func removeListenerStep(c *gophercloud.ServiceClient, ls *listeners.Listener) *step {
	name := listenerName(ls.Protocol, ls.ProtocolPort)
	if ls.DefaultPoolID != "" {
		return &step{"pool " + ls.DefaultPoolID + " of unused " + name, "deleted", func(ctx context.Context) error {
			return ignoreNotFound(pools.Delete(ctx, c, ls.DefaultPoolID).ExtractErr())
		}, "", ""}
	}
	return &step{"unused " + name, "deleted", func(ctx context.Context) error {
		return ignoreNotFound(listeners.Delete(ctx, c, ls.ID).ExtractErr())
	}, "", ""}
}

// orphanPoolStep deletes a pool no listener uses that this backend made
// (named mccm_...) or cloud-provider-openstack made for the load balancer's
// own Service (pool_<i>_<load balancer name>); a pool made by hand is a
// stranger, left as it is.
func orphanPoolStep(c *gophercloud.ServiceClient, lb *loadbalancers.LoadBalancer, st *lbState) *step {
	used := map[string]bool{}
	for _, ls := range slices.Concat(st.listeners, st.others) {
		used[ls.DefaultPoolID] = true
	}
	for id, p := range st.pools {
		if !used[id] && (strings.HasPrefix(p.pool.Name, listenerNamePrefix) || (strings.HasPrefix(p.pool.Name, "pool_") && strings.HasSuffix(p.pool.Name, "_"+lb.Name))) {
			return &step{"unused pool " + id, "deleted", func(ctx context.Context) error {
				return ignoreNotFound(pools.Delete(ctx, c, id).ExtractErr())
			}, "", ""}
		}
	}
	return nil
}

// monitorStep creates, updates or deletes a pool's health monitor.
func monitorStep(c *gophercloud.ServiceClient, p *poolState, listener string, want *monitorSpec) *step {
	have := p.monitor
	object := "health monitor of " + listener
	switch {
	case have == nil && want == nil:
		return nil
	case have != nil && (want == nil || have.Type != want.typ):
		return &step{object, "deleted (" + have.Type + ")", func(ctx context.Context) error {
			return ignoreNotFound(monitors.Delete(ctx, c, have.ID).ExtractErr())
		}, "", ""}
	case have == nil:
		return &step{object, changeCreated, func(ctx context.Context) error {
			opts := monitorCreateOpts(want)
			opts.PoolID = p.pool.ID
			return monitors.Create(ctx, c, opts).Err
		}, monitorCause, ""}
	case have.Delay != want.delay || have.Timeout != want.timeout || have.MaxRetries != want.retries || have.MaxRetriesDown != want.retriesDown || (want.urlPath != "" && have.URLPath != want.urlPath):
		return &step{object, "updated (" + monitorChanges(have, want) + ")", func(ctx context.Context) error {
			return monitors.Update(ctx, c, have.ID, monitors.UpdateOpts{Delay: want.delay, Timeout: want.timeout, MaxRetries: want.retries, MaxRetriesDown: want.retriesDown, URLPath: want.urlPath}).Err
		}, monitorCause, ""}
	}
	return nil
}

// monitorChanges names a monitor's settings that differ from want's:
// "max_retries 3 -> 1, delay 5 -> 10".
func monitorChanges(have *monitors.Monitor, want *monitorSpec) string {
	var out []string
	for _, f := range []struct {
		name       string
		have, want int
	}{{"delay", have.Delay, want.delay}, {"timeout", have.Timeout, want.timeout}, {"max_retries", have.MaxRetries, want.retries}, {"max_retries_down", have.MaxRetriesDown, want.retriesDown}} {
		if f.have != f.want {
			out = append(out, fmt.Sprintf("%s %d -> %d", f.name, f.have, f.want))
		}
	}
	if want.urlPath != "" && have.URLPath != want.urlPath {
		out = append(out, fmt.Sprintf("url_path %q -> %q", have.URLPath, want.urlPath))
	}
	return strings.Join(out, ", ")
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
		if m, ok := idx[w.key()]; !ok || !sameMember(m, w) {
			return false
		}
	}
	return true
}

// sameMember compares a member at the wanted address and port.
func sameMember(m pools.Member, w memberSpec) bool {
	return m.MonitorPort == w.monitorPort && m.Name == w.name && (w.subnetID == "" || m.SubnetID == w.subnetID)
}

// memberChanges says what a batch update changes in a pool's members
// ("member 10.0.0.5:30080 added, member 10.0.0.6:30080 removed"), naming
// at most maxNamedMembers.
func memberChanges(have []pools.Member, want []memberSpec) string {
	had := map[string]pools.Member{}
	for _, m := range have {
		had[fmt.Sprintf("%s:%d", m.Address, m.ProtocolPort)] = m
	}
	var changes []string
	for _, w := range want {
		m, ok := had[w.key()]
		delete(had, w.key())
		switch {
		case !ok:
			changes = append(changes, "member "+w.key()+" added")
		case !sameMember(m, w):
			changes = append(changes, "member "+w.key()+" updated")
		}
	}
	gone := make([]string, 0, len(had))
	for k := range had {
		gone = append(gone, "member "+k+" removed")
	}
	slices.Sort(gone)
	changes = append(changes, gone...)
	if len(changes) > maxNamedMembers {
		changes = append(changes[:maxNamedMembers], fmt.Sprintf("%d more member changes", len(changes)-maxNamedMembers))
	}
	return strings.Join(changes, ", ")
}

// maxNamedMembers bounds the members a change report names.
const maxNamedMembers = 5

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

// Annotations shaping listeners and monitors, for error messages.
const (
	listenerCause = string(AnnotationConnectionLimit + ", " + AnnotationTimeoutClientData + ", " + AnnotationTimeoutMemberConnect + ", " +
		AnnotationTimeoutMemberData + ", " + AnnotationTimeoutTCPInspect + ", " + AnnotationXForwardedFor + ", " + AnnotationDefaultTLSContainerRef + " or loadBalancerSourceRanges")
	monitorCause = string(AnnotationHealthMonitorDelay + ", " + AnnotationHealthMonitorTimeout + ", " + AnnotationHealthMonitorMaxRetries + " or " + AnnotationHealthMonitorMaxRetriesDown)
)

// listenerCreateOpts builds a listener without its pool.
func listenerCreateOpts(w *listenerSpec) listeners.CreateOpts {
	t := w.timeouts
	opts := listeners.CreateOpts{
		Name: w.name, Protocol: listeners.Protocol(w.protocol), ProtocolPort: w.port, AllowedCIDRs: w.cidrs, ConnLimit: ptr(w.connLimit),
		TimeoutClientData: ptr(t.clientData), TimeoutMemberConnect: ptr(t.memberConnect), TimeoutMemberData: ptr(t.memberData), TimeoutTCPInspect: ptr(t.tcpInspect),
	}
	if w.xForwardedFor {
		opts.InsertHeaders = map[string]string{headerXForwardedFor: "true"}
	}
	opts.DefaultTlsContainerRef = w.tlsRef
	opts.Tags = w.tags
	return opts
}

func monitorCreateOpts(m *monitorSpec) monitors.CreateOpts {
	return monitors.CreateOpts{Type: m.typ, Delay: m.delay, Timeout: m.timeout, MaxRetries: m.retries, MaxRetriesDown: m.retriesDown, URLPath: m.urlPath}
}

func ignoreNotFound(err error) error {
	if gophercloud.ResponseCodeIs(err, 404) {
		return nil
	}
	return err
}

func ptr[T any](v T) *T { return &v }
