package lbcontroller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	servicehelper "k8s.io/cloud-provider/service/helpers"
	"k8s.io/klog/v2"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/router"
)

// conflictRetries bounds the re-reads after a write lost to another.
const conflictRetries = 5

// prepare adds the cleanup finalizer (finalizerFor; the other one, if
// the Service carries it, goes in the same write: see Finalizer) and the
// router's record to the Service in one write, guarded by its
// resourceVersion (re-read and recomputed after a conflict), before any
// cloud call; nil when the Service is gone. Like upstream, it writes
// through the status subresource, which takes metadata changes and leaves
// the spec alone.
func (c *Controller) prepare(ctx context.Context, svc *corev1.Service) (*corev1.Service, error) {
	for attempt := 0; ; attempt++ {
		ann := c.cloud.PrepareLoadBalancer(svc)
		finalizers, finChanged := withWanted(svc)
		if !finChanged && len(ann) == 0 {
			return svc, nil
		}
		meta := map[string]any{"resourceVersion": svc.ResourceVersion}
		if finChanged {
			meta["finalizers"] = finalizers
		}
		if len(ann) > 0 {
			meta["annotations"] = ann
		}
		out, err := c.patch(ctx, svc, map[string]any{"metadata": meta})
		if !apierrors.IsConflict(err) || attempt == conflictRetries {
			if apierrors.IsNotFound(err) {
				return nil, nil
			}
			if err != nil {
				return nil, fmt.Errorf("adding the load-balancer cleanup finalizer %s: %w", finalizerFor(svc), err)
			}
			if finChanged && hasFinalizer(svc, otherFinalizer(svc)) {
				klog.FromContext(ctx).V(2).Info("Moved the Service to its cleanup finalizer", "finalizer", finalizerFor(svc), "removed", otherFinalizer(svc))
			}
			return out, nil
		}
		if svc, err = c.reread(ctx, svc); svc == nil || err != nil {
			return nil, err
		}
		if svc.DeletionTimestamp != nil || svc.Spec.Type != corev1.ServiceTypeLoadBalancer || !c.serves(svc) {
			// Deleted, turned ClusterIP or no longer ours meanwhile: no
			// finalizer may be added now, nor a load balancer made; the
			// sync the change queued cleans up.
			return nil, nil
		}
	}
}

// publish writes the router's decision (dec, ended) on the Service in one
// request: its status and its annotation changes, guarded by the
// resourceVersion of svc, the version whose load balancer was ensured.
// The annotations are the decision applied to the version written
// (dec.Changes), so a
// write the router made while the load balancer was ensured (a drain
// started) is kept, never undone from an older copy. After a conflict it
// re-reads the Service and writes on the version it finds, the
// annotations computed again from it (the load balancer exists: its
// address is published whatever changed). own reports whether the written
// version is the one ensured, changed only by writes that do not matter to
// its load balancer (status, the CCM's own annotations): when not, an edit
// came in while the load balancer was ensured, and the caller must not take
// the returned object as what it ensured. written are the annotation
// changes sent. A version re-read that is no longer ours to serve is not
// written (errLeft).
func (c *Controller) publish(ctx context.Context, svc *corev1.Service, dec *router.Decision) (out *corev1.Service, own bool, written map[string]*string, err error) {
	cur, status := svc, dec.Status
	for attempt := 0; ; attempt++ {
		ann := dec.Changes(cur)
		conditions, condChanged := servedConditions(cur, ann, status)
		if attempt > 0 && len(ann) == 0 && !condChanged && servicehelper.LoadBalancerStatusEqual(&cur.Status.LoadBalancer, status) {
			// The version re-read already says it all (the router wrote
			// it during the call: a drain's end): nothing to send.
			return cur, !relevantChange(svc, cur), nil, nil
		}
		meta := map[string]any{"resourceVersion": cur.ResourceVersion}
		if len(ann) > 0 {
			meta["annotations"] = ann
		}
		st := map[string]any{"loadBalancer": statusBody(status)}
		if condChanged {
			st["conditions"] = conditionsBody(conditions)
		}
		body := map[string]any{"metadata": meta, "status": st}
		out, err = c.patch(ctx, cur, body)
		if err == nil {
			dec.Written(ann)
			return out, !relevantChange(svc, cur), ann, nil
		}
		if !apierrors.IsConflict(err) || attempt == conflictRetries {
			return nil, false, nil, err
		}
		if cur, err = c.reread(ctx, cur); err != nil {
			return nil, false, nil, err
		}
		if cur == nil {
			return nil, false, nil, apierrors.NewNotFound(corev1.Resource("services"), svc.Name)
		}
		if cur.DeletionTimestamp != nil || cur.Spec.Type != corev1.ServiceTypeLoadBalancer || !c.serves(cur) {
			// Deleted, turned ClusterIP or given another controller's
			// class while its load balancer was ensured: our address is
			// not to be written on it (it would replace the other
			// controller's); the sync the change queued cleans up.
			return nil, false, nil, errLeft
		}
	}
}

