package lbcontroller

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clienttesting "k8s.io/client-go/testing"
	cloudprovider "k8s.io/cloud-provider"
	fakecloud "k8s.io/cloud-provider/fake"

	utilt "github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/config"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/router"
)

// Where a Service's drain meets the other features under the default
// controller (restarts, deletes, type changes, failing backends, shared
// addresses, classes, reloads, user edits, upstream's service controller
// next to ours), each on an API server that keeps resourceVersions.

// objects lists the Services as the API server has them, to start
// another process (a restart) over them.
func (e *env) objects(t *testing.T) []runtime.Object {
	t.Helper()
	list, err := e.client.CoreV1().Services("default").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	objs := make([]runtime.Object, 0, len(list.Items))
	for i := range list.Items {
		objs = append(objs, &list.Items[i])
	}
	return objs
}

// TestNewServiceTwoWrites (issue 40, done when): a new classless Service
// through the default controller, on an API server that keeps
// resourceVersions, costs two writes: its metadata (finalizer and record)
// once, then its status with the served annotations once.
func TestNewServiceTwoWrites(t *testing.T) {
	e := startEnv(t, envOptions{doc: metals(""), classless: true, versioned: true})
	webOn(t, e, "metal", "0")
	time.Sleep(300 * time.Millisecond) // let any echo of the controller's own writes arrive
	var writes []string
	for _, a := range e.client.Actions() {
		if p, ok := a.(clienttesting.PatchAction); ok && a.GetResource().Resource == "services" {
			writes = append(writes, string(p.GetPatch()))
		} else if a.GetResource().Resource == "services" && a.GetVerb() == "update" {
			writes = append(writes, fmt.Sprintf("%v", a))
		}
	}
	if len(writes) != 2 || strings.Contains(writes[0], `"status"`) || !strings.Contains(writes[0], "finalizers") || !strings.Contains(writes[1], `"status"`) {
		t.Errorf("%d writes, want the metadata then the status:\n%s", len(writes), strings.Join(writes, "\n"))
	}
}

// TestDrainEndsAfterRestart: a drain in progress when the CCM restarts (a
// new process over the same Services) ends in the new one, through its
// controller: the record names metal2 alone, one address is left.
func TestDrainEndsAfterRestart(t *testing.T) {
	first := startEnv(t, envOptions{doc: metals(""), classless: true, versioned: true})
	webOn(t, first, "metal", "3s")
	first.moveTo(t, "web", "metal2")
	eventually(t, "metal draining", func() error {
		if s := first.get(t, "web"); !strings.HasPrefix(drainingOf(s), "metal=") || len(s.Status.LoadBalancer.Ingress) != 2 {
			return fmt.Errorf("%s", state(s))
		}
		return nil
	})
	time.Sleep(200 * time.Millisecond) // the syncs in flight settle: no condition to wait for
	e := startEnv(t, envOptions{doc: metals(""), classless: true, versioned: true}, first.objects(t)...)
	waitFor(t, 20*time.Second, "the drain over after the restart", func() error {
		s := e.get(t, "web")
		if drainingOf(s) != "" || s.Annotations[string(annotation.LoadBalancerBackends)] != "metal2" || len(s.Status.LoadBalancer.Ingress) != 1 ||
			hasEvent(e.events(t, "web"), "LoadBalancerDrained") == "" {
			return fmt.Errorf("%s; events %v", state(s), e.events(t, "web"))
		}
		return nil
	})
}

