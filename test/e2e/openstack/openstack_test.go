// Package openstack is the end-to-end scenario of the OpenStack backend: the
// built multicloud-ccm binary against a real kube-apiserver and etcd and the
// real Keystone + Octavia that hack/openstack/up.sh starts, with Nova served
// in-process (the stack has no Nova). Bare-metal nodes become the members of
// an Octavia load balancer.
package openstack

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	gcopenstack "github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/loadbalancers"
	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/pools"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
	"github.com/multicloud-ccm/multicloud-ccm/test/e2e/framework"
)

var suite framework.Shared

func TestMain(m *testing.M) { os.Exit(suite.Run(m)) }

const (
	ns      = "default"
	settle  = 30 * time.Second
	convert = 90 * time.Second // Octavia: create, ACTIVE, converge
)

// cloudConfig: bare-metal machines bm-1 and bm-2 and an OpenStack backend on the
// real Keystone and Octavia, Nova at the in-process endpoint.
const cloudConfig = `apiVersion: multicloud-ccm.io/v1alpha1
kind: CloudConfig
clusterID: %s
backends:
- name: metal
  type: baremetal
  baremetal:
    inventory:
    - name: bm-1
      addresses: [{type: InternalIP, address: 10.9.0.11}]
    - name: bm-2
      addresses: [{type: InternalIP, address: 10.9.0.12}]
    - name: bm-3
      addresses: [{type: InternalIP, address: 10.9.0.13}]
- name: os
  type: openstack
  openstack:
    auth: {authURL: %s, username: %s, password: {file: %s}, projectName: %s}
    region: %s
    endpoints: {compute: %s}
    loadBalancer: {vipSubnetID: 6f1e4f39-9c6a-4d55-8a25-4a4c8c3c2b11}
`

// octaviaEnv reads the stack's environment; without it the test skips, or
// fails when CI is set.
func octaviaEnv(t *testing.T) map[string]string {
	t.Helper()
	env := map[string]string{}
	for _, k := range []string{"OS_AUTH_URL", "OS_USERNAME", "OS_PASSWORD_FILE", "OS_PROJECT_NAME", "OS_REGION_NAME", "OCTAVIA_E2E"} {
		env[k] = os.Getenv(k)
		if env[k] == "" {
			testutil.Unavailable(t, fmt.Sprintf(`%s is not set: start the real Keystone + Octavia with make openstack-up (make e2e sources _output/openstack.env)`, k))
		}
	}
	return env
}

// startNova serves Nova's server listing and lookups for a project with no
// servers, as the API reference shapes them.
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

