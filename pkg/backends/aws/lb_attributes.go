package aws

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	elbtypes "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2/types"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

// Target-group attributes the Service may set, and the values each takes.
const (
	attrPreserveClientIP = "preserve_client_ip.enabled"
	attrProxyProtocolV2  = "proxy_protocol_v2.enabled"
)

// attributeRule checks one attribute's value and says what it must be.
type attributeRule struct {
	valid func(string) bool
	want  string
	// number: the value is a whole number (see canonical).
	number bool
}

func oneOf(values ...string) attributeRule {
	return attributeRule{valid: func(v string) bool {
		for _, x := range values {
			if v == x {
				return true
			}
		}
		return false
	}, want: "one of " + strings.Join(values, ", ")}
}

func wholeRange(lo, hi int) attributeRule {
	return attributeRule{valid: func(v string) bool {
		n, err := strconv.Atoi(v)
		return err == nil && n >= lo && n <= hi
	}, want: fmt.Sprintf("a whole number from %d to %d", lo, hi), number: true}
}

// canonical is a valid value as AWS stores it: a number without sign or
// leading zeros (0300 and +300 are 300), so that it compares equal to
// what DescribeTargetGroupAttributes answers.
func (r attributeRule) canonical(v string) string {
	if n, err := strconv.Atoi(v); r.number && err == nil {
		return strconv.Itoa(n)
	}
	return v
}

var boolRule = oneOf("true", "false")

// tgAttributeRules are the target-group attributes of network load
// balancers the Service may set (ELBv2 API reference, TargetGroupAttribute).
var tgAttributeRules = map[string]attributeRule{
	attrPreserveClientIP:                                  boolRule,
	attrProxyProtocolV2:                                   boolRule,
	"deregistration_delay.timeout_seconds":                wholeRange(0, 3600),
	"deregistration_delay.connection_termination.enabled": boolRule,
	"stickiness.enabled":                                  boolRule,
	"stickiness.type":                                     oneOf("source_ip"),
	"load_balancing.cross_zone.enabled":                   oneOf("true", "false", "use_load_balancer_configuration"),
}

// tgAttributeDefaults are AWS's documented defaults for the attributes
// above (ELBv2 API reference, TargetGroupAttribute): what an attribute goes
// back to when the Service no longer sets it. Client IP preservation is
// off only for IP targets over TCP or TLS; connection termination at the
// end of deregistration is on for new UDP and TCP_UDP groups.
func tgAttributeDefaults(protocol, targetType string) map[string]string {
	udp := protocol == "UDP" || protocol == "TCP_UDP"
	preserve := targetType == targetInstance || udp
	return map[string]string{
		attrPreserveClientIP:                                  strconv.FormatBool(preserve),
		attrProxyProtocolV2:                                   "false",
		"deregistration_delay.timeout_seconds":                "300",
		"deregistration_delay.connection_termination.enabled": strconv.FormatBool(udp),
		"stickiness.enabled":                                  "false",
		"stickiness.type":                                     "source_ip",
		"load_balancing.cross_zone.enabled":                   "use_load_balancer_configuration",
	}
}

// readTargetGroupAttributes reads the target-group attributes the Service
// sets (AnnotationTargetGroupAttributes and AnnotationProxyProtocol).
func readTargetGroupAttributes(r *reader, svc *corev1.Service) map[string]string {
	attrs := map[string]string{}
	if r.Map(AnnotationTargetGroupAttributes, &attrs) {
		for _, k := range sorted(keys(attrs)) {
			rule, known := tgAttributeRules[k]
			switch {
			case !known:
				r.Invalid(AnnotationTargetGroupAttributes, r.raw(AnnotationTargetGroupAttributes), fmt.Sprintf("attribute %q is not one of %s", k, strings.Join(sorted(mapKeys(tgAttributeRules)), ", ")))
				delete(attrs, k)
			case !rule.valid(attrs[k]):
				r.Invalid(AnnotationTargetGroupAttributes, r.raw(AnnotationTargetGroupAttributes), fmt.Sprintf("%s must be %s", k, rule.want))
				delete(attrs, k)
			default:
				attrs[k] = rule.canonical(attrs[k])
			}
		}
	}
	if attrs[attrPreserveClientIP] == "false" && hasUDP(svc) {
		r.Invalid(AnnotationTargetGroupAttributes, r.raw(AnnotationTargetGroupAttributes), "client IP preservation cannot be turned off for UDP ports")
	}
	if v, ok := AnnotationProxyProtocol.Get(r.values); ok {
		switch {
		case v != "*":
			r.Invalid(AnnotationProxyProtocol, v, `must be "*" (proxy protocol v2 on every port)`)
		case attrs[attrProxyProtocolV2] == "false":
			r.Invalid(AnnotationProxyProtocol, v, fmt.Sprintf("contradicts %s=false in %s; remove one of them", attrProxyProtocolV2, AnnotationTargetGroupAttributes))
		default:
			attrs[attrProxyProtocolV2] = "true"
		}
	}
	return attrs
}

