package lbcontroller

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/api"
	servicehelper "k8s.io/cloud-provider/service/helpers"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"

	utilt "github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
	_ "github.com/multicloud-ccm/multicloud-ccm/pkg/backends/baremetal" // the bare-metal backend type.
	"github.com/multicloud-ccm/multicloud-ccm/pkg/config"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/router"
)

const (
	ourClass     = "multicloud-ccm.io/metal"
	secondClass  = "multicloud-ccm.io/metal-second"
	foreignClass = "metallb.io/other"
	cluster      = "test"
)

const cloudConfig = `apiVersion: multicloud-ccm.io/v1alpha1
kind: CloudConfig
clusterID: test
loadBalancer:
  defaultBackend: metal
  classes:
  - {name: ` + ourClass + `, backend: metal}
  - {name: ` + secondClass + `, backend: metal, annotations: {multicloud-ccm.io/address-pool: second}}
backends:
- name: metal
  type: baremetal
  baremetal:
    inventory: [{name: worker-0, addresses: [{type: InternalIP, address: 10.0.0.10}]}]
    addressPools:
    - {name: lan, addresses: ["192.0.2.0/28"]}
    - {name: second, addresses: ["198.51.100.0/28"], autoAssign: false}
`

// routerCloud is what the tests wrap: a router.Router or a
// router.Reloadable.
type routerCloud interface {
	Cloud
	RepairPasser
}

// hookedCloud is the router with hooks on the calls the controller makes.
type hookedCloud struct {
	routerCloud
	ensures, updates atomic.Int32
	mu               sync.Mutex
	failEnsure       error
	failOnce         bool
	report           []string
	// reportAs, when set, attributes report to that backend, as the router
	// does for its backends' calls (backends.WithChangeBackend).
	reportAs string
	// during, when set, is called (once) inside the next EnsureLoadBalancer,
	// before the router's.
	during func(svc *corev1.Service)
	// lbs are the UIDs of the Services whose load balancers exist, by the
	// calls that succeeded.
	lbs map[types.UID]bool
	// ensured is the last Service EnsureLoadBalancer was called with.
	ensured *corev1.Service
	// failUpdate, when set, is the next UpdateLoadBalancer's error (once).
	failUpdate error
}

// held returns the UIDs holding a load balancer.
func (h *hookedCloud) held() map[types.UID]bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return maps.Clone(h.lbs)
}

func (h *hookedCloud) lastEnsured() *corev1.Service {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.ensured
}

func (h *hookedCloud) EnsureLoadBalancerDeleted(ctx context.Context, clusterName string, svc *corev1.Service) error {
	err := h.routerCloud.EnsureLoadBalancerDeleted(ctx, clusterName, svc)
	if err == nil {
		h.mu.Lock()
		delete(h.lbs, svc.UID)
		h.mu.Unlock()
	}
	return err
}

func (h *hookedCloud) EnsureLoadBalancer(ctx context.Context, clusterName string, svc *corev1.Service, nodes []*corev1.Node) (*corev1.LoadBalancerStatus, error) {
	h.ensures.Add(1)
	h.mu.Lock()
	fail, report, during := h.failEnsure, h.report, h.during
	h.report, h.during, h.ensured = nil, nil, svc.DeepCopy()
	if h.failOnce {
		h.failEnsure, h.failOnce = nil, false
	}
	h.mu.Unlock()
	if during != nil {
		during(svc)
	}
	h.mu.Lock()
	rctx := ctx
	if h.reportAs != "" {
		rctx = backends.WithChangeBackend(ctx, h.reportAs)
	}
	h.mu.Unlock()
	for _, r := range report {
		backends.ReportChange(rctx, r)
	}
	if fail != nil {
		return nil, fail
	}
	st, err := h.routerCloud.EnsureLoadBalancer(ctx, clusterName, svc, nodes)
	if err == nil {
		h.mu.Lock()
		if h.lbs == nil {
			h.lbs = map[types.UID]bool{}
		}
		h.lbs[svc.UID] = true
		h.mu.Unlock()
	}
	return st, err
}

