package aws

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	elbtypes "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2/types"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
)

// attachedTargetGroups returns the target groups the NLB's listeners use,
// by name. For an NLB without any, AWS may answer TargetGroupNotFound
// rather than an empty list (the API reference lists the error for the
// call without saying): both are "none".
func (l *LoadBalancer) attachedTargetGroups(ctx context.Context, lbARN string) (map[string]elbtypes.TargetGroup, error) {
	out := map[string]elbtypes.TargetGroup{}
	if e := l.viewOf(ctx).entryByARN(lbARN); e != nil {
		for name, tg := range e.tgs {
			out[name] = tg
		}
		return out, nil
	}
	p := elbv2.NewDescribeTargetGroupsPaginator(l.elb, &elbv2.DescribeTargetGroupsInput{LoadBalancerArn: awssdk.String(lbARN)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if errorCode(err) == "TargetGroupNotFound" && len(out) == 0 {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("DescribeTargetGroups: %w", err)
		}
		for _, tg := range page.TargetGroups {
			out[awssdk.ToString(tg.TargetGroupName)] = tg
		}
	}
	return out, nil
}

// scanTargetGroups lists every target group of the account and region
// whose name carries the Service's hash: it finds groups a crash left
// unattached. It also finds the upstream provider's groups of the Service
// left unattached (an adopted NLB replaced, or a group replaced, and the
// delete that should have followed failed): named as upstream names the
// Service's groups (k8s-<namespace>-<name>-<hash>, 8 letters of each) and
// tagged as this cluster's and Service's (one DescribeTags for those
// candidates only). Only deletion and GetLoadBalancer need it.
func (l *LoadBalancer) scanTargetGroups(ctx context.Context, n names) ([]elbtypes.TargetGroup, error) {
	var out, upstream []elbtypes.TargetGroup
	p := elbv2.NewDescribeTargetGroupsPaginator(l.elb, &elbv2.DescribeTargetGroupsInput{})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("DescribeTargetGroups: %w", err)
		}
		for _, tg := range page.TargetGroups {
			name := awssdk.ToString(tg.TargetGroupName)
			switch {
			case awssdk.ToString(tg.VpcId) != l.settings.VPC:
			case strings.HasPrefix(name, n.tgPrefix()):
				out = append(out, tg)
			case n.upstreamTG != "" && strings.HasPrefix(name, n.upstreamTG) && len(tg.LoadBalancerArns) == 0:
				upstream = append(upstream, tg)
			}
		}
	}
	owned, err := l.ownedTargetGroups(ctx, n, upstream)
	if err != nil {
		return nil, err
	}
	return append(out, owned...), nil
}

// ensureTargetGroups makes one target group per port with the right
// health check and targets. It returns their ARNs by port.
func (l *LoadBalancer) ensureTargetGroups(ctx context.Context, d *desiredLB, attached map[string]elbtypes.TargetGroup) (map[int32]string, error) {
	arns := map[int32]string{}
	for _, p := range d.ports {
		tg, found := attached[p.tgName]
		if !found {
			got, err := l.detachedOrNew(ctx, d, p)
			if err != nil {
				return nil, err
			}
			tg = *got
		}
		if err := l.syncHealthCheck(ctx, d, tg); err != nil {
			return nil, err
		}
		if err := l.syncTGAttributes(ctx, d, p, tg); err != nil {
			return nil, err
		}
		if err := l.syncTargets(ctx, d, p, awssdk.ToString(tg.TargetGroupArn)); err != nil {
			return nil, err
		}
		arns[p.port] = awssdk.ToString(tg.TargetGroupArn)
	}
	return arns, nil
}