// TestDeleteDuringDrainUnderDefaultController: a Service deleted while
// metal drains is gone (finalizer removed) and both addresses are free
// again: Services requesting them get them.
func TestDeleteDuringDrainUnderDefaultController(t *testing.T) {
	e := startEnv(t, envOptions{doc: metals(""), classless: true, versioned: true})
	ipA := webOn(t, e, "metal", "1h")
	e.moveTo(t, "web", "metal2")
	var ipB string
	eventually(t, "metal draining", func() error {
		s := e.get(t, "web")
		if !strings.HasPrefix(drainingOf(s), "metal=") || len(s.Status.LoadBalancer.Ingress) != 2 {
			return fmt.Errorf("%s", state(s))
		}
		ipB = ingress(s)
		return nil
	})
	if err := e.client.CoreV1().Services("default").Delete(context.Background(), "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "gone", func() error {
		_, err := e.client.CoreV1().Services("default").Get(context.Background(), "web", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there %w; events %v", err, e.events(t, "web"))
	})
	for _, p := range []struct{ name, backend, ip string }{{"pa", "metal", ipA}, {"pb", "metal2", ipB}} {
		s := service(p.name, nil)
		s.Annotations = map[string]string{string(annotation.LoadBalancerBackend): p.backend, string(annotation.LoadBalancerIPs): p.ip}
		e.create(t, s)
		eventually(t, p.name+" addressed", func() error {
			if got := ingress(e.get(t, p.name)); got != p.ip {
				return fmt.Errorf("%s got %q, want %s; events %v", p.name, got, p.ip, e.events(t, p.name))
			}
			return nil
		})
	}
}

// TestUserEditDuringMoveSync: a user edit landing while the move's sync is in flight: nothing lost.
func TestUserEditDuringMoveSync(t *testing.T) {
	e := startEnv(t, envOptions{doc: metals(""), classless: true, versioned: true})
	webOn(t, e, "metal", "1m")
	e.cloud.mu.Lock()
	e.cloud.during = func(*corev1.Service) {
		v := "mine"
		e.edit(t, "web", map[string]*string{"example.com/user": &v})
	}
	e.cloud.mu.Unlock()
	e.moveTo(t, "web", "metal2")
	eventually(t, "moved, draining, user edit kept", func() error {
		s := e.get(t, "web")
		if !strings.HasPrefix(drainingOf(s), "metal=") || len(s.Status.LoadBalancer.Ingress) != 2 || s.Annotations["example.com/user"] != "mine" ||
			s.Annotations[string(annotation.LoadBalancerServedBy)] != "metal2" || !strings.HasPrefix(s.Annotations["external-dns.kubernetes.io/target"], "198.51.100.") {
			return fmt.Errorf("%s, served-by %q, user %q", state(s), s.Annotations[string(annotation.LoadBalancerServedBy)], s.Annotations["example.com/user"])
		}
		return nil
	})
	time.Sleep(300 * time.Millisecond) // a state that must last: no condition to wait for
	s := e.get(t, "web")
	if !strings.HasPrefix(drainingOf(s), "metal=") || s.Annotations["example.com/user"] != "mine" || s.Annotations[string(annotation.LoadBalancerServedBy)] != "metal2" {
		t.Errorf("later: %s", state(s))
	}
}

// TestOneOfTwoBackendsFailingKeepsTheOther: two backends, one failing after a reload: the other's address stays.
func TestOneOfTwoBackendsFailingKeepsTheOther(t *testing.T) {
	e := startEnv(t, envOptions{doc: metals(""), classless: true, versioned: true, reloadable: true})
	hog := service("hog", nil)
	hog.Annotations = map[string]string{string(annotation.LoadBalancerBackend): "metal2"}
	e.create(t, hog)
	eventually(t, "hog addressed", addressed(e, t, "hog"))
	hogIP := ingress(e.get(t, "hog"))
	both := service("both", nil)
	both.Annotations = map[string]string{string(annotation.LoadBalancerBackend): "metal,metal2"}
	e.create(t, both)
	var ipA string
	eventually(t, "both has both addresses", func() error {
		s := e.get(t, "both")
		if len(s.Status.LoadBalancer.Ingress) != 2 {
			return fmt.Errorf("%s", state(s))
		}
		ipA = s.Status.LoadBalancer.Ingress[0].IP
		return nil
	})
	e.reload(t, strings.Replace(metals(""), "198.51.100.0/28", hogIP+"/32", 1))
	eventually(t, "a warning on both", func() error {
		if ev := hasEvent(e.events(t, "both"), "SyncLoadBalancerFailed"); ev == "" {
			return fmt.Errorf("events %v; %s", e.events(t, "both"), state(e.get(t, "both")))
		}
		return nil
	})
	time.Sleep(300 * time.Millisecond) // a state that must last: no condition to wait for
	s := e.get(t, "both")
	if !strings.Contains(ingresses(s), ipA) {
		t.Errorf("metal's address %s lost from the status: %s", ipA, state(s))
	}
}

