package aws

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	elbtypes "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

// The read-only mode (backends.WithDryRun). The reconcile runs unchanged
// over clients that, under a dry-run ctx, record each mutating call
// (backends.RecordIntent) instead of making it and answer it as AWS would
// have: a resource "created" gets an ID containing dryRunMark, and reads of
// such an ID answer "nothing there yet" (no listeners, targets or tags;
// for attributes, AWS's defaults for a new NLB or target group, as the
// real create finds them), so the reconcile goes on to list everything the
// real run would do. Underneath, the SDK clients refuse any action other than
// Describe*/Get*/List* under a dry-run ctx (dryRunGuard).

// dryRunMark is part of every ID the read-only mode makes up.
const dryRunMark = "dry-run"

// dryRunIDs numbers the IDs the read-only mode makes up.
var dryRunIDs atomic.Int64

// dryRunGroups are the attributes of the target groups the read-only mode
// made up, by ARN: AWS's defaults for a new group of their protocol and
// target type.
var dryRunGroups sync.Map

func dryRunID(prefix string) string {
	return fmt.Sprintf("%s%s-%d", prefix, dryRunMark, dryRunIDs.Add(1))
}

// madeUp reports whether an ID (or every ID of a list) is one the
// read-only mode made up.
func madeUp(ids ...string) bool {
	for _, id := range ids {
		if !strings.Contains(id, dryRunMark) {
			return false
		}
	}
	return len(ids) > 0
}

// dryRunGuard is added to both SDK clients' stacks: under a dry-run ctx an
// action that is not a read fails before it is signed or sent.
func dryRunGuard(service string) func(*middleware.Stack) error {
	return func(stack *middleware.Stack) error {
		return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("MulticloudDryRunGuard",
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				if op := awsmiddleware.GetOperationName(ctx); !backends.ReadOnlyAction(op) {
					if err := backends.RefuseInDryRun(ctx, service+":"+op); err != nil {
						return middleware.InitializeOutput{}, middleware.Metadata{}, err
					}
				}
				return next.HandleInitialize(ctx, in)
			}), middleware.Before)
	}
}

// dryRunEC2 is the read-only mode of the EC2 client.
type dryRunEC2 struct{ EC2API }

func intent(ctx context.Context, service, call, format string, args ...any) bool {
	return intentOf(ctx, backends.IntentChange, service, call, format, args...)
}

func intentOf(ctx context.Context, kind backends.IntentKind, service, call, format string, args ...any) bool {
	if !backends.DryRun(ctx) {
		return false
	}
	backends.RecordIntentOf(ctx, kind, service+":"+call, fmt.Sprintf(format, args...))
	return true
}

func (c dryRunEC2) DescribeSecurityGroups(ctx context.Context, in *ec2.DescribeSecurityGroupsInput, opts ...func(*ec2.Options)) (*ec2.DescribeSecurityGroupsOutput, error) {
	if backends.DryRun(ctx) && madeUp(in.GroupIds...) {
		return &ec2.DescribeSecurityGroupsOutput{}, nil
	}
	return c.EC2API.DescribeSecurityGroups(ctx, in, opts...)
}

func (c dryRunEC2) CreateSecurityGroup(ctx context.Context, in *ec2.CreateSecurityGroupInput, opts ...func(*ec2.Options)) (*ec2.CreateSecurityGroupOutput, error) {
	if intent(ctx, "ec2", "CreateSecurityGroup", "security group %s created", awssdk.ToString(in.GroupName)) {
		return &ec2.CreateSecurityGroupOutput{GroupId: awssdk.String(dryRunID("sg-"))}, nil
	}
	return c.EC2API.CreateSecurityGroup(ctx, in, opts...)
}

func (c dryRunEC2) DeleteSecurityGroup(ctx context.Context, in *ec2.DeleteSecurityGroupInput, opts ...func(*ec2.Options)) (*ec2.DeleteSecurityGroupOutput, error) {
	if intent(ctx, "ec2", "DeleteSecurityGroup", "security group %s deleted", awssdk.ToString(in.GroupId)) {
		return &ec2.DeleteSecurityGroupOutput{}, nil
	}
	return c.EC2API.DeleteSecurityGroup(ctx, in, opts...)
}

