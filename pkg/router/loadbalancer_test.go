package router

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/config"
)

const cluster = "kubernetes"

func lbBackend(name, scheme string, c *lbCloud) Backend {
	return Backend{Name: name, Type: "test", Scheme: scheme, Cloud: c}
}

func withDefault(name string) func(*config.CloudConfig) {
	return func(c *config.CloudConfig) { c.LoadBalancer.DefaultBackend = name }
}

// twoClouds is a router over two stateful load-balancer backends.
func twoClouds(t *testing.T, tweaks ...func(*config.CloudConfig)) (*Router, *lbCloud, *lbCloud) {
	a, b := newLBCloud("a", "192.0.2.1"), newLBCloud("b", "198.51.100.1")
	r := mustRouter(t, testConfig(tweaks...), lbBackend("a", "baremetal", a), lbBackend("b", "aws", b))
	return r, a, b
}

func TestEnsureLoadBalancerDispatch(t *testing.T) {
	tests := []struct {
		name     string
		tweaks   []func(*config.CloudConfig)
		svc      *corev1.Service
		wantIP   string
		wantErr  string
		elsewher bool
	}{
		{name: "annotation picks the backend", svc: newService("s", withLBBackend("b")), wantIP: "198.51.100.1"},
		{name: "default backend serves un-annotated Services", tweaks: []func(*config.CloudConfig){withDefault("a")}, svc: newService("s"), wantIP: "192.0.2.1"},
		{name: "annotation beats the default", tweaks: []func(*config.CloudConfig){withDefault("a")}, svc: newService("s", withLBBackend("b")), wantIP: "198.51.100.1"},
		{name: "no annotation and no default: implemented elsewhere", svc: newService("s"), elsewher: true},
		{name: "unknown backend names the ones that exist", svc: newService("s", withLBBackend("gcp")), wantErr: "names no backend with load balancers; use one of [a b]"},
		{name: "empty annotation is an error", svc: newService("s", withLBBackend("")), wantErr: `multicloud-ccm.io/load-balancer-backend=""`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, a, b := twoClouds(t, tt.tweaks...)
			status, err := r.EnsureLoadBalancer(context.Background(), cluster, tt.svc, nil)
			if tt.elsewher {
				if err != cloudprovider.ImplementedElsewhere { //nolint:errorlint // upstream compares with ==.
					t.Fatalf("err = %v, want ImplementedElsewhere unwrapped", err)
				}
				if a.gets+b.gets != 0 {
					t.Errorf("a brand-new Service left elsewhere cost %d cloud calls", a.gets+b.gets)
				}
				return
			}
			checkErr(t, err, tt.wantErr)
			if err != nil {
				if a.heldCount()+b.heldCount() != 0 {
					t.Error("a bad annotation created a load balancer")
				}
				return
			}
			if status.Ingress[0].IP != tt.wantIP {
				t.Errorf("IP = %s, want %s", status.Ingress[0].IP, tt.wantIP)
			}
		})
	}
}

// ensure runs EnsureLoadBalancer and writes the status back, as upstream does.
func ensure(t *testing.T, r *Router, svc *corev1.Service, nodes ...*corev1.Node) {
	t.Helper()
	status, err := r.EnsureLoadBalancer(context.Background(), cluster, svc, nodes)
	if err != nil {
		t.Fatalf("EnsureLoadBalancer: %v", err)
	}
	svc.Status.LoadBalancer = *status
}

