package openstack

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/listeners"
	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/loadbalancers"
	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/pools"
	corev1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/api"
)

// strangers creates, beside the Service's load balancer on the real
// Octavia (and the Neutron fake's floating IPs), what an operator or another
// tool would make there, and returns their fingerprint (the ownership
// clause of internal/backendtest):
//   - on our load balancer, a hand-made listener (TCP 9999, untagged) with
//     its pool, and a listener cloud-provider-openstack tagged for another
//     Service (kube_service_kubernetes_<namespace>_other, TCP 9998); both
//     are gone with our load balancer on its delete, and only then;
//   - another cluster's load balancer for a Service of the same namespace
//     and name (its mccm-cluster and mccm-service tags, our name pattern);
//   - a floating IP the user allocated (unassociated), one another Service
//     of this cluster asked to keep (kept by multicloud-ccm after ...), and
//     one another cluster's Service of the same name asked to keep.
func (c *conformance) strangers(t *testing.T, svc *corev1.Service) func(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	oc := c.direct.loadBalancer
	found, err := c.cloud.lb.find(ctx, c.direct, svc)
	if err != nil || len(found) != 1 {
		t.Fatalf("the Service's load balancer: %d, %v", len(found), err)
	}
	ours := found[0].ID
	waitActive(t, oc, ours)
	hand, err := listeners.Create(ctx, oc, listeners.CreateOpts{LoadbalancerID: ours, Name: "operator-listener",
		Protocol: listeners.ProtocolTCP, ProtocolPort: 9999}).Extract()
	if err != nil {
		t.Fatalf("creating the hand-made listener: %v", err)
	}
	waitActive(t, oc, ours)
	handPool, err := pools.Create(ctx, oc, pools.CreateOpts{ListenerID: hand.ID, Name: "operator-pool",
		Protocol: pools.ProtocolTCP, LBMethod: pools.LBMethodLeastConnections}).Extract()
	if err != nil {
		t.Fatalf("creating the hand-made pool: %v", err)
	}
	waitActive(t, oc, ours)
	occmTag := occmName("kubernetes", &corev1.Service{ObjectMeta: svc.ObjectMeta})
	occmTag = strings.TrimSuffix(occmTag, svc.Name) + "other"
	occm, err := listeners.Create(ctx, oc, listeners.CreateOpts{LoadbalancerID: ours, Name: "listener_0_" + occmTag,
		Protocol: listeners.ProtocolTCP, ProtocolPort: 9998, Tags: []string{occmTag}}).Extract()
	if err != nil {
		t.Fatalf("creating the OCCM-tagged listener: %v", err)
	}
	waitActive(t, oc, ours)

	other := "o" + randomID(t)
	otherLB, err := loadbalancers.Create(ctx, oc, loadbalancers.CreateOpts{
		Name: fmt.Sprintf("mccm_%s_%s_%s", other, svc.Namespace, svc.Name), VipSubnetID: VIPSubnetForTests,
		Tags: []string{"mccm-cluster=" + other, "mccm-service=" + svc.Namespace + "/" + svc.Name},
	}).Extract()
	if err != nil {
		t.Fatalf("creating another cluster's load balancer: %v", err)
	}
	t.Cleanup(func() {
		_ = loadbalancers.Delete(context.Background(), oc, otherLB.ID, loadbalancers.DeleteOpts{Cascade: true}).ExtractErr()
	})
	waitActive(t, oc, otherLB.ID)

	fips := []string{"172.24.4.250", "172.24.4.251", "172.24.4.252"}
	c.fake.AddFloatingIP(fips[0], floatingNet)
	c.fake.AddFloatingIPOn(fips[1], floatingNet, "", "kept by multicloud-ccm after "+c.cloud.lb.lbName(newService("other")))
	c.fake.AddFloatingIPOn(fips[2], floatingNet, "", fmt.Sprintf("kept by multicloud-ccm after mccm_%s_%s_%s", other, svc.Namespace, svc.Name))

	listener := func(id string) string {
		ls, err := listeners.Get(ctx, oc, id).Extract()
		if gophercloud.ResponseCodeIs(err, http.StatusNotFound) {
			return "listener " + id + " gone"
		}
		if err != nil {
			t.Fatalf("reading listener %s: %v", id, err)
		}
		return fmt.Sprintf("listener %s %s %s/%d tags=%q pool=%s", ls.ID, ls.Name, ls.Protocol, ls.ProtocolPort, ls.Tags, ls.DefaultPoolID)
	}
	pool := func(id string) string {
		p, err := pools.Get(ctx, oc, id).Extract()
		if gophercloud.ResponseCodeIs(err, http.StatusNotFound) {
			return "pool " + id + " gone"
		}
		if err != nil {
			t.Fatalf("reading pool %s: %v", id, err)
		}
		return fmt.Sprintf("pool %s %s %s %s members=%d", p.ID, p.Name, p.Protocol, p.LBMethod, len(p.Members))
	}
	inside := func() string { return listener(hand.ID) + "; " + pool(handPool.ID) + "; " + listener(occm.ID) }
	before := inside()
	return func(t *testing.T) string {
		t.Helper()
		var out []string
		// The strangers inside our load balancer go with it on its delete,
		// and only then: while the Service has a load balancer it must be
		// this one, with them as they were.
		now, err := c.cloud.lb.find(ctx, c.direct, svc)
		if err != nil {
			t.Fatal(err)
		}
		lb, err := loadbalancers.Get(ctx, oc, ours).Extract()
		switch gone := gophercloud.ResponseCodeIs(err, http.StatusNotFound) || (err == nil && lb.ProvisioningStatus == "PENDING_DELETE"); {
		case err != nil && !gone:
			t.Fatalf("reading our load balancer %s: %v", ours, err)
		case gone && len(now) > 0:
			out = append(out, fmt.Sprintf("our load balancer %s replaced by %s, with the strangers in it", ours, now[0].ID))
		case gone:
			out = append(out, before) // Deleted with the Service: so are they.
		default:
			out = append(out, inside())
		}
		o, err := loadbalancers.Get(ctx, oc, otherLB.ID).Extract()
		if err != nil {
			out = append(out, fmt.Sprintf("other cluster's load balancer %s: %v", otherLB.ID, err))
		} else {
			tags := slices.Clone(o.Tags)
			slices.Sort(tags)
			deleting := o.ProvisioningStatus == "PENDING_DELETE" || o.ProvisioningStatus == "DELETED"
			out = append(out, fmt.Sprintf("load balancer %s %s tags=%q vip=%s deleting=%v", o.ID, o.Name, tags, o.VipAddress, deleting))
		}
		all := c.fake.FloatingIPs()
		for _, a := range fips {
			f, ok := all[a]
			out = append(out, fmt.Sprintf("floating IP %s present=%v id=%s port=%q description=%q", a, ok, f.ID, f.PortID, f.Description))
		}
		return strings.Join(out, "\n")
	}
}