func (c dryRunEC2) AuthorizeSecurityGroupIngress(ctx context.Context, in *ec2.AuthorizeSecurityGroupIngressInput, opts ...func(*ec2.Options)) (*ec2.AuthorizeSecurityGroupIngressOutput, error) {
	if intent(ctx, "ec2", "AuthorizeSecurityGroupIngress", "security group %s: %d ingress rule(s) added", awssdk.ToString(in.GroupId), len(in.IpPermissions)) {
		return &ec2.AuthorizeSecurityGroupIngressOutput{Return: awssdk.Bool(true)}, nil
	}
	return c.EC2API.AuthorizeSecurityGroupIngress(ctx, in, opts...)
}

func (c dryRunEC2) RevokeSecurityGroupIngress(ctx context.Context, in *ec2.RevokeSecurityGroupIngressInput, opts ...func(*ec2.Options)) (*ec2.RevokeSecurityGroupIngressOutput, error) {
	if intent(ctx, "ec2", "RevokeSecurityGroupIngress", "security group %s: %d ingress rule(s) removed", awssdk.ToString(in.GroupId), len(in.IpPermissions)) {
		return &ec2.RevokeSecurityGroupIngressOutput{Return: awssdk.Bool(true)}, nil
	}
	return c.EC2API.RevokeSecurityGroupIngress(ctx, in, opts...)
}

func (c dryRunEC2) CreateRoute(ctx context.Context, in *ec2.CreateRouteInput, opts ...func(*ec2.Options)) (*ec2.CreateRouteOutput, error) {
	if intent(ctx, "ec2", "CreateRoute", "route %s created", awssdk.ToString(in.DestinationCidrBlock)) {
		return &ec2.CreateRouteOutput{Return: awssdk.Bool(true)}, nil
	}
	return c.EC2API.CreateRoute(ctx, in, opts...)
}

func (c dryRunEC2) DeleteRoute(ctx context.Context, in *ec2.DeleteRouteInput, opts ...func(*ec2.Options)) (*ec2.DeleteRouteOutput, error) {
	if intent(ctx, "ec2", "DeleteRoute", "route %s deleted", awssdk.ToString(in.DestinationCidrBlock)) {
		return &ec2.DeleteRouteOutput{}, nil
	}
	return c.EC2API.DeleteRoute(ctx, in, opts...)
}

func (c dryRunEC2) ModifyInstanceAttribute(ctx context.Context, in *ec2.ModifyInstanceAttributeInput, opts ...func(*ec2.Options)) (*ec2.ModifyInstanceAttributeOutput, error) {
	if intent(ctx, "ec2", "ModifyInstanceAttribute", "instance %s attribute changed", awssdk.ToString(in.InstanceId)) {
		return &ec2.ModifyInstanceAttributeOutput{}, nil
	}
	return c.EC2API.ModifyInstanceAttribute(ctx, in, opts...)
}

func (c dryRunEC2) CreateTags(ctx context.Context, in *ec2.CreateTagsInput, opts ...func(*ec2.Options)) (*ec2.CreateTagsOutput, error) {
	if intent(ctx, "ec2", "CreateTags", "%s tagged (%d tags)", strings.Join(in.Resources, ","), len(in.Tags)) {
		return &ec2.CreateTagsOutput{}, nil
	}
	return c.EC2API.CreateTags(ctx, in, opts...)
}

// dryRunELB is the read-only mode of the ELBv2 client.
type dryRunELB struct{ ELBAPI }

func (c dryRunELB) CreateLoadBalancer(ctx context.Context, in *elbv2.CreateLoadBalancerInput, opts ...func(*elbv2.Options)) (*elbv2.CreateLoadBalancerOutput, error) {
	kind := backends.IntentCreate
	if ctx.Value(existingKey{}) != nil {
		kind = backends.IntentReplace // the Service's NLB exists: this one replaces it.
	}
	if !intentOf(ctx, kind, "elasticloadbalancing", "CreateLoadBalancer", "load balancer %s created (%s)", awssdk.ToString(in.Name), in.Scheme) {
		return c.ELBAPI.CreateLoadBalancer(ctx, in, opts...)
	}
	name := awssdk.ToString(in.Name)
	lb := elbtypes.LoadBalancer{
		LoadBalancerArn:  awssdk.String(dryRunID("arn:aws:elasticloadbalancing:" + name + ":loadbalancer/net/" + name + "/")),
		LoadBalancerName: in.Name, DNSName: awssdk.String(name + "." + dryRunMark + ".invalid"),
		Scheme: in.Scheme, Type: in.Type, IpAddressType: in.IpAddressType, SecurityGroups: in.SecurityGroups,
		State: &elbtypes.LoadBalancerState{Code: elbtypes.LoadBalancerStateEnumActive},
	}
	for _, s := range in.Subnets {
		lb.AvailabilityZones = append(lb.AvailabilityZones, elbtypes.AvailabilityZone{SubnetId: awssdk.String(s)})
	}
	for _, m := range in.SubnetMappings {
		lb.AvailabilityZones = append(lb.AvailabilityZones, elbtypes.AvailabilityZone{SubnetId: m.SubnetId})
	}
	return &elbv2.CreateLoadBalancerOutput{LoadBalancers: []elbtypes.LoadBalancer{lb}}, nil
}

