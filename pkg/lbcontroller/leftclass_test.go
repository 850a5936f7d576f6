package lbcontroller

// Issue 45, the two limits session 49 left: a Service of ours that goes
// to ClusterIP and then to another controller's class between two of our
// syncs (the update below changes the class in one step, as our informer
// sees it when it misses the ClusterIP version), and the shared finalizer
// that class's controller puts on it before it has an address. Each
// drives the real controller and router over the fake API server that
// keeps resourceVersions, with the bare-metal backend's real allocator.

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clienttesting "k8s.io/client-go/testing"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
)

// theirAnnotation is an annotation of another controller's.
const theirAnnotation = "example.com/their-pool"

// theirAddress is the address another controller wrote.
const theirAddress = "203.0.113.7"

// oneAddress is a config whose class serves from a pool of one address,
// so a second Service gets it only once the first one's load balancer
// released it.
const oneAddress = `apiVersion: multicloud-ccm.io/v1alpha1
kind: CloudConfig
clusterID: test
loadBalancer:
  classes:
  - {name: ` + ourClass + `, backend: metal}
backends:
- name: metal
  type: baremetal
  baremetal:
    inventory: [{name: worker-0, addresses: [{type: InternalIP, address: 10.0.0.10}]}]
    addressPools: [{name: lan, addresses: ["192.0.2.9/32"]}]
`

// keptSince is keptEvery for the finalizer writes after the first skip.
func keptSince(e *env, name string, skip int, keep ...string) error {
	for _, fins := range e.finalizerPatches(name)[skip:] {
		for _, f := range keep {
			if !slices.Contains(fins, f) {
				return fmt.Errorf("a finalizer write %v removed %s", fins, f)
			}
		}
	}
	return nil
}

// toForeignClass gives the Service another controller's class, as
// ClusterIP and back to a LoadBalancer of that class do between two of our
// syncs, with what that controller adds: the shared finalizer and its own
// (fins), its annotation and, when addr is set, its address after ours
// in the status; with deleting, the update also marks it deleted, so our
// controller's first sync of the new class is its cleanup.
func toForeignClass(t *testing.T, e *env, name string, addr, deleting bool, fins ...string) {
	t.Helper()
	if err := retryUpdate(e, name, func(s *corev1.Service) {
		if deleting {
			now := metav1.Now()
			s.DeletionTimestamp = &now
		}
		s.Spec.LoadBalancerClass = ptrTo(foreignClass)
		s.Finalizers = append(s.Finalizers, fins...)
		s.Annotations[theirAnnotation] = "blue"
		if addr {
			s.Status.LoadBalancer.Ingress = append(s.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: theirAddress})
		}
	}); err != nil {
		t.Fatal(err)
	}
}

// TestLeftForForeignClassReleasesOurs (issue 45, limit b): a Service of
// our class, addressed from a pool of one address, turns into a
// LoadBalancer of another controller's class between two of our syncs;
// that controller adds its finalizers, its annotation and its address. Our
// controller releases what the router's record says it holds: the load
// balancer is gone from the backend, the allocator gave the address back
// (a new Service of our class gets it), our record, our address and our
// Finalizer leave the Service; the other controller's finalizers, address
// and annotation stay. Before, the load balancer stayed until the
// Service's deletion.
func TestLeftForForeignClassReleasesOurs(t *testing.T) {
	e := startEnv(t, envOptions{doc: oneAddress, versioned: true})
	e.create(t, service("web", ptrTo(ourClass)))
	eventually(t, "web addressed", addressed(e, t, "web"))
	ours := e.get(t, "web").DeepCopy()
	if ingress(ours) != "192.0.2.9" || !slices.Equal(ours.Finalizers, []string{Finalizer}) || !hasRecord(ours) {
		t.Fatalf("web served: finalizers %v, %s", ours.Finalizers, state(ours))
	}
	before := len(e.finalizerPatches("web"))
	toForeignClass(t, e, "web", true, false, sharedFinalizer, theirFinalizer)
	eventually(t, "ours released from web", func() error {
		s := e.get(t, "web")
		if hasFinalizer(s, Finalizer) || hasRecord(s) || ingresses(s) != theirAddress {
			return fmt.Errorf("finalizers %v, %s, served-by %q", s.Finalizers, state(s), s.Annotations[string(annotation.LoadBalancerServedBy)])
		}
		return nil
	})
	waitLoadBalancerGone(t, e, "our load balancer gone from metal", ours)
	s := e.get(t, "web")
	if want := []string{sharedFinalizer, theirFinalizer}; !slices.Equal(s.Finalizers, want) {
		t.Errorf("finalizers %v; want %v, the other controller's", s.Finalizers, want)
	}
	if s.Annotations[theirAnnotation] != "blue" {
		t.Errorf("the other controller's annotation: %q", s.Annotations[theirAnnotation])
	}
	if err := keptSince(e, "web", before, sharedFinalizer, theirFinalizer); err != nil {
		t.Error(err)
	}
	// The pool's one address is free again.
	e.create(t, service("next", ptrTo(ourClass)))
	eventually(t, "next gets the released address", func() error {
		if got := ingress(e.get(t, "next")); got != "192.0.2.9" {
			return fmt.Errorf("status %q", got)
		}
		return nil
	})
	if got := ingresses(e.get(t, "web")); got != theirAddress {
		t.Errorf("web's status %q; want the other controller's %s alone", got, theirAddress)
	}
}

