package aws

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	elbtypes "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2/types"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
)

// An NLB the upstream provider made with NLBSecurityGroupMode Managed has
// security groups: the upstream provider's own group for it (tagged
// kubernetes.io/cluster/<id>=owned) and any the Service named. Adopting
// it, the backend gives it the groups the Service asks for (its own group,
// the Service's) in one SetSecurityGroups, as for any NLB of its own, and
// deletes the upstream provider's group, which nothing else uses.

// upstreamSGDescription is the description cloud-provider-aws (v1.37.1,
// ensureNLBSecurityGroup) gives the security group it makes for an NLB
// with NLBSecurityGroupMode Managed.
const upstreamSGDescription = "[k8s] Managed SecurityGroup for LoadBalancer"

// clusterNameKey carries the cluster name the service controller passes
// (its --cluster-name), which names the upstream provider's groups.
type clusterNameKey struct{}

func withClusterName(ctx context.Context, name string) context.Context {
	return context.WithValue(ctx, clusterNameKey{}, name)
}

// upstreamSGName is the name cloud-provider-aws (v1.37.1,
// GetSecurityGroupNameForNLB) gives the Service's NLB security group:
// k8s-<namespace:8>-<name:8>-<10 hex digits of SHA-256 over the cluster
// name, the Service's name, namespace and UID>, letters and digits only.
func upstreamSGName(clusterName string, svc *corev1.Service) string {
	h := sha256.New()
	for _, s := range []string{clusterName, svc.Name, svc.Namespace, string(svc.UID)} {
		h.Write([]byte(s))
	}
	return fmt.Sprintf("k8s-%.8s-%.8s-%.10s", upstreamSanitized(svc.Namespace), upstreamSanitized(svc.Name), hex.EncodeToString(h.Sum(nil)))
}

// isUpstreamGroup reports whether sg is the group the upstream provider
// made for the Service's NLB: its name and description exactly as
// cloud-provider-aws writes them, tagged as this cluster's (owned). A
// node group made by eksctl or kops is tagged owned too, but never so
// named: it is never taken for the upstream provider's.
func (l *LoadBalancer) isUpstreamGroup(ctx context.Context, sg ec2types.SecurityGroup) bool {
	svc, _ := ctx.Value(serviceKey{}).(*corev1.Service)
	clusterName, _ := ctx.Value(clusterNameKey{}).(string)
	return svc != nil && awssdk.ToString(sg.GroupName) == upstreamSGName(clusterName, svc) &&
		awssdk.ToString(sg.Description) == upstreamSGDescription && ec2Tag(sg.Tags, tagClusterPrefix+l.clusterID) == "owned"
}

// markUpstreamGroups returns the groups of the adopted NLB lb that the
// Service does not want (want: what ensureSGs returned) and that are the
// upstream provider's own for it (isUpstreamGroup); any other group (a
// node group named by the extra-security-groups annotation, someone
// else's) is only detached. Before SetSecurityGroups detaches them, they
// are tagged as the Service's, so that they are found again for deletion
// (with the Service, if AWS refuses to delete them at once).
func (l *LoadBalancer) markUpstreamGroups(ctx context.Context, d *desiredLB, lb *elbtypes.LoadBalancer, want []string) ([]string, error) {
	if !adopted(lb, d.names) {
		return nil, nil
	}
	var gone []string
	for _, id := range lb.SecurityGroups {
		if !slices.Contains(want, id) {
			gone = append(gone, id)
		}
	}
	if len(gone) == 0 {
		return nil, nil
	}
	out, err := l.ec2.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{GroupIds: gone})
	if err != nil {
		return nil, fmt.Errorf("DescribeSecurityGroups %v: %w", gone, err)
	}
	var theirs []string
	for _, sg := range out.SecurityGroups {
		if l.isUpstreamGroup(ctx, sg) {
			theirs = append(theirs, awssdk.ToString(sg.GroupId))
		}
	}
	if len(theirs) == 0 {
		return nil, nil
	}
	if _, err := l.ec2.CreateTags(ctx, &ec2.CreateTagsInput{Resources: theirs,
		Tags: []ec2types.Tag{{Key: awssdk.String(tagService), Value: awssdk.String(d.names.service)}}}); err != nil {
		return nil, fmt.Errorf("CreateTags %v: %w", theirs, err)
	}
	reportChange(ctx, "%s of the upstream provider tagged %s=%s, to be deleted once detached", plural("security group", theirs), tagService, d.names.service)
	return theirs, nil
}

