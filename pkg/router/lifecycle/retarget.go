package lifecycle

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/router/process"
)

// Retarget queues, after a reload that may change which nodes the load
// balancers target (router.Changes.NodeTargetsChanged: targetOtherCCMsNodes
// turned on, a node rule changed, a backend added), the router's re-sync
// of every LoadBalancer Service the controller that syncs Services itself
// does not serve (process.Shared.Served): those of upstream's service
// controller, which updates a load balancer's nodes only when the set of
// nodes changes, so that before, their load balancers kept the old targets
// until some node changed or the CCM restarted. The re-sync updates each
// load balancer where it is (AddressResync.sync: EnsuredIn) with the nodes
// the configuration in use has it target; a load balancer whose targets
// did not change makes no mutating call. The controller's own Services are
// its node sync's (pkg/lbcontroller Reloaded). It returns how many it
// queued.
func Retarget(st *process.Shared) int {
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
		if svc.Spec.Type != corev1.ServiceTypeLoadBalancer || svc.DeletionTimestamp != nil || served(svc) {
			continue
		}
		a.Add(svc)
		n++
	}
	klog.V(2).InfoS("Re-targeting the load balancers of the Services upstream's service controller serves after a reload that changes node targets", "services", n)
	return n
}
