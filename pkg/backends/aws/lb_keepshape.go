package aws

import (
	"context"
	"slices"
	"strconv"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	elbtypes "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2/types"
	"k8s.io/klog/v2"
)

// retargetKeepingShape is UpdateLoadBalancer when the Service given (d)
// is not the shape of its NLB lb (why: fittingGroups says how). A node
// sync never changes the shape: Ensure and the repair pass do, from the
// Service as it is now, and d may be the Service from before an edit. So
// only targets change, on every group of the Service the NLB's listeners
// use (attached: the backend's by name, and an adopted NLB's upstream
// groups; a stranger's listener's group is left alone), each as the NLB
// has it:
//   - the targets' port is the one the group's targets are registered on
//     (commonPort; targets on another port are left as they are); in an
//     empty group, d's NodePort of the group's listener port when d has
//     that port, else the group's own port;
//   - the targets are the nodes d chose, of the group's target type and
//     IP family;
//   - the instances registered get the rules they need in their security
//     groups for the ports in use (allowInstances); no rule is revoked.
//
// Nothing else is created, deleted or modified, and no verified view is
// recorded (the view would not be what d asks). read are the targets
// already read, by group ARN.
func (l *LoadBalancer) retargetKeepingShape(ctx context.Context, d *desiredLB, lb *elbtypes.LoadBalancer, attached map[string]elbtypes.TargetGroup,
	read map[string]map[string]elbtypes.TargetDescription, why string) error {
	k := &keptShape{l: l, d: d, lb: lb, kinds: map[string][]target{}, rules: map[backendRule]bool{}}
	var changed []string
	for _, name := range sorted(mapKeys(attached)) {
		if !serviceGroup(d.names, name) {
			continue
		}
		tg := attached[name]
		if err := k.retargetGroup(ctx, tg, read[awssdk.ToString(tg.TargetGroupArn)]); err != nil {
			return err
		}
		changed = append(changed, name)
	}
	if err := k.allowInstances(ctx); err != nil {
		return err
	}
	klog.FromContext(ctx).V(2).Info("Updated only the targets: the Service given is not the load balancer's shape, which is left to the next Ensure or repair pass",
		"why", why, "targetGroups", changed)
	return nil
}

// keptShape is one retargetKeepingShape.
type keptShape struct {
	l  *LoadBalancer
	d  *desiredLB
	lb *elbtypes.LoadBalancer
	// listeners are the NLB's, read once when an empty group needs its
	// listener's port.
	listeners map[int32]*elbtypes.Listener
	// kinds are the targets of d's nodes by target type and IP family.
	kinds map[string][]target
	// rules are what the instance groups' ports need in the instances'
	// security groups; instances are the instance targets wanted.
	rules     map[backendRule]bool
	instances []target
}

// retargetGroup makes the targets of group tg the nodes d chose, on the
// port its targets use. have are its targets if read already (nil: not).
func (k *keptShape) retargetGroup(ctx context.Context, tg elbtypes.TargetGroup, have map[string]elbtypes.TargetDescription) error {
	name, arn := awssdk.ToString(tg.TargetGroupName), awssdk.ToString(tg.TargetGroupArn)
	var err error
	if have == nil {
		if have, err = k.l.registered(ctx, desiredPort{tgName: name}, arn); err != nil {
			return err
		}
	}
	port, ok := commonPort(have)
	if !ok {
		if port, err = k.emptyGroupPort(ctx, tg); err != nil {
			return err
		}
	}
	targets, err := k.targetsOf(ctx, tg)
	if err != nil {
		return err
	}
	add, remove := targetDiff(targets, port, onPort(have, port))
	if err := k.l.changeTargets(ctx, name, arn, add, remove); err != nil {
		return err
	}
	if tg.TargetType == elbtypes.TargetTypeEnumInstance {
		k.needRules(tg, port, targets)
	}
	return nil
}

