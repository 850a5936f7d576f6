package baremetal

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends/baremetal/bmconfig"
)

// Event reasons of the user-fixable load-balancer errors. They are stable.
const (
	ReasonInvalidLoadBalancerIPs = "InvalidLoadBalancerIPs"
	ReasonInvalidAllowSharedIP   = "InvalidAllowSharedIP"
	ReasonUnknownAddressPool     = "UnknownAddressPool"
	ReasonAddressPoolNotAllowed  = "AddressPoolNotAllowed"
	ReasonIPNotInPool            = "LoadBalancerIPNotInPool"
	ReasonIPInUse                = "LoadBalancerIPInUse"
	ReasonIPFamilyUnavailable    = "IPFamilyUnavailable"
	ReasonAddressPoolExhausted   = "AddressPoolExhausted"
)

// errNoPool marks a family that no pool can serve for a Service; a
// PreferDualStack Service then does without that family.
var errNoPool = errors.New("no address pool serves this IP family")

// portProto is one Service port as far as sharing is concerned.
type portProto struct {
	port     int32
	protocol corev1.Protocol
}

func (p portProto) String() string { return fmt.Sprintf("%d/%s", p.port, p.protocol) }

// shareInfo is what decides whether two Services may share an address.
type shareInfo struct {
	// key is the allow-shared-ip key; "" never shares.
	key   string
	ports []portProto
	// local is externalTrafficPolicy Local; such Services share only with
	// Services selecting the same pods.
	local    bool
	selector string
}

// holding is what one Service holds: the addresses the backend assigned it,
// and the pool addresses its status shows. Both are taken: an address stays
// taken while any Service's status shows it, whoever wrote it there.
type holding struct {
	name string // namespace/name
	uid  types.UID
	// addrs are the addresses assigned by EnsureLoadBalancer, in the
	// Service's family order.
	addrs []netip.Addr
	// status are the pool addresses last seen in the Service's
	// status.loadBalancer.ingress.
	status []netip.Addr
	share  shareInfo
}

// all returns the addresses h holds: its assigned ones, then those only its
// status shows.
func (h *holding) all() []netip.Addr {
	out := slices.Clone(h.addrs)
	for _, ip := range h.status {
		if !slices.Contains(out, ip) {
			out = append(out, ip)
		}
	}
	return out
}

// leaving reports whether h holds ip only through its status while it has
// been assigned another address of ip's family: its status is about to
// change.
func (h *holding) leaving(ip netip.Addr) bool {
	if slices.Contains(h.addrs, ip) {
		return false
	}
	for _, a := range h.addrs {
		if familyOf(a) == familyOf(ip) {
			return true
		}
	}
	return false
}

// lease is one address in use, by one Service or by several sharing it.
type lease struct {
	pool *poolState
	// counted is false for addresses found in a Service's status that lie in
	// a pool but outside its usable part (an IPv4 network address).
	counted bool
	holders map[string]*holding
}

// allocator hands out pool addresses to Services. It is not safe for
// concurrent use; the load balancer serialises calls.
type allocator struct {
	// pools are in allocation order (bmconfig.ComparePools), names in config order.
	pools    []*poolState
	names    []string
	byName   map[string]*poolState
	leases   map[netip.Addr]*lease
	services map[string]*holding
	// shared indexes the addresses held by Services with each sharing key.
	shared map[string]map[netip.Addr]bool
	// probes counts addresses looked at by fresh allocations.
	probes uint64
	// changes counts leases taken and released: the allocator's mutations.
	changes uint64
	// requests are the pool addresses each Service requests (in any
	// allocator's way), and reserved their requesters by address: automatic
	// allocation skips them, a Service requesting one may still take it.
	requests map[string][]netip.Addr
	reserved map[netip.Addr]map[string]bool
	// requester is the UID of the Service object each request came from.
	requester map[string]types.UID
	// marked are the usable addresses set in their pool's bitmap: those
	// leased or reserved.
	marked map[netip.Addr]bool
	// restShared are the resting addresses whose last holder had a sharing
	// key, by key, and restKey the key of each: a Service with the key
	// joins one as it would have joined it before its last holder left,
	// whichever came first. An entry goes when its address is leased
	// again, and is skipped once its address no longer rests.
	restShared map[string]map[netip.Addr]bool
	restKey    map[netip.Addr]string
	// recent are the addresses kept taken by a reservation only, that
	// were leased or resting when it began: they rest when freed.
	recent map[netip.Addr]bool
}

