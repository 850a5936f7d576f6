package awsfake

import (
	"encoding/xml"
	"fmt"
	"net"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
)

const ec2NS = "http://ec2.amazonaws.com/doc/2016-11-15/"

// Instance is an EC2 instance as tests set it up.
type Instance struct {
	ID           string
	InstanceType string
	Zone         string
	ZoneID       string
	VPCID        string
	SubnetID     string
	// State is pending, running, shutting-down, terminated, stopping or stopped.
	State string
	// PrivateIPs lists the private addresses; the first is the primary.
	PrivateIPs      []string
	PrivateDNSName  string
	PublicIP        string
	PublicDNSName   string
	Tags            map[string]string
	SourceDestCheck bool
	// SecurityGroups are the IDs of the instance's security groups (its
	// groupSet).
	SecurityGroups []string
}

// Subnet is an EC2 subnet as tests set it up.
type Subnet struct {
	ID     string
	VPCID  string
	Zone   string
	ZoneID string
	CIDR   string
	// IPv6CIDR is the subnet's IPv6 block, if any (dual-stack load
	// balancers need one on every subnet).
	IPv6CIDR string
	Tags     map[string]string
}

// RouteTable is an EC2 route table. Every table also lists the VPC's local
// route (its CIDR to gateway "local"), as AWS does.
type RouteTable struct {
	ID     string
	VPCID  string
	Tags   map[string]string
	Routes []Route
	// Main marks the VPC's main route table: subnets associated with no
	// table use it.
	Main bool
	// Subnets are the subnets explicitly associated with the table.
	Subnets []string
}

// Route is one route of a route table: to an instance or to a gateway
// (igw-…, vgw-…, "local").
type Route struct {
	DestinationCIDR string
	InstanceID      string
	GatewayID       string
}

type securityGroup struct {
	id, name, description, vpcID string
	tags                         map[string]string
	ingress                      []permission
	releasePolls                 int
}

// permission is one ingress rule; its source is a CIDR or (group) another
// security group.
type permission struct {
	protocol    string
	from, to    int
	cidr, group string
	// prefixList is a managed prefix list's ID (PrefixListIds).
	prefixList string
	// description is the rule's; AWS does not tell rules apart by it.
	description string
}

var stateCodes = map[string]int{"pending": 0, "running": 16, "shutting-down": 32, "terminated": 48, "stopping": 64, "stopped": 80}

// AddVPC declares a VPC and its CIDR.
func (s *Server) AddVPC(id, cidr string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.vpcs[id] = cidr
}

// AddInstance adds or replaces an instance.
func (s *Server) AddInstance(in Instance) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if in.State == "" {
		in.State = "running"
	}
	c := in
	s.instances[in.ID] = &c
}

// SetInstanceState changes an instance's state.
func (s *Server) SetInstanceState(id, state string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if in, ok := s.instances[id]; ok {
		in.State = state
	}
}

// RemoveInstance forgets an instance, as AWS does some time after it terminates.
func (s *Server) RemoveInstance(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.instances, id)
}

// GetInstance returns a copy of an instance.
func (s *Server) GetInstance(id string) (Instance, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	in, ok := s.instances[id]
	if !ok {
		return Instance{}, false
	}
	return *in, true
}

// AddSubnet adds a subnet.
func (s *Server) AddSubnet(sn Subnet) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := sn
	s.subnets[sn.ID] = &c
}

// AddRouteTable adds a route table.
func (s *Server) AddRouteTable(rt RouteTable) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := rt
	s.routes[rt.ID] = &c
}

// GetRouteTable returns a copy of a route table.
func (s *Server) GetRouteTable(id string) (RouteTable, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rt, ok := s.routes[id]
	if !ok {
		return RouteTable{}, false
	}
	c := *rt
	c.Routes = append([]Route(nil), rt.Routes...)
	return c, true
}

// SecurityGroupCount returns how many security groups exist.
func (s *Server) SecurityGroupCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sgs)
}

// SecurityGroupView is a security group as tests inspect it.
type SecurityGroupView struct {
	ID, Name, VPCID string
	Tags            map[string]string
	// Ingress are the rules, "protocol:from-to:source" (a CIDR or a
	// security group ID), sorted.
	Ingress []string
}

