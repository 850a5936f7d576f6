package router

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/component-base/metrics/testutil"

	mcctestutil "github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

// idCloud is an lbCloud that reports its load balancer's ID, as the AWS and
// OpenStack backends do, and counts EnsureLoadBalancer calls.
type idCloud struct {
	*lbCloud
	ensures atomic.Int64
}

func (c *idCloud) LoadBalancer() (cloudprovider.LoadBalancer, bool) { return c, true }

func (c *idCloud) EnsureLoadBalancer(ctx context.Context, cluster string, s *corev1.Service, nodes []*corev1.Node) (*corev1.LoadBalancerStatus, error) {
	c.ensures.Add(1)
	backends.ReportLoadBalancerID(ctx, "lb-"+string(s.UID))
	return c.lbCloud.EnsureLoadBalancer(ctx, cluster, s, nodes)
}

func servedAnnotations(s *corev1.Service) (by, id string, hasID bool) {
	id, hasID = s.Annotations[string(annotation.LoadBalancerID)]
	return s.Annotations[string(annotation.LoadBalancerServedBy)], id, hasID
}

// TestServiceControllerServedAnnotations drives the upstream service
// controller: a served Service carries the backend serving it and the
// cloud's load-balancer ID, written once; the syncs that write re-runs
// (upstream re-ensures on any annotation change) write nothing, so it
// converges; a move rewrites them; a Service that stops being a
// LoadBalancer loses them.
func TestServiceControllerServedAnnotations(t *testing.T) {
	other := &idCloud{lbCloud: newLBCloud("other", "198.51.100.7")}
	r := metalRouter(t, "error", Backend{Name: "other", Type: "aws", Scheme: "aws", Cloud: other})
	svc := newService("shop", withLBBackend("other"))
	c := startCluster(t, r, svc)
	// writes counts the router's writes: Service writes but the status
	// subresource's (upstream's finalizer and status patches; a sync that
	// started from an informer copy older than its predecessor's status
	// patch repeats that patch, with the same value).
	var writes atomic.Int64
	mcctestutil.PrependReactor(c.client, "*", "services", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if v := a.GetVerb(); (v == "patch" || v == "update") && a.GetSubresource() == "" {
			writes.Add(1)
		}
		return false, nil, nil
	})
	runServiceController(t, c)

	eventually(t, "the backend and the ID on the Service", func() bool {
		by, id, _ := servedAnnotations(c.service(t, "shop"))
		return by == "other" && id == "lb-"+string(svc.UID) && ingressIP(c.service(t, "shop")) == "198.51.100.7"
	})
	// The first sync writes the record (load-balancer-backends) before the
	// load balancer, the served annotations after it: each annotation write
	// re-runs the controller's sync (it compares annotations), and those
	// syncs find everything written and write nothing. The record alone
	// costs one extra sync; the served annotations one more at most (when
	// the informer delivers their change after the next sync started).
	eventually(t, "the extra sync", func() bool { return other.ensures.Load() >= 2 })
	w := writes.Load()
	if w != 2 {
		t.Errorf("the router wrote the Service %d times, want 2 (the record, then the served annotations)", w)
	}
	consistently(t, time.Second, "no further write, two extra syncs at most", func() bool {
		if n := other.ensures.Load(); n > 3 || writes.Load() != w {
			t.Logf("EnsureLoadBalancer ran %d times; %d writes by the router, then %d", n, w, writes.Load())
			return false
		}
		return true
	})

	// Moved to bare metal, which reports no ID: the backend changes and the
	// ID goes.
	s := c.service(t, "shop")
	s.Annotations[string(annotation.LoadBalancerBackend)] = "metal"
	if _, err := c.client.CoreV1().Services("default").Update(context.Background(), s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the new backend on the Service, without an ID", func() bool {
		by, _, hasID := servedAnnotations(c.service(t, "shop"))
		return by == "metal" && !hasID && ingressIP(c.service(t, "shop")) != "198.51.100.7"
	})

	// No longer a LoadBalancer: the load balancer goes, and the annotations
	// naming it with it.
	s = c.service(t, "shop")
	s.Spec.Type = corev1.ServiceTypeClusterIP
	if _, err := c.client.CoreV1().Services("default").Update(context.Background(), s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the finalizer removed", func() bool { return len(c.service(t, "shop").Finalizers) == 0 })
	if by, id, hasID := servedAnnotations(c.service(t, "shop")); by != "" || hasID {
		t.Errorf("a Service without a load balancer still says served by %q, ID %q", by, id)
	}
}

