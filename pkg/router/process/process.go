package process

import (
	"context"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/router/backend"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/router/svcstate"
)

// Shared is what the router keeps and runs for the process: the
// per-Service and per-Node state (svcstate.States) and the
// workers acting on it (the drain timer, the node-address re-sync, the
// forgetting of deleted Services). It is created once (NewReloadable, or
// router.New for a router used alone) and handed to every configuration's
// Router; a reload never rebuilds it. The workers run on the configuration
// in use when they pick a Service up (Current).
type Shared struct {
	*svcstate.States

	// stopMu guards stop.
	stopMu sync.Mutex
	// drainTimer queues a Service for a sync when a drain of its ends,
	// once the informers are set (see drainqueue.go); nil without them.
	drainTimer atomic.Pointer[drainTimer]
	// ServiceSync, when set, queues a Service for a full sync by the
	// controller serving it (see the router's SetServiceSync).
	ServiceSync atomic.Pointer[func(*corev1.Service) bool]
	// Served reports, without queueing anything, whether the controller
	// that syncs Services itself serves the Service (see the router's
	// SetServed); nil without such a controller.
	Served    atomic.Pointer[func(*corev1.Service) bool]
	drainOnce sync.Once
	// Current returns the configuration's router in use and a function
	// ending its use; the node-address re-sync runs on it.
	Current func() (Configuration, func())
	// stop ends the process's workers (the node-address re-sync).
	stop <-chan struct{}
	// Resync is the node-address re-sync, once the informers are set (see
	// nodesync.go); nil without them.
	Resync     atomic.Pointer[AddressResync]
	resyncOnce sync.Once
	forgetOnce sync.Once
}

// Configuration is the configuration in use, as the process's workers see
// it: the lifecycle.Balancer of the Router in use. The workers take it
// for each Service they pick up, so a reload applied meanwhile is the one
// they follow.
type Configuration interface {
	// WithClassDefaults is the Service with its class's default
	// annotations, as the backends see it.
	WithClassDefaults(svc *corev1.Service) *corev1.Service
	// EnsuredIn returns the backends holding the Service's load balancer
	// where the Service wants it.
	EnsuredIn(svc *corev1.Service) []*backend.Member
	// UnpublishedIn returns the backends the Service's load balancer is
	// recorded in while its status is not written yet.
	UnpublishedIn(svc *corev1.Service) []*backend.Member
	// Rerouting reports whether a classless Service's target moved, with
	// no change of the Service (a reload), to backends its record does not
	// name as serving: it needs a full sync (Sync).
	Rerouting(svc *corev1.Service) bool
	// Targetable returns the nodes b's load balancer can send the
	// Service's traffic to.
	Targetable(b *backend.Member, svc *corev1.Service, nodes []*corev1.Node) []*corev1.Node
	// TargetsUnchanged reports whether this configuration has the backend
	// named backendName target exactly targets of nodes for the Service
	// (as the API server has it; its class's defaults are this
	// configuration's): false for a backend it does not have.
	TargetsUnchanged(backendName string, svc *corev1.Service, nodes, targets []*corev1.Node) bool
	// Warn records a Warning event on obj and logs it.
	Warn(ctx context.Context, obj *corev1.ObjectReference, reason, msg string)
	// Sync is a sync of the Service by the router itself, for a change no
	// edit of the Service caused (a drain's end, a reload's re-route),
	// under a controller the router cannot queue it in (upstream's service
	// controller): the EnsureLoadBalancer that controller would call, with
	// nodes, and the status it answers published.
	Sync(ctx context.Context, clusterName string, svc *corev1.Service, nodes []*corev1.Node) error
}

// New returns the process's shared state, with no Service known yet.
func New() *Shared { return &Shared{States: svcstate.New()} }

// SetStop keeps the first stop channel the process was given.
func (st *Shared) SetStop(stop <-chan struct{}) {
	st.stopMu.Lock()
	defer st.stopMu.Unlock()
	if st.stop == nil {
		st.stop = stop
	}
}

func (st *Shared) stopCh() <-chan struct{} {
	st.stopMu.Lock()
	defer st.stopMu.Unlock()
	return st.stop
}
