package aws

import (
	"context"
	"fmt"
	"slices"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	elbtypes "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2/types"
	corev1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/klog/v2"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

// UpdateLoadBalancer (ImplementedElsewhere for a load balancer managed
// elsewhere) brings the targets of the Service's NLB in line with the
// nodes, as upstream's contract asks ("updates hosts"): it finds the NLB
// and the target groups its listeners use, reads their targets and
// registers and deregisters only the difference. Anything else that
// drifted is EnsureLoadBalancer's to repair. When the NLB is not as the
// fast path expects (a target group missing or not the one the Service
// asks for, an adopted NLB still on the upstream provider's groups, the
// instances' security-group rules changing with the node set) it runs the
// whole reconcile instead, without creating anything: a Service with no
// NLB is left alone. An NLB with more of the Service's ports than svc has
// never takes that fallback (retarget).
func (l *LoadBalancer) UpdateLoadBalancer(ctx context.Context, clusterName string, svc *corev1.Service, nodes []*corev1.Node) error {
	if managedElsewhere(svc) {
		return cloudprovider.ImplementedElsewhere
	}
	unlock, err := l.serviceLocks.Lock(ctx, svc)
	if err != nil {
		return err
	}
	defer unlock()
	n := namesFor(l.clusterID, svc)
	// The Service's share of a repair pass serves the fallback too: the
	// fast path changes nothing before it decides.
	ctx = l.withView(withService(withClusterName(ctx, clusterName), svc, n), n)
	if done, err := l.updateVerified(ctx, svc, nodes); done {
		return err
	}
	gen := l.dropVerified(n)
	d, lb, err := l.observe(ctx, svc, nodes)
	if err != nil || lb == nil {
		return err
	}
	why, err := l.retarget(ctx, d, lb, gen)
	if err != nil || why == "" {
		return err
	}
	klog.FromContext(ctx).V(4).Info("Reconciling the whole load balancer to update its targets", "why", why)
	_, err = l.reconcileVerified(ctx, d, lb, gen)
	return err
}

// updateVerified is UpdateLoadBalancer from the Service's verified view
// (retargetVerified): what the Service asks for, then only the target
// writes. done is false when the view cannot serve (none, not fitting, a
// group gone, or the Service's annotations unreadable: the whole path
// reports that). The read-only mode (a plan) reads AWS as before: it
// shows what a node sync without a view would do; so does an Update under
// a repair pass, whose point is to read what is there.
func (l *LoadBalancer) updateVerified(ctx context.Context, svc *corev1.Service, nodes []*corev1.Node) (done bool, err error) {
	if err := ctx.Err(); err != nil {
		return true, err
	}
	if backends.DryRun(ctx) || ctx.Value(passKey{l}) != nil {
		return false, nil // a plan, or a repair pass: read what is there
	}
	d, err := l.desired(ctx, svc, nodes)
	if err != nil || d.undecided() {
		return false, nil
	}
	l.targetTypes.remember(svc, d.targetType, d.keepIP)
	return l.retargetVerified(ctx, d)
}

// groupTargets are one port's target group and the targets registered in
// it.
type groupTargets struct {
	port desiredPort
	arn  string
	have map[string]elbtypes.TargetDescription
}

// retarget is UpdateLoadBalancer's fast path: it changes only targets, or
// nothing and says why the whole reconcile is needed. Every read comes
// before the first change, so a fallback starts from what observe read:
// d, what the Service asks for, and lb, its NLB.
//
// When it changes the targets, it records the Service's verified view
// (gen: from the drop before observe): it read the NLB, its groups and
// their targets, and made them what d asks.
//
// The NLB's listeners may use groups of the Service for ports d lacks
// (extra): upstream's node sync can hand a Service's spec from before a
// port was added, after the Ensure of the new spec made the port. Then
// only d's groups' targets change, nothing is recorded (the view would
// not be the NLB), and the whole reconcile never runs: with the old spec
// it would delete the port's listener, target group and rules, which
// nothing puts back before the next repair pass
// (TestReview64NodeSyncWithTheSpecBeforeAPortWasAdded). The next Ensure or
// repair pass decides the extra ports and the instances' rules.
func (l *LoadBalancer) retarget(ctx context.Context, d *desiredLB, lb *elbtypes.LoadBalancer, gen uint64) (string, error) {
	ctx = withExisting(ctx, lb)
	groups, extra, why, err := l.targetGroupsOf(ctx, d, lb)
	if err != nil || why != "" {
		return why, err
	}
	for i := range groups {
		if groups[i].have, err = l.registered(ctx, groups[i].port, groups[i].arn); err != nil {
			return "", err
		}
	}
	why = l.rulesMove(ctx, d, lb, groups)
	if why != "" && len(extra) == 0 {
		return why, nil
	}
	arns := map[int32]string{}
	for _, g := range groups {
		add, remove := targetChanges(d, g.port, g.have)
		if err := l.changeTargets(ctx, g.port.tgName, g.arn, add, remove); err != nil {
			return "", err
		}
		arns[g.port.port] = g.arn
	}
	if len(extra) > 0 {
		klog.FromContext(ctx).V(2).Info("Updated only the targets of the Service's ports: the load balancer has more ports than the Service given; the next Ensure decides them",
			"extraTargetGroups", extra, "rulesLeft", why)
		return "", nil
	}
	l.recordVerified(ctx, d.names, gen, reconciled(d, lb, arns))
	return "", nil
}

// targetGroupsOf returns, for each port of d, the target group the NLB
// lb's listeners use (one DescribeTargetGroups by the NLB, or a repair
// pass's snapshot), or why the fast path cannot take them: each port's
// group must be attached as the Service asks for it (name, VPC, protocol,
// NodePort, target type, IP family). A group found by the Service's name
// attached to the Service's NLB is the one reconcile would register the
// targets in too. extra are the other groups of the Service's names the
// listeners use, by name: ports d lacks (see retarget).
func (l *LoadBalancer) targetGroupsOf(ctx context.Context, d *desiredLB, lb *elbtypes.LoadBalancer) (groups []groupTargets, extra []string, why string, err error) {
	attached, err := l.attachedTo(ctx, lb)
	if err != nil {
		return nil, nil, "", err
	}
	if err := l.keepIPTargets(ctx, d, attached); err != nil {
		return nil, nil, "", err
	}
	for _, p := range d.ports {
		tg, ok := attached[p.tgName]
		if !ok {
			return nil, nil, fmt.Sprintf("target group %s is not attached", p.tgName), nil
		}
		if !groupFits(d, p, tg, l.settings.VPC) {
			return nil, nil, fmt.Sprintf("target group %s is not as the Service asks", p.tgName), nil
		}
		groups = append(groups, groupTargets{port: p, arn: awssdk.ToString(tg.TargetGroupArn)})
		delete(attached, p.tgName)
	}
	for name := range attached { // a hand-made listener's group is a stranger's, left alone
		if serviceGroup(d.names, name) {
			extra = append(extra, name)
		}
	}
	return groups, sorted(extra), "", nil
}

// groupFits reports whether tg is port p's group as d asks for it.
func groupFits(d *desiredLB, p desiredPort, tg elbtypes.TargetGroup, vpc string) bool {
	return awssdk.ToString(tg.VpcId) == vpc && string(tg.Protocol) == p.protocol && awssdk.ToInt32(tg.Port) == p.nodePort &&
		string(tg.TargetType) == d.targetType && (tg.IpAddressType == elbtypes.TargetGroupIpAddressTypeEnumIpv6) == (d.family == familyIPv6)
}

// rulesMove says why the instances' security-group rules
// (syncBackendRules) may change with the targets, "" when they cannot:
// the backend manages none for the Service, the targets stay the same
// instances, or the instances registered and those wanted are in the same
// security groups. Else (or when an instance registered cannot be looked
// up) the whole reconcile brings the rules in line.
func (l *LoadBalancer) rulesMove(ctx context.Context, d *desiredLB, lb *elbtypes.LoadBalancer, groups []groupTargets) string {
	if (adopted(lb, d.names) && len(lb.SecurityGroups) == 0) || !d.manageBackend || d.targetType != targetInstance {
		return ""
	}
	var want, had []string
	for _, t := range d.targets {
		want = append(want, t.id)
	}
	for _, g := range groups {
		for _, td := range g.have {
			had = append(had, awssdk.ToString(td.Id))
		}
	}
	want, had = slices.Compact(sorted(want)), slices.Compact(sorted(had))
	if slices.Equal(want, had) {
		return ""
	}
	wantGroups, err := l.instanceGroups(ctx, targetsOf(want))
	if err != nil {
		return "the instances' security groups: " + err.Error()
	}
	hadGroups, err := l.instanceGroups(ctx, targetsOf(had))
	if err != nil {
		return "the registered instances' security groups: " + err.Error()
	}
	if !slices.Equal(wantGroups, hadGroups) {
		return "the instances' security groups change"
	}
	return ""
}

// targetsOf makes targets of instance IDs.
func targetsOf(ids []string) []target {
	out := make([]target, len(ids))
	for i, id := range ids {
		out[i] = target{id: id}
	}
	return out
}
