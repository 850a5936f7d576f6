package aws

import (
	"context"
	"errors"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	"github.com/aws/smithy-go"
)

// EC2API lists the EC2 calls the backend makes.
type EC2API interface {
	DescribeInstances(ctx context.Context, in *ec2.DescribeInstancesInput, opts ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error)
	DescribeSubnets(ctx context.Context, in *ec2.DescribeSubnetsInput, opts ...func(*ec2.Options)) (*ec2.DescribeSubnetsOutput, error)
	DescribeSecurityGroups(ctx context.Context, in *ec2.DescribeSecurityGroupsInput, opts ...func(*ec2.Options)) (*ec2.DescribeSecurityGroupsOutput, error)
	CreateSecurityGroup(ctx context.Context, in *ec2.CreateSecurityGroupInput, opts ...func(*ec2.Options)) (*ec2.CreateSecurityGroupOutput, error)
	DeleteSecurityGroup(ctx context.Context, in *ec2.DeleteSecurityGroupInput, opts ...func(*ec2.Options)) (*ec2.DeleteSecurityGroupOutput, error)
	AuthorizeSecurityGroupIngress(ctx context.Context, in *ec2.AuthorizeSecurityGroupIngressInput, opts ...func(*ec2.Options)) (*ec2.AuthorizeSecurityGroupIngressOutput, error)
	RevokeSecurityGroupIngress(ctx context.Context, in *ec2.RevokeSecurityGroupIngressInput, opts ...func(*ec2.Options)) (*ec2.RevokeSecurityGroupIngressOutput, error)
	DescribeRouteTables(ctx context.Context, in *ec2.DescribeRouteTablesInput, opts ...func(*ec2.Options)) (*ec2.DescribeRouteTablesOutput, error)
	CreateRoute(ctx context.Context, in *ec2.CreateRouteInput, opts ...func(*ec2.Options)) (*ec2.CreateRouteOutput, error)
	DeleteRoute(ctx context.Context, in *ec2.DeleteRouteInput, opts ...func(*ec2.Options)) (*ec2.DeleteRouteOutput, error)
	ModifyInstanceAttribute(ctx context.Context, in *ec2.ModifyInstanceAttributeInput, opts ...func(*ec2.Options)) (*ec2.ModifyInstanceAttributeOutput, error)
	CreateTags(ctx context.Context, in *ec2.CreateTagsInput, opts ...func(*ec2.Options)) (*ec2.CreateTagsOutput, error)
}

