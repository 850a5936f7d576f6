package aws

import (
	"context"
	"fmt"
	"sort"
	"strings"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	elbtypes "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2/types"
	"github.com/go-logr/logr"
)

// ensureLB returns the Service's NLB (lb, if it exists), creating it if needed. A scheme or
// subnets that differ replace it: AWS cannot change a scheme in place, and
// a network load balancer cannot leave a zone.
func (l *LoadBalancer) ensureLB(ctx context.Context, log logr.Logger, d *desiredLB, lb *elbtypes.LoadBalancer, sgID string) (*elbtypes.LoadBalancer, error) {
	if lb != nil && string(lb.Scheme) == d.scheme && equalStrings(lbSubnets(lb), d.subnets) {
		return lb, nil
	}
	if lb != nil {
		log.V(2).Info("Replacing load balancer: scheme or subnets changed", "scheme", d.scheme, "subnets", d.subnets)
		if _, err := l.elb.DeleteLoadBalancer(ctx, &elbv2.DeleteLoadBalancerInput{LoadBalancerArn: lb.LoadBalancerArn}); err != nil {
			return nil, fmt.Errorf("DeleteLoadBalancer: %w", err)
		}
	}
	return l.createLB(ctx, log, d, sgID)
}

func (l *LoadBalancer) createLB(ctx context.Context, log logr.Logger, d *desiredLB, sgID string) (*elbtypes.LoadBalancer, error) {
	out, err := l.elb.CreateLoadBalancer(ctx, &elbv2.CreateLoadBalancerInput{
		Name:           awssdk.String(d.names.lb),
		Type:           elbtypes.LoadBalancerTypeEnumNetwork,
		Scheme:         elbtypes.LoadBalancerSchemeEnum(d.scheme),
		Subnets:        d.subnets,
		SecurityGroups: []string{sgID},
		Tags:           elbTags(d.tags),
	})
	if err != nil {
		return nil, fmt.Errorf("CreateLoadBalancer: %w", err)
	}
	if len(out.LoadBalancers) != 1 {
		return nil, fmt.Errorf("CreateLoadBalancer %s: %d answers, want 1", d.names.lb, len(out.LoadBalancers))
	}
	log.V(2).Info("Created load balancer", "loadBalancerARN", awssdk.ToString(out.LoadBalancers[0].LoadBalancerArn))
	return &out.LoadBalancers[0], nil
}

func lbSubnets(lb *elbtypes.LoadBalancer) []string {
	var out []string
	for _, az := range lb.AvailabilityZones {
		out = append(out, awssdk.ToString(az.SubnetId))
	}
	sort.Strings(out)
	return out
}

func equalStrings(a, b []string) bool {
	return strings.Join(a, ",") == strings.Join(b, ",")
}

func elbTags(m map[string]string) []elbtypes.Tag {
	var out []elbtypes.Tag
	for _, k := range sorted(keys(m)) {
		out = append(out, elbtypes.Tag{Key: awssdk.String(k), Value: awssdk.String(m[k])})
	}
	return out
}

func keys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
