package lbcontroller

// Review of session 50's issue-45/40 change (branch s50-lbc): probes of a
// Service leaving us for another controller's class where that meets
// restarts, reloads, faults and the bare-metal allocator. Each drives the
// real controller and router over the fake API server that keeps
// resourceVersions.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/router"
)

// oneAddressNoClass is oneAddress without our class: a reload to it
// leaves Services of ourClass unserved.
const oneAddressNoClass = `apiVersion: multicloud-ccm.io/v1alpha1
kind: CloudConfig
clusterID: test
loadBalancer: {}
backends:
- name: metal
  type: baremetal
  baremetal:
    inventory: [{name: worker-0, addresses: [{type: InternalIP, address: 10.0.0.10}]}]
    addressPools: [{name: lan, addresses: ["192.0.2.9/32"]}]
`

// released waits for our Finalizer, the router's record and our
// addresses to leave the Service, the other controller's address alone
// in its status.
func released(t *testing.T, e *env, name string) {
	t.Helper()
	eventually(t, "ours released from "+name, func() error {
		s := e.get(t, name)
		if hasFinalizer(s, Finalizer) || hasRecord(s) || ingresses(s) != theirAddress {
			return fmt.Errorf("finalizers %v, %s, record %q", s.Finalizers, state(s), s.Annotations[string(annotation.LoadBalancerBackends)])
		}
		return nil
	})
}

// asForeign is toForeignClass applied to a copy in objs (the API state a
// new process starts on).
func asForeign(objs []runtime.Object, name string) {
	for _, o := range objs {
		s := o.(*corev1.Service)
		if s.Name != name {
			continue
		}
		s.Spec.LoadBalancerClass = ptrTo(foreignClass)
		s.Finalizers = append(s.Finalizers, sharedFinalizer, theirFinalizer)
		s.Annotations[theirAnnotation] = "blue"
		s.Status.LoadBalancer.Ingress = append(s.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: theirAddress})
	}
}

// TestProbe50RestartBetweenClassChangeAndSync (claim 1 with a restart or
// a failover): the Service of our class is given another controller's
// class (through ClusterIP, which our informer missed) while our CCM is
// down, or between the old leader's last sync and the new leader's first.
// The new process meets it with nothing in memory: our Finalizer, the
// router's record, our address beside theirs. What we hold for it is
// released as when the same process sees the change
// (TestLeftForForeignClassReleasesOurs): our load balancer gone, its
// address free for a new Service of our class, our Finalizer, record and
// address gone from the Service.
func TestProbe50RestartBetweenClassChangeAndSync(t *testing.T) {
	first := startEnv(t, envOptions{doc: oneAddress, versioned: true})
	first.create(t, service("web", ptrTo(ourClass)))
	eventually(t, "web addressed", addressed(first, t, "web"))
	ours := first.get(t, "web").DeepCopy()
	objs := first.objects(t)
	asForeign(objs, "web")
	e := startEnv(t, envOptions{doc: oneAddress, versioned: true}, objs...)
	released(t, e, "web")
	waitLoadBalancerGone(t, e, "our load balancer gone", ours)
	e.create(t, service("next", ptrTo(ourClass)))
	eventually(t, "next gets the released address", func() error {
		if got := ingress(e.get(t, "next")); got != "192.0.2.9" {
			return fmt.Errorf("status %q", got)
		}
		return nil
	})
}

// TestProbe50ReloadRemovedClassThenForeignClass (claim 1 with a live
// reload): a reload removes our class (the Service, unserved, keeps our
// Finalizer and load balancer: a removed class is not a move), then the
// Service's class is changed to another controller's. The copy we last
// synced had our class: the class changed, and what we hold is released.
// A reload adding our class back then serves a new Service of our class
// from the released address.
func TestProbe50ReloadRemovedClassThenForeignClass(t *testing.T) {
	e := startEnv(t, envOptions{doc: oneAddress, versioned: true, reloadable: true})
	e.create(t, service("web", ptrTo(ourClass)))
	eventually(t, "web addressed", addressed(e, t, "web"))
	ours := e.get(t, "web").DeepCopy()
	e.reload(t, oneAddressNoClass)
	// Let the reload's sync of web run: a Service of a class the config
	// does not list is untouched, so a sentinel cannot be ensured; its
	// conditions going (dropConditions) is the sign.
	time.Sleep(500 * time.Millisecond)
	if s := e.get(t, "web"); !hasFinalizer(s, Finalizer) || !hasRecord(s) {
		t.Fatalf("after the reload: finalizers %v, %s", s.Finalizers, state(s))
	}
	toForeignClass(t, e, "web", true, false, sharedFinalizer, theirFinalizer)
	released(t, e, "web")
	waitLoadBalancerGone(t, e, "our load balancer gone", ours)
	e.reload(t, oneAddress)
	e.create(t, service("next", ptrTo(ourClass)))
	eventually(t, "next gets the released address", func() error {
		if got := ingress(e.get(t, "next")); got != "192.0.2.9" {
			return fmt.Errorf("status %q", got)
		}
		return nil
	})
}

