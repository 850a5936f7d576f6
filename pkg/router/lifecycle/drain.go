package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/klog/v2"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/router/backend"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/router/svcstate"
)

// Make-before-break: a backend leaving a Service's list (or the single
// backend changed) is retired only once every target answered, so the new
// load balancer is in the status the same sync takes the old one out.
// With a drain period (multicloud-ccm.io/load-balancer-drain, else
// loadBalancer.drainPeriod), the old load balancer is not deleted at once:
// its addresses leave the status (external-dns withdraws them), the drain's
// end is written on the Service (multicloud-ccm.io/load-balancer-draining,
// before the status changes), and it keeps serving until then. A load
// balancer announced from the status (backends.StatusAnnounced: bare metal,
// whose speaker announces what the status shows) keeps its addresses in
// the status until the drain ends instead, listed after the serving ones,
// and leaves DNS through external-dns's target annotation (see dns.go).
// Then it is deleted by the Service's next sync: one an edit causes, or
// the one the process's drain timer queues at the drain's end
// (process.drainTimer: with the controller serving the Service when that
// controller syncs Services itself, else with the router's re-sync, see
// sync in resync.go; the timer writes nothing itself), which every process
// leading the controllers arms from the annotation as its informer lists
// the Services, so a restart or a new leader neither cuts a drain short nor
// forgets it. The draining backend stays in the write-ahead record until
// its delete succeeded, so deleting the Service still reaches it.

// Event reasons of drains. They are stable.
const (
	ReasonInvalidDrain = "InvalidLoadBalancerDrain"
	ReasonDraining     = "LoadBalancerDraining"
	ReasonDrained      = "LoadBalancerDrained"
)

// drainPeriod is the Service's drain period: its annotation (a class
// default counts), else loadBalancer.drainPeriod.
func (r *Balancer) drainPeriod(svc *corev1.Service) (time.Duration, error) {
	v, ok := svc.Annotations[string(annotation.LoadBalancerDrain)]
	if !ok {
		return r.Cfg.LoadBalancer.Drain(), nil
	}
	d, err := time.ParseDuration(strings.TrimSpace(v))
	if v == "0" {
		d, err = 0, nil
	}
	if err != nil || d < 0 {
		return 0, backend.UserErr(ReasonInvalidDrain, "service %s/%s: annotation %s=%q is not a drain period: write a duration such as 5m or 90s, or 0 to delete a load balancer the Service stops using at once",
			svc.Namespace, svc.Name, annotation.LoadBalancerDrain, v)
	}
	return d, nil
}

// retire ends the use of every recorded backend that is not a target
// (keep), serving being the targets' addresses: without a drain, as
// before, its load balancer is deleted now; with one, it is marked
// draining and deleted once the drain ended. A backend holding nothing
// just leaves the record. A recorded backend that is not configured (a
// reload removed it) cannot be reached: it stays in the record (and its
// drain entry, if any, pending), with a Warning UnknownLoadBalancerBackend
// once per episode, and blocks nothing: the targets' addresses are
// published (chaos seed 529377690: every sync failed on it, and the new
// address was never shown). It returns the addresses of the draining load
// balancers announced from the status, which stay in the status the
// caller returns (after the serving ones); the others' are already out of
// it.
func (r *Balancer) retire(ctx context.Context, clusterName string, svc *corev1.Service, keep []*backend.Member, drain time.Duration, serving []corev1.LoadBalancerIngress) ([]corev1.LoadBalancerIngress, error) {
	asked, gone := r.reachable(svc)
	r.warnUnreachableOnce(ctx, svc, gone)
	decideUnreachable(ctx, gone)
	asked = slices.DeleteFunc(slices.Clone(asked), func(b *backend.Member) bool { return slices.Contains(keep, b) })
	kept, err := r.retireFrom(ctx, clusterName, svc, asked, drain, serving)
	if err != nil {
		r.recordServiceError(ctx, svc, err)
		msg := fmt.Sprintf("Cannot yet remove the load balancer from the backends the Service no longer uses: %v", err)
		r.Warn(ctx, svcstate.ServiceRef(svc), ReasonCleanupPending, msg)
		return nil, fmt.Errorf("service %s/%s: %w", svc.Namespace, svc.Name, err)
	}
	return ingressOf(orderHolders(r.lbs, kept)), nil
}

func (r *Balancer) retireFrom(ctx context.Context, clusterName string, svc *corev1.Service, asked []*backend.Member, drain time.Duration, serving []corev1.LoadBalancerIngress) ([]holder, error) {
	if len(asked) == 0 {
		return nil, nil
	}
	draining := r.drainingOf(svc)
	now := time.Now()
	var due, fresh, still []*backend.Member
	for _, b := range asked {
		end, ok := draining[b.Name]
		switch {
		case ok && !now.Before(end):
			due = append(due, b)
		case ok:
			decisionOf(ctx).step(Step{Backend: b.Name, Kind: StepDrain, Until: end})
			r.st.QueueDrain(svc, end)
			if b.AnnouncedFromStatus() {
				still = append(still, b)
			}
		case drain <= 0:
			due = append(due, b)
		default:
			fresh = append(fresh, b)
		}
	}
	kept, err := r.holders(ctx, clusterName, svc, still)
	if err != nil {
		return nil, err
	}
	if len(fresh) > 0 {
		started, err := r.startDrain(ctx, clusterName, svc, fresh, now.Add(drain), serving)
		if err != nil {
			return nil, err
		}
		kept = append(kept, started...)
	}
	return kept, r.finishDrain(ctx, clusterName, svc, due, draining, serving)
}