// SecurityGroups returns every security group, sorted by ID.
func (s *Server) SecurityGroups() []SecurityGroupView {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []SecurityGroupView
	for _, id := range sortedKeys(s.sgs) {
		sg := s.sgs[id]
		out = append(out, SecurityGroupView{ID: sg.id, Name: sg.name, VPCID: sg.vpcID, Tags: copyTags(sg.tags), Ingress: sg.rules()})
	}
	return out
}

// SecurityGroupIngress returns a group's ingress rules as
// "protocol:from-to:cidr" strings, sorted.
func (s *Server) SecurityGroupIngress(id string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	sg, ok := s.sgs[id]
	if !ok {
		return nil
	}
	return sg.rules()
}

// rules returns the group's ingress rules as "protocol:from-to:cidr"
// strings, sorted.
func (sg *securityGroup) rules() []string {
	var out []string
	for _, p := range sg.ingress {
		out = append(out, fmt.Sprintf("%s:%d-%d:%s", p.protocol, p.from, p.to, p.cidr+p.group+p.prefixList))
	}
	sort.Strings(out)
	return out
}

func (s *Server) ec2(action string, f url.Values) (any, *Error) {
	switch action {
	case "DescribeInstances":
		return s.describeInstances(f)
	case "DescribeSubnets":
		return s.describeSubnets(f)
	case "DescribeSecurityGroups":
		return s.describeSecurityGroups(f)
	case "CreateSecurityGroup":
		return s.createSecurityGroup(f)
	case "DeleteSecurityGroup":
		return s.deleteSecurityGroup(f)
	case "AuthorizeSecurityGroupIngress":
		return s.changeIngress(f, true)
	case "RevokeSecurityGroupIngress":
		return s.changeIngress(f, false)
	case "CreateTags":
		return s.createTags(f)
	case "DescribeRouteTables":
		return s.describeRouteTables(f)
	case "CreateRoute":
		return s.createRoute(f)
	case "DeleteRoute":
		return s.deleteRoute(f)
	case "ModifyInstanceAttribute":
		return s.modifyInstanceAttribute(f)
	case "DescribeAvailabilityZones":
		return s.describeAvailabilityZones(f)
	case "DescribeInstanceTopology":
		return s.describeInstanceTopology(f)
	case "DeleteTags":
		return s.deleteTags(f)
	}
	return nil, errorf("InvalidAction", "The action %s is not valid for this web service.", action)
}

// filters reads Filter.N.Name / Filter.N.Value.M.
func filters(f url.Values) map[string][]string {
	out := map[string][]string{}
	for _, p := range items(f, "Filter") {
		out[f.Get(p+".Name")] = list(f, p+".Value")
	}
	return out
}

// matchFilters applies EC2 filters: every filter must match one of its values.
func matchFilters(fs map[string][]string, attr func(name string) []string) bool {
	for name, values := range fs {
		if !anyIn(attr(name), values) {
			return false
		}
	}
	return true
}

func anyIn(have, want []string) bool {
	for _, h := range have {
		for _, w := range want {
			if h == w || (strings.HasSuffix(w, "*") && strings.HasPrefix(h, strings.TrimSuffix(w, "*"))) {
				return true
			}
		}
	}
	return false
}

// tagAttr answers the tag:<key> and tag-key filters.
func tagAttr(tags map[string]string, name string) ([]string, bool) {
	if k, ok := strings.CutPrefix(name, "tag:"); ok {
		if v, ok := tags[k]; ok {
			return []string{v}, true
		}
		return nil, true
	}
	if name == "tag-key" {
		return sortedKeys(tags), true
	}
	return nil, false
}

func (in *Instance) attr(name string) []string {
	if v, ok := tagAttr(in.Tags, name); ok {
		return v
	}
	switch name {
	case "vpc-id":
		return []string{in.VPCID}
	case "instance-id":
		return []string{in.ID}
	case "private-dns-name":
		return []string{in.PrivateDNSName}
	case "private-ip-address", "network-interface.addresses.private-ip-address":
		return in.PrivateIPs
	case "instance-state-name":
		return []string{in.State}
	case "availability-zone":
		return []string{in.Zone}
	case "instance-type":
		return []string{in.InstanceType}
	case "subnet-id":
		return []string{in.SubnetID}
	case "instance.group-id":
		return in.SecurityGroups
	}
	return nil
}

