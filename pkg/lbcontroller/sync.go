package lbcontroller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/cache"
	cloudprovider "k8s.io/cloud-provider"
	servicehelper "k8s.io/cloud-provider/service/helpers"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/router"
)

// Event reasons, upstream's service controller's where it has one.
const (
	reasonEnsuring      = "EnsuringLoadBalancer"
	reasonEnsured       = "EnsuredLoadBalancer"
	reasonDeleting      = "DeletingLoadBalancer"
	reasonDeleted       = "DeletedLoadBalancer"
	reasonSyncFailed    = "SyncLoadBalancerFailed"
	reasonNoNodes       = "UnAvailableLoadBalancer"
	reasonDriftRepaired = "LoadBalancerDriftRepaired"
)

// sync brings one Service's load balancer to what the Service asks.
func (c *Controller) sync(ctx context.Context, key string) (err error) {
	start := time.Now()
	logger := klog.FromContext(ctx).WithValues("service", key)
	pctx, repair, done := c.takeRepair(ctx, key)
	ctx = klog.NewContext(ctx, logger)
	changed := false
	defer func() {
		done(changed, err)
		logger.V(4).Info("Synced", "duration", time.Since(start), "changed", changed)
	}()

	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return err
	}
	svc, err := c.services.Services(ns).Get(name)
	switch {
	case apierrors.IsNotFound(err):
		return c.gone(ctx, key)
	case err != nil:
		return err
	}
	svc = svc.DeepCopy()
	st := c.stateOf(key)
	if st != nil && st.svc.UID != svc.UID {
		// Deleted and re-created under the same name, both events merged
		// in this one key: the old one's load balancer (AWS and OpenStack
		// name theirs by UID) is deleted first, as upstream does.
		if err := c.replaced(ctx, key, st); err != nil {
			return err
		}
		st = nil
	}
	serving := c.serves(svc)
	if needsCleanup(svc) {
		if st != nil || c.mayOwn(svc) {
			return c.cleanup(ctx, key, svc, serving || st != nil, movedClass(st, svc))
		}
		// Another controller's (a classless Service of another CCM's):
		// nobody is asked, nothing is written.
		return nil
	}
	if svc.DeletionTimestamp != nil {
		// Being deleted without our finalizer (removed by hand, or never
		// added): no finalizer can be added now; delete what we served.
		return c.gone(ctx, key)
	}
	if !serving && classChanged(st, svc) {
		// Turned ClusterIP and then a LoadBalancer of another class (or
		// of none, routed elsewhere) between two of our syncs, or while
		// we were down: it left us (chaos seed 857543738).
		was, _ := classBefore(st, svc)
		return c.leave(ctx, key, svc, was == nil)
	}
	if !serving && st == nil {
		return c.handOver(ctx, svc)
	}
	if svc.Spec.Type != corev1.ServiceTypeLoadBalancer || !serving {
		// Not ours (any more) and nothing to clean up: its load balancer,
		// if any, is left alone; conditions we wrote while we served it
		// (before a switch back to upstream's controller) go. One of a
		// class a reload removed is remembered (forgetUnserved): its
		// deletion still deletes its load balancer.
		c.forgetUnserved(key, svc)
		if err := c.handOver(ctx, svc); err != nil {
			return err
		}
		return c.dropConditions(ctx, svc)
	}
	if repair {
		// The pass's context carries the backends' bulk snapshots; it
		// ends with the controller, as ctx does.
		ctx = klog.NewContext(pctx, logger)
	}
	changed, err = c.ensure(ctx, key, svc, st, repair)
	return err
}

// needsCleanup is upstream's, for either cleanup finalizer: it is acted on
// once the Service is being deleted or no longer of type LoadBalancer (by
// this controller when the Service is, or may have been, its: see sync).
func needsCleanup(svc *corev1.Service) bool {
	return hasCleanupFinalizer(svc) && (svc.DeletionTimestamp != nil || svc.Spec.Type != corev1.ServiceTypeLoadBalancer)
}

// unchanged reports whether the Service is as the controller last left it,
// or changed only by the controller's own writes.
func unchanged(st *served, svc *corev1.Service) bool {
	return st != nil && (st.own(svc) || !relevantChange(st.svc, svc))
}