func TestAnnotationChangeMovesTheLoadBalancer(t *testing.T) {
	r, a, b := twoClouds(t)
	svc := newService("s", withLBBackend("a"))
	ensure(t, r, svc)
	svc.Annotations["multicloud-ccm.io/load-balancer-backend"] = "b"
	ensure(t, r, svc)
	if a.holds(svc) || !b.holds(svc) {
		t.Fatalf("after the move: a holds %v, b holds %v; want only b", a.holds(svc), b.holds(svc))
	}
	if svc.Status.LoadBalancer.Ingress[0].IP != "198.51.100.1" {
		t.Errorf("status = %v", svc.Status.LoadBalancer)
	}
	// And back again.
	svc.Annotations["multicloud-ccm.io/load-balancer-backend"] = "a"
	ensure(t, r, svc)
	if !a.holds(svc) || b.holds(svc) {
		t.Fatalf("after moving back: a holds %v, b holds %v; want only a", a.holds(svc), b.holds(svc))
	}
}

func TestMoveAfterRestartFindsTheOldLoadBalancer(t *testing.T) {
	r, a, b := twoClouds(t)
	svc := newService("s", withLBBackend("a"))
	ensure(t, r, svc)
	// A new process: it knows nothing of where the load balancer is.
	r2 := mustRouter(t, testConfig(), lbBackend("a", "baremetal", a), lbBackend("b", "aws", b))
	svc.Annotations["multicloud-ccm.io/load-balancer-backend"] = "b"
	ensure(t, r2, svc)
	if a.holds(svc) || !b.holds(svc) {
		t.Fatalf("a holds %v, b holds %v; want only b", a.holds(svc), b.holds(svc))
	}
}

func TestMoveWaitsForTheOldBackend(t *testing.T) {
	r, a, b := twoClouds(t)
	svc := newService("s", withLBBackend("a"))
	ensure(t, r, svc)
	a.setFail(errCloudDown)
	svc.Annotations["multicloud-ccm.io/load-balancer-backend"] = "b"
	if _, err := r.EnsureLoadBalancer(context.Background(), cluster, svc, nil); err == nil {
		t.Fatal("the move reported success while the old backend could not be cleaned")
	}
	a.setFail(nil)
	ensure(t, r, svc)
	if a.holds(svc) || !b.holds(svc) {
		t.Fatalf("a holds %v, b holds %v; want only b", a.holds(svc), b.holds(svc))
	}
}

func TestRemovingTheAnnotationWithoutDefaultCleansUp(t *testing.T) {
	r, a, _ := twoClouds(t)
	svc := newService("s", withLBBackend("a"))
	ensure(t, r, svc)
	delete(svc.Annotations, "multicloud-ccm.io/load-balancer-backend")
	_, err := r.EnsureLoadBalancer(context.Background(), cluster, svc, nil)
	if err != cloudprovider.ImplementedElsewhere { //nolint:errorlint // upstream compares with ==.
		t.Fatalf("err = %v, want ImplementedElsewhere", err)
	}
	if a.holds(svc) {
		t.Error("the load balancer was left in the backend the Service no longer uses")
	}
}

func TestSteadyStateEnsureAsksOnlyTheTarget(t *testing.T) {
	r, a, b := twoClouds(t)
	svc := newService("s", withLBBackend("b"))
	for range 5 {
		ensure(t, r, svc)
	}
	if a.gets != 0 {
		t.Errorf("steady-state Ensure asked the other backend %d times", a.gets)
	}
	if b.gets != 0 {
		t.Errorf("steady-state Ensure called GetLoadBalancer on the target %d times", b.gets)
	}
}