// failingDeletes is the controller's cloud whose deletes fail while fail
// is set, counting the failures.
type failingDeletes struct {
	*hookedCloud
	fail   atomic.Bool
	failed atomic.Int32
}

func (f *failingDeletes) EnsureLoadBalancerDeleted(ctx context.Context, clusterName string, svc *corev1.Service) error {
	if f.fail.Load() {
		f.failed.Add(1)
		return errors.New("injected: the cloud failed the delete")
	}
	return f.hookedCloud.EnsureLoadBalancerDeleted(ctx, clusterName, svc)
}

// TestProbe50LeaveDeleteFailsKeepsFinalizer (claim 1 with a fault): the
// cloud fails the delete of the load balancer of a Service that left us
// for another class. Until a delete succeeds our Finalizer and the
// router's record stay (nothing leaks: the load balancer still exists and
// is still found), a warning says why, and the other controller's
// finalizers and address are untouched; once the cloud answers, ours is
// released and the address is free again.
func TestProbe50LeaveDeleteFailsKeepsFinalizer(t *testing.T) {
	var fd *failingDeletes
	e := startEnv(t, envOptions{doc: oneAddress, versioned: true, wrap: func(h *hookedCloud) Cloud {
		fd = &failingDeletes{hookedCloud: h}
		return fd
	}})
	e.create(t, service("web", ptrTo(ourClass)))
	eventually(t, "web addressed", addressed(e, t, "web"))
	ours := e.get(t, "web").DeepCopy()
	fd.fail.Store(true)
	toForeignClass(t, e, "web", true, false, sharedFinalizer, theirFinalizer)
	eventually(t, "deletes failed thrice", func() error {
		if n := fd.failed.Load(); n < 3 {
			return fmt.Errorf("%d failures", n)
		}
		return nil
	})
	s := e.get(t, "web")
	if !hasFinalizer(s, Finalizer) || !hasRecord(s) {
		t.Errorf("the delete failing: finalizers %v, record %q; want ours kept until the delete succeeds", s.Finalizers, s.Annotations[string(annotation.LoadBalancerBackends)])
	}
	if !slices.Contains(s.Finalizers, sharedFinalizer) || !slices.Contains(s.Finalizers, theirFinalizer) || !strings.Contains(ingresses(s), theirAddress) {
		t.Errorf("the other controller's: finalizers %v, %s", s.Finalizers, state(s))
	}
	if _, exists, err := e.cloud.GetLoadBalancer(context.Background(), cluster, ours); err != nil || !exists {
		t.Errorf("the load balancer the failed delete left: exists %v, err %v", exists, err)
	}
	// Events reach the API server through the recorder's broadcaster,
	// asynchronously: under load the third failure's warning can still be
	// on its way (seen under -race beside the scale benchmarks).
	eventually(t, "a "+reasonSyncFailed+" warning", func() error {
		if evs := e.events(t, "web"); hasEvent(evs, reasonSyncFailed) == "" {
			return fmt.Errorf("no %s warning: events %v", reasonSyncFailed, evs)
		}
		return nil
	})
	fd.fail.Store(false)
	released(t, e, "web")
	waitLoadBalancerGone(t, e, "our load balancer gone", ours)
	if s := e.get(t, "web"); !slices.Equal(s.Finalizers, []string{sharedFinalizer, theirFinalizer}) {
		t.Errorf("finalizers %v; want the other controller's", s.Finalizers)
	}
	e.create(t, service("next", ptrTo(ourClass)))
	eventually(t, "next gets the released address", func() error {
		if got := ingress(e.get(t, "next")); got != "192.0.2.9" {
			return fmt.Errorf("status %q", got)
		}
		return nil
	})
}