// ensure creates or updates the Service's load balancer. A Service that did
// not change since its last sync only has its nodes compared; a changed or
// new one is ensured in full, with two writes at most: the finalizer with
// the router's record, then the status with the served annotations.
// changed reports whether the sync wrote to the Service or changed its
// load balancer.
func (c *Controller) ensure(ctx context.Context, key string, svc *corev1.Service, st *served, repair bool) (changed bool, err error) {
	nodes, gen, err := c.listTargets()
	if err != nil {
		return false, err
	}
	same := unchanged(st, svc)
	stale := c.takeAddrStale(key)
	if full := c.takeFull(key); same && !repair && !st.retry && !full {
		return c.retarget(ctx, key, svc, st, nodes, gen, stale)
	}
	if same && st.drift != nil {
		repair = true // completing a repair that needed more than one sync
	}
	if len(nodes) == 0 {
		c.event(svc, corev1.EventTypeWarning, reasonNoNodes, "There are no available nodes for LoadBalancer")
	}
	// prior: a sync of this Service succeeded before (not only begun).
	prior := st != nil && !st.fresh
	specChanged := prior && !same
	if specChanged && len(svc.Status.LoadBalancer.Ingress) > 0 {
		c.event(svc, corev1.EventTypeNormal, reasonEnsuring, "Ensuring load balancer")
	}
	seen := sets.New(svc.ResourceVersion)
	before := svc
	prepared, err := c.prepare(ctx, svc)
	if err != nil {
		// The next sync is a full one: the mark that made this one full
		// (a reload, a drain's end) was taken.
		c.failed(key, false, nil, nil)
	}
	if err != nil || prepared == nil {
		return false, err
	}
	changed = prepared != svc
	svc = prepared
	seen.Insert(svc.ResourceVersion)
	c.track(key, svc, seen)

	// The router decides; the controller carries out the cloud steps (the
	// call) and writes the Service once, from the decision: the status
	// and the annotation changes it holds. plan prints the same decision
	// (router.Decide).
	// It queues the Service again itself when a node changed meanwhile
	// (requeueIfNodesChanged below): the router need not compare the
	// nodes (router.RequeuesOnNodeChange).
	ectx, dec := router.DecisionForWrite(router.PreparedFrom(router.RequeuesOnNodeChange(ctx), before))
	ectx, changes := backends.WithChangeReport(ectx)
	status, err := c.cloud.EnsureLoadBalancer(ectx, c.opts.ClusterName, svc, nodes)
	dec.End(status, err)
	if errors.Is(err, cloudprovider.ImplementedElsewhere) {
		// Nobody here serves it (any more): the router removed what we
		// made; our conditions go too, and, when our routing no longer
		// chooses it (not a backend that hands it to another
		// controller), the finalizer: nothing of ours is left to clean up.
		c.forget(key)
		if !c.routed(svc) {
			return true, c.letGo(ctx, svc)
		}
		return changed, c.dropConditions(ctx, svc)
	}
	if err == nil && status == nil {
		err = errors.New("the cloud returned no load-balancer status")
	}
	if err != nil {
		c.failed(key, repair && !specChanged, changes(), backends.ChangedBackends(ectx))
		c.event(svc, corev1.EventTypeWarning, reasonSyncFailed, "Error syncing load balancer: failed to ensure load balancer: "+err.Error())
		c.publishFailure(ctx, svc, err)
		c.retargetFailed(ctx, key, svc, nodes, gen)
		return changed, err
	}
	status = dec.Status
	statusChanged := !servicehelper.LoadBalancerStatusEqual(&svc.Status.LoadBalancer, status)
	ann := dec.Changes(svc)
	if _, condChanged := servedConditions(svc, ann, status); statusChanged || len(ann) > 0 || condChanged {
		out, own, written, err := c.publish(ctx, svc, dec)
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		if errors.Is(err, errLeft) {
			// Its next sync (queued by the change, and again here) cleans
			// up from the copy remembered before this one.
			c.failed(key, false, nil, nil)
			c.queue.Add(key)
			return true, nil
		}
		if err != nil {
			// The load balancer changed but the Service does not say so
			// yet: the retry ensures and writes again in full (the
			// Service itself is unchanged, so it would only compare
			// nodes), as after a failed ensure.
			c.failed(key, repair && !specChanged, changes(), backends.ChangedBackends(ectx))
			return true, fmt.Errorf("writing the load-balancer status: %w", err)
		}
		if own {
			svc = out
			seen.Insert(svc.ResourceVersion)
		} else {
			// Edited while its load balancer was ensured: the version
			// ensured is remembered, so the sync the edit queued (queued
			// again here) sees the change and ensures it.
			svc = withPublished(svc, status, written)
			defer c.queue.Add(key)
		}
	}
	handed := c.ensuredTargets(dec, svc, nodes)
	c.remember(key, svc, seen, handed.set())
	c.requeueIfNodesChanged(key, svc, gen, handed)

	what, from := changes(), backends.ChangedBackends(ectx)
	if prior && same {
		what = slices.Concat(st.drift, what)
		from = slices.Concat(st.driftFrom, from)
	}
	switch {
	case repair && prior && !specChanged && (len(what) > 0 || statusChanged):
		if statusChanged {
			what = append(what, "status address restored")
		}
		for _, b := range repairedBackends(svc, from) {
			driftRepairs.WithLabelValues(b).Inc()
		}
		c.event(svc, corev1.EventTypeNormal, reasonDriftRepaired, fmt.Sprintf("Repaired the load balancer%s, changed out of band: %s", describe(svc), strings.Join(what, "; ")))
	case statusChanged || len(ann) > 0 || specChanged || len(what) > 0:
		msg := "Ensured load balancer" + describe(svc)
		if len(what) > 0 {
			msg += "; changed: " + strings.Join(what, "; ")
		}
		c.event(svc, corev1.EventTypeNormal, reasonEnsured, msg)
	}
	return changed || statusChanged || len(ann) > 0 || len(what) > 0, nil
}