func newAllocator(pools []*bmconfig.Pool) *allocator {
	a := &allocator{
		byName:    map[string]*poolState{},
		leases:    map[netip.Addr]*lease{},
		services:  map[string]*holding{},
		shared:    map[string]map[netip.Addr]bool{},
		requests:  map[string][]netip.Addr{},
		reserved:  map[netip.Addr]map[string]bool{},
		requester: map[string]types.UID{},
		marked:    map[netip.Addr]bool{},

		restShared: map[string]map[netip.Addr]bool{},
		restKey:    map[netip.Addr]string{},
		recent:     map[netip.Addr]bool{},
	}
	for _, p := range pools {
		a.names = append(a.names, p.Name)
	}
	pools = slices.Clone(pools)
	slices.SortStableFunc(pools, bmconfig.ComparePools)
	for _, p := range pools {
		ps := newPoolState(p)
		a.pools = append(a.pools, ps)
		a.byName[p.Name] = ps
	}
	return a
}

// request is what a Service asks of the allocator.
type request struct {
	name      string // namespace/name
	uid       types.UID
	namespace string
	// target is what pools' service allocations look at.
	target bmconfig.Target
	// families in the Service's order; the first is its primary family.
	families []corev1.IPFamily
	// requireAll is false for PreferDualStack: a family no pool serves is
	// skipped unless an address of it is requested.
	requireAll bool
	requested  map[corev1.IPFamily]netip.Addr
	// poolName restricts the Service to one pool ("" any).
	poolName string
	share    shareInfo
}

// holdingOf returns what a Service holds, or nil.
func (a *allocator) holdingOf(name string) *holding { return a.services[name] }

// assign gives the Service one address per family it wants, keeping what it
// already holds where still allowed. It changes nothing when it fails.
func (a *allocator) assign(req *request) ([]netip.Addr, error) {
	want, err := a.decide(req)
	if err != nil {
		return nil, err
	}
	a.commit(req, want)
	return want, nil
}

// decide returns the addresses assign would give the Service. Alone (the
// read-only mode, backends.WithDryRun, see dryDecide) it changes nothing
// but the pools' cursors.
func (a *allocator) decide(req *request) ([]netip.Addr, error) {
	if req.poolName != "" {
		if err := a.checkNamedPool(req); err != nil {
			return nil, err
		}
	}
	var want []netip.Addr
	for i, f := range req.families {
		ip, err := a.choose(req, f)
		if errors.Is(err, errNoPool) && !req.requireAll && i > 0 {
			continue
		}
		if err != nil {
			return nil, err
		}
		want = append(want, ip)
	}
	return want, nil
}

// dryDecide is decide leaving the pools' cursors (and resting addresses)
// where they were, so that a dry run changes no later allocation.
func (a *allocator) dryDecide(req *request) ([]netip.Addr, error) {
	type cursor struct {
		rs       *rangeState
		next     uint64
		nextAddr netip.Addr
		woken    []netip.Addr
	}
	var curs []*cursor
	type famCursor struct {
		fs  *famState
		cur int
	}
	var fams []famCursor
	for _, ps := range a.pools {
		for i := range ps.fams {
			fs := &ps.fams[i]
			fams = append(fams, famCursor{fs, fs.cur})
			for _, rs := range fs.ranges {
				c := &cursor{rs: rs, next: rs.next, nextAddr: rs.nextAddr}
				rs.woken = &c.woken
				curs = append(curs, c)
			}
		}
	}
	defer func() {
		for _, f := range fams {
			f.fs.cur = f.cur
		}
		for _, c := range curs {
			c.rs.next, c.rs.nextAddr, c.rs.woken = c.next, c.nextAddr, nil
			c.rs.unwake(c.woken)
		}
	}()
	return a.decide(req)
}

