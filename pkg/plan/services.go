package plan

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/router"
)

// service plans one LoadBalancer Service: the router's GetLoadBalancer
// (which backends hold one) and its decision for a sync (router.Decide:
// EnsureLoadBalancer, as the controllers call it, under a dry run). Where
// the Service goes, what is deleted, drained or handed to another
// controller is the router's decision, as the switch makes it; what each
// backend would change is what it recorded (its intents, in the call log).
//
// settledNodes are the nodes as the switch leaves them (the nodes'
// plans carried out): the Service's targets once it settled are the
// router's choice among them (Targets).
func (p *planner) service(ctx context.Context, svc *corev1.Service, nodes, settledNodes []*corev1.Node) ServicePlan {
	sp := ServicePlan{Namespace: svc.Namespace, Name: svc.Name, Address: addresses(&svc.Status.LoadBalancer), ChosenBy: p.lbChosenBy(svc)}
	ctx, log := withCallLog(ctx)
	// One step of the switch: bare metal hands out the next free address
	// after the last it gave, the Services planned before this one's
	// included (the switch's allocator does so, whichever order it syncs
	// them in; an address freed behind it is not handed out again before
	// the pool wraps round).
	ctx, _ = backends.WithDryRun(backends.WithCarryOn(ctx))
	svc = svc.DeepCopy()
	_, _, getErr := p.r.GetLoadBalancer(ctx, p.cluster, svc)
	held := map[string]bool{}
	for _, c := range log.all() {
		held[c.backend] = held[c.backend] || c.exists
	}
	d := p.r.Decide(ctx, p.cluster, svc, nodes)
	calls := log.all()
	if d.Elsewhere {
		// The router removes what it made for the Service before: those
		// deletes are the plan's too.
		sp.Outcome, sp.ChosenBy = LBElsewhere, p.elsewhereWhy(svc, sp.ChosenBy, d.HandedOver)
		_, sp.Changes = splitIntents(deletesOnly(calls), nil)
		sp.DeletedFrom = d.Backends(router.StepDelete)
		return sp
	}
	// The targets that leave the Service to another controller
	// (ImplementedElsewhere) do not serve it: their load balancer, if
	// any, is that controller's and is kept, its addresses out of the
	// status.
	targets := d.Targets
	served := slices.DeleteFunc(slices.Clone(targets), func(b string) bool { return slices.Contains(d.HandedOver, b) })
	sp.Backend, sp.HandedOver = strings.Join(served, ","), d.HandedOver
	sp.Annotations = p.annotationIssues(svc, targets)
	if d.Status != nil {
		sp.NewAddress = addresses(d.Status)
	}
	drained := d.Backends(router.StepDrain)
	sp.Adoption, sp.Changes = splitIntents(slices.DeleteFunc(slices.Clone(calls), func(c lbCall) bool { return drainUpdate(c, drained) }), served)
	if d.Err != nil {
		// Refused by some targets (or by the router): the others serve
		// it all the same, their changes made and their addresses shown
		// (the sync fails, and is retried, until every target serves).
		sp.Outcome, sp.Error = LBRefused, errText(d.Err)
		if d.Status == nil {
			// Nothing shown: the status stays as it is (an empty one
			// shown clears it: the refusing backends' addresses leave).
			sp.NewAddress = sp.Address
		}
		for _, s := range d.Steps {
			// A target that hands the Service over (HandedOver) did
			// not refuse it.
			if s.Kind == router.StepEnsure && s.Err != nil && !slices.Contains(d.HandedOver, s.Backend) {
				sp.RefusedBy = append(sp.RefusedBy, s.Backend)
			}
		}
		kept, left, failed, err := p.whileRefused(ctx, svc, d, nodes)
		if err != nil {
			sp.Error += "; updating the load balancers kept meanwhile: " + errText(err)
		}
		sp.Changes = append(sp.Changes, kept...)
		// A kept load balancer whose update fails keeps the targets it
		// has, whatever the nodes do, until the Service is fixed: no
		// prediction for it.
		sp.Targets = p.settledTargets(afterSync(svc, d), settledNodes, slices.Concat(d.HandedOver, sp.RefusedBy, left, failed))
		return sp
	}
	if getErr != nil {
		sp.Error = "GetLoadBalancer: " + errText(getErr)
	}
	sp.DeletedFrom = d.Backends(router.StepDelete)
	sp.Forgotten = d.Backends(router.StepForget)
	for _, b := range drained {
		in, err := whileDraining(calls, b)
		if err != nil && sp.Error == "" {
			sp.Error = fmt.Sprintf("updating the load balancer draining in backend %s: %s", b, errText(err))
		}
		sp.Changes = append(sp.Changes, in...)
		sp.Changes = append(sp.Changes, p.drainIntent(svc, b))
		sp.DrainedFrom = append(sp.DrainedFrom, b)
	}
	sp.Outcome = outcome(sp, slices.ContainsFunc(served, func(b string) bool { return held[b] }))
	sp.Targets = p.settledTargets(afterSync(svc, d), settledNodes, d.HandedOver)
	return sp
}

