package chaos

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/multicloud-ccm/multicloud-ccm/internal/awsfake"
	"github.com/multicloud-ccm/multicloud-ccm/test/e2e/framework"
)

// Violation is one broken invariant: its class (what kind of rule) and
// what was seen.
type Violation struct {
	Class string `json:"class"`
	What  string `json:"what"`
}

func (v Violation) String() string { return v.Class + ": " + v.What }

// The invariants' classes.
const (
	vDouble   = "address-held-twice"
	vNode     = "node-deleted-with-instance"
	vStranger = "stranger-touched"
	vDrain    = "drain-cut-short"
	vCrash    = "replica-crashed"
	vLeak     = "load-balancer-nobody-wants"
	vConverge = "not-converged"
	vWarning  = "warning-missing"
	vMetric   = "metric-disagrees"
	vPanic    = "panic-in-log"
	vOldKey   = "old-credential-used"
	vRotation = "rotation-disturbed"
	vGrowth   = "goroutine-or-memory-growth"
	vDeposed  = "deposed-leader-running"
	vOrphan   = "removed-class-touched"
	// vShareHeld: at quiescence, an address in the status of two Services
	// that may not share it (a request refused, a key lost, a port
	// clashing): share.go.
	vShareHeld = "refused-share-held"
	// vShareLost: at quiescence, a Service allowed to share an address
	// others show does not show it.
	vShareLost = "shared-address-lost"
)

func violation(class, format string, args ...any) Violation {
	return Violation{Class: class, What: fmt.Sprintf(format, args...)}
}

// safety checks what must hold at every moment: no address held by two
// Services, no Node deleted while its instance exists, strangers' status
// untouched, no drain cut short, no replica crashed.
func (w *World) safety(ctx context.Context, m *model, s *snapshot) []Violation {
	var out []Violation
	if err := w.replicasAlive(ctx); err != nil {
		out = append(out, violation(vCrash, "%v", err))
	}
	out = append(out, doubles(m, s)...)
	out = append(out, m.refusedHeld(s, w.inFailover() || time.Since(w.lastWatch) < failoverWindow)...)
	m.seeShares(s, m.last)
	if w.os != nil {
		out = append(out, w.os.strangersTouched(ctx)...)
	}
	out = append(out, w.oldKeyUsed()...)
	for name, cloud := range m.nodes {
		if s.nodes[name] == nil && w.instanceExists(cloud, name) {
			out = append(out, violation(vNode, "Node %s (%s) is gone, its instance still exists", name, cloud))
			delete(m.nodes, name)
		}
	}
	for name, st := range m.strangers {
		svc := s.svcs[name]
		if !st.protected || svc == nil || svc.DeletionTimestamp != nil {
			continue
		}
		if got := ingress(svc); !slices.Equal(got, []string{st.addr}) {
			out = append(out, violation(vStranger, "%s: another controller's status %s (no defaultBackend, no annotation, no class) became %v", name, st.addr, got))
			st.protected = false
		}
	}
	m.drains = slices.DeleteFunc(m.drains, func(e drainExpect) bool {
		svc := s.svcs[e.svc]
		switch {
		case svc == nil || svc.UID != e.uid || svc.DeletionTimestamp != nil || !s.at.Before(e.notBefore):
			return true
		case !s.holds(m.cfg, e.svc, e.backend):
			out = append(out, violation(vDrain, "%s: its load balancer in %s is gone %s before the end of the drain the move of step %d began (status %v, annotations %v)",
				e.svc, e.backend, e.notBefore.Add(drainSlack).Sub(s.at).Round(100_000_000), e.step+1, ingress(svc), routerAnnotations(svc)))
			return true
		}
		return false
	})
	return out
}

