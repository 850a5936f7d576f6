package awsfake

import (
	"encoding/xml"
	"net/url"
	"strconv"
	"strings"
)

type xmlRoute struct {
	DestinationCidrBlock string `xml:"destinationCidrBlock"`
	GatewayID            string `xml:"gatewayId,omitempty"`
	InstanceID           string `xml:"instanceId,omitempty"`
	InstanceOwnerID      string `xml:"instanceOwnerId,omitempty"`
	State                string `xml:"state"`
	Origin               string `xml:"origin"`
}

type xmlRouteTable struct {
	RouteTableID string           `xml:"routeTableId"`
	VpcID        string           `xml:"vpcId"`
	OwnerID      string           `xml:"ownerId"`
	Routes       []xmlRoute       `xml:"routeSet>item"`
	Associations []xmlAssociation `xml:"associationSet>item"`
	Tags         []xmlTag         `xml:"tagSet>item"`
}

type xmlAssociation struct {
	ID           string `xml:"routeTableAssociationId"`
	RouteTableID string `xml:"routeTableId"`
	SubnetID     string `xml:"subnetId,omitempty"`
	Main         bool   `xml:"main"`
	State        struct {
		State string `xml:"state"`
	} `xml:"associationState"`
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
	case "association.main":
		return []string{strconv.FormatBool(rt.Main)}
	case "association.subnet-id":
		return rt.Subnets
	case "route.gateway-id":
		var out []string
		for _, r := range rt.Routes {
			if r.GatewayID != "" {
				out = append(out, r.GatewayID)
			}
		}
		return append(out, "local")
	case "route.instance-id":
		var out []string
		for _, r := range rt.Routes {
			if r.InstanceID != "" {
				out = append(out, r.InstanceID)
			}
		}
		return out
	}
	return nil
}

func (rt *RouteTable) associations() []xmlAssociation {
	assoc := func(subnet string, main bool) xmlAssociation {
		a := xmlAssociation{ID: "rtbassoc-" + strings.TrimPrefix(rt.ID, "rtb-") + strings.TrimPrefix(subnet, "subnet-"), RouteTableID: rt.ID, SubnetID: subnet, Main: main}
		a.State.State = "associated"
		return a
	}
	var out []xmlAssociation
	if rt.Main {
		out = append(out, assoc("", true))
	}
	for _, sn := range rt.Subnets {
		out = append(out, assoc(sn, false))
	}
	return out
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
		x := xmlRouteTable{RouteTableID: rt.ID, VpcID: rt.VPCID, OwnerID: Account, Tags: ec2Tags(rt.Tags), Associations: rt.associations()}
		if cidr := s.vpcs[rt.VPCID]; cidr != "" {
			x.Routes = append(x.Routes, xmlRoute{DestinationCidrBlock: cidr, GatewayID: "local", State: "active", Origin: "CreateRouteTable"})
		}
		for _, r := range rt.Routes {
			if r.GatewayID != "" {
				x.Routes = append(x.Routes, xmlRoute{DestinationCidrBlock: r.DestinationCIDR, GatewayID: r.GatewayID, State: "active", Origin: "CreateRoute"})
				continue
			}
			state := "active"
			if in := s.instances[r.InstanceID]; in == nil || in.State == "terminated" {
				state = "blackhole"
			}
			x.Routes = append(x.Routes, xmlRoute{DestinationCidrBlock: r.DestinationCIDR, InstanceID: r.InstanceID, InstanceOwnerID: Account, State: state, Origin: "CreateRoute"})
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