// settledTargets are, by backend, the names of the nodes the Service's
// load balancers target once the switch settled: the router's choice
// (Router.LoadBalancerTargetsByBackend, what its node syncs hand each
// backend, draining ones included, those whose load balancers ignore
// their nodes left out) among the nodes as the switch leaves them, for
// the Service as its sync leaves it, but for the nodes a backend owns
// and has no instance of (a load balancer targets an instance of its
// cloud only while it runs). The backends that leave it to another
// controller or refuse it (left) target nothing of ours.
func (p *planner) settledTargets(svc *corev1.Service, nodes []*corev1.Node, left []string) map[string][]string {
	by := p.r.LoadBalancerTargetsByBackend(svc, nodes)
	if len(by) == 0 {
		return nil
	}
	out := map[string][]string{}
	for b, ns := range by {
		if slices.Contains(left, b) {
			continue
		}
		names := []string{}
		for _, n := range ns {
			if !slices.Contains(p.noInstance[n.Name], b) {
				names = append(names, n.Name)
			}
		}
		slices.Sort(names)
		out[b] = names
	}
	return out
}

// afterSync is the Service as its sync leaves it: the decision's
// annotations (the router's records of what serves it and what drains)
// written.
func afterSync(svc *corev1.Service, d *router.Decision) *corev1.Service {
	after := svc.DeepCopy()
	for k, v := range d.Annotations {
		if v == nil {
			delete(after.Annotations, string(k))
		} else {
			if after.Annotations == nil {
				after.Annotations = map[string]string{}
			}
			after.Annotations[string(k)] = *v
		}
	}
	return after
}

// whileDraining is what the switch does to the load balancer draining in
// backend b until the drain ends: it keeps it serving, and the sync hands
// it the nodes as they are, as it hands its targets theirs
// (Balancer.retargetDraining: an UpdateLoadBalancer of b in the decision's
// calls), so it is reconciled (a gone instance's target deregistered);
// the node syncs after it keep it so. b's intents in that update, named
// by backend.
func whileDraining(calls []lbCall, b string) ([]backends.Intent, error) {
	var out []backends.Intent
	for _, c := range calls {
		if !drainUpdate(c, []string{b}) {
			continue
		}
		if c.err != nil {
			return nil, c.err
		}
		for _, in := range c.intents {
			in.What = "in backend " + b + ", while it drains: " + in.What
			out = append(out, in)
		}
	}
	return out, nil
}

// whileRefused is what the switch does to the load balancers a refused
// Service keeps outside its targets (the backend it moves away from while
// the one it moves to refuses it): its failing sync hands them the nodes
// as they are (pkg/lbcontroller's retargetFailed: Router.UpdateLoadBalancer,
// for a Service the router served before), as its targets get theirs from
// the sync itself. That update under the dry run: the intents of the
// backends that are not targets, named by backend, and those of them that
// leave the Service to another controller (left: they answer
// ImplementedElsewhere and change nothing, as the aws backend for
// aws-load-balancer-type external, not even the NLB it made: its targets
// stay as they are), and those whose update fails (failed: their load
// balancers keep the targets they have, the first error in err).
func (p *planner) whileRefused(ctx context.Context, svc *corev1.Service, d *router.Decision, nodes []*corev1.Node) (out []backends.Intent, left, failed []string, err error) {
	if svc.Annotations[string(annotation.LoadBalancerServedBy)] == "" {
		return nil, nil, nil, nil
	}
	ctx, log := withCallLog(ctx)
	ctx, _ = backends.WithDryRun(ctx)
	_ = p.r.UpdateLoadBalancer(ctx, p.cluster, svc.DeepCopy(), nodes) // the backends' own failures are in the log
	for _, c := range log.all() {
		if c.op != "update" || slices.Contains(d.Targets, c.backend) {
			continue
		}
		// The sentinel unwrapped, as the router compares it
		// (lifecycle.Balancer.UpdateLoadBalancer): an answer the switch
		// takes for an error is one here too.
		if c.err == cloudprovider.ImplementedElsewhere { //nolint:errorlint // As the router compares it.
			left = append(left, c.backend)
			continue
		}
		// One backend failing does not keep the router from updating the
		// others: their intents, and whether they leave the Service, count.
		if c.err != nil {
			if err == nil {
				err = c.err
			}
			failed = append(failed, c.backend)
			continue
		}
		for _, in := range c.intents {
			in.What = "in backend " + c.backend + ", kept while the sync fails: " + in.What
			out = append(out, in)
		}
	}
	return out, left, failed, err
}

