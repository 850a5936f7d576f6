package openstack

import (
	"fmt"
	"maps"
	"net/url"
	"os"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends/openstack/osid"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/cloudapi"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/config"
)

// Settings is the `openstack` section of a backend in the cloud-config.
type Settings struct {
	// Auth says how the backend logs in to Keystone. Required.
	Auth Auth `json:"auth"`
	// Region is the OpenStack region (e.g. RegionOne). Required.
	Region string `json:"region,omitempty"`
	// CAFile is a PEM bundle trusted for every OpenStack endpoint.
	CAFile string `json:"caFile,omitempty"`
	// Insecure skips TLS verification. Only for test clouds; never implied.
	Insecure bool `json:"insecure,omitempty"`
	// Endpoints overrides service endpoints, so a full Keystone catalog is
	// not required.
	Endpoints Endpoints `json:"endpoints,omitempty"`
	// Instances holds settings for Nova servers.
	Instances InstanceSettings `json:"instances,omitempty"`
	// LoadBalancer holds settings for Octavia load balancers.
	LoadBalancer LoadBalancerSettings `json:"loadBalancer,omitempty"`
	// Routes holds settings for Neutron router routes.
	Routes RouteSettings `json:"routes,omitempty"`
	// RegionalProviderID makes new nodes' providerIDs openstack://<region>/<uuid>
	// instead of openstack:///<uuid>, as the upstream provider does with
	// OS_CCM_REGIONAL=true.
	RegionalProviderID bool `json:"regionalProviderID,omitempty"`
	// RateLimits are client-side API budgets by service (compute,
	// load-balancer, network, key-manager): qps and bucket for reads (GET,
	// HEAD), qpsWrite and bucketWrite for the rest. A service not listed,
	// or a rate left out, is not limited (docs/openstack.md, "API budget").
	RateLimits map[string]cloudapi.RateLimit `json:"rateLimits,omitempty"`
}

// Auth holds exactly one of: a clouds.yaml entry, an application
// credential, or a user name and password.
type Auth struct {
	// AuthURL is Keystone's URL, e.g. https://keystone.example.com:5000/v3.
	// Required unless Cloud is set.
	AuthURL string `json:"authURL,omitempty"`
	// CloudsFile is a clouds.yaml path (a mounted Secret). Used with Cloud.
	CloudsFile string `json:"cloudsFile,omitempty"`
	// Cloud is the entry of CloudsFile to use.
	Cloud string `json:"cloud,omitempty"`
	// ApplicationCredentialID identifies an application credential.
	ApplicationCredentialID string `json:"applicationCredentialID,omitempty"`
	// ApplicationCredentialName names an application credential (needs
	// Username or UserID).
	ApplicationCredentialName string `json:"applicationCredentialName,omitempty"`
	// ApplicationCredentialSecret is the application credential's secret.
	ApplicationCredentialSecret config.SecretRef `json:"applicationCredentialSecret,omitempty"`
	// Username logs in with a password (with UserDomainName or UserDomainID).
	Username string `json:"username,omitempty"`
	// UserID logs in with a password.
	UserID string `json:"userID,omitempty"`
	// Password is the user's password.
	Password config.SecretRef `json:"password,omitempty"`
	// UserDomainName is the user's domain name (default "Default").
	UserDomainName string `json:"userDomainName,omitempty"`
	// UserDomainID is the user's domain ID.
	UserDomainID string `json:"userDomainID,omitempty"`
	// ProjectName scopes the token (with ProjectDomainName/ID).
	ProjectName string `json:"projectName,omitempty"`
	// ProjectID scopes the token.
	ProjectID string `json:"projectID,omitempty"`
	// ProjectDomainName is the project's domain name (default "Default").
	ProjectDomainName string `json:"projectDomainName,omitempty"`
	// ProjectDomainID is the project's domain ID.
	ProjectDomainID string `json:"projectDomainID,omitempty"`
}

