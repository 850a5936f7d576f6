package planswitch

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/gophercloud/gophercloud/v2"
	gcopenstack "github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/loadbalancers"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

// The OpenStack side of a world: the real Keystone + Octavia that
// hack/openstack/up.sh starts (make openstack-up; its environment in
// _output/openstack.env), Octavia reached through octaviaRecorder, which
// attributes every mutating call to the Service whose load balancer it
// changes. Worlds get an OpenStack backend "os" when the stack's
// environment is set; the cases naming it need it (testutil.Unavailable
// without it: a skip on a developer's machine, a failure in CI).

// osStack is the stack's credentials, the world's recorders and its piece
// of Neutron (neutron_test.go).
type osStack struct {
	authURL, username, passwordFile, project, region string
	// nova is the real Nova (its instances: nodes with no providerID are
	// asked about).
	nova    string
	rec     *octaviaRecorder
	neutron *neutronRecorder
	client  *gophercloud.ServiceClient
	network *gophercloud.ServiceClient
	tp      *osTopology
}

// openStack returns the stack of the environment, with the world's piece
// of Neutron made (named after clusterID), or nil when the environment is
// not set. Octavia is its API with the real network driver
// (OCTAVIA_NEUTRON_ENDPOINT), so that VIP ports are Neutron's.
func openStack(t *testing.T, clusterID string) *osStack {
	t.Helper()
	s := &osStack{authURL: os.Getenv("OS_AUTH_URL"), username: os.Getenv("OS_USERNAME"), passwordFile: os.Getenv("OS_PASSWORD_FILE"),
		project: os.Getenv("OS_PROJECT_NAME"), region: os.Getenv("OS_REGION_NAME"), nova: os.Getenv("NOVA_ENDPOINT")}
	octavia, neutron := os.Getenv("OCTAVIA_NEUTRON_ENDPOINT"), os.Getenv("NEUTRON_ENDPOINT")
	if s.authURL == "" || s.passwordFile == "" || octavia == "" || neutron == "" || s.nova == "" || os.Getenv("OCTAVIA_E2E") == "" || os.Getenv("NEUTRON_E2E") == "" {
		return nil
	}
	pw, err := os.ReadFile(s.passwordFile)
	if err != nil {
		t.Fatal(err)
	}
	p, err := gcopenstack.AuthenticatedClient(t.Context(), gophercloud.AuthOptions{
		IdentityEndpoint: s.authURL, Username: s.username, Password: strings.TrimSpace(string(pw)), DomainName: "Default",
		Scope: &gophercloud.AuthScope{ProjectName: s.project, DomainName: "Default"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if s.client, err = gcopenstack.NewLoadBalancerV2(p, gophercloud.EndpointOpts{Region: s.region}); err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(octavia)
	if err != nil {
		t.Fatal(err)
	}
	s.rec = &octaviaRecorder{upstream: u, proxy: httputil.NewSingleHostReverseProxy(u)}
	srv := httptest.NewServer(s.rec)
	t.Cleanup(srv.Close)
	s.rec.url = srv.URL
	s.network = neutronClient(p, neutron)
	s.neutron = newNeutronRecorder(t, neutron, s.client, clusterID)
	s.topology(t, "mccm-"+clusterID)
	return s
}

// yaml is the world's OpenStack backend.
func (s *osStack) yaml() string {
	return fmt.Sprintf(`- name: os
  type: openstack
  openstack:
    auth: {authURL: %q, username: %q, password: {file: %q}, projectName: %q}
    region: %q
    endpoints: {loadBalancer: %q, compute: %q, network: %q}
    loadBalancer: {vipSubnetID: %s, floatingNetworkID: %s}
`, s.authURL, s.username, s.passwordFile, s.project, s.region, s.rec.url, s.nova, s.neutron.url, s.tp.subnet, s.tp.external)
}

// lbsOf lists the Octavia load balancers of the world's cluster tagged
// for the Service (all of the cluster's for name ""), by ID with their
// VIP.
func (s *osStack) lbsOf(ctx context.Context, cluster, name string) (map[string]string, error) {
	tags := []string{"mccm-cluster=" + cluster}
	if name != "" {
		tags = append(tags, "mccm-service="+ns+"/"+name)
	}
	pages, err := loadbalancers.List(s.client, loadbalancers.ListOpts{Tags: tags}).AllPages(ctx)
	if err != nil {
		return nil, err
	}
	lbs, err := loadbalancers.ExtractLoadBalancers(pages)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, lb := range lbs {
		out[lb.ID] = lb.VipAddress
	}
	return out, nil
}

// cleanUp deletes the cluster's load balancers (the stack is shared).
func (s *osStack) cleanUp(t *testing.T, cluster string) {
	ctx := context.Background()
	lbs, err := s.lbsOf(ctx, cluster, "")
	if err != nil {
		t.Logf("listing the world's Octavia load balancers: %v", err)
		return
	}
	for id := range lbs {
		if err := loadbalancers.Delete(ctx, s.client, id, loadbalancers.DeleteOpts{Cascade: true}).ExtractErr(); err != nil && !gophercloud.ResponseCodeIs(err, http.StatusNotFound) {
			t.Logf("deleting Octavia load balancer %s: %v", id, err)
		}
	}
}

// osCall is one mutating Octavia call: "METHOD collection" (POST
// listeners, PUT members, DELETE loadbalancers, ...), the Service
// ("ns/name") whose load balancer it changes and, for PUT members, the
// members' addresses.
type osCall struct {
	label, service string
	members        []string
}

// octaviaRecorder forwards to Octavia and records every mutating call,
// its Service resolved before the call is forwarded (a delete still finds
// what it deletes), with GETs of its own carrying the call's token.
type octaviaRecorder struct {
	upstream *url.URL
	proxy    *httputil.ReverseProxy
	url      string
	mu       sync.Mutex
	calls    []osCall
}

var uuidRE = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

func (r *octaviaRecorder) ServeHTTP(rw http.ResponseWriter, req *http.Request) {
	if req.Method == http.MethodGet || req.Method == http.MethodHead {
		r.proxy.ServeHTTP(rw, req)
		return
	}
	body, err := io.ReadAll(req.Body)
	if err != nil {
		http.Error(rw, err.Error(), http.StatusBadRequest)
		return
	}
	req.Body = io.NopCloser(bytes.NewReader(body))
	var collection, id string
	for _, part := range strings.Split(strings.Trim(req.URL.Path, "/"), "/") {
		if uuidRE.MatchString(part) {
			id = part
		} else if part != "v2" && part != "lbaas" && part != "v2.0" {
			collection = part
		}
	}
	if collection == "members" {
		id = poolOfMembers(req.URL.Path)
	}
	c := osCall{label: req.Method + " " + collection, service: r.serviceOf(req.Context(), req.Header.Get("X-Auth-Token"), collection, id, body)}
	if c.label == "PUT members" {
		var batch struct {
			Members []struct {
				Address string `json:"address"`
			} `json:"members"`
		}
		_ = json.Unmarshal(body, &batch)
		for _, m := range batch.Members {
			c.members = append(c.members, m.Address)
		}
		slices.Sort(c.members)
	}
	r.mu.Lock()
	r.calls = append(r.calls, c)
	r.mu.Unlock()
	r.proxy.ServeHTTP(rw, req)
}

// poolOfMembers is the pool ID in /v2/lbaas/pools/{id}/members[/...].
func poolOfMembers(path string) string {
	parts := strings.Split(path, "/")
	if i := slices.Index(parts, "pools"); i >= 0 && i+1 < len(parts) {
		return parts[i+1]
	}
	return ""
}

// serviceOf resolves the Service of a call on collection (the object id,
// or the created object's body).
func (r *octaviaRecorder) serviceOf(ctx context.Context, token, collection, id string, body []byte) string {
	var created map[string]map[string]any
	_ = json.Unmarshal(body, &created)
	field := func(obj, key string) string { s, _ := created[obj][key].(string); return s }
	lb := ""
	switch collection {
	case "loadbalancers":
		if id == "" {
			if tags, ok := created["loadbalancer"]["tags"].([]any); ok {
				for _, t := range tags {
					if s, _ := t.(string); strings.HasPrefix(s, "mccm-service=") {
						return strings.TrimPrefix(s, "mccm-service=")
					}
				}
			}
			return ""
		}
		lb = id
	case "listeners":
		lb = field("listener", "loadbalancer_id")
		if id != "" {
			lb = r.parentLB(ctx, token, "listeners", "listener", id)
		}
	case "pools", "members":
		lb = field("pool", "loadbalancer_id")
		if l := field("pool", "listener_id"); lb == "" && l != "" {
			lb = r.parentLB(ctx, token, "listeners", "listener", l)
		}
		if id != "" {
			lb = r.parentLB(ctx, token, "pools", "pool", id)
		}
	case "healthmonitors":
		pool := field("healthmonitor", "pool_id")
		if id != "" {
			pool = r.get(ctx, token, "healthmonitors", "healthmonitor", id, "pools")
		}
		lb = r.parentLB(ctx, token, "pools", "pool", pool)
	}
	if lb == "" {
		return ""
	}
	var got map[string]struct {
		Tags []string `json:"tags"`
	}
	if r.read(ctx, token, "loadbalancers/"+lb, &got) != nil {
		return ""
	}
	for _, t := range got["loadbalancer"].Tags {
		if s, ok := strings.CutPrefix(t, "mccm-service="); ok {
			return s
		}
	}
	return ""
}

// parentLB is the load balancer of a listener or a pool.
func (r *octaviaRecorder) parentLB(ctx context.Context, token, collection, obj, id string) string {
	if id == "" {
		return ""
	}
	return r.get(ctx, token, collection, obj, id, "loadbalancers")
}

// get reads the first ID of an object's list field (a listener's
// loadbalancers, a monitor's pools).
func (r *octaviaRecorder) get(ctx context.Context, token, collection, obj, id, list string) string {
	var got map[string]map[string]json.RawMessage
	var ids []struct {
		ID string `json:"id"`
	}
	if r.read(ctx, token, collection+"/"+id, &got) != nil || json.Unmarshal(got[obj][list], &ids) != nil || len(ids) == 0 {
		return ""
	}
	return ids[0].ID
}

func (r *octaviaRecorder) read(ctx context.Context, token, path string, into any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.upstream.JoinPath("v2/lbaas", path).String(), nil)
	if err != nil {
		return err
	}
	req.Header.Set("X-Auth-Token", token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(into)
}

// Calls returns the calls recorded since the last Reset.
func (r *octaviaRecorder) Calls() []osCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls)
}

// Reset forgets the recorded calls.
func (r *octaviaRecorder) Reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = nil
}

