package lifecycle

import (
	"maps"
	"reflect"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
)

// A sync's EnsureLoadBalancer hands each target, and each load balancer
// still draining, the nodes its backend can target among the sync's
// nodes: one CanTarget per node and backend. pkg/lbcontroller then
// fingerprints the targets the Service's load balancers were given
// (LoadBalancerTargetsByBackend), which asked every backend about every
// node again: at 5,000 nodes about 3 ms of CPU per Service created
// (issue 42, docs/scale.md). The decision keeps what the call handed each
// backend, and LoadBalancerTargetsEnsured answers from it where it is
// certainly the same answer.

// handedNodes is what a sync handed one backend: targets, the nodes it
// can target among nodes (the sync's), for svc, as the Balancer r
// decided them.
type handedNodes struct {
	r       *Balancer
	svc     *corev1.Service
	nodes   []*corev1.Node
	targets []*corev1.Node
}

// hand records that the sync handed backend name targets, chosen among
// nodes for svc by r.
//
// The rule: the decision never keeps a slice a backend is handed. A
// backend owns the nodes argument of its call (upstream's service
// controller builds one for each call, and nothing in the cloudprovider
// contract forbids a provider filtering or reordering it in place), so
// hand keeps a copy of targets, taken before the call: one slice of
// pointers per backend and sync, against the fingerprint reading
// whatever the backend left in its argument (TestHandedSliceReusedByTheBackend).
// nodes, the caller's list, is never handed to a backend (each is handed
// its own Targetable list), so it is kept as it is: sameList compares it
// by identity.
func (d *Decision) hand(r *Balancer, name string, svc *corev1.Service, nodes, targets []*corev1.Node) {
	if d == nil {
		return
	}
	kept := slices.Clone(targets)
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.handed == nil {
		d.handed = map[string]handedNodes{}
	}
	d.handed[name] = handedNodes{r: r, svc: svc, nodes: nodes, targets: kept}
}

// handedTo returns the nodes the sync handed backend name when they are
// what r would choose among nodes for svc: chosen by the same
// configuration (r), among the same list of nodes, for a Service that
// differs from svc in nothing a backend can target by (sameTargeting).
func (d *Decision) handedTo(r *Balancer, name string, svc *corev1.Service, nodes []*corev1.Node) ([]*corev1.Node, bool) {
	if d == nil {
		return nil, false
	}
	d.mu.Lock()
	h, ok := d.handed[name]
	d.mu.Unlock()
	if !ok || h.r != r || !sameList(h.nodes, nodes) || !sameTargeting(h.svc, svc) {
		return nil, false
	}
	return h.targets, true
}

// handedBy returns the Balancer that chose what the call handed (the
// configuration it ran on), nil when it handed nothing.
func (d *Decision) handedBy() *Balancer {
	if d == nil {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, h := range d.handed {
		return h.r
	}
	return nil
}

// sameList reports whether a and b are the same list of nodes: the same
// slice (the nodes the caller handed the call), not merely equal ones.
func sameList(a, b []*corev1.Node) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// routerAnnotations are the Service annotations the router itself writes
// during or after EnsureLoadBalancer (the record, who serves it and with
// which IDs, the drains, external-dns's target while a load balancer
// drains). No backend targets by them; the annotations backends write
// back (backends.ReportServiceAnnotation) are not among them: a backend
// may read its own.
var routerAnnotations = []string{
	string(annotation.LoadBalancerBackends),
	string(annotation.LoadBalancerRecordClass),
	string(annotation.LoadBalancerServedBy),
	string(annotation.LoadBalancerID),
	string(annotation.LoadBalancerDraining),
	string(annotation.LoadBalancerDNSTarget),
	"external-dns.alpha.kubernetes.io/target",
	"external-dns.kubernetes.io/target",
}

// sameTargeting reports whether a backend chooses the same nodes for a
// and b (its CanTarget): the same Service (UID), spec, labels, and
// annotations apart from the router's own (routerAnnotations). The
// status is not compared: the copy handed to a target has the other
// backends' addresses taken out (handedTo), and no backend targets by it.
func sameTargeting(a, b *corev1.Service) bool {
	if a == b {
		return true
	}
	if a.UID != b.UID || !maps.Equal(a.Labels, b.Labels) || !reflect.DeepEqual(a.Spec, b.Spec) {
		return false
	}
	return maps.Equal(withoutRouterAnnotations(a.Annotations), withoutRouterAnnotations(b.Annotations))
}

// withoutRouterAnnotations is m without routerAnnotations (m itself when
// it has none of them).
func withoutRouterAnnotations(m map[string]string) map[string]string {
	var out map[string]string
	for _, k := range routerAnnotations {
		if _, ok := m[k]; !ok {
			continue
		}
		if out == nil {
			out = maps.Clone(m)
		}
		delete(out, k)
	}
	if out == nil {
		return m
	}
	return out
}