// detachedOrNew returns port p's target group when no listener of the NLB
// uses it: on an NLB that existed, the group left when its listener was
// deleted behind the backend's back, else a new one.
func (l *LoadBalancer) detachedOrNew(ctx context.Context, d *desiredLB, p desiredPort) (*elbtypes.TargetGroup, error) {
	if ctx.Value(existingKey{}) != nil {
		out, err := l.elb.DescribeTargetGroups(ctx, &elbv2.DescribeTargetGroupsInput{Names: []string{p.tgName}})
		if err != nil && !isNotFound(err) {
			return nil, fmt.Errorf("DescribeTargetGroups %s: %w", p.tgName, err)
		}
		if err == nil && len(out.TargetGroups) == 1 && awssdk.ToString(out.TargetGroups[0].VpcId) == l.settings.VPC {
			return &out.TargetGroups[0], nil
		}
	}
	return l.createTargetGroup(ctx, d, p)
}

// createTargetGroup creates a port's group. AWS answers an existing group
// of the same name and settings (one a crash left behind) with that group;
// one with other settings is looked up by name and fixed afterwards.
func (l *LoadBalancer) createTargetGroup(ctx context.Context, d *desiredLB, p desiredPort) (*elbtypes.TargetGroup, error) {
	in := &elbv2.CreateTargetGroupInput{
		Name:                       awssdk.String(p.tgName),
		Protocol:                   elbtypes.ProtocolEnum(p.protocol),
		Port:                       awssdk.Int32(p.nodePort),
		VpcId:                      awssdk.String(l.settings.VPC),
		TargetType:                 elbtypes.TargetTypeEnum(d.targetType),
		HealthCheckProtocol:        elbtypes.ProtocolEnum(d.hc.protocol),
		HealthCheckPort:            awssdk.String(d.hc.port),
		HealthCheckIntervalSeconds: awssdk.Int32(d.hc.interval),
		HealthCheckTimeoutSeconds:  awssdk.Int32(d.hc.timeout),
		HealthyThresholdCount:      awssdk.Int32(d.hc.healthy),
		UnhealthyThresholdCount:    awssdk.Int32(d.hc.unhealthy),
		Tags:                       elbTags(d.tags),
	}
	if d.hc.path != "" {
		in.HealthCheckPath = awssdk.String(d.hc.path)
	}
	if d.family == familyIPv6 {
		in.IpAddressType = elbtypes.TargetGroupIpAddressTypeEnumIpv6
	}
	out, err := l.elb.CreateTargetGroup(ctx, in)
	if errorCode(err) == "DuplicateTargetGroupName" {
		got, derr := l.elb.DescribeTargetGroups(ctx, &elbv2.DescribeTargetGroupsInput{Names: []string{p.tgName}})
		if derr != nil || len(got.TargetGroups) != 1 {
			return nil, fmt.Errorf("CreateTargetGroup %s: %w (and DescribeTargetGroups: %w)", p.tgName, err, derr)
		}
		return &got.TargetGroups[0], nil
	}
	if err != nil {
		return nil, fmt.Errorf("CreateTargetGroup %s: %w", p.tgName, err)
	}
	if len(out.TargetGroups) != 1 {
		return nil, fmt.Errorf("CreateTargetGroup %s: %d answers, want 1", p.tgName, len(out.TargetGroups))
	}
	klog.FromContext(ctx).V(2).Info("Created target group", "targetGroup", p.tgName)
	reportChange(ctx, "target group %s created", p.tgName)
	return &out.TargetGroups[0], nil
}

// syncHealthCheck modifies the group's health check in place (one
// ModifyTargetGroup with every setting) if anything differs.
func (l *LoadBalancer) syncHealthCheck(ctx context.Context, d *desiredLB, tg elbtypes.TargetGroup) error {
	if healthCheckOfGroup(tg) == d.hc {
		return nil
	}
	in := &elbv2.ModifyTargetGroupInput{TargetGroupArn: tg.TargetGroupArn, HealthCheckProtocol: elbtypes.ProtocolEnum(d.hc.protocol), HealthCheckPort: awssdk.String(d.hc.port),
		HealthCheckIntervalSeconds: awssdk.Int32(d.hc.interval), HealthCheckTimeoutSeconds: awssdk.Int32(d.hc.timeout),
		HealthyThresholdCount: awssdk.Int32(d.hc.healthy), UnhealthyThresholdCount: awssdk.Int32(d.hc.unhealthy)}
	if d.hc.path != "" {
		in.HealthCheckPath = awssdk.String(d.hc.path)
	}
	if _, err := l.elb.ModifyTargetGroup(ctx, in); err != nil {
		return fmt.Errorf("ModifyTargetGroup %s: %w", awssdk.ToString(tg.TargetGroupName), err)
	}
	klog.FromContext(ctx).V(2).Info("Changed health check", "targetGroup", awssdk.ToString(tg.TargetGroupName), "protocol", d.hc.protocol, "port", d.hc.port,
		"path", d.hc.path, "interval", d.hc.interval, "timeout", d.hc.timeout, "healthy", d.hc.healthy, "unhealthy", d.hc.unhealthy)
	reportChange(ctx, "health check of target group %s set to %s:%s%s every %ds", awssdk.ToString(tg.TargetGroupName), d.hc.protocol, d.hc.port, d.hc.path, d.hc.interval)
	return nil
}

