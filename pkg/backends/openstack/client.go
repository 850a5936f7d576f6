package openstack

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	gcopenstack "github.com/gophercloud/gophercloud/v2/openstack"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/component-base/metrics"
	"sigs.k8s.io/yaml"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/cloudapi"
)

// userAgent is prepended to gophercloud's User-Agent.
const userAgent = "multicloud-ccm"

// computeMicroversion makes servers carry their flavor's name
// (flavor.original_name), so no per-server flavor lookup is needed.
const computeMicroversion = "2.47"

// requestTimeout bounds every HTTP request to OpenStack.
const requestTimeout = 30 * time.Second

// serviceClients are the three OpenStack services the backend calls.
type serviceClients struct {
	compute      *gophercloud.ServiceClient
	computeErr   error
	loadBalancer *gophercloud.ServiceClient
	network      *gophercloud.ServiceClient
	// keyManager is Barbican, when the catalog or endpoints.keyManager has
	// it: TLS container references are checked there.
	keyManager *gophercloud.ServiceClient
}

// countingTransport counts each request to an OpenStack service (Keystone
// and version documents excluded) in apiRequests, by the service whose
// endpoint the URL is under: reads are GET and HEAD, writes the rest.
type countingTransport struct {
	next    http.RoundTripper
	backend string
	// budget, when set, is told the services' endpoints with the counters.
	budget *cloudapi.Transport
	// services are the resolved endpoints, set once logged in.
	services atomic.Pointer[[]serviceCounters]
}

// serviceCounters are one service's endpoint and metric children.
type serviceCounters struct {
	endpoint      string
	reads, writes metrics.CounterMetric
}

// RoundTrip counts and forwards the request. It is also the guard of the
// read-only mode (backends.WithDryRun): under a dry run, a request to an
// OpenStack service (Keystone's logins excepted) other than GET or HEAD is
// refused before it is sent.
func (t *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if services := t.services.Load(); services != nil {
		u := r.URL.String()
		for _, s := range *services {
			if !strings.HasPrefix(u, s.endpoint) {
				continue
			}
			if r.Method == http.MethodGet || r.Method == http.MethodHead {
				s.reads.Inc()
				break
			}
			if err := backends.RefuseInDryRun(r.Context(), r.Method+" "+r.URL.Path); err != nil {
				return nil, err
			}
			resp, err := t.next.RoundTrip(r)
			if !backends.Refused(err) { // a write the mutation gate refused was not sent
				s.writes.Inc()
			}
			return resp, err
		}
	}
	return t.next.RoundTrip(r)
}

// count starts counting the requests to the services of sc.
func (t *countingTransport) count(sc *serviceClients) {
	var services []serviceCounters
	for _, c := range []struct {
		service string
		client  *gophercloud.ServiceClient
	}{{"compute", sc.compute}, {"load-balancer", sc.loadBalancer}, {"network", sc.network}, {"key-manager", sc.keyManager}} {
		if c.client != nil {
			services = append(services, serviceCounters{
				endpoint: c.client.Endpoint,
				reads:    apiRequests.WithLabelValues(t.backend, c.service, "read"),
				writes:   apiRequests.WithLabelValues(t.backend, c.service, "write"),
			})
		}
	}
	t.services.Store(&services)
	if t.budget != nil {
		var eps []cloudapi.Endpoint
		for _, c := range []struct {
			service string
			client  *gophercloud.ServiceClient
		}{{"compute", sc.compute}, {"load-balancer", sc.loadBalancer}, {"network", sc.network}, {"key-manager", sc.keyManager}} {
			if c.client != nil {
				eps = append(eps, cloudapi.Endpoint{Prefix: c.client.Endpoint, API: c.service})
			}
		}
		t.budget.SetEndpoints(eps)
	}
}

// connector logs in lazily: a cloud unreachable at start-up makes calls fail
// later, it does not stop the CCM from starting.
type connector struct {
	settings *Settings
	counter  *countingTransport
	http     *http.Client
	mu       sync.Mutex
	clients  *serviceClients
}

// newConnector returns the connector of backend's settings; its requests
// are counted in apiRequests under the backend's name.
func newConnector(backend string, s *Settings) (*connector, error) {
	tr, err := transport(s)
	if err != nil {
		return nil, err
	}
	budget := &cloudapi.Transport{Next: tr, Budget: cloudapi.NewBudget(backend, s.RateLimits, openstackBudgetDefaults), Session: keystoneSession}
	counter := &countingTransport{next: budget, backend: backend, budget: budget}
	return &connector{settings: s, counter: counter, http: &http.Client{Timeout: requestTimeout, Transport: counter}}, nil
}

// keystoneSession tells Keystone's token requests (a login, v3's
// /auth/tokens or v2.0's /tokens; a token's revocation): they change only
// the client's own session, and pass the mutation gate closed, so that a
// standby replica logs in for its reads.
func keystoneSession(r *http.Request) bool {
	p := strings.TrimSuffix(r.URL.Path, "/")
	return strings.HasSuffix(p, "/auth/tokens") || strings.HasSuffix(p, "/v2.0/tokens")
}

