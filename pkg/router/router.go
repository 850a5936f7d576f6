// Package router is the multicloud cloud provider: one
// cloudprovider.Interface that dispatches every call to the backend it
// concerns. Nodes go by their providerID scheme (or, before they have one,
// by label hint, config rule, or by asking the backends); Services go by the
// multicloud-ccm.io/load-balancer-backend annotation or the configured
// default; routes go by their target node. Importing this package registers
// the provider "multicloud" with every backend type compiled in.
//
// The contracts it keeps are in DESIGN.md section 3; the one that matters
// most: InstanceExists answers (false, nil) only when the owning backend
// positively reports the instance gone.
//
// A Router is one configuration. Under live reload (Reloadable) each
// configuration is a Router, swapped atomically, while the state of the
// cluster's Services and Nodes (per-Service locks, deletion marks,
// records, the node re-sync queue, problems logged once) lives for the
// process and is shared by every Router: see svcstate/states.go for the
// drawing and docs/routing.md ("Across reloads").
//
// Lifetime, package by package: a Router (router.go: the
// cloudprovider.Interface glue, served.go and status.go: what each backend
// serves and its health, upstreamview.go: the view upstream's service
// controller gets) lives for one configuration, as do the two halves it
// hands its calls to: package dispatch (node calls: InstancesV2, Routes)
// and package lifecycle (load-balancer calls: the Service lifecycle, its
// decision, record, drains, several backends, external-dns target;
// loadbalancer.go and decision.go here only hand them on). reload.go's
// Reloadable lives for the process, as does what package process keeps
// and runs (per-Service state, the drain timer, the node-address
// re-sync). What a Service carries in the API server is read and written
// by package lifecycle, its values defined in package svcstate. Below this
// package, importing nothing of it: lifecycle, process (the process's
// workers, which see the configuration in use through
// process.Configuration), dispatch, svcstate (what outlives a
// configuration) and backend (one cloud's calls).
package router

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/informers"
	corelisters "k8s.io/client-go/listers/core/v1"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/klog/v2"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/config"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/router/backend"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/router/dispatch"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/router/lifecycle"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/router/process"
)

// ProviderName is the name the provider registers under (--cloud-provider).
const ProviderName = "multicloud"

func init() {
	cloudprovider.RegisterCloudProvider(ProviderName, newFromReader)
}

// Backend is one cloud behind the router, as New receives it.
type Backend = backend.Backend

// CallError is a failed backend call, as BackendStatus reports it.
type CallError = backend.CallError

// Router is the multicloud cloudprovider.Interface: one configuration.
// Node calls (InstancesV2, Routes) are its embedded dispatch.Nodes';
// load-balancer calls are its lifecycle.Balancer's (loadbalancer.go).
type Router struct {
	dispatch.Nodes

	// lb runs the Services' load balancers of this configuration.
	lb *lifecycle.Balancer

	clusterID string

	backends []*backend.Member
	lbs      []*backend.Member

	// st is the per-Service and per-Node state, which outlives this
	// configuration (see package process): shared by every generation of a
	// Reloadable.
	st *process.Shared

	// served counts what each backend serves, once the informers are set
	// (see served.go and status.go).
	served atomic.Pointer[servedSource]
}

var (
	_ cloudprovider.Interface    = (*Router)(nil)
	_ cloudprovider.InstancesV2  = (*Router)(nil)
	_ cloudprovider.LoadBalancer = (*Router)(nil)
	_ cloudprovider.Routes       = (*Router)(nil)
	_ cloudprovider.InformerUser = (*Router)(nil)
)

// newFromReader is the factory registered with cloudprovider: it reads the
// --cloud-config file and builds every backend it lists.
func newFromReader(r io.Reader) (cloudprovider.Interface, error) {
	if r == nil {
		return nil, errors.New("multicloud: --cloud-config is required: pass the path of the multicloud-ccm CloudConfig YAML file")
	}
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("multicloud: reading --cloud-config: %w", err)
	}
	dir, _ := os.Getwd()
	if f, ok := r.(*os.File); ok {
		if abs, err := filepath.Abs(filepath.Dir(f.Name())); err == nil {
			dir = abs
		}
	}
	cfg, err := config.Parse(data, dir)
	if err != nil {
		return nil, fmt.Errorf("multicloud: invalid --cloud-config: %w", err)
	}
	return NewFromConfig(context.Background(), cfg)
}