// TestDrainEndWhileEnsureFails: the drain's end comes while the whole ensure fails for a while (a
// backend down): the drain still ends once it recovers.
func TestDrainEndWhileEnsureFails(t *testing.T) {
	e := startEnv(t, envOptions{doc: metals(""), classless: true, versioned: true})
	webOn(t, e, "metal", "2s")
	e.moveTo(t, "web", "metal2")
	eventually(t, "metal draining", func() error {
		if s := e.get(t, "web"); !strings.HasPrefix(drainingOf(s), "metal=") || len(s.Status.LoadBalancer.Ingress) != 2 {
			return fmt.Errorf("%s", state(s))
		}
		return nil
	})
	time.Sleep(200 * time.Millisecond) // the syncs in flight settle: no condition to wait for
	e.cloud.set(fmt.Errorf("metal2 is down"))
	n := e.cloud.ensures.Load()
	waitFor(t, 20*time.Second, "failed syncs after the drain's end", func() error {
		if e.cloud.ensures.Load() < n+3 {
			return fmt.Errorf("%d", e.cloud.ensures.Load()-n)
		}
		return nil
	})
	e.cloud.set(nil)
	waitFor(t, 20*time.Second, "the drain over", func() error {
		s := e.get(t, "web")
		if drainingOf(s) != "" || len(s.Status.LoadBalancer.Ingress) != 1 {
			return fmt.Errorf("%s", state(s))
		}
		return nil
	})
}

// TestSharedAddressDrain: two Services share metal's address; one moves to metal2 with a drain:
// at the drain's end the other keeps the address, and it stays taken.
func TestSharedAddressDrain(t *testing.T) {
	e := startEnv(t, envOptions{doc: metals(""), classless: true, versioned: true})
	a := service("a", nil)
	a.Annotations = map[string]string{string(annotation.LoadBalancerBackend): "metal", string(annotation.LoadBalancerDrain): "2s",
		string(annotation.AllowSharedIP): "k", string(annotation.LoadBalancerIPs): "192.0.2.5"}
	e.create(t, a)
	eventually(t, "a addressed", addressed(e, t, "a"))
	b := service("b", nil)
	b.Spec.Ports[0].Port = 8080
	b.Annotations = map[string]string{string(annotation.LoadBalancerBackend): "metal",
		string(annotation.AllowSharedIP): "k", string(annotation.LoadBalancerIPs): "192.0.2.5"}
	e.create(t, b)
	eventually(t, "b addressed", addressed(e, t, "b"))
	if ingress(e.get(t, "b")) != "192.0.2.5" || ingress(e.get(t, "a")) != "192.0.2.5" {
		t.Fatalf("not shared: a %s b %s", state(e.get(t, "a")), state(e.get(t, "b")))
	}
	m2 := "metal2"
	e.edit(t, "a", map[string]*string{string(annotation.LoadBalancerBackend): &m2, string(annotation.LoadBalancerIPs): nil})
	eventually(t, "a's drain over", func() error {
		s := e.get(t, "a")
		if drainingOf(s) != "" || len(s.Status.LoadBalancer.Ingress) != 1 || !strings.HasPrefix(ingress(s), "198.51.100.") {
			return fmt.Errorf("%s; events %v", state(s), e.events(t, "a"))
		}
		return nil
	})
	time.Sleep(300 * time.Millisecond) // a state that must last: no condition to wait for
	if got := ingresses(e.get(t, "b")); got != "192.0.2.5" {
		t.Errorf("b's status %q after a's drain ended, want 192.0.2.5", got)
	}
	c := service("c", nil)
	c.Annotations = map[string]string{string(annotation.LoadBalancerBackend): "metal", string(annotation.LoadBalancerIPs): "192.0.2.5"}
	e.create(t, c)
	eventually(t, "c refused the address in use", func() error {
		if hasEvent(e.events(t, "c"), "LoadBalancerIPInUse") == "" {
			return fmt.Errorf("events %v", e.events(t, "c"))
		}
		return nil
	})
	if got := ingress(e.get(t, "c")); got == "192.0.2.5" {
		t.Errorf("b's shared address handed to c after a's drain ended")
	}
}

