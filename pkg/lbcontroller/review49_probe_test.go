package lbcontroller

// Review probes for issue 45 (session 49): whose cleanup finalizer our
// controller may remove. Each drives the real controller and router over
// the fake API server that keeps resourceVersions, as the session 48
// probes (review48_probe_test.go) do.

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
)

// theirFinalizer is a finalizer of another controller's.
const theirFinalizer = "example.com/theirs"

// metalRecord is the router's record of a load balancer on metal.
func metalRecord() map[string]string {
	return map[string]string{string(annotation.LoadBalancerBackends): "metal", string(annotation.LoadBalancerServedBy): "metal"}
}

// getOrGone returns the Service, or nil once the API server no longer
// has it.
func getOrGone(t *testing.T, e *env, name string) *corev1.Service {
	t.Helper()
	s, err := e.client.CoreV1().Services("default").Get(context.Background(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// keptEvery reports the first finalizer patch of the controller's on the
// Service that removed one of keep.
func keptEvery(e *env, name string, keep ...string) error {
	for _, fins := range e.finalizerPatches(name) {
		for _, f := range keep {
			if !slices.Contains(fins, f) {
				return fmt.Errorf("a finalizer write %v removed %s", fins, f)
			}
		}
	}
	return nil
}

// TestProbeForeignClassKeepsItsFinalizer: Services of a class that is not
// ours (another controller's) carrying the shared finalizer, which that
// controller put, and one of its own. left was ours once (our finalizer
// and the router's record are left on it: turned ClusterIP, which drops
// the class, then a LoadBalancer of the other class while our CCM was
// down); recorded carries only the record. Both are deleted: our
// controller may delete what the record names and remove its own
// finalizer, but never the other controller's two, which guard that
// controller's load balancer (its address is in the status).
func TestProbeForeignClassKeepsItsFinalizer(t *testing.T) {
	mk := func(name string, fins ...string) *corev1.Service {
		s := service(name, ptrTo(foreignClass))
		s.Finalizers = fins
		s.Annotations = metalRecord()
		s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "203.0.113.7"}}
		return s
	}
	left := mk("left", sharedFinalizer, theirFinalizer, Finalizer)
	recorded := mk("recorded", sharedFinalizer, theirFinalizer)
	e := startEnv(t, envOptions{doc: metals("  classes:\n  - {name: " + ourClass + ", backend: metal}\n"), versioned: true}, left, recorded)
	// A Service of ours created after: the informer's list queued the
	// other two before it.
	e.create(t, service("ours", ptrTo(ourClass)))
	eventually(t, "ours addressed", addressed(e, t, "ours"))
	for _, name := range []string{"left", "recorded"} {
		if err := e.client.CoreV1().Services("default").Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "our finalizer gone from left", func() error {
		s := getOrGone(t, e, "left")
		if s == nil {
			return nil // the check below reports it
		}
		if hasFinalizer(s, Finalizer) {
			return fmt.Errorf("finalizers %v", s.Finalizers)
		}
		return nil
	})
	// Let any sync the deletions queued run: the queue is drained once an
	// edit of ours is ensured.
	e.edit(t, "ours", map[string]*string{"marker": ptrTo("1")})
	eventually(t, "the marker edit ensured", func() error {
		if s := e.cloud.lastEnsured(); s == nil || s.Annotations["marker"] != "1" {
			return fmt.Errorf("not yet")
		}
		return nil
	})
	for _, name := range []string{"left", "recorded"} {
		s := getOrGone(t, e, name)
		if s == nil {
			t.Errorf("%s: gone; its finalizers %v were the other controller's to remove", name, []string{sharedFinalizer, theirFinalizer})
			continue
		}
		if want := []string{sharedFinalizer, theirFinalizer}; !slices.Equal(s.Finalizers, want) {
			t.Errorf("%s: finalizers %v; want %v, the other controller's", name, s.Finalizers, want)
		}
		if err := keptEvery(e, name, sharedFinalizer, theirFinalizer); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestProbeDeletedBeforeLetGoKeepsTheirs: a Service of our class turned
// classless through ClusterIP while our CCM was down, served meanwhile by
// upstream's CCM beside ours (its finalizer, the shared one, and its NLB's
// name in the status, after the address of ours it still shows), and
// deleted before our controller, back, let go of it
// (TestLetGoKeepsAnotherControllersFinalizer is the same Service not
// deleted). Our controller deletes our load balancer, removes our
// finalizer and our address; the shared one guards upstream's NLB and
// stays for upstream's controller, with the NLB's name in the status.
func TestProbeDeletedBeforeLetGoKeepsTheirs(t *testing.T) {
	s := service("web", nil)
	s.Finalizers = []string{Finalizer, sharedFinalizer}
	s.Annotations = metalRecord()
	s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.0.2.5"}, {Hostname: "theirs-0123.elb.eu-west-1.amazonaws.com"}}
	now := metav1.Now()
	s.DeletionTimestamp = &now
	probe := s.DeepCopy()
	e := startEnv(t, envOptions{doc: metals(""), classless: true, versioned: true}, s)
	waitLoadBalancerGone(t, e, "our load balancer gone", probe)
	eventually(t, "our finalizer gone, the shared one kept", func() error {
		s := getOrGone(t, e, "web")
		if s == nil {
			return nil // the check below reports it
		}
		if hasFinalizer(s, Finalizer) {
			return fmt.Errorf("finalizers %v", s.Finalizers)
		}
		return nil
	})
	if s := getOrGone(t, e, "web"); s == nil || !slices.Equal(s.Finalizers, []string{sharedFinalizer}) {
		t.Errorf("web: %v; want it kept by upstream's finalizer alone, for upstream's NLB", describeFinalizers(s))
	} else if got := ingresses(s); got != "theirs-0123.elb.eu-west-1.amazonaws.com" {
		t.Errorf("web: status %q; want upstream's NLB alone (our address released)", got)
	}
	if err := keptEvery(e, "web", sharedFinalizer); err != nil {
		t.Error(err)
	}
}

func describeFinalizers(s *corev1.Service) string {
	if s == nil {
		return "gone"
	}
	return fmt.Sprintf("finalizers %v", s.Finalizers)
}

// TestProbeHandOverConflictLeaks: upstream's service controller serves
// classless Services (Classless off); a classless Service carries our
// finalizer, the router's record (a load balancer of ours) and the shared
// finalizer: handOver removes ours, as the shared one guards the load
// balancer. Its write conflicts with an edit that removed the shared
// finalizer: now nothing but ours guards the load balancer, and the write
// on the version re-read must keep it.
func TestProbeHandOverConflictLeaks(t *testing.T) {
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
			cur.Finalizers = []string{Finalizer}
			cur.ResourceVersion = "900000"
			if err := tracker.Update(a.GetResource(), cur, a.GetNamespace()); err != nil {
				return true, nil, err
			}
			return true, nil, apierrors.NewConflict(a.GetResource().GroupResource(), p.GetName(), errOutdated)
		})
	}
	s := service("web", nil)
	s.Finalizers = []string{Finalizer, sharedFinalizer}
	s.Annotations = maps.Clone(metalRecord())
	e := startEnv(t, envOptions{doc: cloudConfig, versioned: true, reactors: reactors}, s)
	eventually(t, "handOver's write raced", func() error {
		if !raced.Load() {
			return fmt.Errorf("not yet")
		}
		return nil
	})
	last, since := -1, time.Now()
	waitFor(t, 10*time.Second, "the controller's writes stop", func() error {
		if n := e.serviceWrites(); n != last {
			last, since = n, time.Now()
		}
		if time.Since(since) < 500*time.Millisecond {
			return fmt.Errorf("%d writes, still moving", last)
		}
		return nil
	})
	if got := e.get(t, "web").Finalizers; !slices.Equal(got, []string{Finalizer}) {
		t.Errorf("finalizers %v with the router's record and no shared finalizer; want ours kept (writes %v)", got, e.finalizerPatches("web"))
	}
}

