package aws

import (
	"context"
	"errors"
	"fmt"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	elbtypes "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2/types"
	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/api"
	"k8s.io/klog/v2"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

// provisioningRetry is how soon the service controller asks again about a
// load balancer that is still provisioning.
const provisioningRetry = 15 * time.Second

var (
	_ cloudprovider.LoadBalancer = (*LoadBalancer)(nil)
	_ backends.NodeTargeter      = (*LoadBalancer)(nil)
)

// errNotOurs says a resource with our deterministic name is not tagged as
// this cluster's and this Service's.
var errNotOurs = errors.New("exists but is not tagged as this cluster's and Service's")

// LoadBalancer manages one NLB per Service.
type LoadBalancer struct {
	backend   string
	clusterID string
	settings  *Settings
	ec2       EC2API
	elb       ELBAPI
	instances *Instances
	subnets   subnetCache
	// subnetTTL is how long the VPC's subnet list is reused (subnetTTL).
	subnetTTL time.Duration
}

func newLoadBalancer(name, clusterID string, s *Settings, ec2c EC2API, elbc ELBAPI, inst *Instances) *LoadBalancer {
	return &LoadBalancer{backend: name, clusterID: clusterID, settings: s, ec2: ec2c, elb: elbc, instances: inst, subnetTTL: subnetTTL}
}

func (l *LoadBalancer) logger(ctx context.Context, svc *corev1.Service) logr.Logger {
	return klog.FromContext(ctx).WithValues("backend", l.backend, "service", svc.Namespace+"/"+svc.Name)
}

func (l *LoadBalancer) wrap(op string, svc *corev1.Service, err error) error {
	if err == nil {
		return nil
	}
	var re *api.RetryError
	if errors.As(err, &re) {
		return err
	}
	return fmt.Errorf("aws backend %q: %s %s/%s: %w", l.backend, op, svc.Namespace, svc.Name, err)
}

// GetLoadBalancerName returns the NLB's deterministic name.
func (l *LoadBalancer) GetLoadBalancerName(_ context.Context, _ string, svc *corev1.Service) string {
	return namesFor(l.clusterID, svc).lb
}

// GetLoadBalancer reports the NLB's status. The load balancer exists while
// any part of it is left: the NLB, its security group or a target group.
func (l *LoadBalancer) GetLoadBalancer(ctx context.Context, _ string, svc *corev1.Service) (*corev1.LoadBalancerStatus, bool, error) {
	n := namesFor(l.clusterID, svc)
	lb, err := l.findLB(ctx, n)
	if err != nil && !errors.Is(err, errNotOurs) {
		return nil, false, l.wrap("GetLoadBalancer", svc, err)
	}
	if lb != nil {
		return statusOf(lb), true, nil
	}
	sg, err := l.findSG(ctx, n)
	if err != nil {
		return nil, false, l.wrap("GetLoadBalancer", svc, err)
	}
	if sg != nil {
		return &corev1.LoadBalancerStatus{}, true, nil
	}
	tgs, err := l.scanTargetGroups(ctx, n)
	if err != nil {
		return nil, false, l.wrap("GetLoadBalancer", svc, err)
	}
	return &corev1.LoadBalancerStatus{}, len(tgs) > 0, nil
}

// shows reports whether the Service's status already names lb.
func shows(svc *corev1.Service, lb *elbtypes.LoadBalancer) bool {
	for _, ing := range svc.Status.LoadBalancer.Ingress {
		if ing.Hostname == awssdk.ToString(lb.DNSName) {
			return true
		}
	}
	return false
}

func statusOf(lb *elbtypes.LoadBalancer) *corev1.LoadBalancerStatus {
	return &corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{Hostname: awssdk.ToString(lb.DNSName)}}}
}

