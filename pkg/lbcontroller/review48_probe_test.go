package lbcontroller

// Review probes for issue 45 (session 48): the cleanup finalizer of our
// own for classed Services, the classless Services left alone, and the
// full syncs a status another writer wrote or stale backend conditions
// start. Each drives the real controller and router over the fake API
// server that keeps resourceVersions.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	cloudprovider "k8s.io/cloud-provider"

	utilt "github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/config"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/router"
)

// TestProbeRestartOnBothFinalizers: a controller started (a restart, or
// a failover in the middle of the move) on Services carrying both cleanup
// finalizers: the classed one keeps ours only, the classless one (served
// in classless mode through our annotation) the shared one only, each in
// one write, and each keeps its address.
func TestProbeRestartOnBothFinalizers(t *testing.T) {
	rec := map[string]string{string(annotation.LoadBalancerBackends): "metal", string(annotation.LoadBalancerServedBy): "metal"}
	classed := service("classed", ptrTo(ourClass))
	classed.Finalizers = []string{sharedFinalizer, "example.com/keep", Finalizer}
	classed.Annotations = maps.Clone(rec)
	classed.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.0.2.5"}}
	classless := service("classless", nil)
	classless.Finalizers = []string{Finalizer, sharedFinalizer}
	classless.Annotations = maps.Clone(rec)
	classless.Annotations[string(annotation.LoadBalancerBackend)] = "metal"
	classless.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.0.2.6"}}
	e := startEnv(t, envOptions{doc: metals("  classes:\n  - {name: " + ourClass + ", backend: metal}\n"), classless: true, versioned: true}, classed, classless)
	// withWanted puts the wanted finalizer where the first cleanup
	// finalizer was: the order is not the point, the set is.
	want := map[string][]string{"classed": {"example.com/keep", Finalizer}, "classless": {sharedFinalizer}}
	for name, fins := range want {
		eventually(t, name+"'s finalizers", func() error {
			if s := e.get(t, name); !slices.Equal(slices.Sorted(slices.Values(s.Finalizers)), fins) {
				return fmt.Errorf("finalizers %v, want %v", s.Finalizers, fins)
			}
			if !e.ctrl.known("default/" + name) {
				return fmt.Errorf("not synced yet")
			}
			return nil
		})
		if got := e.finalizerPatches(name); len(got) != 1 {
			t.Errorf("%s: finalizer writes %v; want one", name, got)
		}
	}
	if got := ingress(e.get(t, "classed")); got != "192.0.2.5" {
		t.Errorf("classed: address %q, want 192.0.2.5 kept", got)
	}
	if got := ingress(e.get(t, "classless")); got != "192.0.2.6" {
		t.Errorf("classless: address %q, want 192.0.2.6 kept", got)
	}
}

// TestProbeStatusPingPong: another writer that, as our own deposed
// replica running this code does (its statusOverwritten sees ours as
// another's), writes its address back each time the status is not its
// own. statusOverwritten queues an unthrottled full sync (queue.Add, no
// rate limit) on every such write, so both sides write for as long as
// both run: each round is an EnsureLoadBalancer call (cloud API calls)
// and a status write. The probe counts the rounds: a controller that
// stands its ground a bounded number of times (or backs off) stays under
// the bound while the other writes as fast as it can.
func TestProbeStatusPingPong(t *testing.T) {
	e := startEnv(t, envOptions{doc: metals(""), classless: true, versioned: true})
	held := webOn(t, e, "metal", "0s")
	other := "192.0.2.9"
	if held == other {
		t.Fatalf("the pool gave %s", held)
	}
	ensures0 := e.cloud.ensures.Load()
	const rounds = 40
	var theirs int
	deadline := time.Now().Add(10 * time.Second)
	for theirs < rounds && time.Now().Before(deadline) {
		s := e.get(t, "web")
		if ingresses(s) == other {
			time.Sleep(time.Millisecond)
			continue
		}
		s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: other}}
		if _, err := e.client.CoreV1().Services("default").UpdateStatus(context.Background(), s, metav1.UpdateOptions{}); err == nil {
			theirs++
		} else if !apierrors.IsConflict(err) {
			t.Fatal(err)
		}
	}
	ensures := e.cloud.ensures.Load() - ensures0
	t.Logf("the other writer wrote %d times; our controller called EnsureLoadBalancer %d times", theirs, ensures)
	if theirs >= rounds {
		t.Errorf("ping-pong: the controller wrote its status back %d times (%d EnsureLoadBalancer calls) against another writer, unthrottled", theirs, ensures)
	}
}

