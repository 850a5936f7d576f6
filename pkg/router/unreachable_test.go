package router_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/util/retry"

	"github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
	_ "github.com/multicloud-ccm/multicloud-ccm/pkg/backends/baremetal" // the bare-metal backend type.
	"github.com/multicloud-ccm/multicloud-ccm/pkg/config"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/lbcontroller"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/router"
)

// twoMetalsDoc is a cloud-config with two bare-metal backends, metal
// (192.0.2.0/28) and, when withMetal2, metal2 (198.51.100.0/28).
func twoMetalsDoc(withMetal2 bool) string {
	doc := `apiVersion: multicloud-ccm.io/v1alpha1
kind: CloudConfig
clusterID: test
loadBalancer:
  drainPeriod: 0s
backends:
- name: metal
  type: baremetal
  baremetal:
    inventory: [{name: worker-0, addresses: [{type: InternalIP, address: 10.0.0.10}]}]
    addressPools: [{name: lan, addresses: ["192.0.2.0/28"]}]
`
	if withMetal2 {
		doc += `- name: metal2
  type: baremetal
  baremetal:
    inventory: [{name: worker-9, addresses: [{type: InternalIP, address: 10.0.0.99}]}]
    addressPools: [{name: other, addresses: ["198.51.100.0/28"]}]
`
	}
	return doc
}

// lbEnv is pkg/lbcontroller (the controller serving Services by default)
// over a Reloadable router, on a fake API server.
type lbEnv struct {
	client *fake.Clientset
	rl     *router.Reloadable
	ctrl   *lbcontroller.Controller
	cfg    *config.CloudConfig
}