type xmlInstance struct {
	InstanceID   string `xml:"instanceId"`
	InstanceType string `xml:"instanceType"`
	Placement    struct {
		AvailabilityZone   string `xml:"availabilityZone"`
		AvailabilityZoneID string `xml:"availabilityZoneId,omitempty"`
	} `xml:"placement"`
	InstanceState struct {
		Code int    `xml:"code"`
		Name string `xml:"name"`
	} `xml:"instanceState"`
	PrivateDNSName   string         `xml:"privateDnsName"`
	DNSName          string         `xml:"dnsName"`
	PrivateIPAddress string         `xml:"privateIpAddress,omitempty"`
	IPAddress        string         `xml:"ipAddress,omitempty"`
	VpcID            string         `xml:"vpcId,omitempty"`
	SubnetID         string         `xml:"subnetId,omitempty"`
	SourceDestCheck  bool           `xml:"sourceDestCheck"`
	GroupSet         []xmlGroupID   `xml:"groupSet>item"`
	NetworkIfaces    []xmlInterface `xml:"networkInterfaceSet>item"`
	Tags             []xmlTag       `xml:"tagSet>item"`
}

// xmlGroupID is a GroupIdentifier: a security group's ID and name.
type xmlGroupID struct {
	GroupID   string `xml:"groupId"`
	GroupName string `xml:"groupName"`
}

type xmlInterface struct {
	ID         string       `xml:"networkInterfaceId"`
	SubnetID   string       `xml:"subnetId,omitempty"`
	VpcID      string       `xml:"vpcId,omitempty"`
	Groups     []xmlGroupID `xml:"groupSet>item"`
	Status     string       `xml:"status"`
	Attachment struct {
		ID          string `xml:"attachmentId"`
		DeviceIndex int    `xml:"deviceIndex"`
		Status      string `xml:"status"`
	} `xml:"attachment"`
	Addresses []xmlPrivIP `xml:"privateIpAddressesSet>item"`
}

type xmlPrivIP struct {
	PrivateIPAddress string `xml:"privateIpAddress"`
	PrivateDNSName   string `xml:"privateDnsName,omitempty"`
	Primary          bool   `xml:"primary"`
	Association      *struct {
		PublicIP      string `xml:"publicIp"`
		PublicDNSName string `xml:"publicDnsName"`
	} `xml:"association,omitempty"`
}

type xmlReservation struct {
	ReservationID string        `xml:"reservationId"`
	OwnerID       string        `xml:"ownerId"`
	Instances     []xmlInstance `xml:"instancesSet>item"`
}

type describeInstancesResponse struct {
	XMLName      xml.Name         `xml:"DescribeInstancesResponse"`
	Xmlns        string           `xml:"xmlns,attr"`
	RequestID    string           `xml:"requestId"`
	Reservations []xmlReservation `xml:"reservationSet>item"`
	NextToken    string           `xml:"nextToken,omitempty"`
}

// xml renders the instance; groupName names its security groups.
func (in *Instance) xml(groupName func(id string) string) xmlInstance {
	x := xmlInstance{InstanceID: in.ID, InstanceType: in.InstanceType, PrivateDNSName: in.PrivateDNSName, DNSName: in.PublicDNSName,
		IPAddress: in.PublicIP, VpcID: in.VPCID, SubnetID: in.SubnetID, SourceDestCheck: in.SourceDestCheck, Tags: ec2Tags(in.Tags)}
	x.Placement.AvailabilityZone, x.Placement.AvailabilityZoneID = in.Zone, in.ZoneID
	x.InstanceState.Code, x.InstanceState.Name = stateCodes[in.State], in.State
	if in.State == "terminated" {
		return x
	}
	for _, g := range in.SecurityGroups {
		x.GroupSet = append(x.GroupSet, xmlGroupID{GroupID: g, GroupName: groupName(g)})
	}
	ni := xmlInterface{ID: "eni-" + strings.TrimPrefix(in.ID, "i-"), SubnetID: in.SubnetID, VpcID: in.VPCID, Groups: x.GroupSet, Status: "in-use"}
	ni.Attachment.ID, ni.Attachment.Status = "eni-attach-"+strings.TrimPrefix(in.ID, "i-"), "attached"
	for i, ip := range in.PrivateIPs {
		a := xmlPrivIP{PrivateIPAddress: ip, Primary: i == 0}
		if i == 0 {
			x.PrivateIPAddress, a.PrivateDNSName = ip, in.PrivateDNSName
			if in.PublicIP != "" {
				a.Association = &struct {
					PublicIP      string `xml:"publicIp"`
					PublicDNSName string `xml:"publicDnsName"`
				}{in.PublicIP, in.PublicDNSName}
			}
		}
		ni.Addresses = append(ni.Addresses, a)
	}
	x.NetworkIfaces = []xmlInterface{ni}
	return x
}

