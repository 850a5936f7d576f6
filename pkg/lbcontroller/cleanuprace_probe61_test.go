package lbcontroller

import (
	"context"
	"errors"
	"fmt"
	rtdebug "runtime/debug"
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

	utilt "github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
)

// inUse61 is the bare-metal backend's addresses_in_use gauge.
func inUse61(t *testing.T, backend string) float64 {
	return utilt.GaugeValue(t, "multicloud_ccm_baremetal_addresses_in_use_total", map[string]string{"backend": backend})
}

// probe61Cloud is the controller's cloud with hooks for the review s61
// probes: once armed, onDelete runs right after a delete (its error, if
// any, sent on errs), onGet right before a GetLoadBalancer; failDeletes
// fails that many deletes first (the hook still runs on the first).
type probe61Cloud struct {
	*hookedCloud
	armedDelete, armedGet atomic.Bool
	onDelete, onGet       func() error
	failDeletes           atomic.Int32
	errs                  chan error
	// getInCleanup: the armed GetLoadBalancer was cleanup's.
	getInCleanup atomic.Bool
}

func newProbe61Cloud(h *hookedCloud) *probe61Cloud {
	return &probe61Cloud{hookedCloud: h, errs: make(chan error, 4)}
}

func (p *probe61Cloud) GetLoadBalancer(ctx context.Context, clusterName string, svc *corev1.Service) (*corev1.LoadBalancerStatus, bool, error) {
	if p.armedGet.CompareAndSwap(true, false) {
		p.getInCleanup.Store(strings.Contains(string(rtdebug.Stack()), "(*Controller).cleanup("))
		p.errs <- p.onGet()
	}
	return p.hookedCloud.GetLoadBalancer(ctx, clusterName, svc)
}

func (p *probe61Cloud) EnsureLoadBalancerDeleted(ctx context.Context, clusterName string, svc *corev1.Service) error {
	var err error
	if p.failDeletes.Load() > 0 {
		p.failDeletes.Add(-1)
		err = errors.New("injected: the cloud failed the delete")
	} else {
		err = p.hookedCloud.EnsureLoadBalancerDeleted(ctx, clusterName, svc)
	}
	if p.armedDelete.CompareAndSwap(true, false) {
		p.errs <- p.onDelete()
	}
	return err
}

// toClusterIP61 turns the Service ClusterIP, its status and class
// cleared as kube-apiserver clears them.
func toClusterIP61(t *testing.T, e *env, name string) {
	t.Helper()
	if err := retryUpdate(e, name, func(s *corev1.Service) {
		s.Spec.Type = corev1.ServiceTypeClusterIP
		s.Spec.LoadBalancerClass = nil
		s.Status.LoadBalancer = corev1.LoadBalancerStatus{}
	}); err != nil {
		t.Fatal(err)
	}
}

// classlessWeb61 creates web, classless, with our backend annotation (nil
// backend: none, the default backend chooses) and waits until it is
// served under the shared finalizer.
func classlessWeb61(t *testing.T, e *env, backend *string) *corev1.Service {
	t.Helper()
	svc := service("web", nil)
	if backend != nil {
		svc.Annotations = map[string]string{string(annotation.LoadBalancerBackend): *backend}
	}
	e.create(t, svc)
	eventually(t, "addressed", addressed(e, t, "web"))
	s := e.get(t, "web")
	if !hasFinalizer(s, sharedFinalizer) || hasFinalizer(s, Finalizer) {
		t.Fatalf("finalizers %v; want the shared one alone", s.Finalizers)
	}
	return s.DeepCopy()
}

// deleteAndWaitGone61 deletes the Service and waits for it to be gone.
func deleteAndWaitGone61(t *testing.T, e *env, name string) {
	t.Helper()
	if err := e.client.CoreV1().Services("default").Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, name+" gone", func() error {
		s, err := e.client.CoreV1().Services("default").Get(context.Background(), name, metav1.GetOptions{})
		if err == nil {
			return fmt.Errorf("still there: finalizers %v, %s", s.Finalizers, state(s))
		}
		return nil
	})
}

