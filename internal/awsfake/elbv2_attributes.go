package awsfake

import (
	"net/url"
	"strconv"
	"strings"
)

// nlbAttributeDefaults are a network load balancer's attributes as AWS
// reports them for a new one: the attributes the ELBv2 API reference
// (LoadBalancerAttribute) lists for all load balancers, for Application
// and Network Load Balancers, and for Network Load Balancers only, with
// their documented defaults. ipv6.deny_all_igw_traffic is false for an
// internet-facing NLB and true for an internal one (see lbAttributes).
// Attributes of Application Load Balancers only (connection_logs.*,
// health_check_logs.*, idle_timeout, routing.http.*) are not an NLB's.
var nlbAttributeDefaults = map[string]string{
	"access_logs.s3.enabled":                 "false",
	"access_logs.s3.bucket":                  "",
	"access_logs.s3.prefix":                  "",
	"deletion_protection.enabled":            "false",
	"load_balancing.cross_zone.enabled":      "false",
	"ipv6.deny_all_igw_traffic":              "false",
	"dns_record.client_routing_policy":       "any_availability_zone",
	"zonal_shift.config.enabled":             "false",
	"secondary_ips.auto_assigned.per_subnet": "0",
}

// tgAttributeDefaults are a TCP/UDP/TCP_UDP/TLS target group's attributes
// as AWS reports them for a new one: those the ELBv2 API reference
// (TargetGroupAttribute) lists for all load balancers, for Application and
// Network Load Balancers, and for Network Load Balancers only, with their
// documented defaults. Two depend on the group (see tgAttributes):
// preserve_client_ip.enabled is false for an IP-target TCP or TLS group,
// true otherwise; deregistration_delay.connection_termination.enabled is
// true for a new UDP or TCP_UDP group, false otherwise.
var tgAttributeDefaults = map[string]string{
	"deregistration_delay.timeout_seconds":                                           "300",
	"deregistration_delay.connection_termination.enabled":                            "false",
	"stickiness.enabled":                                                             "false",
	"stickiness.type":                                                                "source_ip",
	"proxy_protocol_v2.enabled":                                                      "false",
	"preserve_client_ip.enabled":                                                     "true",
	"load_balancing.cross_zone.enabled":                                              "use_load_balancer_configuration",
	"target_health_state.unhealthy.connection_termination.enabled":                   "true",
	"target_health_state.unhealthy.draining_interval_seconds":                        "0",
	"target_group_health.dns_failover.minimum_healthy_targets.count":                 "1",
	"target_group_health.dns_failover.minimum_healthy_targets.percentage":            "off",
	"target_group_health.unhealthy_state_routing.minimum_healthy_targets.count":      "1",
	"target_group_health.unhealthy_state_routing.minimum_healthy_targets.percentage": "off",
}

var boolAttributes = map[string]bool{
	"access_logs.s3.enabled": true, "deletion_protection.enabled": true, "load_balancing.cross_zone.enabled": true,
	"ipv6.deny_all_igw_traffic": true, "zonal_shift.config.enabled": true, "connection_logs.s3.enabled": true,
	"health_check_logs.s3.enabled": true, "deregistration_delay.connection_termination.enabled": true, "stickiness.enabled": true,
	"proxy_protocol_v2.enabled": true, "preserve_client_ip.enabled": true,
	"target_health_state.unhealthy.connection_termination.enabled": true,
}

type xmlAttribute struct {
	Key   string `xml:"Key"`
	Value string `xml:"Value"`
}

type attributesResult struct {
	Attributes []xmlAttribute `xml:"Attributes>member"`
}

func attributesXML(attrs map[string]string) attributesResult {
	var r attributesResult
	for _, k := range sortedKeys(attrs) {
		r.Attributes = append(r.Attributes, xmlAttribute{Key: k, Value: attrs[k]})
	}
	return r
}

// readAttributes reads Attributes.member.N.Key/Value and checks each key
// is one the resource has and each value its type's: booleans true or
// false, deregistration_delay.timeout_seconds 0 to 3600, the S3 bucket set
// when its logs are enabled.
func readAttributes(f url.Values, known map[string]string) (map[string]string, *Error) {
	out := map[string]string{}
	for _, p := range items(f, "Attributes.member") {
		k, v := f.Get(p+".Key"), f.Get(p+".Value")
		if _, ok := known[k]; !ok {
			return nil, errorf("ValidationError", "Attribute key '%s' is not recognized", k)
		}
		if boolAttributes[k] && v != "true" && v != "false" {
			return nil, errorf("ValidationError", "Attribute '%s' must be 'true' or 'false', not '%s'", k, v)
		}
		if k == "deregistration_delay.timeout_seconds" {
			if n, err := strconv.Atoi(v); err != nil || n < 0 || n > 3600 {
				return nil, errorf("ValidationError", "Attribute '%s' must be an integer between 0 and 3600, not '%s'", k, v)
			}
		}
		if k == "stickiness.type" && v != "source_ip" {
			return nil, errorf("ValidationError", "Stickiness type '%s' is not supported for target groups with the TCP, UDP, TCP_UDP or TLS protocol; use source_ip", v)
		}
		out[k] = v
	}
	if len(out) == 0 {
		return nil, errorf("ValidationError", "At least one attribute must be specified")
	}
	for _, logs := range []string{"access_logs", "connection_logs", "health_check_logs"} {
		if out[logs+".s3.enabled"] == "true" && out[logs+".s3.bucket"] == "" && known[logs+".s3.bucket"] == "" {
			return nil, errorf("InvalidConfigurationRequest", "The value of '%s.s3.bucket' cannot be empty when %s are enabled", logs, strings.ReplaceAll(logs, "_", " "))
		}
	}
	return out, nil
}

