package aws

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	elbtypes "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2/types"
	"k8s.io/klog/v2"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

// reasonListenerNotOurs: a port of the Service is taken on its NLB by a
// listener the backend did not make (not tagged as this cluster's and
// Service's), which differs from what the port asks for; the backend never
// changes it.
const reasonListenerNotOurs = "LoadBalancerListenerNotOurs"

// listenerOwners says which listeners of the Service's NLB are the
// Service's: tagged as this cluster's and the Service's
// (kubernetes.io/cluster/<id> and kubernetes.io/service-name), as the
// backend tags every listener it creates and as the upstream provider
// (cloud-provider-aws since v1.23) tags its own. Any other listener is a
// stranger, never changed or deleted, whatever it forwards to (DESIGN.md
// §3.13). The tags are read (DescribeTags, 20 listeners a call) only for
// listeners the backend is about to change or delete: a listener already
// as the Service asks costs no read.
type listenerOwners struct {
	l    *LoadBalancer
	n    names
	ours map[string]bool // by listener ARN
}

func (l *LoadBalancer) listenerOwners(n names) *listenerOwners {
	return &listenerOwners{l: l, n: n, ours: map[string]bool{}}
}

// learn reads the tags of the listeners lss not known yet.
func (o *listenerOwners) learn(ctx context.Context, lss []*elbtypes.Listener) error {
	var arns []string
	for _, ls := range lss {
		arn := awssdk.ToString(ls.ListenerArn)
		if _, known := o.ours[arn]; !known && !slices.Contains(arns, arn) {
			arns = append(arns, arn)
		}
	}
	for len(arns) > 0 {
		batch := arns[:min(len(arns), maxTagARNs)]
		arns = arns[len(batch):]
		out, err := o.l.elb.DescribeTags(ctx, &elbv2.DescribeTagsInput{ResourceArns: batch})
		if err != nil && !isNotFound(err) {
			return fmt.Errorf("DescribeTags (listeners): %w", err)
		}
		tags := map[string]map[string]string{}
		if err == nil {
			tags = tagMaps(out)
		}
		for _, arn := range batch { // a listener deleted meanwhile is nobody's to change
			o.ours[arn] = o.l.ownedELB(tags[arn], o.n)
		}
	}
	return nil
}

// owned reports whether the listener ls is the Service's, reading its tags
// if they are not known yet.
func (o *listenerOwners) owned(ctx context.Context, ls *elbtypes.Listener) (bool, error) {
	if err := o.learn(ctx, []*elbtypes.Listener{ls}); err != nil {
		return false, err
	}
	return o.ours[awssdk.ToString(ls.ListenerArn)], nil
}

// stranger reports whether ls is known not to be the Service's.
func (o *listenerOwners) stranger(ls *elbtypes.Listener) bool {
	ours, known := o.ours[awssdk.ToString(ls.ListenerArn)]
	return known && !ours
}

// changing returns the listeners of have (the NLB's, by port) that a
// reconcile would change or delete: those on ports d does not have, and
// those on d's ports that are not as the port asks (attached: the NLB's
// target groups by name, before the reconcile). Ensure reads their owners
// once, before announcing or changing anything.
func changing(d *desiredLB, have map[int32]*elbtypes.Listener, attached map[string]elbtypes.TargetGroup) []*elbtypes.Listener {
	want := map[int32]desiredPort{}
	for _, p := range d.ports {
		want[p.port] = p
	}
	var out []*elbtypes.Listener
	for _, port := range slices.Sorted(maps.Keys(have)) {
		ls := have[port]
		p, ok := want[port]
		if !ok || !listenerIs(ls, p, awssdk.ToString(attached[p.tgName].TargetGroupArn)) {
			out = append(out, ls)
		}
	}
	return out
}

// withoutStrangers is have without the listeners known to be strangers.
func (o *listenerOwners) withoutStrangers(have map[int32]*elbtypes.Listener) map[int32]*elbtypes.Listener {
	out := map[int32]*elbtypes.Listener{}
	for port, ls := range have {
		if !o.stranger(ls) {
			out[port] = ls
		}
	}
	return out
}

// strangersUse returns the target groups (by ARN) that the NLB's listeners
// known to be strangers forward to: they stay, whoever made them, while a
// stranger uses them (AWS refuses to delete a group in use).
func (o *listenerOwners) strangersUse(have map[int32]*elbtypes.Listener) map[string]bool {
	out := map[string]bool{}
	for _, ls := range have {
		if o.stranger(ls) && forwardsTo(ls) != "" {
			out[forwardsTo(ls)] = true
		}
	}
	return out
}

// portsTakenError is the user error for the Service's ports whose
// listener is a stranger not as the port asks (taken: "port N (…)").
func portsTakenError(d *desiredLB, clusterID string, taken []string) error {
	return backends.NewUserError(reasonListenerNotOurs, fmt.Errorf("load balancer %s has listeners the backend did not make on the Service's ports (%s): they are not tagged %s and %s=%s, "+
		"and the backend never changes or deletes such a listener. Delete it to let the backend make the Service's listener, or tag it with both tags to hand it over",
		d.names.lb, strings.Join(taken, "; "), tagClusterPrefix+clusterID, tagService, d.names.service))
}

// logStranger says once per reconcile that a listener is left alone.
func logStranger(ctx context.Context, port int32, ls *elbtypes.Listener) {
	klog.FromContext(ctx).V(2).Info("Leaving a listener alone: it is not tagged as this cluster's and Service's", "port", port, "listener", awssdk.ToString(ls.ListenerArn))
}