// Endpoints overrides the URLs the Keystone catalog would give.
type Endpoints struct {
	// Compute is Nova's URL including its version, e.g. https://nova:8774/v2.1/.
	Compute string `json:"compute,omitempty"`
	// LoadBalancer is Octavia's URL without version, e.g. https://octavia:9876/.
	LoadBalancer string `json:"loadBalancer,omitempty"`
	// Network is Neutron's URL without version, e.g. https://neutron:9696/.
	Network string `json:"network,omitempty"`
	// KeyManager is Barbican's URL without version, e.g.
	// https://barbican:9311/, where TLS container references are checked.
	KeyManager string `json:"keyManager,omitempty"`
}

// InstanceSettings says how servers map to nodes.
type InstanceSettings struct {
	// InternalNetworks, when set, are the only networks whose fixed
	// addresses become InternalIP. Default: every network not in
	// PublicNetworks.
	InternalNetworks []string `json:"internalNetworks,omitempty"`
	// PublicNetworks are networks whose fixed addresses are ExternalIP.
	PublicNetworks []string `json:"publicNetworks,omitempty"`
	// CacheTTLSeconds is how long a bulk server listing serves lookups
	// (default 60).
	CacheTTLSeconds int `json:"cacheTTLSeconds,omitempty"`
	// PageSize is the page size of the bulk server listing (default 1000).
	PageSize int `json:"pageSize,omitempty"`
}

// LoadBalancerSettings are defaults for Octavia load balancers; most can be
// overridden per Service by annotation.
type LoadBalancerSettings struct {
	// Enabled turns load balancers on (default true).
	Enabled *bool `json:"enabled,omitempty"`
	// VIPSubnetID is the subnet of the load balancer's address.
	VIPSubnetID string `json:"vipSubnetID,omitempty"`
	// VIPNetworkID is the network of the load balancer's address (when no
	// VIPSubnetID).
	VIPNetworkID string `json:"vipNetworkID,omitempty"`
	// MemberSubnetID is the subnet members are reached through. Default:
	// the VIP subnet.
	MemberSubnetID string `json:"memberSubnetID,omitempty"`
	// FloatingNetworkID is the external network floating IPs come from.
	// Empty: no floating IP unless a Service asks for one by annotation.
	FloatingNetworkID string `json:"floatingNetworkID,omitempty"`
	// FloatingSubnetID is the floating network's subnet floating IPs come
	// from (cloud-provider-openstack's floating-subnet-id). Default:
	// Neutron's choice.
	FloatingSubnetID string `json:"floatingSubnetID,omitempty"`
	// FloatingSubnet picks the floating subnet by name when no
	// FloatingSubnetID is set: a name or glob (`*`, `?`), or "~" and a
	// regular expression; "!" first negates it (OCCM's floating-subnet).
	FloatingSubnet string `json:"floatingSubnet,omitempty"`
	// FloatingSubnetTags picks the floating subnet by tags when no
	// FloatingSubnetID is set: comma-separated, any of them present; "&"
	// first: all of them; "!" first: negated (OCCM's floating-subnet-tags).
	FloatingSubnetTags string `json:"floatingSubnetTags,omitempty"`
	// TLSContainerStore is where default-tls-container-ref points:
	// "barbican" (default: the reference is a Barbican container or secret
	// URL, checked there before a listener uses it) or "external" (any
	// string Octavia's certificate manager understands, not checked), as
	// cloud-provider-openstack's container-store.
	TLSContainerStore string `json:"tlsContainerStore,omitempty"`
	// MaxSharedLB is the most Services one load balancer serves when
	// Services share it through the load-balancer-id annotation (default 2,
	// cloud-provider-openstack's max-shared-lb).
	MaxSharedLB int `json:"maxSharedLB,omitempty"`
	// Classes are named sets of network settings a Service picks with the
	// loadbalancer.openstack.org/class annotation (OCCM's
	// [LoadBalancerClass "name"] sections).
	Classes map[string]LoadBalancerClass `json:"classes,omitempty"`
	// Provider is the Octavia provider (default: Octavia's default).
	Provider string `json:"provider,omitempty"`
	// FlavorID is the Octavia flavor (default: none).
	FlavorID string `json:"flavorID,omitempty"`
	// AvailabilityZone is the Octavia availability zone (default: none).
	AvailabilityZone string `json:"availabilityZone,omitempty"`
	// CreateMonitor creates health monitors (default true).
	CreateMonitor *bool `json:"createMonitor,omitempty"`
	// MonitorDelaySeconds is the health monitor interval (default 5).
	MonitorDelaySeconds int `json:"monitorDelaySeconds,omitempty"`
	// MonitorTimeoutSeconds is the health monitor timeout (default 3).
	MonitorTimeoutSeconds int `json:"monitorTimeoutSeconds,omitempty"`
	// MonitorMaxRetries is how many successes mark a member up (default 1,
	// cloud-provider-openstack's monitor-max-retries default).
	MonitorMaxRetries int `json:"monitorMaxRetries,omitempty"`
	// MonitorMaxRetriesDown is how many failures mark a member down
	// (default 3).
	MonitorMaxRetriesDown int `json:"monitorMaxRetriesDown,omitempty"`
}