// retarget updates the load balancer of an unchanged Service when the
// nodes it targets changed, or when stale (the address of a node its last
// call handed it changed while that call was in flight, see
// requeueIfNodesChanged): one call and one event, whatever the number of
// node changes since its last sync. nodes were listed at gen
// (listTargets).
func (c *Controller) retarget(ctx context.Context, key string, svc *corev1.Service, st *served, nodes []*corev1.Node, gen listedAt, stale bool) (bool, error) {
	if st.own(svc) {
		// The lister's copy is one the last sync read or wrote (its
		// informer may still be behind that sync's last write): the
		// copy that sync left is as new, and holds what the router
		// wrote (who serves it, which decides the backends an update
		// goes to). Fingerprinting the older copy gave other targets
		// than the ensure recorded (a backend handing the Service over
		// still in them): a needless UpdateLoadBalancer, and the next
		// node sync another (TestProbe57EnsuredFingerprintWithAHandedOverBackend
		// failed so under -race).
		svc = st.svc.DeepCopy()
	}
	ts := c.targetListsOf(svc, nodes)
	set := ts.set()
	if set.equal(st.nodes) && !stale {
		return false, nil
	}
	if err := c.cloud.UpdateLoadBalancer(router.RequeuesOnNodeChange(ctx), c.opts.ClusterName, svc, nodes); err != nil {
		if errors.Is(err, cloudprovider.ImplementedElsewhere) {
			return false, nil
		}
		c.event(svc, corev1.EventTypeWarning, "UpdateLoadBalancerFailed", fmt.Sprintf("Error updating load balancer with new hosts %d: %v", set.len(), err))
		// The retry is a full sync, as upstream's controller puts a
		// failed node sync back on its Service queue: an update changes
		// members only, and what made it fail (an OpenStack pool in
		// ERROR) only an Ensure replaces (TestFailedNodeUpdateRetriesInFull).
		c.failed(key, false, nil, nil)
		return false, err
	}
	c.recordTargets(key, svc, ts, gen)
	klog.FromContext(ctx).V(2).Info("Updated the load balancer's targets", "targets", set.len())
	c.event(svc, corev1.EventTypeNormal, "UpdatedLoadBalancer", fmt.Sprintf("Updated load balancer with new hosts (%d)", set.len()))
	return true, nil
}

