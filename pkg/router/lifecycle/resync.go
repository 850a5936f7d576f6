package lifecycle

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/klog/v2"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/router/backend"
)

// requeueIfStale queues the Service for a re-sync when target was handed
// other nodes than it would be handed now, as far as its load balancer
// uses them (sameTargets): the service controller listed them before
// waiting for the Service's lock, and another call may have handed newer
// ones meanwhile. It is called under that lock, after a successful
// EnsureLoadBalancer or UpdateLoadBalancer. Without the informers (no
// re-sync running) it does nothing, nor for a Service with a
// loadBalancerClass: only pkg/lbcontroller serves our classes, and it
// queues such a Service again itself when a node changed while its call
// was in flight; the re-sync made a second update of the same load
// balancer with the same nodes (TestNodeAddedDuringUpdateUpdatesTheNLBOnce).
// Nor for a call whose caller queues the Service again itself
// (RequeuesOnNodeChange: pkg/lbcontroller, classless Services too).
func (r *Balancer) requeueIfStale(ctx context.Context, svc *corev1.Service, target *backend.Member, handed []*corev1.Node) {
	a := r.st.Resync.Load()
	if a == nil || svc.DeletionTimestamp != nil || target.IgnoresNodes() || svc.Spec.LoadBalancerClass != nil || requeuesOnNodeChange(ctx) {
		return
	}
	current, err := a.StableNodes()
	if err != nil {
		klog.FromContext(ctx).Error(err, "Cannot check the load balancer's nodes are current", "service", klog.KObj(svc))
		return
	}
	if target.SameTargets(svc, r.OwnNodes(handed), r.OwnNodes(current)) {
		return
	}
	klog.FromContext(ctx).V(2).Info("Load balancer was handed a stale node list; re-syncing it with the current nodes",
		"service", klog.KObj(svc), "backend", target.Name, "handed", len(handed), "current", len(current))
	a.StaleQueued.Add(1)
	a.Add(svc)
}

// ensuredIn returns the backends holding the Service's load balancer when
// the router has recorded them there, the Service still wants them there
// (or they are draining: they still serve), and the Service is neither
// being deleted nor handed to another controller. A Service of one of our
// classes is ours (pkg/lbcontroller serves it and, as upstream's
// controller, re-targets it only when its set of nodes changes): before,
// every classed Service was left out, and a node whose address arrived
// after its providerID never reached a classed IP-target load balancer.
func (r *Balancer) ensuredIn(svc *corev1.Service) []*backend.Member {
	if svc.Spec.Type != corev1.ServiceTypeLoadBalancer || !r.ownClass(svc) ||
		svc.DeletionTimestamp != nil || len(svc.Status.LoadBalancer.Ingress) == 0 {
		return nil
	}
	targets, _, err := r.updateTargets(svc)
	if err != nil || len(targets) == 0 {
		return nil
	}
	rec := r.recordOf(svc)
	var out []*backend.Member
	for _, b := range targets {
		if rec.Has(b.Name) {
			out = append(out, b)
		}
	}
	return append(out, r.drainingBackends(svc, out)...)
}

// unpublishedIn returns the backends the Service's load balancer is
// recorded in when it would be re-synced (ensuredIn) but for its status,
// not written yet: its first sync may still be in flight.
func (r *Balancer) unpublishedIn(svc *corev1.Service) []*backend.Member {
	if len(svc.Status.LoadBalancer.Ingress) > 0 || svc.Spec.Type != corev1.ServiceTypeLoadBalancer || !r.ownClass(svc) || svc.DeletionTimestamp != nil {
		return nil
	}
	targets, err := r.lbTargets(svc)
	if err != nil || len(r.notRecorded(svc, targets)) > 0 {
		return nil
	}
	return targets
}

// ownClass reports whether the Service has no loadBalancerClass or one of
// ours (loadBalancer.classes): a class we do not list is another
// controller's, never touched.
func (r *Balancer) ownClass(svc *corev1.Service) bool {
	return svc.Spec.LoadBalancerClass == nil || r.ServesClass(*svc.Spec.LoadBalancerClass)
}

// lockService serialises the router's load-balancer calls for one Service:
// the service controller's, the load-balancer controller's and the address
// re-sync's, on whichever configuration. It returns the unlock function.
func (r *Balancer) lockService(svc *corev1.Service) func() { return r.st.Lock(svc.UID) }

// rerouting reports whether a classless Service's target moved with no
// change of the Service (a reload changed the default backend, or added or
// removed the backend its annotation names) to backends its record does
// not name as serving: not named yet, or draining (the default moved back
// before the drain ended, see notRecorded). Such a Service needs a full
// sync (see sync), which records the new target, creates or moves its load
// balancer (the old target drained or deleted, as on any move) and writes
// the Service from that one decision. Before, the re-route wrote the new
// target in the record itself, outside any sync, so that the change of the
// Service's annotations made upstream's service controller sync it (issue
// 40: a Service has one writer, a sync). A Service left with no target
// (the default removed) needs none: as for a class removed, nothing is
// deleted by a configuration change; its next sync hands it elsewhere. So
// does one the router refuses (an unknown backend named): its next sync
// warns.
func (r *Balancer) rerouting(svc *corev1.Service) bool {
	if svc.Spec.Type != corev1.ServiceTypeLoadBalancer || svc.Spec.LoadBalancerClass != nil ||
		svc.DeletionTimestamp != nil || r.wasDeleted(svc.UID) || len(r.lbs) == 0 {
		return false
	}
	targets, err := r.lbTargets(svc)
	return err == nil && len(r.notRecorded(svc, targets)) > 0
}

// sync is a full sync of a classless Service by the router itself, for a
// change no edit of the Service caused, under upstream's service
// controller, which the router cannot queue a Service in: the drain
// timer's at a drain's end (process.drainTimer), a reload's adding back a
// backend the record names, or moving the Service's target (Rerouted,
// rerouting). It is the EnsureLoadBalancer that controller would call,
// with the nodes it would hand, so a drain ends (retire), or the Service
// moves, and it is written inside a sync, as under pkg/lbcontroller,
// never by the timer or the re-route on its own (issue 40); then the
// status it answers is published when the Service shows other addresses,
// as that controller would. A Service with a class (pkg/lbcontroller
// serves ours, and syncs them itself), being deleted, or whose load
// balancer went with it, is left alone: its controller's sync, or its
// delete, carries it.
func (r *Balancer) sync(ctx context.Context, clusterName string, svc *corev1.Service, nodes []*corev1.Node) error {
	if svc.Spec.Type != corev1.ServiceTypeLoadBalancer || svc.Spec.LoadBalancerClass != nil ||
		svc.DeletionTimestamp != nil || r.wasDeleted(svc.UID) {
		return nil
	}
	status, err := r.EnsureLoadBalancer(ctx, clusterName, svc, nodes)
	if err == cloudprovider.ImplementedElsewhere { //nolint:errorlint // returned unwrapped, as upstream compares it.
		return nil
	}
	if err != nil {
		return err
	}
	return r.publishStatus(ctx, svc, status)
}