// describeInstances pages through instances sorted by ID, one reservation
// per instance. As in AWS, naming an instance that does not exist is
// InvalidInstanceID.NotFound, and MaxResults (5 to 1000) cannot be combined
// with instance IDs.
func (s *Server) describeInstances(f url.Values) (any, *Error) {
	ids := list(f, "InstanceId")
	max, err := maxResults(f, 5, 1000)
	if err != nil {
		return nil, err
	}
	if len(ids) > 0 && max > 0 {
		return nil, errorf("InvalidParameterCombination", "The parameter instancesSet cannot be used with the parameter maxResults")
	}
	for _, id := range ids {
		if _, ok := s.instances[id]; !ok {
			return nil, errorf("InvalidInstanceID.NotFound", "The instance ID '%s' does not exist", id)
		}
	}
	fs := filters(f)
	if n := filterValues(fs); n > maxFilterValues {
		return nil, errorf("FilterLimitExceeded", "The maximum number of filter values specified on a single call is %d", maxFilterValues)
	}
	if len(ids) > 0 {
		fs["instance-id"] = ids
	}
	var matched []*Instance
	for _, id := range candidates(s.instances, fs["instance-id"]) {
		if in := s.instances[id]; matchFilters(fs, in.attr) {
			matched = append(matched, in)
		}
	}
	page, next, err := paginate(len(matched), f.Get("NextToken"), max)
	if err != nil {
		return nil, err
	}
	resp := describeInstancesResponse{Xmlns: ec2NS, RequestID: "fake", NextToken: next}
	for _, in := range matched[page[0]:page[1]] {
		resp.Reservations = append(resp.Reservations, xmlReservation{ReservationID: "r-" + strings.TrimPrefix(in.ID, "i-"), OwnerID: Account, Instances: []xmlInstance{in.xml(s.groupName)}})
	}
	return resp, nil
}

// maxFilterValues is how many filter values one EC2 call may hold in all.
const maxFilterValues = 200

func filterValues(fs map[string][]string) int {
	n := 0
	for _, vs := range fs {
		n += len(vs)
	}
	return n
}

// candidates returns, sorted, the IDs of the resources (instances, security
// groups) a call may answer with: those it names (by ID or the ID filter,
// without wildcards), else all of them.
func candidates[V any](m map[string]V, named []string) []string {
	if len(named) == 0 || slices.ContainsFunc(named, func(id string) bool { return strings.ContainsAny(id, "*?") }) {
		return sortedKeys(m)
	}
	return present(m, named)
}

func maxResults(f url.Values, lo, hi int) (int, *Error) {
	v := f.Get("MaxResults")
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, errorf("InvalidParameterValue", "Value ( %s ) for parameter maxResults is invalid. Expecting a value between %d and %d.", v, lo, hi)
	}
	return n, nil
}

// paginate returns the [from, to) window for a page and the next token. A
// page size of 0 means everything.
func paginate(total int, token string, size int) ([2]int, string, *Error) {
	from := 0
	if token != "" {
		n, err := strconv.Atoi(strings.TrimPrefix(token, "tok-"))
		if err != nil || !strings.HasPrefix(token, "tok-") || n > total {
			return [2]int{}, "", errorf("InvalidParameterValue", "Invalid value '%s' for nextToken", token)
		}
		from = n
	}
	to := total
	if size > 0 && from+size < total {
		to = from + size
	}
	next := ""
	if to < total {
		next = "tok-" + strconv.Itoa(to)
	}
	return [2]int{from, to}, next, nil
}

type xmlSubnet struct {
	SubnetID           string   `xml:"subnetId"`
	VpcID              string   `xml:"vpcId"`
	AvailabilityZone   string   `xml:"availabilityZone"`
	AvailabilityZoneID string   `xml:"availabilityZoneId"`
	CidrBlock          string   `xml:"cidrBlock"`
	State              string   `xml:"state"`
	Tags               []xmlTag `xml:"tagSet>item"`
	// IPv6 are the subnet's IPv6 blocks (ipv6CidrBlockAssociationSet).
	IPv6 []xmlIPv6Association `xml:"ipv6CidrBlockAssociationSet>item"`
}

