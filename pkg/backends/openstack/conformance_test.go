package openstack

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/multicloud-ccm/multicloud-ccm/internal/backendtest"
	"github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/config"
)

// TestConformance runs the backend contract: instances on the Nova fake,
// load balancers on the real Octavia (with floating IPs on the Neutron
// fake) when its environment is present.
func TestConformance(t *testing.T) {
	t.Parallel()
	backendtest.Run(t, newConformanceFixture)
}

// errInjected is what faultTransport answers instead of the cloud.
var errInjected = errors.New("injected failure: the request never reached OpenStack")

// faultTransport counts the backend's mutating calls to OpenStack services
// (Keystone excluded) and fails them on demand.
type faultTransport struct {
	next http.RoundTripper

	mu        sync.Mutex
	mutations int
	// allowed is how many more mutating calls may pass; -1: no limit.
	allowed int
	// loseResponse makes a failed mutating call reach OpenStack and only
	// its response be lost (a crash right after the step), instead of
	// never being sent.
	loseResponse bool
}

func newFaultTransport(next http.RoundTripper) *faultTransport {
	return &faultTransport{next: next, allowed: -1}
}

// RoundTrip forwards r unless it is a mutating call past the limit.
func (f *faultTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodGet || r.Method == http.MethodHead || strings.HasSuffix(r.URL.Path, "/auth/tokens") {
		return f.next.RoundTrip(r)
	}
	f.mu.Lock()
	fail, lose := f.allowed == 0, f.loseResponse
	if !fail {
		f.mutations++
		if f.allowed > 0 {
			f.allowed--
		}
	}
	f.mu.Unlock()
	if !fail {
		return f.next.RoundTrip(r)
	}
	if lose {
		if resp, err := f.next.RoundTrip(r); err == nil {
			_ = resp.Body.Close()
		}
		return nil, errInjected
	}
	// Never sent: a connection that could not be made, which the backend
	// can tell from an answer lost (answerLost).
	return nil, &net.OpError{Op: "dial", Net: "tcp", Err: errInjected}
}

// Mutations returns how many mutating calls passed.
func (f *faultTransport) Mutations() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.mutations
}

// failAfter lets n more mutating calls pass and fails the later ones until
// the returned restore is called.
func (f *faultTransport) failAfter(n int, loseResponse bool) (restore func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.allowed, f.loseResponse = n, loseResponse
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.allowed, f.loseResponse = -1, false
	}
}

// conformance is one fixture's backend and clouds.
type conformance struct {
	fake  *FakeOpenStack
	cloud *Cloud
	fault *faultTransport
	// direct reaches OpenStack without the fault transport, to count parts.
	direct *serviceClients
}

// haveRealOctavia reports whether hack/openstack/up.sh's environment is set.
func haveRealOctavia() bool {
	return os.Getenv("OS_AUTH_URL") != "" && os.Getenv("OCTAVIA_E2E") != "" && os.Getenv("OS_PASSWORD_FILE") != ""
}

