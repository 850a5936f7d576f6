package openstack

import (
	"context"
	"fmt"
	"net"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/layer3/extraroutes"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/layer3/routers"
	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/klog/v2"
)

// Routes manages pod CIDR routes as extra routes of one Neutron router.
// Only routes whose next hop is an address of one of the project's servers
// are reported as the cluster's.
type Routes struct {
	name     string
	routerID string
	clients  func(ctx context.Context) (*serviceClients, error)
	cache    *serverCache
}

var _ cloudprovider.Routes = (*Routes)(nil)

func (r *Routes) wrap(op string, err error) error {
	return fmt.Errorf("%s routes of router %s: %w", op, r.routerID, err)
}

// ListRoutes lists the router's routes whose next hop is a server address.
func (r *Routes) ListRoutes(ctx context.Context, _ string) ([]*cloudprovider.Route, error) {
	sc, err := r.clients(ctx)
	if err != nil {
		return nil, r.wrap("listing", err)
	}
	if sc.network == nil {
		return nil, r.wrap("listing", errNoNetwork)
	}
	router, err := routers.Get(ctx, sc.network, r.routerID).Extract()
	if err != nil {
		return nil, r.wrap("listing", err)
	}
	snap, err := r.cache.current(ctx)
	if err != nil {
		return nil, r.wrap("listing", err)
	}
	owners := addressOwners(snap)
	var out []*cloudprovider.Route
	for _, rt := range router.Routes {
		if node, ok := owners[rt.NextHop]; ok {
			out = append(out, &cloudprovider.Route{Name: rt.DestinationCIDR + "-" + rt.NextHop, TargetNode: types.NodeName(node), DestinationCIDR: rt.DestinationCIDR})
		}
	}
	return out, nil
}

func addressOwners(s *snapshot) map[string]string {
	owners := map[string]string{}
	for _, srv := range s.byID {
		for _, a := range srv.Addresses {
			owners[a.Address] = srv.Name
		}
	}
	return owners
}

// nextHop is the target node's first internal address of the CIDR's family.
func (r *Routes) nextHop(ctx context.Context, route *cloudprovider.Route) (string, error) {
	srv, err := r.cache.byName(ctx, string(route.TargetNode))
	if err != nil {
		return "", err
	}
	_, cidr, err := net.ParseCIDR(route.DestinationCIDR)
	if err != nil {
		return "", fmt.Errorf("destination %q: %w", route.DestinationCIDR, err)
	}
	v4 := cidr.IP.To4() != nil
	for _, a := range srv.Addresses {
		ip := net.ParseIP(a.Address)
		if a.Type == "InternalIP" && ip != nil && (ip.To4() != nil) == v4 {
			return a.Address, nil
		}
	}
	return "", fmt.Errorf("server %s has no internal address of the family of %s", srv.Name, route.DestinationCIDR)
}

// CreateRoute adds the route atomically (Neutron's add_extraroutes).
func (r *Routes) CreateRoute(ctx context.Context, _ string, _ string, route *cloudprovider.Route) error {
	return r.change(ctx, "creating", route, func(ctx context.Context, c *gophercloud.ServiceClient, id string, o extraroutes.Opts) error {
		return extraroutes.Add(ctx, c, id, o).Err
	})
}

// DeleteRoute removes the route atomically (Neutron's remove_extraroutes).
func (r *Routes) DeleteRoute(ctx context.Context, _ string, route *cloudprovider.Route) error {
	return r.change(ctx, "deleting", route, func(ctx context.Context, c *gophercloud.ServiceClient, id string, o extraroutes.Opts) error {
		return extraroutes.Remove(ctx, c, id, o).Err
	})
}

// routeChange is Neutron's add_extraroutes or remove_extraroutes.
type routeChange func(context.Context, *gophercloud.ServiceClient, string, extraroutes.Opts) error

func (r *Routes) change(ctx context.Context, op string, route *cloudprovider.Route, fn routeChange) error {
	sc, err := r.clients(ctx)
	if err != nil {
		return r.wrap(op, err)
	}
	if sc.network == nil {
		return r.wrap(op, errNoNetwork)
	}
	hop, err := r.nextHop(ctx, route)
	if err != nil {
		return r.wrap(op, err)
	}
	opts := extraroutes.Opts{Routes: &[]routers.Route{{DestinationCIDR: route.DestinationCIDR, NextHop: hop}}}
	if err := fn(ctx, sc.network, r.routerID, opts); err != nil {
		return r.wrap(op, err)
	}
	klog.FromContext(ctx).V(2).Info("Changed route", "op", op, "node", route.TargetNode, "destination", route.DestinationCIDR, "nextHop", hop)
	return nil
}