// TestReloadDrainPeriodDuringDrain: drainPeriod from the config; a reload setting it to 0 during a drain.
func TestReloadDrainPeriodDuringDrain(t *testing.T) {
	doc := strings.Replace(metals(""), "drainPeriod: 0s", "drainPeriod: 1m", 1)
	e := startEnv(t, envOptions{doc: doc, classless: true, versioned: true, reloadable: true})
	s := service("web", nil)
	s.Annotations = map[string]string{string(annotation.LoadBalancerBackend): "metal"}
	e.create(t, s)
	eventually(t, "web addressed", addressed(e, t, "web"))
	e.moveTo(t, "web", "metal2")
	var drain string
	eventually(t, "metal draining", func() error {
		s := e.get(t, "web")
		if !strings.HasPrefix(drainingOf(s), "metal=") || len(s.Status.LoadBalancer.Ingress) != 2 {
			return fmt.Errorf("%s", state(s))
		}
		drain = drainingOf(s)
		return nil
	})
	e.reload(t, metals(""))
	e.touch(t, "web", "1")
	time.Sleep(300 * time.Millisecond) // a state that must last: no condition to wait for
	if s := e.get(t, "web"); drainingOf(s) != drain || len(s.Status.LoadBalancer.Ingress) != 2 {
		t.Errorf("after a reload to drainPeriod 0: %s (was %q); events %v", state(s), drain, e.events(t, "web"))
	}
}

// TestUserEditDuringDrainEnd: a user edit while the drain's end is synced.
func TestUserEditDuringDrainEnd(t *testing.T) {
	e := startEnv(t, envOptions{doc: metals(""), classless: true, versioned: true})
	webOn(t, e, "metal", "2s")
	e.moveTo(t, "web", "metal2")
	eventually(t, "metal draining", func() error {
		if s := e.get(t, "web"); !strings.HasPrefix(drainingOf(s), "metal=") || len(s.Status.LoadBalancer.Ingress) != 2 {
			return fmt.Errorf("%s", state(s))
		}
		return nil
	})
	time.Sleep(300 * time.Millisecond) // a state that must last: no condition to wait for
	e.cloud.mu.Lock()
	e.cloud.during = func(*corev1.Service) {
		v := "mine"
		e.edit(t, "web", map[string]*string{"example.com/user": &v})
	}
	e.cloud.mu.Unlock()
	eventually(t, "the drain over", func() error {
		s := e.get(t, "web")
		if drainingOf(s) != "" || s.Annotations[string(annotation.LoadBalancerBackends)] != "metal2" || len(s.Status.LoadBalancer.Ingress) != 1 ||
			s.Annotations["example.com/user"] != "mine" || s.Annotations[string(annotation.LoadBalancerServedBy)] != "metal2" {
			return fmt.Errorf("%s user %q", state(s), s.Annotations["example.com/user"])
		}
		return nil
	})
}

