package router

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"

	corev1 "k8s.io/api/core/v1"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
)

// reasonClassConflict is the Warning reason for a Service whose
// spec.loadBalancerClass and multicloud-ccm.io/load-balancer-backend
// annotation name different backends.
const reasonClassConflict = "LoadBalancerClassConflict"

// ServesClass reports whether class is one of loadBalancer.classes: the
// Services the load-balancer-class controller serves.
func (r *Router) ServesClass(class string) bool {
	_, ok := r.cfg.LoadBalancer.Class(class)
	return ok
}

// HasClasses reports whether the config lists any load-balancer class.
func (r *Router) HasClasses() bool { return len(r.cfg.LoadBalancer.Classes) > 0 }

// classTarget routes a Service with spec.loadBalancerClass: one of our
// classes goes to its backend (an annotation naming another backend is a
// conflict, refused), any other class to nobody. handled is false for a
// Service without a class, which the annotation and default route.
func (r *Router) classTarget(service *corev1.Service) (b *backend, handled bool, err error) {
	if service.Spec.LoadBalancerClass == nil {
		return nil, false, nil
	}
	class := *service.Spec.LoadBalancerClass
	c, ours := r.cfg.LoadBalancer.Class(class)
	if !ours {
		return nil, true, nil
	}
	if name, annotated := service.Annotations[string(annotation.LoadBalancerBackend)]; annotated && name != c.Backend {
		return nil, true, userErr(reasonClassConflict, "service %s/%s: spec.loadBalancerClass %q is served by backend %q but annotation %s=%q names another; remove the annotation (the class chooses the backend)",
			service.Namespace, service.Name, class, c.Backend, annotation.LoadBalancerBackend, name)
	}
	b, ok := r.byName[c.Backend]
	if !ok || b.lb == nil {
		// New refuses such a config; kept for a router built otherwise.
		return nil, true, fmt.Errorf("service %s/%s: class %q: backend %q has no load balancers", service.Namespace, service.Name, class, c.Backend)
	}
	return b, true, nil
}

// checkLoadBalancerBackends refuses a defaultBackend or class naming a
// backend without load balancers, by the check the config's validation
// runs (config.ValidateLoadBalancerBackends), asked about the backends as
// built.
func (r *Router) checkLoadBalancerBackends() error {
	errs := r.cfg.ValidateLoadBalancerBackends(names(r.backends), func(name string) bool {
		b, ok := r.byName[name]
		return !ok || b.lb != nil
	})
	for i, c := range r.cfg.LoadBalancer.Classes {
		if _, ok := r.byName[c.Backend]; !ok {
			errs = append(errs, field.NotSupported(field.NewPath("loadBalancer", "classes").Index(i).Child("backend"), c.Backend, names(r.backends)))
		}
	}
	if d := r.cfg.LoadBalancer.DefaultBackend; d != "" {
		if _, ok := r.byName[d]; !ok {
			errs = append(errs, field.NotSupported(field.NewPath("loadBalancer", "defaultBackend"), d, names(r.backends)))
		}
	}
	return errs.ToAggregate()
}

// withClassDefaults returns the Service as its backend sees it: with its
// class's default annotations (loadBalancer.classes[].annotations) for
// those it does not set itself. The Service itself when there are none.
func (r *Router) withClassDefaults(service *corev1.Service) *corev1.Service {
	if service.Spec.LoadBalancerClass == nil {
		return service
	}
	c, ok := r.cfg.LoadBalancer.Class(*service.Spec.LoadBalancerClass)
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