// metal2Only is metals("") without metal: a reload to it removes the
// backend a Service's record names.
const metal2Only = `apiVersion: multicloud-ccm.io/v1alpha1
kind: CloudConfig
clusterID: test
loadBalancer:
  drainPeriod: 0s
backends:
- name: metal2
  type: baremetal
  baremetal:
    inventory: [{name: worker-9, addresses: [{type: InternalIP, address: 10.0.0.99}]}]
    addressPools: [{name: other, addresses: ["198.51.100.0/28"]}]
`

// TestProbe50BackendRemovedThenAddedBackAcrossLeave (claim 1 with a live
// reload of the backend): a classless Service served by metal; a reload
// removes metal; the Service is given another controller's class. Our
// load balancer in metal cannot be deleted while metal is not configured:
// the router's record and our address stay (removing them would leak it
// for good). A reload adding metal back lets the release finish: the load
// balancer gone, then the record and our address; the shared finalizer
// (the new class's controller relies on it) and theirs stay.
func TestProbe50BackendRemovedThenAddedBackAcrossLeave(t *testing.T) {
	e := startEnv(t, envOptions{doc: metals(""), classless: true, versioned: true, reloadable: true})
	webOn(t, e, "metal", "0s")
	ours := e.get(t, "web").DeepCopy()
	e.reload(t, metal2Only)
	time.Sleep(300 * time.Millisecond)
	if s := e.get(t, "web"); !slices.Equal(s.Finalizers, []string{sharedFinalizer}) {
		t.Fatalf("classless web served with finalizers %v", s.Finalizers)
	}
	toForeignClass(t, e, "web", true, false, theirFinalizer)
	time.Sleep(time.Second)
	if s := e.get(t, "web"); !hasRecord(s) || !strings.Contains(ingresses(s), ingress(ours)) {
		t.Errorf("metal not configured: finalizers %v, record %q, %s; want the record and our address kept until metal's load balancer is deleted", s.Finalizers, s.Annotations[string(annotation.LoadBalancerBackends)], state(s))
	}
	e.reload(t, metals(""))
	released(t, e, "web")
	waitLoadBalancerGone(t, e, "our load balancer gone from metal", ours)
	if s := e.get(t, "web"); !slices.Equal(s.Finalizers, []string{sharedFinalizer, theirFinalizer}) {
		t.Errorf("finalizers %v; want the shared one (the new class's controller relies on it) and theirs", s.Finalizers)
	}
}

// TestProbe50DeletedUnderTheirFinalizerDropsRecord (claim 2): a Service
// of our class is deleted while another controller's finalizer keeps it.
// The cleanup deletes our load balancer, and one write removes our
// Finalizer, our address and the router's record; afterwards nothing of
// ours is asked again (no sync takes it for ours and deletes twice).
func TestProbe50DeletedUnderTheirFinalizerDropsRecord(t *testing.T) {
	e := startEnv(t, envOptions{doc: oneAddress, versioned: true})
	e.create(t, service("web", ptrTo(ourClass)))
	eventually(t, "web addressed", addressed(e, t, "web"))
	ours := e.get(t, "web").DeepCopy()
	if err := retryUpdate(e, "web", func(s *corev1.Service) {
		s.Finalizers = append(s.Finalizers, theirFinalizer)
	}); err != nil {
		t.Fatal(err)
	}
	if err := e.client.CoreV1().Services("default").Delete(context.Background(), "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "ours gone from web", func() error {
		s := e.get(t, "web")
		if hasFinalizer(s, Finalizer) || hasRecord(s) || ingress(s) != "" || drainingOf(s) != "" {
			return fmt.Errorf("finalizers %v, %s, record %q", s.Finalizers, state(s), s.Annotations[string(annotation.LoadBalancerBackends)])
		}
		return nil
	})
	waitLoadBalancerGone(t, e, "our load balancer gone", ours)
	s := e.get(t, "web")
	if !slices.Equal(s.Finalizers, []string{theirFinalizer}) || s.DeletionTimestamp == nil {
		t.Errorf("finalizers %v, deleting %v; want theirs alone, deleting", s.Finalizers, s.DeletionTimestamp != nil)
	}
	writes := e.serviceWrites()
	time.Sleep(500 * time.Millisecond)
	if n := e.serviceWrites(); n != writes {
		t.Errorf("%d more writes to a Service nothing of ours is left on", n-writes)
	}
}