// openstackBudgetDefaults: OpenStack publishes no API rate (a deployment
// sets its own, often in a proxy answering 429), so no service is limited
// unless rateLimits says so; every request is counted
// (multicloud_ccm_cloud_api_calls_total) and a 429, or a 503 with
// Retry-After, is retried after the time asked for.
var openstackBudgetDefaults = map[string]cloudapi.RateLimit{
	"compute":       {QPS: -1, QPSWrite: -1},
	"load-balancer": {QPS: -1, QPSWrite: -1},
	"network":       {QPS: -1, QPSWrite: -1},
	"key-manager":   {QPS: -1, QPSWrite: -1},
}

// transport builds the HTTP transport with the configured CA and TLS mode.
func transport(s *Settings) (*http.Transport, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tlsCfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if s.CAFile != "" {
		pem, err := os.ReadFile(s.CAFile)
		if err != nil {
			return nil, fmt.Errorf("reading caFile: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("caFile %s holds no PEM certificate", s.CAFile)
		}
		tlsCfg.RootCAs = pool
	}
	tlsCfg.InsecureSkipVerify = s.Insecure //nolint:gosec // Only when the config says insecure: true explicitly.
	tr.TLSClientConfig = tlsCfg
	return tr, nil
}

// get returns the service clients, logging in on first use.
func (c *connector) get(ctx context.Context) (*serviceClients, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.clients != nil {
		return c.clients, nil
	}
	sc, err := c.connect(ctx)
	if err != nil {
		return nil, err
	}
	c.counter.count(sc)
	c.clients = sc
	return sc, nil
}

func (c *connector) connect(ctx context.Context) (*serviceClients, error) {
	ao, eo, err := c.authOptions()
	if err != nil {
		return nil, err
	}
	ao.AllowReauth = true
	provider, err := gcopenstack.NewClient(ao.IdentityEndpoint)
	if err != nil {
		return nil, fmt.Errorf("auth URL: %w", err)
	}
	provider.HTTPClient = *c.http
	provider.UserAgent.Prepend(userAgent)
	if err := gcopenstack.Authenticate(ctx, provider, ao); err != nil {
		return nil, fmt.Errorf("logging in to Keystone at %s: %w", ao.IdentityEndpoint, err)
	}
	return c.serviceClients(provider, eo)
}

// serviceClients resolves each service from the catalog unless overridden.
// A service missing from both is an error only when it is used.
func (c *connector) serviceClients(p *gophercloud.ProviderClient, eo gophercloud.EndpointOpts) (*serviceClients, error) {
	e := c.settings.Endpoints
	sc := &serviceClients{}
	var err error
	if sc.compute, err = serviceClient(p, e.Compute, "compute", "", func() (*gophercloud.ServiceClient, error) { return gcopenstack.NewComputeV2(p, eo) }); err != nil {
		sc.computeErr = fmt.Errorf("compute endpoint: %w (set endpoints.compute or add Nova to the catalog)", err)
		sc.compute = nil
	} else {
		sc.compute.Microversion = computeMicroversion
	}
	if *c.settings.LoadBalancer.Enabled {
		if sc.loadBalancer, err = serviceClient(p, e.LoadBalancer, "load-balancer", "v2.0/", func() (*gophercloud.ServiceClient, error) { return gcopenstack.NewLoadBalancerV2(p, eo) }); err != nil {
			return nil, fmt.Errorf("load-balancer endpoint: %w (set endpoints.loadBalancer or add Octavia to the catalog)", err)
		}
	}
	if sc.network, err = serviceClient(p, e.Network, "network", "v2.0/", func() (*gophercloud.ServiceClient, error) { return gcopenstack.NewNetworkV2(p, eo) }); err != nil {
		if c.settings.Routes.RouterID != "" {
			return nil, fmt.Errorf("network endpoint: %w (set endpoints.network or add Neutron to the catalog)", err)
		}
		sc.network = nil
	}
	if sc.keyManager, err = serviceClient(p, e.KeyManager, "key-manager", "v1/", func() (*gophercloud.ServiceClient, error) { return gcopenstack.NewKeyManagerV1(p, eo) }); err != nil {
		sc.keyManager = nil
	}
	return sc, nil
}

// serviceClient returns the catalog's client of a service, or one for the
// override URL. The type matters: gophercloud sends microversion headers by
// service type.
func serviceClient(p *gophercloud.ProviderClient, override, typ, version string, fromCatalog func() (*gophercloud.ServiceClient, error)) (*gophercloud.ServiceClient, error) {
	if override == "" {
		return fromCatalog()
	}
	base := strings.TrimSuffix(override, "/") + "/"
	return &gophercloud.ServiceClient{ProviderClient: p, Endpoint: base, ResourceBase: base + version, Type: typ}, nil
}

// authOptions builds gophercloud's options from the config, resolving
// secrets.
func (c *connector) authOptions() (gophercloud.AuthOptions, gophercloud.EndpointOpts, error) {
	a := c.settings.Auth
	eo := gophercloud.EndpointOpts{Region: c.settings.Region, Availability: gophercloud.AvailabilityPublic}
	if a.Cloud != "" {
		return cloudsOptions(a, eo)
	}
	ao := gophercloud.AuthOptions{
		IdentityEndpoint: a.AuthURL, Username: a.Username, UserID: a.UserID,
		DomainName: a.UserDomainName, DomainID: a.UserDomainID,
		ApplicationCredentialID: a.ApplicationCredentialID, ApplicationCredentialName: a.ApplicationCredentialName,
	}
	if a.ApplicationCredentialSecret.IsSet() {
		secret, err := a.ApplicationCredentialSecret.Resolve()
		if err != nil {
			return ao, eo, fmt.Errorf("auth.applicationCredentialSecret: %w", err)
		}
		ao.ApplicationCredentialSecret = secret
		return ao, eo, nil
	}
	pw, err := a.Password.Resolve()
	if err != nil {
		return ao, eo, fmt.Errorf("auth.password: %w", err)
	}
	ao.Password = pw
	ao.Scope = &gophercloud.AuthScope{ProjectName: a.ProjectName, ProjectID: a.ProjectID, DomainName: a.ProjectDomainName, DomainID: a.ProjectDomainID}
	if a.ProjectID != "" {
		ao.Scope.DomainName, ao.Scope.DomainID = "", ""
	}
	return ao, eo, nil
}

// cloudsYAML is the part of a clouds.yaml file the backend reads.
type cloudsYAML struct {
	Clouds map[string]struct {
		Auth struct {
			AuthURL                     string `json:"auth_url"`
			Username                    string `json:"username"`
			UserID                      string `json:"user_id"`
			Password                    string `json:"password"`
			ProjectName                 string `json:"project_name"`
			ProjectID                   string `json:"project_id"`
			UserDomainName              string `json:"user_domain_name"`
			UserDomainID                string `json:"user_domain_id"`
			ProjectDomainName           string `json:"project_domain_name"`
			ProjectDomainID             string `json:"project_domain_id"`
			DomainName                  string `json:"domain_name"`
			ApplicationCredentialID     string `json:"application_credential_id"`
			ApplicationCredentialName   string `json:"application_credential_name"`
			ApplicationCredentialSecret string `json:"application_credential_secret"`
		} `json:"auth"`
		RegionName string `json:"region_name"`
		Interface  string `json:"interface"`
	} `json:"clouds"`
}

// cloudsOptions reads one entry of a clouds.yaml file.
func cloudsOptions(a Auth, eo gophercloud.EndpointOpts) (gophercloud.AuthOptions, gophercloud.EndpointOpts, error) {
	var ao gophercloud.AuthOptions
	data, err := os.ReadFile(a.CloudsFile)
	if err != nil {
		return ao, eo, fmt.Errorf("auth.cloudsFile: %w", err)
	}
	var cy cloudsYAML
	if err := yaml.Unmarshal(data, &cy); err != nil {
		return ao, eo, fmt.Errorf("auth.cloudsFile %s: %w", a.CloudsFile, err)
	}
	c, ok := cy.Clouds[a.Cloud]
	if !ok {
		return ao, eo, fmt.Errorf("auth.cloud: %s has no cloud %q", a.CloudsFile, a.Cloud)
	}
	ca := c.Auth
	ao = gophercloud.AuthOptions{
		IdentityEndpoint: ca.AuthURL, Username: ca.Username, UserID: ca.UserID, Password: ca.Password,
		DomainName: firstNonEmpty(ca.UserDomainName, ca.DomainName), DomainID: ca.UserDomainID,
		ApplicationCredentialID: ca.ApplicationCredentialID, ApplicationCredentialName: ca.ApplicationCredentialName,
		ApplicationCredentialSecret: ca.ApplicationCredentialSecret,
	}
	if ca.ProjectName != "" || ca.ProjectID != "" {
		ao.Scope = &gophercloud.AuthScope{ProjectName: ca.ProjectName, ProjectID: ca.ProjectID,
			DomainName: firstNonEmpty(ca.ProjectDomainName, ca.DomainName), DomainID: ca.ProjectDomainID}
	}
	if eo.Region == "" {
		eo.Region = c.RegionName
	}
	if c.Interface == "internal" {
		eo.Availability = gophercloud.AvailabilityInternal
	}
	if ao.IdentityEndpoint == "" {
		return ao, eo, fmt.Errorf("auth.cloud: cloud %q in %s has no auth.auth_url", a.Cloud, a.CloudsFile)
	}
	if errs := validateURL(field.NewPath("clouds", a.Cloud, "auth", "auth_url"), ao.IdentityEndpoint); len(errs) > 0 {
		return gophercloud.AuthOptions{}, eo, fmt.Errorf("auth.cloudsFile %s: %w", a.CloudsFile, errs.ToAggregate())
	}
	return ao, eo, nil
}

func firstNonEmpty(v ...string) string {
	for _, s := range v {
		if s != "" {
			return s
		}
	}
	return ""
}