// errLeft is publish's answer for a Service that stopped being ours while
// its load balancer was ensured.
var errLeft = errors.New("the Service stopped being ours while its load balancer was ensured")

// withPublished is svc with the status and annotations publish wrote.
func withPublished(svc *corev1.Service, status *corev1.LoadBalancerStatus, ann map[string]*string) *corev1.Service {
	svc = svc.DeepCopy()
	svc.Status.LoadBalancer = *status.DeepCopy()
	for k, v := range ann {
		if v == nil {
			delete(svc.Annotations, k)
			continue
		}
		if svc.Annotations == nil {
			svc.Annotations = map[string]string{}
		}
		svc.Annotations[k] = *v
	}
	return svc
}

// statusBody is a load-balancer status for a merge patch: an empty list is
// sent as null, so that it replaces the old one.
func statusBody(status *corev1.LoadBalancerStatus) map[string]any {
	if len(status.Ingress) == 0 {
		return map[string]any{"ingress": nil}
	}
	return map[string]any{"ingress": status.Ingress}
}

// release removes the finalizers drop names for the version written once
// the load balancer is gone, and the address of a Service that is no
// longer of type LoadBalancer; a Service being deleted that another
// finalizer keeps loses ours, the addresses of the load balancer deleted,
// from its status.
func (c *Controller) release(ctx context.Context, svc *corev1.Service, drop func(*corev1.Service) []string, ours []corev1.LoadBalancerIngress) error {
	return c.dropFinalizers(ctx, svc, drop, svc.DeletionTimestamp == nil, ours)
}

// dropFinalizers removes the finalizers drop names for the version being
// written from the Service, guarded by its resourceVersion (re-read after
// a conflict, and drop asked again); with clear, also our
// conditions and, for a Service no longer of type LoadBalancer, its
// address, in the same write. A Service some finalizer still keeps loses
// the addresses strip names from its status in that write too (they are
// released: a bare-metal speaker announces what the status shows), even
// when it carries none of drop (the shared finalizer of a Service that
// left us is not ours to remove: sharedIsOurs). A Service being deleted
// that another finalizer keeps also loses the router's record in that
// write (recordRemoval): every delete succeeded, nothing of ours is left,
// and the record would make the next sync take it for ours again (mayOwn)
// and remove the finalizer we just kept. Nothing is sent when drop names
// none, or when neither its finalizers, annotations nor status change.
func (c *Controller) dropFinalizers(ctx context.Context, svc *corev1.Service, drop func(*corev1.Service) []string, clear bool, strip []corev1.LoadBalancerIngress) error {
	return c.patchGuarded(ctx, svc, "removing the load-balancer cleanup finalizer", func(svc *corev1.Service) map[string]any {
		names := drop(svc)
		if len(names) == 0 {
			return nil
		}
		rest := without(svc, names...)
		meta := map[string]any{"resourceVersion": svc.ResourceVersion}
		if len(rest) < len(svc.Finalizers) {
			meta["finalizers"] = rest
			if len(rest) == 0 {
				meta["finalizers"] = nil
			}
		}
		if len(rest) > 0 && svc.DeletionTimestamp != nil {
			if ann := recordRemoval(svc); len(ann) > 0 {
				meta["annotations"] = ann
			}
		}
		body := map[string]any{"metadata": meta}
		st := map[string]any{}
		if clear {
			if len(svc.Status.LoadBalancer.Ingress) > 0 && svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
				st["loadBalancer"] = statusBody(&corev1.LoadBalancerStatus{})
			}
			if conditions, changed := withoutOurs(svc); changed {
				st["conditions"] = conditionsBody(conditions)
			}
		}
		if _, set := st["loadBalancer"]; !set && len(rest) > 0 {
			if kept, changed := withoutIngress(svc.Status.LoadBalancer.Ingress, strip); changed {
				st["loadBalancer"] = statusBody(&corev1.LoadBalancerStatus{Ingress: kept})
			}
		}
		if len(meta) == 1 && len(st) == 0 {
			return nil
		}
		if len(st) > 0 {
			body["status"] = st
		}
		return body
	})
}

