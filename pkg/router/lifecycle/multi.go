package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/api"
	"k8s.io/klog/v2"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/router/backend"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/router/svcstate"
)

// A Service may be served by several backends at once: the annotation
// multicloud-ccm.io/load-balancer-backend lists them comma-separated
// (metal,aws), a loadBalancer.classes entry lists them in backends. Each
// holds its own load balancer, handed only the nodes it can target; the
// Service's status lists every backend's addresses, in the order listed.
// The write-ahead record names every one of them before the first
// mutating call; one backend failing keeps the others' addresses in the
// status (see ensureAll). A backend leaving the list is drained (drain.go).

// Event reasons of several-backend Services. They are stable.
const (
	ReasonBackendFailed = "LoadBalancerBackendFailed"
	ReasonAdded         = "LoadBalancerAdded"
)

// lbTargets returns the backends that should hold service's load balancer,
// in the order the Service's class or annotation lists them (a class's
// backends, else the annotation's, else the default); nil when none
// (implemented elsewhere).
func (r *Balancer) lbTargets(service *corev1.Service) ([]*backend.Member, error) {
	if bs, handled, err := r.classTargets(service); handled {
		return bs, err
	}
	value, annotated := service.Annotations[string(annotation.LoadBalancerBackend)]
	if !annotated {
		value = r.Cfg.LoadBalancer.DefaultBackend
	}
	if value == "" && !annotated {
		return nil, nil
	}
	list := svcstate.SplitNames(value)
	if len(list) == 0 {
		list = []string{value}
	}
	out := make([]*backend.Member, 0, len(list))
	for i, name := range list {
		b, ok := r.ByName[name]
		if !ok || b.LB == nil {
			which := ""
			if len(list) > 1 {
				which = fmt.Sprintf(" (%q)", name)
			}
			return nil, fmt.Errorf("service %s/%s: annotation %s=%q names no backend with load balancers%s; use one of %v (or several, comma-separated), or remove the annotation to use the default",
				service.Namespace, service.Name, annotation.LoadBalancerBackend, value, which, backend.Names(r.lbs))
		}
		if slices.Index(list, name) != i {
			return nil, backend.UserErr(ReasonUnknownLBBackend, "service %s/%s: annotation %s=%q names backend %q twice; name each backend once",
				service.Namespace, service.Name, annotation.LoadBalancerBackend, value, name)
		}
		out = append(out, b)
	}
	return out, nil
}

// lbTarget returns the first of the Service's target backends (nil:
// implemented elsewhere).
func (r *Balancer) lbTarget(service *corev1.Service) (*backend.Member, error) {
	bs, err := r.lbTargets(service)
	if err != nil || len(bs) == 0 {
		return nil, err
	}
	return bs[0], nil
}

// ensured is one target backend's answer to EnsureLoadBalancer.
type ensured struct {
	status   *corev1.LoadBalancerStatus
	id       string
	reported map[string]string
	err      error
}

// ensureAll ensures the load balancer in every target, concurrently, each
// handed the nodes it can target, and returns each one's answer in the
// targets' order.
//
// Each is handed the Service with the other serving backends' addresses
// out of its status (see handedTo), and what each answered is remembered.
func (r *Balancer) ensureAll(ctx context.Context, clusterName string, service *corev1.Service, targets []*backend.Member, nodes []*corev1.Node, drain time.Duration) []ensured {
	out := make([]ensured, len(targets))
	var wg sync.WaitGroup
	for i, b := range targets {
		handed := r.handedTo(service, b, targets, drain)
		wg.Go(func() {
			idCtx, reportedID := backends.WithLoadBalancerIDReport(ctx)
			targetable := r.Targetable(b, handed, nodes)
			decisionOf(ctx).hand(r, b.Name, handed, nodes, targetable)
			status, err := b.EnsureLoadBalancer(idCtx, clusterName, handed, targetable)
			out[i] = ensured{status: status, id: reportedID(), reported: backends.ReportedServiceAnnotations(idCtx), err: err}
		})
	}
	wg.Wait()
	for i, b := range targets {
		decisionOf(ctx).step(Step{Backend: b.Name, Kind: StepEnsure, Err: out[i].err})
	}
	r.rememberShown(service.UID, targets, out)
	return out
}