// variants are the Service edited as a user would, with annotations the
// backend honours in place: the lb-method and a timeout changed, the
// floating IP given up (internal), then kept (keep-floatingip) and back.
func variants(_ *testing.T, svc *corev1.Service) []*corev1.Service {
	var out []*corev1.Service
	edit := func(set map[string]string) {
		v := svc.DeepCopy()
		if len(out) > 0 {
			v = out[len(out)-1].DeepCopy()
		}
		if v.Annotations == nil {
			v.Annotations = map[string]string{}
		}
		for k, val := range set {
			if val == "" {
				delete(v.Annotations, k)
				continue
			}
			v.Annotations[k] = val
		}
		out = append(out, v)
	}
	edit(map[string]string{string(AnnotationLBMethod): "LEAST_CONNECTIONS", string(AnnotationTimeoutClientData): "60000"})
	edit(map[string]string{string(AnnotationInternal): "true"})
	edit(map[string]string{string(AnnotationInternal): "", string(AnnotationKeepFloatingIP): "true"})
	return out
}

// stepwiseCloud is the backend as the service controller drives it: its
// load balancer's Ensure and Update are called again while they ask to be
// retried (api.RetryError, after the delay it names). This backend makes
// one change per call; the ownership clause's node updates and repair pass
// call UpdateLoadBalancer and EnsureLoadBalancer once and fail on a retry
// (internal/backendtest's update and repairPass do not use its whileRetry).
type stepwiseCloud struct{ *Cloud }