type xmlIPv6Association struct {
	AssociationID string `xml:"associationId"`
	CidrBlock     string `xml:"ipv6CidrBlock"`
	State         string `xml:"ipv6CidrBlockState>state"`
}

type describeSubnetsResponse struct {
	XMLName   xml.Name    `xml:"DescribeSubnetsResponse"`
	Xmlns     string      `xml:"xmlns,attr"`
	RequestID string      `xml:"requestId"`
	Subnets   []xmlSubnet `xml:"subnetSet>item"`
}

func (sn *Subnet) attr(name string) []string {
	if v, ok := tagAttr(sn.Tags, name); ok {
		return v
	}
	switch name {
	case "vpc-id":
		return []string{sn.VPCID}
	case "subnet-id":
		return []string{sn.ID}
	case "availability-zone":
		return []string{sn.Zone}
	}
	return nil
}

func (s *Server) describeSubnets(f url.Values) (any, *Error) {
	ids := list(f, "SubnetId")
	for _, id := range ids {
		if _, ok := s.subnets[id]; !ok {
			return nil, errorf("InvalidSubnetID.NotFound", "The subnet ID '%s' does not exist", id)
		}
	}
	fs := filters(f)
	if len(ids) > 0 {
		fs["subnet-id"] = ids
	}
	resp := describeSubnetsResponse{Xmlns: ec2NS, RequestID: "fake"}
	for _, id := range sortedKeys(s.subnets) {
		if sn := s.subnets[id]; matchFilters(fs, sn.attr) {
			x := xmlSubnet{SubnetID: sn.ID, VpcID: sn.VPCID, AvailabilityZone: sn.Zone,
				AvailabilityZoneID: sn.ZoneID, CidrBlock: sn.CIDR, State: "available", Tags: ec2Tags(sn.Tags)}
			if sn.IPv6CIDR != "" {
				x.IPv6 = []xmlIPv6Association{{AssociationID: "subnet-cidr-assoc-" + strings.TrimPrefix(sn.ID, "subnet-"), CidrBlock: sn.IPv6CIDR, State: "associated"}}
			}
			resp.Subnets = append(resp.Subnets, x)
		}
	}
	return resp, nil
}

type xmlIPPermission struct {
	IPProtocol string          `xml:"ipProtocol"`
	FromPort   int             `xml:"fromPort"`
	ToPort     int             `xml:"toPort"`
	IPRanges   []xmlIPRange    `xml:"ipRanges>item"`
	IPv6Ranges []xmlIPv6Range  `xml:"ipv6Ranges>item"`
	Groups     []xmlGroupPair  `xml:"groups>item"`
	PrefixList []xmlPrefixList `xml:"prefixListIds>item"`
}

// xmlPrefixList is a PrefixListId: a managed prefix list as a rule's
// source.
type xmlPrefixList struct {
	PrefixListID string `xml:"prefixListId"`
	Description  string `xml:"description,omitempty"`
}

// xmlIPv6Range is an Ipv6Range: a rule's IPv6 CIDR and its description.
type xmlIPv6Range struct {
	CidrIPv6    string `xml:"cidrIpv6"`
	Description string `xml:"description,omitempty"`
}

// xmlIPRange is an IpRange: a rule's IPv4 CIDR and its description.
type xmlIPRange struct {
	CidrIP      string `xml:"cidrIp"`
	Description string `xml:"description,omitempty"`
}

// xmlGroupPair is a UserIdGroupPair: a security group as a rule's source.
type xmlGroupPair struct {
	UserID      string `xml:"userId"`
	GroupID     string `xml:"groupId"`
	Description string `xml:"description,omitempty"`
}

type xmlSecurityGroup struct {
	OwnerID     string            `xml:"ownerId"`
	GroupID     string            `xml:"groupId"`
	GroupName   string            `xml:"groupName"`
	Description string            `xml:"groupDescription"`
	VpcID       string            `xml:"vpcId"`
	Ingress     []xmlIPPermission `xml:"ipPermissions>item"`
	Tags        []xmlTag          `xml:"tagSet>item"`
}

type describeSecurityGroupsResponse struct {
	XMLName   xml.Name           `xml:"DescribeSecurityGroupsResponse"`
	Xmlns     string             `xml:"xmlns,attr"`
	RequestID string             `xml:"requestId"`
	Groups    []xmlSecurityGroup `xml:"securityGroupInfo>item"`
	NextToken string             `xml:"nextToken,omitempty"`
}