// TestDrainDueWhileDown: the drain's end passed while the CCM was down.
func TestDrainDueWhileDown(t *testing.T) {
	first := startEnv(t, envOptions{doc: metals(""), classless: true, versioned: true})
	ipA := webOn(t, first, "metal", "1s")
	first.moveTo(t, "web", "metal2")
	var end time.Time
	eventually(t, "metal draining", func() error {
		s := first.get(t, "web")
		if !strings.HasPrefix(drainingOf(s), "metal=") || len(s.Status.LoadBalancer.Ingress) != 2 {
			return fmt.Errorf("%s", state(s))
		}
		var err error
		end, err = time.Parse(time.RFC3339, strings.TrimPrefix(drainingOf(s), "metal="))
		return err
	})
	objs := first.objects(t)
	waitFor(t, 20*time.Second, "the drain's end passed while down", func() error {
		if time.Now().Before(end.Add(time.Second)) {
			return fmt.Errorf("not before %s", end)
		}
		return nil
	})
	e := startEnv(t, envOptions{doc: metals(""), classless: true, versioned: true}, objs...)
	waitFor(t, 20*time.Second, "the drain over after the restart", func() error {
		s := e.get(t, "web")
		if drainingOf(s) != "" || s.Annotations[string(annotation.LoadBalancerBackends)] != "metal2" || len(s.Status.LoadBalancer.Ingress) != 1 {
			return fmt.Errorf("%s; events %v", state(s), e.events(t, "web"))
		}
		return nil
	})
	p := service("probe", nil)
	p.Annotations = map[string]string{string(annotation.LoadBalancerBackend): "metal", string(annotation.LoadBalancerIPs): ipA}
	e.create(t, p)
	eventually(t, "probe gets the drained address", func() error {
		if got := ingress(e.get(t, "probe")); got != ipA {
			return fmt.Errorf("probe %q; events %v", got, e.events(t, "probe"))
		}
		return nil
	})
}

// TestTypeChangeDuringDrain: type changed to ClusterIP mid-drain: both load balancers go, the
// status and finalizer too.
func TestTypeChangeDuringDrain(t *testing.T) {
	e := startEnv(t, envOptions{doc: metals(""), classless: true, versioned: true})
	ipA := webOn(t, e, "metal", "1h")
	e.moveTo(t, "web", "metal2")
	var ipB string
	eventually(t, "metal draining", func() error {
		s := e.get(t, "web")
		if !strings.HasPrefix(drainingOf(s), "metal=") || len(s.Status.LoadBalancer.Ingress) != 2 {
			return fmt.Errorf("%s", state(s))
		}
		ipB = ingress(s)
		return nil
	})
	s := e.get(t, "web")
	s.Spec.Type = corev1.ServiceTypeClusterIP
	for i := range s.Spec.Ports {
		s.Spec.Ports[i].NodePort = 0
	}
	if _, err := e.client.CoreV1().Services("default").Update(context.Background(), s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "cleaned up", func() error {
		s := e.get(t, "web")
		if len(s.Finalizers) > 0 || len(s.Status.LoadBalancer.Ingress) > 0 {
			return fmt.Errorf("%s finalizers %v", state(s), s.Finalizers)
		}
		return nil
	})
	time.Sleep(300 * time.Millisecond) // a state that must last: no condition to wait for
	for _, p := range []struct{ name, backend, ip string }{{"pa", "metal", ipA}, {"pb", "metal2", ipB}} {
		s := service(p.name, nil)
		s.Annotations = map[string]string{string(annotation.LoadBalancerBackend): p.backend, string(annotation.LoadBalancerIPs): p.ip}
		e.create(t, s)
		eventually(t, p.name+" addressed", func() error {
			if got := ingress(e.get(t, p.name)); got != p.ip {
				return fmt.Errorf("%s got %q, want %s; events %v", p.name, got, p.ip, e.events(t, p.name))
			}
			return nil
		})
	}
}

// TestReloadClassMoveDrains: a reload moving a class to another backend, with a drain from the config.
func TestReloadClassMoveDrains(t *testing.T) {
	cls := func(b string) string {
		return strings.Replace(metals("  classes:\n  - {name: "+ourClass+", backend: "+b+"}\n"), "drainPeriod: 0s", "drainPeriod: 2s", 1)
	}
	e := startEnv(t, envOptions{doc: cls("metal"), classless: false, versioned: true, reloadable: true})
	e.create(t, service("web", ptrTo(ourClass)))
	eventually(t, "web addressed", addressed(e, t, "web"))
	ipA := ingress(e.get(t, "web"))
	e.reload(t, cls("metal2"))
	eventually(t, "metal draining", func() error {
		s := e.get(t, "web")
		if !strings.HasPrefix(drainingOf(s), "metal=") || ingresses(s) == ipA || !strings.Contains(ingresses(s), ipA) {
			return fmt.Errorf("%s; events %v", state(s), e.events(t, "web"))
		}
		return nil
	})
	waitFor(t, 20*time.Second, "the drain over", func() error {
		s := e.get(t, "web")
		if drainingOf(s) != "" || len(s.Status.LoadBalancer.Ingress) != 1 || !strings.HasPrefix(ingress(s), "198.51.100.") ||
			s.Annotations[string(annotation.LoadBalancerBackends)] != "metal2" {
			return fmt.Errorf("%s; events %v", state(s), e.events(t, "web"))
		}
		return nil
	})
}

