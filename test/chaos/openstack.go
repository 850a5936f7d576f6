package chaos

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	gcopenstack "github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/identity/v3/applicationcredentials"
	"github.com/gophercloud/gophercloud/v2/openstack/identity/v3/tokens"
	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/loadbalancers"
)

// The OpenStack part of the world: when the stack hack/openstack/up.sh
// starts is up (make openstack-up; its environment in
// _output/openstack.env, which make chaos sources), the judge adds a
// backend "os" on the real Keystone, Octavia and Nova. Octavia is shared
// (other runs, other tests), so every run has a cluster ID of its own, the
// judge looks only at the load balancers tagged with it, and it deletes
// them when the run ends. The CCM reaches Octavia through osProxy, which
// injects the faults (Octavia down, a step of a multi-step change failing);
// the judge reads Octavia directly.

// osVIPSubnet is the VIP subnet the stack's load balancers use (Octavia's
// noop network driver takes any; test/e2e/planswitch uses the same).
const osVIPSubnet = "6f1e4f39-9c6a-4d55-8a25-4a4c8c3c2b11"

// osNoopVIP is the VIP Octavia's noop network driver gives every load
// balancer that asks for none: several Services show it at once
// (doubles passes them over), and no pool of the judge's holds it.
const osNoopVIP = "198.51.100.1"

// osSettle bounds convergence at quiescence when the world has os:
// Octavia applies one change of a load balancer at a time (create, then
// the listener, its pool, members and monitor, each waiting for ACTIVE),
// about 2 s each on an idle machine and 10-20 s at the load of a shared
// 2-core machine, and a Service that failed a few syncs while Octavia was
// down is retried with backoff (see settleDefault).
const osSettle = 300 * time.Second

// osEnvNames are the stack's environment the judge needs.
var osEnvNames = []string{"OS_AUTH_URL", "OS_USERNAME", "OS_PASSWORD_FILE", "OS_PROJECT_NAME", "OS_REGION_NAME", "OCTAVIA_ENDPOINT", "NOVA_ENDPOINT"}

