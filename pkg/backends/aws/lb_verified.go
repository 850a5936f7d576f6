package aws

import (
	"context"
	"strings"
	"sync"
	"unique"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	elbtypes "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2/types"
	"k8s.io/klog/v2"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/cloudapi"
)

// The verified view: what the backend last made each Service's NLB into
// and verified, so that a node change reaches the NLB with its writes
// only. A reconcile (Ensure, Update's fallback, a repair pass) reads
// everything it compares and makes every difference: when it succeeds, the
// NLB is as the Service asked, and the backend records that (the NLB, its
// target group per port, the targets registered in each). UpdateLoadBalancer
// then takes the Service's view and makes only the target changes the new
// node set needs: one RegisterTargets and/or DeregisterTargets per target
// group that changes, no read. What changes behind the backend's back is
// the repair pass's to find (it reads everything again); a write that
// finds a target group gone falls back to the whole reconcile.
//
// A view lives for the process, in the backend instance (one
// configuration); it is dropped when a reconcile or delete of the Service
// starts (a new one is recorded when the reconcile succeeds), and on any
// error. UpdateLoadBalancer checks a view out: a second Update of the
// Service meanwhile finds none and reads AWS, and only the call that
// checked it out may put it back, if nothing dropped it meanwhile.

// verifiedLB is one Service's verified view.
type verifiedLB struct {
	lb elbtypes.LoadBalancer
	// targetType and family are the target groups' (desiredLB's).
	targetType, family string
	// manageBackend is desiredLB's: whether the instances' rules follow the
	// targets (rulesMove).
	manageBackend bool
	groups        []verifiedGroup
	// targets are the targets registered in every group, each on its
	// group's NodePort (a reconcile or a retarget makes every group's
	// targets d.targets).
	targets targetSet
}

// verifiedGroup is one port's target group.
type verifiedGroup struct {
	port desiredPort
	arn  string
}

// targetSet is a sorted target list, interned (unique): the Services
// whose NLBs target the same nodes, every one of them in the scale cell,
// share one copy. A map of target descriptions per group, as the view
// first kept, held 32 KiB a Service at 100 targets and would hold about
// 200 KiB at AWS's 1,000 per group, copied in every Service's view.
type targetSet unique.Handle[string]

// newTargetSet interns ts as "<id> <zone>\n" lines.
func newTargetSet(ts []target) targetSet {
	size := 0
	for _, t := range ts {
		size += len(t.id) + len(t.zone) + 2
	}
	var b strings.Builder
	b.Grow(size)
	for _, t := range ts {
		b.WriteString(t.id)
		b.WriteByte(' ')
		b.WriteString(t.zone)
		b.WriteByte('\n')
	}
	return targetSet(unique.Make(b.String()))
}

// registeredOn returns the set's targets on port by targetKey, as
// registered returns a group's.
func (s targetSet) registeredOn(port int32) map[string]elbtypes.TargetDescription {
	lines := unique.Handle[string](s).Value()
	out := make(map[string]elbtypes.TargetDescription, strings.Count(lines, "\n"))
	p := awssdk.Int32(port)
	for line := range strings.Lines(lines) {
		id, zone, _ := strings.Cut(strings.TrimSuffix(line, "\n"), " ")
		out[targetKey(id, port)] = targetDescription(target{id: id, zone: zone}, p)
	}
	return out
}

// verifiedViews are the views by NLB name (names.lb), with a generation
// per Service that every drop advances.
type verifiedViews struct {
	mu    sync.Mutex
	views map[string]*verifiedLB
	gens  map[string]uint64
}

// takeoverWindow is how long after this replica took the lease over a
// write of the previous leader's may still land
// (cloudapi.LandingAfterTakeover): each attempt of an AWS call passes the
// mutation gate just before it is sent (cloudapi.AWSAPIOptions, after the
// retryer) and lasts at most httpTimeout.
const takeoverWindow = httpTimeout

// dropVerified is verified.drop, except that while the previous leader's
// writes may still land after a takeover it hands out generation 0, with
// which no view is recorded: what the caller reads then (targets, groups,
// rules) may change under it with no write of this process's, and a view
// of it would keep a node sync from reading AWS until the next repair
// pass. The first node syncs after a takeover read AWS instead
// (TestReview64ViewRecordedWhileThePreviousLeadersWritesLand).
func (l *LoadBalancer) dropVerified(n names) uint64 {
	gen := l.verified.drop(n)
	if !cloudapi.LandingAfterTakeover(takeoverWindow).IsZero() {
		return 0
	}
	return gen
}

