package awsfake

import (
	"encoding/xml"
	"net/url"
)

type xmlRoute struct {
	DestinationCidrBlock string `xml:"destinationCidrBlock"`
	InstanceID           string `xml:"instanceId,omitempty"`
	State                string `xml:"state"`
	Origin               string `xml:"origin"`
}

type xmlRouteTable struct {
	RouteTableID string     `xml:"routeTableId"`
	VpcID        string     `xml:"vpcId"`
	Routes       []xmlRoute `xml:"routeSet>item"`
	Tags         []xmlTag   `xml:"tagSet>item"`
}

type describeRouteTablesResponse struct {
	XMLName     xml.Name        `xml:"DescribeRouteTablesResponse"`
	Xmlns       string          `xml:"xmlns,attr"`
	RequestID   string          `xml:"requestId"`
	RouteTables []xmlRouteTable `xml:"routeTableSet>item"`
}

func (rt *RouteTable) attr(name string) []string {
	if v, ok := tagAttr(rt.Tags, name); ok {
		return v
	}
	switch name {
	case "vpc-id":
		return []string{rt.VPCID}
	case "route-table-id":
		return []string{rt.ID}
	}
	return nil
}

func (s *Server) describeRouteTables(f url.Values) (any, *Error) {
	ids := list(f, "RouteTableId")
	for _, id := range ids {
		if _, ok := s.routes[id]; !ok {
			return nil, errorf("InvalidRouteTableID.NotFound", "The routeTable ID '%s' does not exist", id)
		}
	}
	fs := filters(f)
	if len(ids) > 0 {
		fs["route-table-id"] = ids
	}
	resp := describeRouteTablesResponse{Xmlns: ec2NS, RequestID: "fake"}
	for _, id := range sortedKeys(s.routes) {
		rt := s.routes[id]
		if !matchFilters(fs, rt.attr) {
			continue
		}
		x := xmlRouteTable{RouteTableID: rt.ID, VpcID: rt.VPCID, Tags: ec2Tags(rt.Tags)}
		if cidr := s.vpcs[rt.VPCID]; cidr != "" {
			x.Routes = append(x.Routes, xmlRoute{DestinationCidrBlock: cidr, State: "active", Origin: "CreateRouteTable"})
		}
		for _, r := range rt.Routes {
			state := "active"
			if in := s.instances[r.InstanceID]; in == nil || in.State == "terminated" {
				state = "blackhole"
			}
			x.Routes = append(x.Routes, xmlRoute{DestinationCidrBlock: r.DestinationCIDR, InstanceID: r.InstanceID, State: state, Origin: "CreateRoute"})
		}
		resp.RouteTables = append(resp.RouteTables, x)
	}
	return resp, nil
}

func (s *Server) createRoute(f url.Values) (any, *Error) {
	rt, found := s.routes[f.Get("RouteTableId")]
	if !found {
		return nil, errorf("InvalidRouteTableID.NotFound", "The routeTable ID '%s' does not exist", f.Get("RouteTableId"))
	}
	cidr, inst := f.Get("DestinationCidrBlock"), f.Get("InstanceId")
	if _, ok := s.instances[inst]; !ok {
		return nil, errorf("InvalidInstanceID.NotFound", "The instance ID '%s' does not exist", inst)
	}
	for _, r := range rt.Routes {
		if r.DestinationCIDR == cidr {
			return nil, errorf("RouteAlreadyExists", "The route identified by %s already exists.", cidr)
		}
	}
	rt.Routes = append(rt.Routes, Route{DestinationCIDR: cidr, InstanceID: inst})
	return ok("CreateRoute"), nil
}

func (s *Server) deleteRoute(f url.Values) (any, *Error) {
	rt, found := s.routes[f.Get("RouteTableId")]
	if !found {
		return nil, errorf("InvalidRouteTableID.NotFound", "The routeTable ID '%s' does not exist", f.Get("RouteTableId"))
	}
	cidr := f.Get("DestinationCidrBlock")
	for i, r := range rt.Routes {
		if r.DestinationCIDR == cidr {
			rt.Routes = append(rt.Routes[:i], rt.Routes[i+1:]...)
			return ok("DeleteRoute"), nil
		}
	}
	return nil, errorf("InvalidRoute.NotFound", "no route with destination-cidr-block %s in route table %s", cidr, rt.ID)
}

func (s *Server) modifyInstanceAttribute(f url.Values) (any, *Error) {
	in, found := s.instances[f.Get("InstanceId")]
	if !found {
		return nil, errorf("InvalidInstanceID.NotFound", "The instance ID '%s' does not exist", f.Get("InstanceId"))
	}
	if v := f.Get("SourceDestCheck.Value"); v != "" {
		in.SourceDestCheck = v == "true"
	}
	return ok("ModifyInstanceAttribute"), nil
}