func hasUDP(svc *corev1.Service) bool {
	for _, p := range svc.Spec.Ports {
		if p.Protocol == corev1.ProtocolUDP {
			return true
		}
	}
	return false
}

// wantTGAttributes are one port's target-group attributes: the defaults
// with the Service's settings over them.
func wantTGAttributes(d *desiredLB, p desiredPort) map[string]string {
	want := tgAttributeDefaults(p.protocol, d.targetType)
	for k, v := range d.tgAttrs {
		want[k] = v
	}
	return want
}

// syncTGAttributes changes the group's attributes that differ, in one
// ModifyTargetGroupAttributes. They are compared with what AWS answers,
// also for a group just created: a default assumed here that AWS does not
// have (it has changed them before) would otherwise be written by the
// first Update after the create instead of by the create.
func (l *LoadBalancer) syncTGAttributes(ctx context.Context, d *desiredLB, p desiredPort, tg elbtypes.TargetGroup) error {
	want := wantTGAttributes(d, p)
	out, err := l.elb.DescribeTargetGroupAttributes(ctx, &elbv2.DescribeTargetGroupAttributesInput{TargetGroupArn: tg.TargetGroupArn})
	if err != nil {
		return fmt.Errorf("DescribeTargetGroupAttributes %s: %w", p.tgName, err)
	}
	have := map[string]string{}
	for _, a := range out.Attributes {
		have[awssdk.ToString(a.Key)] = awssdk.ToString(a.Value)
	}
	var change []elbtypes.TargetGroupAttribute
	for _, k := range sorted(keys(want)) {
		if have[k] != want[k] {
			change = append(change, elbtypes.TargetGroupAttribute{Key: awssdk.String(k), Value: awssdk.String(want[k])})
		}
	}
	if len(change) == 0 {
		return nil
	}
	if _, err := l.elb.ModifyTargetGroupAttributes(ctx, &elbv2.ModifyTargetGroupAttributesInput{TargetGroupArn: tg.TargetGroupArn, Attributes: change}); err != nil {
		return fmt.Errorf("ModifyTargetGroupAttributes %s: %w", p.tgName, err)
	}
	klog.FromContext(ctx).V(2).Info("Changed target group attributes", "targetGroup", p.tgName, "attributes", attributeList(change))
	reportChange(ctx, "target group %s attributes set: %s", p.tgName, attributeList(change))
	return nil
}

func attributeList(as []elbtypes.TargetGroupAttribute) string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = awssdk.ToString(a.Key) + "=" + awssdk.ToString(a.Value)
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}

// Load-balancer attributes the Service may set.
const (
	attrDeletionProtection = "deletion_protection.enabled"
	attrCrossZone          = "load_balancing.cross_zone.enabled"
	attrAccessLogs         = "access_logs.s3.enabled"
	attrAccessLogsBucket   = "access_logs.s3.bucket"
	attrAccessLogsPrefix   = "access_logs.s3.prefix"
	attrRoutingPolicy      = "dns_record.client_routing_policy"
)

var anyString = attributeRule{valid: func(string) bool { return true }, want: "a string"}

