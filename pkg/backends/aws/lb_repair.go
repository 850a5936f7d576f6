package aws

import (
	"context"
	"fmt"
	"sync"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	elbtypes "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2/types"
	"k8s.io/klog/v2"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

// Page sizes of the bulk reads of a repair pass: the largest each API
// takes (ELBv2 PageSize 1-400, DescribeTags 20 ARNs, EC2 MaxResults 5-1000).
const (
	lbPageSize  = 400
	tagsPerCall = 20
	sgPageSize  = 1000
	tgPageSize  = lbPageSize
)

var (
	_ backends.RepairPasser = (*LoadBalancer)(nil)
	_ backends.RepairPasser = (*Cloud)(nil)
)

// BeginRepairPass reads the backend's load balancers in bulk for a
// drift-repair pass (see LoadBalancer.BeginRepairPass).
func (c *Cloud) BeginRepairPass(ctx context.Context, clusterName string) (context.Context, func(), error) {
	return c.lb.BeginRepairPass(ctx, clusterName)
}

// BeginRepairPass reads, with bulk paginated calls, what a reconcile
// compares before it reads per load balancer: every NLB of the VPC
// (DescribeLoadBalancers, 400 a page), the tags of those (DescribeTags, 20
// ARNs a call), every target group with the load balancers it serves
// (DescribeTargetGroups, 400 a page) and every security group of the VPC
// with its rules (DescribeSecurityGroups, 1000 a page). Under the returned
// ctx, the first Ensure or Update of each Service takes its share of the
// snapshot (its NLB and tags, attached target groups, security group and
// the instances' rules from it) instead of reading them; what the snapshot
// lacks is read from AWS as usual. The share also holds the groups of the
// Service's names that no load balancer used when the pass read them: the
// pass's reconcile deletes those the Service does not use and that are its
// own (deleteUnattached), which nothing else would before the Service is
// deleted (a group a hand-made listener kept, whose listener is gone). A
// Service's share is handed out once: any later reconcile of it in the
// pass, and any reconcile or delete of it outside the pass while the pass
// runs, drops it, so nothing a mutation made stale is ever read. Listeners, target health and attributes have no
// bulk read in the ELBv2 API: they are still read per load balancer.
func (l *LoadBalancer) BeginRepairPass(ctx context.Context, _ string) (context.Context, func(), error) {
	s, err := l.readSnapshot(ctx)
	if err != nil {
		return ctx, func() {}, fmt.Errorf("reading load balancers for a repair pass: %w", err)
	}
	klog.FromContext(ctx).V(2).Info("Read load balancers for a repair pass", "loadBalancers", len(s.lbs), "securityGroups", len(s.sgsByID))
	return context.WithValue(ctx, passKey{l}, s), l.passes.Add(s), nil
}

// passKey is the ctx key of a pass's snapshot, one per backend instance:
// two backends in one router never read each other's.
type passKey struct{ l *LoadBalancer }

// viewKey is the ctx key of the Service's share of a snapshot, for the
// rest of one reconcile.
type viewKey struct{ l *LoadBalancer }

// snapshot is what a repair pass read in bulk.
type snapshot struct {
	mu sync.Mutex
	// lbs are the cluster's NLBs of the VPC, by name.
	lbs map[string]*lbEntry
	// sgsByName are the VPC's security groups by name, sgsByID by ID.
	sgsByName map[string][]ec2types.SecurityGroup
	sgsByID   map[string]ec2types.SecurityGroup
	// rulesFrom are, by source group, the rules naming it in each group.
	rulesFrom map[string]map[string]map[backendRule]bool
	// unattached are the VPC's target groups that no load balancer used.
	unattached []elbtypes.TargetGroup
	// taken are the Services (by NLB name) whose share was handed out or
	// dropped.
	taken map[string]bool
}

// lbEntry is one NLB with its tags and the target groups its listeners
// use, by name.
type lbEntry struct {
	lb   elbtypes.LoadBalancer
	tags map[string]string
	tgs  map[string]elbtypes.TargetGroup
}

// view is one Service's share of a snapshot: its NLB (by our name and the
// upstream provider's), the security groups with our group's name (the
// listing was complete: none means none), the rules from them, and the
// target groups of the Service's names (serviceGroup) that no load
// balancer used.
type view struct {
	snap       *snapshot
	lbs        map[string]*lbEntry
	sgs        []ec2types.SecurityGroup
	rulesFrom  map[string]map[string]map[backendRule]bool
	unattached []elbtypes.TargetGroup
}

// withView takes the Service's share out of every pass under way and, when
// ctx is one of this backend's passes, puts that pass's share into ctx for
// the rest of the reconcile. Outside a pass, or for a Service already
// reconciled in it, the share is only dropped.
func (l *LoadBalancer) withView(ctx context.Context, n names) context.Context {
	mine, _ := ctx.Value(passKey{l}).(*snapshot)
	var v *view
	l.passes.Each(func(s *snapshot) {
		if taken := s.take(n); s == mine {
			v = taken
		}
	})
	if v == nil {
		return ctx
	}
	return context.WithValue(ctx, viewKey{l}, v)
}

// viewOf returns the Service's share of the pass, or nil.
func (l *LoadBalancer) viewOf(ctx context.Context) *view {
	v, _ := ctx.Value(viewKey{l}).(*view)
	return v
}

// take hands out (once) the Service's share.
func (s *snapshot) take(n names) *view {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.taken[n.lb] {
		return nil
	}
	s.taken[n.lb] = true
	v := &view{snap: s, lbs: map[string]*lbEntry{}, sgs: s.sgsByName[n.sg], rulesFrom: map[string]map[string]map[backendRule]bool{}}
	for _, name := range []string{n.lb, n.upstream} {
		if e, ok := s.lbs[name]; ok {
			v.lbs[name] = e
			delete(s.lbs, name)
		}
	}
	delete(s.sgsByName, n.sg)
	for _, sg := range v.sgs {
		id := awssdk.ToString(sg.GroupId)
		v.rulesFrom[id] = s.rulesFrom[id]
		delete(s.rulesFrom, id)
	}
	for _, tg := range s.unattached {
		if serviceGroup(n, awssdk.ToString(tg.TargetGroupName)) {
			v.unattached = append(v.unattached, tg)
		}
	}
	return v
}

// groups returns the security groups with these IDs, or false when the
// snapshot lacks one of them.
func (s *snapshot) groups(ids []string) ([]ec2types.SecurityGroup, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]ec2types.SecurityGroup, 0, len(ids))
	for _, id := range ids {
		sg, ok := s.sgsByID[id]
		if !ok {
			return nil, false
		}
		out = append(out, sg)
	}
	return out, true
}

