package lifecycle

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/router/backend"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/router/svcstate"
)

// Where a Service's load balancer may live is written on the Service
// itself, in the annotation multicloud-ccm.io/load-balancer-backends: a
// write-ahead record. A backend is added before the router's first mutating
// call there (EnsureLoadBalancer, UpdateLoadBalancer) and removed only after
// that backend reported nothing left for the Service. GetLoadBalancer,
// EnsureLoadBalancerDeleted and the clean-up after a move ask only the
// recorded backends, so a cloud that never held the Service's load balancer
// cannot block its deletion, and a new process knows where to look.
//
// A Service without the record was either never given a load balancer by
// this version (nothing anywhere, except possibly in its target backend,
// which is asked) or was given one by an older version: if it shows an
// address, every backend is asked, as before.

// baseline is the Service's record as written on it; a Service made by an
// older version, with no record but an address, may have a load balancer
// in any backend, so its record starts with all of them.
func (r *Balancer) baseline(svc *corev1.Service) svcstate.Record {
	rec := svcstate.ParseRecord(svc)
	if !rec.Known && len(svc.Status.LoadBalancer.Ingress) > 0 {
		return rec.With(backend.Names(r.lbs)...)
	}
	return rec
}

// recordOf returns the Service's record: its annotation, plus what this
// process wrote that the (possibly stale) copy upstream passed may not show.
func (r *Balancer) recordOf(svc *corev1.Service) svcstate.Record {
	rec := svcstate.ParseRecord(svc)
	if mem, ok := r.st.RecordedOf(svc.UID); ok {
		rec = rec.With(mem...)
	}
	return rec
}

// written is the Service's record as last written: what this process
// wrote, if it wrote one, else the annotation. Whether a backend is
// already recorded, so that creating there needs no write first, is
// asked of this record, never of recordOf: a copy handed over before a
// later write (a worker's Service from before a move and back) can still
// name a backend this process has since dropped from the record, after
// its delete there; trusting it would create there unrecorded, and the
// Service's delete would not look there (issue: a load balancer leaked in
// TestReloadRaceInvariants).
func (r *Balancer) written(svc *corev1.Service) svcstate.Record {
	if mem, ok := r.st.RecordedOf(svc.UID); ok {
		return svcstate.Record{Known: true, Names: mem}
	}
	return svcstate.ParseRecord(svc)
}

// current is the Service's record with, for a Service an older version
// gave an address, every backend (see baseline).
func (r *Balancer) current(svc *corev1.Service) svcstate.Record {
	rec := r.recordOf(svc)
	if !rec.Known && len(svc.Status.LoadBalancer.Ingress) > 0 {
		return rec.With(backend.Names(r.lbs)...)
	}
	return rec
}

// remember keeps what was written for the Service until the Service is
// deleted. The router writes nothing, so keeps nothing, for Services it
// never gave a load balancer.
func (r *Balancer) remember(uid types.UID, rec svcstate.Record) {
	r.st.Remember(uid, slices.Clip(rec.Names))
}

// forget drops every per-Service state of a Service that is gone.
func (r *Balancer) forget(uid types.UID) {
	r.st.Forget(uid)
}

// addToRecord records bs on the Service before a mutating call there; a
// backend of bs whose load balancer drains serves again: its drain entry
// goes in the same write. It fails, so that nothing is created, if the
// record cannot be written.
func (r *Balancer) addToRecord(ctx context.Context, svc *corev1.Service, bs ...*backend.Member) error {
	rec := r.written(svc)
	draining := r.drainingOf(svc)
	var add, back []string
	for _, b := range bs {
		if !rec.Has(b.Name) {
			add = append(add, b.Name)
		}
		if _, ok := draining[b.Name]; ok {
			back = append(back, b.Name)
		}
	}
	if len(add) == 0 && len(back) == 0 {
		return nil
	}
	err := r.writeRecord(ctx, svc, false, func(rec svcstate.Record) svcstate.Record { return rec.With(add...) }, back...)
	if err != nil {
		return fmt.Errorf("service %s/%s: cannot record backends %v in annotation %s before creating their load balancers: %w",
			svc.Namespace, svc.Name, add, annotation.LoadBalancerBackends, err)
	}
	return nil
}

