package config

import (
	"fmt"
	"slices"
	"sort"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// LoadBalancerOffer is implemented by the settings of a backend type whose
// backends may offer no load balancers (bare metal without address pools,
// vSphere, OpenStack with its load balancers disabled).
type LoadBalancerOffer interface {
	// LoadBalancersMissing returns "" when a backend built from these
	// settings offers load balancers; otherwise what to change so that it
	// does, e.g. "add an address pool under backends[0].baremetal.addressPools".
	LoadBalancersMissing(section *field.Path) string
}

// ValidateLoadBalancerBackends refuses loadBalancer.defaultBackend and
// loadBalancer.classes[].backend naming a backend without load balancers,
// naming the field and the fix. It is the one check behind
// `multicloud-ccm config validate`, Parse (the running CCM's start and
// reload) and the router, so they never disagree. backends are the
// backend names to consider (nil: the config's) and has reports whether
// one offers load balancers (nil: as its settings say, see
// LoadBalancerOffer; a backend whose settings do not say has them). Names
// of no backend are left to the checks that report them.
func (c *CloudConfig) ValidateLoadBalancerBackends(backends []string, has func(backend string) bool) field.ErrorList {
	byName := map[string]int{}
	for i, b := range c.Backends {
		byName[b.Name] = i
		if has == nil {
			backends = append(backends, b.Name)
		}
	}
	offers := func(name string) (bool, string) {
		i, known := byName[name]
		fix := ""
		if s, ok := c.settings(i, known).(LoadBalancerOffer); ok && (has != nil || c.Backends[i].sectionOK) {
			fix = s.LoadBalancersMissing(field.NewPath("backends").Index(i).Child(c.Backends[i].Type))
		}
		switch {
		case has != nil:
			return has(name), fix
		case !known:
			return true, ""
		}
		return fix == "", fix
	}
	var withLBs []string
	for _, n := range backends {
		if ok, _ := offers(n); ok && n != "" {
			withLBs = append(withLBs, n)
		}
	}
	sort.Strings(withLBs)
	check := func(p *field.Path, name string) *field.Error {
		if !slices.Contains(backends, name) {
			return nil
		}
		ok, fix := offers(name)
		if ok {
			return nil
		}
		if fix == "" {
			fix = "its type offers none"
		}
		return field.Invalid(p, name, fmt.Sprintf("backend %q has no load balancers: %s; or name a backend that has them (%v)", name, fix, withLBs))
	}
	var errs field.ErrorList
	if d := c.LoadBalancer.DefaultBackend; d != "" {
		if e := check(field.NewPath("loadBalancer", "defaultBackend"), d); e != nil {
			errs = append(errs, e)
		}
	}
	for i, cl := range c.LoadBalancer.Classes {
		if len(cl.Backends) == 0 {
			if e := check(field.NewPath("loadBalancer", "classes").Index(i).Child("backend"), cl.Backend); e != nil {
				errs = append(errs, e)
			}
			continue
		}
		for j, b := range cl.Backends {
			if e := check(field.NewPath("loadBalancer", "classes").Index(i).Child("backends").Index(j), b); e != nil {
				errs = append(errs, e)
			}
		}
	}
	return errs
}

// settings returns the i-th backend's settings, nil when !ok.
func (c *CloudConfig) settings(i int, ok bool) any {
	if !ok {
		return nil
	}
	return c.Backends[i].Settings
}