// sharing is a Service of our class sharing its address under key k,
// serving port.
func sharing(name, k string, port int32) *corev1.Service {
	s := service(name, ptrTo(ourClass))
	s.Annotations[string(annotation.AllowSharedIP)] = k
	s.Spec.Ports = []corev1.ServicePort{{Name: "p", Port: port, Protocol: corev1.ProtocolTCP, NodePort: 30000 + port}}
	return s
}

// TestProbe50LeaveSharedAddressKeptForTheOther (claim 1 with sharing and
// the bare-metal allocator): web and api, of our class, share the pool's
// one address under a sharing key. web leaves for another class. Its
// release gives up web's lease alone: api keeps the address in its status
// and in the allocator (a third Service of our class, without the key,
// gets no address), and web's status keeps theirs alone.
func TestProbe50LeaveSharedAddressKeptForTheOther(t *testing.T) {
	e := startEnv(t, envOptions{doc: oneAddress, versioned: true})
	e.create(t, sharing("web", "k", 80))
	e.create(t, sharing("api", "k", 81))
	for _, n := range []string{"web", "api"} {
		eventually(t, n+" addressed", addressed(e, t, n))
		if got := ingress(e.get(t, n)); got != "192.0.2.9" {
			t.Fatalf("%s: status %q; want the shared 192.0.2.9", n, got)
		}
	}
	toForeignClass(t, e, "web", true, false, sharedFinalizer, theirFinalizer)
	released(t, e, "web")
	e.create(t, service("third", ptrTo(ourClass)))
	eventually(t, "third refused an address", func() error {
		if hasEvent(e.events(t, "third"), reasonSyncFailed) == "" {
			return fmt.Errorf("events %v", e.events(t, "third"))
		}
		return nil
	})
	if got := ingress(e.get(t, "third")); got != "" {
		t.Errorf("third got %q: the allocator gave api's address away when web left", got)
	}
	if got := ingress(e.get(t, "api")); got != "192.0.2.9" {
		t.Errorf("api: status %q; want 192.0.2.9 kept", got)
	}
	if s := e.get(t, "api"); !hasFinalizer(s, Finalizer) || !hasRecord(s) {
		t.Errorf("api: finalizers %v, %s", s.Finalizers, state(s))
	}
}

// TestProbe50TurnedClusterIPDuringEnsure (claim 3): a Service of our
// class is turned ClusterIP (its class dropped) while its first load
// balancer is ensured. The status write that follows conflicts; the
// version re-read is not a LoadBalancer, so our address is not written on
// it, and the next sync deletes the load balancer and removes our
// Finalizer: no address, no finalizer, the pool's address free again.
func TestProbe50TurnedClusterIPDuringEnsure(t *testing.T) {
	e := startEnv(t, envOptions{doc: oneAddress, versioned: true})
	changed := make(chan error, 1)
	e.cloud.mu.Lock()
	e.cloud.during = func(*corev1.Service) {
		changed <- retryUpdate(e, "web", func(s *corev1.Service) {
			s.Spec.Type = corev1.ServiceTypeClusterIP
			s.Spec.LoadBalancerClass = nil
		})
	}
	e.cloud.mu.Unlock()
	e.create(t, service("web", ptrTo(ourClass)))
	if err := receive(t, changed, "the type change during the ensure"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "web clean", func() error {
		if s := e.get(t, "web"); len(s.Finalizers) > 0 || ingress(s) != "" {
			return fmt.Errorf("finalizers %v, %s", s.Finalizers, state(s))
		}
		return nil
	})
	for _, p := range e.client.Actions() {
		if p.GetSubresource() == "status" && p.GetVerb() == "patch" {
			if pa, ok := p.(interface{ GetPatch() []byte }); ok && strings.Contains(string(pa.GetPatch()), "192.0.2.9") && !strings.Contains(string(pa.GetPatch()), `"ingress":[]`) {
				t.Logf("status patch: %s", pa.GetPatch())
			}
		}
	}
	e.create(t, service("next", ptrTo(ourClass)))
	eventually(t, "next gets the released address", func() error {
		if got := ingress(e.get(t, "next")); got != "192.0.2.9" {
			return fmt.Errorf("status %q", got)
		}
		return nil
	})
}

// decider is the router's plan entry point.
type decider interface {
	Decide(ctx context.Context, clusterName string, service *corev1.Service, nodes []*corev1.Node) *router.Decision
}

