package openstack

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/listeners"
	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/loadbalancers"
	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/monitors"
	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/pools"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// createLikeOCCM builds a Service's load balancer the way
// cloud-provider-openstack's ensureOctaviaLoadBalancer does with
// create-monitor on (pkg/openstack/loadbalancer.go): its name
// kube_service_<cluster>_<namespace>_<name>, its description and tag, per
// port listener_<i>_<name> (connection limit -1, the name as tag),
// pool_<i>_<name>, members named after their nodes at NodePort on the
// member (VIP) subnet, monitor_<i>_<name> with OCCM's default settings
// (delay 5, timeout 3, max retries 1, max retries down 3). Each object is
// created once the previous one is ACTIVE, as OCCM does with serial calls.
func createLikeOCCM(t *testing.T, c *gophercloud.ServiceClient, svc *corev1.Service, nodes []*corev1.Node) *loadbalancers.LoadBalancer {
	t.Helper()
	ctx := context.Background()
	name := occmName("kubernetes", svc)
	lb, err := loadbalancers.Create(ctx, c, loadbalancers.CreateOpts{
		Name: name, Description: fmt.Sprintf("Kubernetes external service %s/%s from cluster kubernetes", svc.Namespace, svc.Name),
		VipSubnetID: VIPSubnetForTests, Tags: []string{name},
	}).Extract()
	if err != nil {
		t.Fatalf("creating the OCCM load balancer: %v", err)
	}
	waitActive(t, c, lb.ID)
	for i, p := range svc.Spec.Ports {
		ls, err := listeners.Create(ctx, c, listeners.CreateOpts{
			Name: fmt.Sprintf("listener_%d_%s", i, name), Protocol: listeners.Protocol(p.Protocol), ProtocolPort: int(p.Port),
			ConnLimit: ptr(-1), Tags: []string{name}, LoadbalancerID: lb.ID,
			TimeoutClientData: ptr(50000), TimeoutMemberConnect: ptr(5000), TimeoutMemberData: ptr(50000), TimeoutTCPInspect: ptr(0),
		}).Extract()
		if err != nil {
			t.Fatalf("creating the OCCM listener: %v", err)
		}
		waitActive(t, c, lb.ID)
		pool, err := pools.Create(ctx, c, pools.CreateOpts{Name: fmt.Sprintf("pool_%d_%s", i, name), Protocol: pools.Protocol(p.Protocol), LBMethod: pools.LBMethodRoundRobin, ListenerID: ls.ID}).Extract()
		if err != nil {
			t.Fatalf("creating the OCCM pool: %v", err)
		}
		waitActive(t, c, lb.ID)
		var members []pools.BatchUpdateMemberOpts
		for _, n := range nodes {
			members = append(members, pools.BatchUpdateMemberOpts{Address: nodeAddress(n), ProtocolPort: int(p.NodePort), Name: ptr(n.Name), SubnetID: ptr(VIPSubnetForTests)})
		}
		if err := pools.BatchUpdateMembers(ctx, c, pool.ID, members).ExtractErr(); err != nil {
			t.Fatalf("adding the OCCM members: %v", err)
		}
		waitActive(t, c, lb.ID)
		typ := string(p.Protocol)
		if p.Protocol == corev1.ProtocolUDP {
			typ = "UDP-CONNECT"
		}
		// Octavia may answer 409 (pool immutable) while the member update
		// settles, though the load balancer reads ACTIVE: OCCM waits too.
		eventuallyOn(t, 60*time.Second, "creating the OCCM monitor", func() error {
			_, err := monitors.Create(ctx, c, monitors.CreateOpts{
				Name: fmt.Sprintf("monitor_%d_%s", i, name), PoolID: pool.ID, Type: typ, Delay: 5, Timeout: 3, MaxRetries: 1, MaxRetriesDown: 3,
			}).Extract()
			if err != nil && !gophercloud.ResponseCodeIs(err, http.StatusConflict) {
				t.Fatalf("creating the OCCM monitor: %v", err)
			}
			return err
		})
		waitActive(t, c, lb.ID)
	}
	lb, err = loadbalancers.Get(ctx, c, lb.ID).Extract()
	if err != nil {
		t.Fatal(err)
	}
	return lb
}

