package awsfake

import (
	"encoding/xml"
	"fmt"
	"net/url"
	"regexp"
	"strings"
)

type xmlAvailabilityZone struct {
	ZoneName           string `xml:"zoneName"`
	ZoneID             string `xml:"zoneId"`
	ZoneState          string `xml:"zoneState"`
	RegionName         string `xml:"regionName"`
	GroupName          string `xml:"groupName"`
	NetworkBorderGroup string `xml:"networkBorderGroup"`
	ZoneType           string `xml:"zoneType"`
	OptInStatus        string `xml:"optInStatus"`
}

type describeAvailabilityZonesResponse struct {
	XMLName   xml.Name              `xml:"DescribeAvailabilityZonesResponse"`
	Xmlns     string                `xml:"xmlns,attr"`
	RequestID string                `xml:"requestId"`
	Zones     []xmlAvailabilityZone `xml:"availabilityZoneInfo>item"`
}

// zones returns the region's availability zones (name to zone ID): every
// zone a subnet or an instance is in. Caller holds s.mu.
func (s *Server) zones() map[string]string {
	out := map[string]string{}
	for _, sn := range s.subnets {
		if sn.Zone != "" {
			out[sn.Zone] = sn.ZoneID
		}
	}
	for _, in := range s.instances {
		if _, seen := out[in.Zone]; !seen && in.Zone != "" {
			out[in.Zone] = in.ZoneID
		}
	}
	return out
}

// describeAvailabilityZones answers ec2:DescribeAvailabilityZones for the
// zones in use (see zones), all available availability zones (no local or
// wavelength zones), with the ZoneName.N and ZoneId.N parameters and the
// zone-name, zone-id, region-name, state and zone-type filters. As in AWS,
// naming a zone that does not exist is InvalidParameterValue.
func (s *Server) describeAvailabilityZones(f url.Values) (any, *Error) {
	zones := s.zones()
	byID := map[string]string{}
	for name, id := range zones {
		byID[id] = name
	}
	fs := filters(f)
	if names := list(f, "ZoneName"); len(names) > 0 {
		for _, n := range names {
			if _, found := zones[n]; !found {
				return nil, errorf("InvalidParameterValue", "The zone '%s' does not exist.", n)
			}
		}
		fs["zone-name"] = append(fs["zone-name"], names...)
	}
	if ids := list(f, "ZoneId"); len(ids) > 0 {
		for _, id := range ids {
			if _, found := byID[id]; !found {
				return nil, errorf("InvalidParameterValue", "The zone ID '%s' does not exist.", id)
			}
		}
		fs["zone-id"] = append(fs["zone-id"], ids...)
	}
	resp := describeAvailabilityZonesResponse{Xmlns: ec2NS, RequestID: "fake"}
	for _, name := range sortedKeys(zones) {
		z := xmlAvailabilityZone{ZoneName: name, ZoneID: zones[name], ZoneState: "available", RegionName: s.region,
			GroupName: s.region + "-zg-1", NetworkBorderGroup: s.region, ZoneType: "availability-zone", OptInStatus: "opt-in-not-required"}
		attr := func(filter string) []string {
			switch filter {
			case "zone-name":
				return []string{z.ZoneName}
			case "zone-id":
				return []string{z.ZoneID}
			case "region-name":
				return []string{z.RegionName}
			case "state":
				return []string{z.ZoneState}
			case "zone-type":
				return []string{z.ZoneType}
			case "group-name":
				return []string{z.GroupName}
			}
			return nil
		}
		if matchFilters(fs, attr) {
			resp.Zones = append(resp.Zones, z)
		}
	}
	return resp, nil
}

// topologyTypes are the instance families ec2:DescribeInstanceTopology
// describes (per the AWS documentation); instances of other types are
// left out of its answer, as in AWS.
var topologyTypes = regexp.MustCompile(`^(p3dn|p4d|p4de|p5|p5e|p5en|p6-b200|trn1|trn1n|trn2|trn2u|g6|g6e|gr6|hpc6a|hpc6id|hpc7a|hpc7g)\.`)

type xmlInstanceTopology struct {
	InstanceID       string   `xml:"instanceId"`
	InstanceType     string   `xml:"instanceType"`
	GroupName        string   `xml:"groupName,omitempty"`
	NetworkNodes     []string `xml:"networkNodeSet>item"`
	AvailabilityZone string   `xml:"availabilityZone"`
	ZoneID           string   `xml:"zoneId"`
}