// TestProbe61CleanupMeetsOurClass: a classless Service served by the
// default backend under the shared finalizer is turned ClusterIP; while
// our cleanup deletes its load balancer it is made a LoadBalancer of one
// of our classes. Nothing its next sync needs may be dropped: it ends
// addressed, under our Finalizer, with the router's record and a load
// balancer; its deletion then completes and leaks nothing.
func TestProbe61CleanupMeetsOurClass(t *testing.T) {
	var p *probe61Cloud
	var e *env
	e = startEnv(t, envOptions{doc: cloudConfig, classless: true, versioned: true, wrap: func(h *hookedCloud) Cloud {
		p = newProbe61Cloud(h)
		p.onDelete = func() error {
			return retryUpdate(e, "web", func(s *corev1.Service) {
				s.Spec.Type = corev1.ServiceTypeLoadBalancer
				s.Spec.LoadBalancerClass = ptrTo(ourClass)
			})
		}
		return p
	}})
	classlessWeb61(t, e, nil)
	p.armedDelete.Store(true)
	toClusterIP61(t, e, "web")
	if err := receive(t, p.errs, "the class change during our cleanup"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "served again under our class", func() error {
		s := e.get(t, "web")
		if s.Spec.LoadBalancerClass == nil || ingress(s) == "" || !hasFinalizer(s, Finalizer) || hasFinalizer(s, sharedFinalizer) || !hasRecord(s) || !e.cloud.held()[s.UID] {
			return fmt.Errorf("finalizers %v, %s, held %v", s.Finalizers, state(s), e.cloud.held()[s.UID])
		}
		return nil
	})
	last := e.get(t, "web").DeepCopy()
	deleteAndWaitGone61(t, e, "web")
	waitLoadBalancerGone(t, e, "the load balancer gone", last)
	if len(e.cloud.held()) != 0 {
		t.Errorf("load balancers held after the deletion: %v", e.cloud.held())
	}
}

// TestProbe61CleanupMeetsClasslessOurs: as TestProbe61CleanupMeetsOurClass,
// the Service turned back into a classless LoadBalancer routed to us (the
// default backend): it ends addressed under the shared finalizer.
func TestProbe61CleanupMeetsClasslessOurs(t *testing.T) {
	var p *probe61Cloud
	var e *env
	e = startEnv(t, envOptions{doc: cloudConfig, classless: true, versioned: true, wrap: func(h *hookedCloud) Cloud {
		p = newProbe61Cloud(h)
		p.onDelete = func() error {
			return retryUpdate(e, "web", func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeLoadBalancer })
		}
		return p
	}})
	classlessWeb61(t, e, nil)
	p.armedDelete.Store(true)
	toClusterIP61(t, e, "web")
	if err := receive(t, p.errs, "the type change during our cleanup"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "served again classless", func() error {
		s := e.get(t, "web")
		if ingress(s) == "" || !hasFinalizer(s, sharedFinalizer) || hasFinalizer(s, Finalizer) || !hasRecord(s) || !e.cloud.held()[s.UID] {
			return fmt.Errorf("finalizers %v, %s, held %v", s.Finalizers, state(s), e.cloud.held()[s.UID])
		}
		return nil
	})
	last := e.get(t, "web").DeepCopy()
	deleteAndWaitGone61(t, e, "web")
	waitLoadBalancerGone(t, e, "the load balancer gone", last)
}

