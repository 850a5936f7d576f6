package router

import (
	"context"
	"errors"
	"fmt"
	"maps"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/providerid"
	corev1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
)

// The calls the router makes to one backend, each through call (its
// deadline, logger, metrics and health), and what a backend can target.

// checkProviderID makes sure the providerID a backend reports for a node
// will route back to it: a node that had none must get one, with the
// backend's scheme.
func (b *backend) checkProviderID(node *corev1.Node, got string) error {
	if node.Spec.ProviderID != "" || b.Scheme == "" {
		return nil
	}
	scheme, err := providerid.Scheme(got)
	if err != nil || scheme != b.Scheme {
		return fmt.Errorf("backend %s: InstanceMetadata for node %s returned providerID %q, want one with scheme %s://", b.Name, node.Name, got, b.Scheme)
	}
	return nil
}

// withBackendLabel returns a copy of md with the backend label added; the
// backend's label map is never changed.
func (b *backend) withBackendLabel(md *cloudprovider.InstanceMetadata) *cloudprovider.InstanceMetadata {
	out := *md
	out.AdditionalLabels = make(map[string]string, len(md.AdditionalLabels)+1)
	maps.Copy(out.AdditionalLabels, md.AdditionalLabels)
	out.AdditionalLabels[string(annotation.NodeBackend)] = b.Name
	return &out
}

func (b *backend) instanceExists(ctx context.Context, node *corev1.Node) (bool, error) {
	return call(ctx, b, opInstanceExists, instanceCallTimeout, func(ctx context.Context) (bool, error) {
		return b.instances.InstanceExists(ctx, node)
	})
}

func (b *backend) instanceShutdown(ctx context.Context, node *corev1.Node) (bool, error) {
	return call(ctx, b, opInstanceShutdown, instanceCallTimeout, func(ctx context.Context) (bool, error) {
		return b.instances.InstanceShutdown(ctx, node)
	})
}

func (b *backend) instanceMetadata(ctx context.Context, node *corev1.Node) (*cloudprovider.InstanceMetadata, error) {
	return call(ctx, b, opInstanceMetadata, instanceCallTimeout, func(ctx context.Context) (*cloudprovider.InstanceMetadata, error) {
		md, err := b.instances.InstanceMetadata(ctx, node)
		if err == nil && md == nil {
			err = errors.New("returned no metadata and no error")
		}
		return md, err
	})
}

// targetable returns the nodes the backend's load balancer can send the
// Service's traffic to.
func (b *backend) targetable(service *corev1.Service, nodes []*corev1.Node) []*corev1.Node {
	out := make([]*corev1.Node, 0, len(nodes))
	for _, n := range nodes {
		if b.canTarget(service, n) {
			out = append(out, n)
		}
	}
	return out
}

func (b *backend) getLoadBalancer(ctx context.Context, clusterName string, service *corev1.Service) (*corev1.LoadBalancerStatus, bool, error) {
	var exists bool
	status, err := call(ctx, b, opGetLoadBalancer, loadBalancerCallTimeout, func(ctx context.Context) (*corev1.LoadBalancerStatus, error) {
		status, ok, err := b.lb.GetLoadBalancer(ctx, clusterName, service)
		exists = ok
		return status, err
	})
	return status, exists, err
}

func (b *backend) ensureLoadBalancer(ctx context.Context, clusterName string, service *corev1.Service, nodes []*corev1.Node) (*corev1.LoadBalancerStatus, error) {
	return call(ctx, b, opEnsureLoadBalancer, loadBalancerCallTimeout, func(ctx context.Context) (*corev1.LoadBalancerStatus, error) {
		status, err := b.lb.EnsureLoadBalancer(ctx, clusterName, service, nodes)
		if err == nil && status == nil {
			err = errors.New("returned no status and no error")
		}
		return status, err
	})
}

func (b *backend) updateLoadBalancer(ctx context.Context, clusterName string, service *corev1.Service, nodes []*corev1.Node) error {
	_, err := call(ctx, b, opUpdateLoadBalancer, loadBalancerCallTimeout, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, b.lb.UpdateLoadBalancer(ctx, clusterName, service, nodes)
	})
	return err
}

func (b *backend) ensureLoadBalancerDeleted(ctx context.Context, clusterName string, service *corev1.Service) error {
	_, err := call(ctx, b, opEnsureLoadBalancerDeleted, loadBalancerCallTimeout, func(ctx context.Context) (struct{}, error) {
		err := b.lb.EnsureLoadBalancerDeleted(ctx, clusterName, service)
		if err == cloudprovider.ImplementedElsewhere { //nolint:errorlint // upstream sentinel, never wrapped.
			err = nil
		}
		return struct{}{}, err
	})
	return err
}

// sameTargets reports whether the backend's load balancer for svc would
// be the same made from nodes a as from nodes other: the same nodes it can
// target, by name, and of each the same targetKey (its addresses when
// reached by address, else its providerID). Two versions of a node around
// its initialisation (labels, taints, a providerID the backend does not
// use) are the same; a node added, removed or excluded, or an address
// changed that the backend targets, is not.
func (b *backend) sameTargets(svc *corev1.Service, a, other []*corev1.Node) bool {
	return maps.Equal(b.targetKeys(svc, a), b.targetKeys(svc, other))
}

// targetKeys maps the name of each node of nodes the backend can target
// for svc to its targetKey.
func (b *backend) targetKeys(svc *corev1.Service, nodes []*corev1.Node) map[string]string {
	out := make(map[string]string, len(nodes))
	for _, n := range nodes {
		if b.canTarget(svc, n) {
			out[n.Name] = b.targetKey(svc, n)
		}
	}
	return out
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