// retargetFailed hands the nodes to the load balancers of a Service whose
// sync failed (nodes were listed at gen) when the nodes they target
// changed since they were last handed some: one UpdateLoadBalancer per
// change of the targets, not one per retry of the failing sync. A full
// sync hands nodes only to its targets, and a failing one may keep load
// balancers that are not among them and still serve: the backend the
// Service moves away from while the one it moves to refuses it (make
// before break). Every node sync of such a Service was its failing full
// sync: the kept load balancer never got a node change (the OpenStack
// planswitch worlds). Only a Service the router served before
// (multicloud-ccm.io/load-balancer-served-by) has load balancers to
// update; the router sends the update where they are
// (Router.UpdateLoadBalancer: the backends serving it while its targets
// moved). An update that fails is tried again with the sync's next retry.
func (c *Controller) retargetFailed(ctx context.Context, key string, svc *corev1.Service, nodes []*corev1.Node, gen listedAt) {
	st := c.stateOf(key)
	if st == nil || st.svc.UID != svc.UID || svc.Annotations[string(annotation.LoadBalancerServedBy)] == "" {
		return
	}
	ts := c.targetListsOf(svc, nodes)
	set := ts.set()
	if set.equal(st.nodes) {
		return
	}
	logger := klog.FromContext(ctx)
	if err := c.cloud.UpdateLoadBalancer(router.RequeuesOnNodeChange(ctx), c.opts.ClusterName, svc, nodes); err != nil {
		if !errors.Is(err, cloudprovider.ImplementedElsewhere) {
			logger.V(2).Info("Cannot yet update the targets of the load balancers the Service keeps while its sync fails", "err", err)
		}
		return
	}
	c.recordTargets(key, svc, ts, gen)
	logger.V(2).Info("Updated the targets of the load balancers the Service keeps while its sync fails", "targets", set.len())
	c.event(svc, corev1.EventTypeNormal, "UpdatedLoadBalancer", fmt.Sprintf("Updated load balancer with new hosts (%d)", set.len()))
}

// describe names the backend and the cloud's load-balancer ID, as the
// router wrote them on the Service.
func describe(svc *corev1.Service) string {
	var parts []string
	if b := svc.Annotations[string(annotation.LoadBalancerServedBy)]; b != "" {
		parts = append(parts, fmt.Sprintf("backend %q", b))
	}
	if id := svc.Annotations[string(annotation.LoadBalancerID)]; id != "" {
		parts = append(parts, fmt.Sprintf("load balancer %s", id))
	}
	if len(parts) == 0 {
		return ""
	}
	return " in " + strings.Join(parts, ", ")
}

// movedClass reports whether the Service has a class other than the one
// it had when we served it (classBefore: the class the router's record
// was made for, else that of the copy the controller last synced): it
// went through ClusterIP, which drops the class, and came back as a
// LoadBalancer of another class's, without our sync seeing it in between.
// A class a reload removed from the config is the class it had: not a
// move.
func movedClass(st *served, svc *corev1.Service) bool {
	if svc.Spec.LoadBalancerClass == nil {
		return false
	}
	was, ok := classBefore(st, svc)
	return ok && !ptr.Equal(was, svc.Spec.LoadBalancerClass)
}