// drop forgets the Service's view and returns the generation a view
// recorded by the caller must carry (at least 1).
func (v *verifiedViews) drop(n names) uint64 {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.gens == nil {
		v.views, v.gens = map[string]*verifiedLB{}, map[string]uint64{}
	}
	delete(v.views, n.lb)
	v.gens[n.lb]++
	return v.gens[n.lb]
}

// checkout takes the Service's view out (nil: none) with its generation.
func (v *verifiedViews) checkout(n names) (*verifiedLB, uint64) {
	v.mu.Lock()
	defer v.mu.Unlock()
	view := v.views[n.lb]
	delete(v.views, n.lb)
	return view, v.gens[n.lb]
}

// recordVerified records view as the Service's (record), except in the
// read-only mode: a plan changes nothing, so it verifies nothing.
func (l *LoadBalancer) recordVerified(ctx context.Context, n names, gen uint64, view *verifiedLB) {
	if !backends.DryRun(ctx) {
		l.verified.record(n, gen, view)
	}
}

// record keeps view as the Service's, unless the Service's view was
// dropped since gen or gen is 0 (dropVerified: read while the previous
// leader's writes may still land).
func (v *verifiedViews) record(n names, gen uint64, view *verifiedLB) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if gen == 0 || v.gens == nil || v.gens[n.lb] != gen {
		return
	}
	v.views[n.lb] = view
}

// reconciled is the view of the NLB lb after a reconcile made it what d
// asks for: each port's group (groupARNs, by port) holds d's targets.
func reconciled(d *desiredLB, lb *elbtypes.LoadBalancer, groupARNs map[int32]string) *verifiedLB {
	v := &verifiedLB{lb: *lb, targetType: d.targetType, family: d.family, manageBackend: d.manageBackend, targets: newTargetSet(d.targets)}
	for _, p := range d.ports {
		v.groups = append(v.groups, verifiedGroup{port: p, arn: groupARNs[p.port]})
	}
	return v
}

// fits reports whether the view serves d: the same NLB shape for targets
// (target type, IP family, the instances' rules), and per port the same
// listener port, protocol and NodePort. The view's group of a port may be
// the upstream provider's on an adopted NLB (keepUpstreamGroups kept it
// because it fits the same way).
func (v *verifiedLB) fits(d *desiredLB) bool {
	if v.targetType != d.targetType || v.family != d.family || v.manageBackend != d.manageBackend || len(v.groups) != len(d.ports) {
		return false
	}
	for i, p := range d.ports {
		g := v.groups[i].port
		if g.port != p.port || g.protocol != p.protocol || g.nodePort != p.nodePort || v.groups[i].arn == "" {
			return false
		}
	}
	return true
}

// retargetVerified is UpdateLoadBalancer with a verified view: it makes
// the target changes d needs against the view's groups, with no read, and
// records the view with them. done is false when there is no view, it
// does not fit d, the instances' security groups change with the targets
// (rulesMove), or a group is gone (a write answered NotFound): the caller
// then takes the whole path.
func (l *LoadBalancer) retargetVerified(ctx context.Context, d *desiredLB) (done bool, err error) {
	view, gen := l.verified.checkout(d.names)
	if view == nil || !view.fits(d) {
		return false, nil
	}
	groups := make([]groupTargets, len(view.groups))
	for i, g := range view.groups {
		groups[i] = groupTargets{port: d.ports[i], arn: g.arn, have: view.targets.registeredOn(g.port.nodePort)}
		groups[i].port.tgName = g.port.tgName
	}
	if why := l.rulesMove(ctx, d, &view.lb, groups); why != "" {
		klog.FromContext(ctx).V(4).Info("Reconciling the whole load balancer to update its targets", "why", why)
		return false, nil
	}
	next := &verifiedLB{lb: view.lb, targetType: view.targetType, family: view.family, manageBackend: view.manageBackend, targets: newTargetSet(d.targets)}
	for i, g := range groups {
		add, remove := targetChanges(d, g.port, g.have)
		if err := l.changeTargets(ctx, g.port.tgName, g.arn, add, remove); err != nil {
			if isNotFound(err) {
				klog.FromContext(ctx).V(2).Info("A target group of the verified view is gone; reconciling the whole load balancer", "targetGroup", g.port.tgName)
				return false, nil
			}
			return true, err
		}
		next.groups = append(next.groups, verifiedGroup{port: view.groups[i].port, arn: g.arn})
	}
	l.recordVerified(ctx, d.names, gen, next)
	return true, nil
}