// TestDrainUnderBothServiceControllers: upstream's service controller
// serves classless Services, ours classed ones (--controllers=*,service,
// Classless off): the drain of a classless Service, which our controller
// does not serve, is ended by the router's timer itself.
func TestDrainUnderBothServiceControllers(t *testing.T) {
	doc := metals("  classes:\n  - {name: " + ourClass + ", backend: metal}\n")
	e := startEnv(t, envOptions{doc: doc, classless: false, versioned: true})
	utilt.RunServiceController(t, e.cloud.routerCloud.(cloudprovider.Interface), e.client, e.factory, cluster, 2)
	up := service("up", nil)
	up.Annotations = map[string]string{string(annotation.LoadBalancerBackend): "metal", string(annotation.LoadBalancerDrain): "2s"}
	e.create(t, up)
	for _, n := range []string{"up"} {
		eventually(t, n+" addressed", func() error {
			if ingress(e.get(t, n)) == "" {
				return fmt.Errorf("%s", state(e.get(t, n)))
			}
			return nil
		})
		e.moveTo(t, n, "metal2")
	}
	for _, n := range []string{"up"} {
		waitFor(t, 20*time.Second, n+"'s drain over", func() error {
			s := e.get(t, n)
			if drainingOf(s) != "" || len(s.Status.LoadBalancer.Ingress) != 1 || !strings.HasPrefix(ingress(s), "198.51.100.") ||
				s.Annotations[string(annotation.LoadBalancerBackends)] != "metal2" || hasEvent(e.events(t, n), "LoadBalancerDrained") == "" {
				return fmt.Errorf("%s; events %v", state(s), e.events(t, n))
			}
			return nil
		})
	}
}

// flakyLB is a load-balancer cloud whose calls fail while down.
type flakyLB struct {
	*fakecloud.Cloud
	mu   sync.Mutex
	held map[types.UID]bool
	down error
}

func (c *flakyLB) LoadBalancer() (cloudprovider.LoadBalancer, bool) { return c, true }
func (c *flakyLB) GetLoadBalancer(_ context.Context, _ string, s *corev1.Service) (*corev1.LoadBalancerStatus, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.down != nil {
		return nil, false, c.down
	}
	return &corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: "203.0.113.7"}}}, c.held[s.UID], nil
}
func (c *flakyLB) EnsureLoadBalancer(_ context.Context, _ string, s *corev1.Service, _ []*corev1.Node) (*corev1.LoadBalancerStatus, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.down != nil {
		return nil, c.down
	}
	c.held[s.UID] = true
	return &corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: "203.0.113.7"}}}, nil
}
func (c *flakyLB) UpdateLoadBalancer(context.Context, string, *corev1.Service, []*corev1.Node) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.down
}
func (c *flakyLB) EnsureLoadBalancerDeleted(_ context.Context, _ string, s *corev1.Service) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.down != nil {
		return c.down
	}
	delete(c.held, s.UID)
	return nil
}
func (c *flakyLB) holds(uid types.UID) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.held[uid]
}
func (c *flakyLB) setDown(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.down = err
}

func withFlaky(flaky *flakyLB) func(*config.CloudConfig) (routerCloud, error) {
	return beside(router.Backend{Name: "flaky", Type: "aws", Scheme: "aws", Cloud: flaky})
}

