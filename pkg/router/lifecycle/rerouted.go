package lifecycle

import (
	"context"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/router/process"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/router/svcstate"
)

// Rerouted returns the LoadBalancer Services whose target differs between
// the old and the new configuration, or whose record names a backend the
// new one added back (addedBack), and queues the classless ones for the
// re-sync: a re-route (a full sync if the Service's target is still
// unrecorded, or draining, when a worker picks it up: rerouting), or, for
// a backend added back, a full sync (see sync), which retires the load
// balancer left there, ending a drain pending on it (before, the drain
// timer retried such a drain until the backend was back, writing the
// Service itself). Either sync is that of the controller serving the
// Service when it syncs Services itself (pkg/lbcontroller), else the
// router's own: nothing here writes the Service.
func Rerouted(st *process.Shared, old, cur *Balancer) []types.NamespacedName {
	a := st.Resync.Load()
	if a == nil {
		return nil
	}
	svcs, err := a.Services.List(labels.Everything())
	if err != nil {
		klog.ErrorS(err, "Cannot list Services to re-sync those a reload re-routed")
		return nil
	}
	var out []types.NamespacedName
	for _, svc := range svcs {
		cur.warnUnreachable(svc)
		if svc.Spec.Type != corev1.ServiceTypeLoadBalancer || (targetName(old, svc) == targetName(cur, svc) && !cur.addedBack(svc, old)) {
			continue
		}
		out = append(out, types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name})
		switch {
		case svc.Spec.LoadBalancerClass != nil:
		case cur.addedBack(svc, old):
			a.AddSync(svc) // its full sync retires the leftover there (a drain pending on it ends)
		default:
			a.AddReroute(svc)
		}
	}
	return out
}

// addedBack reports whether the Service's record names a backend with
// load balancers that r configures and old did not: a reload added back a
// backend that still holds (or drains) a load balancer the Service no
// longer uses, and the Service's next full sync retires it there.
func (r *Balancer) addedBack(svc *corev1.Service, old *Balancer) bool {
	for _, n := range r.recordOf(svc).Names {
		was, wasOK := old.ByName[n]
		b, ok := r.ByName[n]
		if ok && b.LB != nil && (!wasOK || was.LB == nil) {
			return true
		}
	}
	return false
}

// targetName names the Service's target under r: a backend, "" for none,
// "!" when r refuses it.
func targetName(r *Balancer, svc *corev1.Service) string {
	bs, err := r.lbTargets(r.withClassDefaults(svc))
	if err != nil {
		return "!"
	}
	return strings.Join(svcstate.NamesInOrder(bs), ",")
}

// warnUnreachable puts a Warning UnknownLoadBalancerBackend on a Service
// whose record names a backend r does not configure (a reload removed it
// while it still holds, or drains, the Service's load balancer): its load
// balancer there can no longer be reached, and a drain there stays pending
// until the backend is added back (or the record edited), which only the
// Service's events tell. Once per episode (warnUnreachableOnce): the
// Service's syncs that follow do not repeat it, and a reload adding the
// backend back ends the episode.
func (r *Balancer) warnUnreachable(svc *corev1.Service) {
	if !svcstate.ParseRecord(svc).Known {
		return
	}
	_, gone := r.reachable(svc)
	r.warnUnreachableOnce(context.Background(), svc, gone)
}
