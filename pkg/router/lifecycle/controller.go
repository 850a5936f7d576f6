package lifecycle

import (
	"context"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/router/backend"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/router/svcstate"
)

// What a load-balancer controller that writes its own Service patches (see
// pkg/lbcontroller) needs from the router, so that a new Service costs it
// two writes: its finalizer together with the record (PrepareLoadBalancer),
// and its status together with the served annotations
// (DeferServedAnnotations).

// PrepareLoadBalancer returns the annotation changes the router would write
// on service before ensuring its load balancer: the record naming the
// target backend (see record.go). nil when there are none, or when the
// Service has no target (EnsureLoadBalancer then reports why). A controller
// that writes them in the same request as its finalizer, guarded by the
// resourceVersion, and hands the patched Service to EnsureLoadBalancer
// makes the router write nothing before the backend's calls.
func (r *Balancer) PrepareLoadBalancer(service *corev1.Service) map[string]*string {
	targets, err := r.lbTargets(service)
	add := r.unrecorded(service, targets)
	if err != nil || len(add) == 0 {
		return nil
	}
	changes := map[annotation.Name]*string{
		annotation.LoadBalancerBackends: ptr.To(r.baseline(service).With(backend.Names(add)...).Value()),
	}
	recordClass(changes, service)
	out := make(map[string]*string, len(changes))
	for k, v := range changes {
		out[string(k)] = v
	}
	return out
}

type preparedFromKey struct{}

// PreparedFrom returns a context telling EnsureLoadBalancer that the
// Service it is handed is before with PrepareLoadBalancer's annotations
// written by the caller: what the sync adds (the LoadBalancerAdded events)
// is decided from before, the Service as it was before this sync.
func PreparedFrom(ctx context.Context, before *corev1.Service) context.Context {
	return context.WithValue(ctx, preparedFromKey{}, before)
}

type requeuesOnNodeChangeKey struct{}

// RequeuesOnNodeChange returns a context telling EnsureLoadBalancer and
// UpdateLoadBalancer that their caller queues the Service again itself
// when a node changed while the call was in flight (pkg/lbcontroller:
// requeueIfNodesChanged, with its count of the node changes that move
// targets; a node's address change is the router's address re-sync's,
// which waits for the Service's lock): the router's own check of the
// node list handed (requeueIfStale) is then skipped. That check compares
// the list handed with the current one for each target, two passes over
// every node asking the backend of each, and found nothing the caller
// would not: at 5,000 nodes it was a quarter of the CCM's CPU per
// Service created (docs/scale.md). Upstream's service controller, which
// cannot queue a Service on a node change, keeps the check.
func RequeuesOnNodeChange(ctx context.Context) context.Context {
	return context.WithValue(ctx, requeuesOnNodeChangeKey{}, true)
}

func requeuesOnNodeChange(ctx context.Context) bool {
	self, _ := ctx.Value(requeuesOnNodeChangeKey{}).(bool)
	return self
}

type serviceGoneKey struct{}

// ServiceGone returns a context telling EnsureLoadBalancerDeleted that the
// Service it is handed is gone (deleted without the cleanup finalizer, or
// re-created under its name): nobody can edit its record any more, so a
// recorded backend that is no longer configured cannot block the cleanup.
// The load balancers in the configured backends are deleted, and the
// unconfigured ones get a Warning UnknownLoadBalancerBackend naming them.
func ServiceGone(ctx context.Context) context.Context {
	return context.WithValue(ctx, serviceGoneKey{}, true)
}

func serviceGone(ctx context.Context) bool {
	gone, _ := ctx.Value(serviceGoneKey{}).(bool)
	return gone
}

// goneFromAPI reports whether the API server no longer has the Service
// (not found, or another Service under its name): what ServiceGone tells,
// for a caller that cannot. Upstream's service controller deletes the
// load balancer of the copy it cached when the Service was deleted
// without its finalizer (processServiceDeletion) or re-created under its
// name (a new UID): that copy carries no mark of it (it may never have
// been seen with a deletionTimestamp). A live read, not the informer, as
// the answer must be certain: "gone" lets a recorded load balancer go
// unreached, and a cache not yet synced, or a lookup too early, would say
// "not found" of a Service that exists. It costs one read, only when the
// record names a backend that is not configured. A Service being deleted
// with its finalizer is not gone: its record can still be edited (the
// Warning's fix), as under pkg/lbcontroller. A failed read is not gone:
// the delete fails and is retried.
func (r *Balancer) goneFromAPI(ctx context.Context, svc *corev1.Service) bool {
	if r.Client == nil {
		return false
	}
	cur, err := r.Client.CoreV1().Services(svc.Namespace).Get(ctx, svc.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return true
	}
	return err == nil && cur.UID != svc.UID
}