// NewFromConfig builds every backend the config lists, through the types
// registered with package backends, and returns the router over them.
func NewFromConfig(ctx context.Context, cfg *config.CloudConfig) (*Router, error) {
	bs := make([]backend.Backend, 0, len(cfg.Backends))
	for _, bc := range cfg.Backends {
		reg, ok := backends.Lookup(bc.Type)
		if !ok {
			return nil, fmt.Errorf("backend %s: type %q is not compiled into this binary (known: %v)", bc.Name, bc.Type, backends.Types())
		}
		cloud, err := reg.New(ctx, backends.Options{Name: bc.Name, ClusterID: cfg.ClusterID, Settings: bc.Settings})
		if err != nil {
			return nil, fmt.Errorf("backend %s: %w", bc.Name, err)
		}
		bs = append(bs, backend.Backend{Name: bc.Name, Type: bc.Type, Scheme: reg.Scheme, Cloud: cloud})
	}
	return New(cfg, bs)
}

// New returns a router over already-built backends, in config order. cfg
// supplies the cluster ID and the routing settings; backend names must be
// unique.
func New(cfg *config.CloudConfig, bs []backend.Backend) (*Router, error) {
	nbs := make([]*backend.Member, 0, len(bs))
	for _, b := range bs {
		nbs = append(nbs, backend.New(b))
	}
	return assemble(cfg, nbs, nil)
}

// assemble returns a router over backends already wrapped by newBackend,
// sharing st (nil: a state of its own, for a router used alone).
func assemble(cfg *config.CloudConfig, bs []*backend.Member, st *process.Shared) (*Router, error) {
	r := &Router{
		Nodes: dispatch.Nodes{
			Cfg:        cfg,
			ByName:     map[string]*backend.Member{},
			ByScheme:   map[string][]*backend.Member{},
			RouteOwner: map[string]*backend.Member{},
		},
		clusterID: cfg.ClusterID,
		st:        st,
	}
	if st == nil {
		r.st = process.New()
		r.st.Current = func() (process.Configuration, func()) { return r.lb, func() {} }
	}
	r.States = r.st.States
	for _, nb := range bs {
		if _, dup := r.ByName[nb.Name]; dup {
			return nil, fmt.Errorf("backend name %q is used twice", nb.Name)
		}
		r.backends = append(r.backends, nb)
		r.ByName[nb.Name] = nb
		r.addCapabilities(nb)
	}
	r.lb = lifecycle.New(&r.Nodes, r.lbs, r.st)
	if err := r.checkLoadBalancerBackends(); err != nil {
		return nil, err
	}
	if err := dispatch.CheckFlagPlatforms(cfg); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *Router) addCapabilities(b *backend.Member) {
	if b.Instances != nil {
		r.InstanceBackends = append(r.InstanceBackends, b)
		if b.Scheme != "" {
			r.ByScheme[b.Scheme] = append(r.ByScheme[b.Scheme], b)
		}
	}
	if b.LB != nil {
		r.lbs = append(r.lbs, b)
	}
	if b.Routes != nil {
		r.RouteBackends = append(r.RouteBackends, b)
	}
}

// checkLoadBalancerBackends refuses a defaultBackend or class naming a
// backend without load balancers, by the check the config's validation
// runs (config.ValidateLoadBalancerBackends), asked about the backends as
// built.
func (r *Router) checkLoadBalancerBackends() error {
	errs := r.Cfg.ValidateLoadBalancerBackends(backend.Names(r.backends), func(name string) bool {
		b, ok := r.ByName[name]
		return !ok || b.LB != nil
	})
	for i, c := range r.Cfg.LoadBalancer.Classes {
		for _, n := range c.Targets() {
			if _, ok := r.ByName[n]; !ok {
				errs = append(errs, field.NotSupported(field.NewPath("loadBalancer", "classes").Index(i).Child("backend"), n, backend.Names(r.backends)))
			}
		}
	}
	if d := r.Cfg.LoadBalancer.DefaultBackend; d != "" {
		if _, ok := r.ByName[d]; !ok {
			errs = append(errs, field.NotSupported(field.NewPath("loadBalancer", "defaultBackend"), d, backend.Names(r.backends)))
		}
	}
	return errs.ToAggregate()
}

