package lbcontroller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
)

// Review of 7e2a26e and 116cccf (a Service that goes leaves a per-UID
// gone mark in the router: no create, update or state for its UID for
// 10 minutes) where it meets our own controller: a Service deleted by hand
// and re-created under its name (a new UID) is served, and nothing is
// left for the old one, whichever way the controller learns of it.

const (
	review72bOld = types.UID("uid-web-1")
	review72bNew = types.UID("uid-web-2")
)

// review72bHolds reports whether the membertest backend holds a load
// balancer for uid.
func review72bHolds(c *memberCloud, uid types.UID) bool {
	_, ok, _ := c.GetLoadBalancer(context.Background(), "", &corev1.Service{ObjectMeta: metav1.ObjectMeta{UID: uid}})
	return ok
}

// review72bWarnings counts the Warning events (with their repeats) on the
// Service object of uid, and lists them.
func review72bWarnings(t *testing.T, e *env, uid types.UID) (int32, []string) {
	t.Helper()
	list, err := e.client.CoreV1().Events("default").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var (
		n   int32
		out []string
	)
	for _, ev := range list.Items {
		if ev.InvolvedObject.Kind != "Service" || ev.InvolvedObject.UID != uid || ev.Type != corev1.EventTypeWarning {
			continue
		}
		n += max(ev.Count, 1)
		out = append(out, fmt.Sprintf("%s(x%d): %s", ev.Reason, ev.Count, ev.Message))
	}
	return n, out
}

// review72bSettled waits until the controller's queue is empty, web's key
// is not being retried, and for a second no ensure, update or Warning on
// either UID happens: no error loop.
func review72bSettled(t *testing.T, e *env) {
	t.Helper()
	waitFor(t, 30*time.Second, "the controller settled (no retries, no calls, no Warnings for a second)", func() error {
		snap := func() string {
			o, _ := review72bWarnings(t, e, review72bOld)
			n, _ := review72bWarnings(t, e, review72bNew)
			return fmt.Sprintf("queue %d, requeues %d, ensures %d, updates %d, warnings old %d new %d",
				e.ctrl.queue.Len(), e.ctrl.queue.NumRequeues("default/web"), e.cloud.ensures.Load(), e.cloud.updates.Load(), o, n)
		}
		before := snap()
		if e.ctrl.queue.Len() != 0 || e.ctrl.queue.NumRequeues("default/web") != 0 {
			return errors.New(before)
		}
		time.Sleep(time.Second) // a state that must last: no condition to wait for
		if after := snap(); after != before {
			return fmt.Errorf("still moving: %s -> %s", before, after)
		}
		return nil
	})
}

// review72bNewServed checks the re-created web: served from want's load
// balancer, with a finalizer and the record naming want, and no Warning.
func review72bNewServed(e *env, t *testing.T, want string, c *memberCloud) func() error {
	return func() error {
		s := e.get(t, "web")
		if s.UID != review72bNew {
			return fmt.Errorf("web is %s", s.UID)
		}
		if ingresses(s) != c.ip || len(s.Finalizers) == 0 || s.Annotations[string(annotation.LoadBalancerBackends)] != want || drainingOf(s) != "" {
			return fmt.Errorf("new web: finalizers %v, %s", s.Finalizers, state(s))
		}
		if !review72bHolds(c, review72bNew) {
			return fmt.Errorf("%s holds no load balancer for the new web", want)
		}
		return synced(e, t, "web", 1)()
	}
}

// review72bNoneLeft checks that no backend holds a load balancer for the
// old web and that the new one got no Warning.
func review72bNoneLeft(t *testing.T, e *env, cs map[string]*memberCloud) {
	t.Helper()
	for name, c := range cs {
		if review72bHolds(c, review72bOld) {
			t.Errorf("%s still holds the old web's load balancer (members %v): leaked", name, c.membersOf(string(review72bOld)))
		}
	}
	if n, ws := review72bWarnings(t, e, review72bNew); n != 0 {
		t.Errorf("the new web got %d Warnings: %v", n, ws)
	}
	if _, ws := review72bWarnings(t, e, review72bOld); len(ws) > 0 {
		t.Logf("Warnings on the old web: %v", ws)
	}
}

