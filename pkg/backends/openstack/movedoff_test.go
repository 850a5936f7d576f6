package openstack_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	gcopenstack "github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/loadbalancers"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends/openstack"
)

// octaviaClient is a client of the real Octavia, bypassing the proxy.
func octaviaClient(t *testing.T, s *openstack.Settings) *gophercloud.ServiceClient {
	t.Helper()
	ctx := context.Background()
	pw, err := s.Auth.Password.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	p, err := gcopenstack.AuthenticatedClient(ctx, gophercloud.AuthOptions{IdentityEndpoint: s.Auth.AuthURL, Username: s.Auth.Username, Password: pw,
		DomainName: "Default", Scope: &gophercloud.AuthScope{ProjectName: s.Auth.ProjectName, DomainName: "Default"}})
	if err != nil {
		t.Fatal(err)
	}
	lbc, err := gcopenstack.NewLoadBalancerV2(p, gophercloud.EndpointOpts{Region: s.Region})
	if err != nil {
		t.Fatal(err)
	}
	return lbc
}

// TestMovedOffOctaviaShowsNoVIPBeingDeleted (chaos seed 657511868,
// test/chaos/testdata/new-octavia-vip-twice-657511868.json) drives the
// upstream service controller over the router on the real Octavia: a
// Service moved from os to metal with no drain never shows the VIP of its
// Octavia load balancer once that one is being deleted (PENDING_DELETE)
// or gone; it shows metal's address, and the load balancer goes. Octavia
// is read before the Service each time: a VIP shown after Octavia said
// PENDING_DELETE was shown while it was being deleted. Before, the
// router's sync failed on the delete's "being deleted, retry" before the
// status was written, and the Service showed the VIP for as long as the
// delete took, and until the retry after it. Beside the other tests: its
// cluster ID (so its load balancer), proxies and fake API server are its
// own, and no outage makes upstream's controller back off (a retry from
// the backend comes back after its retry delay).
func TestMovedOffOctaviaShowsNoVIPBeingDeleted(t *testing.T) {
	t.Parallel()
	bm := node("bm-1", "baremetal://bm-1", true, false)
	bm.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.41"}}
	e := newEnv(t, bm)
	e.start()
	testutil.RunServiceController(t, e.router, e.client, e.factory, "kubernetes", 2)
	time.Sleep(time.Second) // after the node sync of start-up, as TestServiceControllerThroughOctaviaOutage
	svc := service("web", "os")
	svc.Annotations[string(annotation.LoadBalancerDrain)] = "0s"
	if _, err := e.client.CoreV1().Services("default").Create(e.ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 120*time.Second, "web's VIP", func() bool { return ingress(e.service(t, "web")) != "" })
	vip := ingress(e.service(t, "web"))
	lbc := octaviaClient(t, e.settings)
	name := "mccm_" + e.clusterID + "_default_web"
	lbs := func() []loadbalancers.LoadBalancer {
		pages, err := loadbalancers.List(lbc, loadbalancers.ListOpts{Name: name}).AllPages(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		found, err := loadbalancers.ExtractLoadBalancers(pages)
		if err != nil {
			t.Fatal(err)
		}
		return found
	}
	if n := len(lbs()); n != 1 {
		t.Fatalf("%d load balancers named %s, want 1", n, name)
	}

	s := e.service(t, "web")
	s.Annotations[string(annotation.LoadBalancerBackend)] = "metal"
	if _, err := e.client.CoreV1().Services("default").Update(e.ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	var shown []string
	sawDeleting := false
	eventually(t, 120*time.Second, "web on metal alone, its Octavia load balancer gone", func() bool {
		found := lbs()
		deleting := len(found) == 0 || found[0].ProvisioningStatus == "PENDING_DELETE" || found[0].ProvisioningStatus == "DELETED"
		cur := e.service(t, "web")
		var addrs []string
		for _, in := range cur.Status.LoadBalancer.Ingress {
			addrs = append(addrs, in.IP)
		}
		if len(found) > 0 && deleting {
			sawDeleting = true
		}
		if deleting && strings.Contains(","+strings.Join(addrs, ",")+",", ","+vip+",") {
			status := "gone"
			if len(found) > 0 {
				status = found[0].ProvisioningStatus
			}
			shown = append(shown, fmt.Sprintf("%s: status %v, the load balancer %s", time.Now().Format("15:04:05.000"), addrs, status))
		}
		return len(found) == 0 && len(addrs) == 1 && strings.HasPrefix(addrs[0], "192.0.2.") && cur.Annotations[string(annotation.LoadBalancerBackends)] == "metal"
	})
	if len(shown) > 0 {
		t.Errorf("web showed the VIP %s of its load balancer being deleted or gone, %d times; the first and the last: %s; %s", vip, len(shown), shown[0], shown[len(shown)-1])
	}
	t.Logf("Octavia's delete seen under way: %v", sawDeleting)
}
