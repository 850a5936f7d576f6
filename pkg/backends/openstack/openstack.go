// Package openstack is the multicloud-ccm backend for OpenStack: Nova
// servers as nodes, Octavia load balancers (with Neutron floating IPs) for
// Services, and Neutron router routes. It talks to OpenStack through
// gophercloud v2, logs in to Keystone lazily, and serves node lookups from a
// cache filled by bulk, paginated server listing.
package openstack

import (
	"context"
	"fmt"

	"time"

	cloudprovider "k8s.io/cloud-provider"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends/openstack/osid"
)

const (
	// Type is the backend type in the cloud-config.
	Type = "openstack"
	// Scheme is the providerID scheme of OpenStack nodes, exactly as the
	// upstream OpenStack provider writes it (osid.Scheme). Never change it.
	Scheme = osid.Scheme
)

func init() {
	backends.Register(backends.Registration{Type: Type, Scheme: Scheme, Parse: parseSection, New: New, ClassifyError: ClassifyError})
	backends.RegisterServiceAnnotations(Type, string(AnnotationLoadBalancerID), string(AnnotationLoadBalancerAddress))
}

// Cloud is one OpenStack backend.
type Cloud struct {
	backends.InstancesV2Only

	name      string
	settings  *Settings
	instances *Instances
	lb        *LoadBalancer
	routes    *Routes
}

var _ cloudprovider.Interface = (*Cloud)(nil)

// New builds an OpenStack backend from its settings. It does not contact
// OpenStack: the first call logs in.
func New(_ context.Context, o backends.Options) (cloudprovider.Interface, error) {
	s, ok := o.Settings.(*Settings)
	if !ok || s == nil {
		return nil, fmt.Errorf("settings are %T, want *openstack.Settings", o.Settings)
	}
	conn, err := newConnector(o.Name, s)
	if err != nil {
		return nil, err
	}
	return newCloud(o.Name, o.ClusterID, s, conn.get), nil
}

// newCloud wires a backend around a source of service clients.
func newCloud(name, clusterID string, s *Settings, clients func(context.Context) (*serviceClients, error)) *Cloud {
	n := &nova{clients: clients, pageSize: s.Instances.PageSize, networks: addressRules{internal: s.Instances.InternalNetworks, public: s.Instances.PublicNetworks}}
	c := &Cloud{name: name, settings: s}
	c.instances = &Instances{
		name: name, region: s.Region, regional: s.RegionalProviderID,
		cache: newServerCache(name, n, time.Duration(s.Instances.CacheTTLSeconds)*time.Second),
	}
	if *s.LoadBalancer.Enabled {
		c.lb = newLoadBalancer(name, clusterID, &s.LoadBalancer, clients)
	}
	if s.Routes.RouterID != "" {
		c.routes = &Routes{name: name, routerID: s.Routes.RouterID, clients: clients, cache: c.instances.cache}
	}
	return c
}

// LoadBalancer returns the Octavia load balancers, unless disabled.
func (c *Cloud) LoadBalancer() (cloudprovider.LoadBalancer, bool) {
	if c.lb == nil {
		return nil, false
	}
	return c.lb, true
}

// InstancesV2 returns the Nova servers.
func (c *Cloud) InstancesV2() (cloudprovider.InstancesV2, bool) { return c.instances, true }

// Routes returns the Neutron router routes when a router is configured.
func (c *Cloud) Routes() (cloudprovider.Routes, bool) {
	if c.routes == nil {
		return nil, false
	}
	return c.routes, true
}

// ProviderName returns the backend type.
func (c *Cloud) ProviderName() string { return Type }

var _ backends.RepairPasser = (*Cloud)(nil)

// BeginRepairPass reads the backend's load balancers in bulk for a
// drift-repair pass (see LoadBalancer.BeginRepairPass); with load
// balancers disabled there is nothing to read.
func (c *Cloud) BeginRepairPass(ctx context.Context, clusterName string) (context.Context, func(), error) {
	if c.lb == nil {
		return ctx, func() {}, nil
	}
	return c.lb.BeginRepairPass(ctx, clusterName)
}