func (c dryRunELB) DeleteLoadBalancer(ctx context.Context, in *elbv2.DeleteLoadBalancerInput, opts ...func(*elbv2.Options)) (*elbv2.DeleteLoadBalancerOutput, error) {
	if intentOf(ctx, backends.IntentDelete, "elasticloadbalancing", "DeleteLoadBalancer", "load balancer %s deleted", awssdk.ToString(in.LoadBalancerArn)) {
		return &elbv2.DeleteLoadBalancerOutput{}, nil
	}
	return c.ELBAPI.DeleteLoadBalancer(ctx, in, opts...)
}

func (c dryRunELB) SetSubnets(ctx context.Context, in *elbv2.SetSubnetsInput, opts ...func(*elbv2.Options)) (*elbv2.SetSubnetsOutput, error) {
	if intent(ctx, "elasticloadbalancing", "SetSubnets", "load balancer subnets set to %s", strings.Join(in.Subnets, ",")) {
		return &elbv2.SetSubnetsOutput{IpAddressType: in.IpAddressType}, nil
	}
	return c.ELBAPI.SetSubnets(ctx, in, opts...)
}

func (c dryRunELB) SetIpAddressType(ctx context.Context, in *elbv2.SetIpAddressTypeInput, opts ...func(*elbv2.Options)) (*elbv2.SetIpAddressTypeOutput, error) { //nolint:revive // the SDK's name.
	if intent(ctx, "elasticloadbalancing", "SetIpAddressType", "load balancer IP address type set to %s", in.IpAddressType) {
		return &elbv2.SetIpAddressTypeOutput{IpAddressType: in.IpAddressType}, nil
	}
	return c.ELBAPI.SetIpAddressType(ctx, in, opts...)
}

func (c dryRunELB) SetSecurityGroups(ctx context.Context, in *elbv2.SetSecurityGroupsInput, opts ...func(*elbv2.Options)) (*elbv2.SetSecurityGroupsOutput, error) {
	if intent(ctx, "elasticloadbalancing", "SetSecurityGroups", "load balancer security groups set to %s", strings.Join(in.SecurityGroups, ",")) {
		return &elbv2.SetSecurityGroupsOutput{SecurityGroupIds: in.SecurityGroups}, nil
	}
	return c.ELBAPI.SetSecurityGroups(ctx, in, opts...)
}

func (c dryRunELB) CreateTargetGroup(ctx context.Context, in *elbv2.CreateTargetGroupInput, opts ...func(*elbv2.Options)) (*elbv2.CreateTargetGroupOutput, error) {
	if !intent(ctx, "elasticloadbalancing", "CreateTargetGroup", "target group %s created (%s:%d, %s targets)", awssdk.ToString(in.Name), in.Protocol, awssdk.ToInt32(in.Port), in.TargetType) {
		return c.ELBAPI.CreateTargetGroup(ctx, in, opts...)
	}
	name := awssdk.ToString(in.Name)
	tg := elbtypes.TargetGroup{
		TargetGroupArn: awssdk.String(dryRunID("arn:aws:elasticloadbalancing:" + name + ":targetgroup/" + name + "/")), TargetGroupName: in.Name,
		Port: in.Port, Protocol: in.Protocol, TargetType: in.TargetType, VpcId: in.VpcId, IpAddressType: in.IpAddressType,
		HealthCheckEnabled: in.HealthCheckEnabled, HealthCheckIntervalSeconds: in.HealthCheckIntervalSeconds, HealthCheckPath: in.HealthCheckPath,
		HealthCheckPort: in.HealthCheckPort, HealthCheckProtocol: in.HealthCheckProtocol, HealthCheckTimeoutSeconds: in.HealthCheckTimeoutSeconds,
		HealthyThresholdCount: in.HealthyThresholdCount, UnhealthyThresholdCount: in.UnhealthyThresholdCount, Matcher: in.Matcher,
	}
	dryRunGroups.Store(awssdk.ToString(tg.TargetGroupArn), tgAttributeDefaults(string(in.Protocol), string(in.TargetType)))
	return &elbv2.CreateTargetGroupOutput{TargetGroups: []elbtypes.TargetGroup{tg}}, nil
}

