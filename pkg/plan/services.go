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
)

// service plans one LoadBalancer Service: the router's GetLoadBalancer
// (which backends hold one) and EnsureLoadBalancer, as the service
// controller calls them, under a dry run.
func (p *planner) service(ctx context.Context, svc *corev1.Service, nodes []*corev1.Node) ServicePlan {
	sp := ServicePlan{Namespace: svc.Namespace, Name: svc.Name, Address: addresses(&svc.Status.LoadBalancer), ChosenBy: p.lbChosenBy(svc)}
	ctx, log := withCallLog(ctx)
	ctx, _ = backends.WithDryRun(ctx)
	svc = svc.DeepCopy()
	_, _, getErr := p.r.GetLoadBalancer(ctx, p.cluster, svc)
	held := map[string]bool{}
	for _, c := range log.all() {
		held[c.backend] = held[c.backend] || c.exists
	}
	st, err := p.r.EnsureLoadBalancer(ctx, p.cluster, svc, nodes)
	if err == cloudprovider.ImplementedElsewhere { //nolint:errorlint // upstream compares it with ==.
		sp.Outcome, sp.ChosenBy = LBElsewhere, elsewhereWhy(svc, sp.ChosenBy)
		return sp
	}
	calls := log.all()
	sp.Backend = ensuredBy(calls)
	sp.Annotations = p.annotationIssues(svc, sp.Backend)
	if err != nil {
		sp.Outcome, sp.Error = LBRefused, errText(err)
		return sp
	}
	if getErr != nil {
		sp.Error = "GetLoadBalancer: " + errText(getErr)
	}
	if st != nil {
		sp.NewAddress = addresses(st)
	}
	sp.Adoption, sp.Changes = splitIntents(calls, sp.Backend)
	sp.Outcome = outcome(sp, held[sp.Backend])
	return sp
}

// ensuredBy is the backend the router sent EnsureLoadBalancer to.
func ensuredBy(calls []lbCall) string {
	for _, c := range slices.Backward(calls) {
		if c.op == "ensure" {
			return c.backend
		}
	}
	return ""
}

// splitIntents separates the adoption from the changes: the target's
// intents, then the deletes in other backends the router would make (a
// Service moving), named by backend.
func splitIntents(calls []lbCall, target string) (adoption, changes []backends.Intent) {
	for _, c := range calls {
		for _, in := range c.intents {
			if c.backend != target {
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

// outcome classifies the Service's plan: a replacement anywhere wins, then
// a load balancer the target holds (or adopts) is adopted, then one made
// from nothing is created.
func outcome(sp ServicePlan, held bool) string {
	kinds := map[backends.IntentKind]bool{}
	for _, in := range sp.Changes {
		kinds[in.Kind] = true
	}
	switch {
	case kinds[backends.IntentReplace]:
		return LBReplaced
	case held || len(sp.Adoption) > 0:
		return LBAdopted
	case kinds[backends.IntentCreate] || sp.Address == "":
		return LBCreated
	}
	// The Service shows an address no backend holds and is served without
	// a create: bare metal keeping an address another controller gave.
	return LBAdopted
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

// elsewhereWhy says why no backend of ours serves the Service.
func elsewhereWhy(svc *corev1.Service, chosen string) string {
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
func (p *planner) annotationIssues(svc *corev1.Service, backend string) []AnnotationIssue {
	typ := p.typeOf(backend)
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
		case typ != "" && spec.ReadBy != "router" && spec.ReadBy != typ:
			out = append(out, AnnotationIssue{k, v, AnnotationNotHonoured, fmt.Sprintf("read by the %s backends only; backend %q is %s", spec.ReadBy, backend, typ)})
		default:
			if err := spec.Check(v, p.lbBackends()); err != nil {
				out = append(out, AnnotationIssue{k, v, AnnotationMalformed, err.Error()})
			}
		}
	}
	return out
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