func TestDeleteReachesEveryBackend(t *testing.T) {
	r, a, b := twoClouds(t)
	svc := newService("s", withLBBackend("a"))
	// Both clouds hold one: a move to b whose clean-up of a failed.
	ensure(t, r, svc)
	svc.Annotations["multicloud-ccm.io/load-balancer-backend"] = "b"
	a.setFail(errCloudDown)
	if _, err := r.EnsureLoadBalancer(context.Background(), cluster, svc, nil); err == nil {
		t.Fatal("the move reported success while the old backend could not be cleaned")
	}
	a.setFail(nil)
	if !a.holds(svc) || !b.holds(svc) {
		t.Fatalf("a holds %v, b holds %v; want both", a.holds(svc), b.holds(svc))
	}
	_, exists, err := r.GetLoadBalancer(context.Background(), cluster, svc)
	if err != nil || !exists {
		t.Fatalf("GetLoadBalancer = %v, %v; want exists", exists, err)
	}
	b.setFail(errCloudDown)
	if err := r.EnsureLoadBalancerDeleted(context.Background(), cluster, svc); err == nil {
		t.Fatal("delete reported success while a backend failed")
	}
	if _, _, err := r.GetLoadBalancer(context.Background(), cluster, svc); err == nil {
		t.Fatal("GetLoadBalancer reported no error while a backend failed: upstream would skip the delete")
	}
	b.setFail(nil)
	if err := r.EnsureLoadBalancerDeleted(context.Background(), cluster, svc); err != nil {
		t.Fatal(err)
	}
	if a.holds(svc) || b.holds(svc) {
		t.Error("something was left behind")
	}
	if _, exists, _ := r.GetLoadBalancer(context.Background(), cluster, svc); exists {
		t.Error("GetLoadBalancer still reports the load balancer")
	}
}

// targeter is an lbCloud that can target every node with an InternalIP.
type targeter struct{ *lbCloud }

func (t targeter) LoadBalancer() (cloudprovider.LoadBalancer, bool) { return t, true }

func (t targeter) CanTarget(_ *corev1.Service, n *corev1.Node) bool {
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			return true
		}
	}
	return false
}

func TestEachBackendGetsOnlyNodesItCanTarget(t *testing.T) {
	own := newLBCloud("own", "192.0.2.1")
	ips := targeter{newLBCloud("ips", "198.51.100.1")}
	r := mustRouter(t, testConfig(),
		Backend{Name: "own", Scheme: "baremetal", Cloud: own},
		Backend{Name: "ips", Scheme: "aws", Cloud: ips},
	)
	nodes := []*corev1.Node{
		newNode("bm-1", withProviderID("baremetal://bm-1"), withInternalIP("10.0.0.1")),
		newNode("vm-1", withProviderID("vsphere://4211"), withInternalIP("10.0.1.1")),
		newNode("new", withInternalIP("10.0.2.1")),
		newNode("i-1", withProviderID("aws:///z/i-1")),
		newNode("moved", withProviderID("baremetal://moved"), withNodeBackend("other")),
	}
	for _, tc := range []struct {
		backend string
		cloud   *lbCloud
		want    []string
	}{
		{"own", own, []string{"bm-1"}},
		{"ips", ips.lbCloud, []string{"bm-1", "vm-1", "new"}},
	} {
		svc := newService("s-"+tc.backend, withLBBackend(tc.backend))
		ensure(t, r, svc, nodes...)
		if got := tc.cloud.nodes[svc.UID]; !slices.Equal(got, tc.want) {
			t.Errorf("Ensure on %s got nodes %v, want %v", tc.backend, got, tc.want)
		}
		if err := r.UpdateLoadBalancer(context.Background(), cluster, svc, nodes[:2]); err != nil {
			t.Fatal(err)
		}
		if got := tc.cloud.nodes[svc.UID]; len(got) > 2 {
			t.Errorf("Update on %s got nodes %v", tc.backend, got)
		}
	}
}

func TestUpdateForServiceLeftElsewhere(t *testing.T) {
	r, _, _ := twoClouds(t)
	err := r.UpdateLoadBalancer(context.Background(), cluster, newService("s"), nil)
	if err != cloudprovider.ImplementedElsewhere { //nolint:errorlint // upstream compares with ==.
		t.Fatalf("err = %v, want ImplementedElsewhere", err)
	}
}

func TestDefaultBackendMustHaveLoadBalancers(t *testing.T) {
	_, err := New(testConfig(withDefault("metal")), []Backend{metal(instanceCloud(true, nil))})
	checkErr(t, err, `loadBalancer.defaultBackend: Invalid value: "metal": backend "metal" has no load balancers`)
}