func (c dryRunELB) ModifyTargetGroup(ctx context.Context, in *elbv2.ModifyTargetGroupInput, opts ...func(*elbv2.Options)) (*elbv2.ModifyTargetGroupOutput, error) {
	if intent(ctx, "elasticloadbalancing", "ModifyTargetGroup", "target group %s health check changed", awssdk.ToString(in.TargetGroupArn)) {
		return &elbv2.ModifyTargetGroupOutput{TargetGroups: []elbtypes.TargetGroup{{TargetGroupArn: in.TargetGroupArn}}}, nil
	}
	return c.ELBAPI.ModifyTargetGroup(ctx, in, opts...)
}

// dryRunDeletedKey keys, in a dry run's own state
// (backends.DryRunOwnState: one backend call's, as before), a target group
// the run deleted: the group is still there to read, and a later step of
// the same call (the unattached groups' cleanup after an NLB replaced,
// say) would delete it again, where the real call finds it gone.
type dryRunDeletedKey struct{ arn string }

// DeleteTargetGroup under a dry run records the delete once per group (a
// second delete of it in the same run is AWS's answer for a group gone:
// nothing to do).
func (c dryRunELB) DeleteTargetGroup(ctx context.Context, in *elbv2.DeleteTargetGroupInput, opts ...func(*elbv2.Options)) (*elbv2.DeleteTargetGroupOutput, error) {
	if m := backends.DryRunOwnState(ctx); m != nil {
		if _, again := m.LoadOrStore(dryRunDeletedKey{awssdk.ToString(in.TargetGroupArn)}, true); again {
			return &elbv2.DeleteTargetGroupOutput{}, nil
		}
	}
	if intent(ctx, "elasticloadbalancing", "DeleteTargetGroup", "target group %s deleted", awssdk.ToString(in.TargetGroupArn)) {
		return &elbv2.DeleteTargetGroupOutput{}, nil
	}
	return c.ELBAPI.DeleteTargetGroup(ctx, in, opts...)
}

func (c dryRunELB) RegisterTargets(ctx context.Context, in *elbv2.RegisterTargetsInput, opts ...func(*elbv2.Options)) (*elbv2.RegisterTargetsOutput, error) {
	if intent(ctx, "elasticloadbalancing", "RegisterTargets", "%s registered in %s", plural("target", targetNames(in.Targets)), awssdk.ToString(in.TargetGroupArn)) {
		return &elbv2.RegisterTargetsOutput{}, nil
	}
	return c.ELBAPI.RegisterTargets(ctx, in, opts...)
}

func (c dryRunELB) DeregisterTargets(ctx context.Context, in *elbv2.DeregisterTargetsInput, opts ...func(*elbv2.Options)) (*elbv2.DeregisterTargetsOutput, error) {
	if intent(ctx, "elasticloadbalancing", "DeregisterTargets", "%s deregistered from %s", plural("target", targetNames(in.Targets)), awssdk.ToString(in.TargetGroupArn)) {
		return &elbv2.DeregisterTargetsOutput{}, nil
	}
	return c.ELBAPI.DeregisterTargets(ctx, in, opts...)
}

func (c dryRunELB) CreateListener(ctx context.Context, in *elbv2.CreateListenerInput, opts ...func(*elbv2.Options)) (*elbv2.CreateListenerOutput, error) {
	if !intent(ctx, "elasticloadbalancing", "CreateListener", "listener %s:%d created", in.Protocol, awssdk.ToInt32(in.Port)) {
		return c.ELBAPI.CreateListener(ctx, in, opts...)
	}
	ls := elbtypes.Listener{ListenerArn: awssdk.String(dryRunID(awssdk.ToString(in.LoadBalancerArn) + "/listener/")), LoadBalancerArn: in.LoadBalancerArn,
		Port: in.Port, Protocol: in.Protocol, DefaultActions: in.DefaultActions, Certificates: in.Certificates, SslPolicy: in.SslPolicy, AlpnPolicy: in.AlpnPolicy}
	return &elbv2.CreateListenerOutput{Listeners: []elbtypes.Listener{ls}}, nil
}

