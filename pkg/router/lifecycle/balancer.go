package lifecycle

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/router/backend"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/router/dispatch"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/router/process"
)

// Balancer runs the load-balancer calls of one configuration: it decides
// which backends serve each Service and carries that out (see the package
// doc). It shares the configuration's Nodes (the config, the backends by
// name, the client and event recorder, node targeting) with the node
// calls, and the process's state with every other configuration.
type Balancer struct {
	*dispatch.Nodes

	// lbs are the backends with load balancers, in config order.
	lbs []*backend.Member

	// st is the per-Service and per-Node state, which outlives this
	// configuration (see package process).
	st *process.Shared
}

var _ process.Configuration = (*Balancer)(nil)

// New returns the Balancer of the configuration whose node calls nodes
// serves: lbs are its backends with load balancers, in config order, and
// st is the process's state.
func New(nodes *dispatch.Nodes, lbs []*backend.Member, st *process.Shared) *Balancer {
	return &Balancer{Nodes: nodes, lbs: lbs, st: st}
}

// WithClassDefaults is the Service with its class's default annotations
// (see withClassDefaults).
func (r *Balancer) WithClassDefaults(svc *corev1.Service) *corev1.Service {
	return r.withClassDefaults(svc)
}

// EnsuredIn returns the backends holding the Service's load balancer where
// the Service wants it (see ensuredIn).
func (r *Balancer) EnsuredIn(svc *corev1.Service) []*backend.Member { return r.ensuredIn(svc) }

// UnpublishedIn returns the backends the Service's load balancer is
// recorded in while its status is not written yet (see unpublishedIn).
func (r *Balancer) UnpublishedIn(svc *corev1.Service) []*backend.Member { return r.unpublishedIn(svc) }

// Rerouting reports whether a classless Service's target moved, with no
// change of the Service, to backends its record does not name as serving:
// it needs a full sync (see rerouting).
func (r *Balancer) Rerouting(svc *corev1.Service) bool { return r.rerouting(svc) }

// Sync is the router's own full sync of a Service upstream's service
// controller serves (see sync).
func (r *Balancer) Sync(ctx context.Context, clusterName string, svc *corev1.Service, nodes []*corev1.Node) error {
	return r.sync(ctx, clusterName, svc, nodes)
}