// newConformance builds the backend: Nova and Neutron on the fake; with
// load balancers, Keystone and Octavia real (else the fake Keystone and no
// load balancers).
func newConformance(t *testing.T, loadBalancers bool) *conformance {
	t.Helper()
	f := NewFakeOpenStack(t)
	var s *Settings
	if loadBalancers {
		f.AnyToken = true
		s = &Settings{
			Auth: Auth{AuthURL: os.Getenv("OS_AUTH_URL"), Username: os.Getenv("OS_USERNAME"),
				Password: config.SecretRef{File: os.Getenv("OS_PASSWORD_FILE")}, ProjectName: os.Getenv("OS_PROJECT_NAME")},
			Region:       os.Getenv("OS_REGION_NAME"),
			Endpoints:    Endpoints{Compute: f.ComputeURL(), Network: f.NetworkURL()},
			LoadBalancer: LoadBalancerSettings{VIPSubnetID: VIPSubnetForTests, FloatingNetworkID: floatingNet},
		}
	} else {
		s = f.Settings(t)
	}
	s.Instances.CacheTTLSeconds = 1
	s.setDefaults("")
	if errs := s.validate(nil, ""); len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	conn, err := newConnector("os", s)
	if err != nil {
		t.Fatal(err)
	}
	fault := newFaultTransport(conn.http.Transport)
	conn.http.Transport = fault
	c := &conformance{fake: f, fault: fault, cloud: newCloud("os", "c"+randomID(t), s, conn.get)}
	if c.cloud.lb != nil {
		c.cloud.lb.retryDelay = 300 * time.Millisecond
		direct, err := newConnector("os-direct", s)
		if err != nil {
			t.Fatal(err)
		}
		if c.direct, err = direct.get(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

func newConformanceFixture(t *testing.T) *backendtest.Fixture {
	// Each clause (a subtest of backendtest.Run, which calls this first)
	// has a fixture of its own: its fake, a backend with its own cluster ID
	// and fault transport, Services of its own. The clauses run side by
	// side: the load-balancer ones mostly wait on Octavia (the ownership
	// clause alone takes two minutes).
	t.Parallel()
	// The instance clauses log in to the fake Keystone (a real login costs
	// seconds per clause); the load-balancer clauses need the real stack.
	lbClause := strings.Contains(t.Name(), "/loadbalancers/")
	if lbClause && !haveRealOctavia() {
		testutil.Unavailable(t, `no real Keystone + Octavia for the load-balancer clauses: run eval "$(hack/openstack/up.sh)" first (sets OS_AUTH_URL, OS_PASSWORD_FILE, OCTAVIA_E2E)`)
	}
	c := newConformance(t, lbClause)
	fx := &backendtest.Fixture{Cloud: c.cloud, Settle: 5 * time.Second, Type: Type, Instances: c.instanceHooks()}
	if strings.Contains(t.Name(), "/loadbalancers/strangers") {
		// The ownership clause checks strangers, not how many calls a
		// change takes: it gets the backend as the service controller
		// drives it (see stepwiseCloud).
		fx.Cloud = stepwiseCloud{c.cloud}
	}
	if c.cloud.lb != nil {
		fx.LoadBalancers = c.loadBalancerHooks()
	}
	return fx
}

// randomUUID returns a random version-4 UUID.
func randomUUID(t testing.TB) string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// addServer adds a running server to the fake Nova.
func (c *conformance) addServer(t *testing.T, name, addr string) FakeNovaServer {
	t.Helper()
	srv := FakeNovaServer{ID: randomUUID(t), Name: name, Zone: "az-1", Flavor: "m1.small", Status: "ACTIVE",
		Addresses: map[string][]string{"private": {addr}}}
	c.fake.AddServer(srv)
	return srv
}

// serverID is the server UUID of a node the hooks made.
func serverID(t *testing.T, node *corev1.Node) string {
	t.Helper()
	id, _, err := ParseProviderID(node.Spec.ProviderID)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func (c *conformance) instanceHooks() *backendtest.InstanceHooks {
	var n int
	var mu sync.Mutex
	next := func() int {
		mu.Lock()
		defer mu.Unlock()
		n++
		return n
	}
	return &backendtest.InstanceHooks{
		Running: func(t *testing.T) *corev1.Node {
			i := next()
			srv := c.addServer(t, fmt.Sprintf("vm-%d", i), fmt.Sprintf("10.20.0.%d", i))
			return newNode(srv.Name, withProviderID("openstack:///"+srv.ID), withInternalIP(srv.Addresses["private"][0]),
				withLabel(string(annotation.NodeBackend), "os"), withLabel(corev1.LabelTopologyRegion, "RegionOne"),
				withLabel(corev1.LabelTopologyZone, srv.Zone), withLabel(corev1.LabelInstanceTypeStable, srv.Flavor))
		},
		Gone:       func(t *testing.T, node *corev1.Node) { c.fake.RemoveServer(serverID(t, node)) },
		Unreadable: func(t *testing.T, node *corev1.Node) { c.fake.SetStatus(serverID(t, node), statusUnknown) },
		PowerOff:   func(t *testing.T, node *corev1.Node) { c.fake.SetStatus(serverID(t, node), statusShutoff) },
		PowerOn:    func(t *testing.T, node *corev1.Node) { c.fake.SetStatus(serverID(t, node), "ACTIVE") },
		Outage: func(*testing.T) func() {
			c.fake.Fail(http.StatusServiceUnavailable)
			return func() { c.fake.Fail(0) }
		},
		Absent: func(t *testing.T) string { return "openstack:///" + randomUUID(t) },
		Foreign: func(t *testing.T) []string {
			srv := c.addServer(t, fmt.Sprintf("vm-%d", next()), "10.20.1.1")
			return []string{"openstack://RegionTwo/" + srv.ID, "openstack://regionone/" + randomUUID(t)}
		},
		Malformed: []string{"openstack:///not-a-uuid", "openstack://" + uuidA, "openstack:///" + uuidA + "/x", "openstack:///", "openstack://RegionOne/"},
		StrongMatch: func(t *testing.T) *corev1.Node {
			srv := c.addServer(t, fmt.Sprintf("strong-%d", next()), "10.20.2.1")
			return newNode(srv.Name)
		},
		// The backend claims a node by its exact server name only: a node
		// with a server's address but another name is not claimed.
		WeakMatch: func(t *testing.T) *corev1.Node {
			i := next()
			c.addServer(t, fmt.Sprintf("weak-%d", i), fmt.Sprintf("10.20.3.%d", i))
			return newNode(fmt.Sprintf("Weak-%d", i), withInternalIP(fmt.Sprintf("10.20.3.%d", i)))
		},
	}
}

func (c *conformance) loadBalancerHooks() *backendtest.LoadBalancerHooks {
	return &backendtest.LoadBalancerHooks{
		Service: func(t *testing.T) *corev1.Service {
			svc := newService("conf-" + randomID(t))
			svc.UID = types.UID(randomUUID(t))
			return svc
		},
		Nodes: func(*testing.T) []*corev1.Node {
			return []*corev1.Node{newNode("vm-a", withInternalIP("10.0.0.11")), newNode("bm-1", withInternalIP("192.168.7.21"))}
		},
		Mutations: c.fault.Mutations,
		FailMutationsAfter: func(_ *testing.T, n int) func() {
			return c.fault.failAfter(n, false)
		},
		Parts:     c.parts,
		Strangers: c.strangers,
		Variants:  variants,
	}
}

// parts counts what OpenStack holds for the Service: its load balancers
// with their listeners, pools, members and monitors, and the floating IPs
// on their VIP ports or carrying the load balancer's name.
func (c *conformance) parts(t *testing.T, svc *corev1.Service) (lbs, parts int) {
	t.Helper()
	ctx := context.Background()
	found, err := c.cloud.lb.find(ctx, c.direct, svc)
	if err != nil {
		t.Fatal(err)
	}
	ports := map[string]bool{}
	for _, lb := range found {
		ports[lb.VipPortID] = true
		parts++
		st, err := readState(ctx, c.direct.loadBalancer, lb.ID)
		if err != nil && lb.ProvisioningStatus == "PENDING_DELETE" {
			// A cascade delete removes the children as they are read
			// (Octavia answers 404, or 500 for a monitor half gone).
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		parts += len(st.listeners)
		for _, p := range st.pools {
			parts += 1 + len(p.members)
			if p.monitor != nil {
				parts++
			}
		}
	}
	for _, fip := range c.fake.FloatingIPs() {
		if fip.Description == c.cloud.lb.lbName(svc) || (fip.PortID != "" && ports[fip.PortID]) {
			parts++
		}
	}
	return len(found), parts
}