func (c dryRunELB) ModifyListener(ctx context.Context, in *elbv2.ModifyListenerInput, opts ...func(*elbv2.Options)) (*elbv2.ModifyListenerOutput, error) {
	if intent(ctx, "elasticloadbalancing", "ModifyListener", "listener %s:%d changed", in.Protocol, awssdk.ToInt32(in.Port)) {
		return &elbv2.ModifyListenerOutput{Listeners: []elbtypes.Listener{{ListenerArn: in.ListenerArn, Port: in.Port, Protocol: in.Protocol, DefaultActions: in.DefaultActions, Certificates: in.Certificates, SslPolicy: in.SslPolicy}}}, nil
	}
	return c.ELBAPI.ModifyListener(ctx, in, opts...)
}

func (c dryRunELB) DeleteListener(ctx context.Context, in *elbv2.DeleteListenerInput, opts ...func(*elbv2.Options)) (*elbv2.DeleteListenerOutput, error) {
	if intent(ctx, "elasticloadbalancing", "DeleteListener", "listener %s deleted", awssdk.ToString(in.ListenerArn)) {
		return &elbv2.DeleteListenerOutput{}, nil
	}
	return c.ELBAPI.DeleteListener(ctx, in, opts...)
}

func (c dryRunELB) AddTags(ctx context.Context, in *elbv2.AddTagsInput, opts ...func(*elbv2.Options)) (*elbv2.AddTagsOutput, error) {
	if intent(ctx, "elasticloadbalancing", "AddTags", "%s tagged (%d tags)", strings.Join(in.ResourceArns, ","), len(in.Tags)) {
		return &elbv2.AddTagsOutput{}, nil
	}
	return c.ELBAPI.AddTags(ctx, in, opts...)
}

func (c dryRunELB) RemoveTags(ctx context.Context, in *elbv2.RemoveTagsInput, opts ...func(*elbv2.Options)) (*elbv2.RemoveTagsOutput, error) {
	if intent(ctx, "elasticloadbalancing", "RemoveTags", "tags %s removed from %s", strings.Join(in.TagKeys, ","), strings.Join(in.ResourceArns, ",")) {
		return &elbv2.RemoveTagsOutput{}, nil
	}
	return c.ELBAPI.RemoveTags(ctx, in, opts...)
}

func (c dryRunELB) ModifyTargetGroupAttributes(ctx context.Context, in *elbv2.ModifyTargetGroupAttributesInput, opts ...func(*elbv2.Options)) (*elbv2.ModifyTargetGroupAttributesOutput, error) {
	if intent(ctx, "elasticloadbalancing", "ModifyTargetGroupAttributes", "target group %s attributes set: %s", awssdk.ToString(in.TargetGroupArn), tgAttrList(in.Attributes)) {
		return &elbv2.ModifyTargetGroupAttributesOutput{Attributes: in.Attributes}, nil
	}
	return c.ELBAPI.ModifyTargetGroupAttributes(ctx, in, opts...)
}

func (c dryRunELB) ModifyLoadBalancerAttributes(ctx context.Context, in *elbv2.ModifyLoadBalancerAttributesInput, opts ...func(*elbv2.Options)) (*elbv2.ModifyLoadBalancerAttributesOutput, error) {
	if intent(ctx, "elasticloadbalancing", "ModifyLoadBalancerAttributes", "load balancer attributes set: %s", lbAttrList(in.Attributes)) {
		return &elbv2.ModifyLoadBalancerAttributesOutput{Attributes: in.Attributes}, nil
	}
	return c.ELBAPI.ModifyLoadBalancerAttributes(ctx, in, opts...)
}

func tgAttrList(as []elbtypes.TargetGroupAttribute) string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = awssdk.ToString(a.Key) + "=" + awssdk.ToString(a.Value)
	}
	return strings.Join(out, ",")
}

func lbAttrList(as []elbtypes.LoadBalancerAttribute) string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = awssdk.ToString(a.Key) + "=" + awssdk.ToString(a.Value)
	}
	return strings.Join(out, ",")
}

