package aws

import (
	"context"
	"fmt"
	"slices"
	"strings"

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
// NLB is left alone. Handed another version of the Service than the one
// the backend last began to reconcile the NLB for (upstream's node sync
// can hand the one from before an edit), it uses that version instead
// (specMemory): the nodes are the node sync's news, the shape the last
// Ensure's. An NLB the backend adopted untagged from the upstream
// provider is tagged as its own first (claim) once another backend is
// live in the same VPC and region.
func (l *LoadBalancer) UpdateLoadBalancer(ctx context.Context, clusterName string, svc *corev1.Service, nodes []*corev1.Node) error {
	if managedElsewhere(svc) {
		return cloudprovider.ImplementedElsewhere
	}
	unlock, err := l.serviceLocks.Lock(ctx, svc)
	if err != nil {
		return err
	}
	defer unlock()
	if latest, newer := l.specs.latest(svc); newer {
		klog.FromContext(ctx).V(2).Info("The node sync was handed another version of the Service than the load balancer was last reconciled for; updating it for that version",
			"service", klog.KObj(svc))
		svc = latest
	}
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
	if err := l.claim(ctx, d, lb); err != nil {
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
	if l.untagged.needsClaim(d.names.service) && l.sharesVPC() {
		return false, nil // the whole path tags it as this backend's (claim)
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
// d, what the Service asks for, and lb, its NLB. When d is the NLB's
// shape (fittingGroups) it makes each group's targets d's (targets on
// another port than d's NodePort go: an Ensure that failed half-way
// through a NodePort change), or returns why the whole reconcile is
// needed: the shape drifted, the node set switches the target type, or
// the instances' security-group rules move with the targets (rulesMove).
// After a change it records the Service's verified view (gen: from the
// drop before observe).
func (l *LoadBalancer) retarget(ctx context.Context, d *desiredLB, lb *elbtypes.LoadBalancer, gen uint64) (string, error) {
	ctx = withExisting(ctx, lb)
	attached, err := l.attachedTo(ctx, lb)
	if err != nil {
		return "", err
	}
	if err := l.keepIPTargets(ctx, d, attached); err != nil {
		return "", err
	}
	groups, differs := fittingGroups(d, attached, l.settings.VPC)
	if differs != "" {
		return differs, nil
	}
	for i := range groups {
		if groups[i].have, err = l.registered(ctx, groups[i].port, groups[i].arn); err != nil {
			return "", err
		}
	}
	if why := l.rulesMove(ctx, d, lb, groups); why != "" {
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
	l.recordVerified(ctx, d.names, gen, reconciled(d, lb, arns))
	return "", nil
}

// fittingGroups returns, for each port of d, the target group the NLB's
// listeners use (attached: one DescribeTargetGroups by the NLB, or a
// repair pass's snapshot) when it is as the Service asks (groupFits), and
// why d is not the NLB's shape ("" when it is): a
// port's group not attached (a port removed since, a group deleted behind
// the backend's back, an adopted NLB still on the upstream provider's
// groups) or not as d asks, or groups of the Service's names for ports d
// lacks (a port added since).
func fittingGroups(d *desiredLB, attached map[string]elbtypes.TargetGroup, vpc string) (groups []groupTargets, differs string) {
	var why []string
	mine := map[string]bool{}
	for _, p := range d.ports {
		mine[p.tgName] = true
		tg, ok := attached[p.tgName]
		switch {
		case !ok:
			why = append(why, fmt.Sprintf("target group %s of port %d is not attached", p.tgName, p.port))
		case !groupFits(d, p, tg, vpc):
			why = append(why, fmt.Sprintf("target group %s is not as the Service asks", p.tgName))
		default:
			groups = append(groups, groupTargets{port: p, arn: awssdk.ToString(tg.TargetGroupArn)})
		}
	}
	var extra []string
	for name := range attached { // a hand-made listener's group is a stranger's, left alone
		if !mine[name] && serviceGroup(d.names, name) {
			extra = append(extra, name)
		}
	}
	if len(extra) > 0 {
		why = append(why, "the load balancer has target groups of the Service for other ports: "+strings.Join(sorted(extra), ", "))
	}
	return groups, strings.Join(why, "; ")
}

// groupFits reports whether tg is port p's group as d asks for it. The
// group's own port is only the default of targets registered without
// one: reconcile keeps a group when the NodePort changes and registers
// the targets on the new one, so the targets' port is what counts
// (targetChanges moves them to d's NodePort).
func groupFits(d *desiredLB, p desiredPort, tg elbtypes.TargetGroup, vpc string) bool {
	return awssdk.ToString(tg.VpcId) == vpc && string(tg.Protocol) == p.protocol &&
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