// TestProbe50PlanAtRestMatchesTheWrite (claim 5): once the controller has
// written the Service from the router's decision, `plan`'s decision for
// the Service as written (router.Decide, the dry run) shows the same
// status and changes none of the annotations the controller wrote: what
// plan prints is what the controller did. Checked for a Service mid-drain
// between two backends (both addresses shown, metal draining) and for one
// on a single backend.
func TestProbe50PlanAtRestMatchesTheWrite(t *testing.T) {
	e := startEnv(t, envOptions{doc: metals(""), classless: true, versioned: true})
	webOn(t, e, "metal", "1h")
	one := service("one", nil)
	one.Annotations = map[string]string{string(annotation.LoadBalancerBackend): "metal2"}
	e.create(t, one)
	eventually(t, "one addressed", addressed(e, t, "one"))
	e.moveTo(t, "web", "metal2")
	eventually(t, "metal draining", func() error {
		if s := e.get(t, "web"); !strings.HasPrefix(drainingOf(s), "metal=") || len(s.Status.LoadBalancer.Ingress) != 2 {
			return fmt.Errorf("%s", state(s))
		}
		return nil
	})
	time.Sleep(300 * time.Millisecond) // the syncs in flight settle
	nodeList, err := e.client.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var nodes []*corev1.Node
	for i := range nodeList.Items {
		nodes = append(nodes, &nodeList.Items[i])
	}
	r, ok := e.cloud.routerCloud.(decider)
	if !ok {
		t.Fatalf("the router %T has no Decide", e.cloud.routerCloud)
	}
	for _, name := range []string{"web", "one"} {
		s := e.get(t, name)
		d := r.Decide(context.Background(), cluster, s, nodes)
		if d.Err != nil {
			t.Errorf("%s: plan's decision failed: %v", name, d.Err)
			continue
		}
		if d.Status == nil || ingresses(&corev1.Service{Status: corev1.ServiceStatus{LoadBalancer: *d.Status}}) != ingresses(s) {
			t.Errorf("%s: plan's status %v; the controller wrote %s", name, d.Status, state(s))
		}
		for k, v := range d.Annotations {
			got, set := s.Annotations[string(k)]
			if (v == nil && set) || (v != nil && (!set || got != *v)) {
				t.Errorf("%s: plan would set %s to %v; the controller wrote %q (set %v)", name, k, ptrString(v), got, set)
			}
		}
	}
}

func ptrString(v *string) string {
	if v == nil {
		return "<removed>"
	}
	return *v
}