// syncTargets registers missing targets and deregisters extra ones.
// Draining targets count as absent.
func (l *LoadBalancer) syncTargets(ctx context.Context, d *desiredLB, p desiredPort, arn string) error {
	have, err := l.registered(ctx, p, arn)
	if err != nil {
		return err
	}
	add, remove := targetChanges(d, p, have)
	return l.changeTargets(ctx, p.tgName, arn, add, remove)
}

// registered returns the targets of port p's group (ARN arn) by
// targetKey, from one DescribeTargetHealth. A deregistered target is
// listed as draining for the group's deregistration delay: it is gone
// (registering it again is how AWS takes it back), not one to deregister
// again.
func (l *LoadBalancer) registered(ctx context.Context, p desiredPort, arn string) (map[string]elbtypes.TargetDescription, error) {
	out, err := l.elb.DescribeTargetHealth(ctx, &elbv2.DescribeTargetHealthInput{TargetGroupArn: awssdk.String(arn)})
	if err != nil {
		return nil, fmt.Errorf("DescribeTargetHealth %s: %w", p.tgName, err)
	}
	have := map[string]elbtypes.TargetDescription{}
	for _, th := range out.TargetHealthDescriptions {
		if th.Target != nil && !draining(th) {
			have[targetKey(awssdk.ToString(th.Target.Id), awssdk.ToInt32(th.Target.Port))] = *th.Target
		}
	}
	return have, nil
}

// targetChanges returns the targets of d missing from port p's group
// (have: registered) and those registered that d does not have.
//
// An empty group (a new one) takes every target of d, and no key is made.
// The targets share one Port value.
func targetChanges(d *desiredLB, p desiredPort, have map[string]elbtypes.TargetDescription) (add, remove []elbtypes.TargetDescription) {
	port := awssdk.Int32(p.nodePort)
	if len(have) == 0 {
		add = make([]elbtypes.TargetDescription, 0, len(d.targets))
		for _, t := range d.targets {
			add = append(add, targetDescription(t, port))
		}
		return add, nil
	}
	want := make(map[string]bool, len(d.targets))
	for _, t := range d.targets {
		k := targetKey(t.id, p.nodePort)
		want[k] = true
		if _, ok := have[k]; !ok {
			add = append(add, targetDescription(t, port))
		}
	}
	for _, k := range sorted(mapKeys(have)) {
		if !want[k] {
			remove = append(remove, have[k])
		}
	}
	return add, remove
}

// targetDescription is t as AWS takes it, on port.
func targetDescription(t target, port *int32) elbtypes.TargetDescription {
	td := elbtypes.TargetDescription{Id: awssdk.String(t.id), Port: port}
	if t.zone != "" {
		td.AvailabilityZone = awssdk.String(t.zone)
	}
	return td
}

// healthCheckOfGroup is a target group's health check as desired
// describes one (no path for TCP).
func healthCheckOfGroup(tg elbtypes.TargetGroup) healthCheck {
	hc := healthCheck{protocol: string(tg.HealthCheckProtocol), port: awssdk.ToString(tg.HealthCheckPort), path: awssdk.ToString(tg.HealthCheckPath),
		interval: awssdk.ToInt32(tg.HealthCheckIntervalSeconds), timeout: awssdk.ToInt32(tg.HealthCheckTimeoutSeconds),
		healthy: awssdk.ToInt32(tg.HealthyThresholdCount), unhealthy: awssdk.ToInt32(tg.UnhealthyThresholdCount)}
	if hc.protocol == "TCP" {
		hc.path = ""
	}
	return hc
}

