// Package plan answers, before multicloud-ccm takes over a cluster, what it
// would do if it started now: which backend would own each Node and
// whether it finds the instance (or would have the Node deleted), and for
// each LoadBalancer Service which backend would serve it, whether its
// existing load balancer would be adopted in place, created or replaced,
// what would change on it, and which of its annotations are unknown,
// malformed or not honoured.
//
// It asks the router and the backends through the calls the controllers
// make (InstanceExists, InstanceMetadata, InstanceShutdown,
// GetLoadBalancer, EnsureLoadBalancer), under a dry run
// (backends.WithDryRun): every backend's reconcile runs as it would and
// records its mutating calls instead of making them, and each backend's
// SDK transport refuses any mutating call that would slip through. The
// router is never initialised, so it writes nothing to the API server; the
// Kubernetes client is used for lists only. See docs/plan.md.
package plan

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientset "k8s.io/client-go/kubernetes"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/config"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/router"
)

// ClusterName is the cluster name the plan passes to the load-balancer
// calls, the CCM's default (--cluster-name).
const ClusterName = "kubernetes"

// Options configure a plan.
type Options struct {
	// Config is the cloud-config the CCM would start with.
	Config *config.CloudConfig
	// Client reads the cluster's Nodes and Services (list only).
	Client clientset.Interface
	// ClusterName is the CCM's --cluster-name; default ClusterName.
	ClusterName string
	// Backends, when set, are the backends to plan with instead of those
	// the config builds (tests).
	Backends []router.Backend
}

// Run builds the backends and the router of o.Config, reads the cluster
// and returns the plan. It fails only when the config cannot be built or
// the cluster cannot be read; what a backend or the router refuses is in
// the report.
func Run(ctx context.Context, o Options) (*Report, error) {
	if o.ClusterName == "" {
		o.ClusterName = ClusterName
	}
	nodes, services, err := read(ctx, o.Client)
	if err != nil {
		return nil, err
	}
	bs := o.Backends
	if bs == nil {
		if bs, err = build(ctx, o.Config); err != nil {
			return nil, err
		}
	}
	seed(bs, services)
	r, err := router.New(o.Config, observe(bs))
	if err != nil {
		return nil, err
	}
	p := &planner{cfg: o.Config, r: r, cluster: o.ClusterName, backends: bs, noInstance: map[string][]string{}}
	rep := &Report{}
	// first are the nodes the switch's first syncs see: the joining nodes
	// it claims initialised (the cloud-node controller does so as it
	// starts, within a second; a node of another cloud then has a say in
	// an NLB's target type, and an Octavia member its address), the nodes
	// it would delete still there (the lifecycle controller deletes them
	// on its next pass). after are the nodes once it settled.
	var first, after []*corev1.Node
	for _, n := range nodes {
		np, settled := p.node(ctx, n)
		rep.Nodes = append(rep.Nodes, np)
		if np.Outcome == NodeClaimed {
			first = append(first, settled)
		} else {
			first = append(first, n)
		}
		if np.Outcome == NodeGoneReady || np.Outcome == NodeError {
			p.noInstance[n.Name] = strings.Split(p.ownerByLabelOrScheme(n), ",")
		}
		if settled != nil {
			after = append(after, settled)
		}
	}
	targets, settledTargets := lbNodes(first), lbNodes(after)
	for _, s := range services {
		if s.Spec.Type == corev1.ServiceTypeLoadBalancer {
			sp := p.service(ctx, s, targets, settledTargets)
			p.showNew(s, sp)
			rep.Services = append(rep.Services, sp)
		}
	}
	rep.Summary = summarize(rep)
	return rep, nil
}

// read lists the cluster's Nodes and Services.
func read(ctx context.Context, c clientset.Interface) ([]*corev1.Node, []*corev1.Service, error) {
	nl, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("listing nodes: %w", err)
	}
	sl, err := c.CoreV1().Services("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("listing services: %w", err)
	}
	nodes := make([]*corev1.Node, len(nl.Items))
	for i := range nl.Items {
		nodes[i] = &nl.Items[i]
	}
	services := make([]*corev1.Service, len(sl.Items))
	for i := range sl.Items {
		services[i] = &sl.Items[i]
	}
	return nodes, services, nil
}

// build builds every backend the config lists, as router.NewFromConfig
// does.
func build(ctx context.Context, cfg *config.CloudConfig) ([]router.Backend, error) {
	bs := make([]router.Backend, 0, len(cfg.Backends))
	for _, bc := range cfg.Backends {
		reg, ok := backends.Lookup(bc.Type)
		if !ok {
			return nil, fmt.Errorf("backend %s: type %q is not compiled into this binary (known: %v)", bc.Name, bc.Type, backends.Types())
		}
		cloud, err := reg.New(ctx, backends.Options{Name: bc.Name, ClusterID: cfg.ClusterID, Settings: bc.Settings})
		if err != nil {
			return nil, fmt.Errorf("backend %s: %w", bc.Name, err)
		}
		bs = append(bs, router.Backend{Name: bc.Name, Type: bc.Type, Scheme: reg.Scheme, Cloud: cloud})
	}
	return bs, nil
}

// seeder is a load balancer that learns the addresses in the Services'
// statuses from a list instead of an informer (bare metal).
type seeder interface {
	Seed(services []*corev1.Service)
}

// seed hands every backend that keeps addresses the Services as listed.
func seed(bs []router.Backend, services []*corev1.Service) {
	for _, b := range bs {
		lb, ok := b.Cloud.LoadBalancer()
		if !ok {
			continue
		}
		if s, ok := lb.(seeder); ok {
			s.Seed(services)
		}
	}
}

// showNew tells a backend that keeps addresses (bare metal) the addresses
// the plan gives the Service, as its informer would see them in the
// Service's status: the next Service planned is not given the same ones.
func (p *planner) showNew(svc *corev1.Service, sp ServicePlan) {
	if sp.NewAddress == "" || sp.NewAddress == sp.Address {
		return
	}
	for _, b := range p.backends {
		if !slices.Contains(strings.Split(sp.Backend, ","), b.Name) {
			continue
		}
		shown := svc.DeepCopy()
		shown.Status.LoadBalancer.Ingress = nil
		for _, a := range strings.Split(sp.NewAddress, ",") {
			shown.Status.LoadBalancer.Ingress = append(shown.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: a})
		}
		seed([]router.Backend{b}, []*corev1.Service{shown})
	}
}

// lbNodes are the nodes the service controller would hand a load balancer.
func lbNodes(nodes []*corev1.Node) []*corev1.Node {
	var out []*corev1.Node
	for _, n := range nodes {
		if router.StableNode(n) {
			out = append(out, n)
		}
	}
	return out
}

// planner is one plan's router and config.
type planner struct {
	cfg     *config.CloudConfig
	r       *router.Router
	cluster string
	// backends are the router's, unwatched.
	backends []router.Backend
	// noInstance names, by node, the backends owning it (by its label or
	// providerID scheme) that do not have its instance: gone, or not
	// found (the node's plan is an error). Their load balancers do not
	// target it.
	noInstance map[string][]string
}

// typeOf returns the type of the backend called name.
func (p *planner) typeOf(name string) string {
	for _, b := range p.backends {
		if b.Name == name {
			return b.Type
		}
	}
	return ""
}

var _ cloudprovider.LoadBalancer = (*router.Router)(nil)

// errText is err's message, "" for nil.
func errText(err error) string {
	if err == nil {
		return ""
	}
	return strings.TrimSpace(err.Error())
}