func (a *allocator) checkNamedPool(req *request) error {
	ps, ok := a.byName[req.poolName]
	if !ok {
		return backends.NewUserError(ReasonUnknownAddressPool, fmt.Errorf("annotation %s=%q names no address pool; use one of %v", AddressPoolAnnotation, req.poolName, a.poolNames()))
	}
	if !ps.Allows(req.target) {
		return backends.NewUserError(ReasonAddressPoolNotAllowed, fmt.Errorf("annotation %s=%q: the pool %s, not Service %s", AddressPoolAnnotation, req.poolName, ps.Allocation(), req.name))
	}
	return nil
}

// poolNames lists the pools in config order.
func (a *allocator) poolNames() []string { return a.names }

// choose picks the Service's address of family f: the requested one, else
// the one it holds, else one shared with Services of the same key, else a
// fresh one.
func (a *allocator) choose(req *request, f corev1.IPFamily) (netip.Addr, error) {
	if ip, ok := req.requested[f]; ok {
		return ip, a.checkRequested(req, ip)
	}
	if ip, ok := a.keep(req, f); ok {
		return ip, nil
	}
	if ip, ok := a.joinShared(req, f); ok {
		return ip, nil
	}
	return a.fresh(req, f)
}

// eligible reports whether the Service may hold an address of ps without
// having requested it.
func (a *allocator) eligible(req *request, ps *poolState) bool {
	if req.poolName != "" {
		return ps.Name == req.poolName
	}
	return ps.Allows(req.target)
}

func (a *allocator) checkRequested(req *request, ip netip.Addr) error {
	ps := a.poolCovering(ip)
	switch {
	case ps == nil:
		return backends.NewUserError(ReasonIPNotInPool, fmt.Errorf("requested address %s is in none of the address pools %v; request an address from a pool, or remove the request", ip, a.poolNames()))
	case !ps.usable(ip):
		return backends.NewUserError(ReasonIPNotInPool, fmt.Errorf("requested address %s is the network or broadcast address of a CIDR of pool %q, which is never handed out; request another address", ip, ps.Name))
	case req.poolName != "" && ps.Name != req.poolName:
		return backends.NewUserError(ReasonIPNotInPool, fmt.Errorf("requested address %s is in pool %q, but annotation %s names pool %q; make them agree", ip, ps.Name, AddressPoolAnnotation, req.poolName))
	case !ps.Allows(req.target):
		return backends.NewUserError(ReasonAddressPoolNotAllowed, fmt.Errorf("requested address %s is in pool %q, which %s, not Service %s", ip, ps.Name, ps.Allocation(), req.name))
	}
	if err := a.compatible(req, ip); err != nil {
		return backends.NewUserError(ReasonIPInUse, fmt.Errorf("requested address %s: %w", ip, err))
	}
	return nil
}

// keep returns the address of family f the Service holds, if it may keep it.
func (a *allocator) keep(req *request, f corev1.IPFamily) (netip.Addr, bool) {
	h := a.services[req.name]
	if h == nil {
		return netip.Addr{}, false
	}
	for _, ip := range h.all() {
		l := a.leases[ip]
		if familyOf(ip) == f && l.counted && a.eligible(req, l.pool) && a.compatible(req, ip) == nil {
			return ip, true
		}
	}
	return netip.Addr{}, false
}

// joinShared returns the lowest address of family f held by Services with
// the request's sharing key that the Service may share, or resting after
// its last such holder left.
func (a *allocator) joinShared(req *request, f corev1.IPFamily) (netip.Addr, bool) {
	if req.share.key == "" {
		return netip.Addr{}, false
	}
	var best netip.Addr
	better := func(ip netip.Addr) {
		if !best.IsValid() || ip.Less(best) {
			best = ip
		}
	}
	for ip := range a.shared[req.share.key] {
		l := a.leases[ip]
		if familyOf(ip) != f || !l.counted || !a.eligible(req, l.pool) || a.compatible(req, ip) != nil {
			continue
		}
		better(ip)
	}
	for ip := range a.restShared[req.share.key] {
		if ps := a.poolCovering(ip); familyOf(ip) == f && a.resting(ip, ps) && a.eligible(req, ps) {
			better(ip)
		}
	}
	return best, best.IsValid()
}