// doubles reports addresses (or NLB names) shown by two Services, but an
// address shown by Services that carried a common allow-shared-ip key
// (mayHaveShared): whether they may share it now is judged at quiescence
// (sharesSettled), once the product caught up with their changes.
func doubles(m *model, s *snapshot) []Violation {
	holders := map[string][]string{}
	for name, svc := range s.svcs {
		for _, a := range ingress(svc) {
			if a != "" {
				holders[a] = append(holders[a], name)
			}
		}
	}
	var out []Violation
	for a, names := range holders {
		// Octavia's noop network driver gives every load balancer the
		// same VIP: the judge cannot judge the uniqueness of os's. A
		// Service being deleted keeps its last status until its finalizer
		// goes, while its load balancer is already PENDING_DELETE (which
		// s.oslbs leaves out): its noop VIP is os's too.
		osVIP := func(name string) bool {
			if a == osNoopVIP && s.svcs[name].DeletionTimestamp != nil {
				return true
			}
			return slices.ContainsFunc(s.oslbs[name], func(lb osLB) bool { return lb.VIP == a })
		}
		if len(names) > 1 && !slices.ContainsFunc(names, func(n string) bool { return !osVIP(n) }) {
			continue
		}
		if len(names) > 1 && !m.sharers(names) {
			sort.Strings(names)
			out = append(out, violation(vDouble, "%s is in the status of %v", a, names))
		}
	}
	return out
}

func ingress(svc *corev1.Service) []string {
	var out []string
	for _, in := range svc.Status.LoadBalancer.Ingress {
		out = append(out, in.IP+in.Hostname)
	}
	return out
}

// routerAnnotations are the annotations the router writes, for messages.
func routerAnnotations(svc *corev1.Service) map[string]string {
	out := map[string]string{}
	for k, v := range svc.Annotations {
		if strings.HasPrefix(k, "multicloud-ccm.io/") || strings.HasPrefix(k, "external-dns") {
			out[k] = v
		}
	}
	return out
}

// settled checks what must hold once the judge stopped and every drain
// ended: every Service as its shape and the configuration say, in every
// backend it names and nowhere else; strangers untouched; the metric
// agreeing with the statuses.
func (w *World) settled(ctx context.Context, m *model, s *snapshot) []Violation {
	var out []Violation
	for name, shape := range m.svcs {
		if svc := s.svcs[name]; svc != nil {
			out = append(out, w.serviceSettled(ctx, m, name, shape, svc, s)...)
		}
	}
	out = append(out, w.sharesSettled(ctx, m, s)...)
	out = append(out, leftovers(m, s)...)
	for name, st := range m.strangers {
		if svc := s.svcs[name]; st.protected && svc != nil && svc.Annotations[annRecord] != "" {
			out = append(out, violation(vStranger, "%s: another controller's Service got our record %q", name, svc.Annotations[annRecord]))
		}
	}
	out = append(out, orphansKept(m, s)...)
	for _, r := range w.deposed() {
		out = append(out, violation(vDeposed, "%s acquired the lease once, does not hold it, and still runs (its last lines:\n%s)", r.Name(), r.LogTail(5)))
	}
	if w.rot != nil {
		out = append(out, violation(vConverge, "the leader has not applied the %s credential %s rotated at step %d (%s ago)", w.rot.cloud, w.rotated(), w.rot.step+1, time.Since(w.rot.at).Round(time.Second)))
	}
	return append(out, w.metricSettled(ctx, m, s)...)
}

