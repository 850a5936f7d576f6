package dispatch

import (
	"context"
	"sync"

	"golang.org/x/sync/singleflight"
	corev1 "k8s.io/api/core/v1"
	clientset "k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/config"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/router/backend"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/router/svcstate"
)

// Nodes sends each node call of one configuration to the backend
// that owns the node.
type Nodes struct {
	Cfg *config.CloudConfig

	ByName           map[string]*backend.Member
	ByScheme         map[string][]*backend.Member
	InstanceBackends []*backend.Member
	RouteBackends    []*backend.Member

	Recorder   record.EventRecorder
	NodeLister corelisters.NodeLister

	// claims merges concurrent resolutions of the same providerID-less node.
	claims singleflight.Group

	// Client is the router's own Kubernetes client, from Initialize: events,
	// the load-balancer record and status clearing.
	Client clientset.Interface

	// States is the process's per-Service and per-Node state (st's).
	States *svcstate.States

	routeMu sync.Mutex
	// RouteOwner remembers which backend listed a route, for DeleteRoute of
	// routes whose node is gone.
	RouteOwner map[string]*backend.Member
}

// Warn records a Warning event on obj and logs it: once while the
// object's problem stays the same, then only at V(4).
func (r *Nodes) Warn(ctx context.Context, obj *corev1.ObjectReference, reason, msg string) {
	logger := klog.FromContext(ctx)
	if !r.States.Problems.Changed(obj, reason, msg) {
		logger = logger.V(4)
	}
	logger.Info("Warning: "+msg, "reason", reason, "kind", obj.Kind, "name", obj.Name)
	if r.Recorder != nil {
		r.Recorder.Event(obj, corev1.EventTypeWarning, reason, msg)
	}
}