// recordRemoval is a merge patch's annotations removing the router's
// record of the Service's load balancers (its backends, the class it was
// made for, the serving one, its ID and its drains), nil when it carries
// none.
func recordRemoval(svc *corev1.Service) map[string]any {
	out := map[string]any{}
	for _, a := range []annotation.Name{annotation.LoadBalancerBackends, annotation.LoadBalancerRecordClass, annotation.LoadBalancerServedBy, annotation.LoadBalancerID, annotation.LoadBalancerDraining} {
		if _, ok := svc.Annotations[string(a)]; ok {
			out[string(a)] = nil
		}
	}
	return out
}

// dropOurs removes from a Service that left us (leave) our Finalizer,
// our conditions and the addresses in ours from its status, in one write
// guarded by its resourceVersion, re-read after a conflict. A version
// re-read that is ours again (turned back to one of our classes) is left
// to the sync its change queued. With shared, the shared finalizer goes
// too when no address is left (see leave). Nothing else is touched;
// nothing is sent when none of it is there.
func (c *Controller) dropOurs(ctx context.Context, svc *corev1.Service, ours []corev1.LoadBalancerIngress, shared bool) error {
	return c.patchGuarded(ctx, svc, "removing our finalizer and addresses from a Service another controller serves", func(svc *corev1.Service) map[string]any {
		if c.serves(svc) {
			return nil
		}
		body := map[string]any{}
		meta := map[string]any{"resourceVersion": svc.ResourceVersion}
		kept, ingressChanged := withoutIngress(svc.Status.LoadBalancer.Ingress, ours)
		drop := []string{Finalizer}
		if shared && len(kept) == 0 {
			drop = append(drop, sharedFinalizer)
		}
		if rest := without(svc, drop...); len(rest) < len(svc.Finalizers) {
			meta["finalizers"] = rest
			if len(rest) == 0 {
				meta["finalizers"] = nil
			}
		}
		st := map[string]any{}
		if ingressChanged {
			st["loadBalancer"] = statusBody(&corev1.LoadBalancerStatus{Ingress: kept})
		}
		if conditions, changed := withoutOurs(svc); changed {
			st["conditions"] = conditionsBody(conditions)
		}
		if len(meta) == 1 && len(st) == 0 {
			return nil
		}
		body["metadata"] = meta
		if len(st) > 0 {
			body["status"] = st
		}
		return body
	})
}

// withoutIngress returns shown less the addresses in strip, and whether
// that removed any.
func withoutIngress(shown, strip []corev1.LoadBalancerIngress) ([]corev1.LoadBalancerIngress, bool) {
	kept := slices.DeleteFunc(slices.Clone(shown), func(in corev1.LoadBalancerIngress) bool { return sameIngress(strip, in) })
	return kept, len(kept) < len(shown)
}