// leftovers: no load balancer tagged for a Service no live Service wants
// (one the judge deleted, or whose apply met its deletion and so never
// came back), and no Service the judge deleted still there (stuck
// Terminating on a finalizer the product did not remove), but one whose
// record names a backend a reload removed (it waits for the backend).
func leftovers(m *model, s *snapshot) []Violation {
	var out []Violation
	wanted := func(name string) bool {
		_, ours := m.svcs[name]
		if (ours && s.svcs[name] != nil) || m.abandoned[name] {
			return true
		}
		st := m.strangers[name]
		return st != nil && !st.protected && s.svcs[name] != nil // adopted by a default since: not judged
	}
	for _, name := range slices.Sorted(maps.Keys(s.nlbs)) {
		if lbs := s.nlbs[name]; !wanted(name) {
			out = append(out, violation(vLeak, "%d NLBs tagged for %s, which no live Service wants", len(lbs), name))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(s.oslbs)) {
		if lbs := s.oslbs[name]; !wanted(name) {
			out = append(out, violation(vLeak, "%d Octavia load balancers tagged for %s (%v), which no live Service wants", len(lbs), name, lbs))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(s.svcs)) {
		_, ours := m.svcs[name]
		svc := s.svcs[name]
		// docs/routing.md: a record naming a removed backend keeps the
		// finalizer until the backend comes back.
		if slices.ContainsFunc(splitList(svc.Annotations[annRecord]), func(b string) bool { return !m.cfg.configured(b) }) {
			continue
		}
		if !ours && m.strangers[name] == nil {
			out = append(out, violation(vConverge, "%s was deleted by the judge and is still there (deleting since %v, finalizers %v, status %v)", name, svc.DeletionTimestamp, svc.Finalizers, ingress(svc)))
		}
	}
	return out
}

// serviceSettled checks one of the judge's Services.
func (w *World) serviceSettled(ctx context.Context, m *model, name string, shape Shape, svc *corev1.Service, s *snapshot) []Violation {
	cfg, abandoned := m.cfg, m.abandoned[name]
	record := splitList(svc.Annotations[annRecord])
	for _, b := range record {
		if !cfg.configured(b) {
			return append(w.unknownBackend(ctx, name, b), stillServed(m, name, shape, svc, s)...)
		}
	}
	if svc.DeletionTimestamp != nil {
		return []Violation{violation(vConverge, "%s is still being deleted (record %v, finalizers %v)", name, record, svc.Finalizers)}
	}
	want, known := cfg.wanted(shape)
	if !known || requestedElsewhere(m, name, shape, want, s) {
		return nil
	}
	var out []Violation
	addrs := ingress(svc)
	used := make([]bool, len(addrs))
	for _, b := range want {
		n := 0
		for i, a := range addrs {
			if gaveIt(cfg, b, a, name, s) {
				used[i] = true
				n++
				if shape.IPs != "" && isMetal(b) && a != shape.IPs {
					out = append(out, violation(vConverge, "%s: requested %s, holds %s", name, shape.IPs, a))
				}
			}
		}
		if n != 1 {
			out = append(out, violation(vConverge, "%s (%s) wants %v: %d addresses from %s in its status %v (record %v)", name, shape, want, n, b, addrs, record))
		}
	}
	for i, a := range addrs {
		if !used[i] {
			out = append(out, w.extra(cfg, name, shape, want, a))
		}
	}
	nlbs := len(s.nlbs[name])
	if abandoned {
		nlbs = 0
		for _, lb := range s.nlbs[name] {
			if slices.Contains(addrs, lb.DNSName) {
				nlbs++
			}
		}
		if slices.Contains(want, "aws") && nlbs == 0 {
			nlbs = len(s.nlbs[name]) // one not yet in the status
		}
	}
	if wantNLB := slices.Contains(want, "aws"); (nlbs != 1 && wantNLB) || (nlbs != 0 && !wantNLB) {
		out = append(out, violation(vLeak, "%s (%s) wants %v: %d NLBs", name, shape, want, nlbs))
	}
	if s.osErr != nil {
		out = append(out, violation(vConverge, "%s: the judge cannot list Octavia's load balancers: %v", name, s.osErr))
	} else if v := osSettled(name, shape, want, addrs, s.oslbs[name], abandoned); v != nil {
		out = append(out, *v)
	}
	if !sameSet(record, want) {
		out = append(out, violation(vConverge, "%s (%s) wants %v: record %v", name, shape, want, record))
	}
	if v := svc.Annotations[annDraining] + svc.Annotations[annDNSMark]; v != "" {
		out = append(out, violation(vConverge, "%s: draining %q, DNS target mark %q after every drain ended", name, svc.Annotations[annDraining], svc.Annotations[annDNSMark]))
	}
	if len(want) > 0 && !framework.HasCleanupFinalizer(svc) {
		out = append(out, violation(vConverge, "%s wants %v and has no cleanup finalizer %s (finalizers %v)", name, want, framework.CleanupFinalizer(svc), svc.Finalizers))
	}
	return append(out, conditionsSettled(name, want, svc)...)
}

// conditionsSettled: a Service served carries LoadBalancerReady True and
// one serving condition per backend it wants, nothing else of ours; one
// nobody serves carries none of ours (docs/routing.md, "Service
// conditions").
func conditionsSettled(name string, want []string, svc *corev1.Service) []Violation {
	var ready string
	var serving, other []string
	for _, c := range svc.Status.Conditions {
		switch {
		case c.Type == condReady:
			ready = string(c.Status)
		case strings.HasPrefix(c.Type, condBackend) && c.Status == metav1.ConditionTrue:
			serving = append(serving, strings.TrimPrefix(c.Type, condBackend))
		case strings.HasPrefix(c.Type, condBackend):
			other = append(other, fmt.Sprintf("%s=%s/%s", c.Type, c.Status, c.Reason))
		}
	}
	switch {
	case len(want) == 0 && (ready != "" || len(serving)+len(other) > 0):
		return []Violation{violation(vConverge, "%s is served by nobody and still has our conditions %s=%s, serving %v, %v", name, condReady, ready, serving, other)}
	case len(want) > 0 && (ready != string(metav1.ConditionTrue) || !sameSet(serving, want) || len(other) > 0):
		return []Violation{violation(vConverge, "%s wants %v: conditions %s=%q, serving %v, %v", name, want, condReady, ready, serving, other)}
	}
	return nil
}

// stillServed: a record naming a backend a reload removed blocks nothing
// else (docs/routing.md, "the write-ahead record"): every backend the
// Service wants under the configuration in force gives it one address in
// its status (one NLB, one Octavia load balancer); the record still names
// them; it keeps its cleanup finalizer. What the removed backend left (its
// address, its drain, its condition) is not judged.
func stillServed(m *model, name string, shape Shape, svc *corev1.Service, s *snapshot) []Violation {
	cfg := m.cfg
	want, known := cfg.wanted(shape)
	if !known || svc.DeletionTimestamp != nil || requestedElsewhere(m, name, shape, want, s) {
		return nil
	}
	var out []Violation
	addrs, record := ingress(svc), splitList(svc.Annotations[annRecord])
	for _, b := range want {
		n := 0
		for _, a := range addrs {
			if gaveIt(cfg, b, a, name, s) {
				n++
			}
		}
		if n != 1 || !slices.Contains(record, b) {
			out = append(out, violation(vConverge, "%s (%s) wants %v, its record names a removed backend (%v): %d addresses from %s in its status %v", name, shape, want, record, n, b, addrs))
		}
	}
	if slices.Contains(want, "aws") && len(s.nlbs[name]) != 1 {
		out = append(out, violation(vLeak, "%s (%s) wants %v: %d NLBs", name, shape, want, len(s.nlbs[name])))
	}
	if len(want) > 0 && !framework.HasCleanupFinalizer(svc) {
		out = append(out, violation(vConverge, "%s wants %v and has no cleanup finalizer %s (finalizers %v)", name, want, framework.CleanupFinalizer(svc), svc.Finalizers))
	}
	return out
}

// requestedElsewhere: the Service requests an address another Service
// shows, one it may not share it with: it cannot have it, and the judge
// does not judge it here (sharesSettled does). One it may share with
// does not excuse it.
func requestedElsewhere(m *model, name string, shape Shape, want []string, s *snapshot) bool {
	if shape.IPs == "" || !slices.Equal(want, []string{"metal"}) {
		return false
	}
	for _, other := range showing(s, shape.IPs, name) {
		if whyNotShare(shape, m.shapeOf(other, s)) != "" {
			return true
		}
	}
	return false
}

// gaveIt reports whether backend b gave the status entry a: an address of
// its pool, or an NLB's name.
func gaveIt(cfg Config, b, a, name string, s *snapshot) bool {
	switch b {
	case "aws":
		return slices.ContainsFunc(s.nlbs[name], func(lb awsfake.LoadBalancerView) bool { return lb.DNSName == a })
	case "os":
		return slices.ContainsFunc(s.oslbs[name], func(lb osLB) bool { return lb.VIP == a && lb.Status == "ACTIVE" })
	}
	ip, err := netip.ParseAddr(a)
	return err == nil && cfg.metalPool(b).Contains(ip)
}

// extra classes a status entry no wanted backend gave: an address of a
// pool (or an NLB) the Service does not want any more is a leak, anything
// else (an address outside every pool) is not converged.
func (w *World) extra(cfg Config, name string, shape Shape, want []string, a string) Violation {
	ip, err := netip.ParseAddr(a)
	switch {
	case err != nil:
		return violation(vLeak, "%s (%s) wants %v, its status still shows %s", name, shape, want, a)
	case metalBig.Contains(ip) && slices.Contains(want, "metal"), metal2Big.Contains(ip) && slices.Contains(want, "metal2"):
		return violation(vConverge, "%s (%s) wants %v: %s is outside its backend's pool (%s)", name, shape, want, a, cfg)
	case metalBig.Contains(ip) || metal2Big.Contains(ip) || reserved.Contains(ip):
		return violation(vLeak, "%s (%s) wants %v, its status still shows %s", name, shape, want, a)
	}
	return violation(vConverge, "%s (%s) wants %v, its status shows %s", name, shape, want, a)
}

// unknownBackend: the Service's record names a backend the configuration
// lost; docs/routing.md promises a Warning UnknownLoadBalancerBackend.
func (w *World) unknownBackend(ctx context.Context, name, b string) []Violation {
	evs, err := framework.Events(ctx, w.c, "Service", serviceNS, name)
	if err != nil || framework.FindEvent(evs, corev1.EventTypeWarning, reasonUnknown) == nil {
		return []Violation{violation(vWarning, "%s's record names %s, no longer configured, and it has no Warning %s (events:\n%s)", name, b, reasonUnknown, framework.DescribeEvents(evs))}
	}
	return nil
}

// metricSettled compares the leader's addresses_in_use with the statuses:
// equal, but for what orphanHeld allows above them.
func (w *World) metricSettled(ctx context.Context, m *model, s *snapshot) []Violation {
	cfg := m.cfg
	l := w.leader()
	if l == nil {
		return []Violation{violation(vConverge, "no replica leads")}
	}
	var out []Violation
	pools := map[string]string{"metal": "public"}
	if cfg.Metal2 {
		pools["metal2"] = "edge"
	}
	for b, pool := range pools {
		name := fmt.Sprintf(`multicloud_ccm_baremetal_addresses_in_use_total{backend=%q,family="IPv4",pool=%q}`, b, pool)
		got, err := metric(ctx, l, name)
		if err != nil {
			out = append(out, violation(vConverge, "%v", err))
		} else if v := inUseAgrees(name, l.Name(), got, inUse(cfg.metalPool(b), s), orphanHeld(m, b, s)); v != nil {
			out = append(out, *v)
		}
	}
	return out
}

// inUse counts the usable addresses of pool that are taken as bare
// metal's addresses_in_use counts them (pkg/backends/baremetal: an
// address is counted once, however many hold it: shown in a status,
// shared by several, or requested by a LoadBalancer Service through
// load-balancer-ips, whichever backend serves it): the addresses of pool
// the statuses show or the LoadBalancer Services request, each once. The
// network and broadcast addresses are never handed out, nor counted.
func inUse(pool netip.Prefix, s *snapshot) int {
	taken := map[netip.Addr]bool{}
	usable := func(a netip.Addr) bool {
		return pool.Contains(a) && a != pool.Masked().Addr() && a != lastAddr(pool)
	}
	for _, svc := range s.svcs {
		for _, a := range ips(svc) {
			if usable(a) {
				taken[a] = true
			}
		}
		if svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
			continue
		}
		for _, f := range strings.Split(svc.Annotations[annIPs], ",") {
			if a, err := netip.ParseAddr(strings.TrimSpace(f)); err == nil && usable(a) {
				taken[a] = true
			}
		}
	}
	return len(taken)
}

// lastAddr is the highest address of an IPv4 prefix (its broadcast).
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().As4()
	binary.BigEndian.PutUint32(b[:], binary.BigEndian.Uint32(b[:])|(uint32(1)<<(32-p.Bits())-1))
	return netip.AddrFrom4(b)
}

