package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/router/backend"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/router/svcstate"
)

// Event reasons for Service problems. They are stable.
const (
	ReasonUnknownLBBackend = "UnknownLoadBalancerBackend"
	ReasonCleanupPending   = "LoadBalancerCleanupPending"
)

// GetLoadBalancer asks the backends that may hold the Service's load
// balancer (see reachable): it exists if any of them holds any part of it, so
// a delete is never skipped while something is left (one backend that
// cannot answer, or a recorded one that is not configured, makes it an
// error only when no other holds anything: then
// the delete proceeds in those that answered, and waits for it), and a
// backend that never held it is not asked, so its outage blocks nothing. The status is
// the target backends' (in their order) if they have one.
func (r *Balancer) GetLoadBalancer(ctx context.Context, clusterName string, service *corev1.Service) (*corev1.LoadBalancerStatus, bool, error) {
	service = r.withClassDefaults(service)
	targets, _ := r.lbTargets(service)
	asked, gone := r.reachable(service, targets...)
	found, err := r.holders(ctx, clusterName, service, asked)
	if len(gone) > 0 {
		// A recorded backend a reload removed cannot answer either: the
		// load balancer exists while a configured one holds part of it
		// (so the delete runs there), and is unknown once none does.
		err = errors.Join(err, r.unreachableErr(service, gone[0]))
	}
	if err != nil && len(found) == 0 {
		r.recordServiceError(ctx, service, err)
		return nil, false, err
	}
	if len(found) == 0 {
		return nil, false, nil
	}
	var answers []ensured
	for _, b := range targets {
		for _, h := range found {
			if h.b == b {
				answers = append(answers, ensured{status: h.status})
			}
		}
	}
	if len(answers) > 0 {
		return mergeStatus(answers), true, nil
	}
	return found[0].status, true, nil
}

// GetLoadBalancerName returns the target backend's name for the load
// balancer, or the upstream default name.
func (r *Balancer) GetLoadBalancerName(ctx context.Context, clusterName string, service *corev1.Service) string {
	service = r.withClassDefaults(service)
	if b, err := r.lbTarget(service); err == nil && b != nil {
		return b.LB.GetLoadBalancerName(ctx, clusterName, service)
	}
	return cloudprovider.DefaultLoadBalancerName(service)
}

// EnsureLoadBalancer records the target backends on the Service, creates
// or updates the load balancer in each (concurrently), handing each only the
// nodes it can target, then retires every other backend that may still
// hold one (the annotation may have moved it): deleted at once, or drained
// first (drain.go), and writes on the Service the backends serving it and
// the load-balancer IDs they reported (markServed). The status is every
// target's addresses, in their order, then those of the draining load
// balancers announced from the status (drain.go). A target failing keeps the others'
// addresses in the status and retires nothing (make before break). A
// Service no backend serves gets ImplementedElsewhere, after any load
// balancer we made for it earlier is removed and its address cleared from
// the Service's status.
func (r *Balancer) EnsureLoadBalancer(ctx context.Context, clusterName string, service *corev1.Service, nodes []*corev1.Node) (*corev1.LoadBalancerStatus, error) {
	service = r.withClassDefaults(service)
	defer r.lockService(service)()
	r.st.ClusterName.Store(clusterName)
	targets, err := r.lbTargets(service)
	if err != nil {
		r.warnUser(ctx, service, ReasonUnknownLBBackend, err)
		return nil, err
	}
	dec := decisionOf(ctx)
	if len(targets) == 0 {
		if err := r.evict(ctx, clusterName, service, nil); err != nil {
			return nil, err
		}
		dec.elsewhere()
		return nil, cloudprovider.ImplementedElsewhere
	}
	drain, err := r.drainPeriod(service)
	if err != nil {
		r.warnUser(ctx, service, ReasonInvalidDrain, err)
		return nil, err
	}
	if r.wasDeleted(service.UID) {
		return nil, fmt.Errorf("service %s/%s: its load balancer was deleted with the Service, or the Service (uid %s) is gone; not creating it again", service.Namespace, service.Name, service.UID)
	}
	before := r.preparedFrom(ctx, service)
	added, had := r.unrecorded(before, targets), len(r.current(before).Names) > 0
	if err := r.addToRecord(ctx, service, targets...); err != nil {
		return nil, err
	}
	dec.setTargets(svcstate.NamesInOrder(targets))
	answers := r.ensureAll(ctx, clusterName, service, targets, nodes, drain)
	named := targets
	if targets, answers = withoutHandedOver(targets, answers); len(targets) < len(named) {
		dec.handOver(slices.DeleteFunc(svcstate.NamesInOrder(named), func(n string) bool { return slices.Contains(svcstate.NamesInOrder(targets), n) }))
	}
	if len(targets) == 0 {
		// Every backend named leaves the Service to another controller
		// (the aws backend for aws-load-balancer-type: external): not a
		// failure, no event, and nothing of theirs retired.
		dec.elsewhere()
		return nil, cloudprovider.ImplementedElsewhere
	}
	if failed := slices.ContainsFunc(answers, func(a ensured) bool { return a.err != nil }); failed {
		return nil, r.partialFailure(ctx, service, targets, answers)
	}
	status := mergeStatus(answers)
	kept, err := r.retire(ctx, clusterName, service, named, drain, status.Ingress)
	if err != nil {
		return nil, err
	}
	if err := r.retargetDraining(ctx, clusterName, service, named, nodes); err != nil {
		return nil, err
	}
	if err := r.markServed(ctx, service, targets, answers); err != nil {
		return nil, err
	}
	if len(targets) > 1 || had {
		for _, b := range added {
			r.normal(ctx, service, ReasonAdded, fmt.Sprintf("Load balancer added in backend %s", b.Name))
		}
	}
	for _, b := range targets {
		r.requeueIfStale(ctx, service, b, nodes)
	}
	return mergeStatus([]ensured{{status: status}, {status: &corev1.LoadBalancerStatus{Ingress: kept}}}), nil
}

