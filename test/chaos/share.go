package chaos

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/multicloud-ccm/multicloud-ccm/test/e2e/framework"
)

// Shared addresses (Features.Share): the sharing Services carry
// allow-shared-ip keys, and bare metal lets Services of one key share an
// address when no port clashes (pkg/backends/baremetal: canShare; our
// Services are all externalTrafficPolicy Cluster, TCP). The share stream
// draws their steps; the model predicts which request of an address is
// served and which refused, and the checks below hold the product to it.

// shareChance is the percentage of the steps the share stream draws.
const shareChance = 30

// The sharing Services' names, keys, port sets and requested addresses:
// two keys (k1 drawn twice as often, so that most pairs share one) and no
// key; port sets overlapping on 80 and 8080, so that a pair of one key is
// refused for a clash as often as it shares; requests of two of the
// addresses the other Services request too, the first twice as often
// (those carry no key: a sharing Service's request of one they hold is
// refused).
var (
	shareNames = []string{"sh0", "sh1", "sh2"}
	shareKeys  = []string{"k1", "k1", "k2", ""}
	sharePorts = [][]int32{{80}, {443}, {8080}, {80, 8080}}
	shareIPs   = []string{requestedIPs[0], requestedIPs[0], requestedIPs[1]}
)

// Event reason of a requested address another Service holds
// (baremetal.ReasonIPInUse).
const reasonIPInUse = "LoadBalancerIPInUse"

// NewShareRand is the share stream of seed: another PCG stream, so that
// the main stream (NewRand) draws the same with sharing or without.
func NewShareRand(seed uint64) *Rand {
	return NewRand(seed ^ 0x5ec0d5a7e5eed5ad)
}

// share draws a step on a sharing Service: created, deleted, or one
// thing of it changed (its key, its ports, its requested address, its
// bare-metal backend, its type).
func (g *generator) share() Op {
	r := g.srnd
	// sh0 and sh1 twice as often as sh2: a pair meets often.
	name := pick(r, []string{"sh0", "sh1", "sh0", "sh1", "sh2"})
	cur := g.shared[name]
	if cur == nil {
		s := Shape{Type: serviceTypeLB, Backends: "metal", Ports: slices.Clone(pick(r, sharePorts)), Share: pick(r, shareKeys)}
		if r.IntN(3) > 0 {
			s.IPs = pick(r, shareIPs)
		}
		g.shared[name] = &s
		return Op{Kind: SvcApply, Name: name, Shape: &s}
	}
	s := *cur
	s.Ports = slices.Clone(s.Ports)
	switch p := r.IntN(100); {
	case p < 10:
		delete(g.shared, name)
		return Op{Kind: SvcDelete, Name: name}
	case p < 40:
		s.Share = pick(r, shareKeys)
	case p < 60:
		s.Ports = slices.Clone(pick(r, sharePorts))
	case p < 80:
		if s.IPs != "" && r.IntN(2) == 0 {
			s.IPs = ""
		} else if s.Backends == "metal" {
			s.IPs = pick(r, shareIPs)
		}
	case p < 88:
		// metal2 has its own allocator: a key does not reach across.
		if s.Backends == "metal" && g.cfg.Metal2 {
			s.Backends, s.IPs = "metal2", ""
		} else {
			s.Backends = "metal"
		}
	default:
		if s.Type == serviceTypeLB {
			s.Type = serviceTypeCIP
		} else {
			s.Type = serviceTypeLB
		}
	}
	g.shared[name] = &s
	return Op{Kind: SvcApply, Name: name, Shape: &s}
}

// whyNotShare says why Services of shapes a and b may not share an
// address ("" when they may), as bare metal's canShare does: both carry
// the same key, and no port of one is a port of the other (all TCP).
func whyNotShare(a, b Shape) string {
	switch {
	case a.Share == "" || b.Share == "":
		return "not both carry a key"
	case a.Share != b.Share:
		return fmt.Sprintf("keys %s and %s differ", a.Share, b.Share)
	}
	for _, p := range a.Ports {
		if slices.Contains(b.Ports, p) {
			return fmt.Sprintf("both use port %d", p)
		}
	}
	return ""
}

// shapeOf is the shape the model knows of the Service name in s: the
// judge's, or, for another controller's (a stranger) or one the judge
// deleted, what its object says (no key).
func (m *model) shapeOf(name string, s *snapshot) Shape {
	if sh, ok := m.svcs[name]; ok {
		return sh
	}
	out := Shape{Type: serviceTypeLB}
	if svc := s.svcs[name]; svc != nil {
		out.Share = svc.Annotations[annShare]
		for _, p := range svc.Spec.Ports {
			out.Ports = append(out.Ports, p.Port)
		}
	}
	return out
}

