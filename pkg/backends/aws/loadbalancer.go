package aws

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	elbtypes "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2/types"
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

// errOtherVPC says the NLB with the Service's name is in another VPC than
// the backend's: NLB names are unique per account and region, not per
// VPC, so two backends of one account and region in two VPCs name a
// Service's NLB alike. Like errNotOurs, nothing of it is changed or
// deleted.
var errOtherVPC = errors.New("is not in the backend's VPC")

// errOtherBackend says the NLB with the Service's name is another aws
// backend's that is live in this process in the same VPC and region:
// tagged so (tagBackend, liveOther), or, untagged (the upstream
// provider's), served by it (holderOf): the backend's name of a Service's
// NLB does not depend on the backend, so two backends of one account,
// region and VPC name it alike. Nothing of it, nor of its target groups
// and security group (named alike too), is changed or deleted.
var errOtherBackend = errors.New("is the load balancer of another backend")

// notOurs reports whether err is findLB's for an NLB with the Service's
// name that is not the backend's (errNotOurs, errOtherVPC,
// errOtherBackend).
func notOurs(err error) bool {
	return errors.Is(err, errNotOurs) || errors.Is(err, errOtherVPC) || errors.Is(err, errOtherBackend)
}

// LoadBalancer manages one NLB per Service.
type LoadBalancer struct {
	backend   string
	clusterID string
	settings  *Settings
	ec2       EC2API
	elb       ELBAPI
	instances *Instances
	subnets   subnetCache
	// passes are the repair passes under way (BeginRepairPass).
	passes backends.Passes[*snapshot]
	// subnetTTL is how long the VPC's subnet list is reused (subnetTTL).
	subnetTTL time.Duration
	// events records the replacements announced before they are made.
	events events
	// targetTypes holds each Service's target type as last chosen
	// (TargetsByAddress).
	targetTypes targetTypeMemory
	// serviceLocks: one call at a time per Service (ensure, update,
	// delete).
	serviceLocks backends.ServiceLocks
	// verified are the Services' verified views (lb_verified.go).
	verified verifiedViews
	// specs are the versions of the Services the NLBs were last
	// reconciled for (specMemory, UpdateLoadBalancer).
	specs *specMemory
	// untagged are the Services' NLBs found without a backend tag
	// (heldUntagged): the upstream provider's, adopted unchanged.
	untagged *heldUntagged
}

func newLoadBalancer(name, clusterID string, s *Settings, ec2c EC2API, elbc ELBAPI, inst *Instances) *LoadBalancer {
	return register(&LoadBalancer{backend: name, clusterID: clusterID, settings: s, ec2: ec2c, elb: elbc, instances: inst, subnetTTL: subnetTTL,
		specs: &specMemory{}, untagged: &heldUntagged{}})
}

// withService puts the Service (and its NLB's name) into ctx's logger, and
// the Service into ctx for the events announcing a replacement. The
// router's logger already carries the backend and the operation.
func withService(ctx context.Context, svc *corev1.Service, n names) context.Context {
	ctx = context.WithValue(ctx, serviceKey{}, svc)
	return klog.NewContext(ctx, klog.FromContext(ctx).WithValues("service", klog.KObj(svc), "loadBalancer", n.lb))
}

// managedElsewhere reports whether the Service's load balancer is someone
// else's (aws-load-balancer-type external or nlb-ip): the backend then
// touches nothing in AWS for it.
func managedElsewhere(svc *corev1.Service) bool {
	t, _ := AnnotationType.Get(svc.Annotations)
	return t == typeExternal || t == typeNLBIP
}

// GetLoadBalancerName returns the NLB's deterministic name.
func (l *LoadBalancer) GetLoadBalancerName(_ context.Context, _ string, svc *corev1.Service) string {
	return namesFor(l.clusterID, svc).lb
}