// LoadBalancerClass is a named set of network settings. A Service's class
// takes precedence over its floating-network-id, floating-subnet*,
// subnet-id and network-id annotations (member-subnet-id annotation wins
// over the class's), as with cloud-provider-openstack.
type LoadBalancerClass struct {
	// FloatingNetworkID is the external network of the floating IP.
	FloatingNetworkID string `json:"floatingNetworkID,omitempty"`
	// FloatingSubnetID is the floating network's subnet of the floating IP.
	FloatingSubnetID string `json:"floatingSubnetID,omitempty"`
	// FloatingSubnet picks the floating subnet by name pattern (as
	// loadBalancer.floatingSubnet).
	FloatingSubnet string `json:"floatingSubnet,omitempty"`
	// FloatingSubnetTags picks the floating subnet by tags (as
	// loadBalancer.floatingSubnetTags).
	FloatingSubnetTags string `json:"floatingSubnetTags,omitempty"`
	// VIPNetworkID is the network of the VIP.
	VIPNetworkID string `json:"vipNetworkID,omitempty"`
	// VIPSubnetID is the subnet of the VIP.
	VIPSubnetID string `json:"vipSubnetID,omitempty"`
	// MemberSubnetID is the subnet members are reached through.
	MemberSubnetID string `json:"memberSubnetID,omitempty"`
}

// floatingSubnet is the class's floating subnet choice.
func (c *LoadBalancerClass) floatingSubnet(name string) floatingSubnetSpec {
	return floatingSubnetSpec{id: c.FloatingSubnetID, name: c.FloatingSubnet, tags: c.FloatingSubnetTags, source: "class " + name}
}

// RouteSettings turns on routes through a Neutron router.
type RouteSettings struct {
	// RouterID is the Neutron router that gets pod CIDR routes. Empty: the
	// backend offers no routes.
	RouterID string `json:"routerID,omitempty"`
}

// uuidRE matches an OpenStack resource ID (osid.UUIDRE).
var uuidRE = osid.UUIDRE

// parseSection is the config.SectionParser of the openstack type.
func parseSection(raw []byte, path *field.Path, dir string) (any, field.ErrorList) {
	s := &Settings{}
	errs := config.DecodeSection(raw, path, s)
	s.setDefaults(dir)
	if errs = append(errs, s.validate(path, dir)...); len(errs) > 0 {
		return nil, errs
	}
	return s, nil
}