// TestProbeLetGoDuringDrain: a classless Service (classless mode, no
// default backend) moved from metal to metal2 with a long drain, then its
// annotation removed: our routing no longer chooses it. The controller
// lets go of its finalizer; by then no load balancer of ours may be left
// (the draining one on metal included), or the Service's deletion, which
// needs no controller any more, leaks it.
func TestProbeLetGoDuringDrain(t *testing.T) {
	e := startEnv(t, envOptions{doc: metals(""), classless: true, versioned: true})
	webOn(t, e, "metal", "1h")
	e.moveTo(t, "web", "metal2")
	eventually(t, "web on metal2, metal draining", func() error {
		s := e.get(t, "web")
		if !strings.Contains(drainingOf(s), "metal=") || !strings.Contains(s.Annotations[string(annotation.LoadBalancerServedBy)], "metal2") {
			return fmt.Errorf("%s", state(s))
		}
		return nil
	})
	e.edit(t, "web", map[string]*string{string(annotation.LoadBalancerBackend): nil})
	eventually(t, "web let go", func() error {
		s := e.get(t, "web")
		if hasCleanupFinalizer(s) {
			return fmt.Errorf("finalizers %v, %s", s.Finalizers, state(s))
		}
		return nil
	})
	s := e.get(t, "web")
	if hasRecord(s) || drainingOf(s) != "" || ingress(s) != "" {
		t.Errorf("no cleanup finalizer, but a load balancer of ours is left: %s", state(s))
	}
}

// TestProbeRemovedClassDeletedUnderShared: a classed Service an earlier
// version served under the shared finalizer, whose class the config no
// longer has when this version starts (removed while it was down). It is
// not moved (not served), and at its deletion it is cleaned up by ours:
// the finalizer goes, it is not left Terminating.
func TestProbeRemovedClassDeletedUnderShared(t *testing.T) {
	old := service("old", ptrTo(ourClass))
	old.Finalizers = []string{sharedFinalizer}
	old.Annotations = map[string]string{string(annotation.LoadBalancerBackends): "metal", string(annotation.LoadBalancerServedBy): "metal"}
	old.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.0.2.5"}}
	e := startEnv(t, envOptions{doc: metals(""), classless: true, versioned: true}, old)
	webOn(t, e, "metal2", "0s") // the controller is up and has synced
	if got := e.get(t, "old").Finalizers; !slices.Equal(got, []string{sharedFinalizer}) {
		t.Errorf("finalizers %v of a Service of a class we no longer serve; want the shared one untouched", got)
	}
	if err := e.client.CoreV1().Services("default").Delete(context.Background(), "old", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "old gone", func() error {
		cur, err := e.client.CoreV1().Services("default").Get(context.Background(), "old", metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there: finalizers %v, events %v (%w)", cur.Finalizers, e.events(t, "old"), err)
		}
		return nil
	})
}

// TestProbeClassThroughClusterIPWatched: with our controller watching, a
// Service of our class turned ClusterIP (the class dropped) and then into
// a classless LoadBalancer the default backend serves, each step once the
// controller acted: its load balancer deleted and our finalizer removed at
// ClusterIP, then served again under the shared finalizer only.
func TestProbeClassThroughClusterIPWatched(t *testing.T) {
	e := startEnv(t, envOptions{doc: cloudConfig, classless: true, versioned: true}, service("web", ptrTo(ourClass)))
	eventually(t, "web addressed", addressed(e, t, "web"))
	if got := e.get(t, "web").Finalizers; !slices.Equal(got, []string{Finalizer}) {
		t.Fatalf("classed: finalizers %v, want ours", got)
	}
	uid := e.get(t, "web").UID
	if err := retryUpdate(e, "web", func(s *corev1.Service) {
		s.Spec.Type = corev1.ServiceTypeClusterIP
		s.Spec.LoadBalancerClass = nil
	}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "ClusterIP: no finalizer, no address, no load balancer", func() error {
		s := e.get(t, "web")
		if len(s.Finalizers) > 0 || ingress(s) != "" || e.cloud.held()[uid] {
			return fmt.Errorf("finalizers %v, %s, held %v", s.Finalizers, state(s), e.cloud.held()[uid])
		}
		return nil
	})
	if err := retryUpdate(e, "web", func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeLoadBalancer }); err != nil {
		t.Fatal(err)
	}
	eventually(t, "classless: the shared finalizer only, addressed", func() error {
		s := e.get(t, "web")
		if !slices.Equal(s.Finalizers, []string{sharedFinalizer}) || ingress(s) == "" {
			return fmt.Errorf("finalizers %v, %s", s.Finalizers, state(s))
		}
		return nil
	})
}

