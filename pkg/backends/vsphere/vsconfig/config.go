// Package vsconfig reads the vsphere section of a backend in the
// cloud-config file: the Settings type, its defaults and its validation
// (ParseSection). Package vsphere registers ParseSection as the section
// parser of its type and reads the Settings.
//
// It imports the standard library, apimachinery, pkg/config and
// pkg/cloudapi/limits only, so that its fuzz target builds quickly:
// hack/fuzz.sh compiles every dependency of a fuzz target's test binary
// with the fuzzer's instrumentation, and package vsphere's test binary
// depends on client-go, cloud-provider and govmomi.
package vsconfig

import (
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/cloudapi/limits"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/config"
)

const (
	// Type is the backend type in the cloud-config file, which names the
	// section (vsphere.Type).
	Type = "vsphere"
	// DefaultRefreshInterval is how old the inventory cache may grow before a
	// lookup refreshes it, and how often it is refreshed in the background.
	DefaultRefreshInterval = time.Minute
	// DefaultRequestTimeout bounds one inventory refresh of one vCenter.
	DefaultRequestTimeout = 30 * time.Second

	minRefreshInterval = time.Second
)

// IP families accepted in addresses.ipFamilies.
const (
	// FamilyIPv4 selects IPv4 node addresses.
	FamilyIPv4 = "ipv4"
	// FamilyIPv6 selects IPv6 node addresses.
	FamilyIPv6 = "ipv6"
)

// Settings is the vsphere section of a backend in the cloud-config file.
type Settings struct {
	// VCenters lists the vCenters whose VMs are nodes. At least one.
	VCenters []VCenter `json:"vcenters"`
	// ZoneCategory names the tag category whose tags, attached to a VM's
	// host, cluster or datacenter (nearest wins), give the node's zone.
	// Empty: nodes get no zone.
	ZoneCategory string `json:"zoneCategory,omitempty"`
	// RegionCategory names the tag category giving the node's region, found
	// the same way. Empty: nodes get no region.
	RegionCategory string `json:"regionCategory,omitempty"`
	// Addresses chooses the node addresses among a VM's guest addresses.
	Addresses AddressRules `json:"addresses,omitempty"`
	// RefreshInterval is the age at which the VM inventory is fetched again
	// (default 1m, at least 1s).
	RefreshInterval metav1.Duration `json:"refreshInterval,omitempty"`
	// RequestTimeout bounds one inventory refresh of one vCenter (default 30s).
	RequestTimeout metav1.Duration `json:"requestTimeout,omitempty"`
	// RateLimits is the client-side API budget of each vCenter session,
	// under the one API vcenter (SOAP and the tagging service alike): qps
	// and bucket for reads, qpsWrite and bucketWrite for the rest. On by
	// default (limits.VCenterDefaults); a field left out (or 0) takes
	// the default, qps or qpsWrite -1 turns that bucket off
	// (docs/vsphere.md, "API budget").
	RateLimits map[string]limits.RateLimit `json:"rateLimits,omitempty"`

	// path names the section in error messages, e.g.
	// backends[0].vsphere.
	path *field.Path
}

// VCenter is one vCenter server and the datacenters searched in it.
type VCenter struct {
	// Server is the vCenter's host name, host:port or https URL.
	Server string `json:"server"`
	// Datacenters names the datacenters (or inventory paths) whose VMs are
	// nodes. At least one.
	Datacenters []string `json:"datacenters"`
	// Username is the vCenter user, read from a file or the environment.
	Username config.SecretRef `json:"username"`
	// Password is the user's password, read from a file or the environment.
	Password config.SecretRef `json:"password"`
	// CAFile is a PEM bundle of the CAs that sign the vCenter's certificate.
	// Default: the system's roots.
	CAFile string `json:"caFile,omitempty"`
	// Thumbprint is the SHA-1 or SHA-256 fingerprint of the vCenter's
	// certificate (hex pairs separated by colons), for self-signed
	// certificates.
	Thumbprint string `json:"thumbprint,omitempty"`
	// Insecure skips certificate verification. Only when set explicitly;
	// it is logged as a warning at start.
	Insecure bool `json:"insecure,omitempty"`

	// url is Server parsed, with the /sdk path.
	url *url.URL
}

// AddressRules chooses node addresses among a VM's guest addresses.
//
// For each IP family in IPFamilies, the InternalIP is the first guest address
// on an internal subnet or internal VM network; with no internal rules, the
// first usable address. The ExternalIP is the first address on an external
// subnet or network; with no external rules it equals the InternalIP, as the
// upstream vSphere provider does. Excluded subnets, loopback and link-local
// addresses are never used. The guest's DNS name is the Hostname address.
type AddressRules struct {
	// InternalSubnets are CIDRs whose addresses are InternalIPs.
	InternalSubnets []string `json:"internalSubnets,omitempty"`
	// ExternalSubnets are CIDRs whose addresses are ExternalIPs.
	ExternalSubnets []string `json:"externalSubnets,omitempty"`
	// InternalNetworks are VM network (port group) names whose addresses are
	// InternalIPs.
	InternalNetworks []string `json:"internalNetworks,omitempty"`
	// ExternalNetworks are VM network names whose addresses are ExternalIPs.
	ExternalNetworks []string `json:"externalNetworks,omitempty"`
	// ExcludeSubnets are CIDRs never used as node addresses.
	ExcludeSubnets []string `json:"excludeSubnets,omitempty"`
	// IPFamilies lists ipv4 and/or ipv6, in the order addresses are listed
	// (default [ipv4]).
	IPFamilies []string `json:"ipFamilies,omitempty"`

	internal, external, exclude []*net.IPNet
}