// TestProbe50DeletedWhileMoveFailsDeletesHeldLoadBalancer (faults: is
// anything leaked?): a classless Service served by metal is moved to
// metal2, whose ensure fails (the cloud refusing): the router's record
// still names metal, which still holds the Service's load balancer. The
// Service is then deleted. Its cleanup deletes metal's load balancer
// before our finalizers go, though the target backend (metal2) holds
// none; the Service goes.
func TestProbe50DeletedWhileMoveFailsDeletesHeldLoadBalancer(t *testing.T) {
	e := startEnv(t, envOptions{doc: metals(""), classless: true, versioned: true})
	webOn(t, e, "metal", "0s")
	ours := e.get(t, "web").DeepCopy()
	e.cloud.set(errors.New("injected: metal2 refuses the load balancer"))
	n := e.cloud.ensures.Load()
	e.moveTo(t, "web", "metal2")
	eventually(t, "the move's ensure failed", func() error {
		if e.cloud.ensures.Load() < n+2 {
			return fmt.Errorf("%d ensures", e.cloud.ensures.Load()-n)
		}
		return nil
	})
	if s := e.get(t, "web"); !strings.Contains(s.Annotations[string(annotation.LoadBalancerBackends)], "metal") || ingress(s) != ingress(ours) {
		t.Fatalf("record %q, %s; want metal's still", s.Annotations[string(annotation.LoadBalancerBackends)], state(s))
	}
	if err := e.client.CoreV1().Services("default").Delete(context.Background(), "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitServiceGone(t, e, "web")
	waitLoadBalancerGone(t, e, "metal's load balancer gone", ours)
}

// racingDeletes is the controller's cloud that, once armed, has another
// controller write the Service (its second address, its annotation
// changed, a finalizer of its own) right after our load balancer's
// delete: our release's write then meets a newer version.
type racingDeletes struct {
	*hookedCloud
	armed atomic.Bool
	race  func() error
	errs  chan error
}

func (r *racingDeletes) EnsureLoadBalancerDeleted(ctx context.Context, clusterName string, svc *corev1.Service) error {
	err := r.hookedCloud.EnsureLoadBalancerDeleted(ctx, clusterName, svc)
	if r.armed.CompareAndSwap(true, false) {
		r.errs <- r.race()
	}
	return err
}

// TestProbe50LeaveRacesTheirStatusWrite (claim 1 with a concurrent
// foreign write): the other controller writes its status, an annotation
// and a finalizer at the moment our release deletes our load balancer.
// Our one write, guarded, conflicts and is made again on the version
// re-read: every thing the other controller wrote stays (both its
// addresses, its annotation's new value, its finalizers), ours goes.
func TestProbe50LeaveRacesTheirStatusWrite(t *testing.T) {
	var rd *racingDeletes
	var e *env
	e = startEnv(t, envOptions{doc: oneAddress, versioned: true, wrap: func(h *hookedCloud) Cloud {
		rd = &racingDeletes{hookedCloud: h, errs: make(chan error, 1)}
		rd.race = func() error {
			return retryUpdate(e, "web", func(s *corev1.Service) {
				s.Status.LoadBalancer.Ingress = append(s.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: "203.0.113.8"})
				s.Annotations[theirAnnotation] = "green"
				s.Finalizers = append(s.Finalizers, "example.com/second")
			})
		}
		return rd
	}})
	e.create(t, service("web", ptrTo(ourClass)))
	eventually(t, "web addressed", addressed(e, t, "web"))
	ours := e.get(t, "web").DeepCopy()
	rd.armed.Store(true)
	toForeignClass(t, e, "web", true, false, sharedFinalizer, theirFinalizer)
	if err := receive(t, rd.errs, "their write during our release"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "ours released from web", func() error {
		s := e.get(t, "web")
		if hasFinalizer(s, Finalizer) || hasRecord(s) || strings.Contains(ingresses(s), "192.0.2.9") {
			return fmt.Errorf("finalizers %v, %s", s.Finalizers, state(s))
		}
		return nil
	})
	waitLoadBalancerGone(t, e, "our load balancer gone", ours)
	s := e.get(t, "web")
	if got := ingresses(s); got != theirAddress+",203.0.113.8" {
		t.Errorf("status %q; want both of theirs", got)
	}
	if s.Annotations[theirAnnotation] != "green" {
		t.Errorf("their annotation %q; want green", s.Annotations[theirAnnotation])
	}
	if want := []string{sharedFinalizer, theirFinalizer, "example.com/second"}; !slices.Equal(s.Finalizers, want) {
		t.Errorf("finalizers %v; want %v", s.Finalizers, want)
	}
}

// TestProbe50RestartPlainToForeignDeletedKeepsShared (claim 2 with a
// restart): "plain" of TestForeignSharedFinalizerWithoutAddressKept met
// by a new process. A classless Service served by us under the shared
// finalizer is given another controller's class (through ClusterIP) and
// deleted while our CCM is down; that controller relies on the shared
// finalizer (no address of its own yet). The new process deletes our
// load balancer and leaves the shared finalizer: the Service stays,
// deleting, for the other controller to clean up. The same Service met by
// the process that served it keeps it (the class changed since its last
// sync); the new one has no last sync to compare with.
func TestProbe50RestartPlainToForeignDeletedKeepsShared(t *testing.T) {
	first := startEnv(t, envOptions{doc: metals(""), classless: true, versioned: true})
	webOn(t, first, "metal", "0s")
	ours := first.get(t, "web").DeepCopy()
	if !slices.Equal(ours.Finalizers, []string{sharedFinalizer}) || !hasRecord(ours) {
		t.Fatalf("web served: finalizers %v, %s", ours.Finalizers, state(ours))
	}
	objs := first.objects(t)
	for _, o := range objs {
		if s := o.(*corev1.Service); s.Name == "web" {
			now := metav1.Now()
			s.DeletionTimestamp = &now
			s.Spec.LoadBalancerClass = ptrTo(foreignClass)
			s.Annotations[theirAnnotation] = "blue"
		}
	}
	e := startEnv(t, envOptions{doc: metals(""), classless: true, versioned: true}, objs...)
	waitLoadBalancerGone(t, e, "our load balancer gone", ours)
	eventually(t, "our address gone", func() error {
		if s := getOrGone(t, e, "web"); s != nil && ingress(s) != "" {
			return fmt.Errorf("%s", state(s))
		}
		return nil
	})
	p := service("probe", nil)
	p.Annotations = map[string]string{string(annotation.LoadBalancerBackend): "metal2"}
	e.create(t, p)
	eventually(t, "probe addressed", addressed(e, t, "probe"))
	s := getOrGone(t, e, "web")
	if s == nil {
		t.Fatalf("web gone: the shared finalizer the other controller relies on was removed (finalizer writes %v)", e.finalizerPatches("web"))
	}
	if !slices.Equal(s.Finalizers, []string{sharedFinalizer}) {
		t.Errorf("finalizers %v; want the shared one", s.Finalizers)
	}
}