// octavia is a direct client of the real Octavia, to look at what the CCM
// made.
func octavia(t *testing.T, env map[string]string) *gophercloud.ServiceClient {
	t.Helper()
	pw, err := os.ReadFile(env["OS_PASSWORD_FILE"])
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	p, err := gcopenstack.AuthenticatedClient(ctx, gophercloud.AuthOptions{
		IdentityEndpoint: env["OS_AUTH_URL"], Username: env["OS_USERNAME"], Password: string(trimNL(pw)), DomainName: "Default",
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

func trimNL(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r' || b[len(b)-1] == ' ') {
		b = b[:len(b)-1]
	}
	return b
}

// lbView is the Service's load balancer in Octavia: its VIP and its members
// as "address:port", or found=false.
type lbView struct {
	found   int
	vip     string
	status  string
	members []string
}

func observe(t *testing.T, c *gophercloud.ServiceClient, name string) lbView {
	t.Helper()
	ctx := context.Background()
	pages, err := loadbalancers.List(c, loadbalancers.ListOpts{Name: name}).AllPages(ctx)
	if err != nil {
		t.Fatal(err)
	}
	lbs, err := loadbalancers.ExtractLoadBalancers(pages)
	if err != nil {
		t.Fatal(err)
	}
	v := lbView{found: len(lbs)}
	if len(lbs) != 1 {
		return v
	}
	v.vip, v.status = lbs[0].VipAddress, lbs[0].ProvisioningStatus
	pp, err := pools.List(c, pools.ListOpts{LoadbalancerID: lbs[0].ID}).AllPages(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ps, err := pools.ExtractPools(pp)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		mp, err := pools.ListMembers(c, p.ID, pools.ListMembersOpts{}).AllPages(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ms, err := pools.ExtractMembers(mp)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ms {
			v.members = append(v.members, fmt.Sprintf("%s:%d", m.Address, m.ProtocolPort))
		}
	}
	sort.Strings(v.members)
	return v
}

func randomSuffix(t *testing.T) string {
	b := make([]byte, 3)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// TestOctaviaLoadBalancerForBareMetalNodes: bare-metal nodes and a Service
// annotated for the OpenStack backend → an Octavia load balancer whose
// members are exactly those nodes at the NodePort, the VIP in the Service's
// status; a node whose address arrives after it joined becomes a member
// (upstream's service controller does not re-sync on an address change; the
// router does); deleting the Service removes the load balancer.
func TestOctaviaLoadBalancerForBareMetalNodes(t *testing.T) {
	env := octaviaEnv(t)
	cp := suite.ControlPlane(t)
	clusterID := "e2e" + randomSuffix(t)
	cfg := fmt.Sprintf(cloudConfig, clusterID, env["OS_AUTH_URL"], env["OS_USERNAME"], env["OS_PASSWORD_FILE"], env["OS_PROJECT_NAME"],
		env["OS_REGION_NAME"], startNova(t))
	cp.StartCCMT(t, framework.CCMOptions{CloudConfig: cfg})
	ctx := context.Background()
	oc := octavia(t, env)

	for _, name := range []string{"bm-1", "bm-2"} {
		if _, err := framework.CreateNode(ctx, cp.Client, framework.NewNode(name, framework.WithProviderID("baremetal://"+name))); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"bm-1", "bm-2"} {
		framework.Eventually(t, settle, name+" initialised", framework.NodeMatches(cp.Client, name, func(n *corev1.Node) (bool, string) {
			return !framework.HasTaint(n, framework.UninitializedTaint) && len(n.Status.Addresses) > 0, fmt.Sprintf("taints %v addresses %v", n.Spec.Taints, n.Status.Addresses)
		}))
	}

	if _, err := framework.CreateService(ctx, cp.Client, framework.NewLoadBalancerService(ns, "web", framework.WithAnnotation(string(annotation.LoadBalancerBackend), "os"))); err != nil {
		t.Fatal(err)
	}
	lbName := fmt.Sprintf("mccm_%s_%s_%s", clusterID, ns, "web")
	framework.Eventually(t, convert, "the Service's address", framework.ServiceMatches(cp.Client, ns, "web", framework.HasIngress))
	svc, err := cp.Client.CoreV1().Services(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	nodePort := svc.Spec.Ports[0].NodePort
	v := observe(t, oc, lbName)
	want := []string{fmt.Sprintf("10.9.0.11:%d", nodePort), fmt.Sprintf("10.9.0.12:%d", nodePort)}
	if v.found != 1 || v.status != "ACTIVE" || !slices.Equal(v.members, want) {
		t.Fatalf("Octavia holds %+v; want one ACTIVE load balancer with members %v", v, want)
	}
	if ips := framework.IngressIPs(svc); len(ips) != 1 || ips[0] != v.vip {
		t.Fatalf("Service ingress %v, want the VIP %s", ips, v.vip)
	}

	// bm-3 registers initialised, with its providerID and no address; the
	// CCM's periodic status update fills it in.
	if _, err := framework.CreateNode(ctx, cp.Client, framework.NewNode("bm-3", framework.WithProviderID("baremetal://bm-3"), framework.WithoutUninitializedTaint())); err != nil {
		t.Fatal(err)
	}
	want = append(want, fmt.Sprintf("10.9.0.13:%d", nodePort))
	framework.Eventually(t, convert, "bm-3 a member once its address arrives", func(context.Context) (bool, string, error) {
		v := observe(t, oc, lbName)
		return v.found == 1 && v.status == "ACTIVE" && slices.Equal(v.members, want), fmt.Sprintf("Octavia holds %+v; want members %v", v, want), nil
	})

	if err := cp.Client.CoreV1().Services(ns).Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, convert, "the Service gone", framework.ServiceGone(cp.Client, ns, "web"))
	if v := observe(t, oc, lbName); v.found != 0 && v.status != "PENDING_DELETE" {
		t.Fatalf("Octavia still holds %+v after the Service was deleted", v)
	}
}