// TestProbe61CleanupMeetsClasslessElsewhere: a classless Service served by
// metal-cc through our annotation is turned ClusterIP; during our cleanup
// it is made a classless LoadBalancer again with the annotation removed
// (no default backend: our routing no longer chooses it). Nothing of ours
// is left (no Finalizer, no record, no address, no load balancer), and
// the shared finalizer we put goes too, as when the cleanup completed
// before the change and as letGo removes it from a Service our routing
// stops choosing: this controller serves classless Services, and another
// CCM serving this one puts its own at its next sync. Its deletion then
// completes (session 61: the first fix kept it, and with no other
// controller the deletion would have hung).
func TestProbe61CleanupMeetsClasslessElsewhere(t *testing.T) {
	var p *probe61Cloud
	var e *env
	e = startEnv(t, envOptions{doc: classChangeConfig, classless: true, versioned: true, wrap: func(h *hookedCloud) Cloud {
		p = newProbe61Cloud(h)
		p.onDelete = func() error {
			return retryUpdate(e, "web", func(s *corev1.Service) {
				s.Spec.Type = corev1.ServiceTypeLoadBalancer
				delete(s.Annotations, string(annotation.LoadBalancerBackend))
			})
		}
		return p
	}})
	old := classlessWeb61(t, e, ptrTo("metal-cc"))
	p.armedDelete.Store(true)
	toClusterIP61(t, e, "web")
	if err := receive(t, p.errs, "the change during our cleanup"); err != nil {
		t.Fatal(err)
	}
	waitLoadBalancerGone(t, e, "our load balancer gone", old)
	time.Sleep(500 * time.Millisecond) // the syncs the changes queued settle
	s := e.get(t, "web")
	if s.Spec.Type != corev1.ServiceTypeLoadBalancer {
		t.Fatalf("type %s", s.Spec.Type)
	}
	if hasFinalizer(s, sharedFinalizer) || hasFinalizer(s, Finalizer) || hasRecord(s) || strings.Contains(ingresses(s), "192.0.2.") || e.cloud.held()[s.UID] {
		t.Errorf("finalizers %v, %s, held %v; want nothing of ours, the shared finalizer included", s.Finalizers, state(s), e.cloud.held()[s.UID])
	}
	deleteAndWaitGone61(t, e, "web")
}

// TestProbe61OurClassCleanupMeetsForeignShared: a Service of our class
// (our Finalizer, never the shared one) turned ClusterIP; during our
// cleanup it is made a LoadBalancer of another controller's class, and
// that controller adds the shared finalizer and its own (no address yet).
// Ours goes; the shared one and theirs stay; the address is free again.
func TestProbe61OurClassCleanupMeetsForeignShared(t *testing.T) {
	var p *probe61Cloud
	var e *env
	e = startEnv(t, envOptions{doc: oneAddress, versioned: true, wrap: func(h *hookedCloud) Cloud {
		p = newProbe61Cloud(h)
		p.onDelete = func() error {
			return retryUpdate(e, "web", func(s *corev1.Service) {
				s.Spec.Type = corev1.ServiceTypeLoadBalancer
				s.Spec.LoadBalancerClass = ptrTo(foreignClass)
				s.Finalizers = append(s.Finalizers, sharedFinalizer, theirFinalizer)
			})
		}
		return p
	}})
	e.create(t, service("web", ptrTo(ourClass)))
	eventually(t, "web addressed", addressed(e, t, "web"))
	old := e.get(t, "web").DeepCopy()
	p.armedDelete.Store(true)
	toClusterIP61(t, e, "web")
	if err := receive(t, p.errs, "the class change during our cleanup"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "our Finalizer gone", func() error {
		if s := e.get(t, "web"); hasFinalizer(s, Finalizer) || hasRecord(s) {
			return fmt.Errorf("finalizers %v, %s", s.Finalizers, state(s))
		}
		return nil
	})
	waitLoadBalancerGone(t, e, "our load balancer gone", old)
	time.Sleep(500 * time.Millisecond)
	if s := e.get(t, "web"); !slices.Equal(s.Finalizers, []string{sharedFinalizer, theirFinalizer}) {
		t.Errorf("finalizers %v; want the other controller's [%s %s]", s.Finalizers, sharedFinalizer, theirFinalizer)
	}
	e.create(t, service("next", ptrTo(ourClass)))
	eventually(t, "next gets the released address", func() error {
		if got := ingress(e.get(t, "next")); got != "192.0.2.9" {
			return fmt.Errorf("status %q", got)
		}
		return nil
	})
}