func waitActive(t *testing.T, c *gophercloud.ServiceClient, id string) {
	t.Helper()
	eventuallyOn(t, 60*time.Second, "load balancer "+id+" ACTIVE", func() error {
		lb, err := loadbalancers.Get(context.Background(), c, id).Extract()
		if err != nil {
			return err
		}
		if lb.ProvisioningStatus != lbActive {
			return fmt.Errorf("load balancer is %s", lb.ProvisioningStatus)
		}
		return nil
	})
}

// TestAdoptOCCMLoadBalancers: Services whose load balancers
// cloud-provider-openstack made (one still carrying OCCM's
// load-balancer-id annotation, one found by OCCM's name alone) are adopted
// by the upstream service controller over the router: no create or delete
// of any Octavia object, the same load balancer and VIP, the status
// carrying that VIP, and from then on the load balancer is ours (tagged)
// and converged.
func TestAdoptOCCMLoadBalancers(t *testing.T) {
	t.Parallel()
	nodes := []*corev1.Node{readyNode("n1", "10.22.0.1", nil), readyNode("n2", "10.22.0.2", nil)}
	e := newSvcEnv(t, nil, nodes...)
	ctx := context.Background()
	sc, err := e.cloud.lb.clients(ctx)
	if err != nil {
		t.Fatal(err)
	}
	byID := newService("occm-by-id-"+randomID(t), withPort(corev1.ProtocolUDP, 53, 30053))
	byName := newService("occm-by-name-" + randomID(t))
	made := map[string]*loadbalancers.LoadBalancer{}
	for _, svc := range []*corev1.Service{byID, byName} {
		made[svc.Name] = createLikeOCCM(t, sc.loadBalancer, svc, nodes)
		t.Cleanup(func() { deleteConverged(t, e.cloud.lb, svc) })
	}
	byID.Annotations[string(AnnotationLoadBalancerID)] = made[byID.Name].ID
	before := len(e.octavia.Writes())
	for _, svc := range []*corev1.Service{byID, byName} {
		e.apply(t, svc)
	}
	for _, svc := range []*corev1.Service{byID, byName} {
		want := "TCP/80 conn=-1 t=50000/5000/50000/0 xff= pool=TCP:ROUND_ROBIN monitor=TCP:5/3/1/3 members=n1,n2"
		if svc == byID {
			want += "\nUDP/53 conn=-1 t=50000/5000/50000/0 xff= pool=UDP:ROUND_ROBIN monitor=UDP-CONNECT:5/3/1/3 members=n1,n2"
		}
		old := made[svc.Name]
		lb := e.waitDetail(t, svc, want, func(st corev1.LoadBalancerStatus) error {
			if len(st.Ingress) != 1 || st.Ingress[0].IP != old.VipAddress {
				return fmt.Errorf("status %+v, want the OCCM VIP %s", st, old.VipAddress)
			}
			return nil
		})
		if lb.ID != old.ID || lb.VipAddress != old.VipAddress || lb.VipPortID != old.VipPortID {
			t.Errorf("%s: load balancer %s VIP %s port %s, want OCCM's %s VIP %s port %s", svc.Name, lb.ID, lb.VipAddress, lb.VipPortID, old.ID, old.VipAddress, old.VipPortID)
		}
	}
	for _, w := range e.octavia.Writes()[before:] {
		if strings.HasPrefix(w, "POST ") || strings.HasPrefix(w, "DELETE ") {
			t.Errorf("adoption made a create or delete call: %s (all writes: %q)", w, e.octavia.Writes()[before:])
		}
	}
}