// onPort keeps the targets of have registered on port.
func onPort(have map[string]elbtypes.TargetDescription, port int32) map[string]elbtypes.TargetDescription {
	out := make(map[string]elbtypes.TargetDescription, len(have))
	for k, td := range have {
		if awssdk.ToInt32(td.Port) == port {
			out[k] = td
		}
	}
	return out
}

// emptyGroupPort is the port targets are registered on in group tg, which
// has none: d's NodePort of the port whose listener forwards to tg when
// d has that port, else the group's own port.
func (k *keptShape) emptyGroupPort(ctx context.Context, tg elbtypes.TargetGroup) (int32, error) {
	if k.listeners == nil {
		ls, err := k.l.listeners(ctx, awssdk.ToString(k.lb.LoadBalancerArn))
		if err != nil {
			return 0, err
		}
		k.listeners = ls
	}
	for port, ls := range k.listeners {
		if forwardsTo(ls) != awssdk.ToString(tg.TargetGroupArn) {
			continue
		}
		for _, p := range k.d.ports {
			if p.port == port {
				return p.nodePort, nil
			}
		}
	}
	return awssdk.ToInt32(tg.Port), nil
}

// targetsOf returns the targets d's nodes make in group tg: d's when the
// group's target type and IP family are d's, else the nodes' of the
// group's (targetsFor).
func (k *keptShape) targetsOf(ctx context.Context, tg elbtypes.TargetGroup) ([]target, error) {
	tt, family := string(tg.TargetType), groupFamily(tg)
	if tt == k.d.targetType && family == k.d.family {
		return k.d.targets, nil
	}
	key := tt + "/" + family
	if ts, ok := k.kinds[key]; ok {
		return ts, nil
	}
	_, ts, _, err := k.l.targetsFor(ctx, tt, k.d.targetNodes, family)
	if err != nil {
		return nil, err
	}
	k.kinds[key] = ts
	return ts, nil
}

// needRules notes the rules instance group tg needs in its instances'
// security groups (its protocol on port, and a numeric health-check
// port), and its instances.
func (k *keptShape) needRules(tg elbtypes.TargetGroup, port int32, targets []target) {
	for _, proto := range ipProtocols(string(tg.Protocol)) {
		k.rules[backendRule{protocol: proto, port: port}] = true
	}
	if hc, err := strconv.Atoi(awssdk.ToString(tg.HealthCheckPort)); err == nil {
		k.rules[backendRule{protocol: "tcp", port: int32(hc)}] = true //nolint:gosec // a port, 1-65535.
	}
	k.instances = append(k.instances, targets...) // copied: allowInstances drops repeats in place
}

// allowInstances adds the rules the instance targets need in their
// security groups from the backend's own group, when the backend manages
// them (AnnotationManageBackendSGRules) and the NLB has its group: a node
// the node sync registers in a security group no target was in before is
// let in now, for nothing else would (TestReview65StaleNodeSyncLeavesANewInstanceGroupWithoutRules).
// A rule the ports no longer need is the next Ensure's or repair pass's to
// revoke.
func (k *keptShape) allowInstances(ctx context.Context) error {
	if !k.d.manageBackend || len(k.instances) == 0 || len(k.lb.SecurityGroups) == 0 {
		return nil
	}
	own, err := k.l.findSG(ctx, k.d.names)
	if err != nil || own == nil || !slices.Contains(k.lb.SecurityGroups, awssdk.ToString(own.GroupId)) {
		return err
	}
	ownID := awssdk.ToString(own.GroupId)
	seen := map[string]bool{}
	instances := slices.DeleteFunc(k.instances, func(t target) bool {
		dup := seen[t.id]
		seen[t.id] = true
		return dup
	})
	groups, err := k.l.instanceGroups(ctx, instances)
	if err != nil {
		return err
	}
	have, err := k.l.backendRules(ctx, ownID)
	if err != nil {
		return err
	}
	for _, g := range groups {
		var add []backendRule
		for r := range k.rules {
			if !have[g][r] {
				add = append(add, r)
			}
		}
		if err := k.l.changeBackendRules(ctx, g, ownID, add, nil); err != nil {
			return err
		}
	}
	return nil
}
