package openstack

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	th "github.com/gophercloud/gophercloud/v2/testhelper"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/config"
)

// FakeToken is the token the fake Keystone issues.
const FakeToken = "gAAAAABfake-token-for-tests"

// FakeOpenStack is Keystone (token issue only), Nova (servers) and Neutron
// (floating IPs, routers) on gophercloud's testhelper mux, answering with
// bodies shaped after the OpenStack API reference. Every handler asserts
// the request's method, path, token and headers; bodies are asserted where
// the backend sends one. Octavia is not faked: tests use the real one.
type FakeOpenStack struct {
	t      testing.TB
	Server th.FakeServer

	mu      sync.Mutex
	servers []FakeNovaServer // in Nova's listing order
	fips    map[string]*FakeFloatingIP
	subnets []*FakeSubnet // in Neutron's listing order
	router  fakeRouter
	nextID  int
	// fail makes every Keystone, Nova and Neutron call answer this status.
	fail int
	// AnyToken accepts any token (the real Keystone issued it).
	AnyToken bool

	// Calls counts requests by "METHOD /path" (no query).
	calls   map[string]int
	Auths   atomic.Int64
	Lists   atomic.Int64
	Gets    atomic.Int64
	Mutates atomic.Int64
}

type FakeNovaServer struct {
	ID, Name, Status, Zone, Flavor string
	// Addresses is network name → list of "addr" or "addr/floating".
	Addresses  map[string][]string
	AccessIPv4 string
}

type FakeFloatingIP struct {
	ID, FloatingIP, NetworkID, PortID, Description, SubnetID string
}

type fakeRouter struct {
	ID     string
	Routes [][2]string // destination, nexthop
}

// NewFakeOpenStack starts the fake on a loopback port.
func NewFakeOpenStack(t testing.TB) *FakeOpenStack {
	f := &FakeOpenStack{t: t, Server: th.SetupHTTP(), fips: map[string]*FakeFloatingIP{}, calls: map[string]int{}}
	t.Cleanup(f.Server.Teardown)
	f.router.ID = "b6d5f2a8-7e0c-4b1c-9d3e-2f4a5b6c7d8e"
	m := f.Server.Mux
	m.HandleFunc("/identity/v3/auth/tokens", f.keystone)
	m.HandleFunc("/compute/v2.1/servers/detail", f.nova(f.listServers))
	m.HandleFunc("/compute/v2.1/servers/{id}", f.nova(f.getServer))
	m.HandleFunc("GET /network/{$}", f.neutronVersions)
	m.HandleFunc("/network/v2.0/floatingips", f.neutron(f.floatingIPs))
	m.HandleFunc("/network/v2.0/floatingips/{id}", f.neutron(f.floatingIP))
	m.HandleFunc("/network/v2.0/routers/{id}", f.neutron(f.getRouter))
	m.HandleFunc("GET /network/v2.0/subnets", f.neutron(f.listSubnets))
	m.HandleFunc("/network/v2.0/routers/{id}/{action}", f.neutron(f.extraRoutes))
	return f
}

// URL is the fake's base URL without a trailing slash.
func (f *FakeOpenStack) URL() string { return strings.TrimSuffix(f.Server.Endpoint(), "/") }

// AuthURL is the fake Keystone's v3 URL.
func (f *FakeOpenStack) AuthURL() string { return f.URL() + "/identity/v3" }

// ComputeURL is Nova's versioned URL, as the catalog gives it.
func (f *FakeOpenStack) ComputeURL() string { return f.URL() + "/compute/v2.1/" }

// NetworkURL is Neutron's unversioned URL, as the catalog gives it.
func (f *FakeOpenStack) NetworkURL() string { return f.URL() + "/network/" }