// dropFromRecord removes backends that reported nothing left for the
// Service. A Service that is gone needs no record.
func (r *Balancer) dropFromRecord(ctx context.Context, svc *corev1.Service, names []string) error {
	if len(names) == 0 {
		return nil
	}
	rec := r.current(svc)
	if rec.Known && len(rec.Without(names...).Names) == len(rec.Names) {
		return nil
	}
	return r.writeRecord(ctx, svc, true, func(rec svcstate.Record) svcstate.Record { return rec.Without(names...) })
}

// writeRecord applies change to the Service's record as the API server
// has it, guarded by its resourceVersion, and remembers the result. A record
// left empty also drops the annotations naming the serving backend and its
// load balancer (see markServed). Without a client (a router never
// initialised), only the memory is updated.
//
// The drain entries of the backends named in serving go in the same write:
// they serve the Service again.
func (r *Balancer) writeRecord(ctx context.Context, svc *corev1.Service, goneOK bool, change func(svcstate.Record) svcstate.Record, serving ...string) error {
	if r.Client == nil {
		next := change(r.current(svc))
		r.remember(svc.UID, next)
		r.st.SetDrains(svc.UID, r.drainingOf(svc).KeepOnly(next.Names).Without(serving...))
		return nil
	}
	var gone func()
	if goneOK {
		// No object left to write to: what this process remembers of the
		// record is all there is, and it follows the change (a delete that
		// emptied it leaves nothing to keep; see svcstate.States.Forget).
		gone = func() { r.remember(svc.UID, change(r.current(svc))) }
	}
	return r.patchAnnotations(ctx, svc, gone, func(cur *corev1.Service) (map[annotation.Name]*string, func()) {
		old := r.baseline(cur)
		next := change(old)
		changes := map[annotation.Name]*string{}
		if !old.Known || old.Value() != next.Value() {
			changes[annotation.LoadBalancerBackends] = ptr.To(next.Value())
		}
		if slices.ContainsFunc(next.Names, func(n string) bool { return !old.Has(n) }) {
			recordClass(changes, cur)
		}
		if len(next.Names) == 0 {
			if _, ok := cur.Annotations[string(annotation.LoadBalancerRecordClass)]; ok {
				changes[annotation.LoadBalancerRecordClass] = nil
			}
			svcstate.SetAnnotation(changes, cur, annotation.LoadBalancerServedBy, "")
			svcstate.SetAnnotation(changes, cur, annotation.LoadBalancerID, "")
			r.writtenBack(changes, nil, cur, nil, nil)
		}
		drains := svcstate.ParseDraining(cur).KeepOnly(next.Names).Without(serving...)
		svcstate.SetAnnotation(changes, cur, annotation.LoadBalancerDraining, drains.Value())
		r.dnsChanges(changes, cur, drains, "")
		return changes, func() {
			r.remember(svc.UID, next)
			if mem, ok := r.st.DrainsOf(svc.UID); ok {
				r.st.SetDrains(svc.UID, mem.KeepOnly(next.Names).Without(serving...))
			}
		}
	})
}

// recordClass adds to changes what makes the Service's
// annotation.LoadBalancerRecordClass name the class its record is made
// for, its class now ("" for none), if it does not already: written with
// each backend added to the record, so that a Service given another
// controller's class is known to have left us without a copy of it in
// memory (after a restart or a failover).
func recordClass(changes map[annotation.Name]*string, cur *corev1.Service) {
	class := ptr.Deref(cur.Spec.LoadBalancerClass, "")
	if got, ok := cur.Annotations[string(annotation.LoadBalancerRecordClass)]; !ok || got != class {
		changes[annotation.LoadBalancerRecordClass] = ptr.To(class)
	}
}

// markServed writes on the Service which backends serve its load balancer
// and the IDs they reported (see servedChanges). Nothing is written when
// the Service already says so, so the annotation change re-runs the
// service controller's sync once at most: that sync finds the same values
// and writes nothing.
func (r *Balancer) markServed(ctx context.Context, svc *corev1.Service, targets []*backend.Member, answers []ensured) error {
	if dec := decisionOf(ctx); dec != nil {
		dec.annotate(r.servedChanges(svc, svc, targets, answers))
	}
	if r.Client == nil {
		return nil
	}
	w := &ServedWrite{r: r, seen: svc, targets: targets, answers: answers}
	if deferServed(ctx, w) {
		return nil
	}
	err := r.patchAnnotations(ctx, svc, func() {}, func(cur *corev1.Service) (map[annotation.Name]*string, func()) {
		changes := r.servedChanges(svc, cur, targets, answers)
		return changes, func() {
			if v, ok := changes[annotation.LoadBalancerDraining]; ok {
				r.st.SetDrains(svc.UID, svcstate.ParseDrainingValue(ptr.Deref(v, "")))
			}
		}
	})
	if err != nil {
		return fmt.Errorf("service %s/%s: writing annotations %s and %s: %w", svc.Namespace, svc.Name,
			annotation.LoadBalancerServedBy, annotation.LoadBalancerID, err)
	}
	return nil
}

