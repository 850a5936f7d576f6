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
// is not the version its NLB lb was last reconciled for (specStale): d may
// be the Service from before an edit, so nothing is taken from it but the
// nodes it targets. Only targets change, on every group of the Service
// the NLB's listeners use (attached: the backend's by name, and an
// adopted NLB's upstream groups; a stranger's listener's group is left
// alone), each as the NLB has it:
//   - on the port the group's targets are registered on (commonPort;
//     targets on another port are left as they are); an empty group is
//     left empty, for nothing but d tells its NodePort
//     (TestReview65bStaleNodeSyncIntoAnEmptyGroupAfterANodePortChange);
//   - the targets are the nodes d chose, of the group's target type and
//     IP family;
//   - the instances registered get the rules they need in their security
//     groups for the ports in use (allowInstances); no rule is revoked.
//
// Nothing else is created, deleted or modified, and no verified view is
// recorded: the next Ensure or repair pass, from the Service as it is,
// brings the rest in line.
func (l *LoadBalancer) retargetKeepingShape(ctx context.Context, d *desiredLB, lb *elbtypes.LoadBalancer, attached map[string]elbtypes.TargetGroup) error {
	k := &keptShape{l: l, d: d, lb: lb, kinds: map[string][]target{}, rules: map[backendRule]bool{}}
	var changed []string
	for _, name := range sorted(mapKeys(attached)) {
		if !serviceGroup(d.names, name) {
			continue
		}
		ok, err := k.retargetGroup(ctx, attached[name])
		if err != nil {
			return err
		}
		if ok {
			changed = append(changed, name)
		}
	}
	if err := k.allowInstances(ctx); err != nil {
		return err
	}
	klog.FromContext(ctx).V(2).Info("Updated only the targets: the load balancer was last reconciled for another version of the Service; the next Ensure or repair pass brings the rest in line",
		"targetGroups", changed)
	return nil
}

// keptShape is one retargetKeepingShape.
type keptShape struct {
	l  *LoadBalancer
	d  *desiredLB
	lb *elbtypes.LoadBalancer
	// kinds are the targets of d's nodes by target type and IP family.
	kinds map[string][]target
	// rules are what the instance groups' ports need in the instances'
	// security groups; instances are the instance targets registered.
	rules     map[backendRule]bool
	instances []target
}

// retargetGroup makes the targets of group tg the nodes d chose, on the
// port its targets use; false for an empty group, left so.
func (k *keptShape) retargetGroup(ctx context.Context, tg elbtypes.TargetGroup) (bool, error) {
	name, arn := awssdk.ToString(tg.TargetGroupName), awssdk.ToString(tg.TargetGroupArn)
	have, err := k.l.registered(ctx, desiredPort{tgName: name}, arn)
	if err != nil {
		return false, err
	}
	port, ok := commonPort(have)
	if !ok {
		return false, nil
	}
	targets, err := k.targetsOf(ctx, tg)
	if err != nil {
		return false, err
	}
	add, remove := targetDiff(targets, port, onPort(have, port))
	if err := k.l.changeTargets(ctx, name, arn, add, remove); err != nil {
		return false, err
	}
	if tg.TargetType == elbtypes.TargetTypeEnumInstance && len(add) > 0 {
		k.needRules(tg, port, added(targets, add))
	}
	return true, nil
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
// port), and the instances it registers.
func (k *keptShape) needRules(tg elbtypes.TargetGroup, port int32, registers []target) {
	for _, proto := range ipProtocols(string(tg.Protocol)) {
		k.rules[backendRule{protocol: proto, port: port}] = true
	}
	if hc, err := strconv.Atoi(awssdk.ToString(tg.HealthCheckPort)); err == nil {
		k.rules[backendRule{protocol: "tcp", port: int32(hc)}] = true //nolint:gosec // a port, 1-65535.
	}
	k.instances = append(k.instances, registers...)
}

// added are the targets of targets that add registers.
func added(targets []target, add []elbtypes.TargetDescription) []target {
	ids := map[string]bool{}
	for _, td := range add {
		ids[awssdk.ToString(td.Id)] = true
	}
	var out []target
	for _, t := range targets {
		if ids[t.id] {
			out = append(out, t)
		}
	}
	return out
}

// allowInstances adds the rules the instances registered need in their
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
