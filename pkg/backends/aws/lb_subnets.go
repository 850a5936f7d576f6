package aws

import (
	"context"
	"fmt"
	"net"
	"sort"
	"strings"
	"sync"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

// subnetTTL is how long the VPC's subnet list is reused.
const subnetTTL = 5 * time.Minute

type subnet struct {
	id, zone string
	cidr     *net.IPNet
	// ipv6 are the subnet's associated IPv6 blocks.
	ipv6 []*net.IPNet
	tags map[string]string
}

// holds reports whether ip is in the subnet's IPv4 block or one of its
// IPv6 blocks.
func (sn subnet) holds(ip net.IP) bool {
	if ip.To4() != nil {
		return sn.cidr != nil && sn.cidr.Contains(ip)
	}
	for _, block := range sn.ipv6 {
		if block.Contains(ip) {
			return true
		}
	}
	return false
}

// subnetCache holds the VPC's subnets, listed at most once per
// LoadBalancer.subnetTTL.
type subnetCache struct {
	mu      sync.Mutex
	fetched time.Time
	subnets []subnet
}

// vpcSubnets returns the VPC's subnets, sorted by ID, listing them at most
// once per subnetTTL.
func (l *LoadBalancer) vpcSubnets(ctx context.Context) ([]subnet, error) {
	l.subnets.mu.Lock()
	defer l.subnets.mu.Unlock()
	if !l.subnets.fetched.IsZero() && time.Since(l.subnets.fetched) < l.subnetTTL {
		return l.subnets.subnets, nil
	}
	out, err := l.ec2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{Filters: []ec2types.Filter{{Name: awssdk.String("vpc-id"), Values: []string{l.settings.VPC}}}})
	if err != nil {
		return nil, fmt.Errorf("DescribeSubnets: %w", err)
	}
	var subnets []subnet
	for _, s := range out.Subnets {
		sn := subnet{id: awssdk.ToString(s.SubnetId), zone: awssdk.ToString(s.AvailabilityZone), tags: map[string]string{}}
		_, sn.cidr, _ = net.ParseCIDR(awssdk.ToString(s.CidrBlock))
		for _, a := range s.Ipv6CidrBlockAssociationSet {
			if _, block, err := net.ParseCIDR(awssdk.ToString(a.Ipv6CidrBlock)); err == nil && a.Ipv6CidrBlockState != nil && a.Ipv6CidrBlockState.State == ec2types.SubnetCidrBlockStateCodeAssociated {
				sn.ipv6 = append(sn.ipv6, block)
			}
		}
		for _, t := range s.Tags {
			sn.tags[awssdk.ToString(t.Key)] = awssdk.ToString(t.Value)
		}
		subnets = append(subnets, sn)
	}
	sort.Slice(subnets, func(i, j int) bool { return subnets[i].id < subnets[j].id })
	l.subnets.subnets, l.subnets.fetched = subnets, time.Now()
	return subnets, nil
}

// subnetsFor returns the NLB's subnets: the annotation's, else the
// config's, else those tagged for the scheme's role.
func (l *LoadBalancer) subnetsFor(ctx context.Context, svc *corev1.Service, scheme string) ([]string, error) {
	if v, ok := AnnotationSubnets.Get(svc.Annotations); ok {
		return l.annotatedSubnets(ctx, v)
	}
	if len(l.settings.Subnets) > 0 {
		return sorted(l.settings.Subnets), nil
	}
	all, err := l.vpcSubnets(ctx)
	if err != nil {
		return nil, err
	}
	return l.discoverSubnets(all, scheme)
}

// annotatedSubnets resolves IDs and Name tags, at most one per zone.
func (l *LoadBalancer) annotatedSubnets(ctx context.Context, v string) ([]string, error) {
	all, err := l.vpcSubnets(ctx)
	if err != nil {
		return nil, err
	}
	var ids []string
	zones := map[string]string{}
	for _, want := range splitList(v) {
		matches := findSubnets(all, want)
		switch {
		case len(matches) == 0:
			return nil, annotationError(AnnotationSubnets, v, fmt.Sprintf("%s is neither the ID nor the Name tag of a subnet of %s", want, l.settings.VPC))
		case len(matches) > 1:
			return nil, annotationError(AnnotationSubnets, v, fmt.Sprintf("the Name tag %s names %d subnets of %s (%s); list the subnet by its ID", want, len(matches), l.settings.VPC, strings.Join(subnetIDs(matches), ", ")))
		}
		sn := matches[0]
		if other, dup := zones[sn.zone]; dup && other != sn.id {
			return nil, annotationError(AnnotationSubnets, v, fmt.Sprintf("%s and %s are both in zone %s; list at most one subnet per zone", other, sn.id, sn.zone))
		}
		if _, dup := zones[sn.zone]; !dup {
			ids = append(ids, sn.id)
		}
		zones[sn.zone] = sn.id
	}
	if len(ids) == 0 {
		return nil, annotationError(AnnotationSubnets, v, "list at least one subnet")
	}
	return sorted(ids), nil
}

// findSubnets returns the subnet whose ID is want, else every subnet whose
// Name tag is want: a name several subnets carry is refused, as the
// upstream provider refuses it (resolveSubnetNameOrIDs), never resolved to
// one of them.
func findSubnets(all []subnet, want string) []subnet {
	var named []subnet
	for _, sn := range all {
		if sn.id == want {
			return []subnet{sn}
		}
		if sn.tags["Name"] == want {
			named = append(named, sn)
		}
	}
	return named
}

func subnetIDs(sns []subnet) []string {
	out := make([]string, len(sns))
	for i, sn := range sns {
		out[i] = sn.id
	}
	return sorted(out)
}

// discoverSubnets picks, per zone, a subnet tagged for the scheme's role:
// one tagged for this cluster if any, else one not tagged for another
// cluster; the lowest ID wins.
func (l *LoadBalancer) discoverSubnets(all []subnet, scheme string) ([]string, error) {
	role := tagRoleELB
	if scheme == schemeInternal {
		role = tagRoleInternalELB
	}
	own := tagClusterPrefix + l.clusterID
	best := map[string]subnet{}
	for _, sn := range all {
		if v, ok := sn.tags[role]; !ok || (v != "" && v != "1") || taggedForOther(sn, own) {
			continue
		}
		cur, seen := best[sn.zone]
		if !seen || (hasTag(sn, own) && !hasTag(cur, own)) {
			best[sn.zone] = sn
		}
	}
	if len(best) == 0 {
		return nil, backends.NewUserError(reasonNoSubnets, fmt.Errorf("no subnet of %s is tagged %s=1 for %s load balancers; tag subnets, list them in the config's subnets, or set annotation %s", l.settings.VPC, role, scheme, AnnotationSubnets))
	}
	var ids []string
	for _, sn := range best {
		ids = append(ids, sn.id)
	}
	return sorted(ids), nil
}

func hasTag(sn subnet, key string) bool {
	_, ok := sn.tags[key]
	return ok
}

func taggedForOther(sn subnet, own string) bool {
	for k := range sn.tags {
		if len(k) > len(tagClusterPrefix) && k[:len(tagClusterPrefix)] == tagClusterPrefix && k != own {
			return !hasTag(sn, own)
		}
	}
	return false
}

func sorted(in []string) []string {
	out := append([]string(nil), in...)
	sort.Strings(out)
	return out
}
