package openstack

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/loadbalancers"
	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/pools"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
	"github.com/multicloud-ccm/multicloud-ccm/test/e2e/framework"
)

const (
	octaviaClass = "multicloud-ccm.io/octavia"
	repairPeriod = 5 * time.Second
)

// TestClassedServiceOnOctavia: a Service with the config's Octavia class is
// served by multicloud-ccm's own controller on the real Octavia: its VIP in
// the status, an EnsuredLoadBalancer event naming the backend and the
// Octavia load balancer's ID, a member deleted behind the CCM's back
// restored by the next drift-repair pass with a LoadBalancerDriftRepaired
// event, and nothing left in Octavia after the Service's deletion.
func TestClassedServiceOnOctavia(t *testing.T) {
	env := octaviaEnv(t)
	cp := suite.ControlPlane(t)
	clusterID := "e2e" + randomSuffix(t)
	cfg := fmt.Sprintf(cloudConfig, clusterID, env["OS_AUTH_URL"], env["OS_USERNAME"], env["OS_PASSWORD_FILE"], env["OS_PROJECT_NAME"],
		env["OS_REGION_NAME"], startNova(t))
	cfg = strings.Replace(cfg, "backends:\n", "loadBalancer:\n  classes: [{name: "+octaviaClass+", backend: os}]\nbackends:\n", 1)
	cp.StartCCMT(t, framework.CCMOptions{CloudConfig: cfg, ExtraArgs: []string{"--load-balancer-resync-period=" + repairPeriod.String()}})
	ctx := context.Background()
	oc := octavia(t, env)
	for _, name := range []string{"bm-1", "bm-2"} {
		if _, err := framework.CreateNode(ctx, cp.Client, framework.NewNode(name, framework.WithProviderID("baremetal://"+name),
			framework.WithoutUninitializedTaint(), framework.WithAddresses(corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: map[string]string{"bm-1": "10.9.0.11", "bm-2": "10.9.0.12"}[name]}))); err != nil {
			t.Fatal(err)
		}
		// The suite's other tests register these machines themselves.
		t.Cleanup(func() { _ = cp.Client.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	}

	if _, err := framework.CreateService(ctx, cp.Client, framework.NewLoadBalancerService(ns, "classy", framework.WithLoadBalancerClass(octaviaClass))); err != nil {
		t.Fatal(err)
	}
	lbName := fmt.Sprintf("mccm_%s_%s_%s", clusterID, ns, "classy")
	framework.Eventually(t, convert, "the classed Service's address", framework.ServiceMatches(cp.Client, ns, "classy", framework.HasIngress))
	svc, err := cp.Client.CoreV1().Services(ns).Get(ctx, "classy", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	v := observe(t, oc, lbName)
	if ips := framework.IngressIPs(svc); v.found != 1 || len(ips) != 1 || ips[0] != v.vip {
		t.Fatalf("Service ingress %v, Octavia holds %+v", ips, v)
	}
	id := svc.Annotations[string(annotation.LoadBalancerID)]
	if id == "" {
		t.Fatalf("no %s annotation: %v", annotation.LoadBalancerID, svc.Annotations)
	}
	// OCCM's annotations, written back as OCCM writes them.
	if got, addr := svc.Annotations["loadbalancer.openstack.org/load-balancer-id"], svc.Annotations["loadbalancer.openstack.org/load-balancer-address"]; got != id || addr != v.vip {
		t.Errorf("OCCM's annotations load-balancer-id %q, load-balancer-address %q; want %q and the VIP %q", got, addr, id, v.vip)
	}
	framework.Eventually(t, settle, "the EnsuredLoadBalancer event names the backend and the load balancer", framework.EventWith(cp.Client, "Service", ns, "classy", "EnsuredLoadBalancer", `backend "os"`, id))

	// A member deleted behind the CCM's back.
	members := v.members
	deleteOneMember(t, oc, lbName)
	framework.Eventually(t, convert, "the member restored", func(context.Context) (bool, string, error) {
		v := observe(t, oc, lbName)
		return v.status == "ACTIVE" && slices.Equal(v.members, members), fmt.Sprintf("Octavia holds %+v, want members %v", v, members), nil
	})
	framework.Eventually(t, settle, "the LoadBalancerDriftRepaired event", framework.EventWith(cp.Client, "Service", ns, "classy", "LoadBalancerDriftRepaired", "member"))

	if err := cp.Client.CoreV1().Services(ns).Delete(ctx, "classy", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, convert, "the Service gone", framework.ServiceGone(cp.Client, ns, "classy"))
	if v := observe(t, oc, lbName); v.found != 0 && v.status != "PENDING_DELETE" {
		t.Fatalf("Octavia still holds %+v after the Service was deleted", v)
	}
}

// deleteOneMember deletes the first member of the load balancer's first
// pool, as an operator with the OpenStack CLI would.
func deleteOneMember(t *testing.T, oc *gophercloud.ServiceClient, lbName string) {
	t.Helper()
	ctx := context.Background()
	pages, err := loadbalancers.List(oc, loadbalancers.ListOpts{Name: lbName}).AllPages(ctx)
	if err != nil {
		t.Fatal(err)
	}
	lbs, err := loadbalancers.ExtractLoadBalancers(pages)
	if err != nil || len(lbs) != 1 {
		t.Fatalf("load balancers %v, %v", lbs, err)
	}
	pp, err := pools.List(oc, pools.ListOpts{LoadbalancerID: lbs[0].ID}).AllPages(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ps, err := pools.ExtractPools(pp)
	if err != nil || len(ps) == 0 || len(ps[0].Members) == 0 {
		t.Fatalf("pools %+v, %v", ps, err)
	}
	// Octavia refuses (409) while the load balancer is busy and its sqlite
	// database may be locked (500) under load: retry, as the CLI's user would.
	framework.Eventually(t, convert, "a member deleted by hand", func(context.Context) (bool, string, error) {
		err := pools.DeleteMember(ctx, oc, ps[0].ID, ps[0].Members[0].ID).ExtractErr()
		return err == nil, fmt.Sprint(err), nil
	})
}