func (c stepwiseCloud) LoadBalancer() (cloudprovider.LoadBalancer, bool) {
	lb, ok := c.Cloud.LoadBalancer()
	if !ok {
		return nil, false
	}
	return stepwiseLB{lb}, true
}

type stepwiseLB struct{ cloudprovider.LoadBalancer }

// again calls op while it asks to be retried, for up to two minutes.
func again(op func() error) error {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		err := op()
		var re *api.RetryError
		if !errors.As(err, &re) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(re.RetryAfter())
	}
}

func (l stepwiseLB) EnsureLoadBalancer(ctx context.Context, clusterName string, svc *corev1.Service, nodes []*corev1.Node) (st *corev1.LoadBalancerStatus, err error) {
	err = again(func() error {
		st, err = l.LoadBalancer.EnsureLoadBalancer(ctx, clusterName, svc, nodes)
		return err
	})
	return st, err
}

func (l stepwiseLB) UpdateLoadBalancer(ctx context.Context, clusterName string, svc *corev1.Service, nodes []*corev1.Node) error {
	return again(func() error { return l.LoadBalancer.UpdateLoadBalancer(ctx, clusterName, svc, nodes) })
}

// TestOwnerListeners: the owner's listeners are the ones this backend or
// cloud-provider-openstack made for the load balancer's own Service; a
// listener made by hand and a sharing Service's (ours or OCCM's) are not,
// so converging never changes or deletes them.
func TestOwnerListeners(t *testing.T) {
	lb := &loadbalancers.LoadBalancer{Name: "kube_service_kubernetes_default_web"}
	owns := ownerListeners(lb)
	for _, c := range []struct {
		ls   listeners.Listener
		want bool
	}{
		{listeners.Listener{Name: "mccm_tcp_80"}, true},
		{listeners.Listener{Name: "listener_0_kube_service_kubernetes_default_web", Tags: []string{lb.Name}}, true},
		{listeners.Listener{Name: "listener_1_kube_service_kubernetes_default_web"}, true},
		{listeners.Listener{Name: "operator-listener"}, false},
		{listeners.Listener{Name: ""}, false},
		{listeners.Listener{Name: "mccm_tcp_8080", Tags: []string{sharedTagPrefix + "c1/default/other"}}, false},
		{listeners.Listener{Name: "listener_0_kube_service_kubernetes_default_other", Tags: []string{"kube_service_kubernetes_default_other"}}, false},
	} {
		if got := owns(&c.ls); got != c.want {
			t.Errorf("ownerListeners(%q tags %q) = %v, want %v", c.ls.Name, c.ls.Tags, got, c.want)
		}
	}
}

// TestOrphanPoolsOfStrangersKept: a pool no listener uses is deleted only
// when this backend or cloud-provider-openstack made it; one made by hand
// is left.
func TestOrphanPoolsOfStrangersKept(t *testing.T) {
	lb := &loadbalancers.LoadBalancer{ID: "lb", Name: "mccm_c1_default_web"}
	st := &lbState{pools: map[string]*poolState{"p1": {pool: pools.Pool{ID: "p1", Name: "operator-pool"}}}}
	if s := orphanPoolStep(nil, lb, st); s != nil {
		t.Errorf("a hand-made pool: step %q, want none", s.what(false))
	}
	st.pools["p2"] = &poolState{pool: pools.Pool{ID: "p2", Name: "mccm_tcp_80"}}
	if s := orphanPoolStep(nil, lb, st); s == nil || !strings.Contains(s.what(false), "p2") {
		t.Errorf("our unused pool: step %v, want it deleted", s)
	}
}
