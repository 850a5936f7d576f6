package awsfake

import (
	"fmt"
	"net/url"
	"sort"
)

type setSubnetsResult struct {
	AvailabilityZones []xmlAZ `xml:"AvailabilityZones>member"`
	IPAddressType     string  `xml:"IpAddressType"`
}

// setSubnets changes the subnets of a network load balancer, following the
// ELBv2 API reference and the NLB guide ("Update the Availability Zones for
// your Network Load Balancer"): the subnets must exist, be in the load
// balancer's VPC and be at most one per zone; a zone's subnet cannot be
// changed in one call (the old subnet must first be removed, and the new one
// added in a later call: changes within a zone are independent actions);
// zones may be added and, since 2025, removed. The subnets listed replace
// the enabled ones.
func (s *Server) setSubnets(f url.Values) (any, *Error) {
	lb, found := s.lbs[f.Get("LoadBalancerArn")]
	if !found {
		return nil, &Error{Status: 400, Code: "LoadBalancerNotFound", Message: fmt.Sprintf("Load balancer '%s' not found", f.Get("LoadBalancerArn"))}
	}
	subnets, vpc, _, err := s.lbSubnets(f)
	if err != nil {
		return nil, err
	}
	if vpc != lb.vpcID {
		return nil, errorf("InvalidConfigurationRequest", "The subnets must belong to the load balancer's VPC '%s'", lb.vpcID)
	}
	have := map[string]string{}
	for _, id := range lb.subnets {
		have[s.subnets[id].Zone] = id
	}
	for _, id := range subnets {
		if old, ok := have[s.subnets[id].Zone]; ok && old != id {
			return nil, errorf("InvalidConfigurationRequest", "Subnet changes within the same Availability Zone must be independent actions: remove subnet '%s' from zone '%s' before adding subnet '%s'", old, s.subnets[id].Zone, id)
		}
	}
	sort.Strings(subnets)
	lb.subnets = subnets
	res := setSubnetsResult{IPAddressType: "ipv4"}
	res.AvailabilityZones = s.lbXML(lb).AvailabilityZones
	return elbResult("SetSubnets", res), nil
}

// SetSubnetTag sets a tag on a subnet, as someone tagging a subnet in the
// console does.
func (s *Server) SetSubnetTag(id, key, value string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sn, ok := s.subnets[id]; ok {
		if sn.Tags == nil {
			sn.Tags = map[string]string{}
		}
		sn.Tags[key] = value
	}
}