// OpenStackAvailable reports whether the stack's environment is set, and
// if not, why.
func OpenStackAvailable() (bool, string) {
	var missing []string
	for _, k := range osEnvNames {
		if os.Getenv(k) == "" {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		return false, fmt.Sprintf("%v not set (make openstack-up starts the stack; make chaos sources _output/openstack.env)", missing)
	}
	return true, ""
}

// osCloud is the world's OpenStack: the stack's credentials, the judge's
// own Octavia client, the proxy the CCM goes through, and the strangers
// made by hand.
type osCloud struct {
	authURL, username, passwordFile, project, region, nova string
	cluster                                                string
	client                                                 *gophercloud.ServiceClient
	proxy                                                  *osProxy
	srv                                                    *httptest.Server
	// strangers are load balancers made beside the CCM's by hand, by ID,
	// with what must not change of them.
	strangers map[string]string
	// The CCM logs in with an application credential of the stack's user
	// (OSRotate creates another one and deletes the old): appID is the one
	// in the cloud-config, its secret in secretFile; retired are those
	// rotated away, deleted those the judge deleted in Keystone. Keystone
	// is reached through keystone, which records logins by credential.
	identity         *gophercloud.ServiceClient
	userID           string
	dir              string
	appID            string
	secretFile       string
	retired, deleted []string
	keystone         *keystoneProxy
	ksSrv            *httptest.Server
	// oldSeen is oldUses when the judge last looked.
	oldSeen int
}

// osLB is one of the run's Octavia load balancers.
type osLB struct {
	ID, Name, VIP, Status string
}

func startOpenStack(ctx context.Context, cluster, dir string) (*osCloud, error) {
	o := &osCloud{authURL: os.Getenv("OS_AUTH_URL"), username: os.Getenv("OS_USERNAME"), passwordFile: os.Getenv("OS_PASSWORD_FILE"),
		project: os.Getenv("OS_PROJECT_NAME"), region: os.Getenv("OS_REGION_NAME"), nova: os.Getenv("NOVA_ENDPOINT"), cluster: cluster,
		strangers: map[string]string{}, dir: filepath.Join(dir, "os-credentials")}
	pw, err := os.ReadFile(o.passwordFile) //nolint:gosec // The stack's own environment names the file.
	if err != nil {
		return nil, fmt.Errorf("OpenStack password (OS_PASSWORD_FILE): %w", err)
	}
	p, err := gcopenstack.AuthenticatedClient(ctx, gophercloud.AuthOptions{
		IdentityEndpoint: o.authURL, Username: o.username, Password: strings.TrimSpace(string(pw)), DomainName: "Default",
		Scope: &gophercloud.AuthScope{ProjectName: o.project, DomainName: "Default"},
	})
	if err != nil {
		return nil, fmt.Errorf("keystone at %s: %w", o.authURL, err)
	}
	if o.client, err = gcopenstack.NewLoadBalancerV2(p, gophercloud.EndpointOpts{Region: o.region}); err != nil {
		return nil, err
	}
	u, err := url.Parse(os.Getenv("OCTAVIA_ENDPOINT"))
	if err != nil {
		return nil, fmt.Errorf("OCTAVIA_ENDPOINT: %w", err)
	}
	o.proxy = &osProxy{rp: httputil.NewSingleHostReverseProxy(u)} //nolint:gosec // OCTAVIA_ENDPOINT: the stack's own Octavia.
	o.proxy.rp.ErrorLog = log.New(io.Discard, "", 0)              // a replica killed mid-call cancels it
	o.srv = httptest.NewServer(o.proxy)
	if err := o.startIdentity(ctx, p); err != nil {
		o.close()
		return nil, err
	}
	// Two strangers: one made by hand with no tag of ours, and one of
	// another cluster named and tagged for a Service of ours (s0).
	other := cluster + "-other"
	for _, opts := range []loadbalancers.CreateOpts{
		{Name: "stranger-" + cluster, Description: "made by hand beside the CCM's", VipSubnetID: osVIPSubnet, Tags: []string{"chaos-stranger=" + cluster}},
		{Name: fmt.Sprintf("mccm_%s_%s_s0", other, serviceNS), Description: "another cluster's", VipSubnetID: osVIPSubnet,
			Tags: []string{"mccm-cluster=" + other, "mccm-service=" + serviceNS + "/s0", "chaos-stranger=" + cluster}},
	} {
		lb, err := loadbalancers.Create(ctx, o.client, opts).Extract()
		if err != nil {
			o.close()
			return nil, fmt.Errorf("the stranger Octavia load balancer %s: %w", opts.Name, err)
		}
		o.strangers[lb.ID] = strangerFacts(*lb)
	}
	return o, nil
}

func strangerFacts(lb loadbalancers.LoadBalancer) string {
	tags := slices.Clone(lb.Tags)
	slices.Sort(tags)
	return fmt.Sprintf("name %q, description %q, tags %v", lb.Name, lb.Description, tags)
}

// yaml is the backend os of the cloud-config: the real Keystone and Nova,
// Octavia through the proxy.
func (o *osCloud) yaml() string {
	return fmt.Sprintf(`- name: os
  type: openstack
  openstack:
    auth: {authURL: %q, applicationCredentialID: %q, applicationCredentialSecret: {file: %q}}
    region: %q
    endpoints: {loadBalancer: %q, compute: %q}
    loadBalancer: {vipSubnetID: %s}
`, o.ksSrv.URL+"/v3", o.appID, o.secretFile, o.region, o.srv.URL, o.nova, osVIPSubnet)
}

// lbs lists the run's load balancers (tagged with its cluster ID) that are
// not being deleted, by the Service they are tagged for.
func (o *osCloud) lbs(ctx context.Context) (map[string][]osLB, error) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	pages, err := loadbalancers.List(o.client, loadbalancers.ListOpts{Tags: []string{"mccm-cluster=" + o.cluster}}).AllPages(ctx)
	if err != nil {
		return nil, err
	}
	all, err := loadbalancers.ExtractLoadBalancers(pages)
	if err != nil {
		return nil, err
	}
	out := map[string][]osLB{}
	for _, lb := range all {
		if lb.ProvisioningStatus == "PENDING_DELETE" || lb.ProvisioningStatus == "DELETED" {
			continue
		}
		name := ""
		for _, t := range lb.Tags {
			if s, ok := strings.CutPrefix(t, "mccm-service="+serviceNS+"/"); ok {
				name = s
			}
		}
		out[name] = append(out[name], osLB{ID: lb.ID, Name: lb.Name, VIP: lb.VipAddress, Status: lb.ProvisioningStatus})
	}
	return out, nil
}