// showing are the Services (but skip) whose status shows the address a,
// sorted.
func showing(s *snapshot, a, skip string) []string {
	var out []string
	for name, svc := range s.svcs {
		if name != skip && slices.Contains(ingress(svc), a) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// refusal is a request of an address the model predicts bare metal
// refuses (event LoadBalancerIPInUse): at the step that made it, a
// Service the request may not share with showed the address.
type refusal struct {
	addr, by, why string
	step          int
	// at is when the judge made the request (its snapshot's time).
	at time.Time
}

// refusedBound is how long after a refused request the Service may still
// show the address beside its holder before the safety check calls it
// refused-share-held: bare metal answers at once, and the controller's
// next sync of the Service comes within seconds (a failover, whose new
// leader syncs everything again, and a watch held back or cut, which
// delays what the leader sees, are not judged: see safety).
const refusedBound = 10 * time.Second

// refusedHeld is the safety check of the refusals: a Service whose
// request was refused refusedBound ago still shows the address beside
// the Service that held it, both unchanged since (chaos seed 7022 with
// CHAOS_SHARE=1: sh0 dropped the key it shared 192.0.2.20 with sh1 by,
// still requesting it, and kept it in its status beside sh1's for 20
// steps, some 18 s, until sh1 was deleted; at quiescence nothing showed
// it).
// stale: a failover or a watch fault is recent, and the leader may not
// have seen the request yet.
func (m *model) refusedHeld(s *snapshot, stale bool) []Violation {
	if stale {
		return nil
	}
	var out []Violation
	for _, name := range slices.Sorted(maps.Keys(m.refused)) {
		r := m.refused[name]
		svc, by := s.svcs[name], s.svcs[r.by]
		if svc == nil || by == nil || s.at.Sub(r.at) < refusedBound || !slices.Contains(ingress(svc), r.addr) || !slices.Contains(ingress(by), r.addr) {
			continue
		}
		if why := whyNotShare(m.shapeOf(name, s), m.shapeOf(r.by, s)); why != "" {
			out = append(out, violation(vShareHeld, "%s's request of %s at step %d was refused (%s held it: %s); %s later both still show it",
				name, r.addr, r.step+1, r.by, why, s.at.Sub(r.at).Round(100*time.Millisecond)))
			delete(m.refused, name)
		}
	}
	return out
}

// shareSeen is an address the judge saw a Service share with others,
// every one of them allowed to: it keeps it as long as none of them
// changes and no reload comes (allocator.keep).
type shareSeen struct {
	addr     string
	partners []string
	step     int
}

// requests reports the address the shape requests of bare metal, when
// under cfg it is served by metal alone (the only backend that honours a
// request: the generator draws one only then).
func requests(cfg Config, sh Shape) (string, bool) {
	want, known := cfg.wanted(sh)
	return sh.IPs, sh.IPs != "" && known && slices.Equal(want, []string{"metal"})
}

// recordShare updates what the model knows of sharing for op on the
// Service name at step i (s: the world just before): the keys it ever
// carried, and whether its request is refused.
func (m *model) recordShare(op Op, s *snapshot, i int) {
	name := op.Name
	// The keys stay when the Service is deleted: it shows its address
	// until its finalizer goes, beside the Services it shared it with
	// (chaos seed 7022 with CHAOS_SHARE=1: sh1 deleted while sharing
	// 192.0.2.20 with sh0).
	if op.Kind == SvcDelete || op.Kind == SvcRecreate {
		delete(m.refused, name)
	}
	if op.Kind == SvcApply || op.Kind == SvcRecreate || op.Kind == SvcDelete {
		delete(m.sharing, name)
		for other, seen := range m.sharing {
			if slices.Contains(seen.partners, name) {
				delete(m.sharing, other)
			}
		}
	}
	if op.Kind == Reload {
		clear(m.sharing) // a pool shrunk, a backend gone: addresses may move
	}
	if op.Shape == nil || (op.Kind != SvcApply && op.Kind != SvcRecreate) {
		return
	}
	if op.Shape.Share != "" {
		if m.keys[name] == nil {
			m.keys[name] = map[string]bool{}
		}
		m.keys[name][op.Shape.Share] = true
	}
	delete(m.refused, name)
	a, ok := requests(m.cfg, *op.Shape)
	if !ok {
		return
	}
	for _, other := range showing(s, a, name) {
		if why := whyNotShare(*op.Shape, m.shapeOf(other, s)); why != "" {
			m.refused[name] = refusal{addr: a, by: other, why: why, step: i, at: s.at}
			return
		}
	}
}

// mayHaveShared reports whether the Services a and b carried a common key
// at some time: while the product catches up with a change of a key or
// the ports, both may show the address they shared (judged at
// quiescence: sharesSettled).
func (m *model) mayHaveShared(a, b string) bool {
	for k := range m.keys[a] {
		if m.keys[b][k] {
			return true
		}
	}
	return false
}

// sharers reports whether every two of names carried a common key at
// some time.
func (m *model) sharers(names []string) bool {
	for i, a := range names {
		for _, b := range names[i+1:] {
			if !m.mayHaveShared(a, b) {
				return false
			}
		}
	}
	return true
}

// seeShares records the addresses the Services of s share, each of them
// allowed to by its shape.
func (m *model) seeShares(s *snapshot, i int) {
	for _, a := range sharedAddrs(s) {
		names := showing(s, a, "")
		for _, x := range names {
			if _, ok := m.svcs[x]; !ok || s.svcs[x].DeletionTimestamp != nil {
				continue
			}
			partners := slices.DeleteFunc(slices.Clone(names), func(n string) bool { return n == x })
			ok := true
			for _, y := range partners {
				ok = ok && whyNotShare(m.svcs[x], m.shapeOf(y, s)) == ""
			}
			if _, seen := m.sharing[x]; ok && !seen {
				m.sharing[x] = shareSeen{addr: a, partners: partners, step: i}
			}
		}
	}
}

// sharedAddrs are the bare-metal addresses (of any pool metal or metal2
// ever has) shown by more than one Service: Octavia's noop VIP, which
// every os load balancer shows, is not one.
func sharedAddrs(s *snapshot) []string {
	n := map[string]int{}
	for _, svc := range s.svcs {
		for _, a := range ingress(svc) {
			if ip, err := netip.ParseAddr(a); err == nil && (metalBig.Contains(ip) || metal2Big.Contains(ip) || reserved.Contains(ip)) {
				n[a]++
			}
		}
	}
	var out []string
	for _, a := range slices.Sorted(maps.Keys(n)) {
		if n[a] > 1 {
			out = append(out, a)
		}
	}
	return out
}

// sharesSettled checks sharing once everything converged:
//
//   - no address in the status of two Services whose shapes may not share
//     it (refused-share-held): the one refused, or the one that lost its
//     key or gained a clashing port, must have let it go;
//   - a Service whose request the model predicts refused (its holder still
//     showing it, still not allowed to share) has a Warning
//     LoadBalancerIPInUse (warning-missing);
//   - a Service requesting an address that others show, every one of them
//     allowed to share it, shows it (shared-address-lost), and so does one
//     the judge saw share an address since which neither it nor its
//     partners changed and no reload came.
func (w *World) sharesSettled(ctx context.Context, m *model, s *snapshot) []Violation {
	var out []Violation
	for _, a := range sharedAddrs(s) {
		names := showing(s, a, "")
		for i, x := range names {
			for _, y := range names[i+1:] {
				if why := whyNotShare(m.shapeOf(x, s), m.shapeOf(y, s)); why != "" {
					out = append(out, violation(vShareHeld, "%s is in the status of %s (%s) and %s (%s), which may not share it: %s%s",
						a, x, m.shapeOf(x, s), y, m.shapeOf(y, s), why, m.refusedNote(x, y, a)))
				}
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(m.svcs)) {
		svc := s.svcs[name]
		if svc == nil || svc.DeletionTimestamp != nil {
			continue
		}
		shape := m.svcs[name]
		if r, ok := m.refused[name]; ok && w.c != nil && slices.Contains(showing(s, r.addr, name), r.by) && whyNotShare(shape, m.shapeOf(r.by, s)) != "" {
			evs, err := framework.Events(ctx, w.c, "Service", serviceNS, name)
			if err != nil || framework.FindEvent(evs, corev1.EventTypeWarning, reasonIPInUse) == nil {
				out = append(out, violation(vWarning, "%s requested %s at step %d, which %s shows (%s): no Warning %s (events:\n%s)",
					name, r.addr, r.step+1, r.by, r.why, reasonIPInUse, framework.DescribeEvents(evs)))
			}
		}
		if a, ok := requests(m.cfg, shape); ok {
			others := showing(s, a, name)
			if len(others) > 0 && !slices.Contains(ingress(svc), a) && m.allMayShare(shape, others, s) {
				out = append(out, violation(vShareLost, "%s (%s) requests %s, which %v show, each allowed to share it with it: its status shows %v",
					name, shape, a, others, ingress(svc)))
			}
			continue
		}
		seen, ok := m.sharing[name]
		if !ok || slices.Contains(ingress(svc), seen.addr) {
			continue
		}
		if others := showing(s, seen.addr, name); len(others) > 0 && m.allMayShare(shape, others, s) {
			out = append(out, violation(vShareLost, "%s (%s) shared %s with %v after step %d; since, neither changed and no reload came, %v show it, and its status shows %v",
				name, shape, seen.addr, seen.partners, seen.step+1, others, ingress(svc)))
		}
	}
	return out
}

// allMayShare reports whether a Service of shape sh may share with every
// Service of names.
func (m *model) allMayShare(sh Shape, names []string, s *snapshot) bool {
	for _, n := range names {
		if whyNotShare(sh, m.shapeOf(n, s)) != "" {
			return false
		}
	}
	return true
}

// refusedNote says which of x and y the model predicted refused a.
func (m *model) refusedNote(x, y, a string) string {
	var notes []string
	for _, n := range []string{x, y} {
		if r, ok := m.refused[n]; ok && r.addr == a {
			notes = append(notes, fmt.Sprintf("%s's request of it at step %d was refused (%s held it: %s)", n, r.step+1, r.by, r.why))
		}
	}
	if len(notes) == 0 {
		return ""
	}
	return "; " + strings.Join(notes, "; ")
}