// Initialize starts the router's event recorder and initialises every
// backend with the same client builder.
func (r *Router) Initialize(clientBuilder cloudprovider.ControllerClientBuilder, stop <-chan struct{}) {
	r.initialize(clientBuilder, stop)
	for _, b := range r.backends {
		b.Cloud.Initialize(clientBuilder, stop)
	}
}

// initialize is Initialize for the router itself, without its backends.
func (r *Router) initialize(clientBuilder cloudprovider.ControllerClientBuilder, stop <-chan struct{}) {
	r.st.SetStop(stop)
	client, err := clientBuilder.Client(backends.EventComponent)
	if err != nil {
		klog.ErrorS(err, "Cannot create a client: Warning events will only be logged, and where load balancers live will be recorded in memory only")
	} else {
		r.Client = client
		r.Recorder = backends.NewEventRecorder(client, stop)
	}
}

// SetInformers keeps a Node lister for route dispatch, starts re-targeting
// load balancers when node addresses change (see nodesync.go), and hands
// the informers to every backend that uses them.
func (r *Router) SetInformers(factory informers.SharedInformerFactory) {
	r.setInformers(factory)
	for _, b := range r.backends {
		if u, ok := b.Cloud.(cloudprovider.InformerUser); ok {
			u.SetInformers(factory)
		}
	}
}

// setInformers is SetInformers for the router itself, without its
// backends.
func (r *Router) setInformers(factory informers.SharedInformerFactory) {
	r.NodeLister = factory.Core().V1().Nodes().Lister()
	var services corelisters.ServiceLister
	if len(r.lbs) > 0 {
		services = factory.Core().V1().Services().Lister()
	}
	r.countServed(r.NodeLister, services)
	if len(r.lbs) > 0 {
		r.st.StartWatches(factory)
	}
}

// Instances is not offered: with it, upstream builds providerIDs of its own
// and deletes nodes on InstanceNotFound. The router offers InstancesV2 only.
func (r *Router) Instances() (cloudprovider.Instances, bool) { return nil, false }

// InstancesV2 is offered when any backend has instances.
func (r *Router) InstancesV2() (cloudprovider.InstancesV2, bool) {
	return r, len(r.InstanceBackends) > 0
}

// LoadBalancer is offered when any backend has load balancers. It is the
// router as upstream's service controller must see it, which leaves
// classed Services alone (see upstreamview.go); our load-balancer
// controller calls the router's methods itself.
func (r *Router) LoadBalancer() (cloudprovider.LoadBalancer, bool) {
	return classAwareBalancer{lb: r, servesCls: r.ServesClass, deleteWait: upstreamDeleteWait}, len(r.lbs) > 0
}

// ServesClass reports whether class is one of loadBalancer.classes: the
// Services the load-balancer-class controller serves.
func (r *Router) ServesClass(class string) bool { return r.lb.ServesClass(class) }

// HasClasses reports whether the config lists any load-balancer class.
func (r *Router) HasClasses() bool { return r.lb.HasClasses() }

// Routes is offered only when some backend really handles routes.
func (r *Router) Routes() (cloudprovider.Routes, bool) { return r, len(r.RouteBackends) > 0 }

// Zones is not offered; InstancesV2 carries zones.
func (r *Router) Zones() (cloudprovider.Zones, bool) { return nil, false }

// Clusters is not offered.
func (r *Router) Clusters() (cloudprovider.Clusters, bool) { return nil, false }

// ProviderName returns "multicloud".
func (r *Router) ProviderName() string { return ProviderName }

// HasClusterID is true: the config requires clusterID.
func (r *Router) HasClusterID() bool { return r.clusterID != "" }

// ClusterID returns the configured cluster ID.
func (r *Router) ClusterID() string { return r.clusterID }

// SetPlatforms restricts the platforms every router serves, as
// --cloud-provider-platforms does; nil lifts the restriction. It applies
// to routers built before and after the call (see dispatch.SetPlatforms).
func SetPlatforms(platforms []string) { dispatch.SetPlatforms(platforms) }

// FlagPlatforms returns what SetPlatforms set, nil when nothing.
func FlagPlatforms() []string { return dispatch.FlagPlatforms() }

// StableNode mirrors the upstream service controller's choice of nodes for
// a load balancer: not being deleted, not excluded by the
// node.kubernetes.io/exclude-from-external-load-balancers label, and not
// tainted for deletion by the cluster autoscaler (see process.StableNode).
func StableNode(n *corev1.Node) bool { return process.StableNode(n) }