// Reads of what the read-only mode made up: nothing there yet, and the
// attributes AWS gives a new resource.

func (c dryRunELB) DescribeLoadBalancers(ctx context.Context, in *elbv2.DescribeLoadBalancersInput, opts ...func(*elbv2.Options)) (*elbv2.DescribeLoadBalancersOutput, error) {
	if backends.DryRun(ctx) && madeUp(in.LoadBalancerArns...) {
		return &elbv2.DescribeLoadBalancersOutput{}, nil
	}
	return c.ELBAPI.DescribeLoadBalancers(ctx, in, opts...)
}

func (c dryRunELB) DescribeTargetGroups(ctx context.Context, in *elbv2.DescribeTargetGroupsInput, opts ...func(*elbv2.Options)) (*elbv2.DescribeTargetGroupsOutput, error) {
	if backends.DryRun(ctx) && (madeUp(in.TargetGroupArns...) || madeUp(awssdk.ToString(in.LoadBalancerArn))) {
		return &elbv2.DescribeTargetGroupsOutput{}, nil
	}
	return c.ELBAPI.DescribeTargetGroups(ctx, in, opts...)
}

func (c dryRunELB) DescribeTargetHealth(ctx context.Context, in *elbv2.DescribeTargetHealthInput, opts ...func(*elbv2.Options)) (*elbv2.DescribeTargetHealthOutput, error) {
	if backends.DryRun(ctx) && madeUp(awssdk.ToString(in.TargetGroupArn)) {
		return &elbv2.DescribeTargetHealthOutput{}, nil
	}
	return c.ELBAPI.DescribeTargetHealth(ctx, in, opts...)
}

func (c dryRunELB) DescribeListeners(ctx context.Context, in *elbv2.DescribeListenersInput, opts ...func(*elbv2.Options)) (*elbv2.DescribeListenersOutput, error) {
	if backends.DryRun(ctx) && (madeUp(in.ListenerArns...) || madeUp(awssdk.ToString(in.LoadBalancerArn))) {
		return &elbv2.DescribeListenersOutput{}, nil
	}
	return c.ELBAPI.DescribeListeners(ctx, in, opts...)
}

func (c dryRunELB) DescribeTags(ctx context.Context, in *elbv2.DescribeTagsInput, opts ...func(*elbv2.Options)) (*elbv2.DescribeTagsOutput, error) {
	if backends.DryRun(ctx) && madeUp(in.ResourceArns...) {
		return &elbv2.DescribeTagsOutput{}, nil
	}
	return c.ELBAPI.DescribeTags(ctx, in, opts...)
}

func (c dryRunELB) DescribeTargetGroupAttributes(ctx context.Context, in *elbv2.DescribeTargetGroupAttributesInput, opts ...func(*elbv2.Options)) (*elbv2.DescribeTargetGroupAttributesOutput, error) {
	if backends.DryRun(ctx) && madeUp(awssdk.ToString(in.TargetGroupArn)) {
		out := &elbv2.DescribeTargetGroupAttributesOutput{}
		if defaults, ok := dryRunGroups.Load(awssdk.ToString(in.TargetGroupArn)); ok {
			for _, k := range sorted(keys(defaults.(map[string]string))) {
				out.Attributes = append(out.Attributes, elbtypes.TargetGroupAttribute{Key: awssdk.String(k), Value: awssdk.String(defaults.(map[string]string)[k])})
			}
		}
		return out, nil
	}
	return c.ELBAPI.DescribeTargetGroupAttributes(ctx, in, opts...)
}

func (c dryRunELB) DescribeLoadBalancerAttributes(ctx context.Context, in *elbv2.DescribeLoadBalancerAttributesInput, opts ...func(*elbv2.Options)) (*elbv2.DescribeLoadBalancerAttributesOutput, error) {
	if backends.DryRun(ctx) && madeUp(awssdk.ToString(in.LoadBalancerArn)) {
		out := &elbv2.DescribeLoadBalancerAttributesOutput{}
		defaults := lbAttributeDefaults()
		for _, k := range sorted(keys(defaults)) {
			out.Attributes = append(out.Attributes, elbtypes.LoadBalancerAttribute{Key: awssdk.String(k), Value: awssdk.String(defaults[k])})
		}
		return out, nil
	}
	return c.ELBAPI.DescribeLoadBalancerAttributes(ctx, in, opts...)
}