func draining(th elbtypes.TargetHealthDescription) bool {
	return th.TargetHealth != nil && th.TargetHealth.State == elbtypes.TargetHealthStateEnumDraining
}

// targetKey is a target's key in a group: "<id>:<port>".
func targetKey(id string, port int32) string { return id + ":" + strconv.Itoa(int(port)) }

func (l *LoadBalancer) changeTargets(ctx context.Context, name, arn string, add, remove []elbtypes.TargetDescription) error {
	if len(add) > 0 {
		if _, err := l.elb.RegisterTargets(ctx, &elbv2.RegisterTargetsInput{TargetGroupArn: awssdk.String(arn), Targets: add}); err != nil {
			return fmt.Errorf("RegisterTargets %s: %w", name, err)
		}
		klog.FromContext(ctx).V(2).Info("Registered targets", "targetGroup", name, "count", len(add))
		if reportsChanges(ctx) {
			reportChange(ctx, "%s registered in target group %s", plural("target", targetNames(add)), name)
		}
	}
	if len(remove) > 0 {
		if _, err := l.elb.DeregisterTargets(ctx, &elbv2.DeregisterTargetsInput{TargetGroupArn: awssdk.String(arn), Targets: remove}); err != nil {
			return fmt.Errorf("DeregisterTargets %s: %w", name, err)
		}
		klog.FromContext(ctx).V(2).Info("Deregistered targets", "targetGroup", name, "count", len(remove))
		if reportsChanges(ctx) {
			reportChange(ctx, "%s deregistered from target group %s", plural("target", targetNames(remove)), name)
		}
	}
	return nil
}

// ensureListeners makes one listener per port forwarding to its target
// group, and deletes the Service's listeners on ports it no longer has.
// Only the Service's listeners are changed or deleted (owners): a
// stranger on another port is left alone, whatever it forwards to (the
// Service's own target groups included), and one on a port of the
// Service that is not as the port asks is returned in taken ("port N
// (…)"). have are the NLB's listeners by port (l.listeners).
func (l *LoadBalancer) ensureListeners(ctx context.Context, d *desiredLB, lbARN string, tgARNs map[int32]string, have map[int32]*elbtypes.Listener, owners *listenerOwners) (taken []string, err error) {
	for _, p := range d.ports {
		ls := have[p.port]
		if ls != nil && !listenerIs(ls, p, tgARNs[p.port]) {
			ours, err := owners.owned(ctx, ls)
			if err != nil {
				return nil, err
			}
			if !ours {
				logStranger(ctx, p.port, ls)
				taken = append(taken, fmt.Sprintf("port %d (%s)", p.port, listenerDiff(ls, p, tgARNs[p.port])))
				continue
			}
		}
		if err := l.ensureListener(ctx, d, lbARN, p, tgARNs[p.port], ls); err != nil {
			return nil, err
		}
	}
	for _, port := range slices.Sorted(maps.Keys(have)) {
		if slices.ContainsFunc(d.ports, func(p desiredPort) bool { return p.port == port }) {
			continue
		}
		if err := l.deleteListener(ctx, port, have[port], owners); err != nil {
			return nil, err
		}
	}
	return taken, nil
}

// deleteListener deletes the listener ls on a port the Service no longer
// has, if it is the Service's.
func (l *LoadBalancer) deleteListener(ctx context.Context, port int32, ls *elbtypes.Listener, owners *listenerOwners) error {
	ours, err := owners.owned(ctx, ls)
	if err != nil || !ours {
		if err == nil {
			logStranger(ctx, port, ls)
		}
		return err
	}
	if _, err := l.elb.DeleteListener(ctx, &elbv2.DeleteListenerInput{ListenerArn: ls.ListenerArn}); err != nil && !isNotFound(err) {
		return fmt.Errorf("DeleteListener port %d: %w", port, err)
	}
	klog.FromContext(ctx).V(2).Info("Deleted listener", "port", port)
	reportChange(ctx, "listener %s:%d deleted", ls.Protocol, port)
	return nil
}

