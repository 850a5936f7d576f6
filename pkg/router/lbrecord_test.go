package router

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/api"

	"github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/router/lifecycle"
)

// scriptedLB is an lbCloud whose EnsureLoadBalancer can create the load
// balancer and then fail (a partial create: OpenStack's retry while
// Octavia provisions, AWS while the NLB provisions), and which counts its
// Ensure calls.
type scriptedLB struct {
	*lbCloud
	mu        sync.Mutex
	ensureErr error
	ensures   int
}

func newScriptedLB(name, ip string) *scriptedLB { return &scriptedLB{lbCloud: newLBCloud(name, ip)} }

func (c *scriptedLB) LoadBalancer() (cloudprovider.LoadBalancer, bool) { return c, true }

func (c *scriptedLB) EnsureLoadBalancer(ctx context.Context, cluster string, s *corev1.Service, nodes []*corev1.Node) (*corev1.LoadBalancerStatus, error) {
	c.mu.Lock()
	c.ensures++
	err := c.ensureErr
	c.mu.Unlock()
	status, created := c.lbCloud.EnsureLoadBalancer(ctx, cluster, s, nodes)
	if err != nil {
		return nil, err
	}
	return status, created
}

func (c *scriptedLB) failEnsure(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ensureErr = err
}

func (c *scriptedLB) ensureCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ensures
}