// writtenBack adds to changes the annotations the serving backends' types
// write back (backends.RegisterServiceAnnotations), with the values they
// reported, and the removal of those the Service's previous serving
// backends wrote when no serving backend is of their type (bs nil: no
// backend serves the Service any more).
//
// seen is the Service the backends were handed: an annotation whose value
// in cur differs from seen's was edited while they ran (a user removing
// OCCM's load-balancer-id to leave a shared load balancer), so it is left
// as the edit made it; writing back what the backends answered to the old
// value would undo the edit, and the sync the edit queued answers the new
// one.
func (r *Balancer) writtenBack(changes map[annotation.Name]*string, seen, cur *corev1.Service, bs []*backend.Member, answers []ensured) {
	types := map[string]bool{}
	for i, b := range bs {
		types[b.Type] = true
		for _, key := range backends.ServiceAnnotationsOf(b.Type) {
			if seen != nil && seen.Annotations[key] != cur.Annotations[key] {
				continue
			}
			svcstate.SetAnnotation(changes, cur, annotation.Name(key), answers[i].reported[key])
		}
	}
	for _, prev := range r.servingOf(cur) {
		if types[prev.Type] {
			continue
		}
		for _, key := range backends.ServiceAnnotationsOf(prev.Type) {
			svcstate.SetAnnotation(changes, cur, annotation.Name(key), "")
		}
	}
}

// patchAnnotations is the one writer of the router's Service annotations:
// desired, given the Service as the API server has it, returns the
// annotation changes (nil removes one) and what to do once they are
// written. The patch is guarded by the resourceVersion and retried on
// conflict; nothing is sent when there is nothing to change. With gone
// non-nil, a Service that is gone is forgotten, and gone called, instead
// of an error.
func (r *Balancer) patchAnnotations(ctx context.Context, svc *corev1.Service, gone func(), desired func(*corev1.Service) (map[annotation.Name]*string, func())) error {
	services := r.Client.CoreV1().Services(svc.Namespace)
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := services.Get(ctx, svc.Name, metav1.GetOptions{})
		if err == nil && cur.UID != svc.UID {
			err = apierrors.NewNotFound(corev1.Resource("services"), svc.Name)
		}
		if err != nil {
			if gone != nil && apierrors.IsNotFound(err) {
				r.forget(svc.UID)
				gone()
				return nil
			}
			return err
		}
		changes, done := desired(cur)
		if len(changes) == 0 {
			done()
			return nil
		}
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
			"resourceVersion": cur.ResourceVersion,
			"annotations":     changes,
		}})
		if err != nil {
			return err
		}
		if _, err := services.Patch(ctx, svc.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			return err
		}
		done()
		return nil
	})
}

// reachable returns the backends that may hold the Service's load
// balancer and are configured: the recorded ones (every one for a Service
// an older version gave an address, see baseline); without a record, its
// targets. And the names of the recorded ones that are not configured (a reload removed them while they held, or
// drained, its load balancer), which stay in the record.
func (r *Balancer) reachable(svc *corev1.Service, targets ...*backend.Member) (out []*backend.Member, gone []string) {
	rec := r.current(svc)
	if !rec.Known {
		return slices.DeleteFunc(slices.Clone(targets), func(b *backend.Member) bool { return b == nil }), nil
	}
	out = make([]*backend.Member, 0, len(rec.Names))
	for _, n := range rec.Names {
		if b, ok := r.ByName[n]; ok && b.LB != nil {
			out = append(out, b)
		} else {
			gone = append(gone, n)
		}
	}
	return out, gone
}