// strangersTouched reports a stranger deleted or changed.
func (o *osCloud) strangersTouched(ctx context.Context) []Violation {
	var out []Violation
	for id, was := range o.strangers {
		lb, err := loadbalancers.Get(ctx, o.client, id).Extract()
		switch {
		case gophercloud.ResponseCodeIs(err, http.StatusNotFound):
			out = append(out, violation(vStranger, "the Octavia load balancer %s made by hand (%s) is gone", id, was))
		case err != nil:
			continue // Octavia unreachable for the judge: not the CCM's doing
		case lb.ProvisioningStatus == "PENDING_DELETE" || lb.ProvisioningStatus == "DELETED":
			out = append(out, violation(vStranger, "the Octavia load balancer %s made by hand (%s) is being deleted", id, was))
		case strangerFacts(*lb) != was:
			out = append(out, violation(vStranger, "the Octavia load balancer %s made by hand changed: %s, now %s", id, was, strangerFacts(*lb)))
		default:
			continue
		}
		delete(o.strangers, id)
	}
	return out
}

// close deletes the run's load balancers and the strangers (the stack is
// shared) and stops the proxy.
func (o *osCloud) close() {
	if o.proxy != nil {
		o.proxy.release()
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ids := []string{}
	for id := range o.strangers {
		ids = append(ids, id)
	}
	if pages, err := loadbalancers.List(o.client, loadbalancers.ListOpts{Tags: []string{"chaos-stranger=" + o.cluster}}).AllPages(ctx); err == nil {
		if lbs, err := loadbalancers.ExtractLoadBalancers(pages); err == nil {
			for _, lb := range lbs {
				ids = append(ids, lb.ID)
			}
		}
	}
	if lbs, err := o.lbs(ctx); err == nil {
		for _, l := range lbs {
			for _, lb := range l {
				ids = append(ids, lb.ID)
			}
		}
	}
	slices.Sort(ids)
	// One still being built or changed refuses a delete (409): try again
	// until the minute is spent, or the stack keeps it.
	left := slices.Compact(ids)
	for len(left) > 0 && ctx.Err() == nil {
		left = slices.DeleteFunc(left, func(id string) bool {
			err := loadbalancers.Delete(ctx, o.client, id, loadbalancers.DeleteOpts{Cascade: true}).ExtractErr()
			return !gophercloud.ResponseCodeIs(err, http.StatusConflict)
		})
		if len(left) > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(2 * time.Second):
			}
		}
	}
	for _, id := range append(slices.Clone(o.retired), o.appID) {
		if id != "" && !slices.Contains(o.deleted, id) {
			_ = applicationcredentials.Delete(ctx, o.identity, o.userID, id).ExtractErr()
		}
	}
	if o.srv != nil {
		o.proxy.release()
		o.srv.Close()
	}
	if o.ksSrv != nil {
		o.ksSrv.Close()
	}
}

// osProxy passes the CCM's Octavia calls on, or fails them: every call
// while Octavia is down (OSOutage), or the next mutating calls (OSFail: a
// step of a multi-step change failing, the load balancer made and its
// listener refused, say), or holds the next mutating calls past the
// CCM's timeout and passes them on all the same (OSHang: the change made,
// its answer lost).
type osProxy struct {
	rp       *httputil.ReverseProxy
	mu       sync.Mutex
	down     bool
	failNext int
	calls    int
	failed   int
	// unauthorized counts Octavia's 401s: a token of a deleted
	// application credential (Keystone revokes them with it).
	unauthorized int
	// hangNext are the mutating calls still to hold past the CCM's
	// timeout (OSHang); stop ends the holds (the world stops).
	hangNext int
	stop     chan struct{}
	// hangFor is how long a hold lasts (0: osHangFor).
	hangFor time.Duration
}