// preparedFrom is the Service as it was before the caller wrote
// PrepareLoadBalancer's annotations (see PreparedFrom), else service.
func (r *Balancer) preparedFrom(ctx context.Context, service *corev1.Service) *corev1.Service {
	if before, ok := ctx.Value(preparedFromKey{}).(*corev1.Service); ok && before != nil && before.UID == service.UID {
		return r.withClassDefaults(before)
	}
	return service
}

type servedDeferralKey struct{}

// servedDeferral holds the write markServed left to the caller.
type servedDeferral struct {
	mu    sync.Mutex
	write *ServedWrite
}

// ServedWrite is the router's share of the write a controller makes after
// EnsureLoadBalancer succeeded: the annotations naming the backends
// serving the Service and their load balancers' IDs, the annotations the
// backends write back, the draining record and external-dns's target as
// the sync leaves them. It is a decision, not a copy: Changes computes it
// from the Service as the controller is about to write it, so a write the
// router made during the call (a drain started, a record changed) is
// never undone by a copy older than it; after a conflict the controller
// re-reads and asks again.
type ServedWrite struct {
	r       *Balancer
	seen    *corev1.Service
	targets []*backend.Member
	answers []ensured
}

// Changes returns the annotation changes (nil values remove one) that make
// cur, the Service as the write will find it (its resourceVersion guards
// the write), say what the sync decided.
func (w *ServedWrite) Changes(cur *corev1.Service) map[string]*string {
	if w == nil {
		return nil
	}
	changes := w.r.servedChanges(w.seen, cur, w.targets, w.answers)
	out := make(map[string]*string, len(changes))
	for k, v := range changes {
		out[string(k)] = v
	}
	return out
}

// Written tells the router that changes (from Changes) were written, so
// that what it remembers of the Service (its draining record) follows
// them.
func (w *ServedWrite) Written(changes map[string]*string) {
	if w == nil {
		return
	}
	if v, ok := changes[string(annotation.LoadBalancerDraining)]; ok {
		w.r.st.SetDrains(w.seen.UID, svcstate.ParseDrainingValue(ptr.Deref(v, "")))
	}
}

// DeferServedAnnotations returns a context under which EnsureLoadBalancer
// does not write the annotations naming the serving backend and its load
// balancer's ID itself, and a function returning the write it left to the
// caller (nil when none). A controller that patches the Service's status
// afterwards sends ServedWrite.Changes of the Service it patches in that
// same request, guarded by its resourceVersion, and calls Written once it
// succeeded.
func DeferServedAnnotations(ctx context.Context) (context.Context, func() *ServedWrite) {
	d := &servedDeferral{}
	return context.WithValue(ctx, servedDeferralKey{}, d), func() *ServedWrite {
		d.mu.Lock()
		defer d.mu.Unlock()
		return d.write
	}
}

// deferServed leaves w to DeferServedAnnotations' caller, if ctx comes
// from it.
func deferServed(ctx context.Context, w *ServedWrite) bool {
	d, ok := ctx.Value(servedDeferralKey{}).(*servedDeferral)
	if !ok {
		return false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.write = w
	return true
}

// markDeleted remembers that the load balancer of a Service being deleted
// is gone, so a call queued behind the delete with an older copy of the
// Service (a node sync, a drift repair), on this configuration or a later
// one, cannot create it again.
func (r *Balancer) markDeleted(service *corev1.Service) {
	if service.DeletionTimestamp != nil {
		r.st.MarkDeleted(service.UID)
	}
}

// wasDeleted reports whether markDeleted saw the Service's UID recently,
// or the Service is gone (svcstate.States.IsGone: deleted without the
// router's delete, its finalizer removed by hand, or a delete with its
// last copy already made): a call with an older copy must not create its
// load balancer again, where nothing would ever delete it.
func (r *Balancer) wasDeleted(uid types.UID) bool {
	return r.st.WasDeleted(uid) || r.st.IsGone(uid)
}