// retargetDraining hands every load balancer still draining after the
// sync's retire (a drain under way, or one the sync started) the nodes
// its backend can target among the sync's nodes, as the sync hands its
// targets theirs: a draining load balancer still serves, and
// pkg/lbcontroller records, once the sync succeeded, that every backend an
// update goes to (draining ones included: LoadBalancerTargetsByBackend)
// targets those nodes. Before, the sync that started a drain (a Service
// moved, or the first sync after a restart) handed the draining load
// balancer nothing: it kept the targets of before (a deleted node, none
// that joined), and the node syncs, comparing the nodes with those
// recorded, never updated it (the OpenStack planswitch worlds, seeds
// 1796239464041781550, 1796240106670247103, 1796240686284718747). A
// backend whose load balancers ignore their nodes (bare metal) is not
// asked. One failing fails the sync, which is retried, as a draining
// backend that cannot be asked whether it holds its load balancer does
// (retire); but a user error (a bad annotation the backend reads) is only
// a Warning: retrying cannot fix it, the user's fix syncs the Service
// again, and failing the sync would keep the new backend's address out of
// the status for the whole drain.
func (r *Balancer) retargetDraining(ctx context.Context, clusterName string, svc *corev1.Service, targets []*backend.Member, nodes []*corev1.Node) error {
	var errs []error
	for _, b := range r.drainingBackends(svc, targets) {
		if b.IgnoresNodes() {
			continue
		}
		targetable := r.Targetable(b, svc, nodes)
		decisionOf(ctx).hand(r, b.Name, svc, nodes, targetable)
		err := b.UpdateLoadBalancer(ctx, clusterName, svc, targetable)
		if err == nil || err == cloudprovider.ImplementedElsewhere { //nolint:errorlint // backends return the sentinel unwrapped, as upstream compares it.
			continue
		}
		if _, user := backends.AsUserError(err); user {
			// The user fixes it, and that change syncs the Service again;
			// a retry until then would hold back the move the drain is for
			// (review probe TestReview54DrainingUpdateFailureHoldsBackTheMove).
			r.Warn(ctx, svcstate.ServiceRef(svc), ReasonBackendFailed, fmt.Sprintf("Cannot update the nodes of the load balancer draining in backend %s: %s; it drains with the nodes it had", b.Name, b.Unnamed(err)))
			continue
		}
		r.Warn(ctx, svcstate.ServiceRef(svc), ReasonBackendFailed, fmt.Sprintf("Cannot yet update the nodes of the load balancer draining in backend %s: %s", b.Name, b.Unnamed(err)))
		errs = append(errs, fmt.Errorf("updating the nodes of the load balancer draining: %w", err)) // err names the backend (backend.Member.wrap)
	}
	if len(errs) > 0 {
		return fmt.Errorf("service %s/%s: %w", svc.Namespace, svc.Name, errors.Join(errs...))
	}
	return nil
}

// ingressOf lists the holders' addresses, in order, each once.
func ingressOf(hs []holder) []corev1.LoadBalancerIngress {
	answers := make([]ensured, 0, len(hs))
	for _, h := range hs {
		answers = append(answers, ensured{status: h.status})
	}
	return mergeStatus(answers).Ingress
}

// drainingOf is the Service's draining record: the one this process last
// wrote (the copy given may be older), else the copy's.
func (r *Balancer) drainingOf(svc *corev1.Service) svcstate.Draining {
	if d, ok := r.st.DrainsOf(svc.UID); ok {
		return d.Without()
	}
	return svcstate.ParseDraining(svc)
}