// cleanup deletes the Service's load balancer and then removes the
// cleanup finalizers (our Finalizer; the shared one too when it is ours
// to remove: see sharedIsOurs; shared is set when the Service is, or was,
// served by this controller, not only carrying our finalizer; moved when
// it changed class since we last synced it: movedClass) and the address,
// for a Service no longer of type LoadBalancer.
func (c *Controller) cleanup(ctx context.Context, key string, svc *corev1.Service, shared, moved bool) error {
	status, exists, err := c.cloud.GetLoadBalancer(ctx, c.opts.ClusterName, svc)
	if err != nil {
		c.event(svc, corev1.EventTypeWarning, reasonSyncFailed, "Error syncing load balancer: failed to check if load balancer exists before cleanup: "+err.Error())
		return err
	}
	ours := c.ourAddresses(ctx, key, svc, status, exists)
	if exists {
		c.event(svc, corev1.EventTypeNormal, reasonDeleting, "Deleting load balancer")
	}
	// A Service no longer of type LoadBalancer whose create never
	// succeeded (a cloud failing) has no load balancer but still the
	// router's record: the (idempotent) delete drops it, so the record
	// does not outlive the finalizer.
	if exists || (svc.DeletionTimestamp == nil && svc.Annotations[string(annotation.LoadBalancerBackends)] != "") {
		if err := c.cloud.EnsureLoadBalancerDeleted(ctx, c.opts.ClusterName, svc); err != nil && !errors.Is(err, cloudprovider.ImplementedElsewhere) {
			c.event(svc, corev1.EventTypeWarning, reasonSyncFailed, "Error syncing load balancer: failed to delete load balancer: "+err.Error())
			return err
		}
	}
	was, known := classBefore(c.stateOf(key), svc)
	var left *corev1.Service
	drop := func(cur *corev1.Service) []string {
		left = nil
		if !needsCleanup(cur) {
			// A LoadBalancer again meanwhile. Ours: its sync (queued by
			// the change) ensures it under our finalizer. Another
			// controller's (a class changed through ClusterIP, as a user
			// must): it left us, released below as leave releases it; its
			// sync, with nothing of ours remembered, would not (chaos seed
			// 290552101: the shared finalizer we put stayed, and the
			// Service's deletion hung).
			if !c.serves(cur) {
				left = cur
			}
			return nil
		}
		if c.sharedIsOurs(cur, shared, moved, ours) {
			return []string{Finalizer, sharedFinalizer}
		}
		return []string{Finalizer}
	}
	if err := c.release(ctx, svc, drop, ours); err != nil {
		return err
	}
	if left != nil {
		// The shared finalizer goes only from a Service we served
		// classless: one that has a class now, or, when this controller
		// serves classless Services, one our routing no longer chooses,
		// as letGo removes it (the other CCM serving it, if any, puts it
		// back when it next syncs the Service); when upstream's service
		// controller in this CCM serves classless Services, it is that
		// controller's. With nothing left to say which class we served it
		// under (no record class, nothing remembered: a new process's
		// cleanup after the last one deleted its load balancers), the
		// version cleaned decides, as drop would have for it
		// (sharedIsOurs): one we serve (a ClusterIP has no class; routed
		// to us) without our Finalizer (which we put on the Services of
		// our classes instead). A classed Service turned ClusterIP that
		// we clean up for our default backend loses a shared finalizer of
		// its class's controller here as it would in drop.
		dropShared := known && was == nil
		if !known {
			dropShared = shared && !hasFinalizer(svc, Finalizer)
		}
		dropShared = dropShared && (left.Spec.LoadBalancerClass != nil || c.opts.Classless)
		if err := c.dropOurs(ctx, left, ours, dropShared); err != nil {
			return err
		}
	}
	if exists {
		c.event(svc, corev1.EventTypeNormal, reasonDeleted, "Deleted load balancer")
	}
	c.forget(key)
	return nil
}

// leave releases what the router's record says the Service holds from us
// when it left us for another class between two of our syncs
// (movedClass): the router deletes our load balancers, ending their drains
// as for a Service leaving us, and drops its record; our addresses and
// conditions leave the status and our Finalizer goes, in one write
// (dropOurs). The other controller's finalizers, status addresses and
// annotations stay. The shared finalizer stays too, unless the Service was
// classless when we served it (wasClassless: we put it there) and no
// address but ours is left: upstream's controller removes it then as well
// (a classless Service given a class is one it cleans up).
func (c *Controller) leave(ctx context.Context, key string, svc *corev1.Service, wasClassless bool) error {
	class := ptr.Deref(svc.Spec.LoadBalancerClass, "")
	klog.FromContext(ctx).V(2).Info("The Service now has a class of another controller's; releasing our load balancer", "class", class)
	status, exists, err := c.cloud.GetLoadBalancer(ctx, c.opts.ClusterName, svc)
	if err != nil {
		c.event(svc, corev1.EventTypeWarning, reasonSyncFailed, "Error syncing load balancer: failed to check if load balancer exists before cleanup: "+err.Error())
		return err
	}
	ours := c.ourAddresses(ctx, key, svc, status, exists)
	if exists {
		c.event(svc, corev1.EventTypeNormal, reasonDeleting, fmt.Sprintf("Deleting load balancer: the Service's class is now %q, another controller's", class))
	}
	if exists || hasRecord(svc) {
		if err := c.cloud.EnsureLoadBalancerDeleted(ctx, c.opts.ClusterName, svc); err != nil && !errors.Is(err, cloudprovider.ImplementedElsewhere) {
			c.event(svc, corev1.EventTypeWarning, reasonSyncFailed, "Error syncing load balancer: failed to delete load balancer: "+err.Error())
			return err
		}
	}
	if err := c.dropOurs(ctx, svc, ours, wasClassless); err != nil {
		return err
	}
	if exists {
		c.event(svc, corev1.EventTypeNormal, reasonDeleted, "Deleted load balancer")
	}
	c.forget(key)
	return nil
}