// secondReplica runs another controller, over its own router built from
// doc, on e's API server: a second replica of the CCM still running
// beside the leader (a deposed leader until its renew deadline: client-go's
// leader election has no fencing), or a failover's new leader.
func secondReplica(t *testing.T, e *env, doc string, classless bool) *hookedCloud {
	t.Helper()
	cfg, err := config.Parse([]byte(doc), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	r, err := router.NewFromConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	factory := informers.NewSharedInformerFactory(e.client, 0)
	r.Initialize(utilt.NewClientBuilder(e.client), ctx.Done())
	r.SetInformers(factory)
	h := &hookedCloud{routerCloud: r}
	c, err := New(h, Options{
		Client: e.client, Services: factory.Core().V1().Services(), Nodes: factory.Core().V1().Nodes(),
		ClusterName: cluster, Classless: classless, RetryMin: 10 * time.Millisecond, RetryMax: 100 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	var wg sync.WaitGroup
	wg.Go(func() { c.Run(ctx, 2) })
	t.Cleanup(func() { cancel(); wg.Wait(); factory.Shutdown() })
	return h
}

// TestProbeTwoReplicasMigrate: two replicas of this version, same config,
// both running (a failover in the middle of the move), start on a classed
// Service an earlier version left under the shared finalizer. Both move
// it; one write wins, the other conflicts and finds it moved. They end
// with our finalizer only, its address kept, and their writes stop.
func TestProbeTwoReplicasMigrate(t *testing.T) {
	old := service("web", ptrTo(ourClass))
	old.Finalizers = []string{sharedFinalizer}
	old.Annotations = map[string]string{string(annotation.LoadBalancerBackends): "metal", string(annotation.LoadBalancerServedBy): "metal"}
	old.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.0.2.5"}}
	e := startEnv(t, envOptions{doc: cloudConfig, versioned: true}, old)
	secondReplica(t, e, cloudConfig, false)
	eventually(t, "moved to our finalizer", func() error {
		if s := e.get(t, "web"); !slices.Equal(s.Finalizers, []string{Finalizer}) {
			return fmt.Errorf("finalizers %v", s.Finalizers)
		}
		return nil
	})
	last, since := -1, time.Now()
	waitFor(t, 15*time.Second, "the replicas' writes stop", func() error {
		n := e.serviceWrites()
		if n != last {
			last, since = n, time.Now()
		}
		if n > 50 {
			return nil // the check below reports it
		}
		if time.Since(since) < 500*time.Millisecond {
			return fmt.Errorf("%d writes, still moving", n)
		}
		return nil
	})
	if last > 10 {
		t.Errorf("%d writes to the Service by two replicas of the same config; want a handful", last)
	}
	s := e.get(t, "web")
	if ingresses(s) != "192.0.2.5" || !slices.Equal(s.Finalizers, []string{Finalizer}) {
		t.Errorf("finalizers %v, %s; want ours and 192.0.2.5", s.Finalizers, state(s))
	}
}

// TestProbeTwoReplicasDifferentPools: a rolling config change that
// renumbers metal's pool: the old replica (deposed, still running until its
// renew deadline) and the new leader each hold an address of their own
// pool for the same new Service, and each sees the other's status write as
// "another writer's" (statusOverwritten) and writes its own back at once.
// The probe counts the writes while both run: the fight must stop (or slow
// down) by itself.
func TestProbeTwoReplicasDifferentPools(t *testing.T) {
	e := startEnv(t, envOptions{doc: metals(""), classless: true, versioned: true})
	renumbered := strings.Replace(metals(""), `addresses: ["192.0.2.0/28"]`, `addresses: ["192.0.2.64/28"]`, 1)
	if renumbered == metals("") {
		t.Fatal("the pool was not renumbered")
	}
	secondReplica(t, e, renumbered, true)
	s := service("web", nil)
	s.Annotations = map[string]string{string(annotation.LoadBalancerBackend): "metal"}
	e.create(t, s)
	eventually(t, "web addressed", addressed(e, t, "web"))
	last, since := -1, time.Now()
	waitFor(t, 15*time.Second, "the replicas' writes stop", func() error {
		n := e.serviceWrites()
		if n != last {
			last, since = n, time.Now()
		}
		if n > 200 {
			return nil // the check below reports it
		}
		if time.Since(since) < 500*time.Millisecond {
			return fmt.Errorf("%d writes, still moving", n)
		}
		return nil
	})
	if last > 200 {
		t.Errorf("ping-pong between two replicas: more than 200 writes to one Service (status now %q)", ingresses(e.get(t, "web")))
	}
}

// TestProbeForeignWritesDuringDrain: a Service moved from metal to metal2
// under a long drain, then written 20 times by other writers in ways that
// do not concern its load balancer (a label, another controller's
// condition). Neither trigger (stale backend conditions, a status another
// writer wrote) may start a full sync for them: the writes cost no
// EnsureLoadBalancer call, and the other controller's condition is kept.
func TestProbeForeignWritesDuringDrain(t *testing.T) {
	e := startEnv(t, envOptions{doc: metals(""), classless: true, versioned: true})
	webOn(t, e, "metal", "1h")
	e.moveTo(t, "web", "metal2")
	eventually(t, "web on metal2, metal draining", func() error {
		s := e.get(t, "web")
		if !strings.Contains(drainingOf(s), "metal=") || !strings.Contains(s.Annotations[string(annotation.LoadBalancerServedBy)], "metal2") || !e.ctrl.known("default/web") {
			return fmt.Errorf("%s", state(s))
		}
		return nil
	})
	last, since := int32(-1), time.Now()
	waitFor(t, 10*time.Second, "the move's syncs done", func() error {
		if n := e.cloud.ensures.Load(); n != last {
			last, since = n, time.Now()
		}
		if time.Since(since) < 300*time.Millisecond {
			return fmt.Errorf("%d ensures, still moving", last)
		}
		return nil
	})
	t.Logf("during the drain: backend conditions stale by backendConditionsStale: %v (%s)", backendConditionsStale(e.get(t, "web")), conditionsOf(e.get(t, "web")))
	before := e.cloud.ensures.Load()
	for i := range 20 {
		if err := retryUpdate(e, "web", func(s *corev1.Service) {
			if s.Labels == nil {
				s.Labels = map[string]string{}
			}
			s.Labels["touched"] = fmt.Sprint(i)
		}); err != nil {
			t.Fatal(err)
		}
		for {
			s := e.get(t, "web")
			meta.SetStatusCondition(&s.Status.Conditions, metav1.Condition{Type: "example.com/Probe", Status: metav1.ConditionTrue, Reason: "Probe", Message: fmt.Sprint(i)})
			_, err := e.client.CoreV1().Services("default").UpdateStatus(context.Background(), s, metav1.UpdateOptions{})
			if err == nil {
				break
			}
			if !apierrors.IsConflict(err) {
				t.Fatal(err)
			}
		}
	}
	// Let any sync the writes queued run: the controller's queue is
	// drained once a marker edit that does concern it is ensured.
	e.edit(t, "web", map[string]*string{"marker": ptrTo("1")})
	eventually(t, "the marker edit ensured", func() error {
		if s := e.cloud.lastEnsured(); s == nil || s.Annotations["marker"] != "1" {
			return errors.New("not yet")
		}
		return nil
	})
	if n := e.cloud.ensures.Load() - before; n > 1 {
		t.Errorf("%d EnsureLoadBalancer calls for 40 writes that do not concern the load balancer and one marker edit; want 1", n)
	}
	if c := meta.FindStatusCondition(e.get(t, "web").Status.Conditions, "example.com/Probe"); c == nil || c.Message != "19" {
		t.Errorf("the other controller's condition: %+v; want kept", c)
	}
}

// TestProbeMigrationDuringClassDrain: a reload moves our class from metal
// to metal2, and the classed Service (a drain of 1h) drains metal. Then a
// replica of an earlier version (a downgrade, or a deposed leader of the
// old version during the upgrade) adds the shared finalizer beside ours,
// and this version moves it back, the drain going on. The Service is
// deleted mid-drain: both load balancers, the draining one included, are
// gone before the Service is, and no cleanup finalizer is left.
func TestProbeMigrationDuringClassDrain(t *testing.T) {
	on := func(b string) string { return metals("  classes:\n  - {name: " + ourClass + ", backend: " + b + "}\n") }
	e := startEnv(t, envOptions{doc: on("metal"), versioned: true, reloadable: true})
	s := service("web", ptrTo(ourClass))
	s.Annotations = map[string]string{string(annotation.LoadBalancerDrain): "1h"}
	e.create(t, s)
	eventually(t, "web addressed", addressed(e, t, "web"))
	e.reload(t, on("metal2"))
	eventually(t, "web on metal2, metal draining", func() error {
		s := e.get(t, "web")
		if !strings.Contains(drainingOf(s), "metal=") || !strings.Contains(s.Annotations[string(annotation.LoadBalancerServedBy)], "metal2") {
			return fmt.Errorf("%s", state(s))
		}
		return nil
	})
	if err := retryUpdate(e, "web", func(s *corev1.Service) { s.Finalizers = append(s.Finalizers, sharedFinalizer) }); err != nil {
		t.Fatal(err)
	}
	eventually(t, "moved back to ours, the drain going on", func() error {
		s := e.get(t, "web")
		if !slices.Equal(s.Finalizers, []string{Finalizer}) || !strings.Contains(drainingOf(s), "metal=") {
			return fmt.Errorf("finalizers %v, %s", s.Finalizers, state(s))
		}
		return nil
	})
	last := e.get(t, "web")
	// Ask metal, the draining backend, for the Service's load balancer
	// (a classless copy annotated to metal): held before the deletion.
	probe := last.DeepCopy()
	probe.Spec.LoadBalancerClass = nil
	probe.Annotations[string(annotation.LoadBalancerBackend)] = "metal"
	probe.Annotations[string(annotation.LoadBalancerBackends)] = "metal"
	if _, exists, err := e.cloud.GetLoadBalancer(context.Background(), cluster, probe); err != nil || !exists {
		t.Fatalf("before the deletion: exists %v, err %v; the probe's question does not see the load balancers", exists, err)
	}
	if err := e.client.CoreV1().Services("default").Delete(context.Background(), "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitServiceGone(t, e, "web")
	// The bare-metal allocator follows the Services through the informer
	// (TestProbeRemovedClassRestartThenClusterIP): asked once the API
	// server has no Service, it may not have seen the deletion yet.
	waitLoadBalancerGone(t, e, "after the deletion, no load balancer left (the draining one included)", probe)
}

// TestProbeUpstreamBesideOursClassedUnderShared: upstream's service
// controller runs beside ours over the same router (--controllers=*,service,
// Classless off). A Service of our class still under the shared finalizer
// (an earlier version's, restored from a backup: one update that also
// marks it deleted) is cleaned up by whichever controller gets there:
// its load balancer must be gone when the Service is, not left because
// upstream's controller, which does not serve classed Services, removed
// the shared finalizer first.
func TestProbeUpstreamBesideOursClassedUnderShared(t *testing.T) {
	doc := metals("  classes:\n  - {name: " + ourClass + ", backend: metal}\n")
	e := startEnv(t, envOptions{doc: doc, versioned: true})
	utilt.RunServiceController(t, e.cloud.routerCloud.(cloudprovider.Interface), e.client, e.factory, cluster, 2)
	e.create(t, service("web", ptrTo(ourClass)))
	eventually(t, "web addressed", addressed(e, t, "web"))
	last := e.get(t, "web")
	probe := last.DeepCopy()
	if _, exists, err := e.cloud.GetLoadBalancer(context.Background(), cluster, probe); err != nil || !exists {
		t.Fatalf("before the deletion: exists %v, err %v", exists, err)
	}
	if err := retryUpdate(e, "web", func(s *corev1.Service) {
		s.Finalizers = []string{sharedFinalizer}
		now := metav1.Now()
		s.DeletionTimestamp = &now
	}); err != nil {
		t.Fatal(err)
	}
	waitServiceGone(t, e, "web")
	waitLoadBalancerGone(t, e, "its load balancer gone", probe)
}

// TestProbeUpstreamBesideOursRestartClassedUnderShared: as
// TestProbeUpstreamBesideOursClassedUnderShared, but the CCM (both
// controllers) starts on the Service already being deleted under the
// shared finalizer (deleted while the CCM was down, before this version
// moved it). Upstream's controller does not serve classed Services: if it
// removes the shared finalizer before our controller synced the Service,
// our controller never learns of its load balancer. ctl, the same Service
// not being deleted, shows the router knows such a load balancer at the
// start.
func TestProbeUpstreamBesideOursRestartClassedUnderShared(t *testing.T) {
	doc := metals("  classes:\n  - {name: " + ourClass + ", backend: metal}\n")
	mk := func(name, ip string) *corev1.Service {
		s := service(name, ptrTo(ourClass))
		s.Finalizers = []string{sharedFinalizer}
		s.Annotations = map[string]string{string(annotation.LoadBalancerBackends): "metal", string(annotation.LoadBalancerServedBy): "metal"}
		s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: ip}}
		return s
	}
	web, ctl := mk("web", "192.0.2.5"), mk("ctl", "192.0.2.6")
	now := metav1.Now()
	web.DeletionTimestamp = &now
	e := startEnv(t, envOptions{doc: doc, versioned: true}, web, ctl)
	utilt.RunServiceController(t, e.cloud.routerCloud.(cloudprovider.Interface), e.client, e.factory, cluster, 2)
	waitServiceGone(t, e, "web")
	eventually(t, "ctl moved to our finalizer", func() error {
		if s := e.get(t, "ctl"); !slices.Equal(s.Finalizers, []string{Finalizer}) {
			return fmt.Errorf("finalizers %v", s.Finalizers)
		}
		return nil
	})
	if _, exists, err := e.cloud.GetLoadBalancer(context.Background(), cluster, e.get(t, "ctl")); err != nil || !exists {
		t.Fatalf("ctl: exists %v, err %v: the router does not know a load balancer restored at the start", exists, err)
	}
	waitLoadBalancerGone(t, e, "web's load balancer gone", web)
}

// TestProbeRemovedClassThenClusterIP: a live reload removes our class
// while a Service of it is served (our finalizer, its address), then the
// Service is turned ClusterIP (the API server drops its class). Its load
// balancer, which no class routes any more, is deleted and our finalizer
// removed: neither left behind.
func TestProbeRemovedClassThenClusterIP(t *testing.T) {
	with := metals("  classes:\n  - {name: " + ourClass + ", backend: metal}\n")
	e := startEnv(t, envOptions{doc: with, versioned: true, reloadable: true})
	e.create(t, service("web", ptrTo(ourClass)))
	eventually(t, "web addressed", addressed(e, t, "web"))
	probe := e.get(t, "web").DeepCopy()
	probe.Spec.LoadBalancerClass = nil
	probe.Annotations[string(annotation.LoadBalancerBackend)] = "metal"
	if _, exists, err := e.cloud.GetLoadBalancer(context.Background(), cluster, probe); err != nil || !exists {
		t.Fatalf("before: exists %v, err %v", exists, err)
	}
	e.reload(t, metals(""))
	if got := e.get(t, "web").Finalizers; !slices.Equal(got, []string{Finalizer}) {
		t.Errorf("finalizers %v after the class left; want ours kept (its load balancer is still there)", got)
	}
	if err := retryUpdate(e, "web", func(s *corev1.Service) {
		s.Spec.Type = corev1.ServiceTypeClusterIP
		s.Spec.LoadBalancerClass = nil
	}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "ClusterIP: no finalizer, no address, no load balancer", func() error {
		s := e.get(t, "web")
		_, exists, err := e.cloud.GetLoadBalancer(context.Background(), cluster, probe)
		if len(s.Finalizers) > 0 || ingress(s) != "" || exists || err != nil {
			return fmt.Errorf("finalizers %v, %s, load balancer exists %v (%w)", s.Finalizers, state(s), exists, err)
		}
		return nil
	})
}

// typeCheckingCloud counts EnsureLoadBalancer calls for a Service that
// is not of type LoadBalancer or is being deleted.
type typeCheckingCloud struct {
	*hookedCloud
	wrong atomic.Int32
}

func (c *typeCheckingCloud) EnsureLoadBalancer(ctx context.Context, clusterName string, svc *corev1.Service, nodes []*corev1.Node) (*corev1.LoadBalancerStatus, error) {
	if svc.Spec.Type != corev1.ServiceTypeLoadBalancer || svc.DeletionTimestamp != nil {
		c.wrong.Add(1)
	}
	return c.hookedCloud.EnsureLoadBalancer(ctx, clusterName, svc, nodes)
}

// TestProbePrepareConflictTypeChange: a new Service of our class; the
// write that adds our finalizer and the router's record conflicts with
// the Service being turned ClusterIP (the API server drops its class).
// prepare re-reads it and goes on: it puts our finalizer on the ClusterIP
// Service and asks the cloud to make a load balancer for it (an NLB made
// to be deleted at the next sync), instead of seeing that there is
// nothing to serve.
func TestProbePrepareConflictTypeChange(t *testing.T) {
	var raced atomic.Bool
	reactors := func(c *fake.Clientset) {
		tracker := c.Tracker()
		c.PrependReactor("patch", "services", func(a clienttesting.Action) (bool, runtime.Object, error) {
			p := a.(clienttesting.PatchAction)
			if p.GetName() != "web" || !strings.Contains(string(p.GetPatch()), `"finalizers"`) || raced.Swap(true) {
				return false, nil, nil
			}
			obj, err := tracker.Get(a.GetResource(), a.GetNamespace(), p.GetName())
			if err != nil {
				return false, nil, nil
			}
			cur := obj.(*corev1.Service).DeepCopy()
			cur.Spec.Type = corev1.ServiceTypeClusterIP
			cur.Spec.LoadBalancerClass = nil
			cur.ResourceVersion = "900000"
			if err := tracker.Update(a.GetResource(), cur, a.GetNamespace()); err != nil {
				return true, nil, err
			}
			return true, nil, apierrors.NewConflict(a.GetResource().GroupResource(), p.GetName(), errOutdated)
		})
	}
	tc := &typeCheckingCloud{}
	e := startEnv(t, envOptions{doc: cloudConfig, versioned: true, reactors: reactors, wrap: func(h *hookedCloud) Cloud { tc.hookedCloud = h; return tc }},
		service("web", ptrTo(ourClass)))
	eventually(t, "settled: ClusterIP, no finalizer, no address", func() error {
		s := e.get(t, "web")
		if !raced.Load() || len(s.Finalizers) > 0 || ingress(s) != "" || hasRecord(s) {
			return fmt.Errorf("raced %v, finalizers %v, %s", raced.Load(), s.Finalizers, state(s))
		}
		return nil
	})
	if n := tc.wrong.Load(); n > 0 {
		t.Errorf("%d EnsureLoadBalancer calls for a ClusterIP Service; want none", n)
	}
	if got := e.finalizerPatches("web"); len(got) > 1 {
		t.Errorf("finalizer writes %v; want only the one that conflicted", got)
	}
}

// waitServiceGone waits until the API server no longer has the Service.
func waitServiceGone(t *testing.T, e *env, name string) {
	t.Helper()
	eventually(t, name+" gone", func() error {
		if _, err := e.client.CoreV1().Services("default").Get(context.Background(), name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there (%w)", err)
		}
		return nil
	})
}

// waitLoadBalancerGone waits until the router finds no load balancer for
// svc in any backend.
func waitLoadBalancerGone(t *testing.T, e *env, what string, svc *corev1.Service) {
	t.Helper()
	eventually(t, what, func() error {
		if _, exists, err := e.cloud.GetLoadBalancer(context.Background(), cluster, svc); err != nil || exists {
			return fmt.Errorf("exists %v, err %w", exists, err)
		}
		return nil
	})
}
