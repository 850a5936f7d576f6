package awsfake

import (
	"encoding/xml"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

const elbNS = "http://elasticloadbalancing.amazonaws.com/doc/2015-12-01/"

type loadBalancer struct {
	arn, name, scheme, vpcID, dns, state string
	subnets, securityGroups              []string
	pollsLeft                            int
	created                              time.Time
	tags                                 map[string]string
	// attributes are set on first use from nlbAttributeDefaults.
	attributes map[string]string
	// ipAddressType is ipv4 or dualstack.
	ipAddressType string
	// mappings are the SubnetMappings' extras by subnet: the Elastic IP
	// allocation and the private IPv4 address.
	mappings map[string]subnetMapping
}

type subnetMapping struct {
	allocationID, privateIPv4 string
}

type healthCheck struct {
	protocol, port, path string
	interval, healthy    int
	unhealthy, timeout   int
}

type target struct {
	id, zone string
	port     int
	// drainUntil is set on a deregistered target: AWS keeps listing it,
	// in state draining, for the group's deregistration delay.
	drainUntil time.Time
}

type targetGroup struct {
	arn, name, protocol, vpcID, targetType string
	// ipAddressType is ipv4 or ipv6: the family of its IP targets.
	ipAddressType string
	port          int
	hc            healthCheck
	targets       map[string]target
	tags          map[string]string
	// attributes are set on first use from tgAttributeDefaults.
	attributes map[string]string
}

type listener struct {
	arn, lbARN, protocol, tgARN string
	port                        int
	tags                        map[string]string
	// cert and sslPolicy are a TLS listener's default certificate and
	// security policy.
	cert, sslPolicy string
}

// LoadBalancerView is a load balancer as tests inspect it.
type LoadBalancerView struct {
	ARN, Name, Scheme, DNSName, State string
	Subnets, SecurityGroups           []string
	Tags                              map[string]string
	// Listeners are "PROTOCOL:port->target-group-name", sorted; a TLS
	// listener's ends with " (certificate ARN, security policy)".
	Listeners []string
	// Attributes are the load balancer's attributes (AWS's defaults until
	// modified).
	Attributes map[string]string
	// IPAddressType is ipv4 or dualstack.
	IPAddressType string
	// Addresses are the subnets' fixed addresses, "subnet=allocation-or-IP",
	// sorted (none for AWS-assigned ones).
	Addresses []string
}

// TargetGroupView is a target group as tests inspect it.
type TargetGroupView struct {
	ARN, Name, Protocol, TargetType string
	// IPAddressType is ipv4 or ipv6.
	IPAddressType       string
	Port                int
	HealthCheckProtocol string
	HealthCheckPort     string
	HealthCheckPath     string
	HealthCheckInterval int
	HealthCheckTimeout  int
	HealthyThreshold    int
	UnhealthyThreshold  int
	// Attributes are the group's attributes (AWS's defaults until
	// modified).
	Attributes map[string]string
	// Targets are the registered targets, "id:port" (with "@zone" when a
	// zone was given), sorted.
	Targets []string
	// Draining are deregistered targets still draining, in the same form.
	Draining []string
	Tags     map[string]string
}

// LoadBalancers returns every load balancer, sorted by name.
func (s *Server) LoadBalancers() []LoadBalancerView {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []LoadBalancerView
	for _, lb := range s.lbs {
		v := LoadBalancerView{ARN: lb.arn, Name: lb.name, Scheme: lb.scheme, DNSName: lb.dns, State: lb.state,
			Subnets: append([]string(nil), lb.subnets...), SecurityGroups: append([]string(nil), lb.securityGroups...), Tags: copyTags(lb.tags),
			Attributes: copyTags(s.lbAttributes(lb)), IPAddressType: s.lbXML(lb).IPAddressType}
		for id, m := range lb.mappings {
			v.Addresses = append(v.Addresses, id+"="+m.allocationID+m.privateIPv4)
		}
		sort.Strings(v.Addresses)
		for _, l := range s.listenersOfLB(lb.arn) {
			name := ""
			if tg := s.tgs[l.tgARN]; tg != nil {
				name = tg.name
			}
			desc := fmt.Sprintf("%s:%d->%s", l.protocol, l.port, name)
			if l.protocol == "TLS" {
				desc += fmt.Sprintf(" (%s, %s)", l.cert, l.sslPolicy)
			}
			v.Listeners = append(v.Listeners, desc)
		}
		sort.Strings(v.Listeners)
		out = append(out, v)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// TargetGroups returns every target group, sorted by name.
func (s *Server) TargetGroups() []TargetGroupView {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []TargetGroupView
	for _, tg := range s.tgs {
		v := TargetGroupView{ARN: tg.arn, Name: tg.name, Protocol: tg.protocol, TargetType: tg.targetType, IPAddressType: tg.ipAddressType, Port: tg.port,
			HealthCheckProtocol: tg.hc.protocol, HealthCheckPort: tg.hc.port, HealthCheckPath: tg.hc.path, Tags: copyTags(tg.tags),
			HealthCheckInterval: tg.hc.interval, HealthCheckTimeout: tg.hc.timeout, HealthyThreshold: tg.hc.healthy, UnhealthyThreshold: tg.hc.unhealthy,
			Attributes: copyTags(s.tgAttributes(tg))}
		for _, t := range s.liveTargets(tg) {
			if t.drainUntil.IsZero() {
				v.Targets = append(v.Targets, t.String())
			} else {
				v.Draining = append(v.Draining, t.String())
			}
		}
		out = append(out, v)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// ResourceCount returns how many load balancers, target groups, listeners
// and security groups exist: what a leak would leave behind.
func (s *Server) ResourceCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.lbs) + len(s.tgs) + len(s.listeners) + len(s.sgs)
}

// key identifies a registration in its group: the target and its port.
func (t target) key() string {
	return fmt.Sprintf("%s:%d", t.id, t.port)
}

func (t target) String() string {
	v := fmt.Sprintf("%s:%d", t.id, t.port)
	if t.zone != "" {
		v += "@" + t.zone
	}
	return v
}

func copyTags(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func (s *Server) elbv2(action string, f url.Values) (any, *Error) {
	handlers := map[string]func(url.Values) (any, *Error){
		"CreateLoadBalancer":    s.createLoadBalancer,
		"DescribeLoadBalancers": s.describeLoadBalancers,
		"DeleteLoadBalancer":    s.deleteLoadBalancer,
		"SetSubnets":            s.setSubnets,
		"CreateTargetGroup":     s.createTargetGroup,
		"DescribeTargetGroups":  s.describeTargetGroups,
		"ModifyTargetGroup":     s.modifyTargetGroup,
		"DeleteTargetGroup":     s.deleteTargetGroup,
		"RegisterTargets":       s.registerTargets,
		"DeregisterTargets":     s.deregisterTargets,
		"DescribeTargetHealth":  s.describeTargetHealth,
		"CreateListener":        s.createListener,
		"DescribeListeners":     s.describeListeners,
		"ModifyListener":        s.modifyListener,
		"DeleteListener":        s.deleteListener,
		"DescribeSSLPolicies":   s.describeSSLPolicies,
		"SetIpAddressType":      s.setIPAddressType,
		"AddTags":               s.addTags,
		"RemoveTags":            s.removeTags,
		"DescribeTags":          s.describeTags,

		"DescribeLoadBalancerAttributes": s.describeLoadBalancerAttributes,
		"ModifyLoadBalancerAttributes":   s.modifyLoadBalancerAttributes,
		"DescribeTargetGroupAttributes":  s.describeTargetGroupAttributes,
		"ModifyTargetGroupAttributes":    s.modifyTargetGroupAttributes,
		"SetSecurityGroups":              s.setSecurityGroups,
	}
	h, found := handlers[action]
	if !found {
		return nil, errorf("InvalidAction", "Could not find operation %s for version %s", action, elbv2Version)
	}
	return h(f)
}

// elbResponse wraps a result as <ActionResponse><ActionResult>.
type elbResponse struct {
	XMLName  xml.Name
	Xmlns    string `xml:"xmlns,attr"`
	Result   any
	Metadata struct {
		RequestID string `xml:"RequestId"`
	} `xml:"ResponseMetadata"`
}

type namedResult struct {
	XMLName xml.Name
	Body    any
}

// MarshalXML writes the result element with the body's fields inside.
func (n namedResult) MarshalXML(e *xml.Encoder, start xml.StartElement) error {
	start.Name = n.XMLName
	if n.Body == nil {
		if err := e.EncodeToken(start); err != nil {
			return err
		}
		return e.EncodeToken(start.End())
	}
	return e.EncodeElement(n.Body, start)
}

func elbResult(action string, body any) elbResponse {
	r := elbResponse{XMLName: xml.Name{Local: action + "Response"}, Xmlns: elbNS}
	r.Result = namedResult{XMLName: xml.Name{Local: action + "Result"}, Body: body}
	r.Metadata.RequestID = "fake"
	return r
}

var nameRE = regexp.MustCompile(`^[a-zA-Z0-9]([a-zA-Z0-9-]{0,30}[a-zA-Z0-9])?$`)

func validName(kind, name string) *Error {
	if !nameRE.MatchString(name) || (kind == "load balancer" && strings.HasPrefix(name, "internal-")) {
		return errorf("ValidationError", "%s name '%s' must be 1 to 32 letters, digits and hyphens, not beginning or ending with a hyphen", kind, name)
	}
	return nil
}

func elbTagsFrom(f url.Values) map[string]string {
	tags := map[string]string{}
	for _, p := range items(f, "Tags.member") {
		tags[f.Get(p+".Key")] = f.Get(p + ".Value")
	}
	return tags
}

type xmlAZ struct {
	ZoneName  string         `xml:"ZoneName"`
	SubnetID  string         `xml:"SubnetId"`
	Addresses []xmlLBAddress `xml:"LoadBalancerAddresses>member,omitempty"`
}

type xmlLBAddress struct {
	AllocationID       string `xml:"AllocationId,omitempty"`
	PrivateIPv4Address string `xml:"PrivateIPv4Address,omitempty"`
}

type xmlLoadBalancer struct {
	LoadBalancerArn       string `xml:"LoadBalancerArn"`
	DNSName               string `xml:"DNSName"`
	CanonicalHostedZoneID string `xml:"CanonicalHostedZoneId"`
	CreatedTime           string `xml:"CreatedTime"`
	LoadBalancerName      string `xml:"LoadBalancerName"`
	Scheme                string `xml:"Scheme"`
	VpcID                 string `xml:"VpcId"`
	State                 struct {
		Code string `xml:"Code"`
	} `xml:"State"`
	Type              string   `xml:"Type"`
	AvailabilityZones []xmlAZ  `xml:"AvailabilityZones>member"`
	SecurityGroups    []string `xml:"SecurityGroups>member"`
	IPAddressType     string   `xml:"IpAddressType"`
}

func (s *Server) lbXML(lb *loadBalancer) xmlLoadBalancer {
	x := xmlLoadBalancer{LoadBalancerArn: lb.arn, DNSName: lb.dns, CanonicalHostedZoneID: "Z26RNL4JYFTOTI", CreatedTime: lb.created.Format("2006-01-02T15:04:05.000Z"),
		LoadBalancerName: lb.name, Scheme: lb.scheme, VpcID: lb.vpcID, Type: "network", SecurityGroups: lb.securityGroups, IPAddressType: lb.ipAddressType}
	if x.IPAddressType == "" {
		x.IPAddressType = "ipv4"
	}
	x.State.Code = lb.state
	for _, id := range lb.subnets {
		az := xmlAZ{ZoneName: s.subnets[id].Zone, SubnetID: id}
		if m, ok := lb.mappings[id]; ok {
			az.Addresses = []xmlLBAddress{{AllocationID: m.allocationID, PrivateIPv4Address: m.privateIPv4}}
		}
		x.AvailabilityZones = append(x.AvailabilityZones, az)
	}
	return x
}

type loadBalancersResult struct {
	LoadBalancers []xmlLoadBalancer `xml:"LoadBalancers>member"`
	NextMarker    string            `xml:"NextMarker,omitempty"`
}

// lbSubnets reads Subnets.member.N or SubnetMappings.member.N (SubnetId,
// AllocationId, PrivateIPv4Address), not both, as AWS requires.
func (s *Server) lbSubnets(f url.Values) ([]string, string, map[string]subnetMapping, *Error) {
	ids := list(f, "Subnets.member")
	var mappings map[string]subnetMapping
	if ms := items(f, "SubnetMappings.member"); len(ms) > 0 {
		if len(ids) > 0 {
			return nil, "", nil, errorf("ValidationError", "You can specify subnets or subnet mappings, not both")
		}
		mappings = map[string]subnetMapping{}
		for _, p := range ms {
			id := f.Get(p + ".SubnetId")
			ids = append(ids, id)
			m := subnetMapping{allocationID: f.Get(p + ".AllocationId"), privateIPv4: f.Get(p + ".PrivateIPv4Address")}
			if m.privateIPv4 != "" {
				ip := net.ParseIP(m.privateIPv4)
				sn := s.subnets[id]
				if _, cidr, err := net.ParseCIDR(subnetCIDR(sn)); ip == nil || ip.To4() == nil || err != nil || !cidr.Contains(ip) {
					return nil, "", nil, errorf("InvalidConfigurationRequest", "The private IPv4 address '%s' is not in the subnet '%s'", m.privateIPv4, id)
				}
			}
			if m != (subnetMapping{}) {
				mappings[id] = m
			}
		}
	}
	if len(ids) == 0 {
		return nil, "", nil, errorf("ValidationError", "At least one subnet must be specified")
	}
	zones, vpc := map[string]bool{}, ""
	for _, id := range ids {
		sn, found := s.subnets[id]
		if !found {
			return nil, "", nil, &Error{Status: 400, Code: "SubnetNotFound", Message: fmt.Sprintf("The subnet ID '%s' is not valid", id)}
		}
		if zones[sn.Zone] {
			return nil, "", nil, errorf("InvalidConfigurationRequest", "A load balancer cannot be attached to multiple subnets in the same Availability Zone")
		}
		if vpc != "" && sn.VPCID != vpc {
			return nil, "", nil, errorf("InvalidConfigurationRequest", "All subnets must belong to the same VPC")
		}
		zones[sn.Zone], vpc = true, sn.VPCID
	}
	return ids, vpc, mappings, nil
}

func subnetCIDR(sn *Subnet) string {
	if sn == nil {
		return ""
	}
	return sn.CIDR
}

// createLoadBalancer creates a network load balancer. As in AWS, creating
// one with the name and settings of an existing one returns that one.
func (s *Server) createLoadBalancer(f url.Values) (any, *Error) {
	name, scheme := f.Get("Name"), f.Get("Scheme")
	if err := validName("load balancer", name); err != nil {
		return nil, err
	}
	if t := f.Get("Type"); t != "network" {
		return nil, errorf("ValidationError", "this fake only creates network load balancers, not %q", t)
	}
	if scheme == "" {
		scheme = "internet-facing"
	}
	subnets, vpc, mappings, err := s.lbSubnets(f)
	if err != nil {
		return nil, err
	}
	ipType := f.Get("IpAddressType")
	switch ipType {
	case "":
		ipType = "ipv4"
	case "ipv4":
	case "dualstack":
		for _, id := range subnets {
			if s.subnets[id].IPv6CIDR == "" {
				return nil, errorf("InvalidConfigurationRequest", "Subnet '%s' has no IPv6 CIDR block", id)
			}
		}
	default:
		return nil, errorf("ValidationError", "IP address type '%s' is not valid for a network load balancer; use ipv4 or dualstack", ipType)
	}
	if err := s.checkMappings(mappings, scheme); err != nil {
		return nil, err
	}
	sgs := list(f, "SecurityGroups.member")
	for _, g := range sgs {
		if sg, found := s.sgs[g]; !found || sg.vpcID != vpc {
			return nil, errorf("InvalidSecurityGroup", "Security group '%s' does not exist in VPC '%s'", g, vpc)
		}
	}
	if lb := s.lbs[s.idx.lbByName[name]]; lb != nil {
		if lb.scheme != scheme || strings.Join(lb.subnets, ",") != strings.Join(subnets, ",") || strings.Join(lb.securityGroups, ",") != strings.Join(sgs, ",") {
			return nil, errorf("DuplicateLoadBalancerName", "A load balancer with the same name '%s' exists, but with different settings", name)
		}
		return elbResult("CreateLoadBalancer", loadBalancersResult{LoadBalancers: []xmlLoadBalancer{s.lbXML(lb)}}), nil
	}
	id := s.nextID()[1:]
	lb := &loadBalancer{arn: fmt.Sprintf("arn:aws:elasticloadbalancing:%s:%s:loadbalancer/net/%s/%s", s.region, Account, name, id),
		name: name, scheme: scheme, vpcID: vpc, subnets: subnets, securityGroups: sgs, state: "active",
		pollsLeft: s.provisioningPolls, created: time.Now().UTC(), tags: elbTagsFrom(f), ipAddressType: ipType, mappings: mappings}
	lb.dns = fmt.Sprintf("%s-%s.elb.%s.amazonaws.com", name, id, s.region)
	if scheme == "internal" {
		lb.dns = "internal-" + lb.dns
	}
	if lb.pollsLeft > 0 {
		lb.state = "provisioning"
	}
	s.putLB(lb)
	return elbResult("CreateLoadBalancer", loadBalancersResult{LoadBalancers: []xmlLoadBalancer{s.lbXML(lb)}}), nil
}

func pageSize(f url.Values) (int, *Error) {
	v := f.Get("PageSize")
	if v == "" {
		return 400, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 400 {
		return 0, errorf("ValidationError", "PageSize must be between 1 and 400")
	}
	return n, nil
}

func (s *Server) describeLoadBalancers(f url.Values) (any, *Error) {
	names, arns := list(f, "Names.member"), list(f, "LoadBalancerArns.member")
	var matched []*loadBalancer
	for _, arn := range s.lbCandidates(names, arns) {
		lb := s.lbs[arn]
		if (len(names) == 0 || contains(names, lb.name)) && (len(arns) == 0 || contains(arns, lb.arn)) {
			matched = append(matched, lb)
		}
	}
	if (len(names) > 0 && len(matched) < len(names)) || (len(arns) > 0 && len(matched) < len(arns)) {
		return nil, &Error{Status: 400, Code: "LoadBalancerNotFound", Message: "One or more load balancers not found"}
	}
	size, err := pageSize(f)
	if err != nil {
		return nil, err
	}
	page, next, err := paginate(len(matched), f.Get("Marker"), size)
	if err != nil {
		return nil, err
	}
	res := loadBalancersResult{NextMarker: next}
	for _, lb := range matched[page[0]:page[1]] {
		if lb.pollsLeft > 0 {
			lb.pollsLeft--
		} else {
			lb.state = "active"
		}
		res.LoadBalancers = append(res.LoadBalancers, s.lbXML(lb))
	}
	return elbResult("DescribeLoadBalancers", res), nil
}

func contains(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

// deleteLoadBalancer deletes a load balancer and its listeners; its target
// groups stay. Deleting one that does not exist succeeds, as in AWS.
func (s *Server) deleteLoadBalancer(f url.Values) (any, *Error) {
	lb, found := s.lbs[f.Get("LoadBalancerArn")]
	if found && lb.attributes["deletion_protection.enabled"] == "true" {
		return nil, errorf("OperationNotPermitted", "Load balancer '%s' cannot be deleted because deletion protection is enabled", lb.arn)
	}
	if found {
		for _, g := range lb.securityGroups {
			if sg := s.sgs[g]; sg != nil {
				sg.releasePolls = s.sgReleasePolls
			}
		}
		s.dropLB(lb)
	}
	return elbResult("DeleteLoadBalancer", nil), nil
}

type xmlTargetGroup struct {
	TargetGroupArn             string   `xml:"TargetGroupArn"`
	TargetGroupName            string   `xml:"TargetGroupName"`
	Protocol                   string   `xml:"Protocol"`
	Port                       int      `xml:"Port"`
	VpcID                      string   `xml:"VpcId"`
	HealthCheckProtocol        string   `xml:"HealthCheckProtocol"`
	HealthCheckPort            string   `xml:"HealthCheckPort"`
	HealthCheckEnabled         bool     `xml:"HealthCheckEnabled"`
	HealthCheckIntervalSeconds int      `xml:"HealthCheckIntervalSeconds"`
	HealthCheckTimeoutSeconds  int      `xml:"HealthCheckTimeoutSeconds"`
	HealthyThresholdCount      int      `xml:"HealthyThresholdCount"`
	UnhealthyThresholdCount    int      `xml:"UnhealthyThresholdCount"`
	HealthCheckPath            string   `xml:"HealthCheckPath,omitempty"`
	LoadBalancerArns           []string `xml:"LoadBalancerArns>member"`
	TargetType                 string   `xml:"TargetType"`
	IPAddressType              string   `xml:"IpAddressType"`
}

type targetGroupsResult struct {
	TargetGroups []xmlTargetGroup `xml:"TargetGroups>member"`
	NextMarker   string           `xml:"NextMarker,omitempty"`
}

func (s *Server) tgXML(tg *targetGroup) xmlTargetGroup {
	x := xmlTargetGroup{TargetGroupArn: tg.arn, TargetGroupName: tg.name, Protocol: tg.protocol, Port: tg.port, VpcID: tg.vpcID,
		HealthCheckProtocol: tg.hc.protocol, HealthCheckPort: tg.hc.port, HealthCheckEnabled: true, HealthCheckIntervalSeconds: tg.hc.interval,
		HealthCheckTimeoutSeconds: tg.hc.timeout, HealthyThresholdCount: tg.hc.healthy, UnhealthyThresholdCount: tg.hc.unhealthy, HealthCheckPath: tg.hc.path,
		TargetType: tg.targetType, IPAddressType: tg.ipAddressType}
	if lb := s.lbOf(tg.arn); lb != "" {
		x.LoadBalancerArns = []string{lb}
	}
	return x
}

// readHealthCheck reads health-check settings over defaults, validating
// them as AWS does for network load balancers.
func readHealthCheck(f url.Values, base healthCheck, protocol string) (healthCheck, *Error) {
	hc := base
	set := func(key string, dst *string) {
		if v := f.Get(key); v != "" {
			*dst = v
		}
	}
	set("HealthCheckProtocol", &hc.protocol)
	set("HealthCheckPort", &hc.port)
	set("HealthCheckPath", &hc.path)
	// AWS's ranges for network load balancers' target groups.
	for key, r := range map[string]struct {
		dst    *int
		lo, hi int
	}{"HealthCheckIntervalSeconds": {&hc.interval, 5, 300}, "HealthCheckTimeoutSeconds": {&hc.timeout, 2, 120},
		"HealthyThresholdCount": {&hc.healthy, 2, 10}, "UnhealthyThresholdCount": {&hc.unhealthy, 2, 10}} {
		if v := f.Get(key); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < r.lo || n > r.hi {
				return hc, errorf("ValidationError", "%s must be from %d to %d", key, r.lo, r.hi)
			}
			*r.dst = n
		}
	}
	if hc.protocol == "" {
		hc.protocol = "TCP"
	}
	if hc.timeout == 0 {
		// AWS's default: 6 seconds for HTTP checks, 10 for TCP and HTTPS.
		hc.timeout = 10
		if hc.protocol == "HTTP" {
			hc.timeout = 6
		}
	}
	switch {
	case hc.protocol != "TCP" && hc.protocol != "HTTP" && hc.protocol != "HTTPS":
		return hc, errorf("ValidationError", "Health check protocol '%s' is not supported for target groups with the protocol '%s'", hc.protocol, protocol)
	case hc.protocol == "TCP" && hc.path != "":
		return hc, errorf("ValidationError", "Health check path cannot be set with health check protocol TCP")
	case hc.protocol != "TCP" && hc.path == "":
		hc.path = "/"
	}
	if hc.port != "traffic-port" {
		if n, err := strconv.Atoi(hc.port); err != nil || n < 1 || n > 65535 {
			return hc, errorf("ValidationError", "Health check port '%s' must be traffic-port or 1 to 65535", hc.port)
		}
	}
	return hc, nil
}

// createTargetGroup creates a target group; the same name and settings
// again return the existing one, as in AWS.
func (s *Server) createTargetGroup(f url.Values) (any, *Error) {
	name, protocol, vpc, tt, ipType := f.Get("Name"), f.Get("Protocol"), f.Get("VpcId"), f.Get("TargetType"), f.Get("IpAddressType")
	if err := validName("target group", name); err != nil {
		return nil, err
	}
	if tt == "" {
		tt = "instance"
	}
	if ipType == "" {
		ipType = "ipv4"
	}
	if ipType != "ipv4" && ipType != "ipv6" {
		return nil, errorf("ValidationError", "IpAddressType '%s' is not valid: ipv4 or ipv6", ipType)
	}
	port, perr := strconv.Atoi(f.Get("Port"))
	switch {
	case protocol != "TCP" && protocol != "UDP" && protocol != "TCP_UDP" && protocol != "TLS":
		return nil, errorf("ValidationError", "Protocol '%s' is not supported by network load balancers", protocol)
	case perr != nil || port < 1 || port > 65535:
		return nil, errorf("ValidationError", "Port must be 1 to 65535")
	case tt != "instance" && tt != "ip":
		return nil, errorf("ValidationError", "TargetType '%s' is not supported", tt)
	}
	if _, known := s.vpcs[vpc]; !known {
		return nil, errorf("ValidationError", "The VPC ID '%s' is not found", vpc)
	}
	hc, err := readHealthCheck(f, healthCheck{port: "traffic-port", interval: 30, healthy: 5, unhealthy: 2}, protocol)
	if err != nil {
		return nil, err
	}
	if tg := s.tgs[s.idx.tgByName[name]]; tg != nil {
		if tg.protocol != protocol || tg.port != port || tg.vpcID != vpc || tg.targetType != tt || tg.ipAddressType != ipType || tg.hc != hc {
			return nil, errorf("DuplicateTargetGroupName", "A target group with the same name '%s' exists, but with different settings", name)
		}
		return elbResult("CreateTargetGroup", targetGroupsResult{TargetGroups: []xmlTargetGroup{s.tgXML(tg)}}), nil
	}
	tg := &targetGroup{arn: fmt.Sprintf("arn:aws:elasticloadbalancing:%s:%s:targetgroup/%s/%s", s.region, Account, name, s.nextID()[1:]),
		name: name, protocol: protocol, port: port, vpcID: vpc, targetType: tt, ipAddressType: ipType, hc: hc, targets: map[string]target{}, tags: elbTagsFrom(f)}
	s.putTG(tg)
	return elbResult("CreateTargetGroup", targetGroupsResult{TargetGroups: []xmlTargetGroup{s.tgXML(tg)}}), nil
}

func (s *Server) describeTargetGroups(f url.Values) (any, *Error) {
	names, arns, lbARN := list(f, "Names.member"), list(f, "TargetGroupArns.member"), f.Get("LoadBalancerArn")
	if lbARN != "" && s.lbs[lbARN] == nil {
		return nil, &Error{Status: 400, Code: "LoadBalancerNotFound", Message: fmt.Sprintf("Load balancer '%s' not found", lbARN)}
	}
	var matched []*targetGroup
	for _, arn := range s.tgCandidates(names, arns, lbARN) {
		tg := s.tgs[arn]
		if (len(names) == 0 || contains(names, tg.name)) && (len(arns) == 0 || contains(arns, tg.arn)) && (lbARN == "" || s.lbOf(tg.arn) == lbARN) {
			matched = append(matched, tg)
		}
	}
	if (len(names) > 0 && len(matched) < len(names)) || (len(arns) > 0 && len(matched) < len(arns)) {
		return nil, &Error{Status: 400, Code: "TargetGroupNotFound", Message: "One or more target groups not found"}
	}
	if lbARN != "" && len(matched) == 0 && s.noTargetGroupsNotFound {
		return nil, &Error{Status: 400, Code: "TargetGroupNotFound", Message: "One or more target groups not found"}
	}
	size, err := pageSize(f)
	if err != nil {
		return nil, err
	}
	page, next, err := paginate(len(matched), f.Get("Marker"), size)
	if err != nil {
		return nil, err
	}
	res := targetGroupsResult{NextMarker: next}
	for _, tg := range matched[page[0]:page[1]] {
		res.TargetGroups = append(res.TargetGroups, s.tgXML(tg))
	}
	return elbResult("DescribeTargetGroups", res), nil
}

func (s *Server) targetGroup(arn string) (*targetGroup, *Error) {
	tg, found := s.tgs[arn]
	if !found {
		return nil, &Error{Status: 400, Code: "TargetGroupNotFound", Message: fmt.Sprintf("Target groups '%s' not found", arn)}
	}
	return tg, nil
}

func (s *Server) modifyTargetGroup(f url.Values) (any, *Error) {
	tg, err := s.targetGroup(f.Get("TargetGroupArn"))
	if err != nil {
		return nil, err
	}
	base := tg.hc
	if p := f.Get("HealthCheckProtocol"); p != "" && p != base.protocol {
		base.path = ""
	}
	hc, err := readHealthCheck(f, base, tg.protocol)
	if err != nil {
		return nil, err
	}
	tg.hc = hc
	return elbResult("ModifyTargetGroup", targetGroupsResult{TargetGroups: []xmlTargetGroup{s.tgXML(tg)}}), nil
}

// deleteTargetGroup refuses while a listener forwards to the group.
func (s *Server) deleteTargetGroup(f url.Values) (any, *Error) {
	arn := f.Get("TargetGroupArn")
	if s.lbOf(arn) != "" {
		return nil, errorf("ResourceInUse", "Target group '%s' is currently in use by a listener or a rule", arn)
	}
	s.dropTG(arn)
	return elbResult("DeleteTargetGroup", nil), nil
}

func (s *Server) readTargets(f url.Values, tg *targetGroup) ([]target, *Error) {
	var out []target
	for _, p := range items(f, "Targets.member") {
		t := target{id: f.Get(p + ".Id"), zone: f.Get(p + ".AvailabilityZone"), port: tg.port}
		if v := f.Get(p + ".Port"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > 65535 {
				return nil, errorf("ValidationError", "target port %q must be 1 to 65535", v)
			}
			t.port = n
		}
		out = append(out, t)
	}
	if len(out) == 0 {
		return nil, errorf("ValidationError", "At least one target must be specified")
	}
	return out, nil
}

// validTarget applies AWS's rules: instance targets are running instances
// of the group's VPC; IP targets inside the VPC take no zone or their
// subnet's, and IP targets outside it must be private addresses with zone
// "all".
func (s *Server) validTarget(tg *targetGroup, t target) *Error {
	if tg.targetType == "instance" {
		in := s.instances[t.id]
		if in == nil || in.VPCID != tg.vpcID || in.State == "terminated" {
			return errorf("InvalidTarget", "The following targets are not in a running state or not in the target group's VPC: '%s'", t.id)
		}
		return nil
	}
	ip := net.ParseIP(t.id)
	if ip == nil {
		return errorf("InvalidTarget", "The IP address '%s' is not a valid IP address", t.id)
	}
	if v6 := ip.To4() == nil; v6 != (tg.ipAddressType == "ipv6") {
		return errorf("ValidationError", "The IP address '%s' does not match the target group's IP address type %s", t.id, tg.ipAddressType)
	}
	if tg.ipAddressType == "ipv6" {
		return s.validIPv6Target(tg, ip, t)
	}
	_, vpcNet, _ := net.ParseCIDR(s.vpcs[tg.vpcID])
	if vpcNet != nil && vpcNet.Contains(ip) {
		if t.zone == "all" {
			return errorf("ValidationError", "Availability zone 'all' is only for IP addresses outside the VPC: '%s'", t.id)
		}
		return nil
	}
	if t.zone != "all" {
		return errorf("ValidationError", "The IP address '%s' is outside the VPC, so its Availability Zone must be 'all'", t.id)
	}
	if !ip.IsPrivate() && !inCGNAT(ip) {
		return errorf("InvalidTarget", "The IP address '%s' is outside the VPC and not in a private range", t.id)
	}
	return nil
}

// validIPv6Target accepts an IPv6 target inside an IPv6 block of one of
// the group's VPC's subnets (IPv6 targets outside the VPC are not
// supported).
func (s *Server) validIPv6Target(tg *targetGroup, ip net.IP, t target) *Error {
	for _, sn := range s.subnets {
		if _, block, err := net.ParseCIDR(sn.IPv6CIDR); err == nil && sn.VPCID == tg.vpcID && block.Contains(ip) {
			return nil
		}
	}
	return errorf("InvalidTarget", "The IPv6 address '%s' is not in an IPv6 CIDR block of the target group's VPC", t.id)
}

func inCGNAT(ip net.IP) bool {
	_, cgnat, _ := net.ParseCIDR("100.64.0.0/10")
	return cgnat.Contains(ip)
}

func (s *Server) registerTargets(f url.Values) (any, *Error) {
	tg, err := s.targetGroup(f.Get("TargetGroupArn"))
	if err != nil {
		return nil, err
	}
	ts, err := s.readTargets(f, tg)
	if err != nil {
		return nil, err
	}
	for _, t := range ts {
		if err := s.validTarget(tg, t); err != nil {
			return nil, err
		}
	}
	if err := s.checkTargetQuota(tg, ts); err != nil {
		return nil, err
	}
	for _, t := range ts {
		tg.targets[t.key()] = t
	}
	return elbResult("RegisterTargets", nil), nil
}

// DefaultTargetsPerTargetGroup is AWS's default "Targets per Target Group
// per Region" quota for instances or IP addresses (Quotas for your Network
// Load Balancers, https://docs.aws.amazon.com/elasticloadbalancing/latest/network/load-balancer-limits.html;
// adjustable on request).
const DefaultTargetsPerTargetGroup = 1000

// SetTargetsPerTargetGroup sets the account's targets-per-target-group
// quota (AWS's default: DefaultTargetsPerTargetGroup, raised on request);
// 0 lifts it.
func (s *Server) SetTargetsPerTargetGroup(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.targetsPerGroup = n
}

// checkTargetQuota refuses a RegisterTargets that would leave the group
// with more registered targets than the quota: TooManyTargets (400), the
// message shaped as AWS's for its per-load-balancer quota ("The maximum
// number of targets per load balancer '2000' has been reached on load
// balancer '<ARN>'", kubernetes/kubernetes#86441). Targets still draining
// are not counted (AWS does not document whether they are).
func (s *Server) checkTargetQuota(tg *targetGroup, ts []target) *Error {
	if s.targetsPerGroup <= 0 {
		return nil
	}
	after := map[string]bool{}
	for _, t := range s.liveTargets(tg) {
		if t.drainUntil.IsZero() {
			after[t.key()] = true
		}
	}
	for _, t := range ts {
		after[t.key()] = true
	}
	if len(after) > s.targetsPerGroup {
		return errorf("TooManyTargets", "The maximum number of targets per target group '%d' has been reached on target group '%s'", s.targetsPerGroup, tg.arn)
	}
	return nil
}

func (s *Server) deregisterTargets(f url.Values) (any, *Error) {
	tg, err := s.targetGroup(f.Get("TargetGroupArn"))
	if err != nil {
		return nil, err
	}
	ts, err := s.readTargets(f, tg)
	if err != nil {
		return nil, err
	}
	// The group's deregistration_delay.timeout_seconds, scaled by the
	// fake's clock (SetDeregistrationDelay: how long AWS's default of 300
	// seconds lasts here).
	n, _ := strconv.Atoi(s.tgAttributes(tg)["deregistration_delay.timeout_seconds"])
	delay := s.deregistrationDelay * time.Duration(n) / time.Duration(DefaultDeregistrationDelay/time.Second)
	for _, t := range ts {
		k := t.key()
		have, registered := tg.targets[k]
		switch {
		case !registered:
			return nil, errorf("InvalidTarget", "The following targets are not registered in target group '%s': '%s'", tg.arn, t.id)
		case delay <= 0:
			delete(tg.targets, k)
		case have.drainUntil.IsZero():
			have.drainUntil = time.Now().Add(delay)
			tg.targets[k] = have
		}
	}
	return elbResult("DeregisterTargets", nil), nil
}

// liveTargets drops targets whose draining has ended and returns the rest,
// sorted by id and port.
func (s *Server) liveTargets(tg *targetGroup) []target {
	now := time.Now()
	var out []target
	for _, k := range sortedKeys(tg.targets) {
		t := tg.targets[k]
		if !t.drainUntil.IsZero() && now.After(t.drainUntil) {
			delete(tg.targets, k)
			continue
		}
		out = append(out, t)
	}
	return out
}

type xmlTargetHealth struct {
	Target struct {
		ID               string `xml:"Id"`
		Port             int    `xml:"Port"`
		AvailabilityZone string `xml:"AvailabilityZone,omitempty"`
	} `xml:"Target"`
	HealthCheckPort string `xml:"HealthCheckPort"`
	TargetHealth    struct {
		State string `xml:"State"`
	} `xml:"TargetHealth"`
}

type targetHealthResult struct {
	Descriptions []xmlTargetHealth `xml:"TargetHealthDescriptions>member"`
}

// describeTargetHealth lists the registered targets and, as AWS does, the
// deregistered ones still draining (state draining). Health is simulated:
// targets of a group no listener uses are unused, others healthy.
func (s *Server) describeTargetHealth(f url.Values) (any, *Error) {
	tg, err := s.targetGroup(f.Get("TargetGroupArn"))
	if err != nil {
		return nil, err
	}
	state := "healthy"
	if s.lbOf(tg.arn) == "" {
		state = "unused"
	}
	var res targetHealthResult
	for _, t := range s.liveTargets(tg) {
		var d xmlTargetHealth
		d.Target.ID, d.Target.Port, d.Target.AvailabilityZone = t.id, t.port, t.zone
		d.HealthCheckPort, d.TargetHealth.State = tg.hc.port, state
		if !t.drainUntil.IsZero() {
			d.TargetHealth.State = "draining"
		}
		res.Descriptions = append(res.Descriptions, d)
	}
	return elbResult("DescribeTargetHealth", res), nil
}