// forgetGroup drops a deleted security group from every pass under way.
func (l *LoadBalancer) forgetGroup(id string) {
	l.passes.Each(func(s *snapshot) {
		s.mu.Lock()
		delete(s.sgsByID, id)
		s.mu.Unlock()
	})
}

// entryByARN returns the share's NLB with this ARN, or nil.
func (v *view) entryByARN(arn string) *lbEntry {
	if v == nil {
		return nil
	}
	for _, e := range v.lbs {
		if awssdk.ToString(e.lb.LoadBalancerArn) == arn {
			return e
		}
	}
	return nil
}

// readSnapshot makes the bulk reads of a repair pass.
func (l *LoadBalancer) readSnapshot(ctx context.Context) (*snapshot, error) {
	lbs, err := l.listLBs(ctx)
	if err != nil {
		return nil, err
	}
	s := &snapshot{lbs: map[string]*lbEntry{}, taken: map[string]bool{}}
	if err := l.readLBTags(ctx, lbs, s); err != nil {
		return nil, err
	}
	if err := l.readTargetGroups(ctx, s); err != nil {
		return nil, err
	}
	sgs, err := l.listSecurityGroups(ctx)
	if err != nil {
		return nil, err
	}
	s.sgsByName, s.sgsByID = map[string][]ec2types.SecurityGroup{}, map[string]ec2types.SecurityGroup{}
	for _, sg := range sgs {
		s.sgsByName[awssdk.ToString(sg.GroupName)] = append(s.sgsByName[awssdk.ToString(sg.GroupName)], sg)
		s.sgsByID[awssdk.ToString(sg.GroupId)] = sg
	}
	s.rulesFrom = rulesBySource(sgs)
	return s, nil
}

// listLBs lists the VPC's network load balancers, 400 a page.
func (l *LoadBalancer) listLBs(ctx context.Context) ([]elbtypes.LoadBalancer, error) {
	var out []elbtypes.LoadBalancer
	p := elbv2.NewDescribeLoadBalancersPaginator(l.elb, &elbv2.DescribeLoadBalancersInput{PageSize: awssdk.Int32(lbPageSize)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("DescribeLoadBalancers: %w", err)
		}
		for _, lb := range page.LoadBalancers {
			if awssdk.ToString(lb.VpcId) == l.settings.VPC && lb.Type == elbtypes.LoadBalancerTypeEnumNetwork {
				out = append(out, lb)
			}
		}
	}
	return out, nil
}

// readLBTags reads the tags of lbs, 20 a call, and keeps in s those tagged
// as this cluster's.
func (l *LoadBalancer) readLBTags(ctx context.Context, lbs []elbtypes.LoadBalancer, s *snapshot) error {
	for from := 0; from < len(lbs); from += tagsPerCall {
		chunk := lbs[from:min(from+tagsPerCall, len(lbs))]
		tags, err := l.describeTags(ctx, chunk)
		if err != nil {
			return err
		}
		for _, lb := range chunk {
			m := tags[awssdk.ToString(lb.LoadBalancerArn)]
			if m[tagClusterPrefix+l.clusterID] != "" {
				s.lbs[awssdk.ToString(lb.LoadBalancerName)] = &lbEntry{lb: lb, tags: m, tgs: map[string]elbtypes.TargetGroup{}}
			}
		}
	}
	return nil
}