// beside builds the router over the config's first backend, bare metal
// named metal, and other, a test's own cloud.
func beside(other router.Backend) func(*config.CloudConfig) (routerCloud, error) {
	return func(cfg *config.CloudConfig) (routerCloud, error) {
		reg, _ := backends.Lookup("baremetal")
		metal, err := reg.New(context.Background(), backends.Options{Name: "metal", ClusterID: "test", Settings: cfg.Backends[0].Settings})
		if err != nil {
			return nil, err
		}
		return router.New(cfg, []router.Backend{{Name: "metal", Type: "baremetal", Scheme: "baremetal", Cloud: metal}, other})
	}
}

// TestDrainEndWhileDrainedBackendDown: the drained backend is down when the drain ends: the drain waits, and
// the load balancer goes once the backend is back.
func TestDrainEndWhileDrainedBackendDown(t *testing.T) {
	flaky := &flakyLB{Cloud: &fakecloud.Cloud{DisableInstances: true, DisableRoutes: true}, held: map[types.UID]bool{}}
	e := startEnv(t, envOptions{doc: metals(""), classless: true, versioned: true, build: withFlaky(flaky)})
	webOn(t, e, "flaky", "2s")
	uid := e.get(t, "web").UID
	e.moveTo(t, "web", "metal")
	eventually(t, "flaky draining", func() error {
		if s := e.get(t, "web"); !strings.HasPrefix(drainingOf(s), "flaky=") {
			return fmt.Errorf("%s; events %v", state(s), e.events(t, "web"))
		}
		return nil
	})
	flaky.setDown(fmt.Errorf("flaky is down"))
	waitFor(t, 20*time.Second, "a Warning at the drain's end", func() error {
		if hasEvent(e.events(t, "web"), "SyncLoadBalancerFailed") == "" {
			return fmt.Errorf("events %v", e.events(t, "web"))
		}
		return nil
	})
	flaky.setDown(nil)
	waitFor(t, 20*time.Second, "the drain over, flaky's load balancer deleted", func() error {
		s := e.get(t, "web")
		if drainingOf(s) != "" || flaky.holds(uid) || s.Annotations[string(annotation.LoadBalancerBackends)] != "metal" || len(s.Status.LoadBalancer.Ingress) != 1 {
			return fmt.Errorf("%s held %v", state(s), flaky.holds(uid))
		}
		return nil
	})
}

// TestFinalizerRemovedMidDrain: the finalizer removed by hand mid-drain, then the Service deleted: both
// load balancers go (the drained one in flaky too).
func TestFinalizerRemovedMidDrain(t *testing.T) {
	flaky := &flakyLB{Cloud: &fakecloud.Cloud{DisableInstances: true, DisableRoutes: true}, held: map[types.UID]bool{}}
	e := startEnv(t, envOptions{doc: metals(""), classless: true, versioned: true, build: withFlaky(flaky)})
	webOn(t, e, "flaky", "1h")
	uid := e.get(t, "web").UID
	e.moveTo(t, "web", "metal")
	var ipA string
	eventually(t, "flaky draining", func() error {
		s := e.get(t, "web")
		if !strings.HasPrefix(drainingOf(s), "flaky=") || !strings.HasPrefix(ingress(s), "192.0.2.") {
			return fmt.Errorf("%s; events %v", state(s), e.events(t, "web"))
		}
		ipA = ingress(s)
		return nil
	})
	time.Sleep(200 * time.Millisecond) // the syncs in flight settle: no condition to wait for
	s := e.get(t, "web")
	s.Finalizers = nil
	if _, err := e.client.CoreV1().Services("default").Update(context.Background(), s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := e.client.CoreV1().Services("default").Delete(context.Background(), "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "flaky's drained load balancer deleted", func() error {
		if flaky.holds(uid) {
			return fmt.Errorf("still held")
		}
		return nil
	})
	p := service("probe", nil)
	p.Annotations = map[string]string{string(annotation.LoadBalancerBackend): "metal", string(annotation.LoadBalancerIPs): ipA}
	e.create(t, p)
	eventually(t, "probe gets metal's address", func() error {
		if got := ingress(e.get(t, "probe")); got != ipA {
			return fmt.Errorf("probe %q; events %v", got, e.events(t, "probe"))
		}
		return nil
	})
}