// consistently fails the test if cond does not hold throughout d. Call it
// only after an eventually has shown the controller in question acted.
func consistently(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if !cond() {
			t.Fatalf("%s: did not hold", what)
		}
	}
}

// TestReportLoadBalancerIDOutsideACall: a report with no router listening
// is dropped, and the last report wins.
func TestReportLoadBalancerIDOutsideACall(t *testing.T) {
	backends.ReportLoadBalancerID(context.Background(), "x") // No panic, no effect.
	ctx, got := backends.WithLoadBalancerIDReport(context.Background())
	if got() != "" {
		t.Errorf("nothing reported: got %q", got())
	}
	backends.ReportLoadBalancerID(ctx, "a")
	backends.ReportLoadBalancerID(ctx, "b")
	if got() != "b" {
		t.Errorf("got %q, want the last report", got())
	}
}

// TestServedMetrics: per backend, the Nodes labelled with it and the
// Services annotated as served by it, counted from the informers at each
// scrape, 0 for a backend serving none; no node gauge for a backend
// without instances ("other" here).
func TestServedMetrics(t *testing.T) {
	r, _ := metalAndOther(t)
	served := func(backend string) mcctestutil.ServiceTweak {
		return func(s *corev1.Service) {
			s.Annotations = map[string]string{string(annotation.LoadBalancerServedBy): backend}
		}
	}
	c := startCluster(t, r,
		newNode("a", withLabel(string(annotation.NodeBackend), "metal")),
		newNode("b", withLabel(string(annotation.NodeBackend), "metal")),
		newNode("c", withLabel(string(annotation.NodeBackend), "other")),
		newNode("d"),
		newService("s1", served("metal")), newService("s2", served("metal")), newService("s3"),
	)
	c.run(t, func(context.Context) {})
	want := `
# HELP multicloud_ccm_backend_load_balancers [ALPHA] LoadBalancer Services a backend serves: Services annotated multicloud-ccm.io/load-balancer-served-by with its name.
# TYPE multicloud_ccm_backend_load_balancers gauge
multicloud_ccm_backend_load_balancers{backend="metal"} 2
multicloud_ccm_backend_load_balancers{backend="other"} 0
# HELP multicloud_ccm_backend_nodes [ALPHA] Nodes a backend serves: Nodes labelled multicloud-ccm.io/backend with its name.
# TYPE multicloud_ccm_backend_nodes gauge
multicloud_ccm_backend_nodes{backend="metal"} 2
`
	if err := testutil.GatherAndCompare(legacyregistry.DefaultGatherer, strings.NewReader(want), "multicloud_ccm_backend_nodes", "multicloud_ccm_backend_load_balancers"); err != nil {
		t.Error(err)
	}
}

// writeBackCloud is an lbCloud whose backend type writes back an
// annotation with its load balancer's address, as OCCM's
// loadbalancer.openstack.org/load-balancer-address.
type writeBackCloud struct{ *lbCloud }

const writeBackType, writeBackKey = "test-writeback", "example.org/load-balancer-address"

func (c *writeBackCloud) LoadBalancer() (cloudprovider.LoadBalancer, bool) { return c, true }

func (c *writeBackCloud) EnsureLoadBalancer(ctx context.Context, cluster string, s *corev1.Service, nodes []*corev1.Node) (*corev1.LoadBalancerStatus, error) {
	st, err := c.lbCloud.EnsureLoadBalancer(ctx, cluster, s, nodes)
	if err == nil && len(st.Ingress) > 0 {
		backends.ReportServiceAnnotation(ctx, writeBackKey, st.Ingress[0].IP)
	}
	return st, err
}

