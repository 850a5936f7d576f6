package config

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// PlatformsFlag is the command-line flag KEP-5778 ("explicit node
// ownership", kubernetes/enhancements#5779) gives a CCM to restrict the
// platforms it serves.
const PlatformsFlag = "cloud-provider-platforms"

// SchemeAlias makes a backend serve the nodes of a providerID scheme other
// than its own, such as the metal3:// providerIDs Cluster API's Metal3
// provider writes. The backend is asked about such a node as if it had no
// providerID, so it matches the node by name (the bare-metal backend: its
// inventory entry of the node's name); the node's providerID is never
// changed.
type SchemeAlias struct {
	// Scheme is the providerID scheme, e.g. metal3. It must not be the
	// scheme (type) of a backend type.
	Scheme string `json:"scheme"`
	// Backend names the backend that serves the scheme's nodes.
	Backend string `json:"backend"`
}

// ParsePlatforms reads a --cloud-provider-platforms value: platform
// identifiers separated by commas. Every problem is in the one error,
// which names the flag.
func ParsePlatforms(value string) ([]string, error) {
	var list []string
	for p := range strings.SplitSeq(value, ",") {
		list = append(list, strings.TrimSpace(p))
	}
	errs := validatePlatformList(field.NewPath("--"+PlatformsFlag), list)
	if len(errs) > 0 {
		return nil, errs.ToAggregate()
	}
	return list, nil
}

// validatePlatformList checks a list of platform identifiers for form
// and repetition; which platforms a backend serves is checked by
// validatePlatforms.
func validatePlatformList(p *field.Path, list []string) field.ErrorList {
	if list == nil {
		return nil
	}
	if len(list) == 0 {
		return field.ErrorList{field.Required(p, "list at least one platform (a providerID scheme such as vsphere), or remove the key to serve every platform a backend serves")}
	}
	var errs field.ErrorList
	seen := map[string]bool{}
	for i, name := range list {
		errs = append(errs, validatePlatformName(p.Index(i), name)...)
		if seen[name] && name != "" {
			errs = append(errs, field.Duplicate(p.Index(i), name))
		}
		seen[name] = true
	}
	return errs
}

// validatePlatformName checks one platform identifier: a providerID
// scheme, lower-case letters, digits and dashes.
func validatePlatformName(p *field.Path, name string) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(p, "a platform is a providerID scheme such as aws, openstack, vsphere or baremetal")}
	}
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Label(name) {
		errs = append(errs, field.Invalid(p, name, "a platform is a providerID scheme: "+msg))
	}
	return errs
}

// validateSchemes checks nodes.schemes: each a well-formed scheme, once,
// not a backend type's own, served by a configured backend.
func (c *CloudConfig) validateSchemes(names map[string]*Backend) field.ErrorList {
	p := field.NewPath("nodes", "schemes")
	var errs field.ErrorList
	seen := map[string]bool{}
	for i, a := range c.Nodes.Schemes {
		ap := p.Index(i)
		errs = append(errs, validatePlatformName(ap.Child("scheme"), a.Scheme)...)
		switch {
		case slices.Contains(RegisteredTypes(), a.Scheme):
			errs = append(errs, field.Invalid(ap.Child("scheme"), a.Scheme, fmt.Sprintf("%s:// is the providerID scheme of the %s backend type; a backend of that type serves it already", a.Scheme, a.Scheme)))
		case seen[a.Scheme] && a.Scheme != "":
			errs = append(errs, field.Duplicate(ap.Child("scheme"), a.Scheme))
		}
		seen[a.Scheme] = true
		if _, ok := names[a.Backend]; !ok {
			errs = append(errs, field.NotSupported(ap.Child("backend"), a.Backend, backendNames(names)))
		}
	}
	return errs
}

// validatePlatforms checks that every platform nodes.platforms lists is
// served by a configured backend: a backend's platform is its type's
// providerID scheme, which for every backend type is the type's name, and
// a nodes.schemes entry adds its scheme.
func (c *CloudConfig) validatePlatforms() field.ErrorList {
	served := c.ConfiguredPlatforms()
	var errs field.ErrorList
	for i, name := range c.Nodes.Platforms {
		if name != "" && !slices.Contains(served, name) && validatePlatformName(nil, name) == nil {
			errs = append(errs, field.NotSupported(field.NewPath("nodes", "platforms").Index(i), name, served))
		}
	}
	return errs
}

// ConfiguredPlatforms lists, sorted, the platforms the configured backends
// serve: each backend's type and each nodes.schemes entry's scheme.
func (c *CloudConfig) ConfiguredPlatforms() []string {
	var out []string
	for _, b := range c.Backends {
		if b.Type != "" {
			out = append(out, b.Type)
		}
	}
	for _, a := range c.Nodes.Schemes {
		if validatePlatformName(nil, a.Scheme) == nil {
			out = append(out, a.Scheme)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