func (s *Settings) setDefaults(dir string) {
	a := &s.Auth
	if a.Cloud == "" {
		if a.UserDomainName == "" && a.UserDomainID == "" {
			a.UserDomainName = "Default"
		}
		if a.ProjectDomainName == "" && a.ProjectDomainID == "" && (a.ProjectName != "") {
			a.ProjectDomainName = "Default"
		}
	}
	a.CloudsFile = config.ResolveFile(dir, a.CloudsFile)
	s.CAFile = config.ResolveFile(dir, s.CAFile)
	if s.Instances.CacheTTLSeconds == 0 {
		s.Instances.CacheTTLSeconds = 60
	}
	if s.Instances.PageSize == 0 {
		s.Instances.PageSize = 1000
	}
	s.LoadBalancer.setDefaults()
}

func (l *LoadBalancerSettings) setDefaults() {
	t := true
	if l.Enabled == nil {
		l.Enabled = &t
	}
	if l.CreateMonitor == nil {
		l.CreateMonitor = &t
	}
	if l.MonitorDelaySeconds == 0 {
		l.MonitorDelaySeconds = 5
	}
	if l.MonitorTimeoutSeconds == 0 {
		l.MonitorTimeoutSeconds = 3
	}
	if l.MonitorMaxRetries == 0 {
		l.MonitorMaxRetries = 1
	}
	if l.MonitorMaxRetriesDown == 0 {
		l.MonitorMaxRetriesDown = 3
	}
	if l.MaxSharedLB == 0 {
		l.MaxSharedLB = 2
	}
	if l.TLSContainerStore == "" {
		l.TLSContainerStore = tlsStoreBarbican
	}
}

func (s *Settings) validate(p *field.Path, dir string) field.ErrorList {
	errs := s.Auth.validate(p.Child("auth"), dir)
	errs = append(errs, cloudapi.ValidateLimits(s.RateLimits, openstackBudgetDefaults, p.Child("rateLimits"))...)
	if s.Region == "" {
		errs = append(errs, field.Required(p.Child("region"), "set the OpenStack region, e.g. RegionOne"))
	}
	if s.CAFile != "" {
		if _, err := os.Stat(s.CAFile); err != nil {
			errs = append(errs, field.Invalid(p.Child("caFile"), s.CAFile, "cannot read the CA file: "+err.Error()))
		}
	}
	errs = append(errs, validateURL(p.Child("endpoints", "compute"), s.Endpoints.Compute)...)
	errs = append(errs, validateURL(p.Child("endpoints", "loadBalancer"), s.Endpoints.LoadBalancer)...)
	errs = append(errs, validateURL(p.Child("endpoints", "network"), s.Endpoints.Network)...)
	errs = append(errs, validateURL(p.Child("endpoints", "keyManager"), s.Endpoints.KeyManager)...)
	errs = append(errs, s.Instances.validate(p.Child("instances"))...)
	errs = append(errs, s.LoadBalancer.validate(p.Child("loadBalancer"))...)
	errs = append(errs, validateUUID(p.Child("routes", "routerID"), s.Routes.RouterID)...)
	return errs
}

func (a *Auth) validate(p *field.Path, dir string) field.ErrorList {
	methods := 0
	var errs field.ErrorList
	if a.Cloud != "" || a.CloudsFile != "" {
		methods++
		errs = append(errs, a.validateClouds(p)...)
	}
	if a.ApplicationCredentialID != "" || a.ApplicationCredentialName != "" || a.ApplicationCredentialSecret.IsSet() {
		methods++
		errs = append(errs, a.validateAppCred(p, dir)...)
	}
	if a.Password.IsSet() {
		methods++
		errs = append(errs, a.validatePassword(p, dir)...)
	}
	switch methods {
	case 0:
		errs = append(errs, field.Required(p, "set one way to log in: cloud + cloudsFile, applicationCredentialID + applicationCredentialSecret, or username + password"))
	case 1:
	default:
		errs = append(errs, field.Invalid(p, "", "set only one way to log in: cloud/cloudsFile, applicationCredential*, or username/password"))
	}
	if a.Cloud == "" {
		errs = append(errs, validateURL(p.Child("authURL"), a.AuthURL)...)
		if a.AuthURL == "" {
			errs = append(errs, field.Required(p.Child("authURL"), "set Keystone's URL, e.g. https://keystone.example.com:5000/v3"))
		}
	}
	return errs
}