func (s *Server) lbAttributes(lb *loadBalancer) map[string]string {
	if lb.attributes == nil {
		lb.attributes = copyTags(nlbAttributeDefaults)
		if lb.scheme == "internal" {
			lb.attributes["ipv6.deny_all_igw_traffic"] = "true"
		}
	}
	return lb.attributes
}

func (s *Server) tgAttributes(tg *targetGroup) map[string]string {
	if tg.attributes == nil {
		tg.attributes = copyTags(tgAttributeDefaults)
		udp := tg.protocol == "UDP" || tg.protocol == "TCP_UDP"
		if tg.targetType == "ip" && !udp {
			tg.attributes["preserve_client_ip.enabled"] = "false"
		}
		if udp {
			tg.attributes["deregistration_delay.connection_termination.enabled"] = "true"
		}
	}
	return tg.attributes
}

func (s *Server) describeLoadBalancerAttributes(f url.Values) (any, *Error) {
	lb, found := s.lbs[f.Get("LoadBalancerArn")]
	if !found {
		return nil, &Error{Status: 400, Code: "LoadBalancerNotFound", Message: "One or more load balancers not found"}
	}
	return elbResult("DescribeLoadBalancerAttributes", attributesXML(s.lbAttributes(lb))), nil
}

// modifyLoadBalancerAttributes changes the named attributes and answers
// with all of them; deletion protection refuses DeleteLoadBalancer.
func (s *Server) modifyLoadBalancerAttributes(f url.Values) (any, *Error) {
	lb, found := s.lbs[f.Get("LoadBalancerArn")]
	if !found {
		return nil, &Error{Status: 400, Code: "LoadBalancerNotFound", Message: "One or more load balancers not found"}
	}
	attrs := s.lbAttributes(lb)
	set, err := readAttributes(f, attrs)
	if err != nil {
		return nil, err
	}
	for k, v := range set {
		attrs[k] = v
	}
	return elbResult("ModifyLoadBalancerAttributes", attributesXML(attrs)), nil
}

func (s *Server) describeTargetGroupAttributes(f url.Values) (any, *Error) {
	tg, found := s.tgs[f.Get("TargetGroupArn")]
	if !found {
		return nil, &Error{Status: 400, Code: "TargetGroupNotFound", Message: "One or more target groups not found"}
	}
	return elbResult("DescribeTargetGroupAttributes", attributesXML(s.tgAttributes(tg))), nil
}

// modifyTargetGroupAttributes changes the named attributes and answers with
// all of them. A changed deregistration delay applies to targets
// deregistered afterwards.
func (s *Server) modifyTargetGroupAttributes(f url.Values) (any, *Error) {
	tg, found := s.tgs[f.Get("TargetGroupArn")]
	if !found {
		return nil, &Error{Status: 400, Code: "TargetGroupNotFound", Message: "One or more target groups not found"}
	}
	attrs := s.tgAttributes(tg)
	set, err := readAttributes(f, attrs)
	if err != nil {
		return nil, err
	}
	if set["proxy_protocol_v2.enabled"] == "true" && tg.protocol == "UDP" {
		return nil, errorf("InvalidConfigurationRequest", "Proxy protocol v2 is not supported for target groups with the UDP protocol")
	}
	for k, v := range set {
		attrs[k] = v
	}
	return elbResult("ModifyTargetGroupAttributes", attributesXML(attrs)), nil
}

type securityGroupsResult struct {
	SecurityGroupIDs []string `xml:"SecurityGroupIds>member"`
}

// setSecurityGroups replaces a network load balancer's security groups. As
// in AWS, one created without security groups cannot get any, and one
// created with them cannot lose them all.
func (s *Server) setSecurityGroups(f url.Values) (any, *Error) {
	lb, found := s.lbs[f.Get("LoadBalancerArn")]
	if !found {
		return nil, &Error{Status: 400, Code: "LoadBalancerNotFound", Message: "One or more load balancers not found"}
	}
	sgs := list(f, "SecurityGroups.member")
	for _, g := range sgs {
		if sg, ok := s.sgs[g]; !ok || sg.vpcID != lb.vpcID {
			return nil, errorf("InvalidSecurityGroup", "Security group '%s' does not exist in VPC '%s'", g, lb.vpcID)
		}
	}
	switch {
	case len(lb.securityGroups) == 0 && len(sgs) > 0:
		return nil, errorf("InvalidConfigurationRequest", "You cannot add security groups to a Network Load Balancer that was created without any")
	case len(lb.securityGroups) > 0 && len(sgs) == 0:
		return nil, errorf("InvalidConfigurationRequest", "You cannot remove all security groups from a Network Load Balancer that was created with security groups")
	}
	for _, g := range lb.securityGroups {
		if sg := s.sgs[g]; sg != nil && !contains(sgs, g) {
			sg.releasePolls = s.sgReleasePolls
		}
	}
	lb.securityGroups = sgs
	return elbResult("SetSecurityGroups", securityGroupsResult{SecurityGroupIDs: sgs}), nil
}