func (h *hookedCloud) UpdateLoadBalancer(ctx context.Context, clusterName string, svc *corev1.Service, nodes []*corev1.Node) error {
	h.updates.Add(1)
	h.mu.Lock()
	fail := h.failUpdate
	h.failUpdate = nil
	h.mu.Unlock()
	if fail != nil {
		return fail
	}
	return h.routerCloud.UpdateLoadBalancer(ctx, clusterName, svc, nodes)
}

// SetServiceSync hands the router's drain timer the controller's queue,
// as the router itself would be handed it.
func (h *hookedCloud) SetServiceSync(sync func(*corev1.Service) bool) {
	if s, ok := h.routerCloud.(ServiceSyncer); ok {
		s.SetServiceSync(sync)
	}
}

// SetServed tells the router which Services the controller serves, as
// the binary's wiring does (TestProbe60TestEnvLeavesServedUnset: without
// it the router re-targeted the controller's own Services too after a
// reload, beside its node sync).
func (h *hookedCloud) SetServed(served func(*corev1.Service) bool) {
	if s, ok := h.routerCloud.(ServedReporter); ok {
		s.SetServed(served)
	}
}

func (h *hookedCloud) set(fail error, report ...string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.failEnsure, h.report = fail, report
}

type env struct {
	client *fake.Clientset
	cloud  *hookedCloud
	ctrl   *Controller
	ctx    context.Context
	// rl is the router when envOptions.reloadable, and cfg the config
	// it started with.
	rl  *router.Reloadable
	cfg *config.CloudConfig
	// factory is the informer factory the controller and the router use.
	factory informers.SharedInformerFactory
}

func start(t *testing.T, classless bool, objs ...runtime.Object) *env {
	t.Helper()
	return startWith(t, cloudConfig, classless, objs...)
}

// startWith runs the controller over a router built from doc, on a fake
// API server holding objs and one node.
func startWith(t testing.TB, doc string, classless bool, objs ...runtime.Object) *env {
	t.Helper()
	return startEnv(t, envOptions{doc: doc, classless: classless}, objs...)
}

// envOptions choose the environment startEnv builds.
type envOptions struct {
	doc       string
	classless bool
	// reloadable: a router.Reloadable (env.rl) instead of a router.Router.
	reloadable bool
	// versioned: the API server's resourceVersions (newVersionedClientset).
	versioned bool
	// log, when set, receives the controller's log at the default
	// verbosity (its context's logger).
	log *syncBuffer
	// nodeQuiet and nodeMax: Options.NodeBatchQuiet and NodeBatchMax.
	nodeQuiet, nodeMax time.Duration
	// wrap, when set, wraps the cloud the controller is given.
	wrap func(*hookedCloud) Cloud
	// resync: Options.ResyncPeriod.
	resync time.Duration
	// reactors, when set, is called with the fake API server before
	// anything uses it (PrependReactor is not safe once it is in use).
	reactors func(*fake.Clientset)
	// build, when set, builds the router from the config instead.
	build func(*config.CloudConfig) (routerCloud, error)
}

// startEnv runs the controller over a router built from o.doc, on a fake
// API server holding objs and one node.
func startEnv(t testing.TB, o envOptions, objs ...runtime.Object) *env {
	t.Helper()
	cfg, err := config.Parse([]byte(o.doc), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var (
		r  routerCloud
		rl *router.Reloadable
	)
	switch {
	case o.build != nil:
		r, err = o.build(cfg)
	case o.reloadable:
		rl, err = router.NewReloadable(context.Background(), cfg)
		r = rl
	default:
		r, err = router.NewFromConfig(context.Background(), cfg)
	}
	if err != nil {
		t.Fatal(err)
	}
	objs = append(objs, utilt.NewNode("worker-0", utilt.WithProviderID("baremetal://worker-0"), utilt.WithInternalIP("10.0.0.10")))
	client := utilt.NewClientset(objs...)
	if o.versioned {
		client = newVersionedClientset(objs...)
	}
	if o.reactors != nil {
		o.reactors(client)
	}
	ctx, cancel := context.WithCancel(context.Background())
	factory := informers.NewSharedInformerFactory(client, 0)
	r.(cloudprovider.Interface).Initialize(utilt.NewClientBuilder(client), ctx.Done())
	r.(cloudprovider.InformerUser).SetInformers(factory)
	h := &hookedCloud{routerCloud: r}
	var cloud Cloud = h
	if o.wrap != nil {
		cloud = o.wrap(h)
	}
	classless := o.classless
	c, err := New(cloud, Options{
		Client: client, Services: factory.Core().V1().Services(), Nodes: factory.Core().V1().Nodes(),
		ClusterName: cluster, Classless: classless, RetryMin: 10 * time.Millisecond, RetryMax: 100 * time.Millisecond,
		NodeBatchQuiet: o.nodeQuiet, NodeBatchMax: o.nodeMax, ResyncPeriod: o.resync,
	})
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	runCtx := ctx
	if o.log != nil {
		runCtx = klog.NewContext(ctx, textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(o.log), textlogger.Verbosity(0))))
	}
	var wg sync.WaitGroup
	wg.Go(func() { c.Run(runCtx, 2) })
	t.Cleanup(func() { cancel(); wg.Wait(); factory.Shutdown() })
	return &env{client: client, cloud: h, ctrl: c, ctx: ctx, rl: rl, cfg: cfg, factory: factory}
}