// drainUpdate reports whether c is the update of a load balancer draining
// in one of drained (see whileDraining).
func drainUpdate(c lbCall, drained []string) bool {
	return c.op == "update" && slices.Contains(drained, c.backend)
}

// splitIntents separates the adoption from the changes: the targets'
// intents, backend by backend in targets' order, then the deletes in other
// backends the router would make (a Service moving), named by backend.
// With several targets every intent names its backend.
func splitIntents(calls []lbCall, targets []string) (adoption, changes []backends.Intent) {
	order := func(c lbCall) int {
		if i := slices.Index(targets, c.backend); i >= 0 {
			return i
		}
		return len(targets)
	}
	calls = slices.Clone(calls)
	slices.SortStableFunc(calls, func(a, b lbCall) int { return order(a) - order(b) })
	for _, c := range calls {
		for _, in := range c.intents {
			if len(targets) > 1 || !slices.Contains(targets, c.backend) {
				in.What = "in backend " + c.backend + ": " + in.What
			}
			if in.Kind == backends.IntentAdopt {
				adoption = append(adoption, in)
			} else {
				changes = append(changes, in)
			}
		}
	}
	return adoption, changes
}

// deletesOnly are the calls that delete a Service's load balancer.
func deletesOnly(calls []lbCall) []lbCall {
	return slices.DeleteFunc(slices.Clone(calls), func(c lbCall) bool { return c.op != "delete" })
}

// drainIntent is the delete the router puts off by the Service's drain
// period in backend b: drained, then deleted.
func (p *planner) drainIntent(svc *corev1.Service, b string) backends.Intent {
	return backends.Intent{Kind: backends.IntentDelete, Call: "drain, then EnsureLoadBalancerDeleted",
		What: fmt.Sprintf("in backend %s: load balancer drained for %s (annotation %s or loadBalancer.drainPeriod), then deleted", b, p.drainOf(svc), annotation.LoadBalancerDrain)}
}

// drainOf is the Service's drain period as written (annotation, else the
// config's).
func (p *planner) drainOf(svc *corev1.Service) string {
	if v, ok := svc.Annotations[string(annotation.LoadBalancerDrain)]; ok {
		return strings.TrimSpace(v)
	}
	return p.cfg.LoadBalancer.Drain().String()
}

// outcome classifies the Service's plan: a replacement anywhere wins (an
// intent so classed that takes an address the Service shows away: one
// that only adds an address, as a PreferDualStack Service gaining its
// second family, replaces nothing), then a load balancer a target holds
// (or adopts) is adopted, then one made from nothing is created. A Service
// moving to targets that hold nothing, from backends it leaves (deleted or
// drained there), is created: the addresses it shows are those backends'
// (an Octavia VIP bare metal calls replaced), their loss counted as the
// delete or drain.
func outcome(sp ServicePlan, held bool) string {
	kinds := map[backends.IntentKind]bool{}
	for _, in := range sp.Changes {
		kinds[in.Kind] = true
	}
	moved := !held && len(sp.DeletedFrom)+len(sp.DrainedFrom) > 0
	switch {
	case kinds[backends.IntentReplace] && !keepsAll(sp.Address, sp.NewAddress) && !moved:
		return LBReplaced
	case held || len(sp.Adoption) > 0:
		return LBAdopted
	case kinds[backends.IntentCreate] || sp.Address == "" || (moved && kinds[backends.IntentReplace]):
		return LBCreated
	}
	// The Service shows an address no backend holds and is served without
	// a create: bare metal keeping an address another controller gave.
	return LBAdopted
}

// keepsAll reports whether every address of old (comma-separated, at least
// one) is among those of new.
func keepsAll(old, new string) bool {
	if old == "" {
		return false
	}
	have := strings.Split(new, ",")
	for _, a := range strings.Split(old, ",") {
		if !slices.Contains(have, a) {
			return false
		}
	}
	return true
}