// TestReview72bGoneDuringDrainReplaced (scenario 1): web, served by ma,
// moves to mb with an hour's drain; while ma drains it is deleted by hand
// (finalizers removed) and created again under its name (a new UID),
// routed to ma, the backend whose load balancer for the old web drains.
// Either at once (the controller sees both in one key: replaced) or once
// the controller has dropped the old one (gone). The new web is served by
// ma; neither ma nor mb keeps the old web's load balancer; the new web gets
// no Warning; the controller settles (no retry loop on a gone Service).
func TestReview72bGoneDuringDrainReplaced(t *testing.T) {
	for _, tc := range []struct {
		name string
		wait bool
	}{{"at once", false}, {"after the gone sync", true}} {
		t.Run(tc.name, func(t *testing.T) {
			e, ma, mb := startKept(t, "203.0.113.171", "203.0.113.172", 10*time.Millisecond, 50*time.Millisecond)
			first := service("web", nil)
			first.UID = review72bOld
			first.Annotations = map[string]string{string(annotation.LoadBalancerBackend): "ma", string(annotation.LoadBalancerDrain): "1h"}
			e.create(t, first)
			eventually(t, "web addressed", addressed(e, t, "web"))
			e.moveTo(t, "web", "mb")
			eventually(t, "ma draining, mb serving", func() error {
				s := e.get(t, "web")
				if !strings.HasPrefix(drainingOf(s), "ma=") || s.Annotations[string(annotation.LoadBalancerServedBy)] != "mb" {
					return fmt.Errorf("%s", state(s))
				}
				return synced(e, t, "web", len(s.Status.LoadBalancer.Ingress))()
			})
			if !review72bHolds(ma, review72bOld) || !review72bHolds(mb, review72bOld) {
				t.Fatal("the old web's load balancers are not both there during the drain")
			}
			again := service("web", nil)
			again.UID = review72bNew
			again.Annotations = map[string]string{string(annotation.LoadBalancerBackend): "ma"}
			services := e.client.CoreV1().Services("default")
			if tc.wait {
				if err := replaceByHand(services, "web", nil); err != nil {
					t.Fatal(err)
				}
				eventually(t, "the controller dropped the old web", func() error {
					if e.ctrl.known("default/web") {
						return errors.New("still known")
					}
					return nil
				})
				e.create(t, again)
			} else if err := replaceByHand(services, "web", again); err != nil {
				t.Fatal(err)
			}
			waitFor(t, 30*time.Second, "the new web served by ma", review72bNewServed(e, t, "ma", ma))
			review72bSettled(t, e)
			review72bNoneLeft(t, e, map[string]*memberCloud{"ma": ma, "mb": mb})
			if err := review72bNewServed(e, t, "ma", ma)(); err != nil {
				t.Errorf("after settling: %v", err)
			}
		})
	}
}

// review72bStaleUpdate is the controller's cloud with a hook run (once)
// at the first UpdateLoadBalancer for the old web, before the router's.
type review72bStaleUpdate struct {
	routerTargets
	once sync.Once
	hook func(svc *corev1.Service)
	// err is the error the router's UpdateLoadBalancer answered for the
	// old web after the hook.
	mu     sync.Mutex
	err    error
	called bool
	// after, when set, reads the old web's members in ma right after
	// that update (members).
	after   func() []string
	members []string
}

func (c *review72bStaleUpdate) UpdateLoadBalancer(ctx context.Context, clusterName string, svc *corev1.Service, nodes []*corev1.Node) error {
	if svc.UID != review72bOld {
		return c.routerTargets.UpdateLoadBalancer(ctx, clusterName, svc, nodes)
	}
	hooked := false
	c.once.Do(func() { c.hook(svc); hooked = true })
	err := c.routerTargets.UpdateLoadBalancer(ctx, clusterName, svc, nodes)
	if hooked {
		c.mu.Lock()
		c.err, c.called = err, true
		if c.after != nil {
			c.members = c.after()
		}
		c.mu.Unlock()
	}
	return err
}