// routed reports whether our routing chooses a backend for the Service:
// one of our classes, or, without a class, our annotation or the default
// backend.
func (c *Controller) routed(svc *corev1.Service) bool {
	if svc.Spec.LoadBalancerClass != nil {
		return c.cloud.ServesClass(*svc.Spec.LoadBalancerClass)
	}
	return c.routesClassless(svc)
}

// handOver removes our Finalizer from a Service the controller does not
// serve (a classed Service turned ClusterIP, then a LoadBalancer of
// another class or, with upstream's service controller serving classless
// Services, of none) once no load balancer of ours needs it (handsOver).
// Nothing else of such a Service is touched, and one without our Finalizer
// is not written at all. After a conflict the guard is asked again of the
// version re-read: the write never removes our Finalizer from a version
// that still needs it.
func (c *Controller) handOver(ctx context.Context, svc *corev1.Service) error {
	if !c.handsOver(svc) {
		return nil
	}
	klog.FromContext(ctx).V(2).Info("Removing our cleanup finalizer from a Service another controller serves", "finalizer", Finalizer)
	return c.dropFinalizers(ctx, svc, func(cur *corev1.Service) []string {
		if !c.handsOver(cur) {
			return nil
		}
		return []string{Finalizer}
	}, false, nil)
}

// handsOver reports whether our Finalizer may leave a LoadBalancer Service
// the controller does not serve, not being deleted: the router holds no
// load balancer for it (no record), or, for a classless one, the shared
// finalizer guards it (upstream's service controller in our CCM, over the
// router, deletes it). The shared finalizer on a Service of another class
// guards that class's controller's load balancer, not ours: ours stays
// until the Service's deletion is cleaned up.
func (c *Controller) handsOver(svc *corev1.Service) bool {
	if !hasFinalizer(svc, Finalizer) || svc.DeletionTimestamp != nil || needsCleanup(svc) || c.serves(svc) {
		return false
	}
	return !hasRecord(svc) || (svc.Spec.LoadBalancerClass == nil && hasFinalizer(svc, sharedFinalizer))
}

// ourAddresses returns the addresses of the Service's load balancers
// before cleanup deletes them: as the cloud reports them (the target
// backends'), as the status the controller last published showed (a retry
// of a cleanup whose delete succeeded but whose finalizer write did not),
// and, when the status shows others still, every load balancer the router
// holds for it (HeldAddresses: each backend its record names, a draining
// one's included, after a restart too). A backend that cannot answer adds
// nothing: its address, if shown, counts as another controller's, which
// keeps the shared finalizer rather than removing another's.
func (c *Controller) ourAddresses(ctx context.Context, key string, svc *corev1.Service, status *corev1.LoadBalancerStatus, exists bool) []corev1.LoadBalancerIngress {
	var ours []corev1.LoadBalancerIngress
	if exists && status != nil {
		ours = append(ours, status.Ingress...)
	}
	if st := c.stateOf(key); st != nil && st.svc.UID == svc.UID {
		ours = append(ours, st.svc.Status.LoadBalancer.Ingress...)
	}
	if !othersAddress(svc.Status.LoadBalancer.Ingress, ours) {
		return ours
	}
	held, err := c.cloud.HeldAddresses(ctx, c.opts.ClusterName, svc)
	if err != nil {
		klog.FromContext(ctx).V(2).Info("Not every backend that may hold the Service's load balancer answered", "err", err)
	}
	return append(ours, held...)
}

