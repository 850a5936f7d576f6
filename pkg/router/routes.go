package router

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/klog/v2"
)

// ListRoutes merges the routes of every backend that has routes. If any
// backend cannot list, the whole call fails: a partial list would make the
// route controller recreate routes it cannot see and mark their nodes
// NetworkUnavailable when that fails.
func (r *Router) ListRoutes(ctx context.Context, clusterName string) ([]*cloudprovider.Route, error) {
	var (
		all    []*cloudprovider.Route
		owners = map[string]*backend{}
	)
	err := ask(ctx, r.routes, func(ctx context.Context, b *backend) ([]*cloudprovider.Route, error) {
		return b.listRoutes(ctx, clusterName)
	}, func(b *backend, routes []*cloudprovider.Route) {
		for _, rt := range routes {
			all = append(all, rt)
			owners[routeKey(rt)] = b
		}
	})
	if err != nil {
		return nil, err
	}
	r.routeMu.Lock()
	r.routeOwner = owners
	r.routeMu.Unlock()
	return all, nil
}

// CreateRoute creates the route in the backend of its target node. Nodes of
// backends without routes are skipped with success: their pod network is
// their CNI's business, and an error would mark them NetworkUnavailable.
func (r *Router) CreateRoute(ctx context.Context, clusterName string, nameHint string, route *cloudprovider.Route) error {
	b, err := r.routeBackend(ctx, route.TargetNode)
	if err != nil || b == nil {
		return err
	}
	return b.createRoute(ctx, clusterName, nameHint, route)
}

// DeleteRoute deletes the route from the backend that listed it, or else
// from the backend of its target node.
func (r *Router) DeleteRoute(ctx context.Context, clusterName string, route *cloudprovider.Route) error {
	r.routeMu.Lock()
	b := r.routeOwner[routeKey(route)]
	r.routeMu.Unlock()
	if b == nil {
		var err error
		if b, err = r.routeBackend(ctx, route.TargetNode); err != nil || b == nil {
			return err
		}
	}
	return b.deleteRoute(ctx, clusterName, route)
}

// routeBackend finds the routes backend of a node; nil, nil when the node's
// backend has no routes.
func (r *Router) routeBackend(ctx context.Context, nodeName types.NodeName) (*backend, error) {
	if r.nodeLister == nil {
		return nil, errors.New("routes: no node informer yet")
	}
	node, err := r.nodeLister.Get(string(nodeName))
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("routes: node %s not found", nodeName)
	}
	if err != nil {
		return nil, fmt.Errorf("routes: %w", err)
	}
	b, err := r.owner(ctx, node)
	if err != nil {
		return nil, fmt.Errorf("routes: node %s: %w", nodeName, err)
	}
	if b.routes == nil {
		klog.FromContext(ctx).V(4).Info("Node's backend has no routes; leaving its pod network to the CNI", "node", nodeName, "backend", b.Name)
		return nil, nil
	}
	return b, nil
}

func routeKey(rt *cloudprovider.Route) string {
	return string(rt.TargetNode) + "|" + rt.DestinationCIDR
}

func (b *backend) listRoutes(ctx context.Context, clusterName string) ([]*cloudprovider.Route, error) {
	return call(ctx, b, opListRoutes, routeCallTimeout, func(ctx context.Context) ([]*cloudprovider.Route, error) {
		return b.routes.ListRoutes(ctx, clusterName)
	})
}

func (b *backend) createRoute(ctx context.Context, clusterName, nameHint string, route *cloudprovider.Route) error {
	_, err := call(ctx, b, opCreateRoute, routeCallTimeout, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, b.routes.CreateRoute(ctx, clusterName, nameHint, route)
	})
	return err
}

func (b *backend) deleteRoute(ctx context.Context, clusterName string, route *cloudprovider.Route) error {
	_, err := call(ctx, b, opDeleteRoute, routeCallTimeout, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, b.routes.DeleteRoute(ctx, clusterName, route)
	})
	return err
}