// osHangFor is how long OSHang holds a call: past the os backend's
// request timeout (30 s, pkg/backends/openstack requestTimeout).
const osHangFor = 35 * time.Second

// hang makes the next n mutating calls hang past the CCM's timeout, then
// reach Octavia (0: none).
func (p *osProxy) hang(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.hangNext = n
}

// release ends the holds in progress (they go on to Octavia at once).
func (p *osProxy) release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stop == nil {
		p.stop = make(chan struct{})
	}
	select {
	case <-p.stop:
	default:
		close(p.stop)
	}
}

// statusRecorder counts the proxy's 401 answers.
type statusRecorder struct {
	http.ResponseWriter
	p *osProxy
}

func (r *statusRecorder) WriteHeader(code int) {
	if code == http.StatusUnauthorized {
		r.p.mu.Lock()
		r.p.unauthorized++
		r.p.mu.Unlock()
	}
	r.ResponseWriter.WriteHeader(code)
}

func (p *osProxy) ServeHTTP(rw http.ResponseWriter, req *http.Request) {
	rw = &statusRecorder{ResponseWriter: rw, p: p}
	mutating := req.Method != http.MethodGet && req.Method != http.MethodHead
	p.mu.Lock()
	p.calls++
	fail, hang := p.down, false
	switch {
	case !fail && mutating && p.failNext > 0:
		p.failNext--
		fail = true
	case !fail && mutating && p.hangNext > 0:
		p.hangNext--
		hang = true
	}
	if fail || hang {
		p.failed++
	}
	if p.stop == nil {
		p.stop = make(chan struct{})
	}
	stop := p.stop
	p.mu.Unlock()
	if hang {
		// Past the CCM's request timeout (30 s: its client gives up), then
		// on to Octavia all the same, the answer dropped: the change is
		// made and the CCM never hears of it.
		body, _ := io.ReadAll(req.Body)
		d := p.hangFor
		if d == 0 {
			d = osHangFor
		}
		select {
		case <-time.After(d):
		case <-stop:
		}
		late := req.Clone(context.WithoutCancel(req.Context()))
		late.Body = io.NopCloser(bytes.NewReader(body))
		p.rp.ServeHTTP(httptest.NewRecorder(), late)
		return
	}
	if fail {
		rw.Header().Set("Content-Type", "application/json")
		rw.WriteHeader(http.StatusServiceUnavailable)
		_ = json.NewEncoder(rw).Encode(map[string]any{"faultcode": "Server", "faultstring": "chaos: Octavia unavailable", "debuginfo": nil})
		return
	}
	p.rp.ServeHTTP(rw, req)
}

// setDown makes every call fail (down) or pass.
func (p *osProxy) setDown(down bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = down
}

// fail makes the next n mutating calls fail (0: none).
func (p *osProxy) fail(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.failNext = n
}

// counts are the calls passed or failed so far.
func (p *osProxy) counts() (calls, failed int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls, p.failed
}

// startIdentity finds the stack user's ID, starts the Keystone proxy and
// creates the run's first application credential.
func (o *osCloud) startIdentity(ctx context.Context, p *gophercloud.ProviderClient) error {
	var err error
	if o.identity, err = gcopenstack.NewIdentityV3(p, gophercloud.EndpointOpts{Region: o.region}); err != nil {
		return err
	}
	res, ok := p.GetAuthResult().(tokens.CreateResult)
	if !ok {
		return fmt.Errorf("keystone: no token result to read the user from (%T)", p.GetAuthResult())
	}
	user, err := res.ExtractUser()
	if err != nil {
		return fmt.Errorf("keystone: the token's user: %w", err)
	}
	o.userID = user.ID
	u, err := url.Parse(strings.TrimSuffix(strings.TrimSuffix(o.authURL, "/"), "/v3"))
	if err != nil {
		return fmt.Errorf("OS_AUTH_URL: %w", err)
	}
	o.keystone = &keystoneProxy{rp: httputil.NewSingleHostReverseProxy(u), logins: map[string]int{}}
	o.keystone.rp.ErrorLog = log.New(io.Discard, "", 0)
	o.ksSrv = httptest.NewServer(o.keystone)
	return o.rotate(ctx, 0)
}

