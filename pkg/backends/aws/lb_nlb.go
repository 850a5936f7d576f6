package aws

import (
	"context"
	"fmt"
	"sort"
	"strings"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	elbtypes "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2/types"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

// ensureLB returns the Service's NLB (lb, if it exists), creating it if
// needed. A scheme change replaces it: AWS cannot change a scheme in place,
// and the scheme is the Service's own choice. Subnets that differ are
// handled by moveLB; kept describes a subnet change the NLB was kept
// without ("" when none), for a warning once the rest is reconciled.
func (l *LoadBalancer) ensureLB(ctx context.Context, d *desiredLB, lb *elbtypes.LoadBalancer, sgIDs []string) (_ *elbtypes.LoadBalancer, kept string, _ error) {
	switch {
	case lb == nil:
		lb, err := l.createLB(ctx, d, sgIDs)
		return lb, "", err
	case string(lb.Scheme) != d.scheme:
		why := fmt.Sprintf("the Service asks for scheme %s (annotation %s or %s) and AWS cannot change the scheme of a running load balancer", d.scheme, AnnotationScheme, AnnotationInternal)
		lb, err := l.replaceLB(ctx, d, lb, sgIDs, why)
		return lb, "", err
	case equalStrings(lbSubnets(lb), d.subnets):
		return lb, "", nil
	}
	return l.moveLB(ctx, d, lb, sgIDs)
}

// moveLB brings an existing NLB's subnets towards the wanted ones. Subnets
// in zones it is not in are added in place (SetSubnets keeps the NLB and its
// DNS name). Another subnet in one of its zones, or a zone no longer wanted,
// cannot be had without disrupting traffic: when the Service's own subnet
// annotation asks for it, the NLB is replaced; when only the config's or the
// discovered subnets changed (someone tagged a subnet), the NLB is kept
// where it is and the change is returned for a warning. An NLB is never
// replaced because discovery changed.
func (l *LoadBalancer) moveLB(ctx context.Context, d *desiredLB, lb *elbtypes.LoadBalancer, sgIDs []string) (*elbtypes.LoadBalancer, string, error) {
	plan, err := l.planSubnets(ctx, lb, d.subnets)
	if err != nil {
		return nil, "", err
	}
	if len(plan.changes) > 0 && d.subnetsAnnotated {
		why := fmt.Sprintf("annotation %s asks for subnets %s (%s), which AWS cannot change on a running load balancer", AnnotationSubnets, strings.Join(d.subnets, ","), strings.Join(plan.changes, ", "))
		lb, err := l.replaceLB(ctx, d, lb, sgIDs, why)
		return lb, "", err
	}
	if len(plan.add) > 0 {
		refused, err := l.addSubnets(ctx, d, lb, plan.add)
		if err != nil {
			return nil, "", err
		}
		if refused != "" {
			plan.changes = append(plan.changes, refused)
		}
	}
	return lb, strings.Join(plan.changes, ", "), nil
}

// refusedSubnetCodes are the answers of AWS refusing subnets for an NLB
// (a constrained zone, a Local Zone, a subnet too small or gone).
var refusedSubnetCodes = map[string]bool{
	"InvalidConfigurationRequest": true, "ValidationError": true, "InvalidSubnet": true,
	"SubnetNotFound": true, "AvailabilityZoneNotSupported": true,
}

// addSubnets adds subnets in new zones to the NLB in place. When AWS
// refuses them, the NLB stays as it is: refused describes why, for the
// warning (for the Service's own annotation, it is a user error).
func (l *LoadBalancer) addSubnets(ctx context.Context, d *desiredLB, lb *elbtypes.LoadBalancer, add []string) (refused string, _ error) {
	out, err := l.elb.SetSubnets(ctx, &elbv2.SetSubnetsInput{LoadBalancerArn: lb.LoadBalancerArn, Subnets: sorted(append(lbSubnets(lb), add...))})
	switch {
	case err != nil && refusedSubnetCodes[errorCode(err)] && d.subnetsAnnotated:
		return "", annotationError(AnnotationSubnets, strings.Join(d.subnets, ","), fmt.Sprintf("AWS refused adding %v to load balancer %s: %v", add, d.names.lb, err))
	case err != nil && refusedSubnetCodes[errorCode(err)]:
		return fmt.Sprintf("AWS refused adding %v: %v", add, err), nil
	case err != nil:
		return "", fmt.Errorf("SetSubnets: %w", err)
	}
	lb.AvailabilityZones = out.AvailabilityZones
	klog.FromContext(ctx).V(2).Info("Added subnets to load balancer", "subnets", add)
	reportChange(ctx, "%s added to the load balancer", plural("subnet", add))
	return "", nil
}

// subnetPlan compares an NLB's subnets with the wanted ones, zone by zone.
type subnetPlan struct {
	// add are wanted subnets in zones the NLB is not in.
	add []string
	// changes describe what the NLB cannot take in place: another subnet
	// in one of its zones, or a zone no longer wanted.
	changes []string
}

func (l *LoadBalancer) planSubnets(ctx context.Context, lb *elbtypes.LoadBalancer, want []string) (subnetPlan, error) {
	all, err := l.vpcSubnets(ctx)
	if err != nil {
		return subnetPlan{}, err
	}
	zoneOf := map[string]string{}
	for _, sn := range all {
		zoneOf[sn.id] = sn.zone
	}
	have := map[string]string{}
	for _, az := range lb.AvailabilityZones {
		have[awssdk.ToString(az.ZoneName)] = awssdk.ToString(az.SubnetId)
	}
	var plan subnetPlan
	wanted := map[string]bool{}
	for _, id := range want {
		zone := zoneOf[id]
		wanted[zone] = true
		switch cur, in := have[zone]; {
		case zone == "":
			plan.changes = append(plan.changes, fmt.Sprintf("subnet %s is not in %s", id, l.settings.VPC))
		case !in:
			plan.add = append(plan.add, id)
		case cur != id:
			plan.changes = append(plan.changes, fmt.Sprintf("zone %s: %s instead of %s", zone, id, cur))
		}
	}
	for _, zone := range sorted(keys(have)) {
		if !wanted[zone] {
			plan.changes = append(plan.changes, fmt.Sprintf("zone %s (%s) no longer wanted", zone, have[zone]))
		}
	}
	return plan, nil
}

// replaceLB deletes the NLB and creates it again (a new DNS name), for the
// reason why, which a Warning event on the Service gives first.
func (l *LoadBalancer) replaceLB(ctx context.Context, d *desiredLB, lb *elbtypes.LoadBalancer, sgIDs []string, why string) (*elbtypes.LoadBalancer, error) {
	l.events.announce(ctx, corev1.EventTypeWarning, reasonReplacing,
		"Replacing load balancer %s (DNS name %s): %s. It is deleted and created again as %s with a new DNS name; clients following the old name lose their connections until they resolve the new one",
		awssdk.ToString(lb.LoadBalancerName), awssdk.ToString(lb.DNSName), why, d.names.lb)
	// An adopted NLB's groups (the upstream provider's names) are found
	// only through its listeners: they are read before it goes, and
	// deleted before anything else can fail (the new NLB is ours, with
	// groups of our names).
	var theirs []elbtypes.TargetGroup
	if adopted(lb, d.names) {
		var err error
		if theirs, err = l.upstreamGroupsOf(ctx, d.names, lb); err != nil {
			return nil, err
		}
	}
	_, err := l.elb.DeleteLoadBalancer(ctx, &elbv2.DeleteLoadBalancerInput{LoadBalancerArn: lb.LoadBalancerArn})
	if errorCode(err) == "OperationNotPermitted" {
		err = l.unprotectAndDelete(ctx, lb, d.lbAttrs[attrDeletionProtection] == "true")
	}
	if err != nil {
		return nil, fmt.Errorf("DeleteLoadBalancer: %w", err)
	}
	klog.FromContext(ctx).V(2).Info("Deleted load balancer to replace it", "loadBalancerARN", awssdk.ToString(lb.LoadBalancerArn))
	reportChange(ctx, "load balancer %s deleted to be replaced", awssdk.ToString(lb.LoadBalancerName))
	for _, tg := range theirs {
		if err := l.deleteTargetGroup(ctx, tg); err != nil {
			return nil, err
		}
	}
	created, err := l.createLB(ctx, d, sgIDs)
	if err == nil {
		reportChange(ctx, "load balancer %s re-created (scheme %s, subnets %s)", d.names.lb, d.scheme, strings.Join(d.subnets, ","))
	}
	return created, err
}

// subnetsKept is the warning for a subnet change the NLB was kept without.
func (l *LoadBalancer) subnetsKept(d *desiredLB, lb *elbtypes.LoadBalancer, changes string) error {
	source := "discovered subnets (tagged " + tagRoleELB + " or " + tagRoleInternalELB + ")"
	if len(l.settings.Subnets) > 0 {
		source = "config's subnets"
	}
	current := strings.Join(lbSubnets(lb), ",")
	return backends.NewUserError(reasonSubnetsKept, fmt.Errorf("the %s changed (%s), which load balancer %s cannot take without a new load balancer or dropping a zone; "+
		"it stays in %s. To move it (a new load balancer with a new DNS name), set annotation %s to the subnets you want; to keep it and silence this, set it to %s",
		source, changes, d.names.lb, current, AnnotationSubnets, current))
}

func (l *LoadBalancer) createLB(ctx context.Context, d *desiredLB, sgIDs []string) (*elbtypes.LoadBalancer, error) {
	if sgIDs == nil { // replacing an adopted NLB.
		var err error
		if sgIDs, err = l.ensureSGs(ctx, d); err != nil {
			return nil, err
		}
	}
	in := &elbv2.CreateLoadBalancerInput{
		Name:           awssdk.String(d.names.lb),
		Type:           elbtypes.LoadBalancerTypeEnumNetwork,
		Scheme:         elbtypes.LoadBalancerSchemeEnum(d.scheme),
		IpAddressType:  elbtypes.IpAddressType(d.ipType),
		SecurityGroups: sgIDs,
		Tags:           elbTags(d.tags),
	}
	if in.SubnetMappings = subnetMappings(d); in.SubnetMappings == nil {
		in.Subnets = d.subnets
	}
	out, err := l.elb.CreateLoadBalancer(ctx, in)
	if code := errorCode(err); code == "AllocationIdNotFound" || (code == "InvalidConfigurationRequest" && d.mappings != nil) {
		return nil, annotationError(AnnotationEIPAllocations, strings.Join(d.eips, ","), fmt.Sprintf("AWS refused the addresses (%v); give free Elastic IP allocations of this region", err))
	}
	if code := errorCode(err); d.ipType == "dualstack" && (code == "InvalidConfigurationRequest" || code == "InvalidSubnet") {
		return nil, annotationError(AnnotationIPAddressType, d.ipType, fmt.Sprintf("AWS refused it (%v); dual-stack needs IPv6 CIDRs on every subnet of the load balancer", err))
	}
	if err != nil {
		return nil, fmt.Errorf("CreateLoadBalancer: %w", err)
	}
	if len(out.LoadBalancers) != 1 {
		return nil, fmt.Errorf("CreateLoadBalancer %s: %d answers, want 1", d.names.lb, len(out.LoadBalancers))
	}
	klog.FromContext(ctx).V(2).Info("Created load balancer", "loadBalancerARN", awssdk.ToString(out.LoadBalancers[0].LoadBalancerArn))
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