// serviceGroup reports whether a target group attached to the Service's
// NLB is the Service's by its name: the backend's (k8s-<hash>-...) or the
// upstream provider's of an adopted NLB (k8s-<ns>-<name>-...).
func serviceGroup(n names, name string) bool {
	return strings.HasPrefix(name, n.tgPrefix()) || (n.upstreamTG != "" && strings.HasPrefix(name, n.upstreamTG))
}

func (l *LoadBalancer) listeners(ctx context.Context, lbARN string) (map[int32]*elbtypes.Listener, error) {
	have := map[int32]*elbtypes.Listener{}
	p := elbv2.NewDescribeListenersPaginator(l.elb, &elbv2.DescribeListenersInput{LoadBalancerArn: awssdk.String(lbARN)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("DescribeListeners: %w", err)
		}
		for i := range page.Listeners {
			have[awssdk.ToInt32(page.Listeners[i].Port)] = &page.Listeners[i]
		}
	}
	return have, nil
}

// ensureListener creates port p's listener (tagged as everything the
// backend creates), or modifies it in place where it differs.
func (l *LoadBalancer) ensureListener(ctx context.Context, d *desiredLB, lbARN string, p desiredPort, tgARN string, have *elbtypes.Listener) error {
	actions := []elbtypes.Action{{Type: elbtypes.ActionTypeEnumForward, TargetGroupArn: awssdk.String(tgARN)}}
	var certs []elbtypes.Certificate
	var policy *string
	if p.listener == "TLS" {
		certs, policy = []elbtypes.Certificate{{CertificateArn: awssdk.String(p.cert)}}, awssdk.String(p.sslPolicy)
	}
	switch {
	case have == nil:
		if _, err := l.elb.CreateListener(ctx, &elbv2.CreateListenerInput{LoadBalancerArn: awssdk.String(lbARN), Port: awssdk.Int32(p.port),
			Protocol: elbtypes.ProtocolEnum(p.listener), DefaultActions: actions, Certificates: certs, SslPolicy: policy, Tags: elbTags(d.tags)}); err != nil {
			return listenerError("CreateListener", p, err)
		}
		klog.FromContext(ctx).V(2).Info("Created listener", "port", p.port, "protocol", p.listener)
		reportChange(ctx, "listener %s:%d created", p.listener, p.port)
	case !listenerIs(have, p, tgARN):
		if _, err := l.elb.ModifyListener(ctx, &elbv2.ModifyListenerInput{ListenerArn: have.ListenerArn, Port: awssdk.Int32(p.port),
			Protocol: elbtypes.ProtocolEnum(p.listener), DefaultActions: actions, Certificates: certs, SslPolicy: policy}); err != nil {
			return listenerError("ModifyListener", p, err)
		}
		klog.FromContext(ctx).V(2).Info("Changed listener", "port", p.port, "protocol", p.listener)
		reportChange(ctx, "listener %s:%d modified (%s)", p.listener, p.port, listenerDiff(have, p, tgARN))
	}
	return nil
}

// listenerIs reports whether the listener is what port p asks for.
func listenerIs(have *elbtypes.Listener, p desiredPort, tgARN string) bool {
	if string(have.Protocol) != p.listener || forwardsTo(have) != tgARN {
		return false
	}
	if p.listener != "TLS" {
		return true
	}
	return awssdk.ToString(have.SslPolicy) == p.sslPolicy && len(have.Certificates) == 1 && awssdk.ToString(have.Certificates[0].CertificateArn) == p.cert
}

