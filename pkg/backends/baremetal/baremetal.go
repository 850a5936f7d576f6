// Package baremetal is the backend for machines without a cloud API: the
// nodes come from an inventory in the cloud-config, and load-balancer
// addresses from address pools in it.
//
// Instances: a Node is the inventory entry named by its providerID
// (baremetal://<name>) or, before it has one, by its Node name. The
// inventory is configuration, so it is always loaded: InstanceExists is
// false only for a node the inventory does not list. InstanceShutdown is
// always false, as the inventory knows no power state.
//
// Load balancers: the backend only allocates addresses. It returns them as
// the Service's status.loadBalancer.ingress; a speaker (MetalLB's speaker,
// or kube-vip in services mode) announces them over ARP, NDP or BGP. See
// docs/baremetal.md. The Service statuses are the source of truth: every
// pool address any Service's status shows is taken whenever it appears (a
// Service informer keeps the allocator in step), and nothing is allocated
// before the informer has synced, so neither a restart nor another
// allocator's late write gets an address handed out twice. An address in a
// Service's status that no pool holds is replaced, with a Warning event.
package baremetal

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/informers"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/klog/v2"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends/baremetal/bmconfig"
)

const (
	// Type is the backend type in the cloud-config file.
	Type = bmconfig.Type
	// Scheme is the providerID scheme of bare-metal nodes, as in
	// baremetal://bm-1. It never changes: Nodes carry it.
	Scheme = "baremetal"
)

func init() {
	backends.Register(backends.Registration{
		Type: Type, Scheme: Scheme, Parse: bmconfig.ParseSection, CrossValidate: bmconfig.CheckPoolsAcross, New: New,
		ClassifyError: ClassifyError,
	})
}

var (
	_ cloudprovider.Interface    = (*Cloud)(nil)
	_ cloudprovider.InformerUser = (*Cloud)(nil)
	_ backends.Factory           = New
)

// Cloud is a baremetal backend.
type Cloud struct {
	backends.InstancesV2Only

	name      string
	instances *Instances
	lb        *LoadBalancer
}

// New builds a baremetal backend from its Settings.
func New(_ context.Context, o backends.Options) (cloudprovider.Interface, error) {
	s, ok := o.Settings.(*Settings)
	if !ok || s == nil {
		return nil, fmt.Errorf("settings are %T, want *baremetal.Settings", o.Settings)
	}
	if s.Compiled() == nil {
		if errs := s.Validate(field.NewPath(Type)); len(errs) > 0 {
			return nil, errs.ToAggregate()
		}
	}
	cs := s.Compiled()
	c := &Cloud{name: o.Name}
	if len(cs.Inventory) > 0 {
		c.instances = &Instances{backend: o.Name, inventory: cs.Inventory}
	}
	if len(cs.Pools) > 0 {
		c.lb = newLoadBalancer(o.Name, cs.Pools)
		c.lb.kubeVIP.Store(cs.KubeVIP)
	}
	return c, nil
}

// Initialize starts the recorder of the load balancer's Warning events (an
// address outside every pool replaced); the backend needs no other client.
func (c *Cloud) Initialize(clientBuilder cloudprovider.ControllerClientBuilder, stop <-chan struct{}) {
	if c.lb == nil {
		return
	}
	client, err := clientBuilder.Client(backends.EventComponent)
	if err != nil {
		klog.Background().WithValues("backend", c.name).Error(err, "Cannot create a client for events; replaced addresses will only be logged")
		return
	}
	c.lb.setClient(client)
	c.lb.setRecorder(backends.NewEventRecorder(client, stop))
}

// SetInformers hands the load balancer its Service informer. It must be
// called before the factory is started.
func (c *Cloud) SetInformers(factory informers.SharedInformerFactory) {
	if c.lb != nil {
		c.lb.SetInformers(factory)
	}
}

// LoadBalancer returns the address allocator, if the backend has pools.
func (c *Cloud) LoadBalancer() (cloudprovider.LoadBalancer, bool) {
	if c.lb == nil {
		return nil, false
	}
	return c.lb, true
}

// InstancesV2 returns the inventory, if the backend has one.
func (c *Cloud) InstancesV2() (cloudprovider.InstancesV2, bool) {
	if c.instances == nil {
		return nil, false
	}
	return c.instances, true
}

// Routes is not supported: bare-metal pod networks are the CNI's business.
func (c *Cloud) Routes() (cloudprovider.Routes, bool) { return nil, false }

// ProviderName returns the backend type.
func (c *Cloud) ProviderName() string { return Type }