// warnUser records err as a Warning event with the backend's reason if it
// is a user error, else with reason.
func (r *Balancer) warnUser(ctx context.Context, service *corev1.Service, reason string, err error) {
	if ue, ok := backends.AsUserError(err); ok {
		reason = ue.Reason
	}
	r.Warn(ctx, svcstate.ServiceRef(service), reason, err.Error())
}

// unrecorded returns the targets the Service's record does not name yet.
func (r *Balancer) unrecorded(service *corev1.Service, targets []*backend.Member) []*backend.Member {
	rec := r.written(service)
	var out []*backend.Member
	for _, b := range targets {
		if !rec.Has(b.Name) {
			out = append(out, b)
		}
	}
	return out
}

// notRecorded returns the targets the Service's record does not name as
// serving: not named yet, or named while their load balancer drains (a
// target again, after a reload moved the default back to it). A Service
// with such targets gets its full sync (rerouting), whose
// EnsureLoadBalancer records them (addToRecord), which also ends such a
// drain, and moves it back; without it the Service stayed where it was,
// and the drain entry of its target was skipped for ever.
func (r *Balancer) notRecorded(service *corev1.Service, targets []*backend.Member) []*backend.Member {
	draining := r.drainingOf(service)
	out := r.unrecorded(service, targets)
	for _, b := range targets {
		if _, ok := draining[b.Name]; ok && !slices.Contains(out, b) {
			out = append(out, b)
		}
	}
	return out
}

// UpdateLoadBalancer hands the backends holding the Service's load balancer
// their targetable nodes: its targets, or, while a reload or an annotation
// change has moved the Service's targets but no EnsureLoadBalancer has
// moved the load balancer yet, the backends still serving it (see
// updateTargets), so node changes reach the load balancers that exist;
// draining ones too, as they still serve. One backend failing does not
// keep the others from being updated. A Service that is deleted (see
// wasDeleted) has nothing to update.
func (r *Balancer) UpdateLoadBalancer(ctx context.Context, clusterName string, service *corev1.Service, nodes []*corev1.Node) error {
	service = r.withClassDefaults(service)
	defer r.lockService(service)()
	r.st.ClusterName.Store(clusterName)
	if r.wasDeleted(service.UID) {
		return nil // nothing left to update, and nothing to create (wasDeleted)
	}
	bs, moving, err := r.updateTargets(service)
	if err != nil {
		return err
	}
	if len(bs) == 0 {
		return cloudprovider.ImplementedElsewhere
	}
	if moving {
		r.st.QueueReroute(service)
	} else if err := r.addToRecord(ctx, service, bs...); err != nil {
		return err
	}
	bs = append(bs, r.drainingBackends(service, bs)...)
	var errs []error
	handedOver := 0
	for _, b := range bs {
		if err := b.UpdateLoadBalancer(ctx, clusterName, service, r.Targetable(b, service, nodes)); err != nil {
			if err == cloudprovider.ImplementedElsewhere { //nolint:errorlint // backends return the sentinel unwrapped, as upstream compares it.
				handedOver++ // another controller serves it there (withoutHandedOver)
				continue
			}
			r.recordServiceError(ctx, service, err)
			errs = append(errs, err) // the member named its backend and call (backend.Member.wrap)
			continue
		}
		r.requeueIfStale(ctx, service, b, nodes)
	}
	if handedOver == len(bs) {
		return cloudprovider.ImplementedElsewhere
	}
	return errors.Join(errs...)
}