type describeInstanceTopologyResponse struct {
	XMLName   xml.Name              `xml:"DescribeInstanceTopologyResponse"`
	Xmlns     string                `xml:"xmlns,attr"`
	RequestID string                `xml:"requestId"`
	Instances []xmlInstanceTopology `xml:"instanceSet>item"`
	NextToken string                `xml:"nextToken,omitempty"`
}

// describeInstanceTopology answers ec2:DescribeInstanceTopology: for
// running instances of the supported types, three network nodes (the
// fake's: one spine per zone, one per ten instances and one per instance).
// InstanceId.N takes up to 100 IDs; MaxResults is 1 to 100 (default 20),
// not with more than 100 IDs; unknown IDs are left out, as in AWS.
func (s *Server) describeInstanceTopology(f url.Values) (any, *Error) {
	ids := list(f, "InstanceId")
	if len(ids) > 100 {
		return nil, errorf("InvalidParameterValue", "The maximum number of instance IDs is 100.")
	}
	max, err := maxResults(f, 1, 100)
	if err != nil {
		return nil, err
	}
	if max == 0 {
		max = 20
	}
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	fs := filters(f)
	var matched []*Instance
	for _, id := range sortedKeys(s.instances) {
		in := s.instances[id]
		if (len(ids) > 0 && !want[id]) || in.State != "running" || !topologyTypes.MatchString(in.InstanceType) {
			continue
		}
		attr := func(name string) []string {
			switch name {
			case "availability-zone":
				return []string{in.Zone}
			case "zone-id":
				return []string{in.ZoneID}
			case "instance-type":
				return []string{in.InstanceType}
			}
			return nil
		}
		if matchFilters(fs, attr) {
			matched = append(matched, in)
		}
	}
	page, next, perr := paginate(len(matched), f.Get("NextToken"), max)
	if perr != nil {
		return nil, perr
	}
	resp := describeInstanceTopologyResponse{Xmlns: ec2NS, RequestID: "fake", NextToken: next}
	for i, in := range matched[page[0]:page[1]] {
		n := page[0] + i
		resp.Instances = append(resp.Instances, xmlInstanceTopology{InstanceID: in.ID, InstanceType: in.InstanceType, AvailabilityZone: in.Zone, ZoneID: in.ZoneID,
			NetworkNodes: []string{"nn-" + in.ZoneID + "-spine", fmt.Sprintf("nn-%s-%d", in.ZoneID, n/10), "nn-" + strings.TrimPrefix(in.ID, "i-")}})
	}
	return resp, nil
}

// deleteTags answers ec2:DeleteTags: a Tag.N with only a key removes the
// key whatever its value; with a value, only when the value matches.
func (s *Server) deleteTags(f url.Values) (any, *Error) {
	ids := list(f, "ResourceId")
	targets := make([]map[string]string, 0, len(ids))
	for _, id := range ids {
		t, err := s.taggable(id)
		if err != nil {
			return nil, err
		}
		targets = append(targets, t)
	}
	for _, t := range targets {
		for _, p := range items(f, "Tag") {
			k := f.Get(p + ".Key")
			if v, has := f[p+".Value"]; has && len(v) > 0 && t[k] != v[0] {
				continue
			}
			delete(t, k)
		}
	}
	return ok("DeleteTags"), nil
}

// taggable returns the tag map of an EC2 resource. Caller holds s.mu.
func (s *Server) taggable(id string) (map[string]string, *Error) {
	switch {
	case s.sgs[id] != nil:
		return s.sgs[id].tags, nil
	case s.instances[id] != nil:
		if s.instances[id].Tags == nil {
			s.instances[id].Tags = map[string]string{}
		}
		return s.instances[id].Tags, nil
	case s.subnets[id] != nil:
		if s.subnets[id].Tags == nil {
			s.subnets[id].Tags = map[string]string{}
		}
		return s.subnets[id].Tags, nil
	case s.routes[id] != nil:
		if s.routes[id].Tags == nil {
			s.routes[id].Tags = map[string]string{}
		}
		return s.routes[id].Tags, nil
	}
	return nil, errorf("InvalidID", "The ID '%s' is not valid", id)
}