func (sg *securityGroup) attr(name string) []string {
	if v, ok := tagAttr(sg.tags, name); ok {
		return v
	}
	switch name {
	case "vpc-id":
		return []string{sg.vpcID}
	case "group-name":
		return []string{sg.name}
	case "group-id":
		return []string{sg.id}
	case "ip-permission.group-id":
		var out []string
		for _, p := range sg.ingress {
			if p.group != "" {
				out = append(out, p.group)
			}
		}
		return out
	}
	return nil
}

func (sg *securityGroup) xml() xmlSecurityGroup {
	x := xmlSecurityGroup{OwnerID: Account, GroupID: sg.id, GroupName: sg.name, Description: sg.description, VpcID: sg.vpcID, Tags: ec2Tags(sg.tags)}
	for _, p := range sg.ingress {
		xp := xmlIPPermission{IPProtocol: p.protocol, FromPort: p.from, ToPort: p.to}
		switch {
		case p.group != "":
			xp.Groups = append(xp.Groups, xmlGroupPair{UserID: Account, GroupID: p.group, Description: p.description})
		case p.prefixList != "":
			xp.PrefixList = append(xp.PrefixList, xmlPrefixList{PrefixListID: p.prefixList, Description: p.description})
		case strings.Contains(p.cidr, ":"):
			xp.IPv6Ranges = append(xp.IPv6Ranges, xmlIPv6Range{CidrIPv6: p.cidr, Description: p.description})
		default:
			xp.IPRanges = append(xp.IPRanges, xmlIPRange{CidrIP: p.cidr, Description: p.description})
		}
		x.Ingress = append(x.Ingress, xp)
	}
	return x
}

func (s *Server) describeSecurityGroups(f url.Values) (any, *Error) {
	ids := list(f, "GroupId")
	for _, id := range ids {
		if _, ok := s.sgs[id]; !ok {
			return nil, errorf("InvalidGroup.NotFound", "The security group '%s' does not exist", id)
		}
	}
	fs := filters(f)
	if len(ids) > 0 {
		fs["group-id"] = ids
	}
	// MaxResults (5 to 1000) pages the answer; without it, every group
	// is returned (EC2 API reference, DescribeSecurityGroups).
	max, err := maxResults(f, 5, 1000)
	if err != nil {
		return nil, err
	}
	var matched []*securityGroup
	for _, id := range candidates(s.sgs, fs["group-id"]) {
		if sg := s.sgs[id]; matchFilters(fs, sg.attr) {
			matched = append(matched, sg)
		}
	}
	page, next, err := paginate(len(matched), f.Get("NextToken"), max)
	if err != nil {
		return nil, err
	}
	resp := describeSecurityGroupsResponse{Xmlns: ec2NS, RequestID: "fake", NextToken: next}
	for _, sg := range matched[page[0]:page[1]] {
		resp.Groups = append(resp.Groups, sg.xml())
	}
	return resp, nil
}

type createSecurityGroupResponse struct {
	XMLName   xml.Name `xml:"CreateSecurityGroupResponse"`
	Xmlns     string   `xml:"xmlns,attr"`
	RequestID string   `xml:"requestId"`
	Return    bool     `xml:"return"`
	GroupID   string   `xml:"groupId"`
}

type returnResponse struct {
	XMLName   xml.Name
	Xmlns     string `xml:"xmlns,attr"`
	RequestID string `xml:"requestId"`
	Return    bool   `xml:"return"`
}

func ok(action string) returnResponse {
	return returnResponse{XMLName: xml.Name{Local: action + "Response"}, Xmlns: ec2NS, RequestID: "fake", Return: true}
}

// tagSpecTags reads TagSpecification.N.Tag.M.Key/Value for resourceType.
func tagSpecTags(f url.Values, resourceType string) map[string]string {
	tags := map[string]string{}
	for _, p := range items(f, "TagSpecification") {
		if f.Get(p+".ResourceType") != resourceType {
			continue
		}
		for _, t := range items(f, p+".Tag") {
			tags[f.Get(t+".Key")] = f.Get(t + ".Value")
		}
	}
	return tags
}