// TestProbeRemovedClassRestartThenClusterIP: as
// TestProbeRemovedClassThenClusterIP, with a restart between the reload
// that removes our class and the type change: the new process starts on
// a Service of a class it does not serve, carrying our finalizer and the
// router's record. Turned ClusterIP (the class dropped), its load
// balancer is deleted and our finalizer removed.
func TestProbeRemovedClassRestartThenClusterIP(t *testing.T) {
	with := metals("  classes:\n  - {name: " + ourClass + ", backend: metal}\n")
	first := startEnv(t, envOptions{doc: with, versioned: true, reloadable: true})
	first.create(t, service("web", ptrTo(ourClass)))
	eventually(t, "web addressed", addressed(first, t, "web"))
	first.reload(t, metals(""))
	e := startEnv(t, envOptions{doc: metals(""), versioned: true, reloadable: true}, first.objects(t)...)
	probe := e.get(t, "web").DeepCopy()
	probe.Spec.LoadBalancerClass = nil
	probe.Annotations[string(annotation.LoadBalancerBackend)] = "metal"
	if !slices.Equal(probe.Finalizers, []string{Finalizer}) || ingress(probe) == "" || !hasRecord(probe) {
		t.Fatalf("at the restart: finalizers %v, %s", probe.Finalizers, state(probe))
	}
	if _, exists, err := e.cloud.GetLoadBalancer(context.Background(), cluster, probe); err != nil || !exists {
		t.Fatalf("after the restart: exists %v, err %v", exists, err)
	}
	if err := retryUpdate(e, "web", func(s *corev1.Service) {
		s.Spec.Type = corev1.ServiceTypeClusterIP
		s.Spec.LoadBalancerClass = nil
	}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "ClusterIP: no finalizer, no address", func() error {
		if s := e.get(t, "web"); len(s.Finalizers) > 0 || ingress(s) != "" {
			return fmt.Errorf("finalizers %v, %s", s.Finalizers, state(s))
		}
		return nil
	})
	// The router is waited for, not asked once: its bare-metal allocator
	// follows the Services' statuses through the informer, and the echo
	// of the router's own record write (the status still showing the
	// address EnsureLoadBalancerDeleted released) makes it hold the
	// address again until the event of our status-clearing write arrives.
	// Asked once as soon as the API server shows the Service clean, the
	// router found the load balancer in 4 runs of 30.
	waitLoadBalancerGone(t, e, "no load balancer left", probe)
}