// rotate creates the application credential of generation gen, writes its
// secret into a file of its own (the cloud-config names it: one reload
// changes the ID and the secret together) and makes it the one yaml
// writes; the old one is retired, still valid until deleteRetired.
func (o *osCloud) rotate(ctx context.Context, gen int) error {
	secret := make([]byte, 24)
	_, _ = rand.Read(secret)
	ac, err := applicationcredentials.Create(ctx, o.identity, o.userID, applicationcredentials.CreateOpts{
		Name: fmt.Sprintf("%s-%d", o.cluster, gen), Description: "the chaos judge's run " + o.cluster, Secret: hex.EncodeToString(secret),
	}).Extract()
	if err != nil {
		return fmt.Errorf("keystone: creating the application credential of generation %d: %w", gen, err)
	}
	if err := os.MkdirAll(o.dir, 0o700); err != nil {
		return err
	}
	path := filepath.Join(o.dir, fmt.Sprintf("secret-%d", gen))
	if err := os.WriteFile(path, []byte(ac.Secret+"\n"), 0o600); err != nil {
		return err
	}
	if o.appID != "" {
		o.retired = append(o.retired, o.appID)
	}
	o.appID, o.secretFile = ac.ID, path
	return nil
}

// deleteRetired deletes the retired application credentials in Keystone
// (which revokes their tokens) and starts counting their uses.
func (o *osCloud) deleteRetired(ctx context.Context) error {
	for _, id := range o.retired {
		if slices.Contains(o.deleted, id) {
			continue
		}
		if err := applicationcredentials.Delete(ctx, o.identity, o.userID, id).ExtractErr(); err != nil && !gophercloud.ResponseCodeIs(err, http.StatusNotFound) {
			return fmt.Errorf("keystone: deleting the application credential %s: %w", id, err)
		}
		o.deleted = append(o.deleted, id)
	}
	o.oldSeen = o.oldUses()
	return nil
}

// oldUses counts the uses of deleted credentials: logins with them and
// Octavia calls refused for a revoked token.
func (o *osCloud) oldUses() int {
	n := 0
	o.keystone.mu.Lock()
	for _, id := range o.deleted {
		n += o.keystone.logins[id]
	}
	o.keystone.mu.Unlock()
	o.proxy.mu.Lock()
	n += o.proxy.unauthorized
	o.proxy.mu.Unlock()
	return n
}

// keystoneProxy passes everything on to Keystone and counts the logins
// (POST /v3/auth/tokens) by application credential ID.
type keystoneProxy struct {
	rp     *httputil.ReverseProxy
	mu     sync.Mutex
	logins map[string]int
}

func (k *keystoneProxy) ServeHTTP(rw http.ResponseWriter, req *http.Request) {
	if req.Method == http.MethodPost && strings.HasSuffix(strings.TrimSuffix(req.URL.Path, "/"), "/auth/tokens") {
		body, err := io.ReadAll(req.Body)
		if err != nil {
			http.Error(rw, err.Error(), http.StatusBadRequest)
			return
		}
		req.Body = io.NopCloser(bytes.NewReader(body))
		var auth struct {
			Auth struct {
				Identity struct {
					AppCred struct {
						ID string `json:"id"`
					} `json:"application_credential"`
				} `json:"identity"`
			} `json:"auth"`
		}
		if json.Unmarshal(body, &auth) == nil && auth.Auth.Identity.AppCred.ID != "" {
			k.mu.Lock()
			k.logins[auth.Auth.Identity.AppCred.ID]++
			k.mu.Unlock()
		}
	}
	k.rp.ServeHTTP(rw, req)
}