func service(name string, class *string) *corev1.Service {
	s := utilt.NewService(name)
	s.Spec.LoadBalancerClass = class
	return s
}

func ptrTo(s string) *string { return &s }

func (e *env) get(t *testing.T, name string) *corev1.Service {
	t.Helper()
	s, err := e.client.CoreV1().Services("default").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (e *env) create(t *testing.T, s *corev1.Service) {
	t.Helper()
	if _, err := e.client.CoreV1().Services(s.Namespace).Create(context.Background(), s, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func ingress(s *corev1.Service) string {
	if len(s.Status.LoadBalancer.Ingress) == 0 {
		return ""
	}
	return s.Status.LoadBalancer.Ingress[0].IP
}

// events lists the Service's events as "reason: message".
func (e *env) events(t *testing.T, name string) []string {
	t.Helper()
	list, err := e.client.CoreV1().Events("default").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, ev := range list.Items {
		if ev.InvolvedObject.Name == name && ev.InvolvedObject.Kind == "Service" {
			out = append(out, ev.Reason+": "+ev.Message)
		}
	}
	return out
}

func hasEvent(evs []string, reason string) string {
	for _, ev := range evs {
		if strings.HasPrefix(ev, reason+": ") {
			return ev
		}
	}
	return ""
}

// serviceWrites counts the writes to Services (and their status).
func (e *env) serviceWrites() int {
	n := 0
	for _, a := range e.client.Actions() {
		if a.GetResource().Resource != "services" {
			continue
		}
		switch a.GetVerb() {
		case "update", "patch":
			n++
		}
	}
	return n
}

func eventually(t *testing.T, what string, cond func() error) {
	t.Helper()
	waitFor(t, 10*time.Second, what, cond)
}

func waitFor(t testing.TB, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	utilt.Eventually(t, timeout, what, cond)
}

// addressed holds once the Service shows an address and the controller
// has recorded its sync.
func addressed(e *env, t *testing.T, name string) func() error {
	return func() error {
		if ip := ingress(e.get(t, name)); ip == "" {
			return errors.New("no address yet")
		}
		if !e.ctrl.known("default/" + name) {
			return errors.New("sync not recorded yet")
		}
		return nil
	}
}

// TestClassedServiceLifecycle: a Service with one of our classes gets its
// address with the finalizer, the record and the served annotations in two
// writes and one event naming the backend; an edit moves it nowhere; its
// deletion releases the address and removes the finalizer.
func TestClassedServiceLifecycle(t *testing.T) {
	e := start(t, false, service("web", ptrTo(ourClass)))
	eventually(t, "the Service's address", addressed(e, t, "web"))
	s := e.get(t, "web")
	ip := ingress(s)
	if !strings.HasPrefix(ip, "192.0.2.") {
		t.Errorf("address %q is not from the pool", ip)
	}
	if !hasFinalizer(s, Finalizer) || hasFinalizer(s, sharedFinalizer) {
		t.Errorf("finalizers %v; want %s alone (a classed Service)", s.Finalizers, Finalizer)
	}
	if got := s.Annotations[string(annotation.LoadBalancerServedBy)]; got != "metal" {
		t.Errorf("served-by = %q, want metal", got)
	}
	if got := s.Annotations[string(annotation.LoadBalancerBackends)]; got != "metal" {
		t.Errorf("record = %q, want metal", got)
	}
	eventually(t, "the EnsuredLoadBalancer event", func() error {
		if ev := hasEvent(e.events(t, "web"), reasonEnsured); !strings.Contains(ev, `backend "metal"`) {
			return fmt.Errorf("events %v", e.events(t, "web"))
		}
		return nil
	})
	time.Sleep(200 * time.Millisecond) // let any echo of the controller's own writes arrive
	if n := e.serviceWrites(); n != 2 {
		t.Errorf("%d writes to the Service, want 2 (finalizer with record, status with served annotations): %v", n, e.client.Actions())
	}
	if evs := e.events(t, "web"); len(evs) != 1 {
		t.Errorf("events %v, want only EnsuredLoadBalancer", evs)
	}

	// Edited: same address.
	s.Spec.Ports = append(s.Spec.Ports, utilt.Port(corev1.ProtocolTCP, 443, 30443))
	if _, err := e.client.CoreV1().Services("default").Update(context.Background(), s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the edit ensured", func() error {
		if n := e.cloud.ensures.Load(); n < 2 {
			return fmt.Errorf("%d ensures", n)
		}
		return nil
	})
	if got := ingress(e.get(t, "web")); got != ip {
		t.Errorf("after an edit the address is %q, want %q", got, ip)
	}

	// Deleted: finalizer removed, Service gone, address free again.
	if err := e.client.CoreV1().Services("default").Delete(context.Background(), "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the Service gone", func() error {
		_, err := e.client.CoreV1().Services("default").Get(context.Background(), "web", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there (%w)", err)
	})
	eventually(t, "the DeletedLoadBalancer event", func() error {
		if hasEvent(e.events(t, "web"), reasonDeleted) == "" {
			return fmt.Errorf("events %v", e.events(t, "web"))
		}
		return nil
	})
	if _, exists, err := e.cloud.GetLoadBalancer(context.Background(), cluster, s); err != nil || exists {
		t.Errorf("the load balancer is left: exists=%v err=%v", exists, err)
	}
}

// TestForeignAndClasslessServices: a Service with a class we do not list is
// never touched, and one without a class is left to upstream's service
// controller unless the controller serves classless Services.
func TestForeignAndClasslessServices(t *testing.T) {
	e := start(t, false, service("foreign", ptrTo(foreignClass)), service("plain", nil), service("ours", ptrTo(ourClass)))
	eventually(t, "our Service's address", addressed(e, t, "ours"))
	time.Sleep(300 * time.Millisecond)
	for _, name := range []string{"foreign", "plain"} {
		s := e.get(t, name)
		if len(s.Finalizers) > 0 || ingress(s) != "" || len(s.Annotations) > 0 {
			t.Errorf("%s was touched: finalizers %v, address %q, annotations %v", name, s.Finalizers, ingress(s), s.Annotations)
		}
		if evs := e.events(t, name); len(evs) > 0 {
			t.Errorf("%s has events %v", name, evs)
		}
	}

	e2 := start(t, true, service("foreign", ptrTo(foreignClass)), service("plain", nil))
	eventually(t, "the classless Service's address", addressed(e2, t, "plain"))
	if s := e2.get(t, "foreign"); len(s.Finalizers) > 0 || ingress(s) != "" {
		t.Errorf("foreign was touched in classless mode: %v %q", s.Finalizers, ingress(s))
	}
}

// TestNodeChangesRetarget: a node joining or leaving the load balancers'
// targets updates each served Service's load balancer once; a node change
// that does not matter updates nothing.
func TestNodeChangesRetarget(t *testing.T) {
	e := start(t, false, service("web", ptrTo(ourClass)))
	eventually(t, "the Service's address", addressed(e, t, "web"))
	n := utilt.NewNode("worker-1", utilt.WithProviderID("baremetal://worker-1"), utilt.WithInternalIP("10.0.0.11"))
	if _, err := e.client.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "an UpdateLoadBalancer for the new node", func() error {
		if u := e.cloud.updates.Load(); u != 1 {
			return fmt.Errorf("%d updates", u)
		}
		return nil
	})
	n.Labels["unrelated"] = "x"
	if _, err := e.client.CoreV1().Nodes().Update(context.Background(), n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	n.Labels[corev1.LabelNodeExcludeBalancers] = "true"
	if _, err := e.client.CoreV1().Nodes().Update(context.Background(), n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "an UpdateLoadBalancer for the excluded node", func() error {
		if u := e.cloud.updates.Load(); u != 2 {
			return fmt.Errorf("%d updates", u)
		}
		return nil
	})
	time.Sleep(200 * time.Millisecond)
	if u := e.cloud.updates.Load(); u != 2 {
		t.Errorf("%d updates, want 2", u)
	}
}

// TestFailedNodeUpdateRetriesInFull: a node update that fails (an
// OpenStack pool in ERROR, whose members the update cannot change) is
// retried as a full sync, an EnsureLoadBalancer that can replace what
// failed, as upstream's controller puts a failed node sync back on its
// Service queue; not as the same update until the repair pass (review of
// the members-only update, session 54).
func TestFailedNodeUpdateRetriesInFull(t *testing.T) {
	e := start(t, false, service("web", ptrTo(ourClass)))
	eventually(t, "the Service's address", addressed(e, t, "web"))
	e.cloud.mu.Lock()
	e.cloud.failUpdate = errors.New("pool p1 of listener TCP:80 is in ERROR: its members cannot change")
	e.cloud.mu.Unlock()
	ensures := e.cloud.ensures.Load()
	n := utilt.NewNode("worker-1", utilt.WithProviderID("baremetal://worker-1"), utilt.WithInternalIP("10.0.0.11"))
	if _, err := e.client.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "an EnsureLoadBalancer after the failed update", func() error {
		if u := e.cloud.updates.Load(); u < 1 {
			return fmt.Errorf("%d updates", u)
		}
		if got := e.cloud.ensures.Load() - ensures; got < 1 {
			return fmt.Errorf("%d ensures since the node joined, %d updates", got, e.cloud.updates.Load())
		}
		return nil
	})
	if ev := hasEvent(e.events(t, "web"), "UpdateLoadBalancerFailed"); !strings.Contains(ev, "in ERROR") {
		t.Errorf("no Warning for the failed update: %v", e.events(t, "web"))
	}
}

// TestFailuresRetryWithAWarning: a failing ensure is a Warning event and is
// retried with backoff until it succeeds.
func TestFailuresRetryWithAWarning(t *testing.T) {
	e := start(t, false)
	e.cloud.set(errors.New("the cloud is down"))
	e.create(t, service("web", ptrTo(ourClass)))
	eventually(t, "the warning", func() error {
		if ev := hasEvent(e.events(t, "web"), reasonSyncFailed); !strings.Contains(ev, "the cloud is down") {
			return fmt.Errorf("events %v", e.events(t, "web"))
		}
		return nil
	})
	e.cloud.set(nil)
	eventually(t, "the address after the retry", addressed(e, t, "web"))
}

// TestRepairPass: with nothing changed a pass writes nothing; an address
// edited away, or a change a backend reports, is repaired with a
// LoadBalancerDriftRepaired event and counted.
func TestRepairPass(t *testing.T) {
	e := start(t, false, service("web", ptrTo(ourClass)))
	eventually(t, "the Service's address", addressed(e, t, "web"))
	ip := ingress(e.get(t, "web"))
	time.Sleep(200 * time.Millisecond)
	before := len(e.events(t, "web"))
	e.client.ClearActions()
	ensures := e.cloud.ensures.Load()

	e.ctrl.startRepairPass(e.ctx)
	eventually(t, "the pass", func() error {
		if e.cloud.ensures.Load() == ensures {
			return errors.New("no ensure yet")
		}
		return nil
	})
	time.Sleep(200 * time.Millisecond)
	if n := e.serviceWrites(); n != 0 {
		t.Errorf("a pass with nothing changed wrote %d times: %v", n, e.client.Actions())
	}
	if evs := e.events(t, "web"); len(evs) != before {
		t.Errorf("a pass with nothing changed added events: %v", evs[before:])
	}

	// The address edited away.
	e.clearStatus(t, "web")
	repairsBefore, _ := testutil.GetCounterMetricValue(driftRepairs.WithLabelValues("metal"))
	e.ctrl.startRepairPass(e.ctx)
	eventually(t, "the address restored", func() error {
		if got := ingress(e.get(t, "web")); got != ip {
			return fmt.Errorf("address %q, want %q", got, ip)
		}
		return nil
	})
	eventually(t, "the drift event", func() error {
		if ev := hasEvent(e.events(t, "web"), reasonDriftRepaired); !strings.Contains(ev, "status address restored") {
			return fmt.Errorf("events %v", e.events(t, "web"))
		}
		return nil
	})

	// A change the backend reports.
	e.cloud.set(nil, "listener TCP:80 re-created")
	e.ctrl.startRepairPass(e.ctx)
	eventually(t, "the reported repair", func() error {
		for _, ev := range e.events(t, "web") {
			if strings.HasPrefix(ev, reasonDriftRepaired) && strings.Contains(ev, "listener TCP:80 re-created") && strings.Contains(ev, `backend "metal"`) {
				return nil
			}
		}
		return fmt.Errorf("events %v", e.events(t, "web"))
	})
	after, _ := testutil.GetCounterMetricValue(driftRepairs.WithLabelValues("metal"))
	if after-repairsBefore != 2 {
		t.Errorf("drift repairs counted %v, want 2", after-repairsBefore)
	}
}

// clearStatus edits the Service's load-balancer status away, as a user
// would, and waits for the controller's cache to see it.
func (e *env) clearStatus(t *testing.T, name string) {
	t.Helper()
	s := e.get(t, name)
	s.Status.LoadBalancer = corev1.LoadBalancerStatus{}
	if _, err := e.client.CoreV1().Services("default").UpdateStatus(context.Background(), s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the controller's cache without the address", func() error {
		if cur, err := e.ctrl.services.Services("default").Get(name); err != nil || ingress(cur) != "" {
			return fmt.Errorf("cached: %v %w", cur, err)
		}
		return nil
	})
}

// TestClassDefaults: a class's default annotations apply to its Services
// that do not set them (here the bare-metal pool), and a Service's own
// annotation wins.
func TestClassDefaults(t *testing.T) {
	own := service("own", ptrTo(secondClass))
	own.Annotations = map[string]string{"multicloud-ccm.io/address-pool": "lan"}
	e := start(t, false, service("second", ptrTo(secondClass)), own)
	eventually(t, "the addresses", func() error {
		if err := addressed(e, t, "second")(); err != nil {
			return err
		}
		return addressed(e, t, "own")()
	})
	if ip := ingress(e.get(t, "second")); !strings.HasPrefix(ip, "198.51.100.") {
		t.Errorf("the class's Service got %s, want an address of the class's pool 198.51.100.0/28", ip)
	}
	if ip := ingress(e.get(t, "own")); !strings.HasPrefix(ip, "192.0.2.") {
		t.Errorf("the Service naming its own pool got %s, want one of 192.0.2.0/28", ip)
	}
	if _, set := e.get(t, "second").Annotations["multicloud-ccm.io/address-pool"]; set {
		t.Error("the class default was written on the Service")
	}
}

// TestFinalizerRemovedByHand: a Service whose cleanup finalizer someone
// removed before deleting it still has its load balancer deleted, from the
// last copy the controller served (as upstream does).
func TestFinalizerRemovedByHand(t *testing.T) {
	e := start(t, false, service("web", ptrTo(ourClass)))
	eventually(t, "the Service's address", addressed(e, t, "web"))
	s := e.get(t, "web")
	s.Finalizers = nil
	if _, err := e.client.CoreV1().Services("default").Update(context.Background(), s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := e.client.CoreV1().Services("default").Delete(context.Background(), "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the load balancer deleted", func() error {
		if _, exists, err := e.cloud.GetLoadBalancer(context.Background(), cluster, s); err != nil || exists {
			return fmt.Errorf("exists=%v err=%w", exists, err)
		}
		return nil
	})
}

// TestRepairInSteps: a backend that repairs in steps (Octavia: a change,
// then a RetryError while the load balancer is busy) has its repair
// reported once the sync that completes it succeeds.
func TestRepairInSteps(t *testing.T) {
	e := start(t, false, service("web", ptrTo(ourClass)))
	eventually(t, "the Service's address", addressed(e, t, "web"))
	e.repairInSteps(t, "")
}

// repairInSteps has the next ensure of web report a change attributed to
// backend (none when ""), then fail with a RetryError, as Octavia's; it
// starts a repair pass and waits for the repair's event once the retry
// succeeds.
func (e *env) repairInSteps(t *testing.T, backend string) {
	t.Helper()
	e.cloud.mu.Lock()
	e.cloud.failEnsure, e.cloud.failOnce = api.NewRetryError("load balancer busy", 20*time.Millisecond), true
	e.cloud.report, e.cloud.reportAs = []string{"member 10.0.0.10:30080 added"}, backend
	e.cloud.mu.Unlock()
	e.ctrl.startRepairPass(e.ctx)
	eventually(t, "the repair reported", func() error {
		for _, ev := range e.events(t, "web") {
			if strings.HasPrefix(ev, reasonDriftRepaired) && strings.Contains(ev, "member 10.0.0.10:30080 added") {
				return nil
			}
		}
		return fmt.Errorf("events %v", e.events(t, "web"))
	})
}

// TestRepairCountedPerBackend: a repair of a Service served by two
// backends is counted in the backend whose calls reported the change, also
// when the repair took two syncs, and a restored status address in each
// backend serving it; never under the two names joined ("metal,metal2"),
// which no per-backend alert or dashboard sums.
func TestRepairCountedPerBackend(t *testing.T) {
	doc := cloudConfig + `- name: metal2
  type: baremetal
  baremetal:
    inventory: [{name: worker-0, addresses: [{type: InternalIP, address: 10.0.0.10}]}]
    addressPools:
    - {name: lan2, addresses: ["203.0.113.0/28"]}
`
	svc := service("web", nil)
	svc.Annotations = map[string]string{string(annotation.LoadBalancerBackend): "metal,metal2"}
	e := startWith(t, doc, true, svc)
	eventually(t, "both addresses", func() error {
		if s := e.get(t, "web"); len(s.Status.LoadBalancer.Ingress) != 2 || !e.ctrl.known("default/web") {
			return fmt.Errorf("status %v", s.Status.LoadBalancer)
		}
		return nil
	})
	count := func() map[string]float64 {
		out := map[string]float64{}
		for _, b := range []string{"metal", "metal2", "metal,metal2"} {
			out[b], _ = testutil.GetCounterMetricValue(driftRepairs.WithLabelValues(b))
		}
		return out
	}
	counted := func(before map[string]float64, want map[string]float64) {
		t.Helper()
		after := count()
		for b, n := range want {
			if got := after[b] - before[b]; got != n {
				t.Errorf("repairs counted in %q: %v, want %v", b, got, n)
			}
		}
	}

	// The status address edited away: both backends serve what it lost.
	before := count()
	e.clearStatus(t, "web")
	e.ctrl.startRepairPass(e.ctx)
	eventually(t, "the status restored", func() error {
		if n := len(e.get(t, "web").Status.LoadBalancer.Ingress); n != 2 {
			return fmt.Errorf("%d addresses", n)
		}
		return nil
	})
	eventually(t, "the repair counted", func() error {
		if after := count(); after["metal"] == before["metal"] {
			return errors.New("not counted yet")
		}
		return nil
	})
	counted(before, map[string]float64{"metal": 1, "metal2": 1, "metal,metal2": 0})

	// A change metal2's call reports, in two syncs (the first one fails
	// after changing something, as Octavia's RetryError).
	before = count()
	e.repairInSteps(t, "metal2")
	counted(before, map[string]float64{"metal": 0, "metal2": 1, "metal,metal2": 0})
}

// TestClassLeftTheConfig: a Service of a class the config no longer lists
// keeps its load balancer (a config change deletes nothing), and its
// deletion is still cleaned up: the finalizer comes off.
func TestClassLeftTheConfig(t *testing.T) {
	old := service("old", ptrTo("multicloud-ccm.io/retired"))
	old.Finalizers = []string{servicehelper.LoadBalancerCleanupFinalizer}
	old.Annotations = map[string]string{string(annotation.LoadBalancerBackends): "metal"}
	e := start(t, false, old)
	time.Sleep(200 * time.Millisecond)
	if evs := e.events(t, "old"); len(evs) > 0 {
		t.Errorf("events %v for a Service nobody changed", evs)
	}
	if err := e.client.CoreV1().Services("default").Delete(context.Background(), "old", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the Service gone (finalizer removed)", func() error {
		_, err := e.client.CoreV1().Services("default").Get(context.Background(), "old", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there (%w)", err)
	})
}