// describeTags returns the tags of up to 20 load balancers by ARN. One
// deleted since it was listed makes AWS refuse the call: the others are
// then asked one by one.
func (l *LoadBalancer) describeTags(ctx context.Context, lbs []elbtypes.LoadBalancer) (map[string]map[string]string, error) {
	arns := make([]string, len(lbs))
	for i, lb := range lbs {
		arns[i] = awssdk.ToString(lb.LoadBalancerArn)
	}
	out, err := l.elb.DescribeTags(ctx, &elbv2.DescribeTagsInput{ResourceArns: arns})
	if isNotFound(err) && len(lbs) > 1 {
		return l.describeTagsOneByOne(ctx, lbs)
	}
	if isNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("DescribeTags: %w", err)
	}
	return tagMaps(out), nil
}

func (l *LoadBalancer) describeTagsOneByOne(ctx context.Context, lbs []elbtypes.LoadBalancer) (map[string]map[string]string, error) {
	all := map[string]map[string]string{}
	for i := range lbs {
		one, err := l.describeTags(ctx, lbs[i:i+1])
		if err != nil {
			return nil, err
		}
		for k, v := range one {
			all[k] = v
		}
	}
	return all, nil
}

// tagMaps are DescribeTags' answers as maps by ARN.
func tagMaps(out *elbv2.DescribeTagsOutput) map[string]map[string]string {
	all := map[string]map[string]string{}
	for _, td := range out.TagDescriptions {
		m := map[string]string{}
		for _, t := range td.Tags {
			m[awssdk.ToString(t.Key)] = awssdk.ToString(t.Value)
		}
		all[awssdk.ToString(td.ResourceArn)] = m
	}
	return all
}

// readTargetGroups lists every target group, 400 a page, and files each
// under the snapshot's load balancers it serves; those of the VPC that
// serve none are kept apart (unattached).
func (l *LoadBalancer) readTargetGroups(ctx context.Context, s *snapshot) error {
	byARN := map[string]*lbEntry{}
	for _, e := range s.lbs {
		byARN[awssdk.ToString(e.lb.LoadBalancerArn)] = e
	}
	p := elbv2.NewDescribeTargetGroupsPaginator(l.elb, &elbv2.DescribeTargetGroupsInput{PageSize: awssdk.Int32(tgPageSize)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("DescribeTargetGroups: %w", err)
		}
		for _, tg := range page.TargetGroups {
			if len(tg.LoadBalancerArns) == 0 && awssdk.ToString(tg.VpcId) == l.settings.VPC {
				s.unattached = append(s.unattached, tg)
			}
			for _, arn := range tg.LoadBalancerArns {
				if e := byARN[arn]; e != nil {
					e.tgs[awssdk.ToString(tg.TargetGroupName)] = tg
				}
			}
		}
	}
	return nil
}

// listSecurityGroups lists the VPC's security groups, 1000 a page.
func (l *LoadBalancer) listSecurityGroups(ctx context.Context) ([]ec2types.SecurityGroup, error) {
	var out []ec2types.SecurityGroup
	p := ec2.NewDescribeSecurityGroupsPaginator(l.ec2, &ec2.DescribeSecurityGroupsInput{MaxResults: awssdk.Int32(sgPageSize),
		Filters: []ec2types.Filter{{Name: awssdk.String("vpc-id"), Values: []string{l.settings.VPC}}}})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("DescribeSecurityGroups: %w", err)
		}
		out = append(out, page.SecurityGroups...)
	}
	return out, nil
}

// rulesBySource indexes the single-port rules of sgs whose source is a
// security group: by source, then by the group holding them.
func rulesBySource(sgs []ec2types.SecurityGroup) map[string]map[string]map[backendRule]bool {
	out := map[string]map[string]map[backendRule]bool{}
	for _, sg := range sgs {
		for _, p := range sg.IpPermissions {
			if p.FromPort == nil || p.ToPort == nil || *p.FromPort != *p.ToPort {
				continue
			}
			for _, pair := range p.UserIdGroupPairs {
				src, g := awssdk.ToString(pair.GroupId), awssdk.ToString(sg.GroupId)
				if out[src] == nil {
					out[src] = map[string]map[backendRule]bool{}
				}
				if out[src][g] == nil {
					out[src][g] = map[backendRule]bool{}
				}
				out[src][g][backendRule{protocol: awssdk.ToString(p.IpProtocol), port: *p.FromPort}] = true
			}
		}
	}
	return out
}