// Settings returns password settings logging in to the fake, the password
// in a file.
func (f *FakeOpenStack) Settings(t testing.TB) *Settings {
	t.Helper()
	pw := filepath.Join(t.TempDir(), "password")
	if err := os.WriteFile(pw, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := &Settings{
		Auth:   Auth{AuthURL: f.AuthURL(), Username: "ccm", Password: config.SecretRef{File: pw}, ProjectName: "k8s"},
		Region: "RegionOne", LoadBalancer: LoadBalancerSettings{Enabled: new(bool)},
	}
	s.setDefaults("")
	if errs := s.validate(nil, ""); len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	return s
}

// AddServer adds a server to Nova.
func (f *FakeOpenStack) AddServer(s FakeNovaServer) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if s.Status == "" {
		s.Status = "ACTIVE"
	}
	f.servers = append(f.servers, s)
}

// RemoveServer deletes a server from Nova.
func (f *FakeOpenStack) RemoveServer(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.servers = slices.DeleteFunc(f.servers, func(s FakeNovaServer) bool { return s.ID == id })
}

// SetStatus changes a server's status.
func (f *FakeOpenStack) SetStatus(id, status string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range f.servers {
		if f.servers[i].ID == id {
			f.servers[i].Status = status
		}
	}
}

// Fail makes every Nova and Neutron call answer status (0: normal again).
func (f *FakeOpenStack) Fail(status int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail = status
}

// CallCount returns the number of requests to "METHOD /path".
func (f *FakeOpenStack) CallCount(key string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[key]
}

// CallsUnder returns the number of requests with method to paths starting
// with prefix.
func (f *FakeOpenStack) CallsUnder(method, prefix string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for k, c := range f.calls {
		if strings.HasPrefix(k, method+" "+prefix) {
			n += c
		}
	}
	return n
}

func (f *FakeOpenStack) count(r *http.Request) {
	f.mu.Lock()
	f.calls[r.Method+" "+r.URL.Path]++
	f.mu.Unlock()
	if r.Method == http.MethodGet {
		return
	}
	f.Mutates.Add(1)
}

// errorf records a failed assertion without stopping the handler's
// goroutine (t.Fatal must not be called off the test goroutine).
func (f *FakeOpenStack) errorf(format string, args ...any) { f.t.Errorf(format, args...) }

func (f *FakeOpenStack) method(r *http.Request, want string) {
	if r.Method != want {
		f.errorf("%s %s: method %s, want %s", r.Method, r.URL.Path, r.Method, want)
	}
}

func (f *FakeOpenStack) checkCommon(r *http.Request) {
	if got := r.Header.Get("X-Auth-Token"); got != FakeToken && (!f.AnyToken || got == "") {
		f.errorf("%s %s: X-Auth-Token %q, want %q", r.Method, r.URL.Path, got, FakeToken)
	}
	if ua := r.Header.Get("User-Agent"); !strings.HasPrefix(ua, userAgent) {
		f.errorf("%s %s: User-Agent %q, want it to start with %q", r.Method, r.URL.Path, ua, userAgent)
	}
	if r.Header.Get("Accept") != "application/json" {
		f.errorf("%s %s: Accept %q, want application/json", r.Method, r.URL.Path, r.Header.Get("Accept"))
	}
}

