package plan

import (
	"context"
	"sync"

	corev1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/router"
)

// The router decides which backend each call goes to; the plan learns its
// decision by watching the calls reach the backends. Each backend's Cloud
// is wrapped so that its load-balancer calls are noted, per call, in the
// ctx's log: which backend was asked what, and what it answered.

// lbCall is one load-balancer call the router made to a backend.
type lbCall struct {
	backend string
	op      string // get, ensure, delete, update
	exists  bool   // get: the backend holds a load balancer
	status  *corev1.LoadBalancerStatus
	intents []backends.Intent
	err     error
}

type callLogKey struct{}

// callLog is the calls made under one ctx.
type callLog struct {
	mu    sync.Mutex
	calls []lbCall
}

func withCallLog(ctx context.Context) (context.Context, *callLog) {
	l := &callLog{}
	return context.WithValue(ctx, callLogKey{}, l), l
}

// note adds c to ctx's call log, if any.
func note(ctx context.Context, c lbCall) {
	if l, ok := ctx.Value(callLogKey{}).(*callLog); ok {
		l.mu.Lock()
		l.calls = append(l.calls, c)
		l.mu.Unlock()
	}
}

func (l *callLog) all() []lbCall {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]lbCall(nil), l.calls...)
}

// observe wraps every backend's load balancer.
func observe(bs []router.Backend) []router.Backend {
	out := make([]router.Backend, len(bs))
	for i, b := range bs {
		out[i] = b
		out[i].Cloud = watchedCloud{Interface: b.Cloud, name: b.Name}
	}
	return out
}

// watchedCloud is a backend whose load-balancer calls are noted.
type watchedCloud struct {
	cloudprovider.Interface
	name string
}

// LoadBalancer is the backend's, watched; one that chooses its targets
// (backends.NodeTargeter) keeps choosing them.
func (c watchedCloud) LoadBalancer() (cloudprovider.LoadBalancer, bool) {
	lb, ok := c.Interface.LoadBalancer()
	if !ok || lb == nil {
		return lb, ok
	}
	w := watchedLB{LoadBalancer: lb, name: c.name}
	if t, ok := lb.(backends.NodeTargeter); ok {
		return targetingLB{watchedLB: w, t: t}, true
	}
	return w, true
}

type watchedLB struct {
	cloudprovider.LoadBalancer
	name string
}

// The optional interfaces the router asks a load balancer about are the
// backend's: a wrapper hiding them would make the plan's router treat
// bare metal as targeting its nodes (backends.NodeIndependent) and its
// addresses as not announced from the status (backends.StatusAnnounced).
// Each answers as the router takes a load balancer that does not
// implement it.
var (
	_ backends.NodeIndependent   = watchedLB{}
	_ backends.StatusAnnounced   = watchedLB{}
	_ backends.AddressTargeter   = watchedLB{}
	_ backends.NodeTargeter      = targetingLB{}
	_ cloudprovider.LoadBalancer = watchedLB{}
)

// IgnoresNodes is the backend's (false when it does not say).
func (l watchedLB) IgnoresNodes() bool {
	ni, ok := l.LoadBalancer.(backends.NodeIndependent)
	return ok && ni.IgnoresNodes()
}

// AnnouncedFromStatus is the backend's (false when it does not say).
func (l watchedLB) AnnouncedFromStatus() bool {
	sa, ok := l.LoadBalancer.(backends.StatusAnnounced)
	return ok && sa.AnnouncedFromStatus()
}

// TargetsByAddress is the backend's (true when it does not say).
func (l watchedLB) TargetsByAddress(svc *corev1.Service, node *corev1.Node) bool {
	if t, ok := l.LoadBalancer.(backends.AddressTargeter); ok {
		return t.TargetsByAddress(svc, node)
	}
	return true
}

type targetingLB struct {
	watchedLB
	t backends.NodeTargeter
}

// CanTarget is the backend's.
func (l targetingLB) CanTarget(svc *corev1.Service, node *corev1.Node) bool {
	return l.t.CanTarget(svc, node)
}

// GetLoadBalancer is the backend's, noted.
func (l watchedLB) GetLoadBalancer(ctx context.Context, clusterName string, svc *corev1.Service) (*corev1.LoadBalancerStatus, bool, error) {
	st, exists, err := l.LoadBalancer.GetLoadBalancer(ctx, clusterName, svc)
	note(ctx, lbCall{backend: l.name, op: "get", exists: exists, status: st, err: err})
	return st, exists, err
}

// EnsureLoadBalancer is the backend's, noted with the intents it recorded.
func (l watchedLB) EnsureLoadBalancer(ctx context.Context, clusterName string, svc *corev1.Service, nodes []*corev1.Node) (*corev1.LoadBalancerStatus, error) {
	inner, intents := backends.WithDryRun(ctx)
	st, err := l.LoadBalancer.EnsureLoadBalancer(inner, clusterName, svc, nodes)
	note(ctx, lbCall{backend: l.name, op: "ensure", status: st, intents: intents(), err: err})
	return st, err
}

// EnsureLoadBalancerDeleted is the backend's, noted with its intents.
func (l watchedLB) EnsureLoadBalancerDeleted(ctx context.Context, clusterName string, svc *corev1.Service) error {
	inner, intents := backends.WithDryRun(ctx)
	err := l.LoadBalancer.EnsureLoadBalancerDeleted(inner, clusterName, svc)
	note(ctx, lbCall{backend: l.name, op: "delete", intents: intents(), err: err})
	return err
}

// UpdateLoadBalancer is the backend's, noted with its intents (the plan
// asks it of a load balancer that drains).
func (l watchedLB) UpdateLoadBalancer(ctx context.Context, clusterName string, svc *corev1.Service, nodes []*corev1.Node) error {
	inner, intents := backends.WithDryRun(ctx)
	err := l.LoadBalancer.UpdateLoadBalancer(inner, clusterName, svc, nodes)
	note(ctx, lbCall{backend: l.name, op: "update", intents: intents(), err: err})
	return err
}