// ParseSection is the config.SectionParser of the vsphere type: it decodes
// the section at path (dir is the config file's folder, against which
// relative file names resolve), sets the defaults and validates it. The
// value it returns is a *Settings.
func ParseSection(raw []byte, path *field.Path, dir string) (any, field.ErrorList) {
	s := &Settings{}
	errs := config.DecodeSection(raw, path, s)
	s.path = path
	s.setDefaults()
	if errs = append(errs, s.validate(path, dir)...); len(errs) > 0 {
		return nil, errs
	}
	return s, nil
}

// FieldPath names the section in errors, e.g. backends[0].vsphere: the
// path ParseSection was given, or vsphere for Settings built otherwise.
func (s *Settings) FieldPath() *field.Path {
	if s.path == nil {
		return field.NewPath(Type)
	}
	return s.path
}

// URL is Server parsed into the vCenter's SDK URL (https, with the /sdk
// path unless Server names one): a copy, so the caller may change it; nil
// until ParseSection validated it.
func (vc *VCenter) URL() *url.URL {
	if vc.url == nil {
		return nil
	}
	u := *vc.url
	return &u
}

// The subnets of the rules, as Validate parsed them, are asked about, not
// handed out: the backend keeps the validated Settings for its lifetime.

// Excluded reports whether ip is in one of ExcludeSubnets.
func (a *AddressRules) Excluded(ip net.IP) bool { return inAny(ip, a.exclude) }

// InInternalSubnets reports whether ip is in one of InternalSubnets.
func (a *AddressRules) InInternalSubnets(ip net.IP) bool { return inAny(ip, a.internal) }

// InExternalSubnets reports whether ip is in one of ExternalSubnets.
func (a *AddressRules) InExternalSubnets(ip net.IP) bool { return inAny(ip, a.external) }

// HasInternalSubnets reports whether InternalSubnets names any subnet.
func (a *AddressRules) HasInternalSubnets() bool { return len(a.internal) > 0 }

// HasExternalSubnets reports whether ExternalSubnets names any subnet.
func (a *AddressRules) HasExternalSubnets() bool { return len(a.external) > 0 }

func inAny(ip net.IP, nets []*net.IPNet) bool {
	for _, n := range nets {
		if n.Contains(ip) {
			return true
		}
	}
	return false
}

func (s *Settings) setDefaults() {
	if s.RefreshInterval.Duration == 0 {
		s.RefreshInterval.Duration = DefaultRefreshInterval
	}
	if s.RequestTimeout.Duration == 0 {
		s.RequestTimeout.Duration = DefaultRequestTimeout
	}
	if len(s.Addresses.IPFamilies) == 0 {
		s.Addresses.IPFamilies = []string{FamilyIPv4}
	}
}

func (s *Settings) validate(path *field.Path, dir string) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, s.validateVCenters(path.Child("vcenters"), dir)...)
	errs = append(errs, limits.ValidateLimits(s.RateLimits, limits.VCenterDefaults, path.Child("rateLimits"))...)
	if s.RefreshInterval.Duration < minRefreshInterval {
		errs = append(errs, field.Invalid(path.Child("refreshInterval"), s.RefreshInterval.String(), "must be at least 1s, e.g. 1m"))
	}
	if s.RequestTimeout.Duration <= 0 {
		errs = append(errs, field.Invalid(path.Child("requestTimeout"), s.RequestTimeout.String(), "must be positive, e.g. 30s"))
	}
	if s.ZoneCategory != "" && s.ZoneCategory == s.RegionCategory {
		errs = append(errs, field.Invalid(path.Child("regionCategory"), s.RegionCategory, "must differ from zoneCategory"))
	}
	return append(errs, s.Addresses.Validate(path.Child("addresses"))...)
}

func (s *Settings) validateVCenters(p *field.Path, dir string) field.ErrorList {
	if len(s.VCenters) == 0 {
		return field.ErrorList{field.Required(p, "list at least one vCenter with server, datacenters, username and password")}
	}
	var errs field.ErrorList
	seen := map[string]bool{}
	for i := range s.VCenters {
		vc := &s.VCenters[i]
		vp := p.Index(i)
		errs = append(errs, vc.validate(vp, dir)...)
		if vc.url != nil {
			if seen[vc.url.Host] {
				errs = append(errs, field.Duplicate(vp.Child("server"), vc.Server))
			}
			seen[vc.url.Host] = true
		}
	}
	return errs
}