// dropUpstreamGroups deletes the upstream provider's groups of an adopted
// NLB once SetSecurityGroups detached them, with the rules in other groups
// naming them as their source. AWS may refuse for a while (the NLB's
// network interfaces still hold them): a group left is deleted with the
// Service (deleteUpstreamGroups).
func (l *LoadBalancer) dropUpstreamGroups(ctx context.Context, ids []string) {
	for _, id := range ids {
		if err := l.deleteUpstreamGroup(ctx, id); err != nil {
			klog.FromContext(ctx).Info("The upstream provider's security group is left until the Service is deleted", "securityGroup", id, "err", err.Error())
		}
	}
}

// deleteUpstreamGroups removes what the upstream provider left for the
// Service: its rules in the cluster's security groups (revokeUpstreamRules)
// and its groups that adoption tagged as the Service's (the upstream
// provider's own for it, isUpstreamGroup, tagged with the Service; the
// backend's own is deleteSG's). One DescribeSecurityGroups, of the
// cluster's groups, finds both.
func (l *LoadBalancer) deleteUpstreamGroups(ctx context.Context, n names) error {
	out, err := l.ec2.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{Filters: []ec2types.Filter{
		{Name: awssdk.String("vpc-id"), Values: []string{l.settings.VPC}},
		{Name: awssdk.String("tag-key"), Values: []string{tagClusterPrefix + l.clusterID}},
	}})
	if err != nil {
		return fmt.Errorf("DescribeSecurityGroups (the cluster's): %w", err)
	}
	if err := l.revokeUpstreamRules(ctx, out.SecurityGroups, n); err != nil {
		return err
	}
	for _, sg := range out.SecurityGroups {
		if awssdk.ToString(sg.GroupName) == n.sg || ec2Tag(sg.Tags, tagService) != n.service || !l.isUpstreamGroup(ctx, sg) {
			continue
		}
		if err := l.deleteUpstreamGroup(ctx, awssdk.ToString(sg.GroupId)); err != nil {
			return fmt.Errorf("%w (retried until AWS releases it)", err)
		}
	}
	return nil
}

func (l *LoadBalancer) deleteUpstreamGroup(ctx context.Context, id string) error {
	if err := l.revokeBackendRules(ctx, id); err != nil {
		return err
	}
	if _, err := l.ec2.DeleteSecurityGroup(ctx, &ec2.DeleteSecurityGroupInput{GroupId: awssdk.String(id)}); err != nil && !isNotFound(err) {
		return fmt.Errorf("DeleteSecurityGroup %s: %w", id, err)
	}
	l.forgetGroup(id)
	klog.FromContext(ctx).V(2).Info("Deleted the upstream provider's security group", "securityGroup", id)
	reportChange(ctx, "security group %s of the upstream provider deleted", id)
	return nil
}

// keepUpstreamGroups makes the ports of an adopted NLB keep the upstream
// provider's target group their listener forwards to, where that group is
// what the port asks for (protocol, target type, IP address type, VPC): the listener, the
// group and its targets' health stay as they are, and the group is
// converged in place (health check, attributes, targets) like one of the
// backend's. Only a group that does not fit is replaced (AWS cannot change
// a group's protocol, target type or IP address type). The group goes with the NLB when the
// Service is deleted (deleteLB).
func keepUpstreamGroups(d *desiredLB, vpc string, have map[int32]*elbtypes.Listener, attached map[string]elbtypes.TargetGroup) {
	byARN := map[string]elbtypes.TargetGroup{}
	for _, tg := range attached {
		byARN[awssdk.ToString(tg.TargetGroupArn)] = tg
	}
	for i := range d.ports {
		p := &d.ports[i]
		ls := have[p.port]
		if _, ours := attached[p.tgName]; ours || ls == nil {
			continue
		}
		tg, ok := byARN[forwardsTo(ls)]
		name := awssdk.ToString(tg.TargetGroupName)
		if ok && !strings.HasPrefix(name, d.names.tgPrefix()) && string(tg.Protocol) == p.protocol &&
			string(tg.TargetType) == d.targetType && groupFamily(tg) == d.family && awssdk.ToString(tg.VpcId) == vpc {
			p.tgName = name
		}
	}
}