func (a *Auth) validateClouds(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if a.Cloud == "" {
		errs = append(errs, field.Required(p.Child("cloud"), "name the clouds.yaml entry to use"))
	}
	if a.CloudsFile == "" {
		errs = append(errs, field.Required(p.Child("cloudsFile"), "set the path of the clouds.yaml file (a mounted Secret)"))
	}
	return errs
}

func (a *Auth) validateAppCred(p *field.Path, dir string) field.ErrorList {
	errs := a.ApplicationCredentialSecret.Validate(p.Child("applicationCredentialSecret"), dir, true)
	if a.ApplicationCredentialID == "" && a.ApplicationCredentialName == "" {
		errs = append(errs, field.Required(p.Child("applicationCredentialID"), "set the application credential's ID (or its name with username)"))
	}
	if a.ApplicationCredentialID == "" && a.ApplicationCredentialName != "" && a.Username == "" && a.UserID == "" {
		errs = append(errs, field.Required(p.Child("username"), "an application credential given by name needs username or userID"))
	}
	return errs
}

func (a *Auth) validatePassword(p *field.Path, dir string) field.ErrorList {
	errs := a.Password.Validate(p.Child("password"), dir, true)
	if a.Username == "" && a.UserID == "" {
		errs = append(errs, field.Required(p.Child("username"), "set username (or userID) to log in with a password"))
	}
	if a.ProjectName == "" && a.ProjectID == "" {
		errs = append(errs, field.Required(p.Child("projectName"), "set projectName (or projectID) to scope the token"))
	}
	return errs
}

func (i *InstanceSettings) validate(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if i.CacheTTLSeconds < 0 {
		errs = append(errs, field.Invalid(p.Child("cacheTTLSeconds"), i.CacheTTLSeconds, "must be positive"))
	}
	if i.PageSize < 1 {
		errs = append(errs, field.Invalid(p.Child("pageSize"), i.PageSize, "must be at least 1"))
	}
	return errs
}

func (l *LoadBalancerSettings) validate(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, validateUUID(p.Child("vipSubnetID"), l.VIPSubnetID)...)
	errs = append(errs, validateUUID(p.Child("vipNetworkID"), l.VIPNetworkID)...)
	errs = append(errs, validateUUID(p.Child("memberSubnetID"), l.MemberSubnetID)...)
	errs = append(errs, validateUUID(p.Child("floatingNetworkID"), l.FloatingNetworkID)...)
	errs = append(errs, validateUUID(p.Child("flavorID"), l.FlavorID)...)
	errs = append(errs, validateFloatingSubnet(p, l.FloatingSubnetID, l.FloatingSubnet, l.FloatingSubnetTags)...)
	if l.TLSContainerStore != tlsStoreBarbican && l.TLSContainerStore != tlsStoreExternal {
		errs = append(errs, field.NotSupported(p.Child("tlsContainerStore"), l.TLSContainerStore, []string{tlsStoreBarbican, tlsStoreExternal}))
	}
	for _, name := range slices.Sorted(maps.Keys(l.Classes)) {
		c := l.Classes[name]
		errs = append(errs, c.validate(p.Child("classes").Key(name))...)
	}
	if *l.Enabled && l.VIPSubnetID == "" && l.VIPNetworkID == "" {
		errs = append(errs, field.Required(p.Child("vipSubnetID"), "set vipSubnetID or vipNetworkID (where load balancer addresses come from), or set enabled: false"))
	}
	for name, v := range map[string]int{"monitorDelaySeconds": l.MonitorDelaySeconds, "monitorTimeoutSeconds": l.MonitorTimeoutSeconds, "monitorMaxRetries": l.MonitorMaxRetries, "monitorMaxRetriesDown": l.MonitorMaxRetriesDown} {
		if v < 1 {
			errs = append(errs, field.Invalid(p.Child(name), v, "must be at least 1"))
		}
	}
	if l.MaxSharedLB < 1 {
		errs = append(errs, field.Invalid(p.Child("maxSharedLB"), l.MaxSharedLB, "must be at least 1 (1: no sharing)"))
	}
	if l.MonitorTimeoutSeconds > l.MonitorDelaySeconds {
		errs = append(errs, field.Invalid(p.Child("monitorTimeoutSeconds"), l.MonitorTimeoutSeconds, "must not exceed monitorDelaySeconds"))
	}
	return errs
}