func (vc *VCenter) validate(p *field.Path, dir string) field.ErrorList {
	var errs field.ErrorList
	u, err := parseServer(vc.Server)
	if err != nil {
		errs = append(errs, field.Invalid(p.Child("server"), vc.Server, err.Error()))
	}
	vc.url = u
	if len(vc.Datacenters) == 0 {
		errs = append(errs, field.Required(p.Child("datacenters"), "list the datacenters whose VMs are nodes, e.g. [dc1]"))
	}
	for i, dc := range vc.Datacenters {
		if strings.TrimSpace(dc) == "" {
			errs = append(errs, field.Invalid(p.Child("datacenters").Index(i), dc, "must name a datacenter"))
		}
	}
	errs = append(errs, vc.Username.Validate(p.Child("username"), dir, true)...)
	errs = append(errs, vc.Password.Validate(p.Child("password"), dir, true)...)
	return append(errs, vc.validateTLS(p, dir)...)
}

// thumbprintRE matches a SHA-1 (20 bytes) or SHA-256 (32 bytes) fingerprint.
var thumbprintRE = regexp.MustCompile(`^[0-9A-Fa-f]{2}(:[0-9A-Fa-f]{2}){19}$|^[0-9A-Fa-f]{2}(:[0-9A-Fa-f]{2}){31}$`)

func (vc *VCenter) validateTLS(p *field.Path, dir string) field.ErrorList {
	var errs field.ErrorList
	if vc.Insecure && (vc.CAFile != "" || vc.Thumbprint != "") {
		errs = append(errs, field.Invalid(p.Child("insecure"), true, "remove insecure when caFile or thumbprint verifies the certificate"))
	}
	if vc.CAFile != "" && vc.Thumbprint != "" {
		errs = append(errs, field.Invalid(p.Child("thumbprint"), vc.Thumbprint, "set only one of caFile and thumbprint"))
	}
	if vc.Thumbprint != "" && !thumbprintRE.MatchString(vc.Thumbprint) {
		errs = append(errs, field.Invalid(p.Child("thumbprint"), vc.Thumbprint, "must be a SHA-1 or SHA-256 fingerprint as hex pairs separated by colons, e.g. 4F:7A:...:C2"))
	}
	vc.Thumbprint = strings.ToUpper(vc.Thumbprint)
	vc.CAFile = config.ResolveFile(dir, vc.CAFile)
	return errs
}

// parseServer turns "vc", "vc:443" or "https://vc/sdk" into the SDK URL.
func parseServer(s string) (*url.URL, error) {
	if strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("set server to the vCenter's host name or URL, e.g. vcenter.example.com")
	}
	if !strings.Contains(s, "://") {
		s = "https://" + s
	}
	u, err := url.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("not a host name or URL: %w", err)
	}
	if u.Scheme != "https" {
		// Login sends the password in the request body: only over TLS.
		return nil, fmt.Errorf("scheme must be https, not %q: the login sends the password, so plain http is refused; write https://%s or just the host", u.Scheme, u.Host)
	}
	if u.Host == "" || u.User != nil {
		return nil, fmt.Errorf("must be a host name or URL without credentials, e.g. vcenter.example.com")
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/sdk"
	}
	return u, nil
}

// Validate checks the rules (p is their place in the config, for the
// errors) and parses their subnets. ParseSection calls it; rules built
// otherwise must pass it before they choose addresses.
func (a *AddressRules) Validate(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	a.internal, errs = parseCIDRs(p.Child("internalSubnets"), a.InternalSubnets, errs)
	a.external, errs = parseCIDRs(p.Child("externalSubnets"), a.ExternalSubnets, errs)
	a.exclude, errs = parseCIDRs(p.Child("excludeSubnets"), a.ExcludeSubnets, errs)
	seen := map[string]bool{}
	for i, f := range a.IPFamilies {
		fp := p.Child("ipFamilies").Index(i)
		switch {
		case f != FamilyIPv4 && f != FamilyIPv6:
			errs = append(errs, field.NotSupported(fp, f, []string{FamilyIPv4, FamilyIPv6}))
		case seen[f]:
			errs = append(errs, field.Duplicate(fp, f))
		}
		seen[f] = true
	}
	return errs
}

func parseCIDRs(p *field.Path, in []string, errs field.ErrorList) ([]*net.IPNet, field.ErrorList) {
	out := make([]*net.IPNet, 0, len(in))
	for i, s := range in {
		_, n, err := net.ParseCIDR(s)
		if err != nil {
			errs = append(errs, field.Invalid(p.Index(i), s, "must be a CIDR, e.g. 10.0.0.0/16"))
			continue
		}
		out = append(out, n)
	}
	return out, errs
}

// LoadBalancersMissing tells the config's check of loadBalancer.defaultBackend
// and classes (config.LoadBalancerOffer) that vSphere offers no load
// balancers.
func (s *Settings) LoadBalancersMissing(*field.Path) string {
	return "vSphere backends offer no load balancers"
}