// mergeStatus lists the addresses of every answer, in order, each once.
func mergeStatus(answers []ensured) *corev1.LoadBalancerStatus {
	out := &corev1.LoadBalancerStatus{}
	seen := map[string]bool{}
	for _, a := range answers {
		if a.err != nil || a.status == nil {
			continue
		}
		for _, in := range a.status.Ingress {
			if k := in.IP + "|" + in.Hostname; !seen[k] {
				seen[k] = true
				out.Ingress = append(out.Ingress, in)
			}
		}
	}
	return out
}

// withoutHandedOver returns the targets, and their answers, that did not
// answer ImplementedElsewhere: a backend that leaves the Service to
// another controller (the aws backend for aws-load-balancer-type:
// external, the AWS Load Balancer Controller's) has not failed, serves no
// address, and keeps whatever that controller made.
func withoutHandedOver(targets []*backend.Member, answers []ensured) ([]*backend.Member, []ensured) {
	if !slices.ContainsFunc(answers, handedOver) {
		return targets, answers
	}
	var ts []*backend.Member
	var as []ensured
	for i, a := range answers {
		if !handedOver(a) {
			ts, as = append(ts, targets[i]), append(as, a)
		}
	}
	return ts, as
}

func handedOver(a ensured) bool {
	return a.err == cloudprovider.ImplementedElsewhere //nolint:errorlint // the sentinel is never wrapped (backend.wrap), as upstream compares it.
}

// partialFailure handles targets of which some failed: the others'
// addresses are added to the Service's status (those already shown stay,
// the failed backends' included: their load balancers may well still
// serve), each failure is a Warning event naming its backend, and the
// failures are returned, so the controller retries.
func (r *Balancer) partialFailure(ctx context.Context, service *corev1.Service, targets []*backend.Member, answers []ensured) error {
	var errs []error
	for i, a := range answers {
		if a.err == nil {
			continue
		}
		r.recordServiceError(ctx, service, a.err)
		msg := fmt.Sprintf("Backend %s cannot serve the load balancer yet (the other backends' addresses stay in the status): %s", targets[i].Name, targets[i].Unnamed(a.err))
		var pending *api.RetryError
		if errors.As(a.err, &pending) {
			// Still provisioning (Octavia's PENDING_CREATE, an NLB
			// provisioning): upstream retries after the delay asked for,
			// with its own event. A Warning per retry would spend
			// client-go's event budget for the Service (25 Warnings, then
			// one per 5 minutes) and drop the next Warning that matters,
			// such as a bad annotation's.
			klog.FromContext(ctx).V(2).Info(msg, "service", klog.KObj(service))
		} else {
			r.Warn(ctx, svcstate.ServiceRef(service), ReasonBackendFailed, msg)
		}
		errs = append(errs, a.err) // the member named its backend and call (backend.Member.wrap)
	}
	ok, refused := mergeStatus(answers), r.refusedShown(service, targets, answers)
	if len(ok.Ingress) > 0 || len(refused) > 0 {
		decisionOf(ctx).show(&corev1.LoadBalancerStatus{Ingress: withoutRefused(withAdded(service.Status.LoadBalancer.Ingress, ok.Ingress), refused)})
		if err := r.showPartial(ctx, service, ok.Ingress, refused); err != nil {
			errs = append(errs, fmt.Errorf("showing the other backends' addresses: %w", err))
		}
	}
	return fmt.Errorf("service %s/%s: %d of %d backends failed: %w", service.Namespace, service.Name, len(errs), len(targets), errors.Join(errs...))
}

// refusedShown returns the addresses (svcstate.IngressKey) the status
// shows for the failed targets that refuse what the Service asks (a user
// error) and announce their addresses from the status (bare metal): the
// backend positively will not give the Service what it shows (a requester
// whose allow-shared-ip key was removed or changed, so that it may no
// longer share the address another Service holds: LoadBalancerIPInUse),
// and its speaker announces whatever the status shows, so they leave it,
// as MetalLB clears the address of a Service its config no longer allows.
// A failure of another kind keeps them: the backend may be down and its
// load balancer still serving. A backend's addresses are those it last
// answered (shown.go); before any answer of this process, the whole
// status when it alone serves the Service. Addresses another target
// answered stay.
func (r *Balancer) refusedShown(svc *corev1.Service, targets []*backend.Member, answers []ensured) map[string]bool {
	mem, _ := r.st.ShownOf(svc.UID)
	out := map[string]bool{}
	for i, a := range answers {
		if _, user := backends.AsUserError(a.err); !user || !targets[i].AnnouncedFromStatus() {
			continue
		}
		keys, known := mem[targets[i].Name]
		if !known && r.servesAlone(svc, targets[i]) {
			for _, in := range svc.Status.LoadBalancer.Ingress {
				keys = append(keys, svcstate.IngressKey(in))
			}
		}
		for _, k := range keys {
			out[k] = true
		}
	}
	for _, in := range mergeStatus(answers).Ingress {
		delete(out, svcstate.IngressKey(in))
	}
	return out
}