// LoadBalancerTargets returns, among nodes, those the Service's load
// balancers target: for each backend an update would go to (draining ones
// included), the nodes it can target; none for a backend whose load
// balancers ignore their nodes (bare metal). pkg/lbcontroller re-syncs a
// Service after node changes only when these change (its Targeter).
func (r *Balancer) LoadBalancerTargets(service *corev1.Service, nodes []*corev1.Node) []*corev1.Node {
	by := r.LoadBalancerTargetsByBackend(service, nodes)
	if by == nil {
		return nodes
	}
	seen := map[string]bool{}
	var out []*corev1.Node
	for _, ns := range by {
		for _, n := range ns {
			if !seen[n.Name] {
				seen[n.Name] = true
				out = append(out, n)
			}
		}
	}
	return out
}

// LoadBalancerTargetsByBackend returns, by backend name, the nodes among
// nodes each backend an update of the Service's load balancer would go to
// (draining ones included) can target, leaving out backends whose load
// balancers ignore their nodes; nil when the router holds no load
// balancer for the Service (every node handed is then its target). A node
// can move into one backend's targets while another already targets it
// (a label that aws-load-balancer-target-node-labels names, on a Service
// also served by Octavia, which takes every node): the union
// (LoadBalancerTargets) does not change, the targets do, and
// pkg/lbcontroller compares these (its BackendTargeter).
func (r *Balancer) LoadBalancerTargetsByBackend(service *corev1.Service, nodes []*corev1.Node) map[string][]*corev1.Node {
	return r.LoadBalancerTargetsEnsured(nil, service, nodes)
}

// RetargetsOnAddressChange reports whether a node's address change, from
// old to node, changes the Service's load balancer in the backend named
// backendName: the backend can target the node, before or after, and
// reaches it by address (backend.Member.RetargetsOn, as the router's own
// address re-sync asks). True for a backend this configuration does not
// have: it cannot say no.
func (r *Balancer) RetargetsOnAddressChange(service *corev1.Service, backendName string, old, node *corev1.Node) bool {
	b, ok := r.ByName[backendName]
	if !ok {
		return true
	}
	return b.RetargetsOn(r.withClassDefaults(service), old, node)
}

// LoadBalancerTargetsEnsured is LoadBalancerTargetsByBackend(service,
// nodes) for the Service as the successful EnsureLoadBalancer whose
// decision is d (ForWrite, WithDecision) left it, with the same nodes:
// for each backend the call handed nodes to (its targets, the load
// balancers still draining), the nodes it handed, without asking the
// backend again; the others' (none after a success, but the call may have
// run on a configuration a reload replaced since, or for a Service that
// changed since in what a backend targets by) are asked. The same answer,
// with one CanTarget per node and backend fewer. A nil d asks every
// backend.
//
// A call that ran on another configuration (a reload replaced it while
// the call was in flight, before its caller asked this) is answered by
// that configuration, from what the call handed: the load balancers
// hold what it chose, not what this one would. Before, the answer was
// this configuration's, the caller recorded targets no load balancer was
// handed, and its comparison with the targets now (a node sync after the
// reload) found nothing to update (TestReloadBetweenEnsureAndRemember).
// Now that comparison finds the difference and updates them.
func (r *Balancer) LoadBalancerTargetsEnsured(d *Decision, service *corev1.Service, nodes []*corev1.Node) map[string][]*corev1.Node {
	if ran := d.handedBy(); ran != nil && ran != r {
		return ran.LoadBalancerTargetsEnsured(d, service, nodes)
	}
	service = r.withClassDefaults(service)
	bs, _, err := r.updateTargets(service)
	if err != nil || len(bs) == 0 {
		return nil
	}
	bs = append(bs, r.drainingBackends(service, bs)...)
	out := make(map[string][]*corev1.Node, len(bs))
	for _, b := range bs {
		if b.IgnoresNodes() {
			continue
		}
		if ts, ok := d.handedTo(r, b.Name, service, nodes); ok {
			out[b.Name] = ts
			continue
		}
		out[b.Name] = r.Targetable(b, service, nodes)
	}
	return out
}