func (s *Server) createSecurityGroup(f url.Values) (any, *Error) {
	name, vpc := f.Get("GroupName"), f.Get("VpcId")
	if name == "" || f.Get("GroupDescription") == "" {
		return nil, errorf("MissingParameter", "The request must contain the parameters GroupName and GroupDescription")
	}
	if _, known := s.vpcs[vpc]; !known {
		return nil, errorf("InvalidVpcID.NotFound", "The vpc ID '%s' does not exist", vpc)
	}
	for _, sg := range s.sgs {
		if sg.name == name && sg.vpcID == vpc {
			return nil, errorf("InvalidGroup.Duplicate", "The security group '%s' already exists for VPC '%s'", name, vpc)
		}
	}
	sg := &securityGroup{id: "sg-" + s.nextID(), name: name, description: f.Get("GroupDescription"), vpcID: vpc, tags: tagSpecTags(f, "security-group")}
	s.sgs[sg.id] = sg
	return createSecurityGroupResponse{Xmlns: ec2NS, RequestID: "fake", Return: true, GroupID: sg.id}, nil
}

// deleteSecurityGroup refuses while a load balancer uses the group, and for
// the configured number of attempts after one released it.
func (s *Server) deleteSecurityGroup(f url.Values) (any, *Error) {
	id := f.Get("GroupId")
	sg, found := s.sgs[id]
	if !found {
		return nil, errorf("InvalidGroup.NotFound", "The security group '%s' does not exist", id)
	}
	for _, lb := range s.lbs {
		for _, g := range lb.securityGroups {
			if g == id {
				return nil, errorf("DependencyViolation", "resource %s has a dependent object", id)
			}
		}
	}
	if sg.releasePolls > 0 {
		sg.releasePolls--
		return nil, errorf("DependencyViolation", "resource %s has a dependent object", id)
	}
	for _, other := range s.sgs {
		if slices.Contains(other.attr("ip-permission.group-id"), id) {
			return nil, errorf("DependencyViolation", "resource %s has a dependent object", id)
		}
	}
	delete(s.sgs, id)
	return ok("DeleteSecurityGroup"), nil
}

func (s *Server) permissions(f url.Values) ([]permission, *Error) {
	var out []permission
	for _, p := range items(f, "IpPermissions") {
		from, err1 := strconv.Atoi(f.Get(p + ".FromPort"))
		to, err2 := strconv.Atoi(f.Get(p + ".ToPort"))
		if err1 != nil || err2 != nil {
			return nil, errorf("InvalidParameterValue", "FromPort and ToPort are required for %s", f.Get(p+".IpProtocol"))
		}
		for _, r := range items(f, p+".IpRanges") {
			cidr := f.Get(r + ".CidrIp")
			if ip, _, err := net.ParseCIDR(cidr); err != nil || ip.To4() == nil {
				return nil, errorf("InvalidParameterValue", "CIDR block %s is malformed", cidr)
			}
			out = append(out, permission{protocol: f.Get(p + ".IpProtocol"), from: from, to: to, cidr: cidr, description: f.Get(r + ".Description")})
		}
		for _, r := range items(f, p+".Ipv6Ranges") {
			cidr := f.Get(r + ".CidrIpv6")
			if ip, _, err := net.ParseCIDR(cidr); err != nil || ip.To4() != nil || !strings.Contains(cidr, ":") {
				return nil, errorf("InvalidParameterValue", "CIDR block %s is malformed", cidr)
			}
			out = append(out, permission{protocol: f.Get(p + ".IpProtocol"), from: from, to: to, cidr: cidr, description: f.Get(r + ".Description")})
		}
		for _, g := range items(f, p+".Groups") {
			id := f.Get(g + ".GroupId")
			if _, known := s.sgs[id]; !known {
				return nil, errorf("InvalidGroup.NotFound", "The security group '%s' does not exist", id)
			}
			out = append(out, permission{protocol: f.Get(p + ".IpProtocol"), from: from, to: to, group: id, description: f.Get(g + ".Description")})
		}
		for _, g := range items(f, p+".PrefixListIds") {
			id := f.Get(g + ".PrefixListId")
			if !strings.HasPrefix(id, "pl-") {
				return nil, errorf("InvalidPrefixListId.Malformed", "The prefix list ID '%s' is malformed", id)
			}
			out = append(out, permission{protocol: f.Get(p + ".IpProtocol"), from: from, to: to, prefixList: id, description: f.Get(g + ".Description")})
		}
	}
	return out, nil
}