// EnsureLoadBalancer creates or updates the NLB. It changes only what
// differs; a load balancer still provisioning is a RetryError. A subnet
// change the NLB was kept without is a LoadBalancerSubnetsKept error (a
// Warning event) once the Service's status shows the NLB; before that the
// status comes first: the upstream controller writes no status with an
// error, and the NLB serves the Service all the same.
func (l *LoadBalancer) EnsureLoadBalancer(ctx context.Context, _ string, svc *corev1.Service, nodes []*corev1.Node) (*corev1.LoadBalancerStatus, error) {
	lb, err := l.reconcile(ctx, svc, nodes, true)
	if ue, kept := backends.AsUserError(err); kept && ue.Reason == reasonSubnetsKept && !shows(svc, lb) {
		l.logger(ctx, svc).Info("Load balancer kept in its subnets; writing its status first", "reason", ue.Reason, "err", err.Error())
		err = nil
	}
	if err != nil {
		return nil, l.wrap("EnsureLoadBalancer", svc, err)
	}
	if lb.State != nil && lb.State.Code == elbtypes.LoadBalancerStateEnumProvisioning {
		return nil, api.NewRetryError(fmt.Sprintf("aws backend %q: load balancer %s is still provisioning", l.backend, awssdk.ToString(lb.LoadBalancerName)), provisioningRetry)
	}
	return statusOf(lb), nil
}

// UpdateLoadBalancer brings targets (and anything else that drifted) in
// line with the nodes.
func (l *LoadBalancer) UpdateLoadBalancer(ctx context.Context, _ string, svc *corev1.Service, nodes []*corev1.Node) error {
	_, err := l.reconcile(ctx, svc, nodes, false)
	return l.wrap("UpdateLoadBalancer", svc, err)
}

// reconcile makes the Service's resources match what it asks for, in
// dependency order: security group, NLB, target groups and targets,
// listeners, then target groups no longer used. A subnet change the NLB
// was kept without is reported (a user error) once all of that is done.
//
// Without create (UpdateLoadBalancer) a Service with no NLB is left alone:
// upstream's node sync calls Update for Services whose delete may have just
// finished, and an NLB made then would be left behind.
func (l *LoadBalancer) reconcile(ctx context.Context, svc *corev1.Service, nodes []*corev1.Node, create bool) (*elbtypes.LoadBalancer, error) {
	d, existing, err := l.observe(ctx, svc, nodes)
	if err != nil || (existing == nil && !create) {
		return nil, err
	}
	log := l.logger(ctx, svc).WithValues("loadBalancer", d.names.lb)
	sgID, err := l.ensureSG(ctx, log, d)
	if err != nil {
		return nil, err
	}
	// The target groups are read before ensureLB: one that replaces the
	// NLB leaves them unattached, and they are reused or deleted below.
	attached, err := l.attachedTo(ctx, existing)
	if err != nil {
		return nil, err
	}
	lb, kept, err := l.ensureLB(ctx, log, d, existing, sgID)
	if err != nil {
		return nil, err
	}
	if err := l.ensureForwarding(ctx, log, d, awssdk.ToString(lb.LoadBalancerArn), attached); err != nil {
		return nil, err
	}
	if kept != "" {
		return lb, l.subnetsKept(d, lb, kept)
	}
	return lb, nil
}

// observe computes what the Service asks for and finds its NLB, if any.
func (l *LoadBalancer) observe(ctx context.Context, svc *corev1.Service, nodes []*corev1.Node) (*desiredLB, *elbtypes.LoadBalancer, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	d, err := l.desired(ctx, svc, nodes)
	if err != nil {
		return nil, nil, err
	}
	existing, err := l.findLB(ctx, d.names)
	if errors.Is(err, errNotOurs) {
		return nil, nil, backends.NewUserError(reasonNameConflict, fmt.Errorf("%w; delete or rename that load balancer", err))
	}
	return d, existing, err
}

// attachedTo returns the target groups lb's listeners use (none without lb).
func (l *LoadBalancer) attachedTo(ctx context.Context, lb *elbtypes.LoadBalancer) (map[string]elbtypes.TargetGroup, error) {
	if lb == nil {
		return map[string]elbtypes.TargetGroup{}, nil
	}
	return l.attachedTargetGroups(ctx, awssdk.ToString(lb.LoadBalancerArn))
}