// osCreated is the dry run's create of a listener with what comes with it
// (dryRunCreate): "listener TCP:80 created with its pool and 2 members and
// a health monitor".
var (
	osCreated = regexp.MustCompile(`^listener \S+ created with its pool and (\d+) members?( and a health monitor)?$`)
	// inBackend is the plan's prefix naming the backend of an intent.
	inBackend = regexp.MustCompile(`^in backend [^:]+: `)
)

// osLabels are the Octavia calls an OpenStack intent stands for, as the
// recorder labels them; nil for an intent that is no Octavia call.
func osLabels(in backends.Intent) []string {
	call, ok := strings.CutPrefix(in.Call, "openstack: ")
	if !ok {
		return nil
	}
	what := inBackend.ReplaceAllString(in.What, "")
	switch {
	case call == "POST load balancer":
		return []string{"POST loadbalancers"}
	case call == "PUT load balancer tags":
		return []string{"PUT loadbalancers"}
	case strings.HasPrefix(call, "DELETE load balancer"):
		return []string{"DELETE loadbalancers"}
	case call == "POST floating IP", call == "PUT floating IP", call == "DELETE floating IP":
		verb, _, _ := strings.Cut(call, " ")
		return []string{verb + " floatingips"}
	case call != "octavia":
		return []string{call} // no call the recorders label so: never matched
	}
	if m := osCreated.FindStringSubmatch(what); m != nil {
		out := []string{"POST listeners", "POST pools"}
		if n, _ := strconv.Atoi(m[1]); n > 0 {
			out = append(out, "PUT members")
		}
		if m[2] != "" {
			out = append(out, "POST healthmonitors")
		}
		return out
	}
	verb := func(change string) string {
		switch {
		case strings.Contains(change, "created"):
			return "POST"
		case strings.Contains(change, "deleted"):
			return "DELETE"
		}
		return "PUT"
	}
	switch {
	case strings.HasPrefix(what, "health monitor "):
		return []string{verb(what) + " healthmonitors"}
	case strings.HasPrefix(what, "pool ") || strings.HasPrefix(what, "unused pool "):
		return []string{verb(what) + " pools"}
	case strings.Contains(what, ": pool "):
		return []string{"PUT pools"}
	case strings.HasPrefix(what, "listener ") || strings.HasPrefix(what, "unused listener "):
		if strings.Contains(what, ": member ") || strings.Contains(what, "member changes") {
			return []string{"PUT members"}
		}
		return []string{verb(what) + " listeners"}
	}
	return []string{"octavia: " + what}
}