// tagDetachedGroups, on an adopted NLB, names (space-separated) the
// upstream provider's target groups of the Service that a listener is
// about to move off or has moved off: written before the first listener
// moves, removed once they are deleted. A failure in between (a
// DeleteTargetGroup refused, a crash) leaves them unattached, where no
// listener finds them any more; the next Ensure finds them here and
// deletes them, and the Service's deletion finds them by upstream's name
// and the tags (scanTargetGroups).
const tagDetachedGroups = "multicloud-ccm.io/detached-target-groups"

// maxDetachedNames is how many group names (at most 32 characters each)
// fit in one tag value (256 characters).
const maxDetachedNames = 7

// recordDetached returns the groups tagDetachedGroups names on the adopted
// NLB lb, and records there, before anything moves, the upstream groups of
// attached that the ports no longer use (one AddTags, only when that adds
// a name).
func (l *LoadBalancer) recordDetached(ctx context.Context, d *desiredLB, lb *elbtypes.LoadBalancer, attached map[string]elbtypes.TargetGroup) ([]string, error) {
	tags, err := l.lbTags(ctx, lb)
	if err != nil {
		return nil, err
	}
	recorded := strings.Fields(tags[tagDetachedGroups])
	want := map[string]bool{}
	for _, p := range d.ports {
		want[p.tgName] = true
	}
	names := append([]string(nil), recorded...)
	for _, name := range sorted(mapKeys(attached)) {
		if !want[name] && !strings.HasPrefix(name, d.names.tgPrefix()) && !slices.Contains(names, name) && len(names) < maxDetachedNames {
			names = append(names, name)
		}
	}
	if len(names) == len(recorded) {
		return recorded, nil
	}
	if _, err := l.elb.AddTags(ctx, &elbv2.AddTagsInput{ResourceArns: []string{awssdk.ToString(lb.LoadBalancerArn)},
		Tags: []elbtypes.Tag{{Key: awssdk.String(tagDetachedGroups), Value: awssdk.String(strings.Join(names, " "))}}}); err != nil {
		return nil, fmt.Errorf("AddTags %s: %w", tagDetachedGroups, err)
	}
	return names, nil
}

// deleteDetached deletes the groups recorded in tagDetachedGroups that no
// listener uses any more and that are the Service's (tags), then removes
// the record. A group still attached (a listener forwards to it again) is
// kept and dropped from the record.
func (l *LoadBalancer) deleteDetached(ctx context.Context, d *desiredLB, lb *elbtypes.LoadBalancer, attached map[string]elbtypes.TargetGroup, names []string) error {
	if len(names) == 0 {
		return nil
	}
	var left []string
	for _, name := range names {
		if _, ok := attached[name]; !ok {
			left = append(left, name)
		}
	}
	var gone []elbtypes.TargetGroup
	for _, name := range left {
		out, err := l.elb.DescribeTargetGroups(ctx, &elbv2.DescribeTargetGroupsInput{Names: []string{name}})
		if isNotFound(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("DescribeTargetGroups %s: %w", name, err)
		}
		for _, tg := range out.TargetGroups {
			if len(tg.LoadBalancerArns) == 0 && awssdk.ToString(tg.VpcId) == l.settings.VPC {
				gone = append(gone, tg)
			}
		}
	}
	owned, err := l.ownedTargetGroups(ctx, d.names, gone)
	if err != nil {
		return err
	}
	for _, tg := range owned {
		if err := l.deleteTargetGroup(ctx, tg); err != nil {
			return err
		}
	}
	if _, err := l.elb.RemoveTags(ctx, &elbv2.RemoveTagsInput{ResourceArns: []string{awssdk.ToString(lb.LoadBalancerArn)}, TagKeys: []string{tagDetachedGroups}}); err != nil {
		return fmt.Errorf("RemoveTags %s: %w", tagDetachedGroups, err)
	}
	return nil
}