// servesAlone reports whether b is the one backend serving the Service
// (multicloud-ccm.io/load-balancer-served-by).
func (r *Balancer) servesAlone(svc *corev1.Service, b *backend.Member) bool {
	serving := r.servingOf(svc)
	return len(serving) == 1 && serving[0] == b
}

// withoutRefused is cur without the addresses in refused.
func withoutRefused(cur []corev1.LoadBalancerIngress, refused map[string]bool) []corev1.LoadBalancerIngress {
	return slices.DeleteFunc(slices.Clone(cur), func(in corev1.LoadBalancerIngress) bool { return refused[svcstate.IngressKey(in)] })
}

// showPartial writes a partial failure's status: the addresses of the
// targets that answered added, those refused (refusedShown) taken out,
// emptying it if none is left; and forgets the refused ones as shown.
func (r *Balancer) showPartial(ctx context.Context, svc *corev1.Service, add []corev1.LoadBalancerIngress, refused map[string]bool) error {
	if len(refused) == 0 {
		return r.addToStatus(ctx, svc, add)
	}
	if mem, ok := r.st.ShownOf(svc.UID); ok {
		for name, keys := range mem {
			r.st.SetShown(svc.UID, name, slices.DeleteFunc(slices.Clone(keys), func(k string) bool { return refused[k] }))
		}
	}
	if r.Client == nil {
		return nil
	}
	return r.writeIngress(ctx, svc, func(cur []corev1.LoadBalancerIngress) ([]corev1.LoadBalancerIngress, bool) {
		next := withoutRefused(withAdded(cur, add), refused)
		return next, len(next) != len(cur) || !slices.EqualFunc(next, cur, func(a, b corev1.LoadBalancerIngress) bool {
			return svcstate.IngressKey(a) == svcstate.IngressKey(b)
		})
	})
}

// servedChanges are the annotations naming the backends serving the
// Service and their load balancers' IDs: multicloud-ccm.io/load-balancer-served-by
// lists the targets in order; multicloud-ccm.io/load-balancer-id is the one
// reported ID when one backend serves the Service, else backend=ID pairs
// of those that reported one. Backends serving again leave the draining
// record; external-dns's target annotation follows the serving addresses
// while a load balancer announced from the status drains, and the
// router's goes once none does (see dnsChanges).
//
// seen is the Service the backends were handed (see writtenBack).
func (r *Balancer) servedChanges(seen, cur *corev1.Service, targets []*backend.Member, answers []ensured) map[annotation.Name]*string {
	changes := map[annotation.Name]*string{}
	svcstate.SetAnnotation(changes, cur, annotation.LoadBalancerServedBy, strings.Join(svcstate.NamesInOrder(targets), ","))
	id := ""
	if len(targets) == 1 {
		id = answers[0].id
	} else {
		var pairs []string
		for i, a := range answers {
			if a.id != "" {
				pairs = append(pairs, targets[i].Name+"="+a.id)
			}
		}
		id = strings.Join(pairs, ",")
	}
	svcstate.SetAnnotation(changes, cur, annotation.LoadBalancerID, id)
	r.writtenBack(changes, seen, cur, targets, answers)
	d := svcstate.ParseDraining(cur)
	if d.HasAny(targets) {
		d = d.Without(svcstate.NamesInOrder(targets)...)
		svcstate.SetAnnotation(changes, cur, annotation.LoadBalancerDraining, d.Value())
	}
	r.dnsChanges(changes, cur, d, svcstate.DNSTarget(mergeStatus(answers).Ingress))
	return changes
}

// servingOf returns the backends multicloud-ccm.io/load-balancer-served-by
// names that are configured with load balancers.
func (r *Balancer) servingOf(svc *corev1.Service) []*backend.Member {
	var out []*backend.Member
	for _, n := range svcstate.SplitNames(svc.Annotations[string(annotation.LoadBalancerServedBy)]) {
		if b, ok := r.ByName[n]; ok && b.LB != nil {
			out = append(out, b)
		}
	}
	return out
}
