package lbcontroller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clienttesting "k8s.io/client-go/testing"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
)

// askingCloud counts every question the controller asks the router about
// load balancers.
type askingCloud struct {
	*hookedCloud
	gets, deletes atomic.Int32
}

func (c *askingCloud) GetLoadBalancer(ctx context.Context, clusterName string, svc *corev1.Service) (*corev1.LoadBalancerStatus, bool, error) {
	c.gets.Add(1)
	return c.hookedCloud.GetLoadBalancer(ctx, clusterName, svc)
}

func (c *askingCloud) EnsureLoadBalancerDeleted(ctx context.Context, clusterName string, svc *corev1.Service) error {
	c.deletes.Add(1)
	return c.hookedCloud.EnsureLoadBalancerDeleted(ctx, clusterName, svc)
}

// finalizerPatches returns the finalizer lists the controller's patches
// wrote on the Service, in order.
func (e *env) finalizerPatches(name string) [][]string {
	var out [][]string
	for _, a := range e.client.Actions() {
		p, ok := a.(clienttesting.PatchAction)
		if !ok || a.GetResource().Resource != "services" || p.GetName() != name || !strings.Contains(string(p.GetPatch()), `"finalizers"`) {
			continue
		}
		var body struct {
			Metadata struct {
				Finalizers []string `json:"finalizers"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(p.GetPatch(), &body); err == nil {
			out = append(out, body.Metadata.Finalizers)
		}
	}
	return out
}

// TestAnotherCCMsClasslessServiceUntouched (issue 45, beside upstream's
// AWS CCM): with no default backend, a classless Service with no
// annotation and no record of ours is another CCM's: it is never given a
// finalizer, and at its deletion (upstream's finalizer on it, its NLB's
// name in its status) nobody is asked about its load balancer and its
// finalizer stays for the CCM that put it. Our controller served every
// classless Service: it added the shared finalizer, then at the deletion
// asked the router, which, for a Service with an address and no record,
// asks every backend (our aws backend looked for upstream's NLB), and
// removed the finalizer before upstream had deleted its NLB.
func TestAnotherCCMsClasslessServiceUntouched(t *testing.T) {
	ac := &askingCloud{}
	theirs := service("theirs", nil)
	theirs.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{Hostname: "theirs-0123.elb.eu-west-1.amazonaws.com"}}
	fresh := service("fresh", nil)
	e := startEnv(t, envOptions{doc: metals(""), classless: true, versioned: true, wrap: func(h *hookedCloud) Cloud { ac.hookedCloud = h; return ac }}, theirs, fresh)
	// Another Service, ours, created after: the informer's list queued
	// the first two before it.
	webOn(t, e, "metal", "0")
	for _, name := range []string{"theirs", "fresh"} {
		if s := e.get(t, name); len(s.Finalizers) > 0 || len(s.Annotations) > 0 {
			t.Errorf("%s, another CCM's, was written: finalizers %v, annotations %v", name, s.Finalizers, s.Annotations)
		}
	}
	// The other CCM puts its finalizer, then the Service is deleted.
	s := e.get(t, "theirs")
	s.Finalizers = []string{sharedFinalizer}
	if _, err := e.client.CoreV1().Services("default").Update(context.Background(), s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := e.client.CoreV1().Services("default").Delete(context.Background(), "theirs", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// A Service of ours deleted after it: its cleanup is done once the
	// other's deletion was seen.
	if err := e.client.CoreV1().Services("default").Delete(context.Background(), "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "web deleted", func() error {
		if _, err := e.client.CoreV1().Services("default").Get(context.Background(), "web", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there (%w)", err)
		}
		return nil
	})
	s = e.get(t, "theirs")
	if !slices.Equal(s.Finalizers, []string{sharedFinalizer}) {
		t.Errorf("the other CCM's finalizer was touched: %v", s.Finalizers)
	}
	if n := ac.gets.Load() + ac.deletes.Load(); n != 1+1 {
		// web: one GetLoadBalancer and one EnsureLoadBalancerDeleted.
		t.Errorf("%d questions about load balancers (Get %d, Delete %d); want web's two only", n, ac.gets.Load(), ac.deletes.Load())
	}
	if evs := e.events(t, "theirs"); len(evs) > 0 {
		t.Errorf("events on the other CCM's Service: %v", evs)
	}
}

// TestClassedMovesToOwnFinalizer (issue 45): a classed Service an earlier
// version served under the shared finalizer (its record, its address) is
// moved to our Finalizer at the controller's start, in one write that
// adds ours and removes the shared one (never neither), its address
// kept; its deletion then removes ours.
func TestClassedMovesToOwnFinalizer(t *testing.T) {
	old := service("web", ptrTo(ourClass))
	old.Finalizers = []string{"example.com/keep", sharedFinalizer}
	old.Annotations = map[string]string{string(annotation.LoadBalancerBackends): "metal", string(annotation.LoadBalancerServedBy): "metal"}
	old.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.0.2.5"}}
	e := startEnv(t, envOptions{doc: cloudConfig, versioned: true}, old)
	eventually(t, "the Service moved to our finalizer", func() error {
		if s := e.get(t, "web"); !slices.Equal(s.Finalizers, []string{"example.com/keep", Finalizer}) {
			return fmt.Errorf("finalizers %v", s.Finalizers)
		}
		return nil
	})
	eventually(t, "the sync recorded", func() error {
		if !e.ctrl.known("default/web") {
			return errors.New("not yet")
		}
		return nil
	})
	if got := e.finalizerPatches("web"); len(got) != 1 {
		t.Errorf("finalizer writes %v; want one", got)
	}
	if ip := ingress(e.get(t, "web")); ip != "192.0.2.5" {
		t.Errorf("address %q; want 192.0.2.5 kept", ip)
	}
	if ev := hasEvent(e.events(t, "web"), reasonSyncFailed); ev != "" {
		t.Errorf("the move failed a sync: %s", ev)
	}
	if err := e.client.CoreV1().Services("default").Delete(context.Background(), "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "our finalizer removed", func() error {
		if s := e.get(t, "web"); !slices.Equal(s.Finalizers, []string{"example.com/keep"}) {
			return fmt.Errorf("finalizers %v", s.Finalizers)
		}
		return nil
	})
	if s := e.get(t, "web"); e.cloud.held()[s.UID] {
		t.Error("the load balancer is left")
	}
	eventually(t, "the DeletedLoadBalancer event", func() error {
		if hasEvent(e.events(t, "web"), reasonDeleted) == "" {
			return fmt.Errorf("events %v", e.events(t, "web"))
		}
		return nil
	})
}

// TestClassedDeletedUnderSharedFinalizer (issue 45): a classed Service
// being deleted that still carries only the shared finalizer (deleted
// before any sync moved it, as when our controller was down) is cleaned
// up by ours: its load balancer deleted, the shared finalizer removed.
func TestClassedDeletedUnderSharedFinalizer(t *testing.T) {
	e := startEnv(t, envOptions{doc: cloudConfig, versioned: true}, service("web", ptrTo(ourClass)))
	eventually(t, "the Service's address", addressed(e, t, "web"))
	// An earlier version's finalizer, and the deletion, while the
	// controller is not looking: one update, as a restored backup.
	s := e.get(t, "web")
	s.Finalizers = []string{sharedFinalizer}
	now := metav1.Now()
	s.DeletionTimestamp = &now
	if _, err := e.client.CoreV1().Services("default").Update(context.Background(), s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the Service gone", func() error {
		if _, err := e.client.CoreV1().Services("default").Get(context.Background(), "web", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there (%w)", err)
		}
		return nil
	})
	if held := e.cloud.held(); held[s.UID] {
		t.Error("the load balancer is left")
	}
}

// TestClassChangeSwapsFinalizer (issue 45): a classed Service turned
// ClusterIP (the API server clears its class) and back to a classless
// LoadBalancer before the controller saw it carries our Finalizer; served
// as a classless Service (default backend), it gets the shared finalizer
// in place of ours in one write, keeping its load balancer.
func TestClassChangeSwapsFinalizer(t *testing.T) {
	s := service("web", nil)
	s.Finalizers = []string{Finalizer}
	s.Annotations = map[string]string{string(annotation.LoadBalancerBackends): "metal", string(annotation.LoadBalancerServedBy): "metal"}
	s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.0.2.5"}}
	e := startEnv(t, envOptions{doc: cloudConfig, classless: true, versioned: true}, s)
	eventually(t, "the shared finalizer in place of ours", func() error {
		if s := e.get(t, "web"); !slices.Equal(s.Finalizers, []string{sharedFinalizer}) {
			return fmt.Errorf("finalizers %v", s.Finalizers)
		}
		return nil
	})
	if got := e.finalizerPatches("web"); len(got) != 1 {
		t.Errorf("finalizer writes %v; want one", got)
	}
	eventually(t, "served", addressed(e, t, "web"))
	if ip := ingress(e.get(t, "web")); ip != "192.0.2.5" {
		t.Errorf("address %q; want 192.0.2.5 kept", ip)
	}
}

// TestOwnFinalizerHandedOver (issue 45): with upstream's service
// controller serving classless Services (not classless mode), a Service
// that was ours under a class and is now a classless LoadBalancer keeps
// our Finalizer until the shared one guards it, then loses ours, and
// nothing else of it is written. A Service with our Finalizer and no
// record loses it at once.
func TestOwnFinalizerHandedOver(t *testing.T) {
	s := service("web", nil)
	s.Finalizers = []string{Finalizer}
	s.Annotations = map[string]string{string(annotation.LoadBalancerBackends): "metal"}
	bare := service("bare", nil)
	bare.Finalizers = []string{Finalizer}
	e := startEnv(t, envOptions{doc: cloudConfig, versioned: true}, s, bare)
	eventually(t, "bare loses our finalizer", func() error {
		if s := e.get(t, "bare"); len(s.Finalizers) > 0 {
			return fmt.Errorf("finalizers %v", s.Finalizers)
		}
		return nil
	})
	if got := e.get(t, "web").Finalizers; !slices.Equal(got, []string{Finalizer}) {
		t.Errorf("web's finalizers %v before the shared one came; want ours kept", got)
	}
	// Upstream's controller takes it: its finalizer.
	s = e.get(t, "web")
	s.Finalizers = append(s.Finalizers, sharedFinalizer)
	if _, err := e.client.CoreV1().Services("default").Update(context.Background(), s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "web loses our finalizer", func() error {
		if s := e.get(t, "web"); !slices.Equal(s.Finalizers, []string{sharedFinalizer}) {
			return fmt.Errorf("finalizers %v", s.Finalizers)
		}
		return nil
	})
	if got := e.get(t, "web").Annotations[string(annotation.LoadBalancerBackends)]; got != "metal" {
		t.Errorf("record %q; want metal left to the router", got)
	}
	if e.cloud.ensures.Load() != 0 {
		t.Errorf("%d EnsureLoadBalancer calls; want none", e.cloud.ensures.Load())
	}
}

// TestDefaultRemovedLetsGo (issue 45): a classless Service served by the
// default backend, whose default a reload removes, loses its load
// balancer and then its finalizer (nothing of ours left to clean up), so
// that its deletion needs no controller: our controller no longer looks
// at a classless Service our routing does not choose.
func TestDefaultRemovedLetsGo(t *testing.T) {
	withDefault := metals("  defaultBackend: metal\n")
	e := startEnv(t, envOptions{doc: withDefault, classless: true, versioned: true, reloadable: true}, service("web", nil))
	eventually(t, "web addressed", addressed(e, t, "web"))
	e.reload(t, metals(""))
	eventually(t, "web released: no address, record or finalizer", func() error {
		s := e.get(t, "web")
		if len(s.Finalizers) > 0 || ingress(s) != "" || hasRecord(s) {
			return fmt.Errorf("finalizers %v, %s", s.Finalizers, state(s))
		}
		return nil
	})
	if err := e.client.CoreV1().Services("default").Delete(context.Background(), "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "web gone", func() error {
		if _, err := e.client.CoreV1().Services("default").Get(context.Background(), "web", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there (%w)", err)
		}
		return nil
	})
}

// TestLetGoKeepsAnotherControllersFinalizer (issue 45): a classless
// Service with our record that our routing no longer chooses, whose
// status also shows another controller's address (upstream's NLB, which
// served it while it was turned from our class to classless through
// ClusterIP, our CCM down): the router releases our address and keeps
// theirs, and our controller removes its own finalizer but leaves the
// shared one to the controller that serves the Service.
func TestLetGoKeepsAnotherControllersFinalizer(t *testing.T) {
	s := service("web", nil)
	s.Finalizers = []string{Finalizer, sharedFinalizer}
	s.Annotations = map[string]string{string(annotation.LoadBalancerBackends): "metal", string(annotation.LoadBalancerServedBy): "metal"}
	s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.0.2.5"}, {Hostname: "theirs-0123.elb.eu-west-1.amazonaws.com"}}
	e := startEnv(t, envOptions{doc: metals(""), classless: true, versioned: true}, s)
	eventually(t, "our address and finalizer gone, theirs kept", func() error {
		s := e.get(t, "web")
		if !slices.Equal(s.Finalizers, []string{sharedFinalizer}) || ingresses(s) != "theirs-0123.elb.eu-west-1.amazonaws.com" || hasRecord(s) {
			return fmt.Errorf("finalizers %v, %s", s.Finalizers, state(s))
		}
		return nil
	})
}
