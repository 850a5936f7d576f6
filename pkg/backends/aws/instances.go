package aws

import (
	"context"
	"fmt"
	"strings"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/klog/v2"
)

// ZoneIDLabel is the Node label carrying the instance's availability-zone
// ID (e.g. euw1-az1), which, unlike the zone name, is the same in every
// account.
const ZoneIDLabel = "topology.k8s.aws/zone-id"

// newNodeGrace is how long after a Node is created an instance AWS does
// not know is an error rather than "gone": EC2's API is eventually
// consistent, and a new instance can be invisible for a short while.
const newNodeGrace = 2 * time.Minute

var _ cloudprovider.InstancesV2 = (*Instances)(nil)

// Instances answers the upstream node controllers from the instance cache.
type Instances struct {
	region string
	cache  *instanceCache
	now    func() time.Time
}

func newInstances(name string, s *Settings, c EC2API) *Instances {
	return &Instances{region: s.Region, cache: newInstanceCache(name, c, s.VPC, s.InstanceCacheTTL.Duration), now: time.Now}
}

// InstanceExists is false only when AWS positively says the instance is
// gone (terminated, or unknown to a direct lookup). For a node without a
// providerID it answers whether an instance of the VPC matches the node.
func (i *Instances) InstanceExists(ctx context.Context, node *corev1.Node) (bool, error) {
	in, err := i.find(ctx, node)
	if err != nil {
		return false, i.wrap(node, err)
	}
	exists := in != nil && !isState(in, ec2types.InstanceStateNameTerminated)
	if !exists && node.Spec.ProviderID != "" && i.now().Sub(node.CreationTimestamp.Time) < newNodeGrace {
		return false, i.wrap(node, fmt.Errorf("instance %s not visible yet; the node is less than %s old", node.Spec.ProviderID, newNodeGrace))
	}
	if !exists {
		klog.FromContext(ctx).V(2).Info("Instance is gone", "node", klog.KObj(node), "providerID", node.Spec.ProviderID)
	}
	return exists, nil
}

// InstanceShutdown is true for a stopped or stopping instance, on fresh
// evidence only: a cached listing saying so may predate a restart (and the
// answer would taint a running node), so a true is confirmed by a direct
// lookup first.
func (i *Instances) InstanceShutdown(ctx context.Context, node *corev1.Node) (bool, error) {
	in, err := i.find(ctx, node)
	if err == nil && in != nil && isShutdown(in) {
		in, err = i.cache.describeOne(ctx, awssdk.ToString(in.InstanceId))
	}
	if err != nil {
		return false, i.wrap(node, err)
	}
	if in == nil {
		return false, i.wrap(node, cloudprovider.InstanceNotFound)
	}
	return isShutdown(in), nil
}

func isShutdown(in *ec2types.Instance) bool {
	return isState(in, ec2types.InstanceStateNameStopped) || isState(in, ec2types.InstanceStateNameStopping)
}

// InstanceMetadata returns the instance's providerID, type, addresses,
// zone, region and zone ID. It never returns (nil, nil).
func (i *Instances) InstanceMetadata(ctx context.Context, node *corev1.Node) (*cloudprovider.InstanceMetadata, error) {
	in, err := i.find(ctx, node)
	if err == nil && (in == nil || isState(in, ec2types.InstanceStateNameTerminated)) {
		err = cloudprovider.InstanceNotFound
	}
	if err != nil {
		return nil, i.wrap(node, err)
	}
	zone := ""
	md := &cloudprovider.InstanceMetadata{InstanceType: string(in.InstanceType), NodeAddresses: nodeAddresses(in), Region: i.region}
	if p := in.Placement; p != nil {
		zone = awssdk.ToString(p.AvailabilityZone)
		if id := awssdk.ToString(p.AvailabilityZoneId); id != "" {
			md.AdditionalLabels = map[string]string{ZoneIDLabel: id}
		}
	}
	md.Zone = zone
	md.ProviderID = providerID(zone, awssdk.ToString(in.InstanceId))
	return md, nil
}

// wrap names the node; the router's wrapper adds the backend and the
// operation.
func (i *Instances) wrap(node *corev1.Node, err error) error {
	return fmt.Errorf("node %s: %w", node.Name, err)
}

// find returns the node's instance, or nil when there is positively none.
func (i *Instances) find(ctx context.Context, node *corev1.Node) (*ec2types.Instance, error) {
	if node.Spec.ProviderID != "" {
		id, err := regionalInstanceID(node, i.region)
		if err != nil {
			return nil, err
		}
		return i.byInstanceID(ctx, id)
	}
	return i.match(ctx, node)
}

