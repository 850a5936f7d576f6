package multi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"

	"github.com/gophercloud/gophercloud/v2"
	gcopenstack "github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/loadbalancers"

	"github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
)

// octaviaConfig: bare metal (with a pool) and an OpenStack backend on the
// real Keystone and Octavia (hack/openstack), Nova at an in-process
// endpoint with no servers.
const octaviaConfig = `apiVersion: multicloud-ccm.io/v1alpha1
kind: CloudConfig
clusterID: %[1]s
nodes: {unmanaged: ignore}
backends:
- name: metal
  type: baremetal
  baremetal:
    inventory: [{name: bm-1, addresses: [{type: InternalIP, address: 10.0.0.11}]}, {name: bm-2, addresses: [{type: InternalIP, address: 203.0.113.12}]}]
    addressPools: [{name: public, addresses: ["` + metalPool + `"], autoAssign: true}]
- name: os
  type: openstack
  openstack:
    auth: {authURL: %[2]s, username: %[3]s, password: {file: %[4]s}, projectName: %[5]s}
    region: %[6]s
    endpoints: {compute: %[7]s}
    loadBalancer: {vipSubnetID: 6f1e4f39-9c6a-4d55-8a25-4a4c8c3c2b11}
`

// TestMoveMetalToOctaviaDrains: the move from bare metal to the real
// Octavia with a 20 s drain, polled every 100 ms (see runMove). Skipped
// without the stack's environment (_output/openstack.env).
func TestMoveMetalToOctaviaDrains(t *testing.T) {
	env := map[string]string{}
	for _, k := range []string{"OS_AUTH_URL", "OS_USERNAME", "OS_PASSWORD_FILE", "OS_PROJECT_NAME", "OS_REGION_NAME", "OCTAVIA_E2E"} {
		if env[k] = os.Getenv(k); env[k] == "" {
			testutil.Unavailable(t, k+" is not set: start the real Keystone + Octavia with make openstack-up (make e2e sources _output/openstack.env)")
		}
	}
	e := newEnv(t)
	b := make([]byte, 3)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	cluster := "e2emulti" + hex.EncodeToString(b)
	e.opts.CloudConfig = fmt.Sprintf(octaviaConfig, cluster, env["OS_AUTH_URL"], env["OS_USERNAME"], env["OS_PASSWORD_FILE"],
		env["OS_PROJECT_NAME"], env["OS_REGION_NAME"], startNova(t))
	oc := octaviaClient(t, env)
	lbName := fmt.Sprintf("mccm_%s_%s_%s", cluster, ns, "o-m2os")
	e.octavia = func() int { return countOctavia(t, oc, lbName) }
	ccm := e.startCCM("octavia")
	runMove(t, e, ccm, "o-m2os", move{from: "metal", to: "os"})
	if n := countOctavia(t, oc, lbName); n != 0 {
		t.Errorf("%d Octavia load balancers left after the delete", n)
	}
}

// startNova serves Nova's server listing for a project with no servers.
func startNova(t *testing.T) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v2.1/servers/detail", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"servers": []any{}})
	})
	mux.HandleFunc("GET /v2.1/servers/{id}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_ = json.NewEncoder(w).Encode(map[string]any{"itemNotFound": map[string]any{"code": 404, "message": "Instance " + r.PathValue("id") + " could not be found."}})
	})
	s := httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s.URL + "/v2.1/"
}

func octaviaClient(t *testing.T, env map[string]string) *gophercloud.ServiceClient {
	t.Helper()
	pw, err := os.ReadFile(env["OS_PASSWORD_FILE"])
	if err != nil {
		t.Fatal(err)
	}
	for len(pw) > 0 && (pw[len(pw)-1] == '\n' || pw[len(pw)-1] == '\r' || pw[len(pw)-1] == ' ') {
		pw = pw[:len(pw)-1]
	}
	p, err := gcopenstack.AuthenticatedClient(context.Background(), gophercloud.AuthOptions{
		IdentityEndpoint: env["OS_AUTH_URL"], Username: env["OS_USERNAME"], Password: string(pw), DomainName: "Default",
		Scope: &gophercloud.AuthScope{ProjectName: env["OS_PROJECT_NAME"], DomainName: "Default"},
	})
	if err != nil {
		t.Fatal(err)
	}
	c, err := gcopenstack.NewLoadBalancerV2(p, gophercloud.EndpointOpts{Region: env["OS_REGION_NAME"]})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// countOctavia counts the Octavia load balancers named name that are not
// being deleted.
func countOctavia(t *testing.T, c *gophercloud.ServiceClient, name string) int {
	t.Helper()
	pages, err := loadbalancers.List(c, loadbalancers.ListOpts{Name: name}).AllPages(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	lbs, err := loadbalancers.ExtractLoadBalancers(pages)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, lb := range lbs {
		if lb.ProvisioningStatus != "PENDING_DELETE" && lb.ProvisioningStatus != "DELETED" {
			n++
		}
	}
	return n
}