// ELBAPI lists the Elastic Load Balancing v2 calls the backend makes.
type ELBAPI interface {
	CreateLoadBalancer(ctx context.Context, in *elbv2.CreateLoadBalancerInput, opts ...func(*elbv2.Options)) (*elbv2.CreateLoadBalancerOutput, error)
	DescribeLoadBalancers(ctx context.Context, in *elbv2.DescribeLoadBalancersInput, opts ...func(*elbv2.Options)) (*elbv2.DescribeLoadBalancersOutput, error)
	DeleteLoadBalancer(ctx context.Context, in *elbv2.DeleteLoadBalancerInput, opts ...func(*elbv2.Options)) (*elbv2.DeleteLoadBalancerOutput, error)
	SetSubnets(ctx context.Context, in *elbv2.SetSubnetsInput, opts ...func(*elbv2.Options)) (*elbv2.SetSubnetsOutput, error)
	SetIpAddressType(ctx context.Context, in *elbv2.SetIpAddressTypeInput, opts ...func(*elbv2.Options)) (*elbv2.SetIpAddressTypeOutput, error)
	SetSecurityGroups(ctx context.Context, in *elbv2.SetSecurityGroupsInput, opts ...func(*elbv2.Options)) (*elbv2.SetSecurityGroupsOutput, error)
	CreateTargetGroup(ctx context.Context, in *elbv2.CreateTargetGroupInput, opts ...func(*elbv2.Options)) (*elbv2.CreateTargetGroupOutput, error)
	DescribeTargetGroups(ctx context.Context, in *elbv2.DescribeTargetGroupsInput, opts ...func(*elbv2.Options)) (*elbv2.DescribeTargetGroupsOutput, error)
	ModifyTargetGroup(ctx context.Context, in *elbv2.ModifyTargetGroupInput, opts ...func(*elbv2.Options)) (*elbv2.ModifyTargetGroupOutput, error)
	DeleteTargetGroup(ctx context.Context, in *elbv2.DeleteTargetGroupInput, opts ...func(*elbv2.Options)) (*elbv2.DeleteTargetGroupOutput, error)
	RegisterTargets(ctx context.Context, in *elbv2.RegisterTargetsInput, opts ...func(*elbv2.Options)) (*elbv2.RegisterTargetsOutput, error)
	DeregisterTargets(ctx context.Context, in *elbv2.DeregisterTargetsInput, opts ...func(*elbv2.Options)) (*elbv2.DeregisterTargetsOutput, error)
	DescribeTargetHealth(ctx context.Context, in *elbv2.DescribeTargetHealthInput, opts ...func(*elbv2.Options)) (*elbv2.DescribeTargetHealthOutput, error)
	CreateListener(ctx context.Context, in *elbv2.CreateListenerInput, opts ...func(*elbv2.Options)) (*elbv2.CreateListenerOutput, error)
	DescribeListeners(ctx context.Context, in *elbv2.DescribeListenersInput, opts ...func(*elbv2.Options)) (*elbv2.DescribeListenersOutput, error)
	ModifyListener(ctx context.Context, in *elbv2.ModifyListenerInput, opts ...func(*elbv2.Options)) (*elbv2.ModifyListenerOutput, error)
	DescribeSSLPolicies(ctx context.Context, in *elbv2.DescribeSSLPoliciesInput, opts ...func(*elbv2.Options)) (*elbv2.DescribeSSLPoliciesOutput, error)
	DeleteListener(ctx context.Context, in *elbv2.DeleteListenerInput, opts ...func(*elbv2.Options)) (*elbv2.DeleteListenerOutput, error)
	DescribeTags(ctx context.Context, in *elbv2.DescribeTagsInput, opts ...func(*elbv2.Options)) (*elbv2.DescribeTagsOutput, error)
	AddTags(ctx context.Context, in *elbv2.AddTagsInput, opts ...func(*elbv2.Options)) (*elbv2.AddTagsOutput, error)
	RemoveTags(ctx context.Context, in *elbv2.RemoveTagsInput, opts ...func(*elbv2.Options)) (*elbv2.RemoveTagsOutput, error)
	DescribeTargetGroupAttributes(ctx context.Context, in *elbv2.DescribeTargetGroupAttributesInput, opts ...func(*elbv2.Options)) (*elbv2.DescribeTargetGroupAttributesOutput, error)
	ModifyTargetGroupAttributes(ctx context.Context, in *elbv2.ModifyTargetGroupAttributesInput, opts ...func(*elbv2.Options)) (*elbv2.ModifyTargetGroupAttributesOutput, error)
	DescribeLoadBalancerAttributes(ctx context.Context, in *elbv2.DescribeLoadBalancerAttributesInput, opts ...func(*elbv2.Options)) (*elbv2.DescribeLoadBalancerAttributesOutput, error)
	ModifyLoadBalancerAttributes(ctx context.Context, in *elbv2.ModifyLoadBalancerAttributesInput, opts ...func(*elbv2.Options)) (*elbv2.ModifyLoadBalancerAttributesOutput, error)
}

var (
	_ EC2API = (*ec2.Client)(nil)
	_ ELBAPI = (*elbv2.Client)(nil)
)

// errNotFound marks an AWS answer that the resource does not exist.
var errNotFound = errors.New("not found")

// notFoundCodes are the AWS error codes meaning "no such resource".
var notFoundCodes = map[string]bool{
	"InvalidInstanceID.NotFound":   true,
	"InvalidGroup.NotFound":        true,
	"LoadBalancerNotFound":         true,
	"TargetGroupNotFound":          true,
	"ListenerNotFound":             true,
	"InvalidRoute.NotFound":        true,
	"InvalidRouteTableID.NotFound": true,
	"InvalidPermission.NotFound":   true,
	"InvalidSubnetID.NotFound":     true,
}

// errorCode returns the AWS error code in err's chain, or "".
func errorCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// isNotFound reports whether err says the resource does not exist.
func isNotFound(err error) bool {
	return errors.Is(err, errNotFound) || notFoundCodes[errorCode(err)]
}