// ensureForwarding makes the target groups, their targets and the
// listeners of the NLB at lbARN, then deletes the groups no longer used.
func (l *LoadBalancer) ensureForwarding(ctx context.Context, log logr.Logger, d *desiredLB, lbARN string, attached map[string]elbtypes.TargetGroup) error {
	tgARNs, err := l.ensureTargetGroups(ctx, log, d, attached)
	if err != nil {
		return err
	}
	if err := l.ensureListeners(ctx, log, d, lbARN, tgARNs); err != nil {
		return err
	}
	return l.deleteUnused(ctx, log, d, attached)
}

// EnsureLoadBalancerDeleted removes every part of the Service's load
// balancer: the NLB with its listeners, its target groups (also ones a
// crash left unattached) and its security group. It is idempotent.
func (l *LoadBalancer) EnsureLoadBalancerDeleted(ctx context.Context, _ string, svc *corev1.Service) error {
	n := namesFor(l.clusterID, svc)
	log := l.logger(ctx, svc).WithValues("loadBalancer", n.lb)
	if err := l.deleteLB(ctx, log, n); err != nil {
		return l.wrap("EnsureLoadBalancerDeleted", svc, err)
	}
	tgs, err := l.scanTargetGroups(ctx, n)
	if err != nil {
		return l.wrap("EnsureLoadBalancerDeleted", svc, err)
	}
	for _, tg := range tgs {
		if err := l.deleteTargetGroup(ctx, log, tg); err != nil {
			return l.wrap("EnsureLoadBalancerDeleted", svc, err)
		}
	}
	return l.wrap("EnsureLoadBalancerDeleted", svc, l.deleteSG(ctx, log, n))
}

// deleteLB deletes the NLB (and so its listeners) if it is ours.
func (l *LoadBalancer) deleteLB(ctx context.Context, log logr.Logger, n names) error {
	lb, err := l.findLB(ctx, n)
	if errors.Is(err, errNotOurs) {
		log.Info("Leaving a load balancer with this Service's name alone: it is not tagged as this cluster's")
		return nil
	}
	if err != nil || lb == nil {
		return err
	}
	if _, err := l.elb.DeleteLoadBalancer(ctx, &elbv2.DeleteLoadBalancerInput{LoadBalancerArn: lb.LoadBalancerArn}); err != nil && !isNotFound(err) {
		return fmt.Errorf("DeleteLoadBalancer: %w", err)
	}
	log.V(2).Info("Deleted load balancer", "loadBalancerARN", awssdk.ToString(lb.LoadBalancerArn))
	return nil
}

// findLB returns the Service's NLB, nil if there is none, or errNotOurs
// (with the load balancer) if one with its name is not tagged as ours.
func (l *LoadBalancer) findLB(ctx context.Context, n names) (*elbtypes.LoadBalancer, error) {
	out, err := l.elb.DescribeLoadBalancers(ctx, &elbv2.DescribeLoadBalancersInput{Names: []string{n.lb}})
	if isNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("DescribeLoadBalancers: %w", err)
	}
	if len(out.LoadBalancers) != 1 {
		return nil, fmt.Errorf("DescribeLoadBalancers %s: %d answers, want 1", n.lb, len(out.LoadBalancers))
	}
	lb := &out.LoadBalancers[0]
	tags, err := l.elb.DescribeTags(ctx, &elbv2.DescribeTagsInput{ResourceArns: []string{awssdk.ToString(lb.LoadBalancerArn)}})
	if err != nil {
		return nil, fmt.Errorf("DescribeTags: %w", err)
	}
	if !l.ownedELB(tags, n) {
		return nil, fmt.Errorf("load balancer %s %w", n.lb, errNotOurs)
	}
	return lb, nil
}

func (l *LoadBalancer) ownedELB(out *elbv2.DescribeTagsOutput, n names) bool {
	for _, td := range out.TagDescriptions {
		m := map[string]string{}
		for _, t := range td.Tags {
			m[awssdk.ToString(t.Key)] = awssdk.ToString(t.Value)
		}
		if m[tagClusterPrefix+l.clusterID] != "" && m[tagService] == n.service {
			return true
		}
	}
	return false
}