// sharedIsOurs reports whether cleanup may remove the shared finalizer
// from the Service, ours being our load balancer's addresses:
//   - one of our classes: yes, an earlier version of ours put it (the
//     router refuses upstream's controller the cleanup of our classes);
//   - another class, or one of ours a reload removed (cleaned up for the
//     router's record on it): only when what we wrote on the Service says
//     an earlier version of ours put it there, beside its record, in the
//     place of our Finalizer. Not when the Service carries our Finalizer:
//     this version puts ours on a classed Service it serves and removes
//     the shared one in the same write (withWanted), so a shared one
//     beside ours was put by another controller, the one of the class it
//     has now (no address of its own yet, or one). Not when it changed
//     class since our last sync (moved): it left us through ClusterIP, and
//     its new class's controller put the shared one. Nor when the status
//     shows an address that is not ours: the class's controller, which
//     wrote it, put the shared finalizer, and it guards that controller's
//     load balancer;
//   - no class: when the controller serves, or served, it (shared), unless
//     the status shows an address of another controller's (upstream's,
//     serving it since it was turned classless while our CCM was down).
//     An address none of our load balancers has is not another
//     controller's when the router's record was made for no class and
//     our Finalizer is absent (servedClassless): our controller put the
//     shared finalizer with that record, and the address is that of a
//     load balancer of ours already deleted (by a replica that lost the
//     lease, or was killed, before it could remove the finalizer: chaos
//     seed 586911784). A Service turned classless while our CCM was down
//     carries our Finalizer, or a record made for its class.
func (c *Controller) sharedIsOurs(svc *corev1.Service, shared, moved bool, ours []corev1.LoadBalancerIngress) bool {
	theirs := othersAddress(svc.Status.LoadBalancer.Ingress, ours)
	switch class := svc.Spec.LoadBalancerClass; {
	case class != nil && c.cloud.ServesClass(*class):
		return true
	case class != nil:
		return !theirs && !moved && !hasFinalizer(svc, Finalizer)
	default:
		return shared && (!theirs || servedClassless(svc))
	}
}

// servedClassless reports whether the router's record on the Service was
// made for no class (annotation.LoadBalancerRecordClass written empty with
// it) and the Service does not carry our Finalizer: our controller served
// it classless and put the shared finalizer itself, with that record
// (withWanted), and nobody served it under a class since.
func servedClassless(svc *corev1.Service) bool {
	class, ok := svc.Annotations[string(annotation.LoadBalancerRecordClass)]
	return ok && class == "" && svc.Annotations[string(annotation.LoadBalancerBackends)] != "" && !hasFinalizer(svc, Finalizer)
}

// othersAddress reports whether shown holds an address that is not one of
// ours.
func othersAddress(shown, ours []corev1.LoadBalancerIngress) bool {
	return slices.ContainsFunc(shown, func(in corev1.LoadBalancerIngress) bool { return !sameIngress(ours, in) })
}

// letGo removes the cleanup finalizers and our conditions from a Service
// the router stopped serving and whose load balancers it removed
// (ImplementedElsewhere, our routing no longer choosing it): its deletion
// needs nothing of ours any more. Its address, if any is left, is someone
// else's (the router cleared ours) and is kept, and so is the shared
// finalizer then: the controller that wrote that address serves it (a
// classless Service turned classed and back through ClusterIP while we
// were down, which upstream's CCM served meanwhile).
func (c *Controller) letGo(ctx context.Context, svc *corev1.Service) error {
	// The router wrote the Service during the call (its record, its
	// status): the version it left says whose address is left.
	svc, err := c.reread(ctx, svc)
	if svc == nil || err != nil {
		return err
	}
	return c.dropFinalizers(ctx, svc, func(cur *corev1.Service) []string {
		if len(cur.Status.LoadBalancer.Ingress) > 0 {
			return []string{Finalizer}
		}
		return []string{Finalizer, sharedFinalizer}
	}, true, nil)
}

// gone handles a Service deleted without the controller's cleanup (its
// finalizer removed by hand): the load balancer of the last copy the
// controller served is deleted, as upstream does.
func (c *Controller) gone(ctx context.Context, key string) error {
	st := c.stateOf(key)
	if st == nil {
		return nil
	}
	klog.FromContext(ctx).Info("The Service was deleted without its load balancer's cleanup; deleting the load balancer")
	return c.deleteLast(ctx, key, st)
}