// TestProbe61ClasslessCleanupMeetsTheirWrites: a classless Service served
// by metal-cc turned ClusterIP; during our cleanup it is made a
// LoadBalancer of another class whose controller writes its address, an
// annotation and a finalizer of its own at once. Theirs all stay, the
// shared finalizer too (an address of theirs is shown: it guards their
// load balancer); ours goes.
func TestProbe61ClasslessCleanupMeetsTheirWrites(t *testing.T) {
	var p *probe61Cloud
	var e *env
	e = startEnv(t, envOptions{doc: classChangeConfig, classless: true, versioned: true, wrap: func(h *hookedCloud) Cloud {
		p = newProbe61Cloud(h)
		p.onDelete = func() error {
			return retryUpdate(e, "web", func(s *corev1.Service) {
				s.Spec.Type = corev1.ServiceTypeLoadBalancer
				s.Spec.LoadBalancerClass = ptrTo(foreignClass)
				s.Finalizers = append(s.Finalizers, theirFinalizer)
				s.Annotations[theirAnnotation] = "blue"
				s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: theirAddress}}
			})
		}
		return p
	}})
	old := classlessWeb61(t, e, ptrTo("metal-cc"))
	p.armedDelete.Store(true)
	toClusterIP61(t, e, "web")
	if err := receive(t, p.errs, "their writes during our cleanup"); err != nil {
		t.Fatal(err)
	}
	waitLoadBalancerGone(t, e, "our load balancer gone", old)
	time.Sleep(500 * time.Millisecond)
	s := e.get(t, "web")
	if want := []string{sharedFinalizer, theirFinalizer}; !slices.Equal(s.Finalizers, want) {
		t.Errorf("finalizers %v; want %v", s.Finalizers, want)
	}
	if ingresses(s) != theirAddress || s.Annotations[theirAnnotation] != "blue" || hasRecord(s) {
		t.Errorf("%s, their annotation %q; want their address and annotation alone", state(s), s.Annotations[theirAnnotation])
	}
}

// TestProbe61ClasslessCleanupMeetsForeignDeleted: during our cleanup the
// Service is made a LoadBalancer of another class and deleted at once
// (its deletion is then our cleanup's to finish): it goes.
func TestProbe61ClasslessCleanupMeetsForeignDeleted(t *testing.T) {
	var p *probe61Cloud
	var e *env
	e = startEnv(t, envOptions{doc: classChangeConfig, classless: true, versioned: true, wrap: func(h *hookedCloud) Cloud {
		p = newProbe61Cloud(h)
		p.onDelete = func() error {
			if err := retryUpdate(e, "web", func(s *corev1.Service) {
				s.Spec.Type = corev1.ServiceTypeLoadBalancer
				s.Spec.LoadBalancerClass = ptrTo(foreignClass)
			}); err != nil {
				return err
			}
			return e.client.CoreV1().Services("default").Delete(context.Background(), "web", metav1.DeleteOptions{})
		}
		return p
	}})
	old := classlessWeb61(t, e, ptrTo("metal-cc"))
	p.armedDelete.Store(true)
	toClusterIP61(t, e, "web")
	if err := receive(t, p.errs, "the class change and deletion during our cleanup"); err != nil {
		t.Fatal(err)
	}
	waitServiceGone(t, e, "web")
	waitLoadBalancerGone(t, e, "our load balancer gone", old)
}

// servicesOf61 lists the Services of e's API server without a testing.T
// (for a hook running on the controller's goroutine).
func servicesOf61(e *env) ([]runtime.Object, error) {
	list, err := e.client.CoreV1().Services("default").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	objs := make([]runtime.Object, 0, len(list.Items))
	for i := range list.Items {
		objs = append(objs, list.Items[i].DeepCopy())
	}
	return objs, nil
}