// TestReview72bStaleUpdateAfterReplace (scenario 2): web, served by ma,
// is re-targeted after worker-1 joins; the controller's sync holds the old
// copy (uid-web-1) when, before its UpdateLoadBalancer reaches the router,
// web is deleted by hand and created again (uid-web-2), and the router has
// marked the old one gone. The stale update creates nothing and fails
// nothing: no Warning on the new web, which is then served by ma with both
// nodes; the old web's load balancer is deleted.
func TestReview72bStaleUpdateAfterReplace(t *testing.T) {
	registerMemberType()
	var ep atomic.Pointer[env]
	hooked := &review72bStaleUpdate{}
	hooked.hook = func(*corev1.Service) {
		e := ep.Load()
		again := service("web", nil)
		again.UID = review72bNew
		again.Annotations = map[string]string{string(annotation.LoadBalancerBackend): "ma"}
		if err := replaceByHand(e.client.CoreV1().Services("default"), "web", again); err != nil {
			t.Error(err)
			return
		}
		lister := e.factory.Core().V1().Services().Lister()
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			if s, err := lister.Services("default").Get("web"); err == nil && s.UID == review72bNew {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		// The router's delete handler runs on the same informer, after
		// its store was updated: give it time to mark the old UID gone.
		time.Sleep(300 * time.Millisecond)
	}
	e := startEnv(t, envOptions{
		doc: fmt.Sprintf(keptConfig, "203.0.113.173", "203.0.113.174"), classless: true, versioned: true,
		nodeQuiet: 10 * time.Millisecond, nodeMax: 50 * time.Millisecond,
		wrap: func(h *hookedCloud) Cloud { hooked.routerTargets = routerTargets{h}; return hooked },
	})
	ep.Store(e)
	v, _ := memberClouds.Load("203.0.113.173")
	ma := v.(*memberCloud) //nolint:forcetypeassert // only memberClouds are stored.
	hooked.mu.Lock()
	hooked.after = func() []string { return ma.membersOf(string(review72bOld)) }
	hooked.mu.Unlock()
	v, _ = memberClouds.Load("203.0.113.174")
	mb := v.(*memberCloud) //nolint:forcetypeassert // only memberClouds are stored.

	first := service("web", nil)
	first.UID = review72bOld
	first.Annotations = map[string]string{string(annotation.LoadBalancerBackend): "ma"}
	e.create(t, first)
	waitFor(t, 30*time.Second, "web served by ma", synced(e, t, "web", 1))
	addNode(t, e)
	waitFor(t, 30*time.Second, "the stale update ran", func() error {
		hooked.mu.Lock()
		defer hooked.mu.Unlock()
		if !hooked.called {
			return errors.New("not yet")
		}
		return nil
	})
	hooked.mu.Lock()
	err, members := hooked.err, hooked.members
	hooked.mu.Unlock()
	if err != nil {
		t.Errorf("UpdateLoadBalancer with the stale copy of the gone web: %v", err)
	}
	// The router's gone mark makes the update a no-op (worker-0 alone);
	// had the router not yet seen the delete, ma's load balancer for the
	// old web got worker-1 too, and the probe tested less than it means to.
	t.Logf("the old web's members in ma right after the stale update: %v", members)
	waitFor(t, 30*time.Second, "the new web served by ma", review72bNewServed(e, t, "ma", ma))
	review72bSettled(t, e)
	review72bNoneLeft(t, e, map[string]*memberCloud{"ma": ma, "mb": mb})
	if got := ma.membersOf(string(review72bNew)); len(got) != 2 {
		t.Errorf("the new web's members %v, want worker-0 and worker-1", got)
	}
	if n := e.countEvents(t, "web", "UpdateLoadBalancerFailed"); n != 0 {
		t.Errorf("%d UpdateLoadBalancerFailed events: %v", n, e.events(t, "web"))
	}
}

// TestReview72bReloadAfterGone (scenario 3): web, classless with no
// annotation, served by the default backend ma, is deleted by hand and a
// reload making mb the default follows at once (it re-routes every
// Service of the default, the old web's UID among them if anything still
// knew it). web is then created again (uid-web-2): served by mb; neither
// backend keeps the old web's load balancer; no Warning on the new web; the
// controller settles.
func TestReview72bReloadAfterGone(t *testing.T) {
	registerMemberType()
	base := fmt.Sprintf(keptConfig, "203.0.113.175", "203.0.113.176")
	doc := func(def string) string {
		return strings.Replace(base, "loadBalancer:\n", "loadBalancer:\n  defaultBackend: "+def+"\n", 1)
	}
	e := startEnv(t, envOptions{
		doc: doc("ma"), classless: true, versioned: true, reloadable: true,
		nodeQuiet: 10 * time.Millisecond, nodeMax: 50 * time.Millisecond,
		wrap: func(h *hookedCloud) Cloud { return routerTargets{h} },
	})
	load := func(ip string) *memberCloud {
		v, ok := memberClouds.Load(ip)
		if !ok {
			t.Fatalf("no membertest backend on %s", ip)
		}
		return v.(*memberCloud) //nolint:forcetypeassert // only memberClouds are stored.
	}
	ma, mb := load("203.0.113.175"), load("203.0.113.176")
	first := service("web", nil)
	first.UID = review72bOld
	e.create(t, first)
	waitFor(t, 30*time.Second, "web served by ma", synced(e, t, "web", 1))
	if s := e.get(t, "web"); s.Annotations[string(annotation.LoadBalancerBackends)] != "ma" {
		t.Fatalf("web: %s", state(s))
	}
	if err := replaceByHand(e.client.CoreV1().Services("default"), "web", nil); err != nil {
		t.Fatal(err)
	}
	e.reload(t, doc("mb"))
	if load("203.0.113.175") != ma || load("203.0.113.176") != mb {
		t.Fatal("the reload rebuilt the membertest backends: the probe cannot tell what they hold")
	}
	eventually(t, "the controller dropped the old web", func() error {
		if e.ctrl.known("default/web") {
			return errors.New("still known")
		}
		return nil
	})
	again := service("web", nil)
	again.UID = review72bNew
	e.create(t, again)
	waitFor(t, 30*time.Second, "the new web served by mb", review72bNewServed(e, t, "mb", mb))
	review72bSettled(t, e)
	review72bNoneLeft(t, e, map[string]*memberCloud{"ma": ma, "mb": mb})
}
