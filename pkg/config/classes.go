package config

import (
	"fmt"
	"maps"
	"slices"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// LoadBalancerClass is one entry of loadBalancer.classes: a
// spec.loadBalancerClass value and the backend whose load balancers serve
// Services of that class. A Service whose class no entry names is never
// touched; one without a class follows the annotation and defaultBackend.
type LoadBalancerClass struct {
	// Name is the class, as Services write it in spec.loadBalancerClass,
	// e.g. multicloud-ccm.io/aws-nlb. Unique.
	Name string `json:"name"`
	// Backend is the name of the backend serving the class. Set it or
	// Backends, not both.
	Backend string `json:"backend,omitempty"`
	// Backends name several backends that serve each Service of the class
	// at once, in this order (the order of the addresses in its status).
	Backends []string `json:"backends,omitempty"`
	// Annotations are the class's defaults: each applies to a Service of
	// the class that does not set it itself, as if it did (e.g.
	// multicloud-ccm.io/address-pool: a bare-metal pool, or
	// loadbalancer.openstack.org/class: an OpenStack load-balancer
	// class). The Service is not changed; the backend sees them.
	Annotations map[string]string `json:"annotations,omitempty"`
}

// Targets returns the backends serving the class, in order: Backends, or
// Backend alone.
func (cl LoadBalancerClass) Targets() []string {
	if len(cl.Backends) > 0 {
		return cl.Backends
	}
	if cl.Backend == "" {
		return nil
	}
	return []string{cl.Backend}
}

// Class returns the entry for a spec.loadBalancerClass value.
func (l *LoadBalancer) Class(name string) (LoadBalancerClass, bool) {
	for _, c := range l.Classes {
		if c.Name == name {
			return c, true
		}
	}
	return LoadBalancerClass{}, false
}

// validateClasses checks each class: a Kubernetes qualified name (what the
// API server accepts in spec.loadBalancerClass), unique, naming a
// configured backend, and not a backend's name unless that backend serves
// it (a class "aws" served by "openstack" reads as the annotation's
// multicloud-ccm.io/load-balancer-backend=aws and would mislead).
func (c *CloudConfig) validateClasses(names map[string]*Backend) field.ErrorList {
	var errs field.ErrorList
	p := field.NewPath("loadBalancer", "classes")
	seen := map[string]bool{}
	for i, cl := range c.LoadBalancer.Classes {
		cp := p.Index(i)
		switch msgs := validation.IsQualifiedName(cl.Name); {
		case cl.Name == "":
			errs = append(errs, field.Required(cp.Child("name"), "set the spec.loadBalancerClass value this entry serves, e.g. multicloud-ccm.io/"+cl.Backend))
		case len(msgs) > 0:
			for _, msg := range msgs {
				errs = append(errs, field.Invalid(cp.Child("name"), cl.Name, "not a valid spec.loadBalancerClass: "+msg))
			}
		case seen[cl.Name]:
			errs = append(errs, field.Duplicate(cp.Child("name"), cl.Name))
		}
		seen[cl.Name] = true
		errs = append(errs, validateClassBackends(cp, cl, names)...)
		errs = append(errs, validateClassAnnotations(cp.Child("annotations"), cl.Annotations)...)
		if _, isBackend := names[cl.Name]; isBackend && !slices.Contains(cl.Targets(), cl.Name) {
			first := ""
			if t := cl.Targets(); len(t) > 0 {
				first = t[0]
			}
			errs = append(errs, field.Invalid(cp.Child("name"), cl.Name,
				fmt.Sprintf("is the name of backend %q but the class is served by %q; name the class after its backend or use a prefixed name such as multicloud-ccm.io/%s", cl.Name, first, first)))
		}
	}
	return errs
}

// validateClassBackends checks that a class names its backend in exactly
// one of backend and backends, each configured, none twice.
func validateClassBackends(cp *field.Path, cl LoadBalancerClass, names map[string]*Backend) field.ErrorList {
	var errs field.ErrorList
	switch {
	case cl.Backend != "" && len(cl.Backends) > 0:
		return field.ErrorList{field.Invalid(cp.Child("backends"), cl.Backends, "set backend (one backend) or backends (several), not both; put "+cl.Backend+" into backends")}
	case len(cl.Backends) > 0:
		for j, b := range cl.Backends {
			if _, ok := names[b]; !ok {
				errs = append(errs, field.NotSupported(cp.Child("backends").Index(j), b, backendNames(names)))
			}
			if slices.Index(cl.Backends, b) != j {
				errs = append(errs, field.Duplicate(cp.Child("backends").Index(j), b))
			}
		}
	default:
		if _, ok := names[cl.Backend]; !ok {
			errs = append(errs, field.NotSupported(cp.Child("backend"), cl.Backend, backendNames(names)))
		}
	}
	return errs
}

// routerAnnotations choose a Service's backend or are written by the router
// (pkg/annotation, which imports this package through pkg/backends).
var routerAnnotations = []string{
	"multicloud-ccm.io/load-balancer-backend", "multicloud-ccm.io/load-balancer-backends",
	"multicloud-ccm.io/load-balancer-served-by", "multicloud-ccm.io/load-balancer-id",
	"multicloud-ccm.io/load-balancer-draining",
}

// validateClassAnnotations checks a class's default annotations: valid
// annotation keys, and none of the router's own (the class already chooses
// the backend; the record and served annotations are written by the
// router).
func validateClassAnnotations(p *field.Path, anns map[string]string) field.ErrorList {
	var errs field.ErrorList
	for _, k := range slices.Sorted(maps.Keys(anns)) {
		for _, msg := range validation.IsQualifiedName(k) {
			errs = append(errs, field.Invalid(p.Key(k), k, "not a valid annotation name: "+msg))
		}
		if slices.Contains(routerAnnotations, k) {
			errs = append(errs, field.Forbidden(p.Key(k), "the router's own annotation cannot be a class default (the class chooses the backend; the router writes the others); remove it"))
		}
	}
	return errs
}