// startDrain marks the backends' load balancers draining until end, on the
// Service, before the status is written; those holding nothing just leave
// the record. Those announced from the status keep their addresses in it
// (it returns them): external-dns's target annotation is set to the
// serving addresses in the same write (see steerDNS).
func (r *Balancer) startDrain(ctx context.Context, clusterName string, svc *corev1.Service, bs []*backend.Member, end time.Time, serving []corev1.LoadBalancerIngress) ([]holder, error) {
	end = end.UTC().Truncate(time.Second).Add(time.Second) // as written: never before the period
	found, err := r.holders(ctx, clusterName, svc, bs)
	if err != nil {
		return nil, err
	}
	var holding, empty []string
	var announced []holder
	for _, b := range bs {
		i := slices.IndexFunc(found, func(h holder) bool { return h.b == b })
		switch {
		case i < 0:
			empty = append(empty, b.Name)
		case b.AnnouncedFromStatus():
			announced = append(announced, found[i])
			fallthrough
		default:
			holding = append(holding, b.Name)
		}
	}
	if err := r.dropFromRecord(ctx, svc, empty); err != nil {
		return nil, err
	}
	dec := decisionOf(ctx)
	for _, b := range bs {
		if slices.Contains(empty, b.Name) {
			dec.step(Step{Backend: b.Name, Kind: StepForget})
		} else {
			dec.step(Step{Backend: b.Name, Kind: StepDrain, Until: end})
		}
	}
	if len(holding) == 0 {
		return nil, nil
	}
	dns, err := r.writeDraining(ctx, svc, svcstate.DNSTarget(serving), func(d svcstate.Draining) svcstate.Draining {
		for _, n := range holding {
			d[n] = end
		}
		return d
	})
	if err != nil {
		return nil, fmt.Errorf("recording the drain in annotation %s: %w", annotation.LoadBalancerDraining, err)
	}
	left := time.Until(end).Round(time.Second)
	for _, n := range holding {
		how := "its addresses left the status"
		if slices.ContainsFunc(announced, func(h holder) bool { return h.b.Name == n }) {
			how = "its addresses stay in the status (announced from it) until the drain ends"
			if dns != "" {
				how += "; " + dns
			}
		}
		r.normal(ctx, svc, ReasonDraining, fmt.Sprintf("Load balancer in backend %s is draining: %s; it keeps serving for %s more and is deleted at %s",
			n, how, left, end.Format(time.RFC3339)))
	}
	r.st.QueueDrain(svc, end)
	return announced, nil
}

// finishDrain deletes the load balancers of bs (their drain ended, or
// there is none) and drops them from the record, which also ends their
// draining entry (and, with the last drain announced from the status, the
// router's external-dns target annotation); a LoadBalancerDrained event
// for each that was draining (whether it still held something or not).
// The addresses of the load balancers it deletes leave the status first,
// the serving ones (the targets') put in, in the same write (make before
// break; see showInstead): none is released while shown. Not only those
// announced from the status: a cloud's delete may take a while, and a
// backend answers "being deleted, retry" meanwhile (Octavia's
// PENDING_DELETE), which fails the sync before the controller writes the
// status; the Service showed, for as long as the delete took, the address
// of a load balancer that was going, and not the new backend's (chaos
// seed 657511868: Octavia's noop VIP, which another Service showed too).
func (r *Balancer) finishDrain(ctx context.Context, clusterName string, svc *corev1.Service, bs []*backend.Member, draining svcstate.Draining, serving []corev1.LoadBalancerIngress) error {
	if len(bs) == 0 {
		return nil
	}
	found, err := r.holders(ctx, clusterName, svc, bs)
	if err != nil {
		return err
	}
	if err := r.showInstead(ctx, svc, ingressOf(found), serving); err != nil {
		return fmt.Errorf("taking the addresses of the load balancers to delete out of the Service's status: %w", err)
	}
	if err := r.deleteFrom(ctx, clusterName, svc, found); err != nil {
		return err
	}
	decideRemoval(ctx, bs, found, draining)
	if err := r.dropFromRecord(ctx, svc, backend.Names(bs)); err != nil {
		return err
	}
	for _, b := range bs {
		if _, ok := draining[b.Name]; ok {
			r.normal(ctx, svc, ReasonDrained, fmt.Sprintf("Load balancer in backend %s drained and deleted", b.Name))
		}
	}
	return nil
}

// normal records a Normal event on the Service and logs it at V(2).
func (r *Balancer) normal(ctx context.Context, svc *corev1.Service, reason, msg string) {
	klog.FromContext(ctx).V(2).Info(msg, "reason", reason, "service", klog.KObj(svc))
	if r.Recorder != nil {
		r.Recorder.Event(svcstate.ServiceRef(svc), corev1.EventTypeNormal, reason, msg)
	}
}

// writeDraining applies change to the Service's draining record as the API
// server has it, and remembers it; in the same write, external-dns's
// target annotation is steered to serving (the serving addresses) while a
// load balancer announced from the status drains (see dnsChanges). It
// returns how DNS was steered, for the event.
func (r *Balancer) writeDraining(ctx context.Context, svc *corev1.Service, serving string, change func(svcstate.Draining) svcstate.Draining) (string, error) {
	if r.Client == nil {
		r.st.SetDrains(svc.UID, change(r.drainingOf(svc)))
		return "", nil
	}
	var how string
	err := r.patchAnnotations(ctx, svc, nil, func(cur *corev1.Service) (map[annotation.Name]*string, func()) {
		next := change(svcstate.ParseDraining(cur))
		changes := map[annotation.Name]*string{}
		svcstate.SetAnnotation(changes, cur, annotation.LoadBalancerDraining, next.Value())
		how = r.dnsChanges(changes, cur, next, serving)
		return changes, func() { r.st.SetDrains(svc.UID, next) }
	})
	return how, err
}

// decideUnreachable records in ctx's decision the recorded backends that
// are not configured (gone): their load balancers are left.
func decideUnreachable(ctx context.Context, gone []string) {
	for _, n := range gone {
		decisionOf(ctx).step(Step{Backend: n, Kind: StepUnreachable})
	}
}