// GetLoadBalancer reports the NLB's status. The load balancer exists while
// any part of it is left: the NLB, its security group or a target group. A
// Service whose load balancer is managed elsewhere has none here.
func (l *LoadBalancer) GetLoadBalancer(ctx context.Context, _ string, svc *corev1.Service) (*corev1.LoadBalancerStatus, bool, error) {
	if managedElsewhere(svc) {
		return nil, false, nil
	}
	n := namesFor(l.clusterID, svc)
	lb, _, err := l.findLB(ctx, n)
	if err != nil && !notOurs(err) {
		return nil, false, err
	}
	if lb != nil {
		return statusOf(lb), true, nil
	}
	if errors.Is(err, errOtherBackend) {
		return nil, false, nil // its security group and target groups are the other backend's too
	}
	sg, err := l.findSG(ctx, n)
	if err != nil {
		return nil, false, err
	}
	if sg != nil {
		return &corev1.LoadBalancerStatus{}, true, nil
	}
	tgs, err := l.scanTargetGroups(ctx, n)
	if err != nil {
		return nil, false, err
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

// EnsureLoadBalancer creates or updates the NLB; for a Service whose load
// balancer is managed elsewhere it is ImplementedElsewhere. It changes only what
// differs; a load balancer still provisioning is a RetryError. A subnet
// change the NLB was kept without is a LoadBalancerSubnetsKept error (a
// Warning event) once the Service's status shows the NLB; before that the
// status comes first: the upstream controller writes no status with an
// error, and the NLB serves the Service all the same.
func (l *LoadBalancer) EnsureLoadBalancer(ctx context.Context, clusterName string, svc *corev1.Service, nodes []*corev1.Node) (*corev1.LoadBalancerStatus, error) {
	if managedElsewhere(svc) {
		return nil, cloudprovider.ImplementedElsewhere
	}
	unlock, err := l.serviceLocks.Lock(ctx, svc)
	if err != nil {
		return nil, err
	}
	defer unlock()
	ctx = withService(withClusterName(ctx, clusterName), svc, namesFor(l.clusterID, svc))
	lb, err := l.reconcile(ctx, svc, nodes, true)
	if ue, kept := backends.AsUserError(err); kept && (ue.Reason == reasonSubnetsKept || ue.Reason == reasonAddressesKept) && !shows(svc, lb) {
		klog.FromContext(ctx).Info("Load balancer kept in its subnets; writing its status first", "reason", ue.Reason, "err", err.Error())
		err = nil
	}
	if err != nil {
		return nil, err
	}
	if lb.State != nil && lb.State.Code == elbtypes.LoadBalancerStateEnumProvisioning {
		return nil, api.NewRetryError(fmt.Sprintf("load balancer %s is still provisioning", awssdk.ToString(lb.LoadBalancerName)), provisioningRetry)
	}
	backends.ReportLoadBalancerID(ctx, awssdk.ToString(lb.LoadBalancerArn))
	return statusOf(lb), nil
}

// reconcile makes the Service's resources match what it asks for, in
// dependency order: security group, NLB and its attributes, target groups
// (health checks, attributes, targets), listeners, then target groups no
// longer used. A subnet change the NLB
// was kept without is reported (a user error) once all of that is done.
//
// Without create (UpdateLoadBalancer's fallback) a Service with no NLB is left alone:
// upstream's node sync calls Update for Services whose delete may have just
// finished, and an NLB made then would be left behind.
//
// The Service's verified view is dropped first, and recorded again when
// the reconcile succeeds.
func (l *LoadBalancer) reconcile(ctx context.Context, svc *corev1.Service, nodes []*corev1.Node, create bool) (*elbtypes.LoadBalancer, error) {
	n := namesFor(l.clusterID, svc)
	ctx = l.withView(ctx, n)
	gen := l.dropVerified(n)
	d, existing, err := l.observe(ctx, svc, nodes)
	if err != nil || (existing == nil && !create) {
		return nil, err
	}
	return l.reconcileVerified(ctx, d, existing, gen)
}

// reconcileVerified is reconcileObserved recording, when it succeeds, the
// Service's verified view (gen: from the drop before observe).
func (l *LoadBalancer) reconcileVerified(ctx context.Context, d *desiredLB, existing *elbtypes.LoadBalancer, gen uint64) (*elbtypes.LoadBalancer, error) {
	lb, err := l.reconcileObserved(ctx, d, existing)
	if err == nil {
		l.recordVerified(ctx, d.names, gen, reconciled(d, lb, d.groupARNs))
	}
	return lb, err
}

// reconcileObserved is reconcile after observe: d is what the Service asks
// for, existing its NLB (nil: none yet).
func (l *LoadBalancer) reconcileObserved(ctx context.Context, d *desiredLB, existing *elbtypes.LoadBalancer) (*elbtypes.LoadBalancer, error) {
	ctx = withExisting(ctx, existing)
	l.specs.begin(ctx, d.spec, d.source)
	if err := l.claim(ctx, d, existing); err != nil {
		return nil, err
	}
	// The target groups are read first: one that replaces the NLB leaves
	// them unattached, and they are reused or deleted below; and IP
	// targets they have are kept.
	attached, err := l.attachedTo(ctx, existing)
	if err != nil {
		return nil, err
	}
	if err := l.keepIPTargets(ctx, d, attached); err != nil {
		return nil, err
	}
	// An adopted NLB made without security groups keeps none (AWS cannot
	// add any); ours is made only for an NLB we create (createLB makes it
	// then). One made with groups gets the Service's, and the upstream
	// provider's own group goes.
	var sgIDs, upstreamSGs []string
	if !adopted(existing, d.names) || len(existing.SecurityGroups) > 0 {
		if sgIDs, err = l.ensureSGs(ctx, d); err != nil {
			return nil, err
		}
		if upstreamSGs, err = l.markUpstreamGroups(ctx, d, existing, sgIDs); err != nil {
			return nil, err
		}
	}
	lb, kept, err := l.ensureLB(ctx, d, existing, sgIDs)
	if err != nil {
		return nil, err
	}
	fresh := existing == nil || awssdk.ToString(existing.LoadBalancerArn) != awssdk.ToString(lb.LoadBalancerArn)
	if sgIDs != nil {
		if err := l.syncSGs(ctx, d, lb, sgIDs, fresh); err != nil {
			return nil, err
		}
		l.dropUpstreamGroups(ctx, upstreamSGs)
	}
	// Dual-stack comes before the listeners may move to IPv6 target
	// groups, IPv4 after they moved off them: AWS refuses either
	// otherwise.
	if d.ipType == "dualstack" {
		if err := l.syncIPType(ctx, d, lb); err != nil {
			return nil, err
		}
	}
	if err := l.syncLBAttributes(ctx, d, lb); err != nil {
		return nil, err
	}
	missing, err := l.missingTags(ctx, d, lb, fresh)
	if err != nil {
		return nil, err
	}
	if err := l.ensureForwarding(ctx, d, lb, attached); err != nil {
		return nil, err
	}
	if err := l.syncIPType(ctx, d, lb); err != nil {
		return nil, err
	}
	if err := l.syncTags(ctx, d, lb, missing); err != nil {
		return nil, err
	}
	if kept != "" {
		return lb, l.subnetsKept(d, lb, kept)
	}
	if diffs := addressesKept(d, lb); diffs != "" {
		return lb, addressesKeptError(lb, diffs)
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
	if !d.undecided() {
		l.targetTypes.remember(svc, d.targetType, d.keepIP)
	}
	if err := l.checkGroups(ctx, d); err != nil {
		return nil, nil, err
	}
	if err := l.checkSSLPolicy(ctx, d); err != nil {
		return nil, nil, err
	}
	existing, tags, err := l.findLB(ctx, d.names)
	if err == nil || notOurs(err) {
		// A dry run's (a plan, the router's look before a move) stays in
		// the run: a backend live beside it would refuse the NLB for it.
		l.hold(ctx, d.names.service, untaggedARN(existing, tags))
	}
	d.retagBackend = existing != nil && tags[tagBackend] != l.backend && (tags[tagBackend] != "" || l.sharesVPC())
	switch {
	case errors.Is(err, errOtherVPC):
		return nil, nil, backends.NewUserError(reasonNameConflict, fmt.Errorf("%w: an NLB's name is unique per account and region, so a Service cannot have one in two VPCs of a region at once; "+
			"keep the Service on the backend of that VPC, or move it to a backend of another region or account, or let that backend delete its load balancer first", err))
	case errors.Is(err, errOtherBackend):
		return nil, nil, backends.NewUserError(reasonNameConflict, fmt.Errorf("%w: an NLB's name is unique per account and region and does not depend on the backend, "+
			"so a Service cannot move between two aws backends of one account and region (their NLB names collide); "+
			"route the Service back to that backend, or delete the Service and create it again", err))
	case errors.Is(err, errNotOurs):
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
// listeners of the NLB lb, then deletes the groups no longer used (in a
// repair pass also those no listener used when it began). An
// adopted NLB keeps the upstream provider's groups that fit; a listener
// about to move to another group is announced first. Only the Service's
// listeners (listenerOwners) are changed or deleted; a port of the
// Service held by a stranger not as the port asks is a user error once
// everything else is done.
func (l *LoadBalancer) ensureForwarding(ctx context.Context, d *desiredLB, lb *elbtypes.LoadBalancer, attached map[string]elbtypes.TargetGroup) error {
	lbARN := awssdk.ToString(lb.LoadBalancerArn)
	have, err := l.listeners(ctx, lbARN)
	if err != nil {
		return err
	}
	var detached []string
	if adopted(lb, d.names) {
		keepUpstreamGroups(d, l.settings.VPC, have, attached)
		if detached, err = l.recordDetached(ctx, d, lb, attached); err != nil {
			return err
		}
	}
	owners := l.listenerOwners(d.names)
	if err := owners.learn(ctx, changing(d, have, attached)); err != nil {
		return err
	}
	l.announceRegrouping(ctx, d, owners.withoutStrangers(have), attached)
	tgARNs, err := l.ensureTargetGroups(ctx, d, attached)
	if err != nil {
		return err
	}
	d.groupARNs = tgARNs
	inUse := owners.strangersUse(have)
	taken, err := l.ensureListeners(ctx, d, lbARN, tgARNs, have, owners)
	if err != nil {
		return err
	}
	if err := l.deleteUnused(ctx, d, attached, inUse); err != nil {
		return err
	}
	if err := l.deleteDetached(ctx, d, lb, attached, detached); err != nil {
		return err
	}
	if err := l.deleteUnattached(ctx, d, attached, detached); err != nil {
		return err
	}
	if len(taken) > 0 {
		return portsTakenError(d, l.clusterID, taken)
	}
	return nil
}

// EnsureLoadBalancerDeleted (a no-op for a load balancer managed
// elsewhere) removes every part of the Service's load
// balancer: the NLB with its listeners, its target groups (also ones a
// crash left unattached) and its security group. It is idempotent.
func (l *LoadBalancer) EnsureLoadBalancerDeleted(ctx context.Context, clusterName string, svc *corev1.Service) error {
	if managedElsewhere(svc) {
		return nil
	}
	unlock, err := l.serviceLocks.Lock(ctx, svc)
	if err != nil {
		return err
	}
	defer unlock()
	l.targetTypes.forget(svc)
	n := namesFor(l.clusterID, svc)
	l.verified.drop(n)
	if !backends.DryRun(ctx) {
		l.specs.forget(n.service)
	}
	ctx = l.withView(withService(withClusterName(ctx, clusterName), svc, n), n)
	theirs, err := l.deleteLB(ctx, n, protected(svc))
	if err == nil || notOurs(err) {
		l.hold(ctx, n.service, "")
	}
	if errors.Is(err, errOtherBackend) {
		klog.FromContext(ctx).Info("Leaving the load balancer with this Service's name, its target groups and security group alone: they are another backend's", "reason", err.Error())
		return nil
	}
	if err != nil {
		return err
	}
	tgs, err := l.scanTargetGroups(ctx, n)
	if err != nil {
		return err
	}
	tgs = append(tgs, theirs...)
	for _, tg := range tgs {
		if err := l.deleteTargetGroup(ctx, tg); err != nil {
			return err
		}
	}
	if err := l.deleteSG(ctx, n); err != nil {
		return err
	}
	return l.deleteUpstreamGroups(ctx, n)
}

// deleteLB deletes the NLB (and so its listeners) if it is ours. One
// tagged as another live backend's is errOtherBackend: the caller then
// deletes nothing else either.
//
// An adopted NLB's target groups (the upstream provider's names, which
// scanTargetGroups does not find) are returned, to be deleted after it.
func (l *LoadBalancer) deleteLB(ctx context.Context, n names, protect bool) ([]elbtypes.TargetGroup, error) {
	lb, _, err := l.findLB(ctx, n)
	if errors.Is(err, errOtherBackend) {
		return nil, err
	}
	if notOurs(err) {
		klog.FromContext(ctx).Info("Leaving a load balancer with this Service's name alone: it is not this backend's", "reason", err.Error())
		return nil, nil
	}
	if err != nil || lb == nil {
		return nil, err
	}
	var theirs []elbtypes.TargetGroup
	if adopted(lb, n) {
		if theirs, err = l.upstreamGroupsOf(ctx, n, lb); err != nil {
			return nil, err
		}
	}
	_, err = l.elb.DeleteLoadBalancer(ctx, &elbv2.DeleteLoadBalancerInput{LoadBalancerArn: lb.LoadBalancerArn})
	if errorCode(err) == "OperationNotPermitted" {
		err = l.unprotectAndDelete(ctx, lb, protect)
	}
	if err != nil && !isNotFound(err) {
		return nil, fmt.Errorf("DeleteLoadBalancer: %w", err)
	}
	klog.FromContext(ctx).V(2).Info("Deleted load balancer", "loadBalancerARN", awssdk.ToString(lb.LoadBalancerArn))
	return theirs, nil
}

// upstreamGroupsOf returns the groups the listeners of the adopted NLB lb
// use that are the upstream provider's for the Service: not of the
// backend's names, tagged as this cluster's and Service's. A group someone
// attached through a listener of their own is not among them.
func (l *LoadBalancer) upstreamGroupsOf(ctx context.Context, n names, lb *elbtypes.LoadBalancer) ([]elbtypes.TargetGroup, error) {
	attached, err := l.attachedTargetGroups(ctx, awssdk.ToString(lb.LoadBalancerArn))
	if err != nil {
		return nil, err
	}
	var theirs []elbtypes.TargetGroup
	for _, name := range sorted(mapKeys(attached)) {
		if !strings.HasPrefix(name, n.tgPrefix()) {
			theirs = append(theirs, attached[name])
		}
	}
	return l.ownedTargetGroups(ctx, n, theirs)
}

// protected reports whether the Service asks for deletion protection
// (a bad annotation counts as asking: nothing is deleted on a typo).
func protected(svc *corev1.Service) bool {
	r := newReader(svc.Annotations)
	attrs := readLBAttributes(r)
	return attrs[attrDeletionProtection] == "true" || r.Err() != nil
}

// unprotectAndDelete deletes an NLB that has deletion protection on: when
// the Service no longer asks for it, it is turned off first; while the
// Service asks for it, the NLB stays and the user is told how to let it go.
func (l *LoadBalancer) unprotectAndDelete(ctx context.Context, lb *elbtypes.LoadBalancer, protect bool) error {
	if protect {
		return backends.NewUserError(reasonDeletionProtected, fmt.Errorf("load balancer %s has deletion protection on and the Service asks for it (%s in %s); set it to false to let the load balancer be deleted or replaced",
			awssdk.ToString(lb.LoadBalancerName), attrDeletionProtection, AnnotationAttributes))
	}
	if _, err := l.elb.ModifyLoadBalancerAttributes(ctx, &elbv2.ModifyLoadBalancerAttributesInput{LoadBalancerArn: lb.LoadBalancerArn,
		Attributes: []elbtypes.LoadBalancerAttribute{{Key: awssdk.String(attrDeletionProtection), Value: awssdk.String("false")}}}); err != nil {
		return fmt.Errorf("ModifyLoadBalancerAttributes (turning deletion protection off): %w", err)
	}
	reportChange(ctx, "load-balancer deletion protection turned off to replace it")
	_, err := l.elb.DeleteLoadBalancer(ctx, &elbv2.DeleteLoadBalancerInput{LoadBalancerArn: lb.LoadBalancerArn})
	return err
}

// untaggedARN is the NLB lb's ARN when it has no backend tag (tags: its
// own), else "".
func untaggedARN(lb *elbtypes.LoadBalancer, tags map[string]string) string {
	if lb == nil || tags[tagBackend] != "" {
		return ""
	}
	return awssdk.ToString(lb.LoadBalancerArn)
}

// findLB returns the Service's NLB, nil if there is none, or errNotOurs
// (with the load balancer) if one with its name is not tagged as ours.
// Without one of our name, an NLB the upstream AWS provider made for the
// Service (its name, tagged as this cluster's and Service's) is the
// Service's NLB: it is adopted, not replaced.
//
// An NLB in another VPC than the backend's is never the backend's, tags
// or not (errOtherVPC for one of our name): another backend of the
// account and region holds it, and a move of the Service to this backend
// adopted it, then the other backend's delete at the drain's end left the
// Service with none (TestReview64MoveBetweenTwoVPCsOfOneRegion). Nor is
// one tagged as another backend's that is live in this process in the
// same VPC and region (errOtherBackend, liveOther)
// (TestReview65MoveBetweenTwoBackendsOfOneVPC); one tagged as a backend
// that is not (renamed, or removed from the config) is adopted, and the
// reconcile tags it as this backend's (from the tags it returns, the
// NLB's), so that it is not another's when a backend of that name comes
// back (TestReview65bAdoptedNLBTurnsForeignWhenItsOldTagComesBack). An
// NLB with no backend tag (the upstream provider's) that another backend
// live in the same VPC and region serves (holderOf) is errOtherBackend
// too (TestReview65cMoveOfAnAdoptedUpstreamNLBBetweenTwoBackendsOfOneVPC).
func (l *LoadBalancer) findLB(ctx context.Context, n names) (*elbtypes.LoadBalancer, map[string]string, error) {
	lb, tags, err := l.describeLB(ctx, n.lb)
	switch {
	case err != nil:
		return nil, nil, err
	case lb != nil && awssdk.ToString(lb.VpcId) != l.settings.VPC:
		return nil, nil, fmt.Errorf("backend %q: load balancer %s (%s, VPC %s) %w %s",
			l.backend, n.lb, awssdk.ToString(lb.LoadBalancerArn), awssdk.ToString(lb.VpcId), errOtherVPC, l.settings.VPC)
	case lb != nil && !l.ownedELB(tags, n):
		return nil, nil, fmt.Errorf("load balancer %s %w", n.lb, errNotOurs)
	case lb != nil:
		return l.unlessOtherBackends(ctx, lb, tags)
	}
	if lb, tags, err = l.describeLB(ctx, n.upstream); err != nil || lb == nil || !l.ownedELB(tags, n) || awssdk.ToString(lb.VpcId) != l.settings.VPC {
		return nil, nil, err
	}
	return l.unlessOtherBackends(ctx, lb, tags)
}

// unlessOtherBackends returns the NLB lb, tagged tags, or errOtherBackend
// (naming both backends) when it is another live backend's: tagged as
// its (liveOther), or untagged and served by it (holderOf).
func (l *LoadBalancer) unlessOtherBackends(ctx context.Context, lb *elbtypes.LoadBalancer, tags map[string]string) (*elbtypes.LoadBalancer, map[string]string, error) {
	other := tags[tagBackend]
	if other == "" {
		if holder := l.holderOf(ctx, awssdk.ToString(lb.LoadBalancerArn)); holder != "" {
			return nil, nil, fmt.Errorf("backend %q: load balancer %s (%s) %w %q, live in this process in the same VPC, which adopted it from the upstream provider and serves it (its next reconcile or node sync tags it %s=%s)",
				l.backend, awssdk.ToString(lb.LoadBalancerName), awssdk.ToString(lb.LoadBalancerArn), errOtherBackend, holder, tagBackend, holder)
		}
		return lb, tags, nil
	}
	if !l.liveOther(other) {
		return lb, tags, nil
	}
	return nil, nil, fmt.Errorf("backend %q: load balancer %s (%s) %w %q (tagged %s), live in this process in the same VPC (configured now, or removed by a reload moments ago)",
		l.backend, awssdk.ToString(lb.LoadBalancerName), awssdk.ToString(lb.LoadBalancerArn), errOtherBackend, other, tagBackend)
}

// adopted reports whether lb is an NLB the upstream provider made.
func adopted(lb *elbtypes.LoadBalancer, n names) bool {
	return lb != nil && awssdk.ToString(lb.LoadBalancerName) != n.lb
}

// describeLB returns the NLB called name (nil if there is none) and its
// tags.
func (l *LoadBalancer) describeLB(ctx context.Context, name string) (*elbtypes.LoadBalancer, map[string]string, error) {
	if v := l.viewOf(ctx); v != nil && v.lbs[name] != nil {
		lb := v.lbs[name].lb
		return &lb, v.lbs[name].tags, nil
	}
	out, err := l.elb.DescribeLoadBalancers(ctx, &elbv2.DescribeLoadBalancersInput{Names: []string{name}})
	if isNotFound(err) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("DescribeLoadBalancers: %w", err)
	}
	if len(out.LoadBalancers) != 1 {
		return nil, nil, fmt.Errorf("DescribeLoadBalancers %s: %d answers, want 1", name, len(out.LoadBalancers))
	}
	lb := &out.LoadBalancers[0]
	tags, err := l.elb.DescribeTags(ctx, &elbv2.DescribeTagsInput{ResourceArns: []string{awssdk.ToString(lb.LoadBalancerArn)}})
	if err != nil {
		return nil, nil, fmt.Errorf("DescribeTags: %w", err)
	}
	return lb, tagMaps(tags)[awssdk.ToString(lb.LoadBalancerArn)], nil
}

// ownedELB reports whether a load balancer's tags say it is this
// cluster's and the Service's.
func (l *LoadBalancer) ownedELB(tags map[string]string, n names) bool {
	return tags[tagClusterPrefix+l.clusterID] != "" && tags[tagService] == n.service
}