// resting reports whether ip, an address of pool ps, rests (is marked
// resting: mark ends that when ip is taken).
func (a *allocator) resting(ip netip.Addr, ps *poolState) bool {
	if ps == nil {
		return false
	}
	rs := ps.fams[familyIndex(familyOf(ip))].find(ip)
	return rs != nil && rs.rest[ip]
}

// restShare records that resting ip was last held with sharing key key.
func (a *allocator) restShare(ip netip.Addr, key string) {
	m := a.restShared[key]
	if m == nil {
		m = map[netip.Addr]bool{}
		a.restShared[key] = m
	}
	m[ip] = true
	a.restKey[ip] = key
}

// unrestShare forgets ip's sharing key, now that it is leased again.
func (a *allocator) unrestShare(ip netip.Addr) {
	key, ok := a.restKey[ip]
	if !ok {
		return
	}
	delete(a.restKey, ip)
	delete(a.restShared[key], ip)
	if len(a.restShared[key]) == 0 {
		delete(a.restShared, key)
	}
}

// fresh allocates an unleased address of family f from the first eligible
// pool with one free; a resting address only when no eligible pool has
// another.
func (a *allocator) fresh(req *request, f corev1.IPFamily) (netip.Addr, error) {
	var tried []string
	for _, wake := range []bool{false, true} {
		tried = tried[:0]
		for _, ps := range a.pools {
			if !a.eligible(req, ps) || !ps.hasFamily(f) || (req.poolName == "" && !ps.AutoAssign) {
				continue
			}
			fs := &ps.fams[familyIndex(f)]
			if ip, ok := fs.pick(a.taken, &a.probes, wake); ok {
				return ip, nil
			}
			tried = append(tried, fmt.Sprintf("%s (%d of %d in use)", ps.Name, fs.used, fs.size))
		}
	}
	if len(tried) == 0 {
		return netip.Addr{}, backends.NewUserError(ReasonIPFamilyUnavailable, fmt.Errorf("%w: no %s address pool with autoAssign serves namespace %q%s; add one, request an address, or change the Service's ipFamilies/ipFamilyPolicy", errNoPool, f, req.namespace, a.poolHint(req)))
	}
	return netip.Addr{}, backends.NewUserError(ReasonAddressPoolExhausted, fmt.Errorf("no free %s address: pools %s are exhausted; add addresses to a pool or delete unused Services", f, strings.Join(tried, ", ")))
}

func (a *allocator) poolHint(req *request) string {
	if req.poolName != "" {
		return fmt.Sprintf(" in pool %q named by annotation %s", req.poolName, AddressPoolAnnotation)
	}
	return ""
}

// taken reports whether ip is leased or reserved: automatic allocation
// skips it.
func (a *allocator) taken(ip netip.Addr) bool {
	_, leased := a.leases[ip]
	return leased || len(a.reserved[ip]) > 0
}

// mark sets ip's bit in its pool's bitmap exactly while it is taken (or
// rests). released is true when ip's lease was just dropped: freed, an
// address that was leased rests if it lies ahead of its range's cursor,
// also when a reservation kept it taken for a while after its lease or
// while it rested (recent).
func (a *allocator) mark(ip netip.Addr, ps *poolState, released bool) {
	if ps == nil || !ps.usable(ip) {
		return
	}
	want := a.taken(ip)
	if want == a.marked[ip] {
		if want && released {
			a.recent[ip] = true
		}
		return
	}
	fs := &ps.fams[familyIndex(familyOf(ip))]
	if want {
		if a.resting(ip, ps) {
			a.recent[ip] = true
		}
		fs.mark(ip, true, false)
		a.marked[ip] = true
		return
	}
	fs.mark(ip, false, released || a.recent[ip])
	delete(a.recent, ip)
	delete(a.marked, ip)
}

// poolCovering returns the pool whose entries include ip, or nil.
func (a *allocator) poolCovering(ip netip.Addr) *poolState {
	for _, ps := range a.pools {
		if ps.covers(ip) {
			return ps
		}
	}
	return nil
}