// lbAttributeRules are the NLB attributes the Service may set (ELBv2 API
// reference, LoadBalancerAttribute).
var lbAttributeRules = map[string]attributeRule{
	attrDeletionProtection: boolRule,
	attrCrossZone:          boolRule,
	attrAccessLogs:         boolRule,
	attrAccessLogsBucket:   anyString,
	attrAccessLogsPrefix:   anyString,
	attrRoutingPolicy:      oneOf("any_availability_zone", "availability_zone_affinity", "partial_availability_zone_affinity"),
}

// lbAttributeDefaults are AWS's defaults for a new NLB. The bucket and
// prefix are compared only while access logs are on: AWS refuses an empty
// bucket, so turning logs off leaves them as they were (as upstream does).
func lbAttributeDefaults() map[string]string {
	return map[string]string{attrDeletionProtection: "false", attrCrossZone: "false", attrAccessLogs: "false", attrRoutingPolicy: "any_availability_zone"}
}

// upstreamLBAnnotations are the upstream provider's annotations for NLB
// attributes.
var upstreamLBAnnotations = []struct {
	name annotation.Name
	attr string
}{
	{AnnotationCrossZone, attrCrossZone},
	{AnnotationAccessLogEnabled, attrAccessLogs},
	{AnnotationAccessLogBucket, attrAccessLogsBucket},
	{AnnotationAccessLogPrefix, attrAccessLogsPrefix},
}

// readLBAttributes reads the NLB attributes the Service sets, through
// AnnotationAttributes and the upstream names; the two must agree.
func readLBAttributes(r *reader) map[string]string {
	attrs := map[string]string{}
	raw := r.raw(AnnotationAttributes)
	if r.Map(AnnotationAttributes, &attrs) {
		for _, k := range sorted(keys(attrs)) {
			rule, known := lbAttributeRules[k]
			switch {
			case !known:
				r.Invalid(AnnotationAttributes, raw, fmt.Sprintf("attribute %q is not one of %s", k, strings.Join(sorted(mapKeys(lbAttributeRules)), ", ")))
				delete(attrs, k)
			case !rule.valid(attrs[k]):
				r.Invalid(AnnotationAttributes, raw, fmt.Sprintf("%s must be %s", k, rule.want))
				delete(attrs, k)
			}
		}
	}
	for _, u := range upstreamLBAnnotations {
		v, ok := u.name.Get(r.values)
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		if rule := lbAttributeRules[u.attr]; !rule.valid(v) {
			r.Invalid(u.name, v, "must be "+rule.want)
			continue
		}
		if prev, set := attrs[u.attr]; set && prev != v {
			r.Invalid(u.name, v, fmt.Sprintf("contradicts %s=%s in %s; set it in one place", u.attr, prev, AnnotationAttributes))
			continue
		}
		attrs[u.attr] = v
	}
	if attrs[attrAccessLogs] == "true" && attrs[attrAccessLogsBucket] == "" {
		r.Invalid(AnnotationAccessLogEnabled, "true", fmt.Sprintf("access logs need a bucket: set %s (or %s in %s)", AnnotationAccessLogBucket, attrAccessLogsBucket, AnnotationAttributes))
	}
	return attrs
}

func mapKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// wantLBAttributes are the NLB's attributes: the defaults with the
// Service's settings over them.
func wantLBAttributes(d *desiredLB) map[string]string {
	want := lbAttributeDefaults()
	for k, v := range d.lbAttrs {
		want[k] = v
	}
	if want[attrAccessLogs] != "true" {
		delete(want, attrAccessLogsBucket)
		delete(want, attrAccessLogsPrefix)
	} else if _, set := want[attrAccessLogsPrefix]; !set {
		want[attrAccessLogsPrefix] = ""
	}
	return want
}