// TestDeletedMidDrainWhileDownIsCleanedUp: a classless Service moved from
// metal to metal2 under a long drain (both addresses in its status, both
// backends in the router's record) is deleted while our CCM is down. The
// restarted controller's first sync is its cleanup, with nothing of the
// Service in memory: metal's draining address is ours too (the router's
// record names metal), not another controller's, so both cleanup
// finalizers go and the Service is gone. Reading the router's answer for
// the target backend alone (metal2) took metal's address for another
// controller's and kept the shared finalizer: Terminating for ever.
func TestDeletedMidDrainWhileDownIsCleanedUp(t *testing.T) {
	first := startEnv(t, envOptions{doc: metals(""), classless: true, versioned: true})
	webOn(t, first, "metal", "1h")
	first.moveTo(t, "web", "metal2")
	eventually(t, "metal draining", func() error {
		if s := first.get(t, "web"); !strings.HasPrefix(drainingOf(s), "metal=") || len(s.Status.LoadBalancer.Ingress) != 2 {
			return fmt.Errorf("%s", state(s))
		}
		return nil
	})
	objs := first.objects(t)
	for _, o := range objs {
		if s := o.(*corev1.Service); s.Name == "web" {
			now := metav1.Now()
			s.DeletionTimestamp = &now
		}
	}
	e := startEnv(t, envOptions{doc: metals(""), classless: true, versioned: true}, objs...)
	waitServiceGone(t, e, "web")
}