func (c *fakeCluster) update(t *testing.T, s *corev1.Service) {
	t.Helper()
	if _, err := c.client.CoreV1().Services(s.Namespace).Update(context.Background(), s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// markDeleted deletes a Service; its finalizer keeps it, marked for
// deletion, until the service controller removes the finalizer (the
// clientset deletes as the API server does: testutil.NewClientset).
func (c *fakeCluster) markDeleted(t *testing.T, name string) {
	t.Helper()
	if err := c.client.CoreV1().Services("default").Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

// serviceGone reports whether the Service no longer exists.
func (c *fakeCluster) serviceGone(t *testing.T, name string) bool {
	t.Helper()
	_, err := c.client.CoreV1().Services("default").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	return apierrors.IsNotFound(err)
}

func (c *fakeCluster) record(t *testing.T, name string) string {
	t.Helper()
	return c.service(t, name).Annotations[string(annotation.LoadBalancerBackends)]
}

// restart is a new router over the same clouds and API server, as after a
// CCM restart: it knows only what the API server holds.
func restart(t *testing.T, c *fakeCluster, r *Router) *fakeCluster {
	t.Helper()
	c2 := &fakeCluster{client: c.client, router: r, factory: informers.NewSharedInformerFactory(c.client, 0)}
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	r.Initialize(clientBuilder{c.client}, stop)
	r.SetInformers(c2.factory)
	return c2
}

// TestRemovingTheAnnotationClearsTheReleasedAddress drives the upstream
// service controller: when the Service's backend annotation is removed and
// there is no default backend, the router releases the address and the
// Service no longer shows it (upstream never clears a status after
// ImplementedElsewhere).
func TestRemovingTheAnnotationClearsTheReleasedAddress(t *testing.T) {
	r, _ := metalAndOther(t)
	c, _ := ensuredServiceWhere(t, r, "web", "metal", func(ip string) bool { return strings.HasPrefix(ip, "192.0.2.") })
	s := c.service(t, "web")
	delete(s.Annotations, string(annotation.LoadBalancerBackend))
	c.update(t, s)
	eventually(t, "the released address cleared from the Service's status", func() bool { return ingressIP(c.service(t, "web")) == "" })
	// The status is cleared first, then the address released.
	eventually(t, "bare metal released the Service's address", func() bool {
		_, exists, err := r.ByName["metal"].LB.GetLoadBalancer(context.Background(), cluster, c.service(t, "web"))
		return err == nil && !exists
	})
	eventually(t, "the record emptied", func() bool { return c.record(t, "web") == "" })
}

// TestClearStatusKeepsOthersAddresses: an address another controller wrote
// is never cleared.
func TestClearStatusKeepsOthersAddresses(t *testing.T) {
	r, a, _ := twoClouds(t)
	svc := newService("s", withLBBackend("a"))
	c := startCluster(t, r, svc)
	svc = c.service(t, "s")
	ensure(t, r, svc)
	svc.Status.LoadBalancer.Ingress = append(svc.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: "203.0.113.9"})
	if _, err := c.client.CoreV1().Services("default").UpdateStatus(context.Background(), svc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc = c.service(t, "s")
	delete(svc.Annotations, string(annotation.LoadBalancerBackend))
	if _, err := r.EnsureLoadBalancer(context.Background(), cluster, svc, nil); err != cloudprovider.ImplementedElsewhere { //nolint:errorlint // upstream compares with ==.
		t.Fatalf("err = %v, want ImplementedElsewhere", err)
	}
	if got := c.service(t, "s").Status.LoadBalancer.Ingress; len(got) != 1 || got[0].IP != "203.0.113.9" {
		t.Errorf("status = %v, want only the other controller's 203.0.113.9", got)
	}
	if a.holds(svc) {
		t.Error("the load balancer was left in a")
	}
}

// ensuredServiceWhere is ensuredService with a condition on the address.
func ensuredServiceWhere(t *testing.T, r *Router, name, backend string, ok func(string) bool) (*fakeCluster, *corev1.Service) {
	t.Helper()
	svc := newService(name, withLBBackend(backend))
	c := startCluster(t, r, svc)
	runServiceController(t, c)
	eventually(t, "the Service's address", func() bool { return ok(ingressIP(c.service(t, name))) })
	return c, svc
}

// TestMoveAfterPartialCreateLeavesNothing: the first Ensure in backend a
// created the load balancer but returned an error (still provisioning), so
// the Service never showed an address; then it is moved to b. Nothing may
// be left in a, in the same process and after a restart.
func TestMoveAfterPartialCreateLeavesNothing(t *testing.T) {
	t.Run("same process", func(t *testing.T) {
		a, b := newScriptedLB("a", "192.0.2.1"), newLBCloud("b", "198.51.100.1")
		r := mustRouter(t, testConfig(), Backend{Name: "a", Scheme: "baremetal", Cloud: a}, lbBackend("b", "aws", b))
		a.failEnsure(errors.New("load balancer is still provisioning"))
		svc := newService("s", withLBBackend("a"))
		if _, err := r.EnsureLoadBalancer(context.Background(), cluster, svc, nil); err == nil {
			t.Fatal("want the partial create's error")
		}
		if !a.holds(svc) {
			t.Fatal("the partial create left nothing to test with")
		}
		svc.Annotations[string(annotation.LoadBalancerBackend)] = "b"
		ensure(t, r, svc)
		if a.holds(svc) || !b.holds(svc) {
			t.Errorf("a holds %v, b holds %v; want only b", a.holds(svc), b.holds(svc))
		}
	})
	t.Run("restart", func(t *testing.T) {
		a, b := newScriptedLB("a", "192.0.2.1"), newLBCloud("b", "198.51.100.1")
		bs := func() []Backend {
			return []Backend{{Name: "a", Scheme: "baremetal", Cloud: a}, lbBackend("b", "aws", b)}
		}
		a.failEnsure(errors.New("load balancer is still provisioning"))
		// The first process reaches the clouds through gates closed when
		// it "dies", so a call still in flight then cannot act after it.
		ga, gb := gate(a), gate(b)
		first := mustRouter(t, testConfig(), Backend{Name: "a", Scheme: "baremetal", Cloud: ga}, Backend{Name: "b", Scheme: "aws", Cloud: gb})
		c := startCluster(t, first, newService("s", withLBBackend("a")))
		stop := runServiceController(t, c)
		eventually(t, "the partial create in a", func() bool { return a.heldCount() == 1 })
		stop()
		ga.close()
		gb.close()

		c2 := restart(t, c, mustRouter(t, testConfig(), bs()...))
		s := c2.service(t, "s")
		s.Annotations[string(annotation.LoadBalancerBackend)] = "b"
		c2.update(t, s)
		runServiceController(t, c2)
		eventually(t, "the address from b", func() bool { return ingressIP(c2.service(t, "s")) == "198.51.100.1" })
		eventually(t, "nothing left in a", func() bool { return a.heldCount() == 0 })
		eventually(t, "the record naming b only", func() bool { return c2.record(t, "s") == "b" })
	})
}

// TestServiceChurnKeepsNoState creates and deletes 10,000 Services, one in
// ten with a load balancer, and checks that the router's per-Service state
// stays bounded by the live Services and is empty once they are gone.
func TestServiceChurnKeepsNoState(t *testing.T) {
	r, a, _ := twoClouds(t)
	c := startCluster(t, r)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The fake clientset's watch holds 100 events and panics when full:
	// each Service's create and delete is written once the informer has
	// taken the one before, as a real API server's watch would let it.
	seen := informerPace(t, c.factory.Core().V1().Services().Informer())
	c.factory.Start(ctx.Done())
	c.factory.WaitForCacheSync(ctx.Done())
	services := c.client.CoreV1().Services("default")
	const total, live = 10000, 50
	var names []string
	for i := range total {
		seen(i, i-len(names))
		var tweaks []testutil.ServiceTweak
		if i%10 == 0 {
			tweaks = append(tweaks, withLBBackend("a"))
		}
		svc, err := services.Create(ctx, newService(fmt.Sprintf("churn-%05d", i), tweaks...), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.EnsureLoadBalancer(ctx, cluster, svc, nil); err != nil && err != cloudprovider.ImplementedElsewhere { //nolint:errorlint // upstream compares with ==.
			t.Fatal(err)
		}
		names = append(names, svc.Name)
		if len(names) > live {
			deleteService(t, r, c, names[0])
			names = names[1:]
		}
		if n := serviceState(r); n > 2*live {
			t.Fatalf("after %d Services, %d live: the router keeps state for %d", i+1, len(names), n)
		}
	}
	for _, n := range names {
		deleteService(t, r, c, n)
	}
	eventually(t, "no per-Service state left", func() bool { return serviceState(r) == 0 })
	if a.heldCount() != 0 {
		t.Errorf("%d load balancers left", a.heldCount())
	}
}

// informerPace counts the Services informer's adds and deletes. It returns
// a function that waits, up to a minute, until the informer has seen at
// least adds of them and deletes of them.
func informerPace(t *testing.T, informer cache.SharedIndexInformer) func(adds, deletes int) {
	t.Helper()
	var mu sync.Mutex
	var added, deleted int
	changed := make(chan struct{}, 1)
	note := func(n *int) {
		mu.Lock()
		*n++
		mu.Unlock()
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { note(&added) },
		DeleteFunc: func(any) { note(&deleted) },
	}); err != nil {
		t.Fatal(err)
	}
	return func(adds, deletes int) {
		t.Helper()
		timeout := time.After(time.Minute)
		for {
			mu.Lock()
			a, d := added, deleted
			mu.Unlock()
			if a >= adds && d >= deletes {
				return
			}
			select {
			case <-changed:
			case <-timeout:
				t.Fatalf("the informer saw %d adds and %d deletes of Services; want %d and %d", a, d, adds, deletes)
			}
		}
	}
}

// deleteService does what upstream and the API server do when a Service
// is deleted: if GetLoadBalancer finds a load balancer, it is deleted; then
// the object goes.
func deleteService(t *testing.T, r *Router, c *fakeCluster, name string) {
	t.Helper()
	svc := c.service(t, name)
	_, exists, err := r.GetLoadBalancer(context.Background(), cluster, svc)
	if err != nil {
		t.Fatal(err)
	}
	if exists {
		if err := r.EnsureLoadBalancerDeleted(context.Background(), cluster, svc); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.client.CoreV1().Services("default").Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

// serviceState counts the router's per-Service entries.
func serviceState(r *Router) int {
	return r.st.Size()
}

// TestBrokenBackendDoesNotBlockOtherServicesDeletion drives the upstream
// service controller with two backends, one of which fails every call: a
// Service whose load balancer lives in the other is deleted all the same,
// in the same process and after a restart, and never with anything left.
func TestBrokenBackendDoesNotBlockOtherServicesDeletion(t *testing.T) {
	good, broken := newScriptedLB("good", "198.51.100.1"), newLBCloud("broken", "192.0.2.1")
	broken.setFail(errCloudDown)
	bs := func() []Backend {
		return []Backend{{Name: "broken", Scheme: "openstack", Cloud: broken}, {Name: "good", Scheme: "aws", Cloud: good}}
	}
	c := startCluster(t, mustRouter(t, testConfig(), bs()...), newService("one", withLBBackend("good")), newService("two", withLBBackend("good")))
	stop := runServiceController(t, c)
	for _, name := range []string{"one", "two"} {
		eventually(t, name+"'s address", func() bool { return ingressIP(c.service(t, name)) == "198.51.100.1" })
	}
	// The record write re-runs Ensure once; it must converge, not loop.
	eventually(t, "Ensure converged", func() bool {
		n := good.ensureCount()
		time.Sleep(300 * time.Millisecond)
		return good.ensureCount() == n
	})
	if n := good.ensureCount(); n > 10 {
		t.Errorf("%d Ensure calls for two Services", n)
	}

	c.markDeleted(t, "one")
	eventually(t, "one deleted", func() bool { return c.serviceGone(t, "one") })
	stop()

	c2 := restart(t, c, mustRouter(t, testConfig(), bs()...))
	runServiceController(t, c2)
	c2.markDeleted(t, "two")
	eventually(t, "two deleted after a restart", func() bool { return c2.serviceGone(t, "two") })
	if good.heldCount() != 0 {
		t.Errorf("%d load balancers left in good", good.heldCount())
	}
}

// TestRecordedBrokenBackendBlocksDeletion: a backend the record names must
// answer before the delete completes, so nothing leaks.
func TestRecordedBrokenBackendBlocksDeletion(t *testing.T) {
	r, a, b := twoClouds(t)
	svc := newService("s", withLBBackend("a"))
	ensure(t, r, svc)
	a.setFail(errCloudDown)
	if _, _, err := r.GetLoadBalancer(context.Background(), cluster, svc); err == nil {
		t.Error("GetLoadBalancer answered while the backend holding the load balancer is down")
	}
	if err := r.EnsureLoadBalancerDeleted(context.Background(), cluster, svc); err == nil {
		t.Error("EnsureLoadBalancerDeleted succeeded while the backend holding the load balancer is down")
	}
	a.setFail(nil)
	if err := r.EnsureLoadBalancerDeleted(context.Background(), cluster, svc); err != nil {
		t.Fatal(err)
	}
	if a.holds(svc) || b.gets != 0 {
		t.Errorf("a holds %v; b asked %d times though it never held anything", a.holds(svc), b.gets)
	}
}

// TestRecordNamingRemovedBackendIsAnError: a record naming a backend no
// longer configured is an error with a Warning event, never a silent leak.
func TestRecordNamingRemovedBackendIsAnError(t *testing.T) {
	r, _, _ := twoClouds(t)
	svc := newService("s", withLBBackend("a"))
	svc.Annotations[string(annotation.LoadBalancerBackends)] = "a,gone"
	_, _, err := r.GetLoadBalancer(context.Background(), cluster, svc)
	checkErr(t, err, `records a load balancer in backend "gone", which is not configured`)
	if ue, ok := backends.AsUserError(err); !ok || ue.Reason != lifecycle.ReasonUnknownLBBackend {
		t.Errorf("error %v is not a UserError with reason %s", err, lifecycle.ReasonUnknownLBBackend)
	}
	checkErr(t, r.EnsureLoadBalancerDeleted(context.Background(), cluster, svc), `backend "gone"`)
}

// TestDeleteWithRemovedBackendDeletesTheRest: a Service whose record names
// a backend a reload removed is deleted from the backends still configured
// (their load balancers are ours, paid for, and reachable) and dropped from
// their record, while the delete keeps failing, and the finalizer stays,
// for the removed one alone (chaos seed 989441643: the NLB stayed as long
// as the Service was Terminating).
func TestDeleteWithRemovedBackendDeletesTheRest(t *testing.T) {
	r, a, _ := twoClouds(t)
	svc := newService("s", withLBBackend("a"))
	ensure(t, r, svc)
	if !a.holds(svc) {
		t.Fatal("a does not hold the load balancer it was asked to ensure")
	}
	svc.Annotations[string(annotation.LoadBalancerBackends)] = "a,gone"
	now := metav1.Now()
	svc.DeletionTimestamp = &now
	// The cleanup asks first whether the load balancer exists (ours and
	// upstream's controller both do), then deletes it.
	if _, exists, err := r.GetLoadBalancer(context.Background(), cluster, svc); err != nil || !exists {
		t.Fatalf("GetLoadBalancer = exists %v, %v; want the load balancer a holds to exist", exists, err)
	}
	checkErr(t, r.EnsureLoadBalancerDeleted(context.Background(), cluster, svc), `backend "gone"`)
	if a.holds(svc) {
		t.Error("the load balancer in the configured backend a stayed while the record names the removed backend gone")
	}
	// Nothing configured holds anything now: whether gone holds its load
	// balancer is unknown, an error that keeps the finalizer.
	_, _, err := r.GetLoadBalancer(context.Background(), cluster, svc)
	checkErr(t, err, `records a load balancer in backend "gone", which is not configured`)
}

// userErrLB is an lbCloud whose every call fails with a user error.
type userErrLB struct {
	*lbCloud
	err error
}

func (c *userErrLB) LoadBalancer() (cloudprovider.LoadBalancer, bool) { return c, true }
func (c *userErrLB) EnsureLoadBalancer(context.Context, string, *corev1.Service, []*corev1.Node) (*corev1.LoadBalancerStatus, error) {
	return nil, c.err
}
func (c *userErrLB) UpdateLoadBalancer(context.Context, string, *corev1.Service, []*corev1.Node) error {
	return c.err
}
func (c *userErrLB) GetLoadBalancer(context.Context, string, *corev1.Service) (*corev1.LoadBalancerStatus, bool, error) {
	return nil, false, c.err
}
func (c *userErrLB) EnsureLoadBalancerDeleted(context.Context, string, *corev1.Service) error {
	return c.err
}

// TestUserErrorsBecomeServiceEvents: a backend's UserError from any
// load-balancer call is a Warning event with the backend's own reason on
// the Service, through the upstream service controller too.
func TestUserErrorsBecomeServiceEvents(t *testing.T) {
	calls := map[string]func(*Router, *corev1.Service) error{
		"Ensure": func(r *Router, s *corev1.Service) error {
			_, err := r.EnsureLoadBalancer(context.Background(), cluster, s, nil)
			return err
		},
		"Update": func(r *Router, s *corev1.Service) error {
			return r.UpdateLoadBalancer(context.Background(), cluster, s, nil)
		},
		"Get": func(r *Router, s *corev1.Service) error {
			_, _, err := r.GetLoadBalancer(context.Background(), cluster, s)
			return err
		},
		"Delete": func(r *Router, s *corev1.Service) error {
			return r.EnsureLoadBalancerDeleted(context.Background(), cluster, s)
		},
	}
	for op, fn := range calls {
		t.Run(op, func(t *testing.T) {
			reason := "Example" + op + "Problem"
			lb := &userErrLB{lbCloud: newLBCloud("u", "192.0.2.1"), err: backends.NewUserError(reason, errors.New("fix the annotation"))}
			r := mustRouter(t, testConfig(), Backend{Name: "u", Scheme: "baremetal", Cloud: lb})
			c := startCluster(t, r, newService("s", withLBBackend("u")))
			if err := fn(r, c.service(t, "s")); err == nil {
				t.Fatal("want the backend's error")
			}
			eventually(t, "a Warning event "+reason, func() bool {
				return strings.Contains(strings.Join(c.events(t, "s"), ","), "Warning/"+reason)
			})
		})
	}
	t.Run("through the service controller", func(t *testing.T) {
		lb := &userErrLB{lbCloud: newLBCloud("u", "192.0.2.1"), err: backends.NewUserError("LoadBalancerIPNotInPool", errors.New("203.0.113.1 is in no pool"))}
		r := mustRouter(t, testConfig(), Backend{Name: "u", Scheme: "baremetal", Cloud: lb})
		c := startCluster(t, r, newService("s", withLBBackend("u")))
		runServiceController(t, c)
		eventually(t, "a Warning event LoadBalancerIPNotInPool", func() bool {
			return strings.Contains(strings.Join(c.events(t, "s"), ","), "Warning/LoadBalancerIPNotInPool")
		})
	})
}

// gated forwards load-balancer calls to a cloud until closed; then every
// call fails without reaching it. close waits for calls in flight.
type gated struct {
	cloudprovider.Interface
	lb     cloudprovider.LoadBalancer
	mu     sync.RWMutex
	closed bool
}

func gate(c cloudprovider.Interface) *gated {
	lb, _ := c.LoadBalancer()
	return &gated{Interface: c, lb: lb}
}

func (g *gated) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closed = true
}

func (g *gated) open() error {
	if g.closed {
		return errors.New("this process is gone")
	}
	return nil
}

func (g *gated) LoadBalancer() (cloudprovider.LoadBalancer, bool) { return g, true }

func (g *gated) GetLoadBalancer(ctx context.Context, cluster string, s *corev1.Service) (*corev1.LoadBalancerStatus, bool, error) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	if err := g.open(); err != nil {
		return nil, false, err
	}
	return g.lb.GetLoadBalancer(ctx, cluster, s)
}

func (g *gated) GetLoadBalancerName(ctx context.Context, cluster string, s *corev1.Service) string {
	return g.lb.GetLoadBalancerName(ctx, cluster, s)
}

func (g *gated) EnsureLoadBalancer(ctx context.Context, cluster string, s *corev1.Service, nodes []*corev1.Node) (*corev1.LoadBalancerStatus, error) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	if err := g.open(); err != nil {
		return nil, err
	}
	return g.lb.EnsureLoadBalancer(ctx, cluster, s, nodes)
}

func (g *gated) UpdateLoadBalancer(ctx context.Context, cluster string, s *corev1.Service, nodes []*corev1.Node) error {
	g.mu.RLock()
	defer g.mu.RUnlock()
	if err := g.open(); err != nil {
		return err
	}
	return g.lb.UpdateLoadBalancer(ctx, cluster, s, nodes)
}

func (g *gated) EnsureLoadBalancerDeleted(ctx context.Context, cluster string, s *corev1.Service) error {
	g.mu.RLock()
	defer g.mu.RUnlock()
	if err := g.open(); err != nil {
		return err
	}
	return g.lb.EnsureLoadBalancerDeleted(ctx, cluster, s)
}

// TestProvisioningLeavesTheWarningBudget drives the upstream service
// controller over a backend still provisioning for many retries (a
// RetryError, as Octavia's PENDING_CREATE), then refusing a bad
// annotation. client-go's event correlator lets 25 Warnings per source and
// object through, then one per 5 minutes: a Warning per provisioning retry
// spent that budget and the bad annotation's Warning was dropped (cold CI
// run D, TestServiceControllerBadOCCMAnnotation). Provisioning is logged,
// not a Warning, so the bad annotation's Warning arrives.
func TestProvisioningLeavesTheWarningBudget(t *testing.T) {
	a := newScriptedLB("a", "192.0.2.1")
	r := mustRouter(t, testConfig(), Backend{Name: "a", Type: "aws", Scheme: "aws", Cloud: a})
	a.failEnsure(api.NewRetryError("load balancer is being created", 10*time.Millisecond))
	c := startCluster(t, r, newService("web", withLBBackend("a")))
	runServiceController(t, c)
	eventually(t, "30 provisioning retries", func() bool { return a.ensureCount() >= 30 })
	a.failEnsure(backends.NewUserError(annotation.ReasonInvalid, errors.New("annotation example.com/x: must be a number")))
	eventually(t, "the bad annotation's Warning", func() bool { return hasEvent(c.events(t, "web"), annotation.ReasonInvalid) })
}