// TestServiceControllerWrittenBackAnnotations drives the upstream service
// controller: the annotations a backend type registers are written with
// the values it reports, in the served annotations' write; they go when
// the Service moves to a backend of another type, and a Service that
// backend never served keeps its own value.
func TestServiceControllerWrittenBackAnnotations(t *testing.T) {
	backends.RegisterServiceAnnotations(writeBackType, writeBackKey)
	other := &writeBackCloud{newLBCloud("other", "198.51.100.7")}
	r := metalRouter(t, "error", Backend{Name: "other", Type: writeBackType, Scheme: "aws", Cloud: other})
	svc := newService("shop", withLBBackend("other"))
	kept := newService("kept", withLBBackend("metal"))
	kept.Annotations[writeBackKey] = "users-own"
	c := startCluster(t, r, svc, kept)
	runServiceController(t, c)

	eventually(t, "the written-back address", func() bool {
		return c.service(t, "shop").Annotations[writeBackKey] == "198.51.100.7"
	})
	eventually(t, "the other Service served by bare metal", func() bool {
		return strings.HasPrefix(ingressIP(c.service(t, "kept")), "192.0.2.")
	})
	if got := c.service(t, "kept").Annotations[writeBackKey]; got != "users-own" {
		t.Errorf("a Service the write-back backend never served: %s = %q, want the user's value kept", writeBackKey, got)
	}

	s := c.service(t, "shop")
	s.Annotations[string(annotation.LoadBalancerBackend)] = "metal"
	if _, err := c.client.CoreV1().Services("default").Update(context.Background(), s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the written-back annotation removed after the move", func() bool {
		s := c.service(t, "shop")
		_, has := s.Annotations[writeBackKey]
		by, _, _ := servedAnnotations(s)
		return by == "metal" && !has
	})
}

// echoCloud is a backend type that writes back the annotation it was
// handed, as OCCM's loadbalancer.openstack.org/load-balancer-id; during
// runs while its EnsureLoadBalancer is under way.
type echoCloud struct {
	*lbCloud
	during func()
}

func (c *echoCloud) LoadBalancer() (cloudprovider.LoadBalancer, bool) { return c, true }

func (c *echoCloud) EnsureLoadBalancer(ctx context.Context, cluster string, s *corev1.Service, nodes []*corev1.Node) (*corev1.LoadBalancerStatus, error) {
	st, err := c.lbCloud.EnsureLoadBalancer(ctx, cluster, s, nodes)
	if v := s.Annotations[writeBackKey]; v != "" {
		backends.ReportServiceAnnotation(ctx, writeBackKey, v)
	}
	if c.during != nil {
		c.during()
	}
	return st, err
}

// TestWrittenBackAnnotationEditedDuringEnsure: a user removes a
// written-back annotation (OCCM's load-balancer-id, to leave a shared load
// balancer) while an Ensure handed the old value is under way; the router
// must not write the old value back when that Ensure ends (it did: the
// Service then stayed on the shared load balancer, and the removal was
// lost). The value it reports for an unedited annotation is still written.
func TestWrittenBackAnnotationEditedDuringEnsure(t *testing.T) {
	backends.RegisterServiceAnnotations(writeBackType, writeBackKey)
	cloud := &echoCloud{lbCloud: newLBCloud("other", "198.51.100.7")}
	r := metalRouter(t, "error", Backend{Name: "other", Type: writeBackType, Scheme: "aws", Cloud: cloud})
	svc := newService("shop", withLBBackend("other"))
	svc.Annotations[writeBackKey] = "lb-1"
	c := startCluster(t, r, svc)
	ctx := context.Background()

	cloud.during = func() {
		s := c.service(t, "shop")
		delete(s.Annotations, writeBackKey)
		if _, err := c.client.CoreV1().Services("default").Update(ctx, s, metav1.UpdateOptions{}); err != nil {
			t.Error(err)
		}
	}
	if _, err := r.EnsureLoadBalancer(ctx, "kubernetes", c.service(t, "shop"), nil); err != nil {
		t.Fatal(err)
	}
	if v, ok := c.service(t, "shop").Annotations[writeBackKey]; ok {
		t.Errorf("%s = %q after the user removed it during the Ensure, want it absent", writeBackKey, v)
	}

	cloud.during = func() {
		s := c.service(t, "shop")
		s.Annotations["unrelated"] = "edit"
		if _, err := c.client.CoreV1().Services("default").Update(ctx, s, metav1.UpdateOptions{}); err != nil {
			t.Error(err)
		}
	}
	s := c.service(t, "shop")
	s.Annotations[writeBackKey] = "lb-2"
	if _, err := c.client.CoreV1().Services("default").Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.EnsureLoadBalancer(ctx, "kubernetes", c.service(t, "shop"), nil); err != nil {
		t.Fatal(err)
	}
	if v := c.service(t, "shop").Annotations[writeBackKey]; v != "lb-2" {
		t.Errorf("%s = %q, want lb-2 (unedited during the Ensure)", writeBackKey, v)
	}
}