// syncLBAttributes changes the NLB's attributes that differ, in one
// ModifyLoadBalancerAttributes. They are compared with what AWS answers,
// also for an NLB just created (see syncTGAttributes).
func (l *LoadBalancer) syncLBAttributes(ctx context.Context, d *desiredLB, lb *elbtypes.LoadBalancer) error {
	want := wantLBAttributes(d)
	out, err := l.elb.DescribeLoadBalancerAttributes(ctx, &elbv2.DescribeLoadBalancerAttributesInput{LoadBalancerArn: lb.LoadBalancerArn})
	if err != nil {
		return fmt.Errorf("DescribeLoadBalancerAttributes: %w", err)
	}
	have := map[string]string{}
	for _, a := range out.Attributes {
		have[awssdk.ToString(a.Key)] = awssdk.ToString(a.Value)
	}
	var change []elbtypes.LoadBalancerAttribute
	var changed []string
	for _, k := range sorted(keys(want)) {
		if have[k] != want[k] {
			change = append(change, elbtypes.LoadBalancerAttribute{Key: awssdk.String(k), Value: awssdk.String(want[k])})
			changed = append(changed, k+"="+want[k])
		}
	}
	if len(change) == 0 {
		return nil
	}
	if _, err := l.elb.ModifyLoadBalancerAttributes(ctx, &elbv2.ModifyLoadBalancerAttributesInput{LoadBalancerArn: lb.LoadBalancerArn, Attributes: change}); err != nil {
		return fmt.Errorf("ModifyLoadBalancerAttributes: %w", err)
	}
	klog.FromContext(ctx).V(2).Info("Changed load balancer attributes", "attributes", strings.Join(changed, ","))
	reportChange(ctx, "load-balancer attributes set: %s", strings.Join(changed, ","))
	return nil
}

// missingTags returns the Service's additional tags the NLB lacks (or has
// with another value); nil when none. It costs a DescribeTags only while
// the Service has additional tags; a new NLB was created with them.
func (l *LoadBalancer) missingTags(ctx context.Context, d *desiredLB, lb *elbtypes.LoadBalancer, fresh bool) (map[string]string, error) {
	if fresh || len(d.extraTags) == 0 {
		return nil, nil
	}
	have, err := l.lbTags(ctx, lb)
	if err != nil {
		return nil, err
	}
	add := map[string]string{}
	for k, v := range d.extraTags {
		if cur, ok := have[k]; !ok || cur != v {
			add[k] = v
		}
	}
	if len(add) == 0 {
		return nil, nil
	}
	return add, nil
}

// syncTags puts the tags missingTags found on everything the backend made
// for the Service (tagParts), then on the NLB in one AddTags: the NLB
// last, so that a failure half-way is found again on the next reconcile.
func (l *LoadBalancer) syncTags(ctx context.Context, d *desiredLB, lb *elbtypes.LoadBalancer, add map[string]string) error {
	if len(add) == 0 {
		return nil
	}
	if err := l.tagParts(ctx, d, awssdk.ToString(lb.LoadBalancerArn), add); err != nil {
		return err
	}
	if _, err := l.elb.AddTags(ctx, &elbv2.AddTagsInput{ResourceArns: []string{awssdk.ToString(lb.LoadBalancerArn)}, Tags: elbTags(add)}); err != nil {
		return fmt.Errorf("AddTags: %w", err)
	}
	klog.FromContext(ctx).V(2).Info("Tagged load balancer", "tags", len(add))
	reportChange(ctx, "load-balancer tags set: %s", tagList(add))
	return nil
}

// maxTagARNs is how many resources one ELBv2 AddTags takes.
const maxTagARNs = 20