// unreachableErr is the user error of a record naming backend n, which is
// not configured.
func (r *Balancer) unreachableErr(svc *corev1.Service, n string) error {
	return backend.UserErr(ReasonUnknownLBBackend, "service %s/%s: annotation %s records a load balancer in backend %q, which is not configured "+
		"(have: %v); add the backend back so its load balancer can be removed, or, once you removed it by hand, remove %q from the annotation",
		svc.Namespace, svc.Name, annotation.LoadBalancerBackends, n, backend.Names(r.lbs), n)
}

// warnUnreachableOnce puts a Warning UnknownLoadBalancerBackend on the
// Service for each backend of gone (recorded, not configured) it was not
// warned about yet in this episode (see svcstate.States.NewlyUnreachable):
// its load balancer there stays, and stays in the record, until the
// backend is added back or the operator edits the record. The Service is
// served meanwhile by the backends that are configured.
func (r *Balancer) warnUnreachableOnce(ctx context.Context, svc *corev1.Service, gone []string) {
	for _, n := range r.st.NewlyUnreachable(svc.UID, gone) {
		r.recordServiceError(ctx, svc, r.unreachableErr(svc, n))
	}
}

// mayHoldGone is reachable for a Service that is gone (ServiceGone): the
// recorded backends that are configured; each one that is not gets a
// Warning naming it and what to do, as its load balancer is left there.
func (r *Balancer) mayHoldGone(ctx context.Context, svc *corev1.Service) []*backend.Member {
	rec := r.current(svc)
	out := make([]*backend.Member, 0, len(rec.Names))
	for _, n := range rec.Names {
		if b, ok := r.ByName[n]; ok && b.LB != nil {
			out = append(out, b)
			continue
		}
		r.Warn(ctx, svcstate.ServiceRef(svc), ReasonUnknownLBBackend, fmt.Sprintf("service %s/%s was deleted without its load balancer's cleanup, and "+
			"annotation %s recorded a load balancer in backend %q, which is not configured (have: %v): it is deleted from the other backends only; "+
			"add the backend back while this cleanup still retries to delete its load balancer there, or delete that load balancer by hand",
			svc.Namespace, svc.Name, annotation.LoadBalancerBackends, n, backend.Names(r.lbs)))
	}
	return out
}

// clearStatus removes from the Service's status the addresses of load
// balancers the router is about to release (released), so no Service ever
// shows an address given back to a pool. The patch goes to the status
// subresource, guarded by the resourceVersion. Addresses someone else wrote (a
// controller serving classless Services, such as MetalLB) are kept. When no
// released load balancer reported an address, every address is ours.
func (r *Balancer) clearStatus(ctx context.Context, svc *corev1.Service, released []holder) error {
	if r.Client == nil || svc.Spec.LoadBalancerClass != nil {
		return nil
	}
	ours := map[string]bool{}
	for _, h := range released {
		if h.status != nil {
			for _, in := range h.status.Ingress {
				ours[in.IP+"|"+in.Hostname] = true
			}
		}
	}
	return r.patchIngress(ctx, svc, func(shown []corev1.LoadBalancerIngress) []corev1.LoadBalancerIngress {
		kept := make([]corev1.LoadBalancerIngress, 0, len(shown))
		for _, in := range shown {
			if len(ours) > 0 && !ours[in.IP+"|"+in.Hostname] {
				kept = append(kept, in)
			}
		}
		return kept
	})
}

// addToStatus adds to the Service's status the addresses in add it does
// not show yet, keeping every address it shows, through the status
// subresource, guarded by the resourceVersion. Used when some of a
// Service's backends failed: the status shows the others' addresses.
func (r *Balancer) addToStatus(ctx context.Context, svc *corev1.Service, add []corev1.LoadBalancerIngress) error {
	if r.Client == nil {
		return nil
	}
	return r.patchIngress(ctx, svc, func(cur []corev1.LoadBalancerIngress) []corev1.LoadBalancerIngress {
		return withAdded(cur, add)
	})
}

// withAdded is cur with the addresses of add it does not show appended.
func withAdded(cur, add []corev1.LoadBalancerIngress) []corev1.LoadBalancerIngress {
	shown := map[string]bool{}
	for _, in := range cur {
		shown[in.IP+"|"+in.Hostname] = true
	}
	next := slices.Clone(cur)
	for _, in := range add {
		if !shown[in.IP+"|"+in.Hostname] {
			next = append(next, in)
		}
	}
	return next
}