// TestProbe61RestartThenCleanupMeetsForeignClass: the replica that
// deleted the ClusterIP Service's load balancer died before removing the
// shared finalizer; the new leader's cleanup (which finds no load balancer
// and no record left) meets the user's change to another class. Our
// shared finalizer must go, as in TestClusterIPCleanupMeetsForeignClass:
// the Service's deletion completes.
func TestProbe61RestartThenCleanupMeetsForeignClass(t *testing.T) {
	var p *probe61Cloud
	var first *env
	snap := make(chan []runtime.Object, 1)
	first = startEnv(t, envOptions{doc: classChangeConfig, classless: true, versioned: true, wrap: func(h *hookedCloud) Cloud {
		p = newProbe61Cloud(h)
		p.onDelete = func() error {
			objs, err := servicesOf61(first) // the replica dies here
			snap <- objs
			return err
		}
		return p
	}})
	classlessWeb61(t, first, ptrTo("metal-cc"))
	p.armedDelete.Store(true)
	toClusterIP61(t, first, "web")
	if err := receive(t, p.errs, "our delete"); err != nil {
		t.Fatal(err)
	}
	objs := receive(t, snap, "the state the replica died in")
	var second *probe61Cloud
	// The new leader's first sync may run before startEnv returns: its
	// hook waits for the env it writes through.
	started := make(chan *env, 1)
	e := startEnv(t, envOptions{doc: classChangeConfig, classless: true, versioned: true, wrap: func(h *hookedCloud) Cloud {
		second = newProbe61Cloud(h)
		second.onGet = func() error {
			var e *env
			select {
			case e = <-started:
				started <- e
			case <-time.After(30 * time.Second):
				return errors.New("the new leader's env never came")
			}
			return retryUpdate(e, "web", func(s *corev1.Service) {
				s.Spec.Type = corev1.ServiceTypeLoadBalancer
				s.Spec.LoadBalancerClass = ptrTo("example.com/another-controller")
			})
		}
		second.armedGet.Store(true)
		return second
	}}, objs...)
	started <- e
	if err := receive(t, second.errs, "the class change during the new leader's cleanup"); err != nil {
		t.Fatal(err)
	}
	if !second.getInCleanup.Load() {
		t.Fatal("the class change did not land during the new leader's cleanup")
	}
	time.Sleep(300 * time.Millisecond)
	deleteAndWaitGone61(t, e, "web")
}

// TestProbe61DeleteFailsThenForeignClass: our cleanup's first delete
// fails, and meanwhile the Service is made a LoadBalancer of another
// class; the retry must release it (load balancer gone, our finalizers
// gone) and its deletion complete.
func TestProbe61DeleteFailsThenForeignClass(t *testing.T) {
	var p *probe61Cloud
	var e *env
	e = startEnv(t, envOptions{doc: classChangeConfig, classless: true, versioned: true, wrap: func(h *hookedCloud) Cloud {
		p = newProbe61Cloud(h)
		p.onDelete = func() error {
			return retryUpdate(e, "web", func(s *corev1.Service) {
				s.Spec.Type = corev1.ServiceTypeLoadBalancer
				s.Spec.LoadBalancerClass = ptrTo("example.com/another-controller")
			})
		}
		return p
	}})
	before := inUse61(t, "metal-cc")
	old := classlessWeb61(t, e, ptrTo("metal-cc"))
	if n := inUse61(t, "metal-cc"); n != before+1 {
		t.Fatalf("addresses_in_use %v after the address (%v before)", n, before)
	}
	p.failDeletes.Store(1)
	p.armedDelete.Store(true)
	toClusterIP61(t, e, "web")
	if err := receive(t, p.errs, "the class change during our failing cleanup"); err != nil {
		t.Fatal(err)
	}
	waitLoadBalancerGone(t, e, "our load balancer gone", old)
	eventually(t, "our finalizers gone", func() error {
		if s := e.get(t, "web"); hasCleanupFinalizer(s) || hasRecord(s) {
			return fmt.Errorf("finalizers %v, %s", s.Finalizers, state(s))
		}
		return nil
	})
	deleteAndWaitGone61(t, e, "web")
	if n := inUse61(t, "metal-cc"); n != before {
		t.Errorf("addresses_in_use %v after the deletion; want %v", n, before)
	}
	if len(e.cloud.held()) != 0 {
		t.Errorf("load balancers held after the deletion: %v", e.cloud.held())
	}
}