// tagParts puts tags on what the backend made for the Service besides
// the NLB: the Service's listeners (listenerOwners) on its ports and
// their target groups (AddTags, 20 at a time)
// and the backend's own security group (CreateTags); never on the
// Service's own groups.
func (l *LoadBalancer) tagParts(ctx context.Context, d *desiredLB, lbARN string, add map[string]string) error {
	listeners, err := l.listeners(ctx, lbARN)
	if err != nil {
		return err
	}
	var onPorts []*elbtypes.Listener
	for _, p := range d.ports {
		if ls := listeners[p.port]; ls != nil {
			onPorts = append(onPorts, ls)
		}
	}
	owners := l.listenerOwners(d.names)
	if err := owners.learn(ctx, onPorts); err != nil {
		return err
	}
	var arns []string
	for _, ls := range onPorts { // the Service's listeners: a hand-made one is a stranger's, and so is its group
		if owners.stranger(ls) {
			continue
		}
		arns = append(arns, awssdk.ToString(ls.ListenerArn))
		if tg := forwardsTo(ls); tg != "" {
			arns = append(arns, tg)
		}
	}
	for len(arns) > 0 {
		n := min(len(arns), maxTagARNs)
		if _, err := l.elb.AddTags(ctx, &elbv2.AddTagsInput{ResourceArns: arns[:n], Tags: elbTags(add)}); err != nil {
			return fmt.Errorf("AddTags: %w", err)
		}
		arns = arns[n:]
	}
	if sg, err := l.findSG(ctx, d.names); err != nil || sg == nil {
		return err
	} else if _, err := l.ec2.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{awssdk.ToString(sg.GroupId)}, Tags: ec2Tags(add)}); err != nil {
		return fmt.Errorf("CreateTags %s: %w", awssdk.ToString(sg.GroupId), err)
	}
	reportChange(ctx, "tags set on the listeners, target groups and security group: %s", tagList(add))
	return nil
}

// ec2Tags is m as EC2 tags, sorted by key.
func ec2Tags(m map[string]string) []ec2types.Tag {
	out := make([]ec2types.Tag, 0, len(m))
	for _, k := range sorted(keys(m)) {
		out = append(out, ec2types.Tag{Key: awssdk.String(k), Value: awssdk.String(m[k])})
	}
	return out
}

// lbTags returns the NLB's tags: from a repair pass's snapshot if the
// reconcile has the NLB there, else from AWS.
func (l *LoadBalancer) lbTags(ctx context.Context, lb *elbtypes.LoadBalancer) (map[string]string, error) {
	if e := l.viewOf(ctx).entryByARN(awssdk.ToString(lb.LoadBalancerArn)); e != nil {
		return e.tags, nil
	}
	out, err := l.elb.DescribeTags(ctx, &elbv2.DescribeTagsInput{ResourceArns: []string{awssdk.ToString(lb.LoadBalancerArn)}})
	if err != nil {
		return nil, fmt.Errorf("DescribeTags: %w", err)
	}
	return tagMaps(out)[awssdk.ToString(lb.LoadBalancerArn)], nil
}

// claim tags the existing NLB lb as this backend's when d.retagBackend
// says so (observe): it names another backend, one no longer live, or
// none (an NLB the upstream provider made) while another backend is live
// in the same VPC and region. It comes before the reconcile or node sync
// changes anything, so that from then on no other backend of the VPC
// takes or deletes it (liveOther), even if this reconcile fails half-way.
// A lone backend leaves the upstream provider's NLB untagged: a switch
// from upstream changes nothing (test/upstream-aws). A plan shows the
// AddTags (the dry-run client records it), as the switch makes it
// (TestPlanMatchesSwitchAcrossClouds).
func (l *LoadBalancer) claim(ctx context.Context, d *desiredLB, lb *elbtypes.LoadBalancer) error {
	if lb == nil || !d.retagBackend {
		return nil
	}
	if _, err := l.elb.AddTags(ctx, &elbv2.AddTagsInput{ResourceArns: []string{awssdk.ToString(lb.LoadBalancerArn)},
		Tags: elbTags(map[string]string{tagBackend: l.backend})}); err != nil {
		return fmt.Errorf("AddTags %s: %w", tagBackend, err)
	}
	d.retagBackend = false
	if !backends.DryRun(ctx) {
		// Tagged: nothing left to claim, so the node sync's fast path
		// comes back at once (TestReview66bNodeSyncFastPathAfterTheClaim);
		// still held until the next look finds the tag, for a backend
		// that read it untagged a moment ago
		// (TestReview66bConcurrentEnsuresOfTwoBackendsOfOneVPC).
		l.untagged.markClaimed(d.names.service)
	}
	klog.FromContext(ctx).V(2).Info("Tagged the load balancer as this backend's", "tag", tagBackend)
	return nil
}