// sameIngress reports whether in is one of list (the same IP and hostname).
func sameIngress(list []corev1.LoadBalancerIngress, in corev1.LoadBalancerIngress) bool {
	return slices.ContainsFunc(list, func(o corev1.LoadBalancerIngress) bool { return o.IP == in.IP && o.Hostname == in.Hostname })
}

// patch sends a JSON merge patch to the Service's status subresource.
func (c *Controller) patch(ctx context.Context, svc *corev1.Service, body map[string]any) (*corev1.Service, error) {
	raw, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	return c.client.CoreV1().Services(svc.Namespace).Patch(ctx, svc.Name, types.MergePatchType, raw, metav1.PatchOptions{}, "status")
}

// reread gets the Service from the API server; nil when it is gone,
// including when a Service of another UID now has its name: that one was
// re-created after the one being synced was deleted, and is not to be
// written from this sync's decisions (its own event queues its sync, which
// first deletes the old one's load balancer: replaced).
func (c *Controller) reread(ctx context.Context, svc *corev1.Service) (*corev1.Service, error) {
	cur, err := c.client.CoreV1().Services(svc.Namespace).Get(ctx, svc.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) || (err == nil && cur.UID != svc.UID) {
		return nil, nil
	}
	return cur, err
}

// publishFailure writes LoadBalancerReady False with the sync's error,
// once per failure (failedConditions): guarded by the resourceVersion of
// the version synced, and not retried on a conflict (the edit that caused
// it queues another sync). Its own failure is logged, not the sync's.
func (c *Controller) publishFailure(ctx context.Context, svc *corev1.Service, syncErr error) {
	conditions, changed := failedConditions(svc, syncErr)
	if !changed || svc.DeletionTimestamp != nil {
		return
	}
	body := map[string]any{"metadata": map[string]any{"resourceVersion": svc.ResourceVersion},
		"status": map[string]any{"conditions": conditionsBody(conditions)}}
	if _, err := c.patch(ctx, svc, body); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		klog.FromContext(ctx).V(2).Info("Could not write the LoadBalancerReady condition", "err", err)
	}
}

// dropConditions removes the controller's conditions from a Service no
// backend serves any more (ImplementedElsewhere), guarded by the
// resourceVersion and re-read on a conflict (the router cleared its status
// during the call). Nothing is sent when it has none.
func (c *Controller) dropConditions(ctx context.Context, svc *corev1.Service) error {
	for attempt := 0; ; attempt++ {
		conditions, changed := withoutOurs(svc)
		if !changed {
			return nil
		}
		body := map[string]any{"metadata": map[string]any{"resourceVersion": svc.ResourceVersion},
			"status": map[string]any{"conditions": conditionsBody(conditions)}}
		_, err := c.patch(ctx, svc, body)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if !apierrors.IsConflict(err) || attempt == conflictRetries {
			if err != nil {
				return fmt.Errorf("removing the load-balancer conditions: %w", err)
			}
			return nil
		}
		if svc, err = c.reread(ctx, svc); svc == nil || err != nil {
			return err
		}
	}
}

// patchGuarded sends the merge patch build makes of svc, guarded by the
// resourceVersion build puts in it; after a conflict it re-reads the
// Service and builds again, up to conflictRetries times. build answers
// nil when nothing is to be written (or the version re-read is left to
// the sync its change queued). A Service gone is nothing to write; what
// names the write in the error.
func (c *Controller) patchGuarded(ctx context.Context, svc *corev1.Service, what string, build func(*corev1.Service) map[string]any) error {
	for attempt := 0; ; attempt++ {
		body := build(svc)
		if body == nil {
			return nil
		}
		_, err := c.patch(ctx, svc, body)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if !apierrors.IsConflict(err) || attempt == conflictRetries {
			if err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
			return nil
		}
		if svc, err = c.reread(ctx, svc); svc == nil || err != nil {
			return err
		}
	}
}