// listenerError makes AWS's refusal of the certificate a user error naming
// the annotation.
func listenerError(op string, p desiredPort, err error) error {
	if code := errorCode(err); code == "CertificateNotFound" || code == "UnsupportedCertificate" {
		return annotationError(AnnotationSSLCert, p.cert, fmt.Sprintf("AWS refused the certificate for port %d (%s); give the ARN of an issued ACM (or IAM) certificate of this region", p.port, code))
	}
	return fmt.Errorf("%s port %d: %w", op, p.port, err)
}

// announceRegrouping says, in a Normal event before anything changes,
// which listeners are about to move to another target group: a port whose
// protocol (aws-load-balancer-backend-protocol), target type or IP family
// (the Service's primary one) changed,
// which AWS cannot change on a target group (also an adopted NLB's port
// whose upstream group does not fit, see keepUpstreamGroups). have are
// the NLB's listeners and attached the groups they use.
func (l *LoadBalancer) announceRegrouping(ctx context.Context, d *desiredLB, have map[int32]*elbtypes.Listener, attached map[string]elbtypes.TargetGroup) {
	nameOf := map[string]string{}
	for name, tg := range attached {
		nameOf[awssdk.ToString(tg.TargetGroupArn)] = name
	}
	var moves []string
	for _, p := range d.ports {
		ls := have[p.port]
		if ls == nil {
			continue
		}
		if from := nameOf[forwardsTo(ls)]; from != "" && from != p.tgName {
			moves = append(moves, fmt.Sprintf("port %d from %s to %s", p.port, from, p.tgName))
		}
	}
	if len(moves) == 0 {
		return
	}
	l.events.announce(ctx, corev1.EventTypeNormal, reasonTargetGroupsReplacing,
		"Moving listeners to new target groups (AWS cannot change a target group's protocol, target type or IP address type): %s. "+
			"The load balancer and its DNS name stay; each new group gets the same targets before its listener moves, and the old group is deleted after",
		strings.Join(moves, "; "))
}

func forwardsTo(ls *elbtypes.Listener) string {
	if len(ls.DefaultActions) != 1 || ls.DefaultActions[0].Type != elbtypes.ActionTypeEnumForward {
		return ""
	}
	return awssdk.ToString(ls.DefaultActions[0].TargetGroupArn)
}

// deleteUnused deletes target groups the listeners used before this
// reconcile and no longer use, if they are the Service's: tagged as this
// cluster's and this Service's (the backend's own, and the upstream
// provider's of an adopted NLB). A group someone attached to the NLB
// through a listener of their own is never deleted, nor one of the
// Service's that a stranger's listener still forwards to (inUse, by ARN).
func (l *LoadBalancer) deleteUnused(ctx context.Context, d *desiredLB, attached map[string]elbtypes.TargetGroup, inUse map[string]bool) error {
	want := map[string]bool{}
	var unused []elbtypes.TargetGroup
	for _, p := range d.ports {
		want[p.tgName] = true
	}
	for _, name := range sorted(mapKeys(attached)) {
		if !want[name] && !inUse[awssdk.ToString(attached[name].TargetGroupArn)] {
			unused = append(unused, attached[name])
		}
	}
	owned, err := l.ownedTargetGroups(ctx, d.names, unused)
	if err != nil {
		return err
	}
	for _, tg := range owned {
		if err := l.deleteTargetGroup(ctx, tg); err != nil {
			return err
		}
	}
	return nil
}