// lbChosenBy says which routing rule (docs/routing.md, "Load balancers")
// names the Service's backend.
func (p *planner) lbChosenBy(svc *corev1.Service) string {
	if c := svc.Spec.LoadBalancerClass; c != nil {
		return "class " + *c
	}
	if _, ok := svc.Annotations[string(annotation.LoadBalancerBackend)]; ok {
		return "annotation"
	}
	if p.cfg.LoadBalancer.DefaultBackend != "" {
		return "default"
	}
	return ""
}

// handOver are the annotations by which a backend type leaves a Service
// to another controller (it answers ImplementedElsewhere).
var handOver = map[string]annotation.Name{"aws": "service.beta.kubernetes.io/aws-load-balancer-type"}

// elsewhereWhy says why no backend of ours serves the Service: the
// backends chosen (left) answered that another controller serves it, or
// nothing routes it to us.
func (p *planner) elsewhereWhy(svc *corev1.Service, chosen string, left []string) string {
	if len(left) > 0 {
		why := fmt.Sprintf("%s: backend %s leaves it to another controller", chosen, strings.Join(left, ","))
		for _, b := range left {
			if n, ok := handOver[p.typeOf(b)]; ok {
				if v, set := svc.Annotations[string(n)]; set {
					why += fmt.Sprintf(" (annotation %s=%s)", n, v)
				}
			}
		}
		return why
	}
	if svc.Spec.LoadBalancerClass != nil {
		return chosen + " (not in loadBalancer.classes)"
	}
	return "no annotation, no loadBalancer.defaultBackend"
}

// addresses are a status's addresses and host names, comma-separated.
func addresses(st *corev1.LoadBalancerStatus) string {
	var out []string
	for _, ing := range st.Ingress {
		if ing.IP != "" {
			out = append(out, ing.IP)
		}
		if ing.Hostname != "" {
			out = append(out, ing.Hostname)
		}
	}
	return strings.Join(out, ",")
}

// annotationPrefixes are the annotations of load-balancer controllers the
// plan checks: ours and those of the CCMs and speakers it replaces.
var annotationPrefixes = []string{
	"multicloud-ccm.io/", "service.beta.kubernetes.io/aws-load-balancer-", "service.beta.kubernetes.io/openstack-",
	"loadbalancer.openstack.org/", "metallb.io/", "metallb.universe.tf/",
}

// annotationIssues lists the Service's annotations that would not do what
// their author expects with backend as its backend: unknown to
// multicloud-ccm, read only by another backend type, or malformed (the
// readers' own message, pkg/annotation's registry).
func (p *planner) annotationIssues(svc *corev1.Service, targets []string) []AnnotationIssue {
	var types []string
	for _, b := range targets {
		types = append(types, p.typeOf(b))
	}
	local := svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal
	var out []AnnotationIssue
	for _, k := range sortedKeys(svc.Annotations) {
		v := svc.Annotations[k]
		if !slices.ContainsFunc(annotationPrefixes, func(pre string) bool { return strings.HasPrefix(k, pre) }) {
			continue
		}
		spec, known := annotation.Lookup(annotation.Name(k))
		switch {
		case !known:
			out = append(out, AnnotationIssue{k, v, AnnotationUnknown, "multicloud-ccm does not read it: it has no effect (docs/annotations.md lists those it reads)"})
		case len(types) > 0 && spec.ReadBy != "router" && !slices.ContainsFunc(spec.Readers(), func(r string) bool { return slices.Contains(types, r) }):
			out = append(out, AnnotationIssue{k, v, AnnotationNotHonoured, notHonoured(strings.Join(spec.Readers(), " and "), targets, types)})
		default:
			// As the readers do: a value the backend does not read for
			// this Service (an HTTP health check's path on a TCP check) is
			// not checked.
			if err := spec.CheckService(svc.Annotations, local, p.lbBackends()); err != nil {
				out = append(out, AnnotationIssue{k, v, AnnotationMalformed, err.Error()})
			}
		}
	}
	return out
}

// notHonoured is the detail of an annotation read by the readBy backends
// only, on a Service served by targets of those types.
func notHonoured(readBy string, targets, types []string) string {
	if len(targets) == 1 {
		return fmt.Sprintf("read by the %s backends only; backend %q is %s", readBy, targets[0], types[0])
	}
	return fmt.Sprintf("read by the %s backends only; backends %q are %s", readBy, targets, strings.Join(types, ", "))
}

// lbBackends names the backends with load balancers.
func (p *planner) lbBackends() []string {
	var out []string
	for _, b := range p.backends {
		if _, ok := b.Cloud.LoadBalancer(); ok {
			out = append(out, b.Name)
		}
	}
	return out
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