func startLBEnv(t *testing.T, doc string) *lbEnv {
	t.Helper()
	cfg, err := config.Parse([]byte(doc), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	rl, err := router.NewReloadable(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	client := testutil.NewClientset(testutil.NewNode("worker-0", testutil.WithProviderID("baremetal://worker-0"), testutil.WithInternalIP("10.0.0.10")))
	ctx, cancel := context.WithCancel(context.Background())
	factory := informers.NewSharedInformerFactory(client, 0)
	rl.Initialize(testutil.NewClientBuilder(client), ctx.Done())
	rl.SetInformers(factory)
	ctrl, err := lbcontroller.New(rl, lbcontroller.Options{
		Client: client, Services: factory.Core().V1().Services(), Nodes: factory.Core().V1().Nodes(),
		ClusterName: "test", Classless: true, RetryMin: 10 * time.Millisecond, RetryMax: 100 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	var wg sync.WaitGroup
	wg.Go(func() { ctrl.Run(ctx, 2) })
	t.Cleanup(func() { cancel(); wg.Wait(); factory.Shutdown() })
	return &lbEnv{client: client, rl: rl, ctrl: ctrl, cfg: cfg}
}

func (e *lbEnv) reload(t *testing.T, doc string) {
	t.Helper()
	next, err := config.Parse([]byte(doc), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ch, err := e.rl.Apply(context.Background(), next)
	if err != nil {
		t.Fatal(err)
	}
	e.ctrl.Reloaded(e.cfg, next, ch)
	e.cfg = next
}

func (e *lbEnv) get(t *testing.T, name string) *corev1.Service {
	t.Helper()
	s, err := e.client.CoreV1().Services("default").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (e *lbEnv) annotate(t *testing.T, name string, ann map[annotation.Name]string) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		s := e.get(t, name)
		for k, v := range ann {
			s.Annotations[string(k)] = v
		}
		_, err := e.client.CoreV1().Services("default").Update(context.Background(), s, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// warnings returns the messages of the Warning events on the Service with
// reason, each as many times as it was counted.
func (e *lbEnv) warnings(t *testing.T, name, reason string) []string {
	t.Helper()
	list, err := e.client.CoreV1().Events("default").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, ev := range list.Items {
		if ev.InvolvedObject.Name == name && ev.Type == corev1.EventTypeWarning && ev.Reason == reason {
			for range max(ev.Count, 1) {
				out = append(out, ev.Message)
			}
		}
	}
	return out
}

func ingressOf(s *corev1.Service) string {
	var ips []string
	for _, in := range s.Status.LoadBalancer.Ingress {
		ips = append(ips, in.IP)
	}
	return strings.Join(ips, ",")
}

// TestRemovedBackendDoesNotBlockTheServingOne (chaos seed 529377690)
// drives pkg/lbcontroller over a Reloadable: web, served by metal2 with a
// drain period, moves back to metal while a reload removes metal2. metal
// serves it: its address is published, the Service is Ready, and metal2's
// leftover stays in the record with one Warning UnknownLoadBalancerBackend
// naming metal2 and the fix; a reload adding metal2 back retires it there.
// Every sync failed on the record's metal2, so metal's address (allocated,
// counted in use) was never published.
func TestRemovedBackendDoesNotBlockTheServingOne(t *testing.T) {
	e := startLBEnv(t, twoMetalsDoc(true))
	web := testutil.NewService("web", testutil.WithAnnotation(string(annotation.LoadBalancerBackend), "metal2"),
		testutil.WithAnnotation(string(annotation.LoadBalancerDrain), "2s"))
	if _, err := e.client.CoreV1().Services("default").Create(context.Background(), web, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, "web served by metal2", func() error {
		if s := e.get(t, "web"); !strings.HasPrefix(ingressOf(s), "198.51.100.") {
			return fmt.Errorf("status %q, annotations %v", ingressOf(s), s.Annotations)
		}
		return nil
	})

	e.reload(t, twoMetalsDoc(false))
	e.annotate(t, "web", map[annotation.Name]string{annotation.LoadBalancerBackend: "metal"})

	testutil.Eventually(t, 30*time.Second, "web served by metal, Ready, metal2 kept in the record", func() error {
		s := e.get(t, "web")
		ready := meta.FindStatusCondition(s.Status.Conditions, lbcontroller.ConditionReady)
		switch {
		case !strings.HasPrefix(ingressOf(s), "192.0.2.") || strings.Contains(ingressOf(s), ","):
			return fmt.Errorf("status %q, want metal's address alone", ingressOf(s))
		case s.Annotations[string(annotation.LoadBalancerServedBy)] != "metal":
			return fmt.Errorf("served by %q", s.Annotations[string(annotation.LoadBalancerServedBy)])
		case ready == nil || ready.Status != metav1.ConditionTrue:
			return fmt.Errorf("condition %+v", ready)
		case !strings.Contains(s.Annotations[string(annotation.LoadBalancerBackends)], "metal2"):
			return fmt.Errorf("record %q dropped metal2, whose load balancer was never deleted", s.Annotations[string(annotation.LoadBalancerBackends)])
		}
		return nil
	})
	testutil.Eventually(t, 30*time.Second, "a Warning naming metal2 and the fix", func() error {
		for _, m := range e.warnings(t, "web", "UnknownLoadBalancerBackend") {
			if strings.Contains(m, `records a load balancer in backend "metal2"`) && strings.Contains(m, "add the backend back") {
				return nil
			}
		}
		return errors.New("none")
	})

	var routerSynced atomic.Int64
	testutil.PrependReactor(e.client, "*", "services", func(clienttesting.Action) (bool, k8sruntime.Object, error) {
		buf := make([]byte, 1<<20)
		if strings.Contains(string(buf[:runtime.Stack(buf, false)]), "process.(*AddressResync).fullSync") {
			routerSynced.Add(1)
		}
		return false, nil, nil
	})
	e.reload(t, twoMetalsDoc(true))
	testutil.Eventually(t, 30*time.Second, "metal2's leftover retired once metal2 is back", func() error {
		s := e.get(t, "web")
		if rec := s.Annotations[string(annotation.LoadBalancerBackends)]; rec != "metal" {
			return fmt.Errorf("record %q, draining %q", rec, s.Annotations[string(annotation.LoadBalancerDraining)])
		}
		if !strings.HasPrefix(ingressOf(s), "192.0.2.") || strings.Contains(ingressOf(s), ",") {
			return fmt.Errorf("status %q", ingressOf(s))
		}
		return nil
	})
	var record []string
	for _, m := range e.warnings(t, "web", "UnknownLoadBalancerBackend") {
		if strings.Contains(m, "records a load balancer") {
			record = append(record, m)
		}
	}
	if len(record) != 1 {
		t.Errorf("%d Warnings UnknownLoadBalancerBackend on the record, want 1 for the episode: %q", len(record), record)
	}
	// The reload added back a backend web's record names: pkg/lbcontroller,
	// which serves web, syncs it; the router's re-sync, which runs that sync
	// under upstream's controller, leaves it alone.
	time.Sleep(500 * time.Millisecond) // the re-sync picks a reload's Services up within milliseconds
	if n := routerSynced.Load(); n > 0 {
		t.Errorf("%d calls on Services from the router's own full sync beside pkg/lbcontroller, want 0", n)
	}
}