// TestRestartMidCloudDrain: a restart mid-drain of a cloud load balancer (not announced from the
// status): the new process ends the drain and deletes it.
func TestRestartMidCloudDrain(t *testing.T) {
	flaky := &flakyLB{Cloud: &fakecloud.Cloud{DisableInstances: true, DisableRoutes: true}, held: map[types.UID]bool{}}
	var objs []runtime.Object
	var uid types.UID
	t.Run("first", func(t *testing.T) {
		first := startEnv(t, envOptions{doc: metals(""), classless: true, versioned: true, build: withFlaky(flaky)})
		webOn(t, first, "flaky", "3s")
		uid = first.get(t, "web").UID
		first.moveTo(t, "web", "metal")
		eventually(t, "flaky draining", func() error {
			s := first.get(t, "web")
			if !strings.HasPrefix(drainingOf(s), "flaky=") || !strings.HasPrefix(ingress(s), "192.0.2.") {
				return fmt.Errorf("%s; events %v", state(s), first.events(t, "web"))
			}
			return nil
		})
		time.Sleep(200 * time.Millisecond) // the syncs in flight settle: no condition to wait for
		objs = first.objects(t)
	})
	if !flaky.holds(uid) {
		t.Fatal("flaky's load balancer gone before the restart")
	}
	e := startEnv(t, envOptions{doc: metals(""), classless: true, versioned: true, build: withFlaky(flaky)}, objs...)
	waitFor(t, 20*time.Second, "the drain over after the restart", func() error {
		s := e.get(t, "web")
		if drainingOf(s) != "" || flaky.holds(uid) || s.Annotations[string(annotation.LoadBalancerBackends)] != "metal" {
			return fmt.Errorf("%s held %v; events %v", state(s), flaky.holds(uid), e.events(t, "web"))
		}
		return nil
	})
}

// TestAdoptedMidDrain: a classless Service upstream's service controller
// served, moved with a drain, is adopted by ours (a restart with
// classless Services ours): ours ends the drain and metal's address is
// free again.
func TestAdoptedMidDrain(t *testing.T) {
	var objs []runtime.Object
	var ipA string
	t.Run("upstream", func(t *testing.T) {
		first := startEnv(t, envOptions{doc: metals(""), classless: false, versioned: true})
		utilt.RunServiceController(t, first.cloud.routerCloud.(cloudprovider.Interface), first.client, first.factory, cluster, 2)
		s := service("web", nil)
		s.Annotations = map[string]string{string(annotation.LoadBalancerBackend): "metal", string(annotation.LoadBalancerDrain): "3s"}
		first.create(t, s)
		eventually(t, "addressed", func() error {
			if ipA = ingress(first.get(t, "web")); ipA == "" {
				return fmt.Errorf("none")
			}
			return nil
		})
		first.moveTo(t, "web", "metal2")
		eventually(t, "metal draining", func() error {
			if s := first.get(t, "web"); !strings.HasPrefix(drainingOf(s), "metal=") || len(s.Status.LoadBalancer.Ingress) != 2 {
				return fmt.Errorf("%s", state(s))
			}
			return nil
		})
		time.Sleep(200 * time.Millisecond) // the syncs in flight settle: no condition to wait for
		objs = first.objects(t)
	})
	e := startEnv(t, envOptions{doc: metals(""), classless: true, versioned: true}, objs...)
	waitFor(t, 20*time.Second, "the drain over under ours", func() error {
		s := e.get(t, "web")
		if drainingOf(s) != "" || s.Annotations[string(annotation.LoadBalancerBackends)] != "metal2" || len(s.Status.LoadBalancer.Ingress) != 1 {
			return fmt.Errorf("%s; events %v", state(s), e.events(t, "web"))
		}
		return nil
	})
	p := service("probe", nil)
	p.Annotations = map[string]string{string(annotation.LoadBalancerBackend): "metal", string(annotation.LoadBalancerIPs): ipA}
	e.create(t, p)
	eventually(t, "probe gets the drained address", func() error {
		if got := ingress(e.get(t, "probe")); got != ipA {
			return fmt.Errorf("probe %q; events %v", got, e.events(t, "probe"))
		}
		return nil
	})
}
