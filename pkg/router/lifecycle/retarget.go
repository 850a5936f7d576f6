package lifecycle

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/router/process"
)

// Retarget queues, after a reload from old to cur that may change which
// nodes the load balancers target (router.Changes.NodeTargetsChanged:
// targetOtherCCMsNodes turned on, a node rule changed, a backend added),
// the router's re-target of every LoadBalancer Service the controller that
// syncs Services itself does not serve (process.Shared.Served): those of
// upstream's service controller, which updates a load balancer's nodes
// only when the set of nodes changes, so that before, their load
// balancers kept the old targets until some node changed or the CCM
// restarted. Left out: a Service of a class cur does not serve (another
// controller's), one with no load balancer of ours under cur (left to
// others, or never synced: its first sync hands the nodes), and one the
// reload re-routed (rerouted: its full sync hands its load balancers the
// nodes cur has them target). Each joins the
// node-address batch (AddressResync.AddRetarget); its re-sync updates a
// load balancer where it is (EnsuredIn) only when old and cur have it
// target different nodes (TargetsUnchanged). The controller's own Services
// are its node sync's (pkg/lbcontroller Reloaded). It returns how many it
// queued.
func Retarget(st *process.Shared, old, cur *Balancer, rerouted []types.NamespacedName) int {
	a := st.Resync.Load()
	if a == nil {
		return 0
	}
	svcs, err := a.Services.List(labels.Everything())
	if err != nil {
		klog.ErrorS(err, "Cannot list Services to re-target after a reload that changes node targets")
		return 0
	}
	served := func(*corev1.Service) bool { return false }
	if f := st.Served.Load(); f != nil {
		served = *f
	}
	n := 0
	for _, svc := range svcs {
		if svc.Spec.Type != corev1.ServiceTypeLoadBalancer || svc.DeletionTimestamp != nil || !cur.ownClass(svc) ||
			slices.Contains(rerouted, types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}) || served(svc) {
			continue
		}
		if c := cur.withClassDefaults(svc); len(cur.ensuredIn(c)) == 0 && len(cur.unpublishedIn(c)) == 0 {
			continue // no load balancer of ours: left to others, or not synced yet
		}
		a.AddRetarget(svc, old)
		n++
	}
	klog.V(2).InfoS("Re-targeting the load balancers of the Services upstream's service controller serves after a reload that changes node targets", "services", n)
	return n
}

// TargetsUnchanged reports whether r has the backend named backendName
// target exactly targets of nodes for the Service (with r's class
// defaults): targets and r's answer are both taken from nodes, in its
// order, so the same nodes are the same pointers. False for a backend r
// does not have, or has without load balancers.
func (r *Balancer) TargetsUnchanged(backendName string, svc *corev1.Service, nodes, targets []*corev1.Node) bool {
	b, ok := r.ByName[backendName]
	if !ok || b.LB == nil {
		return false
	}
	return slices.Equal(r.Targetable(b, r.withClassDefaults(svc), nodes), targets)
}