// updateTargets returns the backends an update of the Service's load
// balancer goes to: those serving it (multicloud-ccm.io/load-balancer-served-by,
// recorded) when they are not its targets (moving), else its targets.
func (r *Balancer) updateTargets(service *corev1.Service) (bs []*backend.Member, moving bool, err error) {
	targets, err := r.lbTargets(service)
	if err != nil || len(targets) == 0 {
		return targets, false, err
	}
	rec := r.recordOf(service)
	var served []*backend.Member
	for _, b := range r.servingOf(service) {
		if rec.Has(b.Name) {
			served = append(served, b)
		}
	}
	if len(served) > 0 && !sameBackends(served, targets) {
		return served, true, nil
	}
	return targets, false, nil
}

// drainingBackends returns the recorded backends whose load balancer is
// draining, other than those in bs.
func (r *Balancer) drainingBackends(service *corev1.Service, bs []*backend.Member) []*backend.Member {
	rec := r.recordOf(service)
	var out []*backend.Member
	for n := range r.drainingOf(service) {
		if b, ok := r.ByName[n]; ok && b.LB != nil && rec.Has(n) && !slices.Contains(bs, b) {
			out = append(out, b)
		}
	}
	return out
}

// sameBackends reports whether a and b hold the same backends, in any
// order.
func sameBackends(a, b []*backend.Member) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}

// EnsureLoadBalancerDeleted deletes the Service's load balancer from every
// backend that may hold one; each backend's delete is idempotent, and each
// that succeeded leaves the record. It fails, keeping the Service's
// finalizer, until every one of them succeeded. A record naming a backend
// that is not configured fails it too, after the configured ones deleted
// theirs (their load balancers are reachable, and would otherwise stay for
// as long as the Service is Terminating), unless the Service is gone
// (ServiceGone, or goneFromAPI: upstream's controller cleaning up after a
// Service deleted without its finalizer, or re-created under its name):
// then the others are deleted, and the unconfigured one is warned about.
func (r *Balancer) EnsureLoadBalancerDeleted(ctx context.Context, clusterName string, service *corev1.Service) error {
	service = r.withClassDefaults(service)
	defer r.lockService(service)()
	targets, _ := r.lbTargets(service)
	asked, gone := r.reachable(service, targets...)
	var unreachable error
	if len(gone) > 0 {
		if serviceGone(ctx) || r.goneFromAPI(ctx, service) {
			// No record left to edit: what can be deleted is.
			asked = r.mayHoldGone(ctx, service)
		} else {
			unreachable = r.unreachableErr(service, gone[0])
		}
	}
	var (
		mu   sync.Mutex
		done []string
	)
	err := backend.Ask(ctx, asked, func(ctx context.Context, b *backend.Member) (struct{}, error) {
		return struct{}{}, b.EnsureLoadBalancerDeleted(ctx, clusterName, service)
	}, func(b *backend.Member, _ struct{}) {
		mu.Lock()
		defer mu.Unlock()
		done = append(done, b.Name)
	})
	// A Service being deleted whose load balancers are all gone keeps its
	// record: it is going, and writing it would re-queue the service
	// controller's sync, which, from a cache that has not yet seen the
	// deletion its own finalizer removal caused, fails with NotFound and a
	// Warning SyncLoadBalancerFailed. Its next sync, if any, finds no load
	// balancer in the recorded backends.
	err = errors.Join(err, unreachable)
	if service.DeletionTimestamp == nil || err != nil || len(done) < len(asked) {
		err = errors.Join(err, r.dropFromRecord(ctx, service, done))
	}
	if err == nil {
		r.markDeleted(service)
	}
	r.recordServiceError(ctx, service, err)
	return err
}