// byInstanceID serves an instance from the cache; one missing from the
// listing is looked up directly before it is called gone.
func (i *Instances) byInstanceID(ctx context.Context, id string) (*ec2types.Instance, error) {
	return i.cache.byID(ctx, id)
}

// setNodeLister makes the instance listing name the instances of the
// cluster's Nodes of this region, so the first sweep after a start is as
// cheap as the next.
func (i *Instances) setNodeLister(l corelisters.NodeLister) {
	i.cache.setNodeIDs(func() []string {
		nodes, err := l.List(labels.Everything())
		if err != nil {
			return nil
		}
		var ids []string
		for _, n := range nodes {
			if !strings.HasPrefix(n.Spec.ProviderID, Scheme+"://") {
				continue
			}
			if id, err := regionalInstanceID(n, i.region); err == nil {
				ids = append(ids, id)
			}
		}
		return ids
	})
}

// match finds the instance of a node without a providerID: by node name
// (i-…), then private DNS name (the node name or its DNS addresses), then
// private IP address. An address alone is a weak match: it claims the node
// only when none of the node's names is an EC2 name (an instance ID or a
// private DNS name such as ip-10-0-1-2.eu-west-1.compute.internal) other
// than the instance's own; a node named after an instance this backend
// does not have (one of another region, say) with an address that happens
// to be one of ours is not ours.
func (i *Instances) match(ctx context.Context, node *corev1.Node) (*ec2types.Instance, error) {
	if instanceIDRE.MatchString(node.Name) {
		return i.byInstanceID(ctx, node.Name)
	}
	names, ips := nodeNames(node)
	for _, n := range names {
		if !strings.Contains(n, ".") {
			continue
		}
		if in, err := i.cache.byKey(ctx, byDNS, filterDNS, n); err != nil || in != nil {
			return in, err
		}
	}
	for _, ip := range ips {
		in, err := i.cache.byKey(ctx, byIP, filterIP, ip)
		if err != nil {
			return nil, err
		}
		if in != nil && !otherEC2Name(names, in) {
			return in, nil
		}
	}
	return nil, nil
}

// nodeNames returns the node's name with its InternalDNS and Hostname
// addresses, and its InternalIP addresses.
func nodeNames(node *corev1.Node) (names, ips []string) {
	names = []string{node.Name}
	for _, a := range node.Status.Addresses {
		switch a.Type {
		case corev1.NodeInternalDNS, corev1.NodeHostName:
			names = append(names, a.Address)
		case corev1.NodeInternalIP:
			ips = append(ips, a.Address)
		}
	}
	return names, ips
}

// otherEC2Name reports whether one of names is an EC2 instance ID or
// private DNS name that is not in's.
func otherEC2Name(names []string, in *ec2types.Instance) bool {
	for _, n := range names {
		ec2Name := instanceIDRE.MatchString(n) || strings.HasSuffix(n, ".compute.internal") || strings.HasSuffix(n, ".ec2.internal")
		if ec2Name && n != awssdk.ToString(in.InstanceId) && n != awssdk.ToString(in.PrivateDnsName) {
			return true
		}
	}
	return false
}

func isState(in *ec2types.Instance, s ec2types.InstanceStateName) bool {
	return in.State != nil && in.State.Name == s
}

// nodeAddresses lists every private address (InternalIP), public address
// (ExternalIP), private DNS name (InternalDNS and Hostname) and public DNS
// name (ExternalDNS) of the instance, primary first, without duplicates.
func nodeAddresses(in *ec2types.Instance) []corev1.NodeAddress {
	var out []corev1.NodeAddress
	seen := map[corev1.NodeAddress]bool{}
	add := func(t corev1.NodeAddressType, v *string) {
		a := corev1.NodeAddress{Type: t, Address: awssdk.ToString(v)}
		if a.Address != "" && !seen[a] {
			seen[a] = true
			out = append(out, a)
		}
	}
	add(corev1.NodeInternalIP, in.PrivateIpAddress)
	for _, ni := range in.NetworkInterfaces {
		for _, a := range ni.PrivateIpAddresses {
			add(corev1.NodeInternalIP, a.PrivateIpAddress)
		}
	}
	add(corev1.NodeExternalIP, in.PublicIpAddress)
	for _, ni := range in.NetworkInterfaces {
		for _, a := range ni.PrivateIpAddresses {
			if a.Association != nil {
				add(corev1.NodeExternalIP, a.Association.PublicIp)
			}
		}
	}
	add(corev1.NodeInternalDNS, in.PrivateDnsName)
	add(corev1.NodeHostName, in.PrivateDnsName)
	add(corev1.NodeExternalDNS, in.PublicDnsName)
	return out
}