// showInstead takes the addresses in drop out of the Service's status and
// puts those in serving first, in one write through the status
// subresource, guarded by the resourceVersion: the load balancers whose
// addresses drop lists are about to be deleted (finishDrain), and those
// of serving, the targets', already serve (make before break). An
// address serving lists stays. Nothing is written when the status shows
// none of drop. With no serving address (a target whose load balancer has
// none yet) the status is emptied: what the sync writes anyway once it
// passes, where kept it showed, for as long as the delete took, the
// address of a load balancer being deleted (Octavia's PENDING_DELETE
// answers "retry", which fails the sync before its write;
// TestProbeRetiredAddressWithTargetWithoutAddress). The status the sync
// then shows is recorded in ctx's decision (a delete that fails after it
// leaves it so).
func (r *Balancer) showInstead(ctx context.Context, svc *corev1.Service, drop, serving []corev1.LoadBalancerIngress) error {
	gone := map[string]bool{}
	for _, in := range drop {
		gone[svcstate.IngressKey(in)] = true
	}
	for _, in := range serving {
		delete(gone, svcstate.IngressKey(in))
	}
	if len(gone) == 0 {
		return nil
	}
	instead := func(cur []corev1.LoadBalancerIngress) ([]corev1.LoadBalancerIngress, bool) {
		if !slices.ContainsFunc(cur, func(in corev1.LoadBalancerIngress) bool { return gone[svcstate.IngressKey(in)] }) {
			return cur, false
		}
		return withAdded(slices.Clone(serving), slices.DeleteFunc(slices.Clone(cur), func(in corev1.LoadBalancerIngress) bool { return gone[svcstate.IngressKey(in)] })), true
	}
	if next, changed := instead(svc.Status.LoadBalancer.Ingress); changed {
		decisionOf(ctx).show(&corev1.LoadBalancerStatus{Ingress: next})
	}
	if r.Client == nil {
		return nil
	}
	return r.writeIngress(ctx, svc, instead)
}

// patchIngress sets the Service's status.loadBalancer.ingress to what
// change makes of the current one, through the status subresource,
// guarded by the resourceVersion and retried on a conflict. Nothing is
// written when change keeps the number of addresses (it only removes or
// only adds), or when the Service is gone or was re-created.
func (r *Balancer) patchIngress(ctx context.Context, svc *corev1.Service, change func([]corev1.LoadBalancerIngress) []corev1.LoadBalancerIngress) error {
	return r.writeIngress(ctx, svc, func(cur []corev1.LoadBalancerIngress) ([]corev1.LoadBalancerIngress, bool) {
		next := change(cur)
		return next, len(next) != len(cur)
	})
}

// publishStatus writes status as the Service's load-balancer status when
// the Service shows other addresses (or the same in another order), as
// upstream's service controller does with EnsureLoadBalancer's answer;
// through the status subresource, guarded by the resourceVersion.
func (r *Balancer) publishStatus(ctx context.Context, svc *corev1.Service, status *corev1.LoadBalancerStatus) error {
	if r.Client == nil || status == nil {
		return nil
	}
	return r.writeIngress(ctx, svc, func(cur []corev1.LoadBalancerIngress) ([]corev1.LoadBalancerIngress, bool) {
		return status.Ingress, !slices.EqualFunc(cur, status.Ingress, func(a, b corev1.LoadBalancerIngress) bool {
			return a.IP == b.IP && a.Hostname == b.Hostname
		})
	})
}

// writeIngress sets the Service's status.loadBalancer.ingress to what
// change makes of the current one when change says to write, as
// patchIngress.
func (r *Balancer) writeIngress(ctx context.Context, svc *corev1.Service, change func([]corev1.LoadBalancerIngress) ([]corev1.LoadBalancerIngress, bool)) error {
	services := r.Client.CoreV1().Services(svc.Namespace)
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := services.Get(ctx, svc.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) || (err == nil && cur.UID != svc.UID) {
			return nil
		}
		if err != nil {
			return err
		}
		next, write := change(cur.Status.LoadBalancer.Ingress)
		if !write {
			return nil
		}
		patch, err := json.Marshal(map[string]any{
			"metadata": map[string]any{"resourceVersion": cur.ResourceVersion},
			"status":   map[string]any{"loadBalancer": map[string]any{"ingress": next}},
		})
		if err != nil {
			return err
		}
		_, err = services.Patch(ctx, svc.Name, types.MergePatchType, patch, metav1.PatchOptions{}, "status")
		return err
	})
}
