package backend

import (
	"context"
	"errors"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/providerid"
)

// The calls the router makes to one backend, each through call (its
// deadline, logger, metrics and health), and what a backend can target.

// CheckProviderID makes sure the providerID a backend reports for a node
// will route back to it: a node that had none must get one, with the
// backend's scheme.
func (b *Member) CheckProviderID(node *corev1.Node, got string) error {
	if node.Spec.ProviderID != "" || b.Scheme == "" {
		return nil
	}
	scheme, err := providerid.Scheme(got)
	if err != nil || scheme != b.Scheme {
		return fmt.Errorf("backend %s: InstanceMetadata for node %s returned providerID %q, want one with scheme %s://", b.Name, node.Name, got, b.Scheme)
	}
	return nil
}

// WithBackendLabel returns a copy of md with the backend label added; the
// backend's label map is never changed.
func (b *Member) WithBackendLabel(md *cloudprovider.InstanceMetadata) *cloudprovider.InstanceMetadata {
	out := *md
	out.AdditionalLabels = make(map[string]string, len(md.AdditionalLabels)+1)
	maps.Copy(out.AdditionalLabels, md.AdditionalLabels)
	out.AdditionalLabels[string(annotation.NodeBackend)] = b.Name
	return &out
}

// InstanceExists asks the backend's cloud whether the node's instance exists, counted and timed as a backend call.
func (b *Member) InstanceExists(ctx context.Context, node *corev1.Node) (bool, error) {
	return call(ctx, b, OpInstanceExists, InstanceCallTimeout, func(ctx context.Context) (bool, error) {
		return b.Instances.InstanceExists(ctx, node)
	})
}

// InstanceShutdown asks the backend's cloud whether the node's instance is shut down.
func (b *Member) InstanceShutdown(ctx context.Context, node *corev1.Node) (bool, error) {
	return call(ctx, b, OpInstanceShutdown, InstanceCallTimeout, func(ctx context.Context) (bool, error) {
		return b.Instances.InstanceShutdown(ctx, node)
	})
}

// InstanceMetadata asks the backend's cloud for the node's instance metadata.
func (b *Member) InstanceMetadata(ctx context.Context, node *corev1.Node) (*cloudprovider.InstanceMetadata, error) {
	return call(ctx, b, opInstanceMetadata, InstanceCallTimeout, func(ctx context.Context) (*cloudprovider.InstanceMetadata, error) {
		md, err := b.Instances.InstanceMetadata(ctx, node)
		if err == nil && md == nil {
			err = errors.New("returned no metadata and no error")
		}
		return md, err
	})
}

// Targetable returns the nodes the backend's load balancer can send the
// Service's traffic to.
func (b *Member) Targetable(service *corev1.Service, nodes []*corev1.Node) []*corev1.Node {
	out := make([]*corev1.Node, 0, len(nodes))
	for _, n := range nodes {
		if b.canTarget(service, n) {
			out = append(out, n)
		}
	}
	return out
}

// GetLoadBalancer asks the backend whether it holds the Service's load balancer.
func (b *Member) GetLoadBalancer(ctx context.Context, clusterName string, service *corev1.Service) (*corev1.LoadBalancerStatus, bool, error) {
	var exists bool
	status, err := call(ctx, b, OpGetLoadBalancer, LoadBalancerCallTimeout, func(ctx context.Context) (*corev1.LoadBalancerStatus, error) {
		status, ok, err := b.LB.GetLoadBalancer(ctx, clusterName, service)
		exists = ok
		return status, err
	})
	return status, exists, err
}

// EnsureLoadBalancer creates or updates the Service's load balancer in the backend.
func (b *Member) EnsureLoadBalancer(ctx context.Context, clusterName string, service *corev1.Service, nodes []*corev1.Node) (*corev1.LoadBalancerStatus, error) {
	return call(ctx, b, OpEnsureLoadBalancer, LoadBalancerCallTimeout, func(ctx context.Context) (*corev1.LoadBalancerStatus, error) {
		status, err := b.LB.EnsureLoadBalancer(ctx, clusterName, service, nodes)
		if err == nil && status == nil {
			err = errors.New("returned no status and no error")
		}
		return status, err
	})
}

// UpdateLoadBalancer updates the targets of the Service's load balancer in the backend.
func (b *Member) UpdateLoadBalancer(ctx context.Context, clusterName string, service *corev1.Service, nodes []*corev1.Node) error {
	_, err := call(ctx, b, opUpdateLoadBalancer, LoadBalancerCallTimeout, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, b.LB.UpdateLoadBalancer(ctx, clusterName, service, nodes)
	})
	return err
}

// EnsureLoadBalancerDeleted deletes the Service's load balancer in the backend.
func (b *Member) EnsureLoadBalancerDeleted(ctx context.Context, clusterName string, service *corev1.Service) error {
	_, err := call(ctx, b, opEnsureLoadBalancerDeleted, LoadBalancerCallTimeout, func(ctx context.Context) (struct{}, error) {
		err := b.LB.EnsureLoadBalancerDeleted(ctx, clusterName, service)
		if err == cloudprovider.ImplementedElsewhere { //nolint:errorlint // upstream sentinel, never wrapped.
			err = nil
		}
		return struct{}{}, err
	})
	return err
}

// SameTargets reports whether the backend's load balancer for svc would
// be the same made from nodes a as from nodes other: the same nodes it can
// target, by name, and of each the same targetKey (its addresses when
// reached by address, else its providerID). Two versions of a node around
// its initialisation (labels, taints, a providerID the backend does not
// use) are the same; a node added, removed or excluded, or an address
// changed that the backend targets, is not.
func (b *Member) SameTargets(svc *corev1.Service, a, other []*corev1.Node) bool {
	return maps.Equal(b.targetKeys(svc, a), b.targetKeys(svc, other))
}

// targetKeys maps the name of each node of nodes the backend can target
// for svc to its targetKey.
func (b *Member) targetKeys(svc *corev1.Service, nodes []*corev1.Node) map[string]string {
	out := make(map[string]string, len(nodes))
	for _, n := range nodes {
		if b.canTarget(svc, n) {
			out[n.Name] = b.targetKey(svc, n)
		}
	}
	return out
}

// ListRoutes lists the backend's routes.
func (b *Member) ListRoutes(ctx context.Context, clusterName string) ([]*cloudprovider.Route, error) {
	return call(ctx, b, OpListRoutes, routeCallTimeout, func(ctx context.Context) ([]*cloudprovider.Route, error) {
		return b.Routes.ListRoutes(ctx, clusterName)
	})
}

// CreateRoute creates a route in the backend.
func (b *Member) CreateRoute(ctx context.Context, clusterName, nameHint string, route *cloudprovider.Route) error {
	_, err := call(ctx, b, opCreateRoute, routeCallTimeout, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, b.Routes.CreateRoute(ctx, clusterName, nameHint, route)
	})
	return err
}

// DeleteRoute deletes a route in the backend.
func (b *Member) DeleteRoute(ctx context.Context, clusterName string, route *cloudprovider.Route) error {
	_, err := call(ctx, b, opDeleteRoute, routeCallTimeout, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, b.Routes.DeleteRoute(ctx, clusterName, route)
	})
	return err
}