// TestProbe50ReloadRemovedClassEditThenForeignClass: as
// TestProbe50ReloadRemovedClassThenForeignClass, with an edit of the
// Service (an annotation of the user's) between the reload and the class
// change: its sync, of a class the config no longer lists, must not make
// the controller forget what it holds, or the class change that follows
// is not taken for a move and our load balancer stays until the
// Service's deletion.
func TestProbe50ReloadRemovedClassEditThenForeignClass(t *testing.T) {
	e := startEnv(t, envOptions{doc: oneAddress, versioned: true, reloadable: true})
	e.create(t, service("web", ptrTo(ourClass)))
	eventually(t, "web addressed", addressed(e, t, "web"))
	ours := e.get(t, "web").DeepCopy()
	e.reload(t, oneAddressNoClass)
	e.edit(t, "web", map[string]*string{"example.com/note": ptrTo("x")})
	time.Sleep(500 * time.Millisecond) // the edit's sync runs; nothing to wait for
	if s := e.get(t, "web"); !hasFinalizer(s, Finalizer) || !hasRecord(s) {
		t.Fatalf("after the reload and the edit: finalizers %v, %s", s.Finalizers, state(s))
	}
	toForeignClass(t, e, "web", true, false, sharedFinalizer, theirFinalizer)
	released(t, e, "web")
	waitLoadBalancerGone(t, e, "our load balancer gone", ours)
}

// TestProbe50DeletedDuringEnsure (claim 3): a Service of our class, kept
// by another controller's finalizer too, is deleted while its first load
// balancer is ensured. The status write that follows conflicts; the
// version re-read is being deleted, so our address is not written on it;
// the next sync deletes the load balancer and removes our Finalizer and
// the router's record; the other controller's finalizer keeps it, with no
// address of ours.
func TestProbe50DeletedDuringEnsure(t *testing.T) {
	e := startEnv(t, envOptions{doc: oneAddress, versioned: true})
	changed := make(chan error, 1)
	e.cloud.mu.Lock()
	e.cloud.during = func(*corev1.Service) {
		changed <- e.client.CoreV1().Services("default").Delete(context.Background(), "web", metav1.DeleteOptions{})
	}
	e.cloud.mu.Unlock()
	web := service("web", ptrTo(ourClass))
	web.Finalizers = []string{theirFinalizer}
	e.create(t, web)
	if err := receive(t, changed, "the deletion during the ensure"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "ours gone from web", func() error {
		s := e.get(t, "web")
		if hasFinalizer(s, Finalizer) || hasRecord(s) || ingress(s) != "" {
			return fmt.Errorf("finalizers %v, %s", s.Finalizers, state(s))
		}
		return nil
	})
	if s := e.get(t, "web"); !slices.Equal(s.Finalizers, []string{theirFinalizer}) || s.DeletionTimestamp == nil {
		t.Errorf("finalizers %v, deleting %v", s.Finalizers, s.DeletionTimestamp != nil)
	}
	e.create(t, service("next", ptrTo(ourClass)))
	eventually(t, "next gets the released address", func() error {
		if got := ingress(e.get(t, "next")); got != "192.0.2.9" {
			return fmt.Errorf("status %q", got)
		}
		return nil
	})
}