// compatible checks that the Service may hold ip alongside its other
// holders, naming the first one that forbids it. A holder whose status
// still shows ip though it was assigned another address does not stop a
// Service whose own status shows ip from keeping it: nothing shows ip that
// did not already.
func (a *allocator) compatible(req *request, ip netip.Addr) error {
	l := a.leases[ip]
	if l == nil {
		return nil
	}
	me := a.services[req.name]
	shown := me != nil && slices.Contains(me.status, ip)
	for _, name := range sortedHolders(l) {
		o := l.holders[name]
		if name == req.name || (shown && o.leaving(ip)) {
			continue
		}
		if err := canShare(req.share, o.share); err != nil {
			return fmt.Errorf("in use by Service %s: %w", name, err)
		}
	}
	return nil
}

func sortedHolders(l *lease) []string {
	names := make([]string, 0, len(l.holders))
	for n := range l.holders {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// canShare reports why two Services may not share an address, or nil.
func canShare(mine, theirs shareInfo) error {
	switch {
	case mine.key == "" || theirs.key == "":
		return fmt.Errorf("addresses are shared only between Services with the same %s annotation", annotation.AllowSharedIP)
	case mine.key != theirs.key:
		return fmt.Errorf("its %s key %q differs from this Service's %q", annotation.AllowSharedIP, theirs.key, mine.key)
	case (mine.local || theirs.local) && (!mine.local || !theirs.local || mine.selector != theirs.selector):
		return fmt.Errorf("a Service with externalTrafficPolicy Local shares an address only with Services of the same policy and selector")
	}
	for _, p := range mine.ports {
		if slices.Contains(theirs.ports, p) {
			return fmt.Errorf("both use port %s", p)
		}
	}
	return nil
}

// commit makes want the Service's assigned addresses.
func (a *allocator) commit(req *request, want []netip.Addr) {
	h := a.services[req.name]
	if h == nil {
		h = &holding{name: req.name}
	}
	a.change(h, func() {
		h.uid, h.share = req.uid, req.share
		h.addrs = slices.Clone(want)
	})
}

// change applies mutate to h and takes or releases the leases of the
// addresses it starts or stops holding. A holding left with no address is
// forgotten.
func (a *allocator) change(h *holding, mutate func()) {
	a.unindex(h)
	before := h.all()
	mutate()
	after := h.all()
	for _, ip := range after {
		if !slices.Contains(before, ip) {
			a.hold(h, ip, a.poolCovering(ip))
		}
	}
	for _, ip := range before {
		if !slices.Contains(after, ip) {
			a.drop(h, ip)
		}
	}
	if len(after) == 0 {
		delete(a.services, h.name)
		return
	}
	a.services[h.name] = h
	a.index(h)
}

// hold adds h to ip's holders, leasing ip if it was free. ps is nil for an
// address no pool covers any more (its pool was removed by a reload).
func (a *allocator) hold(h *holding, ip netip.Addr, ps *poolState) {
	l := a.leases[ip]
	if l == nil {
		l = &lease{pool: ps, counted: ps != nil && ps.usable(ip), holders: map[string]*holding{}}
		a.leases[ip] = l
		a.changes++
		a.unrestShare(ip)
		delete(a.recent, ip)
		a.mark(ip, ps, false)
	}
	l.holders[h.name] = h
}

// drop removes h from ip's holders, freeing ip when it was the last.
func (a *allocator) drop(h *holding, ip netip.Addr) {
	l := a.leases[ip]
	delete(l.holders, h.name)
	if len(l.holders) > 0 {
		return
	}
	delete(a.leases, ip)
	a.changes++
	a.mark(ip, l.pool, true)
	if h.share.key != "" && a.resting(ip, l.pool) {
		a.restShare(ip, h.share.key)
	}
}

// unreserve drops the requests of the deleted Service object uid, unless
// they came from a newer object of the same name.
func (a *allocator) unreserve(name string, uid types.UID) {
	if got := a.requester[name]; got == "" || uid == "" || got == uid {
		a.reserve(name, uid, nil)
	}
}

// reserve records the pool addresses the Service object uid requests; it
// reports whether they changed.
func (a *allocator) reserve(name string, uid types.UID, ips []netip.Addr) bool {
	var want []netip.Addr
	for _, ip := range ips {
		if ps := a.poolCovering(ip); ps != nil && ps.usable(ip) && !slices.Contains(want, ip) {
			want = append(want, ip)
		}
	}
	old := a.requests[name]
	if slices.Equal(old, want) {
		return false
	}
	if len(want) == 0 {
		delete(a.requests, name)
		delete(a.requester, name)
	} else {
		a.requests[name], a.requester[name] = want, uid
	}
	for _, ip := range want {
		if !slices.Contains(old, ip) {
			if a.reserved[ip] == nil {
				a.reserved[ip] = map[string]bool{}
			}
			a.reserved[ip][name] = true
			a.mark(ip, a.poolCovering(ip), false)
		}
	}
	for _, ip := range old {
		if !slices.Contains(want, ip) {
			delete(a.reserved[ip], name)
			if len(a.reserved[ip]) == 0 {
				delete(a.reserved, ip)
			}
			a.mark(ip, a.poolCovering(ip), false)
		}
	}
	return true
}

// releaseAssigned frees the addresses assigned to the Service that its
// status does not show, but those in keep, which stay assigned. It
// reports whether it freed any.
func (a *allocator) releaseAssigned(name string, keep ...netip.Addr) bool {
	h := a.services[name]
	if h == nil || len(h.addrs) == 0 {
		return false
	}
	kept := slices.DeleteFunc(slices.Clone(h.addrs), func(ip netip.Addr) bool { return !slices.Contains(keep, ip) })
	if len(kept) == len(h.addrs) {
		return false
	}
	before := len(a.leases)
	a.change(h, func() { h.addrs = kept })
	return len(a.leases) < before
}

// releaseAll frees everything the Service holds, assigned or shown in its
// status. It reports whether the Service held anything.
func (a *allocator) releaseAll(name string) bool {
	h := a.services[name]
	if h == nil {
		return false
	}
	a.change(h, func() { h.addrs, h.status = nil, nil })
	return true
}

// index records h's addresses under its sharing key.
func (a *allocator) index(h *holding) {
	if h.share.key == "" {
		return
	}
	m := a.shared[h.share.key]
	if m == nil {
		m = map[netip.Addr]bool{}
		a.shared[h.share.key] = m
	}
	for _, ip := range h.all() {
		m[ip] = true
	}
}

// unindex removes h's addresses from its key's index unless another holder
// with the key keeps them there.
func (a *allocator) unindex(h *holding) {
	m := a.shared[h.share.key]
	if m == nil {
		return
	}
	for _, ip := range h.all() {
		if !a.otherHolderWithKey(ip, h) {
			delete(m, ip)
		}
	}
	if len(m) == 0 {
		delete(a.shared, h.share.key)
	}
}

func (a *allocator) otherHolderWithKey(ip netip.Addr, h *holding) bool {
	l := a.leases[ip]
	if l == nil {
		return false
	}
	for name, o := range l.holders {
		if name != h.name && o.share.key == h.share.key {
			return true
		}
	}
	return false
}

// observe records the pool addresses a Service's status shows as held by
// it, without any check: what is in a status is taken. Addresses the status
// no longer shows are released unless the backend assigned them. With
// ours (the status is what this backend assigned: recordedAlone), an address outside every pool is recorded too, as a
// running allocator keeps one a reload left outside (withPools): after a
// restart the Service's load balancer still exists, its deletion or move
// releases it, and its next Ensure replaces it. It reports whether
// anything changed. share is kept from the last assignment when there was
// one.
func (a *allocator) observe(name string, uid types.UID, ips []netip.Addr, share shareInfo, ours bool) bool {
	var shown []netip.Addr
	for _, ip := range ips {
		if (ours || a.poolCovering(ip) != nil) && !slices.Contains(shown, ip) {
			shown = append(shown, ip)
		}
	}
	h := a.services[name]
	if h == nil {
		if len(shown) == 0 {
			return false
		}
		h = &holding{name: name, uid: uid, share: share}
	} else if slices.Equal(h.status, shown) {
		return false
	}
	a.change(h, func() {
		if len(h.addrs) == 0 {
			h.uid, h.share = uid, share
		}
		h.status = shown
	})
	return true
}