func writeJSON(w http.ResponseWriter, status int, body any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

func (f *FakeOpenStack) failing(w http.ResponseWriter) bool {
	f.mu.Lock()
	status := f.fail
	f.mu.Unlock()
	if status == 0 {
		return false
	}
	writeJSON(w, status, map[string]any{"computeFault": map[string]any{"code": status, "message": "The server has either erred or is incapable of performing the requested operation."}})
	return true
}

// keystone issues a token for POST /v3/auth/tokens (password or
// application credential), with a catalog holding Nova and Neutron.
func (f *FakeOpenStack) keystone(w http.ResponseWriter, r *http.Request) {
	f.method(r, http.MethodPost)
	f.Auths.Add(1)
	if f.failing(w) {
		return
	}
	var req struct {
		Auth struct {
			Identity struct {
				Methods  []string `json:"methods"`
				Password *struct {
					User struct {
						Name     string `json:"name"`
						Password string `json:"password"`
						Domain   struct {
							Name string `json:"name"`
						} `json:"domain"`
					} `json:"user"`
				} `json:"password"`
				AppCred *struct {
					ID     string `json:"id"`
					Secret string `json:"secret"`
				} `json:"application_credential"`
			} `json:"identity"`
			Scope *struct {
				Project struct {
					Name   string `json:"name"`
					Domain struct {
						Name string `json:"name"`
					} `json:"domain"`
				} `json:"project"`
			} `json:"scope"`
		} `json:"auth"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		f.errorf("keystone: body: %v", err)
	}
	id := req.Auth.Identity
	switch {
	case id.Password != nil:
		u := id.Password.User
		if u.Name != "ccm" || u.Password != "s3cret" || u.Domain.Name != "Default" {
			writeJSON(w, http.StatusUnauthorized, map[string]any{"error": map[string]any{"code": 401, "title": "Unauthorized", "message": "The request you have made requires authentication."}})
			return
		}
		if req.Auth.Scope == nil || req.Auth.Scope.Project.Name != "k8s" || req.Auth.Scope.Project.Domain.Name != "Default" {
			f.errorf("keystone: scope %+v, want project k8s in domain Default", req.Auth.Scope)
		}
	case id.AppCred != nil:
		if id.AppCred.ID != "ac-1" || id.AppCred.Secret != "ac-s3cret" {
			writeJSON(w, http.StatusUnauthorized, map[string]any{"error": map[string]any{"code": 401, "title": "Unauthorized"}})
			return
		}
		if req.Auth.Scope != nil {
			f.errorf("keystone: application credentials must not carry a scope, got %+v", req.Auth.Scope)
		}
	default:
		f.errorf("keystone: methods %v: neither password nor application credential", id.Methods)
	}
	endpoint := func(typ, name, url string) map[string]any {
		return map[string]any{"type": typ, "name": name, "id": name + "-id", "endpoints": []map[string]any{
			{"id": name + "-public", "interface": "public", "region": "RegionOne", "region_id": "RegionOne", "url": url},
		}}
	}
	w.Header().Set("X-Subject-Token", FakeToken)
	writeJSON(w, http.StatusCreated, map[string]any{"token": map[string]any{
		"methods": id.Methods, "expires_at": "2099-01-01T00:00:00.000000Z", "issued_at": "2026-01-01T00:00:00.000000Z",
		"user":    map[string]any{"id": "u-1", "name": "ccm", "domain": map[string]any{"id": "default", "name": "Default"}},
		"project": map[string]any{"id": "p-1", "name": "k8s", "domain": map[string]any{"id": "default", "name": "Default"}},
		"catalog": []map[string]any{
			endpoint("compute", "nova", strings.TrimSuffix(f.ComputeURL(), "/")),
			endpoint("network", "neutron", strings.TrimSuffix(f.NetworkURL(), "/")),
		},
	}})
}

func (f *FakeOpenStack) nova(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		f.count(r)
		f.checkCommon(r)
		if v := r.Header.Get("X-OpenStack-Nova-API-Version"); v != computeMicroversion {
			f.errorf("%s %s: X-OpenStack-Nova-API-Version %q, want %q", r.Method, r.URL.Path, v, computeMicroversion)
		}
		if v := r.Header.Get("OpenStack-API-Version"); v != "compute "+computeMicroversion {
			f.errorf("%s %s: OpenStack-API-Version %q, want %q", r.Method, r.URL.Path, v, "compute "+computeMicroversion)
		}
		if r.Method != http.MethodGet {
			f.errorf("Nova: %s %s: the backend only reads Nova", r.Method, r.URL.Path)
		}
		if f.failing(w) {
			return
		}
		h(w, r)
	}
}

// serverJSON is a server as GET /servers/{id} shows it at microversion 2.47.
func serverJSON(s FakeNovaServer) map[string]any {
	addrs := map[string]any{}
	for network, list := range s.Addresses {
		var out []map[string]any
		for _, a := range list {
			addr, kind, _ := strings.Cut(a, "/")
			if kind == "" {
				kind = "fixed"
			}
			version := 4
			if strings.Contains(addr, ":") {
				version = 6
			}
			out = append(out, map[string]any{"addr": addr, "version": version, "OS-EXT-IPS:type": kind, "OS-EXT-IPS-MAC:mac_addr": "fa:16:3e:00:00:01"})
		}
		addrs[network] = out
	}
	return map[string]any{
		"id": s.ID, "name": s.Name, "status": s.Status, "tenant_id": "p-1", "user_id": "u-1",
		"OS-EXT-AZ:availability_zone": s.Zone, "OS-EXT-STS:power_state": 1, "OS-EXT-STS:vm_state": strings.ToLower(s.Status),
		"flavor":    map[string]any{"original_name": s.Flavor, "vcpus": 2, "ram": 4096, "disk": 40, "ephemeral": 0, "swap": 0, "extra_specs": map[string]string{}},
		"image":     map[string]any{"id": "70a599e0-31e7-49b7-b260-868f441e862b", "links": []any{}},
		"addresses": addrs, "accessIPv4": s.AccessIPv4, "accessIPv6": "", "metadata": map[string]string{},
		"created": "2026-01-01T00:00:00Z", "updated": "2026-01-01T00:00:00Z", "hostId": "h", "key_name": nil,
		"links": []map[string]string{{"href": "http://nova/v2.1/servers/" + s.ID, "rel": "self"}},
	}
}

// listServers is GET /servers/detail with limit and marker paging; a full
// page carries a servers_links "next" entry, as Nova does.
func (f *FakeOpenStack) listServers(w http.ResponseWriter, r *http.Request) {
	f.Lists.Add(1)
	q := r.URL.Query()
	limit, err := strconv.Atoi(q.Get("limit"))
	if err != nil || limit < 1 {
		f.errorf("GET /servers/detail: limit %q, want a page size", q.Get("limit"))
		limit = 1000
	}
	f.mu.Lock()
	start := 0
	if m := q.Get("marker"); m != "" {
		start = -1
		for i, s := range f.servers {
			if s.ID == m {
				start = i + 1
			}
		}
		if start < 0 {
			f.mu.Unlock()
			writeJSON(w, http.StatusBadRequest, map[string]any{"badRequest": map[string]any{"code": 400, "message": "marker [" + m + "] not found"}})
			return
		}
	}
	end := min(start+limit, len(f.servers))
	page := make([]map[string]any, 0, end-start)
	for _, s := range f.servers[start:end] {
		page = append(page, serverJSON(s))
	}
	f.mu.Unlock()
	body := map[string]any{"servers": page}
	if end-start == limit {
		next := fmt.Sprintf("%s/compute/v2.1/servers/detail?limit=%d&marker=%s", f.URL(), limit, page[len(page)-1]["id"])
		body["servers_links"] = []map[string]string{{"href": next, "rel": "next"}}
	}
	writeJSON(w, http.StatusOK, body)
}

// getServer is GET /servers/{id}; an unknown ID is Nova's 404.
func (f *FakeOpenStack) getServer(w http.ResponseWriter, r *http.Request) {
	f.Gets.Add(1)
	id := r.PathValue("id")
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, s := range f.servers {
		if s.ID == id {
			writeJSON(w, http.StatusOK, map[string]any{"server": serverJSON(s)})
			return
		}
	}
	writeJSON(w, http.StatusNotFound, map[string]any{"itemNotFound": map[string]any{"code": 404, "message": "Instance " + id + " could not be found."}})
}

func (f *FakeOpenStack) neutron(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		f.count(r)
		f.checkCommon(r)
		if f.failing(w) {
			return
		}
		h(w, r)
	}
}

// neutronVersions is Neutron's version document (GET /), which gophercloud
// reads to find v2.0 from the catalog's unversioned URL.
func (f *FakeOpenStack) neutronVersions(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"versions": []map[string]any{{
		"id": "v2.0", "status": "CURRENT", "links": []map[string]string{{"href": f.NetworkURL() + "v2.0/", "rel": "self"}},
	}}})
}

func fipJSON(p *FakeFloatingIP) map[string]any {
	var port any
	var status = "DOWN"
	if p.PortID != "" {
		port, status = p.PortID, "ACTIVE"
	}
	return map[string]any{
		"id": p.ID, "floating_ip_address": p.FloatingIP, "floating_network_id": p.NetworkID, "port_id": port,
		"description": p.Description, "status": status, "tenant_id": "p-1", "project_id": "p-1", "router_id": nil,
		"fixed_ip_address": nil, "tags": []string{}, "revision_number": 1,
	}
}

// floatingIPs is GET (filtered by port_id, description,
// floating_ip_address, floating_network_id) and POST /v2.0/floatingips.
func (f *FakeOpenStack) floatingIPs(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch r.Method {
	case http.MethodGet:
		q := r.URL.Query()
		out := []map[string]any{}
		for _, id := range sortedKeys(f.fips) {
			p := f.fips[id]
			if (q.Has("port_id") && q.Get("port_id") != p.PortID) || (q.Has("description") && q.Get("description") != p.Description) ||
				(q.Has("floating_ip_address") && q.Get("floating_ip_address") != p.FloatingIP) ||
				(q.Has("floating_network_id") && q.Get("floating_network_id") != p.NetworkID) {
				continue
			}
			out = append(out, fipJSON(p))
		}
		writeJSON(w, http.StatusOK, map[string]any{"floatingips": out})
	case http.MethodPost:
		var req struct {
			FIP struct {
				NetworkID   string `json:"floating_network_id"`
				PortID      string `json:"port_id"`
				FloatingIP  string `json:"floating_ip_address"`
				Description string `json:"description"`
				SubnetID    string `json:"subnet_id"`
			} `json:"floatingip"`
		}
		f.decode(r, &req)
		if req.FIP.NetworkID == "" {
			writeJSON(w, http.StatusBadRequest, map[string]any{"NeutronError": map[string]any{"type": "HTTPBadRequest", "message": "floating_network_id is required"}})
			return
		}
		prefix := "172.24.4."
		if req.FIP.SubnetID != "" {
			if prefix = f.subnetPrefix(w, req.FIP.NetworkID, req.FIP.SubnetID); prefix == "" {
				return
			}
		}
		f.nextID++
		p := &FakeFloatingIP{ID: fmt.Sprintf("f1000000-0000-4000-8000-%012d", f.nextID), FloatingIP: req.FIP.FloatingIP,
			NetworkID: req.FIP.NetworkID, PortID: req.FIP.PortID, Description: req.FIP.Description, SubnetID: req.FIP.SubnetID}
		if p.FloatingIP == "" {
			p.FloatingIP = fmt.Sprintf("%s%d", prefix, 100+f.nextID)
		}
		f.fips[p.ID] = p
		writeJSON(w, http.StatusCreated, map[string]any{"floatingip": fipJSON(p)})
	default:
		f.errorf("floatingips: unexpected %s", r.Method)
	}
}

// floatingIP is PUT and DELETE /v2.0/floatingips/{id}.
func (f *FakeOpenStack) floatingIP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p, ok := f.fips[r.PathValue("id")]
	if !ok {
		writeJSON(w, http.StatusNotFound, map[string]any{"NeutronError": map[string]any{"type": "FloatingIPNotFound", "message": "Floating IP could not be found"}})
		return
	}
	switch r.Method {
	case http.MethodPut:
		var req struct {
			FIP map[string]*string `json:"floatingip"`
		}
		f.decode(r, &req)
		for k, v := range req.FIP {
			switch k {
			case "port_id":
				p.PortID = ""
				if v != nil {
					p.PortID = *v
				}
			case "description":
				p.Description = *v
			default:
				f.errorf("PUT floatingip: unexpected field %s", k)
			}
		}
		writeJSON(w, http.StatusOK, map[string]any{"floatingip": fipJSON(p)})
	case http.MethodDelete:
		delete(f.fips, p.ID)
		w.WriteHeader(http.StatusNoContent)
	default:
		f.errorf("floatingip: unexpected %s", r.Method)
	}
}

// FloatingIPs returns the floating IPs, by address.
func (f *FakeOpenStack) FloatingIPs() map[string]FakeFloatingIP {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]FakeFloatingIP{}
	for _, p := range f.fips {
		out[p.FloatingIP] = *p
	}
	return out
}

// AddFloatingIP adds an unassociated floating IP (pre-allocated by a user).
func (f *FakeOpenStack) AddFloatingIP(addr, network string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nextID++
	id := fmt.Sprintf("f1000000-0000-4000-8000-%012d", f.nextID)
	f.fips[id] = &FakeFloatingIP{ID: id, FloatingIP: addr, NetworkID: network, Description: "reserved by the user"}
}

func (f *FakeOpenStack) routerJSON() map[string]any {
	routes := []map[string]string{}
	for _, r := range f.router.Routes {
		routes = append(routes, map[string]string{"destination": r[0], "nexthop": r[1]})
	}
	return map[string]any{"id": f.router.ID, "name": "k8s-router", "status": "ACTIVE", "admin_state_up": true, "routes": routes,
		"tenant_id": "p-1", "project_id": "p-1", "external_gateway_info": nil}
}

func (f *FakeOpenStack) getRouter(w http.ResponseWriter, r *http.Request) {
	f.method(r, http.MethodGet)
	f.mu.Lock()
	defer f.mu.Unlock()
	if r.PathValue("id") != f.router.ID {
		writeJSON(w, http.StatusNotFound, map[string]any{"NeutronError": map[string]any{"type": "RouterNotFound", "message": "Router could not be found"}})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"router": f.routerJSON()})
}

// extraRoutes is PUT /v2.0/routers/{id}/add_extraroutes and
// remove_extraroutes (the extraroute-atomic extension).
func (f *FakeOpenStack) extraRoutes(w http.ResponseWriter, r *http.Request) {
	f.method(r, http.MethodPut)
	var req struct {
		Router struct {
			Routes []struct {
				Destination string `json:"destination"`
				NextHop     string `json:"nexthop"`
			} `json:"routes"`
		} `json:"router"`
	}
	f.decode(r, &req)
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, rt := range req.Router.Routes {
		key := [2]string{rt.Destination, rt.NextHop}
		switch r.PathValue("action") {
		case "add_extraroutes":
			if !slices.Contains(f.router.Routes, key) {
				f.router.Routes = append(f.router.Routes, key)
			}
		case "remove_extraroutes":
			f.router.Routes = slices.DeleteFunc(f.router.Routes, func(k [2]string) bool { return k == key })
		default:
			f.errorf("router action %q", r.PathValue("action"))
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"router": f.routerJSON()})
}

// Routes returns the router's extra routes as "destination via nexthop".
func (f *FakeOpenStack) Routes() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, r := range f.router.Routes {
		out = append(out, r[0]+" via "+r[1])
	}
	sort.Strings(out)
	return out
}

func (f *FakeOpenStack) decode(r *http.Request, v any) {
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		f.errorf("%s %s: Content-Type %q, want application/json", r.Method, r.URL.Path, ct)
	}
	b, err := io.ReadAll(r.Body)
	if err == nil {
		err = json.Unmarshal(b, v)
	}
	if err != nil {
		f.errorf("%s %s: body %q: %v", r.Method, r.URL.Path, b, err)
	}
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