// deleteUnattached, in a repair pass, deletes the Service's target groups
// that no load balancer used when the pass read them (the Service's share,
// view.unattached) and that the Service does not use now: not a port's
// group (d.groupARNs: a detached group of a port was reused), not among
// those its listeners used (attached: deleteUnused's), not recorded by
// tagDetachedGroups (deleteDetached's). Only groups tagged as this
// cluster's and the Service's are deleted (ownedTargetGroups: one
// DescribeTags for the candidates, none without any). A group a listener
// uses again since the pass read it is refused by AWS (ResourceInUse) and
// kept. Outside a pass nothing is read or deleted: the pass has listed
// every target group already, and an Ensure or a node sync reads none
// more for this.
func (l *LoadBalancer) deleteUnattached(ctx context.Context, d *desiredLB, attached map[string]elbtypes.TargetGroup, detached []string) error {
	v := l.viewOf(ctx)
	if v == nil || len(v.unattached) == 0 {
		return nil
	}
	used := map[string]bool{}
	for _, arn := range d.groupARNs {
		used[arn] = true
	}
	for _, tg := range attached {
		used[awssdk.ToString(tg.TargetGroupArn)] = true
	}
	var unused []elbtypes.TargetGroup
	for _, tg := range v.unattached {
		if !used[awssdk.ToString(tg.TargetGroupArn)] && !slices.Contains(detached, awssdk.ToString(tg.TargetGroupName)) {
			unused = append(unused, tg)
		}
	}
	owned, err := l.ownedTargetGroups(ctx, d.names, unused)
	if err != nil {
		return err
	}
	for _, tg := range owned {
		err := l.deleteTargetGroup(ctx, tg)
		if errorCode(err) == "ResourceInUse" {
			klog.FromContext(ctx).V(2).Info("Keeping a target group the Service no longer uses: a listener uses it again", "targetGroup", awssdk.ToString(tg.TargetGroupName))
			continue
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// ownedTargetGroups keeps the groups of tgs tagged as this cluster's and
// the Service's (DescribeTags, 20 at a time; no call for none). The
// others are left alone, and logged.
func (l *LoadBalancer) ownedTargetGroups(ctx context.Context, n names, tgs []elbtypes.TargetGroup) ([]elbtypes.TargetGroup, error) {
	var out []elbtypes.TargetGroup
	for len(tgs) > 0 {
		batch := tgs[:min(len(tgs), maxTagARNs)]
		tgs = tgs[len(batch):]
		arns := make([]string, len(batch))
		for i, tg := range batch {
			arns[i] = awssdk.ToString(tg.TargetGroupArn)
		}
		res, err := l.elb.DescribeTags(ctx, &elbv2.DescribeTagsInput{ResourceArns: arns})
		if err != nil && !isNotFound(err) {
			return nil, fmt.Errorf("DescribeTags (target groups): %w", err)
		}
		tags := map[string]map[string]string{}
		if err == nil {
			tags = tagMaps(res)
		}
		for _, tg := range batch {
			if l.ownedELB(tags[awssdk.ToString(tg.TargetGroupArn)], n) {
				out = append(out, tg)
				continue
			}
			klog.FromContext(ctx).Info("Leaving a target group alone: it is not tagged as this cluster's and Service's", "targetGroup", awssdk.ToString(tg.TargetGroupName))
		}
	}
	return out, nil
}

func (l *LoadBalancer) deleteTargetGroup(ctx context.Context, tg elbtypes.TargetGroup) error {
	if _, err := l.elb.DeleteTargetGroup(ctx, &elbv2.DeleteTargetGroupInput{TargetGroupArn: tg.TargetGroupArn}); err != nil && !isNotFound(err) {
		return fmt.Errorf("DeleteTargetGroup %s: %w", awssdk.ToString(tg.TargetGroupName), err)
	}
	klog.FromContext(ctx).V(2).Info("Deleted target group", "targetGroup", awssdk.ToString(tg.TargetGroupName))
	reportChange(ctx, "target group %s deleted", awssdk.ToString(tg.TargetGroupName))
	return nil
}

// checkSSLPolicy makes sure the security policy the Service names exists,
// with one DescribeSSLPolicies, before anything is changed (AWS's default
// is not checked).
func (l *LoadBalancer) checkSSLPolicy(ctx context.Context, d *desiredLB) error {
	if d.tls == nil || d.tls.policy == defaultSSLPolicy {
		return nil
	}
	_, err := l.elb.DescribeSSLPolicies(ctx, &elbv2.DescribeSSLPoliciesInput{Names: []string{d.tls.policy}})
	if errorCode(err) == "SSLPolicyNotFound" {
		return annotationError(AnnotationSSLNegotiationPolicy, d.tls.policy, "AWS has no such security policy; list them with `aws elbv2 describe-ssl-policies`")
	}
	if err != nil {
		return fmt.Errorf("DescribeSSLPolicies: %w", err)
	}
	return nil
}
