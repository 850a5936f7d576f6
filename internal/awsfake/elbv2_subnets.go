package awsfake

import (
	"fmt"
	"maps"
	"net/url"
	"slices"
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

// AddAddress makes an Elastic IP allocation ID known, as one the account
// allocated.
func (s *Server) AddAddress(allocationID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.eips == nil {
		s.eips = map[string]bool{}
	}
	s.eips[allocationID] = true
}

// checkMappings applies AWS's rules to SubnetMappings' addresses: Elastic
// IPs the account has, for internet-facing load balancers only, each used
// once; private addresses for internal ones only.
func (s *Server) checkMappings(mappings map[string]subnetMapping, scheme string) *Error {
	used := map[string]bool{}
	for _, m := range mappings {
		switch {
		case m.allocationID != "" && !s.eips[m.allocationID]:
			return errorf("AllocationIdNotFound", "The allocation ID '%s' does not exist", m.allocationID)
		case m.allocationID != "" && scheme == "internal":
			return errorf("InvalidConfigurationRequest", "Elastic IP addresses can be used only by internet-facing load balancers")
		case m.privateIPv4 != "" && scheme != "internal":
			return errorf("InvalidConfigurationRequest", "Private IPv4 addresses can be set only for internal load balancers")
		case m.allocationID != "" && used[m.allocationID]:
			return errorf("InvalidConfigurationRequest", "The allocation ID '%s' is given twice", m.allocationID)
		}
		used[m.allocationID] = m.allocationID != ""
	}
	if !slices.Contains(slices.Collect(maps.Values(used)), true) {
		return nil // no Elastic IP: nothing to look for in the others
	}
	for _, lb := range s.lbs {
		for _, m := range lb.mappings {
			if m.allocationID != "" && used[m.allocationID] {
				return errorf("InvalidConfigurationRequest", "The allocation ID '%s' is already associated", m.allocationID)
			}
		}
	}
	return nil
}

type ipAddressTypeResult struct {
	IPAddressType string `xml:"IpAddressType"`
}

// setIPAddressType changes a network load balancer between ipv4 and
// dualstack in place; dualstack needs an IPv6 CIDR on every subnet, ipv4
// no listener forwarding to an IPv6 target group (ValidationError).
func (s *Server) setIPAddressType(f url.Values) (any, *Error) {
	lb, found := s.lbs[f.Get("LoadBalancerArn")]
	if !found {
		return nil, &Error{Status: 400, Code: "LoadBalancerNotFound", Message: "One or more load balancers not found"}
	}
	t := f.Get("IpAddressType")
	if t != "ipv4" && t != "dualstack" {
		return nil, errorf("ValidationError", "IP address type '%s' is not valid for a network load balancer; use ipv4 or dualstack", t)
	}
	if t == "dualstack" {
		for _, id := range lb.subnets {
			if sn := s.subnets[id]; sn == nil || sn.IPv6CIDR == "" {
				return nil, errorf("InvalidConfigurationRequest", "Subnet '%s' has no IPv6 CIDR block", id)
			}
		}
	}
	if t == "ipv4" {
		for _, l := range s.listenersOfLB(lb.arn) {
			if s.tgs[l.tgARN] != nil && s.tgs[l.tgARN].ipAddressType == "ipv6" {
				return nil, errorf("ValidationError", "The load balancer's listener on port %d forwards to the IPv6 target group '%s': an 'ipv4' load balancer cannot have IPv6 target groups", l.port, s.tgs[l.tgARN].name)
			}
		}
	}
	lb.ipAddressType = t
	return elbResult("SetIpAddressType", ipAddressTypeResult{IPAddressType: t}), nil
}
