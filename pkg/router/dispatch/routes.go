package dispatch

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/klog/v2"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/router/backend"
)

// ListRoutes merges the routes of every backend that has routes. A backend
// that cannot list does not stop the others' routes, and its own routes
// are reported as they were: for each of its nodes whose NetworkUnavailable
// condition says the route controller created its routes, a route per pod
// CIDR. The route controller then neither deletes those routes (it could
// not reach them anyway) nor recreates them and marks working nodes
// NetworkUnavailable when that fails; a node that never had its route
// still gets a CreateRoute, which fails until the backend is back. Only
// when no backend could list, or without a node lister, does the call
// fail as a whole.
func (r *Nodes) ListRoutes(ctx context.Context, clusterName string) ([]*cloudprovider.Route, error) {
	var (
		all    []*cloudprovider.Route
		owners = map[string]*backend.Member{}
		failed = map[*backend.Member]error{}
	)
	type listed struct {
		routes []*cloudprovider.Route
		err    error
	}
	_ = backend.Ask(ctx, r.RouteBackends, func(ctx context.Context, b *backend.Member) (listed, error) {
		routes, err := b.ListRoutes(ctx, clusterName)
		return listed{routes, err}, nil
	}, func(b *backend.Member, l listed) {
		if l.err != nil {
			failed[b] = l.err
			return
		}
		for _, rt := range l.routes {
			all = append(all, rt)
			owners[routeKey(rt)] = b
		}
	})
	if len(failed) > 0 {
		kept, err := r.keepFailedRoutes(ctx, failed)
		if err != nil {
			return nil, err
		}
		for _, k := range kept {
			all = append(all, k.route)
			owners[routeKey(k.route)] = k.b
		}
	}
	r.routeMu.Lock()
	r.RouteOwner = owners
	r.routeMu.Unlock()
	return all, nil
}

// keepFailedRoutes returns the routes as they were of the backends that
// could not list, or the error when none could, or without a node lister.
func (r *Nodes) keepFailedRoutes(ctx context.Context, failed map[*backend.Member]error) ([]keptRoute, error) {
	errs := make([]error, 0, len(failed))
	for _, err := range failed {
		errs = append(errs, err)
	}
	err := errors.Join(errs...)
	if len(failed) == len(r.RouteBackends) || r.NodeLister == nil {
		return nil, err
	}
	kept, kerr := r.routesAsTheyWere(failed)
	if kerr != nil {
		return nil, errors.Join(err, kerr)
	}
	klog.FromContext(ctx).Error(err, "Some backends cannot list routes; reporting their nodes' routes as they were", "kept", len(kept))
	return kept, nil
}

// keptRoute is a route reported for a backend that cannot list.
type keptRoute struct {
	b     *backend.Member
	route *cloudprovider.Route
}

// routesAsTheyWere reports, for each backend in failed, a route per pod
// CIDR of each of its nodes whose routes the route controller last found
// created (NetworkUnavailable False with reason RouteCreated).
func (r *Nodes) routesAsTheyWere(failed map[*backend.Member]error) ([]keptRoute, error) {
	nodes, err := r.NodeLister.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("routes: listing nodes: %w", err)
	}
	var out []keptRoute
	for b := range failed {
		for _, n := range nodes {
			if _, foreign := r.ForeignPlatform(n); foreign || !b.Owns(n) || !RoutesCreated(n) {
				continue
			}
			for _, cidr := range n.Spec.PodCIDRs {
				out = append(out, keptRoute{b: b, route: &cloudprovider.Route{
					Name: string(n.UID) + "-" + cidr, TargetNode: types.NodeName(n.Name), DestinationCIDR: cidr,
				}})
			}
		}
	}
	return out, nil
}

// RoutesCreated reports whether the route controller last found the node's
// routes created.
func RoutesCreated(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeNetworkUnavailable {
			return c.Status == corev1.ConditionFalse && c.Reason == "RouteCreated"
		}
	}
	return false
}

// CreateRoute creates the route in the backend of its target node. Nodes of
// backends without routes are skipped with success: their pod network is
// their CNI's business, and an error would mark them NetworkUnavailable.
func (r *Nodes) CreateRoute(ctx context.Context, clusterName string, nameHint string, route *cloudprovider.Route) error {
	b, err := r.routeBackend(ctx, route.TargetNode)
	if err != nil || b == nil {
		return err
	}
	return b.CreateRoute(ctx, clusterName, nameHint, route)
}

// DeleteRoute deletes the route from the backend that listed it, or else
// from the backend of its target node.
func (r *Nodes) DeleteRoute(ctx context.Context, clusterName string, route *cloudprovider.Route) error {
	r.routeMu.Lock()
	b := r.RouteOwner[routeKey(route)]
	r.routeMu.Unlock()
	if b == nil {
		var err error
		if b, err = r.routeBackend(ctx, route.TargetNode); err != nil || b == nil {
			return err
		}
	}
	return b.DeleteRoute(ctx, clusterName, route)
}

// routeBackend finds the routes backend of a node; nil, nil when the node's
// backend has no routes, or the node belongs to another CCM (KEP-5778).
func (r *Nodes) routeBackend(ctx context.Context, nodeName types.NodeName) (*backend.Member, error) {
	if r.NodeLister == nil {
		return nil, errors.New("routes: no node informer yet")
	}
	node, err := r.NodeLister.Get(string(nodeName))
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("routes: node %s not found", nodeName)
	}
	if err != nil {
		return nil, fmt.Errorf("routes: %w", err)
	}
	b, err := r.owner(ctx, node)
	if errors.Is(err, errForeign) {
		klog.FromContext(ctx).V(4).Info("Node belongs to another CCM; no route of ours targets it", "node", nodeName)
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("routes: node %s: %w", nodeName, err)
	}
	if b.Routes == nil {
		klog.FromContext(ctx).V(4).Info("Node's backend has no routes; leaving its pod network to the CNI", "node", nodeName, "backend", b.Name)
		return nil, nil
	}
	return b, nil
}

func routeKey(rt *cloudprovider.Route) string {
	return string(rt.TargetNode) + "|" + rt.DestinationCIDR
}