func (s *Server) changeIngress(f url.Values, add bool) (any, *Error) {
	sg, found := s.sgs[f.Get("GroupId")]
	if !found {
		return nil, errorf("InvalidGroup.NotFound", "The security group '%s' does not exist", f.Get("GroupId"))
	}
	perms, err := s.permissions(f)
	if err != nil {
		return nil, err
	}
	// As in AWS, a call with one bad rule changes nothing.
	for _, p := range perms {
		i := indexOf(sg.ingress, p)
		switch {
		case add && i >= 0:
			return nil, errorf("InvalidPermission.Duplicate", "the specified rule \"peer: %s, %s, ALLOW\" already exists", p.cidr, p.protocol)
		case !add && i < 0:
			return nil, errorf("InvalidPermission.NotFound", "The specified rule does not exist in this security group.")
		}
	}
	if add {
		if err := s.checkRuleQuota(sg, perms); err != nil {
			return nil, err
		}
	}
	for _, p := range perms {
		if add {
			sg.ingress = append(sg.ingress, p)
		} else if i := indexOf(sg.ingress, p); i >= 0 {
			sg.ingress = append(sg.ingress[:i], sg.ingress[i+1:]...)
		}
	}
	if add {
		return ok("AuthorizeSecurityGroupIngress"), nil
	}
	return ok("RevokeSecurityGroupIngress"), nil
}

// DefaultRulesPerSecurityGroup is Amazon VPC's default "Inbound or outbound
// rules per security group" quota (Amazon VPC quotas, Security groups,
// https://docs.aws.amazon.com/vpc/latest/userguide/amazon-vpc-limits.html;
// adjustable, but times "Security groups per network interface" (5 by
// default) it cannot exceed 1,000).
const DefaultRulesPerSecurityGroup = 60

// SetRulesPerSecurityGroup sets the account's rules-per-security-group
// quota (AWS's default: DefaultRulesPerSecurityGroup, raised on request);
// 0 lifts it.
func (s *Server) SetRulesPerSecurityGroup(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rulesPerGroup = n
}

// checkRuleQuota refuses an AuthorizeSecurityGroupIngress that would leave
// the group with more inbound rules than the quota, as AWS does: the
// whole call fails with RulesPerSecurityGroupLimitExceeded (400, "The
// maximum number of rules per security group has been reached.") and
// changes nothing. AWS counts each source of a permission as a rule and
// enforces the quota separately for IPv4 and IPv6 rules; a rule whose
// source is a security group or a prefix list counts in both. (A
// customer-managed prefix list counts as its maximum number of entries on
// AWS; the fake knows no sizes and counts it as one.)
func (s *Server) checkRuleQuota(sg *securityGroup, perms []permission) *Error {
	if s.rulesPerGroup <= 0 {
		return nil
	}
	v4, v6 := ruleCounts(sg.ingress)
	a4, a6 := ruleCounts(perms)
	if v4+a4 > s.rulesPerGroup || v6+a6 > s.rulesPerGroup {
		return errorf("RulesPerSecurityGroupLimitExceeded", "The maximum number of rules per security group has been reached.")
	}
	return nil
}

// ruleCounts counts rules as AWS does against its quota: IPv4 and IPv6
// apart, a security group or prefix list as source in both.
func ruleCounts(ps []permission) (v4, v6 int) {
	for _, p := range ps {
		switch {
		case p.group != "" || p.prefixList != "":
			v4++
			v6++
		case strings.Contains(p.cidr, ":"):
			v6++
		default:
			v4++
		}
	}
	return v4, v6
}

// indexOf finds the rule p in ps, whatever the descriptions (AWS refuses a
// rule differing from one the group has only by its description as a
// duplicate, and revokes a rule named without one).
func indexOf(ps []permission, p permission) int {
	p.description = ""
	for i, q := range ps {
		if q.description = ""; q == p {
			return i
		}
	}
	return -1
}

func (s *Server) createTags(f url.Values) (any, *Error) {
	tags := map[string]string{}
	for _, t := range items(f, "Tag") {
		tags[f.Get(t+".Key")] = f.Get(t + ".Value")
	}
	for _, id := range list(f, "ResourceId") {
		target, err := s.taggable(id)
		if err != nil {
			return nil, err
		}
		for k, v := range tags {
			target[k] = v
		}
	}
	return ok("CreateTags"), nil
}

// groupName is a security group's name ("" when it does not exist). Caller
// holds s.mu.
func (s *Server) groupName(id string) string {
	if sg := s.sgs[id]; sg != nil {
		return sg.name
	}
	return ""
}
