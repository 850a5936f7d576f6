package lifecycle

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/router/backend"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/router/svcstate"
)

// ReasonClassConflict is the Warning reason for a Service whose
// spec.loadBalancerClass and multicloud-ccm.io/load-balancer-backend
// annotation name different backends.
const ReasonClassConflict = "LoadBalancerClassConflict"

// ServesClass reports whether class is one of loadBalancer.classes: the
// Services the load-balancer-class controller serves.
func (r *Balancer) ServesClass(class string) bool {
	_, ok := r.Cfg.LoadBalancer.Class(class)
	return ok
}

// HasClasses reports whether the config lists any load-balancer class.
func (r *Balancer) HasClasses() bool { return len(r.Cfg.LoadBalancer.Classes) > 0 }

// classTargets routes a Service with spec.loadBalancerClass: one of our
// classes goes to its backends, in order (an annotation naming others is a
// conflict, refused), any other class to nobody. handled is false for a
// Service without a class, which the annotation and default route.
func (r *Balancer) classTargets(service *corev1.Service) (bs []*backend.Member, handled bool, err error) {
	if service.Spec.LoadBalancerClass == nil {
		return nil, false, nil
	}
	class := *service.Spec.LoadBalancerClass
	c, ours := r.Cfg.LoadBalancer.Class(class)
	if !ours {
		return nil, true, nil
	}
	want := c.Targets()
	if name, annotated := service.Annotations[string(annotation.LoadBalancerBackend)]; annotated && !slices.Equal(svcstate.SplitNames(name), want) {
		return nil, true, backend.UserErr(ReasonClassConflict, "service %s/%s: spec.loadBalancerClass %q is served by backend %q but annotation %s=%q names another; remove the annotation (the class chooses the backend)",
			service.Namespace, service.Name, class, strings.Join(want, ","), annotation.LoadBalancerBackend, name)
	}
	for _, n := range want {
		b, ok := r.ByName[n]
		if !ok || b.LB == nil {
			// New refuses such a config; kept for a router built otherwise.
			return nil, true, fmt.Errorf("service %s/%s: class %q: backend %q has no load balancers", service.Namespace, service.Name, class, n)
		}
		bs = append(bs, b)
	}
	return bs, true, nil
}

// withClassDefaults returns the Service as its backend sees it: with its
// class's default annotations (loadBalancer.classes[].annotations) for
// those it does not set itself. The Service itself when there are none.
func (r *Balancer) withClassDefaults(service *corev1.Service) *corev1.Service {
	if service.Spec.LoadBalancerClass == nil {
		return service
	}
	c, ok := r.Cfg.LoadBalancer.Class(*service.Spec.LoadBalancerClass)
	if !ok || len(c.Annotations) == 0 {
		return service
	}
	var out *corev1.Service
	for k, v := range c.Annotations {
		if _, set := service.Annotations[k]; set {
			continue
		}
		if out == nil {
			out = service.DeepCopy()
			if out.Annotations == nil {
				out.Annotations = map[string]string{}
			}
		}
		out.Annotations[k] = v
	}
	if out == nil {
		return service
	}
	return out
}