func (c *LoadBalancerClass) validate(p *field.Path) field.ErrorList {
	if *c == (LoadBalancerClass{}) {
		return field.ErrorList{field.Required(p, "a class sets at least one of floatingNetworkID, floatingSubnetID, floatingSubnet, floatingSubnetTags, vipNetworkID, vipSubnetID, memberSubnetID")}
	}
	var errs field.ErrorList
	for _, f := range [][2]string{{"floatingNetworkID", c.FloatingNetworkID}, {"vipNetworkID", c.VIPNetworkID}, {"vipSubnetID", c.VIPSubnetID}, {"memberSubnetID", c.MemberSubnetID}} {
		errs = append(errs, validateUUID(p.Child(f[0]), f[1])...)
	}
	return append(errs, validateFloatingSubnet(p, c.FloatingSubnetID, c.FloatingSubnet, c.FloatingSubnetTags)...)
}

// validateFloatingSubnet checks a floating subnet ID, name pattern and tags.
func validateFloatingSubnet(p *field.Path, id, name, tags string) field.ErrorList {
	errs := validateUUID(p.Child("floatingSubnetID"), id)
	if err := validateSubnetSpec(name, ""); err != nil {
		errs = append(errs, field.Invalid(p.Child("floatingSubnet"), name, err.Error()))
	}
	if err := validateSubnetSpec("", tags); err != nil {
		errs = append(errs, field.Invalid(p.Child("floatingSubnetTags"), tags, err.Error()))
	}
	return errs
}

// validateURL accepts an http or https URL with a host and no user
// information. A URL carrying user:password is refused without echoing it:
// the password would sit in a ConfigMap and in every log of the error.
func validateURL(p *field.Path, v string) field.ErrorList {
	if v == "" {
		return nil
	}
	u, err := url.Parse(v)
	if strings.Contains(v, "@") && (err != nil || u.User != nil) {
		return field.ErrorList{field.Invalid(p, redactURL(v), "must not carry a user name or password: set auth.username and auth.password (a file or environment variable), or use clouds.yaml")}
	}
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return field.ErrorList{field.Invalid(p, v, "must be an http or https URL, e.g. https://openstack.example.com:5000/v3")}
	}
	return nil
}

// redactURL hides everything between the scheme and the last "@" of a URL
// that may carry user information.
func redactURL(v string) string {
	at := strings.LastIndex(v, "@")
	if at < 0 {
		return v
	}
	scheme, _, ok := strings.Cut(v[:at], "://")
	if !ok {
		return "<redacted>" + v[at:]
	}
	return scheme + "://<redacted>" + v[at:]
}

func validateUUID(p *field.Path, v string) field.ErrorList {
	if v == "" || uuidRE.MatchString(v) {
		return nil
	}
	return field.ErrorList{field.Invalid(p, v, fmt.Sprintf("must be an OpenStack ID (a UUID such as %s)", "4ef2a1d3-8a4c-4a8b-9a0f-1b2c3d4e5f60"))}
}

// LoadBalancersMissing tells the config's check of loadBalancer.defaultBackend
// and classes (config.LoadBalancerOffer) that a backend whose load balancers
// are disabled offers none.
func (s *Settings) LoadBalancersMissing(section *field.Path) string {
	if s == nil || s.LoadBalancer.Enabled == nil || *s.LoadBalancer.Enabled {
		return ""
	}
	return "set " + section.Child("loadBalancer", "enabled").String() + " to true"
}