// inUseAgrees judges the leader's addresses_in_use of one pool, got,
// against the addresses taken in it (inUse: shown or requested, each
// once) and the orphans that may hold one more each (orphanHeld).
func inUseAgrees(name, leader string, got, shown int, held []string) *Violation {
	if got >= shown && got <= shown+len(held) {
		return nil
	}
	also := ""
	if len(held) > 0 {
		also = fmt.Sprintf(" (and up to %d more for %v, whose class a reload removed)", len(held), held)
	}
	v := violation(vMetric, "%s = %d on the leader %s, the statuses show or the Services request %d%s", name, got, leader, shown, also)
	return &v
}

// orphanHeld lists the Services whose class a reload removed while they
// were served (orphans, still the same Service and not being deleted)
// whose record names the bare-metal backend b and whose status shows none
// of b's pool: the allocator may hold one address for each that no status
// shows. The reload can cut short the sync that assigned it (an Ensure
// that made the load balancer, then failed or retried on another backend:
// chaos seed 417057956, where metal replaced an address a reload had left
// outside the pool, and Octavia's delete of the backend the Service left
// was still pending); the controller, which no longer serves the class,
// writes nothing on the Service since, and leaves its load balancers alone
// (docs/routing.md), that address included: it is assigned, and
// addresses_in_use counts it (docs/baremetal.md).
func orphanHeld(m *model, b string, s *snapshot) []string {
	var out []string
	for name, o := range m.orphans {
		svc := s.svcs[name]
		if svc == nil || svc.UID != o.uid || svc.DeletionTimestamp != nil || !slices.Contains(splitList(svc.Annotations[annRecord]), b) {
			continue
		}
		if !slices.ContainsFunc(ips(svc), m.cfg.metalPool(b).Contains) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// metric reads one sample (0 when absent) from the CCM's /metrics.
func metric(ctx context.Context, c *framework.CCM, name string) (int, error) {
	got, err := metrics(ctx, c, name)
	return got[name], err
}

// metrics reads samples (0 when absent) from the CCM's /metrics, by the
// name with its labels as /metrics writes them.
func metrics(ctx context.Context, c *framework.CCM, names ...string) (map[string]int, error) {
	code, body, err := c.Get(ctx, "/metrics")
	if err != nil || code != 200 {
		return nil, fmt.Errorf("%s /metrics: %d %w", c.Name(), code, err)
	}
	out := map[string]int{}
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		name, v, ok := strings.Cut(sc.Text(), " ")
		if !ok || !slices.Contains(names, name) {
			continue
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return nil, fmt.Errorf("%s /metrics: %s: %w", c.Name(), name, err)
		}
		out[name] = int(f)
	}
	return out, sc.Err()
}

// panicLine matches what a Go panic, a recovered one (client-go's
// HandleCrash) or a fatal runtime error writes.
var panicLine = regexp.MustCompile(`^panic: |Observed a panic|^fatal error: |^goroutine \d+ \[running\]`)

// panics scans every CCM log for a panic.
func (w *World) panics() []Violation {
	var out []Violation
	for _, path := range w.logs() {
		data, err := os.ReadFile(path) //nolint:gosec // The run's own logs.
		if err != nil {
			continue
		}
		for i, line := range strings.Split(string(data), "\n") {
			if panicLine.MatchString(line) {
				out = append(out, violation(vPanic, "%s:%d: %s", path, i+1, line))
				break
			}
		}
	}
	return out
}

func splitList(v string) []string {
	var out []string
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// orphansKept: a Service whose class a reload removed keeps every entry
// its status had then (docs/routing.md: nothing is deleted by a
// configuration change), as long as the class stays removed and the
// Service keeps it.
func orphansKept(m *model, s *snapshot) []Violation {
	var out []Violation
	for name, o := range m.orphans {
		svc := s.svcs[name]
		if svc == nil || svc.UID != o.uid || svc.DeletionTimestamp != nil {
			continue
		}
		now := ingress(svc)
		for _, a := range o.ingress {
			if !slices.Contains(now, a) {
				out = append(out, violation(vOrphan, "%s: the reload of step %d removed its class %s; its status then %v, now %v (a class removed leaves its Services' load balancers alone)",
					name, o.step+1, o.class, o.ingress, now))
				break
			}
		}
	}
	return out
}

// osSettled: a Service that wants os has exactly one Octavia load
// balancer, ACTIVE (its VIP in the status: serviceSettled); one that does
// not has none (an abandoned one's not in its status are not judged).
func osSettled(name string, shape Shape, want, addrs []string, lbs []osLB, abandoned bool) *Violation {
	n := len(lbs)
	if abandoned {
		n = 0
		for _, lb := range lbs {
			if slices.Contains(addrs, lb.VIP) {
				n++
			}
		}
		if slices.Contains(want, "os") && n == 0 {
			n = len(lbs)
		}
	}
	wantOS := slices.Contains(want, "os")
	switch {
	case wantOS && n == 1 && lbs[0].Status != "ACTIVE":
		v := violation(vConverge, "%s (%s) wants %v: its Octavia load balancer %s is %s", name, shape, want, lbs[0].ID, lbs[0].Status)
		return &v
	case wantOS && n == 0:
		v := violation(vConverge, "%s (%s) wants %v: no Octavia load balancer", name, shape, want)
		return &v
	case n > 1 || (!wantOS && n != 0):
		v := violation(vLeak, "%s (%s) wants %v: %d Octavia load balancers %v", name, shape, want, n, lbs)
		return &v
	}
	return nil
}