// TestForeignSharedFinalizerWithoutAddressKept (issue 45, limit a): as
// above, but the other controller has added only its finalizer, the
// shared one, and written no address yet. Nothing in the Service's status
// tells it from a class of ours a reload removed, whose shared finalizer
// an earlier version of ours put beside its record
// (TestClassLeftTheConfig, which must keep passing); what we wrote does:
//   - late, of our class, is deleted once our controller let go of it;
//   - early, of our class, is deleted in the same update that changes its
//     class: our controller's first sync of it is the cleanup, of a
//     Service carrying our Finalizer, which this version puts on a classed
//     Service instead of the shared one;
//   - plain was classless, served under the shared finalizer, which its
//     new class's controller now relies on: deleted in the same update,
//     its class differs from the one we last synced;
//   - restarted is early met by a new process (nothing of it in memory):
//     our Finalizer beside the shared one, our record, no address.
//
// Each keeps the shared finalizer, which guards the other controller's
// load balancer, and loses ours and our load balancer. Before, the
// cleanup removed the shared finalizer and the Service went.
func TestForeignSharedFinalizerWithoutAddressKept(t *testing.T) {
	restarted := service("restarted", ptrTo(foreignClass))
	restarted.Finalizers = []string{Finalizer, sharedFinalizer}
	restarted.Annotations = metalRecord()
	now := metav1.Now()
	restarted.DeletionTimestamp = &now
	e := startEnv(t, envOptions{doc: metals("  classes:\n  - {name: " + ourClass + ", backend: metal}\n"), classless: true, versioned: true}, restarted)
	probes, before := map[string]*corev1.Service{}, map[string]int{}
	for _, name := range []string{"late", "early", "plain"} {
		s := service(name, ptrTo(ourClass))
		if name == "plain" {
			s = service(name, nil)
			s.Annotations = map[string]string{string(annotation.LoadBalancerBackend): "metal"}
		}
		e.create(t, s)
		eventually(t, name+" addressed", addressed(e, t, name))
		probes[name] = e.get(t, name).DeepCopy()
		before[name] = len(e.finalizerPatches(name))
	}
	if got := probes["plain"].Finalizers; !slices.Equal(got, []string{sharedFinalizer}) {
		t.Fatalf("plain served with finalizers %v", got)
	}
	toForeignClass(t, e, "early", false, true, sharedFinalizer)
	toForeignClass(t, e, "plain", false, true)
	toForeignClass(t, e, "late", false, false, sharedFinalizer)
	eventually(t, "our finalizer gone from late", func() error {
		if s := e.get(t, "late"); hasFinalizer(s, Finalizer) || hasRecord(s) || ingress(s) != "" {
			return fmt.Errorf("finalizers %v, %s", s.Finalizers, state(s))
		}
		return nil
	})
	if err := e.client.CoreV1().Services("default").Delete(context.Background(), "late", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	names := []string{"early", "late", "plain", "restarted"}
	for _, name := range names {
		if p := probes[name]; p != nil {
			waitLoadBalancerGone(t, e, name+": our load balancer gone", p)
		}
		eventually(t, name+": our finalizer and addresses gone", func() error {
			s := getOrGone(t, e, name)
			if s != nil && (hasFinalizer(s, Finalizer) || ingress(s) != "") {
				return fmt.Errorf("finalizers %v, %s", s.Finalizers, state(s))
			}
			return nil
		})
	}
	// Let any sync the deletions queued run: the queue is drained once a
	// Service created after them is ensured.
	e.create(t, service("ours", ptrTo(ourClass)))
	eventually(t, "ours addressed", addressed(e, t, "ours"))
	for _, name := range names {
		s := getOrGone(t, e, name)
		if s == nil {
			t.Errorf("%s: gone; the shared finalizer was the other controller's to remove (writes %v)", name, e.finalizerPatches(name))
			continue
		}
		if !slices.Equal(s.Finalizers, []string{sharedFinalizer}) || s.DeletionTimestamp == nil {
			t.Errorf("%s: finalizers %v, deleting %v; want the other controller's shared one alone, deleting", name, s.Finalizers, s.DeletionTimestamp != nil)
		}
		if err := keptSince(e, name, before[name], sharedFinalizer); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestLeftForForeignClassMidDrain (issue 45, limit b): a classless Service
// moved from metal to metal2 under a long drain (both addresses in its
// status, both backends in the router's record) turns into a LoadBalancer
// of another controller's class between two of our syncs. Both load
// balancers go, the draining one's with its drain, as for a Service
// leaving us: no record, no drain entry, no external-dns target of the
// router's, none of our addresses, the other
// controller's address and finalizers kept.
func TestLeftForForeignClassMidDrain(t *testing.T) {
	e := startEnv(t, envOptions{doc: metals(""), classless: true, versioned: true})
	webOn(t, e, "metal", "1h")
	e.moveTo(t, "web", "metal2")
	eventually(t, "metal draining", func() error {
		if s := e.get(t, "web"); !strings.HasPrefix(drainingOf(s), "metal=") || len(s.Status.LoadBalancer.Ingress) != 2 {
			return fmt.Errorf("%s", state(s))
		}
		return nil
	})
	probe := e.get(t, "web").DeepCopy()
	mark := len(e.client.Actions())
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for _, a := range e.client.Actions()[mark:] {
			if p, ok := a.(clienttesting.PatchAction); ok && p.GetName() == "web" {
				t.Logf("patch %s: %s", p.GetSubresource(), p.GetPatch())
			}
			if u, ok := a.(clienttesting.UpdateAction); ok {
				if s, ok := u.GetObject().(*corev1.Service); ok && s.Name == "web" {
					t.Logf("update: %v %s", s.Spec.LoadBalancerClass != nil, state(s))
				}
			}
		}
	})
	toForeignClass(t, e, "web", true, false, theirFinalizer)
	eventually(t, "ours released from web", func() error {
		s := e.get(t, "web")
		if hasRecord(s) || drainingOf(s) != "" || s.Annotations["external-dns.kubernetes.io/target"] != "" || ingresses(s) != theirAddress {
			return fmt.Errorf("finalizers %v, %s", s.Finalizers, state(s))
		}
		return nil
	})
	for _, b := range []string{"metal", "metal2"} {
		p := probe.DeepCopy()
		p.Annotations[string(annotation.LoadBalancerBackends)] = b
		waitLoadBalancerGone(t, e, b+": our load balancer gone", p)
	}
	if s := e.get(t, "web"); !slices.Equal(s.Finalizers, []string{sharedFinalizer, theirFinalizer}) || s.Annotations[theirAnnotation] != "blue" {
		t.Errorf("finalizers %v, their annotation %q; want the shared one and theirs kept", s.Finalizers, s.Annotations[theirAnnotation])
	}
}

// TestClassChangedDuringEnsureKeepsTheirStatus: a Service of our class is
// given another controller's class, with that controller's finalizer and
// address, while its first load balancer is ensured. The status write
// that follows conflicts; the version re-read is not ours to serve, so our
// address is not written on it (it replaced the other controller's
// address with ours), and the next sync releases our load balancer.
func TestClassChangedDuringEnsureKeepsTheirStatus(t *testing.T) {
	e := startEnv(t, envOptions{doc: oneAddress, versioned: true})
	changed := make(chan error, 1)
	e.cloud.mu.Lock()
	e.cloud.during = func(*corev1.Service) {
		changed <- retryUpdate(e, "web", func(s *corev1.Service) {
			s.Spec.LoadBalancerClass = ptrTo(foreignClass)
			s.Finalizers = append(s.Finalizers, theirFinalizer)
			s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: theirAddress}}
		})
	}
	e.cloud.mu.Unlock()
	e.create(t, service("web", ptrTo(ourClass)))
	if err := receive(t, changed, "the class change during the ensure"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "ours released from web", func() error {
		if s := e.get(t, "web"); hasFinalizer(s, Finalizer) || hasRecord(s) {
			return fmt.Errorf("finalizers %v, %s", s.Finalizers, state(s))
		}
		return nil
	})
	probe := service("web", ptrTo(ourClass))
	probe.UID = e.get(t, "web").UID
	probe.Annotations = metalRecord()
	waitLoadBalancerGone(t, e, "our load balancer gone", probe)
	// Our address written over theirs would have been released with
	// our load balancer: theirs would be gone.
	if s := e.get(t, "web"); ingresses(s) != theirAddress || !slices.Equal(s.Finalizers, []string{theirFinalizer}) {
		t.Errorf("finalizers %v, %s; want the other controller's finalizer and address alone", s.Finalizers, state(s))
	}
}