// evict removes the Service's load balancer from every backend that may
// hold one except keep (nil: from all of them), and drops them from the
// record. When no backend is kept, the Service's status is cleared of the
// released addresses first. A Service that no backend is recorded or
// written as serving (no record, no load-balancer-served-by) was never
// given a load balancer by the router: its address is someone else's (a
// controller serving classless Services, such as MetalLB, whose address
// may well lie in one of our pools), and nothing is asked or released. A
// recorded backend that is not configured is left in the record, with a
// Warning once per episode (see retire): it blocks nothing.
func (r *Balancer) evict(ctx context.Context, clusterName string, service *corev1.Service, keep *backend.Member) error {
	if !r.recordOf(service).Known && len(r.servingOf(service)) == 0 {
		return nil
	}
	asked, gone := r.reachable(service, keep)
	r.warnUnreachableOnce(ctx, service, gone)
	decideUnreachable(ctx, gone)
	asked = slices.DeleteFunc(slices.Clone(asked), func(b *backend.Member) bool { return b == keep })
	if err := r.release(ctx, clusterName, service, asked, keep == nil); err != nil {
		r.recordServiceError(ctx, service, err)
		msg := fmt.Sprintf("Cannot yet remove the load balancer from the backends the Service no longer uses: %v", err)
		r.Warn(ctx, svcstate.ServiceRef(service), ReasonCleanupPending, msg)
		return fmt.Errorf("service %s/%s: %w", service.Namespace, service.Name, err)
	}
	return nil
}

// release deletes the Service's load balancer from the holders among asked
// (clearing their addresses from its status first when clear is set), then
// drops every asked backend from the record.
func (r *Balancer) release(ctx context.Context, clusterName string, service *corev1.Service, asked []*backend.Member, clear bool) error {
	if len(asked) == 0 {
		return nil
	}
	found, err := r.holders(ctx, clusterName, service, asked)
	if err != nil {
		return err
	}
	if clear && len(found) > 0 {
		if err := r.clearStatus(ctx, service, found); err != nil {
			return fmt.Errorf("clearing the released address from the Service's status: %w", err)
		}
	}
	if err := r.deleteFrom(ctx, clusterName, service, found); err != nil {
		return err
	}
	decideRemoval(ctx, asked, found, nil)
	return r.dropFromRecord(ctx, service, backend.Names(asked))
}

// decideRemoval records in ctx's decision the removal of the Service's
// load balancer from asked: deleted where found holds one (at the end of
// its drain for those draining names), else forgotten.
func decideRemoval(ctx context.Context, asked []*backend.Member, found []holder, draining svcstate.Draining) {
	dec := decisionOf(ctx)
	for _, b := range asked {
		_, drained := draining[b.Name]
		if slices.ContainsFunc(found, func(h holder) bool { return h.b == b }) {
			dec.step(Step{Backend: b.Name, Kind: StepDelete, Drained: drained})
		} else {
			dec.step(Step{Backend: b.Name, Kind: StepForget})
		}
	}
}

func (r *Balancer) deleteFrom(ctx context.Context, clusterName string, service *corev1.Service, found []holder) error {
	var errs []error
	for _, h := range found {
		errs = append(errs, h.b.EnsureLoadBalancerDeleted(ctx, clusterName, service))
	}
	return errors.Join(errs...)
}

// holder is a backend that reported a load balancer for a Service.
type holder struct {
	b      *backend.Member
	status *corev1.LoadBalancerStatus
}

// holders asks the backends in asked, concurrently, whether they hold a
// load balancer for service. Any of them failing to answer is an error,
// returned with the holders among those that answered.
func (r *Balancer) holders(ctx context.Context, clusterName string, service *corev1.Service, asked []*backend.Member) ([]holder, error) {
	var found []holder
	err := backend.Ask(ctx, asked, func(ctx context.Context, b *backend.Member) (holder, error) {
		status, exists, err := b.GetLoadBalancer(ctx, clusterName, service)
		if !exists {
			return holder{}, err
		}
		return holder{b: b, status: status}, err
	}, func(_ *backend.Member, h holder) {
		if h.b != nil {
			found = append(found, h)
		}
	})
	return orderHolders(r.lbs, found), err
}

// orderHolders sorts found into config order, so answers are stable.
func orderHolders(order []*backend.Member, found []holder) []holder {
	out := make([]holder, 0, len(found))
	for _, b := range order {
		for _, h := range found {
			if h.b == b {
				out = append(out, h)
			}
		}
	}
	return out
}

// recordServiceError puts a Warning event with the backend's reason on the
// Service for every error a user can fix.
func (r *Balancer) recordServiceError(ctx context.Context, service *corev1.Service, err error) {
	if ue, ok := backends.AsUserError(err); ok {
		r.Warn(ctx, svcstate.ServiceRef(service), ue.Reason, err.Error())
	}
}