// replaced handles a Service deleted and re-created under its name before
// the controller saw the deletion: the old one's load balancer is deleted
// (upstream's processServiceCreateOrUpdate does the same when the cached
// Service's UID differs), with upstream's events on the old Service.
func (c *Controller) replaced(ctx context.Context, key string, st *served) error {
	klog.FromContext(ctx).Info("The Service was deleted and re-created; deleting the old one's load balancer", "oldUID", st.svc.UID)
	old := st.last()
	c.event(old, corev1.EventTypeNormal, reasonDeleting, "Deleting load balancer")
	if err := c.deleteLast(ctx, key, st); err != nil {
		c.event(old, corev1.EventTypeWarning, "DeleteLoadBalancerFailed", "Error deleting load balancer: "+err.Error())
		return err
	}
	c.event(old, corev1.EventTypeNormal, reasonDeleted, "Deleted load balancer")
	return nil
}

// deleteLast deletes the load balancer of the last copy of the Service the
// controller synced, marked as being deleted, and forgets it. The Service
// is gone (router.ServiceGone): a backend its record names that a reload
// removed is warned about, not waited for, as nobody can edit the record.
func (c *Controller) deleteLast(ctx context.Context, key string, st *served) error {
	svc := st.last().DeepCopy()
	if svc.DeletionTimestamp == nil {
		svc.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	}
	if err := c.cloud.EnsureLoadBalancerDeleted(router.ServiceGone(ctx), c.opts.ClusterName, svc); err != nil && !errors.Is(err, cloudprovider.ImplementedElsewhere) {
		return err
	}
	c.forget(key)
	return nil
}

// last is the copy of the Service whose load balancer a delete must
// remove once the Service is gone: the version last handed to an ensure,
// as upstream's service controller caches it before its cloud calls (what
// that ensure made, if it failed midway, was made from it: a move's new
// load balancer, in a backend only its record names), with every backend
// the served copy's record names as well (what was served before is still
// there if the move did not complete).
func (st *served) last() *corev1.Service {
	if st.ensuring == nil {
		return st.svc
	}
	return router.WithRecordOf(st.ensuring, st.svc)
}

func (c *Controller) event(svc *corev1.Service, typ, reason, msg string) {
	if c.recorder != nil {
		c.recorder.Event(svc, typ, reason, msg)
	}
}

func (c *Controller) stateOf(key string) *served {
	c.mu.Lock()
	defer c.mu.Unlock()
	st, ok := c.state[key]
	if !ok {
		return nil
	}
	cp := *st
	return &cp
}

// track records the Service before its load balancer is ensured, as
// upstream caches it before its cloud calls: a Service deleted (or
// re-created) without the cleanup finalizer after a failed or partial
// ensure still has its load balancer deleted. A Service the controller
// already synced keeps the copy it last served until the ensure succeeds,
// and svc beside it (ensuring): what the ensure may have made is svc's
// (a move's new load balancer, made from svc's annotations, in a backend
// only svc's record names), and deleteLast deletes it.
func (c *Controller) track(key string, svc *corev1.Service, seen sets.Set[string]) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st, ok := c.state[key]; ok && st.svc.UID == svc.UID {
		st.ensuring = svc
		return
	}
	c.state[key] = &served{svc: svc, seen: seen.Clone(), retry: true, fresh: true}
}

func (c *Controller) remember(key string, svc *corev1.Service, seen sets.Set[string], nodes nodeSet) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.state[key] = &served{svc: svc, seen: seen, nodes: nodes}
}

// repairedBackends returns the backends a repair is counted in: those whose
// calls reported a change (backends.ChangedBackends), each once, else (the
// status address alone was restored, or a cloud outside the router
// reported) every backend serving the Service.
func repairedBackends(svc *corev1.Service, reported []string) []string {
	if len(reported) > 0 {
		return sets.List(sets.New(reported...))
	}
	return strings.Split(svc.Annotations[string(annotation.LoadBalancerServedBy)], ",")
}

// failed marks a known Service's next sync as a full one and keeps what a
// repair sync changed before it failed, and the backends it changed in.
func (c *Controller) failed(key string, repair bool, changes, from []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st, ok := c.state[key]
	if !ok {
		return
	}
	st.retry = true
	if repair {
		st.drift = append(st.drift, changes...)
		st.driftFrom = append(st.driftFrom, from...)
		if st.drift == nil {
			st.drift = []string{}
		}
	}
}

func (c *Controller) forget(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.state, key)
	delete(c.full, key)
	delete(c.addrStale, key)
}