// TestProbe61TwoBackendsDrainingCleanupMeetsForeign: a classless Service
// moved from metal to metal2 under a long drain (both load balancers
// alive, both addresses shown) is turned ClusterIP; during our cleanup it
// is made a LoadBalancer of another class. Both load balancers go (the
// drain ended), our finalizers go, and its deletion completes.
func TestProbe61TwoBackendsDrainingCleanupMeetsForeign(t *testing.T) {
	var p *probe61Cloud
	var e *env
	e = startEnv(t, envOptions{doc: metals(""), classless: true, versioned: true, wrap: func(h *hookedCloud) Cloud {
		p = newProbe61Cloud(h)
		p.onDelete = func() error {
			return retryUpdate(e, "web", func(s *corev1.Service) {
				s.Spec.Type = corev1.ServiceTypeLoadBalancer
				s.Spec.LoadBalancerClass = ptrTo(foreignClass)
			})
		}
		return p
	}})
	webOn(t, e, "metal", "1h")
	e.moveTo(t, "web", "metal2")
	eventually(t, "metal draining", func() error {
		if s := e.get(t, "web"); !strings.HasPrefix(drainingOf(s), "metal=") || len(s.Status.LoadBalancer.Ingress) != 2 {
			return fmt.Errorf("%s", state(s))
		}
		return nil
	})
	time.Sleep(200 * time.Millisecond)
	probe := e.get(t, "web").DeepCopy()
	p.armedDelete.Store(true)
	toClusterIP61(t, e, "web")
	if err := receive(t, p.errs, "the class change during our cleanup"); err != nil {
		t.Fatal(err)
	}
	for _, b := range []string{"metal", "metal2"} {
		pr := probe.DeepCopy()
		pr.Annotations[string(annotation.LoadBalancerBackends)] = b
		waitLoadBalancerGone(t, e, b+": our load balancer gone", pr)
	}
	eventually(t, "ours released", func() error {
		if s := e.get(t, "web"); hasCleanupFinalizer(s) || hasRecord(s) || drainingOf(s) != "" {
			return fmt.Errorf("finalizers %v, %s", s.Finalizers, state(s))
		}
		return nil
	})
	deleteAndWaitGone61(t, e, "web")
}

// TestProbe61ClassChangeBeforeOurDelete: the user's change to another
// class lands while our cleanup asks whether the ClusterIP version's
// load balancer exists, before its delete: the delete (of the version
// read) and the release still end with nothing of ours, the shared
// finalizer we put included, and the deletion completes.
func TestProbe61ClassChangeBeforeOurDelete(t *testing.T) {
	var p *probe61Cloud
	var e *env
	e = startEnv(t, envOptions{doc: classChangeConfig, classless: true, versioned: true, wrap: func(h *hookedCloud) Cloud {
		p = newProbe61Cloud(h)
		p.onGet = func() error {
			return retryUpdate(e, "web", func(s *corev1.Service) {
				s.Spec.Type = corev1.ServiceTypeLoadBalancer
				s.Spec.LoadBalancerClass = ptrTo("example.com/another-controller")
			})
		}
		return p
	}})
	old := classlessWeb61(t, e, ptrTo("metal-cc"))
	p.armedGet.Store(true)
	toClusterIP61(t, e, "web")
	if err := receive(t, p.errs, "the class change during our cleanup's GetLoadBalancer"); err != nil {
		t.Fatal(err)
	}
	if !p.getInCleanup.Load() {
		t.Fatal("the class change did not land during our cleanup")
	}
	waitLoadBalancerGone(t, e, "our load balancer gone", old)
	eventually(t, "our finalizers gone", func() error {
		if s := e.get(t, "web"); hasCleanupFinalizer(s) || hasRecord(s) {
			return fmt.Errorf("finalizers %v, %s", s.Finalizers, state(s))
		}
		return nil
	})
	deleteAndWaitGone61(t, e, "web")
}