// TestProbe50LeaveWriteFailsNoDoubleRelease (faults, the bare-metal
// allocator): our release's write (our Finalizer and address off the
// Service that left us) fails three times after our load balancer's
// delete succeeded; meanwhile a new Service of our class may be given the
// pool's one address. The retries release nothing a second time: once
// the write goes through, exactly one Service of our class holds the
// address, and a third one gets none.
func TestProbe50LeaveWriteFailsNoDoubleRelease(t *testing.T) {
	var failing atomic.Int32
	e := startEnv(t, envOptions{doc: oneAddress, versioned: true, reactors: func(c *fake.Clientset) {
		c.PrependReactor("patch", "services", func(a clienttesting.Action) (bool, runtime.Object, error) {
			p := a.(clienttesting.PatchAction)
			body := string(p.GetPatch())
			if p.GetName() == "web" && strings.Contains(body, `"finalizers"`) && !strings.Contains(body, string(annotation.LoadBalancerBackends)) && failing.Load() > 0 {
				failing.Add(-1)
				return true, nil, errors.New("injected: the API server refused the write")
			}
			return false, nil, nil
		})
	}})
	e.create(t, service("web", ptrTo(ourClass)))
	eventually(t, "web addressed", addressed(e, t, "web"))
	ours := e.get(t, "web").DeepCopy()
	failing.Store(3)
	toForeignClass(t, e, "web", true, false, sharedFinalizer, theirFinalizer)
	e.create(t, service("next", ptrTo(ourClass)))
	eventually(t, "the failed writes spent", func() error {
		if n := failing.Load(); n > 0 {
			return fmt.Errorf("%d left", n)
		}
		return nil
	})
	released(t, e, "web")
	waitLoadBalancerGone(t, e, "our load balancer gone", ours)
	eventually(t, "next gets the released address", func() error {
		if got := ingress(e.get(t, "next")); got != "192.0.2.9" {
			return fmt.Errorf("status %q", got)
		}
		return nil
	})
	e.create(t, service("third", ptrTo(ourClass)))
	eventually(t, "third refused an address", func() error {
		if hasEvent(e.events(t, "third"), reasonSyncFailed) == "" {
			return fmt.Errorf("events %v", e.events(t, "third"))
		}
		return nil
	})
	time.Sleep(300 * time.Millisecond)
	if got := ingress(e.get(t, "third")); got != "" {
		t.Errorf("third got %q too: the address was released twice", got)
	}
	if got := ingress(e.get(t, "next")); got != "192.0.2.9" {
		t.Errorf("next: status %q", got)
	}
}

// TestProbe50RestartMidDrainLeftForForeignClass: TestLeftForForeignClassMidDrain
// met by a new process: a classless Service moved from metal to metal2
// under a long drain is given another controller's class while our CCM is
// down. Both load balancers go, the draining one's drain ended, and the
// router's record and our addresses leave the Service, as when the
// process that served it sees the change.
func TestProbe50RestartMidDrainLeftForForeignClass(t *testing.T) {
	first := startEnv(t, envOptions{doc: metals(""), classless: true, versioned: true})
	webOn(t, first, "metal", "1h")
	first.moveTo(t, "web", "metal2")
	eventually(t, "metal draining", func() error {
		if s := first.get(t, "web"); !strings.HasPrefix(drainingOf(s), "metal=") || len(s.Status.LoadBalancer.Ingress) != 2 {
			return fmt.Errorf("%s", state(s))
		}
		return nil
	})
	time.Sleep(200 * time.Millisecond) // the syncs in flight settle
	probe := first.get(t, "web").DeepCopy()
	objs := first.objects(t)
	for _, o := range objs {
		if s := o.(*corev1.Service); s.Name == "web" {
			s.Spec.LoadBalancerClass = ptrTo(foreignClass)
			s.Finalizers = append(s.Finalizers, theirFinalizer)
			s.Annotations[theirAnnotation] = "blue"
			s.Status.LoadBalancer.Ingress = append(s.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: theirAddress})
		}
	}
	e := startEnv(t, envOptions{doc: metals(""), classless: true, versioned: true}, objs...)
	eventually(t, "ours released from web", func() error {
		s := e.get(t, "web")
		if hasRecord(s) || drainingOf(s) != "" || ingresses(s) != theirAddress {
			return fmt.Errorf("finalizers %v, %s", s.Finalizers, state(s))
		}
		return nil
	})
	for _, b := range []string{"metal", "metal2"} {
		p := probe.DeepCopy()
		p.Annotations[string(annotation.LoadBalancerBackends)] = b
		waitLoadBalancerGone(t, e, b+": our load balancer gone", p)
	}
}