// TestAdoptOCCMFloatingIP: a Service OCCM served with a floating IP (its
// load balancer built as OCCM builds it, the floating IP on the VIP port
// with OCCM's description, OCCM's load-balancer-id annotation) is adopted
// through the upstream service controller with no create or delete in
// Octavia and no call changing Neutron: the same load balancer, VIP and
// floating IP, which the status carries. Deleting the Service then
// releases OCCM's floating IP with the load balancer: nothing leaks.
func TestAdoptOCCMFloatingIP(t *testing.T) {
	t.Parallel()
	f := NewFakeOpenStack(t)
	f.AnyToken = true
	nodes := []*corev1.Node{readyNode("n1", "10.26.0.1", nil)}
	e := newSvcEnv(t, func(s *Settings) {
		s.Endpoints.Network = f.NetworkURL()
		s.LoadBalancer.FloatingNetworkID = floatingNet
	}, nodes...)
	ctx := context.Background()
	sc, err := e.cloud.lb.clients(ctx)
	if err != nil {
		t.Fatal(err)
	}
	svc := newService("occm-fip-" + randomID(t))
	old := createLikeOCCM(t, sc.loadBalancer, svc, nodes)
	t.Cleanup(func() { deleteConverged(t, e.cloud.lb, svc) })
	const fip = "172.24.4.77"
	f.AddFloatingIPOn(fip, floatingNet, old.VipPortID, fmt.Sprintf("Floating IP for Kubernetes external service %s/%s from cluster kubernetes", svc.Namespace, svc.Name))
	svc.Annotations[string(AnnotationLoadBalancerID)] = old.ID
	octaviaBefore, neutronBefore := len(e.octavia.Writes()), f.Mutates.Load()
	e.apply(t, svc)
	lb := e.waitDetail(t, svc, "TCP/80 conn=-1 t=50000/5000/50000/0 xff= pool=TCP:ROUND_ROBIN monitor=TCP:5/3/1/3 members=n1", func(st corev1.LoadBalancerStatus) error {
		if len(st.Ingress) != 1 || st.Ingress[0].IP != fip {
			return fmt.Errorf("status %+v, want OCCM's floating IP %s", st, fip)
		}
		return nil
	})
	if lb.ID != old.ID || lb.VipAddress != old.VipAddress || lb.VipPortID != old.VipPortID {
		t.Errorf("load balancer %s VIP %s, want OCCM's %s VIP %s", lb.ID, lb.VipAddress, old.ID, old.VipAddress)
	}
	for _, w := range e.octavia.Writes()[octaviaBefore:] {
		if strings.HasPrefix(w, "POST ") || strings.HasPrefix(w, "DELETE ") {
			t.Errorf("adoption made a create or delete call: %s", w)
		}
	}
	if n := f.Mutates.Load() - neutronBefore; n != 0 {
		t.Errorf("adoption made %d Neutron calls changing something, want 0", n)
	}
	if got := f.FloatingIPs()[fip]; got.PortID != old.VipPortID {
		t.Errorf("OCCM's floating IP %+v moved off the VIP port %s", got, old.VipPortID)
	}

	// The fake API server keeps no finalizers: mark the Service deleted
	// as the real one does while the controller's finalizer is on it.
	deleting := e.service(t, svc.Name)
	now := metav1.Now()
	deleting.DeletionTimestamp = &now
	if _, err := e.client.CoreV1().Services(svc.Namespace).Update(ctx, deleting, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventuallyOn(t, 120*time.Second, "the adopted load balancer and OCCM's floating IP released", func() error {
		found, err := e.cloud.lb.find(ctx, sc, svc)
		if err != nil {
			return err
		}
		if len(found) != 0 || len(f.FloatingIPs()) != 0 {
			return fmt.Errorf("%d load balancers, floating IPs %v left", len(found), f.FloatingIPs())
		}
		return nil
	})
}