// TestProbe61OurClassCleanupMeetsUpstreamClassless: upstream's service
// controller serves classless Services (our controller without
// Classless). A Service of our class turned ClusterIP is made, during our
// cleanup, a classless LoadBalancer, and upstream adds the shared
// finalizer: ours goes, the shared one (upstream's) stays.
func TestProbe61OurClassCleanupMeetsUpstreamClassless(t *testing.T) {
	var p *probe61Cloud
	var e *env
	e = startEnv(t, envOptions{doc: oneAddress, versioned: true, wrap: func(h *hookedCloud) Cloud {
		p = newProbe61Cloud(h)
		p.onDelete = func() error {
			return retryUpdate(e, "web", func(s *corev1.Service) {
				s.Spec.Type = corev1.ServiceTypeLoadBalancer
				s.Finalizers = append(s.Finalizers, sharedFinalizer)
			})
		}
		return p
	}})
	e.create(t, service("web", ptrTo(ourClass)))
	eventually(t, "web addressed", addressed(e, t, "web"))
	old := e.get(t, "web").DeepCopy()
	p.armedDelete.Store(true)
	toClusterIP61(t, e, "web")
	if err := receive(t, p.errs, "the change during our cleanup"); err != nil {
		t.Fatal(err)
	}
	waitLoadBalancerGone(t, e, "our load balancer gone", old)
	eventually(t, "our Finalizer gone", func() error {
		if s := e.get(t, "web"); hasFinalizer(s, Finalizer) || hasRecord(s) {
			return fmt.Errorf("finalizers %v, %s", s.Finalizers, state(s))
		}
		return nil
	})
	time.Sleep(500 * time.Millisecond)
	if s := e.get(t, "web"); !slices.Equal(s.Finalizers, []string{sharedFinalizer}) {
		t.Errorf("finalizers %v; want upstream's shared one kept", s.Finalizers)
	}
}

// TestProbe61ReleaseWriteFailsThenForeignClass: our cleanup deleted the
// ClusterIP version's load balancer (the router dropped its record), the
// user made it a LoadBalancer of another class, and our finalizer write
// then failed (the API server answered 500 once). The retry, from the
// copy remembered, must release it all the same: our finalizers go and
// its deletion completes.
func TestProbe61ReleaseWriteFailsThenForeignClass(t *testing.T) {
	var failWrite atomic.Bool
	var p *probe61Cloud
	var e *env
	e = startEnv(t, envOptions{doc: classChangeConfig, classless: true, versioned: true,
		reactors: func(c *fake.Clientset) {
			c.PrependReactor("patch", "services", func(a clienttesting.Action) (bool, runtime.Object, error) {
				pa, ok := a.(clienttesting.PatchAction)
				if !ok || !strings.Contains(string(pa.GetPatch()), `"finalizers"`) || !failWrite.CompareAndSwap(true, false) {
					return false, nil, nil
				}
				return true, nil, apierrors.NewInternalError(errors.New("injected: the finalizer write failed"))
			})
		},
		wrap: func(h *hookedCloud) Cloud {
			p = newProbe61Cloud(h)
			p.onDelete = func() error {
				err := retryUpdate(e, "web", func(s *corev1.Service) {
					s.Spec.Type = corev1.ServiceTypeLoadBalancer
					s.Spec.LoadBalancerClass = ptrTo("example.com/another-controller")
				})
				failWrite.Store(true)
				return err
			}
			return p
		}})
	old := classlessWeb61(t, e, ptrTo("metal-cc"))
	p.armedDelete.Store(true)
	toClusterIP61(t, e, "web")
	if err := receive(t, p.errs, "the class change during our cleanup"); err != nil {
		t.Fatal(err)
	}
	waitLoadBalancerGone(t, e, "our load balancer gone", old)
	eventually(t, "the failed write made", func() error {
		if failWrite.Load() {
			return errors.New("no finalizer write yet")
		}
		return nil
	})
	eventually(t, "our finalizers gone", func() error {
		if s := e.get(t, "web"); hasCleanupFinalizer(s) || hasRecord(s) {
			return fmt.Errorf("finalizers %v, %s", s.Finalizers, state(s))
		}
		return nil
	})
	deleteAndWaitGone61(t, e, "web")
}
